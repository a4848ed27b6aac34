/*
 * zinc-run: start N ranks of a program on this host, the way a one-host mpirun would.
 *
 *   zinc-run -n N [--timeout S] [--tag-output] [--] PROGRAM ARGS...
 *
 * Each rank gets the environment zinc's bootstrap reads (src/bootstrap/launcher.h): ZINC_RANK,
 * ZINC_NRANKS, ZINC_LOCAL_RANK, ZINC_LOCAL_NRANKS, ZINC_COMM_ID and ZINC_JOB_SECRET (drawn here
 * unless preset: what the ranks prove to each other, src/bootstrap/bootstrap.h); plus NCCL_COMM_ID
 * and the torchrun names (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), so that programs written
 * for real NCCL or PyTorch run under it unchanged.
 *
 * The job succeeds or fails as a whole. The first rank that exits non-zero or dies of a signal is
 * reported, the others are stopped (SIGTERM to each rank's process group, SIGKILL after a grace
 * period) and zinc-run exits with that rank's status. --timeout stops a job that hangs. Ranks
 * die with zinc-run (PR_SET_PDEATHSIG), so a killed launcher leaves nothing behind.
 *
 * Everything happens in one poll() loop over a signalfd (SIGCHLD and the stop signals) and, with
 * --tag-output, the ranks' output pipes. A signalfd was preferred to a self-pipe because it needs
 * no signal handler and therefore no global state at all.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>

#define GRACE_SEC    3.0         /* between SIGTERM and SIGKILL when stopping ranks */
#define READ_SIZE    4096        /* first buffer size of a tagged stream */
#define LINE_CAP     (64 * 1024) /* longest line --tag-output keeps whole */
#define DRAIN_READS  256         /* bound on reads when emptying a pipe without waiting */
#define MAX_RANKS    (1 << 20)
#define EXIT_ERROR   1
#define EXIT_USAGE   2
#define EXIT_TIMEOUT 124
#define EXIT_NOEXEC  127

static const char usage_text[] =
    "usage: zinc-run -n N [--timeout S] [--tag-output] [--] PROGRAM [ARGS...]\n"
    "\n"
    "Start N copies of PROGRAM on this host as the ranks of one zinc (or NCCL) job.\n"
    "\n"
    "  -n, -np N           number of ranks (1 or more)\n"
    "  -t, --timeout S     stop the job and exit 124 if it runs longer than S seconds\n"
    "  --tag-output        prefix each output line with \"[RANK] \"\n"
    "  --bind cores|core|none\n"
    "                      pin rank r to the r-th of N equal blocks of the allowed CPUs\n"
    "                      (cores, the default when the ranks fit on them), to the r-th\n"
    "                      allowed CPU (core, as mpirun does), or not at all (none)\n"
    "  -h, --help          print this help\n"
    "\n"
    "Ranks get ZINC_RANK, ZINC_NRANKS, ZINC_LOCAL_RANK, ZINC_LOCAL_NRANKS, RANK, WORLD_SIZE,\n"
    "LOCAL_RANK, LOCAL_WORLD_SIZE, ZINC_COMM_ID = NCCL_COMM_ID = 127.0.0.1:<free port>\n"
    "(a preset ZINC_COMM_ID or NCCL_COMM_ID is kept) and ZINC_JOB_SECRET = 32 random bytes\n"
    "in hex (a preset one is kept). If a rank fails, the others are\n"
    "stopped (SIGTERM, SIGKILL 3 s later) and zinc-run exits with its status (128+signal).\n";

struct options {
    int nranks;
    double timeout; /* seconds; 0 means none */
    bool tag_output;
    int bind;    /* -1: cores if the ranks fit on the CPUs; 0: none; 1: core; 2: cores */
    char **argv; /* PROGRAM ARGS..., the NULL-terminated tail of main's argv */
};

/* One rank's stdout or stderr under --tag-output. */
struct stream {
    int fd;     /* read end of the rank's pipe; -1 when closed or not tagging */
    int out_fd; /* where the tagged lines go: 1 or 2 */
    int rank;
    char *buf; /* the unfinished line */
    size_t len, cap;
};

struct rank {
    pid_t pid;    /* also the id of the rank's process group; 0 if never started */
    bool running; /* started and not reaped yet */
    struct stream out, err;
};

struct job {
    struct options opt;
    struct rank *ranks;
    int nstarted, nrunning;
    pid_t self;
    int sigfd;
    sigset_t old_mask;        /* given back to the ranks */
    struct rlimit old_nofile; /* given back to the ranks */
    double deadline;          /* monotonic time of --timeout; 0 means none */
    bool stopping;            /* SIGTERM sent: exits from now on are effects, not causes */
    bool killed;              /* SIGKILL sent too */
    double kill_at;           /* when SIGKILL follows SIGTERM */
    int exit_code;            /* decided by whatever made the job stop */
    struct pollfd *pfds;      /* the signalfd, then every open stream */
    struct stream **pstreams; /* pstreams[i] is the stream behind pfds[i] */
};

/* ---- Command line ---------------------------------------------------------------------------- */

static _Noreturn void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("zinc-run: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nusage: zinc-run -n N [--timeout S] [--tag-output] [--] PROGRAM [ARGS...]\n", stderr);
    exit(EXIT_USAGE);
}

/* If argv[*i] is the option `name`, as "name VALUE" or "name=VALUE", return VALUE and leave *i
 * on the last word used; otherwise return NULL. */
static const char *option_value(int argc, char **argv, int *i, const char *name)
{
    size_t len = strlen(name);
    if (strncmp(argv[*i], name, len) != 0) return NULL;
    if (argv[*i][len] == '=') return argv[*i] + len + 1;
    if (argv[*i][len] != '\0') return NULL;
    if (*i + 1 >= argc) usage_error("option %s needs a value", name);
    return argv[++*i];
}

static int parse_nranks(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < 1 || v > MAX_RANKS)
        usage_error("-n needs a whole number of ranks from 1 to %d, not '%s'", MAX_RANKS, s);
    return (int)v;
}

static double parse_seconds(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    /* The negated comparison also rejects NaN. */
    if (end == s || *end || !(v > 0 && v <= 1e9))
        usage_error("--timeout needs a positive number of seconds, not '%s'", s);
    return v;
}

static void parse_options(int argc, char **argv, struct options *opt)
{
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i], *v;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0') break; /* PROGRAM starts here */
        if ((v = option_value(argc, argv, &i, "-n")) || (v = option_value(argc, argv, &i, "-np")))
            opt->nranks = parse_nranks(v);
        else if ((v = option_value(argc, argv, &i, "-t")) ||
                 (v = option_value(argc, argv, &i, "--timeout")))
            opt->timeout = parse_seconds(v);
        else if (strcmp(a, "--tag-output") == 0)
            opt->tag_output = true;
        else if ((v = option_value(argc, argv, &i, "--bind"))) {
            if (strcmp(v, "core") == 0)
                opt->bind = 1;
            else if (strcmp(v, "cores") == 0)
                opt->bind = 2;
            else if (strcmp(v, "none") == 0)
                opt->bind = 0;
            else
                usage_error("--bind takes cores, core or none, not '%s'", v);
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage_text, stdout);
            exit(0);
        } else
            usage_error("unknown option '%s'", a);
    }
    if (opt->nranks == 0) usage_error("missing -n N, the number of ranks");
    if (i >= argc) usage_error("missing PROGRAM to run");
    opt->argv = argv + i;
}

/* ---- Setup ----------------------------------------------------------------------------------- */

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A rank's pipe must never land on fd 0-2: dup2 of a descriptor onto itself would leave it
 * close-on-exec. That only happens when zinc-run was started with one of them closed. */
static int ensure_std_fds(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd) return -1;
    return 0;
}

/* --tag-output holds two pipe ends per rank, more than the usual soft limit of 1024 allows at a
 * few hundred ranks, so raise the soft limit toward the hard one. The ranks get the original
 * limit back: programs that still use select() break on descriptors above 1023. */
static int raise_fd_limit(struct job *job)
{
    if (getrlimit(RLIMIT_NOFILE, &job->old_nofile) != 0 || !job->opt.tag_output) return 0;
    rlim_t need = 2 * (rlim_t)job->opt.nranks + 64;
    if (job->old_nofile.rlim_cur >= need) return 0;
    struct rlimit lim = { need, job->old_nofile.rlim_max };
    if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < need) {
        fprintf(stderr,
                "zinc-run: --tag-output with %d ranks needs %llu file descriptors, but the hard "
                "limit is %llu (ulimit -Hn)\n",
                job->opt.nranks, (unsigned long long)need, (unsigned long long)lim.rlim_max);
        return -1;
    }
    if (setrlimit(RLIMIT_NOFILE, &lim) == 0) return 0;
    fprintf(stderr, "zinc-run: cannot raise the file descriptor limit: %s\n", strerror(errno));
    return -1;
}

/* SIGCHLD and the stop signals are blocked and read from a signalfd in the main loop. A signal
 * that was ignored when zinc-run started stays ignored (nohup, or a background job of a shell
 * without job control), as for any other program. */
static int setup_signals(struct job *job)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    /* An inherited SIG_IGN for SIGCHLD would make the kernel reap the ranks behind our back. */
    signal(SIGCHLD, SIG_DFL);
    if (sigprocmask(SIG_BLOCK, &set, &job->old_mask) == 0 &&
        (job->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) >= 0)
        return 0;
    fprintf(stderr, "zinc-run: cannot set up signal handling: %s\n", strerror(errno));
    return -1;
}

/* Ask the kernel for a free port by binding port 0. The port is released before the ranks start,
 * so another process could take it in between; the root rank's bind then fails with a clear
 * error. Passing the bound socket to rank 0 instead was rejected: every program run under
 * zinc-run, real NCCL included, binds the address itself. */
static int pick_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in addr = { .sin_family = AF_INET };
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    int port = -1;
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0 &&
        getsockname(fd, (struct sockaddr *)&addr, &len) == 0)
        port = ntohs(addr.sin_port);
    int saved = errno;
    close(fd);
    errno = saved;
    return port;
}

static void setenv_int(const char *name, int value)
{
    char buf[16];
    snprintf(buf, sizeof(buf), "%d", value);
    setenv(name, buf, 1);
}

/* The variables that are the same in every rank, set once in zinc-run's own environment. A preset
 * ZINC_COMM_ID (or, as with every zinc setting, its NCCL_ fallback) is kept, so that a job can
 * be pointed at a known address. */
static int set_job_env(const struct options *opt)
{
    const char *preset = getenv("ZINC_COMM_ID");
    if (!preset || !*preset) preset = getenv("NCCL_COMM_ID");
    char chosen[32];
    if (!preset || !*preset) {
        int port = pick_free_port();
        if (port < 0) {
            fprintf(stderr, "zinc-run: cannot find a free TCP port on 127.0.0.1: %s\n",
                    strerror(errno));
            return -1;
        }
        snprintf(chosen, sizeof(chosen), "127.0.0.1:%d", port);
        preset = chosen;
    }
    /* A copy: setenv may move the string that getenv returned. */
    char *id = strdup(preset);
    if (!id || setenv("ZINC_COMM_ID", id, 1) != 0 || setenv("NCCL_COMM_ID", id, 1) != 0) {
        fprintf(stderr, "zinc-run: cannot set ZINC_COMM_ID: %s\n", strerror(errno));
        free(id);
        return -1;
    }
    free(id);
    /* The ranks meet at a fixed address, whose magic anyone can compute: a secret drawn here
     * (kept if preset, e.g. one shared by several zinc-runs) is what they prove to each other. */
    const char *secret = getenv("ZINC_JOB_SECRET");
    if (!secret || !*secret) {
        uint8_t raw[32];
        char hex[2 * sizeof(raw) + 1];
        if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
            fprintf(stderr, "zinc-run: cannot draw a job secret: %s\n", strerror(errno));
            return -1;
        }
        for (size_t i = 0; i < sizeof(raw); i++) snprintf(hex + 2 * i, 3, "%02x", raw[i]);
        if (setenv("ZINC_JOB_SECRET", hex, 1) != 0) {
            fprintf(stderr, "zinc-run: cannot set ZINC_JOB_SECRET: %s\n", strerror(errno));
            return -1;
        }
    }
    setenv_int("ZINC_NRANKS", opt->nranks);
    setenv_int("ZINC_LOCAL_NRANKS", opt->nranks);
    setenv_int("WORLD_SIZE", opt->nranks);
    setenv_int("LOCAL_WORLD_SIZE", opt->nranks);
    return 0;
}

static int job_create(struct job *job)
{
    int n = job->opt.nranks;
    job->self = getpid();
    job->ranks = calloc((size_t)n, sizeof(*job->ranks));
    job->pfds = calloc(2 * (size_t)n + 1, sizeof(*job->pfds));
    job->pstreams = calloc(2 * (size_t)n + 1, sizeof(*job->pstreams));
    if (!job->ranks || !job->pfds || !job->pstreams) {
        fprintf(stderr, "zinc-run: out of memory for %d ranks\n", n);
        return -1;
    }
    for (int r = 0; r < n; r++) {
        job->ranks[r].out = (struct stream){ .fd = -1, .out_fd = 1, .rank = r };
        job->ranks[r].err = (struct stream){ .fd = -1, .out_fd = 2, .rank = r };
    }
    if (ensure_std_fds() != 0 || raise_fd_limit(job) != 0 || setup_signals(job) != 0) return -1;
    if (set_job_env(&job->opt) != 0) return -1;
    if (job->opt.timeout > 0) job->deadline = now_sec() + job->opt.timeout;
    return 0;
}

static void job_destroy(struct job *job)
{
    free(job->ranks);
    free(job->pfds);
    free(job->pstreams);
}

/* ---- Starting ranks -------------------------------------------------------------------------- */

/* Pin rank r to its own share of the CPUs zinc-run may use: --bind core gives it the r-th CPU,
 * --bind cores (the default when every rank gets at least one) the r-th of nranks equal blocks of
 * consecutive CPUs. Ranks that spin-wait on each other must not share a core by accident (the
 * scheduler may start two on one core and leave them there), and a rank's own threads -- its
 * proxy, which serves kernels within microseconds -- must not share one core with a main thread
 * that spins in cudaStreamSynchronize: there the proxy runs only when the scheduler's tick
 * (4 ms at HZ=250) takes the core from the spinner. */
static void bind_rank(const struct job *job, int r)
{
    cpu_set_t allowed, mine;
    if (job->opt.bind == 0 || sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
    int ncpu = CPU_COUNT(&allowed);
    if (job->opt.bind < 0 && job->opt.nranks > ncpu) return;
    int per = job->opt.bind == 1 ? 1 : ncpu / job->opt.nranks;
    if (per < 1) per = 1;
    int first = (r % (ncpu / per)) * per, seen = 0;
    CPU_ZERO(&mine);
    for (int c = 0; c < CPU_SETSIZE && seen < first + per; c++) {
        if (!CPU_ISSET(c, &allowed)) continue;
        if (seen++ >= first) CPU_SET(c, &mine);
    }
    sched_setaffinity(0, sizeof(mine), &mine);
}

/* Runs in the forked child; never returns. */
static _Noreturn void exec_rank(const struct job *job, int r, int out_w, int err_w)
{
    /* Its own process group, so that a stop signal reaches the rank and everything it started,
     * and a ^C at the terminal reaches only zinc-run, which then stops the ranks in order. */
    setpgid(0, 0);
    /* Die with zinc-run. If zinc-run died before the prctl took effect, the child has already
     * been re-parented, which getppid() shows. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != job->self) _exit(EXIT_ERROR);
    sigprocmask(SIG_SETMASK, &job->old_mask, NULL);
    setrlimit(RLIMIT_NOFILE, &job->old_nofile);
    if (out_w >= 0 && (dup2(out_w, STDOUT_FILENO) < 0 || dup2(err_w, STDERR_FILENO) < 0))
        _exit(EXIT_ERROR);
    bind_rank(job, r);
    setenv_int("ZINC_RANK", r);
    setenv_int("ZINC_LOCAL_RANK", r);
    setenv_int("RANK", r);
    setenv_int("LOCAL_RANK", r);
    execvp(job->opt.argv[0], job->opt.argv);
    dprintf(STDERR_FILENO, "zinc-run: cannot execute %s: %s\n", job->opt.argv[0], strerror(errno));
    _exit(EXIT_NOEXEC);
}

/* Both ends close-on-exec, so that no rank inherits another rank's pipes; the child's dup2 onto
 * 1 and 2 makes copies without the flag. Only zinc-run's read end is non-blocking. */
static int open_pipe(int fds[2])
{
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    if (fcntl(fds[0], F_SETFL, O_NONBLOCK) == 0) return 0;
    int saved = errno;
    close(fds[0]);
    close(fds[1]);
    fds[0] = fds[1] = -1;
    errno = saved;
    return -1;
}

/* Takes ownership of fd: it is closed if the stream cannot be set up. */
static int stream_open(struct stream *s, int fd)
{
    s->buf = malloc(READ_SIZE);
    if (!s->buf) {
        close(fd);
        return -1;
    }
    s->cap = READ_SIZE;
    s->fd = fd;
    return 0;
}

static int start_rank(struct job *job, int r)
{
    struct rank *rk = &job->ranks[r];
    /* out[0], out[1], err[0], err[1] */
    int p[4] = { -1, -1, -1, -1 };
    if (job->opt.tag_output && (open_pipe(p) != 0 || open_pipe(p + 2) != 0)) goto err_close_pipes;
    pid_t pid = fork();
    if (pid < 0) goto err_close_pipes;
    if (pid == 0) exec_rank(job, r, p[1], p[3]);
    /* Also in the parent, so that the group exists before the child gets to run. */
    setpgid(pid, pid);
    rk->pid = pid;
    rk->running = true;
    job->nstarted++;
    job->nrunning++;
    if (!job->opt.tag_output) return 0;
    close(p[1]);
    close(p[3]);
    int out_ok = stream_open(&rk->out, p[0]), err_ok = stream_open(&rk->err, p[2]);
    if (out_ok == 0 && err_ok == 0) return 0;
    /* The rank was started, so it is stopped with the others; its pipes are closed already. */
    fprintf(stderr, "zinc-run: out of memory for the output of rank %d\n", r);
    return -1;

err_close_pipes:
    fprintf(stderr, "zinc-run: cannot start rank %d: %s\n", r, strerror(errno));
    for (int i = 0; i < 4; i++)
        if (p[i] >= 0) close(p[i]);
    return -1;
}

/* ---- Stopping ranks -------------------------------------------------------------------------- */

/* Signal each rank's process group. Ranks already reaped are included: their group lives on as
 * long as something the rank started is still in it, and while it does the id cannot be reused
 * by an unrelated process. */
static void signal_groups(const struct job *job, int sig)
{
    for (int r = 0; r < job->nstarted; r++) killpg(job->ranks[r].pid, sig);
}

static void begin_stop(struct job *job, int exit_code)
{
    if (job->stopping) return;
    job->stopping = true;
    job->exit_code = exit_code;
    job->kill_at = now_sec() + GRACE_SEC;
    signal_groups(job, SIGTERM);
}

static void kill_now(struct job *job)
{
    job->killed = true;
    signal_groups(job, SIGKILL);
}

/* The ranks still running, as ranges ("0-3,7,9-12"), so that a list of 1024 stays readable.
 * The caller frees it. */
static char *running_ranks(const struct job *job)
{
    size_t cap = 12 * (size_t)job->nstarted + 1, len = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    s[0] = '\0';
    for (int r = 0; r < job->nstarted; r++) {
        if (!job->ranks[r].running) continue;
        int last = r;
        while (last + 1 < job->nstarted && job->ranks[last + 1].running) last++;
        len += (size_t)snprintf(s + len, cap - len, len ? ",%d" : "%d", r);
        if (last > r) len += (size_t)snprintf(s + len, cap - len, "-%d", last);
        r = last;
    }
    return s;
}

static void on_timeout(struct job *job)
{
    char *list = running_ranks(job);
    fprintf(stderr, "zinc-run: timeout after %g s; stopping %d ranks: %s\n", job->opt.timeout,
            job->nrunning, list ? list : "?");
    free(list);
    begin_stop(job, EXIT_TIMEOUT);
}

static void on_grace_over(struct job *job)
{
    char *list = running_ranks(job);
    fprintf(stderr, "zinc-run: ranks %s did not stop within %g s of SIGTERM; sending SIGKILL\n",
            list ? list : "?", GRACE_SEC);
    free(list);
    kill_now(job);
}

static void on_stop_signal(struct job *job, int sig)
{
    if (job->stopping) {
        /* A second ^C: the user does not want to wait out the grace period. */
        if (!job->killed) kill_now(job);
        return;
    }
    fprintf(stderr, "zinc-run: received signal %d (%s); stopping %d ranks\n", sig, strsignal(sig),
            job->nrunning);
    begin_stop(job, 128 + sig);
}

/* ---- Tagged output --------------------------------------------------------------------------- */

/* zinc-run is the only writer of its stdout and stderr, so writing each line whole is enough to
 * keep lines of different ranks from mixing. */
static void write_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0) {
            /* EAGAIN: a non-blocking stdout was inherited; retrying is all there is to do. */
            if (errno == EINTR || errno == EAGAIN) continue;
            return; /* Nowhere left to report it; the ranks keep running. */
        }
        for (; n > 0 && (size_t)w >= iov->iov_len; iov++, n--) w -= (ssize_t)iov->iov_len;
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
}

static void emit_line(const struct stream *s, const char *line, size_t len, bool add_newline)
{
    char prefix[16];
    int plen = snprintf(prefix, sizeof(prefix), "[%d] ", s->rank);
    struct iovec iov[3] = {
        { prefix, (size_t)plen },
        { (char *)line, len },
        { (char *)"\n", 1 },
    };
    write_all(s->out_fd, iov, add_newline ? 3 : 2);
}

/* Write out every complete line in the buffer and keep the unfinished rest. */
static void emit_complete_lines(struct stream *s, size_t scan_from)
{
    size_t start = 0;
    char *nl;
    while ((nl = memchr(s->buf + scan_from, '\n', s->len - scan_from))) {
        size_t end = (size_t)(nl - s->buf) + 1;
        emit_line(s, s->buf + start, end - start, false);
        start = scan_from = end;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
}

/* Make room for the next read. A line longer than LINE_CAP is cut and written in pieces: an
 * unbounded buffer would let one rank that never writes a newline take all the memory. */
static void stream_make_room(struct stream *s)
{
    if (s->len < s->cap) return;
    if (s->cap < LINE_CAP) {
        char *buf = realloc(s->buf, 2 * s->cap);
        if (buf) {
            s->buf = buf;
            s->cap *= 2;
            return;
        }
    }
    emit_line(s, s->buf, s->len, true);
    s->len = 0;
}

/* At EOF the last line is written even without its newline, which is added. */
static void stream_close(struct stream *s)
{
    if (s->len > 0) emit_line(s, s->buf, s->len, true);
    close(s->fd);
    free(s->buf);
    *s = (struct stream){ .fd = -1, .out_fd = s->out_fd, .rank = s->rank };
}

/* One read. Returns 1 if data came, 0 if none is there now, -1 if the stream has ended. */
static int stream_pump(struct stream *s)
{
    stream_make_room(s);
    ssize_t n = read(s->fd, s->buf + s->len, s->cap - s->len);
    if (n > 0) {
        size_t old = s->len;
        s->len += (size_t)n;
        emit_complete_lines(s, old);
        return 1;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    stream_close(s);
    return -1;
}

/* Read what is in the pipe now without waiting for more. The bound keeps a process that a rank
 * left behind, writing without pause, from holding zinc-run here. */
static void stream_drain(struct stream *s)
{
    for (int i = 0; i < DRAIN_READS && s->fd >= 0; i++)
        if (stream_pump(s) <= 0) return;
}

static void drain_rank(struct rank *rk)
{
    stream_drain(&rk->out);
    stream_drain(&rk->err);
}

/* Every rank has been reaped, so all they wrote is in the pipes already. Do not wait for EOF:
 * a process that a rank left behind may hold a pipe open forever. */
static void close_all_streams(struct job *job)
{
    for (int r = 0; r < job->nstarted; r++) {
        struct rank *rk = &job->ranks[r];
        drain_rank(rk);
        if (rk->out.fd >= 0) stream_close(&rk->out);
        if (rk->err.fd >= 0) stream_close(&rk->err);
    }
}

/* ---- Main loop ------------------------------------------------------------------------------- */

static void report_rank_end(int r, pid_t pid, int status)
{
    if (WIFEXITED(status)) {
        fprintf(stderr, "zinc-run: rank %d (pid %d) exited with status %d\n", r, (int)pid,
                WEXITSTATUS(status));
        return;
    }
    int sig = WTERMSIG(status);
    fprintf(stderr, "zinc-run: rank %d (pid %d) was killed by signal %d (%s)%s\n", r, (int)pid, sig,
            strsignal(sig), WCOREDUMP(status) ? ", core dumped" : "");
}

static void reap_children(struct job *job)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        int r = 0;
        while (r < job->nstarted && job->ranks[r].pid != pid) r++;
        if (r == job->nstarted) continue;
        struct rank *rk = &job->ranks[r];
        rk->running = false;
        job->nrunning--;
        /* Once stopping, ranks end because zinc-run stopped them: effects, not the cause. */
        if (job->stopping || (WIFEXITED(status) && WEXITSTATUS(status) == 0)) continue;
        /* Its last words (often the reason it failed) go out before the verdict. */
        drain_rank(rk);
        report_rank_end(r, pid, status);
        begin_stop(job, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
}

static void handle_signals(struct job *job)
{
    struct signalfd_siginfo si;
    while (read(job->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
        if (si.ssi_signo != SIGCHLD) on_stop_signal(job, (int)si.ssi_signo);
    /* SIGCHLDs coalesce, so reap everything that has ended, not one child per signal. */
    reap_children(job);
}

static int build_pollset(struct job *job)
{
    int n = 0;
    job->pfds[n++] = (struct pollfd){ .fd = job->sigfd, .events = POLLIN };
    for (int r = 0; r < job->nstarted; r++) {
        struct stream *two[2] = { &job->ranks[r].out, &job->ranks[r].err };
        for (int k = 0; k < 2; k++) {
            if (two[k]->fd < 0) continue;
            job->pstreams[n] = two[k];
            job->pfds[n++] = (struct pollfd){ .fd = two[k]->fd, .events = POLLIN };
        }
    }
    return n;
}

/* Milliseconds until the next deadline (timeout, or the end of the grace period); -1 if none. */
static int poll_timeout_ms(const struct job *job)
{
    double next = job->stopping ? (job->killed ? 0 : job->kill_at) : job->deadline;
    if (next <= 0) return -1;
    double ms = (next - now_sec()) * 1e3;
    if (ms <= 0) return 0;
    /* Round up, so that the loop does not wake just before the deadline and spin. */
    return ms >= INT_MAX ? INT_MAX : (int)ms + 1;
}

static void check_deadlines(struct job *job)
{
    double now = now_sec();
    if (!job->stopping && job->deadline > 0 && now >= job->deadline) on_timeout(job);
    if (job->stopping && !job->killed && job->nrunning > 0 && now >= job->kill_at)
        on_grace_over(job);
}

/* poll() itself failed, which leaves no way to follow the ranks: kill them and wait. */
static void abort_job(struct job *job)
{
    fprintf(stderr, "zinc-run: poll: %s; killing all ranks\n", strerror(errno));
    if (!job->stopping) job->exit_code = EXIT_ERROR;
    job->stopping = true;
    kill_now(job);
    while (job->nrunning > 0) {
        if (waitpid(-1, NULL, 0) > 0)
            job->nrunning--;
        else if (errno != EINTR)
            break;
    }
    job->nrunning = 0;
}

static void run_loop(struct job *job)
{
    while (job->nrunning > 0) {
        int n = build_pollset(job);
        int ready = poll(job->pfds, (nfds_t)n, poll_timeout_ms(job));
        if (ready < 0 && errno != EINTR) {
            abort_job(job);
            return;
        }
        for (int i = 1; ready > 0 && i < n; i++)
            if (job->pfds[i].revents) stream_pump(job->pstreams[i]);
        /* Signals last, so that output read in this round goes out before a verdict. */
        if (ready > 0 && job->pfds[0].revents) handle_signals(job);
        check_deadlines(job);
    }
}

static void start_ranks(struct job *job)
{
    for (int r = 0; r < job->opt.nranks; r++) {
        if (start_rank(job, r) == 0) continue;
        begin_stop(job, EXIT_ERROR);
        return;
    }
}

int main(int argc, char **argv)
{
    struct job job = { .sigfd = -1, .opt = { .bind = -1 } };
    parse_options(argc, argv, &job.opt);
    if (job_create(&job) != 0) {
        job_destroy(&job);
        return EXIT_ERROR;
    }
    start_ranks(&job);
    run_loop(&job);
    close_all_streams(&job);
    job_destroy(&job);
    return job.exit_code;
}
