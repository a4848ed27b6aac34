/*
 * Conformance scenarios for the net transport only: what reaches its listener and its
 * connection setup (conformance_test.c has the list and the harness).
 */
#include "conformance.h"
#include "net/net_layer.h"
#include "transport/net.h"
#include "util/err.h"
#include "util/param.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * stray (net): connections to a rank's listener that are not one of the communicator's
 * ------------------------------------------------------------------------------------------- */

/* The transport's HELLO (src/transport/net_internal.h), written here from its documented
 * layout so that the test does not share the encoder it checks. */
struct hello {
    uint64_t magic;
    uint64_t comm_hash;
    uint32_t version;
    int32_t rank, to, channel;
};
#define HELLO_MAGIC 0x4f4c4c45484e5a4eull

#define NSTRAY      7
struct stray {
    const char *what;
    void *comm, *mh, *req;
    uint8_t handle[NCCL_NET_HANDLE_MAXSIZE];
    char *buf;
    size_t len;
    int sent;
};

static void strays_make(struct rank_env *e, struct stray *st, const void *handle)
{
    uint64_t hash = e->ctx.comm_hash;
    struct hello good = { .magic = HELLO_MAGIC,
                          .comm_hash = hash,
                          .version = 1,
                          .rank = 0,
                          .to = 1,
                          .channel = ZN_CH_COLL };
    struct hello h[NSTRAY];
    const char *what[NSTRAY] = {
        "a HELLO of another communicator", "a HELLO for another rank",
        "a HELLO from rank 1000",          "a HELLO for channel 7",
        "a HELLO of another version",      "a HELLO for a connection that has one",
        "8 bytes instead of a HELLO"
    };
    for (int i = 0; i < NSTRAY; i++) h[i] = good;
    h[0].comm_hash ^= 0x10;
    h[1].to = 0;
    h[2].rank = 1000;
    h[3].channel = 7;
    h[4].version = 99;
    for (int i = 0; i < NSTRAY; i++) {
        memset(&st[i], 0, sizeof(st[i]));
        st[i].what = what[i];
        memcpy(st[i].handle, handle, sizeof(st[i].handle));
        st[i].buf = aligned_alloc(4096, 4096);
        memcpy(st[i].buf, &h[i], sizeof(h[i]));
        st[i].len = i == NSTRAY - 1 ? 8 : sizeof(h[i]);
    }
}

/* Move every stray on: connect, register, send its bytes. */
static int strays_step(const struct zn_net *net, void *nctx, struct stray *st)
{
    for (int i = 0; i < NSTRAY; i++) {
        struct stray *s = &st[i];
        if (s->sent) continue;
        ncclNetDeviceHandle_t *dev = NULL;
        if (!s->comm) {
            CHECK(net->ops->connect(nctx, 0, s->handle, &s->comm, &dev) == ncclSuccess,
                  "stray connect");
            if (!s->comm) continue;
            CHECK(net->ops->regMr(s->comm, s->buf, 4096, NCCL_PTR_HOST, &s->mh) == ncclSuccess,
                  "stray regMr");
        }
        if (!s->req) {
            CHECK(net->ops->isend(s->comm, s->buf, s->len, 0x7a6e, s->mh, NULL, &s->req) ==
                      ncclSuccess,
                  "stray isend");
            if (!s->req) continue;
        }
        int done = 0, size = 0;
        /* The listener may close the stray as soon as it has read it: an error is fine. */
        if (net->ops->test(s->req, &done, &size) != ncclSuccess || done) s->sent = 1;
    }
    return 0;
}

static void strays_close(const struct zn_net *net, struct stray *st)
{
    for (int i = 0; i < NSTRAY; i++) {
        if (st[i].comm) {
            if (st[i].mh) net->ops->deregMr(st[i].comm, st[i].mh);
            net->ops->closeSend(st[i].comm);
        }
        free(st[i].buf);
    }
}

/* A round of traffic on both connections; rank 1 (the one the strays reach) sends the control
 * word that says whether another round follows. */
static int stray_round(struct sc *s, int me, int peer, uint64_t round, uint32_t *ctl)
{
    struct xfer x[3];
    int n = 0, rc = 0;
    rc = xfer_make(&x[n++], 1, me, peer, ZN_CH_COLL, round, 65536) ||
         xfer_make(&x[n++], 0, me, peer, ZN_CH_COLL, round, 65536);
    if (!rc && ctl) {
        rc = xfer_make(&x[n++], me == 1, me, peer, ZN_CH_P2P, round, sizeof(*ctl));
        if (!rc && me == 1) memcpy(x[n - 1].buf, ctl, sizeof(*ctl));
    }
    for (int i = 0; i < n && !rc; i++) rc = xfer_post(s, &x[i]);
    if (!rc) {
        /* sc_wait checks the pattern of every receive; the control word has none. */
        rc = sc_wait(s, x, 2, 60, NULL, NULL);
        if (!rc && n == 3) {
            double end = now_s() + 60;
            while (x[2].req.state != ZN_REQ_DONE && now_s() < end && !rc) {
                int progressed = 0;
                ncclResult_t r = sc_progress(s, &progressed, NULL, NULL);
                if (r != ncclSuccess)
                    rc = fail_at(__FILE__, __LINE__, "r == ncclSuccess", "progress returned %d",
                                 (int)r);
            }
            if (!rc && x[2].req.state != ZN_REQ_DONE)
                rc = fail_at(__FILE__, __LINE__, "control word", "not received");
            if (!rc && me != 1) memcpy(ctl, x[2].buf, sizeof(*ctl));
        }
    }
    for (int i = 0; i < n; i++) free(x[i].buf);
    return rc;
}

static int sc_stray_body(struct sc *s)
{
    struct rank_env *e = s->e;
    int me = e->rank;
    if (me > 1) return 0;
    int peer = 1 - me;
    const struct zn_net *net = zn_net_transport_net(s->state);
    CHECK(net, "the state names no net");
    /* A first round sets up the collective connection, so that a HELLO claiming it is a
     * duplicate. */
    if (sc_connect(s, peer, ZN_CH_COLL) || stray_round(s, me, peer, 0, NULL)) return -1;
    struct stray st[NSTRAY];
    void *nctx = NULL;
    if (me == 0) {
        ncclNetCommConfig_t cfg = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };
        CHECK(net->ops->init(&nctx, 1, &cfg, zn_net_logger, NULL) == ncclSuccess, "net init");
        strays_make(e, st, zn_net_transport_handle(s->state, 1));
    }
    /* A connection set up after the strays arrived: the listener still serves. */
    if (sc_connect(s, peer, ZN_CH_P2P)) return -1;
    double t0 = now_s();
    uint32_t ctl = 1;
    int rc = 0;
    for (uint64_t round = 1; ctl && !rc; round++) {
        if (me == 0) rc = strays_step(net, nctx, st);
        if (me == 1) ctl = zn_net_transport_strays(s->state) < NSTRAY && now_s() - t0 < 15;
        if (!rc) rc = stray_round(s, me, peer, round, &ctl);
    }
    if (me == 1 && !rc) {
        int n = zn_net_transport_strays(s->state);
        CHECK(n == NSTRAY, "%d of %d stray connections were closed", n, NSTRAY);
        SAY("%d stray connections closed in %.3f s", n, now_s() - t0);
    }
    if (me == 0) {
        strays_close(net, st);
        net->ops->finalize(nctx);
    }
    return rc;
}

int sc_stray(struct rank_env *e)
{
    struct sc s;
    if (sc_init(&s, e)) return -1;
    int rc = sc_stray_body(&s);
    if (!rc) rc = barrier(e);
    sc_fini(&s);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * setup: a connection whose peer never shows up fails at the deadline, naming the peer
 * ------------------------------------------------------------------------------------------- */

static void set_timeout(const char *secs)
{
    setenv("ZINC_TIMEOUT", secs, 1);
    zn_params_reload();
}

/* Rank `waiter` connects to rank `absent` on channel ch with ZINC_TIMEOUT=2 while `absent`
 * stays out of the transport (it waits in a bootstrap barrier). */
static int setup_timeout(struct sc *s, int waiter, int absent, int ch)
{
    struct rank_env *e = s->e;
    if (e->rank == waiter) {
        char saved[32];
        snprintf(saved, sizeof(saved), "%lld", (long long)zn_params()->timeout);
        set_timeout("2");
        double t0 = now_s();
        int rc = sc_connect(s, absent, ch);
        ncclResult_t r = ncclSuccess;
        while (!rc && r == ncclSuccess && now_s() - t0 < 20) {
            int progressed = 0;
            r = e->ops->progress(s->conn[absent][ch], &progressed);
            if (!progressed) sched_yield();
        }
        double dt = now_s() - t0;
        set_timeout(saved);
        if (rc) return rc;
        CHECK(r == ncclRemoteError, "progress returned %d after %.1f s", (int)r, dt);
        char who[32];
        snprintf(who, sizeof(who), "rank %d", absent);
        CHECK(strstr(zn_last_error(), who), "the error should name %s", who);
        /* At the deadline, not before; the upper bound only tells it from never (the loop
         * gives up at 20 s), with room for a loaded machine. */
        CHECK(dt > 1.5 && dt < 15, "the setup failed after %.1f s with ZINC_TIMEOUT=2", dt);
        s->conn[absent][ch] = NULL;
    }
    return barrier(e);
}

int sc_setup(struct rank_env *e)
{
    struct sc s;
    if (sc_init(&s, e)) return -1;
    /* Both roles: the lower rank waiting for the higher one, and the reverse. */
    int rc = setup_timeout(&s, 0, 1, ZN_CH_P2P);
    if (!rc) rc = setup_timeout(&s, 1, 0, ZN_CH_COLL);
    sc_fini(&s);
    return rc;
}
