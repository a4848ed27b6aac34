/*
 * mscclppTransportIB: connections between hosts over one of zinc's nets, on the net transport's
 * one-sided table (zn_transport_net_rma, transport/net_rma.c: the net's choice, the connection
 * pair, RDMA writes or two-sided messages, the queues, the staging of GPU buffers). An ibDev
 * argument asks for the IB net and that device explicitly.
 *
 * What stays here is MSCCL++'s: the communicator's one-sided domain, the device-connection
 * layout (a connection's signal words: in the host structure for a host buffer, in mapped
 * pinned memory for a GPU buffer, whose kernels wait on them and push FIFO triggers), the
 * epochs that signals carry, the host waits (zincConnWait) and the FIFO triggers of IB
 * connections handed to the table by the proxy.
 */
#include "msc.h"
#include "util/clock.h"
#include "util/cuda.h"
#include "util/err.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* The table, looked up as every caller does (a few comparisons per call). */
#define RMA zn_transport_rma(&zn_transport_net)

/* One IB connection's MSCCL++ side. */
struct msc_net {
    char *ib_dev; /* the device asked for, or NULL */
    int gpu;      /* the buffer is GPU memory */
    /* The signal words and waitEpochId: here for host buffers; in mapped pinned memory for a
     * GPU buffer (kernels wait on them), sigp / waitp then being the host's view. */
    struct mscclppDevConnSignalEpochId sig;
    uint64_t wait_epoch;
    struct mscclppDevConnSignalEpochId *sigp;
    uint64_t *waitp;
    void *words, *words_dev; /* pinned: the GPU case's signal slot */
    uint64_t sent_epoch;     /* signals issued: the epoch the next one carries */
    struct zn_rma_key desc;  /* this side's, from ep_open */
};

static struct msc_net *net_of(struct zn_msc_conn *h)
{
    return h->net;
}

/* Make this side's one-sided connection once the buffer is known (at mscclppConnect, or at
 * mscclppRegisterBufferForConnection): a device that does not exist is refused there. */
static ncclResult_t net_open(struct mscclppComm *c, int i)
{
    struct zn_msc_conn *h = &c->host[i];
    struct msc_net *m = net_of(h);
    void *base;
    size_t alloc;
    if (!c->net_dom) ZN_CHECK(RMA->domain_open(&c->tctx, &c->net_dom));
    if (zn_cuda_mem_range(c->dev[i].localBuff, &base, &alloc) == 0) {
        ZN_CHECK(zn_cuda_host_alloc(&m->words, &m->words_dev, ZN_MSC_SIGNAL_SLOT));
        memset(m->words, 0, ZN_MSC_SIGNAL_SLOT);
        m->sigp = m->words;
        m->waitp = (uint64_t *)((char *)m->words + 16);
        m->gpu = 1;
    } else {
        m->sigp = &m->sig;
        m->waitp = &m->wait_epoch;
    }
    struct zn_rma_ep_args a = { .peer = h->remote_rank,
                                .tag = h->tag,
                                .dev = m->ib_dev,
                                .buf = c->dev[i].localBuff,
                                .len = h->local_size,
                                .sig = &m->sigp->proxy };
    return RMA->ep_open(c->net_dom, &a, &h->ep, &m->desc);
}

void zn_msc_net_free(struct zn_msc_conn *h)
{
    struct msc_net *m = net_of(h);
    if (!m) return;
    RMA->ep_close(h->ep);
    h->ep = NULL;
    if (m->words) zn_cuda_host_free(m->words);
    free(m->ib_dev);
    free(m);
    h->net = NULL;
}

void zn_msc_net_fini(struct mscclppComm *c)
{
    RMA->domain_close(c->net_dom);
    c->net_dom = NULL;
}

ncclResult_t zn_msc_net_declare(struct mscclppComm *c, int i, const char *ib_dev)
{
    struct zn_msc_conn *h = &c->host[i];
    struct msc_net *m;
    ZN_CHECK(zn_calloc(&m, 1, "net connection"));
    h->net = m;
    ncclResult_t res = ncclSuccess;
    if (ib_dev && ib_dev[0] && !(m->ib_dev = strdup(ib_dev)))
        res = zn_error(ncclSystemError, ZN_NET, "out of memory");
    if (res == ncclSuccess && c->dev[i].localBuff) res = net_open(c, i);
    if (res != ncclSuccess) zn_msc_net_free(h);
    return res;
}

ncclResult_t zn_msc_net_set_buffer(struct mscclppComm *c, int i)
{
    return net_open(c, i);
}

ncclResult_t zn_msc_net_prepare(struct mscclppComm *c, int i, void *desc)
{
    struct msc_net *m = net_of(&c->host[i]);
    if (m->gpu) {
        c->dev[i].localSignalEpochId = m->words_dev;
        c->dev[i].waitEpochId = (uint64_t *)((char *)m->words_dev + 16);
    } else {
        c->dev[i].localSignalEpochId = &m->sig;
        c->dev[i].waitEpochId = &m->wait_epoch;
    }
    memcpy(desc, &m->desc, sizeof(m->desc));
    return m->gpu ? zn_msc_p2p_fifo(c, i) : ncclSuccess;
}

ncclResult_t zn_msc_net_attach(struct mscclppComm *c, int i, const void *peer_desc)
{
    struct zn_rma_key k;
    memcpy(&k, peer_desc, sizeof(k));
    return RMA->ep_connect(c->host[i].ep, &k, c->host[i].remote_size);
}

/* Step every new net connection until all are established (the peers' orders may differ). */
ncclResult_t zn_msc_net_establish(struct mscclppComm *c)
{
    int64_t deadline = zn_deadline_from_now();
    for (;;) {
        int pending = 0;
        for (int i = c->nsetup; i < c->nconns; i++) {
            if (c->host[i].transport != mscclppTransportIB) continue;
            int done = 0;
            ZN_CHECK(RMA->ep_establish(c->host[i].ep, &done));
            pending += !done;
        }
        if (!pending) return ncclSuccess;
        if (zn_now_ns() > deadline)
            return zn_error(ncclSystemError, ZN_NET,
                            "mscclppConnectionSetup: %d net connection(s) not established within "
                            "ZINC_TIMEOUT",
                            pending);
        sched_yield();
    }
}

void zn_msc_net_progress(struct mscclppComm *c)
{
    if (c->net_dom) RMA->domain_progress(c->net_dom);
}

ncclResult_t zn_msc_net_error(struct mscclppComm *c)
{
    for (int i = 0; i < c->nsetup; i++) {
        if (c->host[i].transport != mscclppTransportIB) continue;
        ncclResult_t res = RMA->ep_check(c->host[i].ep, NULL, NULL);
        if (res != ncclSuccess) return res;
    }
    return ncclSuccess;
}

int zn_msc_net_closed(struct zn_msc_conn *h)
{
    int closed = 0;
    if (h->transport == mscclppTransportIB && h->ep) (void)RMA->ep_check(h->ep, NULL, &closed);
    return closed;
}

ncclResult_t zn_msc_net_host_put(struct zn_msc_conn *h, const char *fn)
{
    if (!net_of(h)->gpu) return ncclSuccess;
    return zn_error(ncclInvalidUsage, ZN_NET,
                    "%s to rank %d tag %d: the connection's buffer is GPU memory; host threads "
                    "put from host buffers (kernels use the device methods)",
                    fn, h->remote_rank, h->tag);
}

/* The epoch the next signal carries. Kernels raise `device` themselves; for a host buffer the
 * host's signal raises it here. */
static uint64_t next_epoch(struct msc_net *m)
{
    uint64_t e = ++m->sent_epoch;
    if (!m->gpu) __atomic_store_n(&m->sigp->device, e, __ATOMIC_RELAXED);
    return e;
}

/* kind: 1 data, 2 signal, 3 both (one operation: the signal lands with the data). */
ncclResult_t zn_msc_net_enqueue(struct zn_msc_conn *h, uint32_t kind, uint64_t dst_off,
                                uint64_t src_off, uint64_t size, const char *fn)
{
    struct msc_net *m = net_of(h);
    if (kind == 1) return RMA->put(h->ep, NULL, src_off, NULL, dst_off, size);
    if (kind == 2) return RMA->signal(h->ep, NULL, 0, next_epoch(m));
    return RMA->put_signal(h->ep, NULL, src_off, NULL, dst_off, size, NULL, 0, next_epoch(m));
}

ncclResult_t zn_msc_net_wait(struct zn_msc_conn *h)
{
    struct msc_net *m = net_of(h);
    void *dom = h->comm->net_dom;
    uint64_t want = *m->waitp + 1;
    int64_t deadline = zn_deadline_from_now();
    for (uint32_t polls = 1;; polls++) {
        RMA->domain_progress(dom);
        if (__atomic_load_n(&m->sigp->proxy, __ATOMIC_ACQUIRE) >= want) break;
        if (polls > 256) sched_yield();
        if ((polls & 255) != 0) continue;
        ncclResult_t res = RMA->ep_check(h->ep, "zincConnWait", NULL);
        /* What arrived before the peer left still counts. */
        if (res != ncclSuccess) {
            if (__atomic_load_n(&m->sigp->proxy, __ATOMIC_ACQUIRE) >= want) break;
            return res;
        }
        if (zn_now_ns() > deadline)
            return zn_error(ncclSystemError, ZN_NET,
                            "zincConnWait: nothing from rank %d on tag %d within ZINC_TIMEOUT "
                            "(%lld s)",
                            h->remote_rank, h->tag, (long long)(zn_timeout_ns() / 1000000000ll));
    }
    *m->waitp = want;
    return ncclSuccess;
}

/* A FIFO trigger of a GPU buffer's connection: the table stages the data through the mirror. */
ncclResult_t zn_msc_net_trigger(struct mscclppComm *c, int i, uint64_t type, uint64_t dst_off,
                                uint64_t src_off, uint64_t size)
{
    struct zn_msc_conn *h = &c->host[i];
    uint32_t kind = ((type & mscclppData) ? 1 : 0) | ((type & mscclppFlag) ? 2 : 0);
    if (kind) ZN_CHECK(zn_msc_net_enqueue(h, kind, dst_off, src_off, size, "proxy"));
    if (type & mscclppSync) ZN_CHECK(RMA->flush(h->ep));
    return ncclSuccess;
}

ncclResult_t zn_msc_net_flush(struct zn_msc_conn *h)
{
    ZN_CHECK(RMA->ep_check(h->ep, "zincConnFlush", NULL));
    return RMA->flush(h->ep);
}
