#include "cuda_op.h"
#include "util/err.h"

#if ZINC_HAVE_CUDA
#include <cuda_runtime_api.h>

/* The id of the capture stream is part of (0: none, or graphUsageMode 0). */
static unsigned long long capture_id(const struct zn_cuda_order *o, void *stream)
{
    if (o->graph_mode == 0) return 0;
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    if (cudaStreamGetCaptureInfo((cudaStream_t)stream, &st, &id, NULL, NULL, NULL, NULL) !=
        cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return st == cudaStreamCaptureStatusActive ? id : 0;
}

ncclResult_t zn_cuda_order(struct zn_cuda_order *o, void *stream)
{
    o->cur_capture = capture_id(o, stream);
    if (o->cur_capture != o->last_capture) o->last_stream = NULL; /* another domain */
    if (o->cur_capture && !o->graph_order) return ncclSuccess;
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
    o->last_capture = o->cur_capture;
    return ncclSuccess;
}
