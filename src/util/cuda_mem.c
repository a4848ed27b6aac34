/*
 * Device memory (cudaMalloc), pinned host memory mapped into the device, synchronous copies and
 * what a pointer is (which allocation, which GPU).
 */
#include "cuda.h"

#if ZINC_HAVE_CUDA
#include "cuda_internal.h"
#include "err.h"

#include <string.h>

ncclResult_t zn_cuda_malloc(void **ptr, size_t size, const char *what)
{
    cudaError_t e = cudaMalloc(ptr, size ? size : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return zn_error(ncclUnhandledCudaError, ZN_ALLOC,
                        "cudaMalloc of %zu bytes for %s failed: %s", size, what,
                        cudaGetErrorString(e));
    }
    return ncclSuccess;
}

void zn_cuda_free(void *ptr)
{
    if (ptr) cudaFree(ptr);
}

/* Done when it returns: cudaMemset on device memory may return before the memory is set, and
 * an arena must read zero before any peer (another process, another stream) writes into it
 * -- a late memset wipes flags and data the peers already stored. A stream of its own, so
 * that the wait does not include the user's work on the legacy stream. */
ncclResult_t zn_cuda_memset(void *ptr, int v, size_t size)
{
    cudaStream_t s;
    ZN_CHECK(
        zn_cuda_rt_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
    cudaError_t e = cudaMemsetAsync(ptr, v, size, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    return zn_cuda_rt_check(e, "cudaMemset");
}

ncclResult_t zn_cuda_memcpy_htod(void *dst, const void *src, size_t size)
{
    return zn_cuda_rt_check(cudaMemcpy(dst, src, size, cudaMemcpyHostToDevice), "cudaMemcpy");
}

ncclResult_t zn_cuda_memcpy_sync(void *dst, const void *src, size_t size)
{
    cudaStream_t s;
    ZN_CHECK(
        zn_cuda_rt_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
    cudaError_t e = cudaMemcpyAsync(dst, src, size, cudaMemcpyDefault, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    return zn_cuda_rt_check(e, "cudaMemcpy");
}

int zn_cuda_mem_info(size_t *free_bytes, size_t *total_bytes)
{
    if (cudaMemGetInfo(free_bytes, total_bytes) == cudaSuccess) return 0;
    cudaGetLastError();
    return -1;
}

ncclResult_t zn_cuda_host_alloc(void **host, void **dev, size_t size)
{
    ZN_CHECK(zn_cuda_rt_check(
        cudaHostAlloc(host, size, cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc"));
    memset(*host, 0, size);
    ncclResult_t r =
        zn_cuda_rt_check(cudaHostGetDevicePointer(dev, *host, 0), "cudaHostGetDevicePointer");
    if (r != ncclSuccess) cudaFreeHost(*host);
    return r;
}

void zn_cuda_host_free(void *host)
{
    if (host) cudaFreeHost(host);
}

int zn_cuda_mem_range(const void *ptr, void **base, size_t *size)
{
    const struct zn_cuda_drv *drv = zn_cuda_driver();
    CUdeviceptr b;
    size_t n;
    if (!drv->memGetAddressRange ||
        drv->memGetAddressRange(&b, &n, (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS) {
        cudaGetLastError();
        return -1;
    }
    *base = (void *)(uintptr_t)b;
    *size = n;
    return 0;
}

size_t zn_cuda_alloc_bytes(const void *ptr)
{
    void *base;
    size_t size = 0;
    if (!ptr || zn_cuda_mem_range(ptr, &base, &size) != 0) return 0;
    return size;
}

int zn_cuda_pointer_device(const void *ptr)
{
    const struct zn_cuda_drv *drv = zn_cuda_driver();
    int d = -1;
    if (!drv->pointerGetAttribute ||
        drv->pointerGetAttribute(&d, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS)
        return -1;
    return d;
}

#endif
