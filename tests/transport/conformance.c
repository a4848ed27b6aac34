/*
 * The transport conformance suite: one multi-process program that drives any transport through
 * its ops table only (transport.h), the way the layers above do.
 *
 *   test_transport TRANSPORT NRANKS [SCENARIOS]
 *
 * TRANSPORT is a transport's name (socket, shm); SCENARIOS a comma-separated list of the
 * names below (default "all": every scenario but perf). The parent forks NRANKS children, then
 * draws a unique id (which starts the bootstrap root thread in the parent: forking first keeps
 * the children free of a copy of a process with threads) and hands it to them over pipes. Each
 * child joins the bootstrap, allgathers its zn_peer_info, builds a zn_tctx and runs the
 * scenarios, each on a fresh ops->init state so that a scenario that breaks a connection on
 * purpose cannot disturb the next. The parent waits with a deadline, kills everyone when a
 * child fails or hangs, and exits non-zero if any child failed.
 *
 * Scenarios (every payload byte is checked against a pattern of (src, dst, message, byte)):
 *   pairs     all pairs, sizes 0 .. 16 MB, both channels, connect() in both orders, sends
 *             posted before and after the matching receive
 *   small     1000 x 64 B in flight per peer, alternating channels: FIFO order per connection
 *             and direction, completion in posting order
 *   duplex    64 MB each way at once between partners: no deadlock
 *   mismatch  a receive posted with another length fails with ncclInvalidUsage naming the peer
 *   stray     (socket) garbage connections to a rank's listener are closed and disturb nothing
 *   nsocks    (socket) ranks with different ZINC_SOCKET_NSOCKS fail with a clear error
 *   exit      a peer that exits mid-transfer is reported as ncclRemoteError within seconds
 *             (always last: the job is one rank short afterwards)
 *   perf      (not in "all") loopback throughput, rank 0 <-> rank 1
 */
#include "bootstrap/bootstrap.h"
#include "transport/peer.h"
#include "transport/socket.h"
#include "transport/socket_wire.h"
#include "transport/transport.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXR       16
#define TEST_LIMIT 280 /* seconds for the whole run; ctest's TIMEOUT is a little longer */
#define MB         (1024 * 1024)

/* ---------------------------------------------------------------------------------------------
 * Transports under test
 * ------------------------------------------------------------------------------------------- */

static const struct zn_transport_ops *const all_transports[] = {
    &zn_transport_socket,
#ifdef ZN_HAVE_SHM_TRANSPORT
    &zn_transport_shm,
#endif
};

static const struct zn_transport_ops *find_transport(const char *name)
{
    for (size_t i = 0; i < sizeof(all_transports) / sizeof(all_transports[0]); i++)
        if (!strcmp(all_transports[i]->name, name)) return all_transports[i];
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * One rank's environment, failure reporting
 * ------------------------------------------------------------------------------------------- */

struct rank_env {
    int rank, nranks;
    const struct zn_transport_ops *ops;
    struct zn_boot *boot;
    struct zn_peer_info *peers;
    struct zn_tctx ctx;
    atomic_int abort_flag;
    const char *scenario;
};

static struct rank_env *cur_env;

static int fail_at(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail_at(const char *file, int line, const char *cond, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "[rank %d] %s: %s:%d: FAIL: %s: %s (last error: \"%s\")\n",
            cur_env ? cur_env->rank : -1, cur_env ? cur_env->scenario : "-", file, line, cond,
            msg, zn_last_error());
    return -1;
}

/* In a scenario: fail it (return -1) with a message unless cond holds. */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) return fail_at(__FILE__, __LINE__, #cond, __VA_ARGS__);                       \
    } while (0)

#define SAY(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, "[rank %d] %s: ", cur_env->rank, cur_env->scenario);                      \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
    } while (0)

static double now_s(void)
{
    return (double)zn_now_ns() * 1e-9;
}

/* ---------------------------------------------------------------------------------------------
 * Payload patterns
 * ------------------------------------------------------------------------------------------- */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t pattern_seed(int src, int dst, uint64_t msg)
{
    return mix(((uint64_t)(uint32_t)src << 40) ^ ((uint64_t)(uint32_t)dst << 20) ^ msg);
}

/* Byte i of message msg from src to dst: byte (i % 8) of mix(seed + i / 8). */
static void pattern_fill(void *buf, size_t len, int src, int dst, uint64_t msg)
{
    uint8_t *b = buf;
    uint64_t seed = pattern_seed(src, dst, msg);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v = mix(seed + i / 8);
        memcpy(b + i, &v, 8);
    }
    if (i < len) {
        uint64_t v = mix(seed + i / 8);
        memcpy(b + i, &v, len - i);
    }
}

/* The index of the first wrong byte, or (size_t)-1. */
static size_t pattern_check(const void *buf, size_t len, int src, int dst, uint64_t msg)
{
    const uint8_t *b = buf;
    uint64_t seed = pattern_seed(src, dst, msg);
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = mix(seed + i / 8);
        size_t n = len - i < 8 ? len - i : 8;
        if (memcmp(b + i, &v, n) != 0) {
            for (size_t k = 0; k < n; k++)
                if (b[i + k] != ((const uint8_t *)&v)[k]) return i + k;
        }
    }
    return (size_t)-1;
}

/* ---------------------------------------------------------------------------------------------
 * A scenario's transport state and the driver loop
 * ------------------------------------------------------------------------------------------- */

struct sc {
    struct rank_env *e;
    void *state;
    struct zn_conn *conn[MAXR][ZN_NCHANNELS];
};

struct xfer {
    struct zn_req req;
    int send, peer, ch;
    uint64_t msg;
    size_t len;
    void *buf;
};

static int sc_init(struct sc *s, struct rank_env *e)
{
    memset(s, 0, sizeof(*s));
    s->e = e;
    ncclResult_t r = e->ops->init(&e->ctx, &s->state);
    CHECK(r == ncclSuccess, "%s init returned %d", e->ops->name, (int)r);
    return 0;
}

static void sc_fini(struct sc *s)
{
    s->e->ops->fini(s->state);
    s->state = NULL;
}

static int sc_connect(struct sc *s, int peer, int ch)
{
    struct zn_conn *c = NULL;
    ncclResult_t r = s->e->ops->connect(s->state, peer, ch, &c);
    CHECK(r == ncclSuccess && c, "connect(peer %d, channel %d) returned %d", peer, ch, (int)r);
    CHECK(!s->conn[peer][ch] || s->conn[peer][ch] == c,
          "a second connect(peer %d, channel %d) returned another connection", peer, ch);
    struct zn_conn_hdr *h = (struct zn_conn_hdr *)c;
    CHECK(h->peer == peer && h->channel == ch && h->ops == s->e->ops,
          "connection header says peer %d channel %d", h->peer, h->channel);
    s->conn[peer][ch] = c;
    return 0;
}

/* Progress every connection once; the first error is returned, with the peer in *peer. */
static ncclResult_t sc_progress(struct sc *s, int *progressed, int *peer, int *ch)
{
    for (int p = 0; p < s->e->nranks; p++) {
        for (int c = 0; c < ZN_NCHANNELS; c++) {
            if (!s->conn[p][c]) continue;
            ncclResult_t r = s->e->ops->progress(s->conn[p][c], progressed);
            if (r != ncclSuccess) {
                if (peer) *peer = p;
                if (ch) *ch = c;
                return r;
            }
        }
    }
    return ncclSuccess;
}

static int sc_progress_for(struct sc *s, double secs)
{
    double end = now_s() + secs;
    while (now_s() < end) {
        int progressed = 0, p = -1, c = -1;
        ncclResult_t r = sc_progress(s, &progressed, &p, &c);
        CHECK(r == ncclSuccess, "progress(peer %d, channel %d) returned %d", p, c, (int)r);
        if (!progressed) sched_yield();
    }
    return 0;
}

static int xfer_post(struct sc *s, struct xfer *x)
{
    struct zn_conn *c = s->conn[x->peer][x->ch];
    CHECK(c, "no connection to peer %d on channel %d", x->peer, x->ch);
    ncclResult_t r = x->send ? s->e->ops->isend(c, x->buf, x->len, &x->req)
                             : s->e->ops->irecv(c, x->buf, x->len, &x->req);
    CHECK(r == ncclSuccess, "%s of %zu bytes to/from peer %d returned %d",
          x->send ? "isend" : "irecv", x->len, x->peer, (int)r);
    CHECK(x->req.state == ZN_REQ_PENDING || x->req.state == ZN_REQ_DONE, "request state %d",
          x->req.state);
    return 0;
}

typedef int (*sc_check_fn)(void *arg);

/* Progress until every transfer is done; check() (if any) runs after every round. */
static int sc_wait(struct sc *s, struct xfer *x, int n, double secs, sc_check_fn check,
                   void *arg)
{
    double end = now_s() + secs;
    for (;;) {
        int progressed = 0, p = -1, c = -1;
        ncclResult_t r = sc_progress(s, &progressed, &p, &c);
        CHECK(r == ncclSuccess, "progress(peer %d, channel %d) returned %d", p, c, (int)r);
        if (check && check(arg)) return -1;
        int all = 1;
        for (int i = 0; i < n && all; i++) all = x[i].req.state == ZN_REQ_DONE;
        if (all) break;
        if (now_s() > end) {
            int left = 0;
            for (int i = 0; i < n; i++) left += x[i].req.state != ZN_REQ_DONE;
            for (int i = 0; i < n; i++) {
                if (x[i].req.state == ZN_REQ_DONE) continue;
                CHECK(0, "%d of %d transfers not done after %.0f s; first: %s of %zu bytes %s "
                         "peer %d, channel %d, %zu bytes moved",
                      left, n, secs, x[i].send ? "send" : "receive", x[i].len,
                      x[i].send ? "to" : "from", x[i].peer, x[i].ch, x[i].req.done);
            }
        }
        if (!progressed) sched_yield();
    }
    for (int i = 0; i < n; i++) {
        CHECK(x[i].req.done == x[i].len, "transfer %d done with %zu of %zu bytes", i,
              x[i].req.done, x[i].len);
        if (x[i].send) continue;
        size_t bad = pattern_check(x[i].buf, x[i].len, x[i].peer, s->e->rank, x[i].msg);
        CHECK(bad == (size_t)-1,
              "message %llu of %zu bytes from peer %d on channel %d: byte %zu is wrong",
              (unsigned long long)x[i].msg, x[i].len, x[i].peer, x[i].ch, bad);
    }
    return 0;
}

/* Set up a transfer; a send's buffer gets its pattern, a receive's a poison value. */
static int xfer_make(struct xfer *x, int send, int me, int peer, int ch, uint64_t msg, size_t len)
{
    memset(x, 0, sizeof(*x));
    x->send = send;
    x->peer = peer;
    x->ch = ch;
    x->msg = msg;
    x->len = len;
    x->buf = malloc(len ? len : 1);
    CHECK(x->buf, "out of memory for %zu bytes", len);
    if (send)
        pattern_fill(x->buf, len, me, peer, msg);
    else
        memset(x->buf, 0xee, len);
    return 0;
}

static void xfers_free(struct xfer *x, int n)
{
    for (int i = 0; i < n; i++) free(x[i].buf);
    free(x);
}

static int barrier(struct rank_env *e)
{
    ncclResult_t r = zn_boot_barrier(e->boot);
    CHECK(r == ncclSuccess, "bootstrap barrier returned %d", (int)r);
    return 0;
}

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

    static const size_t sizes[] = {0, 1, 7, 4096, 65537, 1 * MB, 16 * MB};
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
                    if (xfer_make(&x[i], send, me, p, ch, msg, sizes[k]) ||
                        xfer_post(s, &x[i])) {
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

static int sc_pairs(struct rank_env *e)
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
    struct small_ctx ctx = {.x = x, .npeers = n - 1};
    double t0 = now_s();
    if (!rc) rc = sc_wait(s, x, nx, 120, small_check, &ctx);
    if (!rc)
        SAY("%d x 64 B each way with %d peers in %.3f s", NSMALL, n - 1, now_s() - t0);
    xfers_free(x, nx);
    return rc;
}

static int sc_small(struct rank_env *e)
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

static int sc_duplex(struct rank_env *e)
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
        if (!rc) rc = xfer_make(&w[0], 1, me, partner, ZN_CH_COLL, 6, 1) ||
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

static int sc_mismatch(struct rank_env *e)
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
    struct zn_socket_hello h = {.magic = magic,
                                .kind = ZN_SOCKET_HELLO,
                                .from = from,
                                .to = to,
                                .channel = (uint32_t)ch,
                                .sock = (uint16_t)sock,
                                .nsocks = (uint16_t)nsocks};
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
    struct zn_socket_frame f = {.length = UINT64_MAX / 2, .seq = 0, .nparts = 1};
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
        rc = zn_sock_send_all(st[i].fd, st[i].bytes, st[i].len, zn_now_ns() + 10000000000ll,
                              NULL);
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
                if (r != ncclSuccess) rc = fail_at(__FILE__, __LINE__, "r == ncclSuccess",
                                                   "progress returned %d", (int)r);
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

static int sc_stray(struct rank_env *e)
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

static int sc_nsocks(struct rank_env *e)
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
 * exit: a peer exits mid-transfer
 * ------------------------------------------------------------------------------------------- */

/* Pairs (0, 1) and (2, 3): rank 1 exits while receiving from rank 0 (which also waits for a
 * message from it), rank 3 exits while sending to rank 2. */
static int sc_exit(struct rank_env *e)
{
    struct sc s;
    if (sc_init(&s, e)) return -1;
    int me = e->rank;
    int pair_ok = (me | 1) < e->nranks;
    if (!pair_ok) {
        sc_fini(&s);
        return 0;
    }
    int peer = me ^ 1, survivor = me % 2 == 0;
    int survivor_sends = me / 2 == 0; /* in pair (0, 1) the survivor sends */
    struct xfer x[2];
    int n = 0;
    if (sc_connect(&s, peer, ZN_CH_COLL)) return -1;
    if (survivor) {
        if (survivor_sends) {
            if (xfer_make(&x[n++], 1, me, peer, ZN_CH_COLL, 1, 64 * MB)) return -1;
        }
        if (xfer_make(&x[n++], 0, me, peer, ZN_CH_COLL, 1, 64 * MB)) return -1;
    } else {
        if (xfer_make(&x[n++], !survivor_sends, me, peer, ZN_CH_COLL, 1, 64 * MB)) return -1;
    }
    for (int i = 0; i < n; i++)
        if (xfer_post(&s, &x[i])) return -1;
    double t0 = now_s();
    ncclResult_t r = ncclSuccess;
    int peer_err = -1;
    while (now_s() - t0 < 60) {
        int progressed = 0;
        r = sc_progress(&s, &progressed, &peer_err, NULL);
        if (r != ncclSuccess) break;
        if (!survivor && x[0].req.done >= 4 * MB) {
            fprintf(stderr, "[rank %d] exit: exiting with %zu of %zu bytes moved, by "
                            "arrangement\n",
                    me, x[0].req.done, x[0].len);
            _exit(0);
        }
        if (!progressed) sched_yield();
    }
    double dt = now_s() - t0;
    for (int i = 0; i < n; i++) free(x[i].buf);
    CHECK(survivor, "the rank that should exit got %d from progress", (int)r);
    CHECK(r == ncclRemoteError, "progress returned %d after %.1f s while rank %d exited", (int)r,
          dt, peer);
    char who[32];
    snprintf(who, sizeof(who), "rank %d", peer);
    CHECK(strstr(zn_last_error(), who), "the error should name %s", who);
    CHECK(dt < 10, "the exit was reported after %.1f s (ZINC_TIMEOUT=%lld)", dt,
          (long long)zn_params()->timeout);
    SAY("rank %d's exit reported after %.3f s", peer, dt);
    sc_fini(&s);
    return 0;
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
        if (sends) x[n++] = (struct xfer){.send = 1, .peer = peer, .len = size, .buf = sbuf};
        if (recvs) x[n++] = (struct xfer){.send = 0, .peer = peer, .len = size, .buf = rbuf};
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

static int sc_perf(struct rank_env *e)
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
        static const size_t sizes[] = {64 * 1024, 1 * MB, 4 * MB, 16 * MB, 64 * MB};
        double secs;
        if (!rc) rc = perf_run(&s, peer, 1 * MB, 8, 1, sbuf, rbuf, &secs); /* warm up */
        for (int bidir = 0; bidir < 2 && !rc; bidir++) {
            for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]) && !rc; k++) {
                size_t total = 1024 * (size_t)MB;
                int iters = (int)(total / sizes[k]);
                if (iters > 2000) iters = 2000;
                rc = perf_run(&s, peer, sizes[k], iters, bidir, sbuf, rbuf, &secs);
                if (!rc && me == 1)
                    SAY("%s %8zu KB x %4d: %.3f s, %.2f GB/s%s", bidir ? "bidir" : "unidir",
                        sizes[k] / 1024, iters, secs, (double)sizes[k] * iters / secs / 1e9,
                        bidir ? " per direction" : "");
            }
        }
        /* Small-message rate. */
        if (!rc) {
            int iters = 20000;
            rc = perf_run(&s, peer, 64, iters, 0, sbuf, rbuf, &secs);
            if (!rc && me == 1)
                SAY("unidir 64 B x %d: %.3f s, %.2f M messages/s", iters, secs,
                    iters / secs / 1e6);
        }
        free(sbuf);
        free(rbuf);
    } else {
        /* Ranks beyond 1 only take part in the barriers. */
        int nb = 1 + 2 * 5 + 1;
        for (int i = 0; i < nb * 2 && !rc; i++) rc = barrier(e);
    }
    if (!rc) rc = barrier(e);
    sc_fini(&s);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * The child: join, run the scenarios
 * ------------------------------------------------------------------------------------------- */

struct scenario {
    const char *name;
    int (*fn)(struct rank_env *e);
    int socket_only;
    int min_ranks;
};

static const struct scenario scenarios[] = {
    {"pairs", sc_pairs, 0, 2},   {"small", sc_small, 0, 2}, {"duplex", sc_duplex, 0, 2},
    {"mismatch", sc_mismatch, 0, 2}, {"stray", sc_stray, 1, 2}, {"nsocks", sc_nsocks, 1, 2},
    {"exit", sc_exit, 0, 2},     {"perf", sc_perf, 0, 2},
};
#define NSCENARIOS ((int)(sizeof(scenarios) / sizeof(scenarios[0])))

static int selected(const char *list, const char *name)
{
    if (!strcmp(list, "all")) return strcmp(name, "perf") != 0;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        p += len + (c ? 1 : 0);
    }
    return 0;
}

static int child(const struct zn_transport_ops *ops, int rank, int nranks, int idfd,
                 const char *list)
{
    static struct rank_env env;
    struct rank_env *e = &env;
    e->rank = rank;
    e->nranks = nranks;
    e->ops = ops;
    e->scenario = "setup";
    atomic_init(&e->abort_flag, 0);
    cur_env = e;
    zn_log_rank = rank;

    ncclUniqueId id;
    size_t got = 0;
    while (got < sizeof(id)) {
        ssize_t r = read(idfd, (char *)&id + got, sizeof(id) - got);
        if (r <= 0) {
            fprintf(stderr, "[rank %d] no unique id from the parent\n", rank);
            return 1;
        }
        got += (size_t)r;
    }
    close(idfd);
    ncclResult_t r = zn_boot_init(&id, rank, nranks, &e->abort_flag, &e->boot);
    if (r != ncclSuccess) {
        fail_at(__FILE__, __LINE__, "zn_boot_init", "returned %d", (int)r);
        return 1;
    }
    e->peers = calloc((size_t)nranks, sizeof(*e->peers));
    if (!e->peers || zn_peer_info_local(&e->peers[rank]) != ncclSuccess) return 1;
    e->peers[rank].rank = rank;
    r = zn_boot_allgather(e->boot, e->peers, sizeof(*e->peers));
    if (r != ncclSuccess) {
        fail_at(__FILE__, __LINE__, "allgather", "returned %d", (int)r);
        return 1;
    }
    e->ctx = (struct zn_tctx){.rank = rank,
                              .nranks = nranks,
                              .peers = e->peers,
                              .boot = e->boot,
                              .comm_hash = zn_boot_magic(e->boot),
                              .abort_flag = &e->abort_flag};

    int failed = 0;
    for (int i = 0; i < NSCENARIOS && !failed; i++) {
        const struct scenario *sc = &scenarios[i];
        if (!selected(list, sc->name)) continue;
        if ((sc->socket_only && strcmp(ops->name, "socket") != 0) || nranks < sc->min_ranks) {
            if (rank == 0)
                fprintf(stderr, "[rank 0] %s: skipped (not for transport %s with %d ranks)\n",
                        sc->name, ops->name, nranks);
            continue;
        }
        e->scenario = sc->name;
        double t0 = now_s();
        zn_clear_last_error();
        if (sc->fn(e)) {
            failed = 1;
            /* Tell the others, so that they fail fast instead of waiting at a barrier. */
            zn_boot_abort(e->boot, ncclInternalError, "a conformance scenario failed");
            break;
        }
        fprintf(stderr, "[rank %d] ok   %s (%.2f s)\n", rank, sc->name, now_s() - t0);
    }
    /* After "exit" the bootstrap ring is missing a rank: no more collectives. */
    zn_boot_destroy(e->boot);
    free(e->peers);
    return failed;
}

/* ---------------------------------------------------------------------------------------------
 * The parent
 * ------------------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s TRANSPORT NRANKS [SCENARIOS|all]\n", argv[0]);
        return 2;
    }
    const struct zn_transport_ops *ops = find_transport(argv[1]);
    int nranks = atoi(argv[2]);
    const char *list = argc > 3 ? argv[3] : "all";
    if (!ops) {
        fprintf(stderr, "unknown transport \"%s\" (built in:", argv[1]);
        for (size_t i = 0; i < sizeof(all_transports) / sizeof(all_transports[0]); i++)
            fprintf(stderr, " %s", all_transports[i]->name);
        fprintf(stderr, ")\n");
        return 2;
    }
    if (nranks < 2 || nranks > MAXR) {
        fprintf(stderr, "NRANKS must be in [2, %d]\n", MAXR);
        return 2;
    }
    /* "exit" checks that a dead peer is reported long before the deadline. */
    setenv("ZINC_TIMEOUT", "30", 0);

    pid_t pids[MAXR];
    int wfd[MAXR];
    pid_t parent = getpid();
    for (int r = 0; r < nranks; r++) {
        int p[2];
        if (pipe(p) != 0) {
            perror("pipe");
            return 1;
        }
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(1);
            close(p[1]);
            for (int k = 0; k < r; k++) close(wfd[k]);
            fflush(stderr);
            _exit(child(ops, r, nranks, p[0], list));
        }
        close(p[0]);
        pids[r] = pid;
        wfd[r] = p[1];
    }
    ncclUniqueId id;
    ncclResult_t res = zn_boot_get_unique_id(&id);
    for (int r = 0; r < nranks; r++) {
        if (res == ncclSuccess && write(wfd[r], &id, sizeof(id)) != (ssize_t)sizeof(id))
            res = ncclSystemError;
        close(wfd[r]);
    }
    if (res != ncclSuccess) fprintf(stderr, "parent: no unique id: %s\n", zn_last_error());

    int status[MAXR], left = nranks, failed = res != ncclSuccess;
    for (int r = 0; r < nranks; r++) status[r] = -1;
    double end = now_s() + TEST_LIMIT;
    while (left > 0) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid > 0) {
            for (int r = 0; r < nranks; r++) {
                if (pids[r] != pid) continue;
                status[r] = st;
                left--;
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                    if (WIFSIGNALED(st))
                        fprintf(stderr, "parent: rank %d killed by signal %d\n", r,
                                WTERMSIG(st));
                    else
                        fprintf(stderr, "parent: rank %d exited with %d\n", r,
                                WEXITSTATUS(st));
                    failed = 1;
                }
            }
            continue;
        }
        if (failed || now_s() > end) {
            if (!failed) fprintf(stderr, "parent: timed out after %d s\n", TEST_LIMIT);
            failed = 1;
            /* Give the others a moment to report their own view, then stop them. */
            usleep(failed && now_s() <= end ? 2000000 : 0);
            for (int r = 0; r < nranks; r++) {
                if (status[r] != -1) continue;
                fprintf(stderr, "parent: killing rank %d\n", r);
                kill(pids[r], SIGKILL);
            }
            while (waitpid(-1, NULL, 0) > 0) {}
            break;
        }
        usleep(10000);
    }
    fprintf(stderr, "%s: transport %s, %d ranks, scenarios %s\n", failed ? "FAIL" : "PASS",
            ops->name, nranks, list);
    return failed ? 1 : 0;
}
