/*
 * The shm transport: point-to-point byte streams between two ranks on one host, through a
 * pair of ring buffers in a segment the two share. One segment per (pair, channel), made on
 * first use by the lower rank and mapped by the higher one; the name is unlinked as soon as
 * both have it mapped.
 *
 * Segment layout (version SHM_FIFO_VERSION), one fifo per direction:
 *
 *   +--------------------------------+  fifo[0]: lower rank -> higher rank
 *   | head (bytes written)   64 B    |  written by the sender only
 *   | tail (bytes consumed)  64 B    |  written by the receiver only
 *   | closed flag, version   64 B    |
 *   | data ring (size bytes)         |
 *   +--------------------------------+  fifo[1]: higher -> lower, same layout
 *
 * The stream is a sequence of messages, each an 8-byte length followed by the payload, so a
 * receive posted with another length is detected. Sender and receiver copy with plain
 * memcpy and publish progress with release/acquire stores of head and tail: no system calls.
 * Backpressure is the ring's size; a large message streams through it.
 */
#include "peer.h"
#include "transport.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/param.h"
#include "util/shm.h"
#include "util/size.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHM_FIFO_VERSION 1

struct fifo {
    _Alignas(64) atomic_uint_least64_t head;
    _Alignas(64) atomic_uint_least64_t tail;
    _Alignas(64) atomic_uint closed; /* 1: destroyed; 2: aborted, reason in note */
    atomic_uint version;             /* set last by the creator: 0 means "not initialised yet" */
    uint64_t size;
    char note[512];
    _Alignas(64) uint8_t data[];
};

struct shm_conn {
    struct zn_conn_hdr h;
    struct shm_state *st;
    int attached; /* segment mapped (always 1 on the creating side) */
    int64_t deadline;
    struct zn_shm_seg seg;
    struct fifo *out, *in;
    struct zn_req *sendq, **sendq_tail;
    struct zn_req *recvq, **recvq_tail;
    int64_t idle_since; /* when requests last stopped moving (0: they are moving) */
    int64_t last_check; /* last liveness check of the peer */
    int suspect;        /* the peer was seen dead: confirmed if the next progress moves nothing */
    char name[96];
};

struct shm_state {
    struct zn_tctx ctx;
    struct zn_peer_watch *watch; /* a dead peer closes nothing: watch its process */
    size_t fifo_size;
    struct shm_conn **conns; /* nranks * ZN_NCHANNELS */
};

static int shm_can_connect(const struct zn_tctx *ctx, int peer)
{
    return peer != ctx->rank && ctx->peers[peer].host_hash == ctx->peers[ctx->rank].host_hash;
}

static size_t fifo_bytes(size_t size)
{
    return sizeof(struct fifo) + size;
}

static ncclResult_t shm_init(const struct zn_tctx *ctx, void **state)
{
    struct shm_state *st = calloc(1, sizeof(*st));
    if (!st) return zn_error(ncclSystemError, ZN_SHM, "out of memory");
    st->ctx = *ctx;
    st->conns = calloc((size_t)ctx->nranks * ZN_NCHANNELS, sizeof(*st->conns));
    if (!st->conns) {
        free(st);
        return zn_error(ncclSystemError, ZN_SHM, "out of memory");
    }
    int nlocal = 0;
    for (int r = 0; r < ctx->nranks; r++)
        nlocal += ctx->peers[r].host_hash == ctx->peers[ctx->rank].host_hash;
    /* Keep /dev/shm use bounded when many ranks share a host and talk all-to-all. */
    size_t size = (size_t)zn_params()->shm_fifo_size;
    if (nlocal > 8) size = size * 8 / (size_t)nlocal;
    if (size < 65536) size = 65536;
    /* Two FIFOs (and their headers) go in one segment: keep the sum far from overflowing. */
    if (zn_round_up(size, 64, &st->fifo_size) != 0 || st->fifo_size > SIZE_MAX / 4) {
        free(st->conns);
        free(st);
        return zn_error(ncclInvalidArgument, ZN_SHM, "ZINC_SHM_FIFO_SIZE=%zu is too large",
                        (size_t)zn_params()->shm_fifo_size);
    }
    ncclResult_t res = zn_peer_watch_create(ctx, &st->watch);
    if (res != ncclSuccess) {
        free(st->conns);
        free(st);
        return res;
    }
    *state = st;
    return ncclSuccess;
}

static void fifo_setup(struct shm_conn *c, int lower)
{
    uint8_t *base = c->seg.base;
    struct fifo *f0 = (struct fifo *)base;
    struct fifo *f1 = (struct fifo *)(base + fifo_bytes(c->st->fifo_size));
    c->out = lower ? f0 : f1;
    c->in = lower ? f1 : f0;
}

/* The higher rank maps the lower rank's segment once it exists and is initialised. */
static ncclResult_t try_attach(struct shm_conn *c)
{
    if (!c->seg.map) {
        size_t total = 2 * fifo_bytes(c->st->fifo_size);
        int rc = zn_shm_attach(c->name, total, zn_now_ns(), c->st->ctx.abort_flag, &c->seg);
        if (rc == 0) fifo_setup(c, 0);
    }
    if (c->seg.map) {
        unsigned v_in = atomic_load_explicit(&c->in->version, memory_order_acquire);
        unsigned v_out = atomic_load_explicit(&c->out->version, memory_order_acquire);
        if (v_in && v_out) {
            if (v_in != SHM_FIFO_VERSION || v_out != SHM_FIFO_VERSION)
                return zn_error(ncclInternalError, ZN_SHM,
                                "%s: fifo version %u, expected %u (mixed zinc builds?)", c->name,
                                v_in, SHM_FIFO_VERSION);
            c->attached = 1;
            return ncclSuccess;
        }
    }
    if (zn_now_ns() < c->deadline) return ncclSuccess;
    char who[128];
    zn_peer_str(&c->st->ctx, c->h.peer, who, sizeof(who));
    return zn_error(ncclRemoteError, ZN_SHM,
                    "shm connection to %s: its segment %s did not appear within ZINC_TIMEOUT", who,
                    c->name);
}

static ncclResult_t shm_connect(void *state, int peer, int channel, struct zn_conn **out)
{
    struct shm_state *st = state;
    struct shm_conn **slot = &st->conns[peer * ZN_NCHANNELS + channel];
    if (*slot) {
        *out = (struct zn_conn *)*slot;
        return ncclSuccess;
    }
    struct shm_conn *c = calloc(1, sizeof(*c));
    if (!c) return zn_error(ncclSystemError, ZN_SHM, "out of memory");
    c->h.ops = &zn_transport_shm;
    c->h.peer = peer;
    c->h.channel = channel;
    c->st = st;
    c->sendq_tail = &c->sendq;
    c->recvq_tail = &c->recvq;
    c->deadline = zn_now_ns() + zn_timeout_ns();
    int me = st->ctx.rank, lo = me < peer ? me : peer, hi = me < peer ? peer : me;
    snprintf(c->name, sizeof(c->name), "/zn-%016llx-%d-%d-%d",
             (unsigned long long)st->ctx.comm_hash, lo, hi, channel);
    if (me == lo) {
        ncclResult_t res = zn_shm_create(c->name, 2 * fifo_bytes(st->fifo_size), 2, &c->seg);
        if (res != ncclSuccess) {
            free(c);
            return res;
        }
        for (int d = 0; d < 2; d++) {
            struct fifo *f =
                (struct fifo *)((uint8_t *)c->seg.base + d * fifo_bytes(st->fifo_size));
            f->size = st->fifo_size;
            atomic_store_explicit(&f->version, SHM_FIFO_VERSION, memory_order_release);
        }
        fifo_setup(c, 1);
        c->attached = 1;
    }
    *slot = c;
    *out = (struct zn_conn *)c;
    return ncclSuccess;
}

static ncclResult_t shm_post(struct zn_conn *conn, void *buf, size_t len, struct zn_req *req,
                             int is_send)
{
    struct shm_conn *c = (struct shm_conn *)conn;
    req->buf = buf;
    req->len = len;
    req->done = 0;
    req->state = ZN_REQ_PENDING;
    req->is_send = is_send;
    req->next = NULL;
    req->priv[0] = 0; /* header bytes moved */
    if (is_send) {
        *c->sendq_tail = req;
        c->sendq_tail = &req->next;
    } else {
        *c->recvq_tail = req;
        c->recvq_tail = &req->next;
    }
    return ncclSuccess;
}

static ncclResult_t shm_isend(struct zn_conn *c, const void *buf, size_t len, struct zn_req *req)
{
    return shm_post(c, (void *)buf, len, req, 1);
}

static ncclResult_t shm_irecv(struct zn_conn *c, void *buf, size_t len, struct zn_req *req)
{
    return shm_post(c, buf, len, req, 0);
}

/* Copy n bytes into / out of the ring at stream position pos, wrapping at the end. */
static void ring_write(struct fifo *f, uint64_t pos, const void *src, size_t n)
{
    size_t off = (size_t)(pos % f->size), first = f->size - off < n ? f->size - off : n;
    memcpy(f->data + off, src, first);
    if (n > first) memcpy(f->data, (const uint8_t *)src + first, n - first);
}

static void ring_read(const struct fifo *f, uint64_t pos, void *dst, size_t n)
{
    size_t off = (size_t)(pos % f->size), first = f->size - off < n ? f->size - off : n;
    memcpy(dst, f->data + off, first);
    if (n > first) memcpy((uint8_t *)dst + first, f->data, n - first);
}

static ncclResult_t closed_error(struct shm_conn *c, const char *during)
{
    char who[128];
    zn_peer_str(&c->st->ctx, c->h.peer, who, sizeof(who));
    struct fifo *f = c->sendq ? c->out : c->in;
    if (atomic_load_explicit(&f->closed, memory_order_acquire) == 2)
        return zn_error(ncclRemoteError, ZN_SHM, "%s failed: %.*s", who, (int)sizeof(f->note),
                        f->note);
    return zn_error(ncclRemoteError, ZN_SHM,
                    "%s destroyed or aborted its communicator during a %s on the shm connection",
                    who, during);
}

static ncclResult_t progress_send(struct shm_conn *c, int *progressed)
{
    struct fifo *f = c->out;
    uint64_t head = atomic_load_explicit(&f->head, memory_order_relaxed);
    while (c->sendq) {
        struct zn_req *r = c->sendq;
        if (atomic_load_explicit(&f->closed, memory_order_relaxed)) return closed_error(c, "send");
        uint64_t tail = atomic_load_explicit(&f->tail, memory_order_acquire);
        size_t space = f->size - (size_t)(head - tail);
        int moved = 0;
        if (r->priv[0] == 0) {
            if (space < 8) break;
            uint64_t len = r->len;
            ring_write(f, head, &len, 8);
            head += 8;
            space -= 8;
            r->priv[0] = 1;
            moved = 1;
        }
        size_t n = r->len - r->done < space ? r->len - r->done : space;
        if (n) {
            ring_write(f, head, (const uint8_t *)r->buf + r->done, n);
            head += n;
            r->done += n;
            moved = 1;
        }
        if (!moved) break;
        atomic_store_explicit(&f->head, head, memory_order_release);
        *progressed = 1;
        if (r->done < r->len) break;
        r->state = ZN_REQ_DONE;
        c->sendq = r->next;
        if (!c->sendq) c->sendq_tail = &c->sendq;
    }
    return ncclSuccess;
}

static ncclResult_t progress_recv(struct shm_conn *c, int *progressed)
{
    struct fifo *f = c->in;
    uint64_t tail = atomic_load_explicit(&f->tail, memory_order_relaxed);
    while (c->recvq) {
        struct zn_req *r = c->recvq;
        /* closed before head: a peer that wrote its last message and then closed has both
         * stores visible to us in that order, so "closed with nothing to read" is real. */
        unsigned closed = atomic_load_explicit(&f->closed, memory_order_acquire);
        uint64_t head = atomic_load_explicit(&f->head, memory_order_acquire);
        size_t avail = (size_t)(head - tail);
        if (avail == 0 && closed) return closed_error(c, "receive");
        int moved = 0;
        if (r->priv[0] == 0) {
            if (avail < 8) break;
            uint64_t len;
            ring_read(f, tail, &len, 8);
            if (len != r->len) {
                char who[128];
                zn_peer_str(&c->st->ctx, c->h.peer, who, sizeof(who));
                return zn_error(ncclInvalidUsage, ZN_SHM,
                                "%s sent a message of %llu bytes but this rank posted a receive "
                                "of %zu bytes on the %s channel (mismatched calls?)",
                                who, (unsigned long long)len, r->len,
                                c->h.channel == ZN_CH_P2P ? "send/recv" : "collective");
            }
            tail += 8;
            avail -= 8;
            r->priv[0] = 1;
            moved = 1;
        }
        size_t n = r->len - r->done < avail ? r->len - r->done : avail;
        if (n) {
            ring_read(f, tail, (uint8_t *)r->buf + r->done, n);
            tail += n;
            r->done += n;
            moved = 1;
        }
        if (!moved) break;
        atomic_store_explicit(&f->tail, tail, memory_order_release);
        *progressed = 1;
        if (r->done < r->len) break;
        r->state = ZN_REQ_DONE;
        c->recvq = r->next;
        if (!c->recvq) c->recvq_tail = &c->recvq;
    }
    return ncclSuccess;
}

/* Requests stalled for a while: is the peer still there? (At most once a millisecond: it
 * costs a system call.) */
static ncclResult_t check_peer(struct shm_conn *c)
{
    int64_t now = zn_now_ns();
    if (!c->idle_since) {
        c->idle_since = now;
        return ncclSuccess;
    }
    if (!c->suspect && (now - c->idle_since < 1000000 || now - c->last_check < 1000000))
        return ncclSuccess;
    c->last_check = now;
    if (!zn_peer_dead(c->st->watch, c->h.peer)) return ncclSuccess;
    /* It may have written its last bytes and exited after we looked: look once more. */
    if (!c->suspect) {
        c->suspect = 1;
        return ncclSuccess;
    }
    char who[128];
    zn_peer_str(&c->st->ctx, c->h.peer, who, sizeof(who));
    return zn_error(ncclRemoteError, ZN_SHM,
                    "%s exited or was killed during a %s on the shm connection", who,
                    c->sendq ? "send" : "receive");
}

static ncclResult_t shm_progress(struct zn_conn *conn, int *progressed)
{
    struct shm_conn *c = (struct shm_conn *)conn;
    int moved = 0;
    if (!c->attached) {
        ZN_CHECK(try_attach(c));
        moved = c->attached;
    }
    if (c->attached) {
        ZN_CHECK(progress_send(c, &moved));
        ZN_CHECK(progress_recv(c, &moved));
    }
    if (moved) {
        *progressed = 1;
        c->idle_since = 0;
        c->suspect = 0;
    } else if (c->sendq || c->recvq) {
        ZN_CHECK(check_peer(c));
    }
    return ncclSuccess;
}

static void shm_abort(void *state, const char *msg)
{
    struct shm_state *st = state;
    for (int i = 0; st && i < st->ctx.nranks * ZN_NCHANNELS; i++) {
        struct shm_conn *c = st->conns[i];
        if (!c || !c->attached) continue;
        struct fifo *fs[2] = { c->out, c->in };
        for (int d = 0; d < 2; d++) {
            if (atomic_load(&fs[d]->closed)) continue;
            snprintf(fs[d]->note, sizeof(fs[d]->note), "%s", msg);
            atomic_store_explicit(&fs[d]->closed, 2, memory_order_release);
        }
    }
}

static void shm_fini(void *state)
{
    struct shm_state *st = state;
    if (!st) return;
    for (int i = 0; i < st->ctx.nranks * ZN_NCHANNELS; i++) {
        struct shm_conn *c = st->conns[i];
        if (!c) continue;
        if (c->attached) {
            /* Tell the peer, so that it fails at once if it is still waiting on us. */
            unsigned zero = 0;
            atomic_compare_exchange_strong(&c->out->closed, &zero, 1);
            zero = 0;
            atomic_compare_exchange_strong(&c->in->closed, &zero, 1);
        }
        /* A segment the peer has not mapped yet may hold messages this rank sent before
         * it left (a send completes once it is in the fifo): keep the name for the peer, which
         * unlinks it when it maps it, unless the peer is gone. */
        if (c->seg.owner && !zn_peer_dead(st->watch, c->h.peer)) c->seg.owner = 0;
        zn_shm_detach(&c->seg);
        free(c);
    }
    zn_peer_watch_destroy(st->watch);
    free(st->conns);
    free(st);
}

/* The calibration of algo/registry.c's cost model (2-core x86 VM, 2 ranks): a message through a
 * shm FIFO, executor round included. */
static void shm_query(const struct zn_tctx *ctx, int peer, struct zn_transport_props *props)
{
    *props = (struct zn_transport_props){ .caps = ZN_TCAP_MSG | ZN_TCAP_RMA | ZN_TCAP_COLLMEM,
                                          .latency_us = 3.0,
                                          .bw = 5000.0 };
}

const struct zn_transport_ops zn_transport_shm = {
    .size = sizeof(struct zn_transport_ops),
    .name = "shm",
    .can_connect = shm_can_connect,
    .init = shm_init,
    .connect = shm_connect,
    .isend = shm_isend,
    .irecv = shm_irecv,
    .progress = shm_progress,
    .abort = shm_abort,
    .fini = shm_fini,
    .query = shm_query,
    .reg = zn_transport_reg_unsupported,
    .dereg = zn_transport_dereg_unsupported,
};
