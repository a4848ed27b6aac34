/*
 * Bootstrap, rank side: joining through the root, the ring, allgather, barrier, abort.
 */
#include "boot_internal.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/param.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void zn_boot_peer_str(const struct zn_boot *b, int peer, char *buf, size_t len)
{
    char a[ZN_SOCKADDR_STRLEN] = "?";
    if (peer >= 0 && b->addrs && b->addrs[peer].sa.sa_family)
        zn_sockaddr_str(&b->addrs[peer], a, sizeof(a));
    snprintf(buf, len, "rank %d (%s)", peer, a);
}

void zn_boot_abort(struct zn_boot *b, ncclResult_t code, const char *why)
{
    if (b->failed) return;
    b->failed = 1;
    b->fail_code = code;
    if (b->next_fd < 0) return;
    char text[ZN_BOOT_MAX_ERROR];
    int n = snprintf(text, sizeof(text), "%s", why);
    if (n < 0) return;
    int32_t c = (int32_t)code;
    /* Best effort and short: the neighbour may be gone too. */
    size_t len = (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1;
    if (zn_boot_send_frame(b->next_fd, ZN_BOOT_ABORT, b->magic, &c, sizeof(c), text, len,
                           zn_now_ns() + 200000000ll, NULL) == 0)
        zn_boot_count_sent(b, sizeof(struct zn_boot_frame) + sizeof(c) + len);
}

void zn_boot_reopen(struct zn_boot *b, const atomic_int *abort_flag)
{
    b->failed = 0;
    b->fail_code = ncclSuccess;
    b->abort_flag = abort_flag;
    /* The ring may pass through dead ranks now: their ends are expected. */
    b->prev_strict = 0;
}

ncclResult_t zn_boot_fail_peer(struct zn_boot *b, ncclResult_t code, int peer, const char *what,
                               int err)
{
    char who[96], msg[512];
    zn_boot_peer_str(b, peer, who, sizeof(who));
    const char *cause = err == -EPIPE || err == -ECONNRESET ? "closed the connection"
                        : err == -ETIMEDOUT                 ? "did not answer within ZINC_TIMEOUT"
                        : err == -ECANCELED                 ? "(communicator aborted)"
                                                            : strerror(-err);
    if (err == -ECANCELED)
        snprintf(msg, sizeof(msg), "bootstrap %s aborted by the user", what);
    else
        snprintf(msg, sizeof(msg), "bootstrap %s: %s %s", what, who, cause);
    ncclResult_t r = zn_error(code, ZN_BOOT, "%s", msg);
    char fwd[600];
    snprintf(fwd, sizeof(fwd), "rank %d: %s", b->rank, msg);
    zn_boot_abort(b, code, fwd);
    return r;
}

/* An ABORT or ERROR frame arrived: fail with its text and pass it on around the ring. */
static ncclResult_t take_abort(struct zn_boot *b, const struct zn_frame_reader *rd)
{
    int32_t code = ncclRemoteError;
    char text[ZN_BOOT_MAX_ERROR + 1] = "";
    if (rd->hdr.len >= 4) {
        memcpy(&code, rd->payload, 4);
        size_t n = rd->hdr.len - 4;
        memcpy(text, rd->payload + 4, n);
        text[n] = 0;
    }
    if (code <= ncclSuccess || code >= ncclNumResults || code == ncclInProgress)
        code = ncclRemoteError;
    ncclResult_t r = zn_error((ncclResult_t)code, ZN_BOOT, "bootstrap failed: %s", text);
    zn_boot_abort(b, (ncclResult_t)code, text);
    return r;
}

static void in_close(struct zn_boot *b, int i)
{
    close(b->in[i].fd);
    zn_frame_reader_reset(&b->in[i].rd);
    b->in[i] = b->in[--b->nin];
}

/* Every connection waiting on the listener: it gets a CHALLENGE at once (a stranger's costs
 * only its descriptor and this entry; it is closed at its deadline if it proves nothing). */
static void accept_incoming(struct zn_boot *b)
{
    for (;;) {
        int fd;
        if (zn_sock_try_accept(b->l.fd, &fd) != 0) return;
        if (b->nin == b->incap) {
            int cap = b->incap ? b->incap * 2 : 16;
            struct boot_in *n = realloc(b->in, (size_t)cap * sizeof(*n));
            if (!n) {
                close(fd);
                return;
            }
            b->in = n;
            b->incap = cap;
        }
        struct boot_in *c = &b->in[b->nin];
        memset(c, 0, sizeof(*c));
        c->fd = fd;
        c->src = -1;
        c->deadline = zn_deadline_from_now();
        union zn_sockaddr pa;
        socklen_t plen = sizeof(pa);
        snprintf(c->from, sizeof(c->from), "?");
        if (getpeername(fd, &pa.sa, &plen) == 0) zn_sockaddr_str(&pa, c->from, sizeof(c->from));
        int rc = zn_boot_send_challenge(fd, b->magic, c->nonce);
        if (rc) {
            zn_info(ZN_BOOT, "bootstrap: connection from %s gone before its challenge: %s", c->from,
                    strerror(-rc));
            close(fd);
            continue;
        }
        b->nin++;
    }
}

/* A stranger's connection: closed, with a warning that names where it came from. */
static void in_reject(struct zn_boot *b, int i, const char *why)
{
    zn_warn(ZN_BOOT, "bootstrap: closed the connection from %s: %s", b->in[i].from, why);
    in_close(b, i);
}

static void enqueue(struct zn_boot *b, struct boot_in *c, struct zn_frame_reader *rd)
{
    struct boot_msg *m = calloc(1, sizeof(*m));
    if (!m) return;
    memcpy(&m->tag, rd->payload, 4);
    m->src = c->src;
    m->conn_fd = c->fd;
    m->len = rd->hdr.len - 8;
    c->queued += m->len;
    m->data = rd->payload; /* take the buffer over */
    rd->payload = NULL;
    *b->unexpected_tail = m;
    b->unexpected_tail = &m->next;
}

void zn_boot_unqueue(struct zn_boot *b, const struct boot_msg *m)
{
    for (int i = 0; i < b->nin; i++)
        if (b->in[i].fd == m->conn_fd && b->in[i].src == m->src) {
            b->in[i].queued -= m->len < b->in[i].queued ? m->len : b->in[i].queued;
            return;
        }
}

static int same_addr(const union zn_sockaddr *a, const union zn_sockaddr *b)
{
    if (a->sa.sa_family != b->sa.sa_family) return 0;
    if (a->sa.sa_family == AF_INET)
        return a->in4.sin_port == b->in4.sin_port &&
               a->in4.sin_addr.s_addr == b->in4.sin_addr.s_addr;
    return a->in6.sin6_port == b->in6.sin6_port &&
           !memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, sizeof(a->in6.sin6_addr));
}

/* A HELLO arrived on an unproven connection: it must carry a MAC made with the job secret
 * over our nonce, and the rank it claims must fit what that rank registered (its listening
 * address, where we know it). */
static void take_hello(struct zn_boot *b, int i)
{
    struct boot_in *c = &b->in[i];
    struct zn_frame_reader *rd = &c->rd;
    struct zn_boot_hello h;
    union zn_sockaddr addr;
    if (rd->hdr.type != ZN_BOOT_HELLO) {
        in_reject(b, i, "malformed HELLO (another frame came before it)");
        return;
    }
    if (zn_boot_hello_decode(rd->payload, rd->hdr.len, &h, &addr) != 0 || h.nranks != b->nranks ||
        h.kind == ZN_HELLO_ROOT) {
        in_reject(b, i, "malformed HELLO");
        return;
    }
    if (!zn_boot_hello_verify(&h, b->secret, b->magic, c->nonce)) {
        in_reject(b, i,
                  "it did not prove the job secret (a stranger, another job, or a rank with "
                  "another ZINC_JOB_SECRET)");
        return;
    }
    const union zn_sockaddr *reg = &b->addrs[h.rank];
    if (reg->sa.sa_family && !same_addr(reg, &addr)) {
        char msg[160];
        snprintf(msg, sizeof(msg), "it claims rank %d, which registered another address", h.rank);
        in_reject(b, i, msg);
        return;
    }
    zn_boot_count_recv(b, rd);
    zn_frame_reader_reset(rd);
    if (h.kind == ZN_HELLO_RING && h.rank == (b->rank + b->nranks - 1) % b->nranks &&
        b->prev_fd < 0) {
        b->prev_fd = c->fd;
        b->in[i] = b->in[--b->nin];
        return;
    }
    c->src = h.rank;
}

/* Serve incoming connection i. Returns an error only for an ABORT frame from a proven rank. */
static ncclResult_t serve_in(struct zn_boot *b, int i)
{
    struct boot_in *c = &b->in[i];
    int rc = zn_frame_reader_step(&c->rd, c->fd, b->magic, c->src < 0 ? ZN_BOOT_HELLO : 0);
    if (rc == 0) return ncclSuccess;
    if (rc < 0) {
        if (rc == -EBADMSG)
            in_reject(b, i, "it did not present this job's magic");
        else if (rc != -EPIPE && rc != -ECONNRESET)
            in_reject(b, i, rc == -EMSGSIZE ? "message length out of bounds" : strerror(-rc));
        else
            in_close(b, i);
        return ncclSuccess;
    }
    if (c->src < 0) {
        take_hello(b, i);
        return ncclSuccess;
    }
    struct zn_frame_reader *rd = &c->rd;
    /* DATA counts when zn_boot_recv takes it: what arrived early is not counted twice, and
     * the counters do not depend on who runs ahead. */
    if (rd->hdr.type != ZN_BOOT_DATA) zn_boot_count_recv(b, rd);
    if (rd->hdr.type == ZN_BOOT_ABORT || rd->hdr.type == ZN_BOOT_ERROR) {
        ncclResult_t r = take_abort(b, rd);
        in_close(b, i);
        return r;
    }
    if (rd->hdr.type == ZN_BOOT_DATA && rd->hdr.len >= 8) enqueue(b, c, rd);
    zn_frame_reader_reset(rd);
    return ncclSuccess;
}

/* Close connections that proved nothing by their deadline. */
static void expire_incoming(struct zn_boot *b)
{
    int64_t now = zn_now_ns();
    for (int i = b->nin - 1; i >= 0; i--)
        if (b->in[i].src < 0 && now > b->in[i].deadline)
            in_reject(b, i, "no HELLO within ZINC_TIMEOUT");
}

static int send_step(struct zn_boot *b, struct boot_io *io, size_t total)
{
    while (io->sent < total) {
        size_t off = io->sent, k = 0;
        while (off >= io->len[k]) off -= io->len[k++];
        size_t n;
        int rc =
            zn_sock_send_some(io->send_fd, (const char *)io->part[k] + off, io->len[k] - off, &n);
        if (rc) return rc;
        if (n == 0) return 0;
        io->sent += n;
    }
    return 0;
}

/* Whether this wait also watches the predecessor's ring connection (see prev_rd). A DATA
 * frame read there waits whole in prev_rd for the address exchange, unwatched meanwhile. */
static int watching_prev(const struct zn_boot *b, const struct boot_io *io)
{
    const struct zn_frame_reader *rd = &b->prev_rd;
    int parked = rd->hdr_got == sizeof(rd->hdr) && rd->payload_got == rd->hdr.len;
    return b->prev_fd >= 0 && b->prev_watch && io->recv_fd != b->prev_fd && !parked;
}

/* Read what the predecessor sent outside the address exchange: ABORT fails this rank too,
 * BYE ends the watch, and so does the connection's end, which without BYE means that the
 * predecessor died (or aborted): every bootstrap collective needs it, so fail now rather
 * than at the deadline. */
static ncclResult_t serve_prev(struct zn_boot *b)
{
    struct zn_frame_reader *rd = &b->prev_rd;
    int rc = zn_frame_reader_step(rd, b->prev_fd, b->magic, 0);
    if (rc == 0) return ncclSuccess;
    if (rc == 1) {
        if (rd->hdr.type == ZN_BOOT_DATA) return ncclSuccess; /* parked */
        zn_boot_count_recv(b, rd);
        ncclResult_t res = ncclSuccess;
        if (rd->hdr.type == ZN_BOOT_ABORT || rd->hdr.type == ZN_BOOT_ERROR)
            res = take_abort(b, rd);
        else if (rd->hdr.type == ZN_BOOT_BYE)
            b->prev_watch = 0;
        zn_frame_reader_reset(rd);
        return res;
    }
    b->prev_watch = 0;
    zn_frame_reader_reset(rd);
    if (!b->prev_strict) return ncclSuccess;
    return zn_boot_fail_peer(b, ncclRemoteError, (b->rank + b->nranks - 1) % b->nranks, "wait",
                             rc == -EPIPE ? -ECONNRESET : rc);
}

/* One step of the wait's own send and receive; *recv_done turns 1 with a whole frame. */
static ncclResult_t io_step(struct zn_boot *b, struct boot_io *io, size_t total, int *recv_done)
{
    if (io->send_fd >= 0 && io->sent < total) {
        int rc = send_step(b, io, total);
        if (rc) return zn_boot_fail_peer(b, ncclRemoteError, io->blame_send, io->what, rc);
        if (io->sent == total) zn_boot_count_sent(b, total);
    }
    if (!*recv_done) {
        int rc = zn_frame_reader_step(io->rd, io->recv_fd, b->magic,
                                      io->want_type ? io->want_type : ZN_BOOT_DATA);
        if (rc < 0) {
            if (rc == -EBADMSG || rc == -EPROTO || rc == -EMSGSIZE)
                return zn_boot_fail_peer(b, ncclInternalError, io->blame_recv, io->what, rc);
            return zn_boot_fail_peer(b, ncclRemoteError, io->blame_recv, io->what, rc);
        }
        if (rc == 1 && (io->rd->hdr.type == ZN_BOOT_ABORT || io->rd->hdr.type == ZN_BOOT_ERROR))
            return take_abort(b, io->rd);
        *recv_done = rc == 1;
        if (*recv_done) zn_boot_count_recv(b, io->rd);
    }
    return ncclSuccess;
}

/* Poll entries: listener, own send, own receive, predecessor, then the incoming ones. */
#define PFD_FIXED 4

ncclResult_t zn_boot_io_run(struct zn_boot *b, struct boot_io *io)
{
    size_t total = io->len[0] + io->len[1] + io->len[2];
    int recv_done = io->recv_fd < 0;
    int64_t deadline = zn_now_ns() + zn_timeout_ns();
    struct pollfd stack_pfds[64], *pfds = stack_pfds;
    ncclResult_t res = ncclSuccess;
    for (;;) {
        if (b->abort_flag && atomic_load(b->abort_flag)) {
            res = zn_boot_fail_peer(b, ncclRemoteError, -1, io->what, -ECANCELED);
            goto out;
        }
        ZN_CHECK_GOTO(io_step(b, io, total, &recv_done), res, out);
        int send_done = io->send_fd < 0 || io->sent == total;
        if (send_done && recv_done && (!io->until || io->until(b, io->until_arg))) break;
        if (zn_now_ns() >= deadline) {
            res =
                zn_boot_fail_peer(b, ncclRemoteError, !recv_done ? io->blame_recv : io->blame_send,
                                  io->what, -ETIMEDOUT);
            goto out;
        }
        int need = PFD_FIXED + b->nin;
        if (need > 64 && pfds == stack_pfds) pfds = NULL;
        if (pfds != stack_pfds) {
            struct pollfd *p = realloc(pfds, (size_t)need * sizeof(*p));
            if (!p) {
                res = zn_error(ncclSystemError, ZN_BOOT, "out of memory in bootstrap");
                goto out;
            }
            pfds = p;
        }
        pfds[0] = (struct pollfd){ .fd = b->l.fd, .events = POLLIN };
        pfds[1] = (struct pollfd){ .fd = send_done ? -1 : io->send_fd, .events = POLLOUT };
        pfds[2] = (struct pollfd){ .fd = recv_done ? -1 : io->recv_fd, .events = POLLIN };
        pfds[3] = (struct pollfd){ .fd = watching_prev(b, io) ? b->prev_fd : -1, .events = POLLIN };
        /* A source with ZN_BOOT_MAX_QUEUED bytes waiting is not read until some are taken. */
        for (int i = 0; i < b->nin; i++)
            pfds[PFD_FIXED + i] =
                (struct pollfd){ .fd = b->in[i].queued < ZN_BOOT_MAX_QUEUED ? b->in[i].fd : -1,
                                 .events = POLLIN };
        int ready = poll(pfds, (nfds_t)need, zn_ms_left(deadline, 50));
        if (ready <= 0) {
            expire_incoming(b);
            continue;
        }
        for (int i = b->nin - 1; i >= 0; i--)
            if (pfds[PFD_FIXED + i].revents && (res = serve_in(b, i)) != ncclSuccess) goto out;
        if (pfds[0].revents) accept_incoming(b);
        /* Last, so that messages that came with the predecessor's end are taken first. */
        if (pfds[3].revents && (res = serve_prev(b)) != ncclSuccess) goto out;
        expire_incoming(b);
    }
out:
    if (pfds != stack_pfds) free(pfds);
    return res;
}

/* --- construction -------------------------------------------------------------------- */

ncclResult_t zn_boot_listener_create(struct zn_boot_listener *l)
{
    union zn_sockaddr addr;
    char ifname[64];
    int rc = zn_sock_local_addr(&addr, ifname, sizeof(ifname));
    if (rc)
        return zn_error(ncclSystemError, ZN_BOOT,
                        "no usable network interface for the bootstrap (ZINC_SOCKET_IFNAME=\"%s\")",
                        zn_params()->socket_ifname);
    if (addr.sa.sa_family == AF_INET6)
        addr.in6.sin6_port = 0;
    else
        addr.in4.sin_port = 0;
    rc = zn_sock_listen(&addr, &l->fd, &l->addr);
    if (rc) {
        char a[ZN_SOCKADDR_STRLEN];
        zn_sockaddr_str(&addr, a, sizeof(a));
        return zn_error(ncclSystemError, ZN_BOOT, "bootstrap cannot listen on %s (%s): %s", a,
                        ifname, strerror(-rc));
    }
    return ncclSuccess;
}

void zn_boot_listener_close(struct zn_boot_listener *l)
{
    if (l->fd >= 0) close(l->fd);
    l->fd = -1;
}

ncclResult_t zn_boot_alloc(uint64_t magic, const uint8_t *secret, int rank, int nranks,
                           const atomic_int *abort_flag, struct zn_boot **out)
{
    struct zn_boot *b = calloc(1, sizeof(*b));
    if (!b) return zn_error(ncclSystemError, ZN_BOOT, "out of memory");
    if (secret) memcpy(b->secret, secret, sizeof(b->secret)); /* else zeros: proves nothing */
    b->rank = rank;
    b->nranks = nranks;
    b->magic = magic;
    b->abort_flag = abort_flag;
    b->next_fd = b->prev_fd = b->l.fd = -1;
    b->prev_watch = b->prev_strict = 1;
    b->unexpected_tail = &b->unexpected;
    b->addrs = calloc((size_t)nranks, sizeof(*b->addrs));
    b->send_fd = malloc((size_t)nranks * sizeof(int));
    if (!b->addrs || !b->send_fd) {
        zn_boot_destroy(b);
        return zn_error(ncclSystemError, ZN_BOOT, "out of memory for %d ranks", nranks);
    }
    for (int i = 0; i < nranks; i++) b->send_fd[i] = -1;
    *out = b;
    return ncclSuccess;
}

static int have_prev(struct zn_boot *b, void *arg)
{
    return b->prev_fd >= 0;
}

ncclResult_t zn_boot_hello_make(struct zn_boot *b, int fd, uint32_t kind, int peer,
                                const char *what, struct zn_boot_hello *h)
{
    struct zn_frame_reader rd = { 0 };
    struct boot_io io = { .send_fd = -1,
                          .recv_fd = fd,
                          .rd = &rd,
                          .want_type = ZN_BOOT_CHALLENGE,
                          .blame_recv = peer,
                          .what = what };
    ncclResult_t res = zn_boot_io_run(b, &io);
    if (res == ncclSuccess && rd.hdr.type != ZN_BOOT_CHALLENGE) /* take_abort answered */
        res = b->fail_code ? b->fail_code : ncclRemoteError;
    if (res == ncclSuccess) {
        b->stats.msgs_recv--; /* challenges are not counted (bootstrap.h) */
        b->stats.bytes_recv -= sizeof(rd.hdr) + rd.hdr.len;
        zn_boot_hello_encode(h, b->rank, b->nranks, kind, &b->l.addr);
        zn_boot_hello_sign(h, b->secret, b->magic, rd.payload);
    }
    zn_frame_reader_reset(&rd);
    return res;
}

ncclResult_t zn_boot_ring_connect(struct zn_boot *b, const union zn_sockaddr *next)
{
    if (b->nranks == 1) return ncclSuccess;
    int next_rank = (b->rank + 1) % b->nranks, prev_rank = (b->rank + b->nranks - 1) % b->nranks;
    int64_t deadline = zn_now_ns() + zn_timeout_ns();
    int rc = zn_sock_connect(next, deadline, b->abort_flag, &b->next_fd);
    if (rc) return zn_boot_fail_peer(b, ncclRemoteError, next_rank, "ring connect", rc);
    struct zn_boot_hello h;
    ZN_CHECK(zn_boot_hello_make(b, b->next_fd, ZN_HELLO_RING, next_rank, "ring setup", &h));
    struct zn_boot_frame f = {
        .type = ZN_BOOT_HELLO, .version = ZN_BOOT_VERSION, .magic = b->magic, .len = sizeof(h)
    };
    struct boot_io io = { .send_fd = b->next_fd,
                          .part = { &f, &h },
                          .len = { sizeof(f), sizeof(h) },
                          .recv_fd = -1,
                          .until = have_prev,
                          .blame_send = next_rank,
                          .blame_recv = prev_rank,
                          .what = "ring setup" };
    return zn_boot_io_run(b, &io);
}

/* One frame from the root, waiting up to deadline. Returns 1, or a negative errno. */
static int root_read(struct zn_boot *b, int fd, struct zn_frame_reader *rd, uint32_t want,
                     int64_t deadline)
{
    int rc;
    while ((rc = zn_frame_reader_step(rd, fd, b->magic, want)) == 0) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        poll(&p, 1, zn_ms_left(deadline, 50));
        if (b->abort_flag && atomic_load(b->abort_flag)) return -ECANCELED;
        if (zn_now_ns() >= deadline) return -ETIMEDOUT;
    }
    if (rc == 1) zn_boot_count_recv(b, rd);
    return rc;
}

/* RING_INFO (or ERROR) is in rd: take the successor's address from it. */
static ncclResult_t take_ring_info(struct zn_boot *b, const struct zn_frame_reader *rd,
                                   union zn_sockaddr *next)
{
    if (rd->hdr.type == ZN_BOOT_ERROR || rd->hdr.type == ZN_BOOT_ABORT) return take_abort(b, rd);
    struct zn_boot_ring_info info;
    if (rd->hdr.len != sizeof(info))
        return zn_error(ncclInternalError, ZN_BOOT, "bootstrap root sent a malformed answer");
    memcpy(&info, rd->payload, sizeof(info));
    memset(next, 0, sizeof(*next));
    memcpy(next, info.next_addr, sizeof(*next));
    return ncclSuccess;
}

/* The address table that follows RING_INFO to rank 0 is in rd. */
static ncclResult_t take_table(struct zn_boot *b, const struct zn_frame_reader *rd)
{
    size_t len = (size_t)b->nranks * sizeof(*b->addrs);
    uint32_t tag = 0;
    if (rd->hdr.len == 8 + len) memcpy(&tag, rd->payload, 4);
    if (tag != ZN_BOOT_TAG_ADDRS)
        return zn_error(ncclInternalError, ZN_BOOT,
                        "bootstrap root sent a malformed address table (%llu bytes)",
                        (unsigned long long)rd->hdr.len);
    memcpy(b->addrs, rd->payload + 8, len);
    return ncclSuccess;
}

/* Talk to the root: HELLO out, RING_INFO (or ERROR) back, and to rank 0 the address table. */
static ncclResult_t root_exchange(struct zn_boot *b, const union zn_sockaddr *root,
                                  union zn_sockaddr *next)
{
    char where[ZN_SOCKADDR_STRLEN];
    zn_sockaddr_str(root, where, sizeof(where));
    /* A little longer than the root's own deadline, so that its explanation arrives first. */
    int64_t deadline = zn_now_ns() + zn_timeout_ns() + 5000000000ll;
    int fd, rc = zn_sock_connect(root, deadline, b->abort_flag, &fd);
    if (rc)
        return zn_error(ncclRemoteError, ZN_BOOT, "cannot reach the bootstrap root at %s: %s",
                        where, rc == -ETIMEDOUT ? "timed out (ZINC_TIMEOUT)" : strerror(-rc));
    struct zn_boot_hello h;
    struct zn_frame_reader rd = { 0 };
    rc = root_read(b, fd, &rd, ZN_BOOT_CHALLENGE, deadline);
    if (rc == 1 && rd.hdr.type != ZN_BOOT_CHALLENGE) rc = -EPROTO;
    if (rc == 1) { /* challenges are not counted (bootstrap.h) */
        b->stats.msgs_recv--;
        b->stats.bytes_recv -= sizeof(rd.hdr) + rd.hdr.len;
    }
    if (rc == 1) {
        zn_boot_hello_encode(&h, b->rank, b->nranks, ZN_HELLO_ROOT, &b->l.addr);
        if (b->rank == 0) h.flags = ZN_HELLO_WANT_TABLE;
        zn_boot_hello_sign(&h, b->secret, b->magic, rd.payload);
        zn_frame_reader_reset(&rd);
        rc = zn_boot_send_frame(fd, ZN_BOOT_HELLO, b->magic, &h, sizeof(h), NULL, 0, deadline,
                                b->abort_flag);
    }
    if (rc == 0) zn_boot_count_sent(b, sizeof(struct zn_boot_frame) + sizeof(h));
    if (rc == 0) rc = root_read(b, fd, &rd, ZN_BOOT_RING_INFO, deadline);
    ncclResult_t res = ncclSuccess;
    if (rc == 1) res = take_ring_info(b, &rd, next);
    if (rc == 1 && res == ncclSuccess && b->rank == 0) {
        zn_frame_reader_reset(&rd);
        rc = root_read(b, fd, &rd, ZN_BOOT_DATA, deadline);
        if (rc == 1) res = take_table(b, &rd);
    }
    close(fd);
    zn_frame_reader_reset(&rd);
    if (rc < 0)
        res = zn_error(ncclRemoteError, ZN_BOOT,
                       "bootstrap root at %s: %s before all ranks joined%s", where,
                       rc == -EPIPE || rc == -ECONNRESET ? "connection closed"
                       : rc == -ETIMEDOUT                ? "no answer within ZINC_TIMEOUT"
                                                         : strerror(-rc),
                       rc == -EPIPE ? " (did the process that created the unique id exit?)" : "");
    return res;
}

ncclResult_t zn_boot_init(const ncclUniqueId *uid, int rank, int nranks,
                          const atomic_int *abort_flag, struct zn_boot **out)
{
    struct zn_unique_id id;
    memcpy(&id, uid->internal, sizeof(id));
    union zn_sockaddr root;
    memset(&root, 0, sizeof(root));
    memcpy(&root, id.root_addr, sizeof(root));
    if (id.magic == 0 || (root.sa.sa_family != AF_INET && root.sa.sa_family != AF_INET6))
        return zn_error(ncclInvalidArgument, ZN_BOOT,
                        "commId is not a unique id made by ncclGetUniqueId (magic 0 or no root "
                        "address): was it broadcast to every rank?");
    struct zn_boot *b;
    /* An id without ZN_ID_SECRET has zeros there: the same zeros on every rank. */
    ZN_CHECK(zn_boot_alloc(id.magic, id.secret, rank, nranks, abort_flag, &b));
    ncclResult_t res;
    ZN_CHECK_GOTO(zn_boot_listener_create(&b->l), res, fail);
    if (id.rank0_hosts_root && rank == 0) {
        union zn_sockaddr bound;
        ZN_CHECK_GOTO(zn_boot_root_start(&root, id.magic, b->secret, &bound), res, fail);
    }
    union zn_sockaddr next;
    int64_t t0 = zn_now_ns();
    ZN_CHECK_GOTO(root_exchange(b, &root, &next), res, fail);
    int64_t t1 = zn_now_ns();
    b->addrs[(rank + 1) % nranks] = next;
    ZN_CHECK_GOTO(zn_boot_ring_connect(b, &next), res, fail);
    int64_t t2 = zn_now_ns();
    b->addrs[rank] = b->l.addr;
    ZN_CHECK_GOTO(zn_boot_share_addrs(b, 1), res, fail);
    zn_info(ZN_BOOT,
            "bootstrap: rank %d of %d connected (root %.1f ms, ring %.1f ms, addresses %.1f ms)",
            rank, nranks, (t1 - t0) / 1e6, (t2 - t1) / 1e6, (zn_now_ns() - t2) / 1e6);
    *out = b;
    return ncclSuccess;
fail:
    zn_boot_destroy(b);
    return res;
}

ncclResult_t zn_boot_init_addrs(uint64_t magic, const struct zn_boot_secret *secret, int rank,
                                int nranks, struct zn_boot_listener *l,
                                const union zn_sockaddr *addrs, const atomic_int *abort_flag,
                                struct zn_boot **out)
{
    struct zn_boot *b;
    ncclResult_t res =
        zn_boot_alloc(magic, secret ? secret->key : NULL, rank, nranks, abort_flag, &b);
    if (res != ncclSuccess) {
        zn_boot_listener_close(l);
        return res;
    }
    b->l = *l;
    l->fd = -1;
    memcpy(b->addrs, addrs, (size_t)nranks * sizeof(*addrs));
    ZN_CHECK_GOTO(zn_boot_ring_connect(b, &addrs[(rank + 1) % nranks]), res, fail);
    *out = b;
    return ncclSuccess;
fail:
    zn_boot_destroy(b);
    return res;
}

int zn_boot_rank(const struct zn_boot *b)
{
    return b->rank;
}

int zn_boot_nranks(const struct zn_boot *b)
{
    return b->nranks;
}

void zn_boot_get_stats(const struct zn_boot *b, struct zn_boot_stats *out)
{
    *out = b->stats;
}

uint64_t zn_boot_magic(const struct zn_boot *b)
{
    return b->magic;
}

void zn_boot_get_secret(const struct zn_boot *b, struct zn_boot_secret *out)
{
    memcpy(out->key, b->secret, sizeof(out->key));
}

const union zn_sockaddr *zn_boot_peer_addr(const struct zn_boot *b, int rank)
{
    return &b->addrs[rank];
}

void zn_boot_destroy(struct zn_boot *b)
{
    if (!b) return;
    if (b->next_fd >= 0 && !b->failed) {
        /* Best effort and short, like an ABORT: the successor may be gone already. */
        int32_t me = b->rank;
        zn_boot_send_frame(b->next_fd, ZN_BOOT_BYE, b->magic, &me, sizeof(me), NULL, 0,
                           zn_now_ns() + 200000000ll, NULL);
    }
    if (b->next_fd >= 0) close(b->next_fd);
    if (b->prev_fd >= 0) close(b->prev_fd);
    zn_frame_reader_reset(&b->prev_rd);
    zn_boot_listener_close(&b->l);
    for (int i = 0; b->send_fd && i < b->nranks; i++)
        if (b->send_fd[i] >= 0) close(b->send_fd[i]);
    while (b->nin) in_close(b, b->nin - 1);
    while (b->unexpected) {
        struct boot_msg *m = b->unexpected;
        b->unexpected = m->next;
        free(m->data);
        free(m);
    }
    free(b->in);
    free(b->send_fd);
    free(b->addrs);
    free(b);
}
