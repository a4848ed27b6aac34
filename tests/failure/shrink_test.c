/*
 * shrink_check: recovering from a dead rank with ncclCommShrink(NCCL_SHRINK_ABORT).
 *
 *   shrink_check shm|socket [-n 3,4,5]
 *
 * Every rank loops over ncclAllReduce (1 MB of floats); rank K raises SIGKILL at a random
 * moment in the middle of it. Each survivor must see ncclRemoteError from the parent, shrink
 * the parent with NCCL_SHRINK_ABORT excluding K, and then use the new communicator: n - 1
 * ranks renumbered in parent order, a correct allreduce, a correct ring of send/recv. The
 * dead rank cannot answer anything, so the new communicator working at all shows that it
 * never talks to it. K is rank 0 on 3 ranks (the parent's first rank, which hosted its
 * bootstrap root) and rank n/2 otherwise.
 *
 * Forks its own ranks (fail_harness.h): zinc-run would stop the job when K dies.
 */
#include "fail_harness.h"
#include "nccl.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MS      1000000ll
#define NFLOATS (1 << 18)

struct params {
    int socket;
    int victim;
};

static int failures;

static atomic_int iterations;

static void *killer_main(void *arg)
{
    int rank = *(int *)arg;
    while (atomic_load(&iterations) < 3) fh_sleep_ms(1);
    srand((unsigned)getpid() ^ (unsigned)fh_now_ns());
    fh_sleep_ms(rand() % 30);
    fh_report(rank, "kill", 0, fh_now_ns(), 0, "SIGKILL");
    raise(SIGKILL);
    return NULL;
}

/* The new communicator: size, rank, an allreduce and a ring. Returns a complaint or NULL. */
static const char *use_new_comm(ncclComm_t nc, int rank, int nranks, int victim, char *msg,
                                size_t len)
{
    int cnt = -1, me = -1, want_me = rank - (rank > victim);
    if (ncclCommCount(nc, &cnt) != ncclSuccess || ncclCommUserRank(nc, &me) != ncclSuccess ||
        cnt != nranks - 1 || me != want_me) {
        snprintf(msg, len, "new communicator: rank %d of %d, expected %d of %d", me, cnt, want_me,
                 nranks - 1);
        return msg;
    }
    float *s = malloc(NFLOATS * sizeof(float)), *d = malloc(NFLOATS * sizeof(float));
    for (int i = 0; i < NFLOATS; i++) s[i] = (float)(rank + 1);
    float want = 0;
    for (int r = 0; r < nranks; r++)
        if (r != victim) want += (float)(r + 1);
    ncclResult_t r = ncclAllReduce(s, d, NFLOATS, ncclFloat, ncclSum, nc, NULL);
    const char *bad = NULL;
    if (r != ncclSuccess)
        snprintf(msg, len, "allreduce on the new communicator: %s", ncclGetLastError(nc));
    else if (d[0] != want || d[NFLOATS - 1] != want)
        snprintf(msg, len, "allreduce on the new communicator: %g, expected %g", d[0], want);
    else
        msg[0] = 0;
    if (!msg[0]) {
        int m = nranks - 1, next = (me + 1) % m, prev = (me + m - 1) % m;
        for (int i = 0; i < 1024; i++) s[i] = (float)(me * 10000 + i);
        r = ncclGroupStart();
        if (r == ncclSuccess) r = ncclSend(s, 1024, ncclFloat, next, nc, NULL);
        if (r == ncclSuccess) r = ncclRecv(d, 1024, ncclFloat, prev, nc, NULL);
        if (r == ncclSuccess) r = ncclGroupEnd();
        if (r != ncclSuccess)
            snprintf(msg, len, "ring on the new communicator: %s", ncclGetLastError(nc));
        else if (d[0] != (float)(prev * 10000) || d[1023] != (float)(prev * 10000 + 1023))
            snprintf(msg, len, "ring on the new communicator: wrong data from rank %d", prev);
    }
    if (!msg[0]) {
        /* Nobody destroys before every receive is done. */
        r = ncclAllReduce(s, d, 1, ncclFloat, ncclSum, nc, NULL);
        if (r != ncclSuccess) snprintf(msg, len, "final allreduce: %s", ncclGetLastError(nc));
    }
    if (msg[0]) bad = msg;
    free(s);
    free(d);
    return bad;
}

static void child(int rank, int nranks, void *arg)
{
    const struct params *p = arg;
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r == ncclSuccess) r = ncclCommInitRank(&comm, nranks, id, rank);
    if (r != ncclSuccess) {
        fh_report(rank, "init", r, fh_now_ns(), 0, ncclGetLastError(NULL));
        return;
    }
    float *s = malloc(NFLOATS * sizeof(float)), *d = malloc(NFLOATS * sizeof(float));
    for (int i = 0; i < NFLOATS; i++) s[i] = (float)(rank + 1);
    pthread_t t;
    if (rank == p->victim) pthread_create(&t, NULL, killer_main, &rank);
    float want = (float)nranks * (nranks + 1) / 2;
    int64_t end = fh_now_ns() + 30000 * MS;
    while (fh_now_ns() < end) {
        r = ncclAllReduce(s, d, NFLOATS, ncclFloat, ncclSum, comm, NULL);
        if (r != ncclSuccess) break;
        if (d[0] != want || d[NFLOATS - 1] != want)
            fh_report(rank, "wrong", 0, fh_now_ns(), 0,
                      "a successful ncclAllReduce gave wrong data");
        atomic_fetch_add(&iterations, 1);
    }
    free(s);
    free(d);
    if (r == ncclSuccess) {
        fh_report(rank, "ok", 0, fh_now_ns(), 0, "no error within 30 s");
        return;
    }
    fh_report(rank, "fail", r, fh_now_ns(), 0, ncclGetLastError(comm));
    int excl = p->victim;
    ncclComm_t nc = NULL;
    int64_t t0 = fh_now_ns();
    r = ncclCommShrink(comm, &excl, 1, &nc, NULL, NCCL_SHRINK_ABORT);
    int64_t t1 = fh_now_ns();
    fh_report(rank, "shrink", r, t1, t1 - t0, r != ncclSuccess ? ncclGetLastError(comm) : NULL);
    if (r == ncclSuccess) {
        char msg[FH_TEXT];
        const char *bad = use_new_comm(nc, rank, nranks, p->victim, msg, sizeof(msg));
        fh_report(rank, bad ? "wrong" : "newcomm", 0, fh_now_ns(), 0, bad);
        r = ncclCommDestroy(nc);
        fh_report(rank, "destroy_new", r, fh_now_ns(), 0, NULL);
    }
    /* The revoked parent is destroyed like any other. */
    r = ncclCommDestroy(comm);
    fh_report(rank, "destroy", r, fh_now_ns(), 0, NULL);
}

static void check(const struct params *p, const struct fh_job *job)
{
    int K = p->victim;
    FH_EXPECT(!job->timed_out, "the run did not finish within %d s (a hang)", job->wall_s);
    const struct fh_rank *v = &job->ranks[K];
    FH_EXPECT(fh_find(job, K, "kill") && WIFSIGNALED(v->status) && WTERMSIG(v->status) == SIGKILL,
              "rank %d was not killed in the middle of the loop (status 0x%x)", K, v->status);
    for (int r = 0; r < job->nranks; r++) {
        if (r == K) continue;
        const struct fh_rank *k = &job->ranks[r];
        FH_EXPECT(k->exited && WIFEXITED(k->status) && WEXITSTATUS(k->status) == 0,
                  "rank %d did not exit cleanly (status 0x%x)", r, k->status);
        const struct fh_record *f = fh_find(job, r, "fail"), *s = fh_find(job, r, "shrink");
        const struct fh_record *w = fh_find(job, r, "wrong");
        FH_EXPECT(f && f->code == ncclRemoteError,
                  "rank %d: the parent's allreduce returned %d, "
                  "not ncclRemoteError",
                  r, f ? f->code : -1);
        FH_EXPECT(s && s->code == ncclSuccess, "rank %d: ncclCommShrink returned %d: %s", r,
                  s ? s->code : -1, s ? s->text : "(never called)");
        FH_EXPECT(!s || s->dur_ns < 15000 * MS, "rank %d: ncclCommShrink took %.0f ms", r,
                  s ? s->dur_ns / 1e6 : 0);
        FH_EXPECT(!w, "rank %d: %s", r, w ? w->text : "");
        FH_EXPECT(fh_find(job, r, "newcomm"), "rank %d never used the new communicator", r);
        const struct fh_record *dn = fh_find(job, r, "destroy_new"),
                               *dp = fh_find(job, r, "destroy");
        FH_EXPECT(dn && dn->code == ncclSuccess && dp && dp->code == ncclSuccess,
                  "rank %d: destroying the communicators failed", r);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "shm") && strcmp(argv[1], "socket"))) {
        fprintf(stderr, "usage: shrink_check shm|socket [-n 3,4,5]\n");
        return 2;
    }
    struct params p = { .socket = !strcmp(argv[1], "socket") };
    const char *counts = argc == 4 && !strcmp(argv[2], "-n") ? argv[3] : "3,4,5";
    for (const char *c = counts; c && *c;) {
        int n = atoi(c);
        if (n >= 2) {
            p.victim = n == 3 ? 0 : n / 2;
            struct fh_job job = { .nranks = n,
                                  .transport = p.socket ? "socket" : "shm",
                                  .zinc_timeout_s = 20,
                                  .wall_s = 90,
                                  .child = child,
                                  .arg = &p };
            int before = failures;
            printf("shrink after a kill, %s, %d ranks, victim rank %d:\n", job.transport, n,
                   p.victim);
            fflush(stdout);
            if (fh_run(&job) != 0 && !job.timed_out) {
                printf("  FAIL: the harness could not run the job\n");
                return 1;
            }
            fh_print_ranks(&job);
            check(&p, &job);
            printf("  %s (%.1f s)\n", failures == before ? "PASS" : "FAIL",
                   (fh_now_ns() - job.start_ns) / 1e9);
            fflush(stdout);
            fh_free(&job);
        }
        c = strchr(c, ',');
        if (c) c++;
    }
    printf("shrink_check: %s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
