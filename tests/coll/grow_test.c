/*
 * grow_check: ncclCommGetUniqueId and ncclCommGrow on the public API. Run under zinc-run on 2
 * ranks; the program starts the new ranks itself, as new processes (it executes itself with
 * the grow id on its command line) and as threads:
 *
 *   zinc-run -n 2 grow_check           the scenario below
 *   zinc-run -n 2 grow_check missing   (with a short ZINC_TIMEOUT) a grow to 3 whose new rank
 *                                      never comes: both ranks fail with the root's error
 *                                      naming rank 2, and their communicator still works
 *
 * Built twice: on host memory (host communicators), and as gpu_grow_check with GROW_CUDA on
 * device memory (cuda communicators; a process and its threads use GPU (first rank) mod count).
 *
 * Who is who: A and B are zinc-run's ranks 0 and 1; A starts processes C and D, C starts
 * thread T, D starts threads U and V.
 *
 *   1. W = {A, B}: collectives; argument errors (ncclInvalidArgument at once, nothing sent);
 *      grows the existing ranks refuse together (no id, a foreign id, nRanks that differ; a new
 *      rank waiting at the root of the last one learns why); a suspended or revoked parent is
 *      refused.
 *   2. A: id1 = ncclCommGetUniqueId(W), a second call refused, new-rank argument errors; A
 *      starts C and D with id1. G1 = W grown to 4 (A 0, B 1, C 2, D 3): collectives.
 *   3. id1 again: refused for A and B (ncclInvalidUsage), and for C as a new rank (the root
 *      answers that the id was used).
 *   4. C coordinates: G2 = G1 grown to 5 with a non-blocking config, new rank T.
 *   5. S = G2 shrunk without B (B leaves); S inherits the non-blocking config. A coordinates
 *      G3 = S grown to 6, the id sent to D over S; D grows its own rank and new ranks U and V
 *      from one thread, in one group; the existing ranks' grow inherits S's config.
 *
 * Every collective's result is compared with the value computed here.
 */
#include "nccl.h"
#include "bootstrap/launcher.h"

#ifdef GROW_CUDA
#include <cuda_runtime.h>
#endif
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static _Thread_local int rank; /* in the communicator at hand, for messages */
static int nranks;
static _Atomic long failures;

#include "mp_check.h"

/* --- buffers: host memory, or device memory with a stream per thread -------------------- */

/* What one thread that calls the library works with: two buffers (and on the GPU a stream of
 * its own). A lane is made up front by the thread that starts the one using it: on the GPU,
 * allocating or freeing memory while another thread of the process has a kernel waiting for
 * this one may wait for the whole device, and so would never return. */
#define LANE_ELEMS 100003
struct lane {
    void *d, *d2;
#ifdef GROW_CUDA
    cudaStream_t stream;
#endif
};
static _Thread_local struct lane *lane;

#ifdef GROW_CUDA
static int proc_dev = -1;
#define STREAM lane->stream
static struct lane *lane_new(void)
{
    struct lane *l = calloc(1, sizeof(*l));
    if (!l) exit(2);
    CUDACHECK(cudaSetDevice(proc_dev));
    CUDACHECK(cudaMalloc(&l->d, LANE_ELEMS * sizeof(int32_t)));
    CUDACHECK(cudaMalloc(&l->d2, LANE_ELEMS * sizeof(int32_t)));
    CUDACHECK(cudaStreamCreateWithFlags(&l->stream, cudaStreamNonBlocking));
    return l;
}

static void lane_free(struct lane *l)
{
    CUDACHECK(cudaStreamDestroy(l->stream));
    CUDACHECK(cudaFree(l->d));
    CUDACHECK(cudaFree(l->d2));
    free(l);
}

/* In the thread that uses l: its process's GPU, its stream. */
static void lane_use(struct lane *l)
{
    CUDACHECK(cudaSetDevice(proc_dev));
    lane = l;
}

static void upload(void *dst, const void *src, size_t bytes)
{
    CUDACHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, lane->stream));
    CUDACHECK(cudaStreamSynchronize(lane->stream));
}

/* After the calls on the stream: their results, here. */
static void download(void *dst, const void *src, size_t bytes)
{
    CUDACHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, lane->stream));
    CUDACHECK(cudaStreamSynchronize(lane->stream));
}
#else
#define STREAM NULL

static struct lane *lane_new(void)
{
    struct lane *l = calloc(1, sizeof(*l));
    if (l) l->d = malloc(LANE_ELEMS * sizeof(int32_t));
    if (l) l->d2 = malloc(LANE_ELEMS * sizeof(int32_t));
    if (!l || !l->d || !l->d2) exit(2);
    return l;
}

static void lane_free(struct lane *l)
{
    free(l->d);
    free(l->d2);
    free(l);
}

static void lane_use(struct lane *l)
{
    lane = l;
}

static void upload(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
}

static void download(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
}
#endif

/* --- checks --------------------------------------------------------------------------- */

/* comm must have n ranks, this one being me; an allreduce, an allgather and a ring of
 * send/recv must give exactly what the ranks' values add up to. */
static void check_comm(ncclComm_t c, int n, int me, const char *what)
{
    int cn = -1, cr = -1;
    NCCLCHECK(ncclCommCount(c, &cn));
    NCCLCHECK(ncclCommUserRank(c, &cr));
    EXPECT(cn == n && cr == me, "%s: rank %d of %d, expected rank %d of %d", what, cr, cn, me, n);
    if (cn != n || cr != me) return;
    rank = me;
    const size_t count = 100003, per = 1001, ring = 777;
    /* LANE_ELEMS: the largest of count and per * 6 ranks. */
    int32_t *h = malloc(LANE_ELEMS * sizeof(int32_t));
    void *d = lane->d, *d2 = lane->d2;

    for (size_t i = 0; i < count; i++) h[i] = (me + 1) * (int32_t)(i % 13 + 1);
    upload(d, h, count * sizeof(int32_t));
    NCCLCHECK(ncclAllReduce(d, d2, count, ncclInt32, ncclSum, c, STREAM));
    download(h, d2, count * sizeof(int32_t));
    long bad = 0;
    for (size_t i = 0; i < count; i++) bad += h[i] != n * (n + 1) / 2 * (int32_t)(i % 13 + 1);
    EXPECT(bad == 0, "%s: allreduce: %ld of %zu elements wrong", what, bad, count);

    for (size_t i = 0; i < per; i++) h[i] = me * 100000 + (int32_t)i;
    upload(d, h, per * sizeof(int32_t));
    NCCLCHECK(ncclAllGather(d, d2, per, ncclInt32, c, STREAM));
    download(h, d2, per * (size_t)n * sizeof(int32_t));
    bad = 0;
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < per; i++) bad += h[(size_t)r * per + i] != r * 100000 + (int32_t)i;
    EXPECT(bad == 0, "%s: allgather: %ld elements wrong", what, bad);

    int next = (me + 1) % n, prev = (me + n - 1) % n;
    for (size_t i = 0; i < ring; i++) h[i] = me * 7000 + (int32_t)i;
    upload(d, h, ring * sizeof(int32_t));
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(d, ring, ncclInt32, next, c, STREAM));
    NCCLCHECK(ncclRecv(d2, ring, ncclInt32, prev, c, STREAM));
    NCCLCHECK(ncclGroupEnd());
    download(h, d2, ring * sizeof(int32_t));
    bad = 0;
    for (size_t i = 0; i < ring; i++) bad += h[i] != prev * 7000 + (int32_t)i;
    EXPECT(bad == 0, "%s: message from rank %d: %ld elements wrong", what, prev, bad);

    /* Every receive is done before anyone destroys the communicator. */
    h[0] = 1;
    upload(d, h, sizeof(int32_t));
    NCCLCHECK(ncclAllReduce(d, d2, 1, ncclInt32, ncclSum, c, STREAM));
    download(h, d2, sizeof(int32_t));
    EXPECT(h[0] == n, "%s: last allreduce gave %d", what, h[0]);
    free(h);
}

/* The id from rank 0 of c to every rank (a broadcast on c: the out-of-band channel of this
 * test). */
static void share_id(ncclComm_t c, ncclUniqueId *id)
{
    upload(lane->d, id, sizeof(*id));
    NCCLCHECK(ncclBroadcast(lane->d, lane->d, sizeof(*id), ncclUint8, 0, c, STREAM));
    download(id, lane->d, sizeof(*id));
}

/* A grow of a non-blocking communicator: ncclInProgress, then ready. */
static void expect_ready(ncclComm_t c, ncclResult_t r, ncclResult_t want, const char *what)
{
    EXPECT(r == want, "%s returned %s, expected %s (%s)", what, ncclGetErrorString(r),
           ncclGetErrorString(want), ncclGetLastError(NULL));
    if (r != ncclSuccess && r != ncclInProgress) exit(2);
    ncclResult_t st = c ? mp_wait(c) : ncclInvalidArgument;
    EXPECT(st == ncclSuccess, "%s: state %s (%s)", what, ncclGetErrorString(st),
           ncclGetLastError(c));
    if (st != ncclSuccess) exit(2);
}

/* Finalize (maybe non-blocking) and destroy. */
static void finish(ncclComm_t c)
{
    ncclResult_t r = ncclCommFinalize(c);
    EXPECT(r == ncclSuccess || r == ncclInProgress, "finalize returned %s", ncclGetErrorString(r));
    EXPECT(mp_wait(c) == ncclSuccess, "finalize did not complete");
    NCCLCHECK(ncclCommDestroy(c));
}

/* --- new ranks: processes and threads ------------------------------------------------- */

static void to_hex(const ncclUniqueId *id, char *hex)
{
    for (size_t i = 0; i < sizeof(id->internal); i++)
        sprintf(hex + 2 * i, "%02x", (unsigned char)id->internal[i]);
}

static int from_hex(const char *hex, ncclUniqueId *id)
{
    if (strlen(hex) != 2 * sizeof(id->internal)) return -1;
    for (size_t i = 0; i < sizeof(id->internal); i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) return -1;
        id->internal[i] = (char)v;
    }
    return 0;
}

/* This program again as new rank r with id; it dies with its parent. */
static pid_t spawn(int r, const ncclUniqueId *id)
{
    char hex[2 * sizeof(id->internal) + 1], rs[16];
    to_hex(id, hex);
    snprintf(rs, sizeof(rs), "%d", r);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execl("/proc/self/exe", "grow_check", "new", rs, hex, (char *)NULL);
        _exit(127);
    }
    EXPECT(pid > 0, "fork failed");
    return pid;
}

static void reap(pid_t pid, const char *who)
{
    int st = 0;
    if (pid <= 0) return;
    EXPECT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "process %s ended with status 0x%x", who, st);
}

struct newrank {
    int r;
    struct lane *lane;     /* made by the thread that starts this one */
    pthread_barrier_t *go; /* T: wait there until C destroyed G1 */
    ncclUniqueId id;
    ncclComm_t comm;     /* U and V: grown by D already */
    ncclResult_t result; /* of the grow, N */
    char msg[1024];
};

static void after_g2(ncclComm_t g2, int me2);

/* T: new rank 4 of G2, grown with a non-blocking config; then a member of S and G3. */
static void *t_main(void *arg)
{
    struct newrank *t = arg;
    rank = 4;
    lane_use(t->lane);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t g2 = NULL;
    expect_ready(g2, ncclCommGrow(NULL, 5, &t->id, 4, &g2, &cfg), ncclInProgress,
                 "T: ncclCommGrow(NULL, 5, id2, 4), non-blocking");
    pthread_barrier_wait(t->go);
    after_g2(g2, 4);
    return NULL;
}

/* U and V: new ranks 4 and 5 of G3, grown by D's thread in a group. */
static void *uv_main(void *arg)
{
    struct newrank *u = arg;
    rank = u->r;
    lane_use(u->lane);
    check_comm(u->comm, 6, u->r, "G3: S grown to 6 (a new rank grown in D's group)");
    finish(u->comm);
    return NULL;
}

/* N: a new rank at the root of a grow that the existing ranks refuse. */
static void *n_main(void *arg)
{
    struct newrank *n = arg;
    rank = n->r;
    lane_use(n->lane);
    n->comm = NULL;
    n->result = ncclCommGrow(NULL, 3, &n->id, 2, &n->comm, NULL);
    snprintf(n->msg, sizeof(n->msg), "%s", ncclGetLastError(NULL));
    return NULL;
}

/* --- the phases ------------------------------------------------------------------------ */

/* Phase 1, on W (A and B). */
static void refusals(ncclComm_t w, int me)
{
    ncclComm_t x = (ncclComm_t)0x1;
    ncclUniqueId id, foreign;
    NCCLCHECK(ncclGetUniqueId(&foreign)); /* ZINC_COMM_ID's: starts nothing */
    memset(&id, 0, sizeof(id));

    /* Argument errors: at once, nothing sent, newcomm NULL. */
    EXPECT_FAIL(ncclCommGrow(w, 4, NULL, -1, NULL, NULL), ncclInvalidArgument, "newcomm is NULL");
    EXPECT_FAIL(ncclCommGrow(w, 0, NULL, -1, &x, NULL), ncclInvalidArgument, "nRanks 0");
    EXPECT(x == NULL, "a refused grow left newcomm set");
    EXPECT_FAIL(ncclCommGrow(w, 2, NULL, -1, &x, NULL), ncclInvalidArgument, "must be larger");
    EXPECT_FAIL(ncclCommGrow(w, 1, NULL, -1, &x, NULL), ncclInvalidArgument, "must be larger");
    EXPECT_FAIL(ncclCommGrow(w, 4, NULL, me, &x, NULL), ncclInvalidArgument, "pass rank -1");
    EXPECT_FAIL(ncclCommGrow(w, 4, NULL, 2, &x, NULL), ncclInvalidArgument, "pass rank -1");
    EXPECT_FAIL(ncclCommGrow(NULL, 4, NULL, 2, &x, NULL), ncclInvalidArgument, "both NULL");
    EXPECT_FAIL(ncclCommGrow(NULL, 4, &foreign, 2, &x, NULL), ncclInvalidArgument,
                "not made by ncclCommGetUniqueId");
    EXPECT_FAIL(ncclCommGrow(NULL, 4, &id, 2, &x, NULL), ncclInvalidArgument,
                "not made by ncclCommGetUniqueId");
    ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
    bad.magic = 0x1234;
    EXPECT_FAIL(ncclCommGrow(w, 4, NULL, -1, &x, &bad), ncclInvalidArgument,
                "NCCL_CONFIG_INITIALIZER");
    EXPECT_FAIL(ncclCommGetUniqueId(w, NULL), ncclInvalidArgument, "uniqueId is NULL");
    EXPECT_FAIL(ncclCommGetUniqueId(NULL, &id), ncclInvalidArgument, "comm is NULL");
    EXPECT(x == NULL, "a refused grow left newcomm set");

    /* Refused by every existing rank together, from the same table. */
    EXPECT_FAIL(ncclCommGrow(w, 4, NULL, -1, &x, NULL), ncclInvalidUsage,
                "no rank passed the uniqueId");
    EXPECT_FAIL(ncclCommGrow(w, 4, me == 0 ? &foreign : NULL, -1, &x, NULL), ncclInvalidArgument,
                "rank 0 passed a uniqueId that no rank of this communicator made");
    EXPECT_FAIL(ncclCommGrow(w, 4 + me, NULL, -1, &x, NULL), ncclInvalidArgument,
                "rank 0 passed nRanks 4 but rank 1 passed 5");
    EXPECT(x == NULL, "a refused grow left newcomm set");

    /* A new rank waits at the root while the existing ranks disagree on nRanks: the
     * coordinator fails the root with the verdict, and the new rank gets it. */
    struct newrank n = { .r = 2 };
    pthread_t nt;
    if (me == 0) {
        NCCLCHECK(ncclCommGetUniqueId(w, &n.id));
        n.lane = lane_new();
        pthread_create(&nt, NULL, n_main, &n);
    }
    EXPECT_FAIL(ncclCommGrow(w, 3 + me, me == 0 ? &n.id : NULL, -1, &x, NULL), ncclInvalidArgument,
                "rank 0 passed nRanks 3 but rank 1 passed 4");
    if (me == 0) {
        pthread_join(nt, NULL);
        lane_free(n.lane);
        EXPECT(n.result == ncclInvalidArgument && n.comm == NULL &&
                   strstr(n.msg, "rank 0 passed nRanks 3 but rank 1 passed 4"),
               "the new rank of a refused grow got %s: %s", ncclGetErrorString(n.result), n.msg);
    }

    /* A suspended parent makes no grow id and does not grow until resumed; a revoked one
     * never again. */
    ncclComm_t dup = NULL;
    NCCLCHECK(ncclCommSplit(w, 0, me, &dup, NULL));
    NCCLCHECK(ncclCommSuspend(dup, NCCL_SUSPEND_MEM));
    EXPECT_FAIL(ncclCommGetUniqueId(dup, &id), ncclInvalidUsage, "suspended");
    EXPECT_FAIL(ncclCommGrow(dup, 4, NULL, -1, &x, NULL), ncclInvalidUsage, "suspended");
    NCCLCHECK(ncclCommResume(dup));
    NCCLCHECK(ncclCommRevoke(dup, NCCL_REVOKE_DEFAULT));
    EXPECT_FAIL(ncclCommGetUniqueId(dup, &id), ncclInvalidUsage, "revoked");
    EXPECT_FAIL(ncclCommGrow(dup, 4, NULL, -1, &x, NULL), ncclInvalidUsage, "revoked");
    NCCLCHECK(ncclCommDestroy(dup));
    check_comm(w, 2, me, "W after the refused grows");
}

/* Phases 4 and 5 for A, B, C, D (G2 rank me2 < 4) and T (me2 4). */
static void after_g2(ncclComm_t g2, int me2)
{
    check_comm(g2, 5, me2, "G2: G1 grown to 5 (non-blocking)");
    if (me2 == 1) { /* B leaves */
        NCCLCHECK(ncclCommDestroy(g2));
        return;
    }
    int excl = 1, me = me2 - (me2 > 1);
    ncclComm_t s = NULL, g3 = NULL;
    /* NULL config: S inherits G2's, non-blocking. */
    expect_ready(s, ncclCommShrink(g2, &excl, 1, &s, NULL, NCCL_SHRINK_DEFAULT), ncclInProgress,
                 "shrink of G2 without rank 1");
    check_comm(s, 4, me, "S: G2 without rank 1");
    ncclUniqueId id3;
    memset(&id3, 0, sizeof(id3));
    if (me == 0) NCCLCHECK(ncclCommGetUniqueId(s, &id3));
    share_id(s, &id3);
    struct newrank uv[2] = { { .r = 4, .id = id3 }, { .r = 5, .id = id3 } };
    pthread_t th[2];
    if (me == 2) {
        /* D: its own grow and two new ranks', from this thread, in one group. */
        ncclResult_t r[3];
        NCCLCHECK(ncclGroupStart());
        r[0] = ncclCommGrow(s, 6, NULL, -1, &g3, NULL);
        r[1] = ncclCommGrow(NULL, 6, &id3, 4, &uv[0].comm, NULL);
        r[2] = ncclCommGrow(NULL, 6, &id3, 5, &uv[1].comm, NULL);
        ncclResult_t end = ncclGroupEnd();
        EXPECT(r[0] == ncclInProgress && r[1] == ncclSuccess && r[2] == ncclSuccess,
               "grows in a group returned %s, %s, %s (want in progress: S's config, success: "
               "the default, blocking)",
               ncclGetErrorString(r[0]), ncclGetErrorString(r[1]), ncclGetErrorString(r[2]));
        EXPECT(end == ncclSuccess, "ncclGroupEnd of the grows: %s (%s)", ncclGetErrorString(end),
               ncclGetLastError(NULL));
        if (!g3 || !uv[0].comm || !uv[1].comm) exit(2);
        expect_ready(g3, ncclInProgress, ncclInProgress, "D: grow of S in a group");
        for (int i = 0; i < 2; i++) {
            ncclResult_t st = ncclInProgress;
            NCCLCHECK(ncclCommGetAsyncError(uv[i].comm, &st));
            EXPECT(st == ncclSuccess, "new rank %d after ncclGroupEnd: %s", uv[i].r,
                   ncclGetErrorString(st));
            uv[i].lane = lane_new(); /* both before U runs (see struct lane) */
        }
        for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, uv_main, &uv[i]);
    } else {
        /* NULL config: S's, non-blocking. */
        expect_ready(g3, ncclCommGrow(s, 6, me == 0 ? &id3 : NULL, -1, &g3, NULL), ncclInProgress,
                     "grow of S to 6");
    }
    check_comm(g3, 6, me, "G3: S grown to 6");
    finish(g3);
    if (me == 2)
        for (int i = 0; i < 2; i++) {
            pthread_join(th[i], NULL);
            lane_free(uv[i].lane);
        }
    finish(s);
    NCCLCHECK(ncclCommDestroy(g2));
}

/* Phases 2 to 5 from G1 on, for A, B, C and D. */
static void from_g1(ncclComm_t g1, int me)
{
    check_comm(g1, 4, me, "G1: W grown to 4 by two new processes");
    ncclUniqueId id2;
    memset(&id2, 0, sizeof(id2));
    /* T starts its collectives once C destroyed G1: destroying a cuda communicator waits for
     * the whole device, T's kernels too, which would wait for C's. */
    pthread_barrier_t go;
    struct newrank t = { .r = 4, .go = &go };
    pthread_t tt;
    if (me == 2) {
        NCCLCHECK(ncclCommGetUniqueId(g1, &id2));
        t.id = id2;
        pthread_barrier_init(&go, NULL, 2);
        t.lane = lane_new();
        pthread_create(&tt, NULL, t_main, &t);
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t g2 = NULL;
    expect_ready(g2, ncclCommGrow(g1, 5, me == 2 ? &id2 : NULL, -1, &g2, &cfg), ncclInProgress,
                 "grow of G1 to 5, non-blocking, coordinated by rank 2");
    NCCLCHECK(ncclCommDestroy(g1));
    if (me == 2) pthread_barrier_wait(&go);
    after_g2(g2, me);
    if (me == 2) {
        pthread_join(tt, NULL);
        lane_free(t.lane);
        pthread_barrier_destroy(&go);
    }
}

static int run_new(const char *rs, const char *hex)
{
    int me = atoi(rs);
    ncclUniqueId id1;
    rank = me;
    if ((me != 2 && me != 3) || from_hex(hex, &id1) != 0) {
        fprintf(stderr, "grow_check new: bad arguments\n");
        return 2;
    }
    ncclComm_t g1 = NULL;
    NCCLCHECK(ncclCommGrow(NULL, 4, &id1, me, &g1, NULL));
    if (me == 2) {
        /* id1 was used: its root says so. */
        ncclComm_t x = NULL;
        EXPECT_FAIL(ncclCommGrow(NULL, 4, &id1, 2, &x, NULL), ncclInvalidUsage, "used already");
        EXPECT(x == NULL, "a refused grow left newcomm set");
    }
    from_g1(g1, me);
    return failures ? 1 : 0;
}

static int run_world(void)
{
    ncclComm_t w = mp_world();
    int me = rank;
    if (nranks != 2) {
        fprintf(stderr, "grow_check runs on 2 ranks (zinc-run -n 2)\n");
        return 2;
    }
    check_comm(w, 2, me, "W");
    refusals(w, me);

    ncclUniqueId id1;
    memset(&id1, 0, sizeof(id1));
    ncclComm_t x = NULL;
    pid_t c = -1, d = -1;
    if (me == 0) {
        NCCLCHECK(ncclCommGetUniqueId(w, &id1));
        ncclUniqueId again;
        EXPECT_FAIL(ncclCommGetUniqueId(w, &again), ncclInvalidUsage, "no ncclCommGrow has used");
        /* New-rank argument errors with a real grow id: nothing reaches its root. */
        EXPECT_FAIL(ncclCommGrow(NULL, 4, &id1, 1, &x, NULL), ncclInvalidArgument,
                    "takes one of 2..3");
        EXPECT_FAIL(ncclCommGrow(NULL, 4, &id1, 4, &x, NULL), ncclInvalidArgument,
                    "takes one of 2..3");
        EXPECT_FAIL(ncclCommGrow(NULL, 4, &id1, -1, &x, NULL), ncclInvalidArgument,
                    "takes one of 2..3");
        EXPECT_FAIL(ncclCommGrow(NULL, 2, &id1, 2, &x, NULL), ncclInvalidArgument,
                    "must be larger than the grown communicator's 2 ranks");
        c = spawn(2, &id1);
        d = spawn(3, &id1);
    }
    ncclComm_t g1 = NULL;
    NCCLCHECK(ncclCommGrow(w, 4, me == 0 ? &id1 : NULL, -1, &g1, NULL));
    /* The same id again: used, for every existing rank. */
    EXPECT_FAIL(ncclCommGrow(w, 4, me == 0 ? &id1 : NULL, -1, &x, NULL), ncclInvalidUsage,
                "an earlier ncclCommGrow of this communicator used");
    EXPECT(x == NULL, "a refused grow left newcomm set");
    NCCLCHECK(ncclCommDestroy(w));
    from_g1(g1, me);
    if (me == 0) {
        reap(c, "C");
        reap(d, "D");
    }
    if (me == 0 || failures) printf("grow_check: rank %d: %ld failure(s)\n", me, (long)failures);
    return failures ? 1 : 0;
}

/* A grow to 3 whose rank 2 never comes: the root's deadline (ZINC_TIMEOUT after
 * ncclCommGetUniqueId) ends it with an error naming rank 2, on both ranks. */
static int run_missing(void)
{
    ncclComm_t w = mp_world();
    int me = rank;
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    if (me == 0) NCCLCHECK(ncclCommGetUniqueId(w, &id));
    ncclComm_t x = NULL;
    EXPECT_FAIL(ncclCommGrow(w, 3, me == 0 ? &id : NULL, -1, &x, NULL), ncclRemoteError,
                "missing rank(s): 2");
    EXPECT(x == NULL, "a failed grow left newcomm set");
    check_comm(w, nranks, me, "W after the grow that timed out");
    finish(w);
    if (me == 0 || failures)
        printf("grow_check missing: rank %d: %ld failure(s)\n", me, (long)failures);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    int is_new = argc == 4 && !strcmp(argv[1], "new");
#ifdef GROW_CUDA
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    struct zn_launch_info li;
    zn_launch_info_get(&li);
    proc_dev = (is_new ? atoi(argv[2]) : li.local_rank) % ndev;
#endif
    struct lane *mine = lane_new();
    lane_use(mine);
    int rc;
    if (is_new) {
        rc = run_new(argv[2], argv[3]);
    } else if (argc == 2 && !strcmp(argv[1], "missing")) {
        rc = run_missing();
    } else if (argc == 1) {
        rc = run_world();
    } else {
        fprintf(stderr, "usage: zinc-run -n 2 grow_check [missing]\n");
        rc = 2;
    }
    lane_free(mine);
    return rc;
}
