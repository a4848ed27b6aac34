/*
 * scalable_check: ncclCommInitRankScalable with several unique ids made by different ranks.
 *
 *   zinc-run -n 8 scalable_check -i 1,2,4 [-l SECONDS]
 *
 * The ranks first make a world communicator from a unique id that rank 0 writes to a file
 * (ZINC_COMM_ID is unset first, so that every ncclGetUniqueId starts a root of its own). For
 * each count in -i, id k is made by rank nranks - 1 - k % nranks and broadcast over the world
 * communicator; every rank then joins with the whole list: blocking, non-blocking and inside
 * a group (fresh ids each time: a root serves one rendezvous). Each new communicator is
 * checked with an allreduce, an allgather of world ranks and a ring of send/recv.
 *
 * -l keeps every process alive SECONDS after the end, past a short ZINC_TIMEOUT, so that a
 * root nobody closed would log its "no rank joined within ZINC_TIMEOUT" warning (the ctest
 * entry fails on that text).
 *
 * Public API only, plus the launcher environment (bootstrap/launcher.h).
 */
#include "nccl.h"
#include "bootstrap/launcher.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, nranks;
static long failures;

#include "mp_check.h"

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
}

/* The world id travels through a file named after the job (zinc-run's pid and address). */
static ncclComm_t world_from_file(const char *job)
{
    char path[512], tmp[520];
    const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, sizeof(path), "%s/zinc-scalable-%d-%s.id", dir, (int)getppid(), job);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    ncclUniqueId id;
    if (rank == 0) {
        NCCLCHECK_ASYNC(ncclGetUniqueId(&id));
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(&id, sizeof(id), 1, f) != 1 || fclose(f) != 0 || rename(tmp, path)) {
            perror(path);
            exit(2);
        }
    } else {
        int got = 0;
        for (int i = 0; i < 60000 && !got; i++) {
            FILE *f = fopen(path, "rb");
            if (f) {
                got = fread(&id, sizeof(id), 1, f) == 1;
                fclose(f);
            }
            if (!got) sleep_ms(1);
        }
        if (!got) {
            fprintf(stderr, "[%d] no unique id in %s after 60 s\n", rank, path);
            exit(2);
        }
    }
    ncclComm_t w;
    NCCLCHECK_ASYNC(ncclCommInitRank(&w, nranks, id, rank));
    int32_t x = 1, y = 0;
    NCCLCHECK_ASYNC(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, w, NULL));
    if (rank == 0) unlink(path); /* everyone has read it */
    return w;
}

static void check_comm(ncclComm_t c, int nid, const char *mode)
{
    int cnt = -1, me = -1;
    NCCLCHECK_ASYNC(ncclCommCount(c, &cnt));
    NCCLCHECK_ASYNC(ncclCommUserRank(c, &me));
    EXPECT(cnt == nranks && me == rank, "%d ids, %s: rank %d of %d", nid, mode, me, cnt);
    int64_t x = rank + 1, sum = 0;
    NCCLCHECK_ASYNC(ncclAllReduce(&x, &sum, 1, ncclInt64, ncclSum, c, NULL));
    EXPECT(sum == (int64_t)nranks * (nranks + 1) / 2, "%d ids, %s: allreduce %lld", nid, mode,
           (long long)sum);
    int32_t *all = calloc((size_t)nranks, 4), mine = rank;
    NCCLCHECK_ASYNC(ncclAllGather(&mine, all, 1, ncclInt32, c, NULL));
    for (int r = 0; r < nranks; r++)
        EXPECT(all[r] == r, "%d ids, %s: allgather slot %d = %d", nid, mode, r, all[r]);
    free(all);
    int32_t s[257], r[257];
    for (int i = 0; i < 257; i++) s[i] = rank * 1000 + i;
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    NCCLCHECK_ASYNC(ncclGroupStart());
    NCCLCHECK_ASYNC(ncclSend(s, 257, ncclInt32, next, c, NULL));
    NCCLCHECK_ASYNC(ncclRecv(r, 257, ncclInt32, prev, c, NULL));
    NCCLCHECK_ASYNC(ncclGroupEnd());
    EXPECT(r[0] == prev * 1000 && r[256] == prev * 1000 + 256, "%d ids, %s: ring message %d", nid,
           mode, r[0]);
    /* Every receive is done before anyone destroys the communicator (a send may complete into
     * a shared-memory FIFO before the receiver has mapped it). */
    NCCLCHECK_ASYNC(ncclCommFinalize(c));
    ncclResult_t st = mp_wait(c);
    EXPECT(st == ncclSuccess, "%d ids, %s: finalize ended with %d", nid, mode, st);
}

static void run(ncclComm_t world, int nid)
{
    ncclUniqueId *ids = calloc((size_t)nid, sizeof(*ids));
    for (int k = 0; k < nid; k++) {
        int maker = nranks - 1 - k % nranks;
        if (rank == maker) NCCLCHECK_ASYNC(ncclGetUniqueId(&ids[k]));
        NCCLCHECK_ASYNC(
            ncclBroadcast(&ids[k], &ids[k], sizeof(ids[k]), ncclUint8, maker, world, NULL));
    }
    for (int k = 1; k < nid; k++)
        EXPECT(memcmp(&ids[k], &ids[0], sizeof(ids[0])) != 0, "ids 0 and %d are equal", k);
    ncclComm_t c = NULL;
    NCCLCHECK_ASYNC(ncclCommInitRankScalable(&c, nranks, rank, nid, ids, NULL));
    check_comm(c, nid, "blocking");
    NCCLCHECK_ASYNC(ncclCommDestroy(c));

    /* Fresh ids (a root serves one rendezvous), non-blocking init. */
    for (int k = 0; k < nid; k++) {
        int maker = (k * 3 + 1) % nranks;
        if (rank == maker) NCCLCHECK_ASYNC(ncclGetUniqueId(&ids[k]));
        NCCLCHECK_ASYNC(
            ncclBroadcast(&ids[k], &ids[k], sizeof(ids[k]), ncclUint8, maker, world, NULL));
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankScalable(&c, nranks, rank, nid, ids, &cfg);
    EXPECT(r == ncclInProgress || r == ncclSuccess, "non-blocking init returned %d", r);
    ncclResult_t st = mp_wait(c);
    EXPECT(st == ncclSuccess, "%d ids: non-blocking init ended with %s (%s)", nid,
           ncclGetErrorString(st), ncclGetLastError(c));
    if (st == ncclSuccess) check_comm(c, nid, "non-blocking");
    NCCLCHECK_ASYNC(ncclCommDestroy(c));

    /* Fresh ids again, init inside a group. */
    for (int k = 0; k < nid; k++) {
        int maker = (k * 5 + 2) % nranks;
        if (rank == maker) NCCLCHECK_ASYNC(ncclGetUniqueId(&ids[k]));
        NCCLCHECK_ASYNC(
            ncclBroadcast(&ids[k], &ids[k], sizeof(ids[k]), ncclUint8, maker, world, NULL));
    }
    NCCLCHECK_ASYNC(ncclGroupStart());
    NCCLCHECK_ASYNC(ncclCommInitRankScalable(&c, nranks, rank, nid, ids, NULL));
    NCCLCHECK_ASYNC(ncclGroupEnd());
    check_comm(c, nid, "grouped");
    NCCLCHECK_ASYNC(ncclCommDestroy(c));
    free(ids);
}

int main(int argc, char **argv)
{
    const char *counts = "1,2,4";
    int linger = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-i"))
            counts = argv[i + 1];
        else if (!strcmp(argv[i], "-l"))
            linger = atoi(argv[i + 1]);
    }
    struct zn_launch_info li;
    zn_launch_info_get(&li);
    rank = li.rank;
    nranks = li.nranks;
    /* Every ncclGetUniqueId must start its own root: no fixed rendezvous address. */
    char job[128];
    const char *cid = getenv("ZINC_COMM_ID");
    snprintf(job, sizeof(job), "%s", cid ? cid : "nojob");
    for (char *p = job; *p; p++)
        if (*p == ':' || *p == '/' || *p == '[' || *p == ']') *p = '_';
    unsetenv("ZINC_COMM_ID");
    unsetenv("NCCL_COMM_ID");

    ncclComm_t world = world_from_file(job);
    for (const char *p = counts; *p;) {
        int nid = atoi(p);
        if (nid > 0) run(world, nid);
        if (rank == 0 && nid > 0) printf("scalable_check: %d ranks, %d ids: done\n", nranks, nid);
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    long total = 0;
    NCCLCHECK_ASYNC(ncclAllReduce(&failures, &total, 1, ncclInt64, ncclSum, world, NULL));
    NCCLCHECK_ASYNC(ncclCommDestroy(world));
    if (rank == 0) printf("scalable_check: %d ranks: %ld failures\n", nranks, total);
    fflush(stdout);
    if (linger > 0) sleep((unsigned)linger);
    return total ? 1 : 0;
}
