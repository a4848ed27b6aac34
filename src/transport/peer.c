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

ncclResult_t zn_peer_info_local(struct zn_peer_info *info)
{
    memset(info, 0, sizeof(*info));
    info->pid = (int32_t)getpid();
    info->host_hash = zn_host_hash();
    info->pid_start = proc_start_time(info->pid);
    info->cuda_dev = -1;
    if (getrandom(&info->nonce, sizeof(info->nonce), 0) != sizeof(info->nonce))
        info->nonce = (uint64_t)info->pid_start * 0x9e3779b97f4a7c15ull ^ (uint64_t)info->pid;
    if (gethostname(info->hostname, sizeof(info->hostname) - 1) != 0)
        snprintf(info->hostname, sizeof(info->hostname), "unknown");
    return ncclSuccess;
}

struct zn_peer_watch {
    int n;
    int *pidfd; /* -1: not watched */
};

ncclResult_t zn_peer_watch_create(const struct zn_tctx *ctx, struct zn_peer_watch **out)
{
    struct zn_peer_watch *w = calloc(1, sizeof(*w));
    if (!w || !(w->pidfd = malloc((size_t)ctx->nranks * sizeof(int)))) {
        free(w);
        return zn_error(ncclSystemError, ZN_INIT, "out of memory");
    }
    w->n = ctx->nranks;
    uint64_t me = ctx->peers[ctx->rank].host_hash;
    for (int r = 0; r < ctx->nranks; r++) {
        const struct zn_peer_info *p = &ctx->peers[r];
        w->pidfd[r] = -1;
        if (r == ctx->rank || p->host_hash != me || p->pid <= 0) continue;
        /* A peer in another pid namespace shows a pid that is not its own here: only watch a
         * pid whose start time matches what the peer reported. */
        int fd = (int)syscall(SYS_pidfd_open, p->pid, 0);
        if (fd < 0) continue;
        if (p->pid_start && proc_start_time(p->pid) != p->pid_start) {
            close(fd);
            continue;
        }
        w->pidfd[r] = fd;
    }
    *out = w;
    return ncclSuccess;
}

int zn_peer_dead(struct zn_peer_watch *w, int peer)
{
    if (!w || peer < 0 || peer >= w->n || w->pidfd[peer] < 0) return 0;
    struct pollfd p = { .fd = w->pidfd[peer], .events = POLLIN };
    return poll(&p, 1, 0) > 0;
}

void zn_peer_watch_destroy(struct zn_peer_watch *w)
{
    if (!w) return;
    for (int r = 0; r < w->n; r++)
        if (w->pidfd[r] >= 0) close(w->pidfd[r]);
    free(w->pidfd);
    free(w);
}
