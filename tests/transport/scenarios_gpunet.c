/*
 * Conformance scenarios for the proxy's GPU net engine (src/proxy/gpu_net_engine.h), run without a
 * GPU: host code in each rank stands in for the kernels (a test double of fifo.cuh's reserve /
 * commit / consume / release on the net shadows, written here from the layout in
 * abi/dev_abi.h), and the shadows are plain memory (the engine's shadow_alloc hook), as are the
 * rows that GPUDirect RDMA would put in device memory (gdr_alloc: the engine registers them with
 * the net as NCCL_PTR_CUDA memory and flushes what lands in them). The engine, the proxy's
 * progress thread and the net (ZINC_NET: the socket net, or IB through the verbs emulation) are
 * the real ones. Every rank is its own "host": ring hops rank -> rank + 1
 * over the net (what the ring kernels use), or FIFOs from every rank to every other one (what
 * send/recv and alltoall use). The control rows of a shadow are the peers' ranks, or, as for a
 * ring of more than ZN_DEV_MAX_RANKS ranks, slots (self 0, next 1, prev 2: zn_dev_comm).
 */
#include "conformance.h"
#include "abi/dev_abi.h"
#include "proxy/gpu_net_engine.h"
#include "net/net_layer.h"
#include "proxy/service.h"
#include "util/param.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GN_NCH   2
#define GN_SLOT  (64 * 1024)
#define GN_SLOTS 300 /* per channel and direction, many times ZN_DEV_NET_NBUF */

static ncclResult_t plain_alloc(void **host, void **dev, size_t size)
{
    *host = *dev = calloc(1, size);
    return *host ? ncclSuccess : ncclSystemError;
}

/* Stands in for device memory (GPUDirect RDMA rows). */
static ncclResult_t plain_gdr_alloc(void **ptr, size_t size)
{
    *ptr = calloc(1, size);
    return *ptr ? ncclSuccess : ncclSystemError;
}

/* Device memory that cannot be had (or registered). */
static ncclResult_t failing_gdr_alloc(void **ptr, size_t size)
{
    (void)ptr;
    return zn_error(ncclUnhandledCudaError, ZN_ALLOC, "test: no device memory for %zu bytes", size);
}

struct gn_rank {
    struct zn_gpunet *g;
    volatile uint32_t abort_word;
    struct zn_gpunet_view v[MAXR]; /* where the kernels of this rank would find each peer */
    uint8_t *sh[MAXR];             /* the peers' shadows (v[p].ctrl) */
    int me, next, prev;
    int8_t slot[MAXR], row_in[MAXR]; /* rows of peer p's slots and of ours to p */
};

enum { GN_RING, GN_ALL, GN_SLOTS_RING };

static volatile uint64_t *gn_word(uint8_t *base, size_t off, int peer, int ch)
{
    return (volatile uint64_t *)(base + zn_dev_ctrl_off(off, peer, ch));
}

/* Slot pos of the FIFO to peer (rx 0) or from it (rx 1), where the engine put the rows (as
 * zn_dev_net_slot finds them for the kernels). */
static uint8_t *gn_slot(const struct gn_rank *r, int peer, int rx, int ch, uint64_t pos)
{
    return (rx ? r->v[peer].rx : r->v[peer].tx) +
           zn_dev_net_row_off(ch, (int)(pos % ZN_DEV_NET_NBUF), GN_SLOT);
}

/* Bytes of slot pos: full slots, and now and then a short or empty one. */
static size_t gn_bytes(uint64_t pos)
{
    static const size_t odd[] = { 0, 1, 4093, GN_SLOT - 8 };
    return pos % 7 == 3 ? odd[(pos / 7) % 4] : GN_SLOT;
}

/* GN_ALL: FIFOs to and from every other rank; else to next and from prev, with the ranks as
 * rows or (GN_SLOTS_RING, at least 3 ranks) slots. gdr: rows for GPUDirect RDMA from
 * plain_gdr_alloc (1) or failing_gdr_alloc (2), should ZINC_NET_GDR_LEVEL and the net allow it. */
static int gn_open_gdr(struct rank_env *e, struct gn_rank *r, int mode, int gdr)
{
    int all = mode == GN_ALL;
    memset((void *)r, 0, sizeof(*r));
    r->me = e->rank;
    r->next = (e->rank + 1) % e->nranks;
    r->prev = (e->rank + e->nranks - 1) % e->nranks;
    for (int p = 0; p < e->nranks; p++) {
        r->slot[p] = (int8_t)p;
        r->row_in[p] = (int8_t)r->me;
    }
    if (mode == GN_SLOTS_RING) {
        CHECK(e->nranks >= 3, "slots need distinct neighbours");
        memset(r->slot, -1, sizeof(r->slot));
        memset(r->row_in, -1, sizeof(r->row_in));
        r->slot[r->me] = r->row_in[r->me] = 0;
        r->slot[r->next] = 1;
        r->row_in[r->next] = 2;
        r->slot[r->prev] = 2;
        r->row_in[r->prev] = 1;
    }
    uint64_t others = ((1ull << e->nranks) - 1) & ~(1ull << e->rank);
    CHECK(zn_proxy_acquire() == ncclSuccess, "no proxy");
    struct zn_gpunet_config cfg = { .ctx = &e->ctx,
                                    .send_to = all ? others : 1ull << r->next,
                                    .recv_from = all ? others : 1ull << r->prev,
                                    .slot = mode == GN_SLOTS_RING ? r->slot : NULL,
                                    .row_in = mode == GN_SLOTS_RING ? r->row_in : NULL,
                                    .nch = GN_NCH,
                                    .slot_bytes = GN_SLOT,
                                    .abort_word = &r->abort_word,
                                    .cuda_dev = -1,
                                    .shadow_alloc = plain_alloc,
                                    .shadow_free = free,
                                    .gdr_alloc = gdr == 2 ? failing_gdr_alloc
                                                 : gdr    ? plain_gdr_alloc
                                                          : NULL,
                                    .gdr_free = gdr ? free : NULL };
    ncclResult_t res = zn_gpunet_create(&cfg, &r->g, r->v);
    if (res != ncclSuccess) zn_proxy_release();
    CHECK(res == ncclSuccess, "zn_gpunet_create returned %d", (int)res);
    for (int p = 0; p < e->nranks; p++) {
        r->sh[p] = r->v[p].ctrl;
        int to = p != r->me && (all || p == r->next), from = p != r->me && (all || p == r->prev);
        CHECK(!r->sh[p] == (!to && !from), "shadow of rank %d: %p", p, (void *)r->sh[p]);
        CHECK(!r->v[p].tx == !to && !r->v[p].rx == !from, "rows of rank %d: to %p, from %p", p,
              (void *)r->v[p].tx, (void *)r->v[p].rx);
    }
    CHECK(e->nranks > 2 || all || r->sh[r->next] == r->sh[r->prev], "two shadows for one peer");
    return 0;
}

static int gn_open(struct rank_env *e, struct gn_rank *r, int mode)
{
    return gn_open_gdr(e, r, mode, 0);
}

static void gn_close(struct gn_rank *r)
{
    zn_gpunet_destroy(r->g);
    r->g = NULL;
    zn_proxy_release();
}

/* The kernels' side of one channel with one peer: push GN_SLOTS slots to it, consume as many
 * from it. */
struct gn_chan {
    uint64_t sent, recvd;
};

/* reserve + fill + commit to peer, if the slot is free (ack from the engine). */
static int gn_push(struct gn_rank *r, int peer, int ch, struct gn_chan *c, uint64_t slots)
{
    uint64_t pos = c->sent;
    uint8_t *sh = r->sh[peer];
    if (pos >= slots) return 0;
    uint64_t acked =
        __atomic_load_n(gn_word(sh, ZN_DEV_ACK_OFF, r->slot[peer], ch), __ATOMIC_ACQUIRE);
    if (pos >= ZN_DEV_NET_NBUF && acked < pos + 1 - ZN_DEV_NET_NBUF) return 0;
    size_t n = gn_bytes(pos);
    pattern_fill(gn_slot(r, peer, 0, ch, pos), n, r->me, peer, pos * GN_NCH + ch);
    *gn_word(sh, ZN_DEV_NETSIZE_OFF, (int)(pos % ZN_DEV_NET_NBUF), ch) = n;
    __atomic_store_n(gn_word(sh, ZN_DEV_READY_OFF, r->row_in[peer], ch), pos + 1, __ATOMIC_RELEASE);
    c->sent++;
    return 1;
}

/* consume + check + release from peer, if the engine landed the next slot. -1: wrong bytes. */
static int gn_pull(struct gn_rank *r, int peer, int ch, struct gn_chan *c, uint64_t slots)
{
    uint64_t pos = c->recvd;
    uint8_t *sh = r->sh[peer];
    if (pos >= slots) return 0;
    uint64_t ready =
        __atomic_load_n(gn_word(sh, ZN_DEV_READY_OFF, r->slot[peer], ch), __ATOMIC_ACQUIRE);
    if (ready < pos + 1) return 0;
    size_t n = gn_bytes(pos);
    size_t bad = pattern_check(gn_slot(r, peer, 1, ch, pos), n, peer, r->me, pos * GN_NCH + ch);
    if (bad != (size_t)-1)
        return fail_at(__FILE__, __LINE__, "slot bytes",
                       "channel %d slot %llu from rank %d: byte %zu of %zu is wrong", ch,
                       (unsigned long long)pos, peer, bad, n);
    __atomic_store_n(gn_word(sh, ZN_DEV_ACK_OFF, r->row_in[peer], ch), pos + 1, __ATOMIC_RELEASE);
    c->recvd++;
    return 1;
}

/* Every rank pushes `slots` slots per channel to each peer it sends to and checks every byte
 * of those it gets; the engine carries them in FIFO order with only ZN_DEV_NET_NBUF slots of
 * room, so the ack and ready counts must turn over correctly many times. */
/* The kernels' side for every peer of r: push `slots` slots per channel, pull as many and
 * check them, until done; then a barrier, so that everybody has all before anyone closes. */
static int gn_move(struct rank_env *e, struct gn_rank *r, int all, uint64_t slots)
{
    static struct gn_chan c[MAXR][GN_NCH];
    memset(c, 0, sizeof(c));
    double t0 = now_s();
    int rc = 0, done = 0;
    while (!rc && !done) {
        int moved = 0;
        done = 1;
        for (int p = 0; p < e->nranks && !rc; p++) {
            int to = p != r->me && (all || p == r->next),
                from = p != r->me && (all || p == r->prev);
            for (int ch = 0; ch < GN_NCH && !rc; ch++) {
                if (to) moved |= gn_push(r, p, ch, &c[p][ch], slots);
                int got = from ? gn_pull(r, p, ch, &c[p][ch], slots) : 0;
                if (got < 0) rc = -1;
                moved |= got > 0;
                done &= (!to || c[p][ch].sent == slots) && (!from || c[p][ch].recvd == slots);
            }
        }
        const char *why = zn_gpunet_failure(r->g);
        if (!rc && (why || r->abort_word))
            rc = fail_at(__FILE__, __LINE__, "engine", "the engine stopped: %s",
                         why ? why : "(abort word raised)");
        if (!rc && !done && now_s() - t0 > 60)
            rc = fail_at(__FILE__, __LINE__, "progress",
                         "after 60 s: channel 0 to %d sent %llu, from %d received %llu of %llu",
                         r->next, (unsigned long long)c[r->next][0].sent, r->prev,
                         (unsigned long long)c[r->prev][0].recvd, (unsigned long long)slots);
        if (!moved) sched_yield();
    }
    return rc ? rc : barrier(e);
}

static int gn_run(struct rank_env *e, int mode, uint64_t slots)
{
    struct gn_rank r;
    int all = mode == GN_ALL;
    if (gn_open(e, &r, mode)) return -1;
    double t0 = now_s();
    int rc = gn_move(e, &r, all, slots);
    gn_close(&r);
    if (!rc)
        SAY("%llu slots per channel and peer each way through the engine (%s) in %.2f s",
            (unsigned long long)slots,
            all                     ? "every pair"
            : mode == GN_SLOTS_RING ? "ring, rows by slot"
                                    : "ring",
            now_s() - t0);
    return rc;
}

/* gpunet: the ring's FIFOs, rank -> rank + 1. */
int sc_gpunet(struct rank_env *e)
{
    return gn_run(e, GN_RING, GN_SLOTS);
}

/* gpunet_all: FIFOs between every two ranks, each carried by its own connections. */
int sc_gpunet_all(struct rank_env *e)
{
    return gn_run(e, GN_ALL, GN_SLOTS / 3);
}

/* gpunet_slots: the ring's FIFOs with the shadows' rows by slot (a ring of more than
 * ZN_DEV_MAX_RANKS ranks): each rank writes its slots' counts into row 2 of its next's view and
 * its acks into row 1 of its prev's, and finds theirs in rows 1 and 2 of its own. */
int sc_gpunet_slots(struct rank_env *e)
{
    return gn_run(e, GN_SLOTS_RING, GN_SLOTS);
}

/* gpunet_gone: 20 slots per channel between every two ranks (FIFOs to every peer, as with
 * send/recv kernels), then the last rank, and with 3 ranks or more the one before it too,
 * destroy their engines (as ranks that destroy their communicators; they stay in the job).
 * Rank 0, which receives from them, must find each close marked in that peer's shadow (gone
 * word = the 20 slots that came + 1, every channel) and an error message naming every one that
 * left, while its engine keeps running: no failure, no abort word, also 2 s later (until
 * 2026-11-25 the engine raised the abort word after 1 s without traffic, ending calls that did
 * not need the peers). */
int sc_gpunet_gone(struct rank_env *e)
{
    const uint64_t slots = 20;
    int nleave = e->nranks >= 3 ? 2 : 1, first = e->nranks - nleave;
    struct gn_rank r;
    if (gn_open(e, &r, GN_ALL)) return -1;
    int rc = gn_move(e, &r, 1, slots);
    if (rc) {
        gn_close(&r);
        return rc;
    }
    if (e->rank >= first) {
        gn_close(&r);
        return barrier(e);
    }
    if (e->rank == 0) {
        for (int q = first; q < e->nranks; q++) {
            int marked = 0;
            double t0 = now_s();
            while (!marked && now_s() - t0 < 20) {
                marked = 1;
                for (int ch = 0; ch < GN_NCH; ch++)
                    marked &= __atomic_load_n(gn_word(r.sh[q], ZN_DEV_NETGONE_OFF, q, ch),
                                              __ATOMIC_ACQUIRE) != 0;
                if (!marked) sched_yield();
            }
            CHECK(marked, "rank %d's close not marked in its shadow within 20 s", q);
            for (int ch = 0; ch < GN_NCH; ch++) {
                uint64_t w = *gn_word(r.sh[q], ZN_DEV_NETGONE_OFF, q, ch);
                CHECK(w == slots + 1,
                      "rank %d channel %d: gone word %llu, want %llu (slots that came + 1)", q, ch,
                      (unsigned long long)w, (unsigned long long)(slots + 1));
            }
        }
        double t1 = now_s();
        while (now_s() - t1 < 2.0) {
            CHECK(!zn_gpunet_failure(r.g) && !r.abort_word,
                  "the engine stopped the kernels after peers closed: %s",
                  zn_gpunet_failure(r.g) ? zn_gpunet_failure(r.g) : "(abort word raised)");
            struct timespec ts = { 0, 10000000 };
            nanosleep(&ts, NULL);
        }
        const char *why = zn_gpunet_gone(r.g);
        CHECK(why &&
                  strstr(why, nleave > 1 ? "closed their connections" : "closed its connections"),
              "the engine's message on the close: %s", why ? why : "(nothing)");
        for (int q = first; q < e->nranks; q++) {
            char who[32];
            snprintf(who, sizeof(who), "rank %d ", q);
            CHECK(strstr(why, who), "the engine's message does not name rank %d: %s", q, why);
        }
        SAY("%d close(s) marked after %llu slots, named: %s; the engine ran on for 2 s", nleave,
            (unsigned long long)slots, why);
    }
    rc = barrier(e);
    gn_close(&r);
    return rc;
}

/* gpunet_abort: rank 0's kernels commit far more than the net can hold while rank 1's never
 * drain a slot, so rank 0's engine is left with slots it cannot send. Destroying it after an
 * abort (the abort word raised, as ncclCommAbort does) must not wait for them; without the
 * abort, the engine's drain would wait ZINC_TIMEOUT for a peer that never reads. Rank 1 keeps
 * its engine (and so the connection) until rank 0 is done, so that a closed connection cannot
 * end the drain instead. */
int sc_gpunet_abort(struct rank_env *e)
{
    struct gn_rank r;
    if (gn_open(e, &r, GN_RING)) return -1;
    int rc = 0;
    uint8_t *sh_next = r.sh[r.next];
    if (e->rank == 0) {
        /* 4096 slots of 64 KB, 256 MB: more than any socket or queue pair holds. A real kernel
         * would wait for acks; the engine only reads ready and the slot sizes. */
        const uint64_t flood = 4096;
        for (int ch = 0; ch < GN_NCH; ch++) {
            for (int b = 0; b < ZN_DEV_NET_NBUF; b++)
                *gn_word(sh_next, ZN_DEV_NETSIZE_OFF, b, ch) = GN_SLOT;
            __atomic_store_n(gn_word(sh_next, ZN_DEV_READY_OFF, r.me, ch), flood, __ATOMIC_RELEASE);
        }
        /* Wait until the engine has sent something (it runs), then for its sends to stall. */
        double t0 = now_s();
        uint64_t acked = 0;
        while (acked < ZN_DEV_NET_NBUF && now_s() - t0 < 30)
            acked = __atomic_load_n(gn_word(sh_next, ZN_DEV_ACK_OFF, r.next, 0), __ATOMIC_ACQUIRE);
        CHECK(acked >= ZN_DEV_NET_NBUF, "the engine sent %llu slots in 30 s",
              (unsigned long long)acked);
        CHECK(acked < flood, "the engine sent all %llu slots to a peer that reads nothing",
              (unsigned long long)flood);
        r.abort_word = 1;
        double t1 = now_s();
        gn_close(&r);
        double dt = now_s() - t1;
        CHECK(dt < zn_params()->timeout / 2.0,
              "destroying the aborted engine took %.1f s (ZINC_TIMEOUT=%lld): it waited for "
              "slots that nobody reads",
              dt, (long long)zn_params()->timeout);
        SAY("aborted engine with %llu of %llu slots sent destroyed in %.3f s",
            (unsigned long long)acked, (unsigned long long)flood, dt);
    }
    rc = barrier(e);
    if (e->rank != 0) gn_close(&r);
    return rc;
}

/* One engine of gpunet_gdr: FIFOs between every two ranks, `slots` slots per channel each way,
 * with ZINC_NET_GDR_LEVEL=level and ZINC_NET_GDR_READ=read; no_mem: the device memory for the
 * rows cannot be had (the engine must fall back to host memory). */
static int gdr_round(struct rank_env *e, const char *level, const char *read, int no_mem,
                     uint64_t slots)
{
    setenv("ZINC_NET_GDR_LEVEL", level, 1);
    setenv("ZINC_NET_GDR_READ", read, 1);
    zn_params_reload();
    struct gn_rank r;
    if (gn_open_gdr(e, &r, GN_ALL, no_mem ? 2 : 1)) return -1;
    struct zn_gpunet_info in;
    zn_gpunet_get_info(r.g, &in);
    int rc = 0;
    int can = (in.ptr_support & NCCL_PTR_CUDA) != 0,
        on = can && !no_mem && strcmp(level, "LOC") != 0;
    if (in.gdr_rx != on || in.gdr_tx != (on && strcmp(read, "1") == 0))
        rc = fail_at(__FILE__, __LINE__, "GPUDirect RDMA",
                     "net %s (ptrSupport %#x), level %s, read %s: rows in device memory: "
                     "received %d, sent %d",
                     in.net, (unsigned)in.ptr_support, level, read, in.gdr_rx, in.gdr_tx);
    /* Rows the engine keeps in host memory are in the shadow (which holds just those), the others
     * are not. */
    size_t sh_bytes = zn_dev_net_shadow_bytes(GN_NCH, GN_SLOT, !in.gdr_tx + !in.gdr_rx);
    for (int p = 0; p < e->nranks && !rc; p++) {
        if (p == r.me) continue;
        uint8_t *c = r.v[p].ctrl;
        int tx_in = r.v[p].tx >= c && r.v[p].tx < c + sh_bytes;
        int rx_in = r.v[p].rx >= c && r.v[p].rx < c + sh_bytes;
        if (tx_in == in.gdr_tx || rx_in == in.gdr_rx)
            rc = fail_at(__FILE__, __LINE__, "rows", "rank %d: row to it %s the shadow, from it %s",
                         p, tx_in ? "in" : "off", rx_in ? "in" : "off");
    }
    /* The device: all are equally near without a GPU, so the one for this rank's place among
     * its host's ranks. */
    const struct zn_net *net = zn_net_find(in.net);
    int idx = 0;
    for (int q = 0; q < r.me; q++) idx += e->peers[q].host_hash == e->peers[r.me].host_hash;
    if (!rc && net && net->ndev > 0 && in.dev != idx % net->ndev)
        rc = fail_at(__FILE__, __LINE__, "device", "device %d (%s) of %d, want %d", in.dev,
                     in.dev_name, net->ndev, idx % net->ndev);
    if (!rc) rc = gn_move(e, &r, 1, slots);
    /* Every slot with bytes in it that landed in "device memory" was flushed before the kernels
     * were told (the IB net flushes GPU registrations with an RDMA read). */
    uint64_t nonempty = 0;
    for (uint64_t pos = 0; pos < slots; pos++) nonempty += gn_bytes(pos) > 0;
    uint64_t want = in.gdr_rx ? nonempty * GN_NCH * (uint64_t)(e->nranks - 1) : 0;
    zn_gpunet_get_info(r.g, &in);
    if (!rc && in.flushes != want)
        rc = fail_at(__FILE__, __LINE__, "flushes", "%llu flushes of received slots, want %llu",
                     (unsigned long long)in.flushes, (unsigned long long)want);
    if (!rc)
        SAY("level %s, read %s%s: net %s device %s, rows in device memory: received %d, sent "
            "%d; %llu flushes",
            level, read, no_mem ? ", no device memory" : "", in.net, in.dev_name, in.gdr_rx,
            in.gdr_tx, (unsigned long long)in.flushes);
    gn_close(&r);
    return rc;
}

/* gpunet_gdr: GPUDirect RDMA in the engine, with plain memory standing in for the device
 * memory of its rows (plain_gdr_alloc). Three engines in turn, 40 slots per channel between
 * every two ranks each: ZINC_NET_GDR_LEVEL=SYS (anything near enough: both rows off the shadow
 * where the net moves GPU memory, the IB net; none on the socket net, which cannot),
 * ZINC_NET_GDR_READ=0 (only received rows off it), ZINC_NET_GDR_LEVEL=LOC (never), and SYS
 * where no device memory can be had for the rows (they stay in host memory: a warning, not a
 * failed communicator). Also the net device: with equally near devices, the one for this
 * rank's place on its host. */
int sc_gpunet_gdr(struct rank_env *e)
{
    int rc = gdr_round(e, "SYS", "1", 0, 40);
    if (!rc) rc = gdr_round(e, "SYS", "0", 0, 40);
    if (!rc) rc = gdr_round(e, "LOC", "1", 0, 40);
    if (!rc) rc = gdr_round(e, "SYS", "1", 1, 40);
    unsetenv("ZINC_NET_GDR_LEVEL");
    unsetenv("ZINC_NET_GDR_READ");
    zn_params_reload();
    return rc;
}
