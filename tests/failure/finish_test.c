/*
 * finish_check: a rank that finishes its last call and exits at once (with or without
 * ncclCommDestroy, as short programs do) must not make a peer's still-running call of the same
 * collective fail: everything the peer needs was already handed over when the finished rank's
 * call returned. The opposite of fail_check: here no survivor may report an error.
 *
 *   finish_check shm|socket [-n 8] [-r 20]
 *
 * Runs the job r times (the race it looks for needs a peer preempted at the wrong moment, so
 * more ranks than cores and many repeats make it likely); even repeats destroy the
 * communicator before exiting, odd ones just exit.
 */
#include "fail_harness.h"
#include "nccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static int destroy_first;

static void child_finish(int rank, int nranks, void *arg)
{
    ncclUniqueId id;
    ncclComm_t comm;
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r == ncclSuccess) r = ncclCommInitRank(&comm, nranks, id, rank);
    if (r != ncclSuccess) {
        fh_report(rank, "init", r, fh_now_ns(), 0, ncclGetLastError(NULL));
        exit(0);
    }
    int64_t mine = rank, *all = malloc(sizeof(int64_t) * (size_t)nranks);
    for (int i = 0; i < 3; i++) {
        /* Before the last call, ranks arrive at different times, so that the early ones wait
         * long enough to start checking whether their peers are alive. */
        if (i == 2) fh_sleep_ms(2 * (nranks - rank));
        r = ncclAllGather(&mine, all, 1, ncclInt64, comm, NULL);
        if (r != ncclSuccess) {
            fh_report(rank, "fail", r, fh_now_ns(), 0, ncclGetLastError(comm));
            exit(0);
        }
        for (int k = 0; k < nranks; k++)
            if (all[k] != k) {
                fh_report(rank, "wrong", 0, fh_now_ns(), 0, "allgather gave wrong data");
                exit(0);
            }
    }
    if (destroy_first) ncclCommDestroy(comm);
    fh_report(rank, "ok", 0, fh_now_ns(), 0, NULL);
    free(all);
    /* Leave at once: no fh_done, no waiting for the others. */
    exit(0);
}

int main(int argc, char **argv)
{
    int nranks = 8, repeats = 20;
    if (argc < 2 || (strcmp(argv[1], "shm") && strcmp(argv[1], "socket"))) {
        fprintf(stderr, "usage: finish_check shm|socket [-n NRANKS] [-r REPEATS]\n");
        return 2;
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-n")) nranks = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "-r")) repeats = atoi(argv[i + 1]);
    }
    if (nranks < 2 || repeats < 1) return 2;
    int bad = 0;
    int64_t t0 = fh_now_ns();
    for (int rep = 0; rep < repeats; rep++) {
        destroy_first = rep % 2 == 0;
        struct fh_job job = { .nranks = nranks,
                              .transport = argv[1],
                              .zinc_timeout_s = 20,
                              .wall_s = 60,
                              .child = child_finish };
        int rc = fh_run(&job);
        int job_bad = rc != 0;
        for (int r = 0; r < nranks; r++) {
            const struct fh_rank *k = &job.ranks[r];
            const struct fh_record *ok = fh_find(&job, r, "ok");
            if (ok && k->exited && WIFEXITED(k->status) && WEXITSTATUS(k->status) == 0) continue;
            job_bad = 1;
            printf("repeat %d (%s): rank %d status 0x%x:", rep,
                   destroy_first ? "destroy, then exit" : "exit without destroy", r, k->status);
            for (int i = 0; i < k->nrec; i++)
                printf(" [%s %s (%d): %s]", k->rec[i].tag,
                       ncclGetErrorString((ncclResult_t)k->rec[i].code), k->rec[i].code,
                       k->rec[i].text);
            printf("\n");
        }
        bad += job_bad;
        fh_free(&job);
    }
    printf("finish_check %s: %d ranks, %d of %d job(s) had a rank fail (%.1f s)\n", argv[1], nranks,
           bad, repeats, (fh_now_ns() - t0) / 1e9);
    return bad ? 1 : 0;
}
