// msc-perf: latency and bandwidth of MSCCL++ connections on zinc's libmscclpp.so, printed in
// nccl-tests' format so the tables line up with zinc-perf's and NCCL's.
//
//   zinc-run -n N msc-perf -o pingpong|allgather -t shm|net|direct|proxy|gpunet [-b 8]
//                          [-e 64M] [-f 2] [-n 20] [-w 5] [-c 1] [-H hosts]
//
//   pingpong   rank 0 put + signal -> rank 1 wait, and back: "time" is half the round trip
//   allgather  every rank puts its slice (size / nranks) into every peer, signals, waits for
//              every peer: the one-sided allgather; busbw = algbw * (n - 1) / n
//   -t shm     host memory, host threads (zincConnPut/Signal/Wait); direct / proxy: GPU
//              kernels storing themselves (putDirect/signalDirect/waitDirect) or through the
//              proxy's copy engine (putWithSignal/flush/wait)
//   -t net     host memory, mscclppTransportIB over the net zinc picks (ZINC_NET: IB, else
//              Socket), libmscclpp's proxy running; -H K puts rank r on "host" r % K
//              (ZINC_HOSTID) to stand for K machines
//   -t gpunet  the proxy kernels on GPU buffers over mscclppTransportIB (a CUDA build)
//   -c 1       checks the data of one extra run at each size (#wrong)
#include "msc-perf.h"
#include "zinc.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>
#include <vector>

static int rank, nranks;

#define CHECK(call)                                                                        \
    do {                                                                                   \
        int r_ = (int)(call);                                                              \
        if (r_ != 0) {                                                                     \
            fprintf(stderr, "[%d] %s:%d %s failed: %s\n", rank, __FILE__, __LINE__, #call, \
                    mscclppGetErrorString((mscclppResult_t)r_));                           \
            exit(2);                                                                       \
        }                                                                                  \
    } while (0)

static double now()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t parseSize(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'K':
    case 'k': v *= 1024; break;
    case 'M':
    case 'm': v *= 1024 * 1024; break;
    case 'G':
    case 'g': v *= 1024.0 * 1024 * 1024; break;
    }
    return (size_t)v;
}

// Host-memory connections: one to every peer over one zincConnMemAlloc buffer.
struct Shm {
    mscclppComm_t comm;
    uint8_t *buf;
    std::vector<mscclppDevConn_t *> conns; // by peer rank (NULL for this rank)
};

static void shmSetup(Shm &s, size_t bytes, mscclppTransport_t t)
{
    CHECK(zincConnMemAlloc(s.comm, bytes, (void **)&s.buf));
    s.conns.assign(nranks, nullptr);
    for (int p = 0; p < nranks; p++)
        if (p != rank) CHECK(mscclppConnect(s.comm, p, 0, s.buf, bytes, t));
    CHECK(mscclppConnectionSetup(s.comm));
    for (int p = 0; p < nranks; p++)
        if (p != rank) CHECK(mscclppGetDeviceConnection(s.comm, p, 0, &s.conns[p]));
}

static void shmRun(Shm &s, int pingpong, size_t bytes, int iters)
{
    if (pingpong) {
        if (rank > 1) return;
        mscclppDevConn_t *c = s.conns[rank ^ 1];
        for (int i = 0; i < iters; i++) {
            if (rank == 1) CHECK(zincConnWait(c));
            CHECK(zincConnPutWithSignal(c, 0, 0, bytes));
            if (rank == 0) CHECK(zincConnWait(c));
        }
        return;
    }
    size_t slice = bytes / nranks;
    for (int i = 0; i < iters; i++) {
        for (int p = 0; p < nranks; p++)
            if (p != rank)
                CHECK(zincConnPutWithSignal(s.conns[p], rank * slice, rank * slice, slice));
        for (int p = 0; p < nranks; p++)
            if (p != rank) CHECK(zincConnWait(s.conns[p]));
    }
    // Over the net puts complete later: the buffer is reused once this returns.
    for (int p = 0; p < nranks; p++)
        if (p != rank) CHECK(zincConnFlush(s.conns[p]));
}

int main(int argc, char **argv)
{
    const char *op = "pingpong", *tr = "shm";
    size_t minb = 8, maxb = 64 << 20;
    int factor = 2, iters = 20, warmup = 5, check = 1, hosts = 0;
    for (int c; (c = getopt(argc, argv, "o:t:b:e:f:n:w:c:H:")) != -1;) {
        switch (c) {
        case 'o': op = optarg; break;
        case 't': tr = optarg; break;
        case 'b': minb = parseSize(optarg); break;
        case 'e': maxb = parseSize(optarg); break;
        case 'f': factor = atoi(optarg); break;
        case 'n': iters = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        case 'c': check = atoi(optarg); break;
        case 'H': hosts = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: zinc-run -n N msc-perf -o pingpong|allgather -t "
                            "shm|net|direct|proxy|gpunet "
                            "[-b min] [-e max] [-f factor] [-n iters] [-w warmup] [-c check] "
                            "[-H hosts]\n");
            return 2;
        }
    }
    const char *r = getenv("ZINC_RANK"), *n = getenv("ZINC_NRANKS"), *ip = getenv("ZINC_COMM_ID");
    if (!r || !n || !ip) {
        fprintf(
            stderr,
            "msc-perf: run it under zinc-run (it needs ZINC_RANK, ZINC_NRANKS, ZINC_COMM_ID)\n");
        return 2;
    }
    rank = atoi(r);
    nranks = atoi(n);
    int pingpong = !strcmp(op, "pingpong"), net = !strcmp(tr, "net"),
        gpunet = !strcmp(tr, "gpunet"), gpu = strcmp(tr, "shm") != 0 && !net,
        mode = !strcmp(tr, "proxy") || gpunet;
    if (hosts > 0) {
        // Before the communicator exists: the host identity is read when it is made.
        char id[32];
        snprintf(id, sizeof(id), "msc-perf-host-%d", rank % hosts);
        setenv("ZINC_HOSTID", id, 1);
    }
    if ((!pingpong && strcmp(op, "allgather")) || (gpu && strcmp(tr, "direct") && !mode) ||
        nranks < 2 || factor < 2 || iters < 1) {
        fprintf(stderr, "msc-perf: bad options (op %s, transport %s, %d ranks: 2 or more)\n", op,
                tr, nranks);
        return 2;
    }
    // MSCCL++ binds a communicator to the GPU current at init: pick it first.
    if (gpu && mscPerfGpuSelect(rank) < 0) return 2;
    Shm s;
    CHECK(mscclppCommInitRank(&s.comm, nranks, ip, rank));
    MscPerfGpu *g = nullptr;
    if (gpu) {
        g = mscPerfGpuSetup(s.comm, rank, nranks, maxb, gpunet);
        if (!g) return 2;
        CHECK(mscclppProxyLaunch(s.comm));
    } else {
        shmSetup(s, maxb, net ? mscclppTransportIB : mscclppTransportSHM);
        if (net) CHECK(mscclppProxyLaunch(s.comm));
    }
    if (rank == 0) {
        printf("# msc-perf: %s over %s, %d ranks (zinc libmscclpp, MSCCL++ 0.1 API)\n", op, tr,
               nranks);
        printf("#%12s %12s %8s %6s %6s %10s %8s %8s %6s\n", "size", "count", "type", "redop",
               "root", "time", "algbw", "busbw", "#wrong");
        printf("#%12s %12s %8s %6s %6s %10s %8s %8s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
               "(GB/s)", "(GB/s)", "");
    }
    for (size_t bytes = minb; bytes <= maxb; bytes *= factor) {
        size_t b = pingpong ? bytes : bytes / nranks * nranks;
        if (b == 0) continue;
        long wrong = 0;
        if (check) {
            // One run with a pattern, then every byte compared with what it must be.
            if (gpu) {
                mscPerfGpuFill(g, pingpong, b);
                CHECK(mscclppBootstrapBarrier(s.comm));
                if (mscPerfGpuRun(g, pingpong, b, 1, mode) < 0) return 1;
                wrong = mscPerfGpuCheck(g, pingpong, b, 1);
            } else {
                size_t slice = b / nranks;
                for (size_t i = 0; i < b; i++) s.buf[i] = 0;
                for (size_t i = 0; i < (pingpong ? b : slice); i++)
                    s.buf[(pingpong ? 0 : rank * slice) + i] = mscPerfByte(rank, i);
                CHECK(mscclppBootstrapBarrier(s.comm));
                shmRun(s, pingpong, b, 1);
                if (pingpong && rank == 1)
                    for (size_t i = 0; i < b; i++) wrong += s.buf[i] != mscPerfByte(0, i);
                for (int p = 0; !pingpong && p < nranks; p++)
                    for (size_t i = 0; i < slice; i++)
                        wrong += s.buf[p * slice + i] != mscPerfByte(p, i);
            }
        }
        CHECK(mscclppBootstrapBarrier(s.comm));
        double t;
        if (gpu) {
            if (mscPerfGpuRun(g, pingpong, b, warmup, mode) < 0) return 1;
            CHECK(mscclppBootstrapBarrier(s.comm));
            t = mscPerfGpuRun(g, pingpong, b, iters, mode);
            if (t < 0) return 1;
        } else {
            shmRun(s, pingpong, b, warmup);
            CHECK(mscclppBootstrapBarrier(s.comm));
            double t0 = now();
            shmRun(s, pingpong, b, iters);
            t = now() - t0;
        }
        // Rank 0's time and the sum of every rank's wrong elements.
        std::vector<double> all(2 * nranks);
        all[2 * rank] = t;
        all[2 * rank + 1] = (double)wrong;
        CHECK(mscclppBootstrapAllGather(s.comm, all.data(), 2 * sizeof(double)));
        long wsum = 0;
        for (int p = 0; p < nranks; p++) wsum += (long)all[2 * p + 1];
        double us = all[0] / iters * 1e6 / (pingpong ? 2 : 1);
        double algbw = (double)b / (us * 1e-6) / 1e9;
        double busbw = pingpong ? algbw : algbw * (nranks - 1) / nranks;
        if (rank == 0)
            printf(" %12zu %12zu %8s %6s %6d %10.2f %8.2f %8.2f %6ld\n", b, b, "uint8", "none", -1,
                   us, algbw, busbw, check ? wsum : -1);
        if (wsum) return 1;
        CHECK(mscclppBootstrapBarrier(s.comm));
    }
    if (gpu || net) CHECK(mscclppProxyStop(s.comm));
    mscPerfGpuFree(g);
    CHECK(mscclppCommDestroy(s.comm));
    return 0;
}

#ifndef ZINC_MSC_PERF_CUDA
// A build without CUDA: the GPU transports are not there.
int mscPerfGpuSelect(int)
{
    fprintf(stderr, "msc-perf: -t direct|proxy|gpunet needs a build with CUDA\n");
    return -1;
}
MscPerfGpu *mscPerfGpuSetup(mscclppComm_t, int, int, size_t, int)
{
    fprintf(stderr, "msc-perf: -t direct|proxy|gpunet needs a build with CUDA\n");
    return nullptr;
}
double mscPerfGpuRun(MscPerfGpu *, int, size_t, int, int)
{
    return -1;
}
void mscPerfGpuFill(MscPerfGpu *, int, size_t) {}
long mscPerfGpuCheck(MscPerfGpu *, int, size_t, int)
{
    return -1;
}
void mscPerfGpuFree(MscPerfGpu *) {}
#endif
