/*
 * IB net: connection setup. listen() opens a TCP socket (src/util/sock.c) whose address and a
 * random magic go into the handle; connect() and accept() exchange one zn_ib_wire message each
 * way over it, bring the queue pairs through INIT -> RTR -> RTS, and the sender ends with a
 * ready byte so that the receiver knows its peer's QPs are in RTS. Both calls are non-blocking
 * state machines that return ncclSuccess with a NULL comm until their part is done: accept()
 * until it has answered, connect() until its message is sent (the rest of the sender's side
 * runs from its comm's isend/test, zn_net_ib_conn_progress). The socket stays open for the
 * comm's life: its hangup is how a dead peer is noticed.
 */
#include "net/ib.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/hmac.h"
#include "util/log.h"
#include "util/param.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------
 * Queue pairs
 * ------------------------------------------------------------------------------------- */
int zn_net_ib_qps_per_conn(void)
{
    int64_t n = zn_params()->ib_qps_per_conn;
    return n < 1 ? 1 : n > ZN_IB_MAX_QPS ? ZN_IB_MAX_QPS : (int)n;
}

static ncclResult_t qp_create(struct zn_ib_comm *c, struct ibv_qp **out)
{
    struct zn_ib_dev *d = c->dev;
    struct ibv_qp_init_attr ia = {
        .qp_context = c,
        .send_cq = c->cq,
        .recv_cq = c->cq,
        .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = ZN_IB_MAX_REQS * (ZN_IB_MAX_RECVS + 2),
                 .max_recv_wr = ZN_IB_MAX_REQS,
                 .max_send_sge = 1,
                 .max_recv_sge = 1 },
    };
    struct ibv_qp *qp = zn_ibv.create_qp(d->pd, &ia);
    if (!qp)
        return zn_error(ncclSystemError, ZN_NET, "NET/IB: %s:%d: ibv_create_qp failed: %s", d->name,
                        d->port, strerror(errno));
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
                             .port_num = (uint8_t)d->port,
                             .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };
    int rc = zn_ibv.modify_qp(qp, &a,
                              IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc != 0) {
        zn_ibv.destroy_qp(qp);
        return zn_error(ncclSystemError, ZN_NET, "NET/IB: %s:%d: QP to INIT failed: %s", d->name,
                        d->port, strerror(rc));
    }
    *out = qp;
    return ncclSuccess;
}

/* RTR towards remote qpn (addressed by LID on InfiniBand, by GID on RoCE), then RTS. */
static ncclResult_t qp_connect(struct zn_ib_comm *c, struct ibv_qp *qp, uint32_t qpn,
                               const struct zn_ib_wire *r)
{
    struct zn_ib_dev *d = c->dev;
    const struct zn_params *p = zn_params();
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR,
                             .dest_qp_num = qpn,
                             .path_mtu = r->mtu < d->mtu ? r->mtu : d->mtu,
                             .max_dest_rd_atomic = 1,
                             .min_rnr_timer = 12 };
    a.ah_attr.port_num = (uint8_t)d->port;
    a.ah_attr.sl = (uint8_t)(p->ib_sl & 0xf);
    if (d->link_layer == IBV_LINK_LAYER_ETHERNET || r->lid == 0) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, r->gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
        a.ah_attr.grh.hop_limit = 255;
        a.ah_attr.grh.traffic_class = (uint8_t)((c->tc >= 0 ? c->tc : p->ib_tc) & 0xff);
    } else {
        a.ah_attr.dlid = r->lid;
    }
    int rc = zn_ibv.modify_qp(qp, &a,
                              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    const char *step = "RTR";
    if (rc == 0) {
        memset(&a, 0, sizeof(a));
        a.qp_state = IBV_QPS_RTS;
        a.timeout = (uint8_t)(p->ib_timeout < 1 ? 1 : p->ib_timeout > 31 ? 31 : p->ib_timeout);
        a.retry_cnt = (uint8_t)(p->ib_retry_cnt < 0   ? 0
                                : p->ib_retry_cnt > 7 ? 7
                                                      : p->ib_retry_cnt);
        a.rnr_retry = 7;
        a.max_rd_atomic = 1;
        step = "RTS";
        rc = zn_ibv.modify_qp(qp, &a,
                              IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
    }
    if (rc != 0)
        return zn_error(ncclSystemError, ZN_NET, "NET/IB: %s:%d: QP %#x to %s (peer %s) failed: %s",
                        d->name, d->port, qp->qp_num, step, c->peer, strerror(rc));
    return ncclSuccess;
}

static void local_wire(const struct zn_ib_comm *c, struct zn_ib_wire *w)
{
    memset(w, 0, sizeof(*w));
    w->nqps = (uint32_t)c->nqps;
    w->lid = c->dev->lid;
    w->link_layer = (uint8_t)c->dev->link_layer;
    w->mtu = (uint8_t)c->dev->mtu;
    memcpy(w->gid, c->dev->gid.raw, 16);
    w->rkey = c->sh_mr->rkey;
    w->addr = c->is_send ? (uintptr_t)c->sh->fifo : (uintptr_t)c->sh->sizes;
    for (int i = 0; i < c->nqps; i++) w->qpn[i] = c->qps[i]->qp_num;
}

void zn_net_ib_comm_free(struct zn_ib_comm *c)
{
    if (!c) return;
    zn_net_ib_comm_live(c, 0);
    free(c->hs);
    for (int i = 0; i < c->nqps; i++)
        if (c->qps[i]) zn_ibv.destroy_qp(c->qps[i]);
    if (c->flush_qp) zn_ibv.destroy_qp(c->flush_qp);
    if (c->sh_mr) zn_ibv.dereg_mr(c->sh_mr);
    if (c->cq) zn_ibv.destroy_cq(c->cq);
    if (c->fd >= 0) close(c->fd);
    free(c->sh);
    free(c);
}

/* The receiver's side keeps one receive posted per FIFO slot on every QP: each carries the
 * immediate of one completed send. */
static ncclResult_t post_recvs(struct zn_ib_comm *c, struct ibv_qp *qp, int n)
{
    for (int i = 0; i < n; i++) {
        struct ibv_recv_wr wr = { .wr_id = 0 }, *bad;
        int rc = ibv_post_recv(qp, &wr, &bad);
        if (rc != 0)
            return zn_error(ncclSystemError, ZN_NET, "NET/IB: %s: ibv_post_recv on QP %#x: %s",
                            c->dev->name, qp->qp_num, strerror(rc));
    }
    return ncclSuccess;
}

static ncclResult_t comm_create(int dev, int is_send, int nqps, struct zn_ib_comm **out)
{
    struct zn_ib_dev *d = zn_net_ib_dev(dev);
    if (!d) return zn_error(ncclInvalidArgument, ZN_NET, "NET/IB: no device %d", dev);
    struct zn_ib_comm *c;
    ZN_CHECK(zn_calloc(&c, 1, "IB communicator"));
    ncclResult_t res = ncclSuccess;
    c->fd = -1;
    c->tc = -1;
    c->is_send = is_send;
    c->dev = d;
    c->nqps = nqps;
    size_t sh_len = (sizeof(struct zn_ib_shared) + 4095) & ~(size_t)4095;
    c->sh = aligned_alloc(4096, sh_len);
    if (!c->sh) {
        res = zn_error(ncclSystemError, ZN_NET, "NET/IB: out of memory for the FIFO");
        goto err_free;
    }
    memset(c->sh, 0, sh_len);
    int cqe = (nqps + 1) * ZN_IB_MAX_REQS * (ZN_IB_MAX_RECVS + 3);
    c->cq = zn_ibv.create_cq(d->ctx, cqe, c, NULL, 0);
    c->sh_mr =
        zn_ibv.reg_mr(d->pd, c->sh, sh_len,
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    if (!c->cq || !c->sh_mr) {
        res = zn_error(ncclSystemError, ZN_NET, "NET/IB: %s: %s failed: %s", d->name,
                       c->cq ? "ibv_reg_mr" : "ibv_create_cq", strerror(errno));
        goto err_free;
    }
    for (int i = 0; i < nqps; i++) ZN_CHECK_GOTO(qp_create(c, &c->qps[i]), res, err_free);
    *out = c;
    return ncclSuccess;

err_free:
    zn_net_ib_comm_free(c);
    return res;
}

/* The receiver's flush QP reads from its own memory: connected to itself. */
static ncclResult_t flush_qp_create(struct zn_ib_comm *c)
{
    ZN_CHECK(qp_create(c, &c->flush_qp));
    struct zn_ib_wire self;
    local_wire(c, &self);
    return qp_connect(c, c->flush_qp, c->flush_qp->qp_num, &self);
}

/* ---------------------------------------------------------------------------------------
 * listen / connect / accept
 * ------------------------------------------------------------------------------------- */
struct ib_handle {
    uint64_t magic;
    union zn_sockaddr addr;
    uint8_t key[ZN_IB_KEY_BYTES]; /* what a sender's message proves (ib.h); from getrandom */
    uint32_t stage;               /* the connecting side's progress, kept in the caller's handle */
    struct ib_pending *pending;
};
_Static_assert(sizeof(struct ib_handle) <= NCCL_NET_HANDLE_MAXSIZE, "IB handle too large");

/* A handshake in progress: the message to send and the one being received. */
struct ib_pending {
    struct zn_ib_comm *comm;
    uint64_t magic;
    int fd;
    int stage;
    uint8_t out[ZN_IB_WIRE_BYTES];
    uint8_t in[ZN_IB_WIRE_BYTES];
    size_t done;
    struct zn_ib_wire peer;
    char peer_str[ZN_SOCKADDR_STRLEN];
    int64_t deadline; /* accept side: the sender's message must be in by then */
};

/* Handshakes the listener is serving: any number, each with its own deadline, so that a silent
 * or slow stranger never holds a real peer back (the reliability contract, docs/features.md). */
struct ib_listen {
    int dev;
    int tc;
    int fd;
    uint64_t magic;
    uint8_t key[ZN_IB_KEY_BYTES];
    struct ib_pending **pend;
    int npend, pcap;
    struct zn_nonce_set seen; /* nonces of the messages taken: each is taken once */
};
ncclResult_t zn_net_ib_listen(int dev, int tc, void *handle, void **listen_comm)
{
    if (!zn_net_ib_dev(dev))
        return zn_error(ncclInvalidArgument, ZN_NET, "NET/IB: no device %d", dev);
    union zn_sockaddr addr;
    char ifname[64];
    int rc = zn_sock_local_addr(&addr, ifname, sizeof(ifname));
    struct ib_listen *l;
    if (rc != 0)
        return zn_error(ncclSystemError, ZN_NET, "NET/IB: no interface for the handshake: %s",
                        strerror(-rc));
    ZN_CHECK(zn_calloc(&l, 1, "IB listen comm"));
    struct ib_handle *h = handle;
    memset(h, 0, sizeof(*h));
    rc = zn_sock_listen(&addr, &l->fd, &h->addr);
    if (rc != 0) {
        free(l);
        return zn_error(ncclSystemError, ZN_NET, "NET/IB: listen on %s: %s", ifname, strerror(-rc));
    }
    l->dev = dev;
    l->tc = tc;
    /* From getrandom: the handle travels only through the job's (authenticated) bootstrap, so
     * a stranger knows neither the magic nor the key that a handshake must prove. */
    if (getrandom(&l->magic, sizeof(l->magic), 0) != sizeof(l->magic) ||
        getrandom(l->key, sizeof(l->key), 0) != sizeof(l->key)) {
        close(l->fd);
        free(l);
        return zn_error(ncclSystemError, ZN_NET, "NET/IB: getrandom: %s", strerror(errno));
    }
    h->magic = l->magic;
    memcpy(h->key, l->key, sizeof(h->key));
    *listen_comm = l;
    return ncclSuccess;
}

ncclResult_t zn_net_ib_close_listen(void *listen_comm)
{
    struct ib_listen *l = listen_comm;
    for (int i = 0; i < l->npend; i++) {
        zn_net_ib_comm_free(l->pend[i]->comm);
        if (l->pend[i]->fd >= 0) close(l->pend[i]->fd);
        free(l->pend[i]);
    }
    free(l->pend);
    zn_nonce_set_free(&l->seen);
    close(l->fd);
    free(l);
    return ncclSuccess;
}

/* Move *done forward over buf; 1 when all of it went, 0 to be called again, <0 errno. */
static int xfer(int fd, uint8_t *buf, size_t len, size_t *done, int send)
{
    size_t n = 0;
    int rc = send ? zn_sock_send_some(fd, buf + *done, len - *done, &n)
                  : zn_sock_recv_some(fd, buf + *done, len - *done, &n);
    if (rc != 0) return rc;
    *done += n;
    return *done == len;
}

static ncclResult_t handshake_error(struct ib_pending *p, const char *what, int rc)
{
    return zn_error(ncclRemoteError, ZN_NET, "NET/IB: handshake with %s: %s: %s",
                    p->comm ? p->comm->peer : p->peer_str, what,
                    rc == -EPIPE ? "peer closed" : strerror(-rc));
}

/* Decode the peer's message and bring every QP to RTS towards it. */
static ncclResult_t handshake_apply(struct ib_pending *p, uint64_t magic)
{
    const char *why;
    if (zn_net_ib_wire_decode(p->in, sizeof(p->in), &p->peer, &why) != 0)
        return zn_error(ncclRemoteError, ZN_NET, "NET/IB: bad handshake from %s: %s", p->comm->peer,
                        why);
    if (p->peer.listen_magic != magic || (int)p->peer.nqps != p->comm->nqps)
        return zn_error(ncclRemoteError, ZN_NET,
                        "NET/IB: handshake from %s is not for this "
                        "connection (magic or QP count differ)",
                        p->comm->peer);
    struct zn_ib_comm *c = p->comm;
    for (int i = 0; i < c->nqps; i++) ZN_CHECK(qp_connect(c, c->qps[i], p->peer.qpn[i], &p->peer));
    c->peer_addr = p->peer.addr;
    c->peer_rkey = p->peer.rkey;
    return ncclSuccess;
}

static ncclResult_t connect_start(struct ib_handle *h, int dev)
{
    struct ib_pending *p;
    ZN_CHECK(zn_calloc(&p, 1, "IB handshake"));
    ncclResult_t res = comm_create(dev, 1, zn_net_ib_qps_per_conn(), &p->comm);
    if (res != ncclSuccess) {
        free(p);
        return res;
    }
    zn_sockaddr_str(&h->addr, p->comm->peer, sizeof(p->comm->peer));
    snprintf(p->peer_str, sizeof(p->peer_str), "%s", p->comm->peer);
    int rc = zn_sock_connect_start(&h->addr, &p->fd);
    if (rc != 0) {
        res = zn_error(ncclSystemError, ZN_NET, "NET/IB: connect to %s: %s", p->peer_str,
                       strerror(-rc));
        zn_net_ib_comm_free(p->comm);
        free(p);
        return res;
    }
    struct zn_ib_wire w;
    local_wire(p->comm, &w);
    w.listen_magic = h->magic;
    if (getrandom(w.nonce, sizeof(w.nonce), 0) != sizeof(w.nonce)) {
        res = zn_error(ncclSystemError, ZN_NET, "NET/IB: getrandom: %s", strerror(errno));
        close(p->fd);
        zn_net_ib_comm_free(p->comm);
        free(p);
        return res;
    }
    zn_net_ib_wire_encode(&w, p->out);
    zn_net_ib_wire_sign(p->out, h->key);
    h->pending = p;
    return ncclSuccess;
}

/* Stages: 0 connecting, 1 sending ours; connect() returns the comm then. Stages 2 (receiving
 * the receiver's answer and bringing the QPs up) and 3 (the ready byte) run from the comm's
 * isend/test (zn_net_ib_conn_progress): the receiver answers from accept(), which NCCL may
 * call much later (or, with both ends in one thread, only after connect() returned). The
 * receiver announces no buffer before the ready byte, so its FIFO writes never meet QPs that
 * are not yet in RTR, however late the sender gets to it. */
static ncclResult_t connect_step(struct ib_pending *p, int *sent)
{
    int rc = 1;
    *sent = 0;
    if (p->stage == 0 && (rc = zn_sock_connect_done(p->fd)) == 1) p->stage = 1, p->done = 0;
    if (p->stage == 1 && (rc = xfer(p->fd, p->out, sizeof(p->out), &p->done, 1)) == 1) {
        p->stage = 2, p->done = 0;
        *sent = 1;
    }
    if (rc < 0) return handshake_error(p, "connect", rc);
    return ncclSuccess;
}

ncclResult_t zn_net_ib_conn_progress(struct zn_ib_comm *c)
{
    struct ib_pending *p = c->hs;
    if (!p) return ncclSuccess;
    int rc = 1;
    if (p->stage == 2 && (rc = xfer(p->fd, p->in, sizeof(p->in), &p->done, 0)) == 1) {
        ncclResult_t res = handshake_apply(p, p->magic);
        if (res != ncclSuccess) return c->failed = res;
        p->stage = 3, p->done = 0;
    }
    if (p->stage == 3) {
        uint8_t one = 1;
        rc = xfer(p->fd, &one, 1, &p->done, 1);
    }
    if (rc < 0) return c->failed = handshake_error(p, "connect", rc);
    if (p->stage == 3 && rc == 1) {
        c->hs = NULL;
        free(p);
    }
    return ncclSuccess;
}

/* The receiver's side: 1 once the sender's ready byte arrived, 0 before, <0 errno. */
int zn_net_ib_peer_ready(struct zn_ib_comm *c)
{
    if (c->peer_ready) return 1;
    uint8_t b;
    size_t n = 0;
    int rc = zn_sock_recv_some(c->fd, &b, 1, &n);
    if (rc < 0) return rc;
    c->peer_ready = n == 1;
    return c->peer_ready;
}

ncclResult_t zn_net_ib_connect(int dev, int tc, void *handle, void **send_comm)
{
    struct ib_handle *h = handle;
    *send_comm = NULL;
    if (!h->pending) {
        ZN_CHECK(connect_start(h, dev));
        h->pending->comm->tc = tc;
        h->pending->magic = h->magic;
    }
    struct ib_pending *p = h->pending;
    int sent;
    ncclResult_t res = connect_step(p, &sent);
    if (res != ncclSuccess) {
        h->pending = NULL;
        close(p->fd);
        zn_net_ib_comm_free(p->comm);
        free(p);
    } else if (sent) {
        h->pending = NULL;
        p->comm->fd = p->fd; /* kept: the answer comes on it, then its hangup means death */
        p->comm->hs = p;
        zn_net_ib_comm_live(p->comm, 1);
        *send_comm = p->comm;
    }
    return res;
}

/* Stages: 0 accepting, 1 receiving theirs (then QPs up), 2 sending ours. A sender that died
 * after connecting still gets its comm: the hangup fails its first test(), which is where
 * NCCL looks for errors of a connection. */
static ncclResult_t accept_step(struct ib_listen *l, struct ib_pending *p, int *ready)
{
    int rc = 1;
    *ready = 0;
    if (p->stage == 1 && (rc = xfer(p->fd, p->in, sizeof(p->in), &p->done, 0)) == 1) {
        const char *why;
        struct zn_ib_wire w;
        int replay = 0;
        if (zn_net_ib_wire_decode(p->in, sizeof(p->in), &w, &why) != 0 ||
            w.listen_magic != l->magic || !zn_net_ib_wire_verify(p->in, l->key) ||
            (replay = zn_nonce_seen(&l->seen, w.nonce)) != 0) {
            /* Not our peer: drop it and keep listening (a stranger never stops a listener). */
            zn_warn(ZN_NET, "NET/IB: closed the connection from %s: %s", p->peer_str,
                    why                          ? why
                    : w.listen_magic != l->magic ? "it did not present this listener's magic"
                    : replay                     ? "it replayed a message already taken"
                                                 : "it did not prove this listener's key");
            *ready = -1;
            return ncclSuccess;
        }
        ZN_CHECK(comm_create(l->dev, 0, (int)w.nqps, &p->comm));
        p->comm->tc = l->tc;
        snprintf(p->comm->peer, sizeof(p->comm->peer), "%s", p->peer_str);
        ZN_CHECK(flush_qp_create(p->comm));
        for (int i = 0; i < p->comm->nqps; i++)
            ZN_CHECK(post_recvs(p->comm, p->comm->qps[i], ZN_IB_MAX_REQS));
        ZN_CHECK(handshake_apply(p, l->magic));
        struct zn_ib_wire mine;
        local_wire(p->comm, &mine);
        mine.listen_magic = l->magic;
        zn_net_ib_wire_encode(&mine, p->out);
        p->stage = 2, p->done = 0;
    }
    if (p->stage == 2) {
        rc = xfer(p->fd, p->out, sizeof(p->out), &p->done, 1);
        if (rc == 1 || rc == -EPIPE || rc == -ECONNRESET) *ready = 1;
        if (rc < 0 && *ready)
            zn_info(ZN_NET, "NET/IB: %s left during the handshake; its connection will fail",
                    p->peer_str);
        if (*ready) return ncclSuccess;
    }
    if (rc < 0 && p->stage == 1) {
        /* It went away before its message was whole: a stranger or a dead peer, not ours to
         * fail for (a peer that died is reported by its own rank). */
        zn_warn(ZN_NET, "NET/IB: closed the connection from %s before its handshake: %s",
                p->peer_str, rc == -EPIPE ? "closed by the other end" : strerror(-rc));
        *ready = -1;
        return ncclSuccess;
    }
    if (rc < 0) return handshake_error(p, "accept", rc);
    return ncclSuccess;
}

/* Take every connection waiting on the listening socket into the pending table. */
static ncclResult_t take_new(struct ib_listen *l)
{
    for (;;) {
        int fd;
        int rc = zn_sock_try_accept(l->fd, &fd);
        if (rc == -EAGAIN) return ncclSuccess;
        if (rc == -EMFILE || rc == -ENFILE || rc == -ECONNABORTED || rc == -ENOBUFS ||
            rc == -ENOMEM) {
            /* Out of descriptors (many strangers?): those pending expire and free some. */
            zn_warn(ZN_NET, "NET/IB: accept: %s (%d handshakes pending)", strerror(-rc), l->npend);
            return ncclSuccess;
        }
        if (rc != 0) return zn_error(ncclSystemError, ZN_NET, "NET/IB: accept: %s", strerror(-rc));
        if (l->npend == l->pcap) {
            int cap = l->pcap ? 2 * l->pcap : 8;
            struct ib_pending **n = realloc(l->pend, (size_t)cap * sizeof(*n));
            if (!n) {
                close(fd);
                return zn_error(ncclSystemError, ZN_NET, "NET/IB: out of memory for handshakes");
            }
            l->pend = n;
            l->pcap = cap;
        }
        struct ib_pending *p;
        ncclResult_t res = zn_calloc(&p, 1, "IB handshake");
        if (res != ncclSuccess) {
            close(fd);
            return res;
        }
        p->fd = fd;
        p->stage = 1;
        p->deadline = zn_deadline_from_now();
        snprintf(p->peer_str, sizeof(p->peer_str), "?");
        union zn_sockaddr a;
        socklen_t alen = sizeof(a);
        if (getpeername(fd, &a.sa, &alen) == 0)
            zn_sockaddr_str(&a, p->peer_str, sizeof(p->peer_str));
        l->pend[l->npend++] = p;
    }
}

static void drop_pending(struct ib_listen *l, int i, int free_comm)
{
    struct ib_pending *p = l->pend[i];
    if (free_comm) {
        close(p->fd);
        zn_net_ib_comm_free(p->comm);
    }
    free(p);
    l->pend[i] = l->pend[--l->npend];
}

/* Every pending handshake moves on; the first that is done is returned. A stranger (wrong
 * magic, garbage, silence past its deadline) is closed with a warning naming its address and
 * costs the others nothing. */
ncclResult_t zn_net_ib_accept(void *listen_comm, void **recv_comm)
{
    struct ib_listen *l = listen_comm;
    *recv_comm = NULL;
    ZN_CHECK(take_new(l));
    int64_t now = zn_now_ns();
    for (int i = l->npend - 1; i >= 0; i--) {
        struct ib_pending *p = l->pend[i];
        int ready;
        ncclResult_t res = accept_step(l, p, &ready);
        if (res != ncclSuccess) {
            drop_pending(l, i, 1);
            return res;
        }
        if (ready < 0) {
            drop_pending(l, i, 1);
            continue;
        }
        if (ready) {
            p->comm->fd = p->fd;
            zn_net_ib_comm_live(p->comm, 1);
            *recv_comm = p->comm;
            drop_pending(l, i, 0);
            return ncclSuccess;
        }
        if (p->stage == 1 && now > p->deadline) {
            zn_warn(ZN_NET,
                    "NET/IB: closed the connection from %s: no handshake within ZINC_TIMEOUT "
                    "(%zu of %d bytes)",
                    p->peer_str, p->done, ZN_IB_WIRE_BYTES);
            drop_pending(l, i, 1);
        }
    }
    return ncclSuccess;
}
