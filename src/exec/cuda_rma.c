#include "cuda_rma.h"
#include "util/cuda.h"
#include "util/err.h"

#include <string.h>

#if ZINC_HAVE_CUDA

static ncclResult_t launched(int e, const char *what)
{
    if (!e) return ncclSuccess;
    return zn_error(ncclUnhandledCudaError, ZN_COLL, "launching the one-sided %s kernel failed: %s",
                    what, zn_dev_error_string(e));
}

/* The batch so far as one kernel. */
static ncclResult_t put_flush(struct zn_dev_rma_put_args *k, void *stream)
{
    if (!k->nops) return ncclSuccess;
    ncclResult_t res = launched(zn_dev_launch_rma_put(k, stream), "put");
    k->nops = 0;
    return res;
}

ncclResult_t zn_cuda_rma_put(const struct zn_dev_rma_put *ops, int n, void *stream)
{
    struct zn_dev_rma_put_args k;
    k.nops = k.pad = 0;
    for (int i = 0; i < n; i++) {
        struct zn_dev_rma_put op = ops[i];
        if (op.bytes > ZN_CUDA_RMA_CE_MIN) {
            /* In order with what the batch holds: launch it first, then the copy, then the
             * signal (in the next batch). */
            ZN_CHECK(put_flush(&k, stream));
            ZN_CHECK(zn_cuda_memcpy_dtod_async(op.dst, op.src, op.bytes, stream));
            op.bytes = 0;
        }
        if (!op.bytes && !op.sig) continue;
        k.ops[k.nops++] = op;
        if (k.nops == ZN_DEV_RMA_MAX_OPS) ZN_CHECK(put_flush(&k, stream));
    }
    return put_flush(&k, stream);
}

ncclResult_t zn_cuda_rma_gin(const struct zn_dev_gin *gin, const struct zn_dev_rma_watch *watch,
                             const struct zn_dev_gin_req *reqs, int n, void *stream)
{
    struct zn_dev_rma_gin_args k;
    k.gin = *gin;
    k.watch = *watch;
    k.pad = 0;
    for (int i = 0; i < n; i += ZN_DEV_RMA_MAX_OPS) {
        k.nreqs = n - i < ZN_DEV_RMA_MAX_OPS ? n - i : ZN_DEV_RMA_MAX_OPS;
        memcpy(k.reqs, reqs + i, (size_t)k.nreqs * sizeof(*reqs));
        ZN_CHECK(launched(zn_dev_launch_rma_gin(&k, stream), "GIN request"));
    }
    return ncclSuccess;
}

ncclResult_t zn_cuda_rma_wait(const struct zn_dev_rma_watch *watch, const struct zn_dev_rma_wait *w,
                              int n, void *stream)
{
    struct zn_dev_rma_wait_args k;
    k.watch = *watch;
    k.pad = 0;
    for (int i = 0; i < n; i += ZN_DEV_RMA_MAX_WAIT) {
        k.n = n - i < ZN_DEV_RMA_MAX_WAIT ? n - i : ZN_DEV_RMA_MAX_WAIT;
        memcpy(k.w, w + i, (size_t)k.n * sizeof(*w));
        ZN_CHECK(launched(zn_dev_launch_rma_wait(&k, stream), "wait"));
    }
    return ncclSuccess;
}

#else

static ncclResult_t no_cuda(void)
{
    return zn_error(ncclInvalidUsage, ZN_COLL,
                    "one-sided operations on GPUs: zinc was built "
                    "without CUDA");
}

ncclResult_t zn_cuda_rma_put(const struct zn_dev_rma_put *ops, int n, void *stream)
{
    return no_cuda();
}

ncclResult_t zn_cuda_rma_gin(const struct zn_dev_gin *gin, const struct zn_dev_rma_watch *watch,
                             const struct zn_dev_gin_req *reqs, int n, void *stream)
{
    return no_cuda();
}

ncclResult_t zn_cuda_rma_wait(const struct zn_dev_rma_watch *watch, const struct zn_dev_rma_wait *w,
                              int n, void *stream)
{
    return no_cuda();
}

#endif
