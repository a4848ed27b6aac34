/*
 * The p2p transport: arenas in device memory mapped by every GPU of the communicator.
 */
#include "gpu_peer.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/param.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The process service of rank r (the proxy's, reached through ctx->svc). */
static int svc_call(const struct zn_tctx *ctx, int r, int type, const struct zn_svc_req *req,
                    struct zn_svc_reply *rep, uint32_t cap, ncclResult_t *status, int64_t deadline)
{
    const struct zn_peer_info *pi = &ctx->peers[r];
    return ctx->svc->call(ctx->svc->ctx, pi->pid, pi->pid_ns, type, ctx->comm_hash, r, ctx->rank,
                          req, rep, cap, status, deadline);
}

/* Answers a peer's request for this rank's arena: the cuMem allocation as a file descriptor
 * (the service thread passes it and closes its copy). */
static ncclResult_t arena_fd_handler(void *arg, const struct zn_svc_req *req,
                                     struct zn_svc_reply *rep)
{
    const struct zn_p2p *p = arg;
    (void)req;
    return zn_cumem_export_fd(&p->local, &rep->fd);
}

/* Fetch peer's arena fd from its process service. The peer registered its handler before the
 * allgather that told us about it; a service not yet listening is retried until deadline. */
static int fetch_fd(const struct zn_tctx *ctx, int peer, int64_t deadline, int *fd)
{
    for (;;) {
        struct zn_svc_req req = { .src = (uint32_t)ctx->rank, .fd = -1 };
        char none[8];
        struct zn_svc_reply rep = { .body = none, .fd = -1 };
        ncclResult_t st = ncclSuccess;
        int rc = svc_call(ctx, peer, ZN_SVC_ARENA_FD, &req, &rep, sizeof(none), &st, deadline);
        if (rc == 0 && (st != ncclSuccess || rep.fd < 0)) {
            if (rep.fd >= 0) close(rep.fd);
            return -EPROTO;
        }
        if (rc == 0) {
            *fd = rep.fd;
            return 0;
        }
        if (rc != -ECONNREFUSED) return rc;
        if ((ctx->abort_flag && atomic_load(ctx->abort_flag)) || zn_now_ns() > deadline)
            return -ETIMEDOUT;
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
            int fd = -1, rc = fetch_fd(ctx, r, deadline, &fd);
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

ncclResult_t zn_p2p_create(const struct zn_tctx *ctx, int dev, size_t bytes, const uint8_t *want,
                           struct zn_p2p **out)
{
    if (!ctx->svc)
        return zn_error(ncclInternalError, ZN_P2P,
                        "p2p: no process service to exchange GPU memory handles through");
    if (ctx->nranks > ZN_P2P_MAX_COMM)
        return zn_error(ncclInternalError, ZN_P2P, "p2p: arenas for %d ranks (at most %d)",
                        ctx->nranks, ZN_P2P_MAX_COMM);
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
    int serving = 0;
    ZN_CHECK_GOTO(zn_cuda_set_device(dev), res, fail);
    ZN_CHECK_GOTO(alloc_local(p, dev, bytes, &all[ctx->rank]), res, fail);
    ZN_CHECK_GOTO(zn_cuda_bus_id(dev, all[ctx->rank].bus_id, sizeof(all[ctx->rank].bus_id)), res,
                  fail);
    /* cuMem arenas are mapped through an imported fd by every peer that maps it, in this
     * process or not: access rights are per mapping, and each importer sets its own. The
     * process service hands the fd out; its handler is in place before the allgather, so that
     * peers that learn of us can ask at once, and stays until the barrier below, by which
     * every peer has mapped what it wanted. */
    if (p->local_kind == 0) {
        ZN_CHECK_GOTO(ctx->svc->serve(ctx->svc->ctx, ZN_SVC_ARENA_FD, ctx->comm_hash, ctx->rank,
                                      arena_fd_handler, p),
                      res, fail);
        serving = 1;
    }
    ZN_CHECK_GOTO(zn_boot_allgather(ctx->boot, all, sizeof(*all)), res, fail);
    ZN_CHECK_GOTO(map_peers(p, ctx, all, want), res, fail);
    /* Nobody pushes into an arena before everyone has mapped everyone. */
    ZN_CHECK_GOTO(zn_boot_barrier(ctx->boot), res, fail);
    if (serving) ctx->svc->unserve(ctx->svc->ctx, ZN_SVC_ARENA_FD, ctx->comm_hash, ctx->rank);
    free(all);
    int mapped = 0;
    for (int r = 0; r < ctx->nranks; r++) mapped += r != ctx->rank && want[r];
    zn_info(ZN_P2P, "p2p: arena of %zu bytes on GPU %d (%s), %d of %d peers mapped", bytes, dev,
            p->local_kind == 0 ? "cuMem" : "cudaMalloc/IPC", mapped, ctx->nranks - 1);
    *out = p;
    return ncclSuccess;
fail:
    if (serving) ctx->svc->unserve(ctx->svc->ctx, ZN_SVC_ARENA_FD, ctx->comm_hash, ctx->rank);
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
    free(p->saved);
    free(p);
}

size_t zn_p2p_own_bytes(const struct zn_p2p *p, int *releasable)
{
    *releasable = p->local_kind == 0;
    return p->local_kind == 0 ? p->local.size : p->bytes;
}

/* --- Suspension ---------------------------------------------------------------------------
 * Only cuMem memory is released: its address ranges stay reserved, so the pointers the
 * executor and captured graphs hold need no update. An importer's mapping keeps the owner's
 * memory alive, so the owner's release returns nothing until every peer has unmapped its
 * import too: every rank unmaps its imports and releases its own arena, and the final barrier
 * of zn_p2p_suspend is the point from which the memory is free on every GPU. */

/* Every rank's verdict on a step: this rank's failure, or the first other rank's. */
static ncclResult_t agree(const struct zn_tctx *ctx, ncclResult_t mine, const char *what)
{
    int32_t *all = calloc((size_t)ctx->nranks, sizeof(*all));
    if (!all) return zn_error(ncclSystemError, ZN_P2P, "out of memory");
    all[ctx->rank] = (int32_t)mine;
    ncclResult_t res = zn_boot_allgather(ctx->boot, all, sizeof(*all));
    if (mine != ncclSuccess) res = mine; /* logged where it happened */
    for (int r = 0; res == ncclSuccess && r < ctx->nranks; r++)
        if (all[r] != ncclSuccess)
            res = zn_error(ncclRemoteError, ZN_P2P, "p2p: rank %d could not %s (see its log)", r,
                           what);
    free(all);
    return res;
}

/* Unmap the peers' cuMem arenas and release the own one (what is not released already). */
static void release_all(struct zn_p2p *p)
{
    for (int r = 0; r < p->nranks; r++)
        if (p->peer_kind[r] == 1 && zn_cumem_release(&p->imported[r]) != ncclSuccess)
            zn_warn(ZN_P2P, "p2p: rank %d could not unmap rank %d's arena: %s", p->rank, r,
                    zn_last_error());
    if (p->local_kind == 0 && zn_cumem_release(&p->local) != ncclSuccess)
        zn_warn(ZN_P2P, "p2p: rank %d could not release its arena: %s", p->rank, zn_last_error());
}

ncclResult_t zn_p2p_suspend(const struct zn_tctx *ctx, struct zn_p2p *p, size_t keep)
{
    if (p->suspended)
        return zn_error(ncclInternalError, ZN_P2P, "p2p: rank %d's arena is suspended already",
                        p->rank);
    int cur = zn_cuda_enter(p->dev);
    ncclResult_t mine = cur < 0 ? zn_cuda_set_device(p->dev) : ncclSuccess;
    if (mine == ncclSuccess && p->local_kind == 0 && keep > 0) {
        if (keep > p->bytes) keep = p->bytes;
        p->saved = malloc(keep);
        mine = p->saved ? zn_cuda_memcpy_sync(p->saved, p->local.ptr, keep)
                        : zn_error(ncclSystemError, ZN_P2P, "out of memory");
        p->saved_bytes = keep;
    }
    ncclResult_t res = agree(ctx, mine, "save its arena's control words");
    if (res == ncclSuccess) {
        release_all(p);
        p->suspended = 1;
        res = zn_boot_barrier(ctx->boot);
    } else {
        free(p->saved);
        p->saved = NULL;
    }
    zn_cuda_leave(p->dev, cur);
    return res;
}

/* The own arena back: new memory at the same address, zeroed, its saved words restored. */
static ncclResult_t rebuild_own(struct zn_p2p *p)
{
    ZN_CHECK(zn_cumem_recreate(&p->local));
    ZN_CHECK(zn_cuda_memset(p->local.ptr, 0, p->local.size));
    if (p->saved) ZN_CHECK(zn_cuda_memcpy_sync(p->local.ptr, p->saved, p->saved_bytes));
    return ncclSuccess;
}

/* The peers' cuMem arenas mapped again where they were, from fds their services hand out. */
static ncclResult_t remap_peers(const struct zn_tctx *ctx, struct zn_p2p *p)
{
    int64_t deadline = zn_now_ns() + zn_timeout_ns();
    for (int k = 1; k < p->nranks; k++) {
        int r = (p->rank + k) % p->nranks;
        if (p->peer_kind[r] != 1 || !p->imported[r].released) continue;
        int fd = -1, rc = fetch_fd(ctx, r, deadline, &fd);
        if (rc) {
            char who[128];
            zn_peer_str(ctx, r, who, sizeof(who));
            return zn_error(ncclRemoteError, ZN_P2P,
                            "p2p: could not get the GPU memory handle of %s again: %s", who,
                            strerror(-rc));
        }
        ncclResult_t res = zn_cumem_reimport_fd(fd, &p->imported[r]);
        close(fd);
        ZN_CHECK(res);
    }
    return ncclSuccess;
}

ncclResult_t zn_p2p_resume(const struct zn_tctx *ctx, struct zn_p2p *p)
{
    if (!p->suspended)
        return zn_error(ncclInternalError, ZN_P2P, "p2p: rank %d's arena is not suspended",
                        p->rank);
    /* The runtime's copies and memsets run on the current device, which must be the arena's
     * (the memory is accessible from it alone). */
    int cur = zn_cuda_enter(p->dev);
    ncclResult_t mine = cur < 0 ? zn_cuda_set_device(p->dev) : ncclSuccess;
    int serving = 0;
    if (mine == ncclSuccess && p->local_kind == 0) {
        mine = rebuild_own(p);
        /* The peers map it again through an fd from our process service, as at creation. */
        if (mine == ncclSuccess)
            mine = ctx->svc->serve(ctx->svc->ctx, ZN_SVC_ARENA_FD, ctx->comm_hash, ctx->rank,
                                   arena_fd_handler, p);
        serving = mine == ncclSuccess;
    }
    ncclResult_t res = agree(ctx, mine, "rebuild its GPU arena");
    if (res == ncclSuccess)
        res = agree(ctx, remap_peers(ctx, p), "map its peers' GPU arenas again");
    /* Past the last agreement every peer has mapped what it wanted. */
    if (serving) ctx->svc->unserve(ctx->svc->ctx, ZN_SVC_ARENA_FD, ctx->comm_hash, ctx->rank);
    if (res != ncclSuccess) {
        release_all(p); /* every rank does: all stay suspended, resume can be retried */
    } else {
        free(p->saved);
        p->saved = NULL;
        p->saved_bytes = 0;
        p->suspended = 0;
    }
    zn_cuda_leave(p->dev, cur);
    return res;
}

/* --- Registered buffers ------------------------------------------------------------------
 * Each rank has two handlers on its process service for the life of the communicator. A rank
 * that registers a buffer sends every peer's service a request with the allocation's fd; the
 * peer's handler maps it on the peer's GPU and answers with the address it mapped it at. */

struct reg_msg {
    uint32_t src, id;
    uint64_t size;
};

struct reg_reply {
    uint64_t ptr;
};

struct reg_import {
    int src;
    uint32_t id;
    struct zn_cumem mem;
};

struct zn_p2p_reg {
    const struct zn_svc *svc;
    uint64_t comm_hash;
    int dev, rank;
    struct reg_import *imp; /* touched by the handlers only, one at a time (service thread) */
    int nimp;
};

static ncclResult_t reg_share_handler(void *arg, const struct zn_svc_req *req,
                                      struct zn_svc_reply *rep)
{
    struct zn_p2p_reg *s = arg;
    struct reg_msg m;
    if (req->len != sizeof(m) || req->fd < 0)
        return zn_error(ncclInternalError, ZN_P2P,
                        "p2p: a registration request from rank %u is malformed", req->src);
    memcpy(&m, req->body, sizeof(m));
    /* The service thread serves every GPU of the process: map on this rank's. */
    ZN_CHECK(zn_cuda_set_device(s->dev));
    struct reg_import *n = realloc(s->imp, (size_t)(s->nimp + 1) * sizeof(*n));
    if (!n) return zn_error(ncclSystemError, ZN_P2P, "out of memory");
    s->imp = n;
    struct zn_cumem mem;
    ncclResult_t res = zn_cumem_import_fd(req->fd, m.size, s->dev, &mem);
    if (res != ncclSuccess) {
        zn_warn(ZN_P2P, "p2p: cannot map the buffer rank %u registered: %s", m.src,
                zn_last_error());
        return res;
    }
    s->imp[s->nimp++] = (struct reg_import){ .src = (int)m.src, .id = m.id, .mem = mem };
    struct reg_reply r = { .ptr = (uint64_t)(uintptr_t)mem.ptr };
    memcpy(rep->body, &r, sizeof(r));
    rep->len = sizeof(r);
    return ncclSuccess;
}

static ncclResult_t reg_unshare_handler(void *arg, const struct zn_svc_req *req,
                                        struct zn_svc_reply *rep)
{
    struct zn_p2p_reg *s = arg;
    struct reg_msg m;
    (void)rep;
    if (req->len != sizeof(m))
        return zn_error(ncclInternalError, ZN_P2P,
                        "p2p: a deregistration request from rank %u is malformed", req->src);
    memcpy(&m, req->body, sizeof(m));
    ZN_CHECK(zn_cuda_set_device(s->dev));
    for (int i = 0; i < s->nimp; i++)
        if (s->imp[i].src == (int)m.src && s->imp[i].id == m.id) {
            zn_cumem_free(&s->imp[i].mem);
            s->imp[i] = s->imp[--s->nimp];
            break;
        }
    return ncclSuccess;
}

ncclResult_t zn_p2p_reg_start(const struct zn_tctx *ctx, int dev, struct zn_p2p_reg **out)
{
    if (!ctx->svc)
        return zn_error(ncclInternalError, ZN_P2P,
                        "p2p: no process service to share registered buffers through");
    struct zn_p2p_reg *s = calloc(1, sizeof(*s));
    if (!s) return zn_error(ncclSystemError, ZN_P2P, "out of memory");
    *s = (struct zn_p2p_reg){
        .svc = ctx->svc, .comm_hash = ctx->comm_hash, .dev = dev, .rank = ctx->rank
    };
    ncclResult_t res;
    ZN_CHECK_GOTO(
        s->svc->serve(s->svc->ctx, ZN_SVC_REG_SHARE, s->comm_hash, s->rank, reg_share_handler, s),
        res, err_free);
    ZN_CHECK_GOTO(s->svc->serve(s->svc->ctx, ZN_SVC_REG_UNSHARE, s->comm_hash, s->rank,
                                reg_unshare_handler, s),
                  res, err_unserve_share);
    *out = s;
    return ncclSuccess;
err_unserve_share:
    s->svc->unserve(s->svc->ctx, ZN_SVC_REG_SHARE, s->comm_hash, s->rank);
err_free:
    free(s);
    return res;
}

void zn_p2p_reg_stop(struct zn_p2p_reg *s)
{
    if (!s) return;
    /* Once unserve returns no handler runs: the imports are ours alone. */
    s->svc->unserve(s->svc->ctx, ZN_SVC_REG_SHARE, s->comm_hash, s->rank);
    s->svc->unserve(s->svc->ctx, ZN_SVC_REG_UNSHARE, s->comm_hash, s->rank);
    for (int i = 0; i < s->nimp; i++) zn_cumem_free(&s->imp[i].mem);
    free(s->imp);
    free(s);
}

/* One request to peer's service, bounded by ZINC_TIMEOUT. Returns 0 or a negative errno;
 * *status is the peer handler's result. */
static int reg_call(const struct zn_tctx *ctx, int peer, int type, const struct reg_msg *m, int fd,
                    struct reg_reply *r, ncclResult_t *status)
{
    struct zn_svc_req req = { .src = (uint32_t)ctx->rank, .body = m, .len = sizeof(*m), .fd = fd };
    uint8_t body[sizeof(*r)];
    struct zn_svc_reply rep = { .body = body, .fd = -1 };
    int rc = svc_call(ctx, peer, type, &req, &rep, sizeof(body), status, zn_deadline_from_now());
    if (rep.fd >= 0) close(rep.fd);
    if (rc == 0 && *status == ncclSuccess && type == ZN_SVC_REG_SHARE) {
        if (rep.len != sizeof(*r)) return -EPROTO;
        memcpy(r, body, sizeof(*r));
    }
    return rc;
}

ncclResult_t zn_p2p_reg_share(const struct zn_tctx *ctx, int fd, size_t size, uint32_t id,
                              void **peer_ptr)
{
    struct reg_msg m = { .src = (uint32_t)ctx->rank, .id = id, .size = size };
    for (int k = 1; k < ctx->nranks; k++) {
        int q = (ctx->rank + k) % ctx->nranks;
        struct reg_reply r = { 0 };
        ncclResult_t st = ncclSuccess;
        int rc = ctx->svc ? reg_call(ctx, q, ZN_SVC_REG_SHARE, &m, fd, &r, &st) : -ENOTCONN;
        if (rc != 0 || st != ncclSuccess) {
            char who[128];
            zn_peer_str(ctx, q, who, sizeof(who));
            ncclResult_t res = zn_error(rc ? ncclRemoteError : st, ZN_P2P,
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
    struct reg_msg m = { .src = (uint32_t)ctx->rank, .id = id };
    for (int k = 1; k < ctx->nranks && ctx->svc; k++) {
        int q = (ctx->rank + k) % ctx->nranks;
        if (peer >= 0 && q != peer) continue;
        struct reg_reply r;
        ncclResult_t st;
        if (reg_call(ctx, q, ZN_SVC_REG_UNSHARE, &m, -1, &r, &st) != 0)
            zn_info(ZN_P2P, "p2p: rank %d did not answer a deregistration (gone?)", q);
    }
}
