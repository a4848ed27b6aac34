/*
 * boot_grow_stray: strangers at the root of a grow must not disturb it. Run under zinc-run on 2
 * ranks:
 *
 *   zinc-run -n 2 boot_grow_stray
 *
 * The world communicator grows to 3 ranks, the new rank a thread of rank 0. While the grow is
 * under way (both existing ranks called ncclCommGrow; the new rank is started only once the
 * strangers were dealt with, so the root cannot have finished) a thread of rank 0 connects to
 * the grow root as strangers: HELLOs claiming the new rank's place with a MAC made without any
 * secret and with the parent's job secret (what a process of the parent's job that never got
 * the id knows), one claiming existing rank 0 with the parent's secret, garbage, and a silent
 * connection held open. The root must close each offending connection and log why, the grow
 * must complete with right results, the grown communicator's secret must be the id's and not
 * the parent's, and the silent connection must be closed once the root is done.
 */
#include "api/comm.h"
#include "bootstrap/launcher.h"
#include "bootstrap/wire.h"
#include "util/clock.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Thread_local int rank;
static int nranks;
static _Atomic long failures;

#include "../coll/mp_check.h"

static char log_path[128];

static int log_count(const char *what)
{
    FILE *f = fopen(log_path, "r");
    char line[2048];
    int n = 0;
    while (f && fgets(line, sizeof(line), f)) n += strstr(line, what) != NULL;
    if (f) fclose(f);
    return n;
}

/* --- the strangers ---------------------------------------------------------------------- */

enum { ST_NO_SECRET, ST_PARENT_NEW, ST_PARENT_OLD, ST_GARBAGE, ST_SILENT, NST };
static const char *const st_what[NST] = {
    "a HELLO claiming the new rank 2, its MAC made without a secret",
    "a HELLO claiming the new rank 2, signed with the parent's job secret",
    "a HELLO claiming existing rank 0, signed with the parent's job secret",
    "200 bytes of garbage",
    "a silent connection",
};

struct attack {
    union zn_sockaddr root;
    uint64_t magic;
    struct zn_boot_secret parent; /* the parent communicator's job secret */
    int fd[NST];
    int still_open; /* offending connections the root had not closed after 10 s */
    ncclUniqueId id;
    pthread_t new_rank; /* started once the strangers were dealt with */
};

static int connect_root(const union zn_sockaddr *a)
{
    int fd = socket(a->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, &a->sa, zn_sockaddr_len(a)) != 0) {
        fprintf(stderr, "[%d] cannot connect to the grow root: %s\n", rank, strerror(errno));
        exit(2);
    }
    return fd;
}

/* The root's CHALLENGE: its nonce. */
static int read_challenge(int fd, uint64_t magic, uint8_t nonce[ZN_BOOT_NONCE_BYTES])
{
    uint8_t buf[sizeof(struct zn_boot_frame) + ZN_BOOT_NONCE_BYTES];
    size_t got = 0;
    while (got < sizeof(buf)) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 10000) != 1) return -1;
        ssize_t n = recv(fd, buf + got, sizeof(buf) - got, 0);
        if (n <= 0) return -1;
        got += (size_t)n;
    }
    struct zn_boot_frame f;
    memcpy(&f, buf, sizeof(f));
    if (f.type != ZN_BOOT_CHALLENGE || f.magic != magic || f.len != ZN_BOOT_NONCE_BYTES) return -1;
    memcpy(nonce, buf + sizeof(f), ZN_BOOT_NONCE_BYTES);
    return 0;
}

/* A HELLO to the root as rank r of 3, signed with secret (NULL: a MAC of zeros). */
static void send_hello(int fd, const struct attack *a, int r, const uint8_t *secret)
{
    uint8_t nonce[ZN_BOOT_NONCE_BYTES];
    if (read_challenge(fd, a->magic, nonce) != 0) {
        fprintf(stderr, "[%d] the grow root sent no CHALLENGE\n", rank);
        exit(2);
    }
    struct zn_boot_hello h;
    zn_boot_hello_encode(&h, r, 3, ZN_HELLO_ROOT, &a->root);
    if (secret)
        zn_boot_hello_sign(&h, secret, a->magic, nonce);
    else
        memset(h.mac, 0, sizeof(h.mac));
    struct zn_boot_frame f = {
        .type = ZN_BOOT_HELLO, .version = ZN_BOOT_VERSION, .magic = a->magic, .len = sizeof(h)
    };
    uint8_t buf[sizeof(f) + sizeof(h)];
    memcpy(buf, &f, sizeof(f));
    memcpy(buf + sizeof(f), &h, sizeof(h));
    if (send(fd, buf, sizeof(buf), MSG_NOSIGNAL) != (ssize_t)sizeof(buf))
        fprintf(stderr, "[%d] stray HELLO: %s\n", rank, strerror(errno));
}

/* Whether the other side closed fd within ms (what it sent first is read and dropped). */
static int closed_within(int fd, int ms)
{
    int64_t end = zn_now_ns() + (int64_t)ms * 1000000;
    for (;;) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int left = (int)((end - zn_now_ns()) / 1000000);
        if (left < 0 || poll(&p, 1, left) != 1) return 0;
        char b[256];
        ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) return 1;
    }
}

static void check_allreduce(ncclComm_t c, int n, const char *what)
{
    int64_t v[3] = { rank + 1, 10 * (rank + 1), 100 }, s[3] = { 0 };
    NCCLCHECK(ncclAllReduce(v, s, 3, ncclInt64, ncclSum, c, NULL));
    int64_t t = (int64_t)n * (n + 1) / 2;
    EXPECT(s[0] == t && s[1] == 10 * t && s[2] == 100 * n, "%s: allreduce gave %lld %lld %lld",
           what, (long long)s[0], (long long)s[1], (long long)s[2]);
}

/* The new rank 2. */
static void *new_rank(void *arg)
{
    struct attack *a = arg;
    ncclComm_t g = NULL;
    rank = 2;
    NCCLCHECK(ncclCommGrow(NULL, 3, &a->id, 2, &g, NULL));
    check_allreduce(g, 3, "the grown communicator");
    NCCLCHECK(ncclCommDestroy(g));
    return NULL;
}

static void *attacker(void *arg)
{
    struct attack *a = arg;
    for (int i = 0; i < NST; i++) a->fd[i] = connect_root(&a->root);
    send_hello(a->fd[ST_NO_SECRET], a, 2, NULL);
    send_hello(a->fd[ST_PARENT_NEW], a, 2, a->parent.key);
    send_hello(a->fd[ST_PARENT_OLD], a, 0, a->parent.key);
    uint8_t garbage[200];
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < sizeof(garbage); i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        garbage[i] = (uint8_t)x;
    }
    if (send(a->fd[ST_GARBAGE], garbage, sizeof(garbage), MSG_NOSIGNAL) < 0)
        fprintf(stderr, "[%d] stray garbage: %s\n", rank, strerror(errno));
    for (int i = 0; i < ST_SILENT; i++) {
        if (closed_within(a->fd[i], 10000)) {
            close(a->fd[i]);
            a->fd[i] = -1;
        } else {
            a->still_open++;
            EXPECT(0, "the grow root did not close %s", st_what[i]);
        }
    }
    pthread_create(&a->new_rank, NULL, new_rank, a);
    return NULL;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    struct zn_launch_info li;
    zn_launch_info_get(&li);
    snprintf(log_path, sizeof(log_path), "/tmp/zinc-grow-stray.%d.log", (int)getpid());
    unlink(log_path);
    setenv("ZINC_DEBUG_FILE", log_path, 1);
    setenv("ZINC_DEBUG", "WARN", 1);
    ncclComm_t w = mp_world();
    if (nranks != 2) {
        fprintf(stderr, "boot_grow_stray runs on 2 ranks\n");
        return 2;
    }
    int me = rank;
    struct attack a;
    memset(&a, 0, sizeof(a));
    zn_boot_get_secret(w->boot, &a.parent);
    pthread_t at;
    if (me == 0) {
        NCCLCHECK(ncclCommGetUniqueId(w, &a.id));
        struct zn_unique_id id;
        memcpy(&id, a.id.internal, sizeof(id));
        memcpy(&a.root, id.root_addr, sizeof(a.root));
        a.magic = id.magic;
        EXPECT(memcmp(id.secret, a.parent.key, sizeof(id.secret)) != 0,
               "the grow id carries the parent's secret");
        pthread_create(&at, NULL, attacker, &a);
    }
    ncclComm_t g = NULL;
    NCCLCHECK(ncclCommGrow(w, 3, me == 0 ? &a.id : NULL, -1, &g, NULL));
    struct zn_boot_secret gs;
    zn_boot_get_secret(g->boot, &gs);
    EXPECT(memcmp(gs.key, a.parent.key, sizeof(gs.key)) != 0,
           "the grown communicator kept the parent's job secret");
    if (me == 0) {
        pthread_join(at, NULL);
        struct zn_unique_id id;
        memcpy(&id, a.id.internal, sizeof(id));
        EXPECT(memcmp(gs.key, id.secret, sizeof(gs.key)) == 0,
               "the grown communicator's secret is not the grow id's");
        EXPECT(closed_within(a.fd[ST_SILENT], 5000), "the grow root left the silent stranger open");
        close(a.fd[ST_SILENT]);
        EXPECT(a.still_open == 0, "%d offending stranger(s) still open", a.still_open);
        int proof = log_count("did not prove the job secret");
        int magic = log_count("did not present this job's magic");
        EXPECT(proof >= 3 && magic >= 1,
               "the root logged %d \"did not prove the job secret\" (want 3) and %d \"did not "
               "present this job's magic\" (want 1) closings",
               proof, magic);
    }
    check_allreduce(g, 3, "the grown communicator");
    NCCLCHECK(ncclCommDestroy(g));
    if (me == 0) pthread_join(a.new_rank, NULL);
    int rc = mp_finish(w, "boot_grow_stray");
    if (failures || rc) {
        char cmd[200];
        snprintf(cmd, sizeof(cmd), "cat %s >&2", log_path);
        if (system(cmd) != 0) { /* the log is only shown */
        }
    }
    unlink(log_path);
    return rc;
}
