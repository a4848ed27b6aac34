/*
 * The proxy's service thread: one per process, on a Unix socket, serving every communicator
 * of the process (see service.h). It replaces the per-communicator sockets and threads that
 * served arena fds and buffer registrations before: those are now handlers that the p2p
 * transport registers by request type.
 */
#include "service.h"
#include "progress.h"
#include "staging_client.h"
#include "transport/peer.h"
#include "util/clock.h"
#include "util/dump.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/sock.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_CLIENTS 64
#define FRAME_MAX   (ZN_PXW_HDR + ZN_PXW_MAX_BODY)

struct handler {
    int type, rank;
    uint64_t comm;
    zn_svc_fn fn;
    void *arg;
};

struct client {
    int fd;
    pid_t pid;
    uint32_t have; /* bytes of the current frame read so far */
    int in_fd;     /* a descriptor that came with it */
    int extra_fds; /* descriptors beyond the one a request may carry (closed on arrival) */
    int64_t since; /* when the current frame (or the idle wait) began */
    uint64_t nreq;
    uint8_t buf[FRAME_MAX];
};

static struct {
    pthread_mutex_t lock; /* refs and start/stop */
    int refs;
    pthread_t thread;
    int lfd;
    int wake[2]; /* the state dump and zn_proxy_release write here */
    atomic_int stop;
    pthread_mutex_t hlock; /* handlers: users register, the service thread calls */
    struct handler *h;
    int nh;
    struct client *cl[MAX_CLIENTS];
    int ncl;
    uint64_t served, refused;
    int64_t started_ns;
    pid_t owner; /* the process that started the threads (a forked child has none of them) */
} svc = { .lock = PTHREAD_MUTEX_INITIALIZER,
          .hlock = PTHREAD_MUTEX_INITIALIZER,
          .lfd = -1,
          .wake = { -1, -1 } };

uint64_t zn_proxy_pid_ns(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

void zn_proxy_addr(int32_t pid, uint64_t pid_ns, struct sockaddr_un *a, socklen_t *len)
{
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "zinc-proxy-%llx-%d",
                     (unsigned long long)pid_ns, (int)pid);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* --- Handlers ---------------------------------------------------------------------------- */

static ncclResult_t svc_serve(void *ctx, int type, uint64_t comm, int rank, zn_svc_fn fn, void *arg)
{
    (void)ctx;
    if (type <= ZN_SVC_STOP || type >= ZN_SVC_NTYPES)
        return zn_error(ncclInternalError, ZN_PROXY, "proxy: no handler can serve type %d", type);
    pthread_mutex_lock(&svc.hlock);
    struct handler *n = realloc(svc.h, (size_t)(svc.nh + 1) * sizeof(*n));
    if (n) {
        svc.h = n;
        svc.h[svc.nh++] = (struct handler){ type, rank, comm, fn, arg };
    }
    pthread_mutex_unlock(&svc.hlock);
    return n ? ncclSuccess : zn_error(ncclSystemError, ZN_PROXY, "out of memory");
}

static void svc_unserve(void *ctx, int type, uint64_t comm, int rank)
{
    (void)ctx;
    pthread_mutex_lock(&svc.hlock);
    for (int i = 0; i < svc.nh; i++)
        if (svc.h[i].type == type && svc.h[i].comm == comm && svc.h[i].rank == rank) {
            svc.h[i] = svc.h[--svc.nh];
            break;
        }
    pthread_mutex_unlock(&svc.hlock);
}

/* Run the handler for h (under hlock, so that unserve waits for a running call). */
static ncclResult_t dispatch(const struct zn_pxw_hdr *h, const struct zn_svc_req *req,
                             struct zn_svc_reply *rep)
{
    ncclResult_t res = ncclInvalidUsage;
    int found = 0;
    pthread_mutex_lock(&svc.hlock);
    for (int i = 0; i < svc.nh && !found; i++) {
        struct handler *e = &svc.h[i];
        if (e->type != h->type || e->comm != h->comm_hash || e->rank != (int)h->dst) continue;
        found = 1;
        res = e->fn(e->arg, req, rep);
    }
    pthread_mutex_unlock(&svc.hlock);
    if (!found)
        zn_info(ZN_PROXY, "proxy: no handler for request type %u to rank %u of %016llx (gone?)",
                h->type, h->dst, (unsigned long long)h->comm_hash);
    return res;
}

/* --- Frames over a Unix socket ----------------------------------------------------------- */

/* Send one frame (header, body) with an optional descriptor. Non-blocking: replies are small
 * and fit in the socket's buffer; a client that does not read them is dropped. */
static int send_frame(int fd, const struct zn_pxw_hdr *h, const void *body, uint32_t len,
                      int pass_fd, int flags)
{
    uint8_t frame[FRAME_MAX];
    if (len > ZN_PXW_MAX_BODY) return -EMSGSIZE;
    zn_pxw_encode(h, len, frame);
    if (len) memcpy(frame + ZN_PXW_HDR, body, len);
    struct iovec iov = { .iov_base = frame, .iov_len = ZN_PXW_HDR + len };
    char ctl[CMSG_SPACE(sizeof(int))];
    memset(ctl, 0, sizeof(ctl));
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (pass_fd >= 0) {
        m.msg_control = ctl;
        m.msg_controllen = sizeof(ctl);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    }
    ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL | flags);
    return n == (ssize_t)iov.iov_len ? 0 : n < 0 ? -errno : -EAGAIN;
}

/* Room for this many descriptors per read: more than any request carries, so that the
 * kernel installs all of a misbehaving sender's and each can be closed (the kernel installs
 * as many as fit in the control buffer, and one that is not read from it stays open). */
#define FDS_PER_READ 16

/* Read up to want bytes into buf; a passed descriptor goes to *in_fd. Every further one (in
 * this read, or beside an earlier one) is closed and counted in *extra, so that the request
 * can be refused. Returns the count, 0 at end of stream, or a negative errno. */
static ssize_t recv_some(int fd, uint8_t *buf, size_t want, int *in_fd, int *extra, int flags)
{
    struct iovec iov = { .iov_base = buf, .iov_len = want };
    union {
        char b[CMSG_SPACE(FDS_PER_READ * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b)
    };
    ssize_t n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC | flags);
    if (n < 0) return -errno;
    if (m.msg_flags & MSG_CTRUNC) (*extra)++; /* the kernel closed what did not fit */
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t k = 0; k < nfds; k++) {
            int got;
            memcpy(&got, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
            if (*in_fd < 0) {
                *in_fd = got;
            } else {
                close(got);
                (*extra)++;
            }
        }
    }
    return n;
}

/* --- Clients ----------------------------------------------------------------------------- */

static void drop_client(int i, const char *why)
{
    struct client *c = svc.cl[i];
    if (why) {
        zn_warn(ZN_PROXY, "proxy: closed the connection of process %d: %s", (int)c->pid, why);
        svc.refused++;
    }
    if (c->in_fd >= 0) close(c->in_fd);
    close(c->fd);
    free(c);
    svc.cl[i] = svc.cl[--svc.ncl];
}

/* A real client sends its request as soon as it connected and waits for the answer (one
 * request per connection, svc_call), so a connection that sat idle for a second is not
 * serving anyone. With the table full, the one idle longest makes room for the newcomer,
 * instead of leaving real clients refused until ZINC_TIMEOUT. */
#define IDLE_EVICT_NS 1000000000ll

static void evict_idle(void)
{
    int64_t now = zn_now_ns();
    int victim = -1;
    for (int i = 0; i < svc.ncl; i++)
        if (svc.cl[i]->have == 0 && now - svc.cl[i]->since > IDLE_EVICT_NS &&
            (victim < 0 || svc.cl[i]->since < svc.cl[victim]->since))
            victim = i;
    if (victim >= 0)
        drop_client(victim, "idle while the client table is full (making room for a new one)");
}

static void accept_client(void)
{
    int fd = accept4(svc.lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    struct ucred cred = { 0 };
    socklen_t cl = sizeof(cred);
    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl);
    if (!zn_sock_peer_is_self_user(fd)) {
        zn_warn(ZN_PROXY, "proxy: refused a connection from process %d of another user",
                (int)cred.pid);
        svc.refused++;
        close(fd);
        return;
    }
    if (svc.ncl == MAX_CLIENTS) evict_idle();
    struct client *c = svc.ncl < MAX_CLIENTS ? calloc(1, sizeof(*c)) : NULL;
    if (!c) {
        zn_warn(ZN_PROXY, "proxy: refused process %d: %d clients already connected", (int)cred.pid,
                svc.ncl);
        close(fd);
        return;
    }
    *c = (struct client){ .fd = fd, .pid = cred.pid, .in_fd = -1, .since = zn_now_ns() };
    svc.cl[svc.ncl++] = c;
}

/* Answer the complete request in c->buf. Returns NULL, or why the client must go. */
static const char *answer(struct client *c, const struct zn_pxw_hdr *h, int *close_it)
{
    uint8_t body[ZN_PXW_MAX_BODY];
    struct zn_pxw_hdr rh = {
        .type = h->type, .comm_hash = h->comm_hash, .dst = h->dst, .src = h->src
    };
    struct zn_svc_reply rep = { .body = body, .len = 0, .fd = -1 };
    if (h->type == ZN_SVC_CLOSE) {
        *close_it = 1;
        return NULL;
    }
    if (h->type == ZN_SVC_HELLO) {
        struct zn_pxw_hello hello = { .version = ZN_PXW_VERSION,
                                      .pid = (int32_t)getpid(),
                                      .nclients = (uint32_t)svc.ncl };
        memcpy(body, &hello, sizeof(hello));
        rep.len = sizeof(hello);
    } else if (h->type == ZN_SVC_STOP) {
        if (c->pid != getpid()) return "STOP from another process";
        atomic_store(&svc.stop, 1);
    } else {
        struct zn_svc_req req = {
            .src = h->src, .body = c->buf + ZN_PXW_HDR, .len = h->len - ZN_PXW_HDR, .fd = c->in_fd
        };
        rh.status = (int32_t)dispatch(h, &req, &rep);
        if (rep.len > ZN_PXW_MAX_BODY) rep.len = 0; /* a handler bug: never send past body */
    }
    int rc = send_frame(c->fd, &rh, body, rep.len, rep.fd, MSG_DONTWAIT);
    if (rep.fd >= 0) close(rep.fd);
    c->nreq++;
    svc.served++;
    return rc ? "it does not read its replies" : NULL;
}

/* Read what client i sent; answer a request once it is complete. Returns 0 to keep it. */
static int serve_client(int i)
{
    struct client *c = svc.cl[i];
    struct zn_pxw_hdr h;
    const char *why = NULL;
    uint32_t need = ZN_PXW_HDR;
    if (c->have >= ZN_PXW_HDR) memcpy(&need, c->buf, sizeof(need));
    ssize_t n =
        recv_some(c->fd, c->buf + c->have, need - c->have, &c->in_fd, &c->extra_fds, MSG_DONTWAIT);
    if (n == -EAGAIN || n == -EINTR) return 0;
    if (n <= 0) {
        if (c->have) zn_info(ZN_PROXY, "proxy: process %d left mid-request", (int)c->pid);
        drop_client(i, NULL);
        return 1;
    }
    if (c->have == 0) c->since = zn_now_ns();
    c->have += (uint32_t)n;
    if (c->have < ZN_PXW_HDR) return 0;
    if (zn_pxw_decode(c->buf, c->have, &h, &why) != 0) {
        drop_client(i, why);
        return 1;
    }
    if (c->have < h.len) return 0;
    if (c->extra_fds) {
        /* No request carries more than one: whatever this is, it is not one of ours. */
        drop_client(i, "it passed more than one descriptor with a request");
        return 1;
    }
    int close_it = 0;
    why = answer(c, &h, &close_it);
    if (c->in_fd >= 0) close(c->in_fd);
    c->in_fd = -1;
    c->have = 0;
    c->since = zn_now_ns();
    if (why || close_it) {
        drop_client(i, why);
        return 1;
    }
    return 0;
}

/* --- The thread -------------------------------------------------------------------------- */

/* The state dump's provider (util/dump.h, on the dump thread): the service thread owns what
 * it prints, so it is asked to print through its wake pipe. */
static void request_dump(void *arg)
{
    (void)arg;
    char b = 'd';
    if (svc.wake[1] >= 0 && write(svc.wake[1], &b, 1) < 0) { /* a full pipe: a dump is due */
    }
}

/* Close clients that sat on a partial request (or idle) for longer than ZINC_TIMEOUT. */
static void expire_clients(void)
{
    int64_t now = zn_now_ns(), limit = zn_timeout_ns();
    for (int i = svc.ncl - 1; i >= 0; i--)
        if (now - svc.cl[i]->since > limit)
            drop_client(i, svc.cl[i]->have ? "stalled mid-request for ZINC_TIMEOUT"
                                           : "idle for ZINC_TIMEOUT");
}

static void *service_main(void *arg)
{
    (void)arg;
    struct pollfd p[MAX_CLIENTS + 2];
    while (!atomic_load(&svc.stop)) {
        p[0] = (struct pollfd){ .fd = svc.lfd, .events = POLLIN };
        p[1] = (struct pollfd){ .fd = svc.wake[0], .events = POLLIN };
        int n = svc.ncl;
        for (int i = 0; i < n; i++)
            p[2 + i] = (struct pollfd){ .fd = svc.cl[i]->fd, .events = POLLIN };
        /* A short timeout: the stall check runs even when nothing arrives. */
        if (poll(p, (nfds_t)(n + 2), 200) < 0 && errno != EINTR) break;
        if (p[1].revents & POLLIN) {
            char b[64];
            if (read(svc.wake[0], b, sizeof(b)) > 0 && !atomic_load(&svc.stop)) zn_proxy_dump();
        }
        /* Backwards: dropping client i moves the last one into its place. */
        for (int i = n - 1; i >= 0; i--)
            if (p[2 + i].revents) serve_client(i);
        if (p[0].revents & POLLIN) accept_client();
        expire_clients();
    }
    while (svc.ncl) drop_client(svc.ncl - 1, NULL);
    return NULL;
}

static ncclResult_t start_locked(void)
{
    struct sockaddr_un a;
    socklen_t len;
    zn_proxy_addr(getpid(), zn_proxy_pid_ns(), &a, &len);
    ncclResult_t res;
    if (pipe2(svc.wake, O_CLOEXEC | O_NONBLOCK) != 0)
        return zn_error(ncclSystemError, ZN_PROXY, "proxy: pipe: %s", strerror(errno));
    svc.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (svc.lfd < 0 || bind(svc.lfd, (struct sockaddr *)&a, len) != 0 || listen(svc.lfd, 64) != 0) {
        res = zn_error(ncclSystemError, ZN_PROXY, "proxy: cannot listen on Unix socket @%s: %s",
                       a.sun_path + 1, strerror(errno));
        goto err_close;
    }
    ZN_CHECK_GOTO(zn_proxy_progress_start(), res, err_close);
    atomic_store(&svc.stop, 0);
    svc.started_ns = zn_now_ns();
    svc.owner = getpid();
    if (pthread_create(&svc.thread, NULL, service_main, NULL) != 0) {
        res = zn_error(ncclSystemError, ZN_PROXY, "proxy: cannot start the service thread");
        goto err_progress;
    }
    zn_dump_add(request_dump, NULL);
    zn_info(ZN_PROXY, "proxy: service on @%s", a.sun_path + 1);
    return ncclSuccess;
err_progress:
    zn_proxy_progress_stop();
err_close:
    if (svc.lfd >= 0) close(svc.lfd);
    close(svc.wake[0]);
    close(svc.wake[1]);
    svc.lfd = svc.wake[0] = svc.wake[1] = -1;
    return res;
}

ncclResult_t zn_proxy_acquire(void)
{
    pthread_mutex_lock(&svc.lock);
    ncclResult_t res = svc.refs ? ncclSuccess : start_locked();
    if (res == ncclSuccess) svc.refs++;
    pthread_mutex_unlock(&svc.lock);
    return res;
}

void zn_proxy_release(void)
{
    pthread_mutex_lock(&svc.lock);
    if (svc.refs == 0 || --svc.refs > 0) {
        pthread_mutex_unlock(&svc.lock);
        return;
    }
    zn_dump_remove(request_dump, NULL); /* before the wake pipe goes */
    if (svc.owner != getpid()) {
        /* A child forked while the proxy ran: the threads stayed in the parent, the socket
         * name is the parent's. Close this copy's descriptors only. */
        close(svc.lfd);
        close(svc.wake[0]);
        close(svc.wake[1]);
        svc.lfd = svc.wake[0] = svc.wake[1] = -1;
    } else {
        atomic_store(&svc.stop, 1);
        char b = 's';
        if (write(svc.wake[1], &b, 1) < 0) { /* the 200 ms poll sees stop anyway */
        }
        pthread_join(svc.thread, NULL);
        zn_proxy_progress_stop();
        close(svc.lfd);
        close(svc.wake[0]);
        close(svc.wake[1]);
        svc.lfd = svc.wake[0] = svc.wake[1] = -1;
        if (svc.nh) zn_warn(ZN_PROXY, "proxy: stopped with %d handlers still registered", svc.nh);
        free(svc.h);
        svc.h = NULL;
        svc.nh = 0;
    }
    pthread_mutex_unlock(&svc.lock);
}

/* --- The client side --------------------------------------------------------------------- */

/* Read exactly len bytes before deadline. */
static int recv_exact(int s, uint8_t *buf, size_t len, int *in_fd, int64_t deadline)
{
    size_t have = 0;
    while (have < len) {
        struct pollfd p = { .fd = s, .events = POLLIN };
        int ms = zn_ms_left(deadline, 1000);
        if (ms <= 0 && zn_now_ns() > deadline) return -ETIMEDOUT;
        if (poll(&p, 1, ms) <= 0) continue;
        int extra = 0;
        ssize_t n = recv_some(s, buf + have, len - have, in_fd, &extra, MSG_DONTWAIT);
        if (extra) return -EPROTO; /* the service never sends more than one */
        if (n == -EAGAIN || n == -EINTR) continue;
        if (n <= 0) return n == 0 ? -EPIPE : (int)n;
        have += (size_t)n;
    }
    return 0;
}

static int connect_service(int32_t pid, uint64_t pid_ns, int64_t deadline, int *out)
{
    struct sockaddr_un a;
    socklen_t len;
    zn_proxy_addr(pid, pid_ns, &a, &len);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -errno;
    int ms = zn_ms_left(deadline, 600000);
    struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 + 1 };
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(s, (struct sockaddr *)&a, len) != 0) {
        int rc = errno == ENOENT || errno == ECONNREFUSED ? -ECONNREFUSED : -errno;
        close(s);
        return rc;
    }
    *out = s;
    return 0;
}

static int svc_call(void *ctx, int32_t pid, uint64_t pid_ns, int type, uint64_t comm, int dst,
                    int src, const struct zn_svc_req *req, struct zn_svc_reply *rep, uint32_t cap,
                    ncclResult_t *status, int64_t deadline)
{
    (void)ctx;
    int s = -1, in_fd = -1;
    rep->fd = -1;
    rep->len = 0;
    int rc = connect_service(pid, pid_ns, deadline, &s);
    if (rc) return rc;
    struct zn_pxw_hdr h = {
        .type = (uint16_t)type, .comm_hash = comm, .dst = (uint32_t)dst, .src = (uint32_t)src
    };
    rc = send_frame(s, &h, req->body, req->len, req->fd, 0);
    uint8_t frame[FRAME_MAX];
    struct zn_pxw_hdr rh;
    const char *why;
    if (!rc) rc = recv_exact(s, frame, ZN_PXW_HDR, &in_fd, deadline);
    if (!rc) rc = zn_pxw_decode(frame, ZN_PXW_HDR, &rh, &why);
    if (!rc && rh.len - ZN_PXW_HDR > cap) rc = -EMSGSIZE;
    if (!rc) rc = recv_exact(s, frame + ZN_PXW_HDR, rh.len - ZN_PXW_HDR, &in_fd, deadline);
    close(s);
    if (rc) {
        if (in_fd >= 0) close(in_fd);
        return rc;
    }
    memcpy(rep->body, frame + ZN_PXW_HDR, rh.len - ZN_PXW_HDR);
    rep->len = rh.len - ZN_PXW_HDR;
    rep->fd = in_fd;
    *status = (ncclResult_t)rh.status;
    return 0;
}

static const struct zn_svc proxy_svc = {
    .ctx = NULL,
    .serve = svc_serve,
    .unserve = svc_unserve,
    .call = svc_call,
};

const struct zn_svc *zn_proxy_svc(void)
{
    return &proxy_svc;
}

/* --- The state dump ---------------------------------------------------------------------- */

void zn_proxy_dump(void)
{
    int64_t now = zn_now_ns();
    zn_warn(ZN_PROXY,
            "proxy dump: pid %d, up %.1f s, %d clients, %llu requests served, "
            "%llu connections refused",
            (int)getpid(), (double)(now - svc.started_ns) / 1e9, svc.ncl,
            (unsigned long long)svc.served, (unsigned long long)svc.refused);
    for (int i = 0; i < svc.ncl; i++) {
        const struct client *c = svc.cl[i];
        zn_warn(ZN_PROXY,
                "proxy dump:  client pid %d: %llu requests, %u bytes of one pending, "
                "%.1f s since its last request",
                (int)c->pid, (unsigned long long)c->nreq, c->have, (double)(now - c->since) / 1e9);
    }
    pthread_mutex_lock(&svc.hlock);
    for (int i = 0; i < svc.nh; i++)
        zn_warn(ZN_PROXY, "proxy dump:  serves type %d for rank %d of communicator %016llx",
                svc.h[i].type, svc.h[i].rank, (unsigned long long)svc.h[i].comm);
    pthread_mutex_unlock(&svc.hlock);
    zn_proxy_progress_dump(); /* the rings and every client: GPU net engines, staging */
}
