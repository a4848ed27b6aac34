/*
 * What this machine offers, for zinc-info: the driver and runtime, each GPU, how each pair of
 * GPUs reaches the other. Device and driver queries only, no memory or kernels.
 */
#include "cuda.h"

#if ZINC_HAVE_CUDA
#include "cuda_internal.h"
#include "err.h"

#include <stdio.h>
#include <string.h>

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
    ZN_CHECK(zn_cuda_rt_check(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties"));
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

#endif
