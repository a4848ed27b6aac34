/*
 * The collective list: every collective and point-to-point call zinc knows, one row each, with
 * every fact about it that more than one place needs. Everything per collective is derived
 * from these rows: enum zn_coll (below; the kernels' argument too, abi/dev_abi.h), the facts
 * table (algo/coll_facts.c), the GPU predicates (algo/gpu.c), zinc-perf's table
 * (tools/zinc-perf-coll.c) and the lists of collectives the tests run (cmake/ZincCollList.cmake
 * reads the rows at configure time, tests/unit/coll_list_test.c checks that everyone agrees).
 *
 * The list is an X-macro (as libuv's UV_HANDLE_TYPE_MAP and UCX's UCP_PROTO_FOR_EACH): a user
 * defines X(id, name, api, bench, reduces, rooted, send, recv, kernel, ring, sendrecv, zc, bus)
 * and expands ZN_COLL_LIST(X). Symbolic columns are bare tokens that users paste onto their own
 * prefix, so this header needs nothing but the preprocessor, from host C, CUDA and zinc-perf:
 *
 *   id        the enum suffix: ZN_COLL_<id>
 *   name      the name in logs, zinc-info and the state dump ("AllReduce")
 *   api       the NCCL entry point, named in argument errors (ncclAllReduce)
 *   bench     nccl-tests' binary without "_perf", also zinc-perf's name and what the test lists
 *             of CMake hold; none: no benchmark of its own (ncclRecv: sendrecv runs it with
 *             ncclSend, a ring shift)
 *   reduces   1: takes a reduction op; the others move bytes of any type alike
 *   rooted    1: takes a root
 *   send      how much of sendbuff a rank uses, in blocks of count (enum zn_coll_extent, ZN_EXT_):
 *   recv      NONE, BLOCK (every rank), BLOCKS (nranks blocks, every rank), ROOT_BLOCK,
 *             ROOT_BLOCKS (the root only); the in-place layout, the routes of the blocks and
 *             zinc-perf's buffer sizes and algbw follow from these two (algo/coll_facts.h)
 *   kernel    the GPU kernel family (enum zn_coll_kernel, ZN_KERN_): ALLREDUCE (allreduce's own
 *             patterns: one-shot, two-shot, LL, ring LL), DIRECT (one direct pattern per
 *             collective, direct LL, zero-copy), P2P (the send/recv kernel; the point-to-point
 *             rows, which come last: no algorithm plans them)
 *   ring      1: ring kernels run it on the GPU (ring mode keeps it there; it is staged
 *             otherwise)
 *   sendrecv  1: it is the sends and receives of its routes (NCCL's alltoall, gather and
 *             scatter): the GPU runs it as the send/recv kernel where every peer's FIFO is
 *             there (not in place where its blocks overlap), the host as `pairwise`
 *   zc        the peers' registered buffers its zero-copy kernel reaches into (enum zn_coll_zc,
 *             ZN_ZC_): RECV where it stores into the destinations, SEND where it reads the
 *             peers' inputs, BOTH, NONE
 *   bus       nccl-tests' bus bandwidth factor (zinc-perf's ZP_BUS_): ALLREDUCE 2(n-1)/n,
 *             RING (n-1)/n, ONE 1
 *
 * A new collective is a row here (at the end of the collectives, before SEND), its NCCL entry
 * point (include/nccl.h, api/coll.c), its host algorithms (algo/), its kernels (device/), and
 * its tests: the checks of tests/coll/coll_test.c and tests/algo/sim.c, and zinc-perf's
 * run_<bench> and src_<bench> (tools/zinc-perf-coll.c). The compiler and the tests point at
 * each of those that is missing.
 */
#ifndef ZN_ABI_COLL_LIST_H
#define ZN_ABI_COLL_LIST_H

/* clang-format off */
#define ZN_COLL_LIST(X) \
    /* id            name           api                bench           red root send         recv         kernel     ring sr zc    bus */ \
    X(ALLREDUCE,     AllReduce,     ncclAllReduce,     all_reduce,     1,  0,   BLOCK,       BLOCK,       ALLREDUCE, 1,   0, BOTH, ALLREDUCE) \
    X(BROADCAST,     Broadcast,     ncclBroadcast,     broadcast,      0,  1,   ROOT_BLOCK,  BLOCK,       DIRECT,    1,   0, RECV, ONE) \
    X(REDUCE,        Reduce,        ncclReduce,        reduce,         1,  1,   BLOCK,       ROOT_BLOCK,  DIRECT,    1,   0, SEND, ONE) \
    X(ALLGATHER,     AllGather,     ncclAllGather,     all_gather,     0,  0,   BLOCK,       BLOCKS,      DIRECT,    1,   0, RECV, RING) \
    X(REDUCESCATTER, ReduceScatter, ncclReduceScatter, reduce_scatter, 1,  0,   BLOCKS,      BLOCK,       DIRECT,    1,   0, SEND, RING) \
    X(ALLTOALL,      AlltoAll,      ncclAlltoAll,      alltoall,       0,  0,   BLOCKS,      BLOCKS,      DIRECT,    0,   1, RECV, RING) \
    X(GATHER,        Gather,        ncclGather,        gather,         0,  1,   BLOCK,       ROOT_BLOCKS, DIRECT,    0,   1, SEND, RING) \
    X(SCATTER,       Scatter,       ncclScatter,       scatter,        0,  1,   ROOT_BLOCKS, BLOCK,       DIRECT,    0,   1, RECV, RING) \
    X(SEND,          Send,          ncclSend,          sendrecv,       0,  0,   BLOCK,       NONE,        P2P,       0,   0, NONE, ONE) \
    X(RECV,          Recv,          ncclRecv,          none,           0,  0,   NONE,        BLOCK,       P2P,       0,   0, NONE, ONE)
/* clang-format on */

/* How much of a buffer one rank uses, in blocks of count elements. */
enum zn_coll_extent {
    ZN_EXT_NONE,        /* no buffer */
    ZN_EXT_BLOCK,       /* one block on every rank */
    ZN_EXT_BLOCKS,      /* nranks blocks on every rank */
    ZN_EXT_ROOT_BLOCK,  /* one block on the root, nothing on the others */
    ZN_EXT_ROOT_BLOCKS, /* nranks blocks on the root, nothing on the others */
};

/* The GPU kernel family of a row (the kernel column). */
enum zn_coll_kernel {
    ZN_KERN_ALLREDUCE, /* allreduce's patterns (device/coll.cu, coll_ring.cuh, coll_zc.cuh) */
    ZN_KERN_DIRECT,    /* a direct pattern per collective, direct LL, zero-copy (same files) */
    ZN_KERN_P2P,       /* the send/recv kernel (device/sendrecv.cu) */
};

/* The peers' registered buffers a zero-copy kernel reaches into (the zc column). */
enum zn_coll_zc {
    ZN_ZC_NONE = 0,
    ZN_ZC_SEND = 1,
    ZN_ZC_RECV = 2,
    ZN_ZC_BOTH = 3,
};

/* One value per row, in the list's order: the collectives, then the point-to-point rows.
 * The kernels' argument (zn_dev_coll_args.coll) is the same enum, never a point-to-point
 * row. */
/* clang-format off */
enum zn_coll {
#define ZN_COLL_ENUM_(id, ...) ZN_COLL_##id,
    ZN_COLL_LIST(ZN_COLL_ENUM_)
#undef ZN_COLL_ENUM_
    ZN_NCOLL_FACTS
};

/* The collectives proper, which algorithms plan: the rows before the point-to-point ones
 * (algo/coll_facts.c asserts that those come last). */
enum {
    ZN_NCOLLS = 0
#define ZN_COLL_COUNT_(id, name, api, bench, red, root, send, recv, kernel, ...) \
        + (ZN_KERN_##kernel != ZN_KERN_P2P)
        ZN_COLL_LIST(ZN_COLL_COUNT_)
#undef ZN_COLL_COUNT_
};
/* clang-format on */

/* The facts that kernels read, for code that cannot reach the facts table (algo/coll_facts.h
 * has the same for host code; tests/unit/coll_list_test.c checks that they agree). */
#ifdef __CUDACC__
#define ZN_COLL_FN __host__ __device__ static inline
#else
#define ZN_COLL_FN static inline
#endif

/* 1 if collective c takes a reduction op. */
ZN_COLL_FN int zn_coll_reduces(int c)
{
    switch (c) {
#define ZN_COLL_CASE_(id, name, api, bench, red, ...) \
    case ZN_COLL_##id: return red;
        ZN_COLL_LIST(ZN_COLL_CASE_)
#undef ZN_COLL_CASE_
    default: return 0;
    }
}

/* 1 if collective c takes a root. */
ZN_COLL_FN int zn_coll_rooted(int c)
{
    switch (c) {
#define ZN_COLL_CASE_(id, name, api, bench, red, root, ...) \
    case ZN_COLL_##id: return root;
        ZN_COLL_LIST(ZN_COLL_CASE_)
#undef ZN_COLL_CASE_
    default: return 0;
    }
}

#endif
