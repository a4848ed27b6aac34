/*
 * compat_check: an NCCL program, compiled against the reference nccl.h and linked against the
 * reference libnccl.so.2, that must run on zinc's library at run time (LD_LIBRARY_PATH).
 * It uses only the public NCCL API with host buffers and a NULL stream (zinc's host
 * communicators: ZINC_DEVICE=host), and checks every result.
 *
 *   LD_LIBRARY_PATH=<zinc>/lib ZINC_DEVICE=host zinc-run -n 4 compat_check
 *
 * It first proves that zinc's library is the one loaded: zincGetVersionString must resolve
 * through dlsym(RTLD_DEFAULT), and the library that defines ncclAllReduce is named.
 */
#include <nccl.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, nranks;
static long failures;

#include "../coll/mp_check.h"

static int env_int(const char *a, const char *b, int def)
{
    const char *v = getenv(a);
    if (!v || !*v) v = getenv(b);
    return v && *v ? atoi(v) : def;
}

/* The library in this process must be zinc's. */
static int check_loaded_library(void)
{
    const char *(*ver)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "zincGetVersionString");
    Dl_info info;
    memset(&info, 0, sizeof(info));
    dladdr((void *)ncclAllReduce, &info);
    if (!ver) {
        fprintf(stderr,
                "[%d] compat_check: zincGetVersionString is not defined: the libnccl.so.2 "
                "loaded (%s) is not zinc's\n",
                rank, info.dli_fname ? info.dli_fname : "?");
        return 0;
    }
    if (rank == 0)
        printf("compat_check: running on zinc %s (%s)\n", ver(),
               info.dli_fname ? info.dli_fname : "?");
    return 1;
}

static void test_collectives(ncclComm_t c, int n, int me)
{
    enum { N = 3001 };
    float *f = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float));
    int32_t *a = malloc(N * 4 * (size_t)n), *b = malloc(N * 4 * (size_t)n);
    double d[5];
    for (int i = 0; i < N; i++) f[i] = (float)(me + i % 7);
    NCCLCHECK(ncclAllReduce(f, g, N, ncclFloat32, ncclSum, c, NULL));
    long bad = 0;
    for (int i = 0; i < N; i++) bad += g[i] != (float)(n * (n - 1) / 2 + n * (i % 7));
    EXPECT(!bad, "allreduce float sum: %ld wrong", bad);
    for (int i = 0; i < N; i++) a[i] = (me * 7 + i) % 13;
    NCCLCHECK(ncclAllReduce(a, a, N, ncclInt32, ncclMax, c, NULL));
    bad = 0;
    for (int i = 0; i < N; i++) {
        int32_t want = 0;
        for (int r = 0; r < n; r++)
            if ((r * 7 + i) % 13 > want) want = (r * 7 + i) % 13;
        bad += a[i] != want;
    }
    EXPECT(!bad, "allreduce int32 max in place: %ld wrong", bad);
    for (int i = 0; i < 5; i++) d[i] = me * 2.0 + i;
    NCCLCHECK(ncclAllReduce(d, d, 5, ncclFloat64, ncclAvg, c, NULL));
    EXPECT(d[4] == (n - 1) + 4.0, "allreduce double avg: %g", d[4]);
    /* Broadcast from the last rank, reduce to rank 0. */
    for (int i = 0; i < N; i++) a[i] = me == n - 1 ? i * 3 : -1;
    NCCLCHECK(ncclBroadcast(a, a, N, ncclInt32, n - 1, c, NULL));
    bad = 0;
    for (int i = 0; i < N; i++) bad += a[i] != i * 3;
    EXPECT(!bad, "broadcast: %ld wrong", bad);
    int64_t x = me + 1, y = -1;
    NCCLCHECK(ncclReduce(&x, &y, 1, ncclInt64, ncclProd, 0, c, NULL));
    int64_t fact = 1;
    for (int r = 1; r <= n; r++) fact *= r;
    if (me == 0) EXPECT(y == fact, "reduce int64 prod: %lld", (long long)y);
    /* AllGather, ReduceScatter, AlltoAll. */
    for (int i = 0; i < N; i++) a[i] = me * 100000 + i;
    NCCLCHECK(ncclAllGather(a, b, N, ncclInt32, c, NULL));
    bad = 0;
    for (int r = 0; r < n; r++)
        for (int i = 0; i < N; i++) bad += b[(size_t)r * N + i] != r * 100000 + i;
    EXPECT(!bad, "allgather: %ld wrong", bad);
    for (size_t i = 0; i < (size_t)N * n; i++) b[i] = (int32_t)(i % 1000) + me;
    NCCLCHECK(ncclReduceScatter(b, a, N, ncclInt32, ncclSum, c, NULL));
    bad = 0;
    for (int i = 0; i < N; i++)
        bad += a[i] != n * (int32_t)(((size_t)me * N + i) % 1000) + n * (n - 1) / 2;
    EXPECT(!bad, "reducescatter: %ld wrong", bad);
    int32_t *s = malloc(N * 4 * (size_t)n);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < N; i++) s[(size_t)r * N + i] = me * 1000 + r * 10 + i % 10;
    NCCLCHECK(ncclAlltoAll(s, b, N, ncclInt32, c, NULL));
    bad = 0;
    for (int r = 0; r < n; r++)
        for (int i = 0; i < N; i++) bad += b[(size_t)r * N + i] != r * 1000 + me * 10 + i % 10;
    EXPECT(!bad, "alltoall: %ld wrong", bad);
    free(s);
    free(f);
    free(g);
    free(a);
    free(b);
}

/* Send/recv between every pair in one group, fused with an allreduce. */
static void test_group_p2p(ncclComm_t c, int n, int me)
{
    enum { M = 777 };
    int32_t *s = malloc((size_t)n * M * 4), *r = malloc((size_t)n * M * 4);
    for (int p = 0; p < n; p++)
        for (int i = 0; i < M; i++) s[p * M + i] = me * 10000 + p * 100 + i % 100;
    int32_t one = 1, cnt = 0;
    NCCLCHECK(ncclGroupStart());
    for (int p = 0; p < n; p++) {
        NCCLCHECK(ncclSend(s + p * M, M, ncclInt32, p, c, NULL));
        NCCLCHECK(ncclRecv(r + p * M, M, ncclInt32, p, c, NULL));
    }
    NCCLCHECK(ncclAllReduce(&one, &cnt, 1, ncclInt32, ncclSum, c, NULL));
    NCCLCHECK(ncclGroupEnd());
    long bad = 0;
    for (int p = 0; p < n; p++)
        for (int i = 0; i < M; i++) bad += r[p * M + i] != p * 10000 + me * 100 + i % 100;
    EXPECT(!bad && cnt == n, "group of send/recv with every rank + allreduce: %ld wrong, %d", bad,
           cnt);
    free(s);
    free(r);
}

static void test_split(ncclComm_t world)
{
    ncclComm_t sub;
    NCCLCHECK(ncclCommSplit(world, rank % 2, -rank, &sub, NULL));
    int cnt, me, members = 0, above = 0;
    for (int r = 0; r < nranks; r++)
        if (r % 2 == rank % 2) {
            members++;
            above += r > rank;
        }
    NCCLCHECK(ncclCommCount(sub, &cnt));
    NCCLCHECK(ncclCommUserRank(sub, &me));
    EXPECT(cnt == members && me == above, "split: rank %d of %d, expected %d of %d", me, cnt, above,
           members);
    test_collectives(sub, cnt, me);
    test_group_p2p(sub, cnt, me);
    NCCLCHECK(ncclCommFinalize(sub));
    NCCLCHECK(ncclCommDestroy(sub));
}

/* ncclConfig_t from the reference header's initializer, non-blocking. */
static void test_config(ncclComm_t world)
{
    ncclUniqueId id;
    if (rank == 0) NCCLCHECK(ncclGetUniqueId(&id));
    NCCLCHECK(ncclBroadcast(&id, &id, sizeof(id), ncclUint8, 0, world, NULL));
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    cfg.commName = "compat";
    ncclComm_t c = NULL;
    ncclResult_t r = ncclCommInitRankConfig(&c, nranks, id, rank, &cfg);
    EXPECT(r == ncclInProgress || r == ncclSuccess, "non-blocking init returned %d", r);
    EXPECT(mp_wait(c) == ncclSuccess, "non-blocking init did not complete");
    float v = (float)rank, w = 0;
    float scalar = 0.5f;
    ncclRedOp_t op;
    NCCLCHECK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, c));
    NCCLCHECK(ncclAllReduce(&v, &w, 1, ncclFloat32, op, c, NULL));
    EXPECT(w == 0.5f * (float)(nranks * (nranks - 1) / 2), "premulsum: %g", w);
    NCCLCHECK(ncclRedOpDestroy(op, c));
    r = ncclCommFinalize(c);
    EXPECT(r == ncclInProgress || r == ncclSuccess, "non-blocking finalize returned %d", r);
    EXPECT(mp_wait(c) == ncclSuccess, "non-blocking finalize did not complete");
    NCCLCHECK(ncclCommDestroy(c));
}

int main(void)
{
    rank = env_int("ZINC_RANK", "RANK", 0);
    nranks = env_int("ZINC_NRANKS", "WORLD_SIZE", 1);
    if (!check_loaded_library()) return 3;
    int version = 0;
    NCCLCHECK(ncclGetVersion(&version));
    /* The library implements a newer API than the header this was built with (as NCCL 2.30
     * does for a program built against 2.28): the version is the library's, never older. */
    EXPECT(version >= NCCL_VERSION_CODE, "ncclGetVersion %d, older than the header's %d", version,
           NCCL_VERSION_CODE);
    ncclUniqueId id;
    NCCLCHECK(ncclGetUniqueId(&id));
    ncclComm_t world;
    NCCLCHECK(ncclCommInitRank(&world, nranks, id, rank));
    int dev = 0;
    NCCLCHECK(ncclCommCuDevice(world, &dev));
    EXPECT(dev == -1, "a host communicator reports device %d", dev);

    test_collectives(world, nranks, rank);
    test_group_p2p(world, nranks, rank);
    test_split(world);
    test_config(world);

    /* Errors come back with a message. */
    EXPECT(ncclAllReduce(NULL, NULL, 1, ncclFloat32, ncclSum, world, NULL) == ncclInvalidArgument,
           "allreduce of NULL buffers did not fail");
    EXPECT(strstr(ncclGetLastError(world), "sendbuff") != NULL, "last error: %s",
           ncclGetLastError(world));

    return mp_finish(world, "compat_check");
}
