/*
 * CUDA, reached through the statically linked runtime and, for the driver's virtual memory
 * API, through driver entry points the runtime looks up -- so the library loads on a machine
 * without a GPU driver and simply finds no devices there. Every function exists in a build
 * without CUDA too, and then reports that CUDA is absent: the functions are listed, with what
 * such a build answers, in util/cuda_api.h.
 */
#ifndef ZN_UTIL_CUDA_H
#define ZN_UTIL_CUDA_H

#include "nccl.h"

#include <stddef.h>
#include <stdint.h>

/* Exportable device memory (cuMem, POSIX fd handles). */
struct zn_cumem {
    void *ptr;
    size_t size;
    uint64_t handle; /* CUmemGenericAllocationHandle */
    int dev;
    int imported;
    int released; /* zn_cumem_release: the address range is reserved, no memory is mapped */
};

/* What this machine offers (zinc-info): device and driver queries only, no memory or kernels. */
enum zn_cuda_state {
    ZN_CUDA_OK,         /* at least one device */
    ZN_CUDA_NOT_BUILT,  /* this build has no CUDA */
    ZN_CUDA_NO_DRIVER,  /* no NVIDIA driver loaded */
    ZN_CUDA_OLD_DRIVER, /* the driver is older than the runtime this build links */
    ZN_CUDA_NO_DEVICE,  /* a driver, but no device visible to this process */
    ZN_CUDA_ERROR,      /* anything else: see error */
};
struct zn_cuda_system {
    enum zn_cuda_state state;
    int driver_version; /* CUDA version the driver supports (12040 = 12.4), 0 if none */
    int runtime_version;
    int ndev;
    char error[128]; /* the runtime's message when state is ZN_CUDA_ERROR */
};
struct zn_cuda_gpu {
    char name[256];
    char bus_id[20];
    size_t mem_bytes;
    int cc_major, cc_minor;
    int sm_count;
    int cumem_fd;   /* cuMem allocations exportable as POSIX file descriptors */
    int legacy_ipc; /* cudaIpc* memory handles (needs unified addressing) */
    int exclusive;  /* compute mode lets only one process (or none) use it */
};
/* How GPU a reaches GPU b's memory. */
struct zn_cuda_link {
    int access;    /* peer access */
    int atomics;   /* native atomics over the link (NVLink has them, PCIe peers do not) */
    int perf_rank; /* the runtime's relative performance rank (lower is faster), -1 unknown */
};

#define ZN_CUDA_FN(ret, name, params, nocuda) ret name params;
#include "cuda_api.h"
#undef ZN_CUDA_FN

#endif
