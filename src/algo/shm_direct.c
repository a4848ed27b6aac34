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
 *
 * Which rank produces what and which reads it are the routes of the collective's blocks
 * (coll_facts.h): nothing here names a collective, so every row of the list runs.
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

/* The model: a reduction copies its input in and reduces n blocks' worth; the others move the
 * largest buffer (the root's) through the arena once, plus a block of their own. */
static double direct_cost(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    int n = ctx->nranks;
    size_t wmax = window_max(ctx, a);
    double windows = (double)((a->count + wmax - 1) / wmax);
    double block = (double)(a->count * a->esize);
    int in = zn_coll_send_blocks(a->coll, n), out = zn_coll_recv_blocks(a->coll, n);
    double move;
    if (zn_coll_facts(a->coll)->reduces)
        move = (double)in * block / zn_cost.shm_bw + (double)n * block / zn_cost.reduce_bw;
    else
        move = (double)((in > out ? in : out) + 1) * block / zn_cost.shm_bw;
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

/* Phase 0: put what the others need from this rank into its buffer, post READY. Where the
 * send buffer holds a block per destination (reducescatter, alltoall, scatter) the buffer holds
 * a window of each, at the destination's index; else the window of the one block. A rank that
 * no other rank reads from (the root of a gather or a reduce) produces nothing. */
static void produce(struct zn_plan *p, struct zn_round *r, uint64_t seq, size_t off, size_t w)
{
    struct zn_arena *ar = p->ctx->arena;
    const struct zn_coll_args *a = &p->a;
    int me = ar->rank, n = ar->nranks, sb, db;
    size_t es = a->esize, cb = a->count * es; /* bytes of one block */
    uint8_t *buf = zn_arena_buf(ar, me, seq);
    const uint8_t *in = a->sendbuf;
    uint64_t sig = (uint64_t)p->st[ST_SIG];
    int per_dest = zn_coll_extent_per_rank(zn_coll_facts(a->coll)->send), producer = 0;
    for (int j = 0; j < n; j++) {
        if (j == me || !zn_coll_route(a->coll, me, j, a->root, &sb, &db)) continue;
        producer = 1;
        if (per_dest)
            zn_round_copy(r, buf + (size_t)j * w * es, in + (size_t)sb * cb + off * es, w * es);
    }
    if (!producer) return;
    if (!per_dest) zn_round_copy(r, buf, in + off * es, w * es);
    /* The copies above run after the waits: the buffer is free by then. */
    zn_shm_wait_reuse(r, ar, seq);
    zn_round_post(r, ZN_ARENA_READY, seq, sig);
}

/* Phase 1: read what this rank needs from the producers' buffers (its own part from its
 * input), reducing in rank order or copying each block where it lands, post DONE. */
static void consume(struct zn_plan *p, struct zn_round *r, uint64_t seq, size_t off, size_t w)
{
    struct zn_arena *ar = p->ctx->arena;
    const struct zn_coll_args *a = &p->a;
    const struct zn_coll_facts *f = zn_coll_facts(a->coll);
    int me = ar->rank, n = ar->nranks, sb, db, nsrc = 0;
    size_t es = a->esize, cb = a->count * es;
    const uint8_t *in = a->sendbuf;
    uint8_t *out = a->recvbuf;
    uint64_t sig = (uint64_t)p->st[ST_SIG];
    int per_dest = zn_coll_extent_per_rank(f->send);
    for (int j = 0; j < n; j++)
        if (zn_coll_route(a->coll, j, me, a->root, &sb, &db)) {
            nsrc++;
            if (j != me) zn_round_wait(r, j, ZN_ARENA_READY, seq, sig);
        }
    const void **srcs = f->reduces && nsrc ? zn_round_srcs(r, nsrc) : NULL;
    for (int j = 0, k = 0; j < n; j++) {
        if (!zn_coll_route(a->coll, j, me, a->root, &sb, &db)) continue;
        const uint8_t *src = j == me ? in + (size_t)sb * cb + off * es
                                     : (const uint8_t *)zn_arena_buf(ar, j, seq) +
                                           (per_dest ? (size_t)me * w * es : 0);
        if (srcs)
            srcs[k++] = src;
        else
            zn_round_copy(r, out + (size_t)db * cb + off * es, src, w * es);
    }
    if (srcs) zn_round_reduce_n(r, out + off * es, srcs, nsrc, w);
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
