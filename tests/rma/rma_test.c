/*
 * rma_check (host communicators) and rma_gpu_check (the same source with ZT_GPU: cuda
 * communicators, buffers in device memory, windows from ncclMemAlloc, a stream): ncclPutSignal,
 * ncclSignal, ncclWaitSignal and ncclWinGetUserPtr on the public API, under zinc-run. Every
 * result is compared byte for byte with what the sender wrote:
 *   ring       each rank puts to rank + 1 and waits for rank - 1: sizes 0, one element, odd,
 *              a few MB, at odd offsets; the bytes around the target range stay untouched
 *   barrier    ncclSignal to every rank (itself too) in a group, one wait of nranks counts
 *   alltoall   a block to every rank (itself too) at per-sender offsets, in a group
 *   order      five puts then one wait of opCnt 5: the same offset holds the last one, five
 *              other offsets each their own; alone and in a group
 *   counts     signals of different sigIdx / ctx are counted apart (a wait on one is not
 *              satisfied by the others: the data it announces is checked), three contexts,
 *              every (sigIdx, ctx) at once, descriptors of one signal adding up
 *   group      a group that puts to a peer and waits for another cannot deadlock
 *   errors     every argument error with its code, in and out of a group (a failed group
 *              issues nothing), numRmaCtx 0, ncclWinGetUserPtr; the communicator stays usable
 * A communicator's first one-sided call is collective (as in NCCL): every rank makes it.
 * Modes (first argument): "all" (default); "portable": only what NCCL 2.30.7 takes too (sigIdx
 * and ctx 0, the source inside a symmetric window: ring, barrier, all-to-all, order), so that
 * the same program can run on NCCL for reference; "dead": the last rank leaves without signalling
 * and the others' wait for it must fail with ncclRemoteError naming it; GPU only: "graph" (a
 * captured put + wait replayed, mixed with eager calls) and "timing" (8-byte round trips
 * against ncclSend/ncclRecv, large puts against a peer copy; prints, checks nothing more).
 */
#include "nccl.h"
#include "bootstrap/launcher.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef ZT_GPU
#include <cuda_runtime.h>
#endif

static int rank, nranks;
static long failures;

#include "mp_check.h"

#ifdef ZT_GPU
static cudaStream_t stream;
#define STREAM stream
#else
#define STREAM NULL
#endif

/* --- buffers: host memory, or device memory on the GPU build ------------------------------- */

static void *buf_alloc(size_t bytes, int window)
{
    void *p = NULL;
#ifdef ZT_GPU
    if (window)
        NCCLCHECK(ncclMemAlloc(&p, bytes));
    else
        CUDACHECK(cudaMalloc(&p, bytes ? bytes : 1));
#else
    (void)window;
    if (posix_memalign(&p, 4096, bytes ? bytes : 1)) exit(2);
#endif
    return p;
}

static void buf_free(void *p, int window)
{
#ifdef ZT_GPU
    if (window)
        NCCLCHECK(ncclMemFree(p));
    else
        CUDACHECK(cudaFree(p));
#else
    (void)window;
    free(p);
#endif
}

/* Done when it returns, ordered before what comes next on the stream. */
static void buf_write(void *dst, const void *src, size_t n)
{
    if (!n) return;
#ifdef ZT_GPU
    CUDACHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
#else
    memcpy(dst, src, n);
#endif
}

static void buf_read(void *dst, const void *src, size_t n)
{
    if (!n) return;
#ifdef ZT_GPU
    CUDACHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
#else
    memcpy(dst, src, n);
#endif
}

static void buf_fill(void *dst, int byte, size_t n)
{
#ifdef ZT_GPU
    CUDACHECK(cudaMemsetAsync(dst, byte, n, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
#else
    memset(dst, byte, n);
#endif
}

/* The one-sided calls of a step have completed (host communicators: they have returned). */
static void step_done(void)
{
#ifdef ZT_GPU
    CUDACHECK(cudaStreamSynchronize(stream));
#endif
}

static int *bar_buf;

/* Every rank got here (an allreduce). */
static void barrier(ncclComm_t comm)
{
    NCCLCHECK(ncclAllReduce(bar_buf, bar_buf, 1, ncclInt32, ncclSum, comm, STREAM));
    step_done();
}

/* --- data ------------------------------------------------------------------------------------ */

static uint8_t pat(int src, int dst, int tag, size_t i)
{
    return (uint8_t)(src * 31 + dst * 7 + tag * 13 + (int)(i % 251) * 3 + 1);
}

static void make(uint8_t *h, int src, int dst, int tag, size_t n)
{
    for (size_t i = 0; i < n; i++) h[i] = pat(src, dst, tag, i);
}

/* Bytes [off, off + n) of buffer b must be pattern (src, dst, tag); *what names the check. */
static void check_bytes(const void *b, size_t off, size_t n, int src, int tag, const char *what)
{
    if (!n) return;
    uint8_t *h = malloc(n);
    buf_read(h, (const uint8_t *)b + off, n);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (h[i] != pat(src, rank, tag, i) && !bad++) first = i;
    EXPECT(bad == 0, "%s: %zu of %zu bytes from rank %d wrong (first at %zu: %u, want %u)", what,
           bad, n, src, first, h[first], pat(src, rank, tag, first));
    free(h);
}

static void check_byte(const void *b, size_t off, uint8_t want, const char *what)
{
    uint8_t v;
    buf_read(&v, (const uint8_t *)b + off, 1);
    EXPECT(v == want, "%s: byte %zu is %u, want %u", what, off, v, want);
}

static void wait1(ncclComm_t comm, int peer, int sig, int ctx, int cnt)
{
    ncclWaitSignalDesc_t d = { .opCnt = cnt, .peer = peer, .sigIdx = sig, .ctx = ctx };
    NCCLCHECK(ncclWaitSignal(1, &d, comm, STREAM));
}

/* --- the scenarios ------------------------------------------------------------------------ */

#define SLOT ((size_t)3 << 20) /* bytes of the window per sender */

/* The sigIdx test_order uses (0 in the portable mode). */
static int order_sig = 1;

struct world {
    ncclComm_t comm;
    ncclWindow_t win, srcwin; /* srcwin: src as a symmetric window (portable mode) */
    uint8_t *wbuf;            /* this rank's window buffer */
    size_t wbytes;
    uint8_t *src; /* a source buffer of SLOT bytes (not in any window) */
};

static void put_bytes(struct world *w, const uint8_t *h, size_t n)
{
    buf_write(w->src, h, n);
}

static void test_ring(struct world *w)
{
    int dst = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;
    struct {
        size_t count;
        ncclDataType_t dt;
        size_t es;
    } sizes[] = { { 0, ncclFloat, 4 },     { 1, ncclInt32, 4 },      { 1001, ncclUint8, 1 },
                  { 333, ncclFloat64, 8 }, { 100000, ncclFloat, 4 }, { SLOT - 16, ncclUint8, 1 } };
    uint8_t *h = malloc(SLOT);
    for (int it = 0; it < (int)(sizeof(sizes) / sizeof(sizes[0])); it++) {
        size_t bytes = sizes[it].count * sizes[it].es, off = 7 + (size_t)it;
        buf_fill(w->wbuf, 0xEE, w->wbytes);
        make(h, rank, dst, it, bytes);
        put_bytes(w, h, bytes);
        barrier(w->comm); /* every window is cleared before anybody puts */
        NCCLCHECK(ncclPutSignal(w->src, sizes[it].count, sizes[it].dt, dst, w->win, off, 0, 0, 0,
                                w->comm, STREAM));
        wait1(w->comm, from, 0, 0, 1);
        step_done();
        char what[64];
        snprintf(what, sizeof(what), "ring, %zu bytes", bytes);
        check_bytes(w->wbuf, off, bytes, from, it, what);
        check_byte(w->wbuf, off - 1, 0xEE, what);
        check_byte(w->wbuf, off + bytes, 0xEE, what);
        barrier(w->comm);
    }
    free(h);
}

/* NCCL's barrier: a signal to every rank, itself included, then one wait for all. */
static void signal_barrier(ncclComm_t comm, int sig)
{
    ncclWaitSignalDesc_t *d = calloc((size_t)nranks, sizeof(*d));
    NCCLCHECK(ncclGroupStart());
    for (int r = 0; r < nranks; r++) {
        NCCLCHECK(ncclSignal(r, sig, 0, 0, comm, STREAM));
        d[r] = (ncclWaitSignalDesc_t){ .opCnt = 1, .peer = r, .sigIdx = sig, .ctx = 0 };
    }
    NCCLCHECK(ncclGroupEnd());
    NCCLCHECK(ncclWaitSignal(nranks, d, comm, STREAM));
    step_done();
    free(d);
}

static void test_barrier(struct world *w)
{
    for (int i = 0; i < 3; i++) signal_barrier(w->comm, i % 2);
    /* The two signals of each pair on sigIdx 2, one wait of opCnt 2. */
    NCCLCHECK(ncclGroupStart());
    for (int r = 0; r < nranks; r++) NCCLCHECK(ncclSignal(r, 2, 0, 0, w->comm, STREAM));
    for (int r = 0; r < nranks; r++) NCCLCHECK(ncclSignal(r, 2, 0, 0, w->comm, STREAM));
    NCCLCHECK(ncclGroupEnd());
    for (int r = 0; r < nranks; r++) wait1(w->comm, r, 2, 0, 2);
    step_done();
}

static void test_alltoall(struct world *w)
{
    const size_t count = 333; /* int32: 1332 bytes per block */
    size_t blk = count * 4;
    uint8_t *h = malloc(blk * (size_t)nranks);
    for (int r = 0; r < nranks; r++) make(h + (size_t)r * blk, rank, r, 40, blk);
    put_bytes(w, h, blk * (size_t)nranks);
    buf_fill(w->wbuf, 0xEE, w->wbytes);
    barrier(w->comm);
    ncclWaitSignalDesc_t *d = calloc((size_t)nranks, sizeof(*d));
    NCCLCHECK(ncclGroupStart());
    for (int r = 0; r < nranks; r++) {
        NCCLCHECK(ncclPutSignal(w->src + (size_t)r * blk, count, ncclInt32, r, w->win,
                                (size_t)rank * blk, 0, 0, 0, w->comm, STREAM));
        d[r] = (ncclWaitSignalDesc_t){ .opCnt = 1, .peer = r, .sigIdx = 0, .ctx = 0 };
    }
    NCCLCHECK(ncclGroupEnd());
    NCCLCHECK(ncclWaitSignal(nranks, d, w->comm, STREAM));
    step_done();
    for (int r = 0; r < nranks; r++) check_bytes(w->wbuf, (size_t)r * blk, blk, r, 40, "alltoall");
    barrier(w->comm);
    free(d);
    free(h);
}

/* Five puts, then one wait for the five: the same offset ends with the fifth put's bytes, and
 * five other ranges each hold their own. */
static void test_order(struct world *w, int grouped)
{
    int dst = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;
    const size_t same = 64, other = 100;
    uint8_t *h = malloc(10 * 128);
    for (int k = 0; k < 5; k++) {
        make(h + (size_t)(2 * k) * 128, rank, dst, 100 + k, same);
        make(h + (size_t)(2 * k + 1) * 128, rank, dst, 200 + k, other);
    }
    put_bytes(w, h, 10 * 128);
    buf_fill(w->wbuf, 0xEE, 8192);
    barrier(w->comm);
    if (grouped) NCCLCHECK(ncclGroupStart());
    for (int k = 0; k < 5; k++) {
        /* The other range first, without a signal of its own: a put always signals, so both
         * go to sigIdx 1, and the wait below counts 10 there. */
        NCCLCHECK(ncclPutSignal(w->src + (size_t)(2 * k + 1) * 128, other, ncclUint8, dst, w->win,
                                4096 + (size_t)k * 128, order_sig, 0, 0, w->comm, STREAM));
        NCCLCHECK(ncclPutSignal(w->src + (size_t)(2 * k) * 128, same, ncclUint8, dst, w->win, 0,
                                order_sig, 0, 0, w->comm, STREAM));
    }
    if (grouped) NCCLCHECK(ncclGroupEnd());
    wait1(w->comm, from, order_sig, 0, 10);
    step_done();
    const char *what = grouped ? "order (group)" : "order";
    check_bytes(w->wbuf, 0, same, from, 104, what);
    for (int k = 0; k < 5; k++)
        check_bytes(w->wbuf, 4096 + (size_t)k * 128, other, from, 200 + k, what);
    barrier(w->comm);
    free(h);
}

/* Signals of one (sigIdx, ctx) do not count for another. Ranks pair up (r, r ^ 1); in each
 * phase one of a pair sends: a signal on (s1, c1), then 50 ms later a put of LATE bytes with
 * (s0, c0). The other waits on (s0, c0) at once: its wait must end only with LATE there. (Were
 * the counts shared, the wait would end on the first signal, 50 ms before LATE is sent: the
 * check fails. A correct build passes whatever the timing.) */
static void counted_apart(ncclComm_t comm, ncclWindow_t win, uint8_t *wbuf, uint8_t *src, int s1,
                          int c1, int s0, int c0, int tag)
{
    int peer = rank ^ 1;
    uint8_t h[256];
    for (int phase = 0; phase < 2; phase++) {
        int sender = (rank & 1) == phase, active = peer < nranks;
        make(h, rank, peer, tag, sizeof(h));
        buf_write(src, h, sizeof(h));
        buf_fill(wbuf, 0xEE, 4096);
        NCCLCHECK(ncclAllReduce(bar_buf, bar_buf, 1, ncclInt32, ncclSum, comm, STREAM));
        step_done();
        if (!active) continue;
        if (sender) {
            NCCLCHECK(ncclSignal(peer, s1, c1, 0, comm, STREAM));
            step_done();
            usleep(50000);
            NCCLCHECK(
                ncclPutSignal(src, sizeof(h), ncclUint8, peer, win, 1000, s0, c0, 0, comm, STREAM));
            step_done();
            continue;
        }
        wait1(comm, peer, s0, c0, 1);
        step_done();
        char what[80];
        snprintf(what, sizeof(what), "counted apart: (%d, %d) vs (%d, %d)", s1, c1, s0, c0);
        check_bytes(wbuf, 1000, sizeof(h), peer, tag, what);
        wait1(comm, peer, s1, c1, 1);
        step_done();
    }
}

static void test_counts(struct world *w)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.numRmaCtx = 3;
    ncclComm_t c;
    NCCLCHECK(ncclCommSplit(w->comm, 0, rank, &c, &cfg));
    uint8_t *buf = buf_alloc(8192, 1);
    ncclWindow_t win;
    NCCLCHECK(ncclCommWindowRegister(c, buf, 8192, &win, NCCL_WIN_DEFAULT));
    /* A communicator's first one-sided call is collective (as in NCCL): every rank makes it. */
    signal_barrier(c, 0);
    counted_apart(c, win, buf, w->src, 1, 0, 0, 0, 60);
    counted_apart(c, win, buf, w->src, 0, 1, 0, 0, 61);
    counted_apart(c, win, buf, w->src, 7, 2, 7, 0, 62);
    counted_apart(c, win, buf, w->src, 3, 0, 3, 2, 63);
    /* Every (sigIdx, ctx) at once: s + 3c + 1 signals each, one wait of all of them. */
    int dst = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;
    ncclWaitSignalDesc_t d[8 * 3];
    int nd = 0;
    NCCLCHECK(ncclGroupStart());
    for (int s = 0; s < 8; s++)
        for (int x = 0; x < 3; x++) {
            for (int k = 0; k < s + 3 * x + 1; k++) NCCLCHECK(ncclSignal(dst, s, x, 0, c, STREAM));
            d[nd++] = (ncclWaitSignalDesc_t){
                .opCnt = s + 3 * x + 1, .peer = from, .sigIdx = s, .ctx = x
            };
        }
    NCCLCHECK(ncclGroupEnd());
    NCCLCHECK(ncclWaitSignal(nd, d, c, STREAM));
    step_done();
    /* Two descriptors of the same signal wait for their sum. */
    NCCLCHECK(ncclSignal(dst, 4, 1, 0, c, STREAM));
    NCCLCHECK(ncclSignal(dst, 4, 1, 0, c, STREAM));
    NCCLCHECK(ncclSignal(dst, 4, 1, 0, c, STREAM));
    ncclWaitSignalDesc_t twice[2] = { { .opCnt = 1, .peer = from, .sigIdx = 4, .ctx = 1 },
                                      { .opCnt = 2, .peer = from, .sigIdx = 4, .ctx = 1 } };
    NCCLCHECK(ncclWaitSignal(2, twice, c, STREAM));
    step_done();
    NCCLCHECK(ncclAllReduce(bar_buf, bar_buf, 1, ncclInt32, ncclSum, c, STREAM));
    step_done();
    NCCLCHECK(ncclCommWindowDeregister(c, win));
    buf_free(buf, 1);
    NCCLCHECK(ncclCommFinalize(c));
    NCCLCHECK(ncclCommDestroy(c));
}

/* A group that puts to the next rank and waits for the previous one, on every rank. */
static void test_group_both(struct world *w)
{
    int dst = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;
    uint8_t h[512];
    make(h, rank, dst, 70, sizeof(h));
    put_bytes(w, h, sizeof(h));
    buf_fill(w->wbuf, 0xEE, 4096);
    barrier(w->comm);
    ncclWaitSignalDesc_t d = { .opCnt = 1, .peer = from, .sigIdx = 3, .ctx = 0 };
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclWaitSignal(1, &d, w->comm, STREAM));
    NCCLCHECK(
        ncclPutSignal(w->src, sizeof(h), ncclUint8, dst, w->win, 100, 3, 0, 0, w->comm, STREAM));
    NCCLCHECK(ncclGroupEnd());
    step_done();
    check_bytes(w->wbuf, 100, sizeof(h), from, 70, "group put + wait");
    barrier(w->comm);
}

#define EXPECT_RES(call, want)                                                              \
    do {                                                                                    \
        ncclResult_t r_ = (call);                                                           \
        EXPECT(r_ == (want), "%s returned %s, want %s (%s)", #call, ncclGetErrorString(r_), \
               ncclGetErrorString(want), ncclGetLastError(NULL));                           \
    } while (0)

static void test_errors(struct world *w)
{
    ncclComm_t c = w->comm;
    ncclWindow_t win = w->win;
    const ncclResult_t arg = ncclInvalidArgument;
    ncclWaitSignalDesc_t d = { .opCnt = 1, .peer = 0, .sigIdx = 0, .ctx = 0 };
    /* Bad peers, sigIdx, ctx, flags, types, counts, offsets. */
    EXPECT_RES(ncclPutSignal(w->src, 1, ncclUint8, -1, win, 0, 0, 0, 0, c, STREAM), arg);
    EXPECT_RES(ncclPutSignal(w->src, 1, ncclUint8, nranks, win, 0, 0, 0, 0, c, STREAM), arg);
    EXPECT_RES(ncclSignal(nranks, 0, 0, 0, c, STREAM), arg);
    EXPECT_RES(ncclSignal(0, -1, 0, 0, c, STREAM), arg);
    EXPECT_RES(ncclSignal(0, 8, 0, 0, c, STREAM), arg);
    EXPECT_RES(ncclSignal(0, 0, -1, 0, c, STREAM), arg);
    EXPECT_RES(ncclSignal(0, 0, 1, 0, c, STREAM), arg); /* numRmaCtx is 1 */
    EXPECT_RES(ncclSignal(0, 0, 0, 1, c, STREAM), arg);
    EXPECT_RES(ncclPutSignal(w->src, 1, ncclUint8, 0, win, 0, 0, 0, 0x10, c, STREAM), arg);
    EXPECT_RES(ncclPutSignal(w->src, 1, (ncclDataType_t)99, 0, win, 0, 0, 0, 0, c, STREAM), arg);
    EXPECT_RES(ncclPutSignal(NULL, 4, ncclUint8, 0, win, 0, 0, 0, 0, c, STREAM), arg);
    EXPECT_RES(ncclPutSignal(w->src, 1, ncclUint8, 0, win, w->wbytes, 0, 0, 0, c, STREAM), arg);
    EXPECT_RES(ncclPutSignal(w->src, 2, ncclInt64, 0, win, w->wbytes - 15, 0, 0, 0, c, STREAM),
               arg);
    EXPECT_RES(ncclPutSignal(w->src, SIZE_MAX / 2, ncclInt64, 0, win, 0, 0, 0, 0, c, STREAM), arg);
    /* Bad windows: none, a stray pointer, another communicator's, one deregistered. */
    EXPECT_RES(ncclPutSignal(w->src, 1, ncclUint8, 0, NULL, 0, 0, 0, 0, c, STREAM), arg);
    EXPECT_RES(ncclPutSignal(w->src, 1, ncclUint8, 0, (ncclWindow_t)(uintptr_t)0x1234, 0, 0, 0, 0,
                             c, STREAM),
               arg);
    ncclComm_t other;
    NCCLCHECK(ncclCommSplit(c, 0, rank, &other, NULL));
    uint8_t *obuf = buf_alloc(4096, 1);
    ncclWindow_t owin, gone;
    NCCLCHECK(ncclCommWindowRegister(other, obuf, 4096, &owin, NCCL_WIN_DEFAULT));
    EXPECT_RES(ncclPutSignal(w->src, 1, ncclUint8, 0, owin, 0, 0, 0, 0, c, STREAM), arg);
    NCCLCHECK(ncclCommWindowRegister(c, obuf, 4096, &gone, NCCL_WIN_DEFAULT));
    NCCLCHECK(ncclCommWindowDeregister(c, gone));
    EXPECT_RES(ncclPutSignal(w->src, 1, ncclUint8, 0, gone, 0, 0, 0, 0, c, STREAM), arg);
    /* ncclWinGetUserPtr. */
    void *p = NULL;
    NCCLCHECK(ncclWinGetUserPtr(c, win, &p));
    EXPECT(p == w->wbuf, "ncclWinGetUserPtr: %p, want %p", p, (void *)w->wbuf);
    NCCLCHECK(ncclWinGetUserPtr(other, owin, &p));
    EXPECT(p == obuf, "ncclWinGetUserPtr: %p, want %p", p, (void *)obuf);
    EXPECT_RES(ncclWinGetUserPtr(c, owin, &p), arg);
    EXPECT_RES(ncclWinGetUserPtr(c, NULL, &p), arg);
    EXPECT_RES(ncclWinGetUserPtr(c, win, NULL), arg);
    NCCLCHECK(ncclCommWindowDeregister(other, owin));
    NCCLCHECK(ncclCommFinalize(other));
    NCCLCHECK(ncclCommDestroy(other));
    buf_free(obuf, 1);
    /* Waits. */
    EXPECT_RES(ncclWaitSignal(0, &d, c, STREAM), arg);
    EXPECT_RES(ncclWaitSignal(-1, &d, c, STREAM), arg);
    EXPECT_RES(ncclWaitSignal(1, NULL, c, STREAM), arg);
    ncclWaitSignalDesc_t bad[2] = { d, d };
    bad[1].opCnt = 0;
    EXPECT_RES(ncclWaitSignal(2, bad, c, STREAM), arg);
    bad[1].opCnt = -3;
    EXPECT_RES(ncclWaitSignal(2, bad, c, STREAM), arg);
    bad[1] = d;
    bad[1].peer = nranks;
    EXPECT_RES(ncclWaitSignal(2, bad, c, STREAM), arg);
    bad[1] = d;
    bad[1].sigIdx = 8;
    EXPECT_RES(ncclWaitSignal(2, bad, c, STREAM), arg);
    bad[1] = d;
    bad[1].ctx = 1;
    EXPECT_RES(ncclWaitSignal(2, bad, c, STREAM), arg);
#ifndef ZT_GPU
    /* A stream on a host communicator. */
    EXPECT_RES(ncclSignal(0, 0, 0, 0, c, (cudaStream_t)(uintptr_t)0x10), arg);
    EXPECT_RES(ncclWaitSignal(1, &d, c, (cudaStream_t)(uintptr_t)0x10), arg);
#endif
    /* numRmaCtx 0: one-sided calls are off. */
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.numRmaCtx = 0;
    ncclComm_t off;
    NCCLCHECK(ncclCommSplit(c, 0, rank, &off, &cfg));
    EXPECT_RES(ncclSignal(0, 0, 0, 0, off, STREAM), ncclInvalidUsage);
    EXPECT_RES(ncclWaitSignal(1, &d, off, STREAM), ncclInvalidUsage);
    EXPECT_RES(ncclPutSignal(w->src, 1, ncclUint8, 0, win, 0, 0, 0, 0, off, STREAM),
               ncclInvalidUsage);
    NCCLCHECK(ncclCommFinalize(off));
    NCCLCHECK(ncclCommDestroy(off));
    /* An error in a group fails ncclGroupEnd, and the group's other calls are not issued: the
     * put of MARK bytes must not land. */
    int dst = (rank + 1) % nranks;
    uint8_t mark[64];
    memset(mark, 0x5A, sizeof(mark));
    put_bytes(w, mark, sizeof(mark));
    buf_fill(w->wbuf, 0xEE, 4096);
    barrier(c);
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclPutSignal(w->src, sizeof(mark), ncclUint8, dst, win, 200, 0, 0, 0, c, STREAM));
    EXPECT_RES(ncclSignal(-5, 0, 0, 0, c, STREAM), arg);
    EXPECT_RES(ncclGroupEnd(), arg);
    step_done();
    barrier(c);
    check_byte(w->wbuf, 200, 0xEE, "put in a failed group");
    check_byte(w->wbuf, 263, 0xEE, "put in a failed group");
    barrier(c);
}

static int run_dead(struct world *w)
{
    int victim = nranks - 1;
    signal_barrier(w->comm, 0); /* the setup ran everywhere */
    barrier(w->comm);
    if (rank == victim) _exit(0); /* gone without a word */
    ncclWaitSignalDesc_t d = { .opCnt = 1, .peer = victim, .sigIdx = 0, .ctx = 0 };
    ncclResult_t r = ncclWaitSignal(1, &d, w->comm, STREAM);
#ifdef ZT_GPU
    if (r == ncclSuccess)
        r = cudaStreamSynchronize(stream) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
    if (r == ncclSuccess) NCCLCHECK(ncclCommGetAsyncError(w->comm, &r));
#endif
    const char *why = ncclGetLastError(w->comm);
    char who[32];
    snprintf(who, sizeof(who), "rank %d", victim);
    EXPECT(r == ncclRemoteError, "wait for a dead peer returned %s, want ncclRemoteError",
           ncclGetErrorString(r));
#ifndef ZT_GPU
    /* (A kernel that stops reports the engine's failure when the engine has recorded it; the
     * host may look first and find the kernel's own, shorter reason.) */
    EXPECT(strstr(why, who) != NULL, "the error does not name %s: %s", who, why);
#endif
    printf("[%d] dead peer: %s: %s\n", rank, ncclGetErrorString(r), why);
    ncclCommAbort(w->comm);
    buf_free(w->wbuf, 1);
    buf_free(w->src, 0);
    buf_free(bar_buf, 0);
    return failures ? 1 : 0;
}

#ifdef ZT_GPU
#include "rma_gpu_modes.h"
#endif

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "all";
    struct zn_launch_info li;
    zn_launch_info_get(&li);
#ifdef ZT_GPU
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    CUDACHECK(cudaSetDevice(li.local_rank % ndev));
    CUDACHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
#endif
    struct world w;
    w.comm = mp_world();
    bar_buf = buf_alloc(sizeof(int), 0);
    buf_fill(bar_buf, 0, sizeof(int));
    int portable = !strcmp(mode, "portable");
    w.wbytes = SLOT * (size_t)nranks;
    w.wbuf = buf_alloc(w.wbytes, 1);
    w.src = buf_alloc(SLOT, portable);
    NCCLCHECK(ncclCommWindowRegister(w.comm, w.wbuf, w.wbytes, &w.win,
                                     portable ? NCCL_WIN_COLL_SYMMETRIC : NCCL_WIN_DEFAULT));
    if (portable)
        NCCLCHECK(ncclCommWindowRegister(w.comm, w.src, SLOT, &w.srcwin, NCCL_WIN_COLL_SYMMETRIC));
    if (!strcmp(mode, "dead")) return run_dead(&w);
#ifdef ZT_GPU
    if (!strcmp(mode, "graph")) test_graph(&w);
    if (!strcmp(mode, "timing")) test_timing(&w);
#endif
    if (portable) {
        order_sig = 0;
        test_ring(&w);
        for (int i = 0; i < 3; i++) signal_barrier(w.comm, 0);
        test_alltoall(&w);
        test_order(&w, 0);
        test_order(&w, 1);
        NCCLCHECK(ncclCommWindowDeregister(w.comm, w.srcwin));
    }
    if (!strcmp(mode, "all")) {
        test_ring(&w);
        test_barrier(&w);
        test_alltoall(&w);
        test_order(&w, 0);
        test_order(&w, 1);
        test_counts(&w);
        test_group_both(&w);
        test_errors(&w);
        test_ring(&w); /* still usable after the errors */
    }
    NCCLCHECK(ncclCommWindowDeregister(w.comm, w.win));
    buf_free(w.wbuf, 1);
    buf_free(w.src, portable);
#ifdef ZT_GPU
    /* mp_finish sums on host buffers: not on a cuda communicator. */
    int64_t *dsum = buf_alloc(8, 0), total = 0, mine = failures;
    buf_write(dsum, &mine, 8);
    NCCLCHECK(ncclAllReduce(dsum, dsum, 1, ncclInt64, ncclSum, w.comm, stream));
    buf_read(&total, dsum, 8);
    NCCLCHECK(ncclCommFinalize(w.comm));
    NCCLCHECK(ncclCommDestroy(w.comm));
    if (rank == 0)
        printf("rma_gpu_check %s: %d ranks: %lld failures\n", mode, nranks, (long long)total);
    return total ? 1 : 0;
#else
    buf_free(bar_buf, 0);
    return mp_finish(w.comm, "rma_check");
#endif
}
