/*
 * gpu_suspend_check: ncclCommSuspend(NCCL_SUSPEND_MEM) / ncclCommResume / ncclCommMemStats on
 * cuda communicators, what vLLM and SGLang do between inference and training:
 *   - allreduce (LL and FIFO sizes) and a ring of sends and receives, exact, before;
 *   - the statistics: Suspend > 0 (the p2p arena; -S 0 where nothing can go: the staged path,
 *     the CUDA IPC fallback), Total = Suspend + Persist, Suspended 0 / 1 / 0;
 *   - cudaMemGetInfo: the free memory of each GPU rises by the Suspend bytes of every rank on
 *     it when the suspend returns, and falls by as much when the resume returns (less a
 *     tolerance, see TOL);
 *   - while suspended, collectives and sends are refused with ncclInvalidUsage ("suspended");
 *   - after resume, the same calls exact again, and a CUDA graph captured before the suspend
 *     replays with exact results (the arenas come back at the same addresses); twice over;
 *   - buffers registered (ncclMemAlloc + ncclCommRegister) before and while suspended:
 *     zero-copy allreduces exact after resume; deregistration while suspended (procs mode);
 *   - -F: a resume that cannot get its memory back (rank 0 has filled its GPU) fails on every
 *     rank and leaves the communicator suspended; once the memory is free again, it resumes;
 *   - finalize and destroy of a suspended communicator.
 *
 *   zinc-run -n N gpu_suspend_check [-S 0] [-F]  one process per rank (rank r on GPU local rank
 *                                            mod GPU count); a second communicator (a split)
 *                                            keeps the ranks in step around the measurements
 *   gpu_suspend_check -g N [-S 0]            one process drives N ranks from one thread (rank r
 *                                            on GPU r mod GPU count): every call in a group
 *
 * Exits 77 without a GPU.
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

/* How far a GPU's free memory may fall short of the bytes the suspended communicators
 * released there. The arena is cuMem memory in whole granules (2 MiB) and Suspend counts it
 * so rounded, so the release itself is exact; cudaMemGetInfo moves in 2 MiB pages, and the
 * runtime's short-lived streams (the copies of the arena's control words) and the driver's
 * own bookkeeping may hold a page or two more or less at either measurement: 4 pages of
 * slack. The released bytes checked are far above it (MIN_CHECKED). */
#define TOL         (8ull << 20)
#define MIN_CHECKED (2 * TOL)

#define MAXR        16
#define N_LARGE     ((1u << 20) + 3) /* the FIFO kernels, odd tail */
#define N_SMALL     1000             /* LL */
#define N_P2P       ((256u << 10) + 5)

/* One rank of this process. */
struct rk {
    int rank, dev;
    ncclComm_t comm, sync; /* sync: procs mode only, never suspended */
    cudaStream_t stream;
    float *in, *out, *gin, *gout;
    int32_t *sbuf, *rbuf;
    cudaGraphExec_t graph; /* procs mode only */
    float *ra, *rb;        /* procs mode: ncclMemAlloc'd, registered (zero-copy) */
    void *reg_a, *reg_b;
    uint64_t suspend_bytes, persist_bytes;
};

static struct rk rks[MAXR];
static int nloc, threads, fill;

static void dev_of(const struct rk *r)
{
    CUDACHECK(cudaSetDevice(r->dev));
}

static float in_value(int r, size_t i)
{
    return (float)(r + (int)(i % 7));
}

static float sum_value(size_t i)
{
    return (float)(nranks * (nranks - 1) / 2 + nranks * (int)(i % 7));
}

static void upload_inputs(float *dst, int r, size_t n, cudaStream_t s)
{
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = in_value(r, i);
    CUDACHECK(cudaMemcpyAsync(dst, h, n * sizeof(float), cudaMemcpyHostToDevice, s));
    CUDACHECK(cudaStreamSynchronize(s));
    free(h);
}

static void check_sums(const float *dev_out, size_t n, cudaStream_t s, const char *what)
{
    float *h = malloc(n * sizeof(float));
    CUDACHECK(cudaMemcpyAsync(h, dev_out, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    CUDACHECK(cudaStreamSynchronize(s));
    long bad = 0;
    size_t first = 0;
    for (size_t i = 0; i < n; i++)
        if (h[i] != sum_value(i) && bad++ == 0) first = i;
    EXPECT(bad == 0, "%s: %ld of %zu elements wrong, first [%zu] = %g, expected %g", what, bad, n,
           first, h[first], sum_value(first));
    free(h);
}

static void allreduce_check(size_t n, const char *what)
{
    for (int k = 0; k < nloc; k++) {
        dev_of(&rks[k]);
        upload_inputs(rks[k].in, rks[k].rank, n, rks[k].stream);
        CUDACHECK(cudaMemsetAsync(rks[k].out, 0, n * sizeof(float), rks[k].stream));
    }
    NCCLCHECK(ncclGroupStart());
    for (int k = 0; k < nloc; k++)
        NCCLCHECK(ncclAllReduce(rks[k].in, rks[k].out, n, ncclFloat, ncclSum, rks[k].comm,
                                rks[k].stream));
    NCCLCHECK(ncclGroupEnd());
    for (int k = 0; k < nloc; k++) {
        dev_of(&rks[k]);
        check_sums(rks[k].out, n, rks[k].stream, what);
    }
}

/* Every rank sends n words to the next rank and receives from the previous one. */
static void sendrecv_check(const char *what)
{
    size_t n = N_P2P;
    int32_t *h = malloc(n * sizeof(int32_t));
    for (int k = 0; k < nloc; k++) {
        dev_of(&rks[k]);
        for (size_t i = 0; i < n; i++) h[i] = rks[k].rank * 1000003 + (int32_t)i;
        CUDACHECK(cudaMemcpyAsync(rks[k].sbuf, h, n * sizeof(int32_t), cudaMemcpyHostToDevice,
                                  rks[k].stream));
        CUDACHECK(cudaMemsetAsync(rks[k].rbuf, 0xff, n * sizeof(int32_t), rks[k].stream));
        CUDACHECK(cudaStreamSynchronize(rks[k].stream));
    }
    NCCLCHECK(ncclGroupStart());
    for (int k = 0; k < nloc; k++) {
        int r = rks[k].rank;
        NCCLCHECK(
            ncclSend(rks[k].sbuf, n, ncclInt32, (r + 1) % nranks, rks[k].comm, rks[k].stream));
        NCCLCHECK(ncclRecv(rks[k].rbuf, n, ncclInt32, (r + nranks - 1) % nranks, rks[k].comm,
                           rks[k].stream));
    }
    NCCLCHECK(ncclGroupEnd());
    for (int k = 0; k < nloc; k++) {
        dev_of(&rks[k]);
        CUDACHECK(cudaMemcpyAsync(h, rks[k].rbuf, n * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                  rks[k].stream));
        CUDACHECK(cudaStreamSynchronize(rks[k].stream));
        int prev = (rks[k].rank + nranks - 1) % nranks;
        long bad = 0;
        for (size_t i = 0; i < n; i++) bad += h[i] != prev * 1000003 + (int32_t)i;
        EXPECT(bad == 0, "%s: rank %d got %ld wrong words from rank %d", what, rks[k].rank, bad,
               prev);
    }
    free(h);
}

static void check_all(const char *what)
{
    char w[128];
    snprintf(w, sizeof(w), "%s, allreduce of %u floats", what, N_LARGE);
    allreduce_check(N_LARGE, w);
    snprintf(w, sizeof(w), "%s, allreduce of %u floats", what, N_SMALL);
    allreduce_check(N_SMALL, w);
    snprintf(w, sizeof(w), "%s, send/recv", what);
    sendrecv_check(w);
}

/* Procs mode: a graph of an LL and a FIFO allreduce, captured once. */
static void graph_capture(struct rk *r)
{
    cudaGraph_t g;
    CUDACHECK(cudaStreamBeginCapture(r->stream, cudaStreamCaptureModeThreadLocal));
    NCCLCHECK(ncclAllReduce(r->gin, r->gout, N_LARGE, ncclFloat, ncclSum, r->comm, r->stream));
    NCCLCHECK(
        ncclAllReduce(r->gin, r->gout + N_LARGE, N_SMALL, ncclFloat, ncclSum, r->comm, r->stream));
    CUDACHECK(cudaStreamEndCapture(r->stream, &g));
    CUDACHECK(cudaGraphInstantiate(&r->graph, g, 0));
    CUDACHECK(cudaGraphDestroy(g));
}

static void graph_check(struct rk *r, const char *what)
{
    upload_inputs(r->gin, r->rank, N_LARGE, r->stream);
    CUDACHECK(cudaMemsetAsync(r->gout, 0, (N_LARGE + N_SMALL) * sizeof(float), r->stream));
    CUDACHECK(cudaGraphLaunch(r->graph, r->stream));
    char w[128];
    snprintf(w, sizeof(w), "%s, graph replay (large)", what);
    check_sums(r->gout, N_LARGE, r->stream, w);
    snprintf(w, sizeof(w), "%s, graph replay (small)", what);
    check_sums(r->gout + N_LARGE, N_SMALL, r->stream, w);
}

/* Procs mode: an allreduce between registered buffers (rb registered while suspended). */
static void registered_check(struct rk *r, const char *what)
{
    upload_inputs(r->ra, r->rank, N_LARGE, r->stream);
    CUDACHECK(cudaMemsetAsync(r->rb, 0, N_LARGE * sizeof(float), r->stream));
    NCCLCHECK(ncclAllReduce(r->ra, r->rb, N_LARGE, ncclFloat, ncclSum, r->comm, r->stream));
    char w[128];
    snprintf(w, sizeof(w), "%s, allreduce of registered buffers", what);
    check_sums(r->rb, N_LARGE, r->stream, w);
}

static uint64_t stat_of(ncclComm_t c, ncclCommMemStat_t s)
{
    uint64_t v = 0;
    NCCLCHECK(ncclCommMemStats(c, s, &v));
    return v;
}

/* The statistics of every local rank: suspended as given, bytes as recorded first. */
static void check_stats(int suspended, int expect_release, const char *what)
{
    for (int k = 0; k < nloc; k++) {
        struct rk *r = &rks[k];
        uint64_t s = stat_of(r->comm, ncclStatGpuMemSuspend),
                 p = stat_of(r->comm, ncclStatGpuMemPersist),
                 t = stat_of(r->comm, ncclStatGpuMemTotal),
                 d = stat_of(r->comm, ncclStatGpuMemSuspended);
        if (!r->suspend_bytes && !r->persist_bytes) {
            r->suspend_bytes = s;
            r->persist_bytes = p;
            printf("[%d] GPU %d: Suspend %llu bytes, Persist %llu bytes\n", r->rank, r->dev,
                   (unsigned long long)s, (unsigned long long)p);
        }
        EXPECT(t == s + p, "%s: rank %d: Total %llu != Suspend %llu + Persist %llu", what, r->rank,
               (unsigned long long)t, (unsigned long long)s, (unsigned long long)p);
        EXPECT(s == r->suspend_bytes && p == r->persist_bytes,
               "%s: rank %d: Suspend %llu, Persist %llu; first %llu, %llu", what, r->rank,
               (unsigned long long)s, (unsigned long long)p, (unsigned long long)r->suspend_bytes,
               (unsigned long long)r->persist_bytes);
        EXPECT(expect_release ? s > 0 : s == 0, "%s: rank %d: Suspend %llu bytes, expected %s",
               what, r->rank, (unsigned long long)s, expect_release ? "> 0" : "0");
        EXPECT(d == (uint64_t)suspended, "%s: rank %d: Suspended %llu, expected %d", what, r->rank,
               (unsigned long long)d, suspended);
    }
}

/* A GPU's identity across processes. */
static uint64_t gpu_key(int dev)
{
    char id[32] = "";
    CUDACHECK(cudaDeviceGetPCIBusId(id, sizeof(id), dev));
    uint64_t h = 1469598103934665603ull;
    for (const char *p = id; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return h;
}

/* Procs mode: the ranks meet (every one has reached this point). */
static void barrier(void)
{
    struct rk *r = &rks[0];
    int32_t *d = (int32_t *)r->sbuf;
    NCCLCHECK(ncclAllReduce(d, d, 1, ncclInt32, ncclSum, r->sync, r->stream));
    CUDACHECK(cudaStreamSynchronize(r->stream));
}

/* Bytes the suspension must give back on each local rank's GPU: the Suspend bytes of every
 * rank on that GPU (other processes' ranks too, in procs mode). */
static void expected_release(uint64_t *want)
{
    uint64_t keys[MAXR];
    for (int k = 0; k < nloc; k++) keys[k] = gpu_key(rks[k].dev);
    if (threads) {
        for (int k = 0; k < nloc; k++) {
            want[k] = 0;
            for (int j = 0; j < nloc; j++) want[k] += keys[j] == keys[k] ? rks[j].suspend_bytes : 0;
        }
        return;
    }
    struct rk *r = &rks[0];
    uint64_t mine[2] = { keys[0], r->suspend_bytes }, *d = NULL;
    uint64_t *all = calloc((size_t)nranks * 2, sizeof(uint64_t));
    CUDACHECK(cudaMalloc((void **)&d, (size_t)nranks * 2 * sizeof(uint64_t)));
    /* On the collectives' stream: a plain cudaMemcpy from pageable memory may return before
     * the data has landed, and that stream (non-blocking) would not wait for it. */
    CUDACHECK(cudaMemcpyAsync(d + 2 * rank, mine, sizeof(mine), cudaMemcpyHostToDevice, r->stream));
    NCCLCHECK(ncclAllGather(d + 2 * rank, d, 2, ncclUint64, r->sync, r->stream));
    CUDACHECK(cudaStreamSynchronize(r->stream));
    CUDACHECK(cudaMemcpy(all, d, (size_t)nranks * 2 * sizeof(uint64_t), cudaMemcpyDeviceToHost));
    CUDACHECK(cudaFree(d));
    want[0] = 0;
    for (int q = 0; q < nranks; q++) want[0] += all[2 * q] == keys[0] ? all[2 * q + 1] : 0;
    free(all);
}

static void free_mem(size_t *out)
{
    for (int k = 0; k < nloc; k++) {
        dev_of(&rks[k]);
        CUDACHECK(cudaDeviceSynchronize());
        size_t fr = 0, tot = 0;
        CUDACHECK(cudaMemGetInfo(&fr, &tot));
        out[k] = fr;
    }
}

static void suspend_all(void)
{
    NCCLCHECK(ncclGroupStart());
    for (int k = 0; k < nloc; k++) NCCLCHECK(ncclCommSuspend(rks[k].comm, NCCL_SUSPEND_MEM));
    NCCLCHECK(ncclGroupEnd());
}

static void resume_all(void)
{
    NCCLCHECK(ncclGroupStart());
    for (int k = 0; k < nloc; k++) NCCLCHECK(ncclCommResume(rks[k].comm));
    NCCLCHECK(ncclGroupEnd());
}

/* Procs mode (-F): rank 0 takes all of its GPU's free memory, so that the resume cannot map
 * the arenas again there: it must fail on every rank and leave the communicator suspended. */
static void failed_resume(int expect_release)
{
    struct rk *r = &rks[0];
    void *hold[4096];
    int nhold = 0;
    for (size_t chunk = 1ull << 30; rank == 0 && chunk >= (2u << 20); chunk /= 2)
        while (nhold < 4096 && cudaMalloc(&hold[nhold], chunk) == cudaSuccess) nhold++;
    cudaGetLastError();
    size_t fr = 0, tot = 0;
    CUDACHECK(cudaMemGetInfo(&fr, &tot));
    if (rank == 0) printf("[0] GPU %d filled: %zu bytes free\n", r->dev, fr);
    barrier(); /* the GPU is full before anyone resumes */
    ncclResult_t res = ncclCommResume(r->comm);
    EXPECT(!expect_release || res != ncclSuccess,
           "a resume without the memory to map the arenas succeeded (%zu bytes free)", fr);
    EXPECT(expect_release || res == ncclSuccess, "a resume with nothing to map failed: %s",
           ncclGetLastError(NULL));
    printf("[%d] resume on a full GPU: %s (%s)\n", rank, ncclGetErrorString(res),
           res == ncclSuccess ? "" : ncclGetLastError(NULL));
    EXPECT(stat_of(r->comm, ncclStatGpuMemSuspended) == (res == ncclSuccess ? 0u : 1u),
           "Suspended %llu after a resume that returned %s",
           (unsigned long long)stat_of(r->comm, ncclStatGpuMemSuspended), ncclGetErrorString(res));
    if (res == ncclSuccess) NCCLCHECK(ncclCommSuspend(r->comm, NCCL_SUSPEND_MEM));
    while (nhold > 0) CUDACHECK(cudaFree(hold[--nhold]));
    CUDACHECK(cudaDeviceSynchronize());
}

/* One suspension, measured; calls refused meanwhile; everything exact afterwards. */
static void cycle(int c, int expect_release)
{
    char what[64];
    snprintf(what, sizeof(what), "cycle %d", c);
    uint64_t want[MAXR];
    size_t f0[MAXR], f1[MAXR], f2[MAXR];
    expected_release(want);
    free_mem(f0);
    if (!threads) barrier(); /* nobody releases before every rank has measured */
    suspend_all();           /* ends once every rank of the communicator has released */
    free_mem(f1);
    check_stats(1, expect_release, what);
    for (int k = 0; k < nloc; k++) {
        struct rk *r = &rks[k];
        dev_of(r);
        EXPECT_FAIL(ncclAllReduce(r->in, r->out, N_SMALL, ncclFloat, ncclSum, r->comm, r->stream),
                    ncclInvalidUsage, "suspended");
        EXPECT_FAIL(ncclSend(r->sbuf, 1, ncclInt32, (r->rank + 1) % nranks, r->comm, r->stream),
                    ncclInvalidUsage, "suspended");
        EXPECT_FAIL(ncclCommSuspend(r->comm, NCCL_SUSPEND_MEM), ncclInvalidUsage,
                    "suspended already");
    }
    /* Registering works meanwhile (PyTorch's allocator hooks register whenever it allocates). */
    if (!threads)
        NCCLCHECK(ncclCommRegister(rks[0].comm, rks[0].rb, N_LARGE * sizeof(float), &rks[0].reg_b));
    if (!threads && fill && c == 0) failed_resume(expect_release);
    if (!threads) barrier(); /* nobody maps memory again before every rank has measured */
    resume_all();            /* ends once every rank of the communicator has rebuilt */
    free_mem(f2);
    check_stats(0, expect_release, what);
    for (int k = 0; k < nloc; k++) {
        long long rise = (long long)f1[k] - (long long)f0[k];
        long long fall = (long long)f1[k] - (long long)f2[k];
        printf("[%d] %s: GPU %d: %llu bytes to release; free memory rose by %lld on suspend, "
               "fell by %lld on resume\n",
               rks[k].rank, what, rks[k].dev, (unsigned long long)want[k], rise, fall);
        if (!expect_release) continue;
        EXPECT(want[k] >= MIN_CHECKED, "%s: only %llu bytes to release on GPU %d: too few to check",
               what, (unsigned long long)want[k], rks[k].dev);
        EXPECT(rise + (long long)TOL >= (long long)want[k],
               "%s: GPU %d: free memory rose by %lld bytes on suspend, expected %llu", what,
               rks[k].dev, rise, (unsigned long long)want[k]);
        EXPECT(fall + (long long)TOL >= (long long)want[k],
               "%s: GPU %d: free memory fell by %lld bytes on resume, expected %llu", what,
               rks[k].dev, fall, (unsigned long long)want[k]);
    }
    EXPECT_FAIL(ncclCommResume(rks[0].comm), ncclInvalidUsage, "not suspended");
    check_all(what);
    if (threads) return;
    graph_check(&rks[0], what);
    registered_check(&rks[0], what);
    NCCLCHECK(ncclCommDeregister(rks[0].comm, rks[0].reg_b));
}

static void setup_rank(struct rk *r)
{
    dev_of(r);
    CUDACHECK(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking));
    CUDACHECK(cudaMalloc((void **)&r->in, N_LARGE * sizeof(float)));
    CUDACHECK(cudaMalloc((void **)&r->out, N_LARGE * sizeof(float)));
    CUDACHECK(cudaMalloc((void **)&r->gin, N_LARGE * sizeof(float)));
    CUDACHECK(cudaMalloc((void **)&r->gout, (N_LARGE + N_SMALL) * sizeof(float)));
    CUDACHECK(cudaMalloc((void **)&r->sbuf, N_P2P * sizeof(int32_t)));
    CUDACHECK(cudaMalloc((void **)&r->rbuf, N_P2P * sizeof(int32_t)));
}

static void free_rank(struct rk *r)
{
    dev_of(r);
    if (r->graph) CUDACHECK(cudaGraphExecDestroy(r->graph));
    CUDACHECK(cudaFree(r->in));
    CUDACHECK(cudaFree(r->out));
    CUDACHECK(cudaFree(r->gin));
    CUDACHECK(cudaFree(r->gout));
    CUDACHECK(cudaFree(r->sbuf));
    CUDACHECK(cudaFree(r->rbuf));
    CUDACHECK(cudaStreamDestroy(r->stream));
}

int main(int argc, char **argv)
{
    int expect_release = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-g") && i + 1 < argc) threads = atoi(argv[++i]);
        if (!strcmp(argv[i], "-S") && i + 1 < argc) expect_release = atoi(argv[++i]) != 0;
        if (!strcmp(argv[i], "-F")) fill = 1;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    if (threads) {
        if (threads < 1 || threads > MAXR) {
            fprintf(stderr, "-g takes 1 to %d ranks\n", MAXR);
            return 2;
        }
        nranks = nloc = threads;
        ncclComm_t comms[MAXR];
        int devs[MAXR];
        for (int k = 0; k < nloc; k++) devs[k] = k % ndev;
        NCCLCHECK(ncclCommInitAll(comms, nloc, devs));
        for (int k = 0; k < nloc; k++) {
            rks[k] = (struct rk){ .rank = k, .dev = devs[k], .comm = comms[k] };
            setup_rank(&rks[k]);
        }
    } else {
        struct zn_launch_info li;
        zn_launch_info_get(&li);
        rank = li.rank;
        nranks = li.nranks;
        nloc = 1;
        rks[0] = (struct rk){ .rank = rank, .dev = li.local_rank % ndev };
        setup_rank(&rks[0]);
        ncclUniqueId id;
        NCCLCHECK(ncclGetUniqueId(&id));
        NCCLCHECK(ncclCommInitRank(&rks[0].comm, nranks, id, rank));
        NCCLCHECK(ncclCommSplit(rks[0].comm, 0, rank, &rks[0].sync, NULL));
        NCCLCHECK(ncclMemAlloc((void **)&rks[0].ra, N_LARGE * sizeof(float)));
        NCCLCHECK(ncclMemAlloc((void **)&rks[0].rb, N_LARGE * sizeof(float)));
        NCCLCHECK(ncclCommRegister(rks[0].comm, rks[0].ra, N_LARGE * sizeof(float), &rks[0].reg_a));
    }

    check_all("before any suspend");
    if (!threads) {
        graph_capture(&rks[0]);
        graph_check(&rks[0], "before any suspend");
        registered_check(&rks[0], "before any suspend");
    }
    check_stats(0, expect_release, "before any suspend");
    for (int c = 0; c < 2; c++) cycle(c, expect_release);

    /* A suspended communicator finalizes (procs) and is destroyed. */
    suspend_all();
    if (threads) {
        for (int k = 0; k < nloc; k++) NCCLCHECK(ncclCommDestroy(rks[k].comm));
        for (int k = 0; k < nloc; k++) free_rank(&rks[k]);
        printf("gpu_suspend_check: %d ranks in one process: %ld failures\n", nranks, failures);
        return failures ? 1 : 0;
    }
    struct rk *r = &rks[0];
    NCCLCHECK(ncclCommDeregister(r->comm, r->reg_a)); /* works while suspended */
    NCCLCHECK(ncclCommFinalize(r->comm));
    NCCLCHECK(ncclCommDestroy(r->comm));
    int64_t *d = NULL, total = 0, mine = failures;
    CUDACHECK(cudaMalloc((void **)&d, sizeof(int64_t)));
    CUDACHECK(cudaMemcpyAsync(d, &mine, sizeof(int64_t), cudaMemcpyHostToDevice, r->stream));
    NCCLCHECK(ncclAllReduce(d, d, 1, ncclInt64, ncclSum, r->sync, r->stream));
    CUDACHECK(cudaStreamSynchronize(r->stream));
    CUDACHECK(cudaMemcpy(&total, d, sizeof(int64_t), cudaMemcpyDeviceToHost));
    CUDACHECK(cudaFree(d));
    NCCLCHECK(ncclCommFinalize(r->sync));
    NCCLCHECK(ncclCommDestroy(r->sync));
    free_rank(r);
    NCCLCHECK(ncclMemFree(r->ra));
    NCCLCHECK(ncclMemFree(r->rb));
    printf("[%d] %ld failures here\n", rank, failures);
    if (rank == 0) printf("gpu_suspend_check: %d ranks: %lld failures\n", nranks, (long long)total);
    return total ? 1 : 0;
}
