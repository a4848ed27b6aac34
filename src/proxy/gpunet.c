/*
 * The proxy's GPU net engine (see gpunet.h).
 */
#include "gpunet.h"
#include "netops.h"
#include "abi/dev_abi.h"
#include "bootstrap/bootstrap.h"
#include "net/net.h"
#include "util/clock.h"
#include "util/cuda.h"
#include "util/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One direction of one channel: a net connection and the FIFO positions it has reached. */
struct gn_dir {
    void *comm; /* send comm (to next) or recv comm (from prev) */
    void *mh;   /* the shadow's registration on comm */
    void *req[ZN_DEV_NET_NBUF];
    uint64_t posted, done; /* slots handed to the net / completed by it */
    int closed;            /* receiving: the peer closed the connection (see peer_closed) */
};

/* How long a closed receiving connection may sit with everything that arrived drained before
 * the engine ends the kernels: the peer has gone, and a kernel waiting for it would hang. */
#define GN_CLOSED_GRACE_NS 1000000000ll

/* What each rank publishes at setup. */
struct gn_addr {
    char net[32];
    int32_t nch;
    int32_t listening; /* handles valid: this rank's prev is remote */
    uint8_t handle[ZN_GPUNET_MAX_CH][NCCL_NET_HANDLE_MAXSIZE];
};

struct zn_gpunet {
    struct zn_gpunet_config cfg;
    int rank, nranks;
    const struct zn_net *net;
    void *nctx;
    void *listen[ZN_GPUNET_MAX_CH];
    struct gn_dir snd[ZN_GPUNET_MAX_CH], rcv[ZN_GPUNET_MAX_CH];
    /* Shadows (host views; one block when next == prev) and their size. */
    uint8_t *sh_next, *sh_prev;
    uint8_t *sh_next_dev, *sh_prev_dev;
    size_t sh_bytes;
    struct zn_proxy_client client;
    atomic_int failed;
    char failure[320];
    char who_next[128], who_prev[128];
    int64_t last_ns;
};

static volatile uint64_t *word(uint8_t *base, size_t off, int peer, int ch)
{
    return (volatile uint64_t *)(base + zn_dev_ctrl_off(off, peer, ch));
}

/* Slot buf of channel ch in a shadow: row 0 what we send, row 1 what we receive (dev_abi.h). */
static uint8_t *slot_at(const struct zn_gpunet *g, uint8_t *base, int row, int ch, int buf)
{
    return base + zn_dev_net_slot_off(row, ch, g->cfg.nch, buf, g->cfg.slot_bytes);
}

/* Stop for good: record why, end the kernels, log once. */
static int fail(struct zn_gpunet *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct zn_gpunet *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->failure, sizeof(g->failure), fmt, ap);
    va_end(ap);
    atomic_store(&g->failed, 1);
    if (g->cfg.abort_word) *g->cfg.abort_word = 1;
    zn_warn(ZN_PROXY | ZN_NET, "%s", g->failure);
    return 1;
}

/* The receiving connection of channel ch failed: the peer closed it. That is how a peer that
 * destroyed its communicator looks as well as one that died, and in the first case everything
 * it sent has arrived (TCP delivers what was sent before the close) and nothing more is due.
 * So it is not an error yet: gn_progress ends the kernels only once the kernel drained all that
 * arrived and still nothing moved for GN_CLOSED_GRACE_NS. */
static int peer_closed(struct zn_gpunet *g, int ch)
{
    g->rcv[ch].closed = 1;
    zn_info(ZN_PROXY | ZN_NET, "GPU net proxy: rank %d: %s closed channel %d after %llu slot(s)",
            g->rank, g->who_prev, ch, (unsigned long long)g->rcv[ch].done);
    return 1;
}

/* A closed channel whose slots the kernel has all drained, long enough: end the kernels. */
static void check_closed(struct zn_gpunet *g)
{
    int closed = 0;
    for (int ch = 0; ch < g->cfg.nch; ch++) {
        if (!g->rcv[ch].closed) continue;
        uint64_t drained = *word(g->sh_prev, ZN_DEV_ACK_OFF, g->rank, ch);
        if (drained < g->rcv[ch].done) return; /* the kernel is still reading what came */
        closed = 1;
    }
    if (!closed || zn_now_ns() - g->last_ns < GN_CLOSED_GRACE_NS) return;
    snprintf(g->failure, sizeof(g->failure),
             "GPU net proxy: rank %d: %s closed its connections (it exited, aborted or destroyed "
             "its communicator)",
             g->rank, g->who_prev);
    atomic_store(&g->failed, 1);
    if (g->cfg.abort_word) *g->cfg.abort_word = 1;
    zn_info(ZN_PROXY | ZN_NET, "%s: later kernels of this communicator end at once", g->failure);
}

/* Sending side of channel ch: isend what the kernel committed, report what completed. */
static int send_step(struct zn_gpunet *g, int ch)
{
    struct gn_dir *d = &g->snd[ch];
    const ncclNet_t *net = g->net->ops;
    int moved = 0;
    uint64_t ready =
        __atomic_load_n(word(g->sh_next, ZN_DEV_READY_OFF, g->rank, ch), __ATOMIC_ACQUIRE);
    while (d->posted < ready && d->posted - d->done < ZN_DEV_NET_NBUF) {
        int b = (int)(d->posted % ZN_DEV_NET_NBUF);
        size_t size = (size_t)*word(g->sh_next, ZN_DEV_NETSIZE_OFF, b, ch);
        if (size > g->cfg.slot_bytes) size = g->cfg.slot_bytes;
        void *req = NULL;
        if (net->isend(d->comm, slot_at(g, g->sh_next, 0, ch, b), size, 0, d->mh, NULL, &req) !=
            ncclSuccess)
            return fail(g, "GPU net proxy: rank %d: sending channel %d slot %llu to %s failed",
                        g->rank, ch, (unsigned long long)d->posted, g->who_next);
        if (!req) break; /* the net asks to retry later */
        d->req[b] = req;
        d->posted++;
        moved = 1;
    }
    uint64_t done0 = d->done;
    while (d->done < d->posted) {
        int fin = 0, size = 0;
        if (net->test(d->req[d->done % ZN_DEV_NET_NBUF], &fin, &size) != ncclSuccess)
            return fail(g, "GPU net proxy: rank %d: sending channel %d to %s failed", g->rank, ch,
                        g->who_next);
        if (!fin) break;
        __atomic_store_n(&d->done, d->done + 1, __ATOMIC_RELEASE); /* zn_gpunet_destroy reads it */
    }
    if (d->done == done0) return moved;
    /* The kernel's reserve() reads it there (fifo.cuh, inbox()). */
    __atomic_store_n(word(g->sh_next, ZN_DEV_ACK_OFF, g->cfg.next, ch), d->done, __ATOMIC_RELEASE);
    return 1;
}

/* Receiving side of channel ch: a receive into each slot of the shadow the kernel drained; when
 * one completes, its count (the kernel's consume() reads slot and count in the shadow). */
static int recv_step(struct zn_gpunet *g, int ch)
{
    struct gn_dir *d = &g->rcv[ch];
    const ncclNet_t *net = g->net->ops;
    int moved = 0, prev = g->cfg.prev;
    if (d->closed) return 0;
    uint64_t drained =
        __atomic_load_n(word(g->sh_prev, ZN_DEV_ACK_OFF, g->rank, ch), __ATOMIC_ACQUIRE);
    while (d->posted < drained + ZN_DEV_NET_NBUF) {
        int b = (int)(d->posted % ZN_DEV_NET_NBUF);
        void *data = slot_at(g, g->sh_prev, 1, ch, b), *req = NULL;
        size_t size = g->cfg.slot_bytes;
        int tag = 0;
        if (net->irecv(d->comm, 1, &data, &size, &tag, &d->mh, NULL, &req) != ncclSuccess)
            return peer_closed(g, ch);
        if (!req) break;
        d->req[b] = req;
        d->posted++;
        moved = 1;
    }
    while (d->done < d->posted) {
        int b = (int)(d->done % ZN_DEV_NET_NBUF), fin = 0, size = 0;
        if (net->test(d->req[b], &fin, &size) != ncclSuccess) return peer_closed(g, ch);
        if (!fin) break;
        if ((size_t)size > g->cfg.slot_bytes)
            return fail(g,
                        "GPU net proxy: rank %d: %s sent %d bytes on channel %d, more than a "
                        "slot (%zu)",
                        g->rank, g->who_prev, size, ch, g->cfg.slot_bytes);
        /* Release: the bytes the net wrote before the count (the kernel fences system-wide). */
        __atomic_store_n(word(g->sh_prev, ZN_DEV_READY_OFF, prev, ch), d->done + 1,
                         __ATOMIC_RELEASE);
        d->done++;
        moved = 1;
    }
    return moved;
}

static int gn_progress(void *arg)
{
    struct zn_gpunet *g = arg;
    if (atomic_load(&g->failed)) return 0;
    int moved = 0;
    for (int ch = 0; ch < g->cfg.nch && !atomic_load(&g->failed); ch++) {
        if (g->cfg.next_remote) moved |= send_step(g, ch);
        if (g->cfg.prev_remote) moved |= recv_step(g, ch);
    }
    if (moved) g->last_ns = zn_now_ns();
    if (g->cfg.prev_remote && !atomic_load(&g->failed)) check_closed(g);
    return moved;
}

static void gn_dump(void *arg)
{
    struct zn_gpunet *g = arg;
    zn_warn(ZN_PROXY, "proxy dump:  GPU net rank %d: %s, last progress %.3f s ago", g->rank,
            atomic_load(&g->failed) ? g->failure : "running",
            (double)(zn_now_ns() - g->last_ns) / 1e9);
    for (int ch = 0; ch < g->cfg.nch; ch++) {
        if (g->cfg.next_remote)
            zn_warn(ZN_PROXY,
                    "proxy dump:   channel %d to %s: kernel committed %llu, sent %llu of %llu", ch,
                    g->who_next,
                    (unsigned long long)*word(g->sh_next, ZN_DEV_READY_OFF, g->rank, ch),
                    (unsigned long long)g->snd[ch].done, (unsigned long long)g->snd[ch].posted);
        if (g->cfg.prev_remote)
            zn_warn(ZN_PROXY,
                    "proxy dump:   channel %d from %s: received %llu of %llu posted, kernel "
                    "drained %llu",
                    ch, g->who_prev, (unsigned long long)g->rcv[ch].done,
                    (unsigned long long)g->rcv[ch].posted,
                    (unsigned long long)*word(g->sh_prev, ZN_DEV_ACK_OFF, g->rank, ch));
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Setup                                                                                      */
/* ------------------------------------------------------------------------------------------ */

static ncclResult_t open_net(struct zn_gpunet *g, struct gn_addr *me)
{
    ZN_CHECK(zn_net_select(&g->net));
    ncclNetCommConfig_t cfg = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };
    ZN_CHECK(g->net->ops->init(&g->nctx, g->cfg.ctx->comm_hash, &cfg, zn_net_logger, NULL));
    ncclNetProperties_t props;
    ZN_CHECK(g->net->ops->getProperties(0, &props));
    if (!(props.ptrSupport & NCCL_PTR_HOST))
        return zn_error(ncclSystemError, ZN_PROXY | ZN_NET | ZN_INIT,
                        "GPU net proxy: net %s cannot move host memory (ptrSupport %#x)",
                        g->net->name, (unsigned)props.ptrSupport);
    snprintf(me->net, sizeof(me->net), "%s", g->net->name);
    if (g->cfg.prev_remote) {
        for (int ch = 0; ch < g->cfg.nch; ch++)
            ZN_CHECK(g->net->ops->listen(g->nctx, 0, me->handle[ch], &g->listen[ch]));
        me->listening = 1;
    }
    return ncclSuccess;
}

/* Every rank of a hop must agree on the net and the channels. */
static ncclResult_t check_addrs(const struct zn_gpunet *g, const struct gn_addr *all)
{
    const struct gn_addr *me = &all[g->rank];
    for (int r = 0; r < g->nranks; r++) {
        const struct gn_addr *a = &all[r];
        char who[128];
        zn_peer_str(g->cfg.ctx, r, who, sizeof(who));
        if (a->nch < 0)
            return zn_error(ncclRemoteError, ZN_PROXY | ZN_INIT,
                            "GPU net proxy: %s could not open its net (its log says why)", who);
        if (a->nch != me->nch)
            return zn_error(ncclInvalidUsage, ZN_PROXY | ZN_INIT,
                            "GPU net proxy: %s has %d GPU net channels, this rank %d "
                            "(ZINC_GPU_NET_CHANNELS and ZINC_GPU_CHANNELS must agree)",
                            who, a->nch, me->nch);
        if (*a->net && *me->net && strncmp(a->net, me->net, sizeof(a->net)) != 0)
            return zn_error(ncclInvalidUsage, ZN_PROXY | ZN_INIT,
                            "GPU net proxy: %s uses net \"%.31s\", this rank net \"%s\": every "
                            "rank must use the same net (ZINC_NET / NCCL_NET)",
                            who, a->net, me->net);
    }
    if (g->cfg.next_remote && !all[g->cfg.next].listening)
        return zn_error(ncclInternalError, ZN_PROXY | ZN_INIT,
                        "GPU net proxy: %s does not take a ring hop from this rank", g->who_next);
    return ncclSuccess;
}

/* Connect to next and accept from prev on every channel, without blocking either. */
static ncclResult_t connect_all(struct zn_gpunet *g, const struct gn_addr *all)
{
    const ncclNet_t *net = g->net->ops;
    int64_t deadline = zn_now_ns() + zn_timeout_ns();
    for (;;) {
        int left = 0;
        for (int ch = 0; ch < g->cfg.nch; ch++) {
            if (g->cfg.next_remote && !g->snd[ch].comm) {
                ncclNetDeviceHandle_v11_t *dh = NULL;
                uint8_t h[NCCL_NET_HANDLE_MAXSIZE];
                memcpy(h, all[g->cfg.next].handle[ch], sizeof(h));
                ZN_CHECK(net->connect(g->nctx, 0, h, &g->snd[ch].comm, &dh));
                left += !g->snd[ch].comm;
            }
            if (g->cfg.prev_remote && !g->rcv[ch].comm) {
                ncclNetDeviceHandle_v11_t *dh = NULL;
                ZN_CHECK(net->accept(g->listen[ch], &g->rcv[ch].comm, &dh));
                left += !g->rcv[ch].comm;
            }
        }
        if (!left) return ncclSuccess;
        if (g->cfg.ctx->abort_flag && atomic_load(g->cfg.ctx->abort_flag))
            return zn_error(ncclInvalidUsage, ZN_PROXY | ZN_INIT,
                            "GPU net proxy: communicator aborted while connecting");
        if (zn_now_ns() > deadline)
            return zn_error(ncclRemoteError, ZN_PROXY | ZN_INIT,
                            "GPU net proxy: rank %d: %d of the connections to %s / from %s not "
                            "made within ZINC_TIMEOUT",
                            g->rank, left, g->who_next, g->who_prev);
        struct timespec ts = { 0, 50000 };
        nanosleep(&ts, NULL);
    }
}

static ncclResult_t alloc_shadows(struct zn_gpunet *g, uint8_t *shadow_dev[])
{
    g->sh_bytes = zn_dev_net_shadow_bytes(g->cfg.nch, g->cfg.slot_bytes);
    ncclResult_t (*alloc)(void **, void **, size_t) =
        g->cfg.shadow_alloc ? g->cfg.shadow_alloc : zn_cuda_host_alloc;
    void *h = NULL, *d = NULL;
    if (g->cfg.next_remote) {
        ZN_CHECK(alloc(&h, &d, g->sh_bytes));
        g->sh_next = h;
        g->sh_next_dev = d;
        shadow_dev[g->cfg.next] = d;
    }
    if (g->cfg.prev_remote && g->cfg.prev == g->cfg.next) {
        g->sh_prev = g->sh_next;
        g->sh_prev_dev = g->sh_next_dev;
    } else if (g->cfg.prev_remote) {
        ZN_CHECK(alloc(&h, &d, g->sh_bytes));
        g->sh_prev = h;
        g->sh_prev_dev = d;
        shadow_dev[g->cfg.prev] = d;
    }
    const ncclNet_t *net = g->net->ops;
    for (int ch = 0; ch < g->cfg.nch; ch++) {
        if (g->cfg.next_remote)
            ZN_CHECK(net->regMr(g->snd[ch].comm, g->sh_next, g->sh_bytes, NCCL_PTR_HOST,
                                &g->snd[ch].mh));
        if (g->cfg.prev_remote)
            ZN_CHECK(net->regMr(g->rcv[ch].comm, g->sh_prev, g->sh_bytes, NCCL_PTR_HOST,
                                &g->rcv[ch].mh));
    }
    return ncclSuccess;
}

ncclResult_t zn_gpunet_create(const struct zn_gpunet_config *cfg, struct zn_gpunet **out,
                              uint8_t *shadow_dev[])
{
    const struct zn_tctx *ctx = cfg->ctx;
    if (cfg->nch < 1 || cfg->nch > ZN_GPUNET_MAX_CH)
        return zn_error(ncclInvalidArgument, ZN_PROXY | ZN_INIT,
                        "GPU net proxy: %d channels, must be 1-%d", cfg->nch, ZN_GPUNET_MAX_CH);
    struct zn_gpunet *g;
    struct gn_addr *all;
    ZN_CHECK(zn_calloc(&g, 1, "GPU net proxy"));
    ncclResult_t res = zn_calloc(&all, (size_t)ctx->nranks, "GPU net proxy addresses");
    if (res != ncclSuccess) {
        free(g);
        return res;
    }
    g->cfg = *cfg;
    g->rank = ctx->rank;
    g->nranks = ctx->nranks;
    g->last_ns = zn_now_ns();
    zn_peer_str(ctx, cfg->next, g->who_next, sizeof(g->who_next));
    zn_peer_str(ctx, cfg->prev, g->who_prev, sizeof(g->who_prev));
    struct gn_addr *me = &all[g->rank];
    me->nch = cfg->nch;
    int remote = cfg->next_remote || cfg->prev_remote;
    /* An error before the exchange still takes part in it, so that no rank waits for us. */
    ncclResult_t mine = remote ? open_net(g, me) : ncclSuccess;
    me->nch = mine == ncclSuccess ? cfg->nch : -1;
    ZN_CHECK_GOTO(zn_boot_allgather(ctx->boot, all, sizeof(*all)), res, fail);
    ZN_CHECK_GOTO(mine, res, fail);
    ZN_CHECK_GOTO(check_addrs(g, all), res, fail);
    if (remote) {
        ZN_CHECK_GOTO(connect_all(g, all), res, fail);
        ZN_CHECK_GOTO(alloc_shadows(g, shadow_dev), res, fail);
        g->client = (struct zn_proxy_client){ .progress = gn_progress, .dump = gn_dump, .arg = g };
        zn_proxy_client_add(&g->client);
        zn_info(ZN_PROXY | ZN_INIT,
                "GPU net proxy: net %s, %d channel(s), slots of %zu bytes%s%s%s%s", g->net->name,
                cfg->nch, cfg->slot_bytes, cfg->next_remote ? ", to " : "",
                cfg->next_remote ? g->who_next : "", cfg->prev_remote ? ", from " : "",
                cfg->prev_remote ? g->who_prev : "");
    }
    free(all);
    *out = g;
    return ncclSuccess;
fail:
    free(all);
    zn_gpunet_destroy(g);
    return res;
}

const char *zn_gpunet_failure(const struct zn_gpunet *g)
{
    return g && atomic_load(&((struct zn_gpunet *)g)->failed) ? g->failure : NULL;
}

/* The kernels have ended, but the last slots they committed may not have left yet: let the
 * progress thread send them (bounded by ZINC_TIMEOUT), so that a peer still reading gets all.
 * Not after an abort (ncclCommAbort, a revoke, the engine's own failure raise the abort word):
 * nobody waits for those slots, and an abort must not wait for a peer. */
static int aborted(const struct zn_gpunet *g)
{
    return g->cfg.abort_word && *g->cfg.abort_word;
}

static void drain(struct zn_gpunet *g)
{
    if (aborted(g)) return;
    int64_t deadline = zn_now_ns() + zn_timeout_ns();
    for (int ch = 0; ch < g->cfg.nch && g->cfg.next_remote; ch++) {
        uint64_t ready =
            __atomic_load_n(word(g->sh_next, ZN_DEV_READY_OFF, g->rank, ch), __ATOMIC_ACQUIRE);
        while (__atomic_load_n(&g->snd[ch].done, __ATOMIC_ACQUIRE) < ready &&
               !atomic_load(&g->failed) && !aborted(g)) {
            if (zn_now_ns() > deadline) {
                zn_warn(ZN_PROXY | ZN_NET,
                        "GPU net proxy: rank %d: channel %d: %llu slot(s) to %s not sent within "
                        "ZINC_TIMEOUT at close",
                        g->rank, ch,
                        (unsigned long long)(ready -
                                             __atomic_load_n(&g->snd[ch].done, __ATOMIC_ACQUIRE)),
                        g->who_next);
                return;
            }
            struct timespec ts = { 0, 100000 };
            nanosleep(&ts, NULL);
        }
    }
}

void zn_gpunet_destroy(struct zn_gpunet *g)
{
    if (!g) return;
    if (g->client.progress) {
        drain(g);
        zn_proxy_client_remove(&g->client);
    }
    const ncclNet_t *net = g->net ? g->net->ops : NULL;
    for (int ch = 0; net && ch < ZN_GPUNET_MAX_CH; ch++) {
        if (g->snd[ch].mh) net->deregMr(g->snd[ch].comm, g->snd[ch].mh);
        if (g->rcv[ch].mh) net->deregMr(g->rcv[ch].comm, g->rcv[ch].mh);
        if (g->snd[ch].comm) net->closeSend(g->snd[ch].comm);
        if (g->rcv[ch].comm) net->closeRecv(g->rcv[ch].comm);
        if (g->listen[ch]) net->closeListen(g->listen[ch]);
    }
    if (net && g->nctx) net->finalize(g->nctx);
    void (*release)(void *) = g->cfg.shadow_free ? g->cfg.shadow_free : zn_cuda_host_free;
    if (g->sh_prev && g->sh_prev != g->sh_next) release(g->sh_prev);
    if (g->sh_next) release(g->sh_next);
    free(g);
}
