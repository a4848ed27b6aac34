/*
 * Shared by the CUDA wrappers of util/cuda_*.c (builds with CUDA only): the error checks that
 * turn a runtime or driver error into an ncclResult_t, and the driver entry points, looked up
 * once through the runtime (cudaGetDriverEntryPointByVersion), so that the library links no
 * libcuda and loads on a machine without a driver.
 */
#ifndef ZN_UTIL_CUDA_INTERNAL_H
#define ZN_UTIL_CUDA_INTERNAL_H

#include "cuda.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

/* ncclSuccess, or ncclUnhandledCudaError logged as "what failed: <the runtime's message>"; the
 * message is also kept for zn_cuda_last_error_string. */
ncclResult_t zn_cuda_rt_check(cudaError_t e, const char *what);
/* The same for a driver call's result. */
ncclResult_t zn_cuda_drv_check(CUresult r, const char *what);

struct zn_cuda_drv {
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
    int ok; /* every entry point but the optional ones was found (the cuMem API is there) */
};

/* The driver's entry points, looked up at the first call (any thread). */
const struct zn_cuda_drv *zn_cuda_driver(void);

#endif
