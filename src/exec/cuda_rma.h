/*
 * The CUDA executor's share of the one-sided operations (api/rma_gpu.c resolves the addresses;
 * this launches them on the user's stream): puts and signals between GPUs that map each other,
 * requests to the GIN engine, waits. Nothing waits on the host, everything can be captured in
 * a graph (the kernels keep their counts in device memory, dev_abi.h).
 */
#ifndef ZN_EXEC_CUDA_RMA_H
#define ZN_EXEC_CUDA_RMA_H

#include "abi/dev_abi.h"
#include "nccl.h"

/* Puts of more bytes than this go through the copy engine (then a kernel adds the signal);
 * smaller ones are copied by the kernel that signals. */
#define ZN_CUDA_RMA_CE_MIN ((uint64_t)64 << 10)

/* Puts and signals in order on stream (any number). */
ncclResult_t zn_cuda_rma_put(const struct zn_dev_rma_put *ops, int n, void *stream);
/* GIN requests in order on stream (any number); each launch ends once the engine has read the
 * sources of its requests. */
ncclResult_t zn_cuda_rma_gin(const struct zn_dev_gin *gin, const struct zn_dev_rma_watch *watch,
                             const struct zn_dev_gin_req *reqs, int n, void *stream);
/* Waits on stream (any number). */
ncclResult_t zn_cuda_rma_wait(const struct zn_dev_rma_watch *watch, const struct zn_dev_rma_wait *w,
                              int n, void *stream);

#endif
