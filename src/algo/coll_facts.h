/*
 * The facts of every collective, as a table of rows: whether it reduces, whether it has a
 * root, how many elements each rank reads from its send buffer and writes to its receive
 * buffer, which kernel family runs it and what its NCCL entry point is called. Send and
 * receive are rows of the same table. The rows are expanded from the collective list
 * (abi/coll_list.h), the one place a collective is described; this header derives the rest
 * (element counts, in-place layouts, the routes of the blocks).
 *
 * The API's checks (api/coll.c), the host executor (exec/exec.c), the CUDA paths
 * (exec/cuda_exec.c, exec/cuda_stage.c), the host algorithms, the GPU selection (algo/gpu.c)
 * and zinc-perf read these rows. A new collective touches the list, its NCCL entry point, its
 * algorithms, its kernels and its tests (abi/coll_list.h says which), not this table.
 *
 * Sizes are in NCCL's blocks: the count argument of a call is one block (the whole vector for
 * allreduce, broadcast and reduce; sendcount, recvcount or the per-peer count for the others),
 * and a buffer holds one block or nranks blocks, on every rank or on the root only.
 *
 * This header and coll_facts.c use nothing but the C library and abi/, so that zinc-perf,
 * which is built on the public API only, compiles them in and reads the same rows.
 */
#ifndef ZN_ALGO_COLL_FACTS_H
#define ZN_ALGO_COLL_FACTS_H

#include "abi/coll_list.h"

#include <stddef.h>
#include <stdint.h>

struct zn_coll_facts {
    const char *name; /* "AllReduce": logs, zinc-info, the state dump */
    const char *api;  /* "ncclAllReduce": the entry point named in argument errors */
    uint8_t reduces;  /* takes a reduction op; the others move bytes of any type alike */
    uint8_t rooted;   /* takes a root (zn_coll_args.root) */
    uint8_t p2p;      /* send or receive: one peer (zn_coll_args.peer), no plan */
    uint8_t send;     /* enum zn_coll_extent of sendbuff */
    uint8_t recv;     /* enum zn_coll_extent of recvbuff */
    uint8_t kernel;   /* enum zn_coll_kernel: the GPU kernel family */
    uint8_t ring;     /* ring kernels run it on the GPU; the host ring algorithm knows it */
    uint8_t sendrecv; /* it is the sends and receives of its routes (alltoall, gather,
                         scatter): the send/recv kernel on the GPU, pairwise on the host */
    uint8_t zc;       /* enum zn_coll_zc: the peers' buffers its zero-copy kernel reaches */
    int8_t dev_coll;  /* zn_dev_coll_args.coll of its kernels (the same enum zn_coll); -1: the
                         send/recv kernel */
};

/* The row of c; a row named "?" with no buffers for a value out of range (the state dump
 * reads the collective of a call in flight without a lock). */
const struct zn_coll_facts *zn_coll_facts(enum zn_coll c);
const char *zn_coll_name(enum zn_coll c);

/* Whether a rank uses a buffer of extent e at all, and whether that buffer holds a block per
 * rank (indexed by rank) rather than one block. */
static inline int zn_coll_extent_used(int e, int is_root)
{
    return e == ZN_EXT_BLOCK || e == ZN_EXT_BLOCKS ||
           (is_root && (e == ZN_EXT_ROOT_BLOCK || e == ZN_EXT_ROOT_BLOCKS));
}

static inline int zn_coll_extent_per_rank(int e)
{
    return e == ZN_EXT_BLOCKS || e == ZN_EXT_ROOT_BLOCKS;
}

/* Elements of a buffer of extent e on a rank (is_root: the rank is the call's root). Callers
 * have checked that count * nranks fits (api/coll.c). */
static inline size_t zn_coll_extent_elems(int e, size_t count, int nranks, int is_root)
{
    if (!zn_coll_extent_used(e, is_root)) return 0;
    return zn_coll_extent_per_rank(e) ? count * (size_t)nranks : count;
}

/* Elements this rank reads from sendbuff / writes to recvbuff in a call of count. */
static inline size_t zn_coll_send_elems(enum zn_coll c, size_t count, int nranks, int is_root)
{
    return zn_coll_extent_elems(zn_coll_facts(c)->send, count, nranks, is_root);
}

static inline size_t zn_coll_recv_elems(enum zn_coll c, size_t count, int nranks, int is_root)
{
    return zn_coll_extent_elems(zn_coll_facts(c)->recv, count, nranks, is_root);
}

/* Blocks of the send (receive) buffer on the rank that has the most (the root): what a buffer
 * sized alike on every rank holds. */
static inline int zn_coll_extent_blocks(int e, int nranks)
{
    return e == ZN_EXT_NONE ? 0 : zn_coll_extent_per_rank(e) ? nranks : 1;
}

static inline int zn_coll_send_blocks(enum zn_coll c, int nranks)
{
    return zn_coll_extent_blocks(zn_coll_facts(c)->send, nranks);
}

static inline int zn_coll_recv_blocks(enum zn_coll c, int nranks)
{
    return zn_coll_extent_blocks(zn_coll_facts(c)->recv, nranks);
}

/* For the collectives that move blocks without reducing (allgather, alltoall, broadcast,
 * gather, scatter): 1 if rank `from` sends a block to rank `to` (from == to: its own block,
 * a local copy), with the block's index in from's sendbuff and where it lands in to's
 * recvbuff. Every rank that has a send buffer sends to every rank that has a receive buffer,
 * and a buffer of a block per rank holds the peer's block at the peer's index. */
static inline int zn_coll_route(enum zn_coll c, int from, int to, int root, int *src_block,
                                int *dst_block)
{
    const struct zn_coll_facts *f = zn_coll_facts(c);
    if (!zn_coll_extent_used(f->send, from == root) || !zn_coll_extent_used(f->recv, to == root))
        return 0;
    *src_block = zn_coll_extent_per_rank(f->send) ? to : 0;
    *dst_block = zn_coll_extent_per_rank(f->recv) ? from : 0;
    return 1;
}

/* NCCL's in-place layout: 1 where the send buffer of an in-place call is the rank's block of
 * the receive buffer (allgather, gather), -1 where the receive buffer is the rank's block of
 * the send buffer (reducescatter, scatter), 0 where the two are the same pointer. */
static inline int zn_coll_in_place_offset(enum zn_coll c)
{
    const struct zn_coll_facts *f = zn_coll_facts(c);
    int s = zn_coll_extent_per_rank(f->send), r = zn_coll_extent_per_rank(f->recv);
    return !s && r ? 1 : s && !r ? -1 : 0;
}

/* In place, both buffers hold a block per rank in the same memory (alltoall): a block that a
 * peer's block lands on may still have to be sent. Patterns that send blocks while others
 * arrive cannot run such a call; nccl-tests leaves its result unchecked. */
static inline int zn_coll_in_place_overlaps(enum zn_coll c)
{
    const struct zn_coll_facts *f = zn_coll_facts(c);
    return f->send == ZN_EXT_BLOCKS && f->recv == ZN_EXT_BLOCKS;
}

#endif
