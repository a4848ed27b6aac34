/*
 * gpu_comm_check: communicator management on cuda communicators, one process per GPU under
 * zinc-run (what PyTorch does between its collectives):
 *   - ncclMemAlloc'd buffers, registered with ncclCommRegister and as a window, in-place and
 *     out-of-place into cudaMalloc'd memory; both buffers registered (zero-copy), also at
 *     unaligned offsets, and again after deregistration;
 *   - PreMulSum with a per-rank scalar in device memory, changed between two calls;
 *   - ncclCommSplit (evens / odds, ranks reversed by key) and ncclCommShrink (the last rank
 *     excluded; it does not call), each child checked with an allreduce and an allgather of
 *     the world ranks in child order;
 *   - the non-blocking ncclCommFinalize / ncclCommDestroy flow;
 *   - one group of 4 x 120 sends and receives of odd sizes with both ring neighbours, and one
 *     of 4 x 150 on a child: over the 512 one p2p launch carries, so refused with
 *     ncclInvalidUsage there, and carried by the staged path;
 * Every result is compared against the value computed here.
 *
 *   zinc-run -n 4 gpu_comm_check        everything
 *   zinc-run -n 4 gpu_comm_check p2p    the world communicator and the large groups only
 *   zinc-run -n N gpu_comm_check gone   the last rank leaves after one allreduce (destroys its
 *                                       communicator and exits); the others' next allreduce
 *                                       must end with an error (not hang), and across hosts
 *                                       (ZINC_HOSTID) the error must come from the GPU net
 *                                       proxy, not from the kernels' ZINC_TIMEOUT
 *   zinc-run -n N gpu_comm_check gone_p2p  (N >= 3, every rank its own host) the last rank
 *                                       leaves after one allreduce; 2 s later the others
 *                                       send and receive around a ring among themselves
 *                                       (checked), then an allreduce that needs the rank that
 *                                       left must end with the GPU net proxy's error naming it
 */
#include "nccl.h"
#include "zinc.h"
#include "bootstrap/launcher.h"

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, nranks;
static long failures;
static cudaStream_t stream;

#include "mp_check.h"

/* Host to device, done when it returns and ordered before everything later on `stream`. (A
 * plain cudaMemcpy from pageable memory may return before the data has landed, and the
 * collectives run on a non-blocking stream that does not wait for it.) */
static void upload(void *dst, const void *src, size_t bytes)
{
    CUDACHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
}

/* Allreduce (sum) of n floats rank + (i % 7) on comm, in place or out of place; every element
 * must be what the members' values add up to. */
static void check_allreduce(ncclComm_t comm, float *send, float *recv, size_t n, const int *members,
                            int m, const char *what)
{
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = (float)(rank + (int)(i % 7));
    upload(send, h, n * sizeof(float));
    NCCLCHECK(ncclAllReduce(send, recv, n, ncclFloat, ncclSum, comm, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
    CUDACHECK(cudaMemcpy(h, recv, n * sizeof(float), cudaMemcpyDeviceToHost));
    int base = 0;
    for (int k = 0; k < m; k++) base += members[k];
    long bad = 0;
    size_t first = 0;
    for (size_t i = 0; i < n; i++)
        if (h[i] != (float)(base + m * (int)(i % 7)) && bad++ == 0) first = i;
    EXPECT(bad == 0, "%s: %ld of %zu elements wrong, first [%zu] = %g, expected %d", what, bad, n,
           first, h[first], base + m * (int)(first % 7));
    free(h);
}

/* comm's ranks must be the world ranks members[0..m), in that order. */
static void check_members(ncclComm_t comm, const int *members, int m, const char *what)
{
    int count = -1, me = -1, dev = -1, is_host = -1, cur = -2;
    NCCLCHECK(ncclCommCount(comm, &count));
    NCCLCHECK(ncclCommUserRank(comm, &me));
    NCCLCHECK(ncclCommCuDevice(comm, &dev));
    NCCLCHECK(zincCommIsHost(comm, &is_host));
    CUDACHECK(cudaGetDevice(&cur));
    EXPECT(count == m, "%s: %d ranks, expected %d", what, count, m);
    EXPECT(me >= 0 && me < m && members[me] == rank, "%s: rank %d is not world rank %d", what, me,
           rank);
    EXPECT(dev == cur && is_host == 0, "%s: device %d (current %d), host comm %d", what, dev, cur,
           is_host);
    int32_t *d = NULL, got[64];
    CUDACHECK(cudaMalloc((void **)&d, (size_t)(m + 1) * sizeof(int32_t)));
    upload(d, &rank, sizeof(int32_t));
    NCCLCHECK(ncclAllGather(d, d + 1, 1, ncclInt32, comm, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
    CUDACHECK(cudaMemcpy(got, d + 1, (size_t)m * sizeof(int32_t), cudaMemcpyDeviceToHost));
    for (int k = 0; k < m && k < 64; k++)
        EXPECT(got[k] == members[k], "%s: allgather slot %d holds world rank %d, expected %d", what,
               k, got[k], members[k]);
    CUDACHECK(cudaFree(d));
    float *buf = NULL;
    size_t n = (1 << 20) + 13; /* two-shot, odd tail */
    CUDACHECK(cudaMalloc((void **)&buf, n * sizeof(float)));
    check_allreduce(comm, buf, buf, n, members, m, what);
    check_allreduce(comm, buf, buf, 1000, members, m, what); /* LL */
    CUDACHECK(cudaFree(buf));
}

static void test_memalloc(ncclComm_t world, const int *all)
{
    size_t n = (4 << 20) + 5;
    float *a = NULL, *out = NULL;
    void *reg = NULL;
    ncclWindow_t win = NULL;
    NCCLCHECK(ncclMemAlloc((void **)&a, n * sizeof(float)));
    struct cudaPointerAttributes attr;
    CUDACHECK(cudaPointerGetAttributes(&attr, a));
    int dev = -1;
    CUDACHECK(cudaGetDevice(&dev));
    EXPECT(attr.type == cudaMemoryTypeDevice && attr.device == dev,
           "ncclMemAlloc memory: type %d on device %d, expected device memory on %d",
           (int)attr.type, attr.device, dev);
    CUDACHECK(cudaMalloc((void **)&out, n * sizeof(float)));
    check_allreduce(world, a, a, n, all, nranks, "ncclMemAlloc buffer, in place");
    NCCLCHECK(ncclCommRegister(world, a, n * sizeof(float), &reg));
    EXPECT(reg != NULL, "ncclCommRegister gave no handle");
    check_allreduce(world, a, out, n, all, nranks, "registered buffer, out of place");
    check_allreduce(world, a, a, 3333, all, nranks, "registered buffer, small");
    NCCLCHECK(ncclCommWindowRegister(world, a, n * sizeof(float), &win, NCCL_WIN_COLL_SYMMETRIC));
    check_allreduce(world, a, a, n, all, nranks, "window buffer");
    NCCLCHECK(ncclCommWindowDeregister(world, win));
    /* Both buffers registered: zero-copy on a communicator whose GPUs all map each other,
     * also at offsets that break 16-byte alignment. */
    float *b = NULL;
    void *reg_b = NULL;
    NCCLCHECK(ncclMemAlloc((void **)&b, n * sizeof(float)));
    NCCLCHECK(ncclCommRegister(world, b, n * sizeof(float), &reg_b));
    check_allreduce(world, a, b, n, all, nranks, "registered in and out, out of place");
    check_allreduce(world, a + 1000, b + 77, n - 2000, all, nranks,
                    "registered in and out, unaligned offsets");
    NCCLCHECK(ncclCommDeregister(world, reg_b));
    NCCLCHECK(ncclCommDeregister(world, reg));
    check_allreduce(world, a, b, n, all, nranks, "after deregistration");
    NCCLCHECK(ncclMemFree(b));
    CUDACHECK(cudaFree(out));
    NCCLCHECK(ncclMemFree(a));
}

/* Every rank scales its input by a scalar of its own, read from device memory at each call. */
static void test_premul_device(ncclComm_t world)
{
    size_t n = 100003;
    float *x = NULL, *s = NULL, *h = malloc(n * sizeof(float));
    CUDACHECK(cudaMalloc((void **)&x, n * sizeof(float)));
    CUDACHECK(cudaMalloc((void **)&s, sizeof(float)));
    ncclRedOp_t op;
    float scalar = (float)(rank + 1);
    upload(s, &scalar, sizeof(float));
    NCCLCHECK(ncclRedOpCreatePreMulSum(&op, s, ncclFloat, ncclScalarDevice, world));
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < n; i++) h[i] = (float)(i % 5);
        upload(x, h, n * sizeof(float));
        NCCLCHECK(ncclAllReduce(x, x, n, ncclFloat, op, world, stream));
        CUDACHECK(cudaStreamSynchronize(stream));
        CUDACHECK(cudaMemcpy(h, x, n * sizeof(float), cudaMemcpyDeviceToHost));
        /* round 0: scalars 1..n; round 1: 2 on every rank */
        float sum = round == 0 ? (float)(nranks * (nranks + 1) / 2) : (float)(2 * nranks);
        long bad = 0;
        for (size_t i = 0; i < n; i++) bad += h[i] != sum * (float)(i % 5);
        EXPECT(bad == 0, "PreMulSum with a device scalar, round %d: %ld wrong", round, bad);
        scalar = 2.0f;
        upload(s, &scalar, sizeof(float));
    }
    NCCLCHECK(ncclRedOpDestroy(op, world));
    CUDACHECK(cudaFree(x));
    CUDACHECK(cudaFree(s));
    free(h);
}

static void test_split(ncclComm_t world)
{
    ncclComm_t c = NULL;
    NCCLCHECK(ncclCommSplit(world, rank % 2, -rank, &c, NULL));
    int members[64], m = 0;
    for (int r = nranks - 1; r >= 0; r--)
        if (r % 2 == rank % 2) members[m++] = r; /* key -rank: highest world rank first */
    check_members(c, members, m, "split");
    ncclComm_t none = (ncclComm_t)(uintptr_t)1;
    NCCLCHECK(ncclCommSplit(world, rank == 0 ? NCCL_SPLIT_NOCOLOR : 0, rank, &none, NULL));
    if (rank == 0)
        EXPECT(none == NULL, "NCCL_SPLIT_NOCOLOR gave a communicator");
    else {
        int others[64], k = 0;
        for (int r = 1; r < nranks; r++) others[k++] = r;
        check_members(none, others, k, "split without rank 0");
        NCCLCHECK(ncclCommDestroy(none));
    }
    NCCLCHECK(ncclCommFinalize(c));
    NCCLCHECK(ncclCommDestroy(c));
}

/* The last rank is excluded and does not call; the survivors' communicator works. */
static void test_shrink(ncclComm_t world)
{
    if (nranks < 2) return;
    int last = nranks - 1, members[64];
    for (int r = 0; r < last; r++) members[r] = r;
    if (rank != last) {
        ncclComm_t s = NULL;
        NCCLCHECK(ncclCommShrink(world, &last, 1, &s, NULL, NCCL_SHRINK_DEFAULT));
        check_members(s, members, last, "shrink");
        /* Non-blocking finalize: ncclInProgress until done, then destroy. */
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;
        ncclComm_t nb = NULL;
        ncclResult_t r = ncclCommShrink(world, &last, 1, &nb, &cfg, NCCL_SHRINK_DEFAULT);
        EXPECT(r == ncclSuccess || r == ncclInProgress, "non-blocking shrink returned %d", r);
        ncclResult_t st = mp_wait(nb);
        EXPECT(st == ncclSuccess, "non-blocking shrink ended in %d", st);
        if (st == ncclSuccess) check_members(nb, members, last, "non-blocking shrink");
        r = ncclCommFinalize(nb);
        EXPECT(r == ncclSuccess || r == ncclInProgress, "non-blocking finalize returned %d", r);
        st = mp_wait(nb);
        EXPECT(st == ncclSuccess, "non-blocking finalize ended in %d", st);
        NCCLCHECK(ncclCommDestroy(nb));
        NCCLCHECK(ncclCommDestroy(s));
    }
}

/* Byte j of the i-th message from rank `from` to rank `to`. */
static uint8_t p2p_byte(int from, int to, int i, size_t j)
{
    return (uint8_t)(from * 31 + to * 7 + i * 13 + (int)(j % 251));
}

/* 1 B to 40 KB: with ZINC_GPU_P2P_LL=16K (the ctest's setting) under half go as LL messages,
 * the others through the FIFOs, mixed on every pair. */
static size_t p2p_size(int i)
{
    return 1 + (size_t)(i * 997) % 40000;
}

/* One group of 4 * K operations: K sends to next and K to prev, K receives from prev and K from
 * next, sizes p2p_size(i), matched in call order on each pair. Returns
 * ncclGroupEnd's result; on success the received bytes are checked. */
static ncclResult_t many_p2p(ncclComm_t comm, int K)
{
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    size_t *off = malloc((size_t)(K + 1) * sizeof(*off));
    off[0] = 0;
    for (int i = 0; i < K; i++) off[i + 1] = off[i] + p2p_size(i);
    size_t total = off[K];
    uint8_t *dev = NULL, *h = malloc(4 * total);
    CUDACHECK(cudaMalloc((void **)&dev, 4 * total));
    /* [0] to next, [1] to prev, [2] from prev, [3] from next. */
    for (int i = 0; i < K; i++)
        for (size_t j = 0; j < p2p_size(i); j++) {
            h[off[i] + j] = p2p_byte(rank, next, i, j);
            h[total + off[i] + j] = p2p_byte(rank, prev, i + K, j);
        }
    memset(h + 2 * total, 0xee, 2 * total);
    upload(dev, h, 4 * total);
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < K; i++) {
        NCCLCHECK(ncclSend(dev + off[i], p2p_size(i), ncclUint8, next, comm, stream));
        NCCLCHECK(ncclRecv(dev + 2 * total + off[i], p2p_size(i), ncclUint8, prev, comm, stream));
    }
    for (int i = 0; i < K; i++) {
        NCCLCHECK(ncclSend(dev + total + off[i], p2p_size(i), ncclUint8, prev, comm, stream));
        NCCLCHECK(ncclRecv(dev + 3 * total + off[i], p2p_size(i), ncclUint8, next, comm, stream));
    }
    ncclResult_t res = ncclGroupEnd();
    if (res == ncclSuccess) {
        CUDACHECK(cudaStreamSynchronize(stream));
        CUDACHECK(cudaMemcpy(h, dev, 4 * total, cudaMemcpyDeviceToHost));
        long bad = 0;
        for (int i = 0; i < K; i++)
            for (size_t j = 0; j < p2p_size(i); j++) {
                /* From prev: its "to next" message i; from next: its "to prev" one (K + i). */
                bad += h[2 * total + off[i] + j] != p2p_byte(prev, rank, i, j);
                bad += h[3 * total + off[i] + j] != p2p_byte(next, rank, i + K, j);
            }
        EXPECT(bad == 0, "group of %d sends and receives: %ld wrong bytes", 4 * K, bad);
    }
    CUDACHECK(cudaFree(dev));
    free(h);
    free(off);
    return res;
}

/* A ring shift where every rank sends a different size, 64 KB << 2r: a rank's group holds one
 * send and one receive of different sizes, so the ranks' largest messages differ, and each
 * message must still be cut into the same channels at both ends (a cut by the group's widest
 * operation would differ between the two). Checked byte by byte. */
static void test_uneven_p2p(ncclComm_t comm)
{
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    size_t out = (size_t)64 << 10 << (2 * (rank % 4)), in = (size_t)64 << 10 << (2 * (prev % 4));
    uint8_t *dev = NULL, *h = malloc(out + in);
    CUDACHECK(cudaMalloc((void **)&dev, out + in));
    for (size_t j = 0; j < out; j++) h[j] = p2p_byte(rank, next, 7, j);
    memset(h + out, 0xee, in);
    upload(dev, h, out + in);
    for (int round = 0; round < 3; round++) {
        NCCLCHECK(ncclGroupStart());
        NCCLCHECK(ncclSend(dev, out, ncclUint8, next, comm, stream));
        NCCLCHECK(ncclRecv(dev + out, in, ncclUint8, prev, comm, stream));
        NCCLCHECK(ncclGroupEnd());
    }
    CUDACHECK(cudaStreamSynchronize(stream));
    CUDACHECK(cudaMemcpy(h + out, dev + out, in, cudaMemcpyDeviceToHost));
    long bad = 0;
    for (size_t j = 0; j < in; j++) bad += h[out + j] != p2p_byte(prev, rank, 7, j);
    EXPECT(bad == 0, "uneven ring shift (%zu bytes from rank %d): %ld wrong bytes", in, prev, bad);
    CUDACHECK(cudaFree(dev));
    free(h);
}

/* 480 operations: within what one kernel launch carries (512) on the p2p path. */
static void test_many_p2p(ncclComm_t world)
{
    ncclResult_t r = many_p2p(world, 120);
    EXPECT(r == ncclSuccess, "group of 480 sends and receives: %s", ncclGetErrorString(r));
}

/* 600 operations, on a child communicator (a failed group leaves its communicator in error):
 * the p2p path refuses them with ncclInvalidUsage and says why; the staged path (no GPU
 * mapping, or ring mode, where sends and receives are staged) carries any number. */
static void test_p2p_limit(ncclComm_t world)
{
    const char *dis = getenv("ZINC_P2P_DISABLE"), *topo = getenv("ZINC_P2P_TOPO");
    int staged = (dis && atoi(dis)) || (topo && !strcmp(topo, "ring"));
    ncclComm_t c;
    NCCLCHECK(ncclCommSplit(world, 0, rank, &c, NULL));
    ncclResult_t r = many_p2p(c, 150);
    if (staged) {
        EXPECT(r == ncclSuccess, "staged group of 600 sends and receives: %s",
               ncclGetErrorString(r));
        NCCLCHECK(ncclCommDestroy(c));
        return;
    }
    const char *why = ncclGetLastError(c);
    EXPECT(r == ncclInvalidUsage,
           "group of 600 sends and receives on the p2p path: %s, want "
           "ncclInvalidUsage",
           ncclGetErrorString(r));
    EXPECT(why && strstr(why, "more than 512"), "group of 600: last error \"%s\"",
           why ? why : "(none)");
    NCCLCHECK(ncclCommAbort(c));
}

static int test_gone(ncclComm_t world, const int *all)
{
    size_t n = 1 << 20;
    float *buf = NULL;
    CUDACHECK(cudaMalloc((void **)&buf, 2 * n * sizeof(float)));
    check_allreduce(world, buf, buf + n, n, all, nranks, "before the last rank leaves");
    if (rank == nranks - 1) {
        NCCLCHECK(ncclCommDestroy(world));
        printf("gpu_comm_check: rank %d left\n", rank);
        return failures ? 1 : 0;
    }
    NCCLCHECK(ncclAllReduce(buf, buf + n, n, ncclFloat, ncclSum, world, stream));
    ncclResult_t async = ncclSuccess;
    for (int i = 0; i < 12000 && async == ncclSuccess; i++) {
        if (cudaStreamQuery(stream) != cudaErrorNotReady) {
            NCCLCHECK(ncclCommGetAsyncError(world, &async));
            if (async == ncclSuccess) {
                printf("gpu_comm_check: rank %d: the allreduce completed without the last rank\n",
                       rank);
                return 1;
            }
            break;
        }
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    const char *why = ncclGetLastError(world);
    printf("gpu_comm_check: rank %d: %s: %s\n", rank, ncclGetErrorString(async), why);
    EXPECT(async != ncclSuccess, "the allreduce without the last rank did not end in 120 s");
    if (getenv("ZINC_HOSTID"))
        EXPECT(strstr(why, "GPU net proxy") != NULL, "the error is not the GPU net proxy's: %s",
               why);
    ncclCommAbort(world);
    return failures ? 1 : 0;
}

/* After the last rank left, the others still talk among themselves: their sends and
 * receives do not need it and must not be ended because it closed its connections. */
static int test_gone_p2p(ncclComm_t world, const int *all)
{
    size_t n = 1 << 20;
    int m = nranks - 1, last = nranks - 1;
    float *buf = NULL;
    CUDACHECK(cudaMalloc((void **)&buf, 2 * n * sizeof(float)));
    check_allreduce(world, buf, buf + n, n, all, nranks, "before the last rank leaves");
    if (rank == last) {
        NCCLCHECK(ncclCommDestroy(world));
        printf("gpu_comm_check: rank %d left\n", rank);
        return failures ? 1 : 0;
    }
    struct timespec two = { 2, 0 };
    nanosleep(&two, NULL);
    int next = (rank + 1) % m, prev = (rank + m - 1) % m;
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = (float)(rank * 1000 + (int)(i % 13));
    upload(buf, h, n * sizeof(float));
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(buf, n, ncclFloat, next, world, stream));
    NCCLCHECK(ncclRecv(buf + n, n, ncclFloat, prev, world, stream));
    NCCLCHECK(ncclGroupEnd());
    CUDACHECK(cudaStreamSynchronize(stream));
    ncclResult_t async = ncclSuccess;
    NCCLCHECK(ncclCommGetAsyncError(world, &async));
    EXPECT(async == ncclSuccess, "send/recv among the ranks that stayed failed: %s",
           ncclGetLastError(world));
    CUDACHECK(cudaMemcpy(h, buf + n, n * sizeof(float), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (size_t i = 0; i < n; i++) bad += h[i] != (float)(prev * 1000 + (int)(i % 13));
    EXPECT(bad == 0, "send/recv from rank %d after rank %d left: %ld of %zu elements wrong", prev,
           last, bad, n);
    free(h);
    printf("gpu_comm_check: rank %d: send/recv with ranks %d and %d after rank %d left: %s\n", rank,
           next, prev, last, bad || async != ncclSuccess ? "FAILED" : "ok");
    /* An allreduce needs the rank that left. */
    NCCLCHECK(ncclAllReduce(buf, buf + n, n, ncclFloat, ncclSum, world, stream));
    for (int i = 0; i < 12000 && async == ncclSuccess; i++) {
        if (cudaStreamQuery(stream) != cudaErrorNotReady) {
            NCCLCHECK(ncclCommGetAsyncError(world, &async));
            break;
        }
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    const char *why = ncclGetLastError(world);
    char who[32];
    snprintf(who, sizeof(who), "rank %d", last);
    printf("gpu_comm_check: rank %d: allreduce without rank %d: %s: %s\n", rank, last,
           ncclGetErrorString(async), why);
    EXPECT(async == ncclRemoteError, "the allreduce without rank %d returned %s", last,
           ncclGetErrorString(async));
    EXPECT(strstr(why, "GPU net proxy") && strstr(why, who),
           "the error does not come from the GPU net proxy naming %s: %s", who, why);
    ncclCommAbort(world);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (mp_gpu_select()) return 77;
    CUDACHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    ncclUniqueId id;
    ncclComm_t world;
    NCCLCHECK(ncclGetUniqueId(&id));
    NCCLCHECK(ncclCommInitRank(&world, nranks, id, rank));
    int all[64];
    for (int r = 0; r < nranks && r < 64; r++) all[r] = r;

    if (argc > 1 && !strcmp(argv[1], "gone")) return test_gone(world, all);
    if (argc > 1 && !strcmp(argv[1], "gone_p2p")) return test_gone_p2p(world, all);
    int only_p2p = argc > 1 && !strcmp(argv[1], "p2p");
    check_members(world, all, nranks, "world");
    test_uneven_p2p(world);
    test_many_p2p(world);
    test_p2p_limit(world);
    if (!only_p2p) {
        test_memalloc(world, all);
        test_premul_device(world);
        test_split(world);
        test_shrink(world);
    }

    /* The world stays whole; the failure count travels over it. */
    int64_t *d = NULL, total = 0, mine = failures;
    CUDACHECK(cudaMalloc((void **)&d, sizeof(int64_t)));
    upload(d, &mine, sizeof(int64_t));
    NCCLCHECK(ncclAllReduce(d, d, 1, ncclInt64, ncclSum, world, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
    CUDACHECK(cudaMemcpy(&total, d, sizeof(int64_t), cudaMemcpyDeviceToHost));
    CUDACHECK(cudaFree(d));
    NCCLCHECK(ncclCommFinalize(world));
    NCCLCHECK(ncclCommDestroy(world));
    if (rank == 0) printf("gpu_comm_check: %d ranks: %lld failures\n", nranks, (long long)total);
    return total ? 1 : 0;
}
