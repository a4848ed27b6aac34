/*
 * ibemu: completion queues, queue pairs (create, modify with the IB state machine, query,
 * destroy), the posting calls behind ibv_post_send / ibv_post_recv and ibv_poll_cq, and the
 * completion fault injection.
 */
#include "emu.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------
 * Completion queues
 * ------------------------------------------------------------------------------------- */
static int emu_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
    return EOPNOTSUPP; /* completion channels are not modelled */
}

EMU_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
                                        struct ibv_comp_channel *channel, int comp_vector)
{
    if (cqe < 1 || cqe > EMU_MAX_CQE || channel || comp_vector != 0) {
        errno = channel ? EOPNOTSUPP : EINVAL;
        return NULL;
    }
    struct emu_cq *c = calloc(1, sizeof(*c));
    if (c) c->wc = calloc((size_t)cqe, sizeof(*c->wc));
    if (!c || !c->wc) {
        free(c);
        errno = ENOMEM;
        return NULL;
    }
    c->cq.context = ctx;
    c->cq.cq_context = cq_context;
    c->cq.cqe = cqe; /* exact, so that tests can overflow it deterministically */
    pthread_mutex_init(&c->cq.mutex, NULL);
    pthread_cond_init(&c->cq.cond, NULL);
    pthread_mutex_init(&c->lock, NULL);
    c->cap = cqe;
    ctx->ops.req_notify_cq = emu_req_notify_cq;
    return &c->cq;
}

EMU_EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
    struct emu_cq *c = (struct emu_cq *)cq;
    if (atomic_load(&c->refs) != 0) return EBUSY;
    free(c->wc);
    free(c);
    return 0;
}

/* Completion fault injection counts every completion this process generates, from 1. */
static _Atomic long wc_counter;

void emu_cq_push(struct emu_qp *qp, struct emu_cq *cq, struct ibv_wc *wc)
{
    const struct emu_fault *f = &emu_config()->fault;
    long n = atomic_fetch_add(&wc_counter, 1) + 1;
    if (f->wc_n == n) {
        wc->status = (enum ibv_wc_status)f->wc_status;
        wc->vendor_err = f->wc_vendor;
        if (wc->status != IBV_WC_SUCCESS) qp->fault = 1;
        emu_log("fault injection: completion %ld of QP %#x gets status %s", n, qp->qp.qp_num,
                ibv_wc_status_str(wc->status));
    }
    if (f->qpfatal_n == n) qp->fault = 2;
    if (f->portdown_n == n) qp->ctx->ports_down = 1;
    if (wc->status != IBV_WC_SUCCESS) wc->opcode = 0; /* undefined for errors; be strict */
    pthread_mutex_lock(&cq->lock);
    if (cq->count == cq->cap) {
        /* Hardware cannot write the CQE: the CQ is in error and the consumer learns it from
         * an asynchronous IBV_EVENT_CQ_ERR. The completion is lost. */
        int first = !cq->overflowed;
        cq->overflowed = 1;
        pthread_mutex_unlock(&cq->lock);
        if (first) emu_async_event(qp->ctx, IBV_EVENT_CQ_ERR, &cq->cq, 0);
        return;
    }
    cq->wc[(cq->head + cq->count) % cq->cap] = *wc;
    cq->count++;
    pthread_mutex_unlock(&cq->lock);
}

int emu_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
    struct emu_cq *cq = (struct emu_cq *)ibcq;
    pthread_mutex_lock(&cq->lock);
    int k = 0;
    for (; k < n && cq->count > 0; k++) {
        wc[k] = cq->wc[cq->head];
        cq->head = (cq->head + 1) % cq->cap;
        cq->count--;
    }
    pthread_mutex_unlock(&cq->lock);
    return k;
}

static void wc_fill(struct ibv_wc *wc, struct emu_qp *qp, uint64_t wr_id, int status,
                    enum ibv_wc_opcode op)
{
    memset(wc, 0, sizeof(*wc));
    wc->wr_id = wr_id;
    wc->status = (enum ibv_wc_status)status;
    wc->opcode = op;
    wc->qp_num = qp->qp.qp_num;
}

static enum ibv_wc_opcode send_wc_opcode(enum ibv_wr_opcode op)
{
    return op == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE;
}

/* An injected error completion moves the QP to error at once, as a real one does. */
static void fault_check(struct emu_qp *qp)
{
    if (qp->fault != 1) return;
    qp->fault = 0;
    emu_qp_to_error(qp);
}

/* Called with qp->lock held, for the WR at sq_done. Errors always complete, signaled or not. */
void emu_complete_send(struct emu_qp *qp, struct emu_swqe *e, int status, uint32_t vendor)
{
    qp->sq_done++;
    free(e->inl);
    e->inl = NULL;
    if (e->signaled || status != IBV_WC_SUCCESS) {
        struct ibv_wc wc;
        wc_fill(&wc, qp, e->wr_id, status, send_wc_opcode(e->opcode));
        wc.vendor_err = vendor;
        if (status == IBV_WC_SUCCESS && e->opcode == IBV_WR_RDMA_READ)
            wc.byte_len = (uint32_t)e->len;
        emu_cq_push(qp, (struct emu_cq *)qp->qp.send_cq, &wc);
    }
    fault_check(qp);
}

/* A write with immediate consumed the receive at rq_done. Called with qp->lock held. */
void emu_complete_recv(struct emu_qp *qp, uint64_t len, uint32_t imm)
{
    struct ibv_wc wc;
    wc_fill(&wc, qp, qp->rq[qp->rq_done % qp->rq_cap].wr_id, IBV_WC_SUCCESS,
            IBV_WC_RECV_RDMA_WITH_IMM);
    wc.byte_len = (uint32_t)len;
    wc.imm_data = imm;
    wc.wc_flags = IBV_WC_WITH_IMM;
    wc.src_qp = atomic_load(&qp->seg->dest_qpn);
    qp->rq_done++;
    emu_cq_push(qp, (struct emu_cq *)qp->qp.recv_cq, &wc);
    fault_check(qp);
}

/* Error state: every outstanding work request completes with IBV_WC_WR_FLUSH_ERR, as do the
 * ones posted later. Called with qp->lock held. */
void emu_qp_to_error(struct emu_qp *qp)
{
    if (qp->flushing) return; /* an injected error among the flushed completions */
    qp->flushing = 1;
    if (qp->qp.state != IBV_QPS_ERR) {
        qp->qp.state = IBV_QPS_ERR;
        qp->attr.qp_state = IBV_QPS_ERR;
        atomic_store(&qp->seg->state, IBV_QPS_ERR);
    }
    while (qp->sq_done < qp->sq_post)
        emu_complete_send(qp, &qp->sq[qp->sq_done % qp->sq_cap], IBV_WC_WR_FLUSH_ERR, 0);
    qp->sq_tx = qp->sq_done;
    while (qp->rq_done < qp->rq_post) {
        struct ibv_wc wc;
        wc_fill(&wc, qp, qp->rq[qp->rq_done % qp->rq_cap].wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV);
        qp->rq_done++;
        emu_cq_push(qp, (struct emu_cq *)qp->qp.recv_cq, &wc);
    }
    qp->flushing = 0;
}

/* ---------------------------------------------------------------------------------------
 * Queue pairs
 * ------------------------------------------------------------------------------------- */
static int qp_check_init(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
    if (a->qp_type != IBV_QPT_RC || a->srq) return EOPNOTSUPP; /* only RC, no SRQ */
    if (!a->send_cq || !a->recv_cq) return EINVAL;
    if (a->send_cq->context != pd->context || a->recv_cq->context != pd->context) return EINVAL;
    struct ibv_qp_cap *c = &a->cap;
    if (c->max_send_wr < 1 || c->max_send_wr > EMU_MAX_QP_WR || c->max_recv_wr > EMU_MAX_QP_WR ||
        c->max_send_sge > EMU_MAX_SGE || c->max_recv_sge > EMU_MAX_SGE ||
        c->max_inline_data > EMU_MAX_INLINE)
        return EINVAL;
    return 0;
}

/* The QP's segment: created exclusively, sized for two rings, write-locked for the owner's
 * lifetime (the peer's liveness check). */
static int qp_seg_create(struct emu_qp *qp)
{
    char name[128];
    emu_qp_seg_name(qp->qp.qp_num, name, sizeof(name));
    uint64_t ring = emu_config()->ring_bytes;
    size_t head = (sizeof(struct emu_qp_seg) + 4095) & ~(size_t)4095;
    qp->seg_len = head + 2 * ring;
    shm_unlink(name); /* a leftover of a dead owner with a reused slot generation */
    qp->fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (qp->fd < 0) return errno;
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
    if (ftruncate(qp->fd, (off_t)qp->seg_len) != 0 || fcntl(qp->fd, F_SETLK, &fl) != 0)
        goto err_unlink;
    void *p = mmap(NULL, qp->seg_len, PROT_READ | PROT_WRITE, MAP_SHARED, qp->fd, 0);
    if (p == MAP_FAILED) goto err_unlink;
    qp->seg = p;
    struct emu_qp_seg *s = p;
    s->qpn = qp->qp.qp_num;
    atomic_store(&s->pid, getpid());
    s->nic_slot = (uint32_t)qp->ctx->nic_slot;
    atomic_store(&s->state, IBV_QPS_RESET);
    s->req.size = s->resp.size = ring;
    s->req.offset = head;
    s->resp.offset = head + ring;
    s->magic = EMU_SEG_MAGIC;
    return 0;

err_unlink : {
    int e = errno;
    close(qp->fd);
    shm_unlink(name);
    return e;
}
}

EMU_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
    int err = qp_check_init(pd, a);
    struct emu_qp *qp = err ? NULL : calloc(1, sizeof(*qp));
    if (!qp) {
        errno = err ? err : ENOMEM;
        return NULL;
    }
    qp->ctx = (struct emu_ctx *)pd->context;
    qp->sq_cap = a->cap.max_send_wr;
    qp->rq_cap = a->cap.max_recv_wr ? a->cap.max_recv_wr : 1;
    qp->sq = calloc(qp->sq_cap, sizeof(*qp->sq));
    qp->rq = calloc(qp->rq_cap, sizeof(*qp->rq));
    if (!qp->sq || !qp->rq) {
        err = ENOMEM;
        goto err_free;
    }
    if (emu_qp_slot_alloc(&qp->qp.qp_num) != 0) {
        err = errno;
        goto err_free;
    }
    if ((err = qp_seg_create(qp)) != 0) goto err_free_slot;
    qp->cap = a->cap;
    qp->sq_sig_all = a->sq_sig_all;
    qp->peer_fd = -1;
    qp->next_msn = 1;
    qp->qp.context = pd->context;
    qp->qp.qp_context = a->qp_context;
    qp->qp.pd = pd;
    qp->qp.send_cq = a->send_cq;
    qp->qp.recv_cq = a->recv_cq;
    qp->qp.handle = qp->qp.qp_num;
    qp->qp.state = IBV_QPS_RESET;
    qp->qp.qp_type = IBV_QPT_RC;
    pthread_mutex_init(&qp->qp.mutex, NULL);
    pthread_cond_init(&qp->qp.cond, NULL);
    pthread_mutex_init(&qp->lock, NULL);
    atomic_fetch_add(&((struct emu_cq *)a->send_cq)->refs, 1);
    atomic_fetch_add(&((struct emu_cq *)a->recv_cq)->refs, 1);
    atomic_fetch_add(&((struct emu_pd *)pd)->refs, 1);
    pthread_mutex_lock(&qp->ctx->lock);
    qp->next = qp->ctx->qps;
    qp->ctx->qps = qp;
    pthread_mutex_unlock(&qp->ctx->lock);
    return &qp->qp;

err_free_slot:
    emu_qp_slot_free(qp->qp.qp_num);
err_free:
    free(qp->sq);
    free(qp->rq);
    free(qp);
    errno = err;
    return NULL;
}

static void qp_unmap_peer(struct emu_qp *qp)
{
    if (qp->peer) munmap(qp->peer, qp->peer_len);
    if (qp->peer_fd >= 0) close(qp->peer_fd);
    qp->peer = NULL;
    qp->peer_fd = -1;
}

EMU_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
    struct emu_qp *qp = (struct emu_qp *)ibqp;
    struct emu_ctx *c = qp->ctx;
    pthread_mutex_lock(&c->lock); /* waits out a NIC pass that may be using the QP */
    for (struct emu_qp **pp = &c->qps; *pp; pp = &(*pp)->next)
        if (*pp == qp) {
            *pp = qp->next;
            break;
        }
    pthread_mutex_unlock(&c->lock);
    atomic_store(&qp->seg->state, EMU_QPS_DESTROYED);
    char name[128];
    emu_qp_seg_name(qp->qp.qp_num, name, sizeof(name));
    shm_unlink(name);
    munmap(qp->seg, qp->seg_len);
    close(qp->fd);
    qp_unmap_peer(qp);
    emu_qp_slot_free(qp->qp.qp_num);
    atomic_fetch_sub(&((struct emu_cq *)qp->qp.send_cq)->refs, 1);
    atomic_fetch_sub(&((struct emu_cq *)qp->qp.recv_cq)->refs, 1);
    atomic_fetch_sub(&((struct emu_pd *)qp->qp.pd)->refs, 1);
    for (uint64_t i = qp->sq_done; i < qp->sq_post; i++) free(qp->sq[i % qp->sq_cap].inl);
    free(qp->sq);
    free(qp->rq);
    free(qp);
    return 0;
}

/* The attributes each transition requires and the ones it may carry (IB spec, table 91;
 * reduced to the attributes an RC QP has). */
struct transition {
    enum ibv_qp_state from, to;
    int required, optional;
};

static const struct transition transitions[] = {
    { IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0 },
    { IBV_QPS_INIT, IBV_QPS_INIT, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS },
    { IBV_QPS_INIT, IBV_QPS_RTR,
      IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
          IBV_QP_MIN_RNR_TIMER,
      IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH },
    { IBV_QPS_RTR, IBV_QPS_RTS,
      IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
          IBV_QP_MAX_QP_RD_ATOMIC,
      IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_ALT_PATH |
          IBV_QP_PATH_MIG_STATE },
    { IBV_QPS_RTS, IBV_QPS_RTS, 0,
      IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_ALT_PATH |
          IBV_QP_PATH_MIG_STATE },
};

/* Checks of the values a transition carries: port, address vector, limits. */
static int qp_check_values(struct emu_qp *qp, const struct ibv_qp_attr *a, int mask)
{
    const struct emu_devcfg *d = qp->ctx->dev->cfg;
    if ((mask & IBV_QP_PORT) && (a->port_num < 1 || a->port_num > d->nports)) return EINVAL;
    if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0) return EINVAL;
    if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > EMU_MAX_RD_ATOMIC)
        return EINVAL;
    if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > EMU_MAX_RD_ATOMIC) return EINVAL;
    if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31) return EINVAL;
    if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7) return EINVAL;
    if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7) return EINVAL;
    if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31) return EINVAL;
    if ((mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
        return EINVAL;
    if (mask & IBV_QP_AV) {
        int port = (mask & IBV_QP_PORT) ? a->port_num : qp->attr.port_num;
        const struct ibv_ah_attr *ah = &a->ah_attr;
        /* RoCE has no LIDs: the address is the GID, so a GRH is mandatory. */
        if (d->link_layer == IBV_LINK_LAYER_ETHERNET && !ah->is_global) return EINVAL;
        if (d->link_layer == IBV_LINK_LAYER_INFINIBAND && !ah->is_global && ah->dlid == 0)
            return EINVAL;
        if (ah->is_global && ah->grh.sgid_index >= emu_port_gid_count(d->link_layer)) return EINVAL;
        if (ah->port_num && ah->port_num != port) return EINVAL;
    }
    return 0;
}

static void qp_reset(struct emu_qp *qp)
{
    for (uint64_t i = qp->sq_done; i < qp->sq_post; i++) free(qp->sq[i % qp->sq_cap].inl);
    qp->sq_post = qp->sq_tx = qp->sq_done = 0;
    qp->rq_post = qp->rq_done = 0;
    qp->next_msn = 1;
    qp->unreach_since = 0;
    qp->ack_seen = qp->ack_seen_ns = qp->ack_eff = 0;
    qp->rx_mr = NULL;
    qp->rx_rnr_since = 0;
    qp->rx_read_off = 0;
    atomic_store(&qp->seg->acked_msn, 0);
    atomic_store(&qp->seg->nak_msn, 0);
    atomic_store(&qp->seg->dest_qpn, 0);
    emu_ring_discard(&qp->seg->req);
    emu_ring_discard(&qp->seg->resp);
    qp_unmap_peer(qp);
}

static void qp_apply(struct emu_qp *qp, const struct ibv_qp_attr *a, int mask)
{
    struct ibv_qp_attr *q = &qp->attr;
    if (mask & IBV_QP_PKEY_INDEX) q->pkey_index = a->pkey_index;
    if (mask & IBV_QP_PORT) q->port_num = a->port_num;
    if (mask & IBV_QP_ACCESS_FLAGS) q->qp_access_flags = a->qp_access_flags;
    if (mask & IBV_QP_AV) q->ah_attr = a->ah_attr;
    if (mask & IBV_QP_PATH_MTU) q->path_mtu = a->path_mtu;
    if (mask & IBV_QP_DEST_QPN) q->dest_qp_num = a->dest_qp_num;
    if (mask & IBV_QP_RQ_PSN) q->rq_psn = a->rq_psn;
    if (mask & IBV_QP_SQ_PSN) q->sq_psn = a->sq_psn;
    if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) q->max_dest_rd_atomic = a->max_dest_rd_atomic;
    if (mask & IBV_QP_MAX_QP_RD_ATOMIC) q->max_rd_atomic = a->max_rd_atomic;
    if (mask & IBV_QP_MIN_RNR_TIMER) q->min_rnr_timer = a->min_rnr_timer;
    if (mask & IBV_QP_TIMEOUT) q->timeout = a->timeout;
    if (mask & IBV_QP_RETRY_CNT) q->retry_cnt = a->retry_cnt;
    if (mask & IBV_QP_RNR_RETRY) q->rnr_retry = a->rnr_retry;
    struct emu_qp_seg *s = qp->seg;
    if (mask & IBV_QP_PORT) {
        atomic_store(&s->port_slot, qp->ctx->port_slot[a->port_num]);
        atomic_store(&s->lid, qp->ctx->port_slot[a->port_num] + 1);
        atomic_store(&s->link_layer, (uint32_t)qp->ctx->dev->cfg->link_layer);
    }
    if (mask & IBV_QP_DEST_QPN) atomic_store(&s->dest_qpn, a->dest_qp_num);
    if (mask & IBV_QP_RNR_RETRY) atomic_store(&s->rnr_retry, a->rnr_retry);
}

EMU_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask)
{
    struct emu_qp *qp = (struct emu_qp *)ibqp;
    pthread_mutex_lock(&qp->lock);
    enum ibv_qp_state cur = qp->qp.state;
    enum ibv_qp_state to = (mask & IBV_QP_STATE) ? a->qp_state : cur;
    int err = 0;
    if ((mask & IBV_QP_CUR_STATE) && a->cur_qp_state != cur)
        err = EINVAL;
    else if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) {
        if (mask & ~(IBV_QP_STATE | IBV_QP_CUR_STATE)) err = EINVAL;
    } else {
        const struct transition *t = NULL;
        for (size_t i = 0; i < sizeof(transitions) / sizeof(transitions[0]); i++)
            if (transitions[i].from == cur && transitions[i].to == to) t = &transitions[i];
        int extra = mask & ~(IBV_QP_STATE | (t ? t->required | t->optional : 0));
        if (!t || (mask & t->required) != t->required || extra)
            err = EINVAL;
        else
            err = qp_check_values(qp, a, mask);
    }
    if (!err) {
        if (to == IBV_QPS_RESET)
            qp_reset(qp);
        else
            qp_apply(qp, a, mask);
        if (to == IBV_QPS_ERR) emu_qp_to_error(qp);
        qp->qp.state = to;
        qp->attr.qp_state = to;
        atomic_store(&qp->seg->state, to);
    }
    pthread_mutex_unlock(&qp->lock);
    if (!err) emu_nic_kick((uint32_t)qp->ctx->nic_slot);
    return err;
}

EMU_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask,
                            struct ibv_qp_init_attr *init)
{
    struct emu_qp *qp = (struct emu_qp *)ibqp;
    pthread_mutex_lock(&qp->lock);
    *a = qp->attr;
    a->qp_state = a->cur_qp_state = qp->qp.state;
    a->cap = qp->cap;
    memset(init, 0, sizeof(*init));
    init->qp_context = qp->qp.qp_context;
    init->send_cq = qp->qp.send_cq;
    init->recv_cq = qp->qp.recv_cq;
    init->cap = qp->cap;
    init->qp_type = IBV_QPT_RC;
    init->sq_sig_all = qp->sq_sig_all;
    pthread_mutex_unlock(&qp->lock);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Posting
 * ------------------------------------------------------------------------------------- */
static int swqe_fill(struct emu_qp *qp, struct emu_swqe *e, const struct ibv_send_wr *wr)
{
    if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM &&
        wr->opcode != IBV_WR_RDMA_READ)
        return EOPNOTSUPP; /* sends and atomics are not modelled */
    if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge) return EINVAL;
    uint64_t len = 0;
    for (int i = 0; i < wr->num_sge; i++) len += wr->sg_list[i].length;
    int inl = (wr->send_flags & IBV_SEND_INLINE) != 0;
    if (inl && (wr->opcode == IBV_WR_RDMA_READ || len > qp->cap.max_inline_data)) return EINVAL;
    if (len > EMU_MAX_MSG_SZ) return EINVAL;
    memset(e, 0, sizeof(*e));
    e->wr_id = wr->wr_id;
    e->opcode = wr->opcode;
    e->signaled = qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
    e->num_sge = wr->num_sge;
    if (wr->num_sge > 0) memcpy(e->sge, wr->sg_list, sizeof(struct ibv_sge) * (size_t)wr->num_sge);
    e->raddr = wr->wr.rdma.remote_addr;
    e->rkey = wr->wr.rdma.rkey;
    e->imm = wr->imm_data;
    e->len = len;
    if (inl && len) { /* inline data is copied at post time, the buffer is free on return */
        e->inl = malloc(len);
        if (!e->inl) return ENOMEM;
        uint64_t off = 0;
        for (int i = 0; i < wr->num_sge; i++) {
            memcpy(e->inl + off, (void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
            off += wr->sg_list[i].length;
        }
    }
    return 0;
}

int emu_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    struct emu_qp *qp = (struct emu_qp *)ibqp;
    int err = 0;
    pthread_mutex_lock(&qp->lock);
    /* Like mlx5: sending needs RTS (or SQD/ERR, where requests are queued and flushed). */
    if (qp->qp.state < IBV_QPS_RTS) err = EINVAL;
    for (; wr && !err; wr = wr->next) {
        if (qp->sq_post - qp->sq_done >= qp->sq_cap) {
            err = ENOMEM;
            break;
        }
        struct emu_swqe *e = &qp->sq[qp->sq_post % qp->sq_cap];
        if ((err = swqe_fill(qp, e, wr)) != 0) break;
        e->msn = qp->next_msn++;
        qp->sq_post++;
    }
    if (err) *bad = wr;
    pthread_mutex_unlock(&qp->lock);
    emu_nic_kick((uint32_t)qp->ctx->nic_slot);
    return err;
}

int emu_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    struct emu_qp *qp = (struct emu_qp *)ibqp;
    int err = 0;
    pthread_mutex_lock(&qp->lock);
    if (qp->qp.state == IBV_QPS_RESET) err = EINVAL;
    for (; wr && !err; wr = wr->next) {
        if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_recv_sge)
            err = EINVAL;
        else if (qp->rq_post - qp->rq_done >= qp->rq_cap || qp->cap.max_recv_wr == 0)
            err = ENOMEM;
        if (err) break;
        qp->rq[qp->rq_post % qp->rq_cap].wr_id = wr->wr_id;
        qp->rq_post++;
    }
    if (err) *bad = wr;
    pthread_mutex_unlock(&qp->lock);
    emu_nic_kick((uint32_t)qp->ctx->nic_slot);
    return err;
}
