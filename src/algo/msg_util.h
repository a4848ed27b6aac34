/*
 * Helpers shared by the algorithms built from messages between two ranks (ring, rd, tree,
 * pairwise): segment and chunk arithmetic, ring positions, message steps that skip empty
 * messages, and the one-rank plan. (zn_p2p_* is the GPU peer transport, transport/gpu_peer.h.)
 *
 * Every size here is computed the same way on both ends of a message, which is what lets the
 * algorithms skip zero-byte messages on both sides without telling each other.
 */
#ifndef ZN_ALGO_MSG_UTIL_H
#define ZN_ALGO_MSG_UTIL_H

#include "algo.h"

#include <stddef.h>
#include <stdint.h>

static inline int zn_msg_mod(int64_t a, int n)
{
    int64_t m = a % n;
    return (int)(m < 0 ? m + n : m);
}

static inline size_t zn_msg_min(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Elements per pipelined piece: chunk_size bytes, at least one element; a chunk size of 0 means
 * no pipelining at all. */
static inline size_t zn_msg_chunk_elems(const struct zn_algo_ctx *ctx, size_t esize)
{
    if (ctx->chunk_size == 0) return SIZE_MAX / (esize ? esize : 1);
    size_t ce = ctx->chunk_size / esize;
    return ce ? ce : 1;
}

/* Number of pieces of at most ce elements that len elements make (0 for len == 0). */
static inline size_t zn_msg_npieces(size_t len, size_t ce)
{
    return len / ce + (len % ce != 0);
}

/* Length of piece c (elements) of a run of len elements cut in pieces of ce; 0 past the end. */
static inline size_t zn_msg_piece_len(size_t len, size_t c, size_t ce)
{
    if (c >= zn_msg_npieces(len, ce)) return 0;
    return zn_msg_min(ce, len - c * ce);
}

/* Segment j of n of a vector of count elements: element aligned, sizes differ by at most one,
 * the longer segments first. */
static inline size_t zn_msg_seg_off(size_t count, int n, int j)
{
    size_t base = count / (size_t)n, rem = count % (size_t)n;
    return (size_t)j * base + zn_msg_min((size_t)j, rem);
}

static inline size_t zn_msg_seg_len(size_t count, int n, int j)
{
    return count / (size_t)n + ((size_t)j < count % (size_t)n);
}

/* Index of rank in the ring order (ranks appear exactly once). */
static inline int zn_msg_ring_find(const struct zn_algo_ctx *ctx, int rank)
{
    for (int i = 0; i < ctx->nranks; i++)
        if (ctx->ring[i] == rank) return i;
    return 0;
}

/* Rank at ring position pos (any integer, taken modulo nranks). */
static inline int zn_msg_ring_at(const struct zn_algo_ctx *ctx, int64_t pos)
{
    return ctx->ring[zn_msg_mod(pos, ctx->nranks)];
}

static inline int zn_msg_ceil_log2(int n)
{
    int l = 0;
    while ((1 << l) < n) l++;
    return l;
}

/* Byte address of element `elem` of buf. */
static inline char *zn_msg_at(const void *buf, size_t elem, size_t esize)
{
    return (char *)buf + elem * esize;
}

/* SEND / RECV that skip empty messages: both ends compute the same length, so both skip. */
static inline void zn_msg_send(struct zn_round *r, int peer, const void *buf, size_t bytes)
{
    if (bytes) zn_round_send(r, peer, buf, bytes);
}

static inline void zn_msg_recv(struct zn_round *r, int peer, void *buf, size_t bytes)
{
    if (bytes) zn_round_recv(r, peer, buf, bytes);
}

/* With one rank every collective is a copy of count elements from sendbuf to recvbuf (nothing
 * when in place). st[0] marks the copy as issued. */
static inline int zn_msg_next_single(struct zn_plan *p, struct zn_round *r)
{
    if (p->st[0]) return 0;
    p->st[0] = 1;
    zn_round_copy(r, p->a.recvbuf, p->a.sendbuf, p->a.count * p->a.esize);
    return r->nstep > 0;
}

/* Cost of the one-rank plan: a local copy unless in place. */
static inline double zn_msg_cost_single(const struct zn_coll_args *a)
{
    if (a->sendbuf == a->recvbuf) return 0.0;
    return (double)(a->count * a->esize) / zn_cost.shm_bw;
}

#endif
