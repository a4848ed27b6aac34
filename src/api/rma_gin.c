/*
 * One-sided operations through the GIN engine (proxy/gin.h): the pairs whose path is
 * ZN_RMA_GIN, between hosts and wherever memory cannot be reached directly (rma.c).
 *
 * The engine is the device API's, driven here by the one-sided calls instead of a device
 * communicator: requests go into its FIFO (host communicators: this thread, zn_gin_push; cuda
 * communicators: a kernel on the user's stream, device/rma.cu), the engine thread reads each
 * source, sends it to the peer's engine, which writes the bytes into its window (found by the
 * window's GIN id, the same on every rank) and then adds 1 to its signal word for (sender,
 * sigIdx, ctx). Requests to one peer travel in order on one connection, so data and signals
 * arrive in program order. The engine's thread is the target's progress: nothing waits for
 * the target to make a call.
 *
 * Memory: on host communicators the FIFO, its slots and the signal words are plain host
 * memory; on cuda communicators they are pinned host memory mapped into the GPU (kernels write
 * the slots and poll the words) and the ticket counter is device memory, as for a device
 * communicator (api/devgin.c); the engine copies to and from device memory on a stream of its
 * own.
 */
#include "rma.h"
#include "devapi.h"
#include "abi/dev_abi.h"
#include "proxy/gin.h"
#include "util/clock.h"
#include "util/cuda.h"

#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The kernels write zincGinRequest through dev_abi.h's copy of it. */
#define SAME_FIELD(a, b)                                                                     \
    _Static_assert(offsetof(struct zincGinRequest, a) == offsetof(struct zn_dev_gin_req, b), \
                   "zn_dev_gin_req." #b " matches zincGinRequest." #a)
SAME_FIELD(seq, seq);
SAME_FIELD(op, op);
SAME_FIELD(peer, peer);
SAME_FIELD(src, src);
SAME_FIELD(dstOffset, dst_off);
SAME_FIELD(bytes, bytes);
SAME_FIELD(dstWindow, win);
SAME_FIELD(flags, flags);
SAME_FIELD(signal, signal);
SAME_FIELD(counter, counter);
SAME_FIELD(signalValue, signal_value);
_Static_assert(sizeof(struct zincGinRequest) == sizeof(struct zn_dev_gin_req), "same size");

struct zn_rma_gin {
    struct zn_rma *r;
    struct zn_gin *engine;
    int gpu;
    void *host, *dev; /* record | slots | signals (dev: the GPU's view, or NULL) */
    struct zincGinProxy *rec;
    struct zincGinRequest *slots;
    uint64_t *signals;
    uint64_t head;  /* host communicators' ticket counter */
    void *dev_head; /* cuda communicators': device memory */
    void *stream;   /* cuda communicators: the engine thread's copies */
    pthread_mutex_t lock;
    ncclResult_t failed;
    char why[ZN_ERRMSG_MAX];
};

#define SLOTS_OFF 64

static ncclResult_t gin_copy(void *ctx, void *dst, const void *src, size_t n)
{
    struct zn_rma_gin *g = ctx;
    if (!g->gpu) {
        memcpy(dst, src, n);
        return ncclSuccess;
    }
    ZN_CHECK(zn_cuda_memcpy_async(dst, src, n, g->stream));
    return zn_cuda_stream_sync(g->stream);
}

static ncclResult_t gin_resolve(void *ctx, uint32_t win, uint64_t off, uint64_t len, void **ptr)
{
    struct zn_rma_gin *g = ctx;
    return zn_devwin_gin_target(g->r->comm, win, off, len, ptr);
}

/* Engine thread: its last error is the reason, kept for the calls that find it failed. A
 * cuda communicator fails at once (ncclCommGetAsyncError; its kernels stop on the engine's
 * error word): nothing on the host would otherwise learn why. A host communicator fails when a
 * call meets the failure (rma.c), so that a peer that destroyed its communicator without
 * ncclCommFinalize troubles only the one-sided calls still made. */
static void gin_failed(void *ctx, ncclResult_t res)
{
    struct zn_rma_gin *g = ctx;
    pthread_mutex_lock(&g->lock);
    snprintf(g->why, sizeof(g->why), "%s", zn_last_error());
    g->failed = res;
    pthread_mutex_unlock(&g->lock);
    if (g->gpu) zn_comm_set_error(g->r->comm, res);
}

static ncclResult_t gin_thread_init(void *ctx)
{
    struct zn_rma_gin *g = ctx;
    if (!g->gpu) return ncclSuccess;
    ZN_CHECK(zn_cuda_set_device(g->r->comm->cuda_dev));
    return zn_cuda_stream_create(&g->stream);
}

static const struct zn_gin_ops gin_ops = {
    .copy = gin_copy,
    .resolve = gin_resolve,
    .failed = gin_failed,
    .thread_init = gin_thread_init,
};

static void gin_free(struct zn_rma_gin *g)
{
    if (g->gpu) {
        if (g->stream) zn_cuda_stream_destroy(g->stream);
        if (g->dev_head) zn_cuda_free(g->dev_head);
        zn_cuda_host_free(g->host);
    } else {
        free(g->host);
    }
    pthread_mutex_destroy(&g->lock);
    free(g);
}

ncclResult_t zn_rma_gin_setup(struct zn_rma *r)
{
    struct ncclComm *c = r->comm;
    ncclResult_t res;
    struct zn_rma_gin *g;
    ZN_CHECK(zn_calloc(&g, 1, "one-sided GIN state"));
    pthread_mutex_init(&g->lock, NULL);
    g->r = r;
    g->gpu = c->kind == ZN_COMM_CUDA;
    size_t sig_off = SLOTS_OFF + ZINC_GIN_FIFO_SLOTS * sizeof(struct zincGinRequest);
    size_t bytes = sig_off + r->nwords * 8;
    char *dev;
    if (g->gpu) {
        ZN_CHECK_GOTO(zn_cuda_host_alloc(&g->host, &g->dev, bytes), res, fail);
        ZN_CHECK_GOTO(zn_cuda_malloc(&g->dev_head, 8, "GIN ticket counter"), res, fail);
        ZN_CHECK_GOTO(zn_cuda_memset(g->dev_head, 0, 8), res, fail);
        dev = g->dev;
    } else {
        g->host = calloc(1, bytes);
        if (!g->host) {
            res = zn_error(ncclSystemError, ZN_CALL, "out of memory for the GIN FIFO");
            goto fail;
        }
        dev = g->host;
    }
    char *host = g->host;
    g->rec = (struct zincGinProxy *)host;
    g->slots = (struct zincGinRequest *)(host + SLOTS_OFF);
    g->signals = (uint64_t *)(host + sig_off);
    g->rec->nslots = ZINC_GIN_FIFO_SLOTS;
    g->rec->head = g->gpu ? g->dev_head : &g->head;
    g->rec->slots = (struct zincGinRequest *)(dev + SLOTS_OFF);
    g->rec->netSignals = (uint64_t *)(dev + sig_off);
    g->rec->netCounters = NULL;
    uint8_t *net_peer;
    ZN_CHECK_GOTO(zn_calloc(&net_peer, (size_t)c->nranks, "GIN peers"), res, fail);
    for (int p = 0; p < c->nranks; p++) net_peer[p] = r->path[p] == ZN_RMA_GIN;
    struct zn_gin_args a = { .tctx = &c->tctx,
                             .net_peer = net_peer,
                             .proxy = g->rec,
                             .slots = g->slots,
                             .net_signals = g->signals,
                             .net_counters = NULL,
                             .nsignals = (int)r->nwords,
                             .ncounters = 0,
                             .ops = &gin_ops,
                             .ctx = g };
    res = zn_gin_create(&a, &g->engine);
    free(net_peer);
    if (res != ncclSuccess) goto fail;
    r->gin = g;
    return ncclSuccess;
fail:
    gin_free(g);
    return res;
}

void zn_rma_gin_destroy(struct zn_rma *r, int drain)
{
    struct zn_rma_gin *g = r->gin;
    if (!g) return;
    r->gin = NULL;
    zn_gin_destroy(g->engine, drain);
    gin_free(g);
}

volatile uint64_t *zn_rma_gin_signals(struct zn_rma *r, int device)
{
    struct zn_rma_gin *g = r->gin;
    if (!device || !g->gpu) return g->signals;
    return (volatile uint64_t *)((char *)g->dev + ((char *)g->signals - (char *)g->host));
}

ncclResult_t zn_rma_gin_check(struct zn_rma *r, const char *fn)
{
    struct zn_rma_gin *g = r->gin;
    if (!g)
        return zn_error(
            ncclInvalidUsage, ZN_CALL,
            "%s: comm %p was finalized: its one-sided operations between hosts are over", fn,
            (void *)r->comm);
    pthread_mutex_lock(&g->lock);
    ncclResult_t res = g->failed;
    char why[ZN_ERRMSG_MAX];
    snprintf(why, sizeof(why), "%s", g->why);
    pthread_mutex_unlock(&g->lock);
    if (res == ncclSuccess) return ncclSuccess;
    return zn_error(res, ZN_CALL, "%s: the GIN engine of rank %d failed: %s", fn, r->comm->rank,
                    why);
}

ncclResult_t zn_rma_gin_put(struct zn_rma *r, const struct zn_rma_op *op, uint32_t win_id)
{
    const char *fn = op->kind == ZN_RMA_PUT ? "ncclPutSignal" : "ncclSignal";
    ZN_CHECK(zn_rma_gin_check(r, fn));
    struct zn_rma_gin *g = r->gin;
    struct ncclComm *c = r->comm;
    int data = op->kind == ZN_RMA_PUT && op->bytes;
    struct zincGinRequest req = { .op = data ? ZINC_GIN_OP_PUT : ZINC_GIN_OP_SIGNAL,
                                  .peer = op->peer,
                                  .src = (uint64_t)(uintptr_t)op->src,
                                  .dstOffset = data ? op->off : 0,
                                  .bytes = data ? op->bytes : 0,
                                  .dstWindow = data ? win_id : 0,
                                  .flags = ZINC_GIN_F_SIGNAL_INC,
                                  .signal = (uint32_t)zn_rma_word(r, c->rank, op->ctx, op->sig) };
    ncclResult_t res = zn_gin_push(g->rec, g->slots, &g->head, &req);
    if (res != ncclSuccess) return zn_rma_gin_check(r, fn) != ncclSuccess ? ncclRemoteError : res;
    /* The engine has read the source once it took the request. */
    uint64_t ticket = __atomic_load_n(&g->head, __ATOMIC_RELAXED);
    int64_t deadline = zn_deadline_from_now();
    for (unsigned spins = 0; __atomic_load_n(&g->rec->tail, __ATOMIC_ACQUIRE) < ticket; spins++) {
        if (spins < 1000) continue;
        ZN_CHECK(zn_rma_gin_check(r, fn));
        if (atomic_load(&c->abort_flag))
            return zn_error(ncclInvalidUsage, ZN_CALL, "%s: comm %p was aborted", fn, (void *)c);
        if (zn_now_ns() > deadline)
            return zn_error(ncclSystemError, ZN_CALL,
                            "%s: the GIN engine of rank %d took no request for ZINC_TIMEOUT", fn,
                            c->rank);
        sched_yield();
    }
    return ncclSuccess;
}

void zn_rma_gin_dev(struct zn_rma *r, struct zn_dev_gin *out)
{
    struct zn_rma_gin *g = r->gin;
    char *dev = g->dev;
    *out = (struct zn_dev_gin){
        .head = g->dev_head,
        .tail = (volatile uint64_t *)(dev + offsetof(struct zincGinProxy, tail)),
        .error = (volatile uint32_t *)(dev + offsetof(struct zincGinProxy, error)),
        .slots = (struct zn_dev_gin_req *)(dev + SLOTS_OFF),
        .nslots = ZINC_GIN_FIFO_SLOTS
    };
}
