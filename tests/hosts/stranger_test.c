/*
 * stranger_check: strangers on every TCP listener of a running job must not disturb it.
 * Run under zinc-run and hostwrap.sh (several "hosts", so that the net transport listens too):
 *
 *   RANKS_PER_HOST=2 zinc-run -n 4 hostwrap.sh stranger_check
 *
 * Once the world communicator is up (every listener exists: the bootstrap's, the net's), rank 0
 * forks an attacker that finds every listening TCP socket of every rank (/proc/PID/fd and
 * /proc/net/tcp{,6}) and opens on each: silent connections (many, held open to the end), 200
 * bytes of garbage, a bootstrap frame with the job's magic (it is derived from ZINC_COMM_ID,
 * which anyone who sees the job's environment knows) announcing 2^40 bytes, a HELLO claiming
 * rank 0 with a forged MAC followed by an ABORT, and a HELLO claiming the last rank followed
 * by a 32 MB DATA frame that the attacker keeps writing for up to 2 s. The ranks then run
 * collectives (allreduce, allgather, a send/recv ring) before any stranger's deadline
 * (ZINC_TIMEOUT, set long here), check every result against a reference and check that their
 * resident memory grew by less than 48 MB. Every rank's log (ZINC_DEBUG=WARN to a file of its
 * own) must show that it closed a stranger, naming its address.
 */
#include "nccl.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/launcher.h"
#include "bootstrap/wire.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int rank, nranks;
static long failures;

#include "../coll/mp_check.h"

#define NSILENT  16
#define MAXLIST  64
#define MAXCONNS (MAXLIST * (NSILENT + 8))
#define DATA_LEN (32u << 20)

static char dir[256], log_path[300];

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void path_of(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

static void touch(const char *name, long value)
{
    char p[320], tmp[330];
    path_of(p, sizeof(p), name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", p);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fprintf(f, "%ld\n", value);
    fclose(f);
    rename(tmp, p);
}

/* The number in file name, waiting for it up to secs. */
static long wait_file(const char *name, int secs)
{
    char p[320];
    path_of(p, sizeof(p), name);
    double end = now_s() + secs;
    for (;;) {
        FILE *f = fopen(p, "r");
        long v;
        if (f && fscanf(f, "%ld", &v) == 1) {
            fclose(f);
            return v;
        }
        if (f) fclose(f);
        if (now_s() > end) {
            fprintf(stderr, "[%d] %s never appeared\n", rank, p);
            exit(2);
        }
        usleep(10000);
    }
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld", &kb) == 1) break;
    if (f) fclose(f);
    return kb;
}

/* --- the attacker ------------------------------------------------------------------------ */

struct target {
    union zn_sockaddr a;
    int pid;
};

/* Socket inodes of process pid. */
static int socket_inodes(int pid, unsigned long *ino, int max)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/fd", pid);
    DIR *d = opendir(p);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL && n < max;) {
        char lp[320], link[128];
        snprintf(lp, sizeof(lp), "%s/%s", p, e->d_name);
        ssize_t k = readlink(lp, link, sizeof(link) - 1);
        if (k <= 0) continue;
        link[k] = 0;
        if (sscanf(link, "socket:[%lu]", &ino[n]) == 1) n++;
    }
    if (d) closedir(d);
    return n;
}

/* Listening TCP sockets (state 0A) among the inodes, from /proc/PID/net/tcp and tcp6. */
static int listeners(int pid, struct target *t, int max)
{
    unsigned long ino[1024];
    int nino = socket_inodes(pid, ino, 1024), n = 0;
    for (int v6 = 0; v6 < 2; v6++) {
        char p[64], line[512];
        snprintf(p, sizeof(p), "/proc/%d/net/tcp%s", pid, v6 ? "6" : "");
        FILE *f = fopen(p, "r");
        while (f && fgets(line, sizeof(line), f) && n < max) {
            char local[64];
            unsigned st;
            unsigned long inode;
            if (sscanf(line, " %*d: %63s %*s %x %*s %*s %*s %*s %*s %lu", local, &st, &inode) != 3)
                continue;
            int mine = 0;
            for (int i = 0; i < nino && !mine; i++) mine = ino[i] == inode;
            if (st != 0x0a || !mine) continue;
            char *colon = strchr(local, ':');
            if (!colon) continue;
            unsigned port = (unsigned)strtoul(colon + 1, NULL, 16);
            memset(&t[n], 0, sizeof(t[n]));
            t[n].pid = pid;
            if (!v6) {
                t[n].a.in4.sin_family = AF_INET;
                t[n].a.in4.sin_addr.s_addr = (uint32_t)strtoul(local, NULL, 16);
                t[n].a.in4.sin_port = htons((uint16_t)port);
            } else {
                t[n].a.in6.sin6_family = AF_INET6;
                for (int w = 0; w < 4; w++) {
                    char word[9];
                    memcpy(word, local + 8 * w, 8);
                    word[8] = 0;
                    uint32_t x = (uint32_t)strtoul(word, NULL, 16);
                    memcpy((char *)&t[n].a.in6.sin6_addr + 4 * w, &x, 4);
                }
                t[n].a.in6.sin6_port = htons((uint16_t)port);
            }
            n++;
        }
        if (f) fclose(f);
    }
    return n;
}

static int conns[MAXCONNS], nconns;

static int open_conn(const union zn_sockaddr *a)
{
    int fd = socket(a->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t len = a->sa.sa_family == AF_INET6 ? sizeof(a->in6) : sizeof(a->in4);
    if (fd >= 0 && connect(fd, &a->sa, len) != 0) {
        close(fd);
        return -1;
    }
    if (fd >= 0 && nconns < MAXCONNS) conns[nconns++] = fd;
    return fd;
}

static void send_nb(int fd, const void *p, size_t n)
{
    if (fd >= 0 && send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) { /* a closed one is fine */
    }
}

static void frame(int fd, uint32_t type, uint64_t magic, uint64_t len, const void *p, size_t n)
{
    uint8_t buf[512];
    struct zn_boot_frame f = {
        .type = type, .version = ZN_BOOT_VERSION, .magic = magic, .len = len
    };
    memcpy(buf, &f, sizeof(f));
    if (n) memcpy(buf + sizeof(f), p, n);
    send_nb(fd, buf, sizeof(f) + n);
}

static void forged_hello(int fd, uint64_t magic, int claim, const union zn_sockaddr *a)
{
    struct zn_boot_hello h;
    zn_boot_hello_encode(&h, claim, nranks, ZN_HELLO_P2P, a);
    memset((char *)&h + 48, 0x5a, sizeof(h) - 48); /* whatever follows the fields: not a MAC */
    frame(fd, ZN_BOOT_HELLO, magic, sizeof(h), &h, sizeof(h));
}

static void attack(uint64_t magic)
{
    struct target t[MAXLIST];
    int nt = 0;
    for (int r = 0; r < nranks; r++) {
        char name[32];
        snprintf(name, sizeof(name), "pid.%d", r);
        int pid = (int)wait_file(name, 60);
        nt += listeners(pid, t + nt, MAXLIST - nt);
    }
    uint8_t garbage[200];
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < sizeof(garbage); i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        garbage[i] = (uint8_t)x;
    }
    int flood[MAXLIST], nflood = 0;
    for (int i = 0; i < nt; i++) {
        for (int k = 0; k < NSILENT; k++) open_conn(&t[i].a);
        send_nb(open_conn(&t[i].a), garbage, sizeof(garbage));
        frame(open_conn(&t[i].a), ZN_BOOT_HELLO, magic, 1ull << 40, NULL, 0);
        int fd = open_conn(&t[i].a);
        forged_hello(fd, magic, 0, &t[i].a);
        int32_t code = ncclInternalError;
        uint8_t ab[4 + 24];
        memcpy(ab, &code, 4);
        memcpy(ab + 4, "a stranger says: abort!!", 24);
        frame(fd, ZN_BOOT_ABORT, magic, sizeof(ab), ab, sizeof(ab));
        fd = open_conn(&t[i].a);
        forged_hello(fd, magic, nranks - 1, &t[i].a);
        uint32_t tag[2] = { 0x42470000u, 0 }; /* the tag of an allgather's first round */
        frame(fd, ZN_BOOT_DATA, magic, 8 + DATA_LEN, tag, sizeof(tag));
        if (fd >= 0) flood[nflood++] = fd;
    }
    fprintf(stderr, "stranger_check: %d listeners of %d ranks, %d stranger connections\n", nt,
            nranks, nconns);
    touch("ready", nconns);
    /* The DATA floods go on until the ranks are done: what a listener that took the forged
     * HELLO would buffer (32 MB a connection). */
    static uint8_t chunk[1 << 16];
    size_t left[MAXLIST];
    char done[320];
    path_of(done, sizeof(done), "done");
    for (int i = 0; i < nflood; i++) left[i] = DATA_LEN;
    double end = now_s() + 120;
    while (access(done, F_OK) != 0 && now_s() < end) {
        for (int i = 0; i < nflood; i++) {
            if (!left[i]) continue;
            ssize_t n = send(flood[i], chunk, left[i] < sizeof(chunk) ? left[i] : sizeof(chunk),
                             MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0) left[i] -= (size_t)n;
            if (n < 0 && errno != EAGAIN) left[i] = 0;
        }
        usleep(1000);
    }
    int open = 0;
    for (int i = 0; i < nconns; i++) {
        struct pollfd p = { .fd = conns[i], .events = POLLIN };
        char b[64];
        open += !(poll(&p, 1, 0) == 1 && recv(conns[i], b, sizeof(b), MSG_DONTWAIT) == 0);
        close(conns[i]);
    }
    fprintf(stderr, "stranger_check: %d of %d stranger connections still open at the end\n", open,
            nconns);
    _exit(0);
}

/* --- the ranks ---------------------------------------------------------------------------- */

static int log_count(const char *what)
{
    FILE *f = fopen(log_path, "r");
    char line[2048];
    int n = 0;
    while (f && fgets(line, sizeof(line), f)) n += strstr(line, what) != NULL;
    if (f) fclose(f);
    return n;
}

static void collectives(ncclComm_t w)
{
    const size_t count = 1u << 20;
    float *a = malloc(count * sizeof(float)), *s = malloc(count * sizeof(float));
    int32_t *g = malloc(sizeof(int32_t) * 1024 * (size_t)nranks);
    int32_t out[1024], in[1024];
    for (size_t i = 0; i < count; i++) a[i] = (float)((rank + 1) * (int)(i % 97));
    NCCLCHECK(ncclAllReduce(a, s, count, ncclFloat, ncclSum, w, NULL));
    float f = (float)(nranks * (nranks + 1) / 2);
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) bad += s[i] != f * (float)(i % 97);
    EXPECT(bad == 0, "allreduce: %zu of %zu elements wrong", bad, count);
    for (int i = 0; i < 1024; i++) out[i] = rank * 100000 + i;
    NCCLCHECK(ncclAllGather(out, g, 1024, ncclInt32, w, NULL));
    bad = 0;
    for (int r = 0; r < nranks; r++)
        for (int i = 0; i < 1024; i++) bad += g[r * 1024 + i] != r * 100000 + i;
    EXPECT(bad == 0, "allgather: %zu elements wrong", bad);
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(out, 1024, ncclInt32, next, w, NULL));
    NCCLCHECK(ncclRecv(in, 1024, ncclInt32, prev, w, NULL));
    NCCLCHECK(ncclGroupEnd());
    bad = 0;
    for (int i = 0; i < 1024; i++) bad += in[i] != prev * 100000 + i;
    EXPECT(bad == 0, "send/recv ring: %zu elements wrong", bad);
    free(a);
    free(s);
    free(g);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    struct zn_launch_info li;
    zn_launch_info_get(&li);
    const char *cid = getenv("ZINC_COMM_ID");
    const char *port = cid ? strrchr(cid, ':') : NULL;
    snprintf(dir, sizeof(dir), "/tmp/zinc-stranger.%s", port ? port + 1 : "x");
    mkdir(dir, 0700);
    snprintf(log_path, sizeof(log_path), "%s/log.%d", dir, li.rank);
    unlink(log_path);
    setenv("ZINC_DEBUG_FILE", log_path, 1);
    setenv("ZINC_DEBUG", "WARN", 1);
    ncclComm_t w = mp_world();
    ncclUniqueId uid;
    NCCLCHECK(ncclGetUniqueId(&uid));
    struct zn_unique_id id;
    memcpy(&id, uid.internal, sizeof(id));
    char name[32];
    snprintf(name, sizeof(name), "pid.%d", rank);
    touch(name, (long)getpid());
    pid_t attacker = -1;
    if (rank == 0) {
        attacker = fork();
        if (attacker == 0) attack(id.magic);
    }
    wait_file("ready", 60);
    /* The strangers wait on every listener before the first collective connects the net
     * transport (its accept meets them) and before the split (the bootstrap's listener). */
    long before = rss_kb();
    double t1 = now_s();
    collectives(w);
    ncclComm_t half;
    NCCLCHECK(ncclCommSplit(w, rank % 2, rank, &half, NULL));
    collectives(w);
    int hn = 0, hr = -1;
    NCCLCHECK(ncclCommCount(half, &hn));
    NCCLCHECK(ncclCommUserRank(half, &hr));
    EXPECT(hn == (nranks + 1 - rank % 2) / 2 && hr == rank / 2, "split: rank %d of %d", hr, hn);
    int64_t one = 1, sum = 0;
    NCCLCHECK(ncclAllReduce(&one, &sum, 1, ncclInt64, ncclSum, half, NULL));
    EXPECT(sum == hn, "allreduce on the split communicator: %lld", (long long)sum);
    NCCLCHECK(ncclCommDestroy(half));
    double t2 = now_s();
    long after = rss_kb();
    EXPECT(after - before < 48 * 1024, "resident memory grew from %ld to %ld kB", before, after);
    /* A bootstrap listener serves its strangers only while its rank waits in the bootstrap:
     * more splits until every rank's log shows one closed (a split can be over before the
     * strangers' bytes are read). */
    int closed = 0;
    for (int round = 0; round < 50; round++) {
        closed = log_count("closed the connection from") + log_count("rejected a connection from");
        int64_t none = closed == 0, any_none = 0;
        NCCLCHECK(ncclAllReduce(&none, &any_none, 1, ncclInt64, ncclSum, w, NULL));
        if (!any_none) break;
        ncclComm_t again;
        NCCLCHECK(ncclCommSplit(w, 0, rank, &again, NULL));
        NCCLCHECK(ncclCommDestroy(again));
    }
    EXPECT(closed > 0, "this rank's log (%s) shows no stranger closed", log_path);
    if (rank == 0) {
        touch("done", 1);
        int st = 0;
        waitpid(attacker, &st, 0);
        EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the attacker failed (status %d)", st);
    }
    fprintf(stderr,
            "[%d] collectives and a split in %.2f s among the strangers; RSS %ld -> %ld kB; %d "
            "strangers closed\n",
            rank, t2 - t1, before, after, closed);
    int rc = mp_finish(w, "stranger_check");
    if (failures || rc) {
        char cmd[400];
        snprintf(cmd, sizeof(cmd), "cat %s >&2", log_path);
        if (system(cmd) != 0) { /* the log is only shown */
        }
    }
    return rc;
}
