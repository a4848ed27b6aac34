/*
 * The net transport's connections: setup through the net's non-blocking connect and a HELLO,
 * then messages cut into chunks through each direction's staging slots (net_internal.h).
 */
#include "net_internal.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/param.h"

#include <stdio.h>
#include <string.h>

static void peer_str(const struct nt_conn *c, char *buf, size_t len)
{
    zn_peer_str(&c->st->ctx, c->hdr.peer, buf, len);
}

static inline char *slot_buf(const struct nt_conn *c, const struct nt_dir *d, int i);

/* Whether the chunks that have arrived (in order, none consumed) include the peer's abort
 * chunk: a peer that aborts and exits breaks our sends before any receive would read it. */
static int peer_aborted(struct nt_conn *c, char *why, size_t len)
{
    struct nt_dir *d = &c->r;
    for (int k = 0; c->recv_comm && d->buf && k < d->n; k++) {
        int i = (d->head + k) % c->st->nslots, done = 0, size = 0;
        if (d->size[i] < 0) {
            if (nt_ops(c->st)->test(d->req[i], &done, &size) != ncclSuccess || !done) return 0;
            d->size[i] = size;
        }
        uint32_t kind;
        memcpy(&kind, slot_buf(c, d, i), 4);
        if (kind != NT_ABORT) continue;
        int n = d->size[i] - NT_HDR_BYTES;
        snprintf(why, len, "%.*s", n < 0 ? 0 : n > 512 ? 512 : n, slot_buf(c, d, i) + NT_HDR_BYTES);
        return 1;
    }
    return 0;
}

/* The net failed: its message names the address only; add rank, host and channel (or the
 * reason the peer gave when it aborted). */
static ncclResult_t net_failed(struct nt_conn *c, ncclResult_t r, const char *during)
{
    char who[160], cause[ZN_ERRMSG_MAX], why[600];
    peer_str(c, who, sizeof(who));
    snprintf(cause, sizeof(cause), "%s", zn_last_error());
    if (peer_aborted(c, why, sizeof(why)))
        return zn_nt_fail(c, ncclRemoteError, "%s aborted: %s", who, why);
    return zn_nt_fail(c, r == ncclSuccess ? ncclRemoteError : r,
                      "net transport: connection to %s (%s channel, net %s) failed during %s: %s",
                      who, zn_nt_channel_name(c->hdr.channel), c->st->net->name, during, cause);
}

static inline char *slot_buf(const struct nt_conn *c, const struct nt_dir *d, int i)
{
    return d->buf + (size_t)i * (NT_HDR_BYTES + c->st->chunk);
}

static void put_hdr(char *p, uint32_t kind, uint32_t seq, uint64_t len)
{
    memcpy(p, &kind, 4);
    memcpy(p + 4, &seq, 4);
    memcpy(p + 8, &len, 8);
}

/* ------------------------------------------------------------------------------------------ */
/* Setup                                                                                      */
/* ------------------------------------------------------------------------------------------ */

ncclResult_t zn_nt_connect(void *state, int peer, int channel, struct zn_conn **out)
{
    struct nt_state *st = state;
    if (peer < 0 || peer >= st->ctx.nranks || peer == st->ctx.rank || channel < 0 ||
        channel >= ZN_NCHANNELS)
        return zn_error(ncclInternalError, ZN_NET,
                        "net transport: no connection to rank %d on channel %d", peer, channel);
    struct nt_conn *c;
    ZN_CHECK(zn_nt_conn_get(st, peer, channel, 1, &c));
    if (!c->connected) {
        c->connected = 1;
        c->deadline = zn_deadline_from_now();
    }
    *out = (struct zn_conn *)c;
    return ncclSuccess;
}

/* This side's send comm: connect, register the slots, send the HELLO. */
static ncclResult_t send_setup(struct nt_conn *c, int *progressed)
{
    struct nt_state *st = c->st;
    if (!c->send_comm) {
        ncclNetDeviceHandle_t *dev = NULL;
        ncclResult_t r = nt_ops(st)->connect(st->nctx, st->dev, c->handle, &c->send_comm, &dev);
        if (r != ncclSuccess) return net_failed(c, r, "connect");
        if (!c->send_comm) return ncclSuccess;
        *progressed = 1;
        r = zn_nt_dir_open(st, c->send_comm, &c->s);
        if (r != ncclSuccess) return net_failed(c, r, "registration of the send slots");
    }
    if (c->hello_sent) return ncclSuccess;
    if (!c->s.req[0]) {
        struct nt_hello h = { .magic = NT_HELLO_MAGIC,
                              .comm_hash = st->ctx.comm_hash,
                              .version = NT_HELLO_VERSION,
                              .rank = st->ctx.rank,
                              .to = c->hdr.peer,
                              .channel = c->hdr.channel };
        memcpy(c->s.buf, &h, sizeof(h));
        ncclResult_t r = nt_ops(st)->isend(c->send_comm, c->s.buf, sizeof(h), NT_TAG, c->s.mh, NULL,
                                           &c->s.req[0]);
        if (r != ncclSuccess) return net_failed(c, r, "the HELLO");
        if (!c->s.req[0]) return ncclSuccess;
    }
    int done = 0, size = 0;
    ncclResult_t r = nt_ops(st)->test(c->s.req[0], &done, &size);
    if (r != ncclSuccess) return net_failed(c, r, "the HELLO");
    if (!done) return ncclSuccess;
    *progressed = 1;
    c->s.req[0] = NULL;
    c->hello_sent = 1;
    return ncclSuccess;
}

static ncclResult_t setup_progress(struct nt_conn *c, int *progressed)
{
    ZN_CHECK(send_setup(c, progressed));
    if (nt_ready(c)) {
        zn_nt_setup_over(c);
        return ncclSuccess;
    }
    if (zn_now_ns() <= c->deadline) return ncclSuccess;
    char who[160];
    peer_str(c, who, sizeof(who));
    return zn_nt_fail(c, ncclRemoteError,
                      "net transport: connection to %s (%s channel, net %s) not set up within "
                      "ZINC_TIMEOUT=%lld s (%s)",
                      who, zn_nt_channel_name(c->hdr.channel), c->st->net->name,
                      (long long)zn_params()->timeout,
                      !c->send_comm    ? "our connect to its listener did not complete"
                      : !c->hello_sent ? "it did not take our HELLO"
                                       : "its connection to us never arrived");
}

/* ------------------------------------------------------------------------------------------ */
/* Posting                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static void enqueue(struct zn_req **head, struct zn_req **tail, struct zn_req *r)
{
    r->next = NULL;
    if (*tail)
        (*tail)->next = r;
    else
        *head = r;
    *tail = r;
}

ncclResult_t zn_nt_isend(struct zn_conn *conn, const void *buf, size_t len, struct zn_req *req)
{
    struct nt_conn *c = (struct nt_conn *)conn;
    if (c->err != ncclSuccess) return zn_nt_sticky(c);
    *req = (struct zn_req){ .buf = (void *)buf, .len = len, .is_send = 1 };
    enqueue(&c->sq_head, &c->sq_tail, req);
    if (!c->scur) {
        c->scur = req;
        c->soff = 0;
    }
    return ncclSuccess;
}

ncclResult_t zn_nt_irecv(struct zn_conn *conn, void *buf, size_t len, struct zn_req *req)
{
    struct nt_conn *c = (struct nt_conn *)conn;
    if (c->err != ncclSuccess) return zn_nt_sticky(c);
    *req = (struct zn_req){ .buf = buf, .len = len };
    enqueue(&c->rq_head, &c->rq_tail, req);
    return ncclSuccess;
}

/* ------------------------------------------------------------------------------------------ */
/* Sending: stage chunks into free slots, isend them, retire them in order                    */
/* ------------------------------------------------------------------------------------------ */

/* Copy the next chunk of scur into slot head + n (once: isend may refuse it for now). */
static void stage_chunk(struct nt_conn *c)
{
    struct nt_dir *d = &c->s;
    int i = (d->head + d->n) % c->st->nslots;
    struct zn_req *r = c->scur;
    size_t len = r->len - c->soff < c->st->chunk ? r->len - c->soff : c->st->chunk;
    char *p = slot_buf(c, d, i);
    put_hdr(p, NT_DATA, c->send_seq, r->len);
    if (len) memcpy(p + NT_HDR_BYTES, (const char *)r->buf + c->soff, len);
    d->size[i] = (int)(NT_HDR_BYTES + len);
    d->owner[i] = r;
    c->soff += len;
    d->last[i] = c->soff == r->len;
    if (d->last[i]) {
        c->send_seq++;
        c->scur = r->next;
        c->soff = 0;
    }
    d->staged = 1;
}

static ncclResult_t send_post(struct nt_conn *c, int *progressed)
{
    struct nt_state *st = c->st;
    struct nt_dir *d = &c->s;
    while (d->n < st->nslots && (d->staged || c->scur)) {
        if (!d->staged) stage_chunk(c);
        int i = (d->head + d->n) % st->nslots;
        ncclResult_t r = nt_ops(st)->isend(c->send_comm, slot_buf(c, d, i), (size_t)d->size[i],
                                           NT_TAG, d->mh, NULL, &d->req[i]);
        if (r != ncclSuccess) return net_failed(c, r, "a send");
        if (!d->req[i]) break; /* the net is full for now */
        d->staged = 0;
        d->n++;
        *progressed = 1;
    }
    return ncclSuccess;
}

static ncclResult_t send_retire(struct nt_conn *c, int *progressed)
{
    struct nt_state *st = c->st;
    struct nt_dir *d = &c->s;
    while (d->n > 0) {
        int i = d->head, done = 0, size = 0;
        ncclResult_t r = nt_ops(st)->test(d->req[i], &done, &size);
        if (r != ncclSuccess) return net_failed(c, r, "a send");
        if (!done) break;
        *progressed = 1;
        d->req[i] = NULL;
        struct zn_req *q = d->owner[i];
        q->done += (size_t)d->size[i] - NT_HDR_BYTES;
        if (d->last[i]) { /* requests retire in posting order: q is the queue's head */
            c->sq_head = q->next;
            if (!c->sq_head) c->sq_tail = NULL;
            q->next = NULL;
            q->state = ZN_REQ_DONE;
        }
        d->head = (d->head + 1) % st->nslots;
        d->n--;
    }
    return ncclSuccess;
}

/* ------------------------------------------------------------------------------------------ */
/* Receiving: an irecv on every free slot; chunks are consumed in order                      */
/* ------------------------------------------------------------------------------------------ */

static ncclResult_t recv_post(struct nt_conn *c, int *progressed)
{
    struct nt_state *st = c->st;
    struct nt_dir *d = &c->r;
    while (d->n < st->nslots) {
        int i = (d->head + d->n) % st->nslots;
        void *data = slot_buf(c, d, i);
        size_t sz = NT_HDR_BYTES + st->chunk;
        int tag = NT_TAG;
        ncclResult_t r =
            nt_ops(st)->irecv(c->recv_comm, 1, &data, &sz, &tag, &d->mh, NULL, &d->req[i]);
        if (r != ncclSuccess) return net_failed(c, r, "a receive");
        if (!d->req[i]) break;
        d->size[i] = -1;
        d->n++;
        *progressed = 1;
    }
    return ncclSuccess;
}

/* The chunk in slot i (size bytes) goes to rq_head: check it, copy it, retire the slot. */
static ncclResult_t recv_consume(struct nt_conn *c, int i, int size)
{
    struct nt_dir *d = &c->r;
    const char *p = slot_buf(c, d, i);
    uint32_t kind, seq;
    uint64_t len;
    memcpy(&kind, p, 4);
    memcpy(&seq, p + 4, 4);
    memcpy(&len, p + 8, 8);
    char who[160];
    peer_str(c, who, sizeof(who));
    if (kind == NT_ABORT) {
        int n = size - NT_HDR_BYTES;
        return zn_nt_fail(c, ncclRemoteError, "%s aborted: %.*s", who, n > 512 ? 512 : n,
                          p + NT_HDR_BYTES);
    }
    struct zn_req *q = c->rq_head;
    size_t want = q->len - c->roff < c->st->chunk ? q->len - c->roff : c->st->chunk;
    if (kind != NT_DATA || seq != c->recv_seq)
        return zn_nt_fail(c, ncclRemoteError,
                          "net transport: %s sent a chunk of kind %#x, message %u (expected "
                          "message %u): the stream is corrupt",
                          who, kind, seq, c->recv_seq);
    if (len != q->len)
        return zn_nt_fail(c, ncclInvalidUsage,
                          "net transport: %s sent a message of %llu bytes on the %s channel, "
                          "the receive was posted for %zu bytes",
                          who, (unsigned long long)len, zn_nt_channel_name(c->hdr.channel), q->len);
    if ((size_t)size != NT_HDR_BYTES + want)
        return zn_nt_fail(c, ncclRemoteError,
                          "net transport: %s sent a chunk of %d bytes, expected %zu", who, size,
                          NT_HDR_BYTES + want);
    if (want) memcpy((char *)q->buf + c->roff, p + NT_HDR_BYTES, want);
    c->roff += want;
    q->done = c->roff;
    if (c->roff == q->len) {
        c->rq_head = q->next;
        if (!c->rq_head) c->rq_tail = NULL;
        q->next = NULL;
        q->state = ZN_REQ_DONE;
        c->roff = 0;
        c->recv_seq++;
    }
    d->req[i] = NULL;
    d->head = (d->head + 1) % c->st->nslots;
    d->n--;
    return ncclSuccess;
}

/* Slots are only tested while a receive waits: a peer that closed after its last message
 * makes the receives posted past it fail, which is no error until something is expected. */
static ncclResult_t recv_progress(struct nt_conn *c, int *progressed)
{
    struct nt_dir *d = &c->r;
    ZN_CHECK(recv_post(c, progressed));
    while (c->rq_head && d->n > 0) {
        int i = d->head, done = d->size[i] >= 0, size = d->size[i];
        if (!done) {
            ncclResult_t r = nt_ops(c->st)->test(d->req[i], &done, &size);
            if (r != ncclSuccess) return net_failed(c, r, "a receive");
            if (!done) break;
        }
        *progressed = 1;
        ZN_CHECK(recv_consume(c, i, size));
        ZN_CHECK(recv_post(c, progressed));
    }
    return ncclSuccess;
}

/* progress -- the user thread; never blocks. */
ncclResult_t zn_nt_progress(struct zn_conn *conn, int *progressed)
{
    struct nt_conn *c = (struct nt_conn *)conn;
    struct nt_state *st = c->st;
    if (st->ctx.abort_flag && atomic_load_explicit(st->ctx.abort_flag, memory_order_relaxed)) {
        char who[160];
        peer_str(c, who, sizeof(who));
        return zn_error(ncclRemoteError, ZN_NET,
                        "net transport: aborted (connection to %s, %s channel)", who,
                        zn_nt_channel_name(c->hdr.channel));
    }
    if (c->err != ncclSuccess) return zn_nt_sticky(c);
    zn_nt_accept_poll(st, progressed);
    if (c->err != ncclSuccess) return zn_nt_sticky(c); /* its HELLO may have failed it */
    if (!nt_ready(c)) {
        ZN_CHECK(setup_progress(c, progressed));
        if (!nt_ready(c)) return ncclSuccess;
    }
    if (c->sq_head) {
        ZN_CHECK(send_post(c, progressed));
        ZN_CHECK(send_retire(c, progressed));
        ZN_CHECK(send_post(c, progressed));
    }
    return recv_progress(c, progressed);
}

/* Best effort and brief: an NT_ABORT chunk in a free slot, waited for at most 100 ms. */
void zn_nt_send_abort(struct nt_conn *c, const char *msg)
{
    struct nt_state *st = c->st;
    struct nt_dir *d = &c->s;
    if (c->err != ncclSuccess || !c->send_comm || !c->hello_sent || d->staged || d->n == st->nslots)
        return;
    int i = (d->head + d->n) % st->nslots;
    size_t n = strlen(msg);
    if (n > st->chunk) n = st->chunk;
    char *p = slot_buf(c, d, i);
    put_hdr(p, NT_ABORT, c->send_seq, n);
    memcpy(p + NT_HDR_BYTES, msg, n);
    /* A peer that is gone makes the net fail here; that must not replace this thread's last
     * error, which names the cause of the abort. */
    char cause[ZN_ERRMSG_MAX];
    snprintf(cause, sizeof(cause), "%s", zn_last_error());
    void *req = NULL;
    int64_t end = zn_now_ns() + 100 * 1000 * 1000;
    int done = 0, size = 0;
    ncclResult_t r = ncclSuccess;
    while (r == ncclSuccess && !req && zn_now_ns() < end)
        r = nt_ops(st)->isend(c->send_comm, p, NT_HDR_BYTES + n, NT_TAG, d->mh, NULL, &req);
    while (r == ncclSuccess && req && !done && zn_now_ns() < end)
        r = nt_ops(st)->test(req, &done, &size);
    zn_set_last_error(cause);
}
