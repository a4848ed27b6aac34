/*
 * The GPU algorithms: which kernel pattern a collective on a GPU communicator runs, and on how
 * many channels. Like the host algorithms (algo.h) every entry has supports() and cost(); the
 * choice is pure (it reads only the call and the communicator's settings), so it is made here
 * and tested without a GPU (tests/unit/gpu_select_test.c), and exec only packs the chosen
 * kernel's arguments and launches it.
 *
 * cost() is not a time: the GPU algorithms have measured crossovers, not a model, and cost()
 * encodes them as a preference (lower wins, INFINITY: only when ZINC_ALGO names the entry).
 * The measurements behind each constant are next to it in gpu.c.
 */
#ifndef ZN_ALGO_GPU_H
#define ZN_ALGO_GPU_H

#include "algo/algo.h"

#include <stddef.h>

/* One collective on a GPU communicator, as the selection sees it. */
struct zn_gpu_call {
    enum zn_coll coll;
    size_t bytes; /* count * element size (per-rank block where NCCL counts blocks) */
    size_t count; /* elements of that size (count and esize as in zn_coll_args) */
    size_t esize;
    int nranks;
    int ring_mode;   /* only the ring neighbours' arenas are mapped */
    int all_fifos;   /* ring mode, but every peer's FIFO is there (mapped, or a net shadow) */
    int net;         /* the communicator crosses hosts through net shadows (every rank the
                        same, whether or not its own peers are shadows): FIFO slots only, no LL
                        packets */
    int premul;      /* PreMulSum: each rank scales its own input */
    int in_place;    /* sendbuf == recvbuf */
    int registered;  /* the buffers zero-copy needs are registered and mapped by every peer */
    int max_ch;      /* channels of the arena (ZINC_GPU_CHANNELS) */
    size_t chunk;    /* bytes per channel of the FIFO kernels (ZINC_GPU_CHUNK) */
    size_t ll_chunk; /* bytes per channel of the LL kernels (ZINC_GPU_LL_CHUNK) */
    const char *force_algo;  /* ZINC_ALGO, or NULL */
    const char *force_proto; /* ZINC_PROTO (LL or SIMPLE), or NULL */
};

#define ZN_GPU_FORCE_MAX 2

struct zn_gpu_algo {
    const char *name;                    /* unique (zinc-info) */
    const char *force[ZN_GPU_FORCE_MAX]; /* the ZINC_ALGO values that pick it (NULL: unused) */
    const char *label;                   /* how the TUNE log names the choice */
    const char *doc;                     /* what it does and which collectives (zinc-info) */
    int dev_algo;                        /* the kernel's pattern (enum in abi/dev_abi.h) */
    int registered; /* needs registered buffers (chosen before any forced FIFO pattern) */
    int (*supports)(const struct zn_gpu_call *c);
    double (*cost)(const struct zn_gpu_call *c);
    int (*channels)(const struct zn_gpu_call *c);
};

/* Every GPU algorithm, in a fixed order (ZINC_ALGO picks the first entry it names that
 * supports the call). */
const struct zn_gpu_algo *const *zn_gpu_algo_list(int *count);

/* The GPU algorithm for c: registered-buffer patterns where they are the default or forced,
 * else the one ZINC_ALGO names if it supports the call, else the cheapest. *nch gets its
 * channel count. NULL only in ring mode without all_fifos for a collective that
 * zn_gpu_ring_on_gpu does not name (exec stages those); otherwise the direct or ring patterns
 * support every call. */
const struct zn_gpu_algo *zn_gpu_algo_select(const struct zn_gpu_call *c, int *nch);

/* Ring mode runs these collectives with the ring kernels on the GPU and stages the rest (the
 * list's ring column). */
int zn_gpu_ring_on_gpu(enum zn_coll c);

/* Across hosts with every peer's FIFO (all_fifos), these collectives run as the send/recv
 * kernel's sends and receives (their routes in coll_facts.h) instead of a direct pattern. */
int zn_gpu_as_sendrecv(enum zn_coll c, int in_place);

/* The registered buffers the zero-copy kernel of c reaches into on the peers (the list's zc
 * column, abi/coll_list.h). */
enum { ZN_GPU_ZC_SEND = ZN_ZC_SEND, ZN_GPU_ZC_RECV = ZN_ZC_RECV };
int zn_gpu_zc_buffers(enum zn_coll c);

#endif
