// An MSCCL++ 0.1-style GPU program, unmodified MSCCL++ 0.1 API only (mscclpp.h): connections
// over P2P between processes, kernels that move data with the device methods, each result
// checked exactly against a host reference. It is also the compile test: tests build it with
// nvcc against the installed headers (install_check.sh).
//
//   msc_gpu_check allgather|allreduce|pingpong|order direct|proxy|net [HOSTS]   (under zinc-run)
//
// order: rank 0 pushes ORDER_PUTS puts with signals back to back, rank 1 waits for all of them
//        and then checks the last region first: each signal must be seen only after its own
//        put's data (a proxy that stored the kernel's current count, already raised by the
//        later puts, let the first signal release every wait before the later copies ran).
//
// direct: the kernels store into remoteBuff and the peer's signal words themselves
//         (putDirect / signalDirect / waitDirect);
// proxy:  they push triggers (putWithSignal / signal / flush / wait) that the proxy serves
//         with the copy engine;
// net:    the same kernels as proxy on mscclppTransportIB over zinc's net (ZINC_NET), the ranks
//         split over HOSTS "hosts" (ZINC_HOSTID = rank % HOSTS).
// Ranks may share one GPU: their kernels then time-slice, so every kernel here is one block
// per connection and every wait is bounded (ZINC_TIMEOUT); exit 77 without a GPU.
#include "mscclpp.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define MSCCLPPCHECK(call)                                                       \
    do {                                                                         \
        mscclppResult_t r_ = call;                                               \
        if (r_ != mscclppSuccess) {                                              \
            printf("[%d] %s:%d MSCCLPP failure: %s\n", rank, __FILE__, __LINE__, \
                   mscclppGetErrorString(r_));                                   \
            exit(2);                                                             \
        }                                                                        \
    } while (0)

#define CUDACHECK(cmd)                                                         \
    do {                                                                       \
        cudaError_t e = cmd;                                                   \
        if (e != cudaSuccess) {                                                \
            printf("[%d] %s:%d Cuda failure '%s'\n", rank, __FILE__, __LINE__, \
                   cudaGetErrorString(e));                                     \
            exit(2);                                                           \
        }                                                                      \
    } while (0)

static int rank, nranks;
static mscclppTransport_t transport = mscclppTransportP2P;

__constant__ mscclppDevConn_t constDevConns[16];

__device__ uint64_t val(int r, size_t i, int it)
{
    return ((uint64_t)r * 1000003 + (uint64_t)i * 7 + (uint64_t)it * 100000007) *
           0x9e3779b97f4a7c15ull;
}
static uint64_t hval(int r, size_t i, int it)
{
    return ((uint64_t)r * 1000003 + (uint64_t)i * 7 + (uint64_t)it * 100000007) *
           0x9e3779b97f4a7c15ull;
}

// Block b serves connection b: sends this rank's slice to the peer, then waits for the peer's.
__global__ void allgather0(int rank, size_t bytes, int useProxy)
{
    mscclppDevConn_t devConn = constDevConns[blockIdx.x];
    if (useProxy) {
        if (threadIdx.x == 0) {
            devConn.putWithSignal(rank * bytes, bytes);
            devConn.flush();
            devConn.wait();
        }
    } else {
        devConn.putDirect(rank * bytes, bytes, threadIdx.x, blockDim.x);
        __syncthreads();
        if (threadIdx.x == 0) {
            devConn.signalDirect();
            devConn.waitDirect();
        }
    }
}

__global__ void fill(uint64_t *buf, size_t count, int rank, int it)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x)
        buf[i] = val(rank, i, it);
}

// Ring allreduce of int64 sums: reduce-scatter into a scratch area after the data, then an
// allgather. Connection 0 goes to the next rank, connection 1 (or 0 with two ranks) comes from
// the previous one.
__global__ void ringAllreduce(int rank, int nranks, size_t chunk, int useProxy)
{
    mscclppDevConn_t to = constDevConns[0];
    mscclppDevConn_t from = constDevConns[nranks > 2 ? 1 : 0];
    uint64_t *data = (uint64_t *)to.localBuff;
    size_t count = chunk * nranks, cb = chunk * sizeof(uint64_t);
    for (int s = 0; s < nranks - 1; s++) {
        size_t send = (rank - s + nranks) % nranks, recv = (rank - s - 1 + 2 * nranks) % nranks;
        uint64_t dst = (count + s * chunk) * sizeof(uint64_t);
        if (useProxy) {
            if (threadIdx.x == 0) {
                to.putWithSignal(dst, send * cb, cb);
                from.wait();
            }
        } else {
            to.putDirect(dst, send * cb, cb, threadIdx.x, blockDim.x);
            __syncthreads();
            if (threadIdx.x == 0) {
                to.signalDirect();
                from.waitDirect();
            }
        }
        __syncthreads();
        for (size_t i = threadIdx.x; i < chunk; i += blockDim.x)
            data[recv * chunk + i] += data[count + s * chunk + i];
        __syncthreads();
    }
    for (int s = 0; s < nranks - 1; s++) {
        size_t send = (rank + 1 - s + nranks) % nranks;
        if (useProxy) {
            if (threadIdx.x == 0) {
                to.putWithSignal(send * cb, cb);
                from.wait();
            }
        } else {
            to.putDirect(send * cb, cb, threadIdx.x, blockDim.x);
            __syncthreads();
            if (threadIdx.x == 0) {
                to.signalDirect();
                from.waitDirect();
            }
        }
        __syncthreads();
    }
    if (useProxy && threadIdx.x == 0) to.flush();
}

// Rank 0 sends bytes, rank 1 adds one to each and sends them back, rounds times.
__global__ void pingpong(int rank, size_t bytes, int rounds, int useProxy)
{
    mscclppDevConn_t devConn = constDevConns[0];
    uint8_t *buf = (uint8_t *)devConn.localBuff;
    for (int r = 0; r < rounds; r++) {
        if (rank == 1) {
            if (threadIdx.x == 0) useProxy ? devConn.wait() : devConn.waitDirect();
            __syncthreads();
            for (size_t i = threadIdx.x; i < bytes; i += blockDim.x) buf[i] += 1;
            __syncthreads();
        }
        if (useProxy) {
            if (threadIdx.x == 0) devConn.putWithSignal(0, bytes);
        } else {
            devConn.putDirect(0, bytes, threadIdx.x, blockDim.x);
            __syncthreads();
            if (threadIdx.x == 0) devConn.signalDirect();
        }
        if (rank == 0) {
            if (threadIdx.x == 0) useProxy ? devConn.wait() : devConn.waitDirect();
            __syncthreads();
        }
    }
    if (useProxy && threadIdx.x == 0) devConn.flush();
}

// order: rank 0 puts region k and signals, ORDER_PUTS times without waiting in between; rank 1
// waits for every signal, then counts the wrong elements of each region, last region first.
#define ORDER_PUTS 4
__global__ void orderKernel(int rank, size_t region, int it, int useProxy,
                            unsigned long long *wrong)
{
    mscclppDevConn_t devConn = constDevConns[0];
    uint64_t *buf = (uint64_t *)devConn.localBuff;
    size_t count = region / sizeof(uint64_t);
    if (rank == 0) {
        for (int k = 0; k < ORDER_PUTS; k++) {
            if (useProxy) {
                if (threadIdx.x == 0) devConn.putWithSignal(k * region, region);
            } else {
                devConn.putDirect(k * region, region, threadIdx.x, blockDim.x);
                __syncthreads();
                if (threadIdx.x == 0) devConn.signalDirect();
            }
        }
        if (useProxy && threadIdx.x == 0) devConn.flush();
        return;
    }
    if (threadIdx.x == 0)
        for (int k = 0; k < ORDER_PUTS; k++) devConn.wait();
    __syncthreads();
    unsigned long long bad = 0;
    for (int k = ORDER_PUTS - 1; k >= 0; k--)
        for (size_t i = threadIdx.x; i < count; i += blockDim.x)
            bad += buf[k * count + i] != val(0, k * count + i, it);
    atomicAdd(wrong, bad);
}

static int connectAll(mscclppComm_t comm, void *buf, size_t bytes, const char *what)
{
    int n = 0;
    if (!strcmp(what, "allgather")) {
        for (int p = 0; p < nranks; p++)
            if (p != rank) {
                MSCCLPPCHECK(mscclppConnect(comm, p, 0, buf, bytes, transport));
                n++;
            }
    } else if (!strcmp(what, "allreduce")) {
        int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
        MSCCLPPCHECK(mscclppConnect(comm, next, 0, buf, bytes, transport));
        n++;
        if (prev != next) {
            MSCCLPPCHECK(mscclppConnect(comm, prev, 0, buf, bytes, transport));
            n++;
        }
    } else if (rank < 2) {
        MSCCLPPCHECK(mscclppConnect(comm, rank ^ 1, 0, buf, bytes, transport));
        n++;
    }
    MSCCLPPCHECK(mscclppConnectionSetup(comm));
    return n;
}

int main(int argc, char **argv)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    const char *r = getenv("ZINC_RANK"), *n = getenv("ZINC_NRANKS"), *ip = getenv("ZINC_COMM_ID");
    if (!r || !n || !ip || argc < 3 || argc > 4) {
        printf("usage: zinc-run -n N msc_gpu_check allgather|allreduce|pingpong|order "
               "direct|proxy|net [HOSTS]\n");
        return 2;
    }
    rank = atoi(r);
    nranks = atoi(n);
    const char *what = argv[1];
    int useProxy = !strcmp(argv[2], "proxy") || !strcmp(argv[2], "net");
    if (!strcmp(argv[2], "net")) {
        // Before the communicator exists: the host identity is read when it is made.
        char id[32];
        snprintf(id, sizeof(id), "msc-gpu-host-%d", rank % (argc == 4 ? atoi(argv[3]) : nranks));
        setenv("ZINC_HOSTID", id, 1);
        transport = mscclppTransportIB;
    }
    if (nranks < 2 || nranks > 16) {
        printf("needs 2 to 16 ranks\n");
        return 2;
    }
    CUDACHECK(cudaSetDevice(rank % ndev));
    mscclppComm_t comm;
    MSCCLPPCHECK(mscclppCommInitRank(&comm, nranks, ip, rank));

    const size_t count = 3 * 65536 + 17; // allgather: elements per rank (odd)
    size_t bytes = 1 << 20;              // pingpong
    if (!strcmp(what, "allgather")) bytes = count * nranks * sizeof(uint64_t);
    if (!strcmp(what, "allreduce")) bytes = (2 * nranks - 1) * 4099 * sizeof(uint64_t);
    const size_t region = 4 << 20; // order
    if (!strcmp(what, "order")) bytes = ORDER_PUTS * region;
    void *buf;
    CUDACHECK(cudaMalloc(&buf, bytes));
    CUDACHECK(cudaMemset(buf, 0, bytes));
    int nconns = connectAll(comm, buf, bytes, what);
    mscclppDevConn_t *devConns;
    int got;
    MSCCLPPCHECK(mscclppGetAllDeviceConnections(comm, &devConns, &got));
    if (got != nconns) {
        printf("[%d] %d connections, expected %d\n", rank, got, nconns);
        return 1;
    }
    CUDACHECK(cudaMemcpyToSymbol(constDevConns, devConns, sizeof(mscclppDevConn_t) * got));
    MSCCLPPCHECK(mscclppProxyLaunch(comm));

    long bad = 0;
    for (int it = 0; it < 3; it++) {
        if (!strcmp(what, "allgather")) {
            fill<<<64, 256>>>((uint64_t *)buf + rank * count, count, rank, it);
            CUDACHECK(cudaDeviceSynchronize());
            MSCCLPPCHECK(mscclppBootstrapBarrier(comm));
            allgather0<<<nconns, 512>>>(rank, count * sizeof(uint64_t), useProxy);
            CUDACHECK(cudaDeviceSynchronize());
            std::vector<uint64_t> h(count * nranks);
            CUDACHECK(
                cudaMemcpy(h.data(), buf, h.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
            for (int p = 0; p < nranks; p++)
                for (size_t i = 0; i < count; i++) bad += h[p * count + i] != hval(p, i, it);
        } else if (!strcmp(what, "allreduce")) {
            const size_t chunk = 4099;
            fill<<<64, 256>>>((uint64_t *)buf, chunk * nranks, rank, it);
            CUDACHECK(cudaDeviceSynchronize());
            MSCCLPPCHECK(mscclppBootstrapBarrier(comm));
            ringAllreduce<<<1, 512>>>(rank, nranks, chunk, useProxy);
            CUDACHECK(cudaDeviceSynchronize());
            std::vector<uint64_t> h(chunk * nranks);
            CUDACHECK(
                cudaMemcpy(h.data(), buf, h.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < h.size(); i++) {
                uint64_t want = 0;
                for (int p = 0; p < nranks; p++) want += hval(p, i, it);
                bad += h[i] != want;
            }
        } else if (!strcmp(what, "order") && rank < 2) {
            // Rank 1's buffer holds the last iteration's values (or zeros): stale data shows.
            if (rank == 0) fill<<<64, 256>>>((uint64_t *)buf, bytes / sizeof(uint64_t), 0, it);
            unsigned long long *wrong;
            CUDACHECK(cudaMalloc(&wrong, sizeof(*wrong)));
            CUDACHECK(cudaMemset(wrong, 0, sizeof(*wrong)));
            CUDACHECK(cudaDeviceSynchronize());
            MSCCLPPCHECK(mscclppBootstrapBarrier(comm));
            orderKernel<<<1, 512>>>(rank, region, it, useProxy, wrong);
            CUDACHECK(cudaDeviceSynchronize());
            unsigned long long w = 0;
            CUDACHECK(cudaMemcpy(&w, wrong, sizeof(w), cudaMemcpyDeviceToHost));
            CUDACHECK(cudaFree(wrong));
            bad += (long)w;
        } else if (rank < 2) {
            const size_t sizes[] = { 1, 4096, 1 << 20 };
            size_t nb = sizes[it];
            std::vector<uint8_t> h(nb);
            for (size_t i = 0; i < nb; i++) h[i] = (uint8_t)(i * 31 + it);
            if (rank == 0) CUDACHECK(cudaMemcpy(buf, h.data(), nb, cudaMemcpyHostToDevice));
            MSCCLPPCHECK(mscclppBootstrapBarrier(comm));
            const int rounds = 5;
            pingpong<<<1, 512>>>(rank, nb, rounds, useProxy);
            CUDACHECK(cudaDeviceSynchronize());
            CUDACHECK(cudaMemcpy(h.data(), buf, nb, cudaMemcpyDeviceToHost));
            // Every round adds one on rank 1, and rank 0 ends with what rank 1 sent last.
            for (size_t i = 0; i < nb; i++) bad += h[i] != (uint8_t)(i * 31 + it + rounds);
        } else {
            MSCCLPPCHECK(mscclppBootstrapBarrier(comm));
        }
        MSCCLPPCHECK(mscclppBootstrapBarrier(comm));
    }
    MSCCLPPCHECK(mscclppProxyStop(comm));
    MSCCLPPCHECK(mscclppCommDestroy(comm));
    CUDACHECK(cudaFree(buf));
    if (bad) printf("[%d] FAIL: %s %s: %ld wrong elements\n", rank, what, argv[2], bad);
    return bad ? 1 : 0;
}
