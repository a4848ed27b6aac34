/*
 * fail_check: failures must become clear errors, never hangs (the "Reliability
 * contract"). Each run forks its own ranks (fail_harness.h), makes one of them fail in some
 * way, and checks what every survivor saw: the result code, how long it took, and whether
 * ncclGetLastError names the culprit and its host.
 *
 *   fail_check SCENARIO shm|socket [-n 3,4]
 *
 * Scenarios:
 *   kill          rank K is SIGKILLed in the middle of an ncclAllReduce loop (4 MB floats)
 *   exit          rank K calls _exit(0) in the middle of the same loop
 *   abort         rank 0 is blocked in ncclAllReduce (rank 1 joins 10 s late) and another of its
 *                 threads calls ncclCommAbort after 1 s
 *   abort_loop    40 times: init, rank 0 blocks in ncclAllReduce (nobody else calls it) and
 *                 aborts from a second thread after 20-80 ms; the others abort their own
 *   init_missing  rank K never calls init: the others' init fails within ZINC_TIMEOUT
 *   init_killed   rank K is SIGKILLed while the others wait in init (one of them joins late)
 *   mismatch      rank 0 calls ncclAllReduce with 100 elements, the others with 200
 *   reparent      rank 2 runs under a wrapper process (as under timeout(1)); mid-loop, while the
 *                 others wait for it in ncclAllReduce, the wrapper is SIGKILLed and rank 2 is
 *                 re-parented: nobody may report a death, and all ranks complete 20 calls with
 *                 the right data. Then rank K (the re-parented rank 2 with 4 ranks, rank 1 with
 *                 3) SIGKILLs itself before call 20: every survivor fails naming it, well
 *                 before ZINC_TIMEOUT
 *
 * Public API only. Prints one line per rank and event, then PASS or FAIL.
 */
#include "fail_harness.h"
#include "nccl.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MS 1000000ll

enum scenario {
    KILL,
    EXIT,
    ABORT,
    ABORT_LOOP,
    INIT_MISSING,
    INIT_KILLED,
    MISMATCH,
    REPARENT,
    NSCENARIOS
};
static const char *scenario_names[NSCENARIOS] = { "kill",       "exit",         "abort",
                                                  "abort_loop", "init_missing", "init_killed",
                                                  "mismatch",   "reparent" };

struct params {
    enum scenario sc;
    int socket;
    int victim;  /* rank K */
    int late;    /* init_killed: the rank that joins 3 s late */
    int wrapped; /* reparent: the rank under a wrapper */
};

static int failures;
static char host[256];

/* --- children ---------------------------------------------------------------------------- */

/* Init through the unique id of ZINC_COMM_ID; a failure is reported and ends the child. */
static ncclComm_t child_init_quiet(int rank, int nranks, int quiet)
{
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclGetUniqueId(&id);
    int64_t t0 = fh_now_ns();
    if (r == ncclSuccess) r = ncclCommInitRank(&comm, nranks, id, rank);
    int64_t t1 = fh_now_ns();
    if (!quiet || r != ncclSuccess)
        fh_report(rank, "init", r, t1, t1 - t0, r != ncclSuccess ? ncclGetLastError(NULL) : NULL);
    if (r != ncclSuccess) fh_done(rank);
    return comm;
}

static ncclComm_t child_init(int rank, int nranks)
{
    return child_init_quiet(rank, nranks, 0);
}

static void abort_comm(int rank, ncclComm_t comm)
{
    int64_t t0 = fh_now_ns();
    ncclResult_t r = ncclCommAbort(comm);
    int64_t t1 = fh_now_ns();
    fh_report(rank, "abort", r, t1, t1 - t0, NULL);
}

#define NFLOATS (1 << 20) /* 4 MB */

static atomic_int iterations;

struct killer {
    int rank;
    int exit_normally;
};

static void *killer_main(void *arg)
{
    struct killer *k = arg;
    while (atomic_load(&iterations) < 3) fh_sleep_ms(1);
    /* A random moment within the next few calls, so that it often lands mid-transfer. */
    srand((unsigned)getpid() ^ (unsigned)fh_now_ns());
    fh_sleep_ms(rand() % 40);
    fh_report(k->rank, "kill", 0, fh_now_ns(), 0, k->exit_normally ? "_exit(0)" : "SIGKILL");
    if (k->exit_normally) _exit(0);
    raise(SIGKILL);
    return NULL;
}

/* kill, exit: every rank loops over ncclAllReduce; the victim dies at a random moment. */
static void child_kill(int rank, int nranks, void *arg)
{
    const struct params *p = arg;
    ncclComm_t comm = child_init(rank, nranks);
    float *s = malloc(NFLOATS * sizeof(float)), *d = malloc(NFLOATS * sizeof(float));
    for (int i = 0; i < NFLOATS; i++) s[i] = (float)(rank + 1);
    struct killer k = { rank, p->sc == EXIT };
    pthread_t t;
    if (rank == p->victim) pthread_create(&t, NULL, killer_main, &k);
    float want = (float)nranks * (nranks + 1) / 2;
    int64_t end = fh_now_ns() + 60000 * MS;
    while (fh_now_ns() < end) {
        ncclResult_t r = ncclAllReduce(s, d, NFLOATS, ncclFloat, ncclSum, comm, NULL);
        if (r != ncclSuccess) {
            fh_report(rank, "fail", r, fh_now_ns(), 0, ncclGetLastError(comm));
            break;
        }
        if (d[0] != want || d[NFLOATS / 2] != want || d[NFLOATS - 1] != want)
            fh_report(rank, "wrong", 0, fh_now_ns(), 0,
                      "a successful ncclAllReduce gave wrong data");
        atomic_fetch_add(&iterations, 1);
    }
    if (fh_now_ns() >= end) fh_report(rank, "ok", 0, fh_now_ns(), 0, "no error within 60 s");
    abort_comm(rank, comm);
    free(s);
    free(d);
}

/* reparent: the calls made before the victim dies, and the one in which the wrapped rank is
 * re-parented (the others wait for it in that call meanwhile). */
#define REPARENT_CALLS 20
#define REPARENT_AT    3

static void child_reparent(int rank, int nranks, void *arg)
{
    const struct params *p = arg;
    ncclComm_t comm = child_init(rank, nranks);
    float *s = malloc(NFLOATS * sizeof(float)), *d = malloc(NFLOATS * sizeof(float));
    for (int i = 0; i < NFLOATS; i++) s[i] = (float)(rank + 1);
    float want = (float)nranks * (nranks + 1) / 2;
    for (int i = 0;; i++) {
        if (i == REPARENT_AT && rank == p->wrapped) {
            fh_wait_reparent(rank);
            /* The others wait for this rank meanwhile and look at its process once a
             * millisecond: let them look at the re-parented one for a while. */
            fh_sleep_ms(200);
        }
        if (i == REPARENT_CALLS) {
            char n[32];
            snprintf(n, sizeof(n), "%d calls", i);
            fh_report(rank, "ran", 0, fh_now_ns(), 0, n);
            if (rank == p->victim) {
                /* The others are in (or about to enter) call 20: only this death ends it. */
                fh_report(rank, "kill", 0, fh_now_ns(), 0, "SIGKILL");
                raise(SIGKILL);
            }
        }
        ncclResult_t r = ncclAllReduce(s, d, NFLOATS, ncclFloat, ncclSum, comm, NULL);
        if (r != ncclSuccess) {
            fh_report(rank, "fail", r, fh_now_ns(), 0, ncclGetLastError(comm));
            break;
        }
        if (d[0] != want || d[NFLOATS / 2] != want || d[NFLOATS - 1] != want)
            fh_report(rank, "wrong", 0, fh_now_ns(), 0,
                      "a successful ncclAllReduce gave wrong data");
        if (i > REPARENT_CALLS) {
            fh_report(rank, "ok", 0, fh_now_ns(), 0, "a call without the victim succeeded");
            break;
        }
    }
    abort_comm(rank, comm);
    free(s);
    free(d);
}

struct aborter {
    int rank;
    ncclComm_t comm;
    atomic_int entering;
};

static void *aborter_main(void *arg)
{
    struct aborter *a = arg;
    while (!atomic_load(&a->entering)) fh_sleep_ms(1);
    fh_sleep_ms(1000);
    fh_report(a->rank, "abort_start", 0, fh_now_ns(), 0, NULL);
    abort_comm(a->rank, a->comm);
    return NULL;
}

/* abort: rank 0 blocks in ncclAllReduce and aborts from a second thread; rank 1 joins the call
 * 10 s late; the other ranks call at once. */
static void child_abort(int rank, int nranks, void *arg)
{
    ncclComm_t comm = child_init(rank, nranks);
    size_t n = 1 << 16;
    float *s = calloc(n, sizeof(float)), *d = calloc(n, sizeof(float));
    struct aborter a = { .rank = rank, .comm = comm };
    pthread_t t;
    if (rank == 0) pthread_create(&t, NULL, aborter_main, &a);
    if (rank == 1) fh_sleep_ms(10000);
    atomic_store(&a.entering, 1);
    int64_t t0 = fh_now_ns();
    ncclResult_t r = ncclAllReduce(s, d, n, ncclFloat, ncclSum, comm, NULL);
    int64_t t1 = fh_now_ns();
    /* On rank 0 comm is being freed by the other thread: only the thread's own error. */
    fh_report(rank, "fail", r, t1, t1 - t0,
              r == ncclSuccess ? "returned ncclSuccess"
                               : ncclGetLastError(rank == 0 ? NULL : comm));
    if (rank == 0)
        pthread_join(t, NULL);
    else
        abort_comm(rank, comm);
    free(s);
    free(d);
}

#define ABORT_CYCLES 40

struct loop_aborter {
    ncclComm_t comm;
    int delay_ms;
    atomic_int entering;
    int64_t start_ns, dur_ns;
};

static void *loop_aborter_main(void *arg)
{
    struct loop_aborter *a = arg;
    while (!atomic_load(&a->entering)) fh_sleep_ms(1);
    fh_sleep_ms(a->delay_ms);
    a->start_ns = fh_now_ns();
    ncclCommAbort(a->comm);
    a->dur_ns = fh_now_ns() - a->start_ns;
    return NULL;
}

/* abort_loop: many aborts of a blocked call, to catch races between the returning call and the
 * communicator's teardown (the sanitizer build sees them). */
static void child_abort_loop(int rank, int nranks, void *arg)
{
    int64_t worst_ret = 0, worst_abort = 0;
    int successes = 0, first_code = 0;
    size_t n = 4096;
    float *s = calloc(n, sizeof(float)), *d = calloc(n, sizeof(float));
    if (rank == 0) {
        /* Both threads on one core: the aborting thread, waking from its wait, then preempts
         * the returning call at a random point instead of running beside it, which is what
         * exposes teardown racing with the call's last steps. */
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &one);
        sched_setaffinity(0, sizeof(one), &one);
    }
    for (int c = 0; c < ABORT_CYCLES; c++) {
        ncclComm_t comm = child_init_quiet(rank, nranks, 1);
        if (rank != 0) {
            fh_sleep_ms(150);
            ncclCommAbort(comm);
            continue;
        }
        struct loop_aborter a = { .comm = comm, .delay_ms = 20 + (c * 37) % 60 };
        pthread_t t;
        pthread_create(&t, NULL, loop_aborter_main, &a);
        atomic_store(&a.entering, 1);
        ncclResult_t r = ncclAllReduce(s, d, n, ncclFloat, ncclSum, comm, NULL);
        int64_t t1 = fh_now_ns();
        pthread_join(t, NULL);
        if (r == ncclSuccess) successes++;
        if (r != ncclSuccess && !first_code) first_code = r;
        if (t1 - a.start_ns > worst_ret) worst_ret = t1 - a.start_ns;
        if (a.dur_ns > worst_abort) worst_abort = a.dur_ns;
    }
    if (rank == 0) {
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "%d cycles, %d call(s) returned ncclSuccess, slowest abort %.1f ms", ABORT_CYCLES,
                 successes, worst_abort / 1e6);
        fh_report(rank, "loop", successes ? 0 : first_code, fh_now_ns(), worst_ret, msg);
        fh_report(rank, "abort", 0, fh_now_ns(), worst_abort, "the slowest ncclCommAbort");
    }
    free(s);
    free(d);
}

/* init_missing: the victim exits before init. init_killed: the victim is killed by the parent
 * while blocked in init, and p->late joins 3 s late. */
static void child_init_fail(int rank, int nranks, void *arg)
{
    const struct params *p = arg;
    if (p->sc == INIT_MISSING && rank == p->victim) exit(0);
    if (p->sc == INIT_KILLED && rank == p->late) fh_sleep_ms(3000);
    ncclComm_t comm = child_init(rank, nranks);
    /* Init succeeded, which it must not have: say so, and clean up. */
    fh_report(rank, "ok", 0, fh_now_ns(), 0, "init succeeded");
    ncclCommDestroy(comm);
}

#define GUARD 4096

/* mismatch: rank 0 reduces 100 floats, the others 200. Guard zones around every buffer catch
 * writes past the end. */
static void child_mismatch(int rank, int nranks, void *arg)
{
    ncclComm_t comm = child_init(rank, nranks);
    size_t n = rank == 0 ? 100 : 200;
    uint32_t *s = malloc((n + 2 * GUARD) * 4), *d = malloc((n + 2 * GUARD) * 4);
    for (size_t i = 0; i < n + 2 * GUARD; i++) {
        s[i] = 0x7f7f0000u + (uint32_t)i;
        d[i] = 0x7e7e0000u + (uint32_t)i;
    }
    for (size_t i = 0; i < n; i++) ((float *)s)[GUARD + i] = (float)(rank + 1);
    int64_t t0 = fh_now_ns();
    ncclResult_t r = ncclAllReduce(s + GUARD, d + GUARD, n, ncclFloat, ncclSum, comm, NULL);
    int64_t t1 = fh_now_ns();
    fh_report(rank, r == ncclSuccess ? "ok" : "fail", r, t1, t1 - t0,
              r == ncclSuccess ? "returned ncclSuccess" : ncclGetLastError(comm));
    for (size_t i = 0; i < n + 2 * GUARD; i++) {
        int in_data = i >= GUARD && i < GUARD + n;
        if (!in_data && d[i] != 0x7e7e0000u + (uint32_t)i) {
            char msg[128];
            snprintf(msg, sizeof(msg),
                     "recvbuff guard word %zd (relative to the buffer) was written",
                     (ssize_t)i - GUARD);
            fh_report(rank, "corrupt", 0, fh_now_ns(), 0, msg);
            break;
        }
        if (in_data ? ((float *)s)[i] != (float)(rank + 1) : s[i] != 0x7f7f0000u + (uint32_t)i) {
            fh_report(rank, "corrupt", 0, fh_now_ns(), 0, "sendbuff was written");
            break;
        }
    }
    abort_comm(rank, comm);
    free(s);
    free(d);
}

/* --- checks in the parent ------------------------------------------------------------------ */

static void expect_clean_exit(const struct fh_job *job, int r)
{
    const struct fh_rank *k = &job->ranks[r];
    FH_EXPECT(k->exited && WIFEXITED(k->status) && WEXITSTATUS(k->status) == 0,
              "rank %d did not exit cleanly (status 0x%x): a crash, or a sanitizer report", r,
              k->status);
    FH_EXPECT(!fh_find(job, r, "wrong"), "rank %d got wrong data from a call that succeeded", r);
}

/* A survivor's failing call: its code, when it returned, and whom it blames. */
static void expect_failure(const struct fh_job *job, int r, const char *tag, int want_code,
                           int64_t since_ns, double max_ms, const char *since_what, int blame,
                           int need_host)
{
    const struct fh_record *f = fh_find(job, r, tag);
    if (!f) {
        FH_EXPECT(0, "rank %d reported no failing call (\"%s\")", r, tag);
        return;
    }
    if (want_code >= 0)
        FH_EXPECT(f->code == want_code, "rank %d: %s returned %d (%s), want %s", r, tag, f->code,
                  ncclGetErrorString((ncclResult_t)f->code),
                  ncclGetErrorString((ncclResult_t)want_code));
    else
        FH_EXPECT(f->code != ncclSuccess, "rank %d: %s returned ncclSuccess", r, tag);
    double ms = (f->t_ns - since_ns) / 1e6;
    FH_EXPECT(ms < max_ms, "rank %d: %s returned %.0f ms after %s (limit %.0f ms)", r, tag, ms,
              since_what, max_ms);
    if (blame >= 0) {
        FH_EXPECT(fh_names_rank(f->text, blame), "rank %d: the error does not name rank %d: \"%s\"",
                  r, blame, f->text);
        FH_EXPECT(!need_host || strstr(f->text, host) != NULL,
                  "rank %d: the error does not name the host \"%s\": \"%s\"", r, host, f->text);
    }
}

static void check_abort_time(const struct fh_job *job, int r, double max_ms)
{
    const struct fh_record *a = fh_find(job, r, "abort");
    if (!a) return;
    FH_EXPECT(a->code == ncclSuccess, "rank %d: ncclCommAbort returned %d", r, a->code);
    FH_EXPECT(a->dur_ns / 1e6 < max_ms, "rank %d: ncclCommAbort took %.0f ms (limit %.0f ms)", r,
              a->dur_ns / 1e6, max_ms);
}

/* How soon a failure must be seen when it is seen directly (peer watch, abort word, closed
 * socket): milliseconds on an idle machine, but a loaded 2-core CI machine can keep a rank off
 * its core for a second or more. Half of ZINC_TIMEOUT still tells that from waiting out the
 * deadline, and does not depend on who gets the CPU first. */
static double prompt_ms(const struct fh_job *job)
{
    return job->zinc_timeout_s * 500.0;
}

static void check_reparent(const struct params *p, const struct fh_job *job)
{
    int n = job->nranks, K = p->victim, W = p->wrapped;
    FH_EXPECT(job->reparent_ns != 0, "the wrapper of rank %d was never killed", W);
    FH_EXPECT(fh_find(job, W, "reparented") != NULL, "rank %d was not re-parented", W);
    const struct fh_record *k = fh_find(job, K, "kill");
    FH_EXPECT(k != NULL, "rank %d never reached its kill point", K);
    if (!k) return;
    FH_EXPECT(WIFSIGNALED(job->ranks[K].status) && WTERMSIG(job->ranks[K].status) == SIGKILL,
              "the victim's status is 0x%x, not SIGKILL", job->ranks[K].status);
    for (int r = 0; r < n; r++) {
        FH_EXPECT(fh_find(job, r, "ran") != NULL,
                  "rank %d did not complete its %d calls (a false death, or a hang)", r,
                  REPARENT_CALLS);
        if (r == K) continue;
        expect_clean_exit(job, r);
        expect_failure(job, r, "fail", ncclRemoteError, k->t_ns, prompt_ms(job), "the kill", K, 1);
        check_abort_time(job, r, prompt_ms(job));
    }
}

static void check(const struct params *p, const struct fh_job *job)
{
    int n = job->nranks, K = p->victim, zt_ms = job->zinc_timeout_s * 1000;
    /* "Within ZINC_TIMEOUT": the deadline plus the polling slack of a loaded 2-core machine. */
    double within_timeout = zt_ms + 3000.0;
    FH_EXPECT(!job->timed_out, "the run did not finish within %d s (a hang)", job->wall_s);
    switch (p->sc) {
    case KILL:
    case EXIT: {
        const struct fh_record *k = fh_find(job, K, "kill");
        FH_EXPECT(k != NULL, "rank %d never reached its kill point", K);
        if (!k) break;
        const struct fh_rank *v = &job->ranks[K];
        if (p->sc == KILL)
            FH_EXPECT(WIFSIGNALED(v->status) && WTERMSIG(v->status) == SIGKILL,
                      "the victim's status is 0x%x, not SIGKILL", v->status);
        else
            FH_EXPECT(WIFEXITED(v->status) && WEXITSTATUS(v->status) == 0,
                      "the victim's status is 0x%x, not exit 0", v->status);
        /* Shared memory watches the peers' pids: detection is fast. */
        double limit = p->socket ? within_timeout : prompt_ms(job);
        for (int r = 0; r < n; r++) {
            if (r == K) continue;
            expect_clean_exit(job, r);
            expect_failure(job, r, "fail", ncclRemoteError, k->t_ns, limit, "the kill", K, 1);
            check_abort_time(job, r, prompt_ms(job));
        }
        break;
    }
    case ABORT: {
        const struct fh_record *a = fh_find(job, 0, "abort_start");
        FH_EXPECT(a != NULL, "rank 0 never called ncclCommAbort");
        if (!a) break;
        for (int r = 0; r < n; r++) expect_clean_exit(job, r);
        expect_failure(job, 0, "fail", -1, a->t_ns, prompt_ms(job), "ncclCommAbort was called", -1,
                       0);
        check_abort_time(job, 0, prompt_ms(job));
        for (int r = 1; r < n; r++) {
            const struct fh_record *f = fh_find(job, r, "fail");
            /* Rank 1 calls 10 s late: measure from its call; the others from the abort. */
            int64_t since = r == 1 && f ? f->t_ns - f->dur_ns : a->t_ns;
            expect_failure(job, r, "fail", -1, since, p->socket ? within_timeout : prompt_ms(job),
                           r == 1 ? "its call" : "the abort", p->socket ? -1 : 0, 0);
            check_abort_time(job, r, prompt_ms(job));
        }
        break;
    }
    case ABORT_LOOP: {
        for (int r = 0; r < n; r++) expect_clean_exit(job, r);
        const struct fh_record *l = fh_find(job, 0, "loop");
        FH_EXPECT(l != NULL, "rank 0 did not finish its %d cycles", ABORT_CYCLES);
        if (!l) break;
        FH_EXPECT(l->code != ncclSuccess,
                  "rank 0: blocked calls returned ncclSuccess after ncclCommAbort: %s", l->text);
        FH_EXPECT(l->dur_ns / 1e6 < prompt_ms(job),
                  "rank 0: a blocked call returned %.0f ms after the abort", l->dur_ns / 1e6);
        check_abort_time(job, 0, prompt_ms(job));
        break;
    }
    case INIT_MISSING:
        for (int r = 0; r < n; r++) {
            if (r == K) continue;
            expect_clean_exit(job, r);
            FH_EXPECT(!fh_find(job, r, "ok"), "rank %d: init succeeded without rank %d", r, K);
            expect_failure(job, r, "init", ncclRemoteError, job->start_ns, within_timeout,
                           "the start", -1, 0);
            const struct fh_record *f = fh_find(job, r, "init");
            if (f)
                FH_EXPECT(fh_names_rank(f->text, K) && strstr(f->text, "missing"),
                          "rank %d: the error does not name rank %d as missing: \"%s\"", r, K,
                          f->text);
        }
        break;
    case INIT_KILLED:
        FH_EXPECT(job->kill_ns != 0, "the parent never killed rank %d", K);
        for (int r = 0; r < n; r++) {
            if (r == K) continue;
            expect_clean_exit(job, r);
            FH_EXPECT(!fh_find(job, r, "ok"), "rank %d: init succeeded without rank %d", r, K);
            const struct fh_record *f = fh_find(job, r, "init");
            /* Well before ZINC_TIMEOUT (30 s); the late rank from its own start. */
            expect_failure(job, r, "init", ncclRemoteError,
                           r == p->late && f ? f->t_ns - f->dur_ns : job->kill_ns, 10000,
                           r == p->late ? "its init call" : "the kill", -1, 0);
            if (f)
                FH_EXPECT(fh_names_rank(f->text, K),
                          "rank %d: the error does not name rank %d: \"%s\"", r, K, f->text);
        }
        break;
    case MISMATCH:
        for (int r = 0; r < n; r++) {
            expect_clean_exit(job, r);
            const struct fh_record *c = fh_find(job, r, "corrupt");
            FH_EXPECT(!c, "rank %d: memory corrupted: %s", r, c ? c->text : "");
            FH_EXPECT(!fh_find(job, r, "ok"), "rank %d: the mismatched ncclAllReduce succeeded", r);
            const struct fh_record *f = fh_find(job, r, "fail");
            if (f)
                FH_EXPECT(f->code == ncclInvalidUsage || f->code == ncclRemoteError,
                          "rank %d: returned %s, want ncclInvalidUsage or ncclRemoteError", r,
                          ncclGetErrorString((ncclResult_t)f->code));
            if (f)
                FH_EXPECT(f->dur_ns / 1e6 < within_timeout, "rank %d: failed only after %.0f ms", r,
                          f->dur_ns / 1e6);
        }
        break;
    case REPARENT: check_reparent(p, job); break;
    default: break;
    }
}

static int run_one(struct params *p, int nranks)
{
    struct fh_job job = { .nranks = nranks,
                          .transport = p->socket ? "socket" : "shm",
                          .zinc_timeout_s = 20,
                          .wall_s = 60,
                          .arg = p };
    p->victim = nranks >= 4 ? 2 : 1;
    p->late = nranks - 1;
    switch (p->sc) {
    case KILL:
    case EXIT: job.child = child_kill; break;
    case ABORT: job.child = child_abort; break;
    case ABORT_LOOP: job.child = child_abort_loop; break;
    case INIT_MISSING:
        job.child = child_init_fail;
        job.zinc_timeout_s = 5;
        job.wall_s = 40;
        p->victim = nranks - 1;
        break;
    case INIT_KILLED:
        job.child = child_init_fail;
        job.zinc_timeout_s = 30;
        job.wall_s = 50;
        p->victim = 1;
        job.kill_rank = 1;
        job.kill_after_ms = 1500;
        break;
    case REPARENT:
        job.child = child_reparent;
        job.wrap = 1;
        job.wrap_rank = p->wrapped = 2;
        break;
    case MISMATCH:
        job.child = child_mismatch;
        job.zinc_timeout_s = 10;
        job.wall_s = 40;
        break;
    default: return 1;
    }
    int before = failures;
    char victim[32] = "";
    if (p->sc == KILL || p->sc == EXIT || p->sc == INIT_MISSING || p->sc == INIT_KILLED ||
        p->sc == REPARENT)
        snprintf(victim, sizeof(victim), ", victim rank %d", p->victim);
    printf("%s, %s, %d ranks%s, ZINC_TIMEOUT=%d:\n", scenario_names[p->sc], job.transport, nranks,
           victim, job.zinc_timeout_s);
    fflush(stdout);
    if (fh_run(&job) != 0 && !job.timed_out) {
        printf("  FAIL: the harness could not run the job\n");
        return 1;
    }
    fh_print_ranks(&job);
    check(p, &job);
    printf("  %s (%.1f s)\n", failures == before ? "PASS" : "FAIL",
           (fh_now_ns() - job.start_ns) / 1e9);
    fflush(stdout);
    fh_free(&job);
    return failures != before;
}

static void usage(void)
{
    fprintf(
        stderr,
        "usage: fail_check kill|exit|abort|abort_loop|init_missing|init_killed|mismatch|reparent "
        "shm|socket [-n 3,4]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 3) usage();
    struct params p = { .sc = NSCENARIOS };
    for (int i = 0; i < NSCENARIOS; i++)
        if (!strcmp(argv[1], scenario_names[i])) p.sc = (enum scenario)i;
    if (p.sc == NSCENARIOS) usage();
    if (strcmp(argv[2], "shm") && strcmp(argv[2], "socket")) usage();
    p.socket = !strcmp(argv[2], "socket");
    const char *counts = "3,4";
    if (argc == 5 && !strcmp(argv[3], "-n"))
        counts = argv[4];
    else if (argc != 3)
        usage();
    signal(SIGPIPE, SIG_IGN);
    gethostname(host, sizeof(host) - 1);
    int bad = 0, runs = 0;
    for (const char *c = counts; *c;) {
        char *end;
        long n = strtol(c, &end, 10);
        if (end == c || n < 2 || n > 64) usage();
        bad += run_one(&p, (int)n);
        runs++;
        c = *end == ',' ? end + 1 : end;
    }
    printf("fail_check %s %s: %d of %d run(s) failed\n", argv[1], argv[2], bad, runs);
    return bad ? 1 : 0;
}
