/*
 * CUDA devices: selection, the thread's device, bus ids, peer access as the driver answers it,
 * device attributes.
 */
#include "cuda.h"

#if ZINC_HAVE_CUDA
#include "cuda_internal.h"
#include "err.h"

int zn_cuda_available(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* no driver or no device: not an error for a host build */
        return 0;
    }
    return n > 0;
}

int zn_cuda_current_device(void)
{
    int d;
    if (cudaGetDevice(&d) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return d;
}

ncclResult_t zn_cuda_set_device(int dev)
{
    return zn_cuda_rt_check(cudaSetDevice(dev), "cudaSetDevice");
}

int zn_cuda_enter(int dev)
{
    int cur = zn_cuda_current_device();
    if (dev < 0) return cur;
    if (cudaSetDevice(dev) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return cur;
}

void zn_cuda_leave(int dev, int prev)
{
    if (dev >= 0 && prev >= 0 && dev != prev) cudaSetDevice(prev);
}

ncclResult_t zn_cuda_bus_id(int dev, char *buf, size_t len)
{
    return zn_cuda_rt_check(cudaDeviceGetPCIBusId(buf, (int)len, dev), "cudaDeviceGetPCIBusId");
}

int zn_cuda_device_by_bus_id(const char *bus_id)
{
    int d;
    if (cudaDeviceGetByPCIBusId(&d, bus_id) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return d;
}

int zn_cuda_can_access_peer(int dev, int peer)
{
    if (dev == peer) return 1;
    int ok = 0;
    if (cudaDeviceCanAccessPeer(&ok, dev, peer) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return ok;
}

ncclResult_t zn_cuda_enable_peer_access(int dev, int peer)
{
    if (dev == peer) return ncclSuccess;
    int cur = zn_cuda_current_device();
    ZN_CHECK(zn_cuda_set_device(dev));
    cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();
        e = cudaSuccess;
    }
    if (cur >= 0) cudaSetDevice(cur);
    return zn_cuda_rt_check(e, "cudaDeviceEnablePeerAccess");
}

int zn_cuda_cumem_fd_supported(int dev)
{
    const struct zn_cuda_drv *drv = zn_cuda_driver();
    if (!drv->ok) return 0;
    CUdevice d;
    int vmm = 0, fd = 0;
    if (drv->deviceGet(&d, dev) != CUDA_SUCCESS ||
        drv->deviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d) !=
            CUDA_SUCCESS ||
        drv->deviceGetAttribute(&fd,
                                CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                                d) != CUDA_SUCCESS)
        return 0;
    return vmm && fd;
}

int zn_cuda_sm_count(int dev)
{
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

ncclResult_t zn_cuda_device_sync(void)
{
    return zn_cuda_rt_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

#endif
