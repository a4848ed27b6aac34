/*
 * GIN between hosts for device communicators: what ncclDevCommCreate sets up when GIN is asked
 * for and some rank is outside the caller's LSA team.
 *
 * One block of pinned host memory, mapped into the GPU, holds the FIFO record, its slots and
 * the engine's share of every signal and counter (nccl_device/gin_proxy.h); the ticket counter
 * kernels take with atomicAdd is a word of device memory. The engine (proxy/gin.c) moves the
 * bytes with cudaMemcpyAsync on a non-blocking stream of its own, synchronised before the
 * signal is raised: a blocking stream would wait for the very kernel that spins on the signal.
 * Windows are found by the id every rank gave them at registration (devwin.c); id 0 is this
 * device communicator's resource window.
 */
#include "devapi.h"
#include "proxy/gin.h"
#include "util/cuda.h"

#include <stdlib.h>
#include <string.h>

struct zn_devgin {
    struct ncclComm *comm;
    struct zn_gin *engine;
    char *res_base;
    size_t res_bytes;
    void *host, *dev; /* the mapped block */
    void *head;       /* the ticket counter (device memory) */
    void *stream;     /* the engine thread's copy stream */
};

size_t zn_devgin_gpu_bytes(const struct zn_devgin *g)
{
    return zn_cuda_alloc_bytes(g->head);
}

static ncclResult_t dg_copy(void *ctx, void *dst, const void *src, size_t n)
{
    struct zn_devgin *g = ctx;
    ZN_CHECK(zn_cuda_memcpy_async(dst, src, n, g->stream));
    return zn_cuda_stream_sync(g->stream);
}

static ncclResult_t dg_resolve(void *ctx, uint32_t win, uint64_t off, uint64_t len, void **ptr)
{
    struct zn_devgin *g = ctx;
    if (win != ZINC_GIN_WINDOW_RESOURCE) return zn_devwin_gin_target(g->comm, win, off, len, ptr);
    if (off > g->res_bytes || len > g->res_bytes - off)
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "GIN: a peer put bytes [%llu, +%llu) into the resource window of rank "
                        "%d, which has %zu bytes",
                        (unsigned long long)off, (unsigned long long)len, g->comm->rank,
                        g->res_bytes);
    *ptr = g->res_base + off;
    return ncclSuccess;
}

/* The engine failed: the communicator reports it (ncclCommGetAsyncError), with the message the
 * engine thread recorded. */
static void dg_failed(void *ctx, ncclResult_t res)
{
    struct zn_devgin *g = ctx;
    zn_comm_set_error(g->comm, res);
}

static ncclResult_t dg_thread_init(void *ctx)
{
    struct zn_devgin *g = ctx;
    ZN_CHECK(zn_cuda_set_device(g->comm->cuda_dev));
    return zn_cuda_stream_create(&g->stream);
}

static const struct zn_gin_ops dg_ops = {
    .copy = dg_copy,
    .resolve = dg_resolve,
    .failed = dg_failed,
    .thread_init = dg_thread_init,
};

static void devgin_free(struct zn_devgin *g)
{
    zn_cuda_stream_destroy(g->stream);
    if (g->head) zn_cuda_free(g->head);
    zn_cuda_host_free(g->host);
    free(g);
}

ncclResult_t zn_devgin_create(struct ncclComm *comm, char *res_base, size_t res_bytes, int nsignals,
                              int ncounters, struct zn_devgin **out, void **dev_record)
{
    ncclResult_t res;
    struct zn_devgin *g;
    ZN_CHECK(zn_calloc(&g, 1, "GIN between hosts"));
    g->comm = comm;
    g->res_base = res_base;
    g->res_bytes = res_bytes;
    /* record | slots | net signals | net counters */
    size_t slots_off = 64;
    size_t sig_off = slots_off + ZINC_GIN_FIFO_SLOTS * sizeof(struct zincGinRequest);
    size_t cnt_off = sig_off + (size_t)nsignals * 8;
    size_t bytes = cnt_off + (size_t)ncounters * 8;
    ZN_CHECK_GOTO(zn_cuda_host_alloc(&g->host, &g->dev, bytes), res, err_free);
    ZN_CHECK_GOTO(zn_cuda_malloc(&g->head, 8, "GIN ticket counter"), res, err_free);
    ZN_CHECK_GOTO(zn_cuda_memset(g->head, 0, 8), res, err_free);
    char *h = g->host, *d = g->dev;
    struct zincGinProxy *rec = (struct zincGinProxy *)h;
    rec->nslots = ZINC_GIN_FIFO_SLOTS;
    rec->head = g->head;
    rec->slots = (struct zincGinRequest *)(d + slots_off);
    rec->netSignals = (uint64_t *)(d + sig_off);
    rec->netCounters = (uint64_t *)(d + cnt_off);
    int lsa_size, lsa_rank;
    zn_dev_lsa(comm, &lsa_size, &lsa_rank);
    uint8_t *net_peer;
    ZN_CHECK_GOTO(zn_calloc(&net_peer, (size_t)comm->nranks, "GIN peers"), res, err_free);
    for (int r = 0; r < comm->nranks; r++) {
        int lsa = lsa_rank + (r - comm->rank);
        net_peer[r] = lsa < 0 || lsa >= lsa_size;
    }
    struct zn_gin_args a = { .tctx = &comm->tctx,
                             .net_peer = net_peer,
                             .proxy = rec,
                             .slots = (struct zincGinRequest *)(h + slots_off),
                             .net_signals = (uint64_t *)(h + sig_off),
                             .net_counters = (uint64_t *)(h + cnt_off),
                             .nsignals = nsignals,
                             .ncounters = ncounters,
                             .ops = &dg_ops,
                             .ctx = g };
    res = zn_gin_create(&a, &g->engine);
    free(net_peer);
    if (res != ncclSuccess) goto err_free;
    *out = g;
    *dev_record = d;
    return ncclSuccess;
err_free:
    devgin_free(g);
    return res;
}

void zn_devgin_stop_kernels(struct zn_devgin *g)
{
    if (!g) return;
    struct zincGinProxy *rec = g->host;
    if (!__atomic_load_n(&rec->error, __ATOMIC_ACQUIRE))
        __atomic_store_n(&rec->error, (uint32_t)ncclRemoteError, __ATOMIC_RELEASE);
}

void zn_devgin_destroy(struct zn_devgin *g, int drain)
{
    if (!g) return;
    zn_gin_destroy(g->engine, drain);
    devgin_free(g);
}
