/*
 * The CUDA wrappers' common part (see cuda_internal.h): error checks, the last CUDA error of a
 * thread, and the driver entry points.
 */
#include "cuda.h"

#if ZINC_HAVE_CUDA
#include "cuda_internal.h"
#include "err.h"

#include <pthread.h>
#include <stdio.h>

static _Thread_local char cuda_err[256];

ncclResult_t zn_cuda_rt_check(cudaError_t e, const char *what)
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

static struct zn_cuda_drv drv;
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

const struct zn_cuda_drv *zn_cuda_driver(void)
{
    pthread_once(&drv_once, load_driver);
    return &drv;
}

ncclResult_t zn_cuda_drv_check(CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS) return ncclSuccess;
    const char *s = "unknown";
    if (drv.getErrorString) drv.getErrorString(r, &s);
    snprintf(cuda_err, sizeof(cuda_err), "%s", s);
    return zn_error(ncclUnhandledCudaError, ZN_ALLOC, "%s failed: %s (CUDA driver error %d)", what,
                    s, (int)r);
}

#endif
