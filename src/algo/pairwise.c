/*
 * pairwise: the personalized collectives over point-to-point connections.
 *
 * alltoall  the self block is copied locally; round k (1..n-1) sends block rank+k to rank+k and
 *           receives block rank-k from rank-k, so every rank talks to one peer each way per
 *           round and the sends of a round match receives of the same round.
 *           In place (sendbuf == recvbuf; NCCL leaves it undefined, we support it) that schedule
 *           would overwrite block rank-k before round n-k sends it, so round k (0..n-1) pairs
 *           each rank with k-rank instead, which exchanges the same block index both ways:
 *           receive into scratch, then copy over the block just sent.
 * gather    the root receives from every other rank in one round; the others send once.
 * scatter   the inverse.
 *
 * These are the collectives that are the sends and receives of their routes (the list's
 * sendrecv column, abi/coll_list.h); which rank sends which block where comes from the routes
 * of coll_facts.h, and the rooted ones (gather, scatter) share one round at the root.
 */
#include "msg_util.h"

#include <string.h>

enum {
    ST_SINGLE, /* zn_msg_next_single's flag (n == 1) */
    ST_K,      /* next round */
};

static int pairwise_supports(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    return zn_coll_facts(a->coll)->sendrecv;
}

static int rooted(const struct zn_coll_args *a)
{
    return zn_coll_facts(a->coll)->rooted;
}

static double pairwise_cost(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    int n = ctx->nranks;
    if (n == 1) return zn_msg_cost_single(a);
    size_t block = a->count * a->esize;
    if (!rooted(a)) return (n - 1) * zn_cost_msg(ctx, block);
    /* gather/scatter: one round; the root's link carries n-1 blocks. */
    return zn_cost_msg(ctx, (size_t)(n - 1) * block);
}

/* In place with every block both sent and overwritten (alltoall). */
static int alltoall_in_place(const struct zn_coll_args *a)
{
    return zn_coll_in_place_overlaps(a->coll) && a->sendbuf == a->recvbuf;
}

static size_t pairwise_scratch(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    if (ctx->nranks == 1 || !alltoall_in_place(a)) return 0;
    return a->count * a->esize;
}

static void pairwise_start(struct zn_plan *p)
{
    memset(p->st, 0, sizeof(p->st));
    if (!rooted(&p->a) && !alltoall_in_place(&p->a)) p->st[ST_K] = 1;
}

static int alltoall_round(struct zn_plan *p, struct zn_round *r)
{
    const struct zn_coll_args *a = &p->a;
    int n = p->ctx->nranks, rank = p->ctx->rank, k = (int)p->st[ST_K]++;
    size_t block = a->count * a->esize;
    if (k >= n) return 0;
    if (alltoall_in_place(a)) {
        int peer = zn_msg_mod(k - rank, n);
        if (peer == rank) return 1; /* nothing this round */
        char *b = (char *)a->recvbuf + (size_t)peer * block;
        zn_msg_send(r, peer, b, block);
        zn_msg_recv(r, peer, p->scratch, block);
        zn_round_copy(r, b, p->scratch, block);
        return 1;
    }
    int to = zn_msg_mod(rank + k, n), from = zn_msg_mod(rank - k, n);
    zn_msg_send(r, to, (const char *)a->sendbuf + (size_t)to * block, block);
    zn_msg_recv(r, from, (char *)a->recvbuf + (size_t)from * block, block);
    if (k == 1)
        zn_round_copy(r, (char *)a->recvbuf + (size_t)rank * block,
                      (const char *)a->sendbuf + (size_t)rank * block, block);
    return 1;
}

/* Gather and scatter: every block travels between the root and another rank, in one round;
 * the root's own block is a local copy (dropped by the builder in place). */
static int rooted_round(struct zn_plan *p, struct zn_round *r)
{
    const struct zn_coll_args *a = &p->a;
    int n = p->ctx->nranks, rank = p->ctx->rank, root = a->root, sb, db;
    size_t block = a->count * a->esize;
    if (p->st[ST_K]++) return 0;
    if (rank != root) {
        if (zn_coll_route(a->coll, rank, root, root, &sb, &db))
            zn_msg_send(r, root, (const char *)a->sendbuf + (size_t)sb * block, block);
        if (zn_coll_route(a->coll, root, rank, root, &sb, &db))
            zn_msg_recv(r, root, (char *)a->recvbuf + (size_t)db * block, block);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        if (i == root) continue;
        if (zn_coll_route(a->coll, root, i, root, &sb, &db))
            zn_msg_send(r, i, (const char *)a->sendbuf + (size_t)sb * block, block);
        if (zn_coll_route(a->coll, i, root, root, &sb, &db))
            zn_msg_recv(r, i, (char *)a->recvbuf + (size_t)db * block, block);
    }
    if (zn_coll_route(a->coll, root, root, root, &sb, &db))
        zn_round_copy(r, (char *)a->recvbuf + (size_t)db * block,
                      (const char *)a->sendbuf + (size_t)sb * block, block);
    return 1;
}

static int pairwise_next(struct zn_plan *p, struct zn_round *r)
{
    if (p->ctx->nranks == 1) return zn_msg_next_single(p, r);
    return zn_algo_next_nonempty(p, r, rooted(&p->a) ? rooted_round : alltoall_round);
}

const struct zn_algo zn_algo_pairwise = {
    .name = "pairwise",
    .doc = "alltoall in n-1 pairwise rounds, gather and scatter in one round at the root, over "
           "point-to-point connections",
    .supports = pairwise_supports,
    .cost = pairwise_cost,
    .scratch = pairwise_scratch,
    .start = pairwise_start,
    .next = pairwise_next,
};
