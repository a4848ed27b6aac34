/*
 * Streams of zinc's own (host-driven copies and stores), and whether a user's stream is being
 * captured.
 */
#include "cuda.h"

#if ZINC_HAVE_CUDA
#include "cuda_internal.h"
#include "err.h"

ncclResult_t zn_cuda_stream_create(void **stream)
{
    cudaStream_t s;
    ZN_CHECK(
        zn_cuda_rt_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
    *stream = s;
    return ncclSuccess;
}

void zn_cuda_stream_destroy(void *stream)
{
    if (stream) cudaStreamDestroy((cudaStream_t)stream);
}

ncclResult_t zn_cuda_memcpy_async(void *dst, const void *src, size_t size, void *stream)
{
    return zn_cuda_rt_check(
        cudaMemcpyAsync(dst, src, size, cudaMemcpyDefault, (cudaStream_t)stream),
        "cudaMemcpyAsync");
}

ncclResult_t zn_cuda_memcpy_dtod_async(void *dst, const void *src, size_t size, void *stream)
{
    const struct zn_cuda_drv *drv = zn_cuda_driver();
    if (!drv->memcpyDtoDAsync) return zn_cuda_memcpy_async(dst, src, size, stream);
    /* Without a current context (a thread the runtime has not bound yet) the runtime's copy
     * binds one, and reports a real failure as well as the driver would. */
    if (drv->memcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, size,
                             (CUstream)stream) == CUDA_SUCCESS)
        return ncclSuccess;
    return zn_cuda_memcpy_async(dst, src, size, stream);
}

int zn_cuda_write_value64(void *stream, void *dst, uint64_t value)
{
    const struct zn_cuda_drv *drv = zn_cuda_driver();
    if (!drv->streamWriteValue64) return -1;
    return drv->streamWriteValue64((CUstream)stream, (CUdeviceptr)(uintptr_t)dst, value, 0) ==
                   CUDA_SUCCESS
               ? 0
               : -1;
}

ncclResult_t zn_cuda_stream_sync(void *stream)
{
    return zn_cuda_rt_check(cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize");
}

int zn_cuda_stream_capturing(cudaStream_t s)
{
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &st) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return st == cudaStreamCaptureStatusActive;
}

#endif
