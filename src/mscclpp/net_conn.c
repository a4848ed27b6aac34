/*
 * mscclppTransportIB: connections between hosts over one of zinc's nets (src/net): the IB verbs
 * net where it has a device, else (beyond MSCCL++ 0.1) the socket net, or whichever net
 * ZINC_NET names. An ibDev argument asks for the IB net and that device explicitly.
 *
 * Each connection is a pair of net connections (this side's send comm to the peer and its recv
 * comm from it). Puts and signals take one of two paths, chosen per connection at setup and
 * logged at INFO ("mscclpp: connection to rank R tag T: puts as RDMA writes" or "... as
 * two-sided messages (why)"):
 *
 * One-sided (RDMA writes): when the net has zinc's one-sided extension (net.h, struct
 * zn_net_rma_ops: the IB net) and both sides' buffers are host memory. At setup each side
 * registers its buffer and its signal word on its recv comm and sends the peer one key record
 * (struct rma_keys: address, size and rkey of both) as the first message of the connection. A
 * put is then an RDMA write of the source range straight into the peer's buffer at dstOffset,
 * and a signal an RDMA write of the 8-byte epoch into the peer's `proxy` word, posted after the
 * data on the same queue pair (the extension puts one connection's writes on one QP), so the
 * peer's wait sees the epoch only after the data. Nothing runs on the receiving side: no
 * receive is posted, its proxy and host waits only watch the signal word (and, now and then,
 * whether the peer closed its end). A flush waits until every posted write has completed.
 * Ranges are checked against the peer's declared size before anything is posted, and the net
 * refuses a write outside the peer's key.
 *
 * Two-sided (messages): on the socket net, and for GPU buffers (the proxy stages them through
 * a pinned host mirror; with GPUDirect the IB net could write into a registered GPU buffer
 * directly, as MSCCL++ 0.1 does, but that is not implemented: no GPU and IB machine to test it
 * on). Every operation is one header (struct net_hdr), followed for a put by the data as a
 * second message; messages of one net connection match in order, so the receiving side knows
 * from each header what comes next. The receiver lands the data at the header's offset in its
 * own buffer only after checking that the range lies inside it: a header naming a range
 * outside is refused (logged, the connection fails), nothing is written. A signal header
 * carries the sender's epoch; the receiver stores it into its `proxy` word after every earlier
 * message of the connection has landed, so a wait that sees it sees the data before it.
 *
 * Progress. Net calls never block (a send may have to wait until the peer posts its receive),
 * so operations are queued per connection and moved on by zn_msc_net_progress, which goes over
 * every net connection of the communicator under one lock: from libmscclpp's proxy thread and
 * from host threads in zincConnWait / zincConnFlush (so that a rank waiting on one peer keeps
 * its sends to the others and its receives moving).
 *
 * GPU buffers: kernels push FIFO triggers (the communicator's FIFO, as for P2P); the proxy
 * copies each put's range into a pinned host mirror of the buffer and queues it (the net reads
 * host memory: the socket net cannot take GPU pointers), and the receiving side copies landed
 * data from its mirror into the GPU buffer before it raises the signal word, which lives in
 * mapped pinned memory so that kernels' waits see it.
 */
#include "msc.h"
#include "net/net_layer.h"
#include "util/clock.h"
#include "util/cuda.h"
#include "util/err.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define NET_QUEUE 64 /* operations in flight per connection */

enum { HDR_DATA = 1, HDR_SIGNAL = 2 };

struct net_hdr {
    uint64_t off, size, epoch;
    uint32_t kind, pad;
};

/* The key record (one-sided path), sent as the first message of each direction:
 *
 *   +----------+---------+-------+-----------------------------+-----------------------------+
 *   | magic    | version | flags | buffer: addr, size, rkey    | signal word: addr, size,    |
 *   | u32      | u16     | u16   | (struct zn_net_rkey, 24 B)  | rkey (24 B)                 |
 *   +----------+---------+-------+-----------------------------+-----------------------------+
 *
 * flags KEYS_RMA: this side takes puts as RDMA writes (its buffer is host memory). Both sides
 * must say so for the connection to use them; otherwise the keys are ignored. Host order:
 * both ends run this build (the setup round already assumes it). */
#define KEYS_MAGIC   0x4b43534du /* "MSCK" */
#define KEYS_VERSION 1
enum { KEYS_RMA = 1 };

struct rma_keys {
    uint32_t magic;
    uint16_t version, flags;
    struct zn_net_rkey buf, sig;
};

struct net_op {
    struct net_hdr hdr;
    uint64_t src_off;
    void *hreq, *dreq;
    int hdone, ddone;
};

struct net_conn {
    const struct zn_net *net;
    int dev;
    void *listen, *send, *recv;
    char my_handle[NCCL_NET_HANDLE_MAXSIZE], peer_handle[NCCL_NET_HANDLE_MAXSIZE];
    void *mh_send_buf, *mh_recv_buf, *mh_ops, *mh_rhdr;
    /* Send queue: [done, posted) are in flight, [posted, queued) wait for the net. */
    struct net_op ops[NET_QUEUE];
    uint64_t done, posted, queued;
    /* Receive side: the header being received, and where it is. */
    struct net_hdr rhdr;
    void *rreq;
    int rstate; /* 0 nothing posted, 1 header posted, 2 data posted */
    /* The signal words and waitEpochId: here for host buffers; in mapped pinned memory for a
     * GPU buffer (kernels wait on them), sigp / waitp then being the host's view. */
    struct mscclppDevConnSignalEpochId sig;
    uint64_t wait_epoch;
    struct mscclppDevConnSignalEpochId *sigp;
    uint64_t *waitp;
    uint64_t sent_epoch; /* signals queued: the epoch the next signal header carries */
    /* What the net reads and writes: localBuff, or for a GPU buffer a pinned host mirror that
     * the proxy stages through. */
    char *hostbuf;
    int gpu;
    void *words;        /* pinned: the GPU case's signal slot */
    ncclResult_t error; /* sticky: the first failure of this connection */
    int closed;         /* the peer closed its side while nothing was owed to this side */
    /* Setup's key exchange, and the one-sided path it may choose. */
    const struct zn_net_rma_ops *rma_ops; /* the net's one-sided extension, or NULL */
    int rma;                              /* puts and signals are RDMA writes */
    int established;                      /* keys exchanged (or none to exchange) */
    struct rma_keys my_keys, peer_keys;
    void *mh_keys_send, *mh_keys_recv, *mh_sig;
    void *kreq_send, *kreq_recv;
    int kdone_send, kdone_recv;
};

/* Record the connection's first failure: every later call on it reports it. */
static ncclResult_t conn_fail(struct zn_msc_conn *h, ncclResult_t res)
{
    struct net_conn *n = h->net;
    if (n->error == ncclSuccess) n->error = res;
    return res;
}

static ncclResult_t pick_net(struct zn_msc_conn *h, const char *ib_dev, struct net_conn *n)
{
    if (!ib_dev || !ib_dev[0]) {
        n->dev = 0;
        return zn_net_select(&n->net);
    }
    n->net = zn_net_find("IB");
    if (!n->net)
        return zn_error(ncclInvalidUsage, ZN_NET,
                        "mscclppConnect to rank %d tag %d: ibDev \"%s\" asks for the IB net, and "
                        "this process has no usable IB device (pass ibDev NULL to let zinc pick "
                        "a net, the socket net where there is no IB)",
                        h->remote_rank, h->tag, ib_dev);
    for (int d = 0; d < n->net->ndev; d++) {
        ncclNetProperties_t p;
        if (n->net->ops->getProperties(d, &p) != ncclSuccess || !p.name) continue;
        size_t len = strlen(p.name);
        if (!strncmp(p.name, ib_dev, len) && (ib_dev[len] == 0 || ib_dev[len] == ':')) {
            n->dev = d;
            return ncclSuccess;
        }
    }
    return zn_error(ncclInvalidUsage, ZN_NET,
                    "mscclppConnect to rank %d tag %d: no IB device named \"%s\" (%d devices)",
                    h->remote_rank, h->tag, ib_dev, n->net->ndev);
}

ncclResult_t zn_msc_net_declare(struct mscclppComm *c, int i, const char *ib_dev)
{
    struct zn_msc_conn *h = &c->host[i];
    struct net_conn *n;
    ZN_CHECK(zn_calloc(&n, 1, "net connection"));
    ncclResult_t res = pick_net(h, ib_dev, n);
    if (res != ncclSuccess) {
        free(n);
        return res;
    }
    n->rma_ops = zn_net_rma(n->net);
    h->net = n;
    zn_info(ZN_NET, "mscclpp: connection to rank %d tag %d over net %s, device %d", h->remote_rank,
            h->tag, n->net->name, n->dev);
    return ncclSuccess;
}

/* A GPU buffer: kernels push triggers into the communicator's FIFO; the net moves the data
 * through a pinned mirror of the buffer; the signal words are mapped pinned memory. */
static ncclResult_t gpu_prepare(struct mscclppComm *c, int i)
{
    struct zn_msc_conn *h = &c->host[i];
    struct net_conn *n = h->net;
    void *words_dev, *mirror_dev;
    ZN_CHECK(zn_cuda_host_alloc(&n->words, &words_dev, ZN_MSC_SIGNAL_SLOT));
    memset(n->words, 0, ZN_MSC_SIGNAL_SLOT);
    n->sigp = n->words;
    n->waitp = (uint64_t *)((char *)n->words + 16);
    c->dev[i].localSignalEpochId = words_dev;
    c->dev[i].waitEpochId = (uint64_t *)((char *)words_dev + 16);
    ZN_CHECK(zn_cuda_host_alloc((void **)&n->hostbuf, &mirror_dev, h->local_size));
    n->gpu = 1;
    return zn_msc_p2p_fifo(c, i);
}

ncclResult_t zn_msc_net_prepare(struct mscclppComm *c, int i, void *desc)
{
    struct zn_msc_conn *h = &c->host[i];
    struct net_conn *n = h->net;
    void *base;
    size_t alloc;
    if (zn_cuda_mem_range(c->dev[i].localBuff, &base, &alloc) == 0) {
        ZN_CHECK(gpu_prepare(c, i));
    } else {
        n->hostbuf = c->dev[i].localBuff;
        n->sigp = &n->sig;
        n->waitp = &n->wait_epoch;
        c->dev[i].localSignalEpochId = &n->sig;
        c->dev[i].waitEpochId = &n->wait_epoch;
    }
    ZN_CHECK(n->net->ops->listen(n->net->ctx, n->dev, n->my_handle, &n->listen));
    memcpy(desc, n->my_handle, NCCL_NET_HANDLE_MAXSIZE);
    return ncclSuccess;
}

ncclResult_t zn_msc_net_attach(struct mscclppComm *c, int i, const void *peer_desc)
{
    struct net_conn *n = c->host[i].net;
    memcpy(n->peer_handle, peer_desc, NCCL_NET_HANDLE_MAXSIZE);
    return ncclSuccess;
}

/* Register the buffers once both net connections exist; on a net with the one-sided
 * extension also the signal word (the peer writes it) and the key records. */
static ncclResult_t register_bufs(struct mscclppComm *c, int i)
{
    struct zn_msc_conn *h = &c->host[i];
    struct net_conn *n = h->net;
    const ncclNet_t *o = n->net->ops;
    void *buf = n->hostbuf;
    ZN_CHECK(o->regMr(n->send, buf, h->local_size, NCCL_PTR_HOST, &n->mh_send_buf));
    ZN_CHECK(o->regMr(n->send, n->ops, sizeof(n->ops), NCCL_PTR_HOST, &n->mh_ops));
    ZN_CHECK(o->regMr(n->recv, buf, h->local_size, NCCL_PTR_HOST, &n->mh_recv_buf));
    ZN_CHECK(o->regMr(n->recv, &n->rhdr, sizeof(n->rhdr), NCCL_PTR_HOST, &n->mh_rhdr));
    if (!n->rma_ops) return ncclSuccess;
    ZN_CHECK(o->regMr(n->recv, &n->sig, sizeof(n->sig), NCCL_PTR_HOST, &n->mh_sig));
    ZN_CHECK(o->regMr(n->send, &n->my_keys, sizeof(n->my_keys), NCCL_PTR_HOST, &n->mh_keys_send));
    ZN_CHECK(
        o->regMr(n->recv, &n->peer_keys, sizeof(n->peer_keys), NCCL_PTR_HOST, &n->mh_keys_recv));
    return ncclSuccess;
}

static ncclResult_t keys_fill(struct zn_msc_conn *h)
{
    struct net_conn *n = h->net;
    struct rma_keys *k = &n->my_keys;
    memset(k, 0, sizeof(*k));
    k->magic = KEYS_MAGIC;
    k->version = KEYS_VERSION;
    k->flags = n->gpu ? 0 : KEYS_RMA;
    if (!k->flags) return ncclSuccess;
    ZN_CHECK(n->rma_ops->key(n->recv, n->mh_recv_buf, n->hostbuf, h->local_size, &k->buf));
    return n->rma_ops->key(n->recv, n->mh_sig, &n->sig.proxy, sizeof(n->sig.proxy), &k->sig);
}

/* The peer's keys arrived: check them and pick the path. */
static ncclResult_t keys_apply(struct zn_msc_conn *h)
{
    struct net_conn *n = h->net;
    const struct rma_keys *k = &n->peer_keys;
    const char *why =
        n->gpu ? "this side's buffer is GPU memory" : "the peer's buffer is GPU memory";
    if (k->magic != KEYS_MAGIC || k->version != KEYS_VERSION)
        return zn_error(ncclRemoteError, ZN_NET,
                        "mscclppConnectionSetup: rank %d tag %d sent a bad key record (magic "
                        "%#x, version %u)",
                        h->remote_rank, h->tag, k->magic, k->version);
    n->rma = (k->flags & KEYS_RMA) && (n->my_keys.flags & KEYS_RMA);
    if (n->rma && (k->buf.size != h->remote_size || k->sig.size != sizeof(uint64_t)))
        return zn_error(ncclRemoteError, ZN_NET,
                        "mscclppConnectionSetup: rank %d tag %d described its buffer as %llu "
                        "bytes (declared %llu) and its signal word as %llu",
                        h->remote_rank, h->tag, (unsigned long long)k->buf.size,
                        (unsigned long long)h->remote_size, (unsigned long long)k->sig.size);
    if (n->rma)
        zn_info(ZN_NET, "mscclpp: connection to rank %d tag %d: puts as RDMA writes",
                h->remote_rank, h->tag);
    else
        zn_info(ZN_NET, "mscclpp: connection to rank %d tag %d: puts as two-sided messages (%s)",
                h->remote_rank, h->tag, why);
    n->established = 1;
    return ncclSuccess;
}

/* Exchange the key records over the new net connection (never blocks: called again until
 * n->established). A net without the one-sided extension has nothing to exchange. */
static ncclResult_t keys_step(struct zn_msc_conn *h)
{
    struct net_conn *n = h->net;
    const ncclNet_t *o = n->net->ops;
    if (!n->rma_ops) {
        zn_info(ZN_NET,
                "mscclpp: connection to rank %d tag %d: puts as two-sided messages (net %s has "
                "no one-sided writes)",
                h->remote_rank, h->tag, n->net->name);
        n->established = 1;
        return ncclSuccess;
    }
    if (!n->kreq_send && !n->kdone_send) {
        ZN_CHECK(keys_fill(h));
        ZN_CHECK(o->isend(n->send, &n->my_keys, sizeof(n->my_keys), 0, n->mh_keys_send, NULL,
                          &n->kreq_send));
    }
    if (!n->kreq_recv && !n->kdone_recv) {
        void *data = &n->peer_keys;
        size_t size = sizeof(n->peer_keys);
        int tag = 0;
        ZN_CHECK(o->irecv(n->recv, 1, &data, &size, &tag, &n->mh_keys_recv, NULL, &n->kreq_recv));
    }
    if (n->kreq_send) {
        ZN_CHECK(o->test(n->kreq_send, &n->kdone_send, NULL));
        if (n->kdone_send) n->kreq_send = NULL;
    }
    if (n->kreq_recv) {
        ZN_CHECK(o->test(n->kreq_recv, &n->kdone_recv, NULL));
        if (n->kdone_recv) n->kreq_recv = NULL;
    }
    if (n->kdone_send && n->kdone_recv) return keys_apply(h);
    return ncclSuccess;
}

/* One step of connection i's setup; *pending counts the connections not yet established. */
static ncclResult_t establish_one(struct mscclppComm *c, int i, int *pending)
{
    struct zn_msc_conn *h = &c->host[i];
    struct net_conn *n = h->net;
    const ncclNet_t *o = n->net->ops;
    if ((!n->send && o->connect(n->net->ctx, n->dev, n->peer_handle, &n->send, NULL)) ||
        (!n->recv && o->accept(n->listen, &n->recv, NULL)) ||
        (n->send && n->recv && !n->listen && !n->established && keys_step(h)))
        return zn_error(ncclSystemError, ZN_NET,
                        "mscclppConnectionSetup: connecting to rank %d tag %d over net %s "
                        "failed (the net's message above says why)",
                        h->remote_rank, h->tag, n->net->name);
    if (n->send && n->recv && n->listen) {
        ZN_CHECK(o->closeListen(n->listen));
        n->listen = NULL;
        ZN_CHECK(register_bufs(c, i));
    }
    *pending += !n->established;
    return ncclSuccess;
}

/* Connect and accept every new net connection at once (the peers' orders may differ), then
 * exchange the key records where the net has one-sided writes. */
ncclResult_t zn_msc_net_establish(struct mscclppComm *c)
{
    int64_t deadline = zn_deadline_from_now();
    for (;;) {
        int pending = 0;
        for (int i = c->nsetup; i < c->nconns; i++)
            if (c->host[i].transport == mscclppTransportIB) ZN_CHECK(establish_one(c, i, &pending));
        if (!pending) return ncclSuccess;
        if (zn_now_ns() > deadline)
            return zn_error(ncclSystemError, ZN_NET,
                            "mscclppConnectionSetup: %d net connection(s) not established within "
                            "ZINC_TIMEOUT",
                            pending);
        sched_yield();
    }
}

static ncclResult_t net_err(struct zn_msc_conn *h, ncclResult_t res, const char *what)
{
    char who[160];
    zn_peer_str(&h->comm->tctx, h->remote_rank, who, sizeof(who));
    return conn_fail(h, zn_error(res == ncclSuccess ? ncclSystemError : res, ZN_NET,
                                 "connection to %s tag %d: %s failed", who, h->tag, what));
}

/* Post one operation as RDMA writes: the data into the peer's buffer, then the epoch (from the
 * op's header, which stays put until the op is done) into the peer's signal word. *posted
 * stays 0 while the net asks to try again. */
static ncclResult_t rma_post(struct zn_msc_conn *h, struct net_op *op, int *posted)
{
    struct net_conn *n = h->net;
    ncclResult_t res;
    *posted = 0;
    if (!op->ddone && !op->dreq) {
        res = n->rma_ops->write(n->send, n->mh_send_buf, n->hostbuf + op->src_off, op->hdr.size,
                                &n->peer_keys.buf, op->hdr.off, &op->dreq);
        if (res != ncclSuccess) return net_err(h, res, "an RDMA write of data");
        if (!op->dreq) return ncclSuccess;
    }
    if (!op->hdone && !op->hreq) {
        res = n->rma_ops->write(n->send, n->mh_ops, &op->hdr.epoch, sizeof(op->hdr.epoch),
                                &n->peer_keys.sig, 0, &op->hreq);
        if (res != ncclSuccess) return net_err(h, res, "an RDMA write of a signal");
        if (!op->hreq) return ncclSuccess;
    }
    *posted = 1;
    return ncclSuccess;
}

/* Post one operation as messages: the header, then the data. */
static ncclResult_t msg_post(struct zn_msc_conn *h, struct net_op *op, int *posted)
{
    struct net_conn *n = h->net;
    const ncclNet_t *o = n->net->ops;
    ncclResult_t res;
    *posted = 0;
    if (!op->hreq) {
        res = o->isend(n->send, &op->hdr, sizeof(op->hdr), 0, n->mh_ops, NULL, &op->hreq);
        if (res != ncclSuccess) return net_err(h, res, "sending a header");
        if (!op->hreq) return ncclSuccess;
    }
    if (!op->ddone && !op->dreq) {
        char *src = n->hostbuf + op->src_off;
        res = o->isend(n->send, src, op->hdr.size, 0, n->mh_send_buf, NULL, &op->dreq);
        if (res != ncclSuccess) return net_err(h, res, "sending data");
        if (!op->dreq) return ncclSuccess;
    }
    *posted = 1;
    return ncclSuccess;
}

static ncclResult_t send_progress(struct zn_msc_conn *h)
{
    struct net_conn *n = h->net;
    const ncclNet_t *o = n->net->ops;
    const char *what = n->rma ? "an RDMA write" : "a send";
    while (n->posted < n->queued) {
        struct net_op *op = &n->ops[n->posted % NET_QUEUE];
        int posted;
        ZN_CHECK(n->rma ? rma_post(h, op, &posted) : msg_post(h, op, &posted));
        if (!posted) break;
        n->posted++;
    }
    while (n->done < n->posted) {
        struct net_op *op = &n->ops[n->done % NET_QUEUE];
        ncclResult_t res = ncclSuccess;
        if (!op->hdone) res = o->test(op->hreq, &op->hdone, NULL);
        if (res == ncclSuccess && !op->ddone) res = o->test(op->dreq, &op->ddone, NULL);
        if (res != ncclSuccess) return net_err(h, res, what);
        if (!op->hdone || !op->ddone) break;
        n->done++;
    }
    return ncclSuccess;
}

static ncclResult_t post_recv(struct net_conn *n, void *data, size_t size, void *mh)
{
    int tag = 0;
    return n->net->ops->irecv(n->recv, 1, &data, &size, &tag, &mh, NULL, &n->rreq);
}

/* A header arrived: post its data (bounds-checked) or apply its signal. */
static ncclResult_t recv_header(struct zn_msc_conn *h)
{
    struct net_conn *n = h->net;
    struct net_hdr *r = &n->rhdr;
    n->rreq = NULL;
    if (r->kind & HDR_DATA) {
        if (r->off > h->local_size || r->size > h->local_size - r->off || r->size == 0)
            return conn_fail(h, zn_error(ncclRemoteError, ZN_NET,
                                         "connection to rank %d tag %d: the peer put %llu bytes "
                                         "at offset %llu, outside this side's buffer of %llu "
                                         "bytes: refused, nothing written",
                                         h->remote_rank, h->tag, (unsigned long long)r->size,
                                         (unsigned long long)r->off,
                                         (unsigned long long)h->local_size));
        char *dst = n->hostbuf + r->off;
        if (post_recv(n, dst, r->size, n->mh_recv_buf))
            return net_err(h, ncclSystemError, "receiving data");
        n->rstate = n->rreq ? 2 : 3; /* 3: the data receive is still to be posted */
        return ncclSuccess;
    }
    if (r->kind & HDR_SIGNAL) __atomic_store_n(&n->sigp->proxy, r->epoch, __ATOMIC_RELEASE);
    n->rstate = 0;
    return ncclSuccess;
}

/* The data of the current header landed: into the GPU buffer from the mirror, then the
 * signal it carries (so a kernel that sees the signal sees the data). */
static ncclResult_t recv_data_done(struct zn_msc_conn *h)
{
    struct net_conn *n = h->net;
    n->rreq = NULL;
    if (n->gpu) {
        char *dst = (char *)h->comm->dev[h->idx].localBuff + n->rhdr.off;
        ncclResult_t res =
            zn_msc_p2p_copy_sync(h->comm, dst, n->hostbuf + n->rhdr.off, n->rhdr.size);
        if (res != ncclSuccess) return conn_fail(h, res);
    }
    if (n->rhdr.kind & HDR_SIGNAL)
        __atomic_store_n(&n->sigp->proxy, n->rhdr.epoch, __ATOMIC_RELEASE);
    n->rstate = 0;
    return ncclSuccess;
}

static ncclResult_t recv_progress(struct zn_msc_conn *h)
{
    struct net_conn *n = h->net;
    for (;;) {
        int done = 0;
        if (n->rstate == 0) {
            if (post_recv(n, &n->rhdr, sizeof(n->rhdr), n->mh_rhdr))
                return net_err(h, ncclSystemError, "receiving a header");
            if (!n->rreq) return ncclSuccess;
            n->rstate = 1;
        } else if (n->rstate == 3) {
            char *dst = n->hostbuf + n->rhdr.off;
            if (post_recv(n, dst, n->rhdr.size, n->mh_recv_buf))
                return net_err(h, ncclSystemError, "receiving data");
            if (!n->rreq) return ncclSuccess;
            n->rstate = 2;
        }
        if (n->net->ops->test(n->rreq, &done, NULL)) {
            /* Between messages a peer that destroyed its communicator (or exited) owes this
             * side nothing yet: only a wait on this connection will need to hear of it. */
            if (n->rstate != 1) return net_err(h, ncclSystemError, "a receive");
            n->closed = 1;
            return ncclSuccess;
        }
        if (!done) return ncclSuccess;
        if (n->rstate == 1) {
            ZN_CHECK(recv_header(h));
        } else {
            ZN_CHECK(recv_data_done(h));
        }
    }
}

void zn_msc_net_progress(struct mscclppComm *c)
{
    /* A failed connection keeps its error for the calls on it; the others go on. */
    for (int i = 0; i < c->nsetup; i++) {
        struct zn_msc_conn *h = &c->host[i];
        if (h->transport != mscclppTransportIB) continue;
        struct net_conn *n = h->net;
        if (n->error != ncclSuccess || n->closed) continue;
        /* One-sided: the peer's writes land by themselves; nothing to receive. */
        if (send_progress(h) == ncclSuccess && !n->rma) (void)recv_progress(h);
    }
}

ncclResult_t zn_msc_net_host_put(struct zn_msc_conn *h, const char *fn)
{
    if (!((struct net_conn *)h->net)->gpu) return ncclSuccess;
    return zn_error(ncclInvalidUsage, ZN_NET,
                    "%s to rank %d tag %d: the connection's buffer is GPU memory; host threads "
                    "put from host buffers (kernels use the device methods)",
                    fn, h->remote_rank, h->tag);
}

int zn_msc_net_closed(struct zn_msc_conn *h)
{
    return h->transport == mscclppTransportIB && ((struct net_conn *)h->net)->closed;
}

ncclResult_t zn_msc_net_error(struct mscclppComm *c)
{
    for (int i = 0; i < c->nsetup; i++)
        if (c->host[i].transport == mscclppTransportIB &&
            ((struct net_conn *)c->host[i].net)->error != ncclSuccess)
            return ((struct net_conn *)c->host[i].net)->error;
    return ncclSuccess;
}

/* Progress under the lock; a thread that finds it taken lets the holder do it. */
static void progress_try(struct mscclppComm *c)
{
    if (pthread_mutex_trylock(&c->net_lock) != 0) return;
    zn_msc_net_progress(c);
    pthread_mutex_unlock(&c->net_lock);
}

/* One-sided: nothing is posted on the receiving side, so a peer that closed its end (on
 * another host, where the peer watch cannot see it) is noticed by asking the net. */
static void rma_check_closed(struct zn_msc_conn *h)
{
    struct net_conn *n = h->net;
    int closed = 0;
    pthread_mutex_lock(&h->comm->net_lock);
    ncclResult_t res = n->rma_ops->check(n->recv, &closed);
    pthread_mutex_unlock(&h->comm->net_lock);
    if (res != ncclSuccess) (void)net_err(h, res, "watching for the peer's writes");
    if (closed) n->closed = 1;
}

static ncclResult_t check_alive(struct zn_msc_conn *h, const char *fn)
{
    struct net_conn *n = h->net;
    if (n->rma && n->error == ncclSuccess && !n->closed) rma_check_closed(h);
    if (n->error != ncclSuccess) return n->error;
    int dead = zn_peer_dead(h->comm->watch, h->remote_rank);
    if (!dead && !n->closed) return ncclSuccess;
    char who[160];
    zn_peer_str(&h->comm->tctx, h->remote_rank, who, sizeof(who));
    return conn_fail(h, zn_error(ncclRemoteError, ZN_NET, "%s: %s (connection tag %d) %s", fn, who,
                                 h->tag,
                                 dead ? "has exited"
                                      : "closed the connection: it exited or destroyed its "
                                        "communicator"));
}

/* Poll until cond(h) holds, progressing every net connection; bounded by ZINC_TIMEOUT. */
static ncclResult_t poll_until(struct zn_msc_conn *h, const char *fn,
                               int (*cond)(struct zn_msc_conn *h, uint64_t arg), uint64_t arg)
{
    int64_t deadline = zn_deadline_from_now();
    for (uint32_t polls = 1;; polls++) {
        progress_try(h->comm);
        if (cond(h, arg)) return ncclSuccess;
        if (polls > 256) sched_yield();
        if ((polls & 255) != 0) continue;
        ncclResult_t res = check_alive(h, fn);
        /* What arrived before the peer left still counts. */
        if (res != ncclSuccess) return cond(h, arg) ? ncclSuccess : res;
        if (zn_now_ns() > deadline)
            return zn_error(ncclSystemError, ZN_NET,
                            "%s: nothing from rank %d on tag %d within ZINC_TIMEOUT (%lld s)", fn,
                            h->remote_rank, h->tag, (long long)(zn_timeout_ns() / 1000000000ll));
    }
}

static int queue_has_room(struct zn_msc_conn *h, uint64_t unused)
{
    (void)unused;
    struct net_conn *n = h->net;
    return n->queued - n->done < NET_QUEUE;
}

static int all_sent(struct zn_msc_conn *h, uint64_t upto)
{
    return ((struct net_conn *)h->net)->done >= upto;
}

static int signal_seen(struct zn_msc_conn *h, uint64_t want)
{
    return __atomic_load_n(&((struct net_conn *)h->net)->sigp->proxy, __ATOMIC_ACQUIRE) >= want;
}

/* Queue one operation (kind HDR_*) on connection h; the caller checked the ranges. */
ncclResult_t zn_msc_net_enqueue(struct zn_msc_conn *h, uint32_t kind, uint64_t dst_off,
                                uint64_t src_off, uint64_t size, const char *fn)
{
    struct net_conn *n = h->net;
    if (!(size ? kind : kind & ~(uint32_t)HDR_DATA)) return ncclSuccess; /* an empty put */
    ZN_CHECK(check_alive(h, fn));
    if (!queue_has_room(h, 0)) ZN_CHECK(poll_until(h, fn, queue_has_room, 0));
    pthread_mutex_lock(&h->comm->net_lock);
    struct net_op *op = &n->ops[n->queued % NET_QUEUE];
    memset(op, 0, sizeof(*op));
    op->hdr.kind = size ? kind : kind & ~(uint32_t)HDR_DATA;
    op->hdr.off = dst_off;
    op->hdr.size = size;
    op->src_off = src_off;
    op->ddone = !(op->hdr.kind & HDR_DATA);
    op->hdone = n->rma && !(op->hdr.kind & HDR_SIGNAL); /* as RDMA writes: no header */
    if (kind & HDR_SIGNAL) {
        /* Kernels raise `device` themselves; the header counts signals here. */
        op->hdr.epoch = ++n->sent_epoch;
        if (!n->gpu) __atomic_store_n(&n->sigp->device, n->sent_epoch, __ATOMIC_RELAXED);
    }
    n->queued++;
    zn_msc_net_progress(h->comm);
    pthread_mutex_unlock(&h->comm->net_lock);
    return n->error;
}

ncclResult_t zn_msc_net_wait(struct zn_msc_conn *h)
{
    struct net_conn *n = h->net;
    uint64_t want = *n->waitp + 1;
    ZN_CHECK(poll_until(h, "zincConnWait", signal_seen, want));
    *n->waitp = want;
    return ncclSuccess;
}

ncclResult_t zn_msc_net_trigger(struct mscclppComm *c, int i, uint64_t type, uint64_t dst_off,
                                uint64_t src_off, uint64_t size)
{
    struct zn_msc_conn *h = &c->host[i];
    struct net_conn *n = h->net;
    uint32_t kind = ((type & mscclppData) ? HDR_DATA : 0) | ((type & mscclppFlag) ? HDR_SIGNAL : 0);
    if (kind & HDR_DATA) {
        /* The mirror range may still be read by an earlier send: let those finish first. */
        ZN_CHECK(poll_until(h, "proxy put", all_sent, n->queued));
        ZN_CHECK(zn_msc_p2p_copy_sync(c, n->hostbuf + src_off,
                                      (char *)c->dev[i].localBuff + src_off, size));
    }
    if (kind) ZN_CHECK(zn_msc_net_enqueue(h, kind, dst_off, src_off, size, "proxy"));
    if (type & mscclppSync) ZN_CHECK(poll_until(h, "proxy flush", all_sent, n->queued));
    return ncclSuccess;
}

ncclResult_t zn_msc_net_flush(struct zn_msc_conn *h)
{
    struct net_conn *n = h->net;
    ZN_CHECK(check_alive(h, "zincConnFlush"));
    return poll_until(h, "zincConnFlush", all_sent, n->queued);
}

void zn_msc_net_free(struct zn_msc_conn *h)
{
    struct net_conn *n = h->net;
    if (!n) return;
    const ncclNet_t *o = n->net->ops;
    if (n->send) {
        if (n->mh_send_buf) (void)o->deregMr(n->send, n->mh_send_buf);
        if (n->mh_ops) (void)o->deregMr(n->send, n->mh_ops);
        if (n->mh_keys_send) (void)o->deregMr(n->send, n->mh_keys_send);
        (void)o->closeSend(n->send);
    }
    if (n->recv) {
        if (n->mh_recv_buf) (void)o->deregMr(n->recv, n->mh_recv_buf);
        if (n->mh_rhdr) (void)o->deregMr(n->recv, n->mh_rhdr);
        if (n->mh_sig) (void)o->deregMr(n->recv, n->mh_sig);
        if (n->mh_keys_recv) (void)o->deregMr(n->recv, n->mh_keys_recv);
        (void)o->closeRecv(n->recv);
    }
    if (n->listen) (void)o->closeListen(n->listen);
    if (n->gpu) zn_cuda_host_free(n->hostbuf);
    if (n->words) zn_cuda_host_free(n->words);
    free(n);
    h->net = NULL;
}
