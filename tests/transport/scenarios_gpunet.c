/*
 * Conformance scenarios for the proxy's GPU net engine (src/proxy/gpunet.h), run without a GPU:
 * host code in each rank stands in for the kernels (a test double of fifo.cuh's reserve /
 * commit / consume / release on the net shadows, written here from the layout in
 * abi/dev_abi.h), and the shadows are plain memory (the engine's shadow_alloc hook). The
 * engine, the proxy's progress thread and the net (ZINC_NET: the socket net, or IB through the
 * verbs emulation) are the real ones. Every rank is its own "host": ring hops rank -> rank + 1,
 * all over the net.
 */
#include "conformance.h"
#include "abi/dev_abi.h"
#include "proxy/gpunet.h"
#include "proxy/service.h"
#include "util/param.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GN_NCH   2
#define GN_SLOT  (64 * 1024)
#define GN_SLOTS 300 /* per channel and direction, many times ZN_DEV_NET_NBUF */

static ncclResult_t plain_alloc(void **host, void **dev, size_t size)
{
    *host = *dev = calloc(1, size);
    return *host ? ncclSuccess : ncclSystemError;
}

struct gn_rank {
    struct zn_gpunet *g;
    volatile uint32_t abort_word;
    uint8_t *sh_next, *sh_prev; /* the shadows the kernels of this rank would see */
    int me, next, prev;
};

static volatile uint64_t *gn_word(uint8_t *base, size_t off, int peer, int ch)
{
    return (volatile uint64_t *)(base + zn_dev_ctrl_off(off, peer, ch));
}

/* Row 0: the slots this rank sends; row 1: those it receives. */
static uint8_t *gn_slot(uint8_t *base, int row, int ch, uint64_t pos)
{
    return base + zn_dev_net_slot_off(row, ch, GN_NCH, (int)(pos % ZN_DEV_NET_NBUF), GN_SLOT);
}

/* Bytes of slot pos: full slots, and now and then a short or empty one. */
static size_t gn_bytes(uint64_t pos)
{
    static const size_t odd[] = { 0, 1, 4093, GN_SLOT - 8 };
    return pos % 7 == 3 ? odd[(pos / 7) % 4] : GN_SLOT;
}

static int gn_open(struct rank_env *e, struct gn_rank *r)
{
    memset((void *)r, 0, sizeof(*r));
    r->me = e->rank;
    r->next = (e->rank + 1) % e->nranks;
    r->prev = (e->rank + e->nranks - 1) % e->nranks;
    CHECK(zn_proxy_acquire() == ncclSuccess, "no proxy");
    struct zn_gpunet_config cfg = { .ctx = &e->ctx,
                                    .next = r->next,
                                    .prev = r->prev,
                                    .next_remote = 1,
                                    .prev_remote = 1,
                                    .nch = GN_NCH,
                                    .slot_bytes = GN_SLOT,
                                    .abort_word = &r->abort_word,
                                    .shadow_alloc = plain_alloc,
                                    .shadow_free = free };
    uint8_t *shadow[MAXR] = { 0 };
    ncclResult_t res = zn_gpunet_create(&cfg, &r->g, shadow);
    if (res != ncclSuccess) zn_proxy_release();
    CHECK(res == ncclSuccess, "zn_gpunet_create returned %d", (int)res);
    r->sh_next = shadow[r->next];
    r->sh_prev = shadow[r->prev];
    CHECK(r->sh_next && r->sh_prev, "no shadow for the ring neighbours");
    return 0;
}

static void gn_close(struct gn_rank *r)
{
    zn_gpunet_destroy(r->g);
    r->g = NULL;
    zn_proxy_release();
}

/* The kernels' side of one channel: push GN_SLOTS slots to next, consume as many from prev. */
struct gn_chan {
    uint64_t sent, recvd;
};

/* reserve + fill + commit, if the slot is free (ack from the engine). */
static int gn_push(struct gn_rank *r, int ch, struct gn_chan *c)
{
    uint64_t pos = c->sent;
    if (pos >= GN_SLOTS) return 0;
    uint64_t acked =
        __atomic_load_n(gn_word(r->sh_next, ZN_DEV_ACK_OFF, r->next, ch), __ATOMIC_ACQUIRE);
    if (pos >= ZN_DEV_NET_NBUF && acked < pos + 1 - ZN_DEV_NET_NBUF) return 0;
    size_t n = gn_bytes(pos);
    pattern_fill(gn_slot(r->sh_next, 0, ch, pos), n, r->me, r->next, pos * GN_NCH + ch);
    *gn_word(r->sh_next, ZN_DEV_NETSIZE_OFF, (int)(pos % ZN_DEV_NET_NBUF), ch) = n;
    __atomic_store_n(gn_word(r->sh_next, ZN_DEV_READY_OFF, r->me, ch), pos + 1, __ATOMIC_RELEASE);
    c->sent++;
    return 1;
}

/* consume + check + release, if the engine landed the next slot. -1: wrong bytes. */
static int gn_pull(struct gn_rank *r, int ch, struct gn_chan *c)
{
    uint64_t pos = c->recvd;
    if (pos >= GN_SLOTS) return 0;
    uint64_t ready =
        __atomic_load_n(gn_word(r->sh_prev, ZN_DEV_READY_OFF, r->prev, ch), __ATOMIC_ACQUIRE);
    if (ready < pos + 1) return 0;
    size_t n = gn_bytes(pos);
    size_t bad =
        pattern_check(gn_slot(r->sh_prev, 1, ch, pos), n, r->prev, r->me, pos * GN_NCH + ch);
    if (bad != (size_t)-1)
        return fail_at(__FILE__, __LINE__, "slot bytes",
                       "channel %d slot %llu from rank %d: byte %zu of %zu is wrong", ch,
                       (unsigned long long)pos, r->prev, bad, n);
    __atomic_store_n(gn_word(r->sh_prev, ZN_DEV_ACK_OFF, r->me, ch), pos + 1, __ATOMIC_RELEASE);
    c->recvd++;
    return 1;
}

/* gpunet: every rank pushes GN_SLOTS slots per channel to next and checks every byte of the
 * GN_SLOTS it gets from prev; the engine carries them in FIFO order with only ZN_DEV_NET_NBUF slots
 * of room, so the ack and ready counts must turn over correctly many times. */
int sc_gpunet(struct rank_env *e)
{
    struct gn_rank r;
    if (gn_open(e, &r)) return -1;
    struct gn_chan c[GN_NCH];
    memset(c, 0, sizeof(c));
    double t0 = now_s();
    int rc = 0, done = 0;
    while (!rc && !done) {
        int moved = 0;
        done = 1;
        for (int ch = 0; ch < GN_NCH && !rc; ch++) {
            moved |= gn_push(&r, ch, &c[ch]);
            int got = gn_pull(&r, ch, &c[ch]);
            if (got < 0) rc = -1;
            moved |= got > 0;
            done &= c[ch].sent == GN_SLOTS && c[ch].recvd == GN_SLOTS;
        }
        const char *why = zn_gpunet_failure(r.g);
        if (!rc && (why || r.abort_word))
            rc = fail_at(__FILE__, __LINE__, "engine", "the engine stopped: %s",
                         why ? why : "(abort word raised)");
        if (!rc && !done && now_s() - t0 > 60)
            rc = fail_at(__FILE__, __LINE__, "progress",
                         "after 60 s: channel 0 sent %llu received %llu of %d",
                         (unsigned long long)c[0].sent, (unsigned long long)c[0].recvd, GN_SLOTS);
        if (!moved) sched_yield();
    }
    /* The last slots may still be on their way to next: destroy only after everybody has all. */
    if (!rc) rc = barrier(e);
    gn_close(&r);
    if (!rc)
        SAY("%d slots per channel each way through the engine in %.2f s", GN_SLOTS, now_s() - t0);
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
    if (gn_open(e, &r)) return -1;
    int rc = 0;
    if (e->rank == 0) {
        /* 4096 slots of 64 KB, 256 MB: more than any socket or queue pair holds. A real kernel
         * would wait for acks; the engine only reads ready and the slot sizes. */
        const uint64_t flood = 4096;
        for (int ch = 0; ch < GN_NCH; ch++) {
            for (int b = 0; b < ZN_DEV_NET_NBUF; b++)
                *gn_word(r.sh_next, ZN_DEV_NETSIZE_OFF, b, ch) = GN_SLOT;
            __atomic_store_n(gn_word(r.sh_next, ZN_DEV_READY_OFF, r.me, ch), flood,
                             __ATOMIC_RELEASE);
        }
        /* Wait until the engine has sent something (it runs), then for its sends to stall. */
        double t0 = now_s();
        uint64_t acked = 0;
        while (acked < ZN_DEV_NET_NBUF && now_s() - t0 < 30)
            acked =
                __atomic_load_n(gn_word(r.sh_next, ZN_DEV_ACK_OFF, r.next, 0), __ATOMIC_ACQUIRE);
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
