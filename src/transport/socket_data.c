/*
 * Socket transport, data path: isend / irecv queue requests, progress moves their bytes.
 *
 * Bytes go straight between the user's buffer and the kernel: frame headers are the only
 * thing copied (socket_wire.h has the format). Sends gather up to BATCH queued messages,
 * header and payload, into one sendmsg(), so a burst of small messages costs a few syscalls
 * instead of two per message. Receives read exactly one frame's payload, plus, in the same
 * recvmsg(), as much of the next header as is there; reading further ahead would need a staging
 * copy, since the next message's length is not known yet.
 *
 * Per-request private words (struct zn_req.priv):
 *   priv[0]  the message's seq on this connection and direction
 *   priv[1]  send: the number of parts; receive: R_* flags below
 *   priv[2]  send: parts not yet fully written
 * Requests complete in posting order: only the head of a queue is ever marked done, so a
 * short message that finishes on socket 0 while a striped one before it is still moving on
 * socket 1 waits for it.
 *
 * A peer closing its end is an error as soon as anything is pending on the connection, or
 * later when something is posted; a connection with nothing pending is not read, so a peer
 * that finished and closed first (teardown order) is not reported.
 */
#include "socket_internal.h"
#include "util/clock.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define BATCH 32 /* messages per sendmsg() */

/* Receive flags in priv[1]. */
#define R_HDR0        (1u << 0) /* socket 0's header arrived */
#define R_STRIPED     (1u << 1) /* ... and says the message is striped */
#define R_PART(s)     (1u << (8 + (s)))
#define R_PARTS_OTHER (0xfeu << 8) /* parts on sockets 1..7 */

static inline uint32_t req_seq(const struct zn_req *r)
{
    return (uint32_t)r->priv[0];
}

static inline unsigned send_nparts(const struct zn_req *r)
{
    return (unsigned)r->priv[1];
}

/* Non-blocking scatter/gather I/O: 0 and *done bytes moved (0 if the kernel had no room or
 * nothing to give), or a negative errno; -EPIPE from a receive means the peer closed. */
static int sendv_some(int fd, struct iovec *iov, int niov, size_t *done)
{
    struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)niov };
    ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    *done = 0;
    if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -errno;
    *done = (size_t)n;
    return 0;
}

static int recvv_some(int fd, struct iovec *iov, int niov, size_t *done)
{
    struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)niov };
    ssize_t n = recvmsg(fd, &m, MSG_DONTWAIT);
    *done = 0;
    if (n == 0) return -EPIPE;
    if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -errno;
    *done = (size_t)n;
    return 0;
}

static void enqueue(struct zn_req **head, struct zn_req **tail, struct zn_req *r)
{
    r->next = NULL;
    if (*tail)
        (*tail)->next = r;
    else
        *head = r;
    *tail = r;
}

static ncclResult_t post_check(struct zs_conn *c, const void *buf, size_t len, struct zn_req *req)
{
    if (c->err != ncclSuccess) return zn_socket_sticky(c);
    if (!req || (!buf && len))
        return zn_error(ncclInternalError, ZN_NET,
                        "socket transport: request %p with buffer %p and length %zu posted",
                        (void *)req, buf, len);
    return ncclSuccess;
}

/* isend -- the user thread; never blocks. */
ncclResult_t zn_socket_isend(struct zn_conn *conn, const void *buf, size_t len, struct zn_req *req)
{
    struct zs_conn *c = (struct zs_conn *)conn;
    ZN_CHECK(post_check(c, buf, len, req));
    unsigned nparts = c->nsocks > 1 && len >= ZS_STRIPE_MIN ? (unsigned)c->nsocks : 1;
    req->buf = (void *)buf;
    req->len = len;
    req->done = 0;
    req->state = ZN_REQ_PENDING;
    req->is_send = 1;
    req->priv[0] = c->send_seq++;
    req->priv[1] = nparts;
    req->priv[2] = nparts;
    enqueue(&c->sq_head, &c->sq_tail, req);
    for (int s = 0; s < c->nsocks; s++)
        if (!c->socks[s].scur) c->socks[s].scur = req;
    return ncclSuccess;
}

/* irecv -- the user thread; never blocks. */
ncclResult_t zn_socket_irecv(struct zn_conn *conn, void *buf, size_t len, struct zn_req *req)
{
    struct zs_conn *c = (struct zs_conn *)conn;
    ZN_CHECK(post_check(c, buf, len, req));
    req->buf = buf;
    req->len = len;
    req->done = 0;
    req->state = ZN_REQ_PENDING;
    req->is_send = 0;
    req->priv[0] = c->recv_seq++;
    req->priv[1] = 0;
    req->priv[2] = 0;
    enqueue(&c->rq_head, &c->rq_tail, req);
    for (int s = 0; s < c->nsocks; s++)
        if (!c->socks[s].rcur) c->socks[s].rcur = req;
    return ncclSuccess;
}

static ncclResult_t io_error(struct zs_conn *c, int s, int rc, int sending)
{
    char who[160];
    zn_socket_peer_str(c, who, sizeof(who));
    const char *what = sending ? "send" : "receive";
    if (rc == -EPIPE || rc == -ECONNRESET)
        return zn_socket_fail(c, ncclRemoteError,
                              "%s closed its connection during a %s on the %s channel: the process "
                              "exited or aborted",
                              who, what, zn_socket_channel_name(c->hdr.channel));
    return zn_socket_fail(c, ncclRemoteError, "%s to %s on the %s channel (socket %d) failed: %s",
                          sending ? "sending" : "receiving", who,
                          zn_socket_channel_name(c->hdr.channel), s, strerror(-rc));
}

/* ---------------------------------------------------------------------------------------
 * Sending
 * --------------------------------------------------------------------------------------- */

/* The next message from r on that has a part on socket s. */
static struct zn_req *next_with_part(struct zn_req *r, int s)
{
    while (r && (unsigned)s >= send_nparts(r)) r = r->next;
    return r;
}

static ncclResult_t send_sock(struct zs_conn *c, int s, int *progressed)
{
    struct zs_sock *sk = &c->socks[s];
    for (;;) {
        struct zn_req *r = next_with_part(sk->scur, s);
        sk->scur = r;
        if (!r) return ncclSuccess;

        /* Gather header and payload of up to BATCH messages. */
        struct iovec iov[2 * BATCH];
        uint8_t hdr[BATCH][ZN_SOCKET_FRAME_BYTES];
        int niov = 0, nmsg = 0;
        size_t want = 0;
        for (struct zn_req *m = r; m && nmsg < BATCH; m = next_with_part(m->next, s), nmsg++) {
            unsigned nparts = send_nparts(m);
            uint64_t off, size;
            zn_socket_part(m->len, nparts, (unsigned)s, &off, &size);
            size_t hoff = m == r ? sk->shdr_off : 0, poff = m == r ? sk->spay_off : 0;
            if (hoff < ZN_SOCKET_FRAME_BYTES) {
                struct zn_socket_frame f = {
                    .length = m->len,
                    .seq = req_seq(m),
                    .flags = nparts > 1 ? ZN_SOCKET_FRAME_STRIPED : 0,
                    .part = (uint8_t)s,
                    .nparts = (uint8_t)nparts,
                };
                zn_socket_frame_encode(&f, hdr[nmsg]);
                iov[niov].iov_base = hdr[nmsg] + hoff;
                iov[niov++].iov_len = ZN_SOCKET_FRAME_BYTES - hoff;
                want += ZN_SOCKET_FRAME_BYTES - hoff;
            }
            if (poff < size) {
                iov[niov].iov_base = (char *)m->buf + off + poff;
                iov[niov++].iov_len = size - poff;
                want += size - poff;
            }
            /* A large payload fills the socket buffer by itself. */
            if (want >= ZS_STRIPE_MIN) {
                nmsg++;
                break;
            }
        }
        size_t n = 0;
        int rc = sendv_some(sk->fd, iov, niov, &n);
        if (rc) return io_error(c, s, rc, 1);
        if (n == 0) return ncclSuccess;
        *progressed = 1;

        /* Hand the bytes written to the messages, in order. */
        size_t left = n;
        while (left > 0) {
            r = sk->scur;
            uint64_t off, size;
            zn_socket_part(r->len, send_nparts(r), (unsigned)s, &off, &size);
            size_t h = ZN_SOCKET_FRAME_BYTES - sk->shdr_off;
            if (h > left) h = left;
            sk->shdr_off += h;
            left -= h;
            size_t p = size - sk->spay_off;
            if (p > left) p = left;
            sk->spay_off += p;
            r->done += p;
            left -= p;
            if (sk->shdr_off < ZN_SOCKET_FRAME_BYTES || sk->spay_off < size) break;
            r->priv[2]--;
            sk->shdr_off = 0;
            sk->spay_off = 0;
            sk->scur = next_with_part(r->next, s);
        }
        /* A short write means the socket buffer is full: asking again now would only get
         * EAGAIN. */
        if (n < want) return ncclSuccess;
    }
}

static void complete_sends(struct zs_conn *c)
{
    struct zn_req *r;
    while ((r = c->sq_head) && r->priv[2] == 0) {
        c->sq_head = r->next;
        if (!c->sq_head) c->sq_tail = NULL;
        for (int s = 0; s < c->nsocks; s++)
            if (c->socks[s].scur == r) c->socks[s].scur = r->next;
        r->next = NULL;
        r->state = ZN_REQ_DONE;
    }
}

/* ---------------------------------------------------------------------------------------
 * Receiving
 * --------------------------------------------------------------------------------------- */

static ncclResult_t protocol_error(struct zs_conn *c, int s, const char *what)
{
    char who[160];
    zn_socket_peer_str(c, who, sizeof(who));
    const struct zn_socket_frame *f = &c->socks[s].rframe;
    return zn_socket_fail(
        c, ncclRemoteError,
        "%s broke the socket protocol on the %s channel (socket %d): %s (frame seq "
        "%u, length %llu, part %u of %u, flags 0x%x)",
        who, zn_socket_channel_name(c->hdr.channel), s, what, (unsigned)f->seq,
        (unsigned long long)f->length, (unsigned)f->part, (unsigned)f->nparts, (unsigned)f->flags);
}

static ncclResult_t length_mismatch(struct zs_conn *c, const struct zn_req *r, uint64_t length)
{
    char who[160];
    zn_socket_peer_str(c, who, sizeof(who));
    return zn_socket_fail(
        c, ncclInvalidUsage,
        "%s sent %llu bytes but this rank posted a receive of %zu bytes on the %s "
        "channel (message %u of the connection; mismatched calls?)",
        who, (unsigned long long)length, r->len, zn_socket_channel_name(c->hdr.channel),
        (unsigned)req_seq(r));
}

/* Find the request for the decoded header on socket s and start reading its part. Leaves
 * sk->rreq NULL if that request is not posted yet. */
static ncclResult_t match(struct zs_conn *c, int s)
{
    struct zs_sock *sk = &c->socks[s];
    const struct zn_socket_frame *f = &sk->rframe;
    int striped = (f->flags & ZN_SOCKET_FRAME_STRIPED) != 0;
    if (striped && f->nparts != c->nsocks)
        return protocol_error(c, s, "striped over another number of sockets");
    if (f->part != s) return protocol_error(c, s, "a part on the wrong socket");
    struct zn_req *r;
    if (s == 0) {
        if (f->seq != sk->rseq_next) return protocol_error(c, s, "message out of sequence");
        r = sk->rcur;
        if (!r) return ncclSuccess;
        if (f->length != r->len) return length_mismatch(c, r, f->length);
        if (!striped && (r->priv[1] & R_PARTS_OTHER))
            return protocol_error(c, s, "parts on other sockets of a message sent whole");
        r->priv[1] |= R_HDR0 | (striped ? R_STRIPED : 0);
        sk->rseq_next++;
    } else {
        if (!striped) return protocol_error(c, s, "a whole message on a socket other than 0");
        /* The requests before this seq had no part on this socket. */
        for (r = sk->rcur; r && (int32_t)(req_seq(r) - f->seq) < 0; r = r->next) {
            if ((r->priv[1] & R_STRIPED) && !(r->priv[1] & R_PART(s)))
                return protocol_error(c, s, "a part of an earlier striped message is missing");
        }
        sk->rcur = r;
        if (!r) return ncclSuccess;
        if (req_seq(r) != f->seq) return protocol_error(c, s, "message out of sequence");
        if (f->length != r->len) return length_mismatch(c, r, f->length);
        if ((r->priv[1] & R_HDR0) && !(r->priv[1] & R_STRIPED))
            return protocol_error(c, s, "a part of a message sent whole");
        if (r->priv[1] & R_PART(s)) return protocol_error(c, s, "a part sent twice");
        r->priv[1] |= R_PART(s);
    }
    sk->rcur = r->next;
    zn_socket_part(f->length, f->nparts, f->part, &sk->roff, &sk->rlen);
    sk->rgot = 0;
    sk->rreq = r;
    sk->rhdr_ok = 0;
    sk->rhdr_got = 0;
    return ncclSuccess;
}

/* The peer failed and sent why: fail with its words (they name the original cause). */
static ncclResult_t take_abort(struct zs_conn *c, int s)
{
    char text[ZN_SOCKET_ABORT_MAX + 1];
    size_t len = (size_t)c->socks[s].rframe.length;
    /* The text follows its header at once; a short wait is enough, and the peer may be gone. */
    int rc = zn_sock_recv_all(c->socks[s].fd, text, len, zn_now_ns() + 200000000ll, NULL);
    if (rc) len = (size_t)snprintf(text, sizeof(text), "(its message was lost: %s)", strerror(-rc));
    text[len] = 0;
    char who[160];
    zn_socket_peer_str(c, who, sizeof(who));
    return zn_socket_fail(c, ncclRemoteError, "%s failed: %s", who, text);
}

/* Tell the peer of c that this rank failed, if socket 0 is between frames (best effort: never
 * blocks for long, the peer may be gone). */
void zn_socket_send_abort(struct zs_conn *c, const char *msg)
{
    struct zs_sock *sk = &c->socks[0];
    if (!zn_socket_conn_ready(c) || c->err != ncclSuccess || sk->shdr_off || sk->spay_off) return;
    size_t len = strlen(msg);
    if (len > ZN_SOCKET_ABORT_MAX) len = ZN_SOCKET_ABORT_MAX;
    struct zn_socket_frame f = { .length = len, .flags = ZN_SOCKET_FRAME_ABORT, .nparts = 1 };
    uint8_t hdr[ZN_SOCKET_FRAME_BYTES];
    zn_socket_frame_encode(&f, hdr);
    int64_t deadline = zn_now_ns() + 100000000ll;
    if (zn_sock_send_all(sk->fd, hdr, sizeof(hdr), deadline, NULL) == 0)
        zn_sock_send_all(sk->fd, msg, len, deadline, NULL);
}

static ncclResult_t recv_sock(struct zs_conn *c, int s, int *progressed)
{
    struct zs_sock *sk = &c->socks[s];
    size_t n = 0;
    int rc;
    for (;;) {
        if (!sk->rreq) {
            if (!sk->rhdr_ok) {
                /* Nothing posted for this socket: do not read ahead. The peer may have closed
                 * after its last message, which is normal. */
                if (!sk->rcur && sk->rhdr_got == 0) return ncclSuccess;
                if (sk->eof) return ncclSuccess;
                if (sk->rhdr_got < ZN_SOCKET_FRAME_BYTES) {
                    rc = zn_sock_recv_some(sk->fd, sk->rhdr + sk->rhdr_got,
                                           ZN_SOCKET_FRAME_BYTES - sk->rhdr_got, &n);
                    /* A close between frames is only an error if a receive still needs this
                     * socket; zn_socket_progress decides once the receives that are complete are.
                     */
                    if (rc == -EPIPE && sk->rhdr_got == 0) {
                        sk->eof = 1;
                        return ncclSuccess;
                    }
                    if (rc) return io_error(c, s, rc, 0);
                    if (n) *progressed = 1;
                    sk->rhdr_got += n;
                    if (sk->rhdr_got < ZN_SOCKET_FRAME_BYTES) return ncclSuccess;
                }
                rc = zn_socket_frame_decode(sk->rhdr, sizeof(sk->rhdr), &sk->rframe);
                if (rc) return protocol_error(c, s, zn_socket_wire_strerror(rc));
                if (sk->rframe.flags & ZN_SOCKET_FRAME_ABORT) return take_abort(c, s);
                sk->rhdr_ok = 1;
            }
            ZN_CHECK(match(c, s));
            if (!sk->rreq) return ncclSuccess; /* its receive is not posted yet */
        }
        struct zn_req *r = sk->rreq;
        if (sk->rgot < sk->rlen) {
            /* The payload, and the next header if it is already there. */
            struct iovec iov[2] = {
                { .iov_base = (char *)r->buf + sk->roff + sk->rgot,
                  .iov_len = (size_t)(sk->rlen - sk->rgot) },
                { .iov_base = sk->rhdr, .iov_len = sizeof(sk->rhdr) },
            };
            rc = recvv_some(sk->fd, iov, 2, &n);
            if (rc) return io_error(c, s, rc, 0);
            if (n == 0) return ncclSuccess;
            *progressed = 1;
            size_t p = n < iov[0].iov_len ? n : iov[0].iov_len;
            sk->rgot += p;
            r->done += p;
            if (sk->rgot < sk->rlen) return ncclSuccess; /* short read: nothing more now */
            sk->rhdr_got = n - p;
            sk->rreq = NULL;
            /* The kernel had no more than this: another read now would only get EAGAIN. */
            if (sk->rhdr_got < sizeof(sk->rhdr)) return ncclSuccess;
            continue;
        }
        sk->rreq = NULL; /* a zero-byte part */
    }
}

/* Whether the first pending receive still needs bytes that only socket s could bring. */
static int needs_socket(const struct zs_conn *c, int s)
{
    const struct zn_req *r = c->rq_head;
    if (!r) return 0;
    if (s == 0) return !(r->priv[1] & R_HDR0) || r->done < r->len;
    return (r->priv[1] & R_HDR0) && (r->priv[1] & R_STRIPED) && !(r->priv[1] & R_PART(s));
}

static void complete_recvs(struct zs_conn *c)
{
    struct zn_req *r;
    while ((r = c->rq_head) && (r->priv[1] & R_HDR0) && r->done == r->len) {
        c->rq_head = r->next;
        if (!c->rq_head) c->rq_tail = NULL;
        for (int s = 0; s < c->nsocks; s++)
            if (c->socks[s].rcur == r) c->socks[s].rcur = r->next;
        r->next = NULL;
        r->state = ZN_REQ_DONE;
    }
}

/* progress -- the user thread; never blocks. */
ncclResult_t zn_socket_progress(struct zn_conn *conn, int *progressed)
{
    struct zs_conn *c = (struct zs_conn *)conn;
    struct zs_state *st = c->st;
    if (st->ctx.abort_flag && atomic_load_explicit(st->ctx.abort_flag, memory_order_relaxed)) {
        char who[160];
        zn_socket_peer_str(c, who, sizeof(who));
        return zn_error(ncclRemoteError, ZN_NET,
                        "socket transport: aborted (connection to %s, %s channel)", who,
                        zn_socket_channel_name(c->hdr.channel));
    }
    if (c->err != ncclSuccess) return zn_socket_sticky(c);
    zn_socket_accept_poll(st, progressed);
    if (c->err != ncclSuccess) return zn_socket_sticky(c); /* a HELLO for c may have failed it */
    if (!zn_socket_conn_ready(c)) {
        ZN_CHECK(zn_socket_setup_progress(c, progressed));
        if (!zn_socket_conn_ready(c)) return ncclSuccess;
    }
    if (c->sq_head) {
        for (int s = 0; s < c->nsocks; s++) ZN_CHECK(send_sock(c, s, progressed));
        complete_sends(c);
    }
    /* Nothing is read while no receive is posted: a header could be read ahead, but nothing
     * else, and an idle connection is then free to see its peer close (teardown order). */
    if (c->rq_head) {
        for (int s = 0; s < c->nsocks; s++) ZN_CHECK(recv_sock(c, s, progressed));
        complete_recvs(c);
        for (int s = 0; s < c->nsocks; s++)
            if (c->socks[s].eof && needs_socket(c, s)) return io_error(c, s, -EPIPE, 0);
    }
    return ncclSuccess;
}
