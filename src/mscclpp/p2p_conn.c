/*
 * mscclppTransportP2P: connections between GPUs of one host, one process per rank.
 *
 * What a peer maps, through legacy CUDA IPC handles (util/cuda.c), as MSCCL++ 0.1 does:
 *  - the connection's buffer: the user's cudaMalloc allocation that contains localBuff, plus
 *    the offset of localBuff in it. cudaMalloc memory cannot be exported as a cuMem file
 *    descriptor, so zinc's p2p arena path (cuMem fds over a Unix socket) does not apply; a
 *    cuMem buffer (ncclMemAlloc) is refused with a clear error for now.
 *  - the signal words: one device arena per communicator, ZN_MSC_SIGNAL_SLOT bytes for each
 *    connection at its index, shared once with each peer.
 * Kernels then store into remoteBuff and the peer's signal words directly (putDirect,
 * signalDirect), or push triggers that the proxy (proxy.c) turns into cudaMemcpyAsync on a
 * stream of its own: data, then the 8-byte epoch into the peer's `proxy` word, so the copy
 * engine keeps the signal behind the data it announces.
 *
 * The FIFO (mscclppfifo.h): triggers and the published tail in mapped pinned host memory, the
 * head in device memory; one FIFO per communicator, shared by its connections (connId says
 * which), as in MSCCL++ 0.1.
 */
#include "msc.h"
#include "util/clock.h"
#include "util/cuda.h"
#include "util/err.h"

#include <stdlib.h>
#include <string.h>

/* What one side sends the other for a buffer or for the signal arena. */
struct p2p_mem_desc {
    uint8_t handle[64];
    uint64_t alloc_size; /* of the allocation behind the handle */
    uint64_t off;        /* of the buffer in it */
    uint64_t base;       /* the allocation's address in its owner: names it for reuse */
};

struct p2p_desc {
    struct p2p_mem_desc buf, sig;
};
_Static_assert(sizeof(struct p2p_desc) <= ZN_MSC_P2P_DESC_BYTES, "descriptor fits");

#if ZINC_HAVE_CUDA
#include <cuda_runtime.h>

/* An allocation of a peer opened here, kept until the communicator goes. */
struct p2p_open {
    int peer;
    uint64_t base; /* in the peer */
    void *ptr;
    struct p2p_open *next;
};

struct msc_p2p {
    void *host_words; /* pinned, mapped: FIFO triggers, tail, abort and error words */
    void *dev_words;  /* the same, as the GPU sees it */
    uint64_t *head;   /* device memory */
    void *sig_arena;  /* device memory, ZN_MSC_MAX_CONNS slots */
    struct p2p_mem_desc sig_desc;
    cudaStream_t stream;
    struct p2p_open *opened;
};

/* Layout of the pinned words. */
#define W_TRIGGERS 0
#define W_TAIL     (MSCCLPP_PROXY_FIFO_SIZE * sizeof(mscclppTrigger))
#define W_ABORT    (W_TAIL + 64)
#define W_ERROR    (W_ABORT + 4)
#define W_BYTES    (W_ABORT + 64)

static ncclResult_t rt(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return ncclSuccess;
    return zn_error(ncclUnhandledCudaError, ZN_P2P, "%s failed: %s", what, cudaGetErrorString(e));
}

static ncclResult_t state(struct mscclppComm *c, struct msc_p2p **out)
{
    if (c->p2p) {
        *out = c->p2p;
        return ncclSuccess;
    }
    struct msc_p2p *s;
    ncclResult_t res;
    ZN_CHECK(zn_calloc(&s, 1, "p2p state"));
    ZN_CHECK_GOTO(zn_cuda_host_alloc(&s->host_words, &s->dev_words, W_BYTES), res, fail_free);
    ZN_CHECK_GOTO(zn_cuda_malloc((void **)&s->head, sizeof(uint64_t), "FIFO head"), res, fail_host);
    ZN_CHECK_GOTO(zn_cuda_memset(s->head, 0, sizeof(uint64_t)), res, fail_head);
    size_t arena = (size_t)ZN_MSC_MAX_CONNS * ZN_MSC_SIGNAL_SLOT;
    ZN_CHECK_GOTO(zn_cuda_malloc(&s->sig_arena, arena, "signal words"), res, fail_head);
    ZN_CHECK_GOTO(zn_cuda_memset(s->sig_arena, 0, arena), res, fail_arena);
    ZN_CHECK_GOTO(zn_cuda_ipc_get(s->sig_arena, s->sig_desc.handle), res, fail_arena);
    s->sig_desc.alloc_size = arena;
    s->sig_desc.base = (uint64_t)(uintptr_t)s->sig_arena;
    ZN_CHECK_GOTO(
        rt(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking), "cudaStreamCreate"), res,
        fail_arena);
    c->fifo_host = (mscclppTrigger *)((char *)s->host_words + W_TRIGGERS);
    c->tail_host = (uint64_t *)((char *)s->host_words + W_TAIL);
    c->abort_word = (uint32_t *)((char *)s->host_words + W_ABORT);
    c->error_word = (uint32_t *)((char *)s->host_words + W_ERROR);
    c->p2p = s;
    *out = s;
    return ncclSuccess;
fail_arena:
    zn_cuda_free(s->sig_arena);
fail_head:
    zn_cuda_free(s->head);
fail_host:
    zn_cuda_host_free(s->host_words);
fail_free:
    free(s);
    return res;
}

ncclResult_t zn_msc_p2p_buf_desc(struct mscclppComm *c, void *buf, uint64_t size, void *desc)
{
    struct p2p_mem_desc *d = desc;
    void *base;
    size_t alloc;
    struct zn_cumem m;
    if (zn_cuda_mem_range(buf, &base, &alloc) != 0)
        return zn_error(ncclInvalidArgument, ZN_P2P,
                        "P2P connection buffer %p is not device memory of this process", buf);
    /* MSCCL++ binds a communicator to the GPU current at mscclppCommInitRank: its FIFO, signal
     * words and the proxy's copies live there. A buffer of another GPU would still work, but
     * every copy and signal would cross contexts (on a GPU another rank uses, at the time
     * slicing's pace): say so instead. */
    int dev = zn_cuda_pointer_device(buf);
    if (dev >= 0 && dev != c->cuda_dev)
        return zn_error(ncclInvalidUsage, ZN_P2P,
                        "P2P connection buffer %p is on GPU %d, but the communicator was created "
                        "with GPU %d current: call cudaSetDevice before mscclppCommInitRank",
                        buf, dev, c->cuda_dev);
    if (zn_cumem_find(buf, &m) == 0)
        return zn_error(ncclInvalidUsage, ZN_P2P,
                        "P2P connection buffer %p is a cuMem allocation (ncclMemAlloc); zinc's "
                        "libmscclpp shares cudaMalloc buffers only for now",
                        buf);
    uint64_t off = (uint64_t)((char *)buf - (char *)base);
    if (size > alloc - off)
        return zn_error(ncclInvalidArgument, ZN_P2P,
                        "P2P connection buffer %p + %llu bytes runs past its allocation (%zu bytes "
                        "at %p)",
                        buf, (unsigned long long)size, alloc, base);
    ZN_CHECK(zn_cuda_ipc_get(base, d->handle));
    d->alloc_size = alloc;
    d->off = off;
    d->base = (uint64_t)(uintptr_t)base;
    return ncclSuccess;
}

/* Open a peer's allocation once per communicator (CUDA IPC maps an allocation once per
 * process; several connections and registrations may share one). */
static ncclResult_t open_peer(struct mscclppComm *c, struct msc_p2p *s, int peer,
                              const struct p2p_mem_desc *d, uint64_t size, void **ptr)
{
    if (d->off > d->alloc_size || size > d->alloc_size - d->off)
        return zn_error(ncclRemoteError, ZN_P2P,
                        "rank %d described a buffer of %llu bytes at offset %llu of an "
                        "allocation of %llu",
                        peer, (unsigned long long)size, (unsigned long long)d->off,
                        (unsigned long long)d->alloc_size);
    for (struct p2p_open *o = s->opened; o; o = o->next)
        if (o->peer == peer && o->base == d->base) {
            *ptr = (char *)o->ptr + d->off;
            return ncclSuccess;
        }
    struct p2p_open *o;
    ZN_CHECK(zn_calloc(&o, 1, "p2p mapping"));
    ncclResult_t res = zn_cuda_ipc_open(d->handle, &o->ptr);
    if (res != ncclSuccess) {
        free(o);
        return res;
    }
    o->peer = peer;
    o->base = d->base;
    o->next = s->opened;
    s->opened = o;
    *ptr = (char *)o->ptr + d->off;
    return ncclSuccess;
}

ncclResult_t zn_msc_p2p_buf_open(struct mscclppComm *c, int peer, const void *desc, uint64_t size,
                                 void **ptr)
{
    struct msc_p2p *s;
    ZN_CHECK(state(c, &s));
    return open_peer(c, s, peer, desc, size, ptr);
}

ncclResult_t zn_msc_p2p_prepare(struct mscclppComm *c, int i, void *desc)
{
    struct msc_p2p *s;
    ZN_CHECK(state(c, &s));
    struct p2p_desc *d = desc;
    ZN_CHECK(zn_msc_p2p_buf_desc(c, c->dev[i].localBuff, c->host[i].local_size, &d->buf));
    d->sig = s->sig_desc;
    d->sig.off = (uint64_t)i * ZN_MSC_SIGNAL_SLOT;
    char *slot = (char *)s->sig_arena + (size_t)i * ZN_MSC_SIGNAL_SLOT;
    mscclppDevConn_t *dc = &c->dev[i];
    dc->localSignalEpochId = (struct mscclppDevConnSignalEpochId *)slot;
    dc->waitEpochId = (uint64_t *)(slot + 16);
    return zn_msc_p2p_fifo(c, i);
}

ncclResult_t zn_msc_p2p_fifo(struct mscclppComm *c, int i)
{
    struct msc_p2p *s;
    ZN_CHECK(state(c, &s));
    mscclppDevConn_t *dc = &c->dev[i];
    dc->fifo.triggerFifo = (mscclppTrigger *)((char *)s->dev_words + W_TRIGGERS);
    dc->fifo.triggerFifoTail = (uint64_t *)((char *)s->dev_words + W_TAIL);
    dc->fifo.triggerFifoHead = s->head;
    dc->fifo.connId = i;
    dc->fifo.zincAbort = (uint32_t *)((char *)s->dev_words + W_ABORT);
    dc->fifo.zincError = (uint32_t *)((char *)s->dev_words + W_ERROR);
    dc->fifo.zincTimeoutNs = (uint64_t)zn_timeout_ns();
    return ncclSuccess;
}

ncclResult_t zn_msc_p2p_attach(struct mscclppComm *c, int i, const void *peer_desc)
{
    struct msc_p2p *s;
    ZN_CHECK(state(c, &s));
    const struct p2p_desc *d = peer_desc;
    int peer = c->host[i].remote_rank;
    void *sig;
    ZN_CHECK(open_peer(c, s, peer, &d->buf, c->host[i].remote_size, &c->dev[i].remoteBuff));
    ZN_CHECK(open_peer(c, s, peer, &d->sig, ZN_MSC_SIGNAL_SLOT, &sig));
    c->dev[i].remoteSignalEpochId = sig;
    return ncclSuccess;
}

ncclResult_t zn_msc_p2p_copy(struct mscclppComm *c, int i, uint64_t dst_off, uint64_t src_off,
                             uint64_t size)
{
    struct msc_p2p *s = c->p2p;
    void *dst = (char *)c->dev[i].remoteBuff + dst_off;
    const void *src = (const char *)c->dev[i].localBuff + src_off;
    return rt(cudaMemcpyAsync(dst, src, size, cudaMemcpyDeviceToDevice, s->stream),
              "cudaMemcpyAsync (proxy put)");
}

ncclResult_t zn_msc_p2p_signal(struct mscclppComm *c, int i)
{
    struct msc_p2p *s = c->p2p;
    void *dst = &c->dev[i].remoteSignalEpochId->proxy;
    const void *src = &c->dev[i].localSignalEpochId->device;
    return rt(cudaMemcpyAsync(dst, src, sizeof(uint64_t), cudaMemcpyDeviceToDevice, s->stream),
              "cudaMemcpyAsync (proxy signal)");
}

/* Blocking for now; on zinc's proxy thread this becomes an event polled by the next calls. */
ncclResult_t zn_msc_p2p_sync(struct mscclppComm *c)
{
    struct msc_p2p *s = c->p2p;
    return rt(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize (proxy flush)");
}

ncclResult_t zn_msc_p2p_copy_sync(struct mscclppComm *c, void *dst, const void *src, uint64_t size)
{
    struct msc_p2p *s = c->p2p;
    ZN_CHECK(rt(cudaMemcpyAsync(dst, src, size, cudaMemcpyDefault, s->stream),
                "cudaMemcpyAsync (net staging)"));
    return rt(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize (net staging)");
}

ncclResult_t zn_msc_p2p_write(void *dst, const void *src, uint64_t size, void *stream)
{
    return rt(cudaMemcpyAsync(dst, src, size, cudaMemcpyDefault, (cudaStream_t)stream),
              "cudaMemcpyAsync (mscclppRegisteredBufferWrite)");
}

void zn_msc_p2p_free_all(struct mscclppComm *c)
{
    struct msc_p2p *s = c->p2p;
    if (!s) return;
    cudaStreamSynchronize(s->stream);
    cudaStreamDestroy(s->stream);
    while (s->opened) {
        struct p2p_open *o = s->opened;
        s->opened = o->next;
        zn_cuda_ipc_close(o->ptr);
        free(o);
    }
    zn_cuda_free(s->sig_arena);
    zn_cuda_free(s->head);
    zn_cuda_host_free(s->host_words);
    free(s);
    c->p2p = NULL;
    c->fifo_host = NULL;
    c->tail_host = NULL;
    c->abort_word = c->error_word = NULL;
}

#else /* no CUDA in this build: mscclppConnect refuses P2P before any of these is reached */

static ncclResult_t no_cuda(void)
{
    return zn_error(ncclInvalidUsage, ZN_P2P,
                    "transport P2P needs CUDA, and this libmscclpp was built without it");
}
ncclResult_t zn_msc_p2p_prepare(struct mscclppComm *c, int i, void *desc)
{
    return no_cuda();
}
ncclResult_t zn_msc_p2p_attach(struct mscclppComm *c, int i, const void *peer_desc)
{
    return no_cuda();
}
ncclResult_t zn_msc_p2p_fifo(struct mscclppComm *c, int i)
{
    return no_cuda();
}
ncclResult_t zn_msc_p2p_copy_sync(struct mscclppComm *c, void *dst, const void *src, uint64_t size)
{
    return no_cuda();
}
ncclResult_t zn_msc_p2p_copy(struct mscclppComm *c, int i, uint64_t dst_off, uint64_t src_off,
                             uint64_t size)
{
    return no_cuda();
}
ncclResult_t zn_msc_p2p_signal(struct mscclppComm *c, int i)
{
    return no_cuda();
}
ncclResult_t zn_msc_p2p_sync(struct mscclppComm *c)
{
    return no_cuda();
}
ncclResult_t zn_msc_p2p_write(void *dst, const void *src, uint64_t size, void *stream)
{
    return no_cuda();
}
ncclResult_t zn_msc_p2p_buf_desc(struct mscclppComm *c, void *buf, uint64_t size, void *desc)
{
    return no_cuda();
}
ncclResult_t zn_msc_p2p_buf_open(struct mscclppComm *c, int peer, const void *desc, uint64_t size,
                                 void **ptr)
{
    return no_cuda();
}
void zn_msc_p2p_free_all(struct mscclppComm *c) {}
#endif
