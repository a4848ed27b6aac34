/*
 * test_gin: the GIN engine of device communicators (src/proxy/gin.c) between ranks on different
 * "hosts" (ZINC_HOSTID, tests/hosts/hostwrap.sh), with host memory standing in for GPU memory:
 * the requests a kernel would push are pushed from the host (zn_gin_push), windows are
 * malloc'd buffers, the copy is memcpy. Over the net transport on the socket net, and on the
 * IB verbs net through the verbs emulation (proxy_gin_ibemu_2x1).
 *
 *   test_gin check   every rank puts to every other rank, interleaved: sizes 0, 1, odd, and
 *                    several net chunks, then 2000 small puts (more than the FIFO holds), each
 *                    with SignalInc on the signal of its sender and CounterInc. A checker thread
 *                    watches the signals while the puts arrive: whenever a sender's signal
 *                    reads c, its first c puts must be complete, byte for byte (a signal is
 *                    seen after its put's data). Then a signal alone (SignalAdd), a put of an
 *                    8-byte value with SignalAdd, and the counters: all checked exactly.
 *   test_gin exit    after a first put each way, rank 1 exits without closing; rank 0 keeps
 *                    putting: its engine must fail with ncclRemoteError naming rank 1 within
 *                    ZINC_TIMEOUT, and its producer must stop waiting, instead of hanging.
 *   test_gin badwin  rank 0 puts into a window rank 1 does not have: rank 1's engine fails
 *                    with ncclInvalidUsage naming the window, and tells rank 0's engine,
 *                    which fails with ncclRemoteError carrying that reason.
 */
#include "api/comm.h"
#include "bootstrap/bootstrap.h"
#include "proxy/gin.h"
#include "util/clock.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NSMALL   2000
#define NBIG     9
#define NPUTS    (NBIG + NSMALL)
#define WIN_RES  0 /* the resource window id (unused here but for a zero-byte put) */
#define WIN_DATA 1
#define WIN_VAL  2

static const size_t big_sizes[NBIG] = {
    0, 1, 7, 8, 15, 4096, 65537, (4u << 20) + 3, (8u << 20) + 5
};

static int rank, nranks;
static size_t region; /* bytes of the data window per sender */
static uint8_t *data_win, *src_buf;
static uint64_t val_win[64];
static uint64_t *signals, *counters;
static int nsignals, ncounters;
static char fail_msg[1024];
static volatile int failed_res;
static long failures;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "rank %d: %s:%d: ", rank, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
            __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);            \
        }                                                                  \
    } while (0)

static size_t put_size(int i)
{
    return i < NBIG ? big_sizes[i] : (size_t)(1 + (i * 37) % 200);
}

/* Offset of put i in its sender's region (and in the sender's source buffer). */
static size_t offs[NPUTS + 1];
static void make_offsets(void)
{
    for (int i = 0; i < NPUTS; i++) offs[i + 1] = offs[i] + put_size(i);
}
static size_t put_off(int i)
{
    return offs[i];
}

static uint8_t pattern(int sender, int dst, size_t k)
{
    return (uint8_t)(sender * 131 + dst * 29 + k * 7 + (k >> 12) * 3 + 1);
}

static ncclResult_t copy(void *ctx, void *dst, const void *src, size_t n)
{
    (void)ctx;
    memcpy(dst, src, n);
    return ncclSuccess;
}

static ncclResult_t resolve(void *ctx, uint32_t win, uint64_t off, uint64_t len, void **ptr)
{
    (void)ctx;
    uint8_t *base = win == WIN_DATA ? data_win : win == WIN_VAL ? (uint8_t *)val_win : NULL;
    size_t size = win == WIN_DATA ? region * (size_t)nranks : sizeof(val_win);
    if (!base || off > size || len > size - off)
        return zn_error(ncclInvalidUsage, ZN_PROXY, "test: window %u [%llu, +%llu) is outside", win,
                        (unsigned long long)off, (unsigned long long)len);
    *ptr = base + off;
    return ncclSuccess;
}

static void engine_failed(void *ctx, ncclResult_t res)
{
    (void)ctx;
    snprintf(fail_msg, sizeof(fail_msg), "%s", zn_last_error());
    failed_res = (int)res;
}

static const struct zn_gin_ops ops = {
    .copy = copy, .resolve = resolve, .failed = engine_failed, .thread_init = NULL
};

static struct zincGinProxy proxy;
static struct zincGinRequest *slots;
static uint64_t head;

static ncclResult_t put(int peer, int i, uint32_t flags, uint32_t signal)
{
    struct zincGinRequest r = { .op = ZINC_GIN_OP_PUT,
                                .peer = peer,
                                .src = (uint64_t)(uintptr_t)(src_buf + (size_t)peer * region +
                                                             put_off(i)),
                                .dstOffset = (uint64_t)rank * region + put_off(i),
                                .bytes = put_size(i),
                                .dstWindow = WIN_DATA,
                                .flags = flags,
                                .signal = signal,
                                .counter = 0 };
    if (r.bytes == 0) r.dstWindow = WIN_RES; /* never resolved: nothing to write */
    return zn_gin_push(&proxy, slots, &head, &r);
}

static uint64_t load(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Wait until *p >= v; 0 on timeout or engine failure. */
static int wait_geq(const uint64_t *p, uint64_t v)
{
    int64_t dl = zn_deadline_from_now();
    while (load(p) < v) {
        if (failed_res || zn_now_ns() > dl) return 0;
        sched_yield();
    }
    return 1;
}

/* Checker: whenever sender s's signal (1 + s) reads c, its first c puts are complete. */
static void *checker(void *arg)
{
    (void)arg;
    int *verified = calloc((size_t)nranks, sizeof(int));
    int64_t dl = zn_deadline_from_now();
    for (int left = nranks - 1; left > 0;) {
        if (failed_res || zn_now_ns() > dl) {
            CHECK(0, "checker: %d senders incomplete (%s)", left,
                  failed_res ? fail_msg : "timeout");
            break;
        }
        int moved = 0;
        for (int s = 0; s < nranks; s++) {
            if (s == rank || verified[s] == NPUTS) continue;
            uint64_t c = load(&signals[1 + s]);
            CHECK(c <= NPUTS, "signal of sender %d reads %llu > %d puts", s, (unsigned long long)c,
                  NPUTS);
            for (; verified[s] < (int)c && verified[s] < NPUTS; verified[s]++) {
                int i = verified[s];
                size_t o = put_off(i), n = put_size(i);
                const uint8_t *d = data_win + (size_t)s * region + o;
                for (size_t k = 0; k < n; k++) {
                    if (d[k] != pattern(s, rank, o + k)) {
                        CHECK(0,
                              "put %d from rank %d (%zu bytes): byte %zu is %u, expected %u "
                              "while the signal reads %llu",
                              i, s, n, k, d[k], pattern(s, rank, o + k), (unsigned long long)c);
                        break;
                    }
                }
                moved = 1;
            }
            if (verified[s] == NPUTS) left--;
        }
        if (!moved) sched_yield();
    }
    free(verified);
    return NULL;
}

static int run_check(struct zn_gin *g, struct ncclComm *comm)
{
    pthread_t th;
    pthread_create(&th, NULL, checker, NULL);
    /* Interleave the peers: put i to each, in turn. */
    for (int i = 0; i < NPUTS; i++)
        for (int k = 1; k < nranks; k++) {
            int peer = (rank + k) % nranks;
            ncclResult_t r =
                put(peer, i, ZINC_GIN_F_SIGNAL_INC | ZINC_GIN_F_COUNTER, 1 + (uint32_t)rank);
            CHECK(r == ncclSuccess, "push of put %d to %d: %d", i, peer, (int)r);
        }
    pthread_join(th, NULL);
    /* Every source was read: the counter counts every put. */
    CHECK(wait_geq(&counters[0], (uint64_t)NPUTS * (nranks - 1)),
          "counter 0 reads %llu, expected %llu", (unsigned long long)load(&counters[0]),
          (unsigned long long)NPUTS * (nranks - 1));
    CHECK(load(&counters[1]) == 0, "counter 1 reads %llu", (unsigned long long)load(&counters[1]));

    /* A signal alone, then a value with a signal: signal 0 ends at the sum over senders. */
    for (int k = 1; k < nranks; k++) {
        int peer = (rank + k) % nranks;
        struct zincGinRequest s = { .op = ZINC_GIN_OP_SIGNAL,
                                    .peer = peer,
                                    .flags = ZINC_GIN_F_SIGNAL_ADD,
                                    .signal = 0,
                                    .signalValue = 1000003ull << rank };
        CHECK(zn_gin_push(&proxy, slots, &head, &s) == ncclSuccess, "push of a signal");
        struct zincGinRequest v = { .op = ZINC_GIN_OP_PUT_VALUE,
                                    .peer = peer,
                                    .src = 0x1122334455667700ull + (uint64_t)rank,
                                    .dstOffset = 8 * (uint64_t)rank,
                                    .bytes = 8,
                                    .dstWindow = WIN_VAL,
                                    .flags = ZINC_GIN_F_SIGNAL_ADD | ZINC_GIN_F_COUNTER,
                                    .signal = 0,
                                    .counter = 1,
                                    .signalValue = 5 };
        CHECK(zn_gin_push(&proxy, slots, &head, &v) == ncclSuccess, "push of a value");
    }
    uint64_t want = 0;
    for (int s = 0; s < nranks; s++)
        if (s != rank) want += (1000003ull << s) + 5;
    CHECK(wait_geq(&signals[0], want), "signal 0 reads %llu, expected %llu",
          (unsigned long long)load(&signals[0]), (unsigned long long)want);
    /* The value's signal came after it: every value is in place once the sum is reached. */
    for (int s = 0; s < nranks; s++)
        CHECK(val_win[s] == (s == rank ? 0 : 0x1122334455667700ull + (uint64_t)s),
              "value from rank %d: 0x%llx", s, (unsigned long long)val_win[s]);
    CHECK(wait_geq(&counters[1], (uint64_t)nranks - 1), "counter 1 reads %llu",
          (unsigned long long)load(&counters[1]));
    for (int s = 0; s < nranks; s++)
        if (s != rank)
            CHECK(load(&signals[1 + s]) == NPUTS, "signal of sender %d reads %llu, expected %d", s,
                  (unsigned long long)load(&signals[1 + s]), NPUTS);
    CHECK(load(&signals[0]) == want, "signal 0 overshot: %llu",
          (unsigned long long)load(&signals[0]));
    zn_gin_destroy(g, 1);
    CHECK(failed_res == 0, "engine failed: %s", fail_msg);
    (void)comm;
    return 0;
}

static int run_exit(struct zn_gin *g, struct ncclComm *comm)
{
    /* A first put each way: the connections are up. */
    int peer = 1 - rank;
    CHECK(put(peer, 5, ZINC_GIN_F_SIGNAL_INC, 1 + (uint32_t)rank) == ncclSuccess, "first put");
    CHECK(wait_geq(&signals[1 + peer], 1), "first put from %d did not arrive", peer);
    /* Rank 1 leaves once both got their first put. Its exit may reset the bootstrap socket
     * before rank 0 read the barrier's last message: rank 0's barrier may then fail, which
     * is fine (it only waits for rank 1 to be done). */
    (void)zn_boot_barrier(comm->boot);
    if (rank == 1) {
        fflush(stdout);
        fflush(stderr);
        _exit(failures ? 1 : 0); /* no BYE, no close: as a crash */
    }
    int64_t t0 = zn_now_ns();
    int pushed = 0;
    ncclResult_t r = ncclSuccess;
    while (!failed_res &&
           (r = put(peer, NBIG + pushed % NSMALL, ZINC_GIN_F_SIGNAL_INC, 1)) == ncclSuccess) {
        pushed++;
        if (zn_now_ns() - t0 > zn_timeout_ns() + 10000000000ll) break;
    }
    /* The producer stops (the engine failed, or the FIFO is full and reports it). */
    int64_t dl = zn_deadline_from_now();
    while (!failed_res && zn_now_ns() < dl) sched_yield();
    double s = (double)(zn_now_ns() - t0) / 1e9;
    CHECK(failed_res == ncclRemoteError, "engine status %d after %d puts to the dead peer, %.1f s",
          failed_res, pushed, s);
    CHECK(strstr(fail_msg, "rank 1") != NULL, "the error does not name rank 1: %s", fail_msg);
    CHECK(zn_gin_status(g) == ncclRemoteError, "zn_gin_status %d", (int)zn_gin_status(g));
    printf("rank 0: the engine failed after %d puts, %.1f s: %s\n", pushed, s, fail_msg);
    zn_gin_destroy(g, 1);
    return 0;
}

static int run_badwin(struct zn_gin *g)
{
    if (rank == 0) {
        struct zincGinRequest r = { .op = ZINC_GIN_OP_PUT_VALUE,
                                    .peer = 1,
                                    .src = 42,
                                    .bytes = 8,
                                    .dstWindow = 7,
                                    .flags = ZINC_GIN_F_SIGNAL_INC,
                                    .signal = 0 };
        CHECK(zn_gin_push(&proxy, slots, &head, &r) == ncclSuccess, "push");
    }
    int64_t dl = zn_deadline_from_now();
    while (!failed_res && zn_now_ns() < dl) sched_yield();
    if (rank == 1) {
        CHECK(failed_res == ncclInvalidUsage, "rank 1's engine status %d", failed_res);
        CHECK(strstr(fail_msg, "window 7") != NULL, "rank 1's error: %s", fail_msg);
    } else if (rank == 0) {
        CHECK(failed_res == ncclRemoteError, "rank 0's engine status %d", failed_res);
        CHECK(strstr(fail_msg, "rank 1") && strstr(fail_msg, "window 7"),
              "rank 0's error does not name rank 1 and its reason: %s", fail_msg);
    }
    printf("rank %d: the engine failed: %s\n", rank, fail_msg);
    CHECK(signals[0] == 0, "signal 0 reads %llu", (unsigned long long)signals[0]);
    zn_gin_destroy(g, 1);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "check";
    setvbuf(stdout, NULL, _IONBF, 0);
    ncclUniqueId id;
    ncclComm_t comm;
    const char *r = getenv("ZINC_RANK"), *n = getenv("ZINC_NRANKS");
    rank = r ? atoi(r) : 0;
    nranks = n ? atoi(n) : 1;
    if (nranks < 2) {
        fprintf(stderr, "test_gin: run with zinc-run -n 2 or more\n");
        return 2;
    }
    if (ncclGetUniqueId(&id) != ncclSuccess ||
        ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
        fprintf(stderr, "rank %d: init failed\n", rank);
        return 1;
    }
    make_offsets();
    region = put_off(NPUTS);
    data_win = calloc((size_t)nranks, region);
    src_buf = malloc((size_t)nranks * region);
    for (int d = 0; d < nranks; d++)
        for (size_t k = 0; k < region; k++) src_buf[(size_t)d * region + k] = pattern(rank, d, k);
    nsignals = 1 + nranks;
    ncounters = 2;
    signals = calloc((size_t)nsignals, 8);
    counters = calloc((size_t)ncounters, 8);
    slots = calloc(ZINC_GIN_FIFO_SLOTS, sizeof(*slots));
    uint8_t *net_peer = malloc((size_t)nranks);
    for (int p = 0; p < nranks; p++) net_peer[p] = p != rank;
    proxy.nslots = ZINC_GIN_FIFO_SLOTS;
    struct zn_gin_args a = { .tctx = &comm->tctx,
                             .net_peer = net_peer,
                             .proxy = &proxy,
                             .slots = slots,
                             .net_signals = signals,
                             .net_counters = counters,
                             .nsignals = nsignals,
                             .ncounters = ncounters,
                             .ops = &ops,
                             .ctx = NULL };
    struct zn_gin *g = NULL;
    if (zn_gin_create(&a, &g) != ncclSuccess) {
        fprintf(stderr, "rank %d: zn_gin_create failed\n", rank);
        return 1;
    }
    if (!strcmp(mode, "exit"))
        run_exit(g, comm);
    else if (!strcmp(mode, "badwin"))
        run_badwin(g);
    else
        run_check(g, comm);
    free(net_peer);
    free(slots);
    free(signals);
    free(counters);
    free(src_buf);
    free(data_win);
    if (!strcmp(mode, "exit"))
        ncclCommAbort(comm);
    else
        ncclCommDestroy(comm);
    printf("test_gin %s: rank %d of %d: %ld failures\n", mode, rank, nranks, failures);
    return failures ? 1 : 0;
}
