/*
 * zinc-perf: declarations shared by the benchmark's parts.
 *
 *   zinc-perf.c        options, the sweep over types/ops/roots/sizes, timing, report, JSON
 *   zinc-perf-coll.c   the collective table: buffer sizes, bandwidth, how to call, what to expect
 *   zinc-perf-check.c  element types, deterministic inputs, fill and check
 *   zinc-perf-mem.c    where the buffers live: host memory or CUDA device memory
 *
 * Everything here is built on the public NCCL API only (nccl.h), plus the CUDA runtime when
 * ZINC_PERF_CUDA is defined, so that the same binary runs against real NCCL by switching
 * LD_LIBRARY_PATH. The pieces of zinc it reads are the collective list (src/abi/coll_list.h:
 * which collectives there are, their names and bus factors) and the table of collective facts
 * (src/algo/coll_facts.c, compiled into zinc-perf: it uses nothing else of the library), so
 * that which collectives reduce, have a root and how big their buffers are is said once.
 */
#ifndef ZINC_PERF_H
#define ZINC_PERF_H

#include <stddef.h>
#include <stdint.h>

#include "algo/coll_facts.h"
#include "nccl.h"

/* ---------------------------------------------------------------------------------------
 * Element types (zinc-perf-check.c)
 * --------------------------------------------------------------------------------------- */

enum zp_kind { ZP_SIGNED, ZP_UNSIGNED, ZP_FLOAT };

struct zp_type {
    const char *name; /* nccl-tests' name, printed in the "type" column */
    ncclDataType_t nccl;
    int size;
    enum zp_kind kind;
    int ebits, mbits; /* floating types: exponent bits and explicit mantissa bits */
    double exact;     /* every integer in [-exact, exact] is representable */
    int max_pow2;     /* 2^max_pow2 is representable: the budget for products */
};

extern const struct zp_type zp_types[];
extern const int zp_ntypes;

/* Index into zp_types of a type name (nccl-tests' names and a few aliases), or -1. */
int zp_type_find(const char *name);

/* Convert between a double and one element of type t (round to nearest even). */
void zp_encode(const struct zp_type *t, double v, void *dst);
double zp_decode(const struct zp_type *t, const void *src);

/* ---------------------------------------------------------------------------------------
 * Reduction operations, in nccl-tests' order; ZP_NOP is for collectives without one.
 * --------------------------------------------------------------------------------------- */

enum zp_op { ZP_SUM, ZP_PROD, ZP_MAX, ZP_MIN, ZP_AVG, ZP_MULSUM, ZP_NUM_OPS, ZP_NOP = ZP_NUM_OPS };

extern const char *const zp_op_names[]; /* indexed by enum zp_op, "none" for ZP_NOP */

/* enum zp_op of an op name, or -1. */
int zp_op_find(const char *name);

/* The PreMulSum scalar of a rank; small integers keep every product exact. */
double zp_premul_scalar(int rank);

/* ---------------------------------------------------------------------------------------
 * Collectives (zinc-perf-coll.c)
 * --------------------------------------------------------------------------------------- */

/* Element counts of one size step, as nccl-tests computes them. */
struct zp_sizes {
    size_t count;            /* the count argument of the NCCL call */
    size_t sendcount;        /* elements in the send buffer */
    size_t recvcount;        /* elements in the receive buffer */
    size_t send_ip, recv_ip; /* in place: send/recv = recvbuff + rank * send_ip/recv_ip */
};

/* One rank's call. */
struct zp_call {
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;
    int root;
    int rank, nranks;
    ncclComm_t comm;
    cudaStream_t stream;
};

/* Where an expected output element comes from. */
enum zp_src {
    ZP_SRC_REDUCE, /* the reduction over all ranks of input element src_idx */
    ZP_SRC_COPY,   /* input element src_idx of rank src_rank */
    ZP_SRC_KEEP,   /* the element must be left as it was before the call */
};

enum zp_bus { ZP_BUS_ONE, ZP_BUS_RING, ZP_BUS_ALLREDUCE };

struct zp_coll {
    const char *name; /* "all_reduce"; the nccl-tests binary is name + "_perf" */
    /* The rows of the collective facts (algo/coll_facts.h) for the send buffer and for the
     * receive buffer: the same collective, or ZN_COLL_SEND and ZN_COLL_RECV for sendrecv.
     * They say whether it takes an op and a root, and how many blocks each buffer holds. */
    enum zn_coll send_side, recv_side;
    enum zp_bus bus;
    /* Issue the call. On failure *fn names the NCCL call that failed. */
    ncclResult_t (*run)(const struct zp_call *c, const char **fn);
    /* Where output element p of rank comes from (count is zp_sizes.count). */
    enum zp_src (*source)(int rank, int nranks, int root, size_t count, size_t p, int *src_rank,
                          size_t *src_idx);
};

/* Indexed by enum zn_coll (a row per row of the collective list); rows without a benchmark
 * of their own have no run function. */
extern const struct zp_coll zp_colls[];
extern const int zp_ncolls;

/* The collective takes a reduction op / a root. */
int zp_coll_has_op(const struct zp_coll *c);
int zp_coll_has_root(const struct zp_coll *c);
/* The in-place result is defined and checked; otherwise #wrong shows N/A as in nccl-tests
 * (alltoall and sendrecv with sendbuff == recvbuff). */
int zp_coll_ip_checked(const struct zp_coll *c);

/* The collective named name ("all_reduce", "allreduce", "all_reduce_perf"), or NULL. */
const struct zp_coll *zp_coll_find(const char *name);

/* Element counts for a size in bytes (nccl-tests' GetCollByteCount). */
void zp_sizes_get(const struct zp_coll *c, size_t bytes, int typesize, int nranks,
                  struct zp_sizes *sz);

/* algbw and busbw in GB/s for one call of sz taking sec seconds (nccl-tests' GetBw). */
void zp_bandwidth(const struct zp_coll *c, const struct zp_sizes *sz, int typesize, int nranks,
                  double sec, double *algbw, double *busbw);

/* ---------------------------------------------------------------------------------------
 * Inputs, fill and check (zinc-perf-check.c)
 * --------------------------------------------------------------------------------------- */

/* How inputs are generated for one (type, op, nranks, seed). */
struct zp_pattern {
    const struct zp_type *type;
    enum zp_op op;
    int nranks;
    uint64_t seed;
    int rule;         /* see zp_pattern_init */
    double lo;        /* values are lo + hash % span ... */
    uint64_t span;    /* ... */
    int contributors; /* ranks with a non-neutral value at each element */
    double rel_tol;   /* 0: exact; else the allowed relative error (avg on floating types) */
};

void zp_pattern_init(struct zp_pattern *p, const struct zp_type *t, enum zp_op op, int nranks,
                     uint64_t seed);

/* Input element k of rank, as a double (exactly representable in the type). */
double zp_input(const struct zp_pattern *p, int rank, size_t k);

/* Write input elements [0, n) of rank to dst, encoded in the pattern's type. */
void zp_fill(const struct zp_pattern *p, int rank, void *dst, size_t n);

/* Count the wrong elements of rank's output region out (sz->recvcount elements). */
size_t zp_check(const struct zp_pattern *p, const struct zp_coll *c, int rank, int root,
                const struct zp_sizes *sz, int in_place, const void *out);

/* ---------------------------------------------------------------------------------------
 * Memory modes (zinc-perf-mem.c)
 * --------------------------------------------------------------------------------------- */

/* Where buffers live. Every function prints its own error and returns -1 on failure. dev is
 * the CUDA device (ignored for host memory). All are called from the one benchmark thread. */
struct zp_mem {
    const char *name; /* "host" or "cuda" */
    /* Make dev the current device for the NCCL calls that follow (communicator init). */
    int (*use)(int dev);
    int (*alloc)(int dev, size_t bytes, void **ptr); /* zeroed, page aligned */
    void (*release)(int dev, void *ptr);
    int (*put)(int dev, void *dst, const void *src, size_t bytes); /* host -> buffer */
    int (*get)(int dev, void *dst, const void *src, size_t bytes); /* buffer -> host */
    int (*stream_create)(int dev, cudaStream_t *stream);
    void (*stream_destroy)(int dev, cudaStream_t stream);
    int (*query)(int dev, cudaStream_t stream); /* 1: all work done, 0: still running */
    /* "device  3 [0x1b] NVIDIA H100" or "device host", for the "Using devices" list. */
    void (*describe)(int dev, char *buf, size_t len);
    /* CUDA graphs (-G): capture what is issued on stream between begin and end, instantiate,
     * then replay. Every capture of the thread must have ended before any graph is
     * instantiated (thread-local capture mode forbids it). instantiate consumes graph; free
     * takes either handle or NULL. Host memory has no graphs: these report "not supported". */
    int (*graph_begin)(int dev, cudaStream_t stream);
    int (*graph_end)(int dev, cudaStream_t stream, void **graph);
    int (*graph_instantiate)(int dev, void *graph, void **exec);
    int (*graph_launch)(int dev, cudaStream_t stream, void *exec);
    void (*graph_free)(int dev, void *graph, void *exec);
};

/* GPU memory when built with CUDA, a device is visible and ZINC_DEVICE is not "host";
 * otherwise host memory. *ndev is the number of visible devices (0 for host). */
const struct zp_mem *zp_mem_select(int *ndev);

#endif
