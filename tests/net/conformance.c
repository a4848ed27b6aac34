/*
 * The net conformance suite (conformance.h). Everything runs in one thread of one process,
 * both ends of each connection included, which the ABI allows because no call may block;
 * the killed-peer case forks. Loops are bounded by a generous hang guard only, never by a
 * timing assumption.
 */
#include "conformance.h"
#include "zt.h"

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct nt_tally nt_tally;

static const ncclNet_t *N;
static void *CTX;
static const char *(*LAST_ERROR)(void);

#define GUARD_S 60 /* a hang, not a slow machine: ctest's timeout is 120 s */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Byte i of message `seed`: every message has its own pattern. */
static unsigned char pat(unsigned seed, size_t i)
{
    return (unsigned char)(seed * 131u + i * 7u + (i >> 9));
}

static void fill(void *buf, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) ((unsigned char *)buf)[i] = pat(seed, i);
}

static size_t first_bad(const void *buf, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (((const unsigned char *)buf)[i] != pat(seed, i)) return i;
    return n;
}

/* Thin wrappers that keep the tally. */
static ncclResult_t t_isend(void *s, void *d, size_t n, int tag, void *mh, void **req)
{
    nt_tally.isend++;
    return N->isend(s, d, n, tag, mh, NULL, req);
}
static ncclResult_t t_irecv(void *r, int n, void **d, size_t *sz, int *tags, void **mh, void **req)
{
    nt_tally.irecv++;
    return N->irecv(r, n, d, sz, tags, mh, NULL, req);
}
static ncclResult_t t_test(void *req, int *done, int *sizes)
{
    nt_tally.test++;
    return N->test(req, done, sizes);
}
static void t_close_send(void *c)
{
    nt_tally.close_send++;
    N->closeSend(c);
}
static void t_close_recv(void *c)
{
    nt_tally.close_recv++;
    N->closeRecv(c);
}
static void t_close_listen(void *c)
{
    nt_tally.close_listen++;
    N->closeListen(c);
}

/* Connect and accept until both ends exist. */
static int connect_pair(void **send, void **recv)
{
    char handle[NCCL_NET_HANDLE_MAXSIZE] = { 0 };
    void *lc = NULL;
    nt_tally.listen++;
    if (N->listen(CTX, 0, handle, &lc) != ncclSuccess || !lc) return -1;
    *send = *recv = NULL;
    double end = now_s() + GUARD_S;
    while ((!*send || !*recv) && now_s() < end) {
        if (!*send) {
            nt_tally.connect++;
            if (N->connect(CTX, 0, handle, send, NULL) != ncclSuccess) break;
        }
        if (!*recv) {
            nt_tally.accept++;
            if (N->accept(lc, recv, NULL) != ncclSuccess) break;
        }
    }
    t_close_listen(lc);
    return *send && *recv ? 0 : -1;
}

/* Post with retries: a NULL request means "not now". */
static ncclResult_t post_send(void *s, void *d, size_t n, int tag, void **req)
{
    double end = now_s() + GUARD_S;
    *req = NULL;
    while (!*req && now_s() < end) {
        ncclResult_t r = t_isend(s, d, n, tag, NULL, req);
        if (r != ncclSuccess) return r;
    }
    return *req ? ncclSuccess : ncclInternalError;
}

static ncclResult_t post_recv(void *c, int n, void **d, size_t *sz, int *tags, void **req)
{
    double end = now_s() + GUARD_S;
    *req = NULL;
    while (!*req && now_s() < end) {
        ncclResult_t r = t_irecv(c, n, d, sz, tags, NULL, req);
        if (r != ncclSuccess) return r;
    }
    return *req ? ncclSuccess : ncclInternalError;
}

/* Test every request until all are done; sizes[i*8 ..] get each one's sizes. Returns the
 * first error, or ncclInternalError on the hang guard. */
static ncclResult_t drive(int n, void **reqs, int *sizes)
{
    int left = n;
    double end = now_s() + GUARD_S;
    while (left > 0 && now_s() < end) {
        for (int i = 0; i < n; i++) {
            if (!reqs[i]) continue;
            int done = 0;
            ncclResult_t r = t_test(reqs[i], &done, sizes ? sizes + 8 * i : NULL);
            if (r != ncclSuccess) return r;
            if (done) {
                reqs[i] = NULL;
                left--;
            }
        }
    }
    return left == 0 ? ncclSuccess : ncclInternalError;
}

static int max_recvs(void)
{
    ncclNetProperties_t p;
    if (N->getProperties(0, &p) != ncclSuccess) return 1;
    return p.maxRecvs < 1 ? 1 : p.maxRecvs > 8 ? 8 : p.maxRecvs;
}

/* One message each of several sizes, zero bytes included, into larger receives. */
ZT_TEST(send_recv_sizes)
{
    void *s, *r;
    ZT_ASSERT(connect_pair(&s, &r) == 0);
    static const size_t sizes[] = { 0, 1, 4095, 65536 + 3, 3u << 20 };
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k], cap = n + 100;
        char *src = malloc(n + 1), *dst = malloc(cap);
        fill(src, n, (unsigned)k);
        void *reqs[2];
        int got[16] = { 0 };
        ZT_OK(post_recv(r, 1, (void **)&dst, &cap, (int[]){ 5 }, &reqs[1]));
        ZT_OK(post_send(s, src, n, 5, &reqs[0]));
        ZT_OK(drive(2, reqs, got));
        ZT_EQ_INT(got[0], n);
        ZT_EQ_INT(got[8], n);
        ZT_EQ_INT(first_bad(dst, n, (unsigned)k), n);
        free(src);
        free(dst);
    }
    t_close_send(s);
    t_close_recv(r);
}

/* A message larger than the posted receive is an error, not a truncation or a hang. */
ZT_TEST(recv_too_small)
{
    void *s, *r;
    ZT_ASSERT(connect_pair(&s, &r) == 0);
    char src[4096], dst[1024];
    fill(src, sizeof(src), 9);
    void *rq, *sq;
    size_t cap = sizeof(dst);
    char *d = dst;
    ZT_OK(post_recv(r, 1, (void **)&d, &cap, (int[]){ 1 }, &rq));
    ZT_OK(post_send(s, src, sizeof(src), 1, &sq));
    int done = 0;
    ncclResult_t res = ncclSuccess;
    double end = now_s() + GUARD_S;
    while (res == ncclSuccess && !done && now_s() < end) {
        int sd = 0;
        if (sq && t_test(sq, &sd, NULL) == ncclSuccess && sd) sq = NULL;
        res = t_test(rq, &done, NULL);
    }
    ZT_ASSERT(res != ncclSuccess);
    ZT_ASSERT(!done);
    if (LAST_ERROR) ZT_ASSERT(strstr(LAST_ERROR(), "larger than the posted receive") != NULL);
    t_close_send(s);
    t_close_recv(r);
}

/* A grouped receive: each buffer gets the message with its tag, whatever the send order. */
ZT_TEST(grouped_recv)
{
    int n = max_recvs();
    ZT_ASSERT(n >= 1);
    void *s, *r;
    ZT_ASSERT(connect_pair(&s, &r) == 0);
    char *src[8], *dst[8];
    size_t cap[8];
    int tags[8];
    for (int i = 0; i < n; i++) {
        cap[i] = 70000 + 1000 * (size_t)i;
        src[i] = malloc(cap[i]);
        dst[i] = calloc(1, cap[i]);
        fill(src[i], cap[i] - (size_t)i, 100u + (unsigned)i);
        tags[i] = 40 + i;
    }
    void *reqs[9];
    int got[9 * 8] = { 0 };
    ZT_OK(post_recv(r, n, (void **)dst, cap, tags, &reqs[0]));
    void *rq = reqs[0];
    for (int i = 0; i < n; i++) { /* sends in reverse tag order */
        int k = n - 1 - i;
        ZT_OK(post_send(s, src[k], cap[k] - (size_t)k, tags[k], &reqs[1 + i]));
    }
    ZT_OK(drive(n + 1, reqs, got));
    /* What NCCL does after the GPU consumed a completed receive (whenever the table has the
     * call): a net without device offload has nothing left to release, and must say success. */
    ZT_OK(N->irecvConsumed(r, n, rq));
    for (int i = 0; i < n; i++) {
        ZT_EQ_INT(got[i], cap[i] - (size_t)i);
        ZT_EQ_INT(first_bad(dst[i], cap[i] - (size_t)i, 100u + (unsigned)i), cap[i] - (size_t)i);
        free(src[i]);
        free(dst[i]);
    }
    t_close_send(s);
    t_close_recv(r);
}

/* Hundreds of requests in flight over several comms (each holds NCCL_NET_MAX_REQUESTS). */
ZT_TEST(many_outstanding)
{
    enum { PAIRS = 8, PER = NCCL_NET_MAX_REQUESTS, TOTAL = PAIRS * PER };
    void *s[PAIRS], *r[PAIRS];
    for (int p = 0; p < PAIRS; p++) ZT_ASSERT(connect_pair(&s[p], &r[p]) == 0);
    static char *src[TOTAL], *dst[TOTAL];
    static void *reqs[2 * TOTAL];
    static int got[2 * TOTAL * 8];
    for (int i = 0; i < TOTAL; i++) {
        size_t n = 1000 + 37 * (size_t)i;
        src[i] = malloc(n);
        dst[i] = malloc(n);
        fill(src[i], n, (unsigned)i);
    }
    for (int i = 0; i < TOTAL; i++) { /* every receive and send posted before any test */
        int p = i % PAIRS;
        size_t n = 1000 + 37 * (size_t)i;
        ZT_OK(post_recv(r[p], 1, (void **)&dst[i], &n, (int[]){ i / PAIRS }, &reqs[2 * i]));
        ZT_OK(post_send(s[p], src[i], n, i / PAIRS, &reqs[2 * i + 1]));
    }
    ZT_OK(drive(2 * TOTAL, reqs, got));
    for (int i = 0; i < TOTAL; i++) {
        size_t n = 1000 + 37 * (size_t)i;
        ZT_EQ_INT(got[2 * i * 8], n);
        ZT_EQ_INT(first_bad(dst[i], n, (unsigned)i), n);
        free(src[i]);
        free(dst[i]);
    }
    for (int p = 0; p < PAIRS; p++) {
        t_close_send(s[p]);
        t_close_recv(r[p]);
    }
}

/* Closing with requests pending: the peer's pending receive becomes an error. */
ZT_TEST(close_pending)
{
    void *s, *r;
    ZT_ASSERT(connect_pair(&s, &r) == 0);
    size_t big = 64u << 20; /* far more than socket buffers hold: the send cannot finish */
    char *src = malloc(big), *dst = malloc(big);
    fill(src, 4096, 1);
    void *sq, *rq;
    ZT_OK(post_send(s, src, big, 3, &sq));
    for (int i = 0; i < 100; i++) {
        int done = 0;
        ZT_OK(t_test(sq, &done, NULL));
        ZT_ASSERT(!done);
    }
    t_close_send(s); /* with sq pending */
    ZT_OK(post_recv(r, 1, (void **)&dst, &big, (int[]){ 3 }, &rq));
    ZT_ASSERT(drive(1, &rq, NULL) != ncclSuccess);
    t_close_recv(r);

    /* And a receive comm closed with a receive posted. */
    ZT_ASSERT(connect_pair(&s, &r) == 0);
    ZT_OK(post_recv(r, 1, (void **)&dst, &big, (int[]){ 3 }, &rq));
    t_close_recv(r);
    t_close_send(s);
    free(src);
    free(dst);
}

/* A peer killed in the middle of a message: the receive fails, it does not hang. */
ZT_TEST(peer_killed)
{
    char handle[NCCL_NET_HANDLE_MAXSIZE] = { 0 };
    void *lc = NULL;
    nt_tally.listen++;
    ZT_OK(N->listen(CTX, 0, handle, &lc));
    size_t big = 64u << 20;
    pid_t pid = fork();
    ZT_ASSERT(pid >= 0);
    if (pid == 0) { /* the peer: connect, start a send that cannot finish, die */
        void *s = NULL, *sq = NULL;
        double end = now_s() + GUARD_S;
        while (!s && now_s() < end)
            if (N->connect(CTX, 0, handle, &s, NULL) != ncclSuccess) _exit(2);
        char *src = calloc(1, big);
        if (!s || !src || post_send(s, src, big, 0, &sq) != ncclSuccess) _exit(3);
        for (int i = 0; i < 100; i++) {
            int done = 0;
            if (N->test(sq, &done, NULL) != ncclSuccess || done) _exit(4);
        }
        kill(getpid(), SIGKILL);
        _exit(5);
    }
    int st = 0;
    ZT_ASSERT(waitpid(pid, &st, 0) == pid);
    ZT_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    void *r = NULL;
    double end = now_s() + GUARD_S;
    while (!r && now_s() < end) {
        nt_tally.accept++;
        ZT_OK(N->accept(lc, &r, NULL));
    }
    t_close_listen(lc);
    ZT_ASSERT(r != NULL);
    char *dst = malloc(big);
    void *rq;
    ZT_OK(post_recv(r, 1, (void **)&dst, &big, (int[]){ 0 }, &rq));
    ncclResult_t res = drive(1, &rq, NULL);
    ZT_ASSERT(res != ncclSuccess && res != ncclInternalError);
    if (LAST_ERROR) ZT_ASSERT(strstr(LAST_ERROR(), "closed by the peer") != NULL);
    t_close_recv(r);
    free(dst);
}

/* Memory registration: host memory is accepted. */
ZT_TEST(register_host)
{
    void *s, *r;
    ZT_ASSERT(connect_pair(&s, &r) == 0);
    char buf[256];
    void *mh = NULL;
    ZT_OK(N->regMr(s, buf, sizeof(buf), NCCL_PTR_HOST, &mh));
    ZT_ASSERT(mh != NULL);
    ZT_OK(N->deregMr(s, mh));
    ncclNetProperties_t p;
    ZT_OK(N->getProperties(0, &p));
    ZT_ASSERT(p.ptrSupport & NCCL_PTR_HOST);
    if (!(p.ptrSupport & NCCL_PTR_CUDA)) /* a net without GPU memory refuses it clearly */
        ZT_ASSERT(N->regMr(s, buf, sizeof(buf), NCCL_PTR_CUDA, &mh) != ncclSuccess);
    t_close_send(s);
    t_close_recv(r);
}

int nt_run_suite(const ncclNet_t *net, void *ctx, const char *(*last_error)(void))
{
    N = net;
    CTX = ctx;
    LAST_ERROR = last_error;
    static const struct zt_case cases[] = {
        ZT_CASE(send_recv_sizes),  ZT_CASE(recv_too_small), ZT_CASE(grouped_recv),
        ZT_CASE(many_outstanding), ZT_CASE(close_pending),  ZT_CASE(peer_killed),
        ZT_CASE(register_host),
    };
    return zt_run(cases, (int)(sizeof(cases) / sizeof(cases[0])));
}
