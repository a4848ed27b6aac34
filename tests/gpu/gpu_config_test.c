/*
 * gpu_config_check: the NCCL 2.29-2.30 config fields on cuda communicators, one process per
 * rank under zinc-run:
 *   - graphUsageMode 2 (graphs mixed with eager calls): an eager allreduce on stream A, one
 *     captured into a graph on stream B, an eager one on stream C, then the graph replayed
 *     twice on B; every result exact. The communicator orders its launches across streams
 *     with events, which must stay within one domain (an event recorded outside a capture
 *     cannot be waited on inside it);
 *   - graphUsageMode 1 with graphStreamOrdering 0: one capture forked over two streams that
 *     the application joins itself, an allreduce on each; zinc adds no edges between them;
 *   - maxP2pPeers 1: every rank sends a distinct block to every rank in one group (the
 *     kernels run in waves), checked exactly, and again inside a graph.
 *
 *   zinc-run -n 4 gpu_config_check
 */
#include "nccl.h"
#include "bootstrap/launcher.h"

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;
static long failures;

#include "mp_check.h"

enum { N = 4099 };

static ncclComm_t make_comm(ncclComm_t world, int mode, int order, int max_peers)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.graphUsageMode = mode;
    cfg.graphStreamOrdering = order;
    cfg.maxP2pPeers = max_peers;
    ncclComm_t c = NULL;
    NCCLCHECK(ncclCommSplit(world, 0, rank, &c, &cfg));
    return c;
}

/* dev[i] = rank * 1000 + i + salt, on s. */
static void fill(float *dev, int salt, cudaStream_t s)
{
    float *h = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) h[i] = (float)(rank * 1000 + i % 1000 + salt);
    CUDACHECK(cudaMemcpyAsync(dev, h, N * sizeof(float), cudaMemcpyHostToDevice, s));
    CUDACHECK(cudaStreamSynchronize(s));
    free(h);
}

/* The sum over ranks of fill(salt) at i. */
static float want(int i, int salt)
{
    float w = 0;
    for (int r = 0; r < nranks; r++) w += (float)(r * 1000 + i % 1000 + salt);
    return w;
}

static void check(const float *dev, int salt, const char *what)
{
    float *h = malloc(N * sizeof(float));
    CUDACHECK(cudaMemcpy(h, dev, N * sizeof(float), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int i = 0; i < N; i++) bad += h[i] != want(i, salt);
    EXPECT(bad == 0, "%s: %ld of %d elements wrong (first: %g, want %g)", what, bad, N, h[0],
           want(0, salt));
    free(h);
}

static void test_mixing(ncclComm_t world)
{
    ncclComm_t c = make_comm(world, 2, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT);
    cudaStream_t a, b, cs;
    CUDACHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CUDACHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CUDACHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    float *x, *y, *z;
    CUDACHECK(cudaMalloc((void **)&x, N * sizeof(float)));
    CUDACHECK(cudaMalloc((void **)&y, N * sizeof(float)));
    CUDACHECK(cudaMalloc((void **)&z, N * sizeof(float)));
    fill(x, 1, a);
    fill(y, 2, b);
    fill(z, 3, cs);
    NCCLCHECK(ncclAllReduce(x, x, N, ncclFloat, ncclSum, c, a)); /* eager on a */
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUDACHECK(cudaStreamBeginCapture(b, cudaStreamCaptureModeThreadLocal));
    NCCLCHECK(ncclAllReduce(y, y, N, ncclFloat, ncclSum, c, b)); /* captured on b */
    CUDACHECK(cudaStreamEndCapture(b, &g));
    CUDACHECK(cudaGraphInstantiate(&ge, g, 0));
    NCCLCHECK(ncclAllReduce(z, z, N, ncclFloat, ncclSum, c, cs)); /* eager on c */
    CUDACHECK(cudaStreamSynchronize(a));
    CUDACHECK(cudaStreamSynchronize(cs));
    check(x, 1, "graphUsageMode 2: eager allreduce on stream A");
    check(z, 3, "graphUsageMode 2: eager allreduce on stream C after a capture on B");
    /* Replays: y holds the sum after the first; reset it before each. */
    for (int rep = 0; rep < 2; rep++) {
        fill(y, 2 + rep, b);
        CUDACHECK(cudaGraphLaunch(ge, b));
        CUDACHECK(cudaStreamSynchronize(b));
        check(y, 2 + rep, "graphUsageMode 2: graph replay on stream B");
    }
    CUDACHECK(cudaGraphExecDestroy(ge));
    CUDACHECK(cudaGraphDestroy(g));
    CUDACHECK(cudaFree(x));
    CUDACHECK(cudaFree(y));
    CUDACHECK(cudaFree(z));
    CUDACHECK(cudaStreamDestroy(a));
    CUDACHECK(cudaStreamDestroy(b));
    CUDACHECK(cudaStreamDestroy(cs));
    NCCLCHECK(ncclCommDestroy(c));
}

/* One capture forked from a onto b and joined back by the application: with
 * graphStreamOrdering 0 zinc adds no edge between the two allreduces; the application's
 * order (b's part after a's, through an event) keeps every rank's kernels in the same order. */
static void test_unordered_capture(ncclComm_t world)
{
    ncclComm_t c = make_comm(world, 1, 0, NCCL_CONFIG_UNDEF_INT);
    cudaStream_t a, b;
    cudaEvent_t fork, mid, join;
    CUDACHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CUDACHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CUDACHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CUDACHECK(cudaEventCreateWithFlags(&mid, cudaEventDisableTiming));
    CUDACHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    float *x, *y;
    CUDACHECK(cudaMalloc((void **)&x, N * sizeof(float)));
    CUDACHECK(cudaMalloc((void **)&y, N * sizeof(float)));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUDACHECK(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal));
    CUDACHECK(cudaEventRecord(fork, a));
    CUDACHECK(cudaStreamWaitEvent(b, fork, 0));
    NCCLCHECK(ncclAllReduce(x, x, N, ncclFloat, ncclSum, c, a));
    CUDACHECK(cudaEventRecord(mid, a));
    CUDACHECK(cudaStreamWaitEvent(b, mid, 0)); /* the application's order */
    NCCLCHECK(ncclAllReduce(y, y, N, ncclFloat, ncclSum, c, b));
    CUDACHECK(cudaEventRecord(join, b));
    CUDACHECK(cudaStreamWaitEvent(a, join, 0));
    CUDACHECK(cudaStreamEndCapture(a, &g));
    CUDACHECK(cudaGraphInstantiate(&ge, g, 0));
    fill(x, 5, a);
    fill(y, 6, a);
    CUDACHECK(cudaGraphLaunch(ge, a));
    CUDACHECK(cudaStreamSynchronize(a));
    check(x, 5, "graphStreamOrdering 0: first allreduce of the forked capture");
    check(y, 6, "graphStreamOrdering 0: second allreduce of the forked capture");
    CUDACHECK(cudaGraphExecDestroy(ge));
    CUDACHECK(cudaGraphDestroy(g));
    CUDACHECK(cudaFree(x));
    CUDACHECK(cudaFree(y));
    CUDACHECK(cudaEventDestroy(fork));
    CUDACHECK(cudaEventDestroy(mid));
    CUDACHECK(cudaEventDestroy(join));
    CUDACHECK(cudaStreamDestroy(a));
    CUDACHECK(cudaStreamDestroy(b));
    NCCLCHECK(ncclCommDestroy(c));
}

/* Every rank sends block p (M ints, distinct per pair) to rank p in one group. */
static void exchange(ncclComm_t c, int32_t *out, int32_t *in, size_t m, cudaStream_t s)
{
    NCCLCHECK(ncclGroupStart());
    for (int p = 0; p < nranks; p++) {
        NCCLCHECK(ncclSend(out + (size_t)p * m, m, ncclInt32, p, c, s));
        NCCLCHECK(ncclRecv(in + (size_t)p * m, m, ncclInt32, p, c, s));
    }
    NCCLCHECK(ncclGroupEnd());
}

static void test_waves(ncclComm_t world)
{
    ncclComm_t c = make_comm(world, 2, NCCL_CONFIG_UNDEF_INT, 1);
    cudaStream_t s;
    CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    /* One LL-sized and one FIFO-sized block per pair. */
    const size_t sizes[] = { 1000, 300001 };
    for (int k = 0; k < 2; k++) {
        size_t m = sizes[k], tot = (size_t)nranks * m;
        int32_t *h = malloc(tot * sizeof(int32_t)), *out, *in;
        CUDACHECK(cudaMalloc((void **)&out, tot * sizeof(int32_t)));
        CUDACHECK(cudaMalloc((void **)&in, tot * sizeof(int32_t)));
        for (int p = 0; p < nranks; p++)
            for (size_t i = 0; i < m; i++)
                h[(size_t)p * m + i] = rank * 1000003 + p * 1009 + (int)(i % 977);
        CUDACHECK(cudaMemcpy(out, h, tot * sizeof(int32_t), cudaMemcpyHostToDevice));
        for (int graph = 0; graph < 2; graph++) {
            /* On s: a plain cudaMemset may still run when the exchange on s writes. */
            CUDACHECK(cudaMemsetAsync(in, 0xff, tot * sizeof(int32_t), s));
            CUDACHECK(cudaStreamSynchronize(s));
            if (graph) {
                cudaGraph_t g;
                cudaGraphExec_t ge;
                CUDACHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
                exchange(c, out, in, m, s);
                CUDACHECK(cudaStreamEndCapture(s, &g));
                CUDACHECK(cudaGraphInstantiate(&ge, g, 0));
                CUDACHECK(cudaGraphLaunch(ge, s));
                CUDACHECK(cudaStreamSynchronize(s));
                CUDACHECK(cudaGraphExecDestroy(ge));
                CUDACHECK(cudaGraphDestroy(g));
            } else {
                exchange(c, out, in, m, s);
                CUDACHECK(cudaStreamSynchronize(s));
            }
            CUDACHECK(cudaMemcpy(h, in, tot * sizeof(int32_t), cudaMemcpyDeviceToHost));
            long bad = 0;
            for (int p = 0; p < nranks; p++)
                for (size_t i = 0; i < m; i++)
                    bad += h[(size_t)p * m + i] != p * 1000003 + rank * 1009 + (int)(i % 977);
            EXPECT(bad == 0, "maxP2pPeers 1, %zu ints per pair%s: %ld wrong", m,
                   graph ? " (graph)" : "", bad);
        }
        CUDACHECK(cudaFree(out));
        CUDACHECK(cudaFree(in));
        free(h);
    }
    CUDACHECK(cudaStreamDestroy(s));
    NCCLCHECK(ncclCommDestroy(c));
}

int main(void)
{
    if (mp_gpu_select()) return 77;
    ncclUniqueId id;
    ncclComm_t world;
    NCCLCHECK(ncclGetUniqueId(&id));
    NCCLCHECK(ncclCommInitRank(&world, nranks, id, rank));
    test_mixing(world);
    test_unordered_capture(world);
    test_waves(world);
    /* mp_finish sums failures with an allreduce on host memory: do it on the GPU instead. */
    int64_t *d;
    int64_t mine = failures, total = 0;
    CUDACHECK(cudaMalloc((void **)&d, sizeof(int64_t)));
    CUDACHECK(cudaMemcpy(d, &mine, sizeof(mine), cudaMemcpyHostToDevice));
    NCCLCHECK(ncclAllReduce(d, d, 1, ncclInt64, ncclSum, world, NULL));
    CUDACHECK(cudaDeviceSynchronize());
    CUDACHECK(cudaMemcpy(&total, d, sizeof(total), cudaMemcpyDeviceToHost));
    CUDACHECK(cudaFree(d));
    NCCLCHECK(ncclCommDestroy(world));
    if (rank == 0) printf("gpu_config_check: %d ranks: %lld failures\n", nranks, (long long)total);
    return total ? 1 : 0;
}
