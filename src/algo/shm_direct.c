/*
 * shm_direct: every collective through the shared-memory arena, "one shot" per window.
 *
 * For each window of the vector: producers copy their part into their own arena buffer and
 * post READY; consumers wait for the producers they need, read straight out of those buffers
 * (reducing in rank order where the collective reduces) and post DONE. Two synchronisations
 * per window and one copy in; every rank that reduces does the whole reduction of the window,
 * which is the fastest choice for small messages (the arena's latency path) and for the
 * collectives that do not reduce.
 *
 * Reductions run over the sources in rank order 0..n-1 on every rank, so all ranks get
 * bit-identical results.
 */
#include "shm_common.h"

enum { ST_PHASE, ST_OFF, ST_W, ST_SEQ, ST_WMAX, ST_SIG };

static int direct_supports(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    return ctx->arena != NULL && ctx->nranks >= 2;
}

/* Elements per window: a rank's arena buffer holds a window of every block of its input. */
static size_t window_max(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    size_t w =
        ctx->arena->buf_size / (a->esize * (size_t)zn_coll_send_blocks(a->coll, ctx->nranks));
    return w ? w : 1;
}

static double direct_cost(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    int n = ctx->nranks;
    size_t wmax = window_max(ctx, a);
    double windows = (double)((a->count + wmax - 1) / wmax);
    double block = (double)(a->count * a->esize);
    double move = 0;
    switch (a->coll) {
    case ZN_COLL_ALLREDUCE:
        move = block / zn_cost.shm_bw + (double)n * block / zn_cost.reduce_bw;
        break;
    case ZN_COLL_REDUCESCATTER:
        move = (double)n * block / zn_cost.shm_bw + (double)n * block / zn_cost.reduce_bw;
        break;
    case ZN_COLL_REDUCE:
        move = block / zn_cost.shm_bw + (double)n * block / zn_cost.reduce_bw;
        break;
    case ZN_COLL_BROADCAST: move = 2 * block / zn_cost.shm_bw; break;
    default: move = (double)(n + 1) * block / zn_cost.shm_bw; break;
    }
    return windows * 2 * zn_shm_sync_cost(n) + move;
}

static size_t direct_scratch(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    return 0;
}

static void direct_start(struct zn_plan *p)
{
    p->st[ST_PHASE] = 0;
    p->st[ST_OFF] = 0;
    p->st[ST_WMAX] = (int64_t)window_max(p->ctx, &p->a);
    p->st[ST_SIG] = (int64_t)zn_shm_sig(&p->a);
}

/* Phase 0: put this rank's part of the window into its buffer, post READY. */
static void produce(struct zn_plan *p, struct zn_round *r, uint64_t seq, size_t off, size_t w)
{
    struct zn_arena *ar = p->ctx->arena;
    const struct zn_coll_args *a = &p->a;
    int me = ar->rank, n = ar->nranks;
    size_t es = a->esize, cb = a->count * es; /* bytes of one block */
    uint8_t *buf = zn_arena_buf(ar, me, seq);
    const uint8_t *in = a->sendbuf;
    uint64_t sig = (uint64_t)p->st[ST_SIG];
    int producer = 1;
    switch (a->coll) {
    case ZN_COLL_ALLREDUCE:
    case ZN_COLL_REDUCE:
    case ZN_COLL_ALLGATHER: zn_round_copy(r, buf, in + off * es, w * es); break;
    case ZN_COLL_BROADCAST:
        if ((producer = me == a->root)) zn_round_copy(r, buf, in + off * es, w * es);
        break;
    case ZN_COLL_GATHER:
        if ((producer = me != a->root)) zn_round_copy(r, buf, in + off * es, w * es);
        break;
    case ZN_COLL_REDUCESCATTER:
    case ZN_COLL_ALLTOALL:
        for (int j = 0; j < n; j++)
            if (j != me) zn_round_copy(r, buf + (size_t)j * w * es, in + j * cb + off * es, w * es);
        break;
    case ZN_COLL_SCATTER:
        if ((producer = me == a->root))
            for (int j = 0; j < n; j++)
                if (j != me)
                    zn_round_copy(r, buf + (size_t)j * w * es, in + j * cb + off * es, w * es);
        break;
    default: break;
    }
    if (producer) {
        /* The copies above run after the waits: the buffer is free by then. */
        zn_shm_wait_reuse(r, ar, seq);
        zn_round_post(r, ZN_ARENA_READY, seq, sig);
    }
}

static void wait_ready(struct zn_round *r, const struct zn_arena *ar, int who, uint64_t seq,
                       uint64_t sig)
{
    if (who >= 0) {
        zn_round_wait(r, who, ZN_ARENA_READY, seq, sig);
        return;
    }
    for (int j = 0; j < ar->nranks; j++)
        if (j != ar->rank) zn_round_wait(r, j, ZN_ARENA_READY, seq, sig);
}

/* Phase 1: read what this rank needs from the producers' buffers, post DONE. */
static void consume(struct zn_plan *p, struct zn_round *r, uint64_t seq, size_t off, size_t w)
{
    struct zn_arena *ar = p->ctx->arena;
    const struct zn_coll_args *a = &p->a;
    int me = ar->rank, n = ar->nranks;
    size_t es = a->esize, cb = a->count * es;
    const uint8_t *in = a->sendbuf;
    uint8_t *out = a->recvbuf;
    uint64_t sig = (uint64_t)p->st[ST_SIG];
    switch (a->coll) {
    case ZN_COLL_ALLREDUCE:
    case ZN_COLL_REDUCE: {
        if (a->coll == ZN_COLL_REDUCE && me != a->root) break;
        wait_ready(r, ar, -1, seq, sig);
        const void **srcs = zn_round_srcs(r, n);
        for (int j = 0; j < n; j++)
            srcs[j] = j == me ? (const void *)(in + off * es) : zn_arena_buf(ar, j, seq);
        zn_round_reduce_n(r, out + off * es, srcs, n, w);
        break;
    }
    case ZN_COLL_BROADCAST:
        if (me == a->root) {
            zn_round_copy(r, out + off * es, in + off * es, w * es);
        } else {
            wait_ready(r, ar, a->root, seq, sig);
            zn_round_copy(r, out + off * es, zn_arena_buf(ar, a->root, seq), w * es);
        }
        break;
    case ZN_COLL_ALLGATHER:
        wait_ready(r, ar, -1, seq, sig);
        for (int j = 0; j < n; j++)
            zn_round_copy(r, out + j * cb + off * es,
                          j == me ? (const void *)(in + off * es) : zn_arena_buf(ar, j, seq),
                          w * es);
        break;
    case ZN_COLL_GATHER:
        if (me != a->root) break;
        wait_ready(r, ar, -1, seq, sig);
        for (int j = 0; j < n; j++)
            zn_round_copy(r, out + j * cb + off * es,
                          j == me ? (const void *)(in + off * es) : zn_arena_buf(ar, j, seq),
                          w * es);
        break;
    case ZN_COLL_REDUCESCATTER: {
        wait_ready(r, ar, -1, seq, sig);
        const void **srcs = zn_round_srcs(r, n);
        for (int j = 0; j < n; j++)
            srcs[j] = j == me ? (const void *)(in + me * cb + off * es)
                              : (const uint8_t *)zn_arena_buf(ar, j, seq) + (size_t)me * w * es;
        zn_round_reduce_n(r, out + off * es, srcs, n, w);
        break;
    }
    case ZN_COLL_ALLTOALL:
        wait_ready(r, ar, -1, seq, sig);
        for (int j = 0; j < n; j++)
            zn_round_copy(r, out + j * cb + off * es,
                          j == me ? (const void *)(in + me * cb + off * es)
                                  : (const uint8_t *)zn_arena_buf(ar, j, seq) + (size_t)me * w * es,
                          w * es);
        break;
    case ZN_COLL_SCATTER:
        if (me == a->root) {
            zn_round_copy(r, out + off * es, in + me * cb + off * es, w * es);
        } else {
            wait_ready(r, ar, a->root, seq, sig);
            zn_round_copy(r, out + off * es,
                          (const uint8_t *)zn_arena_buf(ar, a->root, seq) + (size_t)me * w * es,
                          w * es);
        }
        break;
    default: break;
    }
    zn_round_post(r, ZN_ARENA_DONE, seq, sig);
}

static int direct_next(struct zn_plan *p, struct zn_round *r)
{
    struct zn_arena *ar = p->ctx->arena;
    size_t off = (size_t)p->st[ST_OFF];
    if (p->st[ST_PHASE] == 0) {
        if (off >= p->a.count) return 0;
        size_t w = p->a.count - off, wmax = (size_t)p->st[ST_WMAX];
        if (w > wmax) w = wmax;
        p->st[ST_W] = (int64_t)w;
        p->st[ST_SEQ] = (int64_t)++ar->seq;
        produce(p, r, (uint64_t)p->st[ST_SEQ], off, w);
        p->st[ST_PHASE] = 1;
        return 1;
    }
    consume(p, r, (uint64_t)p->st[ST_SEQ], off, (size_t)p->st[ST_W]);
    p->st[ST_OFF] += p->st[ST_W];
    p->st[ST_PHASE] = 0;
    return 1;
}

const struct zn_algo zn_algo_shm_direct = {
    .name = "shm_direct",
    .doc = "every collective through the shared-memory arena, one copy in per window; ranks on one "
           "host",
    .supports = direct_supports,
    .cost = direct_cost,
    .scratch = direct_scratch,
    .start = direct_start,
    .next = direct_next,
};
