/*
 * tree: binomial trees rooted at the root, for broadcast and reduce; the latency algorithm for
 * rooted collectives over point-to-point connections. The whole message moves in every step.
 *
 * Ranks are numbered by ring position relative to the root (v = ring_pos - root_pos mod n), so
 * the subtrees of small masks, the leaves' links, stay inside a host when hosts are contiguous in
 * the ring. Rank v's parent is v minus its lowest set bit; its children are v + m for the powers
 * of two m below that bit (every power of two below n for the root) with v + m < n.
 *
 * broadcast  receive from the parent, then send to every child in one round (largest subtree
 *            first): the sends go out together instead of one round each.
 * reduce     receive from the children one round each, smallest subtree first, which is the
 *            order they finish in, reducing into an accumulator (recvbuf on the root, scratch
 *            elsewhere: a non-root's recvbuf may be NULL), then send it to the parent.
 */
#include "msg_util.h"

#include <string.h>

enum {
    ST_SINGLE, /* zn_msg_next_single's flag (n == 1) */
    ST_V,      /* position relative to the root */
    ST_ROOTPOS,
    ST_I,     /* broadcast: round; reduce: log2 of the next child's mask */
    ST_NRECV, /* reduce: children received so far */
};

typedef int (*tree_round_fn)(struct zn_plan *p, struct zn_round *r);

static tree_round_fn tree_round_of(enum zn_coll c);

static int tree_supports(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    return tree_round_of(a->coll) != NULL;
}

static double tree_cost(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    int n = ctx->nranks;
    if (n == 1) return zn_msg_cost_single(a);
    size_t bytes = a->count * a->esize;
    double step = zn_cost_msg(ctx, bytes);
    if (zn_coll_facts(a->coll)->reduces) step += 2.0 * (double)bytes / zn_cost.reduce_bw;
    return zn_msg_ceil_log2(n) * step;
}

/* Lowest set bit of v; for the root, a bit above every child mask. */
static int low_bit(int v, int n)
{
    return v ? (v & -v) : 1 << zn_msg_ceil_log2(n);
}

static int nchildren(int v, int n)
{
    int c = 0;
    for (int m = 1; m < low_bit(v, n) && v + m < n; m <<= 1) c++;
    return c;
}

static int rel_pos(const struct zn_algo_ctx *ctx, int root)
{
    return zn_msg_mod(ctx->ring_pos - zn_msg_ring_find(ctx, root), ctx->nranks);
}

static size_t tree_scratch(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    int n = ctx->nranks;
    if (n == 1 || !zn_coll_facts(a->coll)->reduces) return 0;
    int v = rel_pos(ctx, a->root);
    size_t bytes = a->count * a->esize;
    if (v == 0) return bytes;               /* what a child sends */
    return nchildren(v, n) ? 2 * bytes : 0; /* plus the accumulator */
}

static void tree_start(struct zn_plan *p)
{
    memset(p->st, 0, sizeof(p->st));
    if (p->ctx->nranks == 1) return;
    p->st[ST_ROOTPOS] = zn_msg_ring_find(p->ctx, p->a.root);
    p->st[ST_V] = zn_msg_mod(p->ctx->ring_pos - p->st[ST_ROOTPOS], p->ctx->nranks);
}

static int peer_of(const struct zn_plan *p, int v)
{
    return zn_msg_ring_at(p->ctx, v + p->st[ST_ROOTPOS]);
}

static int broadcast_next(struct zn_plan *p, struct zn_round *r)
{
    const struct zn_coll_args *a = &p->a;
    int n = p->ctx->nranks, v = (int)p->st[ST_V];
    size_t bytes = a->count * a->esize;
    int i = (int)p->st[ST_I]++;
    if (v != 0 && i == 0) {
        zn_msg_recv(r, peer_of(p, v - low_bit(v, n)), a->recvbuf, bytes);
        return 1;
    }
    if (i > (v != 0)) return 0;
    const void *src = v == 0 ? a->sendbuf : a->recvbuf;
    for (int m = low_bit(v, n) >> 1; m >= 1; m >>= 1)
        if (v + m < n) zn_msg_send(r, peer_of(p, v + m), src, bytes);
    if (v == 0) zn_round_copy(r, a->recvbuf, a->sendbuf, bytes);
    if (r->nstep) return 1;
    return 0; /* a leaf: nothing to forward */
}

static int reduce_next(struct zn_plan *p, struct zn_round *r)
{
    const struct zn_coll_args *a = &p->a;
    int n = p->ctx->nranks, v = (int)p->st[ST_V];
    size_t bytes = a->count * a->esize;
    int m = 1 << p->st[ST_I];
    if (m > low_bit(v, n)) return 0;
    char *acc = v == 0 ? a->recvbuf : p->scratch;
    int first = p->st[ST_NRECV] == 0;
    p->st[ST_I]++;
    if (m < low_bit(v, n)) {
        if (v + m >= n) return reduce_next(p, r); /* no such child, nor any larger one */
        char *in = v == 0 ? p->scratch : (char *)p->scratch + bytes;
        zn_msg_recv(r, peer_of(p, v + m), in, bytes);
        zn_round_reduce2(r, acc, first ? a->sendbuf : acc, in, a->count);
        p->st[ST_NRECV]++;
        return 1;
    }
    /* m == low_bit: every child is in, send to the parent (the root is done). */
    if (v == 0) return 0;
    zn_msg_send(r, peer_of(p, v - m), first ? a->sendbuf : acc, bytes);
    return 1;
}

/* The tree's generator of each collective it runs, down the tree from the root or up to it: a
 * collective without one is not supported. */
static const tree_round_fn tree_rounds[ZN_NCOLLS] = {
    [ZN_COLL_BROADCAST] = broadcast_next,
    [ZN_COLL_REDUCE] = reduce_next,
};

static tree_round_fn tree_round_of(enum zn_coll c)
{
    return (unsigned)c < ZN_NCOLLS ? tree_rounds[c] : NULL;
}

static int tree_next(struct zn_plan *p, struct zn_round *r)
{
    if (p->ctx->nranks == 1) return zn_msg_next_single(p, r);
    return tree_round_of(p->a.coll)(p, r);
}

const struct zn_algo zn_algo_tree = {
    .name = "tree",
    .doc = "binomial tree broadcast and reduce over point-to-point connections, whole message per "
           "step; best for small messages",
    .supports = tree_supports,
    .cost = tree_cost,
    .scratch = tree_scratch,
    .start = tree_start,
    .next = tree_next,
};
