/*
 * Tests of zinc's IB net (src/net/ib*.c) through ibemu, the verbs emulation: ctest sets
 * ZINC_IBVERBS_LIB to libzinc-ibemu.so. One mode per ctest entry:
 *
 *   hca        ZINC_IB_HCA matching (no devices needed)
 *   wire       the handshake message: round trip and every rejected field
 *   nodev      with no usable device, devices() is 0 and the reason is given
 *   data       two processes: listen/connect/accept, properties, isend/irecv by tag (0 B to
 *              1 MB, several in flight), grouped receives matched out of order, iflush, two
 *              QPs per connection
 *   fault      an injected error completion fails test() with ncclRemoteError naming the
 *              status, vendor error, QP and peer
 *   peerdeath  the receiving process dies: the send fails (retries exceeded, or the hangup)
 *   senderdeath  the sending process dies: a waiting receive fails instead of hanging
 *   lateack    the receiver takes the message and exits before the sender's NIC has the
 *              acknowledgement (the emulation holds acknowledgements back 300 ms): the send
 *              completes; it must not fail because the peer hung up first
 *   portdown, qpfatal  an async event (port down, QP fatal) fails the connection it touches
 *   rma        the one-sided extension (net_layer.h, zn_net_ib_rma): the receiver hands out keys of
 *              its registrations and then only watches memory; the sender's writes land (1 MB
 *              and many small ones), a flag written after data is seen only after it (two QPs
 *              per connection), and writes outside the keyed range are refused
 *   rmadead    a one-sided write to a process that died fails (retries exceeded, or the
 *              hangup) naming the peer; check() sees the peer gone
 */
#include "net/ib.h"
#include "net/net_layer.h"
#include "test_fabric.h"
#include "util/log.h"
#include "util/err.h"
#include "util/param.h"

#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c)                                                                                \
    do {                                                                                        \
        if (!(c)) {                                                                             \
            fprintf(stderr, "[%d] %s:%d: FAIL: %s (last error: %s)\n", (int)getpid(), __FILE__, \
                    __LINE__, #c, zn_last_error());                                             \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static const ncclNet_t *net = &zn_net_ib;
enum { GUARD_S = 30 };

/* ---------------------------------------------------------------------------------------
 * hca, wire, nodev
 * ------------------------------------------------------------------------------------- */
static void test_hca(void)
{
    CHECK(zn_net_ib_hca_match("", "mlx5_0", 1));
    CHECK(zn_net_ib_hca_match("mlx5", "mlx5_10", 1)); /* prefixes */
    CHECK(!zn_net_ib_hca_match("=mlx5", "mlx5_10", 1));
    CHECK(zn_net_ib_hca_match("=mlx5_1", "mlx5_1", 2));
    CHECK(!zn_net_ib_hca_match("=mlx5_1", "mlx5_10", 1));
    CHECK(zn_net_ib_hca_match("mlx5_0:1,mlx5_1", "mlx5_0", 1));
    CHECK(!zn_net_ib_hca_match("mlx5_0:1,mlx5_1", "mlx5_0", 2));
    CHECK(zn_net_ib_hca_match("mlx5_0:1,mlx5_1", "mlx5_1", 2));
    CHECK(!zn_net_ib_hca_match("mlx5_0:1,mlx5_1", "mlx4_0", 1));
    CHECK(!zn_net_ib_hca_match("^mlx5_0", "mlx5_0", 1));
    CHECK(zn_net_ib_hca_match("^mlx5_0", "bnxt_re0", 1));
    CHECK(!zn_net_ib_hca_match("^=mlx5_0:2", "mlx5_0", 2));
    CHECK(zn_net_ib_hca_match("^=mlx5_0:2", "mlx5_0", 1));
    CHECK(zn_net_ib_hca_match("^=mlx5_0:2", "mlx5_00", 2));
    CHECK(!zn_net_ib_hca_match("mlx5_0:x", "mlx5_0", 1)); /* a bad port matches nothing */
    CHECK(zn_net_ib_hca_match("mlx5_0:", "mlx5_0", 2));   /* an empty port is any port */
    CHECK(zn_net_ib_hca_match(",,mlx5_0,", "mlx5_0", 1)); /* empty items are ignored */
    /* NCCL 2.30's name:port:rail:plane; empty fields unset, a bad or fifth field no match. */
    int rail, plane;
    CHECK(zn_net_ib_hca_lookup("mlx5_1,mlx5_0:1:3:1", "mlx5_0", 1, &rail, &plane));
    CHECK(rail == 3 && plane == 1);
    CHECK(!zn_net_ib_hca_lookup("mlx5_0:2:3:1", "mlx5_0", 1, &rail, &plane));
    CHECK(zn_net_ib_hca_lookup("mlx5_0::7", "mlx5_0", 2, &rail, &plane));
    CHECK(rail == 7 && plane == NCCL_NET_ID_UNDEF);
    CHECK(zn_net_ib_hca_lookup("mlx5_0:1::2", "mlx5_0", 1, &rail, &plane));
    CHECK(rail == NCCL_NET_ID_UNDEF && plane == 2);
    CHECK(zn_net_ib_hca_lookup("mlx5_0:1", "mlx5_0", 1, &rail, &plane));
    CHECK(rail == NCCL_NET_ID_UNDEF && plane == NCCL_NET_ID_UNDEF);
    CHECK(zn_net_ib_hca_lookup("^mlx5_1:1:3:1", "mlx5_0", 1, &rail, &plane));
    CHECK(rail == NCCL_NET_ID_UNDEF && plane == NCCL_NET_ID_UNDEF); /* excludes name none */
    CHECK(!zn_net_ib_hca_match("mlx5_0:1:x", "mlx5_0", 1));
    CHECK(!zn_net_ib_hca_match("mlx5_0:1:3:40000", "mlx5_0", 1)); /* planes are int16 */
    CHECK(!zn_net_ib_hca_match("mlx5_0:1:3:1:0", "mlx5_0", 1));
}

static void test_wire(void)
{
    struct zn_ib_wire w = { .listen_magic = 0x1122334455667788ull,
                            .nqps = 3,
                            .lid = 0x1234,
                            .link_layer = IBV_LINK_LAYER_ETHERNET,
                            .mtu = IBV_MTU_1024,
                            .addr = 0xdeadbeef000ull,
                            .rkey = 0xcafe,
                            .qpn = { 7, 0x123456, 9 } };
    for (int i = 0; i < 16; i++) w.gid[i] = (uint8_t)(i * 17);
    uint8_t buf[ZN_IB_WIRE_BYTES];
    zn_net_ib_wire_encode(&w, buf);
    struct zn_ib_wire v;
    const char *why;
    CHECK(zn_net_ib_wire_decode(buf, sizeof(buf), &v, &why) == 0);
    CHECK(memcmp(&v, &w, sizeof(v)) == 0);
    CHECK(zn_net_ib_wire_decode(buf, sizeof(buf) - 1, &v, &why) != 0 && why);
    CHECK(zn_net_ib_wire_decode(buf, 3, &v, &why) != 0);
    /* One corrupted field at a time: magic, version, length, QP count, link layer, MTU. */
    static const struct {
        int off;
        uint8_t val;
    } bad[] = {
        { 0, 0 }, { 4, 9 }, { 8, 1 }, { 6, 0 }, { 6, 17 }, { 22, 7 }, { 23, 0 }, { 23, 6 }
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint8_t b[sizeof(buf)];
        memcpy(b, buf, sizeof(b));
        b[bad[i].off] = bad[i].val;
        why = NULL;
        CHECK(zn_net_ib_wire_decode(b, sizeof(b), &v, &why) != 0 && why != NULL);
    }
    /* The MAC: taken with the listener's key only, and over every byte before it. */
    uint8_t key[ZN_IB_KEY_BYTES] = { 9 };
    zn_net_ib_wire_sign(buf, key);
    CHECK(zn_net_ib_wire_verify(buf, key));
    CHECK(zn_net_ib_wire_decode(buf, sizeof(buf), &v, &why) == 0);
    CHECK(memcmp(v.mac, buf + sizeof(buf) - 32, 32) == 0);
    key[0] ^= 1;
    CHECK(!zn_net_ib_wire_verify(buf, key));
    key[0] ^= 1;
    buf[ZN_IB_WIRE_HDR + 4] ^= 1; /* the rkey */
    CHECK(!zn_net_ib_wire_verify(buf, key));
    buf[ZN_IB_WIRE_HDR + 4] ^= 1;
    buf[ZN_IB_WIRE_HDR + ZN_IB_WIRE_BODY] ^= 1; /* the nonce */
    CHECK(!zn_net_ib_wire_verify(buf, key));
}

/* Log lines that say why IB is not used (ZINC_DEBUG=INFO in this mode). */
static int why_lines;
static void count_why(const char *line)
{
    if (strstr(line, "IB not used: ")) why_lines++;
    fputs(line, stderr);
}

/* Without a usable device: the registry leaves IB out, says why exactly once at INFO level
 * (however many contexts, one per communicator, are opened on the net), and keeps the reason
 * for zinc-info; the socket net is used. */
static void test_nodev(void)
{
    zn_log_set_sink(count_why);
    const struct zn_net *sel = NULL;
    CHECK(zn_net_select(&sel) == ncclSuccess && strcmp(sel->name, "Socket") == 0);
    CHECK(zn_net_find("IB") == NULL);
    void *ctx[3];
    for (int i = 0; i < 3; i++) {
        CHECK(net->init(&ctx[i], (uint64_t)i + 1, NULL, NULL, NULL) == ncclSuccess);
        int n = -1;
        CHECK(net->devices(&n) == ncclSuccess && n == 0);
    }
    const char *why = NULL;
    CHECK(zn_net_ib_devices_init(&why) == 0 && why != NULL);
    CHECK(zn_net_why("IB") != NULL && strcmp(zn_net_why("IB"), zn_net_ib_why()) == 0);
    CHECK(zn_net_why("Socket") == NULL);
    for (int i = 0; i < 3; i++) CHECK(net->finalize(ctx[i]) == ncclSuccess);
    zn_log_set_sink(NULL);
    printf("ib net without devices: %s (said %d time(s))\n", why, why_lines);
    CHECK(why_lines == 1);
}

/* ---------------------------------------------------------------------------------------
 * Two processes: the child listens and receives, the parent connects and sends.
 * ------------------------------------------------------------------------------------- */
static void deadline_check(time_t end)
{
    CHECK(time(NULL) < end);
}

static void *net_open(void)
{
    void *ctx;
    CHECK(net->init(&ctx, 1, NULL, NULL, NULL) == ncclSuccess);
    int n = 0;
    CHECK(net->devices(&n) == ncclSuccess && n >= 1);
    return ctx;
}

static void *receiver_setup(void *ctx, int fd)
{
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void *lc = NULL, *rc = NULL;
    CHECK(net->listen(ctx, 0, handle, &lc) == ncclSuccess);
    CHECK(write(fd, handle, sizeof(handle)) == (ssize_t)sizeof(handle));
    for (time_t end = time(NULL) + GUARD_S; !rc; deadline_check(end))
        CHECK(net->accept(lc, &rc, NULL) == ncclSuccess);
    CHECK(net->closeListen(lc) == ncclSuccess);
    return rc;
}

static void *sender_setup(void *ctx, int fd)
{
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    CHECK(read(fd, handle, sizeof(handle)) == (ssize_t)sizeof(handle));
    void *sc = NULL;
    for (time_t end = time(NULL) + GUARD_S; !sc; deadline_check(end))
        CHECK(net->connect(ctx, 0, handle, &sc, NULL) == ncclSuccess);
    return sc;
}

static ncclResult_t wait_req(void *req, int *sizes)
{
    int done = 0;
    for (time_t end = time(NULL) + GUARD_S; !done; deadline_check(end)) {
        ncclResult_t r = net->test(req, &done, sizes);
        if (r != ncclSuccess) return r;
    }
    return ncclSuccess;
}

static uint8_t pat(size_t i, int seed)
{
    return (uint8_t)(i * 7 + (size_t)seed * 13 + (i >> 9));
}

enum { NSIZES = 6, BIG = 1 << 20 };
static const size_t sizes_tab[NSIZES] = { 0, 1, 4097, 65536, 300000, BIG };

static void reap_ok(pid_t pid)
{
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void *post_recv(void *rc, int n, void **data, size_t *sizes, int *tags, void **mh)
{
    void *req = NULL;
    for (time_t end = time(NULL) + GUARD_S; !req; deadline_check(end))
        CHECK(net->irecv(rc, n, data, sizes, tags, mh, NULL, &req) == ncclSuccess);
    return req;
}

static void *post_send(void *sc, void *data, size_t size, int tag, void *mh)
{
    void *req = NULL;
    for (time_t end = time(NULL) + GUARD_S; !req; deadline_check(end))
        CHECK(net->isend(sc, data, size, tag, mh, NULL, &req) == ncclSuccess);
    return req;
}

enum { NLOOP = 80, GROUP_AT = NSIZES * BIG + 4096 * NSIZES };

static void data_child(int fd)
{
    void *ctx = net_open(), *rc = receiver_setup(ctx, fd);
    size_t len = GROUP_AT + 3 * 4096;
    uint8_t *buf = calloc(1, len);
    void *mh, *mh2, *gpu_mh;
    CHECK(net->regMr(rc, buf, len, NCCL_PTR_HOST, &mh) == ncclSuccess);
    CHECK(net->regMr(rc, buf + 100, 1000, NCCL_PTR_HOST, &mh2) == ncclSuccess && mh2 == mh);
    CHECK(net->deregMr(rc, mh2) == ncclSuccess);
    /* A size that runs past the end of the address space is refused, not wrapped. */
    void *bad = NULL;
    CHECK(net->regMr(rc, buf, SIZE_MAX, NCCL_PTR_HOST, &bad) == ncclInvalidArgument && !bad);
    /* Several receives in flight, each posted larger than what is sent. */
    void *req[NSIZES];
    for (int i = 0; i < NSIZES; i++) {
        void *d = buf + i * (BIG + 4096);
        size_t sz = sizes_tab[i] + 10;
        int tag = 100 + i;
        req[i] = post_recv(rc, 1, &d, &sz, &tag, &mh);
    }
    for (int i = 0; i < NSIZES; i++) {
        int got = -1;
        CHECK(wait_req(req[i], &got) == ncclSuccess && got == (int)sizes_tab[i]);
        for (size_t k = 0; k < sizes_tab[i]; k++) CHECK(buf[i * (BIG + 4096) + k] == pat(k, i));
    }
    /* A grouped receive, matched by tag whatever order the sends come in. */
    void *gd[3] = { buf + GROUP_AT, buf + GROUP_AT + 4096, buf + GROUP_AT + 8192 };
    size_t gs[3] = { 1000, 2000, 3000 };
    int gt[3] = { 7, 8, 9 }, got[3] = { -1, -1, -1 };
    void *gm[3] = { mh, mh, mh };
    CHECK(wait_req(post_recv(rc, 3, gd, gs, gt, gm), got) == ncclSuccess);
    CHECK(got[0] == 10 && got[1] == 0 && got[2] == 3000);
    for (int k = 0; k < 10; k++) CHECK(buf[GROUP_AT + k] == pat(k, 7));
    for (int k = 0; k < 3000; k++) CHECK(buf[GROUP_AT + 8192 + k] == pat(k, 9));
    /* iflush: nothing to do for host memory; an RDMA read for GPU memory (host memory
     * registered as NCCL_PTR_CUDA stands in for it: the emulation cannot tell). */
    void *freq = (void *)1;
    int one = 1;
    CHECK(net->iflush(rc, 1, gd, &one, gm, &freq) == ncclSuccess && freq == NULL);
    CHECK(net->regMr(rc, buf, 4096, NCCL_PTR_CUDA, &gpu_mh) == ncclSuccess && gpu_mh != mh);
    void *fd_ = buf;
    CHECK(net->iflush(rc, 1, &fd_, &one, &gpu_mh, &freq) == ncclSuccess && freq != NULL);
    CHECK(wait_req(freq, NULL) == ncclSuccess);
    CHECK(net->deregMr(rc, gpu_mh) == ncclSuccess);
    /* More messages than FIFO slots, one at a time. */
    for (int i = 0; i < NLOOP; i++) {
        void *d = buf;
        size_t sz = 64;
        int tag = i, n = -1;
        CHECK(wait_req(post_recv(rc, 1, &d, &sz, &tag, &mh), &n) == ncclSuccess && n == 64);
        CHECK(buf[0] == (uint8_t)i && buf[63] == (uint8_t)(i * 3));
    }
    CHECK(net->deregMr(rc, mh) == ncclSuccess);
    CHECK(net->closeRecv(rc) == ncclSuccess);
    CHECK(net->finalize(ctx) == ncclSuccess);
    free(buf);
}

static void check_properties(void)
{
    ncclNetProperties_t p;
    CHECK(net->getProperties(0, &p) == ncclSuccess);
    CHECK(strcmp(p.name, "mlx5_0") == 0 && p.port == 1 && p.speed == 400000);
    CHECK((p.ptrSupport & NCCL_PTR_HOST) && (p.ptrSupport & NCCL_PTR_DMABUF));
    CHECK(p.maxRecvs == ZN_IB_MAX_RECVS && p.regIsGlobal == 1 && p.vProps.ndevs == 1);
    CHECK(p.railId == NCCL_NET_ID_UNDEF && p.planeId == NCCL_NET_ID_UNDEF); /* no ZINC_IB_HCA */
    CHECK(net->getProperties(5, &p) == ncclInvalidArgument);
}

static void test_data(void)
{
    int fd;
    pid_t pid = ibemu_test_spawn(data_child, &fd);
    void *ctx = net_open(), *sc = sender_setup(ctx, fd);
    check_properties();
    uint8_t *buf = malloc(BIG);
    void *mh;
    CHECK(net->regMr(sc, buf, BIG, NCCL_PTR_HOST, &mh) == ncclSuccess);
    for (int i = 0; i < NSIZES; i++) {
        for (size_t k = 0; k < sizes_tab[i]; k++) buf[k] = pat(k, i);
        int got = -1;
        CHECK(wait_req(post_send(sc, buf, sizes_tab[i], 100 + i, mh), &got) == ncclSuccess);
        CHECK(got == (int)sizes_tab[i]);
    }
    for (int k = 0; k < 3000; k++) buf[k] = pat(k, 9);
    for (int k = 0; k < 10; k++) buf[4096 + k] = pat(k, 7);
    void *r9 = post_send(sc, buf, 3000, 9, mh);
    void *r7 = post_send(sc, buf + 4096, 10, 7, mh);
    void *r8 = post_send(sc, buf, 0, 8, mh);
    CHECK(wait_req(r7, NULL) == ncclSuccess && wait_req(r9, NULL) == ncclSuccess);
    CHECK(wait_req(r8, NULL) == ncclSuccess);
    for (int i = 0; i < NLOOP; i++) {
        buf[0] = (uint8_t)i;
        buf[63] = (uint8_t)(i * 3);
        CHECK(wait_req(post_send(sc, buf, 64, i, mh), NULL) == ncclSuccess);
    }
    reap_ok(pid);
    CHECK(net->deregMr(sc, mh) == ncclSuccess);
    CHECK(net->closeSend(sc) == ncclSuccess);
    CHECK(net->finalize(ctx) == ncclSuccess);
    free(buf);
}

/* ---------------------------------------------------------------------------------------
 * fault, peerdeath
 * ------------------------------------------------------------------------------------- */
static void recv_two_child(int fd)
{
    unsetenv("ZINC_IBEMU_FAULT");
    void *ctx = net_open(), *rc = receiver_setup(ctx, fd);
    static uint8_t buf[8192];
    void *mh;
    CHECK(net->regMr(rc, buf, sizeof(buf), NCCL_PTR_HOST, &mh) == ncclSuccess);
    void *req[2];
    for (int i = 0; i < 2; i++) {
        void *d = buf + 4096 * i;
        size_t sz = 4096;
        int tag = i;
        req[i] = post_recv(rc, 1, &d, &sz, &tag, &mh);
    }
    /* Drive the receives (their FIFO entries go out once the sender's QPs are up) until the
     * sender has seen both, or is done. */
    for (time_t end = time(NULL) + GUARD_S;; deadline_check(end)) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 0) == 1) break;
        for (int i = 0; i < 2; i++) {
            int done = 0;
            if (req[i] && (net->test(req[i], &done, NULL) != ncclSuccess || done)) req[i] = NULL;
        }
    }
    char c;
    CHECK(read(fd, &c, 1) == 1); /* the sender has seen both receives (or is done) */
    if (c == 'x') _exit(0);      /* peerdeath: die with the connection open */
    net->deregMr(rc, mh);
    net->closeRecv(rc);
    net->finalize(ctx);
}

/* The sender's FIFO shows both receives: nothing the receiver does later can stop a send.
 * (The sender's QPs come up as its side of the handshake progresses.) */
static void wait_fifo(struct zn_ib_comm *c)
{
    for (time_t end = time(NULL) + GUARD_S;; deadline_check(end))
        if (zn_net_ib_conn_progress(c) == ncclSuccess && !c->hs &&
            atomic_load(&c->sh->fifo[0].idx) == 1 && atomic_load(&c->sh->fifo[1].idx) == 2)
            return;
}

static void test_fault(void)
{
    int fd;
    pid_t pid = ibemu_test_spawn(recv_two_child, &fd);
    void *ctx = net_open(), *sc = sender_setup(ctx, fd);
    static uint8_t buf[4096];
    void *mh;
    CHECK(net->regMr(sc, buf, sizeof(buf), NCCL_PTR_HOST, &mh) == ncclSuccess);
    wait_fifo(sc);
    CHECK(wait_req(post_send(sc, buf, 100, 0, mh), NULL) == ncclSuccess);
    /* ZINC_IBEMU_FAULT=wc=2:REM_ACCESS_ERR:0x99 fails the second send's completion. */
    CHECK(wait_req(post_send(sc, buf, 100, 1, mh), NULL) == ncclRemoteError);
    const char *e = zn_last_error();
    CHECK(strstr(e, "remote access error") && strstr(e, "vendor error 0x99"));
    CHECK(strstr(e, "on QP 0x") && strstr(e, ((struct zn_ib_comm *)sc)->peer));
    void *req = (void *)1;
    CHECK(net->isend(sc, buf, 1, 2, mh, NULL, &req) == ncclRemoteError); /* sticky */
    CHECK(write(fd, "d", 1) == 1);
    reap_ok(pid);
    net->deregMr(sc, mh);
    net->closeSend(sc);
    net->finalize(ctx);
}

static void test_peerdeath(void)
{
    int fd;
    pid_t pid = ibemu_test_spawn(recv_two_child, &fd);
    void *ctx = net_open(), *sc = sender_setup(ctx, fd);
    static uint8_t buf[4096];
    void *mh;
    CHECK(net->regMr(sc, buf, sizeof(buf), NCCL_PTR_HOST, &mh) == ncclSuccess);
    wait_fifo(sc);
    CHECK(write(fd, "x", 1) == 1);
    reap_ok(pid);
    /* ZINC_IB_TIMEOUT=10, ZINC_IB_RETRY_CNT=1: 4.096 us * 2^10 * 2 = 8.4 ms of retries. */
    CHECK(wait_req(post_send(sc, buf, 100, 0, mh), NULL) == ncclRemoteError);
    /* Whichever the net sees first: the handshake socket's hangup or the retries running out. */
    const char *e = zn_last_error();
    CHECK(strstr(e, "retry counter exceeded") || strstr(e, "closed by the peer"));
    CHECK(strstr(e, ((struct zn_ib_comm *)sc)->peer));
    net->deregMr(sc, mh);
    net->closeSend(sc);
    net->finalize(ctx);
}

/* The sending process dies while a receive waits: the receive fails, it does not hang. */
static void sender_dies_child(int fd)
{
    void *ctx = net_open();
    sender_setup(ctx, fd);
    char c;
    CHECK(read(fd, &c, 1) == 1);
    _exit(0);
}

static void test_senderdeath(void)
{
    int fd;
    pid_t pid = ibemu_test_spawn(sender_dies_child, &fd);
    void *ctx = net_open(), *rc = receiver_setup(ctx, fd);
    static uint8_t buf[4096];
    void *mh, *d = buf;
    size_t sz = sizeof(buf);
    int tag = 1;
    CHECK(net->regMr(rc, buf, sizeof(buf), NCCL_PTR_HOST, &mh) == ncclSuccess);
    void *req = post_recv(rc, 1, &d, &sz, &tag, &mh);
    CHECK(write(fd, "x", 1) == 1);
    reap_ok(pid);
    CHECK(wait_req(req, NULL) == ncclRemoteError);
    CHECK(strstr(zn_last_error(), "closed by the peer"));
    CHECK(strstr(zn_last_error(), ((struct zn_ib_comm *)rc)->peer));
    net->deregMr(rc, mh);
    net->closeRecv(rc);
    net->finalize(ctx);
}

/* Receives one message, then exits at once (its queue pairs and handshake socket go with it). */
static void recv_one_exit_child(int fd)
{
    void *ctx = net_open(), *rc = receiver_setup(ctx, fd);
    static uint8_t buf[4096];
    void *mh, *d = buf;
    size_t sz = sizeof(buf);
    int tag = 0;
    CHECK(net->regMr(rc, buf, sizeof(buf), NCCL_PTR_HOST, &mh) == ncclSuccess);
    CHECK(wait_req(post_recv(rc, 1, &d, &sz, &tag, &mh), NULL) == ncclSuccess);
    for (int i = 0; i < 100; i++) CHECK(buf[i] == pat((size_t)i, 5));
    _exit(0);
}

static void test_lateack(void)
{
    int fd;
    pid_t pid = ibemu_test_spawn(recv_one_exit_child, &fd);
    void *ctx = net_open(), *sc = sender_setup(ctx, fd);
    static uint8_t buf[4096];
    for (int i = 0; i < 100; i++) buf[i] = pat((size_t)i, 5);
    void *mh;
    CHECK(net->regMr(sc, buf, sizeof(buf), NCCL_PTR_HOST, &mh) == ncclSuccess);
    void *req = post_send(sc, buf, 100, 0, mh);
    /* Drive the send until the receiver has it and is gone; its acknowledgement is held back. */
    for (time_t end = time(NULL) + GUARD_S;; deadline_check(end)) {
        int st, done = 0;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
            break;
        }
        CHECK(net->test(req, &done, NULL) == ncclSuccess && !done);
    }
    CHECK(wait_req(req, NULL) == ncclSuccess);
    net->deregMr(sc, mh);
    net->closeSend(sc);
    net->finalize(ctx);
}

/* Both ends in this process (connect and accept never block). */
static void loop_pair(void *ctx, void **sc, void **rc)
{
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void *lc = NULL;
    *sc = *rc = NULL;
    CHECK(net->listen(ctx, 0, handle, &lc) == ncclSuccess);
    for (time_t end = time(NULL) + GUARD_S; !*sc || !*rc; deadline_check(end)) {
        if (!*sc) CHECK(net->connect(ctx, 0, handle, sc, NULL) == ncclSuccess);
        if (!*rc) CHECK(net->accept(lc, rc, NULL) == ncclSuccess);
    }
    CHECK(net->closeListen(lc) == ncclSuccess);
}

/* An async event (ZINC_IBEMU_FAULT=portdown=1 or qpfatal=1: the port goes down, or the QP of
 * the first completion takes a fatal error) fails a receive that waits on the connection. */
static void test_async(void)
{
    void *ctx = net_open(), *sc, *rc, *mh;
    loop_pair(ctx, &sc, &rc);
    for (time_t end = time(NULL) + GUARD_S; ((struct zn_ib_comm *)sc)->hs; deadline_check(end))
        CHECK(zn_net_ib_conn_progress(sc) == ncclSuccess); /* the sender's QPs up */
    static uint8_t buf[4096];
    void *d = buf;
    size_t sz = sizeof(buf);
    int tag = 3;
    CHECK(net->regMr(rc, buf, sizeof(buf), NCCL_PTR_HOST, &mh) == ncclSuccess);
    void *req = post_recv(rc, 1, &d, &sz, &tag, &mh); /* no send: it can only fail */
    CHECK(wait_req(req, NULL) == ncclRemoteError);
    const char *e = zn_last_error();
    CHECK(strstr(e, ((struct zn_ib_comm *)rc)->peer));
    CHECK(strstr(e, "port down") || strstr(e, "catastrophic") || strstr(e, "flushed"));
    net->deregMr(rc, mh);
    net->closeRecv(rc);
    net->closeSend(sc);
    net->finalize(ctx);
}

/* ---------------------------------------------------------------------------------------
 * rma, rmadead: the one-sided extension
 * ------------------------------------------------------------------------------------- */
static const struct zn_net_rma_ops *rma = &zn_net_ib_rma;

enum { RMA_GUARD = 4096, RMA_SMALL = 20, RMA_PIECE = 4097 };
/* The sender's buffer: the data of both rounds, then (aligned) the flag values. */
enum { RMA_LEN = ((BIG + RMA_SMALL * RMA_PIECE + 63) & ~63) + 64 };

/* The receiver's memory: a guard page, the keyed range (BIG bytes), a guard page; and the
 * flag the sender raises after each round. */
struct rma_mem {
    uint8_t bytes[RMA_GUARD + BIG + RMA_GUARD];
    uint64_t flag;
};

/* Register, hand the sender the keys of the range and the flag over fd, return the comm. */
static void *rma_receiver(void *ctx, int fd, struct rma_mem *m, void **mh)
{
    void *rc = receiver_setup(ctx, fd);
    struct zn_net_rkey keys[2];
    CHECK(net->regMr(rc, m, sizeof(*m), NCCL_PTR_HOST, mh) == ncclSuccess);
    CHECK(rma->key(rc, *mh, m->bytes + RMA_GUARD, BIG, &keys[0]) == ncclSuccess);
    CHECK(rma->key(rc, *mh, &m->flag, sizeof(m->flag), &keys[1]) == ncclSuccess);
    CHECK(keys[0].size == BIG && keys[0].addr == (uintptr_t)(m->bytes + RMA_GUARD));
    struct zn_net_rkey bad; /* running past the registration's last page */
    CHECK(rma->key(rc, *mh, m, sizeof(*m) + 8192, &bad) == ncclInvalidArgument);
    CHECK(write(fd, keys, sizeof(keys)) == (ssize_t)sizeof(keys));
    return rc;
}

/* Spin on the flag (plain memory: no net call) until it reaches want. */
static void rma_wait_flag(struct rma_mem *m, uint64_t want)
{
    for (time_t end = time(NULL) + GUARD_S;; deadline_check(end))
        if (__atomic_load_n(&m->flag, __ATOMIC_ACQUIRE) >= want) return;
}

static void rma_child(int fd)
{
    static struct rma_mem m;
    void *ctx = net_open(), *mh;
    void *rc = rma_receiver(ctx, fd, &m, &mh);
    uint8_t *r = m.bytes + RMA_GUARD;
    rma_wait_flag(&m, 1); /* round 1: one 1 MB write, then the flag */
    CHECK(m.flag == 1);
    for (size_t k = 0; k < BIG; k++) CHECK(r[k] == pat(k, 1));
    CHECK(write(fd, "1", 1) == 1); /* checked: the sender may overwrite it */
    rma_wait_flag(&m, 2);          /* round 2: RMA_SMALL writes, one of 0 bytes, then the flag */
    CHECK(m.flag == 2);
    for (int i = 0; i < RMA_SMALL; i++)
        for (size_t k = 0; k < RMA_PIECE; k++)
            CHECK(r[(size_t)i * RMA_PIECE + k] == pat(k, 100 + i));
    for (size_t k = RMA_SMALL * RMA_PIECE; k < BIG; k++) CHECK(r[k] == pat(k, 1));
    CHECK(write(fd, "2", 1) == 1);
    rma_wait_flag(&m, 3); /* the refused writes came before this flag: nothing of theirs */
    for (size_t k = 0; k < RMA_GUARD; k++)
        CHECK(m.bytes[k] == 0 && m.bytes[RMA_GUARD + BIG + k] == 0);
    char c;
    CHECK(write(fd, "k", 1) == 1);
    CHECK(read(fd, &c, 1) == 1);
    if (c == 'x') _exit(0); /* rmadead: die with the connection open */
    CHECK(net->deregMr(rc, mh) == ncclSuccess);
    CHECK(net->closeRecv(rc) == ncclSuccess);
    CHECK(net->finalize(ctx) == ncclSuccess);
}

static ncclResult_t rma_put(void *sc, void *mh, void *src, size_t size,
                            const struct zn_net_rkey *dst, uint64_t off, void **req)
{
    *req = NULL;
    for (time_t end = time(NULL) + GUARD_S; !*req; deadline_check(end)) {
        ncclResult_t r = rma->write(sc, mh, src, size, dst, off, req);
        if (r != ncclSuccess) return r;
    }
    return ncclSuccess;
}

/* The receiver has checked round c (it says so over fd, out of band). */
static void rma_checked(int fd, char c)
{
    char got = 0;
    CHECK(read(fd, &got, 1) == 1 && got == c);
}

/* The sender's rounds: every write of a round is posted before any is waited for. */
static void rma_rounds(int fd, void *sc, void *mh, uint8_t *buf, uint64_t *flag,
                       const struct zn_net_rkey *keys)
{
    void *req[RMA_SMALL + 3];
    for (size_t k = 0; k < BIG; k++) buf[k] = pat(k, 1);
    *flag = 1;
    CHECK(rma_put(sc, mh, buf, BIG, &keys[0], 0, &req[0]) == ncclSuccess);
    CHECK(rma_put(sc, mh, flag, 8, &keys[1], 0, &req[1]) == ncclSuccess);
    int got = -1;
    CHECK(wait_req(req[0], &got) == ncclSuccess && got == BIG);
    CHECK(wait_req(req[1], NULL) == ncclSuccess);
    rma_checked(fd, '1');
    uint8_t *small = buf + BIG;
    for (int i = 0; i < RMA_SMALL; i++) {
        uint8_t *src = small + (size_t)i * RMA_PIECE;
        for (size_t k = 0; k < RMA_PIECE; k++) src[k] = pat(k, 100 + i);
        CHECK(rma_put(sc, mh, src, RMA_PIECE, &keys[0], (uint64_t)i * RMA_PIECE, &req[i]) ==
              ncclSuccess);
    }
    CHECK(rma_put(sc, mh, small, 0, &keys[0], BIG, &req[RMA_SMALL]) == ncclSuccess);
    flag[1] = 2; /* each flag value in a word of its own, unchanged until its write is done */
    CHECK(rma_put(sc, mh, &flag[1], 8, &keys[1], 0, &req[RMA_SMALL + 1]) == ncclSuccess);
    for (int i = 0; i < RMA_SMALL + 2; i++) CHECK(wait_req(req[i], NULL) == ncclSuccess);
    rma_checked(fd, '2');
    /* Outside the keyed range: refused before anything is posted, naming why. */
    void *r = (void *)1;
    CHECK(rma->write(sc, mh, buf, 2, &keys[0], BIG - 1, &r) == ncclInvalidArgument && !r);
    CHECK(strstr(zn_last_error(), "outside the peer's registered range"));
    CHECK(rma->write(sc, mh, buf, 1, &keys[0], BIG + 1, &r) == ncclInvalidArgument && !r);
    CHECK(rma->write(sc, mh, buf, 16, &keys[1], 0, &r) == ncclInvalidArgument && !r);
    uint8_t unreg[16];
    CHECK(rma->write(sc, mh, unreg, 16, &keys[0], 0, &r) == ncclInvalidArgument && !r);
    CHECK(strstr(zn_last_error(), "the source lies outside its registration"));
    flag[2] = 3;
    CHECK(rma_put(sc, mh, &flag[2], 8, &keys[1], 0, &req[0]) == ncclSuccess);
    CHECK(wait_req(req[0], NULL) == ncclSuccess);
}

/* The sender's side of an RMA test: a receiver process, a send comm to it, its keys, a
 * registered buffer, and the rounds of rma_rounds run (the receiver then waits for a verdict). */
struct rma_fix {
    pid_t pid;
    int fd;
    void *ctx, *sc, *mh;
    uint8_t *buf;
    struct zn_net_rkey keys[2];
};

static void rma_open(struct rma_fix *f)
{
    f->pid = ibemu_test_spawn(rma_child, &f->fd);
    f->ctx = net_open();
    f->sc = sender_setup(f->ctx, f->fd);
    CHECK(read(f->fd, f->keys, sizeof(f->keys)) == (ssize_t)sizeof(f->keys));
    f->buf = calloc(1, RMA_LEN);
    CHECK(net->regMr(f->sc, f->buf, RMA_LEN, NCCL_PTR_HOST, &f->mh) == ncclSuccess);
    rma_rounds(f->fd, f->sc, f->mh, f->buf, (uint64_t *)(f->buf + RMA_LEN - 64), f->keys);
    char c;
    CHECK(read(f->fd, &c, 1) == 1 && c == 'k');
}

static void test_rma(void)
{
    struct rma_fix f;
    rma_open(&f);
    int fd = f.fd;
    pid_t pid = f.pid;
    void *ctx = f.ctx, *sc = f.sc, *mh = f.mh;
    uint8_t *buf = f.buf;
    CHECK(write(fd, "d", 1) == 1);
    reap_ok(pid);
    CHECK(net->deregMr(sc, mh) == ncclSuccess);
    CHECK(net->closeSend(sc) == ncclSuccess);
    CHECK(net->finalize(ctx) == ncclSuccess);
    free(buf);
}

/* The receiver dies after the rounds: check() sees it gone, and a write posted afterwards
 * fails with an error completion (retries exceeded) or the hangup, naming the peer. */
static void test_rmadead(void)
{
    struct rma_fix f;
    rma_open(&f);
    int fd = f.fd;
    pid_t pid = f.pid;
    void *ctx = f.ctx, *sc = f.sc, *mh = f.mh, *req;
    uint8_t *buf = f.buf;
    struct zn_net_rkey *keys = f.keys;
    CHECK(write(fd, "x", 1) == 1);
    reap_ok(pid);
    int closed = 0;
    for (time_t end = time(NULL) + GUARD_S; !closed; deadline_check(end))
        CHECK(rma->check(sc, &closed) == ncclSuccess);
    CHECK(rma_put(sc, mh, buf, 4096, &keys[0], 0, &req) == ncclSuccess);
    CHECK(wait_req(req, NULL) == ncclRemoteError);
    const char *e = zn_last_error();
    CHECK(strstr(e, ((struct zn_ib_comm *)sc)->peer));
    CHECK((strstr(e, "retry counter exceeded") && strstr(e, "one-sided RDMA write")) ||
          strstr(e, "closed by the peer"));
    CHECK(rma->write(sc, mh, buf, 8, &keys[0], 0, &req) == ncclRemoteError); /* sticky */
    CHECK(net->deregMr(sc, mh) == ncclSuccess);
    CHECK(net->closeSend(sc) == ncclSuccess);
    CHECK(net->finalize(ctx) == ncclSuccess);
    free(buf);
}

/* The body of one mode, in the child of ibemu_test_run. */
static int run_mode(void *fn)
{
    (*(void (**)(void))fn)();
    return 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
        const char *env[5];
    } modes[] = {
        { "hca", test_hca, { NULL } },
        { "wire", test_wire, { NULL } },
        { "nodev",
          test_nodev,
          { "ZINC_IBVERBS_LIB=", "ZINC_IB_HCA==no_such_hca", "ZINC_DEBUG=INFO",
            "NCCL_NET_PLUGIN=none" } },
        { "data", test_data, { "ZINC_IB_QPS_PER_CONNECTION=2", NULL } },
        { "fault", test_fault, { "ZINC_IBEMU_FAULT=wc=2:REM_ACCESS_ERR:0x99", NULL } },
        { "peerdeath", test_peerdeath, { "ZINC_IB_TIMEOUT=10", "ZINC_IB_RETRY_CNT=1", NULL } },
        { "senderdeath", test_senderdeath, { NULL } },
        { "lateack", test_lateack, { "ZINC_IBEMU_ACK_DELAY_MS=300", NULL } },
        { "portdown", test_async, { "ZINC_IBEMU_FAULT=portdown=1", NULL } },
        { "qpfatal", test_async, { "ZINC_IBEMU_FAULT=qpfatal=1", NULL } },
        { "rma", test_rma, { "ZINC_IB_QPS_PER_CONNECTION=2", NULL } },
        { "rmadead",
          test_rmadead,
          { "ZINC_IB_QPS_PER_CONNECTION=2", "ZINC_IB_TIMEOUT=10", "ZINC_IB_RETRY_CNT=1", NULL } },
    };
    for (size_t i = 0; argc == 2 && i < sizeof(modes) / sizeof(modes[0]); i++) {
        if (strcmp(argv[1], modes[i].name) != 0) continue;
        for (int k = 0; modes[i].env[k]; k++) putenv((char *)modes[i].env[k]);
        char tag[64];
        snprintf(tag, sizeof(tag), "ibnet-%s", modes[i].name);
        void (*fn)(void) = modes[i].fn;
        int rc = ibemu_test_run(tag, run_mode, &fn);
        if (rc == 0) printf("ib net %s: ok\n", modes[i].name);
        return rc;
    }
    fprintf(stderr,
            "usage: %s hca|wire|nodev|data|fault|peerdeath|senderdeath|lateack|portdown|qpfatal|"
            "rma|rmadead\n",
            argv[0]);
    return 2;
}
