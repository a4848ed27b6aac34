/*
 * zinc-perf: where the buffers live. Two tables with the same shape, so that the benchmark
 * never asks which mode it runs in:
 *   host  page-aligned host memory, NULL streams, every call complete when it returns (zinc
 *         host communicators);
 *   cuda  cudaMalloc'd device memory, one non-blocking stream per rank, copies through the
 *         host for fill and check (only built with ZINC_PERF_CUDA).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zinc-perf.h"

/* ---------------------------------------------------------------------------------------
 * Host memory
 * --------------------------------------------------------------------------------------- */

static int host_use(int dev)
{
    return 0;
}

static int host_alloc(int dev, size_t bytes, void **ptr)
{
    void *p = NULL;
    int err = posix_memalign(&p, 4096, bytes ? bytes : 1);
    if (err) {
        fprintf(stderr, "zinc-perf: cannot allocate %zu bytes of host memory: %s\n", bytes,
                strerror(err));
        return -1;
    }
    /* Touch every page now, so that first-touch page faults do not land in a timed loop. */
    memset(p, 0, bytes);
    *ptr = p;
    return 0;
}

static void host_release(int dev, void *ptr)
{
    free(ptr);
}

static int host_copy(int dev, void *dst, const void *src, size_t bytes)
{
    if (bytes) memcpy(dst, src, bytes);
    return 0;
}

static int host_stream_create(int dev, cudaStream_t *stream)
{
    *stream = NULL; /* host communicators take no stream */
    return 0;
}

static void host_stream_destroy(int dev, cudaStream_t stream) {}

static int host_query(int dev, cudaStream_t stream)
{
    return 1;
}

static void host_describe(int dev, char *buf, size_t len)
{
    snprintf(buf, len, "device host");
}

static int host_graph_unsupported(void)
{
    fprintf(stderr, "zinc-perf: CUDA graphs (-G) need GPU buffers; this run uses host memory\n");
    return -1;
}

static int host_graph_begin(int dev, cudaStream_t stream)
{
    return host_graph_unsupported();
}

static int host_graph_end(int dev, cudaStream_t stream, void **graph)
{
    return host_graph_unsupported();
}

static int host_graph_instantiate(int dev, void *graph, void **exec)
{
    return host_graph_unsupported();
}

static int host_graph_launch(int dev, cudaStream_t stream, void *exec)
{
    return host_graph_unsupported();
}

static void host_graph_free(int dev, void *graph, void *exec) {}

static const struct zp_mem zp_mem_host = {
    .name = "host",
    .use = host_use,
    .alloc = host_alloc,
    .release = host_release,
    .put = host_copy,
    .get = host_copy,
    .stream_create = host_stream_create,
    .stream_destroy = host_stream_destroy,
    .query = host_query,
    .describe = host_describe,
    .graph_begin = host_graph_begin,
    .graph_end = host_graph_end,
    .graph_instantiate = host_graph_instantiate,
    .graph_launch = host_graph_launch,
    .graph_free = host_graph_free,
};

/* ---------------------------------------------------------------------------------------
 * CUDA device memory
 * --------------------------------------------------------------------------------------- */

#ifdef ZINC_PERF_CUDA
#include <cuda_runtime.h>

static int cuda_failed(int dev, const char *what, cudaError_t e)
{
    fprintf(stderr, "zinc-perf: %s failed on device %d: %s\n", what, dev, cudaGetErrorString(e));
    return -1;
}

#define CUDA_TRY(dev, call)                                        \
    do {                                                           \
        cudaError_t e_ = (call);                                   \
        if (e_ != cudaSuccess) return cuda_failed(dev, #call, e_); \
    } while (0)

static int cuda_use(int dev)
{
    CUDA_TRY(dev, cudaSetDevice(dev));
    return 0;
}

static int cuda_alloc(int dev, size_t bytes, void **ptr)
{
    void *p = NULL;
    CUDA_TRY(dev, cudaSetDevice(dev));
    CUDA_TRY(dev, cudaMalloc(&p, bytes ? bytes : 1));
    cudaError_t e = cudaMemset(p, 0, bytes);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        cudaFree(p);
        return cuda_failed(dev, "cudaMemset", e);
    }
    *ptr = p;
    return 0;
}

static void cuda_release(int dev, void *ptr)
{
    if (cudaSetDevice(dev) == cudaSuccess) cudaFree(ptr);
}

/* A copy from pageable memory may return before the DMA lands; the device synchronize makes
 * the data visible to the next collective, which runs on a non-blocking stream. */
static int cuda_put(int dev, void *dst, const void *src, size_t bytes)
{
    CUDA_TRY(dev, cudaSetDevice(dev));
    CUDA_TRY(dev, cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    CUDA_TRY(dev, cudaDeviceSynchronize());
    return 0;
}

static int cuda_get(int dev, void *dst, const void *src, size_t bytes)
{
    CUDA_TRY(dev, cudaSetDevice(dev));
    CUDA_TRY(dev, cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return 0;
}

static int cuda_stream_create(int dev, cudaStream_t *stream)
{
    CUDA_TRY(dev, cudaSetDevice(dev));
    CUDA_TRY(dev, cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking));
    return 0;
}

static void cuda_stream_destroy(int dev, cudaStream_t stream)
{
    if (cudaSetDevice(dev) == cudaSuccess) cudaStreamDestroy(stream);
}

static int cuda_query(int dev, cudaStream_t stream)
{
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaErrorNotReady) return 0;
    return e == cudaSuccess ? 1 : cuda_failed(dev, "cudaStreamQuery", e);
}

static void cuda_describe(int dev, char *buf, size_t len)
{
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        snprintf(buf, len, "device %2d [unknown]", dev);
        return;
    }
    snprintf(buf, len, "device %2d [0x%02x] %s", dev, prop.pciBusID, prop.name);
}

/* Thread-local capture, as nccl-tests does: the library may still allocate memory on other
 * threads (proxy, connection setup) while this thread captures. */
static int cuda_graph_begin(int dev, cudaStream_t stream)
{
    CUDA_TRY(dev, cudaSetDevice(dev));
    CUDA_TRY(dev, cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    return 0;
}

static int cuda_graph_end(int dev, cudaStream_t stream, void **graph)
{
    cudaGraph_t g;
    CUDA_TRY(dev, cudaSetDevice(dev));
    CUDA_TRY(dev, cudaStreamEndCapture(stream, &g));
    *graph = g;
    return 0;
}

static int cuda_graph_instantiate(int dev, void *graph, void **exec)
{
    cudaGraphExec_t ge;
    cudaError_t e = cudaSetDevice(dev);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&ge, (cudaGraph_t)graph, 0);
    cudaGraphDestroy((cudaGraph_t)graph); /* the executable graph does not need it */
    if (e != cudaSuccess) return cuda_failed(dev, "cudaGraphInstantiate", e);
    *exec = ge;
    return 0;
}

static int cuda_graph_launch(int dev, cudaStream_t stream, void *exec)
{
    CUDA_TRY(dev, cudaSetDevice(dev));
    CUDA_TRY(dev, cudaGraphLaunch((cudaGraphExec_t)exec, stream));
    return 0;
}

static void cuda_graph_free(int dev, void *graph, void *exec)
{
    if ((!graph && !exec) || cudaSetDevice(dev) != cudaSuccess) return;
    if (graph) cudaGraphDestroy((cudaGraph_t)graph);
    if (exec) cudaGraphExecDestroy((cudaGraphExec_t)exec);
}

static const struct zp_mem zp_mem_cuda = {
    .name = "cuda",
    .use = cuda_use,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .put = cuda_put,
    .get = cuda_get,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .query = cuda_query,
    .describe = cuda_describe,
    .graph_begin = cuda_graph_begin,
    .graph_end = cuda_graph_end,
    .graph_instantiate = cuda_graph_instantiate,
    .graph_launch = cuda_graph_launch,
    .graph_free = cuda_graph_free,
};
#endif /* ZINC_PERF_CUDA */

const struct zp_mem *zp_mem_select(int *ndev)
{
#ifdef ZINC_PERF_CUDA
    const char *want = getenv("ZINC_DEVICE");
    int n = 0;
    if (!(want && strcmp(want, "host") == 0)) {
        if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) {
            *ndev = n;
            return &zp_mem_cuda;
        }
        (void)cudaGetLastError(); /* no driver or no device: clear the error, use host memory */
    }
#endif
    *ndev = 0;
    return &zp_mem_host;
}
