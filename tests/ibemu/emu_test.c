/*
 * Tests of ibemu, the verbs emulation, on its own: linked against libzinc-ibemu.so and driven
 * through rdma-core's <infiniband/verbs.h> like an application (inline data-path calls
 * included). One mode per ctest entry:
 *
 *   rdma      two processes: RDMA write (multi-SGE, 3 MB), write with immediate, RDMA read back
 *   errors    two processes: bad rkey, missing remote-read access, out of bounds -> REM_ACCESS_ERR
 *             plus the flush of the next WR and the responder's QP_ACCESS_ERR event; bad lkey
 *   deadpeer  two processes: the peer exits; the write fails with RETRY_EXC_ERR
 *   state     one process: QP state machine errors, device/port/GID queries (IB and RoCE)
 *   rnr       one process, loopback: write with immediate and no receive -> RNR_RETRY_EXC_ERR
 *   overflow  one process, loopback: more completions than the CQ holds -> IBV_EVENT_CQ_ERR
 *   fault     one process, loopback: ZINC_IBEMU_FAULT fails the 2nd completion
 */
#include "test_fabric.h"

#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c)                                                                              \
    do {                                                                                      \
        if (!(c)) {                                                                           \
            fprintf(stderr, "[%d] %s:%d: FAIL: %s\n", (int)getpid(), __FILE__, __LINE__, #c); \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

enum { BUF = 4 << 20, GUARD_S = 30 };

struct side {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    uint8_t *buf;
};

struct wire {
    uint32_t qpn;
    uint16_t lid;
    union ibv_gid gid;
    uint64_t addr;
    uint32_t rkey;
};

static struct ibv_context *open_dev(int index)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    CHECK(list && n > index);
    struct ibv_context *ctx = ibv_open_device(list[index]);
    ibv_free_device_list(list);
    CHECK(ctx);
    return ctx;
}

static void side_init(struct side *s, struct ibv_context *ctx, int cqe, int mr_access)
{
    s->ctx = ctx;
    CHECK((s->pd = ibv_alloc_pd(ctx)) != NULL);
    CHECK((s->cq = ibv_create_cq(ctx, cqe, NULL, NULL, 0)) != NULL);
    struct ibv_qp_init_attr ia = { .send_cq = s->cq,
                                   .recv_cq = s->cq,
                                   .qp_type = IBV_QPT_RC,
                                   .cap = { .max_send_wr = 64,
                                            .max_recv_wr = 64,
                                            .max_send_sge = 4,
                                            .max_recv_sge = 1,
                                            .max_inline_data = 64 } };
    CHECK((s->qp = ibv_create_qp(s->pd, &ia)) != NULL);
    CHECK((s->buf = aligned_alloc(4096, BUF)) != NULL);
    memset(s->buf, 0, BUF);
    CHECK((s->mr = ibv_reg_mr(s->pd, s->buf, BUF, mr_access)) != NULL);
}

static struct wire side_wire(struct side *s)
{
    struct ibv_port_attr pa;
    CHECK(ibv_query_port(s->ctx, 1, &pa) == 0);
    struct wire w = {
        .qpn = s->qp->qp_num, .lid = pa.lid, .addr = (uintptr_t)s->buf, .rkey = s->mr->rkey
    };
    CHECK(ibv_query_gid(s->ctx, 1, 0, &w.gid) == 0);
    return w;
}

/* RESET -> INIT -> RTR -> RTS towards the peer described by w. */
static void side_connect(struct side *s, const struct wire *w, int timeout, int retry_cnt,
                         int rnr_retry)
{
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
                             .port_num = 1,
                             .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };
    CHECK(ibv_modify_qp(s->qp, &a,
                        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = w->qpn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.dlid = w->lid;
    a.ah_attr.port_num = 1;
    CHECK(ibv_modify_qp(s->qp, &a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0);
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = (uint8_t)timeout;
    a.retry_cnt = (uint8_t)retry_cnt;
    a.rnr_retry = (uint8_t)rnr_retry;
    a.max_rd_atomic = 1;
    CHECK(ibv_modify_qp(s->qp, &a,
                        IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                            IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
}

static void side_fini(struct side *s)
{
    CHECK(ibv_destroy_qp(s->qp) == 0);
    CHECK(ibv_dereg_mr(s->mr) == 0);
    CHECK(ibv_destroy_cq(s->cq) == 0);
    CHECK(ibv_dealloc_pd(s->pd) == 0);
    free(s->buf);
}

/* One completion, waited for without a time assumption beyond a hang guard. */
static struct ibv_wc wait_wc(struct ibv_cq *cq)
{
    struct ibv_wc wc;
    time_t end = time(NULL) + GUARD_S;
    for (;;) {
        int n = ibv_poll_cq(cq, 1, &wc);
        CHECK(n >= 0);
        if (n == 1) return wc;
        CHECK(time(NULL) < end);
        usleep(200);
    }
}

static void post_rdma(struct side *s, enum ibv_wr_opcode op, uint64_t wr_id, uint64_t laddr,
                      uint32_t len, uint64_t raddr, uint32_t rkey, uint32_t imm)
{
    struct ibv_sge sge = { .addr = laddr, .length = len, .lkey = s->mr->lkey };
    struct ibv_send_wr wr = { .wr_id = wr_id,
                              .sg_list = &sge,
                              .num_sge = 1,
                              .opcode = op,
                              .send_flags = IBV_SEND_SIGNALED,
                              .imm_data = htonl(imm) };
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    struct ibv_send_wr *bad = NULL;
    CHECK(ibv_post_send(s->qp, &wr, &bad) == 0);
}

static void post_recv1(struct side *s, uint64_t wr_id)
{
    struct ibv_recv_wr wr = { .wr_id = wr_id }, *bad = NULL;
    CHECK(ibv_post_recv(s->qp, &wr, &bad) == 0);
}

static void xchg(int fd, const void *out, void *in, size_t n)
{
    CHECK(write(fd, out, n) == (ssize_t)n);
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)in + got, n - got);
        CHECK(r > 0);
        got += (size_t)r;
    }
}

static uint8_t pattern(size_t i, int seed)
{
    return (uint8_t)((i * 131 + (size_t)seed * 7 + (i >> 12)) & 0xff);
}

static void reap(pid_t pid, int want_ok)
{
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (want_ok) CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ---------------------------------------------------------------------------------------
 * rdma: write 3 MB over 3 SGEs, a write with immediate, then read it all back
 * ------------------------------------------------------------------------------------- */
enum { BIG = 3 << 20, SMALL = 100, SMALL_AT = 3 << 20 };

static void rdma_child(int fd)
{
    struct side b;
    side_init(&b, open_dev(0), 16,
              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    struct wire mine = side_wire(&b), peer;
    xchg(fd, &mine, &peer, sizeof(mine));
    side_connect(&b, &peer, 14, 7, 7);
    post_recv1(&b, 77);
    char go;
    xchg(fd, "r", &go, 1); /* both in RTS with a receive posted */
    struct ibv_wc wc = wait_wc(b.cq);
    CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM);
    CHECK(wc.wr_id == 77 && (wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == 0xabcd);
    CHECK(wc.byte_len == SMALL && wc.qp_num == b.qp->qp_num && wc.src_qp == peer.qpn);
    /* The immediate arrives after the earlier write: in-order delivery. */
    for (size_t i = 0; i < BIG; i++) CHECK(b.buf[i] == pattern(i, 1));
    for (size_t i = 0; i < SMALL; i++) CHECK(b.buf[SMALL_AT + i] == pattern(i, 2));
    for (size_t i = SMALL_AT + SMALL; i < BUF; i++) CHECK(b.buf[i] == 0);
    memset(b.buf + SMALL_AT + SMALL, 0x5a, 4096); /* A reads this back */
    xchg(fd, "c", &go, 1);
    xchg(fd, "d", &go, 1); /* A finished reading */
    side_fini(&b);
    CHECK(ibv_close_device(b.ctx) == 0);
}

static void test_rdma(void)
{
    int fd;
    pid_t pid = ibemu_test_spawn(rdma_child, &fd);
    struct side a;
    side_init(&a, open_dev(0), 16, IBV_ACCESS_LOCAL_WRITE);
    struct wire mine = side_wire(&a), peer;
    xchg(fd, &mine, &peer, sizeof(mine));
    side_connect(&a, &peer, 14, 7, 7);
    char go;
    xchg(fd, "r", &go, 1);
    /* Message third k sits at local offset (2 - k) MB: the gather must follow the SGE list. */
    enum { MB = 1 << 20 };
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < MB; i++) a.buf[(2 - k) * MB + i] = pattern(k * MB + i, 1);
    struct ibv_sge sge[3];
    for (int k = 0; k < 3; k++)
        sge[k] = (struct ibv_sge){ (uintptr_t)a.buf + (uint64_t)(2 - k) * MB, MB, a.mr->lkey };
    struct ibv_send_wr wr = {
        .wr_id = 1, .sg_list = sge, .num_sge = 3, .opcode = IBV_WR_RDMA_WRITE
    }; /* unsignaled */
    wr.wr.rdma.remote_addr = peer.addr;
    wr.wr.rdma.rkey = peer.rkey;
    struct ibv_send_wr *bad;
    CHECK(ibv_post_send(a.qp, &wr, &bad) == 0);
    for (size_t i = 0; i < SMALL; i++) a.buf[BIG + i] = pattern(i, 2);
    post_rdma(&a, IBV_WR_RDMA_WRITE_WITH_IMM, 2, (uintptr_t)a.buf + BIG, SMALL,
              peer.addr + SMALL_AT, peer.rkey, 0xabcd);
    struct ibv_wc wc = wait_wc(a.cq);
    CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 2 && wc.opcode == IBV_WC_RDMA_WRITE);
    xchg(fd, "c", &go, 1); /* B checked the data */
    memset(a.buf, 0, BUF);
    /* Read back into two SGEs: everything B holds plus its 4 KB of 0x5a. */
    struct ibv_sge rs[2] = { { (uintptr_t)a.buf, BIG, a.mr->lkey },
                             { (uintptr_t)a.buf + BIG, SMALL + 4096, a.mr->lkey } };
    struct ibv_send_wr rd = { .wr_id = 3,
                              .sg_list = rs,
                              .num_sge = 2,
                              .opcode = IBV_WR_RDMA_READ,
                              .send_flags = IBV_SEND_SIGNALED };
    rd.wr.rdma.remote_addr = peer.addr;
    rd.wr.rdma.rkey = peer.rkey;
    CHECK(ibv_post_send(a.qp, &rd, &bad) == 0);
    wc = wait_wc(a.cq);
    CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 3 && wc.opcode == IBV_WC_RDMA_READ);
    CHECK(wc.byte_len == BIG + SMALL + 4096);
    for (size_t i = 0; i < BIG; i++) CHECK(a.buf[i] == pattern(i, 1));
    for (size_t i = 0; i < SMALL; i++) CHECK(a.buf[BIG + i] == pattern(i, 2));
    for (size_t i = 0; i < 4096; i++) CHECK(a.buf[BIG + SMALL + i] == 0x5a);
    xchg(fd, "d", &go, 1);
    reap(pid, 1);
    side_fini(&a);
    CHECK(ibv_close_device(a.ctx) == 0);
}

/* ---------------------------------------------------------------------------------------
 * errors: protection checks at the responder and the requester
 * ------------------------------------------------------------------------------------- */
enum { NPAIRS = 4 };

static struct ibv_async_event wait_event(struct ibv_context *ctx)
{
    struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
    CHECK(poll(&p, 1, GUARD_S * 1000) == 1);
    struct ibv_async_event ev;
    CHECK(ibv_get_async_event(ctx, &ev) == 0);
    ibv_ack_async_event(&ev);
    return ev;
}

static void pairs_setup(int fd, struct side *s, struct ibv_context *ctx, int access,
                        struct wire *peer)
{
    for (int i = 0; i < NPAIRS; i++) {
        side_init(&s[i], ctx, 16, access);
        struct wire mine = side_wire(&s[i]);
        xchg(fd, &mine, &peer[i], sizeof(mine));
        side_connect(&s[i], &peer[i], 14, 7, 7);
    }
    char go;
    xchg(fd, "r", &go, 1);
}

static void errors_child(int fd)
{
    struct side b[NPAIRS];
    struct wire peer[NPAIRS];
    struct ibv_context *ctx = open_dev(0);
    pairs_setup(fd, b, ctx, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, peer);
    int seen[3] = { 0, 0, 0 };
    for (int k = 0; k < 3; k++) {
        struct ibv_async_event ev = wait_event(ctx);
        CHECK(ev.event_type == IBV_EVENT_QP_ACCESS_ERR);
        for (int i = 0; i < 3; i++) seen[i] += ev.element.qp == b[i].qp;
    }
    CHECK(seen[0] == 1 && seen[1] == 1 && seen[2] == 1);
    for (size_t i = 0; i < BUF; i++) CHECK(b[0].buf[i] == 0 && b[2].buf[i] == 0);
    char go;
    xchg(fd, "d", &go, 1);
    for (int i = 0; i < NPAIRS; i++) side_fini(&b[i]);
    CHECK(ibv_close_device(ctx) == 0);
}

static void expect_fail_then_flush(struct side *s, int status)
{
    struct ibv_wc wc = wait_wc(s->cq);
    CHECK(wc.wr_id == 1 && wc.status == (enum ibv_wc_status)status);
    wc = wait_wc(s->cq);
    CHECK(wc.wr_id == 2 && wc.status == IBV_WC_WR_FLUSH_ERR);
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr ia;
    CHECK(ibv_query_qp(s->qp, &qa, IBV_QP_STATE, &ia) == 0 && qa.qp_state == IBV_QPS_ERR);
}

static void test_errors(void)
{
    int fd;
    pid_t pid = ibemu_test_spawn(errors_child, &fd);
    struct side a[NPAIRS];
    struct wire peer[NPAIRS];
    struct ibv_context *ctx = open_dev(0);
    pairs_setup(fd, a, ctx, IBV_ACCESS_LOCAL_WRITE, peer);
    uintptr_t l = (uintptr_t)a[0].buf;
    /* 0: unknown rkey; 1: read of a region without remote read; 2: write past its end. */
    post_rdma(&a[0], IBV_WR_RDMA_WRITE, 1, l, 64, peer[0].addr, peer[0].rkey ^ 0x5a5a0000u, 0);
    post_rdma(&a[1], IBV_WR_RDMA_READ, 1, (uintptr_t)a[1].buf, 64, peer[1].addr, peer[1].rkey, 0);
    post_rdma(&a[2], IBV_WR_RDMA_WRITE, 1, (uintptr_t)a[2].buf, 100, peer[2].addr + BUF - 10,
              peer[2].rkey, 0);
    /* 3: a local key that is not registered. */
    struct ibv_sge sge = { .addr = (uintptr_t)a[3].buf, .length = 64, .lkey = a[3].mr->lkey + 1 };
    struct ibv_send_wr wr = { .wr_id = 1,
                              .sg_list = &sge,
                              .num_sge = 1,
                              .opcode = IBV_WR_RDMA_WRITE,
                              .send_flags = IBV_SEND_SIGNALED },
                       *bad;
    wr.wr.rdma.remote_addr = peer[3].addr;
    wr.wr.rdma.rkey = peer[3].rkey;
    CHECK(ibv_post_send(a[3].qp, &wr, &bad) == 0);
    for (int i = 0; i < NPAIRS; i++) /* a good request behind each bad one is flushed */
        post_rdma(&a[i], IBV_WR_RDMA_WRITE, 2, (uintptr_t)a[i].buf, 8, peer[i].addr, peer[i].rkey,
                  0);
    expect_fail_then_flush(&a[0], IBV_WC_REM_ACCESS_ERR);
    expect_fail_then_flush(&a[1], IBV_WC_REM_ACCESS_ERR);
    expect_fail_then_flush(&a[2], IBV_WC_REM_ACCESS_ERR);
    expect_fail_then_flush(&a[3], IBV_WC_LOC_PROT_ERR);
    char go;
    xchg(fd, "d", &go, 1);
    reap(pid, 1);
    for (int i = 0; i < NPAIRS; i++) side_fini(&a[i]);
    CHECK(ibv_close_device(ctx) == 0);
}

/* ---------------------------------------------------------------------------------------
 * deadpeer: the responder's process is gone
 * ------------------------------------------------------------------------------------- */
static void dead_child(int fd)
{
    struct side b;
    side_init(&b, open_dev(0), 16, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    struct wire mine = side_wire(&b), peer;
    xchg(fd, &mine, &peer, sizeof(mine));
    side_connect(&b, &peer, 14, 7, 7);
    char go;
    xchg(fd, "r", &go, 1);
    _exit(0); /* no cleanup: as if killed */
}

static void test_deadpeer(void)
{
    int fd;
    pid_t pid = ibemu_test_spawn(dead_child, &fd);
    struct side a;
    side_init(&a, open_dev(0), 16, IBV_ACCESS_LOCAL_WRITE);
    struct wire mine = side_wire(&a), peer;
    xchg(fd, &mine, &peer, sizeof(mine));
    side_connect(&a, &peer, 10, 1, 7); /* 4.096 us * 2^10 * 2 tries: 8.4 ms */
    char go;
    xchg(fd, "r", &go, 1);
    reap(pid, 1);
    post_rdma(&a, IBV_WR_RDMA_WRITE, 1, (uintptr_t)a.buf, 4096, peer.addr, peer.rkey, 0);
    post_rdma(&a, IBV_WR_RDMA_WRITE, 2, (uintptr_t)a.buf, 4096, peer.addr, peer.rkey, 0);
    expect_fail_then_flush(&a, IBV_WC_RETRY_EXC_ERR);
    side_fini(&a);
    CHECK(ibv_close_device(a.ctx) == 0);
}

/* ---------------------------------------------------------------------------------------
 * state: the QP state machine, devices, ports and GIDs (one process)
 * ------------------------------------------------------------------------------------- */
static void test_queries(void)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    CHECK(list && n == 2 && list[2] == NULL);
    CHECK(strcmp(ibv_get_device_name(list[0]), "mlx5_0") == 0);
    CHECK(strcmp(ibv_get_device_name(list[1]), "mlx5_1") == 0);
    struct ibv_context *roce = ibv_open_device(list[1]);
    ibv_free_device_list(list);
    CHECK(roce);
    struct ibv_device_attr da;
    CHECK(ibv_query_device(roce, &da) == 0 && da.phys_port_cnt == 2);
    struct ibv_port_attr pa;
    CHECK(ibv_query_port(roce, 2, &pa) == 0);
    CHECK(pa.state == IBV_PORT_ACTIVE && pa.link_layer == IBV_LINK_LAYER_ETHERNET && pa.lid == 0);
    CHECK(ibv_query_port(roce, 3, &pa) != 0);
    struct ibv_gid_entry ge;
    CHECK(ibv_query_gid_ex(roce, 1, 3, &ge, 0) == 0 && ge.gid_type == IBV_GID_TYPE_ROCE_V2);
    CHECK(ge.gid.raw[10] == 0xff && ge.gid.raw[11] == 0xff && ge.gid.raw[12] == 10);
    CHECK(ibv_query_gid_ex(roce, 1, 2, &ge, 0) == 0 && ge.gid_type == IBV_GID_TYPE_ROCE_V1);
    CHECK(ibv_query_gid_ex(roce, 1, 4, &ge, 0) == ENODATA);
    /* RoCE has no LIDs: RTR without a GRH fails, with a valid source GID index succeeds. */
    struct side r;
    side_init(&r, roce, 4, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
    CHECK(ibv_modify_qp(r.qp, &a,
                        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
    int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR,
                              .path_mtu = IBV_MTU_1024,
                              .dest_qp_num = r.qp->qp_num,
                              .ah_attr = { .port_num = 1 } };
    CHECK(ibv_modify_qp(r.qp, &a, rtr) == EINVAL);
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.sgid_index = 9;
    CHECK(ibv_modify_qp(r.qp, &a, rtr) == EINVAL);
    a.ah_attr.grh.sgid_index = 3;
    CHECK(ibv_modify_qp(r.qp, &a, rtr) == 0);
    side_fini(&r);
    CHECK(ibv_close_device(roce) == 0);
}

static void test_state(void)
{
    test_queries();
    struct side s;
    side_init(&s, open_dev(0), 16, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_send_wr wr = { .opcode = IBV_WR_RDMA_WRITE }, *bad = NULL;
    CHECK(ibv_post_send(s.qp, &wr, &bad) == EINVAL && bad == &wr); /* RESET */
    struct ibv_recv_wr rw = { .wr_id = 5 }, *rbad = NULL;
    CHECK(ibv_post_recv(s.qp, &rw, &rbad) == EINVAL);
    int init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };
    CHECK(ibv_modify_qp(s.qp, &a, IBV_QP_STATE) == EINVAL); /* RESET -> RTR */
    a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1 };
    CHECK(ibv_modify_qp(s.qp, &a, init & ~IBV_QP_PORT) == EINVAL);   /* missing attribute */
    CHECK(ibv_modify_qp(s.qp, &a, init | IBV_QP_TIMEOUT) == EINVAL); /* one it cannot carry */
    a.port_num = 2;
    CHECK(ibv_modify_qp(s.qp, &a, init) == EINVAL); /* no such port */
    a.port_num = 1;
    CHECK(ibv_modify_qp(s.qp, &a, init) == 0);
    a.qp_state = IBV_QPS_RTS;
    CHECK(ibv_modify_qp(s.qp, &a, IBV_QP_STATE) == EINVAL); /* INIT -> RTS */
    CHECK(ibv_post_send(s.qp, &wr, &bad) == EINVAL);        /* INIT */
    CHECK(ibv_post_recv(s.qp, &rw, &rbad) == 0);            /* receives may be posted in INIT */
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr ia;
    CHECK(ibv_query_qp(s.qp, &qa, IBV_QP_STATE, &ia) == 0 && qa.qp_state == IBV_QPS_INIT);
    CHECK(qa.port_num == 1 && ia.cap.max_send_wr == 64);
    /* Error state: the posted receive and a later send complete as flushed. */
    a.qp_state = IBV_QPS_ERR;
    CHECK(ibv_modify_qp(s.qp, &a, IBV_QP_STATE) == 0);
    struct ibv_wc wc = wait_wc(s.cq);
    CHECK(wc.wr_id == 5 && wc.status == IBV_WC_WR_FLUSH_ERR);
    wr.wr_id = 6;
    CHECK(ibv_post_send(s.qp, &wr, &bad) == 0);
    wc = wait_wc(s.cq);
    CHECK(wc.wr_id == 6 && wc.status == IBV_WC_WR_FLUSH_ERR);
    /* RESET clears it; the QP can be brought up again. */
    a.qp_state = IBV_QPS_RESET;
    CHECK(ibv_modify_qp(s.qp, &a, IBV_QP_STATE) == 0);
    a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1 };
    CHECK(ibv_modify_qp(s.qp, &a, init) == 0);
    CHECK(strcmp(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR), "remote access error") == 0);
    side_fini(&s);
    CHECK(ibv_close_device(s.ctx) == 0);
}

/* ---------------------------------------------------------------------------------------
 * Loopback pairs in one process: rnr, overflow, fault
 * ------------------------------------------------------------------------------------- */
static void loop_pair(struct ibv_context *ctx, struct side *a, struct side *b, int a_cqe,
                      int rnr_retry)
{
    side_init(a, ctx, a_cqe, IBV_ACCESS_LOCAL_WRITE);
    side_init(b, ctx, 16, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    struct wire wa = side_wire(a), wb = side_wire(b);
    side_connect(a, &wb, 14, 7, rnr_retry);
    side_connect(b, &wa, 14, 7, rnr_retry);
}

static void test_rnr(void)
{
    struct ibv_context *ctx = open_dev(0);
    struct side a, b;
    /* rnr_retry 1 with the responder's min_rnr_timer 1 (10 us): two tries, then the error. */
    loop_pair(ctx, &a, &b, 16, 1);
    post_rdma(&a, IBV_WR_RDMA_WRITE_WITH_IMM, 1, (uintptr_t)a.buf, 8, (uintptr_t)b.buf, b.mr->rkey,
              1);
    post_rdma(&a, IBV_WR_RDMA_WRITE, 2, (uintptr_t)a.buf, 8, (uintptr_t)b.buf, b.mr->rkey, 0);
    expect_fail_then_flush(&a, IBV_WC_RNR_RETRY_EXC_ERR);
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr ia;
    CHECK(ibv_query_qp(b.qp, &qa, IBV_QP_STATE, &ia) == 0 && qa.qp_state == IBV_QPS_RTS);
    side_fini(&a);
    side_fini(&b);
    /* rnr_retry 7 retries forever: the write waits for the receive posted after it. */
    loop_pair(ctx, &a, &b, 16, 7);
    a.buf[0] = 42;
    post_rdma(&a, IBV_WR_RDMA_WRITE_WITH_IMM, 1, (uintptr_t)a.buf, 1, (uintptr_t)b.buf, b.mr->rkey,
              9);
    post_recv1(&b, 3);
    struct ibv_wc wc = wait_wc(b.cq);
    CHECK(wc.wr_id == 3 && wc.status == IBV_WC_SUCCESS && ntohl(wc.imm_data) == 9);
    CHECK(b.buf[0] == 42);
    wc = wait_wc(a.cq);
    CHECK(wc.wr_id == 1 && wc.status == IBV_WC_SUCCESS);
    side_fini(&a);
    side_fini(&b);
    CHECK(ibv_close_device(ctx) == 0);
}

static void test_overflow(void)
{
    struct ibv_context *ctx = open_dev(0);
    struct side a, b;
    loop_pair(ctx, &a, &b, 4, 7);
    for (int i = 0; i < 8; i++)
        post_rdma(&a, IBV_WR_RDMA_WRITE, (uint64_t)i, (uintptr_t)a.buf, 8, (uintptr_t)b.buf,
                  b.mr->rkey, 0);
    struct ibv_async_event ev = wait_event(ctx);
    CHECK(ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == a.cq);
    struct ibv_wc wc[8];
    CHECK(ibv_poll_cq(a.cq, 8, wc) == 4);
    for (int i = 0; i < 4; i++) CHECK(wc[i].wr_id == (uint64_t)i && wc[i].status == 0);
    side_fini(&a);
    side_fini(&b);
    CHECK(ibv_close_device(ctx) == 0);
}

/* ZINC_IBEMU_FAULT=wc=2:REM_OP_ERR:0x42,qpfatal=4 (set by main) */
static void test_fault(void)
{
    struct ibv_context *ctx = open_dev(0);
    struct side a, b, c, d;
    loop_pair(ctx, &a, &b, 16, 7);
    for (int i = 1; i <= 3; i++)
        post_rdma(&a, IBV_WR_RDMA_WRITE, (uint64_t)i, (uintptr_t)a.buf, 8, (uintptr_t)b.buf,
                  b.mr->rkey, 0);
    struct ibv_wc wc = wait_wc(a.cq);
    CHECK(wc.wr_id == 1 && wc.status == IBV_WC_SUCCESS);
    wc = wait_wc(a.cq);
    CHECK(wc.wr_id == 2 && wc.status == IBV_WC_REM_OP_ERR && wc.vendor_err == 0x42);
    wc = wait_wc(a.cq);
    CHECK(wc.wr_id == 3 && wc.status == IBV_WC_WR_FLUSH_ERR);
    loop_pair(ctx, &c, &d, 16, 7);
    post_rdma(&c, IBV_WR_RDMA_WRITE, 4, (uintptr_t)c.buf, 8, (uintptr_t)d.buf, d.mr->rkey, 0);
    wc = wait_wc(c.cq);
    CHECK(wc.wr_id == 4 && wc.status == IBV_WC_SUCCESS);
    struct ibv_async_event ev = wait_event(ctx);
    CHECK(ev.event_type == IBV_EVENT_QP_FATAL && ev.element.qp == c.qp);
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr ia;
    CHECK(ibv_query_qp(c.qp, &qa, IBV_QP_STATE, &ia) == 0 && qa.qp_state == IBV_QPS_ERR);
    side_fini(&a);
    side_fini(&b);
    side_fini(&c);
    side_fini(&d);
    CHECK(ibv_close_device(ctx) == 0);
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
        const char *devices, *fault;
    } modes[] = {
        { "rdma", test_rdma, NULL, NULL },
        { "errors", test_errors, NULL, NULL },
        { "deadpeer", test_deadpeer, NULL, NULL },
        { "state", test_state, "mlx5_0:ib,mlx5_1:roce:2", NULL },
        { "rnr", test_rnr, NULL, NULL },
        { "overflow", test_overflow, NULL, NULL },
        { "fault", test_fault, NULL, "wc=2:REM_OP_ERR:0x42,qpfatal=4" },
    };
    for (size_t i = 0; argc == 2 && i < sizeof(modes) / sizeof(modes[0]); i++) {
        if (strcmp(argv[1], modes[i].name) != 0) continue;
        if (modes[i].devices) setenv("ZINC_IBEMU_DEVICES", modes[i].devices, 1);
        if (modes[i].fault) setenv("ZINC_IBEMU_FAULT", modes[i].fault, 1);
        /* A fabric of this run only, so that parallel tests do not share QP numbers; removed
         * even when a check fails or the test crashes. */
        char tag[64];
        snprintf(tag, sizeof(tag), "test-%s", modes[i].name);
        void (*fn)(void) = modes[i].fn;
        int rc = ibemu_test_run(tag, run_mode, &fn);
        if (rc == 0) printf("ibemu %s: ok\n", modes[i].name);
        return rc;
    }
    fprintf(stderr, "usage: %s rdma|errors|deadpeer|state|rnr|overflow|fault\n", argv[0]);
    return 2;
}
