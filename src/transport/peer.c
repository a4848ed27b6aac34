#include "peer.h"
#include "util/err.h"
#include "util/param.h"

#include <errno.h>
#include <fcntl.h>
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

/* Field 22 of /proc/PID/stat: start time in clock ticks since boot. */
static uint64_t proc_start_time(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    /* The command name may contain spaces and parentheses: skip to the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p) return 0;
    unsigned long long start = 0;
    /* After ')': state is field 3; starttime is field 22, i.e. the 20th field after state. */
    int field = 2;
    for (char *tok = strtok(p + 1, " "); tok; tok = strtok(NULL, " ")) {
        if (++field == 22) {
            start = strtoull(tok, NULL, 10);
            break;
        }
    }
    return start;
}

/* The pid namespace: a pid means the same process only to ranks that share it. 0: unknown. */
static uint32_t pidns_id(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint32_t)st.st_ino : 0;
}

ncclResult_t zn_peer_info_local(struct zn_peer_info *info)
{
    memset(info, 0, sizeof(*info));
    info->pid = (int32_t)getpid();
    info->host_hash = zn_host_hash();
    info->pid_start = proc_start_time(info->pid);
    info->pidns = pidns_id();
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

struct zn_peer_watch {
    int n;
    const struct zn_peer_info *peers; /* the communicator's, alive as long as the watch */
    uint32_t my_pidns;
    atomic_int *pidfd; /* an open pidfd, or a WATCH_ state */
};

ncclResult_t zn_peer_watch_create(const struct zn_tctx *ctx, struct zn_peer_watch **out)
{
    struct zn_peer_watch *w = calloc(1, sizeof(*w));
    if (!w || !(w->pidfd = malloc((size_t)ctx->nranks * sizeof(*w->pidfd)))) {
        free(w);
        return zn_error(ncclSystemError, ZN_INIT, "out of memory");
    }
    w->n = ctx->nranks;
    w->peers = ctx->peers;
    w->my_pidns = ctx->peers[ctx->rank].pidns;
    uint64_t me = ctx->peers[ctx->rank].host_hash;
    for (int r = 0; r < ctx->nranks; r++) {
        const struct zn_peer_info *p = &ctx->peers[r];
        /* A peer in another pid namespace shows a pid that is not its own here. */
        int same_ns = p->pidns == w->my_pidns;
        int watchable = r != ctx->rank && p->host_hash == me && p->pid > 0 && same_ns;
        atomic_init(&w->pidfd[r], watchable ? WATCH_UNOPENED : WATCH_NONE);
    }
    *out = w;
    return ncclSuccess;
}

/* First question about peer: open its pidfd. The peer was alive when it sent its info, and it
 * shares our pid namespace: a pid that is gone, or now belongs to a process that started at
 * another time, means that it exited. Where the namespace is unknown (no /proc), such a peer
 * is only not watched. */
static int open_watch(struct zn_peer_watch *w, int peer)
{
    const struct zn_peer_info *p = &w->peers[peer];
    int state;
    int fd = (int)syscall(SYS_pidfd_open, p->pid, 0);
    if (fd < 0) {
        state = errno == ESRCH && w->my_pidns ? WATCH_DEAD : WATCH_NONE;
    } else {
        uint64_t start = p->pid_start ? proc_start_time(p->pid) : 0;
        state = !start || start == p->pid_start ? fd : w->my_pidns ? WATCH_DEAD : WATCH_NONE;
        if (state != fd) close(fd);
    }
    int expected = WATCH_UNOPENED;
    if (!atomic_compare_exchange_strong(&w->pidfd[peer], &expected, state)) {
        /* Another thread opened it first. */
        if (state >= 0) close(state);
        return expected;
    }
    return state;
}

int zn_peer_dead(struct zn_peer_watch *w, int peer)
{
    if (!w || peer < 0 || peer >= w->n) return 0;
    int fd = atomic_load(&w->pidfd[peer]);
    if (fd == WATCH_UNOPENED) fd = open_watch(w, peer);
    if (fd == WATCH_DEAD) return 1;
    if (fd < 0) return 0;
    struct pollfd p = { .fd = fd, .events = POLLIN };
    return poll(&p, 1, 0) > 0;
}

void zn_peer_watch_destroy(struct zn_peer_watch *w)
{
    if (!w) return;
    for (int r = 0; r < w->n; r++)
        if (atomic_load(&w->pidfd[r]) >= 0) close(atomic_load(&w->pidfd[r]));
    free(w->pidfd);
    free(w);
}
