/*
 * IB net: memory registration (with a cache), the data path (isend / irecv / iflush / test),
 * asynchronous events, and the ncclNet_t (v12) table.
 *
 * Work request ids name what completed (ib.h, ZN_IB_WRID): the kind in the high 32 bits, the
 * FIFO slot (or the request index, for flushes and one-sided writes) in the low bits. Only four
 * kinds of send work requests are signaled: the write with immediate that ends a send group,
 * the FIFO index write of a receive, the read of a flush, and the last write of a one-sided
 * write (ib_rma.c).
 */
#include "net/ib.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/size.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------
 * Live communicators and asynchronous events
 * ------------------------------------------------------------------------------------- */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct zn_ib_comm *live;
static pthread_once_t async_once = PTHREAD_ONCE_INIT;

static int comm_is_live(struct zn_ib_comm *c)
{
    for (struct zn_ib_comm *l = live; l; l = l->next_live)
        if (l == c) return 1;
    return 0;
}

/* An event about a QP or CQ fails the communicator that owns it (qp_context / cq_context);
 * a port event marks the port, which fails every communicator on it at its next test(). */
static void async_handle(struct ibv_context *ctx, const struct ibv_async_event *ev)
{
    const char *what = zn_ibv.event_type_str(ev->event_type);
    struct zn_ib_comm *c = NULL;
    switch (ev->event_type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR: c = ev->element.qp->qp_context; break;
    case IBV_EVENT_CQ_ERR: c = ev->element.cq->cq_context; break;
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_DEVICE_FATAL:
        for (int i = 0; i < zn_net_ib_ndevs(); i++) {
            struct zn_ib_dev *d = zn_net_ib_dev(i);
            if (d->ctx != ctx ||
                (ev->event_type != IBV_EVENT_DEVICE_FATAL && d->port != (int)ev->element.port_num))
                continue;
            atomic_store(&d->port_down, ev->event_type != IBV_EVENT_PORT_ACTIVE);
            zn_warn(ZN_NET, "NET/IB: %s:%d: async event: %s", d->name, d->port, what);
        }
        return;
    default: zn_info(ZN_NET, "NET/IB: async event: %s", what); return;
    }
    pthread_mutex_lock(&live_lock);
    if (comm_is_live(c)) {
        zn_warn(ZN_NET, "NET/IB: %s:%d: async event on the connection with %s: %s", c->dev->name,
                c->dev->port, c->peer, what);
        atomic_store(&c->async_failed, (int)ev->event_type + 1);
    }
    pthread_mutex_unlock(&live_lock);
}

/* One thread for the process watches the async fd of every open device. */
static void *async_main(void *arg)
{
    for (;;) {
        struct pollfd fds[ZN_IB_MAX_DEVS];
        struct ibv_context *ctxs[ZN_IB_MAX_DEVS];
        int n = 0;
        for (int i = 0; i < zn_net_ib_ndevs(); i++) {
            struct zn_ib_dev *d = zn_net_ib_dev(i);
            if (i > 0 && zn_net_ib_dev(i - 1)->ctx == d->ctx) continue;
            ctxs[n] = d->ctx;
            fds[n] = (struct pollfd){ .fd = d->ctx->async_fd, .events = POLLIN };
            n++;
        }
        if (poll(fds, (nfds_t)n, 1000) <= 0) continue;
        for (int i = 0; i < n; i++) {
            struct ibv_async_event ev;
            if (!(fds[i].revents & POLLIN) || zn_ibv.get_async_event(ctxs[i], &ev) != 0) continue;
            async_handle(ctxs[i], &ev);
            zn_ibv.ack_async_event(&ev);
        }
    }
    return NULL;
}

static void async_start(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, async_main, NULL) == 0)
        pthread_detach(t);
    else
        zn_warn(ZN_NET, "NET/IB: cannot start the async event thread; port events go unseen");
}

void zn_net_ib_comm_live(struct zn_ib_comm *c, int on)
{
    if (on) pthread_once(&async_once, async_start);
    pthread_mutex_lock(&live_lock);
    if (on) {
        c->next_live = live;
        live = c;
    } else {
        for (struct zn_ib_comm **pp = &live; *pp; pp = &(*pp)->next_live)
            if (*pp == c) {
                *pp = c->next_live;
                break;
            }
    }
    pthread_mutex_unlock(&live_lock);
}

/* ---------------------------------------------------------------------------------------
 * Memory registration. NCCL registers the same buffers over and over (and regIsGlobal says a
 * registration serves every comm of the device), so registrations are cached per device by
 * page range and reference-counted.
 * ------------------------------------------------------------------------------------- */
enum { MR_ACCESS = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };

static ncclResult_t ib_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
    struct zn_ib_dev *d = ((struct zn_ib_comm *)comm)->dev;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)data & ~(page - 1);
    size_t last, end;
    /* A size that runs past the end of the address space would wrap to a small range. */
    if (zn_add_size((uintptr_t)data, size ? size : 1, &last) != 0 ||
        zn_round_up(last, page, &end) != 0)
        return zn_error(ncclInvalidArgument, ZN_NET,
                        "NET/IB: %s: registration of %zu bytes at %p runs past the end of memory",
                        d->name, size, data);
    pthread_mutex_lock(&d->lock);
    struct zn_ib_mr *m = d->mrs;
    while (m && !(m->start <= start && m->end >= end && m->type == type)) m = m->next;
    if (m) {
        m->refs++;
        pthread_mutex_unlock(&d->lock);
        *mhandle = m;
        return ncclSuccess;
    }
    ncclResult_t res = zn_calloc(&m, 1, "IB registration");
    if (res == ncclSuccess) {
        m->mr = zn_ibv.reg_mr(d->pd, (void *)start, end - start, MR_ACCESS);
        if (!m->mr) {
            res = zn_error(ncclSystemError, ZN_NET,
                           "NET/IB: %s: ibv_reg_mr of %zu bytes at %p (%s memory) failed: %s",
                           d->name, (size_t)(end - start), (void *)start,
                           type == NCCL_PTR_CUDA ? "GPU" : "host", strerror(errno));
            free(m);
        }
    }
    if (res == ncclSuccess) {
        m->dev = d, m->start = start, m->end = end, m->refs = 1, m->type = type;
        m->next = d->mrs;
        d->mrs = m;
        *mhandle = m;
    }
    pthread_mutex_unlock(&d->lock);
    return res;
}

/* dmabuf registrations are not cached: the fd, not the address, names the memory. */
static ncclResult_t ib_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
                                     int fd, void **mhandle)
{
    struct zn_ib_dev *d = ((struct zn_ib_comm *)comm)->dev;
    if (!zn_ibv.reg_dmabuf_mr || !d->dmabuf)
        return zn_error(ncclInvalidUsage, ZN_NET,
                        "NET/IB: %s: dmabuf registration is not supported here (libibverbs "
                        "without ibv_reg_dmabuf_mr, or the device refused it)",
                        d->name);
    struct zn_ib_mr *m;
    ZN_CHECK(zn_calloc(&m, 1, "IB registration"));
    m->mr = zn_ibv.reg_dmabuf_mr(d->pd, offset, size, (uintptr_t)data, fd, MR_ACCESS);
    if (!m->mr) {
        free(m);
        return zn_error(ncclSystemError, ZN_NET, "NET/IB: %s: ibv_reg_dmabuf_mr (fd %d) failed: %s",
                        d->name, fd, strerror(errno));
    }
    m->dev = d, m->refs = 1, m->type = type;
    *mhandle = m;
    return ncclSuccess;
}

static ncclResult_t ib_dereg_mr(void *comm, void *mhandle)
{
    struct zn_ib_mr *m = mhandle;
    struct zn_ib_dev *d = m->dev;
    pthread_mutex_lock(&d->lock);
    int last = --m->refs == 0;
    if (last)
        for (struct zn_ib_mr **pp = &d->mrs; *pp; pp = &(*pp)->next)
            if (*pp == m) {
                *pp = m->next;
                break;
            }
    pthread_mutex_unlock(&d->lock);
    if (last) {
        zn_ibv.dereg_mr(m->mr);
        free(m);
    }
    return ncclSuccess;
}

/* ---------------------------------------------------------------------------------------
 * Requests and posting
 * ------------------------------------------------------------------------------------- */
struct zn_ib_req *zn_net_ib_req_alloc(struct zn_ib_comm *c, enum zn_ib_req_type type)
{
    for (size_t i = 0; i < sizeof(c->reqs) / sizeof(c->reqs[0]); i++)
        if (c->reqs[i].type == ZN_IB_REQ_FREE) {
            memset(&c->reqs[i], 0, sizeof(c->reqs[i]));
            c->reqs[i].type = type;
            c->reqs[i].comm = c;
            return &c->reqs[i];
        }
    return NULL;
}

ncclResult_t zn_net_ib_post(struct zn_ib_comm *c, struct ibv_qp *qp, struct ibv_send_wr *wr)
{
    struct ibv_send_wr *bad;
    int rc = ibv_post_send(qp, wr, &bad);
    if (rc != 0)
        return zn_error(ncclSystemError, ZN_NET,
                        "NET/IB: %s:%d: ibv_post_send on QP %#x (peer %s): %s", c->dev->name,
                        c->dev->port, qp->qp_num, c->peer, strerror(rc));
    return ncclSuccess;
}

/* Every send of a FIFO slot is matched: write each into its receive buffer, then the sizes
 * with the slot's sequence number as immediate, all on one QP so that they arrive in order. */
static ncclResult_t post_send_group(struct zn_ib_comm *c, int slot, int n)
{
    struct zn_ib_fifo_slot *s = &c->sh->fifo[slot];
    struct ibv_qp *qp = c->qps[c->seq % (uint64_t)c->nqps];
    struct ibv_sge sge[ZN_IB_MAX_RECVS + 1];
    struct ibv_send_wr wr[ZN_IB_MAX_RECVS + 1];
    int k = 0;
    memset(wr, 0, sizeof(wr));
    for (int j = 0; j < n; j++) {
        struct zn_ib_req *r = c->slot_reqs[slot][j];
        c->sh->sizes[slot][j] = r->sizes[0] | (r->err ? ZN_IB_SIZE_REFUSED : 0);
        if (r->sizes[0] == 0 || r->err) continue;
        sge[k] = (struct ibv_sge){ (uintptr_t)r->data, (uint32_t)r->sizes[0], r->lkey };
        wr[k].opcode = IBV_WR_RDMA_WRITE;
        wr[k].wr_id = ZN_IB_WRID(ZN_IB_WR_DATA, slot);
        wr[k].wr.rdma.remote_addr = s->e[j].addr;
        wr[k].wr.rdma.rkey = s->e[j].rkey;
        k++;
    }
    sge[k] = (struct ibv_sge){ (uintptr_t)c->sh->sizes[slot], (uint32_t)(n * sizeof(uint64_t)),
                               c->sh_mr->lkey };
    wr[k].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr[k].imm_data = htonl((uint32_t)c->seq);
    wr[k].send_flags = IBV_SEND_SIGNALED;
    wr[k].wr_id = ZN_IB_WRID(ZN_IB_WR_SEND_GROUP, slot);
    wr[k].wr.rdma.remote_addr = c->peer_addr + (uint64_t)slot * sizeof(c->sh->sizes[0]);
    wr[k].wr.rdma.rkey = c->peer_rkey;
    for (int i = 0; i <= k; i++) {
        wr[i].sg_list = &sge[i];
        wr[i].num_sge = 1;
        wr[i].next = i < k ? &wr[i + 1] : NULL;
    }
    return zn_net_ib_post(c, qp, wr);
}

ncclResult_t zn_net_ib_comm_check(struct zn_ib_comm *c)
{
    if (c->failed) return c->failed;
    int ev = atomic_load(&c->async_failed);
    if (ev || atomic_load(&c->dev->port_down))
        c->failed =
            zn_error(ncclRemoteError, ZN_NET, "NET/IB: %s:%d: connection with %s failed: %s",
                     c->dev->name, c->dev->port, c->peer,
                     ev ? zn_ibv.event_type_str((enum ibv_event_type)(ev - 1)) : "port down");
    return c->failed;
}

/* Match queued sends, oldest first, to the FIFO slot the receiver filled last; a slot whose
 * entries are all matched goes out as one group. A send larger than the buffer it matches is
 * refused on both sides: its request fails here, and its size travels with a flag so that the
 * receive fails too (rather than the receiver waiting for data that never comes). */
static ncclResult_t send_progress(struct zn_ib_comm *c)
{
    if (c->hs) ZN_CHECK(zn_net_ib_conn_progress(c));
    while (!c->hs && c->sendq_n > 0) {
        int slot = (int)(c->seq % ZN_IB_MAX_REQS);
        struct zn_ib_fifo_slot *s = &c->sh->fifo[slot];
        if (atomic_load_explicit(&s->idx, memory_order_acquire) != c->seq + 1) break;
        int n = (int)s->e[0].nreqs, j = 0;
        if (n < 1 || n > ZN_IB_MAX_RECVS)
            return c->failed = zn_error(ncclRemoteError, ZN_NET,
                                        "NET/IB: %s posted a receive of %d buffers (1-%d allowed)",
                                        c->peer, n, ZN_IB_MAX_RECVS);
        struct zn_ib_req *r = c->sendq[c->sendq_head];
        while (j < n && (s->e[j].tag != r->tag || c->slot_reqs[slot][j])) j++;
        if (j == n)
            return c->failed = zn_error(
                       ncclInvalidUsage, ZN_NET,
                       "NET/IB: send with tag %d to %s matches none of the %d receive(s) posted",
                       r->tag, c->peer, n);
        if (r->sizes[0] > s->e[j].size)
            r->err = zn_error(ncclInvalidUsage, ZN_NET,
                              "NET/IB: send of %llu bytes (tag %d) to %s is larger than the "
                              "posted receive (%llu bytes)",
                              (unsigned long long)r->sizes[0], r->tag, c->peer,
                              (unsigned long long)s->e[j].size);
        c->slot_reqs[slot][j] = r;
        c->sendq_head = (c->sendq_head + 1) % ZN_IB_SENDQ;
        c->sendq_n--;
        if (++c->nposted == n) {
            ZN_CHECK(post_send_group(c, slot, n));
            c->seq++;
            c->nposted = 0;
        }
    }
    return ncclSuccess;
}

/* A buffer posted without a registration is registered (through the cache) for the request. */
static ncclResult_t req_lkey(struct zn_ib_comm *c, struct zn_ib_req *r, int j, void *data,
                             size_t size, void *mhandle, struct ibv_mr **mr)
{
    *mr = NULL;
    if (size == 0) return ncclSuccess;
    if (!mhandle) {
        ZN_CHECK(ib_reg_mr(c, data, size, NCCL_PTR_HOST, &mhandle));
        r->tmp_mr[j] = mhandle;
    }
    *mr = ((struct zn_ib_mr *)mhandle)->mr;
    return ncclSuccess;
}

static void req_free(struct zn_ib_req *r)
{
    for (int j = 0; j < ZN_IB_MAX_RECVS; j++)
        if (r->tmp_mr[j]) ib_dereg_mr(r->comm, r->tmp_mr[j]);
    r->type = ZN_IB_REQ_FREE;
}

/* A send is queued at once, whether or not its receive is posted yet: it goes out when the
 * receiver's FIFO slot arrives (checked here and in test()). */
static ncclResult_t ib_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                             void *phandle, void **request)
{
    struct zn_ib_comm *c = send_comm;
    *request = NULL;
    ZN_CHECK(zn_net_ib_comm_check(c));
    if (c->sendq_n == ZN_IB_SENDQ) return send_progress(c); /* full: try again */
    struct zn_ib_req *r = zn_net_ib_req_alloc(c, ZN_IB_REQ_SEND);
    if (!r) return send_progress(c);
    struct ibv_mr *mr;
    ncclResult_t res = req_lkey(c, r, 0, data, size, mhandle, &mr);
    if (res != ncclSuccess) {
        req_free(r);
        return res;
    }
    r->n = 1;
    r->sizes[0] = size;
    r->data = data;
    r->tag = tag;
    r->lkey = mr ? mr->lkey : 0;
    c->sendq[(c->sendq_head + c->sendq_n) % ZN_IB_SENDQ] = r;
    c->sendq_n++;
    *request = r;
    return send_progress(c);
}

/* Announce the buffers in the sender's FIFO: the entries, then (same QP, so after them) the
 * slot's index. */
static ncclResult_t post_fifo(struct zn_ib_comm *c, uint64_t seq)
{
    int slot = (int)(seq % ZN_IB_MAX_REQS);
    struct zn_ib_fifo_slot *st = &c->sh->stage[slot];
    int n = (int)st->e[0].nreqs;
    uint64_t remote = c->peer_addr + (uint64_t)slot * sizeof(struct zn_ib_fifo_slot);
    struct ibv_sge sge[2] = {
        { (uintptr_t)st->e, (uint32_t)(n * sizeof(st->e[0])), c->sh_mr->lkey },
        { (uintptr_t)&st->idx, sizeof(uint64_t), c->sh_mr->lkey },
    };
    struct ibv_send_wr wr[2];
    memset(wr, 0, sizeof(wr));
    wr[0] = (struct ibv_send_wr){ .wr_id = ZN_IB_WRID(ZN_IB_WR_FIFO, slot),
                                  .sg_list = &sge[0],
                                  .num_sge = 1,
                                  .opcode = IBV_WR_RDMA_WRITE,
                                  .next = &wr[1] };
    wr[0].wr.rdma.remote_addr = remote;
    wr[0].wr.rdma.rkey = c->peer_rkey;
    wr[1] = (struct ibv_send_wr){ .wr_id = ZN_IB_WRID(ZN_IB_WR_FIFO, slot),
                                  .sg_list = &sge[1],
                                  .num_sge = 1,
                                  .opcode = IBV_WR_RDMA_WRITE,
                                  .send_flags = IBV_SEND_SIGNALED };
    wr[1].wr.rdma.remote_addr = remote + offsetof(struct zn_ib_fifo_slot, idx);
    wr[1].wr.rdma.rkey = c->peer_rkey;
    return zn_net_ib_post(c, c->qps[seq % (uint64_t)c->nqps], wr);
}

static ncclResult_t peer_closed(struct zn_ib_comm *c)
{
    return c->failed = zn_error(ncclRemoteError, ZN_NET,
                                "NET/IB: %s:%d: connection with %s closed by the peer (process "
                                "exited or closed its communicator) with requests in flight",
                                c->dev->name, c->dev->port, c->peer);
}

/* Announce the receives posted so far, once the sender's QPs are up (its ready byte). */
static ncclResult_t recv_progress(struct zn_ib_comm *c)
{
    if (c->announced == c->seq) return ncclSuccess;
    int rc = zn_net_ib_peer_ready(c);
    if (rc == -EPIPE || rc == -ECONNRESET) return peer_closed(c);
    if (rc < 0)
        return c->failed = zn_error(ncclSystemError, ZN_NET, "NET/IB: handshake with %s: %s",
                                    c->peer, strerror(-rc));
    for (; rc == 1 && c->announced < c->seq; c->announced++) ZN_CHECK(post_fifo(c, c->announced));
    return ncclSuccess;
}

static ncclResult_t ib_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                             void **mhandles, void **phandles, void **request)
{
    struct zn_ib_comm *c = recv_comm;
    *request = NULL;
    ZN_CHECK(zn_net_ib_comm_check(c));
    if (n < 1 || n > ZN_IB_MAX_RECVS)
        return zn_error(ncclInvalidArgument, ZN_NET, "NET/IB: irecv of %d buffers (1-%d allowed)",
                        n, ZN_IB_MAX_RECVS);
    int slot = (int)(c->seq % ZN_IB_MAX_REQS);
    if (c->recv_reqs[slot]) return ncclSuccess; /* all slots in flight */
    struct zn_ib_req *r = zn_net_ib_req_alloc(c, ZN_IB_REQ_RECV);
    if (!r) return ncclSuccess;
    r->n = n;
    r->idx = c->seq;
    struct zn_ib_fifo_slot *st = &c->sh->stage[slot];
    for (int j = 0; j < n; j++) {
        struct ibv_mr *mr;
        ncclResult_t res = req_lkey(c, r, j, data[j], sizes[j], mhandles ? mhandles[j] : NULL, &mr);
        if (res != ncclSuccess) {
            req_free(r);
            return res;
        }
        st->e[j] = (struct zn_ib_fifo_entry){ .addr = (uintptr_t)data[j],
                                              .size = sizes[j],
                                              .rkey = mr ? mr->rkey : 0,
                                              .tag = tags[j],
                                              .nreqs = (uint32_t)n };
    }
    atomic_store(&st->idx, c->seq + 1);
    c->recv_reqs[slot] = r;
    c->seq++;
    *request = r;
    /* A failure to announce it (the sender gone) is kept in c->failed and reported by test(),
     * where NCCL looks for a request's fate. */
    (void)recv_progress(c);
    return ncclSuccess;
}

/* GPU receives: an RDMA read through the loopback QP completes only after the NIC's earlier
 * writes into GPU memory are visible (NCCL's GPUDirect flush). Host memory needs nothing. */
static ncclResult_t ib_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                              void **request)
{
    struct zn_ib_comm *c = recv_comm;
    *request = NULL;
    ZN_CHECK(zn_net_ib_comm_check(c));
    int last = -1;
    for (int i = 0; i < n; i++)
        if (mhandles[i] && ((struct zn_ib_mr *)mhandles[i])->type == NCCL_PTR_CUDA && sizes[i] > 0)
            last = i;
    if (last < 0) return ncclSuccess;
    struct zn_ib_req *r = zn_net_ib_req_alloc(c, ZN_IB_REQ_FLUSH);
    if (!r)
        return zn_error(ncclInternalError, ZN_NET, "NET/IB: no request left for a flush (%s)",
                        c->peer);
    struct ibv_sge sge = { (uintptr_t)&c->sh->flush_dst, 1, c->sh_mr->lkey };
    struct ibv_send_wr wr = { .wr_id = ZN_IB_WRID(ZN_IB_WR_FLUSH, r - c->reqs),
                              .sg_list = &sge,
                              .num_sge = 1,
                              .opcode = IBV_WR_RDMA_READ,
                              .send_flags = IBV_SEND_SIGNALED };
    wr.wr.rdma.remote_addr = (uintptr_t)data[last];
    wr.wr.rdma.rkey = ((struct zn_ib_mr *)mhandles[last])->mr->rkey;
    ncclResult_t res = zn_net_ib_post(c, c->flush_qp, &wr);
    if (res != ncclSuccess) {
        req_free(r);
        return res;
    }
    *request = r;
    return ncclSuccess;
}

/* ---------------------------------------------------------------------------------------
 * Completions, polled from test() (the proxy's progress thread)
 * ------------------------------------------------------------------------------------- */
static ncclResult_t wc_error(struct zn_ib_comm *c, const struct ibv_wc *wc)
{
    static const char *const kinds[] = { "receive",    "size write", "FIFO write",
                                         "flush read", "data write", "one-sided RDMA write" };
    uint32_t kind = (uint32_t)(wc->wr_id >> 32);
    return c->failed = zn_error(
               ncclRemoteError, ZN_NET,
               "NET/IB: %s:%d: %s completion error on QP %#x with %s: %s (status %d, vendor "
               "error %#x)",
               c->dev->name, c->dev->port, kind < 6 ? kinds[kind] : "unknown", wc->qp_num, c->peer,
               zn_ibv.wc_status_str(wc->status), (int)wc->status, wc->vendor_err);
}

static ncclResult_t wc_recv(struct zn_ib_comm *c, const struct ibv_wc *wc)
{
    uint32_t idx = ntohl(wc->imm_data);
    int slot = (int)(idx % ZN_IB_MAX_REQS);
    struct zn_ib_req *r = c->recv_reqs[slot];
    if (!r || (uint32_t)r->idx != idx)
        return c->failed =
                   zn_error(ncclRemoteError, ZN_NET,
                            "NET/IB: %s completed receive %u, which is not posted", c->peer, idx);
    for (int j = 0; j < r->n; j++) {
        uint64_t v = c->sh->sizes[slot][j];
        r->sizes[j] = v & ~ZN_IB_SIZE_REFUSED;
        if (v & ZN_IB_SIZE_REFUSED)
            return c->failed = zn_error(ncclInvalidUsage, ZN_NET,
                                        "NET/IB: a message of %llu bytes from %s is larger than "
                                        "the posted receive (%llu bytes, tag %d)",
                                        (unsigned long long)r->sizes[j], c->peer,
                                        (unsigned long long)c->sh->stage[slot].e[j].size,
                                        c->sh->stage[slot].e[j].tag);
    }
    r->done = 1;
    c->recv_reqs[slot] = NULL;
    for (int i = 0; i < c->nqps; i++) { /* give the QP its receive back */
        if (c->qps[i]->qp_num != wc->qp_num) continue;
        struct ibv_recv_wr wr = { .wr_id = 0 }, *bad;
        int rc = ibv_post_recv(c->qps[i], &wr, &bad);
        if (rc != 0)
            return c->failed =
                       zn_error(ncclSystemError, ZN_NET, "NET/IB: %s: ibv_post_recv on QP %#x: %s",
                                c->dev->name, wc->qp_num, strerror(rc));
    }
    return ncclSuccess;
}

static ncclResult_t poll_cq(struct zn_ib_comm *c)
{
    struct ibv_wc wcs[16];
    int n = ibv_poll_cq(c->cq, 16, wcs);
    if (n < 0)
        return c->failed = zn_error(ncclSystemError, ZN_NET, "NET/IB: %s: ibv_poll_cq failed",
                                    c->dev->name);
    for (int i = 0; i < n; i++) {
        const struct ibv_wc *wc = &wcs[i];
        if (wc->status != IBV_WC_SUCCESS) return wc_error(c, wc);
        if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
            ZN_CHECK(wc_recv(c, wc));
            continue;
        }
        uint32_t kind = (uint32_t)(wc->wr_id >> 32), low = (uint32_t)wc->wr_id;
        if (kind == ZN_IB_WR_SEND_GROUP && low < ZN_IB_MAX_REQS) {
            for (int j = 0; j < ZN_IB_MAX_RECVS; j++) {
                if (c->slot_reqs[low][j]) c->slot_reqs[low][j]->done = 1;
                c->slot_reqs[low][j] = NULL;
            }
        } else if ((kind == ZN_IB_WR_FLUSH || kind == ZN_IB_WR_RMA) &&
                   low < sizeof(c->reqs) / sizeof(c->reqs[0])) {
            c->reqs[low].done = 1;
        }
    }
    return ncclSuccess;
}

/* A peer process that died leaves its queue pairs silent: a receive would wait forever, and a
 * send only fails after the retry timeout. The handshake socket closes with the process, so a
 * hangup there (checked at most every 10 ms) fails the connection sooner. */
int zn_net_ib_hung_up(struct zn_ib_comm *c)
{
    int64_t now = zn_now_ns();
    if (c->fd < 0 || now < c->next_hup_check) return 0;
    c->next_hup_check = now + 10000000;
    struct pollfd p = { .fd = c->fd, .events = POLLIN | POLLRDHUP };
    if (poll(&p, 1, 0) <= 0) return 0;
    char b;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) || recv(c->fd, &b, 1, MSG_PEEK) == 0;
}

/* After the hangup a request may still complete: the peer can take our last message and leave
 * before its acknowledgement reaches our NIC (the acknowledgement and the socket's FIN travel
 * apart, and the completion is written once the acknowledgement is processed), so a send it
 * received would be reported failed. Completions are awaited this long after the hangup; what
 * has not completed by then never will (the peer's queue pairs are gone). */
#define ZN_IB_HUP_GRACE_NS (2 * 1000000000ll)

static ncclResult_t check_hangup(struct zn_ib_comm *c, const struct zn_ib_req *r)
{
    if (!c->hup_since) {
        if (!zn_net_ib_hung_up(c)) return ncclSuccess;
        c->hup_since = zn_now_ns();
    }
    ZN_CHECK(poll_cq(c)); /* what completed before the peer left still counts */
    if (r->done || zn_now_ns() - c->hup_since < ZN_IB_HUP_GRACE_NS) return ncclSuccess;
    return peer_closed(c);
}

static ncclResult_t ib_test(void *request, int *done, int *sizes)
{
    struct zn_ib_req *r = request;
    struct zn_ib_comm *c = r->comm;
    *done = 0;
    ZN_CHECK(zn_net_ib_comm_check(c));
    ZN_CHECK(c->is_send ? send_progress(c) : recv_progress(c));
    if (!r->done) ZN_CHECK(poll_cq(c));
    if (!r->done) ZN_CHECK(check_hangup(c, r));
    if (!r->done) return ncclSuccess;
    if (r->err) {
        ncclResult_t err = r->err;
        req_free(r);
        return err;
    }
    *done = 1;
    if (sizes)
        for (int j = 0; j < (r->type == ZN_IB_REQ_RECV ? r->n : 1); j++)
            sizes[j] = (int)r->sizes[j];
    req_free(r);
    return ncclSuccess;
}

/* ---------------------------------------------------------------------------------------
 * The table
 * ------------------------------------------------------------------------------------- */
struct ib_ctx {
    int traffic_class;
};

static ncclResult_t ib_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_t *config,
                            ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
    /* Devices found here, once; whoever decides not to use this net (the registry, the plugin's
     * front) says why, once per process, since init runs once per communicator. */
    zn_net_ib_devices_init(NULL);
    struct ib_ctx *c;
    ZN_CHECK(zn_calloc(&c, 1, "IB net context"));
    c->traffic_class =
        config && config->trafficClass != NCCL_NET_TRAFFIC_CLASS_UNDEF ? config->trafficClass : -1;
    *ctx = c;
    return ncclSuccess;
}

static ncclResult_t ib_finalize(void *ctx)
{
    free(ctx);
    return ncclSuccess;
}

static ncclResult_t ib_devices(int *ndev)
{
    *ndev = zn_net_ib_devices_init(NULL);
    return ncclSuccess;
}

/* GPUDirect RDMA needs the NVIDIA peer-memory module (or dmabuf, checked per device). */
static int gdr_possible(void)
{
    return access("/sys/kernel/mm/memory_peers/nv_mem/version", F_OK) == 0 ||
           access("/sys/module/nvidia_peermem/version", F_OK) == 0;
}

static ncclResult_t ib_get_properties(int dev, ncclNetProperties_t *p)
{
    struct zn_ib_dev *d = zn_net_ib_dev(dev);
    if (!d) return zn_error(ncclInvalidArgument, ZN_NET, "NET/IB: no device %d", dev);
    memset(p, 0, sizeof(*p));
    p->name = d->name;
    p->pciPath = d->pci_path[0] ? d->pci_path : NULL;
    p->guid = d->guid;
    p->ptrSupport = NCCL_PTR_HOST | (gdr_possible() ? NCCL_PTR_CUDA : 0) |
                    (d->dmabuf ? NCCL_PTR_CUDA | NCCL_PTR_DMABUF : 0);
    p->regIsGlobal = 1;
    p->speed = d->speed_mbps;
    p->port = d->port;
    p->latency = 0;
    p->maxComms = 65536;
    p->maxRecvs = ZN_IB_MAX_RECVS;
    p->netDeviceType = NCCL_NET_DEVICE_HOST;
    p->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
    p->vProps.ndevs = 1;
    p->vProps.devs[0] = dev;
    p->maxP2pBytes = NCCL_NET_MAX_SIZE_LEGACY;
    p->maxCollBytes = NCCL_NET_MAX_SIZE_LEGACY;
    p->maxMultiRequestSize = 1;
    /* Only the user knows the fabric: ZINC_IB_HCA's name:port:rail:plane, else unset. */
    p->railId = d->rail;
    p->planeId = d->plane;
    return ncclSuccess;
}

static ncclResult_t ib_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
    return zn_net_ib_listen(dev, ((struct ib_ctx *)ctx)->traffic_class, handle, listen_comm);
}

static ncclResult_t ib_connect(void *ctx, int dev, void *handle, void **send_comm,
                               ncclNetDeviceHandle_t **dev_comm)
{
    if (dev_comm) *dev_comm = NULL;
    return zn_net_ib_connect(dev, ((struct ib_ctx *)ctx)->traffic_class, handle, send_comm);
}

static ncclResult_t ib_accept(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_t **dev_comm)
{
    if (dev_comm) *dev_comm = NULL;
    return zn_net_ib_accept(listen_comm, recv_comm);
}

/* Requests still open release their temporary registrations with the comm. */
static ncclResult_t ib_close(void *comm)
{
    struct zn_ib_comm *c = comm;
    for (size_t i = 0; i < sizeof(c->reqs) / sizeof(c->reqs[0]); i++)
        if (c->reqs[i].type != ZN_IB_REQ_FREE) req_free(&c->reqs[i]);
    zn_net_ib_comm_free(comm);
    return ncclSuccess;
}

static ncclResult_t ib_get_device_mr(void *comm, void *mhandle, void **dptr_mhandle)
{
    return zn_error(ncclInvalidUsage, ZN_NET,
                    "NET/IB: getDeviceMr: no device offload in zinc's IB net");
}

/* As the socket net's: NCCL calls it after every completed receive; nothing is left to
 * release then, and the request may already be gone. */
static ncclResult_t ib_irecv_consumed(void *recv_comm, int n, void *request)
{
    return ncclSuccess;
}

static ncclResult_t ib_make_vdevice(int *d, ncclNetVDeviceProps_t *props)
{
    if (props->ndevs == 1 && zn_net_ib_dev(props->devs[0])) {
        *d = props->devs[0];
        return ncclSuccess;
    }
    return zn_error(ncclInvalidUsage, ZN_NET,
                    "NET/IB: makeVDevice of %d devices: merging NICs is not supported",
                    props->ndevs);
}

static ncclResult_t ib_set_net_attr(void *ctx, ncclNetAttr_t *attr)
{
    return ncclSuccess; /* hints only; the IB net has no per-communicator tuning */
}

const ncclNet_t zn_net_ib = {
    .name = "IB",
    .init = ib_init,
    .devices = ib_devices,
    .getProperties = ib_get_properties,
    .listen = ib_listen,
    .connect = ib_connect,
    .accept = ib_accept,
    .regMr = ib_reg_mr,
    .regMrDmaBuf = ib_reg_mr_dmabuf,
    .deregMr = ib_dereg_mr,
    .isend = ib_isend,
    .irecv = ib_irecv,
    .iflush = ib_iflush,
    .test = ib_test,
    .closeSend = ib_close,
    .closeRecv = ib_close,
    .closeListen = zn_net_ib_close_listen,
    .getDeviceMr = ib_get_device_mr,
    .irecvConsumed = ib_irecv_consumed,
    .makeVDevice = ib_make_vdevice,
    .finalize = ib_finalize,
    .setNetAttr = ib_set_net_attr,
};
