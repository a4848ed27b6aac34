#include "cuda.h"
#include "err.h"
#include "size.h"

#include <stdio.h>
#include <string.h>

#if ZINC_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>

static _Thread_local char cuda_err[256];

static ncclResult_t rt_check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return ncclSuccess;
    snprintf(cuda_err, sizeof(cuda_err), "%s", cudaGetErrorString(e));
    return zn_error(ncclUnhandledCudaError, ZN_INIT, "%s failed: %s (CUDA error %d)", what,
                    cudaGetErrorString(e), (int)e);
}

const char *zn_cuda_last_error_string(void)
{
    return cuda_err;
}

/* Driver entry points, looked up once through the runtime. */
static struct {
    CUresult (*memCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                          unsigned long long);
    CUresult (*memRelease)(CUmemGenericAllocationHandle);
    CUresult (*memAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*memAddressFree)(CUdeviceptr, size_t);
    CUresult (*memMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                       unsigned long long);
    CUresult (*memUnmap)(CUdeviceptr, size_t);
    CUresult (*memSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*memExport)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                          unsigned long long);
    CUresult (*memImport)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
    CUresult (*memGranularity)(size_t *, const CUmemAllocationProp *,
                               CUmemAllocationGranularity_flags);
    CUresult (*memRetain)(CUmemGenericAllocationHandle *, void *);
    CUresult (*memGetAddressRange)(CUdeviceptr *, size_t *, CUdeviceptr);
    CUresult (*getErrorString)(CUresult, const char **);
    CUresult (*deviceGet)(CUdevice *, int);
    CUresult (*deviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*memGetHandleForAddressRange)(void *, CUdeviceptr, size_t, CUmemRangeHandleType,
                                            unsigned long long); /* optional: dmabuf export */
    CUresult (*pointerGetAttribute)(void *, CUpointer_attribute, CUdeviceptr);
    CUresult (*streamWriteValue64)(CUstream, CUdeviceptr, cuuint64_t,
                                   unsigned int); /* optional: stream memory operations */
    CUresult (*memcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream); /* optional */
    int ok;
} drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void *entry(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st;
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &st) != cudaSuccess ||
        st != cudaDriverEntryPointSuccess)
        return NULL;
    return fn;
}

static void load_driver(void)
{
#define ZN_ENTRY(field, name) *(void **)&drv.field = entry(name)
    ZN_ENTRY(memCreate, "cuMemCreate");
    ZN_ENTRY(memRelease, "cuMemRelease");
    ZN_ENTRY(memAddressReserve, "cuMemAddressReserve");
    ZN_ENTRY(memAddressFree, "cuMemAddressFree");
    ZN_ENTRY(memMap, "cuMemMap");
    ZN_ENTRY(memUnmap, "cuMemUnmap");
    ZN_ENTRY(memSetAccess, "cuMemSetAccess");
    ZN_ENTRY(memExport, "cuMemExportToShareableHandle");
    ZN_ENTRY(memImport, "cuMemImportFromShareableHandle");
    ZN_ENTRY(memGranularity, "cuMemGetAllocationGranularity");
    ZN_ENTRY(memRetain, "cuMemRetainAllocationHandle");
    ZN_ENTRY(memGetAddressRange, "cuMemGetAddressRange");
    ZN_ENTRY(getErrorString, "cuGetErrorString");
    ZN_ENTRY(deviceGet, "cuDeviceGet");
    ZN_ENTRY(deviceGetAttribute, "cuDeviceGetAttribute");
    ZN_ENTRY(memGetHandleForAddressRange, "cuMemGetHandleForAddressRange");
    ZN_ENTRY(pointerGetAttribute, "cuPointerGetAttribute");
    ZN_ENTRY(streamWriteValue64, "cuStreamWriteValue64");
    ZN_ENTRY(memcpyDtoDAsync, "cuMemcpyDtoDAsync");
#undef ZN_ENTRY
    drv.ok = drv.memCreate && drv.memRelease && drv.memAddressReserve && drv.memAddressFree &&
             drv.memMap && drv.memUnmap && drv.memSetAccess && drv.memExport && drv.memImport &&
             drv.memGranularity && drv.memRetain && drv.memGetAddressRange && drv.deviceGet &&
             drv.deviceGetAttribute && drv.pointerGetAttribute;
}

static ncclResult_t drv_check(CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS) return ncclSuccess;
    const char *s = "unknown";
    if (drv.getErrorString) drv.getErrorString(r, &s);
    snprintf(cuda_err, sizeof(cuda_err), "%s", s);
    return zn_error(ncclUnhandledCudaError, ZN_ALLOC, "%s failed: %s (CUDA driver error %d)", what,
                    s, (int)r);
}

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
    return rt_check(cudaSetDevice(dev), "cudaSetDevice");
}

ncclResult_t zn_cuda_bus_id(int dev, char *buf, size_t len)
{
    return rt_check(cudaDeviceGetPCIBusId(buf, (int)len, dev), "cudaDeviceGetPCIBusId");
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
    return rt_check(e, "cudaDeviceEnablePeerAccess");
}

int zn_cuda_cumem_fd_supported(int dev)
{
    pthread_once(&drv_once, load_driver);
    if (!drv.ok) return 0;
    CUdevice d;
    int vmm = 0, fd = 0;
    if (drv.deviceGet(&d, dev) != CUDA_SUCCESS ||
        drv.deviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d) !=
            CUDA_SUCCESS ||
        drv.deviceGetAttribute(&fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
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
    ZN_CHECK(rt_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
    cudaError_t e = cudaMemsetAsync(ptr, v, size, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    return rt_check(e, "cudaMemset");
}

ncclResult_t zn_cuda_memcpy_htod(void *dst, const void *src, size_t size)
{
    return rt_check(cudaMemcpy(dst, src, size, cudaMemcpyHostToDevice), "cudaMemcpy");
}

ncclResult_t zn_cuda_memcpy_sync(void *dst, const void *src, size_t size)
{
    cudaStream_t s;
    ZN_CHECK(rt_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
    cudaError_t e = cudaMemcpyAsync(dst, src, size, cudaMemcpyDefault, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    return rt_check(e, "cudaMemcpy");
}

int zn_cuda_mem_info(size_t *free_bytes, size_t *total_bytes)
{
    if (cudaMemGetInfo(free_bytes, total_bytes) == cudaSuccess) return 0;
    cudaGetLastError();
    return -1;
}

ncclResult_t zn_cuda_stream_create(void **stream)
{
    cudaStream_t s;
    ZN_CHECK(rt_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
    *stream = s;
    return ncclSuccess;
}

void zn_cuda_stream_destroy(void *stream)
{
    if (stream) cudaStreamDestroy((cudaStream_t)stream);
}

ncclResult_t zn_cuda_memcpy_async(void *dst, const void *src, size_t size, void *stream)
{
    return rt_check(cudaMemcpyAsync(dst, src, size, cudaMemcpyDefault, (cudaStream_t)stream),
                    "cudaMemcpyAsync");
}

ncclResult_t zn_cuda_memcpy_dtod_async(void *dst, const void *src, size_t size, void *stream)
{
    pthread_once(&drv_once, load_driver);
    if (!drv.memcpyDtoDAsync) return zn_cuda_memcpy_async(dst, src, size, stream);
    /* Without a current context (a thread the runtime has not bound yet) the runtime's copy
     * binds one, and reports a real failure as well as the driver would. */
    if (drv.memcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, size,
                            (CUstream)stream) == CUDA_SUCCESS)
        return ncclSuccess;
    return zn_cuda_memcpy_async(dst, src, size, stream);
}

int zn_cuda_write_value64(void *stream, void *dst, uint64_t value)
{
    pthread_once(&drv_once, load_driver);
    if (!drv.streamWriteValue64) return -1;
    return drv.streamWriteValue64((CUstream)stream, (CUdeviceptr)(uintptr_t)dst, value, 0) ==
                   CUDA_SUCCESS
               ? 0
               : -1;
}

ncclResult_t zn_cuda_stream_sync(void *stream)
{
    return rt_check(cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize");
}

ncclResult_t zn_cuda_host_alloc(void **host, void **dev, size_t size)
{
    ZN_CHECK(rt_check(cudaHostAlloc(host, size, cudaHostAllocMapped | cudaHostAllocPortable),
                      "cudaHostAlloc"));
    memset(*host, 0, size);
    ncclResult_t r = rt_check(cudaHostGetDevicePointer(dev, *host, 0), "cudaHostGetDevicePointer");
    if (r != ncclSuccess) cudaFreeHost(*host);
    return r;
}

void zn_cuda_host_free(void *host)
{
    if (host) cudaFreeHost(host);
}

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
    CUdeviceptr va = 0;
    ZN_CHECK(drv_check(drv.memAddressReserve(&va, m->size, 0, 0, 0), "cuMemAddressReserve"));
    ncclResult_t r = drv_check(drv.memMap(va, m->size, 0, h, 0), "cuMemMap");
    if (r != ncclSuccess) {
        drv.memAddressFree(va, m->size);
        return r;
    }
    CUmemAccessDesc acc = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev },
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    r = drv_check(drv.memSetAccess(va, m->size, &acc, 1), "cuMemSetAccess");
    if (r != ncclSuccess) {
        drv.memUnmap(va, m->size);
        drv.memAddressFree(va, m->size);
        return r;
    }
    m->ptr = (void *)(uintptr_t)va;
    m->handle = (uint64_t)h;
    m->dev = dev;
    return ncclSuccess;
}

ncclResult_t zn_cumem_alloc(int dev, size_t size, struct zn_cumem *out)
{
    pthread_once(&drv_once, load_driver);
    if (!drv.ok)
        return zn_error(ncclUnhandledCudaError, ZN_ALLOC,
                        "the CUDA driver lacks the cuMem virtual memory API");
    CUmemAllocationProp prop;
    prop_for(dev, &prop);
    size_t gran = 0;
    ZN_CHECK(drv_check(drv.memGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                       "cuMemGetAllocationGranularity"));
    if (!gran) gran = 2 << 20;
    struct zn_cumem m = { .size = gran };
    if (size && zn_round_up(size, gran, &m.size) != 0)
        return zn_error(ncclInvalidArgument, ZN_ALLOC,
                        "cannot allocate %zu bytes of GPU memory: the size is too large", size);
    CUmemGenericAllocationHandle h;
    ZN_CHECK(drv_check(drv.memCreate(&h, m.size, &prop, 0), "cuMemCreate"));
    ncclResult_t r = map_rw(&m, h, dev);
    if (r != ncclSuccess) {
        drv.memRelease(h);
        return r;
    }
    *out = m;
    return ncclSuccess;
}

ncclResult_t zn_cumem_share_local(const struct zn_cumem *m)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return ncclSuccess;
    }
    for (int d = 0; d < n; d++) {
        if (d == m->dev || !zn_cuda_can_access_peer(d, m->dev)) continue;
        CUmemAccessDesc acc = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d },
                                .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        ZN_CHECK(drv_check(drv.memSetAccess((CUdeviceptr)(uintptr_t)m->ptr, m->size, &acc, 1),
                           "cuMemSetAccess"));
    }
    return ncclSuccess;
}

ncclResult_t zn_cumem_export_fd(const struct zn_cumem *m, int *fd)
{
    int f = -1;
    ZN_CHECK(drv_check(drv.memExport(&f, (CUmemGenericAllocationHandle)m->handle,
                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                       "cuMemExportToShareableHandle"));
    *fd = f;
    return ncclSuccess;
}

ncclResult_t zn_cumem_import_fd(int fd, size_t size, int dev, struct zn_cumem *out)
{
    pthread_once(&drv_once, load_driver);
    if (!drv.ok)
        return zn_error(ncclUnhandledCudaError, ZN_ALLOC,
                        "the CUDA driver lacks the cuMem virtual memory API");
    CUmemGenericAllocationHandle h;
    ZN_CHECK(drv_check(
        drv.memImport(&h, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
        "cuMemImportFromShareableHandle"));
    struct zn_cumem m = { .size = size, .imported = 1 };
    ncclResult_t r = map_rw(&m, h, dev);
    if (r != ncclSuccess) {
        drv.memRelease(h);
        return r;
    }
    *out = m;
    return ncclSuccess;
}

/* The driver's calls on an allocation act in the context of the device that owns it: a
 * program that allocated on several GPUs may free or look up any of them whatever device is
 * current (nccl-tests' one-process mode frees every GPU's buffers from the last one), as NCCL
 * allows. zn_cuda_enter switches the calling thread to that device, zn_cuda_leave back. */
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

/* The ordinal of the device whose memory ptr is, or -1 (not device memory). */
static int pointer_device(const void *ptr)
{
    int d = -1;
    if (drv.pointerGetAttribute(&d, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS)
        return -1;
    return d;
}

int zn_cuda_pointer_device(const void *ptr)
{
    pthread_once(&drv_once, load_driver);
    return drv.pointerGetAttribute ? pointer_device(ptr) : -1;
}

void zn_cumem_free(struct zn_cumem *m)
{
    if (!m->ptr) return;
    int cur = zn_cuda_enter(m->dev);
    CUdeviceptr va = (CUdeviceptr)(uintptr_t)m->ptr;
    if (!m->released) drv.memUnmap(va, m->size);
    drv.memAddressFree(va, m->size);
    if (!m->released) drv.memRelease((CUmemGenericAllocationHandle)m->handle);
    zn_cuda_leave(m->dev, cur);
    m->ptr = NULL;
}

ncclResult_t zn_cumem_release(struct zn_cumem *m)
{
    if (!m->ptr || m->released) return ncclSuccess;
    int cur = zn_cuda_enter(m->dev);
    ncclResult_t r = drv_check(drv.memUnmap((CUdeviceptr)(uintptr_t)m->ptr, m->size), "cuMemUnmap");
    /* Unmapped, the range holds nothing of the handle any more: drop the handle even if that
     * fails (it cannot be mapped again through this range). */
    if (r == ncclSuccess) {
        ncclResult_t rr =
            drv_check(drv.memRelease((CUmemGenericAllocationHandle)m->handle), "cuMemRelease");
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
    CUdeviceptr va = (CUdeviceptr)(uintptr_t)m->ptr;
    ZN_CHECK(drv_check(drv.memMap(va, m->size, 0, h, 0), "cuMemMap"));
    CUmemAccessDesc acc = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = m->dev },
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    ncclResult_t r = drv_check(drv.memSetAccess(va, m->size, &acc, 1), "cuMemSetAccess");
    if (r != ncclSuccess) drv.memUnmap(va, m->size);
    return r;
}

/* h was just made or imported (made says whether that worked): map it at m's reserved range,
 * where it becomes m's memory; on failure nothing is left behind. */
static ncclResult_t map_made(struct zn_cumem *m, ncclResult_t made, CUmemGenericAllocationHandle h)
{
    if (made != ncclSuccess) return made;
    ncclResult_t r = map_at(m, h);
    if (r != ncclSuccess) {
        drv.memRelease(h);
        return r;
    }
    m->handle = (uint64_t)h;
    m->released = 0;
    return ncclSuccess;
}
ncclResult_t zn_cumem_recreate(struct zn_cumem *m)
{
    if (!m->released) return ncclSuccess;
    if (m->imported)
        return zn_error(ncclInternalError, ZN_ALLOC,
                        "cuMem: a peer's allocation at %p is remapped from its fd, not recreated",
                        m->ptr);
    int cur = zn_cuda_enter(m->dev);
    CUmemAllocationProp prop;
    prop_for(m->dev, &prop);
    CUmemGenericAllocationHandle h = 0;
    ncclResult_t r = drv_check(drv.memCreate(&h, m->size, &prop, 0), "cuMemCreate");
    r = map_made(m, r, h);
    zn_cuda_leave(m->dev, cur);
    return r;
}

ncclResult_t zn_cumem_reimport_fd(int fd, struct zn_cumem *m)
{
    if (!m->released) return ncclSuccess;
    int cur = zn_cuda_enter(m->dev);
    CUmemGenericAllocationHandle h = 0;
    ncclResult_t r = drv_check(
        drv.memImport(&h, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
        "cuMemImportFromShareableHandle");
    r = map_made(m, r, h);
    zn_cuda_leave(m->dev, cur);
    return r;
}

int zn_cumem_find(const void *ptr, struct zn_cumem *m)
{
    pthread_once(&drv_once, load_driver);
    if (!drv.ok) return -1;
    int dev = pointer_device(ptr);
    if (dev < 0) return -1;
    int cur = zn_cuda_enter(dev);
    CUdeviceptr base = 0;
    size_t size = 0;
    CUmemGenericAllocationHandle h;
    int found = drv.memGetAddressRange(&base, &size, (CUdeviceptr)(uintptr_t)ptr) == CUDA_SUCCESS &&
                drv.memRetain(&h, (void *)(uintptr_t)base) == CUDA_SUCCESS;
    if (found) drv.memRelease(h); /* the allocation keeps its own reference */
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

int zn_cuda_mem_range(const void *ptr, void **base, size_t *size)
{
    pthread_once(&drv_once, load_driver);
    CUdeviceptr b;
    size_t n;
    if (!drv.memGetAddressRange ||
        drv.memGetAddressRange(&b, &n, (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS) {
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

int zn_cuda_dmabuf_fd(void *ptr, size_t size, int *fd)
{
    pthread_once(&drv_once, load_driver);
    int f = -1;
    if (!drv.memGetHandleForAddressRange ||
        drv.memGetHandleForAddressRange(&f, (CUdeviceptr)(uintptr_t)ptr, size,
                                        CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) != CUDA_SUCCESS ||
        f < 0) {
        cudaGetLastError();
        return -1;
    }
    *fd = f;
    return 0;
}

ncclResult_t zn_cuda_ipc_get(void *ptr, void *handle64)
{
    cudaIpcMemHandle_t h;
    _Static_assert(sizeof(h) == 64, "CUDA IPC handles are 64 bytes");
    ZN_CHECK(rt_check(cudaIpcGetMemHandle(&h, ptr), "cudaIpcGetMemHandle"));
    memcpy(handle64, &h, sizeof(h));
    return ncclSuccess;
}

ncclResult_t zn_cuda_ipc_open(const void *handle64, void **ptr)
{
    cudaIpcMemHandle_t h;
    memcpy(&h, handle64, sizeof(h));
    return rt_check(cudaIpcOpenMemHandle(ptr, h, cudaIpcMemLazyEnablePeerAccess),
                    "cudaIpcOpenMemHandle");
}

void zn_cuda_ipc_close(void *ptr)
{
    if (ptr) cudaIpcCloseMemHandle(ptr);
}

ncclResult_t zn_cuda_device_sync(void)
{
    return rt_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
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

void zn_cuda_query_system(struct zn_cuda_system *s)
{
    memset(s, 0, sizeof(*s));
    cudaRuntimeGetVersion(&s->runtime_version);
    if (cudaDriverGetVersion(&s->driver_version) != cudaSuccess) s->driver_version = 0;
    cudaError_t e = cudaGetDeviceCount(&s->ndev);
    cudaGetLastError();
    if (e != cudaSuccess) s->ndev = 0;
    if (!s->driver_version)
        s->state = ZN_CUDA_NO_DRIVER;
    else if (e == cudaErrorInsufficientDriver)
        s->state = ZN_CUDA_OLD_DRIVER;
    else if (e == cudaErrorNoDevice || (e == cudaSuccess && s->ndev == 0))
        s->state = ZN_CUDA_NO_DEVICE;
    else if (e != cudaSuccess)
        s->state = ZN_CUDA_ERROR;
    if (s->state == ZN_CUDA_ERROR)
        snprintf(s->error, sizeof(s->error), "%s (CUDA error %d)", cudaGetErrorString(e), (int)e);
}

static int dev_attr(enum cudaDeviceAttr attr, int dev)
{
    int v = 0;
    if (cudaDeviceGetAttribute(&v, attr, dev) != cudaSuccess) {
        cudaGetLastError();
        v = 0;
    }
    return v;
}

ncclResult_t zn_cuda_query_gpu(int dev, struct zn_cuda_gpu *g)
{
    struct cudaDeviceProp p;
    memset(g, 0, sizeof(*g));
    ZN_CHECK(rt_check(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties"));
    ZN_CHECK(zn_cuda_bus_id(dev, g->bus_id, sizeof(g->bus_id)));
    snprintf(g->name, sizeof(g->name), "%s", p.name);
    g->mem_bytes = p.totalGlobalMem;
    g->cc_major = dev_attr(cudaDevAttrComputeCapabilityMajor, dev);
    g->cc_minor = dev_attr(cudaDevAttrComputeCapabilityMinor, dev);
    g->sm_count = dev_attr(cudaDevAttrMultiProcessorCount, dev);
    g->cumem_fd = zn_cuda_cumem_fd_supported(dev);
    /* cudaIpcGetMemHandle works on devices with unified addressing (Linux). */
    g->legacy_ipc = dev_attr(cudaDevAttrUnifiedAddressing, dev);
    int mode = dev_attr(cudaDevAttrComputeMode, dev);
    g->exclusive = mode == cudaComputeModeExclusiveProcess || mode == cudaComputeModeProhibited;
    return ncclSuccess;
}

static int p2p_attr(enum cudaDeviceP2PAttr attr, int a, int b, int dflt)
{
    int v = dflt;
    if (cudaDeviceGetP2PAttribute(&v, attr, a, b) != cudaSuccess) {
        cudaGetLastError();
        v = dflt;
    }
    return v;
}

void zn_cuda_query_link(int a, int b, struct zn_cuda_link *l)
{
    l->access = zn_cuda_can_access_peer(a, b);
    l->atomics = a != b && p2p_attr(cudaDevP2PAttrNativeAtomicSupported, a, b, 0);
    l->perf_rank = a == b ? -1 : p2p_attr(cudaDevP2PAttrPerformanceRank, a, b, -1);
}

#else /* no CUDA in this build */

static ncclResult_t absent(const char *what)
{
    return zn_error(ncclInvalidUsage, ZN_INIT, "%s: this zinc build has no CUDA support", what);
}

const char *zn_cuda_last_error_string(void)
{
    return "no CUDA in this build";
}
int zn_cuda_available(void)
{
    return 0;
}
int zn_cuda_current_device(void)
{
    return -1;
}
ncclResult_t zn_cuda_set_device(int dev)
{
    return absent("cudaSetDevice");
}
int zn_cuda_enter(int dev)
{
    return -1;
}
void zn_cuda_leave(int dev, int prev) {}
ncclResult_t zn_cuda_bus_id(int dev, char *buf, size_t len)
{
    return absent("bus id");
}
int zn_cuda_device_by_bus_id(const char *bus_id)
{
    return -1;
}
int zn_cuda_can_access_peer(int dev, int peer)
{
    return 0;
}
ncclResult_t zn_cuda_enable_peer_access(int dev, int peer)
{
    return absent("peer access");
}
int zn_cuda_cumem_fd_supported(int dev)
{
    return 0;
}
int zn_cuda_sm_count(int dev)
{
    return 0;
}
ncclResult_t zn_cuda_malloc(void **ptr, size_t size, const char *what)
{
    return absent(what);
}
void zn_cuda_free(void *ptr) {}
ncclResult_t zn_cuda_memset(void *ptr, int v, size_t size)
{
    return absent("cudaMemset");
}
ncclResult_t zn_cuda_memcpy_htod(void *dst, const void *src, size_t size)
{
    return absent("cudaMemcpy");
}
ncclResult_t zn_cuda_memcpy_sync(void *dst, const void *src, size_t size)
{
    return absent("cudaMemcpy");
}
int zn_cuda_mem_info(size_t *free_bytes, size_t *total_bytes)
{
    return -1;
}
ncclResult_t zn_cuda_stream_create(void **stream)
{
    return absent("cudaStreamCreate");
}
void zn_cuda_stream_destroy(void *stream) {}
ncclResult_t zn_cuda_memcpy_async(void *dst, const void *src, size_t size, void *stream)
{
    return absent("cudaMemcpyAsync");
}
ncclResult_t zn_cuda_memcpy_dtod_async(void *dst, const void *src, size_t size, void *stream)
{
    return absent("cuMemcpyDtoDAsync");
}
int zn_cuda_write_value64(void *stream, void *dst, uint64_t value)
{
    return -1;
}
ncclResult_t zn_cuda_stream_sync(void *stream)
{
    return absent("cudaStreamSynchronize");
}
ncclResult_t zn_cuda_host_alloc(void **host, void **dev, size_t size)
{
    return absent("cudaHostAlloc");
}
void zn_cuda_host_free(void *host) {}
ncclResult_t zn_cumem_alloc(int dev, size_t size, struct zn_cumem *out)
{
    return absent("cuMemCreate");
}
ncclResult_t zn_cumem_share_local(const struct zn_cumem *m)
{
    return absent("cuMemSetAccess");
}
ncclResult_t zn_cumem_export_fd(const struct zn_cumem *m, int *fd)
{
    return absent("cuMem export");
}
ncclResult_t zn_cumem_import_fd(int fd, size_t size, int dev, struct zn_cumem *out)
{
    return absent("cuMem import");
}
void zn_cumem_free(struct zn_cumem *m) {}
ncclResult_t zn_cumem_release(struct zn_cumem *m)
{
    return absent("cuMemRelease");
}
ncclResult_t zn_cumem_recreate(struct zn_cumem *m)
{
    return absent("cuMemCreate");
}
ncclResult_t zn_cumem_reimport_fd(int fd, struct zn_cumem *m)
{
    return absent("cuMem import");
}
int zn_cumem_lookup(void *ptr, struct zn_cumem *m)
{
    return -1;
}
int zn_cumem_find(const void *ptr, struct zn_cumem *m)
{
    return -1;
}
ncclResult_t zn_cuda_ipc_get(void *ptr, void *handle64)
{
    return absent("CUDA IPC");
}
ncclResult_t zn_cuda_ipc_open(const void *handle64, void **ptr)
{
    return absent("CUDA IPC");
}
void zn_cuda_ipc_close(void *ptr) {}
int zn_cuda_mem_range(const void *ptr, void **base, size_t *size)
{
    return -1;
}
size_t zn_cuda_alloc_bytes(const void *ptr)
{
    return 0;
}
int zn_cuda_pointer_device(const void *ptr)
{
    return -1;
}
int zn_cuda_dmabuf_fd(void *ptr, size_t size, int *fd)
{
    return -1;
}
ncclResult_t zn_cuda_device_sync(void)
{
    return absent("cudaDeviceSynchronize");
}
int zn_cuda_stream_capturing(cudaStream_t s)
{
    return 0;
}
void zn_cuda_query_system(struct zn_cuda_system *s)
{
    memset(s, 0, sizeof(*s));
    s->state = ZN_CUDA_NOT_BUILT;
}
ncclResult_t zn_cuda_query_gpu(int dev, struct zn_cuda_gpu *g)
{
    memset(g, 0, sizeof(*g));
    return absent("device query");
}
void zn_cuda_query_link(int a, int b, struct zn_cuda_link *l)
{
    *l = (struct zn_cuda_link){ .access = 0, .atomics = 0, .perf_rank = -1 };
}

#endif
