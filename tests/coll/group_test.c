/*
 * group_check: groups, send/recv patterns, several communicators in one thread, split,
 * non-blocking init, queries and argument errors. Run under zinc-run on any number of ranks:
 *
 *   zinc-run -n 4 group_check
 *
 * Public API only. Every check compares real data against what it must be.
 */
#include "nccl.h"
#include "bootstrap/launcher.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, nranks;
static ncclComm_t world;
static long failures;

#include "mp_check.h"

static int32_t val(int src, int dst, int msg, size_t i)
{
    return (int32_t)(src * 1000003 + dst * 10007 + msg * 101 + (int)(i % 1000));
}

static void fill(int32_t *b, size_t n, int src, int dst, int msg)
{
    for (size_t i = 0; i < n; i++) b[i] = val(src, dst, msg, i);
}

static long verify(const int32_t *b, size_t n, int src, int dst, int msg)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != val(src, dst, msg, i)) return 1;
    return 0;
}

/* Ring exchange, then every pair (self included), several messages per pair in FIFO order,
 * receives posted before sends on odd ranks. */
static void test_p2p(ncclComm_t c, int n, int me)
{
    size_t sizes[] = { 0, 1, 33, 4096, 300007 };
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t cnt = sizes[k];
        int32_t *s = malloc((cnt + 1) * 4), *r = malloc((cnt + 1) * 4);
        int next = (me + 1) % n, prev = (me + n - 1) % n;
        fill(s, cnt, me, next, (int)k);
        memset(r, 0, (cnt + 1) * 4);
        NCCLCHECK(ncclGroupStart());
        if (me % 2) NCCLCHECK(ncclRecv(r, cnt, ncclInt32, prev, c, NULL));
        NCCLCHECK(ncclSend(s, cnt, ncclInt32, next, c, NULL));
        if (me % 2 == 0) NCCLCHECK(ncclRecv(r, cnt, ncclInt32, prev, c, NULL));
        NCCLCHECK(ncclGroupEnd());
        EXPECT(!verify(r, cnt, prev, me, (int)k), "ring exchange of %zu ints from %d", cnt, prev);
        free(s);
        free(r);
    }
    /* All pairs, 3 messages per pair of different sizes, in one group. */
    size_t msz[3] = { 5, 70001, 0 };
    int32_t **sb = calloc((size_t)n * 3, sizeof(*sb)), **rb = calloc((size_t)n * 3, sizeof(*rb));
    NCCLCHECK(ncclGroupStart());
    for (int d = 0; d < n; d++)
        for (int m = 0; m < 3; m++) {
            int peer = (me + d) % n, from = (me + n - d) % n;
            sb[d * 3 + m] = malloc(msz[m] * 4 + 4);
            rb[d * 3 + m] = calloc(msz[m] + 1, 4);
            fill(sb[d * 3 + m], msz[m], me, peer, m);
            if (me % 2) {
                NCCLCHECK(ncclRecv(rb[d * 3 + m], msz[m], ncclInt32, from, c, NULL));
                NCCLCHECK(ncclSend(sb[d * 3 + m], msz[m], ncclInt32, peer, c, NULL));
            } else {
                NCCLCHECK(ncclSend(sb[d * 3 + m], msz[m], ncclInt32, peer, c, NULL));
                NCCLCHECK(ncclRecv(rb[d * 3 + m], msz[m], ncclInt32, from, c, NULL));
            }
        }
    NCCLCHECK(ncclGroupEnd());
    for (int d = 0; d < n; d++)
        for (int m = 0; m < 3; m++) {
            int from = (me + n - d) % n;
            EXPECT(!verify(rb[d * 3 + m], msz[m], from, me, m), "all-pairs message %d from %d", m,
                   from);
            free(sb[d * 3 + m]);
            free(rb[d * 3 + m]);
        }
    free(sb);
    free(rb);
}

/* Several collectives and point-to-point operations in one group. */
static void test_fused(ncclComm_t c, int n, int me)
{
    size_t cnt = 10007;
    int32_t *a = malloc(cnt * 4), *ag = malloc(cnt * 4 * (size_t)n), *bc = malloc(cnt * 4);
    int32_t *ps = malloc(cnt * 4), *pr = malloc(cnt * 4);
    float *rs_in = malloc(cnt * 4 * (size_t)n), *rs_out = malloc(cnt * 4);
    for (size_t i = 0; i < cnt; i++) {
        a[i] = me + (int)i;
        bc[i] = me == n - 1 ? (int)(i * 3) : -1;
    }
    for (size_t i = 0; i < cnt * (size_t)n; i++) rs_in[i] = (float)(me + 1);
    fill(ps, cnt, me, (me + 1) % n, 9);
    int32_t mine = me * 7;
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclAllReduce(a, a, cnt, ncclInt32, ncclSum, c, NULL));
    NCCLCHECK(ncclSend(ps, cnt, ncclInt32, (me + 1) % n, c, NULL));
    NCCLCHECK(ncclAllGather(&mine, ag, 1, ncclInt32, c, NULL));
    NCCLCHECK(ncclBroadcast(bc, bc, cnt, ncclInt32, n - 1, c, NULL));
    NCCLCHECK(ncclRecv(pr, cnt, ncclInt32, (me + n - 1) % n, c, NULL));
    NCCLCHECK(ncclReduceScatter(rs_in, rs_out, cnt, ncclFloat, ncclSum, c, NULL));
    NCCLCHECK(ncclGroupEnd());
    long bad = 0;
    for (size_t i = 0; i < cnt; i++) {
        bad += a[i] != n * (n - 1) / 2 + n * (int)i;
        bad += bc[i] != (int)(i * 3);
        bad += rs_out[i] != (float)(n * (n + 1) / 2);
    }
    for (int j = 0; j < n; j++) bad += ag[j] != j * 7;
    bad += verify(pr, cnt, (me + n - 1) % n, me, 9);
    EXPECT(!bad, "fused group: %ld wrong values", bad);
    free(a);
    free(ag);
    free(bc);
    free(ps);
    free(pr);
    free(rs_in);
    free(rs_out);
}

/* Split by parity, keys reversed; the last rank opts out when there are more than two. */
static void test_split(void)
{
    int color = (nranks > 2 && rank == nranks - 1) ? NCCL_SPLIT_NOCOLOR : rank % 2;
    ncclComm_t sub;
    NCCLCHECK(ncclCommSplit(world, color, -rank, &sub, NULL));
    if (color == NCCL_SPLIT_NOCOLOR) {
        EXPECT(sub == NULL, "NOCOLOR rank got a communicator");
        return;
    }
    int members = 0, above = 0;
    for (int r = 0; r < nranks; r++) {
        int c = (nranks > 2 && r == nranks - 1) ? -1 : r % 2;
        if (c == color) {
            members++;
            above += r > rank;
        }
    }
    int cnt, me;
    NCCLCHECK(ncclCommCount(sub, &cnt));
    NCCLCHECK(ncclCommUserRank(sub, &me));
    EXPECT(cnt == members && me == above, "split: rank %d of %d, expected %d of %d", me, cnt, above,
           members);
    int64_t x = rank, sum = 0;
    NCCLCHECK(ncclAllReduce(&x, &sum, 1, ncclInt64, ncclSum, sub, NULL));
    int64_t want = 0;
    for (int r = 0; r < nranks; r++)
        if (!(nranks > 2 && r == nranks - 1) && r % 2 == color) want += r;
    EXPECT(sum == want, "split allreduce: %lld, expected %lld", (long long)sum, (long long)want);
    test_p2p(sub, cnt, me);
    NCCLCHECK(ncclCommDestroy(sub));
}

/* Two communicators driven by one thread inside one group: the world and a split copy. */
static void test_two_comms(void)
{
    ncclComm_t dup;
    NCCLCHECK(ncclCommSplit(world, 0, rank, &dup, NULL));
    int32_t a = rank, b = 2 * rank, ra = 0, rb = 0;
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclAllReduce(&a, &ra, 1, ncclInt32, ncclSum, world, NULL));
    NCCLCHECK(ncclAllReduce(&b, &rb, 1, ncclInt32, ncclMax, dup, NULL));
    NCCLCHECK(ncclGroupEnd());
    EXPECT(ra == nranks * (nranks - 1) / 2 && rb == 2 * (nranks - 1), "two comms: %d %d", ra, rb);
    NCCLCHECK(ncclCommDestroy(dup));
}

/* ncclCommInitAll on host memory: several ranks in this process, one thread, one group. */
static void test_init_all(void)
{
    enum { K = 3 };
    ncclComm_t c[K];
    NCCLCHECK(ncclCommInitAll(c, K, NULL));
    float v[K][64];
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < K; i++) {
        for (int j = 0; j < 64; j++) v[i][j] = (float)(i + j);
        NCCLCHECK(ncclAllReduce(v[i], v[i], 64, ncclFloat, ncclSum, c[i], NULL));
    }
    NCCLCHECK(ncclGroupEnd());
    long bad = 0;
    for (int i = 0; i < K; i++)
        for (int j = 0; j < 64; j++) bad += v[i][j] != (float)(3 + 3 * j);
    EXPECT(!bad, "InitAll allreduce: %ld wrong", bad);
    for (int i = 0; i < K; i++) NCCLCHECK(ncclCommDestroy(c[i]));
}

/* A non-blocking split: ncclInProgress, then ncclCommGetAsyncError reaches ncclSuccess. */
static void test_nonblocking(void)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t nb;
    ncclResult_t r = ncclCommSplit(world, 0, rank, &nb, &cfg);
    EXPECT(r == ncclInProgress || r == ncclSuccess, "non-blocking split returned %d", r);
    ncclResult_t st = mp_wait(nb);
    EXPECT(st == ncclSuccess, "non-blocking init ended with %d", st);
    int32_t x = 1, y = 0;
    NCCLCHECK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, nb, NULL));
    EXPECT(y == nranks, "non-blocking comm allreduce: %d", y);
    /* Finalize of a non-blocking communicator returns ncclInProgress, then completes. */
    r = ncclCommFinalize(nb);
    EXPECT(r == ncclInProgress || r == ncclSuccess, "non-blocking finalize returned %d", r);
    st = mp_wait(nb);
    EXPECT(st == ncclSuccess, "non-blocking finalize ended with %d", st);
    NCCLCHECK(ncclCommDestroy(nb));
}

/* ncclCommInitRankConfig with blocking = 0: returns ncclInProgress (or success), then
 * ncclCommGetAsyncError moves to ncclSuccess and the communicator works. The unique id travels
 * through the world communicator, as an application would send it. */
static void test_nonblocking_init(void)
{
    ncclUniqueId id;
    if (rank == 0) NCCLCHECK(ncclGetUniqueId(&id));
    NCCLCHECK(ncclBroadcast(&id, &id, sizeof(id), ncclUint8, 0, world, NULL));
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t c = NULL;
    ncclResult_t r = ncclCommInitRankConfig(&c, nranks, id, rank, &cfg);
    EXPECT(c != NULL && (r == ncclInProgress || r == ncclSuccess),
           "non-blocking init returned %d, comm %p", r, (void *)c);
    ncclResult_t st = mp_wait(c);
    EXPECT(st == ncclSuccess, "non-blocking init ended with %d", st);
    int64_t x = rank, y = 0;
    NCCLCHECK(ncclAllReduce(&x, &y, 1, ncclInt64, ncclSum, c, NULL));
    EXPECT(y == (int64_t)nranks * (nranks - 1) / 2, "allreduce on non-blocking comm: %lld",
           (long long)y);
    NCCLCHECK(ncclCommDestroy(c));
}

/* Bad arguments are rejected with a message naming them, and the communicator stays usable. */
static void test_bad_args(void)
{
    int32_t buf[4] = { 0 };
    struct {
        ncclResult_t got, want;
        const char *needle;
    } cases[12];
    int k = 0;
#define CASE(call, want_, needle_)                                                                \
    do {                                                                                          \
        cases[k].got = (call);                                                                    \
        cases[k].want = (want_);                                                                  \
        cases[k].needle = (needle_);                                                              \
        EXPECT(cases[k].got == cases[k].want, "%s returned %d, expected %d", #call, cases[k].got, \
               cases[k].want);                                                                    \
        EXPECT(strstr(ncclGetLastError(NULL), cases[k].needle) != NULL,                           \
               "%s: message \"%s\" does not name \"%s\"", #call, ncclGetLastError(NULL),          \
               cases[k].needle);                                                                  \
        k++;                                                                                      \
    } while (0)
    CASE(ncclAllReduce(NULL, buf, 4, ncclInt32, ncclSum, world, NULL), ncclInvalidArgument,
         "sendbuff");
    CASE(ncclAllReduce(buf, NULL, 4, ncclInt32, ncclSum, world, NULL), ncclInvalidArgument,
         "recvbuff");
    CASE(ncclAllReduce(buf, buf, 4, (ncclDataType_t)42, ncclSum, world, NULL), ncclInvalidArgument,
         "datatype");
    CASE(ncclAllReduce(buf, buf, 4, ncclInt32, (ncclRedOp_t)77, world, NULL), ncclInvalidArgument,
         "op");
    CASE(ncclBroadcast(buf, buf, 4, ncclInt32, nranks, world, NULL), ncclInvalidArgument, "root");
    CASE(ncclSend(buf, 4, ncclInt32, -1, world, NULL), ncclInvalidArgument, "peer");
    CASE(ncclAllReduce(buf, buf, 4, ncclInt32, ncclSum, world, (cudaStream_t)0x10),
         ncclInvalidArgument, "stream");
    CASE(ncclAllReduce(buf, buf, 4, ncclInt32, ncclSum, NULL, NULL), ncclInvalidArgument, "comm");
    CASE(ncclGroupEnd(), ncclInvalidUsage, "ncclGroupStart");
    float scalar = 2;
    ncclRedOp_t op;
    NCCLCHECK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, world));
    CASE(ncclAllReduce(buf, buf, 4, ncclInt32, op, world, NULL), ncclInvalidArgument, "datatype");
    NCCLCHECK(ncclRedOpDestroy(op, world));
    CASE(ncclAllReduce(buf, buf, 4, ncclFloat, op, world, NULL), ncclInvalidArgument, "op");
    /* Inside a group: the call fails, ncclGroupEnd fails, nothing was issued. */
    NCCLCHECK(ncclGroupStart());
    ncclResult_t r1 = ncclAllReduce(buf, buf, 4, ncclInt32, ncclSum, world, NULL);
    ncclResult_t r2 = ncclAllReduce(NULL, buf, 4, ncclInt32, ncclSum, world, NULL);
    ncclResult_t r3 = ncclGroupEnd();
    EXPECT(r1 == ncclSuccess && r2 == ncclInvalidArgument && r3 == ncclInvalidArgument,
           "group with a bad call: %d %d %d", r1, r2, r3);
    /* Still usable. */
    int32_t x = rank + 1, y = 0;
    NCCLCHECK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, world, NULL));
    EXPECT(y == nranks * (nranks + 1) / 2, "allreduce after bad calls: %d", y);
}

int main(void)
{
    world = mp_world();
    int cnt, me, dev;
    NCCLCHECK(ncclCommCount(world, &cnt));
    NCCLCHECK(ncclCommUserRank(world, &me));
    NCCLCHECK(ncclCommCuDevice(world, &dev));
    EXPECT(cnt == nranks && me == rank && dev == -1, "queries: %d %d %d", cnt, me, dev);
    int version;
    NCCLCHECK(ncclGetVersion(&version));
    EXPECT(version == NCCL_VERSION_CODE, "version %d", version);

    test_p2p(world, nranks, rank);
    test_fused(world, nranks, rank);
    test_split();
    test_two_comms();
    test_nonblocking();
    test_nonblocking_init();
    test_bad_args();
    test_init_all();

    return mp_finish(world, "group_check");
}
