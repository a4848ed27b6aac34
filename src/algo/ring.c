/*
 * ring: the bandwidth algorithm over point-to-point connections, along ctx->ring (ranks of one
 * host next to each other, so only two links of the ring cross between hosts).
 *
 * allreduce     reduce-scatter then allgather: the vector is cut in n segments (element
 *               aligned, sizes differ by at most one element) and every segment in pieces of at
 *               most chunk_size bytes. One round is one piece step: send a piece to the next
 *               rank, receive one from the previous rank (into scratch, then reduce). Ring
 *               position p ends the reduce-scatter owning segment p+1, computed by it alone and
 *               copied to the others, so every rank gets bit-identical results.
 * allgather     the same allgather, one block per rank, received straight into recvbuf.
 * reducescatter the same reduce-scatter with the partial sums kept in two scratch pieces
 *               (recvbuf holds only this rank's block); position p ends with block ring[p].
 * broadcast     a pipelined chain from the root along the ring order.
 * reduce        a pipelined chain along the ring order that ends at the root.
 *
 * Pieces are the outer loop and steps the inner one, so each piece travels the whole ring
 * before the next starts; every rank runs the same sequence of rounds, which is what keeps the
 * schedule deadlock-free under rendezvous sends (each round's sends match rounds the peers run
 * at the same "time"). A rank skips rounds where it has nothing to do (a short segment's last
 * piece); the matching is per message, so that does not disturb the others.
 */
#include "msg_util.h"

#include <string.h>

enum {
    ST_SINGLE, /* zn_msg_next_single's flag (n == 1) */
    ST_C,      /* piece (allreduce, allgather, reducescatter) or local round (chains) */
    ST_S,      /* step within the piece */
    ST_K,      /* pieces */
    ST_CE,     /* elements per piece */
    ST_D,      /* chain position: 0 = first rank of the chain */
};

/* The ring's schedule of a collective: the collectives it runs differ too much for one
 * schedule, so each has a round generator of its own (below) and a row here saying what the
 * cost model, scratch and start need. A collective without a row is not supported. */
enum { CHAIN_NONE, CHAIN_FROM_ROOT, CHAIN_TO_ROOT };

struct ring_sched {
    int (*round)(struct zn_plan *p, struct zn_round *r);
    /* Scratch bytes of this rank for pieces of `piece` bytes (NULL: none). */
    size_t (*scratch)(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a, size_t piece);
    int passes;   /* times each piece goes round the ring, n-1 steps each (0: a chain); where
                     the collective reduces (coll_facts.h), the first pass reduces */
    int chain;    /* a chain from the root or ending at it, along the ring order */
    int segments; /* the vector is cut into n segments, one per ring position */
};

static const struct ring_sched *sched_of(enum zn_coll c);

/* Elements of the longest run that gets cut into pieces. */
static size_t run_len(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    if (sched_of(a->coll)->segments) return zn_msg_seg_len(a->count, ctx->nranks, 0);
    return a->count;
}

static int ring_supports(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    return sched_of(a->coll) != NULL;
}

static double ring_cost(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    int n = ctx->nranks;
    if (n == 1) return zn_msg_cost_single(a);
    const struct ring_sched *sc = sched_of(a->coll);
    size_t ce = zn_msg_chunk_elems(ctx, a->esize), len = run_len(ctx, a);
    double k = (double)zn_msg_npieces(len, ce);
    size_t piece = zn_msg_min(ce, len) * a->esize;
    double msg = zn_cost_msg(ctx, piece), red = 0;
    if (zn_coll_facts(a->coll)->reduces) red = 2.0 * (double)piece / zn_cost.reduce_bw;
    /* A chain: the last piece leaves the first rank after k rounds and needs n-2 more. */
    if (sc->chain != CHAIN_NONE) return (k + n - 2) * (msg + red);
    double steps = (double)(n - 1) * k;
    return steps * (sc->passes * msg + red);
}

static size_t ring_scratch(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    int n = ctx->nranks;
    const struct ring_sched *sc = sched_of(a->coll);
    if (n == 1 || !sc->scratch) return 0;
    size_t piece = zn_msg_min(zn_msg_chunk_elems(ctx, a->esize), run_len(ctx, a)) * a->esize;
    return sc->scratch(ctx, a, piece);
}

static void ring_start(struct zn_plan *p)
{
    const struct zn_algo_ctx *ctx = p->ctx;
    int n = ctx->nranks;
    memset(p->st, 0, sizeof(p->st));
    p->st[ST_CE] = (int64_t)zn_msg_chunk_elems(ctx, p->a.esize);
    p->st[ST_K] = (int64_t)zn_msg_npieces(run_len(ctx, &p->a), (size_t)p->st[ST_CE]);
    if (n == 1) return;
    /* Chain position: 0 for the first rank of the chain, n-1 for the last. */
    int root_pos = zn_msg_ring_find(ctx, p->a.root), chain = sched_of(p->a.coll)->chain;
    if (chain == CHAIN_FROM_ROOT) p->st[ST_D] = zn_msg_mod(ctx->ring_pos - root_pos, n);
    if (chain == CHAIN_TO_ROOT) p->st[ST_D] = zn_msg_mod(ctx->ring_pos - root_pos - 1, n);
}

/* Moves to the next (piece, step), nsteps steps per piece; returns 1 (a round was built). */
static int advance(struct zn_plan *p, int nsteps)
{
    if (++p->st[ST_S] == nsteps) {
        p->st[ST_S] = 0;
        p->st[ST_C]++;
    }
    return 1;
}

static int allreduce_round(struct zn_plan *p, struct zn_round *r)
{
    const struct zn_algo_ctx *ctx = p->ctx;
    const struct zn_coll_args *a = &p->a;
    int n = ctx->nranks, pos = ctx->ring_pos, s = (int)p->st[ST_S];
    size_t c = (size_t)p->st[ST_C], ce = (size_t)p->st[ST_CE], es = a->esize;
    if (p->st[ST_C] >= p->st[ST_K]) return 0;
    int next = zn_msg_ring_at(ctx, pos + 1), prev = zn_msg_ring_at(ctx, pos - 1);
    /* reduce-scatter step s: send segment pos-s, receive segment pos-s-1;
     * allgather step t: send segment pos+1-t, receive segment pos-t. */
    int sj, rj, rs = s < n - 1;
    if (rs) {
        sj = zn_msg_mod(pos - s, n);
        rj = zn_msg_mod(pos - s - 1, n);
    } else {
        sj = zn_msg_mod(pos + 1 - (s - (n - 1)), n);
        rj = zn_msg_mod(pos - (s - (n - 1)), n);
    }
    size_t slen = zn_msg_piece_len(zn_msg_seg_len(a->count, n, sj), c, ce);
    size_t rlen = zn_msg_piece_len(zn_msg_seg_len(a->count, n, rj), c, ce);
    size_t soff = zn_msg_seg_off(a->count, n, sj) + c * ce;
    size_t roff = zn_msg_seg_off(a->count, n, rj) + c * ce;
    /* The first send is this rank's own input; later ones forward what the previous step
     * computed (reduce-scatter) or received (allgather) in recvbuf. */
    const void *src = s == 0 ? a->sendbuf : a->recvbuf;
    zn_msg_send(r, next, zn_msg_at(src, soff, es), slen * es);
    if (rs) {
        zn_msg_recv(r, prev, p->scratch, rlen * es);
        if (rlen)
            zn_round_reduce2(r, zn_msg_at(a->recvbuf, roff, es), zn_msg_at(a->sendbuf, roff, es),
                             p->scratch, rlen);
    } else {
        zn_msg_recv(r, prev, zn_msg_at(a->recvbuf, roff, es), rlen * es);
    }
    return advance(p, 2 * (n - 1));
}

static int allgather_round(struct zn_plan *p, struct zn_round *r)
{
    const struct zn_algo_ctx *ctx = p->ctx;
    const struct zn_coll_args *a = &p->a;
    int n = ctx->nranks, pos = ctx->ring_pos, s = (int)p->st[ST_S];
    size_t c = (size_t)p->st[ST_C], ce = (size_t)p->st[ST_CE], es = a->esize;
    if (p->st[ST_C] >= p->st[ST_K]) return 0;
    size_t len = zn_msg_piece_len(a->count, c, ce), off = c * ce;
    int sb = zn_msg_ring_at(ctx, pos - s), rb = zn_msg_ring_at(ctx, pos - s - 1);
    const void *src = s == 0 ? zn_msg_at(a->sendbuf, off, es)
                             : zn_msg_at(a->recvbuf, (size_t)sb * a->count + off, es);
    zn_msg_send(r, zn_msg_ring_at(ctx, pos + 1), src, len * es);
    zn_msg_recv(r, zn_msg_ring_at(ctx, pos - 1),
                zn_msg_at(a->recvbuf, (size_t)rb * a->count + off, es), len * es);
    /* This rank's own block (nothing to do in place: the builder drops dst == src). */
    if (s == 0)
        zn_round_copy(r, zn_msg_at(a->recvbuf, (size_t)ctx->rank * a->count + off, es),
                      zn_msg_at(a->sendbuf, off, es), len * es);
    return advance(p, n - 1);
}

static int reducescatter_round(struct zn_plan *p, struct zn_round *r)
{
    const struct zn_algo_ctx *ctx = p->ctx;
    const struct zn_coll_args *a = &p->a;
    int n = ctx->nranks, pos = ctx->ring_pos, s = (int)p->st[ST_S];
    size_t c = (size_t)p->st[ST_C], ce = (size_t)p->st[ST_CE], es = a->esize;
    if (p->st[ST_C] >= p->st[ST_K]) return 0;
    size_t len = zn_msg_piece_len(a->count, c, ce), off = c * ce;
    size_t piece = zn_msg_min(ce, a->count) * es;
    char *buf[2] = { p->scratch, (char *)p->scratch + piece };
    /* Step s: send block ring[pos-s-1], receive block ring[pos-s-2]; the last step (s = n-2)
     * receives this rank's own block and reduces it into recvbuf. */
    int sb = zn_msg_ring_at(ctx, pos - s - 1), rb = zn_msg_ring_at(ctx, pos - s - 2);
    const void *src =
        s == 0 ? zn_msg_at(a->sendbuf, (size_t)sb * a->count + off, es) : buf[(s - 1) & 1];
    zn_msg_send(r, zn_msg_ring_at(ctx, pos + 1), src, len * es);
    zn_msg_recv(r, zn_msg_ring_at(ctx, pos - 1), buf[s & 1], len * es);
    void *dst = s == n - 2 ? zn_msg_at(a->recvbuf, off, es) : buf[s & 1];
    zn_round_reduce2(r, dst, zn_msg_at(a->sendbuf, (size_t)rb * a->count + off, es), buf[s & 1],
                     len);
    return advance(p, n - 1);
}

/* Broadcast chain: position d = 0 is the root, d = n-1 the end. Local round i receives piece i
 * and forwards piece i-1, so a piece moves one link per round. */
static int broadcast_round(struct zn_plan *p, struct zn_round *r)
{
    const struct zn_algo_ctx *ctx = p->ctx;
    const struct zn_coll_args *a = &p->a;
    int n = ctx->nranks, pos = ctx->ring_pos, d = (int)p->st[ST_D];
    size_t i = (size_t)p->st[ST_C], k = (size_t)p->st[ST_K], ce = (size_t)p->st[ST_CE];
    size_t es = a->esize;
    int first = d == 0, last = d == n - 1;
    if (i >= (first || last ? k : k + 1)) return 0;
    int next = zn_msg_ring_at(ctx, pos + 1), prev = zn_msg_ring_at(ctx, pos - 1);
    if (first) {
        size_t len = zn_msg_piece_len(a->count, i, ce);
        zn_msg_send(r, next, zn_msg_at(a->sendbuf, i * ce, es), len * es);
        zn_round_copy(r, zn_msg_at(a->recvbuf, i * ce, es), zn_msg_at(a->sendbuf, i * ce, es),
                      len * es);
    } else {
        zn_msg_recv(r, prev, zn_msg_at(a->recvbuf, i * ce, es),
                    zn_msg_piece_len(a->count, i, ce) * es);
        if (!last && i >= 1)
            zn_msg_send(r, next, zn_msg_at(a->recvbuf, (i - 1) * ce, es),
                        zn_msg_piece_len(a->count, i - 1, ce) * es);
    }
    p->st[ST_C]++;
    return 1;
}

/* Reduce chain: position e = 0 starts it, e = n-1 is the root. A middle rank receives piece i
 * into scratch buffer i&1, adds its own input there and forwards it in the next round, while
 * the next piece arrives in the other buffer (recvbuf is not ours on non-root ranks). */
static int reduce_round(struct zn_plan *p, struct zn_round *r)
{
    const struct zn_algo_ctx *ctx = p->ctx;
    const struct zn_coll_args *a = &p->a;
    int n = ctx->nranks, pos = ctx->ring_pos, e = (int)p->st[ST_D];
    size_t i = (size_t)p->st[ST_C], k = (size_t)p->st[ST_K], ce = (size_t)p->st[ST_CE];
    size_t es = a->esize, piece = zn_msg_min(ce, a->count) * es;
    int first = e == 0, root = e == n - 1;
    if (i >= (first || root ? k : k + 1)) return 0;
    int next = zn_msg_ring_at(ctx, pos + 1), prev = zn_msg_ring_at(ctx, pos - 1);
    /* Only middle ranks have two buffers (the first rank has no scratch at all). */
    char *buf[2] = { p->scratch, first || root ? NULL : (char *)p->scratch + piece };
    size_t len = zn_msg_piece_len(a->count, i, ce);
    if (first) {
        zn_msg_send(r, next, zn_msg_at(a->sendbuf, i * ce, es), len * es);
    } else if (root) {
        zn_msg_recv(r, prev, buf[0], len * es);
        zn_round_reduce2(r, zn_msg_at(a->recvbuf, i * ce, es), zn_msg_at(a->sendbuf, i * ce, es),
                         buf[0], len);
    } else {
        if (i < k) {
            zn_msg_recv(r, prev, buf[i & 1], len * es);
            zn_round_reduce2(r, buf[i & 1], zn_msg_at(a->sendbuf, i * ce, es), buf[i & 1], len);
        }
        if (i >= 1)
            zn_msg_send(r, next, buf[(i - 1) & 1], zn_msg_piece_len(a->count, i - 1, ce) * es);
    }
    p->st[ST_C]++;
    return 1;
}

/* The partial sums of a piece received (reduce-scatter steps). */
static size_t allreduce_scratch(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a,
                                size_t piece)
{
    return piece;
}

/* Two pieces (the one received, the one being passed on) from 3 ranks. */
static size_t reducescatter_scratch(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a,
                                    size_t piece)
{
    return ctx->nranks > 2 ? 2 * piece : piece;
}

/* The first rank of the chain none, the root one piece, the middle ranks two. */
static size_t reduce_scratch(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a,
                             size_t piece)
{
    int n = ctx->nranks, e = zn_msg_mod(ctx->ring_pos - zn_msg_ring_find(ctx, a->root) - 1, n);
    return e == 0 ? 0 : e == n - 1 ? piece : 2 * piece;
}

static const struct ring_sched scheds[ZN_NCOLLS] = {
    [ZN_COLL_ALLREDUCE] = { .round = allreduce_round,
                            .scratch = allreduce_scratch,
                            .passes = 2,
                            .segments = 1 },
    [ZN_COLL_ALLGATHER] = { .round = allgather_round, .passes = 1 },
    [ZN_COLL_REDUCESCATTER] = { .round = reducescatter_round,
                                .scratch = reducescatter_scratch,
                                .passes = 1 },
    [ZN_COLL_BROADCAST] = { .round = broadcast_round, .chain = CHAIN_FROM_ROOT },
    [ZN_COLL_REDUCE] = { .round = reduce_round, .scratch = reduce_scratch, .chain = CHAIN_TO_ROOT },
};

static const struct ring_sched *sched_of(enum zn_coll c)
{
    return (unsigned)c < ZN_NCOLLS && scheds[c].round ? &scheds[c] : NULL;
}

static int ring_next(struct zn_plan *p, struct zn_round *r)
{
    if (p->ctx->nranks == 1) return zn_msg_next_single(p, r);
    /* Skipping rounds with nothing for this rank (short last pieces). */
    return zn_algo_next_nonempty(p, r, sched_of(p->a.coll)->round);
}

const struct zn_algo zn_algo_ring = {
    .name = "ring",
    .doc = "pipelined ring over point-to-point connections: reduce-scatter + allgather, chains "
           "for broadcast and reduce; any ranks and hosts, best for large messages",
    .supports = ring_supports,
    .cost = ring_cost,
    .scratch = ring_scratch,
    .start = ring_start,
    .next = ring_next,
};
