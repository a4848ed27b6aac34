/*
 * The transport conformance suite: one multi-process program that drives any transport through
 * its ops table only (transport.h), the way the layers above do.
 *
 *   test_transport TRANSPORT NRANKS [SCENARIOS]
 *
 * TRANSPORT is a transport's name (net, shm) or "socket": the net transport over the socket
 * net (ZINC_TRANSPORT=socket); SCENARIOS a comma-separated list of the
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
 *   onesided  with one-sided operations of their own (shm, net): a domain, connections to
 *             both ring neighbours, put + signal and put_signal checked byte for byte;
 *             without ZN_TCAP_RMA, put / signal / flush on a connection (and the key calls)
 *             fail with ncclInvalidUsage naming the transport and the operation
 *   collmem   ZN_TCAP_COLLMEM matches zn_transport_collmem; shm's arena made through it is
 *             shared: every rank reads every peer's slot pattern
 *   stray     (net) connections to a rank's listener whose HELLO is not one of the
 *             communicator's are closed and disturb nothing (garbage below the HELLO is the
 *             net's business: tests/net)
 *   setup     (net) a connection whose peer never shows up fails after ZINC_TIMEOUT (set
 *             to 2 s), naming the peer, on either side of the pair. Not for every transport:
 *             shm's lower rank is set up alone (it creates the segment) and has nothing to
 *             wait for.
 *   gpunet    (net) the proxy's GPU net engine with host code standing in for the kernels:
 *             300 slots per channel each way around the ring, through 8-slot FIFOs
 *   gpunet_all (net) the same with FIFOs between every two ranks (the send/recv and alltoall
 *             kernels' case): 100 slots per channel and pair each way
 *   gpunet_slots (net, 3+ ranks) the ring's FIFOs with the shadows' control rows by slot
 *             (self 0, next 1, prev 2), as on a ring of more than 8 ranks across hosts
 *   gpunet_abort (net) an engine left with slots its peer never reads is destroyed at once
 *             after an abort, without waiting ZINC_TIMEOUT for them
 *   gpunet_gone (net) peers that close their engines (one, or two with 3+ ranks) are marked in
 *             the receiver's shadow (the slots that came + 1) and named in its message, and the
 *             receiver's engine keeps running
 *   gpunet_gdr (net) the engine with GPUDirect RDMA rows (plain memory standing in for device
 *             memory): where they go at each ZINC_NET_GDR_LEVEL / _READ and without device
 *             memory, data, every landed slot flushed on a net that moves GPU memory; the net
 *             device by the rank's place
 *   exit      a peer that exits mid-transfer is reported as ncclRemoteError within seconds
 *             (always last: the job is one rank short afterwards)
 *   perf      (not in "all") loopback throughput, rank 0 <-> rank 1
 *
 * Files: conformance_test.c (this: harness, driver loop, patterns, main), scenarios.c (every
 * transport), scenarios_caps.c (optional capabilities), scenarios_net.c (net only),
 * scenarios_gpunet.c (the GPU net engine over the net), conformance.h (what they share).
 */
#include "conformance.h"
#include "bootstrap/bootstrap.h"
#include "transport/peer.h"
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
#include <sys/wait.h>
#include <unistd.h>

#define TEST_LIMIT 280 /* seconds for the whole run; ctest's TIMEOUT is a little longer */

/* ---------------------------------------------------------------------------------------------
 * Transports under test
 * ------------------------------------------------------------------------------------------- */

/* Every table of the registry is of this build's size with every slot filled, reports
 * two-sided messages with a positive latency and bandwidth, and refuses registration unless it
 * says it registers memory. */
static int check_tables(void)
{
    int bad = 0;
    for (int i = 0; i < ZN_NTRANSPORTS; i++) {
        const struct zn_transport_ops *t = zn_transports[i];
        if (zn_transport_check(t) != ncclSuccess) {
            fprintf(stderr, "FAIL table of %s: %s\n", t->name ? t->name : "?", zn_last_error());
            bad = 1;
            continue;
        }
        struct zn_peer_info peers[2] = { { .rank = 0 }, { .rank = 1 } };
        struct zn_tctx ctx = { .rank = 0, .nranks = 2, .peers = peers };
        struct zn_transport_props props = { 0 };
        t->query(&ctx, 1, &props);
        if (!(props.caps & ZN_TCAP_MSG) || !(props.latency_us > 0) || !(props.bw > 0)) {
            fprintf(stderr, "FAIL %s query: caps %#x latency %g us bw %g B/us\n", t->name,
                    props.caps, props.latency_us, props.bw);
            bad = 1;
        }
        void *handle = NULL;
        char buf[64];
        if (!(props.caps & ZN_TCAP_REG) && t->reg(NULL, buf, sizeof(buf), &handle) == ncclSuccess) {
            fprintf(stderr, "FAIL %s registers memory but does not say so\n", t->name);
            bad = 1;
        }
    }
    return bad;
}

/* Every transport of the registry, by name; "socket" is the net transport over the socket
 * net, as ZINC_TRANSPORT=socket makes it. */
static const struct zn_transport_ops *find_transport(const char *name)
{
    if (!strcmp(name, "socket")) {
        setenv("ZINC_TRANSPORT", "socket", 1);
        zn_params_reload();
        name = "net";
    }
    for (int i = 0; i < ZN_NTRANSPORTS; i++)
        if (!strcmp(zn_transports[i]->name, name)) return zn_transports[i];
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * One rank's environment, failure reporting
 * ------------------------------------------------------------------------------------------- */

struct rank_env *cur_env;

int fail_at(const char *file, int line, const char *cond, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "[rank %d] %s: %s:%d: FAIL: %s: %s (last error: \"%s\")\n",
            cur_env ? cur_env->rank : -1, cur_env ? cur_env->scenario : "-", file, line, cond, msg,
            zn_last_error());
    return -1;
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
void pattern_fill(void *buf, size_t len, int src, int dst, uint64_t msg)
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
size_t pattern_check(const void *buf, size_t len, int src, int dst, uint64_t msg)
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

int sc_init(struct sc *s, struct rank_env *e)
{
    memset(s, 0, sizeof(*s));
    s->e = e;
    ncclResult_t r = e->ops->init(&e->ctx, &s->state);
    CHECK(r == ncclSuccess, "%s init returned %d", e->ops->name, (int)r);
    return 0;
}

void sc_fini(struct sc *s)
{
    s->e->ops->fini(s->state);
    s->state = NULL;
}

int sc_connect(struct sc *s, int peer, int ch)
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
ncclResult_t sc_progress(struct sc *s, int *progressed, int *peer, int *ch)
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

int sc_progress_for(struct sc *s, double secs)
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

int xfer_post(struct sc *s, struct xfer *x)
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

/* Progress until every transfer is done; check() (if any) runs after every round. */
int sc_wait(struct sc *s, struct xfer *x, int n, double secs, sc_check_fn check, void *arg)
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
                CHECK(0,
                      "%d of %d transfers not done after %.0f s; first: %s of %zu bytes %s "
                      "peer %d, channel %d, %zu bytes moved",
                      left, n, secs, x[i].send ? "send" : "receive", x[i].len,
                      x[i].send ? "to" : "from", x[i].peer, x[i].ch, x[i].req.done);
            }
        }
        if (!progressed) sched_yield();
    }
    for (int i = 0; i < n; i++) {
        CHECK(x[i].req.done == x[i].len, "transfer %d done with %zu of %zu bytes", i, x[i].req.done,
              x[i].len);
        if (x[i].send) continue;
        size_t bad = pattern_check(x[i].buf, x[i].len, x[i].peer, s->e->rank, x[i].msg);
        CHECK(bad == (size_t)-1,
              "message %llu of %zu bytes from peer %d on channel %d: byte %zu is wrong",
              (unsigned long long)x[i].msg, x[i].len, x[i].peer, x[i].ch, bad);
    }
    return 0;
}

/* Set up a transfer; a send's buffer gets its pattern, a receive's a poison value. */
int xfer_make(struct xfer *x, int send, int me, int peer, int ch, uint64_t msg, size_t len)
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

void xfers_free(struct xfer *x, int n)
{
    for (int i = 0; i < n; i++) free(x[i].buf);
    free(x);
}

int barrier(struct rank_env *e)
{
    ncclResult_t r = zn_boot_barrier(e->boot);
    CHECK(r == ncclSuccess, "bootstrap barrier returned %d", (int)r);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The child: join, run the scenarios
 * ------------------------------------------------------------------------------------------- */

struct scenario {
    const char *name;
    int (*fn)(struct rank_env *e);
    int net_only;
    int min_ranks;
};

/* In running order. Each gets a fresh transport state; "exit" must stay last. */
static const struct scenario scenarios[] = {
    { .name = "pairs", .fn = sc_pairs, .min_ranks = 2 },
    { .name = "small", .fn = sc_small, .min_ranks = 2 },
    { .name = "duplex", .fn = sc_duplex, .min_ranks = 2 },
    { .name = "mismatch", .fn = sc_mismatch, .min_ranks = 2 },
    { .name = "onesided", .fn = sc_onesided, .min_ranks = 2 },
    { .name = "collmem", .fn = sc_collmem, .min_ranks = 2 },
    { .name = "stray", .fn = sc_stray, .net_only = 1, .min_ranks = 2 },
    { .name = "setup", .fn = sc_setup, .net_only = 1, .min_ranks = 2 },
    { .name = "gpunet", .fn = sc_gpunet, .net_only = 1, .min_ranks = 2 },
    { .name = "gpunet_all", .fn = sc_gpunet_all, .net_only = 1, .min_ranks = 2 },
    { .name = "gpunet_slots", .fn = sc_gpunet_slots, .net_only = 1, .min_ranks = 3 },
    { .name = "gpunet_abort", .fn = sc_gpunet_abort, .net_only = 1, .min_ranks = 2 },
    { .name = "gpunet_gone", .fn = sc_gpunet_gone, .net_only = 1, .min_ranks = 2 },
    { .name = "gpunet_gdr", .fn = sc_gpunet_gdr, .net_only = 1, .min_ranks = 2 },
    { .name = "perf", .fn = sc_perf, .min_ranks = 2 },
    { .name = "exit", .fn = sc_exit, .min_ranks = 2 },
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
    e->ctx = (struct zn_tctx){ .rank = rank,
                               .nranks = nranks,
                               .peers = e->peers,
                               .boot = e->boot,
                               .comm_hash = zn_boot_magic(e->boot),
                               .abort_flag = &e->abort_flag };

    int failed = 0;
    for (int i = 0; i < NSCENARIOS && !failed; i++) {
        const struct scenario *sc = &scenarios[i];
        if (!selected(list, sc->name)) continue;
        if ((sc->net_only && strcmp(ops->name, "net") != 0) || nranks < sc->min_ranks) {
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
        for (int i = 0; i < ZN_NTRANSPORTS; i++) fprintf(stderr, " %s", zn_transports[i]->name);
        fprintf(stderr, ")\n");
        return 2;
    }
    if (nranks < 2 || nranks > MAXR) {
        fprintf(stderr, "NRANKS must be in [2, %d]\n", MAXR);
        return 2;
    }
    if (check_tables() != 0) return 1;
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
            /* exit(), not _exit(): LeakSanitizer checks at exit in the sanitizer build. */
            exit(child(ops, r, nranks, p[0], list));
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
                        fprintf(stderr, "parent: rank %d killed by signal %d\n", r, WTERMSIG(st));
                    else
                        fprintf(stderr, "parent: rank %d exited with %d\n", r, WEXITSTATUS(st));
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
            while (waitpid(-1, NULL, 0) > 0) {
            }
            break;
        }
        usleep(10000);
    }
    fprintf(stderr, "%s: transport %s, %d ranks, scenarios %s\n", failed ? "FAIL" : "PASS",
            ops->name, nranks, list);
    return failed ? 1 : 0;
}
