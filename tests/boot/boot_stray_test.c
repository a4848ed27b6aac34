/*
 * boot_stray: stray connections must not disturb the bootstrap. Run under zinc-run (3+ ranks):
 *
 *   zinc-run -n 3 boot_stray
 *
 * 1. Before init. Rank 0 starts the root (inside zn_boot_init) while a thread of its own opens
 *    raw TCP connections to the root's address (ZINC_COMM_ID) and sends what a stranger might:
 *    a header with a wrong magic, random garbage, huge lengths, unknown types, a malformed
 *    HELLO, part of a header, or nothing at all. The other ranks join once the root closed the
 *    offending ones (rank 0 tells them through a file in /tmp), while 64 more idle connections
 *    stay open. Init must succeed, an allgather must be right, and rank 0's log (ZINC_DEBUG=WARN,
 *    captured through ZINC_DEBUG_FILE) must show that the root closed each offending connection.
 *    Strangers who know the job's magic (it is derived from ZINC_COMM_ID) but not its secret
 *    send an ABORT, a HELLO with a forged MAC claiming rank 0, and a 256 MB DATA header: each
 *    is closed before anything it sent is taken.
 * 2. After init. Every rank sends the same strays to the next rank's own bootstrap listener
 *    (zn_boot_peer_addr); the following barrier, send/recv and allgather must be right, the
 *    offending connections must be closed and the victim's log must say so.
 */
#include "bootstrap/bootstrap.h"
#include "bootstrap/launcher.h"
#include "bootstrap/wire.h"
#include "util/clock.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, nranks;
static int failures;
static FILE *report; /* where this program reports */
static void dump_log(void);

#define CHECK_OK(call)                                                                     \
    do {                                                                                   \
        ncclResult_t r_ = (call);                                                          \
        if (r_ != ncclSuccess) {                                                           \
            fprintf(report, "[%d] %s:%d %s failed: %d\n", rank, __FILE__, __LINE__, #call, \
                    (int)r_);                                                              \
            dump_log();                                                                    \
            exit(2);                                                                       \
        }                                                                                  \
    } while (0)

#define EXPECT_STREAM report
#include "../unit/expect.h"

/* --- the captured log ------------------------------------------------------------------- */

/* The library logs to a file of this process's own (ZINC_DEBUG_FILE), so that stderr stays free
 * for this program's messages and for sanitizer reports. */
static char log_path[128];

static void capture_log(void)
{
    snprintf(log_path, sizeof(log_path), "/tmp/zinc-boot-stray.%d.log", (int)getpid());
    unlink(log_path);
    setenv("ZINC_DEBUG_FILE", log_path, 1);
    setenv("ZINC_DEBUG", "WARN", 1);
    report = stderr;
}

/* The log so far, NUL-terminated (caller frees). */
static char *read_log(void)
{
    FILE *f = fopen(log_path, "r");
    size_t cap = 4096, len = 0;
    char *s = malloc(cap);
    while (f) {
        size_t n = fread(s + len, 1, cap - len - 1, f);
        if (n == 0) break;
        len += n;
        if (cap - len < 1024) s = realloc(s, cap *= 2);
    }
    if (f) fclose(f);
    s[len] = 0;
    return s;
}

static void dump_log(void)
{
    char *s = read_log();
    fprintf(report, "[%d] --- captured library log ---\n%s[%d] --- end of log ---\n", rank, s,
            rank);
    free(s);
    unlink(log_path);
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* --- stray connections ------------------------------------------------------------------ */

enum expect { QUIET, WRONG_MAGIC, TOO_LONG, BAD_TYPE, BAD_HELLO, NO_PROOF };

struct stray {
    const char *what;
    enum expect logs; /* what the server must log when it closes it */
    int fd;
};

static struct stray strays[] = {
    { "header with a wrong magic", WRONG_MAGIC, -1 },
    { "200 bytes of random garbage", WRONG_MAGIC, -1 },
    { "wrong magic announcing 2^62 bytes", WRONG_MAGIC, -1 },
    { "right magic, wrong version", WRONG_MAGIC, -1 },
    { "right magic HELLO announcing 2^40 bytes", TOO_LONG, -1 },
    { "right magic, unknown frame type", BAD_TYPE, -1 },
    { "right magic HELLO with rank >= nranks", BAD_HELLO, -1 },
    { "connects and sends nothing", QUIET, -1 },
    { "10 bytes of a header, then nothing", QUIET, -1 },
    { "HELLO header and 20 of its 48 payload bytes", QUIET, -1 },
    { "connects and closes at once", QUIET, -1 },
    { "right magic, ABORT before any HELLO", BAD_HELLO, -1 },
    { "right magic, HELLO of a real rank with a MAC not made with the job secret", NO_PROOF, -1 },
    { "right magic, DATA announcing 256 MB before any HELLO", BAD_TYPE, -1 },
};
#define NSTRAYS ((int)(sizeof(strays) / sizeof(strays[0])))

static int connect_to(const union zn_sockaddr *a, int retry_ms)
{
    int64_t deadline = zn_now_ns() + (int64_t)retry_ms * 1000000;
    for (;;) {
        int fd = socket(a->sa.sa_family, SOCK_STREAM, 0);
        if (fd >= 0 && connect(fd, &a->sa, zn_sockaddr_len(a)) == 0) return fd;
        int err = errno;
        if (fd >= 0) close(fd);
        if (err != ECONNREFUSED || zn_now_ns() > deadline) {
            fprintf(report, "[%d] cannot connect a stray: %s\n", rank, strerror(err));
            exit(2);
        }
        usleep(2000);
    }
}

static void send_bytes(int fd, const void *p, size_t n)
{
    if (send(fd, p, n, MSG_NOSIGNAL) != (ssize_t)n)
        fprintf(report, "[%d] stray send of %zu bytes: %s\n", rank, n, strerror(errno));
}

static void send_frame(int fd, uint32_t type, uint32_t version, uint64_t magic, uint64_t len,
                       const void *payload, size_t n)
{
    struct zn_boot_frame f = { .type = type, .version = version, .magic = magic, .len = len };
    uint8_t buf[256];
    memcpy(buf, &f, sizeof(f));
    if (n) memcpy(buf + sizeof(f), payload, n);
    send_bytes(fd, buf, sizeof(f) + n);
}

/* Open every stray connection to a and send its bytes. magic is the job's. */
static void open_strays(const union zn_sockaddr *a, uint64_t magic, uint32_t kind, int retry_ms)
{
    struct zn_boot_hello h;
    zn_boot_hello_encode(&h, 5, 2, ZN_HELLO_ROOT, a);
    uint8_t garbage[200];
    uint32_t x = 12345u + (uint32_t)rank;
    for (size_t i = 0; i < sizeof(garbage); i++) {
        x = x * 1103515245u + 12345u;
        garbage[i] = (uint8_t)(x >> 16);
    }
    for (int i = 0; i < NSTRAYS; i++) {
        int fd = strays[i].fd = connect_to(a, retry_ms);
        switch (i) {
        case 0: send_frame(fd, ZN_BOOT_HELLO, ZN_BOOT_VERSION, magic ^ 0x5a5a, 48, &h, 48); break;
        case 1: send_bytes(fd, garbage, sizeof(garbage)); break;
        case 2: send_frame(fd, ZN_BOOT_HELLO, ZN_BOOT_VERSION, ~magic, 1ull << 62, NULL, 0); break;
        case 3: send_frame(fd, ZN_BOOT_HELLO, 99, magic, 48, &h, 48); break;
        case 4: send_frame(fd, ZN_BOOT_HELLO, ZN_BOOT_VERSION, magic, 1ull << 40, NULL, 0); break;
        case 5: send_frame(fd, 77, ZN_BOOT_VERSION, magic, 8, garbage, 8); break;
        case 6: send_frame(fd, ZN_BOOT_HELLO, ZN_BOOT_VERSION, magic, 48, &h, 48); break;
        case 7: break;
        case 8: {
            struct zn_boot_frame f = { ZN_BOOT_HELLO, ZN_BOOT_VERSION, magic, 48 };
            send_bytes(fd, &f, 10);
            break;
        }
        case 9: send_frame(fd, ZN_BOOT_HELLO, ZN_BOOT_VERSION, magic, 48, &h, 20); break;
        case 10:
            close(fd);
            strays[i].fd = -1;
            break;
        case 11: {
            int32_t code = 3;
            uint8_t p[4 + 16];
            memcpy(p, &code, 4);
            memcpy(p + 4, "forged abort....", 16);
            send_frame(fd, ZN_BOOT_ABORT, ZN_BOOT_VERSION, magic, sizeof(p), p, sizeof(p));
            break;
        }
        case 12: {
            /* A stranger who knows the magic but not the secret, claiming rank 0. */
            struct zn_boot_hello f;
            zn_boot_hello_encode(&f, 0, nranks, kind, a);
            memset(f.mac, 0x5a, sizeof(f.mac));
            send_frame(fd, ZN_BOOT_HELLO, ZN_BOOT_VERSION, magic, sizeof(f), &f, sizeof(f));
            break;
        }
        case 13:
            send_frame(fd, ZN_BOOT_DATA, ZN_BOOT_VERSION, magic, 8 + (256u << 20), NULL, 0);
            break;
        }
    }
}

/* Wait until the server closed every stray that it must close (up to ms). Returns how many
 * are still open. */
static int wait_closed(int ms, int all)
{
    int64_t deadline = zn_now_ns() + (int64_t)ms * 1000000;
    int open;
    do {
        open = 0;
        for (int i = 0; i < NSTRAYS; i++) {
            if (strays[i].fd < 0 || (!all && strays[i].logs == QUIET)) continue;
            struct pollfd p = { .fd = strays[i].fd, .events = POLLIN };
            char c[256]; /* the server's CHALLENGE comes first: take it whole */
            if (poll(&p, 1, 0) == 1 && recv(strays[i].fd, c, sizeof(c), MSG_DONTWAIT) <= 0) {
                close(strays[i].fd);
                strays[i].fd = -1;
                continue;
            }
            open++;
        }
        if (open) usleep(10000);
    } while (open && zn_now_ns() < deadline);
    return open;
}

static void report_open(const char *server, int all)
{
    for (int i = 0; i < NSTRAYS; i++)
        if (strays[i].fd >= 0 && (all || strays[i].logs != QUIET))
            EXPECT(0, "%s did not close the stray connection that %s", server, strays[i].what);
}

static void close_strays(void)
{
    for (int i = 0; i < NSTRAYS; i++)
        if (strays[i].fd >= 0) close(strays[i].fd);
}

/* The server's log must have one closing line per offending stray. */
static void check_log(const char *log, const char *server, const char *magic_s, const char *len_s,
                      const char *type_s, const char *hello_s)
{
    int want[6] = { 0 };
    for (int i = 0; i < NSTRAYS; i++) want[strays[i].logs]++;
    EXPECT(count(log, magic_s) >= want[WRONG_MAGIC], "%s logged %d \"%s\" lines, want %d", server,
           count(log, magic_s), magic_s, want[WRONG_MAGIC]);
    EXPECT(count(log, len_s) >= want[TOO_LONG], "%s logged %d \"%s\" lines, want %d", server,
           count(log, len_s), len_s, want[TOO_LONG]);
    EXPECT(count(log, type_s) >= want[BAD_TYPE], "%s logged %d \"%s\" lines, want %d", server,
           count(log, type_s), type_s, want[BAD_TYPE]);
    EXPECT(count(log, hello_s) >= want[BAD_HELLO], "%s logged %d \"%s\" lines, want %d", server,
           count(log, hello_s), hello_s, want[BAD_HELLO]);
    const char *proof_s = "did not prove the job secret";
    EXPECT(count(log, proof_s) >= want[NO_PROOF], "%s logged %d \"%s\" lines, want %d", server,
           count(log, proof_s), proof_s, want[NO_PROOF]);
}

/* --- phase 1: the root ------------------------------------------------------------------- */

#define NIDLE 64

struct root_attack {
    union zn_sockaddr root;
    uint64_t magic;
    int still_open;
    int idle[NIDLE]; /* connections that never send anything */
};

/* The other ranks join only once the root has dealt with the strays: rank 0 creates this file
 * (named after the job's port) when it has. */
static char ready_path[128];

static void *attack_root(void *arg)
{
    struct root_attack *a = arg;
    open_strays(&a->root, a->magic, ZN_HELLO_ROOT, 10000);
    for (int i = 0; i < NIDLE; i++) a->idle[i] = connect_to(&a->root, 1000);
    a->still_open = wait_closed(10000, 0);
    FILE *f = fopen(ready_path, "w");
    if (f) fclose(f);
    return NULL;
}

static void wait_ready(void)
{
    int64_t deadline = zn_now_ns() + 30 * 1000000000ll;
    while (access(ready_path, F_OK) != 0) {
        if (zn_now_ns() > deadline) {
            fprintf(report, "[%d] rank 0 never finished its strays (%s)\n", rank, ready_path);
            exit(2);
        }
        usleep(10000);
    }
}

static void check_allgather(struct zn_boot *b, int round)
{
    int32_t *v = malloc(sizeof(int32_t) * 2 * (size_t)nranks);
    for (int i = 0; i < 2 * nranks; i++) v[i] = -1;
    v[2 * rank] = rank;
    v[2 * rank + 1] = rank * 31 + round;
    CHECK_OK(zn_boot_allgather(b, v, 2 * sizeof(int32_t)));
    for (int r = 0; r < nranks; r++)
        EXPECT(v[2 * r] == r && v[2 * r + 1] == r * 31 + round,
               "allgather round %d: slot %d holds %d,%d", round, r, v[2 * r], v[2 * r + 1]);
    free(v);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    capture_log();
    struct zn_launch_info li;
    zn_launch_info_get(&li);
    rank = li.rank;
    nranks = li.nranks;
    if (nranks < 2) {
        fprintf(report, "boot_stray needs 2 or more ranks\n");
        return 2;
    }
    ncclUniqueId uid;
    CHECK_OK(zn_boot_get_unique_id(&uid));
    struct zn_unique_id id;
    memcpy(&id, uid.internal, sizeof(id));
    atomic_int abort_flag = 0;
    struct zn_boot *b;
    struct root_attack ra = { .magic = id.magic };
    union zn_sockaddr root_addr;
    memcpy(&root_addr, id.root_addr, sizeof(root_addr));
    snprintf(ready_path, sizeof(ready_path), "/tmp/zinc-boot-stray-ready.%d",
             zn_sockaddr_port(&root_addr));
    pthread_t attacker;
    if (rank == 0) {
        unlink(ready_path); /* a leftover of an earlier run that died */
        memcpy(&ra.root, id.root_addr, sizeof(ra.root));
        pthread_create(&attacker, NULL, attack_root, &ra);
    } else {
        wait_ready();
    }
    CHECK_OK(zn_boot_init(&uid, rank, nranks, &abort_flag, &b));
    if (rank == 0) {
        pthread_join(attacker, NULL);
        unlink(ready_path);
        EXPECT(ra.still_open == 0, "the root had not closed %d offending stray(s) after 10 s",
               ra.still_open);
        /* The root exits once everyone joined: every stray is closed then. */
        wait_closed(5000, 1);
        report_open("the bootstrap root", 1);
        int idle_open = 0;
        for (int i = 0; i < NIDLE; i++) {
            /* It got the root's CHALLENGE, then the end of the connection. */
            int open = 1;
            for (;;) {
                struct pollfd p = { .fd = ra.idle[i], .events = POLLIN };
                char c[64];
                if (poll(&p, 1, 5000) != 1) break; /* still open after 5 s */
                ssize_t n = recv(ra.idle[i], c, sizeof(c), MSG_DONTWAIT);
                if (n > 0) continue;
                open = n < 0 && errno != ECONNRESET;
                break;
            }
            idle_open += open;
            close(ra.idle[i]);
        }
        EXPECT(idle_open == 0, "the root left %d of %d idle connections open", idle_open, NIDLE);
        char *log = read_log();
        check_log(log, "the root", "did not present this job's magic",
                  "message length out of bounds", "Protocol error", "malformed HELLO");
        free(log);
    }
    check_allgather(b, 0);
    /* Log lines from here on are the listener's. The mark is taken before the barrier: the
     * previous rank leaves the barrier first at times and its strays arrive while this rank
     * still serves its listener inside the barrier, which logs their closing then. */
    char *before = read_log();
    size_t log_mark = strlen(before);
    free(before);
    CHECK_OK(zn_boot_barrier(b));

    /* Phase 2: strays against the next rank's listener, then traffic. */
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    open_strays(zn_boot_peer_addr(b, next), zn_boot_magic(b), ZN_HELLO_P2P, 0);
    CHECK_OK(zn_boot_barrier(b));
    /* A token goes round the ring, each rank holding it 300 ms: so every rank waits in
     * zn_boot_recv for a while, serving its listener (and the strays) meanwhile. */
    uint64_t out[512], in[512];
    for (int i = 0; i < 512; i++) out[i] = (uint64_t)rank << 32 | (uint64_t)i;
    if (rank != 0) CHECK_OK(zn_boot_recv(b, prev, 42, in, sizeof(in)));
    usleep(300 * 1000);
    CHECK_OK(zn_boot_send(b, next, 42, out, sizeof(out)));
    if (rank == 0) CHECK_OK(zn_boot_recv(b, prev, 42, in, sizeof(in)));
    for (int i = 0; i < 512; i++)
        if (in[i] != ((uint64_t)prev << 32 | (uint64_t)i)) {
            EXPECT(0, "message from rank %d wrong at word %d", prev, i);
            break;
        }
    check_allgather(b, 1);
    CHECK_OK(zn_boot_barrier(b));
    wait_closed(3000, 0);
    /* Quiet strays stay open until the listener is destroyed: they cost only a descriptor. */
    report_open("the next rank's bootstrap listener", 0);
    CHECK_OK(zn_boot_barrier(b));
    char *log = read_log();
    check_log(log + log_mark, "this rank's listener", ": it did not present this job's magic",
              ": message length out of bounds", ": Protocol error", ": malformed HELLO");
    free(log);
    check_allgather(b, 2);
    close_strays();
    zn_boot_destroy(b);
    if (failures) {
        dump_log();
        fprintf(report, "[%d] boot_stray: %d failure(s)\n", rank, failures);
        return 1;
    }
    unlink(log_path);
    if (rank == 0)
        printf("boot_stray: %d ranks, strays closed and logged, traffic intact\n", nranks);
    return 0;
}
