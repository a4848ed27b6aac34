/*
 * Device memory shared with other processes through legacy CUDA IPC handles, and with a NIC
 * through a dmabuf fd.
 */
#include "cuda.h"

#if ZINC_HAVE_CUDA
#include "cuda_internal.h"
#include "err.h"

#include <string.h>

ncclResult_t zn_cuda_ipc_get(void *ptr, void *handle64)
{
    cudaIpcMemHandle_t h;
    _Static_assert(sizeof(h) == 64, "CUDA IPC handles are 64 bytes");
    ZN_CHECK(zn_cuda_rt_check(cudaIpcGetMemHandle(&h, ptr), "cudaIpcGetMemHandle"));
    memcpy(handle64, &h, sizeof(h));
    return ncclSuccess;
}

ncclResult_t zn_cuda_ipc_open(const void *handle64, void **ptr)
{
    cudaIpcMemHandle_t h;
    memcpy(&h, handle64, sizeof(h));
    return zn_cuda_rt_check(cudaIpcOpenMemHandle(ptr, h, cudaIpcMemLazyEnablePeerAccess),
                            "cudaIpcOpenMemHandle");
}

void zn_cuda_ipc_close(void *ptr)
{
    if (ptr) cudaIpcCloseMemHandle(ptr);
}

int zn_cuda_dmabuf_fd(void *ptr, size_t size, int *fd)
{
    const struct zn_cuda_drv *drv = zn_cuda_driver();
    int f = -1;
    if (!drv->memGetHandleForAddressRange ||
        drv->memGetHandleForAddressRange(&f, (CUdeviceptr)(uintptr_t)ptr, size,
                                         CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) != CUDA_SUCCESS ||
        f < 0) {
        cudaGetLastError();
        return -1;
    }
    *fd = f;
    return 0;
}

#endif
