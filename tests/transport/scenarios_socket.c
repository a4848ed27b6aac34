/*
 * Conformance scenarios for the socket transport only: what reaches its TCP listener and its
 * connection setup (conformance.c has the list and the harness).
 */
#include "conformance.h"
#include "transport/socket.h"
#include "transport/socket_wire.h"
#include "util/err.h"
#include "util/param.h"
#include "util/sock.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------
 * stray (socket): garbage connections to a listener
 * ------------------------------------------------------------------------------------------- */

struct stray {
    const char *what;
    uint8_t bytes[64];
    size_t len;
    int shut; /* half-close after the bytes, so that a rank waiting for more sees EOF */
    int fd;
    int closed;
};

static void hello_bytes(struct stray *st, uint64_t magic, int from, int to, int ch, int sock,
                        int nsocks)
{
    struct zn_socket_hello h = { .magic = magic,
                                 .kind = ZN_SOCKET_HELLO,
                                 .from = from,
                                 .to = to,
                                 .channel = (uint32_t)ch,
                                 .sock = (uint16_t)sock,
                                 .nsocks = (uint16_t)nsocks };
    zn_socket_hello_encode(&h, st->bytes);
    st->len = ZN_SOCKET_HELLO_BYTES;
}

/* st has room for 16. */
static int make_strays(struct rank_env *e, struct stray *st, int *n, const union zn_sockaddr *to)
{
    uint64_t magic = e->ctx.comm_hash;
    int nsocks = (int)zn_params()->socket_nsocks;
    if (nsocks < 1) nsocks = 1;
    if (nsocks > ZN_SOCKET_MAX_NSOCKS) nsocks = ZN_SOCKET_MAX_NSOCKS;
    int k = 0;
    memset(st, 0, 16 * sizeof(*st));
    st[k].what = "32 random bytes";
    CHECK(getrandom(st[k].bytes, 32, 0) == 32, "getrandom");
    st[k++].len = 32;
    st[k].what = "64 random bytes";
    CHECK(getrandom(st[k].bytes, 64, 0) == 64, "getrandom");
    st[k++].len = 64;
    st[k].what = "a HELLO with the wrong magic";
    hello_bytes(&st[k++], magic ^ 0x10, 0, 1, ZN_CH_COLL, 0, nsocks);
    st[k].what = "a frame header with a huge length";
    memset(st[k].bytes, 0xff, sizeof(st[k].bytes));
    struct zn_socket_frame f = { .length = UINT64_MAX / 2, .seq = 0, .nparts = 1 };
    zn_socket_frame_encode(&f, st[k].bytes);
    st[k++].len = 48;
    st[k].what = "a HELLO of another version";
    hello_bytes(&st[k], magic, 0, 1, ZN_CH_COLL, 0, nsocks);
    st[k].bytes[8] = 99;
    k++;
    st[k].what = "a HELLO from rank 1000";
    hello_bytes(&st[k++], magic, 1000, 1, ZN_CH_COLL, 0, nsocks);
    st[k].what = "a HELLO for another rank";
    hello_bytes(&st[k++], magic, 0, 3, ZN_CH_COLL, 0, nsocks);
    st[k].what = "a HELLO for channel 7";
    hello_bytes(&st[k++], magic, 0, 1, 7, 0, nsocks);
    st[k].what = "a HELLO for socket 0 of a connection that has it";
    hello_bytes(&st[k++], magic, 0, 1, ZN_CH_COLL, 0, nsocks);
    st[k].what = "a HELLO with 9 sockets";
    hello_bytes(&st[k], magic, 0, 1, ZN_CH_COLL, 0, nsocks);
    st[k].bytes[26] = 9;
    k++;
    st[k].what = "10 bytes of a HELLO, then EOF";
    hello_bytes(&st[k], magic, 0, 1, ZN_CH_COLL, 0, nsocks);
    st[k].len = 10;
    st[k++].shut = 1;
    st[k].what = "nothing, then EOF";
    st[k].len = 0;
    st[k++].shut = 1;
    *n = k;
    for (int i = 0; i < k; i++) {
        int rc = zn_sock_connect(to, zn_now_ns() + 10000000000ll, NULL, &st[i].fd);
        CHECK(rc == 0, "stray connect: %s", strerror(-rc));
        rc = zn_sock_send_all(st[i].fd, st[i].bytes, st[i].len, zn_now_ns() + 10000000000ll, NULL);
        CHECK(rc == 0, "stray send: %s", strerror(-rc));
        if (st[i].shut) shutdown(st[i].fd, SHUT_WR);
    }
    return 0;
}

/* Count the strays the listener has closed by now. */
static int strays_closed(struct stray *st, int n)
{
    int closed = 0;
    for (int i = 0; i < n; i++) {
        if (!st[i].closed) {
            char b[64];
            ssize_t r = recv(st[i].fd, b, sizeof(b), MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
                st[i].closed = 1;
        }
        closed += st[i].closed;
    }
    return closed;
}

static int stray_round(struct sc *s, int me, int peer, uint64_t round, uint32_t *ctl)
{
    struct xfer x[3];
    int n = 0, rc = 0;
    rc = xfer_make(&x[n++], 1, me, peer, ZN_CH_COLL, round, 65536) ||
         xfer_make(&x[n++], 0, me, peer, ZN_CH_COLL, round, 65536);
    if (!rc && ctl) {
        /* The control word: rank 0 says whether another round follows. */
        rc = xfer_make(&x[n++], me == 0, me, peer, ZN_CH_P2P, round, sizeof(*ctl));
        if (!rc && me == 0) memcpy(x[n - 1].buf, ctl, sizeof(*ctl));
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
            if (!rc && me != 0) memcpy(ctl, x[2].buf, sizeof(*ctl));
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
    /* A first round sets up the collective connection, so that a HELLO claiming its socket 0
     * is a duplicate. */
    if (sc_connect(s, peer, ZN_CH_COLL) || stray_round(s, me, peer, 0, NULL)) return -1;
    struct stray st[16];
    int nst = 0;
    if (me == 0) {
        const union zn_sockaddr *to = zn_socket_listen_addr(s->state, 1);
        CHECK(to && zn_sockaddr_port(to) > 0, "no listener address for rank 1");
        if (make_strays(e, st, &nst, to)) return -1;
    }
    /* A connection set up after the garbage arrived: the listener still serves. */
    if (sc_connect(s, peer, ZN_CH_P2P)) return -1;
    double t0 = now_s();
    uint32_t ctl = 1;
    int rc = 0, closed = 0;
    for (uint64_t round = 1; ctl && !rc; round++) {
        if (me == 0) {
            closed = strays_closed(st, nst);
            ctl = closed < nst && now_s() - t0 < 15;
        }
        rc = stray_round(s, me, peer, round, &ctl);
    }
    if (me == 0) {
        for (int i = 0; i < nst; i++) {
            if (!rc && !st[i].closed)
                rc = fail_at(__FILE__, __LINE__, "closed", "the stray with %s was not closed",
                             st[i].what);
            close(st[i].fd);
        }
        if (!rc) SAY("%d garbage connections closed in %.3f s", nst, now_s() - t0);
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
 * nsocks (socket): ranks that disagree on ZINC_SOCKET_NSOCKS
 * ------------------------------------------------------------------------------------------- */

int sc_nsocks(struct rank_env *e)
{
    const char *old = getenv("ZINC_SOCKET_NSOCKS");
    char saved[32];
    snprintf(saved, sizeof(saved), "%s", old ? old : "");
    int base = (int)zn_params()->socket_nsocks;
    char mine[16];
    snprintf(mine, sizeof(mine), "%d", e->rank == 1 ? (base == 1 ? 2 : 1) : base);
    setenv("ZINC_SOCKET_NSOCKS", mine, 1);
    zn_params_reload();
    struct sc s;
    int rc = sc_init(&s, e);
    if (old)
        setenv("ZINC_SOCKET_NSOCKS", saved, 1);
    else
        unsetenv("ZINC_SOCKET_NSOCKS");
    zn_params_reload();
    if (rc) return rc;
    if (e->rank <= 1) {
        int peer = 1 - e->rank;
        rc = sc_connect(&s, peer, ZN_CH_COLL);
        ncclResult_t r = ncclSuccess;
        double end = now_s() + 20;
        while (!rc && r == ncclSuccess && now_s() < end) {
            int progressed = 0;
            r = e->ops->progress(s.conn[peer][ZN_CH_COLL], &progressed);
            if (!progressed) sched_yield();
        }
        if (!rc && r != ncclInvalidUsage)
            rc = fail_at(__FILE__, __LINE__, "r == ncclInvalidUsage",
                         "connection between ranks with different nsocks: progress returned %d",
                         (int)r);
        if (!rc && !strstr(zn_last_error(), "ZINC_SOCKET_NSOCKS"))
            rc = fail_at(__FILE__, __LINE__, "message", "the error should name the parameter");
    }
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
