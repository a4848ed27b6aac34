#include "cuda_op.h"
#include "util/err.h"

#if ZINC_HAVE_CUDA
#include <cuda_runtime_api.h>

ncclResult_t zn_cuda_order(struct zn_cuda_order *o, void *stream)
{
    /* Recorded only when the stream changes, so the usual one-stream case costs nothing: an
     * event recorded now on the previous stream covers everything queued there so far. */
    if (!o->last_stream || o->last_stream == stream) return ncclSuccess;
    if (!o->last_event) {
        cudaEvent_t ev;
        if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess)
            return zn_error(ncclUnhandledCudaError, ZN_COLL, "cudaEventCreate failed");
        o->last_event = ev;
    }
    cudaError_t e = cudaEventRecord((cudaEvent_t)o->last_event, (cudaStream_t)o->last_stream);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)o->last_event, 0);
    if (e != cudaSuccess)
        return zn_error(ncclUnhandledCudaError, ZN_COLL,
                        "ordering this communicator's launches across streams failed: %s",
                        cudaGetErrorString(e));
    return ncclSuccess;
}

void zn_cuda_order_fini(struct zn_cuda_order *o)
{
    if (o->last_event) cudaEventDestroy((cudaEvent_t)o->last_event);
    o->last_event = NULL;
}

#else

ncclResult_t zn_cuda_order(struct zn_cuda_order *o, void *stream)
{
    return ncclSuccess;
}

void zn_cuda_order_fini(struct zn_cuda_order *o) {}

#endif

ncclResult_t zn_cuda_note(struct zn_cuda_order *o, void *stream)
{
    o->last_stream = stream;
    return ncclSuccess;
}
