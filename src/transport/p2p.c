/*
 * The p2p transport: arenas in device memory mapped by every GPU of the communicator.
 */
#include "p2p.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/param.h"
#include "util/sock.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int zn_p2p_reach(const struct zn_tctx *ctx, const char (*bus_ids)[20], uint8_t *reach, char *why,
                 size_t len)
{
    int n = ctx->nranks;
    memset(reach, 0, (size_t)n * (size_t)n);
    if (zn_params()->p2p_disable) {
        snprintf(why, len, "ZINC_P2P_DISABLE=1");
        return 0;
    }
    if (n > ZN_P2P_MAX_RANKS) {
        snprintf(why, len, "more than %d GPUs", ZN_P2P_MAX_RANKS);
        return 0;
    }
    uint64_t host = ctx->peers[0].host_hash;
    for (int r = 0; r < n; r++) {
        if (ctx->peers[r].host_hash != host) {
            snprintf(why, len, "ranks on more than one host");
            return 0;
        }
    }
    /* Each pair's bus ids, as seen from this process (the devices of one host are visible to
     * all its processes unless CUDA_VISIBLE_DEVICES hides them; then the pair is treated as
     * not capable). */
    for (int a = 0; a < n; a++) {
        int da = zn_cuda_device_by_bus_id(bus_ids[a]);
        for (int b = 0; b < n; b++) {
            int db = zn_cuda_device_by_bus_id(bus_ids[b]);
            reach[a * n + b] = a == b || (da >= 0 && db >= 0 && zn_cuda_can_access_peer(da, db));
            if (!reach[a * n + b] && !*why)
                snprintf(why, len, "GPU %s cannot access GPU %s", bus_ids[a], bus_ids[b]);
        }
    }
    return 1;
}

/* Depth-first search for a cycle through every rank, neighbours tried in rank order, so every
 * rank finds the same one from the same matrix. */
static int ring_dfs(const uint8_t *reach, int n, int *order, int depth, uint32_t used)
{
    if (depth == n) return reach[order[n - 1] * n + order[0]] && reach[order[0] * n + order[n - 1]];
    for (int r = 1; r < n; r++) {
        int last = order[depth - 1];
        if ((used >> r) & 1 || !reach[last * n + r] || !reach[r * n + last]) continue;
        order[depth] = r;
        if (ring_dfs(reach, n, order, depth + 1, used | (1u << r))) return 1;
    }
    return 0;
}

int zn_p2p_find_ring(const uint8_t *reach, int n, int *order)
{
    if (n < 1 || n > ZN_P2P_MAX_RANKS) return 0;
    order[0] = 0;
    /* One rank: a "ring" only if its GPU is usable at all (zn_p2p_reach leaves the diagonal 0
     * when the p2p transport is off, e.g. ZINC_P2P_DISABLE=1). */
    return n == 1 ? reach[0] != 0 : ring_dfs(reach, n, order, 1, 1u);
}

/* What each rank tells the others about its arena. */
struct arena_info {
    int32_t pid;
    int32_t kind; /* 0: cuMem (fd over the Unix socket), 1: cudaMalloc (IPC handle) */
    uint64_t ptr; /* for ranks of the same process */
    uint64_t bytes;
    uint8_t ipc[64];
    char bus_id[20];
    uint32_t pad;
};

static void uds_name(struct sockaddr_un *a, socklen_t *len, uint64_t hash, int rank,
                     const char *what)
{
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    /* Abstract namespace: nothing to clean up in the file system if the process dies. */
    int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "zinc-%s-%016llx-%d", what,
                     (unsigned long long)hash, rank);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* One message of len bytes with an optional file descriptor (fd < 0: none) as SCM_RIGHTS. */
static int send_msg_fd(int sock, const void *msg, size_t len, int fd)
{
    struct iovec iov = { .iov_base = (void *)msg, .iov_len = len };
    char ctl[CMSG_SPACE(sizeof(int))];
    memset(ctl, 0, sizeof(ctl));
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (fd >= 0) {
        m.msg_control = ctl;
        m.msg_controllen = sizeof(ctl);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    return sendmsg(sock, &m, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -errno;
}

/* Receive one message of exactly len bytes; *fd gets a passed descriptor or -1. */
static int recv_msg_fd(int sock, void *msg, size_t len, int *fd)
{
    struct iovec iov = { .iov_base = msg, .iov_len = len };
    char ctl[CMSG_SPACE(sizeof(int))];
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)
    };
    *fd = -1;
    ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_WAITALL);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (c && c->cmsg_type == SCM_RIGHTS) memcpy(fd, CMSG_DATA(c), sizeof(int));
    if (n != (ssize_t)len) {
        if (*fd >= 0) close(*fd);
        *fd = -1;
        return n == 0 ? -EPIPE : n < 0 ? -errno : -EPROTO;
    }
    return 0;
}

static int send_fd(int sock, int fd)
{
    char byte = 'z';
    return send_msg_fd(sock, &byte, 1, fd);
}

static int recv_fd(int sock, int *fd)
{
    char byte;
    int rc = recv_msg_fd(sock, &byte, 1, fd);
    if (rc == 0 && *fd < 0) return -EPROTO;
    return rc;
}

/* The next connection to one of the services below (which hand out GPU memory), if one comes
 * within 50 ms and its process runs as this user; else -1. */
static int accept_own_user(int lfd, const char *service)
{
    struct pollfd p = { .fd = lfd, .events = POLLIN };
    if (poll(&p, 1, 50) <= 0) return -1;
    int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0) return -1;
    if (zn_sock_peer_is_self_user(c)) return c;
    zn_warn(ZN_P2P, "p2p: refused a connection from another user to the %s service", service);
    close(c);
    return -1;
}

/* Serves this rank's arena fd to the peers of other processes that ask for it. */
struct server {
    int lfd;
    int expected;
    const struct zn_cumem *mem;
    int64_t deadline;
    const atomic_int *abort_flag;
    int served;
    int err;
};

static void *serve(void *arg)
{
    struct server *s = arg;
    while (s->served < s->expected) {
        if (zn_now_ns() > s->deadline || (s->abort_flag && atomic_load(s->abort_flag))) {
            s->err = -ETIMEDOUT;
            return NULL;
        }
        int c = accept_own_user(s->lfd, "arena");
        if (c < 0) continue;
        int fd = -1;
        if (zn_cumem_export_fd(s->mem, &fd) == ncclSuccess) {
            if (send_fd(c, fd) == 0) s->served++;
            close(fd);
        }
        close(c);
    }
    return NULL;
}

static int fetch_fd(uint64_t hash, int peer, int64_t deadline, const atomic_int *abort_flag,
                    int *fd)
{
    struct sockaddr_un a;
    socklen_t len;
    uds_name(&a, &len, hash, peer, "p2p");
    for (;;) {
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0) return -errno;
        if (connect(s, (struct sockaddr *)&a, len) == 0) {
            struct pollfd p = { .fd = s, .events = POLLIN };
            int rc = poll(&p, 1, zn_ms_left(deadline, 60000)) > 0 ? recv_fd(s, fd) : -ETIMEDOUT;
            close(s);
            return rc;
        }
        close(s);
        if ((abort_flag && atomic_load(abort_flag)) || zn_now_ns() > deadline) return -ETIMEDOUT;
        usleep(1000);
    }
}

static ncclResult_t alloc_local(struct zn_p2p *p, int dev, size_t bytes, struct arena_info *me)
{
    me->pid = (int32_t)getpid();
    /* cuMem memory exported as a file descriptor where the driver can; otherwise cudaMalloc
     * memory and a CUDA IPC handle (ZINC_P2P_IPC=1 forces this, so that machines with cuMem
     * can test the fallback). */
    if (!zn_params()->p2p_ipc && zn_cuda_cumem_fd_supported(dev) &&
        zn_cumem_alloc(dev, bytes, &p->local) == ncclSuccess) {
        p->local_kind = 0;
        p->peer[p->rank] = p->local.ptr;
    } else {
        zn_clear_last_error();
        ZN_CHECK(zn_cuda_malloc(&p->peer[p->rank], bytes, "the p2p arena"));
        p->local_kind = 1;
        ZN_CHECK(zn_cuda_ipc_get(p->peer[p->rank], me->ipc));
    }
    me->kind = p->local_kind;
    me->ptr = (uint64_t)(uintptr_t)p->peer[p->rank];
    /* Importers map the allocation's real size (rounded up to the granularity). */
    me->bytes = p->local_kind == 0 ? p->local.size : bytes;
    /* The control words must read 0 before any peer can see the arena. */
    return zn_cuda_memset(p->peer[p->rank], 0, bytes);
}

/* Map every peer's arena; fds for cuMem peers of other processes come from their servers. */
static ncclResult_t map_peers(struct zn_p2p *p, const struct zn_tctx *ctx,
                              const struct arena_info *all, const uint8_t *want)
{
    int64_t deadline = zn_now_ns() + zn_timeout_ns();
    for (int k = 1; k < p->nranks; k++) {
        int r = (p->rank + k) % p->nranks;
        if (!want[r]) continue;
        char who[128];
        zn_peer_str(ctx, r, who, sizeof(who));
        if (all[r].kind == 1 && all[r].pid == all[p->rank].pid) {
            /* cudaMalloc memory of this process: the pointer works once peer access is on
             * (IPC handles cannot be opened by the process that made them). */
            int pdev = zn_cuda_device_by_bus_id(all[r].bus_id);
            if (pdev < 0)
                return zn_error(ncclInternalError, ZN_P2P, "p2p: GPU %s of %s is not visible",
                                all[r].bus_id, who);
            ZN_CHECK(zn_cuda_enable_peer_access(p->dev, pdev));
            p->peer[r] = (void *)(uintptr_t)all[r].ptr;
            p->peer_kind[r] = 0;
            continue;
        }
        if (all[r].kind == 0) {
            int fd = -1, rc = fetch_fd(ctx->comm_hash, r, deadline, ctx->abort_flag, &fd);
            if (rc)
                return zn_error(ncclRemoteError, ZN_P2P,
                                "p2p: could not get the GPU memory handle of %s: %s", who,
                                strerror(-rc));
            ncclResult_t res = zn_cumem_import_fd(fd, all[r].bytes, p->dev, &p->imported[r]);
            close(fd);
            ZN_CHECK(res);
            p->peer[r] = p->imported[r].ptr;
            p->peer_kind[r] = 1;
        } else {
            ZN_CHECK(zn_cuda_ipc_open(all[r].ipc, &p->peer[r]));
            p->peer_kind[r] = 2;
        }
    }
    return ncclSuccess;
}

/* The listener of this rank's arena fd server (cuMem arenas), in *lfd (closed by the caller). */
static ncclResult_t listen_fd_server(const struct zn_tctx *ctx, int *lfd)
{
    struct sockaddr_un a;
    socklen_t len;
    uds_name(&a, &len, ctx->comm_hash, ctx->rank, "p2p");
    *lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*lfd < 0 || bind(*lfd, (struct sockaddr *)&a, len) != 0 || listen(*lfd, 64) != 0)
        return zn_error(ncclSystemError, ZN_P2P, "p2p: cannot listen on a Unix socket: %s",
                        strerror(errno));
    return ncclSuccess;
}

ncclResult_t zn_p2p_create(const struct zn_tctx *ctx, int dev, size_t bytes, const uint8_t *want,
                           struct zn_p2p **out)
{
    struct zn_p2p *p = calloc(1, sizeof(*p));
    struct arena_info *all = calloc((size_t)ctx->nranks, sizeof(*all));
    if (!p || !all) {
        free(p);
        free(all);
        return zn_error(ncclSystemError, ZN_P2P, "out of memory");
    }
    p->rank = ctx->rank;
    p->nranks = ctx->nranks;
    p->dev = dev;
    p->bytes = bytes;
    ncclResult_t res;
    int lfd = -1;
    pthread_t thr;
    int thr_started = 0;
    struct server srv = { .lfd = -1 };
    ZN_CHECK_GOTO(zn_cuda_set_device(dev), res, fail);
    ZN_CHECK_GOTO(alloc_local(p, dev, bytes, &all[ctx->rank]), res, fail);
    ZN_CHECK_GOTO(zn_cuda_bus_id(dev, all[ctx->rank].bus_id, sizeof(all[ctx->rank].bus_id)), res,
                  fail);
    /* Listen before the allgather, so that peers that learn of us can connect at once. */
    if (p->local_kind == 0) ZN_CHECK_GOTO(listen_fd_server(ctx, &lfd), res, fail);
    ZN_CHECK_GOTO(zn_boot_allgather(ctx->boot, all, sizeof(*all)), res, fail);
    if (p->local_kind == 0) {
        /* cuMem arenas are mapped through an imported fd by every peer that maps it, in this
         * process or not: access rights are per mapping, and each importer sets its own. The
         * wish lists are symmetric, so the peers that fetch ours are the ones we map. */
        int others = 0;
        for (int r = 0; r < ctx->nranks; r++) others += r != ctx->rank && want[r];
        srv = (struct server){ .lfd = lfd,
                               .expected = others,
                               .mem = &p->local,
                               .deadline = zn_now_ns() + zn_timeout_ns(),
                               .abort_flag = ctx->abort_flag };
        if (others) {
            if (pthread_create(&thr, NULL, serve, &srv) != 0) {
                res = zn_error(ncclSystemError, ZN_P2P, "p2p: cannot start the fd server thread");
                goto fail;
            }
            thr_started = 1;
        }
    }
    res = map_peers(p, ctx, all, want);
    if (thr_started) {
        pthread_join(thr, NULL);
        thr_started = 0;
        if (res == ncclSuccess && srv.err)
            res = zn_error(ncclRemoteError, ZN_P2P,
                           "p2p: peers did not fetch this rank's GPU memory handle in time");
    }
    if (res != ncclSuccess) goto fail;
    /* Nobody pushes into an arena before everyone has mapped everyone. */
    ZN_CHECK_GOTO(zn_boot_barrier(ctx->boot), res, fail);
    if (lfd >= 0) close(lfd);
    free(all);
    int mapped = 0;
    for (int r = 0; r < ctx->nranks; r++) mapped += r != ctx->rank && want[r];
    zn_info(ZN_P2P, "p2p: arena of %zu bytes on GPU %d (%s), %d of %d peers mapped", bytes, dev,
            p->local_kind == 0 ? "cuMem" : "cudaMalloc/IPC", mapped, ctx->nranks - 1);
    *out = p;
    return ncclSuccess;
fail:
    if (thr_started) {
        srv.deadline = 0;
        pthread_join(thr, NULL);
    }
    if (lfd >= 0) close(lfd);
    free(all);
    zn_p2p_destroy(p);
    return res;
}

void zn_p2p_destroy(struct zn_p2p *p)
{
    if (!p) return;
    for (int r = 0; r < p->nranks; r++) {
        if (p->peer_kind[r] == 1) zn_cumem_free(&p->imported[r]);
        if (p->peer_kind[r] == 2) zn_cuda_ipc_close(p->peer[r]);
    }
    if (p->local_kind == 0)
        zn_cumem_free(&p->local);
    else
        zn_cuda_free(p->peer[p->rank]);
    free(p);
}

/* --- Registered buffers ------------------------------------------------------------------
 * Each rank serves a Unix socket for the life of the communicator. A rank that registers a
 * buffer sends every peer a message with the allocation's fd; the peer's service thread maps
 * it on its GPU and answers with the address it mapped it at. */

enum { REG_SHARE = 1, REG_UNSHARE = 2 };

struct reg_msg {
    uint32_t op, src, id, pad;
    uint64_t size;
};

struct reg_reply {
    int32_t status; /* ncclResult_t */
    uint32_t pad;
    uint64_t ptr;
};

struct reg_import {
    int src;
    uint32_t id;
    struct zn_cumem mem;
};

struct zn_p2p_reg {
    int lfd, dev, rank;
    pthread_t thread;
    int started;
    atomic_int stop;
    struct reg_import *imp; /* the service thread's alone */
    int nimp;
};

static void reg_serve(struct zn_p2p_reg *s, int c)
{
    struct pollfd p = { .fd = c, .events = POLLIN };
    struct reg_msg m;
    int fd = -1;
    if (poll(&p, 1, 10000) <= 0 || recv_msg_fd(c, &m, sizeof(m), &fd) != 0) return;
    struct reg_reply r = { .status = ncclSuccess };
    if (m.op == REG_SHARE && fd >= 0) {
        struct reg_import *n = realloc(s->imp, (size_t)(s->nimp + 1) * sizeof(*n));
        struct zn_cumem mem;
        ncclResult_t res = !n ? zn_error(ncclSystemError, ZN_P2P, "out of memory")
                              : zn_cumem_import_fd(fd, m.size, s->dev, &mem);
        if (n) s->imp = n;
        if (res == ncclSuccess) {
            s->imp[s->nimp++] = (struct reg_import){ .src = (int)m.src, .id = m.id, .mem = mem };
            r.ptr = (uint64_t)(uintptr_t)mem.ptr;
        } else {
            zn_warn(ZN_P2P, "p2p: cannot map the buffer rank %u registered: %s", m.src,
                    zn_last_error());
            r.status = res;
        }
    } else if (m.op == REG_UNSHARE) {
        for (int i = 0; i < s->nimp; i++)
            if (s->imp[i].src == (int)m.src && s->imp[i].id == m.id) {
                zn_cumem_free(&s->imp[i].mem);
                s->imp[i] = s->imp[--s->nimp];
                break;
            }
    } else {
        r.status = ncclInternalError;
    }
    if (fd >= 0) close(fd);
    send_msg_fd(c, &r, sizeof(r), -1);
}

static void *reg_main(void *arg)
{
    struct zn_p2p_reg *s = arg;
    zn_log_rank = s->rank;
    if (zn_cuda_set_device(s->dev) != ncclSuccess) return NULL;
    while (!atomic_load(&s->stop)) {
        int c = accept_own_user(s->lfd, "registration");
        if (c < 0) continue;
        reg_serve(s, c);
        close(c);
    }
    return NULL;
}

ncclResult_t zn_p2p_reg_start(const struct zn_tctx *ctx, int dev, struct zn_p2p_reg **out)
{
    struct zn_p2p_reg *s = calloc(1, sizeof(*s));
    if (!s) return zn_error(ncclSystemError, ZN_P2P, "out of memory");
    s->dev = dev;
    s->rank = ctx->rank;
    struct sockaddr_un a;
    socklen_t len;
    uds_name(&a, &len, ctx->comm_hash, ctx->rank, "reg");
    s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&a, len) != 0 || listen(s->lfd, 64) != 0) {
        ncclResult_t r =
            zn_error(ncclSystemError, ZN_P2P,
                     "p2p: cannot listen on a Unix socket for registrations: %s", strerror(errno));
        zn_p2p_reg_stop(s);
        return r;
    }
    if (pthread_create(&s->thread, NULL, reg_main, s) != 0) {
        zn_p2p_reg_stop(s);
        return zn_error(ncclSystemError, ZN_P2P, "p2p: cannot start the registration thread");
    }
    s->started = 1;
    *out = s;
    return ncclSuccess;
}

void zn_p2p_reg_stop(struct zn_p2p_reg *s)
{
    if (!s) return;
    atomic_store(&s->stop, 1);
    if (s->started) pthread_join(s->thread, NULL);
    if (s->lfd >= 0) close(s->lfd);
    for (int i = 0; i < s->nimp; i++) zn_cumem_free(&s->imp[i].mem);
    free(s->imp);
    free(s);
}

/* One request to peer's service: connect (bounded), send, wait for the answer. */
static int reg_call(const struct zn_tctx *ctx, int peer, const struct reg_msg *m, int fd,
                    struct reg_reply *r)
{
    struct sockaddr_un a;
    socklen_t len;
    uds_name(&a, &len, ctx->comm_hash, peer, "reg");
    int64_t deadline = zn_now_ns() + zn_timeout_ns();
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -errno;
    int rc = connect(s, (struct sockaddr *)&a, len) == 0 ? 0 : -errno;
    if (rc == 0) rc = send_msg_fd(s, m, sizeof(*m), fd);
    if (rc == 0) {
        struct pollfd p = { .fd = s, .events = POLLIN };
        rc = poll(&p, 1, zn_ms_left(deadline, 600000)) > 0 ? 0 : -ETIMEDOUT;
    }
    if (rc == 0) {
        int none = -1;
        rc = recv_msg_fd(s, r, sizeof(*r), &none);
        if (none >= 0) close(none);
    }
    close(s);
    return rc;
}

ncclResult_t zn_p2p_reg_share(const struct zn_tctx *ctx, int fd, size_t size, uint32_t id,
                              void **peer_ptr)
{
    struct reg_msg m = { .op = REG_SHARE, .src = (uint32_t)ctx->rank, .id = id, .size = size };
    for (int k = 1; k < ctx->nranks; k++) {
        int q = (ctx->rank + k) % ctx->nranks;
        struct reg_reply r = { 0 };
        int rc = reg_call(ctx, q, &m, fd, &r);
        if (rc != 0 || r.status != ncclSuccess) {
            char who[128];
            zn_peer_str(ctx, q, who, sizeof(who));
            ncclResult_t res = zn_error(rc ? ncclRemoteError : (ncclResult_t)r.status, ZN_P2P,
                                        "p2p: %s could not map the registered buffer: %s", who,
                                        rc ? strerror(-rc) : "see its log");
            /* Peers that mapped it already let go again. */
            for (int j = 1; j < k; j++) zn_p2p_reg_unshare(ctx, id, (ctx->rank + j) % ctx->nranks);
            return res;
        }
        peer_ptr[q] = (void *)(uintptr_t)r.ptr;
    }
    return ncclSuccess;
}

void zn_p2p_reg_unshare(const struct zn_tctx *ctx, uint32_t id, int peer)
{
    struct reg_msg m = { .op = REG_UNSHARE, .src = (uint32_t)ctx->rank, .id = id };
    for (int k = 1; k < ctx->nranks; k++) {
        int q = (ctx->rank + k) % ctx->nranks;
        if (peer >= 0 && q != peer) continue;
        struct reg_reply r;
        if (reg_call(ctx, q, &m, -1, &r) != 0)
            zn_info(ZN_P2P, "p2p: rank %d did not answer a deregistration (gone?)", q);
    }
}
