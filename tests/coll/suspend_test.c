/*
 * suspend_check: ncclCommSuspend / ncclCommResume / ncclCommMemStats on host communicators, on
 * the public API. Run under zinc-run on any number of ranks:
 *
 *   zinc-run -n 4 suspend_check        (-a: the communicator must have a shared-memory arena,
 *                                        which the suspension must unmap and resume map again)
 *
 * Checked: the four statistics (no device memory on a host communicator; Suspended 1 exactly
 * while suspended), argument errors, flags 0 as NCCL's no-op, collectives and send/recv refused
 * with ncclInvalidUsage while suspended (the message says so) and exact afterwards, what works
 * while suspended (queries, registration, split), double suspend and resume without suspend,
 * an operation queued in the same group after a suspend, several cycles in a row, and finalize,
 * destroy and abort of a suspended communicator. Whether the arena is mapped is read from
 * /proc/self/maps (its segment is /dev/shm/zn-<hash>-arena).
 */
#include "nccl.h"
#include "bootstrap/launcher.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks;
static long failures;

#include "mp_check.h"

/* Mappings of shared-memory arenas in this process (any communicator's). */
static int arena_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, "/zn-") != NULL && strstr(line, "-arena") != NULL;
    fclose(f);
    return n;
}

static uint64_t stat_of(ncclComm_t c, ncclCommMemStat_t s)
{
    uint64_t v = 12345;
    NCCLCHECK(ncclCommMemStats(c, s, &v));
    return v;
}

/* Host communicators hold no device memory: every byte count 0; Suspended as given. */
static void check_stats(ncclComm_t c, uint64_t suspended, const char *what)
{
    EXPECT(stat_of(c, ncclStatGpuMemSuspend) == 0, "%s: Suspend %llu bytes, expected 0", what,
           (unsigned long long)stat_of(c, ncclStatGpuMemSuspend));
    EXPECT(stat_of(c, ncclStatGpuMemPersist) == 0, "%s: Persist %llu bytes, expected 0", what,
           (unsigned long long)stat_of(c, ncclStatGpuMemPersist));
    EXPECT(stat_of(c, ncclStatGpuMemTotal) == 0, "%s: Total %llu bytes, expected 0", what,
           (unsigned long long)stat_of(c, ncclStatGpuMemTotal));
    EXPECT(stat_of(c, ncclStatGpuMemSuspended) == suspended, "%s: Suspended %llu, expected %llu",
           what, (unsigned long long)stat_of(c, ncclStatGpuMemSuspended),
           (unsigned long long)suspended);
}

/* Allreduce (several sizes: one window, many), allgather, broadcast, reducescatter and a ring
 * of sends and receives on c (every rank a member, in world order), each against its exact
 * result. */
static void check_colls(ncclComm_t c, const char *what)
{
    static const size_t sizes[] = { 1, 1001, 300001 };
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k];
        int32_t *in = malloc(n * sizeof(int32_t)), *out = malloc(n * sizeof(int32_t));
        for (size_t i = 0; i < n; i++) in[i] = rank * 7 + (int32_t)(i % 13);
        NCCLCHECK(ncclAllReduce(in, out, n, ncclInt32, ncclSum, c, NULL));
        long bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += out[i] != 7 * nranks * (nranks - 1) / 2 + nranks * (int32_t)(i % 13);
        EXPECT(bad == 0, "%s: allreduce of %zu: %ld elements wrong", what, n, bad);
        free(in);
        free(out);
    }
    size_t n = 4099;
    int32_t *in = malloc(n * sizeof(int32_t)), *all = malloc(n * (size_t)nranks * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) in[i] = rank * 100000 + (int32_t)i;
    NCCLCHECK(ncclAllGather(in, all, n, ncclInt32, c, NULL));
    long bad = 0;
    for (int r = 0; r < nranks; r++)
        for (size_t i = 0; i < n; i++) bad += all[(size_t)r * n + i] != r * 100000 + (int32_t)i;
    EXPECT(bad == 0, "%s: allgather: %ld elements wrong", what, bad);
    int root = nranks - 1;
    for (size_t i = 0; i < n; i++) in[i] = rank == root ? (int32_t)(i * 3) : -1;
    NCCLCHECK(ncclBroadcast(in, in, n, ncclInt32, root, c, NULL));
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += in[i] != (int32_t)(i * 3);
    EXPECT(bad == 0, "%s: broadcast: %ld elements wrong", what, bad);
    for (size_t i = 0; i < n * (size_t)nranks; i++) all[i] = rank + (int32_t)(i % 5);
    NCCLCHECK(ncclReduceScatter(all, in, n, ncclInt32, ncclSum, c, NULL));
    bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += in[i] != nranks * (nranks - 1) / 2 + nranks * (int32_t)(((size_t)rank * n + i) % 5);
    EXPECT(bad == 0, "%s: reducescatter: %ld elements wrong", what, bad);
    for (size_t i = 0; i < n; i++) in[i] = rank * 1000 + (int32_t)i;
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(in, n, ncclInt32, (rank + 1) % nranks, c, NULL));
    NCCLCHECK(ncclRecv(all, n, ncclInt32, (rank + nranks - 1) % nranks, c, NULL));
    NCCLCHECK(ncclGroupEnd());
    int prev = (rank + nranks - 1) % nranks;
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += all[i] != prev * 1000 + (int32_t)i;
    EXPECT(bad == 0, "%s: ring send/recv: %ld elements wrong", what, bad);
    free(in);
    free(all);
}

static ncclComm_t split(ncclComm_t parent)
{
    ncclComm_t c = NULL;
    NCCLCHECK(ncclCommSplit(parent, 0, rank, &c, NULL));
    return c;
}

static void test_arguments(ncclComm_t c)
{
    uint64_t v = 0;
    EXPECT_FAIL(ncclCommMemStats(c, (ncclCommMemStat_t)4, &v), ncclInvalidArgument, "stat 4");
    EXPECT_FAIL(ncclCommMemStats(c, ncclStatGpuMemTotal, NULL), ncclInvalidArgument,
                "value is NULL");
    EXPECT(ncclCommMemStats(NULL, ncclStatGpuMemTotal, &v) == ncclInvalidArgument,
           "ncclCommMemStats on a NULL communicator was not refused");
    EXPECT(ncclCommSuspend(NULL, NCCL_SUSPEND_MEM) == ncclInvalidArgument,
           "ncclCommSuspend on a NULL communicator was not refused");
    EXPECT(ncclCommResume(NULL) == ncclInvalidArgument,
           "ncclCommResume on a NULL communicator was not refused");
    EXPECT_FAIL(ncclCommSuspend(c, 0x2), ncclInvalidArgument, "NCCL_SUSPEND_MEM");
    EXPECT_FAIL(ncclCommSuspend(c, NCCL_SUSPEND_MEM | 0x100), ncclInvalidArgument,
                "bits other than NCCL_SUSPEND_MEM");
    EXPECT_FAIL(ncclCommResume(c), ncclInvalidUsage, "not suspended");
    /* Flags 0 ask for nothing: NCCL does nothing, and the communicator stays active. */
    EXPECT(ncclCommSuspend(c, 0) == ncclSuccess, "ncclCommSuspend(0) failed: %s",
           ncclGetLastError(NULL));
    check_stats(c, 0, "after ncclCommSuspend(0)");
    check_colls(c, "after ncclCommSuspend(0)");
    EXPECT_FAIL(ncclCommResume(c), ncclInvalidUsage, "not suspended");
}

/* One suspension of c: what is refused, what works, and everything exact afterwards. */
static void test_cycle(ncclComm_t c, int want_arena, int cycle)
{
    char what[64];
    snprintf(what, sizeof(what), "cycle %d", cycle);
    int before = arena_maps();
    EXPECT(!want_arena || before >= 1, "%s: no shared-memory arena mapped before the suspend",
           what);
    NCCLCHECK(ncclCommSuspend(c, NCCL_SUSPEND_MEM));
    check_stats(c, 1, what);
    int during = arena_maps();
    EXPECT(during == before - (want_arena ? 1 : 0),
           "%s: %d arena mappings while suspended, %d before (the arena must %s)", what, during,
           before, want_arena ? "go" : "not change");

    int32_t x = rank, y = 0;
    EXPECT_FAIL(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, c, NULL), ncclInvalidUsage,
                "suspended");
    EXPECT_FAIL(ncclBroadcast(&x, &y, 1, ncclInt32, 0, c, NULL), ncclInvalidUsage, "suspended");
    EXPECT_FAIL(ncclSend(&x, 1, ncclInt32, (rank + 1) % nranks, c, NULL), ncclInvalidUsage,
                "suspended");
    EXPECT_FAIL(ncclRecv(&y, 1, ncclInt32, (rank + nranks - 1) % nranks, c, NULL), ncclInvalidUsage,
                "suspended");
    ncclWindow_t win = NULL;
    int32_t wbuf[64];
    EXPECT_FAIL(ncclCommWindowRegister(c, wbuf, sizeof(wbuf), &win, NCCL_WIN_DEFAULT),
                ncclInvalidUsage, "suspended");
    EXPECT_FAIL(ncclCommSuspend(c, NCCL_SUSPEND_MEM), ncclInvalidUsage, "suspended already");

    /* What looks, registers or derives works meanwhile; refused calls leave c healthy. */
    int cnt = -1, me = -1;
    ncclResult_t async = ncclInternalError;
    NCCLCHECK(ncclCommCount(c, &cnt));
    NCCLCHECK(ncclCommUserRank(c, &me));
    NCCLCHECK(ncclCommGetAsyncError(c, &async));
    EXPECT(cnt == nranks && me == rank && async == ncclSuccess,
           "%s: count %d rank %d async %d while suspended", what, cnt, me, (int)async);
    void *reg = NULL;
    NCCLCHECK(ncclCommRegister(c, wbuf, sizeof(wbuf), &reg));
    NCCLCHECK(ncclCommDeregister(c, reg));
    if (cycle == 0) {
        ncclComm_t child = split(c);
        check_colls(child, "child split from a suspended communicator");
        NCCLCHECK(ncclCommDestroy(child));
    }

    NCCLCHECK(ncclCommResume(c));
    check_stats(c, 0, what);
    int after = arena_maps();
    EXPECT(after == before, "%s: %d arena mappings after resume, %d before", what, after, before);
    check_colls(c, what);
    EXPECT_FAIL(ncclCommResume(c), ncclInvalidUsage, "not suspended");
}

/* A suspend and an operation in one group: the suspend runs at ncclGroupEnd, before the
 * group's operations, which it then refuses. */
static void test_group(ncclComm_t c)
{
    int32_t x = rank, y = -1;
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclCommSuspend(c, NCCL_SUSPEND_MEM));
    NCCLCHECK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, c, NULL));
    EXPECT_FAIL(ncclGroupEnd(), ncclInvalidUsage, "suspended");
    EXPECT(y == -1, "the refused allreduce wrote %d", y);
    check_stats(c, 1, "suspended in a group");
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclCommResume(c));
    NCCLCHECK(ncclGroupEnd());
    check_stats(c, 0, "resumed in a group");
    check_colls(c, "resumed in a group");
}

int main(int argc, char **argv)
{
    int want_arena = 0;
    for (int i = 1; i < argc; i++) want_arena |= !strcmp(argv[i], "-a");
    ncclComm_t world = mp_world();
    /* The test works on children, so that world survives to sum the verdicts. */
    ncclComm_t c = split(world), c_destroy = split(world), c_abort = split(world);
    check_stats(c, 0, "new communicator");
    check_colls(c, "before any suspend");
    test_arguments(c);
    for (int k = 0; k < 3; k++) test_cycle(c, want_arena && nranks > 1, k);
    test_group(c);

    /* Finalize, destroy and abort of suspended communicators. */
    NCCLCHECK(ncclCommSuspend(c_abort, NCCL_SUSPEND_MEM));
    NCCLCHECK(ncclCommAbort(c_abort));
    NCCLCHECK(ncclCommSuspend(c_destroy, NCCL_SUSPEND_MEM));
    NCCLCHECK(ncclCommDestroy(c_destroy));
    NCCLCHECK(ncclCommSuspend(c, NCCL_SUSPEND_MEM));
    NCCLCHECK(ncclCommFinalize(c));
    NCCLCHECK(ncclCommDestroy(c));
    EXPECT(arena_maps() == (want_arena && nranks > 1 ? 1 : 0),
           "%d arena mappings left with world alone", arena_maps());
    return mp_finish(world, "suspend_check");
}
