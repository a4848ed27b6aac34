/*
 * The staged path of cuda communicators whose GPUs cannot all reach each other (or with
 * ZINC_P2P_DISABLE=1): each operation is copied to pinned host memory in stream order, run by
 * the communicator's proxy thread with the host algorithms and transports (shm within a host,
 * sockets between hosts), and copied back, with two one-thread kernels as doorbell and gate
 * (abi/dev_abi.h). Everything stays stream-ordered and can be captured in a graph.
 */
#ifndef ZN_EXEC_CUDA_STAGE_H
#define ZN_EXEC_CUDA_STAGE_H

#include "abi/dev_abi.h"
#include "exec/exec.h"

#include <pthread.h>
#include <stdatomic.h>

struct zn_cuda_op;
struct zn_cuda_ctx;
struct zn_stage_desc;

struct zn_stage {
    struct zn_exec_comm *host; /* the host executor's view of the same communicator */
    int cuda_dev, rank, nranks;
    struct zn_dev_doorbell *bell_host, *bell_dev;
    uint64_t *seq_dev;
    pthread_t thread;
    int thread_started;
    atomic_int stop;
    pthread_mutex_t lock;
    struct zn_stage_desc **descs; /* by id; NULL = free */
    int ndescs;
    void *pool; /* pinned staging of non-captured operations (they run one at a time) */
    size_t pool_size;
    void **retired; /* outgrown pools, freed at the end (a queued copy may still use one) */
    int nretired;
    atomic_int failed; /* ncclResult_t of a failed operation (the stream still moves on) */
    char fail_msg[512];
};

ncclResult_t zn_stage_create(struct zn_exec_comm *host, int cuda_dev, struct zn_stage **out);
/* Enqueue one group's operations of the communicator on their streams. */
ncclResult_t zn_stage_launch(struct zn_stage *st, struct zn_cuda_ctx *cx, struct zn_cuda_op *ops,
                             int n);
/* Stop the proxy (after the device is idle) and free everything. */
void zn_stage_destroy(struct zn_stage *st);

#endif
