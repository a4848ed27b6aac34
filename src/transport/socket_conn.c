/*
 * Socket transport, connection setup: connect(), the shared listener, and the HELLO / ACK
 * exchange (socket_wire.h) that tells the accepting rank which (peer, channel, socket) an
 * incoming TCP connection is.
 *
 * The lower rank of a pair opens the TCP connections and the higher rank accepts them. Either
 * side may call connect() first: a HELLO that arrives before the local connect() creates the
 * connection record, and connect() later finds it. Everything here is non-blocking; a step
 * that cannot finish now is retried by the next progress call, and a connection that is not
 * up within ZINC_TIMEOUT of its connect() fails naming the peer and its address.
 *
 * A socket on the listener that is not a well-formed HELLO for this communicator (another
 * job, a port scanner, garbage) is closed and logged at WARN; nothing else is touched. A
 * well-formed HELLO that disagrees with this rank (nsocks) fails that one connection, on both
 * sides, with a message saying what to fix.
 */
#include "socket_internal.h"
#include "util/clock.h"
#include "util/param.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BACKOFF_MAX_MS 100
#define ACCEPT_BURST   64

static void sock_addr_str(int fd, char *buf, size_t len)
{
    union zn_sockaddr a;
    socklen_t alen = sizeof(a);
    memset(&a, 0, sizeof(a));
    if (getpeername(fd, &a.sa, &alen) != 0)
        snprintf(buf, len, "<unknown address>");
    else
        zn_sockaddr_str(&a, buf, len);
}

static const char *errno_str(int neg)
{
    return neg ? strerror(-neg) : "none";
}

static void conn_socket_ready(struct zs_conn *c, struct zs_sock *sk)
{
    sk->state = ZS_READY;
    sk->hello_off = 0;
    c->nready++;
    if (!zn_socket_conn_ready(c)) return;
    zn_socket_setup_over(c);
    if (zn_log_enabled(ZN_LOG_INFO, ZN_NET)) {
        char who[160];
        zn_socket_peer_str(c, who, sizeof(who));
        zn_info(ZN_NET, "socket transport: connected to %s on the %s channel (%d socket%s, %s)",
                who, zn_socket_channel_name(c->hdr.channel), c->nsocks, c->nsocks > 1 ? "s" : "",
                c->initiator ? "outgoing" : "incoming");
    }
}

/* ---------------------------------------------------------------------------------------
 * The initiating (lower) rank
 * --------------------------------------------------------------------------------------- */

static void schedule_retry(struct zs_sock *sk, int err)
{
    if (sk->fd >= 0) close(sk->fd);
    sk->fd = -1;
    sk->last_err = err;
    sk->backoff_ms = sk->backoff_ms ? sk->backoff_ms * 2 : 1;
    if (sk->backoff_ms > BACKOFF_MAX_MS) sk->backoff_ms = BACKOFF_MAX_MS;
    sk->retry_at = zn_now_ns() + (int64_t)sk->backoff_ms * 1000000;
    sk->state = ZS_RETRY;
}

static void start_connect(struct zs_conn *c, struct zs_sock *sk)
{
    int fd = -1;
    int rc = zn_sock_connect_start(&c->st->addrs[c->hdr.peer], &fd);
    if (rc) {
        schedule_retry(sk, rc);
        return;
    }
    sk->fd = fd;
    sk->state = ZS_CONNECTING;
}

static ncclResult_t closed_during_setup(struct zs_conn *c, int s, int rc)
{
    char who[160], a[ZN_SOCKADDR_STRLEN];
    zn_socket_peer_str(c, who, sizeof(who));
    zn_sockaddr_str(&c->st->addrs[c->hdr.peer], a, sizeof(a));
    if (rc == -EPIPE || rc == -ECONNRESET)
        return zn_socket_fail(
            c, ncclRemoteError,
            "%s at %s closed socket %d of the %s channel during connection setup: it "
            "rejected the connection (its log says why) or exited",
            who, a, s, zn_socket_channel_name(c->hdr.channel));
    return zn_socket_fail(c, ncclRemoteError,
                          "connection setup with %s at %s (%s channel) failed: %s", who, a,
                          zn_socket_channel_name(c->hdr.channel), strerror(-rc));
}

/* Check the ACK that the peer wrote back on socket s. */
static ncclResult_t check_ack(struct zs_conn *c, int s)
{
    struct zs_sock *sk = &c->socks[s];
    const struct zn_tctx *ctx = &c->st->ctx;
    char who[160];
    zn_socket_peer_str(c, who, sizeof(who));
    struct zn_socket_hello h;
    int rc = zn_socket_hello_decode(sk->hello, sizeof(sk->hello), ctx->comm_hash, &h);
    if (rc)
        return zn_socket_fail(c, ncclRemoteError,
                              "%s answered the connection setup on the %s channel with a malformed "
                              "ACK (%s)",
                              who, zn_socket_channel_name(c->hdr.channel),
                              zn_socket_wire_strerror(rc));
    if (h.nsocks != c->nsocks)
        return zn_socket_fail(
            c, ncclInvalidUsage,
            "%s uses %u sockets per connection but this rank uses %d: set the same "
            "ZINC_SOCKET_NSOCKS on every rank",
            who, (unsigned)h.nsocks, c->nsocks);
    if (h.kind != ZN_SOCKET_ACK || h.from != c->hdr.peer || h.to != ctx->rank ||
        h.channel != (uint32_t)c->hdr.channel || h.sock != s)
        return zn_socket_fail(
            c, ncclRemoteError,
            "%s answered the connection setup with an ACK for another connection "
            "(kind %u, from %d, to %d, channel %u, socket %u; expected ACK from %d to "
            "%d, channel %d, socket %d)",
            who, (unsigned)h.kind, (int)h.from, (int)h.to, (unsigned)h.channel, (unsigned)h.sock,
            c->hdr.peer, ctx->rank, c->hdr.channel, s);
    return ncclSuccess;
}

static ncclResult_t initiator_step(struct zs_conn *c, int s, int *progressed)
{
    struct zs_sock *sk = &c->socks[s];
    size_t n = 0;
    int rc;
    for (;;) {
        switch (sk->state) {
        case ZS_RETRY:
            if (zn_now_ns() < sk->retry_at) return ncclSuccess;
            start_connect(c, sk);
            *progressed = 1;
            if (sk->state != ZS_CONNECTING) return ncclSuccess;
            break;
        case ZS_CONNECTING:
            rc = zn_sock_connect_done(sk->fd);
            if (rc == 0) return ncclSuccess;
            *progressed = 1;
            if (rc < 0) {
                /* Refused, unreachable, reset: the peer may be slow to listen or briefly
                 * unreachable; try again until the deadline. */
                schedule_retry(sk, rc);
                return ncclSuccess;
            }
            zn_sock_tune(sk->fd, c->st->bufsize);
            struct zn_socket_hello h = {
                .magic = c->st->ctx.comm_hash,
                .kind = ZN_SOCKET_HELLO,
                .from = c->st->ctx.rank,
                .to = c->hdr.peer,
                .channel = (uint32_t)c->hdr.channel,
                .sock = (uint16_t)s,
                .nsocks = (uint16_t)c->nsocks,
            };
            zn_socket_hello_encode(&h, sk->hello);
            sk->hello_off = 0;
            sk->state = ZS_HELLO_SEND;
            break;
        case ZS_HELLO_SEND:
            rc = zn_sock_send_some(sk->fd, sk->hello + sk->hello_off,
                                   sizeof(sk->hello) - sk->hello_off, &n);
            if (rc) return closed_during_setup(c, s, rc);
            if (n == 0) return ncclSuccess;
            *progressed = 1;
            sk->hello_off += n;
            if (sk->hello_off < sizeof(sk->hello)) return ncclSuccess;
            sk->hello_off = 0;
            sk->state = ZS_ACK_RECV;
            break;
        case ZS_ACK_RECV:
            /* Exactly the ACK's bytes: the frames behind it belong to the data path. */
            rc = zn_sock_recv_some(sk->fd, sk->hello + sk->hello_off,
                                   sizeof(sk->hello) - sk->hello_off, &n);
            if (rc) return closed_during_setup(c, s, rc);
            if (n == 0) return ncclSuccess;
            *progressed = 1;
            sk->hello_off += n;
            if (sk->hello_off < sizeof(sk->hello)) return ncclSuccess;
            ZN_CHECK(check_ack(c, s));
            conn_socket_ready(c, sk);
            return ncclSuccess;
        default: return ncclSuccess;
        }
    }
}

ncclResult_t zn_socket_connect(void *state, int peer, int channel, struct zn_conn **out)
{
    struct zs_state *st = state;
    if (peer < 0 || peer >= st->ctx.nranks || peer == st->ctx.rank)
        return zn_error(ncclInternalError, ZN_NET,
                        "socket transport: connect to rank %d from rank %d of %d (a rank's "
                        "messages to itself are copied by the layer above)",
                        peer, st->ctx.rank, st->ctx.nranks);
    if (channel < 0 || channel >= ZN_NCHANNELS)
        return zn_error(ncclInternalError, ZN_NET, "socket transport: connect on channel %d",
                        channel);
    struct zs_conn *c;
    ZN_CHECK(zn_socket_conn_get(st, peer, channel, 1, &c));
    if (!c->connected) {
        c->connected = 1;
        c->deadline = zn_now_ns() + zn_timeout_ns();
        if (c->initiator) {
            for (int s = 0; s < c->nsocks; s++) start_connect(c, &c->socks[s]);
        }
    }
    *out = (struct zn_conn *)c;
    return ncclSuccess;
}

/* ---------------------------------------------------------------------------------------
 * The accepting (higher) rank
 * --------------------------------------------------------------------------------------- */

static ncclResult_t acceptor_step(struct zs_conn *c, int s, int *progressed)
{
    struct zs_sock *sk = &c->socks[s];
    if (sk->state != ZS_ACK_SEND) return ncclSuccess;
    size_t n = 0;
    int rc =
        zn_sock_send_some(sk->fd, sk->hello + sk->hello_off, sizeof(sk->hello) - sk->hello_off, &n);
    if (rc) return closed_during_setup(c, s, rc);
    if (n) *progressed = 1;
    sk->hello_off += n;
    if (sk->hello_off == sizeof(sk->hello)) conn_socket_ready(c, sk);
    return ncclSuccess;
}

static void pending_remove(struct zs_state *st, int i, int close_fd)
{
    if (close_fd) close(st->pending[i].fd);
    st->pending[i] = st->pending[--st->npending];
}

/* Reject an incoming socket; what it sent is no business of any connection. */
static void reject(struct zs_state *st, int i, const char *why)
{
    char a[ZN_SOCKADDR_STRLEN];
    sock_addr_str(st->pending[i].fd, a, sizeof(a));
    zn_warn(ZN_NET, "socket transport: closed a connection from %s to this rank's listener: %s", a,
            why);
    pending_remove(st, i, 1);
}

/* A well-formed HELLO with another nsocks: fail the connection here, and answer with an ACK
 * carrying ours so that the peer fails with the same clear message instead of a bare EOF. */
static void reject_nsocks(struct zs_state *st, int i, struct zs_conn *c,
                          const struct zn_socket_hello *h)
{
    char who[160];
    zn_socket_peer_str(c, who, sizeof(who));
    zn_socket_fail(c, ncclInvalidUsage,
                   "%s uses %u sockets per connection but this rank uses %d: set the same "
                   "ZINC_SOCKET_NSOCKS on every rank",
                   who, (unsigned)h->nsocks, c->nsocks);
    struct zn_socket_hello ack = {
        .magic = st->ctx.comm_hash,
        .kind = ZN_SOCKET_ACK,
        .from = st->ctx.rank,
        .to = h->from,
        .channel = h->channel,
        .sock = h->sock,
        .nsocks = (uint16_t)c->nsocks,
    };
    uint8_t buf[ZN_SOCKET_HELLO_BYTES];
    zn_socket_hello_encode(&ack, buf);
    size_t n;
    /* Best effort: 32 bytes fit in a new socket's empty buffer. */
    (void)zn_sock_send_some(st->pending[i].fd, buf, sizeof(buf), &n);
    pending_remove(st, i, 1);
}

/* A complete HELLO arrived on pending socket i: validate it and attach the socket. */
static void identify(struct zs_state *st, int i, int *progressed)
{
    struct zs_pending *p = &st->pending[i];
    const struct zn_tctx *ctx = &st->ctx;
    char why[256];
    struct zn_socket_hello h;
    int rc = zn_socket_hello_decode(p->buf, sizeof(p->buf), ctx->comm_hash, &h);
    if (rc) {
        snprintf(why, sizeof(why), "its HELLO has %s", zn_socket_wire_strerror(rc));
        reject(st, i, why);
        return;
    }
    /* Everything the HELLO says is checked before any of it is used as an index. */
    if (h.kind != ZN_SOCKET_HELLO || h.from >= ctx->nranks || h.from >= ctx->rank ||
        h.to != ctx->rank || h.channel >= ZN_NCHANNELS || h.sock >= h.nsocks) {
        snprintf(why, sizeof(why),
                 "its HELLO does not fit this communicator (kind %u, from rank %d, to rank %d, "
                 "channel %u, socket %u of %u; this is rank %d of %d)",
                 (unsigned)h.kind, (int)h.from, (int)h.to, (unsigned)h.channel, (unsigned)h.sock,
                 (unsigned)h.nsocks, ctx->rank, ctx->nranks);
        reject(st, i, why);
        return;
    }
    struct zs_conn *c;
    if (zn_socket_conn_get(st, h.from, (int)h.channel, 1, &c) != ncclSuccess) {
        reject(st, i, "out of memory");
        return;
    }
    /* Every socket of a connection with another nsocks gets the answering ACK, so that the
     * peer reads the reason on whichever socket it looks at first. */
    if (h.nsocks != c->nsocks) {
        reject_nsocks(st, i, c, &h);
        *progressed = 1;
        return;
    }
    if (c->err != ncclSuccess) {
        reject(st, i, "its connection already failed");
        return;
    }
    struct zs_sock *sk = &c->socks[h.sock];
    if (sk->state != ZS_EMPTY) {
        snprintf(why, sizeof(why),
                 "its HELLO claims socket %u of rank %d's %s connection, which is already "
                 "taken",
                 (unsigned)h.sock, (int)h.from, zn_socket_channel_name((int)h.channel));
        reject(st, i, why);
        return;
    }
    sk->fd = p->fd;
    pending_remove(st, i, 0);
    zn_sock_tune(sk->fd, st->bufsize);
    struct zn_socket_hello ack = h;
    ack.kind = ZN_SOCKET_ACK;
    ack.from = ctx->rank;
    ack.to = h.from;
    zn_socket_hello_encode(&ack, sk->hello);
    sk->hello_off = 0;
    sk->state = ZS_ACK_SEND;
    *progressed = 1;
    (void)acceptor_step(c, h.sock, progressed); /* an error here is the connection's */
}

/* Read more of pending socket i's HELLO. Returns 1 if the entry was removed. */
static int pending_step(struct zs_state *st, int i, int64_t now, int *progressed)
{
    struct zs_pending *p = &st->pending[i];
    size_t n = 0;
    int rc = zn_sock_recv_some(p->fd, p->buf + p->got, sizeof(p->buf) - p->got, &n);
    if (rc) {
        char a[ZN_SOCKADDR_STRLEN];
        sock_addr_str(p->fd, a, sizeof(a));
        zn_info(ZN_NET,
                "socket transport: a connection from %s closed after %zu bytes of its "
                "HELLO (%s)",
                a, p->got, rc == -EPIPE ? "EOF" : strerror(-rc));
        pending_remove(st, i, 1);
        *progressed = 1;
        return 1;
    }
    if (n) *progressed = 1;
    p->got += n;
    if (p->got == sizeof(p->buf)) {
        identify(st, i, progressed);
        return 1;
    }
    if (now - p->since > zn_timeout_ns()) {
        reject(st, i, "no complete HELLO within ZINC_TIMEOUT");
        return 1;
    }
    return 0;
}

void zn_socket_accept_poll(struct zs_state *st, int *progressed)
{
    int64_t now = zn_now_ns();
    if (st->unready == 0 && now < st->next_accept) return;
    st->next_accept = now + ZS_IDLE_ACCEPT_NS;
    for (int k = 0; k < ACCEPT_BURST; k++) {
        int fd = -1;
        int rc = zn_sock_try_accept(st->lfd, &fd);
        if (rc == -EAGAIN) break;
        if (rc == -EINTR || rc == -ECONNABORTED) continue;
        if (rc) {
            /* EMFILE and friends: the connection stays in the backlog for a later try. */
            zn_warn(ZN_NET, "socket transport: accept on the listener failed: %s", strerror(-rc));
            break;
        }
        *progressed = 1;
        if (st->npending >= ZS_MAX_PENDING) {
            zn_warn(ZN_NET,
                    "socket transport: %d connections wait for their HELLO already; "
                    "closing a new one",
                    st->npending);
            close(fd);
            continue;
        }
        if (st->npending == st->cap_pending) {
            int cap = st->cap_pending ? st->cap_pending * 2 : 8;
            struct zs_pending *np = realloc(st->pending, (size_t)cap * sizeof(*np));
            if (!np) {
                zn_warn(ZN_NET, "socket transport: out of memory for an incoming connection");
                close(fd);
                continue;
            }
            st->pending = np;
            st->cap_pending = cap;
        }
        struct zs_pending *p = &st->pending[st->npending++];
        memset(p, 0, sizeof(*p));
        p->fd = fd;
        p->since = now;
    }
    for (int i = 0; i < st->npending;) {
        if (!pending_step(st, i, now, progressed)) i++;
    }
}

ncclResult_t zn_socket_setup_progress(struct zs_conn *c, int *progressed)
{
    for (int s = 0; s < c->nsocks && !c->err; s++) {
        if (c->initiator)
            ZN_CHECK(initiator_step(c, s, progressed));
        else
            ZN_CHECK(acceptor_step(c, s, progressed));
    }
    if (c->err) return zn_socket_sticky(c);
    if (zn_socket_conn_ready(c) || zn_now_ns() < c->deadline) return ncclSuccess;

    char who[160], a[ZN_SOCKADDR_STRLEN];
    zn_socket_peer_str(c, who, sizeof(who));
    zn_sockaddr_str(&c->st->addrs[c->hdr.peer], a, sizeof(a));
    int last = 0;
    for (int s = 0; s < c->nsocks; s++)
        if (c->socks[s].last_err) last = c->socks[s].last_err;
    if (c->initiator)
        return zn_socket_fail(
            c, ncclRemoteError,
            "could not connect to %s at %s on the %s channel within ZINC_TIMEOUT=%llds "
            "(%d of %d sockets up; last connect error: %s): the peer exited, hangs, "
            "or a firewall blocks the port",
            who, a, zn_socket_channel_name(c->hdr.channel), (long long)zn_params()->timeout,
            c->nready, c->nsocks, errno_str(last));
    return zn_socket_fail(
        c, ncclRemoteError,
        "%s (listening at %s) did not connect to this rank on the %s channel within "
        "ZINC_TIMEOUT=%llds (%d of %d sockets up): it exited, hangs, never called "
        "connect for this pair, or cannot reach this host",
        who, a, zn_socket_channel_name(c->hdr.channel), (long long)zn_params()->timeout, c->nready,
        c->nsocks);
}
