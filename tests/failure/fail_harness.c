/* The failure-test launcher (fail_harness.h). */
#include "fail_harness.h"
#include "nccl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int report_fd = -1;  /* child: write end of the report pipe */
static int release_fd = -1; /* child: read end of the release pipe */

int64_t fh_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void fh_sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void fh_report(int rank, const char *tag, int code, int64_t t_ns, int64_t dur_ns, const char *text)
{
    /* One write of less than PIPE_BUF bytes: lines of different ranks never interleave. */
    char line[FH_TEXT + 128];
    int n = snprintf(line, sizeof(line), "%d %.15s %d %lld %lld ", rank, tag, code, (long long)t_ns,
                     (long long)dur_ns);
    int m = snprintf(line + n, FH_TEXT, "%s", text && *text ? text : "-");
    if (m >= FH_TEXT) m = FH_TEXT - 1;
    for (int i = n; i < n + m; i++)
        if (line[i] == '\n' || line[i] == '\r') line[i] = ' ';
    line[n + m] = '\n';
    ssize_t w = write(report_fd, line, (size_t)(n + m + 1));
    (void)w;
}

void fh_wait_reparent(int rank)
{
    pid_t before = getppid();
    char text[64];
    snprintf(text, sizeof(text), "%d", (int)before);
    fh_report(rank, "reparent", 0, fh_now_ns(), 0, text);
    int64_t end = fh_now_ns() + 20000000000ll;
    while (getppid() == before && fh_now_ns() < end) fh_sleep_ms(1);
    snprintf(text, sizeof(text), "parent %d, was %d", (int)getppid(), (int)before);
    fh_report(rank, getppid() == before ? "stuck" : "reparented", 0, fh_now_ns(), 0, text);
}

_Noreturn void fh_done(int rank)
{
    fh_report(rank, "done", 0, fh_now_ns(), 0, NULL);
    /* Wait until the parent closes the release pipe (EOF), for at most 5 minutes. */
    struct pollfd p = { .fd = release_fd, .events = POLLIN };
    poll(&p, 1, 300000);
    exit(0);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        perror("fail_harness: free port");
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static void set_int(const char *name, int v)
{
    char s[32];
    snprintf(s, sizeof(s), "%d", v);
    setenv(name, s, 1);
}

/* In wrap_rank's child: fork the rank and wait for it, like timeout(1). Returns in the rank (a
 * forked child does not inherit the parent-death signal: killing the wrapper leaves it alive);
 * the wrapper itself exits with the rank's status. */
static void wrapper_main(int rank)
{
    pid_t pid = fork();
    if (pid == 0) return;
    char text[32];
    snprintf(text, sizeof(text), "%d", (int)pid);
    fh_report(rank, "wrapped", 0, fh_now_ns(), 0, pid > 0 ? text : "fork failed");
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    _exit(pid < 0 ? 1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

static _Noreturn void child_main(struct fh_job *job, int rank, const char *comm_id)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    set_int("ZINC_RANK", rank);
    set_int("ZINC_NRANKS", job->nranks);
    set_int("ZINC_LOCAL_RANK", rank);
    set_int("ZINC_LOCAL_NRANKS", job->nranks);
    set_int("ZINC_TIMEOUT", job->zinc_timeout_s);
    setenv("ZINC_COMM_ID", comm_id, 1);
    setenv("NCCL_COMM_ID", comm_id, 1);
    /* "socket": ranks talk through the net transport, over the net ZINC_NET names if set
     * (the IB net through the verbs emulation in fail_kill_ibemu), else the socket net. */
    if (job->transport && !strcmp(job->transport, "socket"))
        setenv("ZINC_TRANSPORT", getenv("ZINC_NET") ? "net" : "socket", 1);
    else
        unsetenv("ZINC_TRANSPORT");
    if (job->wrap && rank == job->wrap_rank) wrapper_main(rank);
    job->child(rank, job->nranks, job->arg);
    fh_done(rank);
}

static void parse_line(struct fh_job *job, char *line)
{
    int rank, code, off = 0;
    long long t, d;
    char tag[16];
    if (sscanf(line, "%d %15s %d %lld %lld %n", &rank, tag, &code, &t, &d, &off) != 5 || off == 0 ||
        rank < 0 || rank >= job->nranks) {
        fprintf(stderr, "fail_harness: unparsable report line: %s\n", line);
        return;
    }
    struct fh_rank *r = &job->ranks[rank];
    if (!strcmp(tag, "done")) r->done = 1;
    if (!strcmp(tag, "wrapped")) r->inner = (pid_t)atoi(line + off);
    if (r->nrec == FH_MAX_RECORDS) return;
    struct fh_record *rec = &r->rec[r->nrec++];
    snprintf(rec->tag, sizeof(rec->tag), "%s", tag);
    rec->code = code;
    rec->t_ns = t;
    rec->dur_ns = d;
    snprintf(rec->text, sizeof(rec->text), "%s", line + off);
}

static void read_reports(struct fh_job *job, int fd, char *buf, size_t *len, size_t cap)
{
    for (;;) {
        ssize_t n = read(fd, buf + *len, cap - 1 - *len);
        if (n <= 0) return;
        *len += (size_t)n;
        buf[*len] = 0;
        char *start = buf, *nl;
        while ((nl = strchr(start, '\n'))) {
            *nl = 0;
            parse_line(job, start);
            start = nl + 1;
        }
        *len = strlen(start);
        memmove(buf, start, *len + 1);
    }
}

/* Once wrap_rank asked for it: SIGKILL its wrapper and wait for the rank itself from now on. */
static void reparent(struct fh_job *job)
{
    struct fh_rank *k = &job->ranks[job->wrap_rank];
    if (k->exited || k->inner <= 0 || !fh_find(job, job->wrap_rank, "reparent")) return;
    kill(k->pid, SIGKILL);
    while (waitpid(k->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    k->pid = k->inner;
    job->reparent_ns = fh_now_ns();
}

int fh_run(struct fh_job *job)
{
    job->ranks = calloc((size_t)job->nranks, sizeof(*job->ranks));
    job->timed_out = 0;
    job->kill_ns = 0;
    job->reparent_ns = 0;
    /* The wrapped rank, orphaned, becomes our child: we can reap it and read its status. */
    if (job->wrap && prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        perror("fail_harness: PR_SET_CHILD_SUBREAPER");
        return -1;
    }
    int port = free_port();
    if (!job->ranks || port < 0) return -1;
    char comm_id[64];
    snprintf(comm_id, sizeof(comm_id), "127.0.0.1:%d", port);
    int rep[2], rel[2];
    if (pipe(rep) != 0 || pipe(rel) != 0) {
        perror("fail_harness: pipe");
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    job->start_ns = fh_now_ns();
    for (int r = 0; r < job->nranks; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fail_harness: fork");
            for (int k = 0; k < r; k++) kill(job->ranks[k].pid, SIGKILL);
            return -1;
        }
        if (pid == 0) {
            close(rep[0]);
            close(rel[1]);
            report_fd = rep[1];
            release_fd = rel[0];
            child_main(job, r, comm_id);
        }
        job->ranks[r].pid = pid;
    }
    close(rep[1]);
    close(rel[0]);
    fcntl(rep[0], F_SETFL, O_NONBLOCK);
    int released = 0, alive = job->nranks;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    int64_t deadline = job->start_ns + (int64_t)job->wall_s * 1000000000;
    while (alive > 0) {
        struct pollfd p = { .fd = rep[0], .events = POLLIN };
        poll(&p, 1, 20);
        read_reports(job, rep[0], buf, &len, cap);
        int64_t now = fh_now_ns();
        if (job->wrap && !job->reparent_ns) reparent(job);
        if (job->kill_after_ms > 0 && !job->kill_ns &&
            now - job->start_ns >= (int64_t)job->kill_after_ms * 1000000) {
            kill(job->ranks[job->kill_rank].pid, SIGKILL);
            job->kill_ns = fh_now_ns();
        }
        for (int r = 0; r < job->nranks; r++) {
            struct fh_rank *k = &job->ranks[r];
            if (k->exited) continue;
            if (waitpid(k->pid, &k->status, WNOHANG) == k->pid) {
                k->exited = 1;
                alive--;
            }
        }
        int waiting = 0;
        for (int r = 0; r < job->nranks; r++)
            if (!job->ranks[r].exited && !job->ranks[r].done) waiting++;
        if (!released && waiting == 0) {
            close(rel[1]);
            released = 1;
        }
        if (now > deadline && alive > 0 && job->timed_out) break; /* unkillable: give up */
        if (now > deadline && alive > 0) {
            fprintf(stderr, "fail_harness: the run passed its %d s deadline; killing the ranks\n",
                    job->wall_s);
            job->timed_out = 1;
            for (int r = 0; r < job->nranks; r++)
                if (!job->ranks[r].exited) {
                    kill(job->ranks[r].pid, SIGKILL);
                    if (job->ranks[r].inner > 0) kill(job->ranks[r].inner, SIGKILL);
                }
            deadline = now + 10 * 1000000000ll; /* let waitpid reap them */
        }
    }
    read_reports(job, rep[0], buf, &len, cap);
    free(buf);
    close(rep[0]);
    if (!released) close(rel[1]);
    return job->timed_out ? -1 : 0;
}

void fh_free(struct fh_job *job)
{
    free(job->ranks);
    job->ranks = NULL;
}

const struct fh_record *fh_find(const struct fh_job *job, int r, const char *tag)
{
    const struct fh_rank *k = &job->ranks[r];
    for (int i = 0; i < k->nrec; i++)
        if (!strcmp(k->rec[i].tag, tag)) return &k->rec[i];
    return NULL;
}

int fh_names_rank(const char *text, int k)
{
    char want[32];
    int n = snprintf(want, sizeof(want), "rank %d", k);
    for (const char *p = text; (p = strstr(p, want)); p += n)
        if (p[n] < '0' || p[n] > '9') return 1;
    /* A list: "missing rank(s): 2, 5" */
    const char *p = strstr(text, "rank(s): ");
    if (p) {
        p += strlen("rank(s): ");
        for (;;) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p) break;
            if (v == k) return 1;
            if (strncmp(end, ", ", 2)) break;
            p = end + 2;
        }
    }
    return 0;
}

void fh_print_ranks(const struct fh_job *job)
{
    for (int r = 0; r < job->nranks; r++) {
        const struct fh_rank *k = &job->ranks[r];
        char st[64];
        if (!k->exited)
            snprintf(st, sizeof(st), "not reaped");
        else if (WIFSIGNALED(k->status))
            snprintf(st, sizeof(st), "killed by signal %d", WTERMSIG(k->status));
        else
            snprintf(st, sizeof(st), "exit %d", WEXITSTATUS(k->status));
        printf("  rank %d (pid %d, %s):\n", r, (int)k->pid, st);
        for (int i = 0; i < k->nrec; i++) {
            const struct fh_record *c = &k->rec[i];
            if (!strcmp(c->tag, "done")) continue;
            printf("    %-11s at %7.1f ms", c->tag, (c->t_ns - job->start_ns) / 1e6);
            if (c->dur_ns) printf(" took %7.1f ms", c->dur_ns / 1e6);
            if (c->code) printf(" %s (%d)", ncclGetErrorString((ncclResult_t)c->code), c->code);
            if (strcmp(c->text, "-")) printf(": %s", c->text);
            printf("\n");
        }
    }
}
