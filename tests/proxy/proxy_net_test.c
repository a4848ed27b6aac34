/*
 * test_proxy_net: the proxy's progress thread drives a socket-net connection between two
 * processes. Each process starts its own proxy; the ranks only post op descriptors through a
 * ring and read the ops' status words. More ops than the ring has slots, sizes 0, 1, odd and
 * 1 MiB, contents checked on the receiving side against the pattern the sender wrote; and a
 * peer that dies with a receive posted turns into an error, not a hang.
 */
#include "net/net_layer.h"
#include "proxy/progress.h"
#include "proxy/service.h"
#include "util/clock.h"
#include "util/err.h"
#include "zt.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOPS 600 /* > ZN_PROXY_RING: the poster meets a full ring and waits */

static const struct zn_net *NET;

static size_t op_size(int i)
{
    static const size_t sizes[] = { 0, 1, 4093, 65536, 1 << 20 };
    return i % 50 == 7 ? sizes[4] : sizes[i % 4];
}

static uint8_t pattern(int op, size_t k)
{
    return (uint8_t)(op * 131 + k * 7 + 1);
}

/* Post ops[0..n) through ring, waiting for the oldest whenever the ring is full, then wait
 * for all of them. */
static ncclResult_t post_all(struct zn_proxy_ring *ring, struct zn_proxy_netop *ops, int n)
{
    int64_t dl = zn_deadline_from_now();
    int waited = 0;
    for (int i = 0; i < n; i++) {
        while (zn_proxy_net_post(ring, &ops[i]) == -EAGAIN) {
            ncclResult_t r = zn_proxy_net_wait(&ops[waited++], dl, NULL);
            if (r != ncclSuccess) return r;
        }
    }
    for (; waited < n; waited++) {
        ncclResult_t r = zn_proxy_net_wait(&ops[waited], dl, NULL);
        if (r != ncclSuccess) return r;
    }
    return ncclSuccess;
}

/* The receiving process: listen, hand the handle over sock, accept, receive and check. */
static int receiver(int sock)
{
    char handle[NCCL_NET_HANDLE_MAXSIZE] = { 0 };
    void *lc = NULL, *rc = NULL;
    if (zn_proxy_acquire() != ncclSuccess) return 2;
    if (NET->ops->listen(NET->ctx, 0, handle, &lc) != ncclSuccess) return 3;
    if (write(sock, handle, sizeof(handle)) != sizeof(handle)) return 4;
    for (int64_t dl = zn_deadline_from_now(); !rc && zn_now_ns() < dl;)
        if (NET->ops->accept(lc, &rc, NULL) != ncclSuccess) return 5;
    if (!rc) return 6;
    struct zn_proxy_ring *ring;
    if (zn_proxy_ring_create("test recv", &ring) != ncclSuccess) return 7;
    static struct zn_proxy_netop ops[NOPS];
    for (int i = 0; i < NOPS; i++) {
        ops[i] = (struct zn_proxy_netop){
            .net = NET->ops, .comm = rc, .tag = i % 3, .size = op_size(i) + 16
        };
        ops[i].data = malloc(ops[i].size);
    }
    int bad = post_all(ring, ops, NOPS) == ncclSuccess ? 0 : -1;
    for (int i = 0; i < NOPS; i++) {
        if (bad < 0) {
            free(ops[i].data);
            continue;
        }
        const uint8_t *d = ops[i].data;
        if (ops[i].nbytes != op_size(i)) bad++;
        for (size_t k = 0; k < op_size(i) && !bad; k++) bad += d[k] != pattern(i, k);
        free(ops[i].data);
    }
    if (bad > 0) fprintf(stderr, "receiver: %d ops wrong\n", bad);
    /* The ring first: the progress thread must be done with the ops and the comm. */
    zn_proxy_ring_destroy(ring);
    NET->ops->closeRecv(rc);
    NET->ops->closeListen(lc);
    zn_proxy_release();
    return bad < 0 ? 8 : bad ? 9 : 0;
}

static int sender(int sock, int die_early)
{
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void *sc = NULL;
    if (read(sock, handle, sizeof(handle)) != sizeof(handle)) return 3;
    for (int64_t dl = zn_deadline_from_now(); !sc && zn_now_ns() < dl;)
        if (NET->ops->connect(NET->ctx, 0, handle, &sc, NULL) != ncclSuccess) return 4;
    if (!sc) return 5;
    if (die_early) _exit(0); /* with the connection open and nothing sent */
    if (zn_proxy_acquire() != ncclSuccess) return 2;
    struct zn_proxy_ring *ring;
    if (zn_proxy_ring_create("test send", &ring) != ncclSuccess) return 6;
    static struct zn_proxy_netop ops[NOPS];
    for (int i = 0; i < NOPS; i++) {
        ops[i] = (struct zn_proxy_netop){
            .net = NET->ops, .comm = sc, .is_send = 1, .tag = i % 3, .size = op_size(i), .peer = 0
        };
        uint8_t *d = malloc(op_size(i) + 1);
        for (size_t k = 0; k < op_size(i); k++) d[k] = pattern(i, k);
        ops[i].data = d;
    }
    ncclResult_t r = post_all(ring, ops, NOPS);
    for (int i = 0; i < NOPS; i++) free(ops[i].data);
    zn_proxy_ring_destroy(ring);
    NET->ops->closeSend(sc);
    zn_proxy_release();
    return r == ncclSuccess ? 0 : 7;
}

/* The receiver here, the sender in a child (forked before any thread starts). */
static int run_pair(int die_early, int *child_status)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        _exit(sender(sv[1], die_early));
    }
    close(sv[1]);
    int rc = receiver(sv[0]);
    close(sv[0]);
    waitpid(pid, child_status, 0);
    return rc;
}

ZT_TEST(ops_through_the_progress_thread)
{
    int st = -1;
    ZT_EQ_INT(run_pair(0, &st), 0);
    ZT_ASSERT(WIFEXITED(st));
    ZT_EQ_INT(WEXITSTATUS(st), 0);
}

/* The sender dies after connecting: the posted receives fail (the net reports the closed
 * connection), well before ZINC_TIMEOUT. */
ZT_TEST(dead_peer_is_an_error)
{
    int st = -1;
    ZT_EQ_INT(run_pair(1, &st), 8);
}

static char log_path[256];

static int log_has(const char *what)
{
    FILE *f = fopen(log_path, "r");
    if (!f) return 0;
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof(line), f)) found = strstr(line, what) != NULL;
    fclose(f);
    return found;
}

/* A receive nobody sends to: its wait ends at the deadline with an error naming the peer, and
 * the dump lists it with its tag and test count. One process, both ends of one connection. */
ZT_TEST(pending_op_dumped_and_wait_bounded)
{
    char handle[NCCL_NET_HANDLE_MAXSIZE] = { 0 };
    void *lc = NULL, *sc = NULL, *rc = NULL;
    ZT_OK(zn_proxy_acquire());
    ZT_OK(NET->ops->listen(NET->ctx, 0, handle, &lc));
    for (int64_t dl = zn_deadline_from_now(); (!sc || !rc) && zn_now_ns() < dl;) {
        if (!sc) ZT_OK(NET->ops->connect(NET->ctx, 0, handle, &sc, NULL));
        if (!rc) ZT_OK(NET->ops->accept(lc, &rc, NULL));
    }
    ZT_ASSERT(sc && rc);
    struct zn_proxy_ring *ring;
    ZT_OK(zn_proxy_ring_create("test pending", &ring));
    char buf[64];
    struct zn_proxy_netop op = {
        .net = NET->ops, .comm = rc, .tag = 77, .data = buf, .size = sizeof(buf), .peer = 3
    };
    ZT_OK(zn_proxy_net_post(ring, &op));
    int64_t t0 = zn_now_ns();
    ZT_EQ_INT(zn_proxy_net_wait(&op, t0 + 200000000, NULL), ncclRemoteError);
    ZT_ASSERT(zn_now_ns() - t0 < 5000000000LL);
    ZT_ASSERT(strstr(zn_last_error(), "receive of 64 bytes (tag 77) from rank 3") != NULL);
    zn_proxy_progress_dump();
    ZT_ASSERT(log_has("ring test pending: 1 ops in flight"));
    ZT_ASSERT(log_has("recv from rank 3, tag 77, 64 bytes: issued"));
    zn_proxy_ring_destroy(ring);
    NET->ops->closeSend(sc);
    NET->ops->closeRecv(rc);
    NET->ops->closeListen(lc);
    zn_proxy_release();
}

int main(void)
{
    snprintf(log_path, sizeof(log_path), "/tmp/zinc-test-proxy-net-%d.log", (int)getpid());
    setenv("ZINC_DEBUG_FILE", log_path, 1);
    if (zn_net_select(&NET) != ncclSuccess) {
        fprintf(stderr, "no net: %s\n", zn_last_error());
        return 1;
    }
    static const struct zt_case cases[] = { ZT_CASE(ops_through_the_progress_thread),
                                            ZT_CASE(dead_peer_is_an_error),
                                            ZT_CASE(pending_op_dumped_and_wait_bounded) };
    int rc = zt_run(cases, (int)(sizeof(cases) / sizeof(cases[0])));
    if (rc)
        fprintf(stderr, "log kept in %s\n", log_path);
    else
        unlink(log_path);
    return rc;
}
