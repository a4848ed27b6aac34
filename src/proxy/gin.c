/*
 * GIN between hosts: the engine thread of a device communicator (gin.h says what it does).
 *
 * Wire format, version 1. Every operation is one header message, then its bytes (PUT) in
 * messages of up to CHUNK bytes each, on the net transport's connection between the two
 * ranks (messages keep their order and carry their length; a receive posted for another
 * length fails rather than corrupt data):
 *
 *    0         4      6      8        12       16                 24                 32
 *   +---------+------+------+--------+--------+------------------+------------------+
 *   | "ZGIN"  | ver  | kind | window | flags  | offset           | bytes            |
 *   +---------+------+------+--------+--------+------------------+------------------+
 *   | signal  | pad           | signal value     | inline value     | reserved         |
 *   +---------+---------------+------------------+------------------+------------------+
 *   32        36              40                 48                 56                 64
 *
 * kind OP: a put (its bytes follow), a put of a value (flag WIRE_INLINE: bytes <= 8, in the
 * inline value, nothing follows) or a signal alone (bytes 0). flags also carry the signal's
 * action (ZINC_GIN_F_SIGNAL_INC / _ADD). kind BYE: the sender is closing and will send
 * nothing more; everything it sent before is applied once the BYE is read.
 *
 * The receiving engine writes the bytes into the window (ops->copy, done when it returns) and
 * then adds to the signal: a kernel that sees the signal sees the bytes.
 *
 * The engine thread is the only user of the transport state after create, as the transport
 * asks (one driving thread per connection). Outgoing bytes are staged in host memory at the
 * time the request is taken, so the counter (source reusable) is raised at once; the bytes
 * staged and not yet sent are bounded, and the FIFO waits while they are at the bound.
 */
#include "proxy/gin.h"

#include "bootstrap/bootstrap.h"

#include "util/clock.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/thread.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GIN_MAGIC     0x4e49475au /* "ZGIN" little-endian */
#define GIN_VERSION   1
#define KIND_OP       1
#define KIND_BYE      2
#define CHUNK         ((size_t)4 << 20)
#define MAX_STAGED    ((size_t)64 << 20) /* bytes staged for sending, all peers */
#define MAX_ITEMS     1024               /* operations queued for sending, all peers */
#define MAX_PUT_BYTES ((uint64_t)1 << 40)
#define WIRE_INLINE   0x100u /* header flag: the bytes (1..8) are the inline value */

struct wire_hdr {
    uint32_t magic;
    uint16_t version, kind;
    uint32_t window, flags;
    uint64_t offset, bytes;
    uint32_t signal, pad;
    uint64_t signal_value, value, reserved;
};
_Static_assert(sizeof(struct wire_hdr) == 64, "GIN wire header is 64 bytes");

/* An operation on its way out: the header, its staged bytes and one request per message. */
struct out_item {
    struct out_item *next;
    struct wire_hdr hdr;
    char *data;
    size_t staged; /* bytes of data counted in g->staged */
    int nreq;
    struct zn_req req[];
};

enum rx_state { RX_HDR, RX_BODY, RX_BYE };

struct gin_peer {
    struct zn_conn *conn;
    struct out_item *oq, *oq_tail;
    /* receive side */
    enum rx_state rx;
    struct wire_hdr rhdr;
    struct zn_req rreq;
    char *rbuf;
    size_t rbuf_cap;
    char *target;          /* where the current put's bytes go */
    uint64_t rdone, rpost; /* bytes of it applied, bytes of the chunk posted */
    int bye_sent;
};

struct zn_gin {
    struct zn_tctx tctx;
    const struct zn_transport_ops *tp;
    void *tstate;
    uint8_t *net_peer;
    struct gin_peer *peers;
    struct zincGinProxy *proxy;
    struct zincGinRequest *slots;
    uint64_t *net_signals, *net_counters;
    int nsignals, ncounters;
    const struct zn_gin_ops *ops;
    void *ctx;

    pthread_t thread;
    int started;
    atomic_int closing;  /* destroy asks the thread to finish: 1 drain first, 2 at once */
    atomic_int status;   /* ncclResult_t: the failure, once failed */
    atomic_int finished; /* the thread left its loop */
    size_t staged;
    int items;
};

static void peer_name(const struct zn_gin *g, int peer, char *buf, size_t len)
{
    zn_peer_str(&g->tctx, peer, buf, len);
}

/* The engine failed (engine thread): record it once, stop the kernels' waits, tell the owner,
 * and tell the peers' engines why, so that their kernels stop too instead of waiting for
 * operations this rank will never apply. */
static void fail(struct zn_gin *g, ncclResult_t res)
{
    int expected = ncclSuccess;
    if (!atomic_compare_exchange_strong(&g->status, &expected, (int)res)) return;
    char msg[ZN_ERRMSG_MAX];
    snprintf(msg, sizeof(msg), "GIN engine of rank %d failed: %s", g->tctx.rank, zn_last_error());
    __atomic_store_n(&g->proxy->error, (uint32_t)res, __ATOMIC_RELEASE);
    if (g->ops->failed) g->ops->failed(g->ctx, res);
    if (g->tstate) g->tp->abort(g->tstate, msg);
}

/* ------------------------------------------------------------------------------------------ */
/* Sending                                                                                     */

static ncclResult_t post_item(struct zn_gin *g, int peer, struct out_item *it)
{
    struct gin_peer *p = &g->peers[peer];
    ncclResult_t res = g->tp->isend(p->conn, &it->hdr, sizeof(it->hdr), &it->req[0]);
    for (int i = 1; res == ncclSuccess && i < it->nreq; i++) {
        size_t off = (size_t)(i - 1) * CHUNK, n = it->hdr.bytes - off;
        res = g->tp->isend(p->conn, it->data + off, n < CHUNK ? n : CHUNK, &it->req[i]);
    }
    /* Queued even on failure: the transport may hold requests posted before the error, and
     * the item is freed with the queue. */
    if (p->oq_tail)
        p->oq_tail->next = it;
    else
        p->oq = it;
    p->oq_tail = it;
    g->staged += it->staged;
    g->items++;
    return res;
}

static ncclResult_t new_item(const struct wire_hdr *h, int with_data, struct out_item **out)
{
    int nchunks = with_data ? (int)((h->bytes + CHUNK - 1) / CHUNK) : 0;
    struct out_item *it = calloc(1, sizeof(*it) + (size_t)(1 + nchunks) * sizeof(struct zn_req));
    if (!it) return zn_error(ncclSystemError, ZN_PROXY, "GIN: out of memory");
    it->hdr = *h;
    it->nreq = 1 + nchunks;
    if (nchunks) {
        it->data = malloc(h->bytes);
        if (!it->data) {
            free(it);
            return zn_error(ncclSystemError, ZN_PROXY,
                            "GIN: out of memory staging a put of %llu bytes",
                            (unsigned long long)h->bytes);
        }
        it->staged = h->bytes;
    }
    *out = it;
    return ncclSuccess;
}

static ncclResult_t check_request(const struct zn_gin *g, const struct zincGinRequest *r)
{
    const char *what = NULL;
    if (r->peer < 0 || r->peer >= g->tctx.nranks || !g->net_peer[r->peer])
        what = "its peer is not a rank served through the net (a rank outside the LSA team)";
    else if (r->op != ZINC_GIN_OP_PUT && r->op != ZINC_GIN_OP_PUT_VALUE &&
             r->op != ZINC_GIN_OP_SIGNAL)
        what = "unknown operation";
    else if (r->op == ZINC_GIN_OP_PUT_VALUE && (r->bytes < 1 || r->bytes > 8))
        what = "a put of a value carries 1 to 8 bytes";
    else if (r->op == ZINC_GIN_OP_PUT && r->bytes > MAX_PUT_BYTES)
        what = "too many bytes";
    else if ((r->flags & (ZINC_GIN_F_SIGNAL_INC | ZINC_GIN_F_SIGNAL_ADD)) &&
             r->signal >= (uint32_t)g->nsignals)
        what = "signal id out of range";
    else if ((r->flags & ZINC_GIN_F_COUNTER) && r->counter >= (uint32_t)g->ncounters)
        what = "counter id out of range";
    else if (r->flags &
             ~(uint32_t)(ZINC_GIN_F_SIGNAL_INC | ZINC_GIN_F_SIGNAL_ADD | ZINC_GIN_F_COUNTER))
        what = "unknown flags";
    if (!what) return ncclSuccess;
    return zn_error(ncclInvalidUsage, ZN_PROXY,
                    "GIN: rank %d's request %llu is invalid: %s (op %u, peer %d, window %u, "
                    "offset %llu, bytes %llu, flags 0x%x, signal %u of %d, counter %u of %d)",
                    g->tctx.rank, (unsigned long long)(r->seq - 1), what, r->op, r->peer,
                    r->dstWindow, (unsigned long long)r->dstOffset, (unsigned long long)r->bytes,
                    r->flags, r->signal, g->nsignals, r->counter, g->ncounters);
}

/* Take what the FIFO holds (while the staging bounds allow): stage the source, raise the
 * counter, free the slot, post the messages. */
static ncclResult_t take_fifo(struct zn_gin *g, int *progressed)
{
    uint64_t tail = __atomic_load_n(&g->proxy->tail, __ATOMIC_RELAXED);
    uint32_t n = g->proxy->nslots;
    while (g->staged < MAX_STAGED && g->items < MAX_ITEMS) {
        struct zincGinRequest *s = &g->slots[tail % n];
        if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != tail + 1) break;
        struct zincGinRequest r = *s;
        r.seq = tail + 1;
        ZN_CHECK(check_request(g, &r));
        struct wire_hdr h = { .magic = GIN_MAGIC,
                              .version = GIN_VERSION,
                              .kind = KIND_OP,
                              .window = r.dstWindow,
                              .flags = (r.flags & (ZINC_GIN_F_SIGNAL_INC | ZINC_GIN_F_SIGNAL_ADD)) |
                                       (r.op == ZINC_GIN_OP_PUT_VALUE ? WIRE_INLINE : 0),
                              .offset = r.dstOffset,
                              .bytes = r.op == ZINC_GIN_OP_SIGNAL ? 0 : r.bytes,
                              .signal = r.signal,
                              .signal_value = r.signalValue,
                              .value = r.op == ZINC_GIN_OP_PUT_VALUE ? r.src : 0 };
        int with_data = r.op == ZINC_GIN_OP_PUT && r.bytes > 0;
        struct out_item *it;
        ZN_CHECK(new_item(&h, with_data, &it));
        if (with_data) {
            ncclResult_t res =
                g->ops->copy(g->ctx, it->data, (const void *)(uintptr_t)r.src, (size_t)r.bytes);
            if (res != ncclSuccess) {
                free(it->data);
                free(it);
                return res;
            }
        }
        /* The source is read: the kernel may reuse it (counter) and the slot (tail). */
        if (r.flags & ZINC_GIN_F_COUNTER)
            __atomic_fetch_add(&g->net_counters[r.counter], 1, __ATOMIC_RELEASE);
        tail++;
        __atomic_store_n(&g->proxy->tail, tail, __ATOMIC_RELEASE);
        *progressed = 1;
        ZN_CHECK(post_item(g, r.peer, it));
    }
    return ncclSuccess;
}

static void free_item(struct zn_gin *g, struct out_item *it)
{
    g->staged -= it->staged;
    g->items--;
    free(it->data);
    free(it);
}

/* Free the operations whose messages are all sent (they complete in posting order). */
static void retire_sends(struct zn_gin *g, struct gin_peer *p, int *progressed)
{
    while (p->oq && p->oq->req[p->oq->nreq - 1].state == ZN_REQ_DONE) {
        struct out_item *it = p->oq;
        p->oq = it->next;
        if (!p->oq) p->oq_tail = NULL;
        free_item(g, it);
        *progressed = 1;
    }
}

static ncclResult_t send_bye(struct zn_gin *g, int peer)
{
    struct wire_hdr h = { .magic = GIN_MAGIC, .version = GIN_VERSION, .kind = KIND_BYE };
    struct out_item *it;
    ZN_CHECK(new_item(&h, 0, &it));
    g->peers[peer].bye_sent = 1;
    return post_item(g, peer, it);
}

/* ------------------------------------------------------------------------------------------ */
/* Receiving                                                                                   */

static ncclResult_t post_hdr(struct zn_gin *g, struct gin_peer *p)
{
    p->rx = RX_HDR;
    return g->tp->irecv(p->conn, &p->rhdr, sizeof(p->rhdr), &p->rreq);
}

static ncclResult_t post_chunk(struct zn_gin *g, struct gin_peer *p)
{
    uint64_t left = p->rhdr.bytes - p->rdone;
    p->rpost = left < CHUNK ? left : CHUNK;
    if (p->rbuf_cap < p->rpost) {
        char *b = realloc(p->rbuf, p->rpost);
        if (!b) return zn_error(ncclSystemError, ZN_PROXY, "GIN: out of memory");
        p->rbuf = b;
        p->rbuf_cap = p->rpost;
    }
    p->rx = RX_BODY;
    return g->tp->irecv(p->conn, p->rbuf, p->rpost, &p->rreq);
}

/* The operation in p->rhdr is complete here: add to its signal. */
static void apply_signal(struct zn_gin *g, const struct wire_hdr *h)
{
    if (h->flags & ZINC_GIN_F_SIGNAL_INC)
        __atomic_fetch_add(&g->net_signals[h->signal], 1, __ATOMIC_RELEASE);
    else if (h->flags & ZINC_GIN_F_SIGNAL_ADD)
        __atomic_fetch_add(&g->net_signals[h->signal], h->signal_value, __ATOMIC_RELEASE);
}

static ncclResult_t bad_header(struct zn_gin *g, int peer, const char *what)
{
    char who[128];
    peer_name(g, peer, who, sizeof(who));
    const struct wire_hdr *h = &g->peers[peer].rhdr;
    return zn_error(ncclRemoteError, ZN_PROXY,
                    "GIN: %s sent an operation that rank %d cannot apply: %s (magic 0x%x, "
                    "version %u, kind %u, window %u, offset %llu, bytes %llu, flags 0x%x, signal "
                    "%u of %d)",
                    who, g->tctx.rank, what, h->magic, h->version, h->kind, h->window,
                    (unsigned long long)h->offset, (unsigned long long)h->bytes, h->flags,
                    h->signal, g->nsignals);
}

static ncclResult_t on_header(struct zn_gin *g, int peer)
{
    struct gin_peer *p = &g->peers[peer];
    const struct wire_hdr *h = &p->rhdr;
    if (h->magic != GIN_MAGIC || h->version != GIN_VERSION)
        return bad_header(g, peer, "not a GIN header of this version");
    if (h->kind == KIND_BYE) {
        p->rx = RX_BYE;
        return ncclSuccess;
    }
    if (h->kind != KIND_OP) return bad_header(g, peer, "unknown kind");
    if ((h->flags & (ZINC_GIN_F_SIGNAL_INC | ZINC_GIN_F_SIGNAL_ADD)) &&
        h->signal >= (uint32_t)g->nsignals)
        return bad_header(g, peer, "signal id out of range");
    if (h->bytes > MAX_PUT_BYTES) return bad_header(g, peer, "too many bytes");
    if ((h->flags & WIRE_INLINE) && h->bytes > 8)
        return bad_header(g, peer, "an inline value of more than 8 bytes");
    if (h->flags & ~(uint32_t)(ZINC_GIN_F_SIGNAL_INC | ZINC_GIN_F_SIGNAL_ADD | WIRE_INLINE))
        return bad_header(g, peer, "unknown flags");
    if (h->bytes > 0) {
        void *dst;
        ZN_CHECK(g->ops->resolve(g->ctx, h->window, h->offset, h->bytes, &dst));
        p->target = dst;
        p->rdone = 0;
    }
    return ncclSuccess;
}

static ncclResult_t recv_progress(struct zn_gin *g, int peer, int *progressed)
{
    struct gin_peer *p = &g->peers[peer];
    while (p->rx != RX_BYE && p->rreq.state == ZN_REQ_DONE) {
        *progressed = 1;
        if (p->rx == RX_HDR) {
            ZN_CHECK(on_header(g, peer));
            if (p->rx == RX_BYE) break;
            const struct wire_hdr *h = &p->rhdr;
            if (h->bytes > 0 && !(h->flags & WIRE_INLINE)) {
                ZN_CHECK(post_chunk(g, p));
                continue;
            }
            if (h->bytes > 0) /* a value carried inline */
                ZN_CHECK(g->ops->copy(g->ctx, p->target, &h->value, (size_t)h->bytes));
            apply_signal(g, h);
            ZN_CHECK(post_hdr(g, p));
        } else {
            ZN_CHECK(g->ops->copy(g->ctx, p->target + p->rdone, p->rbuf, (size_t)p->rpost));
            p->rdone += p->rpost;
            if (p->rdone < p->rhdr.bytes) {
                ZN_CHECK(post_chunk(g, p));
                continue;
            }
            apply_signal(g, &p->rhdr);
            ZN_CHECK(post_hdr(g, p));
        }
    }
    return ncclSuccess;
}

/* ------------------------------------------------------------------------------------------ */
/* The thread                                                                                  */

static int fifo_empty(const struct zn_gin *g)
{
    uint64_t tail = __atomic_load_n(&g->proxy->tail, __ATOMIC_RELAXED);
    const struct zincGinRequest *s = &g->slots[tail % g->proxy->nslots];
    return __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != tail + 1;
}

/* Nothing moved: yield for a while, then nap (20 us, then 50 us at most, since a kernel may
 * queue a request at any moment and the nap is its latency). */
static void idle(unsigned *spins)
{
    if (++*spins < 64) {
        sched_yield();
        return;
    }
    struct timespec ts = { 0, *spins < 4096 ? 20000 : 50000 };
    nanosleep(&ts, NULL);
}

static ncclResult_t engine_loop(struct zn_gin *g)
{
    int n = g->tctx.nranks;
    if (g->ops->thread_init) ZN_CHECK(g->ops->thread_init(g->ctx));
    for (int r = 0; r < n; r++) {
        if (!g->net_peer[r]) continue;
        ZN_CHECK(g->tp->connect(g->tstate, r, ZN_CH_COLL, &g->peers[r].conn));
        ZN_CHECK(post_hdr(g, &g->peers[r]));
    }
    unsigned spins = 0;
    int64_t deadline = 0;
    for (;;) {
        int progressed = 0;
        ZN_CHECK(take_fifo(g, &progressed));
        int closing = atomic_load(&g->closing);
        if (closing == 2) return ncclSuccess;
        if (closing && !deadline) deadline = zn_deadline_from_now();
        int all_done = 1;
        for (int r = 0; r < n; r++) {
            if (!g->net_peer[r]) continue;
            struct gin_peer *p = &g->peers[r];
            if (closing && !p->bye_sent && fifo_empty(g)) ZN_CHECK(send_bye(g, r));
            /* Done with this peer (both BYEs through): nothing more moves on the connection,
             * and the peer may close it at any time now, which progress would report. */
            if (p->bye_sent && !p->oq && p->rx == RX_BYE) continue;
            all_done = 0;
            ZN_CHECK(g->tp->progress(p->conn, &progressed));
            retire_sends(g, p, &progressed);
            ZN_CHECK(recv_progress(g, r, &progressed));
        }
        if (closing && all_done) return ncclSuccess;
        if (closing && zn_now_ns() > deadline) {
            for (int r = 0; r < n; r++) {
                if (!g->net_peer[r] || g->peers[r].rx == RX_BYE) continue;
                char who[128];
                peer_name(g, r, who, sizeof(who));
                return zn_error(ncclRemoteError, ZN_PROXY,
                                "GIN: rank %d closed its device communicator but %s did not "
                                "finish its GIN operations to it within ZINC_TIMEOUT",
                                g->tctx.rank, who);
            }
            return zn_error(ncclRemoteError, ZN_PROXY,
                            "GIN: rank %d could not send its last GIN operations within "
                            "ZINC_TIMEOUT",
                            g->tctx.rank);
        }
        if (progressed)
            spins = 0;
        else
            idle(&spins);
    }
}

static void *engine_main(void *arg)
{
    struct zn_gin *g = arg;
    zn_log_rank = g->tctx.rank;
    /* Off the core of a main thread that spins in cudaStreamSynchronize, as the proxy's
     * progress thread (proxy/progress.c): the kernel waits for every request it queues. */
    char cpus[256];
    if (zn_thread_spread(zn_params()->proxy_cpus, cpus, sizeof(cpus)) == 0)
        zn_info(ZN_PROXY, "GIN engine on CPUs %s", cpus);
    ncclResult_t res = engine_loop(g);
    if (res != ncclSuccess) fail(g, res);
    atomic_store(&g->finished, 1);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Create / destroy                                                                            */

static void gin_free(struct zn_gin *g)
{
    if (g->tstate) g->tp->fini(g->tstate);
    for (int r = 0; g->peers && r < g->tctx.nranks; r++) {
        struct gin_peer *p = &g->peers[r];
        while (p->oq) {
            struct out_item *it = p->oq;
            p->oq = it->next;
            free_item(g, it);
        }
        free(p->rbuf);
    }
    free(g->peers);
    free(g->net_peer);
    free(g);
}

ncclResult_t zn_gin_create(const struct zn_gin_args *a, struct zn_gin **out)
{
    ncclResult_t res;
    struct zn_gin *g;
    ZN_CHECK(zn_calloc(&g, 1, "GIN engine"));
    g->tctx = *a->tctx;
    g->tp = &zn_transport_net;
    g->proxy = a->proxy;
    g->slots = a->slots;
    g->net_signals = a->net_signals;
    g->net_counters = a->net_counters;
    g->nsignals = a->nsignals;
    g->ncounters = a->ncounters;
    g->ops = a->ops;
    g->ctx = a->ctx;
    int n = g->tctx.nranks;
    ZN_CHECK_GOTO(zn_calloc(&g->net_peer, (size_t)n, "GIN peers"), res, err_free);
    ZN_CHECK_GOTO(zn_calloc(&g->peers, (size_t)n, "GIN peers"), res, err_free);
    memcpy(g->net_peer, a->net_peer, (size_t)n);
    g->net_peer[g->tctx.rank] = 0;
    if (g->proxy->nslots == 0) g->proxy->nslots = ZINC_GIN_FIFO_SLOTS;
    /* Collective: every rank opens its net listener and allgathers the handles. */
    ZN_CHECK_GOTO(g->tp->init(&g->tctx, &g->tstate), res, err_free);
    if (pthread_create(&g->thread, NULL, engine_main, g) != 0) {
        res = zn_error(ncclSystemError, ZN_PROXY, "GIN: cannot start the engine thread");
        goto err_free;
    }
    g->started = 1;
    zn_info(ZN_PROXY | ZN_INIT, "GIN: rank %d's engine started (%d signals, %d counters)",
            g->tctx.rank, g->nsignals, g->ncounters);
    *out = g;
    return ncclSuccess;
err_free:
    gin_free(g);
    return res;
}

void zn_gin_destroy(struct zn_gin *g, int drain)
{
    if (!g) return;
    atomic_store(&g->closing, drain ? 1 : 2);
    if (g->started) pthread_join(g->thread, NULL);
    /* Close only once every engine is through: a peer still draining with a third rank keeps
     * its connection to this rank open, and a close it saw would fail it. A failed engine
     * (its peers were told) does not wait. */
    if (drain && g->started && atomic_load(&g->status) == ncclSuccess)
        (void)zn_boot_barrier(g->tctx.boot);
    gin_free(g);
}

ncclResult_t zn_gin_status(struct zn_gin *g)
{
    return (ncclResult_t)atomic_load(&g->status);
}

ncclResult_t zn_gin_push(struct zincGinProxy *proxy, struct zincGinRequest *slots, uint64_t *head,
                         const struct zincGinRequest *req)
{
    uint32_t n = proxy->nslots ? proxy->nslots : ZINC_GIN_FIFO_SLOTS;
    uint64_t t = __atomic_fetch_add(head, 1, __ATOMIC_ACQ_REL);
    int64_t deadline = zn_deadline_from_now();
    unsigned spins = 0;
    while (t >= __atomic_load_n(&proxy->tail, __ATOMIC_ACQUIRE) + n) {
        uint32_t e = __atomic_load_n(&proxy->error, __ATOMIC_ACQUIRE);
        if (e)
            return zn_error(ncclRemoteError, ZN_PROXY,
                            "GIN: the engine failed (error %u, see its message); request %llu "
                            "not queued",
                            e, (unsigned long long)t);
        if (zn_now_ns() > deadline)
            return zn_error(ncclSystemError, ZN_PROXY,
                            "GIN: the FIFO stayed full for ZINC_TIMEOUT (request %llu)",
                            (unsigned long long)t);
        idle(&spins);
    }
    struct zincGinRequest *s = &slots[t % n];
    struct zincGinRequest r = *req;
    r.seq = 0;
    /* Every field but seq, then seq: the engine reads a slot once seq names this round. */
    memcpy((char *)s + 8, (const char *)&r + 8, sizeof(r) - 8);
    __atomic_store_n(&s->seq, t + 1, __ATOMIC_RELEASE);
    return ncclSuccess;
}
