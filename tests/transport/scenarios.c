/*
 * The transport conformance scenarios that every transport must pass (conformance_test.c has the
 * list and the harness).
 */
#include "conformance.h"
#include "util/err.h"
#include "util/param.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------
 * pairs
 * ------------------------------------------------------------------------------------------- */

static int sc_pairs_body(struct sc *s)
{
    struct rank_env *e = s->e;
    int me = e->rank, n = e->nranks;
    /* Collective channel: in every pair the higher rank calls connect() first. */
    for (int p = 0; p < me; p++)
        if (sc_connect(s, p, ZN_CH_COLL)) return -1;
    if (sc_progress_for(s, 0.05) || barrier(e)) return -1;
    for (int p = me + 1; p < n; p++)
        if (sc_connect(s, p, ZN_CH_COLL)) return -1;
    /* Point-to-point channel: the lower rank first. The higher rank is busy progressing its
     * other connections when that rank's setup arrives, so (with a transport that sets up
     * inside progress) the connection exists on its side before it calls connect(). */
    for (int p = me + 1; p < n; p++)
        if (sc_connect(s, p, ZN_CH_P2P)) return -1;
    if (sc_progress_for(s, 0.1)) return -1;
    for (int p = 0; p < me; p++)
        if (sc_connect(s, p, ZN_CH_P2P)) return -1;
    /* connect() is idempotent. */
    for (int p = 0; p < n; p++)
        if (p != me && sc_connect(s, p, ZN_CH_COLL)) return -1;

    static const size_t sizes[] = { 0, 1, 7, 4096, 65537, 1 * MB, 16 * MB };
    const int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
    for (int k = 0; k < nsizes; k++) {
        int nx = (n - 1) * ZN_NCHANNELS * 2;
        struct xfer *x = calloc((size_t)nx, sizeof(*x));
        CHECK(x, "out of memory");
        int i = 0;
        /* Sends first on even rounds (they reach the peer before its receive is posted),
         * receives first on odd ones. */
        int sends_first = k % 2 == 0;
        for (int pass = 0; pass < 2; pass++) {
            int send = pass == 0 ? sends_first : !sends_first;
            for (int p = 0; p < n; p++) {
                if (p == me) continue;
                for (int ch = 0; ch < ZN_NCHANNELS; ch++) {
                    uint64_t msg = (uint64_t)k * ZN_NCHANNELS + (uint64_t)ch;
                    if (xfer_make(&x[i], send, me, p, ch, msg, sizes[k]) || xfer_post(s, &x[i])) {
                        xfers_free(x, i + 1);
                        return -1;
                    }
                    i++;
                }
            }
            if (pass == 0 && sc_progress_for(s, 0.02)) {
                xfers_free(x, i);
                return -1;
            }
        }
        int rc = sc_wait(s, x, nx, 120, NULL, NULL);
        xfers_free(x, nx);
        if (rc) return rc;
    }
    return 0;
}

int sc_pairs(struct rank_env *e)
{
    struct sc s;
    if (sc_init(&s, e)) return -1;
    int rc = sc_pairs_body(&s);
    if (!rc) rc = barrier(e);
    sc_fini(&s);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * small: many messages in flight, FIFO and in-order completion
 * ------------------------------------------------------------------------------------------- */

#define NSMALL 1000

struct small_ctx {
    struct xfer *x;
    int npeers;
};

/* x is laid out [peer slot][send, recv][NSMALL]; message i is on channel i % 2. Per
 * connection and direction, the done requests must be a prefix of the posted ones. */
static int small_check(void *arg)
{
    struct small_ctx *sc = arg;
    for (int q = 0; q < sc->npeers; q++) {
        for (int d = 0; d < 2; d++) {
            struct xfer *x = sc->x + ((size_t)q * 2 + (size_t)d) * NSMALL;
            for (int ch = 0; ch < ZN_NCHANNELS; ch++) {
                int open = -1;
                for (int i = ch; i < NSMALL; i += ZN_NCHANNELS) {
                    if (x[i].req.state != ZN_REQ_DONE) {
                        if (open < 0) open = i;
                    } else if (open >= 0) {
                        return fail_at(__FILE__, __LINE__, "completion order",
                                       "%s %d to/from peer %d on channel %d is done before %d",
                                       d ? "receive" : "send", i, x[i].peer, ch, open);
                    }
                }
            }
        }
    }
    return 0;
}

static int sc_small_body(struct sc *s)
{
    struct rank_env *e = s->e;
    int me = e->rank, n = e->nranks;
    for (int p = 0; p < n; p++)
        for (int ch = 0; ch < ZN_NCHANNELS && p != me; ch++)
            if (sc_connect(s, p, ch)) return -1;
    if (n < 2 || n > MAXR) return -1;
    int nx = (n - 1) * 2 * NSMALL;
    struct xfer *x = calloc((size_t)nx, sizeof(*x));
    CHECK(x, "out of memory");
    int q = 0, rc = 0;
    for (int p = 0; p < n && !rc; p++) {
        if (p == me) continue;
        struct xfer *xs = x + (size_t)q * 2 * NSMALL, *xr = xs + NSMALL;
        for (int i = 0; i < NSMALL && !rc; i++) {
            rc = xfer_make(&xs[i], 1, me, p, i % ZN_NCHANNELS, (uint64_t)i, 64) ||
                 xfer_make(&xr[i], 0, me, p, i % ZN_NCHANNELS, (uint64_t)i, 64);
        }
        /* Half the peers get all sends first, the others all receives first. */
        for (int pass = 0; pass < 2 && !rc; pass++) {
            struct xfer *first = (me < p) == (pass == 0) ? xs : xr;
            for (int i = 0; i < NSMALL && !rc; i++) rc = xfer_post(s, &first[i]);
        }
        q++;
    }
    struct small_ctx ctx = { .x = x, .npeers = n - 1 };
    double t0 = now_s();
    if (!rc) rc = sc_wait(s, x, nx, 120, small_check, &ctx);
    if (!rc) SAY("%d x 64 B each way with %d peers in %.3f s", NSMALL, n - 1, now_s() - t0);
    xfers_free(x, nx);
    return rc;
}

int sc_small(struct rank_env *e)
{
    struct sc s;
    if (sc_init(&s, e)) return -1;
    int rc = sc_small_body(&s);
    if (!rc) rc = barrier(e);
    sc_fini(&s);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * duplex: 64 MB each way at once
 * ------------------------------------------------------------------------------------------- */

int sc_duplex(struct rank_env *e)
{
    struct sc s;
    if (sc_init(&s, e)) return -1;
    int me = e->rank, partner = me ^ 1, rc = 0;
    if (partner < e->nranks) {
        struct xfer *x = calloc(2, sizeof(*x));
        rc = !x || sc_connect(&s, partner, ZN_CH_COLL) ||
             xfer_make(&x[0], 1, me, partner, ZN_CH_COLL, 7, 64 * MB) ||
             xfer_make(&x[1], 0, me, partner, ZN_CH_COLL, 7, 64 * MB);
        /* A first small exchange sets the connection up, so that the timing is the data's. */
        struct xfer w[2];
        if (!rc)
            rc = xfer_make(&w[0], 1, me, partner, ZN_CH_COLL, 6, 1) ||
                 xfer_make(&w[1], 0, me, partner, ZN_CH_COLL, 6, 1);
        if (!rc) rc = xfer_post(&s, &w[0]) || xfer_post(&s, &w[1]);
        if (!rc) rc = sc_wait(&s, w, 2, 60, NULL, NULL);
        free(w[0].buf);
        free(w[1].buf);
        double t0 = now_s();
        if (!rc) rc = xfer_post(&s, &x[0]) || xfer_post(&s, &x[1]);
        if (!rc) rc = sc_wait(&s, x, 2, 120, NULL, NULL);
        double dt = now_s() - t0;
        if (!rc) SAY("64 MB each way in %.3f s (%.2f GB/s per direction)", dt, 64 * MB / dt / 1e9);
        if (x) xfers_free(x, 2);
    }
    if (!rc) rc = barrier(e);
    sc_fini(&s);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * mismatch: a receive of another length fails with ncclInvalidUsage
 * ------------------------------------------------------------------------------------------- */

/* Rank a sends `sent` bytes to rank b on channel ch; b posts a receive of `posted` bytes and
 * must get ncclInvalidUsage naming a; a's send completes. Both ranks call this. */
static int mismatch_pair(struct sc *s, int a, int b, int ch, size_t sent, size_t posted)
{
    int me = s->e->rank;
    struct xfer x;
    if (me == a) {
        if (sc_connect(s, b, ch) || xfer_make(&x, 1, me, b, ch, 1, sent)) return -1;
        int rc = xfer_post(s, &x);
        if (!rc) rc = sc_wait(s, &x, 1, 60, NULL, NULL);
        free(x.buf);
        return rc;
    }
    if (sc_connect(s, a, ch) || xfer_make(&x, 0, me, a, ch, 1, posted)) return -1;
    int rc = xfer_post(s, &x);
    ncclResult_t r = ncclSuccess;
    double end = now_s() + 60;
    while (!rc && r == ncclSuccess && x.req.state != ZN_REQ_DONE && now_s() < end) {
        int progressed = 0;
        r = s->e->ops->progress(s->conn[a][ch], &progressed);
    }
    free(x.buf);
    if (rc) return rc;
    CHECK(r == ncclInvalidUsage, "a receive of %zu bytes for a message of %zu returned %d%s",
          posted, sent, (int)r, x.req.state == ZN_REQ_DONE ? " and completed" : "");
    char who[32], s1[32], s2[32];
    snprintf(who, sizeof(who), "rank %d", a);
    snprintf(s1, sizeof(s1), "%zu", sent);
    snprintf(s2, sizeof(s2), "%zu", posted);
    const char *m = zn_last_error();
    CHECK(strstr(m, who) && strstr(m, s1) && strstr(m, s2),
          "the error should name %s and both sizes", who);
    /* The connection stays failed: progress keeps returning the error. */
    int progressed = 0;
    r = s->e->ops->progress(s->conn[a][ch], &progressed);
    CHECK(r == ncclInvalidUsage, "progress after the mismatch returned %d", (int)r);
    s->conn[a][ch] = NULL; /* the driver loop leaves the failed connection alone */
    return 0;
}

int sc_mismatch(struct rank_env *e)
{
    struct sc s;
    if (sc_init(&s, e)) return -1;
    int rc = 0;
    /* Too short a receive on the collective channel, too long a one on the other. */
    if (e->rank <= 1) rc = mismatch_pair(&s, 0, 1, ZN_CH_COLL, 800, 400);
    if (!rc && e->rank <= 1) rc = mismatch_pair(&s, 1, 0, ZN_CH_P2P, 400, 800);
    if (!rc) rc = barrier(e);
    sc_fini(&s);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * exit: a peer exits mid-transfer
 * ------------------------------------------------------------------------------------------- */

/* Pairs (0, 1) and (2, 3): rank 1 exits while receiving from rank 0, rank 3 exits while sending
 * to rank 2. The exiting rank exits once 4 MB of its transfer moved, or when it completed: a fast
 * transport can move all 64 MB in one progress call. So that the survivor always has something
 * to fail, it also posts a receive that the exiting rank never sends (message 2): whichever way
 * the race goes, the survivor is blocked on the exiting rank when it exits, and only the peer's
 * death can end that wait. */
static int sc_exit_body(struct sc *s, struct xfer *x)
{
    struct rank_env *e = s->e;
    int me = e->rank;
    if ((me | 1) >= e->nranks) return 0; /* no partner */
    int peer = me ^ 1, survivor = me % 2 == 0;
    int survivor_sends = me / 2 == 0; /* in pair (0, 1) the survivor sends */
    int n = 0;
    if (sc_connect(s, peer, ZN_CH_COLL)) return -1;
    /* Message 1: 64 MB from the survivor in pair (0, 1), to it in pair (2, 3). */
    int sends = survivor ? survivor_sends : !survivor_sends;
    if (xfer_make(&x[n++], sends, me, peer, ZN_CH_COLL, 1, 64 * MB)) return -1;
    if (survivor && xfer_make(&x[n++], 0, me, peer, ZN_CH_COLL, 2, 1 * MB)) return -1;
    for (int i = 0; i < n; i++)
        if (xfer_post(s, &x[i])) return -1;
    double t0 = now_s();
    ncclResult_t r = ncclSuccess;
    while (now_s() - t0 < 20) {
        int progressed = 0;
        r = sc_progress(s, &progressed, NULL, NULL);
        if (r != ncclSuccess) break;
        if (!survivor && (x[0].req.done >= 4 * MB || x[0].req.state == ZN_REQ_DONE)) {
            fprintf(stderr, "[rank %d] exit: exiting with %zu of %zu bytes moved, by arrangement\n",
                    me, x[0].req.done, x[0].len);
            _exit(0);
        }
        if (!progressed) sched_yield();
    }
    double dt = now_s() - t0;
    CHECK(survivor, "the rank that should exit got %d from progress", (int)r);
    CHECK(r == ncclRemoteError, "progress returned %d after %.1f s while rank %d exited", (int)r,
          dt, peer);
    char who[32];
    snprintf(who, sizeof(who), "rank %d", peer);
    CHECK(strstr(zn_last_error(), who), "the error should name %s", who);
    /* Seen through the closed connection or the peer watch, not the deadline: half of it. */
    CHECK(dt < zn_params()->timeout / 2.0, "the exit was reported after %.1f s (ZINC_TIMEOUT=%lld)",
          dt, (long long)zn_params()->timeout);
    SAY("rank %d's exit reported after %.3f s", peer, dt);
    return 0;
}

int sc_exit(struct rank_env *e)
{
    struct sc s;
    struct xfer x[2];
    memset(x, 0, sizeof(x));
    if (sc_init(&s, e)) return -1;
    int rc = sc_exit_body(&s, x);
    sc_fini(&s);
    free(x[0].buf);
    free(x[1].buf);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * perf: loopback throughput between ranks 0 and 1
 * ------------------------------------------------------------------------------------------- */

static int perf_run(struct sc *s, int peer, size_t size, int iters, int bidir, void *sbuf,
                    void *rbuf, double *secs)
{
    int me = s->e->rank;
    int sends = bidir || me == 0, recvs = bidir || me == 1;
    struct xfer *x = calloc((size_t)iters * 2, sizeof(*x));
    CHECK(x, "out of memory");
    int n = 0;
    for (int i = 0; i < iters; i++) {
        if (sends) x[n++] = (struct xfer){ .send = 1, .peer = peer, .len = size, .buf = sbuf };
        if (recvs) x[n++] = (struct xfer){ .send = 0, .peer = peer, .len = size, .buf = rbuf };
    }
    if (barrier(s->e)) return -1;
    double t0 = now_s();
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) rc = xfer_post(s, &x[i]);
    double end = t0 + 120;
    while (!rc) {
        int progressed = 0, all = 1;
        ncclResult_t r = sc_progress(s, &progressed, NULL, NULL);
        if (r != ncclSuccess) rc = fail_at(__FILE__, __LINE__, "progress", "returned %d", (int)r);
        for (int i = 0; i < n && all; i++) all = x[i].req.state == ZN_REQ_DONE;
        if (all) break;
        if (now_s() > end) rc = fail_at(__FILE__, __LINE__, "perf", "not done after 120 s");
    }
    /* Rank 1 reports: a receive completes when the data is there, a send as soon as the
     * kernel has taken it. */
    *secs = now_s() - t0;
    free(x);
    if (!rc) rc = barrier(s->e);
    return rc;
}

/* Round trips of a small message between ranks 0 and 1: half the mean is the latency. */
static int perf_pingpong(struct sc *s, int peer, size_t size, int iters, double *usecs)
{
    int me = s->e->rank;
    char buf[64];
    CHECK(size <= sizeof(buf), "ping-pong size %zu", size);
    memset(buf, 0, sizeof(buf));
    if (barrier(s->e)) return -1;
    double t0 = now_s();
    for (int i = 0; i < iters; i++) {
        for (int step = 0; step < 2; step++) {
            struct xfer x = {
                .send = (step == 0) == (me == 0), .peer = peer, .len = size, .buf = buf
            };
            if (xfer_post(s, &x)) return -1;
            while (x.req.state != ZN_REQ_DONE) {
                int progressed = 0;
                ncclResult_t r = s->e->ops->progress(s->conn[peer][ZN_CH_COLL], &progressed);
                CHECK(r == ncclSuccess, "progress returned %d", (int)r);
                CHECK(now_s() - t0 < 120, "ping-pong not done after 120 s");
            }
        }
    }
    *usecs = (now_s() - t0) / iters * 1e6;
    return barrier(s->e);
}

static const size_t perf_sizes[] = { 64 * 1024, 1 * MB, 4 * MB, 16 * MB, 64 * MB };
#define PERF_NSIZES ((int)(sizeof(perf_sizes) / sizeof(perf_sizes[0])))
/* perf_run / perf_pingpong calls: a warm-up, every size one way and both ways, the
 * small-message rate, the ping-pong. */
#define PERF_NRUNS (1 + 2 * PERF_NSIZES + 1 + 1)

int sc_perf(struct rank_env *e)
{
    struct sc s;
    if (sc_init(&s, e)) return -1;
    int rc = 0, me = e->rank;
    if (me <= 1) {
        int peer = 1 - me;
        rc = sc_connect(&s, peer, ZN_CH_COLL);
        void *sbuf = malloc(64 * MB), *rbuf = malloc(64 * MB);
        if (!rc && (!sbuf || !rbuf)) rc = fail_at(__FILE__, __LINE__, "malloc", "64 MB");
        if (!rc) {
            memset(sbuf, 1, 64 * MB);
            memset(rbuf, 0, 64 * MB);
        }
        const size_t total = 512 * (size_t)MB; /* per size and direction */
        /* Read only after a perf_run that returned 0 and set it; gcc -O3 cannot see that
         * through the rc checks (maybe-uninitialized), so it starts defined. */
        double secs = 0;
        if (!rc) rc = perf_run(&s, peer, 1 * MB, 8, 1, sbuf, rbuf, &secs); /* warm up */
        for (int bidir = 0; bidir < 2 && !rc; bidir++) {
            for (int k = 0; k < PERF_NSIZES && !rc; k++) {
                int iters = (int)(total / perf_sizes[k]);
                if (iters > 2000) iters = 2000;
                rc = perf_run(&s, peer, perf_sizes[k], iters, bidir, sbuf, rbuf, &secs);
                if (!rc && me == 1)
                    SAY("%s %8zu KB x %4d: %.3f s, %.2f GB/s%s", bidir ? "bidir" : "unidir",
                        perf_sizes[k] / 1024, iters, secs,
                        (double)perf_sizes[k] * iters / secs / 1e9, bidir ? " per direction" : "");
            }
        }
        /* Small-message rate. */
        if (!rc) {
            int iters = 20000;
            rc = perf_run(&s, peer, 64, iters, 0, sbuf, rbuf, &secs);
            if (!rc && me == 1)
                SAY("unidir 64 B x %d: %.3f s, %.2f M messages/s", iters, secs, iters / secs / 1e6);
        }
        if (!rc) {
            double us = 0;
            rc = perf_pingpong(&s, peer, 8, 5000, &us);
            if (!rc && me == 1) SAY("ping-pong 8 B: %.1f us per round trip", us);
        }
        free(sbuf);
        free(rbuf);
    } else {
        /* Ranks beyond 1 only take part in the barriers, two per perf_run. */
        for (int i = 0; i < 2 * PERF_NRUNS && !rc; i++) rc = barrier(e);
    }
    if (!rc) rc = barrier(e);
    sc_fini(&s);
    return rc;
}
