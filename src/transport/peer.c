#include "peer.h"
#include "util/err.h"
#include "util/param.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

uint64_t zn_host_hash_rank(int rank)
{
    const char *id = zn_params()->hostid;
    if (rank < 0 || !strchr(id, ',')) return zn_host_hash();
    int count = 1;
    for (const char *p = id; *p; p++) count += *p == ',';
    const char *item = id;
    for (int k = rank % count; k > 0; k--) item = strchr(item, ',') + 1;
    size_t len = strcspn(item, ",");
    return fnv(0xcbf29ce484222325ull, item, len);
}

uint64_t zn_host_hash(void)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const char *id = zn_params()->hostid;
    if (*id) return fnv(h, id, strlen(id));
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    h = fnv(h, host, strlen(host));
    char boot[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof(boot), f)) boot[0] = 0;
        fclose(f);
    }
    h = fnv(h, boot, strlen(boot));
    struct stat st;
    if (stat("/proc/self/ns/net", &st) == 0) h = fnv(h, &st.st_ino, sizeof(st.st_ino));
    return h;
}

/* What /proc/PID/stat says about a process: its state letter and its start time in clock ticks
 * since boot (field 22). Returns 0 if the process is not there (or the file is unreadable).
 * Thread-safe: non-blocking inits run this on threads of their own. */
static int proc_stat(int pid, char *state, uint64_t *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    /* The command name may contain spaces and parentheses: skip to the last ')'. */
    const char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || !p[2]) return 0;
    *state = p[2];
    /* After ')': the state is field 3, the start time field 22. */
    p += 2;
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p) return 0;
        p++;
    }
    *start = strtoull(p, NULL, 10);
    return 1;
}

static uint64_t proc_start_time(int pid)
{
    char state;
    uint64_t start = 0;
    return proc_stat(pid, &state, &start) ? start : 0;
}

ncclResult_t zn_peer_info_local(struct zn_peer_info *info)
{
    memset(info, 0, sizeof(*info));
    info->pid = (int32_t)getpid();
    info->host_hash = zn_host_hash();
    info->pid_start = proc_start_time(info->pid);
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) == 0) info->pid_ns = (uint64_t)st.st_ino;
    info->cuda_dev = -1;
    if (getrandom(&info->nonce, sizeof(info->nonce), 0) != sizeof(info->nonce))
        info->nonce = (uint64_t)info->pid_start * 0x9e3779b97f4a7c15ull ^ (uint64_t)info->pid;
    if (gethostname(info->hostname, sizeof(info->hostname) - 1) != 0)
        snprintf(info->hostname, sizeof(info->hostname), "unknown");
    return ncclSuccess;
}

/* Opening the pidfds is put off to the first question about each peer: at init every rank
 * would otherwise open one per local peer and read its /proc entry (n^2 system calls on a host,
 * seconds with hundreds of ranks), while a rank only ever asks about the few it waits for. */
enum { WATCH_NONE = -1, WATCH_UNOPENED = -2, WATCH_DEAD = -3 };

struct watched {
    atomic_int pidfd; /* an open pidfd, or a WATCH_ state */
    int pid;
    uint64_t start; /* the peer's reported start time (0: unknown) */
};

struct zn_peer_watch {
    int n;
    uint64_t my_ns;
    struct watched *w;
};

ncclResult_t zn_peer_watch_create(const struct zn_tctx *ctx, struct zn_peer_watch **out)
{
    struct zn_peer_watch *w = calloc(1, sizeof(*w));
    if (!w || !(w->w = malloc((size_t)ctx->nranks * sizeof(*w->w)))) {
        free(w);
        return zn_error(ncclSystemError, ZN_INIT, "out of memory");
    }
    w->n = ctx->nranks;
    w->my_ns = ctx->peers[ctx->rank].pid_ns;
    uint64_t me = ctx->peers[ctx->rank].host_hash;
    for (int r = 0; r < ctx->nranks; r++) {
        const struct zn_peer_info *p = &ctx->peers[r];
        /* A peer in another pid namespace (containers that share the host's network and
         * /dev/shm) shows a pid that names some other process here, maybe a launcher that
         * started in the same clock tick: watching it would report the peer dead when that
         * process exits. */
        int watchable = r != ctx->rank && p->host_hash == me && p->pid > 0 && p->pid_ns == w->my_ns;
        w->w[r].pid = p->pid;
        w->w[r].start = p->pid_start;
        atomic_init(&w->w[r].pidfd, watchable ? WATCH_UNOPENED : WATCH_NONE);
    }
    *out = w;
    return ncclSuccess;
}

/* First question about a peer: open its pidfd. The peer was alive when it sent its info and
 * shares our pid namespace: a pid that is gone, or that now belongs to a process started at
 * another time, means that it exited. Where the namespace is unknown (no /proc), such a peer is
 * only not watched. */
static int open_watch(struct zn_peer_watch *w, int peer)
{
    struct watched *x = &w->w[peer];
    int state;
    int fd = (int)syscall(SYS_pidfd_open, x->pid, 0);
    if (fd < 0) {
        state = errno == ESRCH && w->my_ns ? WATCH_DEAD : WATCH_NONE;
    } else {
        uint64_t start = x->start ? proc_start_time(x->pid) : 0;
        state = !start || start == x->start ? fd : w->my_ns ? WATCH_DEAD : WATCH_NONE;
        if (state != fd) close(fd);
    }
    int expected = WATCH_UNOPENED;
    if (!atomic_compare_exchange_strong(&x->pidfd, &expected, state)) {
        /* Another thread opened it first. */
        if (state >= 0) close(state);
        return expected;
    }
    return state;
}

#define PID_UNKNOWN INT_MIN

/* The pid that /proc/self/fdinfo gives for fd if it is a pidfd: the process's pid, -1 once it
 * was reaped; 0 if fd is not a pidfd (any more); PID_UNKNOWN without a readable /proc. */
static int pidfd_pid(int fd)
{
    char path[64], line[128];
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    FILE *f = fopen(path, "r");
    if (!f) return errno == ENOENT && access("/proc/self/fdinfo", F_OK) == 0 ? 0 : PID_UNKNOWN;
    int pid = 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "Pid: %d", &pid) == 1) break;
    fclose(f);
    return pid;
}

/* The watch of one peer cannot be trusted any more: stop using it. Its descriptor is not ours
 * to close (something else closed it, and the number may have been reused). */
static void drop_watch(struct watched *x, int peer, int fd, const char *why)
{
    int expected = fd;
    if (!atomic_compare_exchange_strong(&x->pidfd, &expected, WATCH_NONE)) return;
    zn_warn(ZN_INIT,
            "stopped watching rank %d (pid %d) through pidfd %d: %s; its exit is now seen "
            "through closed connections and ZINC_TIMEOUT only",
            peer, x->pid, fd, why);
}

int zn_peer_dead(struct zn_peer_watch *w, int peer)
{
    if (!w || peer < 0 || peer >= w->n) return 0;
    struct watched *x = &w->w[peer];
    int fd = atomic_load(&x->pidfd);
    if (fd == WATCH_UNOPENED) fd = open_watch(w, peer);
    if (fd == WATCH_DEAD) return 1;
    if (fd < 0) return 0;
    struct pollfd p = { .fd = fd, .events = POLLIN };
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & POLLNVAL) {
        drop_watch(x, peer, fd, "the descriptor was closed elsewhere");
        return 0;
    }
    /* A pidfd is readable once its process exited; anything else (POLLERR, say) proves
     * nothing. */
    if (!(p.revents & POLLIN)) return 0;
    /* Only a pidfd of that very process may condemn it: a descriptor closed by mistake elsewhere
     * and reused for a socket or a pipe would read as "exited" too. */
    int fdpid = pidfd_pid(fd);
    if (fdpid != x->pid && fdpid != -1 && fdpid != PID_UNKNOWN) {
        drop_watch(x, peer, fd, "the descriptor no longer refers to that process");
        return 0;
    }
    /* And the process table must agree: a process that is still there, started when the peer
     * said it did, and not a zombie, is alive whatever the descriptor said. */
    char state;
    uint64_t start;
    if (fdpid == x->pid && proc_stat(x->pid, &state, &start) && (!x->start || start == x->start) &&
        state != 'Z' && state != 'X' && state != 'x') {
        drop_watch(x, peer, fd, "it reported an exit while the process is still running");
        return 0;
    }
    return 1;
}

void zn_peer_watch_destroy(struct zn_peer_watch *w)
{
    if (!w) return;
    for (int r = 0; r < w->n; r++)
        if (atomic_load(&w->w[r].pidfd) >= 0) close(atomic_load(&w->w[r].pidfd));
    free(w->w);
    free(w);
}
