/*
 * shm_rsag: allreduce through the shared-memory arena as reduce-scatter + allgather, for
 * large vectors.
 *
 * Each window is cut into n pieces. Phase 0: every rank copies the pieces the others will
 * reduce into its buffer (it keeps its own piece in place: n-1 pieces copied, not n), posts
 * READY. Phase 1: rank i reduces piece i over all ranks, in rank order, straight from the
 * others' buffers and its own input into its output, copies the result into its buffer's out
 * area, posts OUT. Phase 2: every rank copies the other pieces' results out of their owners'
 * buffers, posts DONE. Each element is reduced once, by one rank, so all ranks get the same
 * bits, and the reduction work is spread over all cores.
 *
 * Buffer of one window:  | in: piece 0 | piece 1 | ... | piece n-1 | out: one piece |
 */
#include "shm_common.h"

enum { ST_PHASE, ST_OFF, ST_W, ST_SEQ, ST_PMAX, ST_SIG };

/* Its phases (reduce-scatter, then allgather of the reduced pieces) are allreduce's alone. */
static int rsag_supports(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    return ctx->arena != NULL && ctx->nranks >= 2 && a->coll == ZN_COLL_ALLREDUCE;
}

/* Largest piece (elements), a multiple of a cache line where the type allows. */
static size_t piece_max(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    size_t p = ctx->arena->buf_size / ((size_t)(ctx->nranks + 1) * a->esize);
    size_t line = 64 / a->esize;
    if (p > line) p -= p % line;
    return p ? p : 1;
}

static double rsag_cost(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    int n = ctx->nranks;
    size_t wmax = piece_max(ctx, a) * (size_t)n;
    double windows = (double)((a->count + wmax - 1) / wmax);
    double s = (double)(a->count * a->esize);
    /* copy in (n-1)/n, reduce reading s and writing s/n, publish s/n, copy out (n-1)/n */
    double move =
        2.0 * s * (n - 1) / n / zn_cost.shm_bw + s / zn_cost.reduce_bw + s / n / zn_cost.shm_bw;
    return windows * 3 * zn_shm_sync_cost(n) + move;
}

static size_t rsag_scratch(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    return 0;
}

static void rsag_start(struct zn_plan *p)
{
    p->st[ST_PHASE] = 0;
    p->st[ST_OFF] = 0;
    p->st[ST_PMAX] = (int64_t)piece_max(p->ctx, &p->a);
    p->st[ST_SIG] = (int64_t)zn_shm_sig(&p->a);
}

/* Piece j of a window of w elements: [j*pl, min(w, (j+1)*pl)). */
static void piece(size_t w, int n, int j, size_t *start, size_t *len)
{
    size_t pl = (w + (size_t)n - 1) / (size_t)n;
    size_t s = (size_t)j * pl;
    *start = s < w ? s : w;
    *len = s < w ? (w - s < pl ? w - s : pl) : 0;
}

static int rsag_next(struct zn_plan *p, struct zn_round *r)
{
    struct zn_arena *ar = p->ctx->arena;
    const struct zn_coll_args *a = &p->a;
    int me = ar->rank, n = ar->nranks;
    size_t es = a->esize, off = (size_t)p->st[ST_OFF], pmax = (size_t)p->st[ST_PMAX];
    const uint8_t *in = (const uint8_t *)a->sendbuf + off * es;
    uint8_t *out = (uint8_t *)a->recvbuf + off * es;
    uint64_t sig = (uint64_t)p->st[ST_SIG], seq = (uint64_t)p->st[ST_SEQ];
    size_t w = (size_t)p->st[ST_W], ps, pl;

    switch (p->st[ST_PHASE]) {
    case 0: {
        if (off >= a->count) return 0;
        w = a->count - off;
        if (w > pmax * (size_t)n) w = pmax * (size_t)n;
        p->st[ST_W] = (int64_t)w;
        seq = ++ar->seq;
        p->st[ST_SEQ] = (int64_t)seq;
        uint8_t *buf = zn_arena_buf(ar, me, seq);
        zn_shm_wait_reuse(r, ar, seq);
        for (int j = 0; j < n; j++) {
            if (j == me) continue;
            piece(w, n, j, &ps, &pl);
            zn_round_copy(r, buf + (size_t)j * pmax * es, in + ps * es, pl * es);
        }
        zn_round_post(r, ZN_ARENA_READY, seq, sig);
        break;
    }
    case 1: {
        piece(w, n, me, &ps, &pl);
        const void **srcs = zn_round_srcs(r, n);
        for (int j = 0; j < n; j++) {
            if (j != me) zn_round_wait(r, j, ZN_ARENA_READY, seq, sig);
            srcs[j] = j == me ? (const void *)(in + ps * es)
                              : (const uint8_t *)zn_arena_buf(ar, j, seq) + (size_t)me * pmax * es;
        }
        zn_round_reduce_n(r, out + ps * es, srcs, n, pl);
        zn_round_copy(r, (uint8_t *)zn_arena_buf(ar, me, seq) + (size_t)n * pmax * es,
                      out + ps * es, pl * es);
        zn_round_post(r, ZN_ARENA_OUT, seq, sig);
        break;
    }
    default: {
        for (int j = 0; j < n; j++) {
            if (j == me) continue;
            zn_round_wait(r, j, ZN_ARENA_OUT, seq, sig);
            piece(w, n, j, &ps, &pl);
            zn_round_copy(r, out + ps * es,
                          (const uint8_t *)zn_arena_buf(ar, j, seq) + (size_t)n * pmax * es,
                          pl * es);
        }
        zn_round_post(r, ZN_ARENA_DONE, seq, sig);
        p->st[ST_OFF] += (int64_t)w;
        p->st[ST_PHASE] = 0;
        return 1;
    }
    }
    p->st[ST_PHASE]++;
    return 1;
}

const struct zn_algo zn_algo_shm_rsag = {
    .name = "shm_rsag",
    .doc = "allreduce through the shared-memory arena as reduce-scatter + allgather; large "
           "vectors, ranks on one host",
    .supports = rsag_supports,
    .cost = rsag_cost,
    .scratch = rsag_scratch,
    .start = rsag_start,
    .next = rsag_next,
};
