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
        if (d->umh[i]) continue; /* a chunk in user memory */
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
    if (!c->rnext) c->rnext = req;
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
    d->pay[i] = (int)len;
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
        if (d->umh[i]) nt_ops(st)->deregMr(c->send_comm, d->umh[i]);
        d->umh[i] = NULL;
        struct zn_req *q = d->owner[i];
        q->done += (size_t)d->pay[i];
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

/* The header at p (a slot holding size bytes): its fields, and who sent it in *who. An abort
 * message fails the connection with the peer's reason (at most 512 bytes of it). */
static ncclResult_t read_hdr(struct nt_conn *c, const char *p, int size, uint32_t *kind,
                             uint32_t *seq, uint64_t *len, char *who, size_t wholen)
{
    memcpy(kind, p, 4);
    memcpy(seq, p + 4, 4);
    memcpy(len, p + 8, 8);
    peer_str(c, who, wholen);
    if (*kind != NT_ABORT) return ncclSuccess;
    int n = size - NT_HDR_BYTES;
    return zn_nt_fail(c, ncclRemoteError, "%s aborted: %.*s", who,
                      n < 0     ? 0
                      : n > 512 ? 512
                                : n,
                      p + NT_HDR_BYTES);
}

/* A message of len bytes arrived for receive q: the lengths must agree. */
static ncclResult_t check_len(struct nt_conn *c, const char *who, uint64_t len,
                              const struct zn_req *q)
{
    if (len == q->len) return ncclSuccess;
    return zn_nt_fail(c, ncclInvalidUsage,
                      "net transport: %s sent a message of %llu bytes on the %s channel, "
                      "the receive was posted for %zu bytes",
                      who, (unsigned long long)len, zn_nt_channel_name(c->hdr.channel), q->len);
}

/* The chunk in slot i (size bytes) goes to rq_head: check it, copy it, retire the slot. */
static ncclResult_t recv_consume(struct nt_conn *c, int i, int size)
{
    struct nt_dir *d = &c->r;
    const char *p = slot_buf(c, d, i);
    uint32_t kind, seq;
    uint64_t len;
    char who[160];
    ZN_CHECK(read_hdr(c, p, size, &kind, &seq, &len, who, sizeof(who)));
    struct zn_req *q = c->rq_head;
    size_t want = q->len - c->roff < c->st->chunk ? q->len - c->roff : c->st->chunk;
    if (kind != NT_DATA || seq != c->recv_seq)
        return zn_nt_fail(c, ncclRemoteError,
                          "net transport: %s sent a chunk of kind %#x, message %u (expected "
                          "message %u): the stream is corrupt",
                          who, kind, seq, c->recv_seq);
    ZN_CHECK(check_len(c, who, len, q));
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

/* ------------------------------------------------------------------------------------------ */
/* Direct mode: a header from a slot, then the chunks straight from / into the user's buffer  */
/* ------------------------------------------------------------------------------------------ */

static size_t min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Post scur's header, then its chunks, while slots are free. */
static ncclResult_t send_post_direct(struct nt_conn *c, int *progressed)
{
    struct nt_state *st = c->st;
    struct nt_dir *d = &c->s;
    while (d->n < st->nslots && c->scur) {
        int i = (d->head + d->n) % st->nslots;
        struct zn_req *q = c->scur;
        char *p = slot_buf(c, d, i);
        size_t len = NT_HDR_BYTES, pay = 0;
        void *mh = d->mh, *umh = NULL;
        if (c->shdr) {
            p = (char *)q->buf + c->soff;
            len = pay = min_sz(st->chunk, q->len - c->soff);
            ncclResult_t r = nt_ops(st)->regMr(c->send_comm, p, len, NCCL_PTR_HOST, &umh);
            if (r != ncclSuccess) return net_failed(c, r, "registration of a send buffer");
            mh = umh;
        } else {
            put_hdr(p, NT_DATA, c->send_seq, q->len);
        }
        ncclResult_t r = nt_ops(st)->isend(c->send_comm, p, len, NT_TAG, mh, NULL, &d->req[i]);
        if ((r != ncclSuccess || !d->req[i]) && umh) nt_ops(st)->deregMr(c->send_comm, umh);
        if (r != ncclSuccess) return net_failed(c, r, "a send");
        if (!d->req[i]) break; /* the net is full for now */
        d->umh[i] = umh;
        d->pay[i] = (int)pay;
        d->owner[i] = q;
        d->n++;
        *progressed = 1;
        if (c->shdr) c->soff += pay;
        c->shdr = 1;
        d->last[i] = c->soff == q->len;
        if (d->last[i]) {
            c->send_seq++;
            c->scur = q->next;
            c->soff = 0;
            c->shdr = 0;
        }
    }
    return ncclSuccess;
}

static ncclResult_t recv_post_direct(struct nt_conn *c, int *progressed)
{
    struct nt_state *st = c->st;
    struct nt_dir *d = &c->r;
    while (d->n < st->nslots && (c->rpost || !c->rhdr)) {
        int i = (d->head + d->n) % st->nslots;
        void *p = slot_buf(c, d, i), *mh = d->mh, *umh = NULL;
        size_t len = NT_HDR_BYTES + st->chunk;
        struct zn_req *q = c->rpost;
        int tag = NT_TAG;
        if (q) {
            p = (char *)q->buf + c->rpost_off;
            len = min_sz(st->chunk, q->len - c->rpost_off);
            ncclResult_t r = nt_ops(st)->regMr(c->recv_comm, p, len, NCCL_PTR_HOST, &umh);
            if (r != ncclSuccess) return net_failed(c, r, "registration of a receive buffer");
            mh = umh;
        }
        ncclResult_t r = nt_ops(st)->irecv(c->recv_comm, 1, &p, &len, &tag, &mh, NULL, &d->req[i]);
        if ((r != ncclSuccess || !d->req[i]) && umh) nt_ops(st)->deregMr(c->recv_comm, umh);
        if (r != ncclSuccess) return net_failed(c, r, "a receive");
        if (!d->req[i]) break;
        d->umh[i] = umh;
        d->size[i] = -1;
        d->n++;
        *progressed = 1;
        if (!q) {
            c->rhdr = 1;
            continue;
        }
        d->pay[i] = (int)len;
        d->rowner[i] = q;
        c->rpost_off += len;
        d->last[i] = c->rpost_off == q->len;
        if (d->last[i]) c->rpost = NULL;
    }
    return ncclSuccess;
}

static void recv_complete(struct nt_conn *c, struct zn_req *q)
{
    c->rq_head = q->next; /* receives complete in posting order: q is the head */
    if (!c->rq_head) c->rq_tail = NULL;
    q->next = NULL;
    q->state = ZN_REQ_DONE;
}

/* A header arrived (size bytes in slot i) and rnext waits for it. */
static ncclResult_t recv_header(struct nt_conn *c, int i, int size)
{
    const char *p = slot_buf(c, &c->r, i);
    uint32_t kind, seq;
    uint64_t len;
    char who[160];
    ZN_CHECK(read_hdr(c, p, size, &kind, &seq, &len, who, sizeof(who)));
    struct zn_req *q = c->rnext;
    if (kind != NT_DATA || seq != c->recv_seq || size != NT_HDR_BYTES)
        return zn_nt_fail(c, ncclRemoteError,
                          "net transport: %s sent a header of kind %#x, message %u, %d bytes "
                          "(expected message %u): the stream is corrupt",
                          who, kind, seq, size, c->recv_seq);
    ZN_CHECK(check_len(c, who, len, q));
    c->rnext = q->next;
    c->rhdr = 0;
    c->recv_seq++;
    if (q->len == 0) {
        recv_complete(c, q);
    } else {
        c->rpost = q;
        c->rpost_off = 0;
    }
    return ncclSuccess;
}

/* The header slot is only tested while a receive waits for it (see recv_progress). */
static ncclResult_t recv_progress_direct(struct nt_conn *c, int *progressed)
{
    struct nt_state *st = c->st;
    struct nt_dir *d = &c->r;
    ZN_CHECK(recv_post_direct(c, progressed));
    while (d->n > 0) {
        int i = d->head, done = d->size[i] >= 0, size = d->size[i];
        if (!d->umh[i] && !c->rnext) break;
        if (!done) {
            ncclResult_t r = nt_ops(st)->test(d->req[i], &done, &size);
            if (r != ncclSuccess) return net_failed(c, r, "a receive");
            if (!done) break;
            d->size[i] = size;
        }
        *progressed = 1;
        if (!d->umh[i]) {
            ZN_CHECK(recv_header(c, i, size));
        } else {
            struct zn_req *q = d->rowner[i];
            if (size != d->pay[i]) {
                char who[160];
                peer_str(c, who, sizeof(who));
                return zn_nt_fail(c, ncclRemoteError,
                                  "net transport: %s sent a chunk of %d bytes, expected %d", who,
                                  size, d->pay[i]);
            }
            nt_ops(st)->deregMr(c->recv_comm, d->umh[i]);
            d->umh[i] = NULL;
            q->done += (size_t)size;
            if (d->last[i]) recv_complete(c, q);
        }
        d->req[i] = NULL;
        d->head = (d->head + 1) % st->nslots;
        d->n--;
        ZN_CHECK(recv_post_direct(c, progressed));
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
    ncclResult_t (*post)(struct nt_conn *, int *) = st->direct ? send_post_direct : send_post;
    if (c->sq_head) {
        ZN_CHECK(post(c, progressed));
        ZN_CHECK(send_retire(c, progressed));
        ZN_CHECK(post(c, progressed));
    }
    return st->direct ? recv_progress_direct(c, progressed) : recv_progress(c, progressed);
}

/* Best effort and brief: an NT_ABORT chunk in a free slot, waited for at most 100 ms. */
void zn_nt_send_abort(struct nt_conn *c, const char *msg)
{
    struct nt_state *st = c->st;
    struct nt_dir *d = &c->s;
    if (c->err != ncclSuccess || !c->send_comm || !c->hello_sent || d->staged || c->shdr ||
        d->n == st->nslots)
        return; /* (c->shdr: the peer expects the rest of a message in its own buffer) */
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
