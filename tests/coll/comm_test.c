/*
 * comm_check: communicator management on the public API, on host communicators:
 * ncclCommShrink on a healthy communicator (only the survivors call it), ncclCommRevoke,
 * non-blocking ncclCommFinalize / ncclCommDestroy, ncclCommWindowRegister / Deregister,
 * PreMulSum with a scalar read at each call (ncclScalarDevice), ncclGroupSimulateEnd and the
 * error and version queries. Run under zinc-run on any number of ranks:
 *
 *   zinc-run -n 5 comm_check
 *
 * Public API only; every check compares real data or results against what they must be.
 */
#include "nccl.h"
#include "bootstrap/launcher.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, nranks;
static ncclComm_t world;
static long failures;

#include "mp_check.h"

/* "At once" for calls that must not wait for peers: far below the tests' ZINC_TIMEOUT=60 (what
 * waiting for a peer would take), far above what a loaded 2-core machine can delay a process. */
#define PROMPT_MS 10000

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
}

static ncclComm_t dup_comm(int blocking)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = blocking;
    ncclComm_t c = NULL;
    ncclResult_t r = ncclCommSplit(world, 0, rank, &c, &cfg);
    EXPECT(r == ncclSuccess || (!blocking && r == ncclInProgress), "split returned %d", r);
    EXPECT(mp_wait(c) == ncclSuccess, "split communicator did not become ready");
    return c;
}

/* --- shrink ------------------------------------------------------------------------------ */

/* Ring exchange and allreduce on c, whose ranks are the parent ranks in members. */
static void check_comm(ncclComm_t c, const int *members, int m, const char *what)
{
    int cnt = -1, me = -1;
    NCCLCHECK(ncclCommCount(c, &cnt));
    NCCLCHECK(ncclCommUserRank(c, &me));
    int want_me = -1;
    for (int i = 0; i < m; i++)
        if (members[i] == rank) want_me = i;
    EXPECT(cnt == m && me == want_me, "%s: rank %d of %d, expected %d of %d", what, me, cnt,
           want_me, m);
    if (cnt != m || me != want_me) return;
    int64_t x = rank, sum = 0, want = 0;
    for (int i = 0; i < m; i++) want += members[i];
    NCCLCHECK(ncclAllReduce(&x, &sum, 1, ncclInt64, ncclSum, c, NULL));
    EXPECT(sum == want, "%s: allreduce %lld, expected %lld", what, (long long)sum, (long long)want);
    int32_t *all = calloc((size_t)m, sizeof(int32_t)), mine = rank;
    NCCLCHECK(ncclAllGather(&mine, all, 1, ncclInt32, c, NULL));
    for (int i = 0; i < m; i++)
        EXPECT(all[i] == members[i], "%s: allgather slot %d holds parent rank %d, expected %d",
               what, i, all[i], members[i]);
    free(all);
    int32_t s[1000], r[1000];
    for (int i = 0; i < 1000; i++) s[i] = rank * 1000 + i;
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(s, 1000, ncclInt32, (me + 1) % m, c, NULL));
    NCCLCHECK(ncclRecv(r, 1000, ncclInt32, (me + m - 1) % m, c, NULL));
    NCCLCHECK(ncclGroupEnd());
    int prev = members[(me + m - 1) % m];
    for (int i = 0; i < 1000; i++)
        if (r[i] != prev * 1000 + i) {
            EXPECT(0, "%s: ring message from parent rank %d is wrong at %d", what, prev, i);
            break;
        }
    /* Every receive is done before anyone destroys the communicator (a send may complete into
     * a shared-memory FIFO before the receiver has mapped it). */
    NCCLCHECK(ncclAllReduce(&x, &sum, 1, ncclInt64, ncclSum, c, NULL));
}

/* Exclude ranks {1, 3} (or the last rank on fewer than 4): the excluded ranks do not call
 * ncclCommShrink and do not serve anything meanwhile (they wait in a world allreduce), so
 * the new communicator cannot be talking to them. */
static void test_shrink(void)
{
    if (nranks < 2) return;
    int excl[2] = { 1, 3 }, nex = 2;
    if (nranks < 4) {
        excl[0] = nranks - 1;
        nex = 1;
    }
    int excluded = 0, members[64], m = 0;
    for (int r = 0; r < nranks; r++) {
        int out = 0;
        for (int i = 0; i < nex; i++) out |= excl[i] == r;
        if (out && r == rank) excluded = 1;
        if (!out && m < 64) members[m++] = r;
    }
    if (!excluded) {
        ncclComm_t s = NULL;
        NCCLCHECK(ncclCommShrink(world, excl, nex, &s, NULL, NCCL_SHRINK_DEFAULT));
        check_comm(s, members, m, "shrink");
        /* Non-blocking: ncclInProgress, then ready. */
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;
        ncclComm_t nb = NULL;
        ncclResult_t r = ncclCommShrink(world, excl, nex, &nb, &cfg, NCCL_SHRINK_DEFAULT);
        EXPECT(r == ncclInProgress || r == ncclSuccess, "non-blocking shrink returned %d", r);
        EXPECT(nb && mp_wait(nb) == ncclSuccess, "non-blocking shrink did not complete");
        if (nb) check_comm(nb, members, m, "non-blocking shrink");
        /* A shrink of the shrunk communicator: drop its last rank. */
        int last = m - 1;
        if (m >= 2 && rank != members[last]) {
            ncclComm_t s2 = NULL;
            NCCLCHECK(ncclCommShrink(s, &last, 1, &s2, NULL, NCCL_SHRINK_DEFAULT));
            check_comm(s2, members, m - 1, "shrink of a shrunk communicator");
            NCCLCHECK(ncclCommDestroy(s2));
        }
        NCCLCHECK(ncclCommDestroy(nb));
        NCCLCHECK(ncclCommDestroy(s));
    }
    /* The parent stays whole and usable. */
    int64_t x = 1, y = 0;
    NCCLCHECK(ncclAllReduce(&x, &y, 1, ncclInt64, ncclSum, world, NULL));
    EXPECT(y == nranks, "world allreduce after shrink: %lld", (long long)y);
    /* Argument errors are found before anything is sent. */
    ncclComm_t bad = (ncclComm_t)0x1;
    int self = rank, out_of_range = nranks;
    EXPECT_FAIL(ncclCommShrink(world, &self, 1, &bad, NULL, NCCL_SHRINK_DEFAULT),
                ncclInvalidArgument, "calling rank");
    EXPECT(bad == NULL, "a failed shrink left newcomm set");
    EXPECT_FAIL(ncclCommShrink(world, &out_of_range, 1, &bad, NULL, NCCL_SHRINK_DEFAULT),
                ncclInvalidArgument, "excludeRanksList[0]");
    EXPECT_FAIL(ncclCommShrink(world, NULL, 0, &bad, NULL, 0x10), ncclInvalidArgument,
                "shrinkFlags");
    EXPECT_FAIL(ncclCommShrink(world, NULL, 2, &bad, NULL, NCCL_SHRINK_DEFAULT),
                ncclInvalidArgument, "excludeRanksCount");
}

/* --- revoke ------------------------------------------------------------------------------ */

struct blocked {
    ncclComm_t comm;
    float *buf;
    ncclResult_t res;
    int64_t end_ns;
};

static void *blocked_main(void *arg)
{
    struct blocked *b = arg;
    b->res = ncclAllReduce(b->buf, b->buf, 4096, ncclFloat, ncclSum, b->comm, NULL);
    b->end_ns = now_ns();
    return NULL;
}

static void test_revoke(void)
{
    ncclComm_t c = dup_comm(1);
    /* Rank 0 has an allreduce in flight on another thread that nobody else joins (with
     * several ranks; alone, an allreduce completes at once). */
    struct blocked b = { .comm = c, .buf = calloc(4096, sizeof(float)) };
    pthread_t t;
    int inflight = rank == 0 && nranks > 1;
    if (inflight) {
        pthread_create(&t, NULL, blocked_main, &b);
        sleep_ms(200);
    }
    int64_t t0 = now_ns();
    NCCLCHECK(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT));
    if (inflight) {
        pthread_join(t, NULL);
        EXPECT(b.res != ncclSuccess, "the in-flight allreduce succeeded after ncclCommRevoke");
        EXPECT((b.end_ns - t0) / 1e6 < PROMPT_MS,
               "the in-flight allreduce returned %.0f ms after "
               "ncclCommRevoke",
               (b.end_ns - t0) / 1e6);
    }
    free(b.buf);
    ncclResult_t st = ncclInProgress;
    NCCLCHECK(ncclCommGetAsyncError(c, &st));
    EXPECT(st == ncclSuccess, "state after a blocking revoke: %d", st);
    /* Revoked: no more collectives, finalize is invalid, flags are checked. */
    int32_t x = 1, y = 0;
    EXPECT(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, c, NULL) != ncclSuccess,
           "an allreduce on a revoked communicator succeeded");
    EXPECT_FAIL(ncclCommFinalize(c), ncclInvalidUsage, "revoked");
    EXPECT_FAIL(ncclCommRevoke(c, 1), ncclInvalidArgument, "NCCL_REVOKE_DEFAULT");
    /* Split and shrink still work. */
    int all[64];
    for (int r = 0; r < nranks && r < 64; r++) all[r] = r;
    ncclComm_t s = NULL, k = NULL;
    NCCLCHECK(ncclCommSplit(c, 0, rank, &s, NULL));
    check_comm(s, all, nranks, "split of a revoked communicator");
    NCCLCHECK(ncclCommShrink(c, NULL, 0, &k, NULL, NCCL_SHRINK_DEFAULT));
    check_comm(k, all, nranks, "shrink of a revoked communicator");
    NCCLCHECK(ncclCommDestroy(k));
    NCCLCHECK(ncclCommDestroy(s));
    NCCLCHECK(ncclCommDestroy(c));

    /* Non-blocking communicator: ncclInProgress, then ncclSuccess. Revoked right after its
     * init reports ncclSuccess, several times: the init thread may still be on its way out
     * then, which must not make the revoke look like one during init. */
    for (int it = 0; it < 8; it++) {
        ncclComm_t nb = dup_comm(0);
        ncclResult_t r = ncclCommRevoke(nb, NCCL_REVOKE_DEFAULT);
        EXPECT(r == ncclInProgress || r == ncclSuccess, "non-blocking revoke %d returned %d", it,
               r);
        EXPECT(mp_wait(nb) == ncclSuccess, "non-blocking revoke did not reach ncclSuccess");
        NCCLCHECK(ncclCommDestroy(nb));
    }
}

/* --- finalize ---------------------------------------------------------------------------- */

static void test_finalize(void)
{
    ncclComm_t c = dup_comm(1);
    NCCLCHECK(ncclCommFinalize(c));
    NCCLCHECK(ncclCommFinalize(c)); /* twice: nothing more to do */
    NCCLCHECK(ncclCommDestroy(c));

    ncclComm_t nb = dup_comm(0);
    int32_t x = rank, y = 0;
    NCCLCHECK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, nb, NULL));
    EXPECT(y == nranks * (nranks - 1) / 2, "allreduce on a non-blocking comm: %d", y);
    ncclResult_t r = ncclCommFinalize(nb);
    EXPECT(r == ncclInProgress, "finalize of a non-blocking comm returned %d, not ncclInProgress",
           r);
    EXPECT(mp_wait(nb) == ncclSuccess, "non-blocking finalize did not reach ncclSuccess");
    int64_t t0 = now_ns();
    r = ncclCommDestroy(nb);
    EXPECT(r == ncclSuccess, "destroy after finalize returned %d", r);
    EXPECT((now_ns() - t0) / 1e6 < PROMPT_MS, "destroy after finalize took %.0f ms",
           (now_ns() - t0) / 1e6);
}

/* --- windows ----------------------------------------------------------------------------- */

static void test_windows(void)
{
    size_t sz = 1 << 16;
    char *buf = aligned_alloc(4096, sz + 4096);
    ncclWindow_t w = NULL, w2 = NULL, w3 = NULL;
    NCCLCHECK(ncclCommWindowRegister(world, buf, sz, &w, NCCL_WIN_COLL_SYMMETRIC));
    EXPECT(w != NULL, "no window handle");
    /* Default windows need no alignment. */
    NCCLCHECK(ncclCommWindowRegister(world, buf + 8, sz, &w2, NCCL_WIN_DEFAULT));
    EXPECT(w2 != NULL && w2 != w, "second window handle %p", (void *)w2);
    NCCLCHECK(ncclCommWindowDeregister(world, w));
    EXPECT_FAIL(ncclCommWindowDeregister(world, w), ncclInvalidArgument, "not a window");
    EXPECT_FAIL(ncclCommWindowDeregister(world, (ncclWindow_t)(uintptr_t)0x1234),
                ncclInvalidArgument, "not a window");
    EXPECT_FAIL(ncclCommWindowDeregister(world, NULL), ncclInvalidArgument, "not a window");
    EXPECT_FAIL(ncclCommWindowRegister(world, buf, sz, NULL, 0), ncclInvalidArgument, "win");
    if (nranks > 1) {
        /* Every rank learns of a mismatch, and of the rank at fault. */
        EXPECT_FAIL(ncclCommWindowRegister(world, buf, sz - (rank == 1 ? 4096 : 0), &w3, 0),
                    ncclInvalidUsage, "sizes differ");
        char name[32];
        snprintf(name, sizeof(name), "rank %d", nranks - 1);
        EXPECT_FAIL(ncclCommWindowRegister(world, buf + (rank == nranks - 1 ? 64 : 0), sz, &w3,
                                           NCCL_WIN_COLL_SYMMETRIC),
                    ncclInvalidArgument, name);
        EXPECT_FAIL(ncclCommWindowRegister(world, buf, sz, &w3, rank == 0 ? 0x80 : 0),
                    ncclInvalidArgument, "rank 0 passed winFlags 0x80");
        EXPECT_FAIL(
            ncclCommWindowRegister(world, buf, sz, &w3, rank == 1 ? NCCL_WIN_COLL_SYMMETRIC : 0),
            ncclInvalidUsage, "winFlags differ");
        EXPECT(w3 == NULL, "a failed registration returned a handle");
    }
    /* w2 stays registered: ncclCommDestroy frees it. The communicator still works. */
    int32_t x = 1, y = 0;
    NCCLCHECK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, world, NULL));
    EXPECT(y == nranks, "allreduce after window calls: %d", y);
    free(buf);
}

/* --- PreMulSum with a scalar read at each call ------------------------------------------- */

static void test_premulsum(void)
{
    enum { N = 1001 };
    float in[N], out[N];
    for (int i = 0; i < N; i++) in[i] = (float)(rank + 1);
    float scalar = 2.0f;
    ncclRedOp_t op;
    NCCLCHECK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarDevice, world));
    float want = 0;
    for (int r = 0; r < nranks; r++) want += 2.0f * (float)(r + 1);
    NCCLCHECK(ncclAllReduce(in, out, N, ncclFloat, op, world, NULL));
    EXPECT(out[0] == want && out[N - 1] == want, "scalar 2: %g, expected %g", out[0], want);
    /* The scalar changes between calls (to a different value on each rank): the new one is
     * used. */
    scalar = (float)(rank + 1) * 0.5f;
    want = 0;
    for (int r = 0; r < nranks; r++) want += (float)(r + 1) * 0.5f * (float)(r + 1);
    NCCLCHECK(ncclAllReduce(in, out, N, ncclFloat, op, world, NULL));
    EXPECT(out[0] == want && out[N / 2] == want, "changed scalar: %g, expected %g", out[0], want);
    NCCLCHECK(ncclRedOpDestroy(op, world));

    /* ncclScalarHostImmediate: read once, at creation. */
    double d_in[7], d_out[7], dscalar = 3.0;
    for (int i = 0; i < 7; i++) d_in[i] = rank + 1;
    NCCLCHECK(ncclRedOpCreatePreMulSum(&op, &dscalar, ncclDouble, ncclScalarHostImmediate, world));
    dscalar = 100.0;
    NCCLCHECK(ncclAllReduce(d_in, d_out, 7, ncclDouble, op, world, NULL));
    double dwant = 3.0 * nranks * (nranks + 1) / 2;
    EXPECT(d_out[6] == dwant, "host-immediate scalar: %g, expected %g", d_out[6], dwant);
    NCCLCHECK(ncclRedOpDestroy(op, world));
}

/* --- ncclGroupSimulateEnd ---------------------------------------------------------------- */

static float simulate(size_t count, float *buf)
{
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, world, NULL));
    NCCLCHECK(ncclGroupSimulateEnd(&sim));
    return sim.estimatedTime;
}

static void test_simulate(void)
{
    size_t big = 4u << 20; /* 16 MB of floats */
    float *buf = malloc(big * sizeof(float));
    for (int i = 0; i < 16; i++) buf[i] = -1.0f;
    float t[4] = { simulate(16, buf), simulate(4096, buf), simulate(1 << 18, buf),
                   simulate(big, buf) };
    /* One rank moves no data: its estimate may be 0. */
    EXPECT(t[0] > 0 || (nranks == 1 && t[0] == 0), "estimated time of a 64-byte allreduce: %g us",
           t[0]);
    for (int i = 1; i < 4 && nranks > 1; i++)
        EXPECT(t[i] > t[i - 1], "estimates do not grow with the size: %g %g %g %g us", t[0], t[1],
               t[2], t[3]);
    /* Nothing ran. */
    EXPECT(buf[0] == -1.0f && buf[15] == -1.0f, "a simulated allreduce wrote its buffer");
    ncclSimInfo_t bad = NCCL_SIM_INFO_INITIALIZER;
    EXPECT_FAIL(ncclGroupSimulateEnd(&bad), ncclInvalidUsage, "ncclGroupStart");
    if (rank == 0)
        printf("comm_check: simulated allreduce of 64 B .. 16 MB: %g, %g, %g, %g us\n", t[0], t[1],
               t[2], t[3]);
    free(buf);
}

/* --- error strings and versions ---------------------------------------------------------- */

static void test_queries(void)
{
    int v = 0;
    NCCLCHECK(ncclGetVersion(&v));
    EXPECT(v == NCCL_VERSION_CODE && v == 23007, "ncclGetVersion: %d", v);
    for (int r = ncclSuccess; r < ncclNumResults; r++) {
        const char *s = ncclGetErrorString((ncclResult_t)r);
        EXPECT(s && *s, "no error string for %d", r);
    }
    EXPECT(ncclGetVersion(NULL) == ncclInvalidArgument, "ncclGetVersion(NULL) succeeded");
    EXPECT(strstr(ncclGetLastError(NULL), "ncclGetVersion") != NULL,
           "last error does not name the call: %s", ncclGetLastError(NULL));
    EXPECT(strstr(ncclGetLastError(world), "ncclGetVersion") != NULL,
           "last error of a healthy comm: %s", ncclGetLastError(world));
}

int main(void)
{
    world = mp_world();

    test_queries();
    test_premulsum();
    test_simulate();
    test_windows();
    test_finalize();
    test_revoke();
    test_shrink();

    return mp_finish(world, "comm_check");
}
