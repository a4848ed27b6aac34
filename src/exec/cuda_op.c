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

/* Make stream wait for everything queued so far on prev, through *ev (made on first use). */
static ncclResult_t wait_stream(void *prev, void **ev, void *stream)
{
    if (!*ev) {
        cudaEvent_t e;
        if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess)
            return zn_error(ncclUnhandledCudaError, ZN_COLL, "cudaEventCreate failed");
        *ev = e;
    }
    cudaError_t e = cudaEventRecord((cudaEvent_t)*ev, (cudaStream_t)prev);
    if (e == cudaSuccess) e = cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)*ev, 0);
    if (e != cudaSuccess)
        return zn_error(ncclUnhandledCudaError, ZN_COLL,
                        "ordering this communicator's launches across streams failed: %s",
                        cudaGetErrorString(e));
    return ncclSuccess;
}

ncclResult_t zn_cuda_order(struct zn_cuda_order *o, void *stream)
{
    /* An event is recorded only when the stream changes, so the usual one-stream case costs
     * nothing: an event recorded now on the previous stream covers everything queued there. */
    o->cur = capture_id(o, stream);
    if (!o->cur) {
        if (!o->last_stream || o->last_stream == stream) return ncclSuccess;
        return wait_stream(o->last_stream, &o->last_event, stream);
    }
    if (o->cur != o->cap_id) { /* the first launch of this capture */
        o->cap_id = o->cur;
        o->cap_stream = NULL;
    }
    if (!o->graph_order || !o->cap_stream || o->cap_stream == stream) return ncclSuccess;
    return wait_stream(o->cap_stream, &o->cap_event, stream);
}

void zn_cuda_order_fini(struct zn_cuda_order *o)
{
    if (o->last_event) cudaEventDestroy((cudaEvent_t)o->last_event);
    if (o->cap_event) cudaEventDestroy((cudaEvent_t)o->cap_event);
    o->last_event = o->cap_event = NULL;
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
    if (o->cur)
        o->cap_stream = stream;
    else
        o->last_stream = stream;
    return ncclSuccess;
}
