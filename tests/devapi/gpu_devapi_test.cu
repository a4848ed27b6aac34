/*
 * gpu_devapi: NCCL's device API on zinc, one process per rank under zinc-run, every result
 * checked exactly against values computed here (small integers in floats and doubles).
 *
 *   zinc-run -n N gpu_devapi lsa     LSA pointers and barriers: each rank's kernel waits at an
 *                                    LSA barrier, then reduces (sum) its slice of every rank's
 *                                    input and gathers every rank's input, through peer
 *                                    pointers, then syncs again; twice, with new inputs, so the
 *                                    barrier epochs carry over from one kernel to the next;
 *                                    plus ncclGetLsaDevicePointer / ncclGetPeerDevicePointer
 *   zinc-run -n N gpu_devapi gin [C] GIN put of C floats (default 777) with SignalInc and
 *                                    CounterInc to every peer, putValue with SignalAdd (as
 *                                    2.28's actions, 2.30's strong / weak ones or the C calls
 *                                    ncclGinPut / ncclGinPutValue, by peer and rank), then
 *                                    waits on the signal and the counter, and a world barrier
 *                                    (ncclBarrierSession); the data and the final signal value
 *                                    are checked. Under tests/hosts/hostwrap.sh every rank is on
 *                                    its own "host": the puts, signals and the barrier's GIN
 *                                    part go through the host engine and the socket net
 *   zinc-run -n N gpu_devapi lla2a   the LL all-to-all: two epochs of 8 doubles to each peer
 *                                    and a bcast, received and summed
 *   zinc-run -n N gpu_devapi hosts   every rank on its own "host" (ZINC_HOSTID): LSA teams of
 *                                    one; a device communicator with LSA barriers works (the
 *                                    LSA kernel on a team of one), and one asking for GIN
 *                                    signals is made (GIN through the host engine)
 *   zinc-run -n N gpu_devapi timeout timed barrier waits: the other ranks hold back until rank 0
 *                                    lets them go, so rank 0's timed LSA barrier sync and timed
 *                                    world GIN barrier sync must return ncclTimeout (every
 *                                    thread); rank 0 then lets them go, and an untimed wait /
 *                                    sync finishes the open round, and a timed round with
 *                                    everyone there returns ncclSuccess
 *   gpu_devapi oneproc [N]           one process drives N GPUs (default: all, at least 2), as
 *                                    nccl-tests -g N does: ncclCommInitAll, windows registered
 *                                    and device communicators made in groups (the latter with
 *                                    the last GPU current), then an allreduce kernel per GPU
 *                                    that reads every peer's send window and writes the sum
 *                                    into every peer's receive window, between LSA barriers
 */
#include <nccl.h>
#include <nccl_device.h>

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

static int rank, nranks;
static long failures;

#define EXPECT(cond, ...)                                                   \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "[%d] FAIL %s:%d: ", rank, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fprintf(stderr, "\n");                                          \
            failures++;                                                     \
        }                                                                   \
    } while (0)

#define NCCLCHECK(call)                                                                         \
    do {                                                                                        \
        ncclResult_t r_ = (call);                                                               \
        if (r_ != ncclSuccess) {                                                                \
            fprintf(stderr, "[%d] %s:%d %s failed: %s (%s)\n", rank, __FILE__, __LINE__, #call, \
                    ncclGetErrorString(r_), ncclGetLastError(NULL));                            \
            exit(2);                                                                            \
        }                                                                                       \
    } while (0)

#define CUDACHECK(call)                                                             \
    do {                                                                            \
        cudaError_t e_ = (call);                                                    \
        if (e_ != cudaSuccess) {                                                    \
            fprintf(stderr, "[%d] %s:%d %s: %s\n", rank, __FILE__, __LINE__, #call, \
                    cudaGetErrorString(e_));                                        \
            exit(2);                                                                \
        }                                                                           \
    } while (0)

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

/* ---------------------------------------------------------------------------------------- */
/* lsa: window = in[count] | sum[count] | gathered[nranks * count] (floats)                 */

__global__ void lsa_kernel(ncclDevComm comm, ncclWindow_t win, int count)
{
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamTagLsa(), blockIdx.x);
    /* Every rank's input is in place (written before this kernel) once all have arrived. */
    bar.sync(ncclCoopCta(), cuda::memory_order_acquire);
    int n = comm.lsaSize;
    float *sum = (float *)ncclGetLocalPointer(win, (size_t)count * 4);
    float *gathered = (float *)ncclGetLocalPointer(win, (size_t)2 * count * 4);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
        float acc = 0;
        for (int p = 0; p < n; p++) {
            float v = ((float *)ncclGetLsaPointer(win, 0, p))[i];
            acc += v;
            gathered[p * count + i] = v;
        }
        sum[i] = acc;
    }
    /* Nobody rewrites its input (next kernel) before every peer has read it. */
    bar.sync(ncclCoopCta(), cuda::memory_order_release);
}

static float lsa_input(int r, int i, int round)
{
    return (float)(r * 1000 + i + round * 7);
}

static void run_lsa(ncclComm_t comm)
{
    const int count = 1000, blocks = 4;
    size_t bytes = (size_t)(2 + nranks) * count * sizeof(float);
    void *buf;
    NCCLCHECK(ncclMemAlloc(&buf, bytes));
    CUDACHECK(cudaMemset(buf, 0, bytes));
    ncclWindow_t win;
    NCCLCHECK(ncclCommWindowRegister(comm, buf, bytes, &win, NCCL_WIN_COLL_SYMMETRIC));
    ncclTeam_t lsa = ncclTeamLsa(comm);
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.lsaBarrierCount = blocks;
    ncclDevComm_t dev;
    NCCLCHECK(ncclDevCommCreate(comm, &reqs, &dev));
    EXPECT(dev.rank == rank && dev.nRanks == nranks && dev.lsaSize == lsa.nRanks &&
               dev.lsaRank == lsa.rank,
           "devComm rank %d/%d lsa %d/%d, host team %d/%d", dev.rank, dev.nRanks, dev.lsaRank,
           dev.lsaSize, lsa.rank, lsa.nRanks);
    /* Host-side pointers: this rank's buffer as itself, every LSA rank's at the offset. */
    void *p = NULL;
    NCCLCHECK(ncclGetLsaDevicePointer(win, 4, lsa.rank, &p));
    EXPECT(p == (char *)buf + 4, "ncclGetLsaDevicePointer(self) = %p, buffer %p", p, buf);
    for (int r = 0; r < lsa.nRanks; r++) {
        void *a = NULL, *b = NULL;
        NCCLCHECK(ncclGetLsaDevicePointer(win, 8, r, &a));
        NCCLCHECK(ncclGetPeerDevicePointer(win, 8, rank - lsa.rank + r, &b));
        EXPECT(a && a == b, "LSA rank %d: %p by LSA rank, %p by world rank", r, a, b);
    }
    EXPECT(ncclGetLsaDevicePointer(win, 0, lsa.nRanks, &p) == ncclInvalidArgument,
           "an LSA rank past the team is accepted");
    EXPECT(ncclGetLsaMultimemDevicePointer(win, 0, &p) == ncclInvalidUsage,
           "multimem pointer not refused");

    int n = lsa.nRanks, base = rank - lsa.rank;
    std::vector<float> in(count), out((size_t)(1 + n) * count);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < count; i++) in[i] = lsa_input(rank, i, round);
        CUDACHECK(cudaMemcpy(buf, in.data(), count * sizeof(float), cudaMemcpyHostToDevice));
        CUDACHECK(cudaDeviceSynchronize());
        lsa_kernel<<<blocks, 128>>>(dev, win, count);
        CUDACHECK(cudaGetLastError());
        CUDACHECK(cudaDeviceSynchronize());
        CUDACHECK(cudaMemcpy(out.data(), (char *)buf + count * sizeof(float),
                             out.size() * sizeof(float), cudaMemcpyDeviceToHost));
        long bad = 0;
        for (int i = 0; i < count; i++) {
            float want = 0;
            for (int r = 0; r < n; r++) {
                want += lsa_input(base + r, i, round);
                float g = out[(size_t)(1 + r) * count + i];
                if (g != lsa_input(base + r, i, round) && bad++ < 3)
                    EXPECT(0, "round %d: gathered[%d][%d] = %g, expected %g", round, r, i, g,
                           lsa_input(base + r, i, round));
            }
            if (out[i] != want && bad++ < 3)
                EXPECT(0, "round %d: sum[%d] = %g, expected %g", round, i, out[i], want);
        }
        EXPECT(bad == 0, "round %d: %ld wrong values", round, bad);
    }
    NCCLCHECK(ncclDevCommDestroy(comm, &dev));
    NCCLCHECK(ncclCommWindowDeregister(comm, win));
    NCCLCHECK(ncclMemFree(buf));
}

/* ---------------------------------------------------------------------------------------- */
/* gin: window = send[chunk] | recv[nranks * chunk] | value[nranks] (uint64) ; floats        */

__global__ void gin_kernel(ncclDevComm comm, ncclWindow_t win, int chunk,
                           unsigned long long *result)
{
    ncclGin gin(comm, 0);
    ncclTeam world = ncclTeamWorld(comm);
    uint64_t before = gin.readSignal(0);
    uint64_t counted = gin.readCounter(0);
    {
        ncclBarrierSession<ncclCoopCta> bar(ncclCoopCta(), ncclTeamTagWorld(), gin, 0);
        bar.sync(ncclCoopCta(), cuda::memory_order_acquire, ncclGinFenceLevel::Relaxed);
        /* values: 8-byte aligned after the received chunks (chunk is odd). */
        size_t recv = (size_t)chunk * 4,
               values = (recv + (size_t)comm.nRanks * chunk * 4 + 7) / 8 * 8;
        /* Warp w puts to peer w: the whole chunk, then a value of its own. */
        int w = threadIdx.x / 32;
        /* By (peer + rank) % 3: the older actions, 2.30's strong / weak ones, the C calls. */
        ncclGin_C gc(comm, NCCL_GIN_BACKEND_MASK_ALL, 0);
        for (int peer = w; peer < comm.nRanks; peer += blockDim.x / 32) {
            size_t dst = recv + (size_t)comm.rank * chunk * 4, bytes = (size_t)chunk * 4;
            unsigned long long v = 1000 + comm.rank;
            if ((peer + comm.rank) % 3 == 2) {
                ncclCoopAny warp(ncclCoopWarp{});
                ncclGinPut(&gc, world, peer, win, dst, win, 0, bytes, true, 0, ncclGinSignalInc, 0,
                           true, 0, warp, false, nullptr, cuda::thread_scope_thread,
                           cuda::thread_scope_device);
                ncclGinPutValue(&gc, world, peer, win, values + (size_t)comm.rank * 8, v, 8, true,
                                0, ncclGinSignalAdd, 5, warp, false, nullptr,
                                cuda::thread_scope_thread, cuda::thread_scope_device);
            } else if ((peer + comm.rank) % 3 == 0) {
                gin.put(world, peer, win, dst, win, 0, bytes, ncclGin_SignalInc{ 0 },
                        ncclGin_CounterInc{ 0 }, ncclCoopWarp());
                gin.putValue(world, peer, win, values + (size_t)comm.rank * 8, v,
                             ncclGin_SignalAdd{ 0, 5 }, ncclCoopWarp());
            } else {
                gin.put(world, peer, win, dst, win, 0, bytes, ncclGin_StrongSignalInc{ 0 },
                        ncclGin_WeakCounterInc{ 0 }, ncclCoopWarp(), ncclGin_None{},
                        cuda::thread_scope_thread, cuda::thread_scope_device,
                        ncclGinOptFlagsAggregateRequests);
                gin.putValue(world, peer, win, values + (size_t)comm.rank * 8, v,
                             ncclGin_WeakSignalAdd{ 0, 5 }, ncclCoopWarp());
            }
        }
        /* Each peer's put adds 1, its value 5. */
        gin.waitSignal(ncclCoopCta(), 0, before + 6 * comm.nRanks);
        gin.waitCounter(ncclCoopCta(), 0, counted + comm.nRanks);
        ncclGinRequest_t req;
        gin.flushAsync(world, (comm.rank + 1) % comm.nRanks, &req, ncclCoopCta());
        gin.wait(req, ncclCoopCta());
        gin.flush(ncclCoopCta());
        if (threadIdx.x == 0) {
            result[0] = gin.readSignal(0) - before;
            result[1] = gin.readCounter(0) - counted;
        }
        bar.sync(ncclCoopCta(), cuda::memory_order_release, ncclGinFenceLevel::Relaxed);
        /* The world's other barriers: the hybrid one with a Put fence (one GIN barrier over the
         * world), the world GIN barrier, and the free functions. None may return before every rank
         * has read its results above (results are compared after the kernel). */
        bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    } /* a barrier's session ends before another session of that barrier begins */
    {
        ncclGinBarrierSession<ncclCoopCta> wb(ncclCoopCta(), gin, ncclTeamTagWorld(), 0);
        wb.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    }
    ncclGinBarrier(ncclCoopCta(), ncclGinAllContexts(comm), ncclTeamTagWorld(), 0);
    ncclBarrier(ncclCoopCta(), ncclTeamTagWorld(), gin, 0);
}

static void run_gin(ncclComm_t comm, int chunk)
{
    /* chunk odd: the byte tail of the copy too */
    size_t values = ((size_t)chunk * 4 * (1 + nranks) + 7) / 8 * 8;
    size_t bytes = values + (size_t)nranks * 8;
    bytes = (bytes + 4095) / 4096 * 4096;
    void *buf;
    NCCLCHECK(ncclMemAlloc(&buf, bytes));
    CUDACHECK(cudaMemset(buf, 0, bytes));
    ncclWindow_t win;
    NCCLCHECK(ncclCommWindowRegister(comm, buf, bytes, &win, NCCL_WIN_COLL_SYMMETRIC));
    ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
    NCCLCHECK(ncclCommQueryProperties(comm, &props));
    EXPECT(props.ginType != NCCL_GIN_TYPE_NONE && props.deviceApiSupport && !props.multimemSupport,
           "properties: ginType %d, deviceApiSupport %d, multimemSupport %d", (int)props.ginType,
           props.deviceApiSupport, props.multimemSupport);
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.barrierCount = 1;
    reqs.worldGinBarrierCount = 1;
    reqs.ginSignalCount = 1;
    reqs.ginCounterCount = 1;
    reqs.ginConnectionType = NCCL_GIN_CONNECTION_FULL;
    ncclDevComm_t dev;
    NCCLCHECK(ncclDevCommCreate(comm, &reqs, &dev));
    unsigned long long *result;
    CUDACHECK(cudaMalloc(&result, 2 * sizeof(*result)));
    std::vector<float> send(chunk), recv((size_t)nranks * chunk);
    std::vector<unsigned long long> vals(nranks);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < chunk; i++) send[i] = (float)(rank * 10000 + i + round);
        CUDACHECK(cudaMemcpy(buf, send.data(), chunk * 4, cudaMemcpyHostToDevice));
        CUDACHECK(cudaDeviceSynchronize());
        gin_kernel<<<1, 128>>>(dev, win, chunk, result);
        CUDACHECK(cudaGetLastError());
        CUDACHECK(cudaDeviceSynchronize());
        unsigned long long got[2];
        CUDACHECK(cudaMemcpy(got, result, sizeof(got), cudaMemcpyDeviceToHost));
        CUDACHECK(cudaMemcpy(recv.data(), (char *)buf + chunk * 4, recv.size() * 4,
                             cudaMemcpyDeviceToHost));
        CUDACHECK(
            cudaMemcpy(vals.data(), (char *)buf + values, vals.size() * 8, cudaMemcpyDeviceToHost));
        EXPECT(got[0] == 6ull * nranks, "round %d: signal grew by %llu, expected %llu", round,
               got[0], 6ull * nranks);
        EXPECT(got[1] == (unsigned long long)nranks, "round %d: counter grew by %llu, expected %d",
               round, got[1], nranks);
        long bad = 0;
        for (int r = 0; r < nranks; r++) {
            for (int i = 0; i < chunk; i++) {
                float want = (float)(r * 10000 + i + round);
                if (recv[(size_t)r * chunk + i] != want && bad++ < 3)
                    EXPECT(0, "round %d: from rank %d, element %d: %g, expected %g", round, r, i,
                           recv[(size_t)r * chunk + i], want);
            }
            EXPECT(vals[r] == 1000ull + r, "round %d: value from rank %d: %llu", round, r, vals[r]);
        }
        EXPECT(bad == 0, "round %d: %ld wrong elements", round, bad);
    }
    CUDACHECK(cudaFree(result));
    NCCLCHECK(ncclDevCommDestroy(comm, &dev));
    NCCLCHECK(ncclCommWindowDeregister(comm, win));
    NCCLCHECK(ncclMemFree(buf));
}

/* ---------------------------------------------------------------------------------------- */
/* lla2a: each rank sends 8 doubles to every member, plus a bcast of one float4              */

#define A2A_ELTS 8

__global__ void lla2a_kernel(ncclDevComm comm, ncclLLA2AHandle h, double *out, int rounds)
{
    ncclTeam lsa = ncclTeamLsa(comm);
    int maxElts = lsa.nRanks * A2A_ELTS + lsa.nRanks; /* doubles, then one float4 per sender */
    ncclLLA2ASession<ncclCoopCta> s(ncclCoopCta(), comm, lsa, h, 0, maxElts);
    for (int round = 0; round < rounds; round++) {
        int t = threadIdx.x;
        for (int i = t; i < lsa.nRanks * A2A_ELTS; i += blockDim.x) {
            int peer = i / A2A_ELTS, e = i % A2A_ELTS;
            s.send(peer, lsa.rank * A2A_ELTS + e,
                   (double)(comm.rank * 100 + peer * 10 + e + round));
        }
        if (t == 0)
            s.bcast(lsa.nRanks * A2A_ELTS + lsa.rank, make_float4(comm.rank, round, 1.5f, -2.0f));
        /* Thread p sums what rank p sent; thread nRanks + p reads p's float4. */
        if (t < lsa.nRanks) {
            double acc = s.recvReduce<4, double>(
                t * A2A_ELTS, A2A_ELTS, 1, [](double x) { return x; },
                [](double a, double b) { return a + b; });
            out[round * 2 * lsa.nRanks + t] = acc;
        } else if (t < 2 * lsa.nRanks) {
            float4 f = s.recv<float4>(lsa.nRanks * A2A_ELTS + (t - lsa.nRanks));
            out[round * 2 * lsa.nRanks + t] = f.x * 1000 + f.y * 10 + f.z + f.w;
        }
        s.endEpoch(ncclCoopCta());
    }
}

static void run_lla2a(ncclComm_t comm)
{
    int n = nranks, rounds = 3;
    ncclLLA2AHandle_t h;
    ncclDevResourceRequirements_t res;
    int maxElts = n * A2A_ELTS + n;
    int slots = ncclLLA2ACalcSlots(maxElts, 16); /* the float4 needs 2 lines */
    NCCLCHECK(ncclLLA2ACreateRequirement(1, slots, &h, &res));
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.resourceRequirementsList = &res;
    ncclDevComm_t dev;
    NCCLCHECK(ncclDevCommCreate(comm, &reqs, &dev));
    EXPECT(dev.lsaSize == n, "LSA team of %d, expected every rank (%d)", dev.lsaSize, n);
    double *out;
    CUDACHECK(cudaMalloc(&out, sizeof(double) * 2 * n * rounds));
    std::vector<double> got(2 * n * rounds);
    for (int launch = 0; launch < 2; launch++) {
        lla2a_kernel<<<1, 64>>>(dev, h, out, rounds);
        CUDACHECK(cudaGetLastError());
        CUDACHECK(cudaDeviceSynchronize());
        CUDACHECK(cudaMemcpy(got.data(), out, got.size() * sizeof(double), cudaMemcpyDeviceToHost));
        for (int round = 0; round < rounds; round++) {
            for (int p = 0; p < n; p++) {
                double want = 0;
                for (int e = 0; e < A2A_ELTS; e++) want += p * 100 + rank * 10 + e + round;
                EXPECT(got[round * 2 * n + p] == want,
                       "launch %d round %d: from %d sum %g, expected %g", launch, round, p,
                       got[round * 2 * n + p], want);
                double wantf = p * 1000.0 + round * 10 + 1.5 - 2.0;
                EXPECT(got[round * 2 * n + n + p] == wantf,
                       "launch %d round %d: bcast from %d gave %g, expected %g", launch, round, p,
                       got[round * 2 * n + n + p], wantf);
            }
        }
    }
    CUDACHECK(cudaFree(out));
    NCCLCHECK(ncclDevCommDestroy(comm, &dev));
}

/* ---------------------------------------------------------------------------------------- */
/* hosts: LSA teams of one                                                                   */

static void run_hosts(ncclComm_t comm)
{
    ncclTeam_t lsa = ncclTeamLsa(comm), rail = ncclTeamRail(comm);
    EXPECT(lsa.nRanks == 1 && lsa.rank == 0, "LSA team {%d, %d}, expected {1, 0}", lsa.nRanks,
           lsa.rank);
    EXPECT(rail.nRanks == nranks && rail.rank == rank && rail.stride == 1, "rail team {%d, %d, %d}",
           rail.nRanks, rail.rank, rail.stride);
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.ginSignalCount = 1;
    reqs.ginConnectionType = NCCL_GIN_CONNECTION_FULL;
    ncclDevComm_t dev;
    ncclResult_t r = ncclDevCommCreate(comm, &reqs, &dev);
    EXPECT(r == ncclSuccess, "GIN across hosts: %d (%s)", (int)r, ncclGetLastError(NULL));
    if (r == ncclSuccess) NCCLCHECK(ncclDevCommDestroy(comm, &dev));
    ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
    NCCLCHECK(ncclCommQueryProperties(comm, &props));
    EXPECT(props.ginType == NCCL_GIN_TYPE_PROXY && props.nLsaTeams == nranks,
           "properties across hosts: ginType %d, nLsaTeams %d", (int)props.ginType,
           props.nLsaTeams);
    /* LSA on a team of one still works: the kernel reduces this rank's own input. */
    const int count = 256;
    size_t bytes = 4096 * 4;
    void *buf;
    NCCLCHECK(ncclMemAlloc(&buf, bytes));
    CUDACHECK(cudaMemset(buf, 0, bytes));
    ncclWindow_t win;
    NCCLCHECK(ncclCommWindowRegister(comm, buf, bytes, &win, NCCL_WIN_COLL_SYMMETRIC));
    ncclDevCommRequirements_t lsa_reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs = lsa_reqs;
    reqs.lsaBarrierCount = 1;
    NCCLCHECK(ncclDevCommCreate(comm, &reqs, &dev));
    std::vector<float> in(count), out(count * 2);
    for (int i = 0; i < count; i++) in[i] = (float)(rank * 1000 + i);
    CUDACHECK(cudaMemcpy(buf, in.data(), count * 4, cudaMemcpyHostToDevice));
    lsa_kernel<<<1, 64>>>(dev, win, count);
    CUDACHECK(cudaGetLastError());
    CUDACHECK(cudaDeviceSynchronize());
    CUDACHECK(
        cudaMemcpy(out.data(), (char *)buf + count * 4, out.size() * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < count; i++)
        EXPECT(out[i] == in[i] && out[count + i] == in[i], "element %d: %g %g, expected %g", i,
               out[i], out[count + i], in[i]);
    void *p;
    EXPECT(ncclGetPeerDevicePointer(win, 0, (rank + 1) % nranks, &p) == ncclInvalidArgument,
           "a peer on another host has a device pointer");
    NCCLCHECK(ncclDevCommDestroy(comm, &dev));
    NCCLCHECK(ncclCommWindowDeregister(comm, win));
    NCCLCHECK(ncclMemFree(buf));
}

/* ---------------------------------------------------------------------------------------- */
/* timeout: window = go flag (uint32); signal 0 is GIN's go; result[0..5] from rank 0        */

#define TIMEOUT_CYCLES 200000ull /* far shorter than "never": the peers wait for rank 0 */
#define NO_TIMEOUT     (~0ull >> 1)

__global__ void timeout_kernel(ncclDevComm comm, ncclWindow_t win, int *result)
{
    __shared__ int mixed; /* some thread saw another result than thread 0 */
    if (threadIdx.x == 0) mixed = 0;
    __syncthreads();
    ncclCoopCta cta;
    ncclTeam lsa = ncclTeamLsa(comm), world = ncclTeamWorld(comm);
    ncclGin gin(comm, 0);
    int me = comm.rank;
    if (lsa.nRanks > 1) {
        ncclLsaBarrierSession<ncclCoopCta> bar(cta, comm, ncclTeamTagLsa(), 0);
        if (me == 0) {
            ncclResult_t r1 = bar.sync(cta, cuda::memory_order_acq_rel, TIMEOUT_CYCLES);
            int r1_0 = __shfl_sync(~0u, (int)r1, 0);
            if ((int)r1 != r1_0) atomicOr(&mixed, 1);
            if (threadIdx.x == 0) {
                result[0] = r1;
                for (int p = 1; p < lsa.nRanks; p++)
                    cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(
                        *(uint32_t *)ncclGetLsaPointer(win, 0, p))
                        .store(1, cuda::memory_order_release);
            }
            /* The round is still open: an untimed wait finishes it. */
            bar.wait(cta, cuda::memory_order_acquire);
            ncclResult_t r3 = bar.sync(cta, cuda::memory_order_acq_rel, NO_TIMEOUT);
            if (threadIdx.x == 0) result[1] = r3;
        } else {
            if (threadIdx.x == 0) {
                cuda::atomic_ref<uint32_t, cuda::thread_scope_system> go(
                    *(uint32_t *)ncclGetLocalPointer(win, 0));
                while (go.load(cuda::memory_order_acquire) == 0) {
                }
            }
            __syncthreads();
            bar.sync(cta, cuda::memory_order_acq_rel);
            bar.sync(cta, cuda::memory_order_acq_rel);
        }
    }
    if (world.nRanks > 1) {
        ncclGinBarrierSession<ncclCoopCta> gb(cta, gin, ncclTeamTagWorld(), 0);
        if (me == 0) {
            ncclResult_t r1 =
                gb.sync(cta, cuda::memory_order_acq_rel, ncclGinFenceLevel::Put, TIMEOUT_CYCLES);
            int r1_0 = __shfl_sync(~0u, (int)r1, 0);
            if ((int)r1 != r1_0) atomicOr(&mixed, 2);
            if (threadIdx.x == 0) result[2] = r1;
            for (int p = 1 + (int)threadIdx.x; p < world.nRanks; p += blockDim.x)
                gin.signal(world, p, ncclGin_SignalInc{ 0 }, ncclCoopThread());
            ncclResult_t r2 =
                gb.sync(cta, cuda::memory_order_acq_rel, ncclGinFenceLevel::Put, NO_TIMEOUT);
            ncclResult_t r3 =
                gb.sync(cta, cuda::memory_order_acq_rel, ncclGinFenceLevel::Put, NO_TIMEOUT);
            if (threadIdx.x == 0) {
                result[3] = r2;
                result[4] = r3;
            }
        } else {
            gin.waitSignal(cta, 0, 1);
            gb.sync(cta, cuda::memory_order_acq_rel);
            gb.sync(cta, cuda::memory_order_acq_rel);
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) result[5] = mixed;
}

static void run_timeout(ncclComm_t comm)
{
    size_t bytes = 4096;
    void *buf;
    NCCLCHECK(ncclMemAlloc(&buf, bytes));
    CUDACHECK(cudaMemset(buf, 0, bytes));
    ncclWindow_t win;
    NCCLCHECK(ncclCommWindowRegister(comm, buf, bytes, &win, NCCL_WIN_COLL_SYMMETRIC));
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.lsaBarrierCount = 1;
    reqs.worldGinBarrierCount = 1;
    reqs.ginSignalCount = 1;
    reqs.ginConnectionType = NCCL_GIN_CONNECTION_FULL;
    ncclDevComm_t dev;
    NCCLCHECK(ncclDevCommCreate(comm, &reqs, &dev));
    EXPECT(dev.magic == NCCL_API_MAGIC && dev.version == NCCL_VERSION_CODE,
           "devComm magic 0x%x version %u", dev.magic, dev.version);
    int *result, got[6] = { -1, -1, -1, -1, -1, -1 };
    CUDACHECK(cudaMalloc(&result, sizeof(got)));
    CUDACHECK(cudaMemcpy(result, got, sizeof(got), cudaMemcpyHostToDevice));
    timeout_kernel<<<1, 128>>>(dev, win, result);
    CUDACHECK(cudaGetLastError());
    CUDACHECK(cudaDeviceSynchronize());
    CUDACHECK(cudaMemcpy(got, result, sizeof(got), cudaMemcpyDeviceToHost));
    if (rank == 0) {
        if (dev.lsaSize > 1)
            EXPECT(got[0] == ncclTimeout && got[1] == ncclSuccess,
                   "LSA barrier: timed sync %d (expected ncclTimeout %d), then %d", got[0],
                   (int)ncclTimeout, got[1]);
        if (nranks > 1)
            EXPECT(got[2] == ncclTimeout && got[3] == ncclSuccess && got[4] == ncclSuccess,
                   "GIN barrier: timed sync %d (expected ncclTimeout %d), then %d, %d", got[2],
                   (int)ncclTimeout, got[3], got[4]);
        EXPECT(got[5] == 0, "threads of one coop saw different results (%d)", got[5]);
    }
    CUDACHECK(cudaFree(result));
    NCCLCHECK(ncclDevCommDestroy(comm, &dev));
    NCCLCHECK(ncclCommWindowDeregister(comm, win));
    NCCLCHECK(ncclMemFree(buf));
}

/* ---------------------------------------------------------------------------------------- */
/* oneproc: one process, every GPU a rank; windows send[count] and recv[count] (floats)      */

__global__ void oneproc_kernel(ncclDevComm comm, ncclWindow_t send, ncclWindow_t recv, int count)
{
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acquire);
    int n = comm.lsaSize;
    /* Rank r sums the elements r, r + n, ... of every stride: each element is written once. */
    int first = threadIdx.x + blockDim.x * (comm.lsaRank + blockIdx.x * n);
    for (int i = first; i < count; i += blockDim.x * gridDim.x * n) {
        float v = 0;
        for (int p = 0; p < n; p++) v += ((const float *)ncclGetLsaPointer(send, 0, p))[i];
        for (int p = 0; p < n; p++) ((float *)ncclGetLsaPointer(recv, 0, p))[i] = v;
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_release);
}

static int run_oneproc(int want)
{
    int ndev = 0;
    CUDACHECK(cudaGetDeviceCount(&ndev));
    int n = want > 0 ? want : ndev;
    if (ndev < 2 || n > ndev) {
        printf("gpu_devapi oneproc: %d GPUs wanted, %d here: skipped\n", n, ndev);
        return 77;
    }
    nranks = n;
    const int count = 100000, blocks = 8;
    const size_t bytes = count * sizeof(float);
    std::vector<int> devs(n);
    std::vector<ncclComm_t> comms(n);
    std::vector<void *> sendbuf(n), recvbuf(n);
    std::vector<ncclWindow_t> sendwin(n), recvwin(n);
    std::vector<ncclDevComm_t> dev(n);
    std::vector<cudaStream_t> streams(n);
    for (int d = 0; d < n; d++) devs[d] = d;
    NCCLCHECK(ncclCommInitAll(comms.data(), n, devs.data()));
    for (int d = 0; d < n; d++) {
        CUDACHECK(cudaSetDevice(d));
        CUDACHECK(cudaStreamCreateWithFlags(&streams[d], cudaStreamNonBlocking));
        NCCLCHECK(ncclMemAlloc(&sendbuf[d], bytes));
        NCCLCHECK(ncclMemAlloc(&recvbuf[d], bytes));
    }
    NCCLCHECK(ncclGroupStart());
    for (int d = 0; d < n; d++) {
        CUDACHECK(cudaSetDevice(d));
        NCCLCHECK(ncclCommWindowRegister(comms[d], sendbuf[d], bytes, &sendwin[d],
                                         NCCL_WIN_COLL_SYMMETRIC));
        NCCLCHECK(ncclCommWindowRegister(comms[d], recvbuf[d], bytes, &recvwin[d],
                                         NCCL_WIN_COLL_SYMMETRIC));
    }
    NCCLCHECK(ncclGroupEnd());
    /* nccl-tests makes the device communicators with whatever GPU its last loop left current. */
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.lsaBarrierCount = blocks;
    NCCLCHECK(ncclGroupStart());
    for (int d = 0; d < n; d++) NCCLCHECK(ncclDevCommCreate(comms[d], &reqs, &dev[d]));
    NCCLCHECK(ncclGroupEnd());
    std::vector<float> in(count), out(count);
    for (int round = 0; round < 2; round++) {
        for (int d = 0; d < n; d++) {
            for (int i = 0; i < count; i++) in[i] = lsa_input(d, i % 1000, round);
            CUDACHECK(cudaSetDevice(d));
            CUDACHECK(cudaMemcpy(sendbuf[d], in.data(), bytes, cudaMemcpyHostToDevice));
            CUDACHECK(cudaMemset(recvbuf[d], 0, bytes));
            CUDACHECK(cudaDeviceSynchronize());
        }
        for (int d = 0; d < n; d++) {
            CUDACHECK(cudaSetDevice(d));
            oneproc_kernel<<<blocks, 256, 0, streams[d]>>>(dev[d], sendwin[d], recvwin[d], count);
            CUDACHECK(cudaGetLastError());
        }
        for (int d = 0; d < n; d++) {
            CUDACHECK(cudaSetDevice(d));
            CUDACHECK(cudaStreamSynchronize(streams[d]));
            CUDACHECK(cudaMemcpy(out.data(), recvbuf[d], bytes, cudaMemcpyDeviceToHost));
            long bad = 0;
            for (int i = 0; i < count; i++) {
                float want = 0;
                for (int r = 0; r < n; r++) want += lsa_input(r, i % 1000, round);
                if (out[i] != want && bad++ < 3)
                    EXPECT(0, "round %d GPU %d: recv[%d] = %g, expected %g", round, d, i, out[i],
                           want);
            }
            EXPECT(bad == 0, "round %d GPU %d: %ld wrong values", round, d, bad);
        }
    }
    /* nccl-tests' teardown order, from one thread with the last GPU current. */
    for (int d = 0; d < n; d++) NCCLCHECK(ncclDevCommDestroy(comms[d], &dev[d]));
    for (int d = 0; d < n; d++) {
        NCCLCHECK(ncclCommWindowDeregister(comms[d], sendwin[d]));
        NCCLCHECK(ncclCommWindowDeregister(comms[d], recvwin[d]));
    }
    for (int d = 0; d < n; d++) {
        NCCLCHECK(ncclMemFree(sendbuf[d]));
        NCCLCHECK(ncclMemFree(recvbuf[d]));
        CUDACHECK(cudaSetDevice(d));
        CUDACHECK(cudaStreamDestroy(streams[d]));
    }
    for (int d = 0; d < n; d++) NCCLCHECK(ncclCommDestroy(comms[d]));
    printf("gpu_devapi oneproc: %d GPUs: %ld failures\n", n, failures);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "lsa";
    if (!strcmp(mode, "oneproc")) return run_oneproc(argc > 2 ? atoi(argv[2]) : 0);
    rank = env_int("ZINC_RANK", 0);
    nranks = env_int("ZINC_NRANKS", 1);
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("gpu_devapi: no GPU, skipped\n");
        return 77;
    }
    CUDACHECK(cudaSetDevice(env_int("ZINC_LOCAL_RANK", rank) % ndev));
    ncclUniqueId id;
    ncclComm_t comm;
    NCCLCHECK(ncclGetUniqueId(&id));
    NCCLCHECK(ncclCommInitRank(&comm, nranks, id, rank));
    if (!strcmp(mode, "lsa"))
        run_lsa(comm);
    else if (!strcmp(mode, "gin"))
        run_gin(comm, argc > 2 ? atoi(argv[2]) : 777);
    else if (!strcmp(mode, "lla2a"))
        run_lla2a(comm);
    else if (!strcmp(mode, "hosts"))
        run_hosts(comm);
    else if (!strcmp(mode, "timeout"))
        run_timeout(comm);
    else {
        fprintf(stderr, "gpu_devapi: unknown mode %s\n", mode);
        return 2;
    }
    /* Every rank's verdict, summed. */
    long *d, total = 0;
    CUDACHECK(cudaMalloc(&d, sizeof(long)));
    CUDACHECK(cudaMemcpy(d, &failures, sizeof(long), cudaMemcpyHostToDevice));
    NCCLCHECK(ncclAllReduce(d, d, 1, ncclInt64, ncclSum, comm, 0));
    CUDACHECK(cudaStreamSynchronize(0));
    CUDACHECK(cudaMemcpy(&total, d, sizeof(long), cudaMemcpyDeviceToHost));
    CUDACHECK(cudaFree(d));
    NCCLCHECK(ncclCommDestroy(comm));
    if (rank == 0) printf("gpu_devapi %s: %d ranks: %ld failures\n", mode, nranks, total);
    return total ? 1 : 0;
}
