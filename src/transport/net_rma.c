/*
 * The net transport's one-sided table (zn_transport_net_rma): connections between hosts over
 * one of zinc's nets (src/net), on their own (a domain per caller: libmscclpp's IB
 * connections). The net is the registry's choice (zn_net_select: the IB verbs net where it has
 * a device, else the socket net, or whichever ZINC_NET names); a device name asks for the IB
 * net and that device explicitly.
 *
 * Each connection joins one buffer on each side and one signal word on each side, over a pair
 * of net connections (this side's send comm to the peer and its recv comm from it). Puts and
 * signals take one of two paths, chosen per connection at setup and logged at INFO ("one-sided:
 * connection to rank R tag T: puts as RDMA writes" or "... as two-sided messages (why)"):
 *
 * One-sided (RDMA writes): when the net has zinc's one-sided extension (net.h, struct
 * zn_net_rma_ops: the IB net) and both sides' buffers are host memory. At setup each side
 * registers its buffer and its signal word on its recv comm and sends the peer one key record
 * (struct rma_keys: address, size and rkey of both) as the first message of the connection. A
 * put is then an RDMA write of the source range straight into the peer's buffer at its
 * offset, and a signal an RDMA write of the 8-byte value into the peer's signal word, posted
 * after the data on the same queue pair (the extension puts one connection's writes on one
 * QP), so the peer sees the value only after the data. Nothing runs on the receiving side: no
 * receive is posted, its waits only watch the signal word (and, now and then, whether the peer
 * closed its end: ep_check). A flush waits until every posted write has completed. Ranges are
 * checked against the peer's size before anything is posted, and the net refuses a write
 * outside the peer's key.
 *
 * Two-sided (messages): on the socket net, and for GPU buffers (staged through a pinned host
 * mirror; with GPUDirect the IB net could write into a registered GPU buffer directly, as
 * MSCCL++ 0.1 does, but that is not implemented: no GPU and IB machine to test it on). Every
 * operation is one header (struct net_hdr), followed for a put by the data as a second
 * message; messages of one net connection match in order, so the receiving side knows from
 * each header what comes next. The receiver lands the data at the header's offset in its own
 * buffer only after checking that the range lies inside it: a header naming a range outside is
 * refused (logged, the connection fails), nothing is written. A signal header carries the
 * value; the receiver stores it into its signal word after every earlier message of the
 * connection has landed, so a reader that sees it sees the data before it.
 *
 * Progress. Net calls never block (a send may have to wait until the peer posts its receive),
 * so operations are queued per connection and moved on by domain_progress, which goes over
 * every connection of the domain under one lock: from the caller's proxy thread and from
 * threads waiting on a signal word or a flush (so that a rank waiting on one peer keeps its
 * sends to the others and its receives moving).
 *
 * GPU buffers: the net reads host memory (the socket net cannot take GPU pointers), so a put
 * copies its range into a pinned host mirror of the buffer (cudaMemcpyAsync and a synchronize
 * on the domain's stream, after earlier sends from the mirror completed) and queues it, and
 * the receiving side copies landed data from its mirror into the GPU buffer before it raises
 * the signal word (mapped pinned memory, given by the caller, so that kernels' waits see it).
 */
#include "peer.h"
#include "transport.h"
#include "net/net_layer.h"
#include "util/clock.h"
#include "util/cuda.h"
#include "util/err.h"

#include <pthread.h>
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
 * both ends run this build (the caller's setup already assumes it). */
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

struct net_dom;

struct net_ep {
    struct zn_conn_hdr hdr;
    struct net_dom *d;
    int tag;
    size_t len, peer_len; /* this side's buffer, the peer's */
    uint8_t *buf;         /* this side's buffer (GPU memory when gpu) */
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
    int rstate;     /* 0 nothing posted, 1 header posted, 2 data posted */
    uint64_t *sigp; /* where the peer's signals land (the caller's word) */
    /* What the net reads and writes: buf, or for a GPU buffer a pinned host mirror. */
    char *hostbuf;
    int gpu;
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
    struct net_ep *next;
};

struct net_dom {
    struct zn_tctx ctx;
    pthread_mutex_t lock; /* serialises progress over the connections (any thread) */
    struct net_ep *eps;
    struct zn_peer_watch *watch; /* peers of this host: an exit is seen at once */
    void *stream;                /* GPU staging copies; made at the first GPU buffer */
};

/* Record the connection's first failure: every later call on it reports it. */
static ncclResult_t conn_fail(struct net_ep *n, ncclResult_t res)
{
    if (n->error == ncclSuccess) n->error = res;
    return res;
}

static ncclResult_t dom_open(const struct zn_tctx *ctx, void **dom)
{
    struct net_dom *d;
    ZN_CHECK(zn_calloc(&d, 1, "net one-sided domain"));
    d->ctx = *ctx;
    ncclResult_t res = zn_peer_watch_create(&d->ctx, &d->watch);
    if (res != ncclSuccess) {
        free(d);
        return res;
    }
    pthread_mutex_init(&d->lock, NULL);
    *dom = d;
    return ncclSuccess;
}

static void ep_free(struct net_ep *n)
{
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
    free(n);
}

static void ep_close(struct zn_conn *c)
{
    struct net_ep *n = (struct net_ep *)c;
    if (!n) return;
    struct net_dom *d = n->d;
    pthread_mutex_lock(&d->lock);
    for (struct net_ep **pp = &d->eps; *pp; pp = &(*pp)->next)
        if (*pp == n) {
            *pp = n->next;
            break;
        }
    pthread_mutex_unlock(&d->lock);
    ep_free(n);
}

static void dom_close(void *dom)
{
    struct net_dom *d = dom;
    if (!d) return;
    while (d->eps) {
        struct net_ep *n = d->eps;
        d->eps = n->next;
        ep_free(n);
    }
    if (d->stream) {
        (void)zn_cuda_stream_sync(d->stream);
        zn_cuda_stream_destroy(d->stream);
    }
    zn_peer_watch_destroy(d->watch);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

static ncclResult_t pick_net(struct net_ep *n, const char *ib_dev)
{
    if (!ib_dev || !ib_dev[0]) {
        n->dev = 0;
        return zn_net_select(&n->net);
    }
    n->net = zn_net_find("IB");
    if (!n->net)
        return zn_error(ncclInvalidUsage, ZN_NET,
                        "connection to rank %d tag %d: device \"%s\" asks for the IB net, and "
                        "this process has no usable IB device (name no device to let zinc pick "
                        "a net, the socket net where there is no IB)",
                        n->hdr.peer, n->tag, ib_dev);
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
                    "connection to rank %d tag %d: no IB device named \"%s\" (%d devices)",
                    n->hdr.peer, n->tag, ib_dev, n->net->ndev);
}

/* Pick the net, make the mirror of a GPU buffer, listen: the handle is the descriptor. */
static ncclResult_t ep_open(void *dom, const struct zn_rma_ep_args *a, struct zn_conn **c,
                            struct zn_rma_key *desc)
{
    struct net_dom *d = dom;
    if (a->peer < 0 || a->peer >= d->ctx.nranks || a->peer == d->ctx.rank || !a->buf || !a->len ||
        !a->sig)
        return zn_error(ncclInvalidArgument, ZN_NET,
                        "net: one-sided connection to rank %d with buffer %p of %zu bytes, signal "
                        "word %p",
                        a->peer, a->buf, a->len, (void *)a->sig);
    struct net_ep *n;
    ZN_CHECK(zn_calloc(&n, 1, "net connection"));
    ncclResult_t res;
    n->hdr = (struct zn_conn_hdr){ .ops = &zn_transport_net, .peer = a->peer, .channel = -1 };
    n->d = d;
    n->tag = a->tag;
    n->buf = a->buf;
    n->len = a->len;
    n->sigp = a->sig;
    ZN_CHECK_GOTO(pick_net(n, a->dev), res, fail_free);
    n->rma_ops = zn_net_rma(n->net);
    void *base, *mirror_dev;
    size_t alloc;
    if (zn_cuda_mem_range(a->buf, &base, &alloc) == 0) {
        if (!d->stream) ZN_CHECK_GOTO(zn_cuda_stream_create(&d->stream), res, fail_free);
        ZN_CHECK_GOTO(zn_cuda_host_alloc((void **)&n->hostbuf, &mirror_dev, a->len), res,
                      fail_free);
        n->gpu = 1;
    } else {
        n->hostbuf = a->buf;
    }
    ZN_CHECK_GOTO(n->net->ops->listen(n->net->ctx, n->dev, n->my_handle, &n->listen), res,
                  fail_mirror);
    zn_info(ZN_NET, "one-sided: connection to rank %d tag %d over net %s, device %d", n->hdr.peer,
            n->tag, n->net->name, n->dev);
    memset(desc, 0, sizeof(*desc));
    _Static_assert(NCCL_NET_HANDLE_MAXSIZE <= ZN_RMA_KEY_MAX, "a listen handle fits in a key");
    desc->size = NCCL_NET_HANDLE_MAXSIZE;
    memcpy(desc->data, n->my_handle, NCCL_NET_HANDLE_MAXSIZE);
    pthread_mutex_lock(&d->lock);
    n->next = d->eps;
    d->eps = n;
    pthread_mutex_unlock(&d->lock);
    *c = (struct zn_conn *)n;
    return ncclSuccess;
fail_mirror:
    if (n->gpu) zn_cuda_host_free(n->hostbuf);
fail_free:
    free(n);
    return res;
}

static ncclResult_t ep_connect(struct zn_conn *c, const struct zn_rma_key *peer_desc,
                               size_t peer_len)
{
    struct net_ep *n = (struct net_ep *)c;
    if (peer_desc->size != NCCL_NET_HANDLE_MAXSIZE)
        return zn_error(ncclRemoteError, ZN_NET,
                        "net: rank %d sent a descriptor of %u bytes, not a listen handle",
                        n->hdr.peer, peer_desc->size);
    memcpy(n->peer_handle, peer_desc->data, NCCL_NET_HANDLE_MAXSIZE);
    n->peer_len = peer_len;
    return ncclSuccess;
}

/* Register the buffers once both net connections exist; on a net with the one-sided
 * extension also the signal word (the peer writes it) and the key records. */
static ncclResult_t register_bufs(struct net_ep *n)
{
    const ncclNet_t *o = n->net->ops;
    void *buf = n->hostbuf;
    ZN_CHECK(o->regMr(n->send, buf, n->len, NCCL_PTR_HOST, &n->mh_send_buf));
    ZN_CHECK(o->regMr(n->send, n->ops, sizeof(n->ops), NCCL_PTR_HOST, &n->mh_ops));
    ZN_CHECK(o->regMr(n->recv, buf, n->len, NCCL_PTR_HOST, &n->mh_recv_buf));
    ZN_CHECK(o->regMr(n->recv, &n->rhdr, sizeof(n->rhdr), NCCL_PTR_HOST, &n->mh_rhdr));
    if (!n->rma_ops) return ncclSuccess;
    ZN_CHECK(o->regMr(n->recv, n->sigp, sizeof(*n->sigp), NCCL_PTR_HOST, &n->mh_sig));
    ZN_CHECK(o->regMr(n->send, &n->my_keys, sizeof(n->my_keys), NCCL_PTR_HOST, &n->mh_keys_send));
    ZN_CHECK(
        o->regMr(n->recv, &n->peer_keys, sizeof(n->peer_keys), NCCL_PTR_HOST, &n->mh_keys_recv));
    return ncclSuccess;
}

static ncclResult_t keys_fill(struct net_ep *n)
{
    struct rma_keys *k = &n->my_keys;
    memset(k, 0, sizeof(*k));
    k->magic = KEYS_MAGIC;
    k->version = KEYS_VERSION;
    k->flags = n->gpu ? 0 : KEYS_RMA;
    if (!k->flags) return ncclSuccess;
    ZN_CHECK(n->rma_ops->key(n->recv, n->mh_recv_buf, n->hostbuf, n->len, &k->buf));
    return n->rma_ops->key(n->recv, n->mh_sig, n->sigp, sizeof(*n->sigp), &k->sig);
}

/* The peer's keys arrived: check them and pick the path. */
static ncclResult_t keys_apply(struct net_ep *n)
{
    const struct rma_keys *k = &n->peer_keys;
    const char *why =
        n->gpu ? "this side's buffer is GPU memory" : "the peer's buffer is GPU memory";
    if (k->magic != KEYS_MAGIC || k->version != KEYS_VERSION)
        return zn_error(ncclRemoteError, ZN_NET,
                        "connection setup: rank %d tag %d sent a bad key record (magic %#x, "
                        "version %u)",
                        n->hdr.peer, n->tag, k->magic, k->version);
    n->rma = (k->flags & KEYS_RMA) && (n->my_keys.flags & KEYS_RMA);
    if (n->rma && (k->buf.size != n->peer_len || k->sig.size != sizeof(uint64_t)))
        return zn_error(ncclRemoteError, ZN_NET,
                        "connection setup: rank %d tag %d described its buffer as %llu bytes "
                        "(declared %llu) and its signal word as %llu",
                        n->hdr.peer, n->tag, (unsigned long long)k->buf.size,
                        (unsigned long long)n->peer_len, (unsigned long long)k->sig.size);
    if (n->rma)
        zn_info(ZN_NET, "one-sided: connection to rank %d tag %d: puts as RDMA writes", n->hdr.peer,
                n->tag);
    else
        zn_info(ZN_NET, "one-sided: connection to rank %d tag %d: puts as two-sided messages (%s)",
                n->hdr.peer, n->tag, why);
    n->established = 1;
    return ncclSuccess;
}

/* Exchange the key records over the new net connection (never blocks: called again until
 * n->established). A net without the one-sided extension has nothing to exchange. */
static ncclResult_t keys_step(struct net_ep *n)
{
    const ncclNet_t *o = n->net->ops;
    if (!n->rma_ops) {
        zn_info(ZN_NET,
                "one-sided: connection to rank %d tag %d: puts as two-sided messages (net %s has "
                "no one-sided writes)",
                n->hdr.peer, n->tag, n->net->name);
        n->established = 1;
        return ncclSuccess;
    }
    if (!n->kreq_send && !n->kdone_send) {
        ZN_CHECK(keys_fill(n));
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
    if (n->kdone_send && n->kdone_recv) return keys_apply(n);
    return ncclSuccess;
}

/* One step of the setup: connect and accept (the peers' orders may differ: the caller steps
 * every new connection in turn), register, exchange the key records. */
static ncclResult_t ep_establish(struct zn_conn *c, int *done)
{
    struct net_ep *n = (struct net_ep *)c;
    const ncclNet_t *o = n->net->ops;
    if ((!n->send && o->connect(n->net->ctx, n->dev, n->peer_handle, &n->send, NULL)) ||
        (!n->recv && o->accept(n->listen, &n->recv, NULL)) ||
        (n->send && n->recv && !n->listen && !n->established && keys_step(n)))
        return zn_error(ncclSystemError, ZN_NET,
                        "connection setup: connecting to rank %d tag %d over net %s failed (the "
                        "net's message above says why)",
                        n->hdr.peer, n->tag, n->net->name);
    if (n->send && n->recv && n->listen) {
        ZN_CHECK(o->closeListen(n->listen));
        n->listen = NULL;
        ZN_CHECK(register_bufs(n));
    }
    *done = n->established;
    return ncclSuccess;
}

static ncclResult_t net_err(struct net_ep *n, ncclResult_t res, const char *what)
{
    char who[160];
    zn_peer_str(&n->d->ctx, n->hdr.peer, who, sizeof(who));
    return conn_fail(n, zn_error(res == ncclSuccess ? ncclSystemError : res, ZN_NET,
                                 "connection to %s tag %d: %s failed", who, n->tag, what));
}

/* A copy between a GPU buffer and its mirror on the domain's stream, waited for. */
static ncclResult_t stage(struct net_dom *d, void *dst, const void *src, size_t size)
{
    ZN_CHECK(zn_cuda_memcpy_async(dst, src, size, d->stream));
    return zn_cuda_stream_sync(d->stream);
}

/* Post one operation as RDMA writes: the data into the peer's buffer, then the epoch (from the
 * op's header, which stays put until the op is done) into the peer's signal word. *posted
 * stays 0 while the net asks to try again. */
static ncclResult_t rma_post(struct net_ep *n, struct net_op *op, int *posted)
{
    ncclResult_t res;
    *posted = 0;
    if (!op->ddone && !op->dreq) {
        res = n->rma_ops->write(n->send, n->mh_send_buf, n->hostbuf + op->src_off, op->hdr.size,
                                &n->peer_keys.buf, op->hdr.off, &op->dreq);
        if (res != ncclSuccess) return net_err(n, res, "an RDMA write of data");
        if (!op->dreq) return ncclSuccess;
    }
    if (!op->hdone && !op->hreq) {
        res = n->rma_ops->write(n->send, n->mh_ops, &op->hdr.epoch, sizeof(op->hdr.epoch),
                                &n->peer_keys.sig, 0, &op->hreq);
        if (res != ncclSuccess) return net_err(n, res, "an RDMA write of a signal");
        if (!op->hreq) return ncclSuccess;
    }
    *posted = 1;
    return ncclSuccess;
}

/* Post one operation as messages: the header, then the data. */
static ncclResult_t msg_post(struct net_ep *n, struct net_op *op, int *posted)
{
    const ncclNet_t *o = n->net->ops;
    ncclResult_t res;
    *posted = 0;
    if (!op->hreq) {
        res = o->isend(n->send, &op->hdr, sizeof(op->hdr), 0, n->mh_ops, NULL, &op->hreq);
        if (res != ncclSuccess) return net_err(n, res, "sending a header");
        if (!op->hreq) return ncclSuccess;
    }
    if (!op->ddone && !op->dreq) {
        char *src = n->hostbuf + op->src_off;
        res = o->isend(n->send, src, op->hdr.size, 0, n->mh_send_buf, NULL, &op->dreq);
        if (res != ncclSuccess) return net_err(n, res, "sending data");
        if (!op->dreq) return ncclSuccess;
    }
    *posted = 1;
    return ncclSuccess;
}

static ncclResult_t send_progress(struct net_ep *n)
{
    const ncclNet_t *o = n->net->ops;
    const char *what = n->rma ? "an RDMA write" : "a send";
    while (n->posted < n->queued) {
        struct net_op *op = &n->ops[n->posted % NET_QUEUE];
        int posted;
        ZN_CHECK(n->rma ? rma_post(n, op, &posted) : msg_post(n, op, &posted));
        if (!posted) break;
        n->posted++;
    }
    while (n->done < n->posted) {
        struct net_op *op = &n->ops[n->done % NET_QUEUE];
        ncclResult_t res = ncclSuccess;
        if (!op->hdone) res = o->test(op->hreq, &op->hdone, NULL);
        if (res == ncclSuccess && !op->ddone) res = o->test(op->dreq, &op->ddone, NULL);
        if (res != ncclSuccess) return net_err(n, res, what);
        if (!op->hdone || !op->ddone) break;
        n->done++;
    }
    return ncclSuccess;
}

static ncclResult_t post_recv(struct net_ep *n, void *data, size_t size, void *mh)
{
    int tag = 0;
    return n->net->ops->irecv(n->recv, 1, &data, &size, &tag, &mh, NULL, &n->rreq);
}

/* A header arrived: post its data (bounds-checked) or apply its signal. */
static ncclResult_t recv_header(struct net_ep *n)
{
    struct net_hdr *r = &n->rhdr;
    n->rreq = NULL;
    if (r->kind & HDR_DATA) {
        if (r->off > n->len || r->size > n->len - r->off || r->size == 0)
            return conn_fail(n, zn_error(ncclRemoteError, ZN_NET,
                                         "connection to rank %d tag %d: the peer put %llu bytes "
                                         "at offset %llu, outside this side's buffer of %llu "
                                         "bytes: refused, nothing written",
                                         n->hdr.peer, n->tag, (unsigned long long)r->size,
                                         (unsigned long long)r->off, (unsigned long long)n->len));
        char *dst = n->hostbuf + r->off;
        if (post_recv(n, dst, r->size, n->mh_recv_buf))
            return net_err(n, ncclSystemError, "receiving data");
        n->rstate = n->rreq ? 2 : 3; /* 3: the data receive is still to be posted */
        return ncclSuccess;
    }
    if (r->kind & HDR_SIGNAL) __atomic_store_n(n->sigp, r->epoch, __ATOMIC_RELEASE);
    n->rstate = 0;
    return ncclSuccess;
}

/* The data of the current header landed: into the GPU buffer from the mirror, then the
 * signal it carries (so a kernel that sees the signal sees the data). */
static ncclResult_t recv_data_done(struct net_ep *n)
{
    n->rreq = NULL;
    if (n->gpu) {
        ncclResult_t res =
            stage(n->d, n->buf + n->rhdr.off, n->hostbuf + n->rhdr.off, n->rhdr.size);
        if (res != ncclSuccess) return conn_fail(n, res);
    }
    if (n->rhdr.kind & HDR_SIGNAL) __atomic_store_n(n->sigp, n->rhdr.epoch, __ATOMIC_RELEASE);
    n->rstate = 0;
    return ncclSuccess;
}

static ncclResult_t recv_progress(struct net_ep *n)
{
    for (;;) {
        int done = 0;
        if (n->rstate == 0) {
            if (post_recv(n, &n->rhdr, sizeof(n->rhdr), n->mh_rhdr))
                return net_err(n, ncclSystemError, "receiving a header");
            if (!n->rreq) return ncclSuccess;
            n->rstate = 1;
        } else if (n->rstate == 3) {
            char *dst = n->hostbuf + n->rhdr.off;
            if (post_recv(n, dst, n->rhdr.size, n->mh_recv_buf))
                return net_err(n, ncclSystemError, "receiving data");
            if (!n->rreq) return ncclSuccess;
            n->rstate = 2;
        }
        if (n->net->ops->test(n->rreq, &done, NULL)) {
            /* Between messages a peer that destroyed its communicator (or exited) owes this
             * side nothing yet: only a wait on this connection will need to hear of it. */
            if (n->rstate != 1) return net_err(n, ncclSystemError, "a receive");
            n->closed = 1;
            return ncclSuccess;
        }
        if (!done) return ncclSuccess;
        if (n->rstate == 1) {
            ZN_CHECK(recv_header(n));
        } else {
            ZN_CHECK(recv_data_done(n));
        }
    }
}

/* Move every connection of the domain on, under its lock; a thread that finds it taken lets the
 * holder do it. A failed connection keeps its error for the calls on it; the others go on. */
static void progress_locked(struct net_dom *d)
{
    for (struct net_ep *n = d->eps; n; n = n->next) {
        if (!n->established || n->error != ncclSuccess || n->closed) continue;
        /* One-sided: the peer's writes land by themselves; nothing to receive. */
        if (send_progress(n) == ncclSuccess && !n->rma) (void)recv_progress(n);
    }
}

static void dom_progress(void *dom)
{
    struct net_dom *d = dom;
    if (pthread_mutex_trylock(&d->lock) != 0) return;
    progress_locked(d);
    pthread_mutex_unlock(&d->lock);
}

/* One-sided: nothing is posted on the receiving side, so a peer that closed its end (on
 * another host, where the peer watch cannot see it) is noticed by asking the net. */
static void rma_check_closed(struct net_ep *n)
{
    int closed = 0;
    pthread_mutex_lock(&n->d->lock);
    ncclResult_t res = n->rma_ops->check(n->recv, &closed);
    pthread_mutex_unlock(&n->d->lock);
    if (res != ncclSuccess) (void)net_err(n, res, "watching for the peer's writes");
    if (closed) n->closed = 1;
}

static ncclResult_t ep_check(struct zn_conn *c, const char *fn, int *closed)
{
    struct net_ep *n = (struct net_ep *)c;
    if (!fn) {
        if (closed) *closed = n->closed;
        return n->error;
    }
    if (n->rma && n->error == ncclSuccess && !n->closed) rma_check_closed(n);
    if (closed) *closed = n->closed;
    if (n->error != ncclSuccess) return n->error;
    int dead = zn_peer_dead(n->d->watch, n->hdr.peer);
    if (!dead && !n->closed) return ncclSuccess;
    char who[160];
    zn_peer_str(&n->d->ctx, n->hdr.peer, who, sizeof(who));
    return conn_fail(n, zn_error(ncclRemoteError, ZN_NET, "%s: %s (connection tag %d) %s", fn, who,
                                 n->tag,
                                 dead ? "has exited"
                                      : "closed the connection: it exited or destroyed its "
                                        "communicator"));
}

/* Poll until every operation queued before upto is done, progressing every connection of the
 * domain; bounded by ZINC_TIMEOUT. */
static ncclResult_t wait_sent(struct net_ep *n, const char *fn, uint64_t upto)
{
    int64_t deadline = zn_deadline_from_now();
    for (uint32_t polls = 1;; polls++) {
        dom_progress(n->d);
        if (n->done >= upto) return ncclSuccess;
        if (polls > 256) sched_yield();
        if ((polls & 255) != 0) continue;
        ncclResult_t res = ep_check((struct zn_conn *)n, fn, NULL);
        /* What completed before the peer left still counts. */
        if (res != ncclSuccess) return n->done >= upto ? ncclSuccess : res;
        if (zn_now_ns() > deadline)
            return zn_error(ncclSystemError, ZN_NET,
                            "%s: nothing from rank %d on tag %d within ZINC_TIMEOUT (%lld s)", fn,
                            n->hdr.peer, n->tag, (long long)(zn_timeout_ns() / 1000000000ll));
    }
}

static ncclResult_t check_conn(struct net_ep *n, const char *op)
{
    if (!n || n->hdr.channel != -1 || n->hdr.ops != &zn_transport_net)
        return zn_error(ncclInvalidArgument, ZN_NET,
                        "net: %s on a connection that is not a one-sided one (ep_open)", op);
    if (!n->established)
        return zn_error(ncclInvalidUsage, ZN_NET,
                        "net: %s toward rank %d tag %d before the connection was established", op,
                        n->hdr.peer, n->tag);
    return ncclSuccess;
}

/* Queue one operation (kind HDR_*) on n, ranges checked; an empty put is nothing. */
static ncclResult_t enqueue(struct net_ep *n, uint32_t kind, size_t dst_off, size_t src_off,
                            size_t size, uint64_t value, const char *fn)
{
    if (!size) kind &= ~(uint32_t)HDR_DATA;
    if (!kind) return ncclSuccess;
    ZN_CHECK(ep_check((struct zn_conn *)n, fn, NULL));
    if (n->queued - n->done >= NET_QUEUE) ZN_CHECK(wait_sent(n, fn, n->queued - NET_QUEUE + 1));
    pthread_mutex_lock(&n->d->lock);
    struct net_op *op = &n->ops[n->queued % NET_QUEUE];
    memset(op, 0, sizeof(*op));
    op->hdr.kind = kind;
    op->hdr.off = dst_off;
    op->hdr.size = size;
    op->hdr.epoch = value;
    op->src_off = src_off;
    op->ddone = !(kind & HDR_DATA);
    op->hdone = n->rma && !(kind & HDR_SIGNAL); /* as RDMA writes: no header */
    n->queued++;
    progress_locked(n->d);
    pthread_mutex_unlock(&n->d->lock);
    return n->error;
}

static ncclResult_t put_kind(struct zn_conn *c, uint32_t kind, size_t loff, size_t roff, size_t len,
                             uint64_t value, const char *fn)
{
    struct net_ep *n = (struct net_ep *)c;
    ZN_CHECK(check_conn(n, fn));
    if (loff > n->len || len > n->len - loff || roff > n->peer_len || len > n->peer_len - roff)
        return zn_error(ncclInvalidArgument, ZN_NET,
                        "net: %s to rank %d tag %d of %zu bytes from offset %zu to %zu is outside "
                        "the buffers (%zu here, %zu on the peer)",
                        fn, n->hdr.peer, n->tag, len, loff, roff, n->len, n->peer_len);
    if (n->gpu && len) {
        /* The mirror range may still be read by an earlier send: let those finish first. */
        ZN_CHECK(wait_sent(n, fn, n->queued));
        ZN_CHECK(stage(n->d, n->hostbuf + loff, n->buf + loff, len));
    }
    return enqueue(n, kind, roff, loff, len, value, fn);
}

static ncclResult_t put(struct zn_conn *c, void *local, size_t loff, void *remote, size_t roff,
                        size_t len)
{
    return put_kind(c, HDR_DATA, loff, roff, len, 0, "put");
}

static ncclResult_t signal(struct zn_conn *c, void *remote, size_t roff, uint64_t value)
{
    struct net_ep *n = (struct net_ep *)c;
    ZN_CHECK(check_conn(n, "signal"));
    return enqueue(n, HDR_SIGNAL, 0, 0, 0, value, "signal");
}

/* One header carries both: the signal lands with the data. */
static ncclResult_t put_signal(struct zn_conn *c, void *local, size_t loff, void *remote,
                               size_t roff, size_t len, void *sremote, size_t sroff, uint64_t value)
{
    return put_kind(c, HDR_DATA | HDR_SIGNAL, loff, roff, len, value, "put_signal");
}

static ncclResult_t flush(struct zn_conn *c)
{
    struct net_ep *n = (struct net_ep *)c;
    ZN_CHECK(check_conn(n, "flush"));
    ZN_CHECK(ep_check(c, "flush", NULL));
    return wait_sent(n, "flush", n->queued);
}

/* Regions of their own are not needed: a connection joins one buffer on each side, and its
 * keys travel on the connection itself. */
static ncclResult_t no_keys(const char *op)
{
    return zn_transport_unsupported("net", op);
}

static ncclResult_t key_pack(void *dom, void *handle, struct zn_rma_key *key)
{
    return no_keys("key_pack (a net connection's keys travel on it)");
}

static ncclResult_t key_import(void *dom, int peer, const struct zn_rma_key *key, void **remote)
{
    return no_keys("key_import (a net connection's keys travel on it)");
}

static ncclResult_t key_release(void *dom, void *remote)
{
    return no_keys("key_release");
}

static ncclResult_t mem_alloc(void *dom, size_t len, int nmappers, void **ptr, void **handle)
{
    return no_keys("mem_alloc (memory that peers map)");
}

static void mem_free(void *dom, void *handle) {}

static ncclResult_t mem_reg(void *dom, void *buf, size_t len, void **handle)
{
    return no_keys("mem_reg (a connection registers its buffer)");
}

static void mem_dereg(void *dom, void *handle) {}

static void *remote_addr(void *remote, size_t *len)
{
    if (len) *len = 0;
    return NULL;
}

const struct zn_transport_rma_ops zn_transport_net_rma = {
    .size = sizeof(struct zn_transport_rma_ops),
    .name = "net",
    .key_pack = key_pack,
    .key_import = key_import,
    .key_release = key_release,
    .put = put,
    .signal = signal,
    .flush = flush,
    .domain_open = dom_open,
    .domain_close = dom_close,
    .mem_alloc = mem_alloc,
    .mem_free = mem_free,
    .mem_reg = mem_reg,
    .mem_dereg = mem_dereg,
    .remote_addr = remote_addr,
    .ep_open = ep_open,
    .ep_connect = ep_connect,
    .ep_establish = ep_establish,
    .put_signal = put_signal,
    .domain_progress = dom_progress,
    .ep_check = ep_check,
    .ep_close = ep_close,
};
