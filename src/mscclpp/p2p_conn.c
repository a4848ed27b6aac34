/*
 * mscclppTransportP2P: connections between GPUs of one host, one process per rank, on the p2p
 * transport's one-sided table (zn_p2p_rma used on its own, transport/gpu_peer_rma.c: buffers and
 * signal words shared through CUDA IPC handles, as MSCCL++ 0.1 does, and the copies on the
 * domain's stream).
 *
 * What stays here is MSCCL++'s: the communicator's one-sided domain, the signal words (one
 * device region per communicator from the table's mem_alloc, ZN_MSC_SIGNAL_SLOT bytes for each
 * connection at its index, imported once by each peer), the device-connection layout, and the
 * FIFO. Kernels store into remoteBuff and the peer's signal words directly (putDirect,
 * signalDirect), or push triggers that the proxy (proxy.c) hands to the table: a data trigger
 * is a put, a signal a store of the count the trigger names into the peer's `proxy`
 * word (the stream keeps it behind the data it announces), a flush the table's flush.
 *
 * The FIFO (mscclppfifo.h): triggers and the published tail in mapped pinned host memory, the
 * head in device memory; one FIFO per communicator, shared by its connections (connId says
 * which), as in MSCCL++ 0.1.
 *
 * Without CUDA in the build every CUDA call fails with a clear error, and mscclppConnect
 * refuses P2P (no GPU) before any of this is reached.
 */
#include "msc.h"
#include "util/clock.h"
#include "util/cuda.h"
#include "util/err.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The table, looked up as every caller does (a few comparisons per call). */
#define RMA zn_transport_rma(&zn_transport_p2p)

/* What one side sends the other: the keys of its buffer and of its signal words, and where
 * its slot lies among them. */
struct p2p_desc {
    struct zn_rma_key buf, sig;
    uint64_t sig_off;
};
_Static_assert(sizeof(struct p2p_desc) <= ZN_MSC_P2P_DESC_BYTES, "descriptor fits");

/* Bytes of a communicator's signal words. */
#define SIG_BYTES ((size_t)ZN_MSC_MAX_CONNS * ZN_MSC_SIGNAL_SLOT)

struct msc_p2p {
    void *host_words; /* pinned, mapped: FIFO triggers, tail, abort and error words */
    void *dev_words;  /* the same, as the GPU sees it */
    uint64_t *head;   /* device memory */
    void *dom;        /* the p2p one-sided domain */
    char *sig;        /* device memory, ZN_MSC_MAX_CONNS slots: a region of dom */
    void *sig_region;
    struct zn_rma_key sig_key;
};

/* Layout of the pinned words. */
#define W_TRIGGERS 0
#define W_TAIL     (MSCCLPP_PROXY_FIFO_SIZE * sizeof(mscclppTrigger))
#define W_ABORT    (W_TAIL + 64)
#define W_ERROR    (W_ABORT + 4)
#define W_BYTES    (W_ABORT + 64)

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
    ZN_CHECK_GOTO(RMA->domain_open(&c->tctx, &s->dom), res, fail_head);
    ZN_CHECK_GOTO(RMA->mem_alloc(s->dom, SIG_BYTES, c->nranks, (void **)&s->sig, &s->sig_region),
                  res, fail_dom);
    ZN_CHECK_GOTO(RMA->key_pack(s->dom, s->sig_region, &s->sig_key), res, fail_dom);
    c->fifo_host = (mscclppTrigger *)((char *)s->host_words + W_TRIGGERS);
    c->tail_host = (uint64_t *)((char *)s->host_words + W_TAIL);
    c->abort_word = (uint32_t *)((char *)s->host_words + W_ABORT);
    c->error_word = (uint32_t *)((char *)s->host_words + W_ERROR);
    c->p2p = s;
    *out = s;
    return ncclSuccess;
fail_dom:
    RMA->domain_close(s->dom); /* and the signal words, if made */
fail_head:
    zn_cuda_free(s->head);
fail_host:
    zn_cuda_host_free(s->host_words);
fail_free:
    free(s);
    return res;
}

/* A region of the domain for buf and its key (the first bytes of desc). */
static ncclResult_t buf_key(struct mscclppComm *c, void *buf, uint64_t size, void **region,
                            struct zn_rma_key *key)
{
    struct msc_p2p *s;
    ZN_CHECK(state(c, &s));
    ZN_CHECK(RMA->mem_reg(s->dom, buf, (size_t)size, region));
    return RMA->key_pack(s->dom, *region, key);
}

ncclResult_t zn_msc_p2p_buf_desc(struct mscclppComm *c, void *buf, uint64_t size, void *desc)
{
    void *region;
    struct zn_rma_key key;
    ZN_CHECK(buf_key(c, buf, size, &region, &key));
    memcpy(desc, &key, sizeof(key));
    return ncclSuccess;
}

ncclResult_t zn_msc_p2p_buf_open(struct mscclppComm *c, int peer, const void *desc, uint64_t size,
                                 void **ptr)
{
    struct msc_p2p *s;
    struct zn_rma_key key;
    void *remote;
    ZN_CHECK(state(c, &s));
    memcpy(&key, desc, sizeof(key));
    size_t len;
    ZN_CHECK(RMA->key_import(s->dom, peer, &key, &remote));
    *ptr = RMA->remote_addr(remote, &len);
    if (size > len)
        return zn_error(ncclRemoteError, ZN_P2P,
                        "rank %d registered a buffer of %llu bytes, and its key says %zu", peer,
                        (unsigned long long)size, len);
    return ncclSuccess;
}

ncclResult_t zn_msc_p2p_prepare(struct mscclppComm *c, int i, void *desc)
{
    struct msc_p2p *s;
    struct zn_msc_conn *h = &c->host[i];
    ZN_CHECK(state(c, &s));
    struct p2p_desc *d = desc;
    ZN_CHECK(buf_key(c, c->dev[i].localBuff, h->local_size, &h->lreg, &d->buf));
    d->sig = s->sig_key;
    d->sig_off = (uint64_t)i * ZN_MSC_SIGNAL_SLOT;
    char *slot = s->sig + (size_t)i * ZN_MSC_SIGNAL_SLOT;
    mscclppDevConn_t *dc = &c->dev[i];
    dc->localSignalEpochId = (struct mscclppDevConnSignalEpochId *)slot;
    dc->waitEpochId = (uint64_t *)(slot + 16);
    struct zn_rma_ep_args a = { .peer = h->remote_rank,
                                .tag = h->tag,
                                .buf = dc->localBuff,
                                .len = h->local_size,
                                .sig = &dc->localSignalEpochId->proxy };
    struct zn_rma_key unused;
    ZN_CHECK(RMA->ep_open(s->dom, &a, &h->ep, &unused));
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
    struct zn_msc_conn *h = &c->host[i];
    ZN_CHECK(state(c, &s));
    const struct p2p_desc *d = peer_desc;
    size_t buf_len, sig_len;
    ZN_CHECK(RMA->key_import(s->dom, h->remote_rank, &d->buf, &h->rbuf));
    ZN_CHECK(RMA->key_import(s->dom, h->remote_rank, &d->sig, &h->rsig));
    char *buf = RMA->remote_addr(h->rbuf, &buf_len), *sig = RMA->remote_addr(h->rsig, &sig_len);
    /* Kernels store into both directly: what the peer declared must lie inside its keys. */
    if (h->remote_size > buf_len || sig_len < ZN_MSC_SIGNAL_SLOT ||
        d->sig_off > sig_len - ZN_MSC_SIGNAL_SLOT)
        return zn_error(ncclRemoteError, ZN_P2P,
                        "connection to rank %d tag %d: the peer's descriptor is inconsistent",
                        h->remote_rank, h->tag);
    h->rsig_off = d->sig_off;
    c->dev[i].remoteBuff = buf;
    c->dev[i].remoteSignalEpochId = (struct mscclppDevConnSignalEpochId *)(sig + d->sig_off);
    return ncclSuccess;
}

ncclResult_t zn_msc_p2p_copy(struct mscclppComm *c, int i, uint64_t dst_off, uint64_t src_off,
                             uint64_t size)
{
    struct zn_msc_conn *h = &c->host[i];
    return RMA->put(h->ep, h->lreg, src_off, h->rbuf, dst_off, size);
}

/* The signal count the kernel raised when it pushed the trigger (zn_msc_signal_count): the
 * kernel may have raised the count again since (its next putWithSignal), so the word in device
 * memory is not it. */
ncclResult_t zn_msc_p2p_signal(struct mscclppComm *c, int i, uint64_t low)
{
    struct zn_msc_conn *h = &c->host[i];
    uint64_t v = zn_msc_signal_count(h->signaled, low);
    if (!v) {
        /* No count in the trigger: copy the kernel's counter as before (a later signal of that
         * kernel may show early), rather than store a count that was never raised. */
        struct msc_p2p *s = c->p2p;
        size_t slot = (size_t)i * ZN_MSC_SIGNAL_SLOT;
        return RMA->put(h->ep, s->sig_region,
                        slot + offsetof(struct mscclppDevConnSignalEpochId, device), h->rsig,
                        h->rsig_off + offsetof(struct mscclppDevConnSignalEpochId, proxy),
                        sizeof(uint64_t));
    }
    h->signaled = v;
    return RMA->signal(h->ep, h->rsig,
                       h->rsig_off + offsetof(struct mscclppDevConnSignalEpochId, proxy), v);
}

/* Blocking for now; on zinc's proxy thread this becomes an event polled by the next calls. */
ncclResult_t zn_msc_p2p_sync(struct mscclppComm *c, int i)
{
    return RMA->flush(c->host[i].ep);
}

ncclResult_t zn_msc_p2p_write(void *dst, const void *src, uint64_t size, void *stream)
{
    return zn_cuda_memcpy_async(dst, src, size, stream);
}

void zn_msc_p2p_free_all(struct mscclppComm *c)
{
    struct msc_p2p *s = c->p2p;
    if (!s) return;
    /* The copies still on the stream first, then the mappings and the signal words. */
    RMA->domain_close(s->dom);
    zn_cuda_free(s->head);
    zn_cuda_host_free(s->host_words);
    free(s);
    c->p2p = NULL;
    c->fifo_host = NULL;
    c->tail_host = NULL;
    c->abort_word = c->error_word = NULL;
}
