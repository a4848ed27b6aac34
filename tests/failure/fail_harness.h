/*
 * A launcher for failure tests. zinc-run stops the whole job when one rank dies, which is the
 * right thing for a job and the wrong thing for a test in which a rank must die on purpose: this
 * harness forks the ranks itself, lets them die, and collects what each survivor saw.
 *
 * The parent picks a free port for ZINC_COMM_ID, forks nranks children with ZINC_RANK,
 * ZINC_NRANKS, ZINC_COMM_ID, ZINC_TIMEOUT (and ZINC_TRANSPORT) set, and waits with a deadline of
 * its own, after which it kills every child and fails. A child reports through a pipe shared by
 * all of them, one line per event (fh_report), and ends with fh_done(): it then stays alive,
 * without touching the library, until every rank has either reported done or exited, so that
 * an early finisher (rank 0 hosts the bootstrap root) does not change what the others see.
 */
#ifndef ZINC_TESTS_FAIL_HARNESS_H
#define ZINC_TESTS_FAIL_HARNESS_H

#include <stdint.h>
#include <sys/types.h>

#define FH_MAX_RECORDS 16
#define FH_TEXT        2048

/* One event a rank reported. */
struct fh_record {
    char tag[16]; /* "init", "fail", "ok", "kill", "abort_start", "abort", ... */
    int code;     /* an ncclResult_t, or 0 */
    int64_t t_ns; /* CLOCK_MONOTONIC, comparable between the processes of one host */
    int64_t dur_ns;
    char text[FH_TEXT];
};

struct fh_rank {
    pid_t pid;   /* the process the harness waits for: the rank, or its wrapper (wrap_rank) */
    pid_t inner; /* wrap_rank: the rank itself, under its wrapper */
    int status;  /* from waitpid, valid when exited */
    int exited;
    int done; /* reported fh_done */
    int nrec;
    struct fh_record rec[FH_MAX_RECORDS];
};

struct fh_job {
    int nranks;
    const char *transport; /* "shm" (the default) or "socket" */
    int zinc_timeout_s;    /* ZINC_TIMEOUT of the ranks */
    int wall_s;            /* the harness's own deadline for the whole run */
    /* Run by every child; returns only through fh_done (or dies). */
    void (*child)(int rank, int nranks, void *arg);
    void *arg;
    /* Optional: the parent SIGKILLs rank kill_rank kill_after_ms after forking it. */
    int kill_rank;
    int kill_after_ms;
    /* Optional (wrap set): rank wrap_rank runs under a wrapper process that only waits for it,
     * as under timeout(1) or a job script. When that rank calls fh_wait_reparent, the parent
     * SIGKILLs the wrapper, and the rank, re-parented to the parent (a child subreaper), goes on.
     */
    int wrap;
    int wrap_rank;
    /* Filled by fh_run. */
    int64_t start_ns;
    int64_t kill_ns;     /* when the parent sent the SIGKILL (0: never) */
    int64_t reparent_ns; /* when the parent killed wrap_rank's wrapper (0: never) */
    int timed_out;
    struct fh_rank *ranks;
};

/* Run the job. Returns 0 if it ran to the end (each rank exited), -1 on a harness failure or
 * when the deadline passed (timed_out is then set and every child was killed). */
int fh_run(struct fh_job *job);
void fh_free(struct fh_job *job);

/* In a child: report one event. text may be NULL; newlines in it are replaced. */
void fh_report(int rank, const char *tag, int code, int64_t t_ns, int64_t dur_ns, const char *text);
/* In the child of wrap_rank: report "reparent", then wait until the parent killed the wrapper
 * and this process has a new parent (at most 20 s); report "reparented" or "stuck". */
void fh_wait_reparent(int rank);
/* In a child: report "done", wait for the parent's release, and exit(0). */
_Noreturn void fh_done(int rank);

int64_t fh_now_ns(void);
void fh_sleep_ms(int ms);

/* The record of rank r with this tag, or NULL. */
const struct fh_record *fh_find(const struct fh_job *job, int r, const char *tag);
/* Whether text names rank k: "rank K" not followed by a digit, or a "rank(s): a, b" list
 * that holds k. */
int fh_names_rank(const char *text, int k);

/* Print what every rank of job reported, and how it ended (after a failed check). */
void fh_print_ranks(const struct fh_job *job);

/* The parent's checks of what the ranks reported: a failed one is printed and counted in the
 * program's `static int failures`. */
#define FH_EXPECT(cond, ...)     \
    do {                         \
        if (!(cond)) {           \
            printf("  FAIL: ");  \
            printf(__VA_ARGS__); \
            printf("\n");        \
            failures++;          \
        }                        \
    } while (0)

#endif
