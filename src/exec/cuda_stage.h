/*
 * The staged path of cuda communicators whose GPUs cannot all reach each other (or with
 * ZINC_P2P_DISABLE=1): each operation is copied to pinned host memory in stream order, run by
 * the communicator's proxy thread (proxy/staging_client.h) with the host algorithms and transports
 * (shm within a host, sockets between hosts), and copied back, with two one-thread kernels as
 * doorbell and gate (abi/dev_abi.h). Everything stays stream-ordered and can be captured in a
 * graph.
 */
#ifndef ZN_EXEC_CUDA_STAGE_H
#define ZN_EXEC_CUDA_STAGE_H

#include "abi/dev_abi.h"
#include "exec/cuda_op.h"

struct zn_stage;

ncclResult_t zn_stage_create(struct zn_exec_comm *host, int cuda_dev, struct zn_stage **out);
/* Enqueue one group's operations of the communicator on their streams, ordered with the
 * communicator's other launches by ord; dev is what the gate kernel watches (abort, peers). */
ncclResult_t zn_stage_launch(struct zn_stage *st, struct zn_cuda_order *ord,
                             const struct zn_dev_comm *dev, struct zn_cuda_op *ops, int n);
/* The first staged operation that failed (the stream still moves on): its reason, or NULL. */
const char *zn_stage_failure(const struct zn_stage *st);
/* Stop the proxy (after the device is idle) and free everything. */
void zn_stage_destroy(struct zn_stage *st);
/* Free the pinned staging of past operations (ncclCommSuspend; the device is idle): the next
 * operation allocates again. Captured operations keep theirs (their graphs replay it). */
void zn_stage_trim(struct zn_stage *st);
/* Device memory the staged path holds (its counter), for ncclCommMemStats. NULL: 0. */
size_t zn_stage_gpu_bytes(const struct zn_stage *st);

#endif
