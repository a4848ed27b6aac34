/*
 * ncclMemAlloc / ncclMemFree: device memory that other processes' GPUs can map (cuMem with
 * POSIX file descriptor handles, on the calling thread's current device) and that this
 * process's other GPUs reach directly where they can peer to peer, as NCCL gives.
 */
#include "group.h"
#include "util/cuda.h"

ZN_API(ncclResult_t, ncclMemAlloc, void **ptr, size_t size)
{
    if (!ptr) return zn_error(ncclInvalidArgument, ZN_ALLOC, "ncclMemAlloc: ptr is NULL");
    *ptr = NULL;
    if (size == 0) return ncclSuccess;
    int dev = zn_cuda_available() ? zn_cuda_current_device() : -1;
    if (dev < 0)
        return zn_error(ncclInvalidUsage, ZN_ALLOC,
                        "ncclMemAlloc: no CUDA device in this process (host communicators take "
                        "any host memory: use malloc)");
    if (!zn_cuda_cumem_fd_supported(dev))
        return zn_error(ncclInvalidUsage, ZN_ALLOC,
                        "ncclMemAlloc: GPU %d does not support exportable cuMem allocations; "
                        "use cudaMalloc",
                        dev);
    struct zn_cumem m;
    ZN_CHECK(zn_cumem_alloc(dev, size, &m));
    ncclResult_t r = zn_cumem_share_local(&m);
    if (r != ncclSuccess) {
        zn_cumem_free(&m);
        return r;
    }
    *ptr = m.ptr;
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclMemFree, void *ptr)
{
    if (!ptr) return ncclSuccess;
    struct zn_cumem m;
    if (zn_cumem_lookup(ptr, &m) != 0)
        return zn_error(ncclInvalidArgument, ZN_ALLOC,
                        "ncclMemFree: %p is not the start of memory from ncclMemAlloc", ptr);
    zn_cumem_free(&m);
    return ncclSuccess;
}
