/*
 * Exportable device memory through the driver's virtual memory API (cuMem): allocations that
 * other processes map from a POSIX file descriptor, and their release and rebuild at the same
 * addresses (suspension).
 *
 * The driver's calls on an allocation act in the context of the device that owns it: a
 * program that allocated on several GPUs may free or look up any of them whatever device is
 * current (nccl-tests' one-process mode frees every GPU's buffers from the last one), as NCCL
 * allows. zn_cuda_enter switches the calling thread to that device, zn_cuda_leave back.
 */
#include "cuda.h"

#if ZINC_HAVE_CUDA
#include "cuda_internal.h"
#include "err.h"
#include "size.h"

#include <string.h>

static void prop_for(int dev, CUmemAllocationProp *p)
{
    memset(p, 0, sizeof(*p));
    p->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    p->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p->location.id = dev;
}

static ncclResult_t map_rw(struct zn_cumem *m, CUmemGenericAllocationHandle h, int dev)
{
    const struct zn_cuda_drv *drv = zn_cuda_driver();
    CUdeviceptr va = 0;
    ZN_CHECK(
        zn_cuda_drv_check(drv->memAddressReserve(&va, m->size, 0, 0, 0), "cuMemAddressReserve"));
    ncclResult_t r = zn_cuda_drv_check(drv->memMap(va, m->size, 0, h, 0), "cuMemMap");
    if (r != ncclSuccess) {
        drv->memAddressFree(va, m->size);
        return r;
    }
    CUmemAccessDesc acc = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev },
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    r = zn_cuda_drv_check(drv->memSetAccess(va, m->size, &acc, 1), "cuMemSetAccess");
    if (r != ncclSuccess) {
        drv->memUnmap(va, m->size);
        drv->memAddressFree(va, m->size);
        return r;
    }
    m->ptr = (void *)(uintptr_t)va;
    m->handle = (uint64_t)h;
    m->dev = dev;
    return ncclSuccess;
}

ncclResult_t zn_cumem_alloc(int dev, size_t size, struct zn_cumem *out)
{
    const struct zn_cuda_drv *drv = zn_cuda_driver();
    if (!drv->ok)
        return zn_error(ncclUnhandledCudaError, ZN_ALLOC,
                        "the CUDA driver lacks the cuMem virtual memory API");
    CUmemAllocationProp prop;
    prop_for(dev, &prop);
    size_t gran = 0;
    ZN_CHECK(
        zn_cuda_drv_check(drv->memGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                          "cuMemGetAllocationGranularity"));
    if (!gran) gran = 2 << 20;
    struct zn_cumem m = { .size = gran };
    if (size && zn_round_up(size, gran, &m.size) != 0)
        return zn_error(ncclInvalidArgument, ZN_ALLOC,
                        "cannot allocate %zu bytes of GPU memory: the size is too large", size);
    CUmemGenericAllocationHandle h;
    ZN_CHECK(zn_cuda_drv_check(drv->memCreate(&h, m.size, &prop, 0), "cuMemCreate"));
    ncclResult_t r = map_rw(&m, h, dev);
    if (r != ncclSuccess) {
        drv->memRelease(h);
        return r;
    }
    *out = m;
    return ncclSuccess;
}

ncclResult_t zn_cumem_share_local(const struct zn_cumem *m)
{
    const struct zn_cuda_drv *drv = zn_cuda_driver();
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return ncclSuccess;
    }
    for (int d = 0; d < n; d++) {
        if (d == m->dev || !zn_cuda_can_access_peer(d, m->dev)) continue;
        CUmemAccessDesc acc = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d },
                                .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        ZN_CHECK(zn_cuda_drv_check(
            drv->memSetAccess((CUdeviceptr)(uintptr_t)m->ptr, m->size, &acc, 1), "cuMemSetAccess"));
    }
    return ncclSuccess;
}

ncclResult_t zn_cumem_export_fd(const struct zn_cumem *m, int *fd)
{
    const struct zn_cuda_drv *drv = zn_cuda_driver();
    int f = -1;
    ZN_CHECK(zn_cuda_drv_check(drv->memExport(&f, (CUmemGenericAllocationHandle)m->handle,
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                               "cuMemExportToShareableHandle"));
    *fd = f;
    return ncclSuccess;
}

ncclResult_t zn_cumem_import_fd(int fd, size_t size, int dev, struct zn_cumem *out)
{
    const struct zn_cuda_drv *drv = zn_cuda_driver();
    if (!drv->ok)
        return zn_error(ncclUnhandledCudaError, ZN_ALLOC,
                        "the CUDA driver lacks the cuMem virtual memory API");
    CUmemGenericAllocationHandle h;
    ZN_CHECK(zn_cuda_drv_check(
        drv->memImport(&h, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
        "cuMemImportFromShareableHandle"));
    struct zn_cumem m = { .size = size, .imported = 1 };
    ncclResult_t r = map_rw(&m, h, dev);
    if (r != ncclSuccess) {
        drv->memRelease(h);
        return r;
    }
    *out = m;
    return ncclSuccess;
}

void zn_cumem_free(struct zn_cumem *m)
{
    const struct zn_cuda_drv *drv = zn_cuda_driver();
    if (!m->ptr) return;
    int cur = zn_cuda_enter(m->dev);
    CUdeviceptr va = (CUdeviceptr)(uintptr_t)m->ptr;
    if (!m->released) drv->memUnmap(va, m->size);
    drv->memAddressFree(va, m->size);
    if (!m->released) drv->memRelease((CUmemGenericAllocationHandle)m->handle);
    zn_cuda_leave(m->dev, cur);
    m->ptr = NULL;
}

ncclResult_t zn_cumem_release(struct zn_cumem *m)
{
    const struct zn_cuda_drv *drv = zn_cuda_driver();
    if (!m->ptr || m->released) return ncclSuccess;
    int cur = zn_cuda_enter(m->dev);
    ncclResult_t r =
        zn_cuda_drv_check(drv->memUnmap((CUdeviceptr)(uintptr_t)m->ptr, m->size), "cuMemUnmap");
    /* Unmapped, the range holds nothing of the handle any more: drop the handle even if that
     * fails (it cannot be mapped again through this range). */
    if (r == ncclSuccess) {
        ncclResult_t rr = zn_cuda_drv_check(
            drv->memRelease((CUmemGenericAllocationHandle)m->handle), "cuMemRelease");
        m->handle = 0;
        m->released = 1;
        r = rr;
    }
    zn_cuda_leave(m->dev, cur);
    return r;
}

/* Map h at m's reserved range, read-write for m->dev. */
static ncclResult_t map_at(struct zn_cumem *m, CUmemGenericAllocationHandle h)
{
    const struct zn_cuda_drv *drv = zn_cuda_driver();
    CUdeviceptr va = (CUdeviceptr)(uintptr_t)m->ptr;
    ZN_CHECK(zn_cuda_drv_check(drv->memMap(va, m->size, 0, h, 0), "cuMemMap"));
    CUmemAccessDesc acc = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = m->dev },
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    ncclResult_t r = zn_cuda_drv_check(drv->memSetAccess(va, m->size, &acc, 1), "cuMemSetAccess");
    if (r != ncclSuccess) drv->memUnmap(va, m->size);
    return r;
}

/* h was just made or imported (made says whether that worked): map it at m's reserved range,
 * where it becomes m's memory; on failure nothing is left behind. */
static ncclResult_t map_made(struct zn_cumem *m, ncclResult_t made, CUmemGenericAllocationHandle h)
{
    const struct zn_cuda_drv *drv = zn_cuda_driver();
    if (made != ncclSuccess) return made;
    ncclResult_t r = map_at(m, h);
    if (r != ncclSuccess) {
        drv->memRelease(h);
        return r;
    }
    m->handle = (uint64_t)h;
    m->released = 0;
    return ncclSuccess;
}

ncclResult_t zn_cumem_recreate(struct zn_cumem *m)
{
    const struct zn_cuda_drv *drv = zn_cuda_driver();
    if (!m->released) return ncclSuccess;
    if (m->imported)
        return zn_error(ncclInternalError, ZN_ALLOC,
                        "cuMem: a peer's allocation at %p is remapped from its fd, not recreated",
                        m->ptr);
    int cur = zn_cuda_enter(m->dev);
    CUmemAllocationProp prop;
    prop_for(m->dev, &prop);
    CUmemGenericAllocationHandle h = 0;
    ncclResult_t r = zn_cuda_drv_check(drv->memCreate(&h, m->size, &prop, 0), "cuMemCreate");
    r = map_made(m, r, h);
    zn_cuda_leave(m->dev, cur);
    return r;
}

ncclResult_t zn_cumem_reimport_fd(int fd, struct zn_cumem *m)
{
    const struct zn_cuda_drv *drv = zn_cuda_driver();
    if (!m->released) return ncclSuccess;
    int cur = zn_cuda_enter(m->dev);
    CUmemGenericAllocationHandle h = 0;
    ncclResult_t r = zn_cuda_drv_check(
        drv->memImport(&h, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
        "cuMemImportFromShareableHandle");
    r = map_made(m, r, h);
    zn_cuda_leave(m->dev, cur);
    return r;
}

int zn_cumem_find(const void *ptr, struct zn_cumem *m)
{
    const struct zn_cuda_drv *drv = zn_cuda_driver();
    if (!drv->ok) return -1;
    int dev = zn_cuda_pointer_device(ptr);
    if (dev < 0) return -1;
    int cur = zn_cuda_enter(dev);
    CUdeviceptr base = 0;
    size_t size = 0;
    CUmemGenericAllocationHandle h;
    int found =
        drv->memGetAddressRange(&base, &size, (CUdeviceptr)(uintptr_t)ptr) == CUDA_SUCCESS &&
        drv->memRetain(&h, (void *)(uintptr_t)base) == CUDA_SUCCESS;
    if (found) drv->memRelease(h); /* the allocation keeps its own reference */
    zn_cuda_leave(dev, cur);
    if (!found) return -1;
    *m = (struct zn_cumem){
        .ptr = (void *)(uintptr_t)base, .size = size, .handle = (uint64_t)h, .dev = dev
    };
    return 0;
}

int zn_cumem_lookup(void *ptr, struct zn_cumem *m)
{
    struct zn_cumem f;
    if (zn_cumem_find(ptr, &f) != 0 || f.ptr != ptr) return -1;
    *m = f;
    return 0;
}

#endif
