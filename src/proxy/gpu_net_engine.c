/*
 * The proxy's GPU net engine (see gpu_net_engine.h).
 */
#include "gpu_net_engine.h"
#include "progress.h"
#include "abi/dev_abi.h"
#include "bootstrap/bootstrap.h"
#include "net/net_layer.h"
#include "topo/hosts.h"
#include "topo/nic.h"
#include "util/clock.h"
#include "util/cuda.h"
#include "util/log.h"
#include "util/param.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One direction of one channel with one peer: a net connection and the FIFO positions it has
 * reached. */
struct gn_dir {
    void *comm; /* send comm (to the peer) or recv comm (from it) */
    void *mh;   /* the row's registration on comm */
    void *req[ZN_DEV_NET_NBUF];
    uint64_t posted, done; /* slots handed to the net / completed by it */
    int closed;            /* receiving: the peer closed the connection (see peer_closed) */
    int landed;            /* receiving: slot `done` arrived, its flush (if any) is pending */
    void *flush;           /* that flush's request */
};

/* What each rank publishes at setup: its net and channels, then the handles of its listeners,
 * one per sending peer and channel (gn_handle). */
struct gn_addr {
    char net[32];
    int32_t nch;
    uint64_t recv_from; /* bit r: this rank takes slots from r (its handles for r are valid) */
};

/* A peer on another host this rank exchanges slots with: its shadow and connections. */
struct gn_peer {
    int rank;
    int row, self_row;     /* the shadow's control rows of its slots and of ours (config's slot,
                              row_in) */
    int to, from;          /* this rank sends to it / receives from it */
    int gone;              /* it closed a receiving connection (named in gone_why) */
    uint8_t *sh;           /* its shadow (host view) */
    uint8_t *tx, *rx;      /* the rows of slots to it and from it: in sh, or device memory */
    void *tx_mem, *rx_mem; /* those rows' own allocations (GPUDirect RDMA) */
    void *listen[ZN_GPUNET_MAX_CH];
    struct gn_dir snd[ZN_GPUNET_MAX_CH], rcv[ZN_GPUNET_MAX_CH];
    char who[128];
};

struct zn_gpunet {
    struct zn_gpunet_config cfg;
    int rank, nranks;
    const struct zn_net *net;
    void *nctx;
    int dev; /* the net's device, nearest the GPU */
    char dev_name[64];
    enum zn_pci_dist dist; /* from the GPU to that device */
    int ptr_support;       /* what the device's memory registration takes (NCCL_PTR_*) */
    int gdr_tx, gdr_rx;    /* rows in device memory that the net reads / writes (GPUDirect RDMA) */
    char gdr_why[320];     /* why not, or how */
    atomic_ullong flushes;
    struct gn_peer *peers; /* the peers of send_to | recv_from, in rank order */
    int npeers;
    struct zn_proxy_progress_client client;
    atomic_int failed;
    char failure[320];
    /* Peers that closed connections, named in gone_why[gone_cur] (-1: none yet). The progress
     * thread writes the other buffer and then switches, so a reader gets a whole message. */
    atomic_int gone_cur;
    char gone_why[2][512];
    int64_t last_ns;
};

static volatile uint64_t *word(uint8_t *base, size_t off, int peer, int ch)
{
    return (volatile uint64_t *)(base + zn_dev_ctrl_off(off, peer, ch));
}

/* Slot buf of channel ch in a row of slots (dev_abi.h). */
static uint8_t *slot_at(const struct zn_gpunet *g, uint8_t *row, int ch, int buf)
{
    return row + zn_dev_net_row_off(ch, buf, g->cfg.slot_bytes);
}

/* Bytes an address record takes: the header, then a handle per rank and channel. */
static size_t gn_addr_bytes(int nranks)
{
    return sizeof(struct gn_addr) + (size_t)nranks * ZN_GPUNET_MAX_CH * NCCL_NET_HANDLE_MAXSIZE;
}

static struct gn_addr *gn_addr_of(void *all, int nranks, int r)
{
    return (struct gn_addr *)((uint8_t *)all + (size_t)r * gn_addr_bytes(nranks));
}

/* The handle rank a listens on for slots from src on channel ch. */
static uint8_t *gn_handle(struct gn_addr *a, int src, int ch)
{
    return (uint8_t *)(a + 1) +
           ((size_t)src * ZN_GPUNET_MAX_CH + (size_t)ch) * NCCL_NET_HANDLE_MAXSIZE;
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

/* The receiving connection of channel ch from p failed: the peer closed it. That is how a peer
 * that destroyed its communicator looks as well as one that died, and in the first case
 * everything it sent has arrived (TCP delivers what was sent before the close) and nothing more
 * is due. So it is not an error of the communicator: the shadow's gone word (dev_abi.h,
 * ZN_DEV_NETGONE_OFF) tells the kernels how many slots came, and only a kernel that waits for
 * more from p gives up (ZN_DEV_PEER_GONE), at once; calls that do not need p go on. */
static int peer_closed(struct zn_gpunet *g, struct gn_peer *p, int ch)
{
    struct gn_dir *d = &p->rcv[ch];
    d->closed = 1;
    /* After every ready count the engine stored (release): a kernel that sees the mark and
     * reads its count again has all that came. */
    __atomic_store_n(word(p->sh, ZN_DEV_NETGONE_OFF, p->row, ch), d->done + 1, __ATOMIC_RELEASE);
    if (!p->gone) {
        /* The kernels do not say which peer they waited for: name every one that left. */
        p->gone = 1;
        char who[384] = "";
        int n = 0;
        for (int i = 0; i < g->npeers; i++) {
            if (!g->peers[i].gone) continue;
            snprintf(who + strlen(who), sizeof(who) - strlen(who), "%s%s", n++ ? ", " : "",
                     g->peers[i].who);
        }
        int next = (atomic_load(&g->gone_cur) + 1) & 1;
        snprintf(g->gone_why[next], sizeof(g->gone_why[next]),
                 "GPU net proxy: rank %d: %s closed %s connections (%s) and a kernel waited for "
                 "more from %s",
                 g->rank, who, n > 1 ? "their" : "its",
                 n > 1 ? "they exited, aborted or destroyed their communicator"
                       : "it exited, aborted or destroyed its communicator",
                 n > 1 ? "one of them" : "it");
        atomic_store(&g->gone_cur, next);
    }
    zn_info(ZN_PROXY | ZN_NET,
            "GPU net proxy: rank %d: %s closed channel %d after %llu slot(s); kernels that wait "
            "for more from it end",
            g->rank, p->who, ch, (unsigned long long)d->done);
    return 1;
}

/* Sending side of channel ch to p: isend what the kernel committed, report what completed. */
static int send_step(struct zn_gpunet *g, struct gn_peer *p, int ch)
{
    struct gn_dir *d = &p->snd[ch];
    const ncclNet_t *net = g->net->ops;
    int moved = 0;
    uint64_t ready =
        __atomic_load_n(word(p->sh, ZN_DEV_READY_OFF, p->self_row, ch), __ATOMIC_ACQUIRE);
    while (d->posted < ready && d->posted - d->done < ZN_DEV_NET_NBUF) {
        int b = (int)(d->posted % ZN_DEV_NET_NBUF);
        size_t size = (size_t)*word(p->sh, ZN_DEV_NETSIZE_OFF, b, ch);
        if (size > g->cfg.slot_bytes) size = g->cfg.slot_bytes;
        void *req = NULL;
        if (net->isend(d->comm, slot_at(g, p->tx, ch, b), size, 0, d->mh, NULL, &req) !=
            ncclSuccess)
            return fail(g, "GPU net proxy: rank %d: sending channel %d slot %llu to %s failed",
                        g->rank, ch, (unsigned long long)d->posted, p->who);
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
                        p->who);
        if (!fin) break;
        __atomic_store_n(&d->done, d->done + 1, __ATOMIC_RELEASE); /* zn_gpunet_destroy reads it */
    }
    if (d->done == done0) return moved;
    /* The kernel's reserve() reads it there (fifo.cuh, inbox()). */
    __atomic_store_n(word(p->sh, ZN_DEV_ACK_OFF, p->row, ch), d->done, __ATOMIC_RELEASE);
    return 1;
}

/* A slot received into device memory is flushed before the kernel may read it (the net's iflush:
 * the NIC's writes into GPU memory are complete when the flush is). Returns 1 while the flush is
 * pending, 0 when the slot may be announced, -1 on failure. */
static int flush_step(struct zn_gpunet *g, struct gn_peer *p, int ch, int b, int size)
{
    struct gn_dir *d = &p->rcv[ch];
    const ncclNet_t *net = g->net->ops;
    if (!d->flush) {
        if (!g->gdr_rx || size <= 0) return 0;
        void *data = slot_at(g, p->rx, ch, b);
        if (net->iflush(d->comm, 1, &data, &size, &d->mh, &d->flush) != ncclSuccess) {
            fail(g, "GPU net proxy: rank %d: flushing channel %d slot %llu from %s failed", g->rank,
                 ch, (unsigned long long)d->done, p->who);
            return -1;
        }
        if (!d->flush) return 0; /* the net needs none */
        atomic_fetch_add(&g->flushes, 1);
    }
    int fin = 0, n = 0;
    if (net->test(d->flush, &fin, &n) != ncclSuccess) {
        fail(g, "GPU net proxy: rank %d: the flush of channel %d slot %llu from %s failed", g->rank,
             ch, (unsigned long long)d->done, p->who);
        return -1;
    }
    if (!fin) return 1;
    d->flush = NULL;
    return 0;
}

/* Receiving side of channel ch from p: a receive into each slot of its row the kernel drained;
 * when one completes (and is flushed), its count (the kernel's consume() reads the count in the
 * shadow, then the slot). */
static int recv_step(struct zn_gpunet *g, struct gn_peer *p, int ch)
{
    struct gn_dir *d = &p->rcv[ch];
    const ncclNet_t *net = g->net->ops;
    int moved = 0;
    if (d->closed) return 0;
    uint64_t drained =
        __atomic_load_n(word(p->sh, ZN_DEV_ACK_OFF, p->self_row, ch), __ATOMIC_ACQUIRE);
    while (d->posted < drained + ZN_DEV_NET_NBUF) {
        int b = (int)(d->posted % ZN_DEV_NET_NBUF);
        void *data = slot_at(g, p->rx, ch, b), *req = NULL;
        size_t size = g->cfg.slot_bytes;
        int tag = 0;
        if (net->irecv(d->comm, 1, &data, &size, &tag, &d->mh, NULL, &req) != ncclSuccess)
            return peer_closed(g, p, ch);
        if (!req) break;
        d->req[b] = req;
        d->posted++;
        moved = 1;
    }
    while (d->done < d->posted) {
        int b = (int)(d->done % ZN_DEV_NET_NBUF), fin = 0, size = 0;
        if (!d->landed) {
            if (net->test(d->req[b], &fin, &size) != ncclSuccess) return peer_closed(g, p, ch);
            if (!fin) break;
            if ((size_t)size > g->cfg.slot_bytes)
                return fail(g,
                            "GPU net proxy: rank %d: %s sent %d bytes on channel %d, more than a "
                            "slot (%zu)",
                            g->rank, p->who, size, ch, g->cfg.slot_bytes);
            d->landed = 1;
        }
        int f = flush_step(g, p, ch, b, size);
        if (f < 0) return 1;
        if (f > 0) break;
        d->landed = 0;
        /* Release: the bytes the net wrote before the count (the kernel fences system-wide). */
        __atomic_store_n(word(p->sh, ZN_DEV_READY_OFF, p->row, ch), d->done + 1, __ATOMIC_RELEASE);
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
    for (int i = 0; i < g->npeers; i++) {
        struct gn_peer *p = &g->peers[i];
        for (int ch = 0; ch < g->cfg.nch && !atomic_load(&g->failed); ch++) {
            if (p->to) moved |= send_step(g, p, ch);
            if (p->from) moved |= recv_step(g, p, ch);
        }
    }
    if (moved) g->last_ns = zn_now_ns();
    return moved;
}

static void gn_dump(void *arg)
{
    struct zn_gpunet *g = arg;
    zn_warn(ZN_PROXY,
            "proxy dump:  GPU net rank %d: %s, last progress %.3f s ago; net %s device %s, %s, "
            "%llu flush(es)",
            g->rank, atomic_load(&g->failed) ? g->failure : "running",
            (double)(zn_now_ns() - g->last_ns) / 1e9, g->net->name, g->dev_name, g->gdr_why,
            (unsigned long long)atomic_load(&g->flushes));
    for (int i = 0; i < g->npeers; i++) {
        const struct gn_peer *p = &g->peers[i];
        for (int ch = 0; ch < g->cfg.nch; ch++) {
            if (p->to)
                zn_warn(ZN_PROXY,
                        "proxy dump:   channel %d to %s: kernel committed %llu, sent %llu of %llu",
                        ch, p->who,
                        (unsigned long long)*word(p->sh, ZN_DEV_READY_OFF, p->self_row, ch),
                        (unsigned long long)p->snd[ch].done, (unsigned long long)p->snd[ch].posted);
            if (p->from)
                zn_warn(ZN_PROXY,
                        "proxy dump:   channel %d from %s: received %llu of %llu posted, kernel "
                        "drained %llu",
                        ch, p->who, (unsigned long long)p->rcv[ch].done,
                        (unsigned long long)p->rcv[ch].posted,
                        (unsigned long long)*word(p->sh, ZN_DEV_ACK_OFF, p->self_row, ch));
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Setup                                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* The net device nearest the GPU (topo/nic.h). */
static ncclResult_t pick_dev(struct zn_gpunet *g, ncclNetProperties_t *props)
{
    char gpu[256];
    int gpu_numa;
    zn_topo_gpu_pci(g->cfg.cuda_dev, gpu, sizeof(gpu), &gpu_numa);
    int ndev = g->net->ndev > 0 ? g->net->ndev : 1;
    if (ndev > 64) ndev = 64;
    enum zn_pci_dist dist[64];
    for (int d = 0; d < ndev; d++) {
        ncclNetProperties_t p;
        ZN_CHECK(g->net->ops->getProperties(d, &p));
        dist[d] = zn_topo_nic_dist(gpu, gpu_numa, p.pciPath);
    }
    const struct zn_tctx *ctx = g->cfg.ctx;
    g->dev = zn_topo_nic_pick(dist, ndev, zn_topo_local_index(ctx->peers, ctx->rank));
    g->dist = dist[g->dev];
    ZN_CHECK(g->net->ops->getProperties(g->dev, props));
    snprintf(g->dev_name, sizeof(g->dev_name), "%s", props->name ? props->name : "?");
    return ncclSuccess;
}

/* GPUDirect RDMA (topo/nic.h): a test's gdr_alloc stands in for a GPU. */
static void choose_gdr(struct zn_gpunet *g, const ncclNetProperties_t *props)
{
    const struct zn_params *p = zn_params();
    struct zn_topo_gdr gdr;
    zn_topo_gdr_choose(g->cfg.cuda_dev >= 0 || g->cfg.gdr_alloc, props->ptrSupport, g->dist,
                       p->net_gdr_level, (int)p->net_gdr_read, &gdr);
    g->ptr_support = props->ptrSupport;
    g->gdr_rx = gdr.rx;
    g->gdr_tx = gdr.tx;
    snprintf(g->gdr_why, sizeof(g->gdr_why), "%s", gdr.why);
}

static ncclResult_t open_net(struct zn_gpunet *g, struct gn_addr *me)
{
    ZN_CHECK(zn_net_select(&g->net));
    ncclNetCommConfig_t cfg = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };
    ZN_CHECK(g->net->ops->init(&g->nctx, g->cfg.ctx->comm_hash, &cfg, zn_net_logger, NULL));
    ncclNetProperties_t props;
    ZN_CHECK(pick_dev(g, &props));
    if (!(props.ptrSupport & NCCL_PTR_HOST))
        return zn_error(ncclSystemError, ZN_PROXY | ZN_NET | ZN_INIT,
                        "GPU net proxy: net %s cannot move host memory (ptrSupport %#x)",
                        g->net->name, (unsigned)props.ptrSupport);
    choose_gdr(g, &props);
    snprintf(me->net, sizeof(me->net), "%s", g->net->name);
    for (int i = 0; i < g->npeers; i++) {
        struct gn_peer *p = &g->peers[i];
        for (int ch = 0; p->from && ch < g->cfg.nch; ch++)
            ZN_CHECK(
                g->net->ops->listen(g->nctx, g->dev, gn_handle(me, p->rank, ch), &p->listen[ch]));
    }
    me->recv_from = g->cfg.recv_from;
    return ncclSuccess;
}

/* Every rank must agree on the net and the channels, and take what this rank sends it. */
static ncclResult_t check_addrs(const struct zn_gpunet *g, void *all)
{
    const struct gn_addr *me = gn_addr_of(all, g->nranks, g->rank);
    for (int r = 0; r < g->nranks; r++) {
        const struct gn_addr *a = gn_addr_of(all, g->nranks, r);
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
        if (((g->cfg.send_to >> r) & 1) && !((a->recv_from >> g->rank) & 1))
            return zn_error(ncclInternalError, ZN_PROXY | ZN_INIT,
                            "GPU net proxy: %s does not take slots from this rank", who);
    }
    return ncclSuccess;
}

/* Connect to every peer this rank sends to and accept from every peer it receives from, on
 * every channel, without blocking on any. */
static ncclResult_t connect_all(struct zn_gpunet *g, void *all)
{
    const ncclNet_t *net = g->net->ops;
    int64_t deadline = zn_now_ns() + zn_timeout_ns();
    for (;;) {
        int left = 0;
        const char *waiting = "";
        for (int i = 0; i < g->npeers; i++) {
            struct gn_peer *p = &g->peers[i];
            for (int ch = 0; ch < g->cfg.nch; ch++) {
                if (p->to && !p->snd[ch].comm) {
                    ncclNetDeviceHandle_v11_t *dh = NULL;
                    uint8_t h[NCCL_NET_HANDLE_MAXSIZE];
                    memcpy(h, gn_handle(gn_addr_of(all, g->nranks, p->rank), g->rank, ch),
                           sizeof(h));
                    ZN_CHECK(net->connect(g->nctx, g->dev, h, &p->snd[ch].comm, &dh));
                    left += !p->snd[ch].comm;
                }
                if (p->from && !p->rcv[ch].comm) {
                    ncclNetDeviceHandle_v11_t *dh = NULL;
                    ZN_CHECK(net->accept(p->listen[ch], &p->rcv[ch].comm, &dh));
                    left += !p->rcv[ch].comm;
                }
                if (!*waiting && (!p->snd[ch].comm != !p->to || !p->rcv[ch].comm != !p->from))
                    waiting = p->who;
            }
        }
        if (!left) return ncclSuccess;
        if (g->cfg.ctx->abort_flag && atomic_load(g->cfg.ctx->abort_flag))
            return zn_error(ncclInvalidUsage, ZN_PROXY | ZN_INIT,
                            "GPU net proxy: communicator aborted while connecting");
        if (zn_now_ns() > deadline)
            return zn_error(ncclRemoteError, ZN_PROXY | ZN_INIT,
                            "GPU net proxy: rank %d: %d connection(s) not made within "
                            "ZINC_TIMEOUT (one with %s)",
                            g->rank, left, waiting);
        struct timespec ts = { 0, 50000 };
        nanosleep(&ts, NULL);
    }
}

/* Register a row on one channel's connection: host memory, or device memory (GPUDirect RDMA)
 * as a dmabuf (fd >= 0) or by address. */
static ncclResult_t reg_row(struct zn_gpunet *g, struct gn_dir *d, uint8_t *row, int gdr, int fd)
{
    const ncclNet_t *net = g->net->ops;
    size_t bytes = zn_dev_net_row_bytes(g->cfg.nch, g->cfg.slot_bytes);
    if (!gdr) return net->regMr(d->comm, row, bytes, NCCL_PTR_HOST, &d->mh);
    if (fd >= 0) return net->regMrDmaBuf(d->comm, row, bytes, NCCL_PTR_CUDA, 0, fd, &d->mh);
    return net->regMr(d->comm, row, bytes, NCCL_PTR_CUDA, &d->mh);
}

/* A row in device memory, and a dmabuf fd for it where the net takes one (-1: registered by
 * address). */
static ncclResult_t gdr_row(struct zn_gpunet *g, void **mem, int *fd)
{
    size_t bytes = zn_dev_net_row_bytes(g->cfg.nch, g->cfg.slot_bytes);
    *fd = -1;
    if (g->cfg.gdr_alloc) return g->cfg.gdr_alloc(mem, bytes);
    ZN_CHECK(zn_cuda_malloc(mem, bytes, "GPU net rows (GPUDirect RDMA)"));
    if ((g->ptr_support & NCCL_PTR_DMABUF) && zn_cuda_dmabuf_fd(*mem, bytes, fd) != 0)
        zn_info(ZN_NET | ZN_INIT,
                "GPU net proxy: no dmabuf for GPU memory here; registering it by address");
    return ncclSuccess;
}

/* Whether rows in device memory register here: a net may report NCCL_PTR_CUDA for a NIC that
 * takes dmabufs where the GPU or its driver cannot export one, or without the peer-memory
 * module. One row is registered on one connection and released again; if that fails, the rows
 * stay in host memory and the log says why, rather than the communicator failing. */
static void gdr_probe(struct zn_gpunet *g)
{
    if (!g->gdr_rx && !g->gdr_tx) return;
    struct gn_peer *p = &g->peers[0];
    struct gn_dir *d = p->to ? &p->snd[0] : &p->rcv[0];
    void *mem = NULL;
    int fd = -1;
    ncclResult_t res = gdr_row(g, &mem, &fd);
    if (res == ncclSuccess) res = reg_row(g, d, mem, 1, fd);
    if (fd >= 0) close(fd);
    if (res == ncclSuccess) g->net->ops->deregMr(d->comm, d->mh);
    d->mh = NULL;
    if (mem) (g->cfg.gdr_free ? g->cfg.gdr_free : zn_cuda_free)(mem);
    if (res == ncclSuccess) return;
    g->gdr_rx = g->gdr_tx = 0;
    snprintf(g->gdr_why, sizeof(g->gdr_why),
             "no GPUDirect RDMA (GPU memory could not be registered with net %s device %s: "
             "%.80s)",
             g->net->name, g->dev_name, zn_last_error());
    zn_warn(ZN_NET | ZN_INIT, "GPU net proxy: rank %d: %s; slots stay in host memory", g->rank,
            g->gdr_why);
}

/* The rows a peer needs (to it if this rank sends to it, from it if it receives): in its shadow
 * (pinned host memory, which holds the control words in any case) or, with GPUDirect RDMA, in
 * device memory; each registered on every channel's connection of its direction. */
static ncclResult_t alloc_peer(struct zn_gpunet *g, struct gn_peer *p, struct zn_gpunet_view *v)
{
    int tx_host = p->to && !g->gdr_tx, rx_host = p->from && !g->gdr_rx;
    size_t bytes = zn_dev_net_shadow_bytes(g->cfg.nch, g->cfg.slot_bytes, tx_host + rx_host);
    ncclResult_t (*alloc)(void **, void **, size_t) =
        g->cfg.shadow_alloc ? g->cfg.shadow_alloc : zn_cuda_host_alloc;
    void *h = NULL, *d = NULL;
    ZN_CHECK(alloc(&h, &d, bytes));
    p->sh = h;
    v->ctrl = d;
    int row = 0;
    if (tx_host) {
        size_t off = zn_dev_net_slot_off(row++, 0, g->cfg.nch, 0, g->cfg.slot_bytes);
        p->tx = p->sh + off, v->tx = v->ctrl + off;
    }
    if (rx_host) {
        size_t off = zn_dev_net_slot_off(row++, 0, g->cfg.nch, 0, g->cfg.slot_bytes);
        p->rx = p->sh + off, v->rx = v->ctrl + off;
    }
    int fd_tx = -1, fd_rx = -1;
    ncclResult_t res = ncclSuccess;
    if (p->to && g->gdr_tx) {
        res = gdr_row(g, &p->tx_mem, &fd_tx);
        p->tx = v->tx = p->tx_mem;
    }
    if (res == ncclSuccess && p->from && g->gdr_rx) {
        res = gdr_row(g, &p->rx_mem, &fd_rx);
        p->rx = v->rx = p->rx_mem;
    }
    for (int ch = 0; res == ncclSuccess && ch < g->cfg.nch; ch++) {
        if (p->to) res = reg_row(g, &p->snd[ch], p->tx, g->gdr_tx, fd_tx);
        if (res == ncclSuccess && p->from) res = reg_row(g, &p->rcv[ch], p->rx, g->gdr_rx, fd_rx);
    }
    /* A registration holds the dmabuf; the fd is not needed after it. */
    if (fd_tx >= 0) close(fd_tx);
    if (fd_rx >= 0) close(fd_rx);
    return res;
}

/* The peers of send_to | recv_from. */
static ncclResult_t make_peers(struct zn_gpunet *g)
{
    uint64_t any = g->cfg.send_to | g->cfg.recv_from;
    if (g->nranks > ZN_GPUNET_MAX_RANKS || ((any >> g->rank) & 1))
        return zn_error(ncclInternalError, ZN_PROXY | ZN_INIT,
                        "GPU net proxy: peers %#llx of rank %d of %d", (unsigned long long)any,
                        g->rank, g->nranks);
    ZN_CHECK(zn_calloc(&g->peers, (size_t)g->nranks, "GPU net proxy peers"));
    for (int r = 0; r < g->nranks; r++) {
        if (!((any >> r) & 1)) continue;
        struct gn_peer *p = &g->peers[g->npeers++];
        p->rank = r;
        p->row = g->cfg.slot ? g->cfg.slot[r] : r;
        p->self_row = g->cfg.row_in ? g->cfg.row_in[r] : g->rank;
        if (p->row < 0 || p->row >= ZN_DEV_MAX_RANKS || p->self_row < 0 ||
            p->self_row >= ZN_DEV_MAX_RANKS)
            return zn_error(ncclInternalError, ZN_PROXY | ZN_INIT,
                            "GPU net proxy: rank %d has no slot for peer %d (%d, %d)", g->rank, r,
                            p->row, p->self_row);
        p->to = (g->cfg.send_to >> r) & 1;
        p->from = (g->cfg.recv_from >> r) & 1;
        zn_peer_str(g->cfg.ctx, r, p->who, sizeof(p->who));
    }
    return ncclSuccess;
}

ncclResult_t zn_gpunet_create(const struct zn_gpunet_config *cfg, struct zn_gpunet **out,
                              struct zn_gpunet_view view[])
{
    const struct zn_tctx *ctx = cfg->ctx;
    if (cfg->nch < 1 || cfg->nch > ZN_GPUNET_MAX_CH)
        return zn_error(ncclInvalidArgument, ZN_PROXY | ZN_INIT,
                        "GPU net proxy: %d channels, must be 1-%d", cfg->nch, ZN_GPUNET_MAX_CH);
    struct zn_gpunet *g;
    ZN_CHECK(zn_calloc(&g, 1, "GPU net proxy"));
    g->cfg = *cfg;
    g->rank = ctx->rank;
    g->nranks = ctx->nranks;
    g->last_ns = zn_now_ns();
    atomic_init(&g->gone_cur, -1);
    atomic_init(&g->flushes, 0);
    snprintf(g->gdr_why, sizeof(g->gdr_why), "no GPUDirect RDMA");
    memset(view, 0, sizeof(*view) * (size_t)g->nranks);
    uint8_t *all = NULL;
    ncclResult_t res = make_peers(g);
    if (res == ncclSuccess)
        res = zn_calloc(&all, gn_addr_bytes(g->nranks) * (size_t)g->nranks,
                        "GPU net proxy addresses");
    if (res != ncclSuccess) {
        zn_gpunet_destroy(g);
        return res;
    }
    struct gn_addr *me = gn_addr_of(all, g->nranks, g->rank);
    /* An error before the exchange still takes part in it, so that no rank waits for us. */
    ncclResult_t mine = g->npeers ? open_net(g, me) : ncclSuccess;
    me->nch = mine == ncclSuccess ? cfg->nch : -1;
    ZN_CHECK_GOTO(zn_boot_allgather(ctx->boot, all, gn_addr_bytes(g->nranks)), res, fail);
    ZN_CHECK_GOTO(mine, res, fail);
    ZN_CHECK_GOTO(check_addrs(g, all), res, fail);
    if (g->npeers) {
        ZN_CHECK_GOTO(connect_all(g, all), res, fail);
        gdr_probe(g);
        for (int i = 0; i < g->npeers; i++)
            ZN_CHECK_GOTO(alloc_peer(g, &g->peers[i], &view[g->peers[i].rank]), res, fail);
        g->client =
            (struct zn_proxy_progress_client){ .progress = gn_progress, .dump = gn_dump, .arg = g };
        zn_proxy_progress_add(&g->client);
        zn_info(ZN_PROXY | ZN_INIT,
                "GPU net proxy: net %s device %s (%s from the GPU), %s; %d channel(s), slots of "
                "%zu bytes, sending to %#llx, receiving from %#llx (rank bits)",
                g->net->name, g->dev_name, zn_pci_dist_name(g->dist), g->gdr_why, cfg->nch,
                cfg->slot_bytes, (unsigned long long)cfg->send_to,
                (unsigned long long)cfg->recv_from);
    }
    free(all);
    *out = g;
    return ncclSuccess;
fail:
    free(all);
    zn_gpunet_destroy(g);
    return res;
}

void zn_gpunet_get_info(const struct zn_gpunet *g, struct zn_gpunet_info *out)
{
    memset(out, 0, sizeof(*out));
    out->dev = g->dev;
    snprintf(out->net, sizeof(out->net), "%s", g->net ? g->net->name : "");
    snprintf(out->dev_name, sizeof(out->dev_name), "%s", g->dev_name);
    out->ptr_support = g->ptr_support;
    out->gdr_tx = g->gdr_tx;
    out->gdr_rx = g->gdr_rx;
    out->flushes = atomic_load(&((struct zn_gpunet *)g)->flushes);
}

const char *zn_gpunet_failure(const struct zn_gpunet *g)
{
    return g && atomic_load(&((struct zn_gpunet *)g)->failed) ? g->failure : NULL;
}

const char *zn_gpunet_gone(const struct zn_gpunet *g)
{
    int cur = g ? atomic_load(&((struct zn_gpunet *)g)->gone_cur) : -1;
    return cur >= 0 ? g->gone_why[cur] : NULL;
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
    for (int i = 0; i < g->npeers; i++) {
        struct gn_peer *p = &g->peers[i];
        for (int ch = 0; ch < g->cfg.nch && p->to; ch++) {
            uint64_t ready =
                __atomic_load_n(word(p->sh, ZN_DEV_READY_OFF, p->self_row, ch), __ATOMIC_ACQUIRE);
            while (__atomic_load_n(&p->snd[ch].done, __ATOMIC_ACQUIRE) < ready &&
                   !atomic_load(&g->failed) && !aborted(g)) {
                if (zn_now_ns() > deadline) {
                    zn_warn(ZN_PROXY | ZN_NET,
                            "GPU net proxy: rank %d: channel %d: %llu slot(s) to %s not sent "
                            "within ZINC_TIMEOUT at close",
                            g->rank, ch,
                            (unsigned long long)(ready - __atomic_load_n(&p->snd[ch].done,
                                                                         __ATOMIC_ACQUIRE)),
                            p->who);
                    return;
                }
                struct timespec ts = { 0, 100000 };
                nanosleep(&ts, NULL);
            }
        }
    }
}

size_t zn_gpunet_gpu_bytes(const struct zn_gpunet *g)
{
    if (!g || g->cfg.gdr_alloc) return 0;
    size_t row = zn_dev_net_row_bytes(g->cfg.nch, g->cfg.slot_bytes), n = 0;
    for (int i = 0; i < g->npeers; i++)
        n += (g->peers[i].tx_mem ? row : 0) + (g->peers[i].rx_mem ? row : 0);
    return n;
}

void zn_gpunet_destroy(struct zn_gpunet *g)
{
    if (!g) return;
    if (g->client.progress) {
        drain(g);
        zn_proxy_progress_remove(&g->client);
    }
    const ncclNet_t *net = g->net ? g->net->ops : NULL;
    void (*release)(void *) = g->cfg.shadow_free ? g->cfg.shadow_free : zn_cuda_host_free;
    void (*release_gdr)(void *) = g->cfg.gdr_free ? g->cfg.gdr_free : zn_cuda_free;
    for (int i = 0; i < g->npeers; i++) {
        struct gn_peer *p = &g->peers[i];
        for (int ch = 0; net && ch < ZN_GPUNET_MAX_CH; ch++) {
            if (p->snd[ch].mh) net->deregMr(p->snd[ch].comm, p->snd[ch].mh);
            if (p->rcv[ch].mh) net->deregMr(p->rcv[ch].comm, p->rcv[ch].mh);
            if (p->snd[ch].comm) net->closeSend(p->snd[ch].comm);
            if (p->rcv[ch].comm) net->closeRecv(p->rcv[ch].comm);
            if (p->listen[ch]) net->closeListen(p->listen[ch]);
        }
        if (p->sh) release(p->sh);
        if (p->tx_mem) release_gdr(p->tx_mem);
        if (p->rx_mem) release_gdr(p->rx_mem);
    }
    if (net && g->nctx) net->finalize(g->nctx);
    free(g->peers);
    free(g);
}
