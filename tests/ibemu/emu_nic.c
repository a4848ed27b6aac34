/*
 * ibemu's "NIC": one thread per opened context moves the data of its QPs.
 *
 * As requester it translates the local scatter/gather lists of posted work requests through
 * this process's memory registrations and copies them into the peer QP's request ring; it
 * applies read responses from its own response ring, and retires work requests as the peer's
 * acknowledgements arrive (or fails them on a negative acknowledgement or when the peer stays
 * unreachable for the retry timeout). As responder it checks every inbound message against its
 * registrations, writes it into place, consumes a posted receive for an immediate, serves reads,
 * and acknowledges.
 */
#include "emu.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { CHUNK = 64 << 10 };

/* IB spec: 4.096 us * 2^timeout per try, retry_cnt retries; timeout 0 means infinite. Capped
 * (ZINC_IBEMU_RETRY_CAP_MS) so tests of dead peers stay short. */
uint64_t emu_retry_timeout_ns(const struct ibv_qp_attr *a)
{
    uint64_t cap = emu_config()->retry_cap_ns;
    if (a->timeout == 0 || a->timeout > 31) return cap;
    uint64_t ns = (4096ull << a->timeout) * (a->retry_cnt + 1u);
    return ns < cap ? ns : cap;
}

/* IB spec's RNR NAK timer encoding, in microseconds; rnr_retry 7 retries forever. */
uint64_t emu_rnr_timeout_ns(unsigned timer, unsigned retry)
{
    static const uint32_t us[32] = { 655360, 10,    20,    30,     40,     60,     80,     120,
                                     160,    240,   320,   480,    640,    960,    1280,   1920,
                                     2560,   3840,  5120,  7680,   10240,  15360,  20480,  30720,
                                     40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520 };
    if (retry >= 7) return UINT64_MAX;
    uint64_t ns = (uint64_t)us[timer & 31] * 1000u * (retry + 1u);
    uint64_t cap = emu_config()->retry_cap_ns;
    return ns < cap ? ns : cap;
}

/* ---------------------------------------------------------------------------------------
 * The peer QP
 * ------------------------------------------------------------------------------------- */
static struct emu_qp_seg *peer_map(struct emu_qp *qp)
{
    uint32_t dest = atomic_load(&qp->seg->dest_qpn);
    if (qp->qp.state < IBV_QPS_RTR || qp->qp.state == IBV_QPS_ERR) return NULL;
    if (qp->peer && qp->peer->qpn == dest) return qp->peer;
    if (qp->peer) {
        munmap(qp->peer, qp->peer_len);
        close(qp->peer_fd);
        qp->peer = NULL;
        qp->peer_fd = -1;
    }
    char name[128];
    emu_qp_seg_name(dest, name, sizeof(name));
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    struct stat st;
    if (fd < 0) return NULL;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(struct emu_qp_seg)) goto err_close;
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) goto err_close;
    struct emu_qp_seg *s = p;
    if (s->magic != EMU_SEG_MAGIC || s->qpn != dest) {
        munmap(p, (size_t)st.st_size);
        goto err_close;
    }
    qp->peer = s;
    qp->peer_fd = fd;
    qp->peer_len = (size_t)st.st_size;
    return s;

err_close:
    close(fd);
    return NULL;
}

/* The peer answers: its owner lives and it is connected back to this QP in RTR or RTS. A QP
 * in error (or reset, or gone) does not answer, as on a real fabric. */
static int peer_reachable(struct emu_qp *qp, uint64_t now)
{
    struct emu_qp_seg *p = peer_map(qp);
    if (!p) return 0;
    uint32_t st = atomic_load(&p->state);
    if ((st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD) ||
        atomic_load(&p->dest_qpn) != qp->qp.qp_num)
        return 0;
    if (now - qp->last_check_ns > 10000000u) { /* a syscall: at most every 10 ms */
        qp->last_check_ns = now;
        qp->reachable = emu_seg_owner_alive(qp->peer_fd, p);
    }
    return qp->reachable;
}

/* ---------------------------------------------------------------------------------------
 * Scatter/gather through local registrations
 * ------------------------------------------------------------------------------------- */
static int sge_translate(struct emu_qp *qp, struct emu_swqe *e)
{
    int need = e->opcode == IBV_WR_RDMA_READ ? IBV_ACCESS_LOCAL_WRITE : 0;
    for (int i = 0; i < e->num_sge; i++) {
        struct ibv_sge *s = &e->sge[i];
        if (s->length == 0) continue;
        struct emu_mr *m = emu_mr_find(qp->ctx, s->lkey);
        if (!m || (m->access & need) != need || s->addr < m->iova ||
            s->addr + s->length > m->iova + m->len || m->mr.pd != qp->qp.pd)
            return -1;
        e->host[i] = m->host + (s->addr - m->iova);
        e->gpu[i] = m->gpu;
    }
    return 0;
}

/* Copy n bytes at message offset off between the WR's local buffers and buf. */
static void sge_copy(struct emu_swqe *e, uint64_t off, uint8_t *buf, uint64_t n, int to_local)
{
    if (e->inl) {
        memcpy(buf, e->inl + off, n);
        return;
    }
    for (int i = 0; i < e->num_sge && n; i++) {
        uint64_t l = e->sge[i].length;
        if (off >= l) {
            off -= l;
            continue;
        }
        uint64_t k = l - off < n ? l - off : n;
        if (to_local)
            emu_copy(e->host[i] + off, buf, k, e->gpu[i]);
        else
            emu_copy(buf, e->host[i] + off, k, e->gpu[i]);
        buf += k;
        n -= k;
        off = 0;
    }
}

/* ---------------------------------------------------------------------------------------
 * Requester
 * ------------------------------------------------------------------------------------- */
static uint32_t chunk_bytes(const struct emu_ring *r)
{
    return r->size / 4 < CHUNK ? (uint32_t)(r->size / 4) : CHUNK;
}

/* Transmit one WR (or what fits of it). Returns 1 when it is fully sent. */
static int tx_one(struct emu_qp *qp, struct emu_qp_seg *peer, struct emu_swqe *e, int *sent)
{
    struct emu_ring *r = &peer->req;
    uint64_t head;
    if (e->opcode == IBV_WR_RDMA_READ) {
        struct emu_pkt *p = emu_ring_reserve(peer, r, 0, &head);
        if (!p) return 0;
        *p = (struct emu_pkt){ .type = PKT_READ_REQ,
                               .flags = PKT_FIRST | PKT_LAST,
                               .rkey = e->rkey,
                               .msn = e->msn,
                               .raddr = e->raddr,
                               .total = e->len };
        emu_ring_publish(r, head);
        *sent = 1;
        return 1;
    }
    uint32_t imm = e->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? PKT_IMM : 0;
    do {
        uint64_t n = e->len - e->tx_off;
        if (n > chunk_bytes(r)) n = chunk_bytes(r);
        struct emu_pkt *p = emu_ring_reserve(peer, r, (uint32_t)n, &head);
        if (!p) return 0;
        *p = (struct emu_pkt){ .type = PKT_WRITE,
                               .len = (uint32_t)n,
                               .rkey = e->rkey,
                               .msn = e->msn,
                               .raddr = e->raddr + e->tx_off,
                               .total = e->len,
                               .imm = e->imm };
        p->flags =
            imm | (e->tx_off == 0 ? PKT_FIRST : 0) | (e->tx_off + n == e->len ? PKT_LAST : 0);
        sge_copy(e, e->tx_off, (uint8_t *)(p + 1), n, 0);
        emu_ring_publish(r, head);
        e->tx_off += n;
        *sent = 1;
    } while (e->tx_off < e->len);
    return 1;
}

static int requester_tx(struct emu_qp *qp, struct emu_qp_seg *peer)
{
    int sent = 0;
    while (qp->sq_tx < qp->sq_post) {
        struct emu_swqe *e = &qp->sq[qp->sq_tx % qp->sq_cap];
        if (!e->started) {
            e->started = 1;
            if (!e->inl && sge_translate(qp, e) != 0) {
                e->loc_err = 1; /* completes in order, then the QP goes to error */
                qp->sq_tx++;
                break;
            }
        }
        if (!tx_one(qp, peer, e, &sent)) break;
        qp->sq_tx++;
    }
    if (sent) emu_nic_kick(peer->nic_slot);
    return sent;
}

/* Read responses land in the WR with their message number (among the transmitted ones). */
static int requester_rx(struct emu_qp *qp)
{
    int n = 0;
    struct emu_pkt *p;
    while ((p = emu_ring_peek(qp->seg, &qp->seg->resp)) != NULL) {
        for (uint64_t i = qp->sq_done; i < qp->sq_tx; i++) {
            struct emu_swqe *e = &qp->sq[i % qp->sq_cap];
            if (e->msn != p->msn || e->opcode != IBV_WR_RDMA_READ) continue;
            if (p->raddr + p->len <= e->len) sge_copy(e, p->raddr, (uint8_t *)(p + 1), p->len, 1);
            if (p->flags & PKT_LAST) e->read_done = 1;
        }
        emu_ring_pop(&qp->seg->resp, p);
        n++;
    }
    return n;
}

static int requester_complete(struct emu_qp *qp, uint64_t now, int *pending)
{
    uint64_t acked = atomic_load(&qp->seg->acked_msn);
    /* ZINC_IBEMU_ACK_DELAY_MS: an acknowledgement takes effect that long after it came (a slow
     * way back), so that the responder can be gone before the requester's completion. */
    uint64_t delay = emu_config()->ack_delay_ns;
    if (delay) {
        if (acked > qp->ack_seen) { /* a newer one restarts the wait: "at least" the delay */
            qp->ack_seen = acked;
            qp->ack_seen_ns = now;
        }
        if (now - qp->ack_seen_ns >= delay)
            qp->ack_eff = qp->ack_seen;
        else
            *pending = 1;
        acked = qp->ack_eff;
    }
    uint64_t nak = atomic_load(&qp->seg->nak_msn);
    int n = 0;
    while (qp->sq_done < qp->sq_tx && qp->qp.state != IBV_QPS_ERR) {
        struct emu_swqe *e = &qp->sq[qp->sq_done % qp->sq_cap];
        if (e->loc_err || (nak && nak == e->msn)) {
            int st = e->loc_err ? IBV_WC_LOC_PROT_ERR : (int)atomic_load(&qp->seg->nak_status);
            uint32_t vendor = e->loc_err ? 0 : atomic_load(&qp->seg->nak_vendor);
            emu_complete_send(qp, e, st, vendor);
            emu_qp_to_error(qp);
            return n + 1;
        }
        if (e->msn > acked || (e->opcode == IBV_WR_RDMA_READ && !e->read_done)) break;
        emu_complete_send(qp, e, IBV_WC_SUCCESS, 0);
        qp->unreach_since = 0;
        n++;
    }
    return n;
}

/* Outstanding work and a peer that does not answer: after the retry timeout the oldest WR
 * fails with IBV_WC_RETRY_EXC_ERR and the QP goes to error. */
static void requester_timeout(struct emu_qp *qp, uint64_t now, int reachable, int *pending)
{
    if (qp->sq_done == qp->sq_post) {
        qp->unreach_since = 0;
        return;
    }
    *pending = 1;
    if (reachable) {
        qp->unreach_since = 0;
        return;
    }
    if (!qp->unreach_since) qp->unreach_since = now;
    if (now - qp->unreach_since < emu_retry_timeout_ns(&qp->attr)) return;
    emu_complete_send(qp, &qp->sq[qp->sq_done % qp->sq_cap], IBV_WC_RETRY_EXC_ERR, 0x81);
    emu_qp_to_error(qp);
}

/* ---------------------------------------------------------------------------------------
 * Responder
 * ------------------------------------------------------------------------------------- */
static void nak(struct emu_qp *qp, struct emu_qp_seg *peer, uint64_t msn, int status)
{
    atomic_store(&peer->nak_status, (uint32_t)status);
    atomic_store(&peer->nak_vendor, status == IBV_WC_REM_ACCESS_ERR ? 0x88 : 0x80);
    atomic_store(&peer->nak_msn, msn);
    emu_ring_discard(&qp->seg->req); /* the rest of the requester's stream is void */
    emu_nic_kick(peer->nic_slot);
}

static void ack(struct emu_qp_seg *peer, uint64_t msn)
{
    atomic_store(&peer->acked_msn, msn);
    emu_nic_kick(peer->nic_slot);
}

/* The registration an inbound request addresses, checked for access and bounds. */
static struct emu_mr *rx_check(struct emu_qp *qp, const struct emu_pkt *p, int access)
{
    if (!(qp->attr.qp_access_flags & access)) return NULL;
    struct emu_mr *m = emu_mr_find(qp->ctx, p->rkey);
    if (!m || !(m->access & access) || m->mr.pd != qp->qp.pd) return NULL;
    if (p->raddr < m->iova || p->raddr + p->total > m->iova + m->len ||
        p->raddr + p->total < p->raddr)
        return NULL;
    return m;
}

/* A protection error at the responder: the requester gets IBV_WC_REM_ACCESS_ERR, and the
 * responder's QP goes to error with IBV_EVENT_QP_ACCESS_ERR, as on hardware. */
static void rx_access_error(struct emu_qp *qp, struct emu_qp_seg *peer, const struct emu_pkt *p)
{
    uint64_t msn = p->msn;
    if (emu_config()->debug)
        emu_log("QP %#x: remote access error: %s of %llu bytes at %#llx with rkey %#x",
                qp->qp.qp_num, p->type == PKT_READ_REQ ? "read" : "write",
                (unsigned long long)p->total, (unsigned long long)p->raddr, p->rkey);
    nak(qp, peer, msn, IBV_WC_REM_ACCESS_ERR);
    emu_qp_to_error(qp);
    emu_async_event(qp->ctx, IBV_EVENT_QP_ACCESS_ERR, &qp->qp, 0);
}

/* Serve a read from its current offset. Returns 1 when all of it is in the peer's ring. */
static int rx_read(struct emu_qp *qp, struct emu_qp_seg *peer, const struct emu_pkt *p)
{
    struct emu_ring *r = &peer->resp;
    do {
        uint64_t n = p->total - qp->rx_read_off, head;
        if (n > chunk_bytes(r)) n = chunk_bytes(r);
        struct emu_pkt *o = emu_ring_reserve(peer, r, (uint32_t)n, &head);
        if (!o) return 0;
        *o = (struct emu_pkt){ .type = PKT_READ_RESP,
                               .len = (uint32_t)n,
                               .msn = p->msn,
                               .raddr = qp->rx_read_off,
                               .total = p->total };
        o->flags = qp->rx_read_off + n == p->total ? PKT_LAST : 0;
        if (n)
            emu_copy(o + 1, qp->rx_mr->host + (p->raddr - qp->rx_mr->iova) + qp->rx_read_off, n,
                     qp->rx_mr->gpu);
        emu_ring_publish(r, head);
        qp->rx_read_off += n;
    } while (qp->rx_read_off < p->total);
    return 1;
}

/* Admit the first packet of a message: protection checks, and a posted receive for an
 * immediate (else RNR: the requester retries until its rnr_retry runs out). */
static int rx_admit(struct emu_qp *qp, struct emu_qp_seg *peer, const struct emu_pkt *p,
                    uint64_t now, int *pending)
{
    int access = p->type == PKT_READ_REQ ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
    qp->rx_mr = p->total ? rx_check(qp, p, access) : NULL;
    if (p->total && !qp->rx_mr) {
        rx_access_error(qp, peer, p);
        return 0;
    }
    if ((p->flags & PKT_IMM) && qp->rq_done == qp->rq_post) {
        *pending = 1;
        if (!qp->rx_rnr_since) qp->rx_rnr_since = now;
        uint64_t limit = emu_rnr_timeout_ns(qp->attr.min_rnr_timer, atomic_load(&peer->rnr_retry));
        if (now - qp->rx_rnr_since >= limit) {
            qp->rx_rnr_since = 0;
            nak(qp, peer, p->msn, IBV_WC_RNR_RETRY_EXC_ERR);
        }
        return 0;
    }
    qp->rx_rnr_since = 0;
    return 1;
}

static int responder(struct emu_qp *qp, uint64_t now, int *pending)
{
    int n = 0;
    struct emu_pkt *p;
    while (qp->qp.state != IBV_QPS_ERR && (p = emu_ring_peek(qp->seg, &qp->seg->req)) != NULL) {
        struct emu_qp_seg *peer = peer_map(qp);
        if (!peer) {
            *pending = 1;
            break;
        }
        if ((p->flags & PKT_FIRST) && !qp->rx_read_off && !rx_admit(qp, peer, p, now, pending))
            break;
        if (p->type == PKT_READ_REQ) {
            if (!rx_read(qp, peer, p)) {
                *pending = 1;
                emu_nic_kick(peer->nic_slot);
                break;
            }
            qp->rx_read_off = 0;
            ack(peer, p->msn);
        } else if (p->type == PKT_WRITE) {
            if (p->len)
                emu_copy(qp->rx_mr->host + (p->raddr - qp->rx_mr->iova), p + 1, p->len,
                         qp->rx_mr->gpu);
            if (p->flags & PKT_LAST) {
                if (p->flags & PKT_IMM) emu_complete_recv(qp, p->total, p->imm);
                ack(peer, p->msn);
            }
        }
        emu_ring_pop(&qp->seg->req, p);
        n++;
    }
    return n;
}

/* ---------------------------------------------------------------------------------------
 * One pass over a QP, and the thread
 * ------------------------------------------------------------------------------------- */
int emu_qp_progress(struct emu_qp *qp, uint64_t now, int *pending)
{
    int n = 0;
    pthread_mutex_lock(&qp->lock);
    if (qp->qp.state == IBV_QPS_ERR) {
        emu_qp_to_error(qp); /* flushes what was posted since */
        emu_ring_discard(&qp->seg->req);
        emu_ring_discard(&qp->seg->resp);
    } else if (qp->qp.state >= IBV_QPS_RTR) {
        n += responder(qp, now, pending);
        if (qp->qp.state >= IBV_QPS_RTS && qp->qp.state != IBV_QPS_ERR) {
            int reachable = peer_reachable(qp, now);
            if (reachable) n += requester_tx(qp, qp->peer);
            n += requester_rx(qp);
            n += requester_complete(qp, now, pending);
            if (qp->qp.state != IBV_QPS_ERR) requester_timeout(qp, now, reachable, pending);
        }
    }
    if (qp->fault && qp->qp.state != IBV_QPS_ERR) {
        int fatal = qp->fault == 2;
        emu_qp_to_error(qp);
        if (fatal) emu_async_event(qp->ctx, IBV_EVENT_QP_FATAL, &qp->qp, 0);
    }
    qp->fault = 0;
    pthread_mutex_unlock(&qp->lock);
    return n;
}

void *emu_nic_main(void *arg)
{
    struct emu_ctx *c = arg;
    struct emu_fabric *f = emu_fabric();
    while (!atomic_load(&c->stop)) {
        uint32_t seq = atomic_load(&f->nics[c->nic_slot].doorbell);
        int pending = 0, n = 0;
        uint64_t now = emu_now_ns();
        pthread_mutex_lock(&c->lock);
        for (struct emu_qp *qp = c->qps; qp; qp = qp->next) n += emu_qp_progress(qp, now, &pending);
        pthread_mutex_unlock(&c->lock);
        if (atomic_exchange(&c->ports_down, 0)) emu_ports_down();
        if (n == 0) emu_nic_sleep(c->nic_slot, seq, pending ? 1000000u : 100000000u);
    }
    return NULL;
}
