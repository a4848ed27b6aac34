// msc-perf's GPU side: P2P connections to every peer and the kernels that time them.
#include "msc-perf.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

__constant__ mscclppDevConn_t perfConns[64];

struct MscPerfGpu {
    mscclppComm_t comm;
    int rank, nranks, nconns, sms;
    uint8_t *buf;
    unsigned *sync; // per connection: blocks arrived, iterations released (allgather, direct)
    cudaEvent_t start, stop;
};

#define CUDA_OR(cmd, ret)                                                               \
    do {                                                                                \
        cudaError_t e_ = cmd;                                                           \
        if (e_ != cudaSuccess) {                                                        \
            fprintf(stderr, "msc-perf: %s failed: %s\n", #cmd, cudaGetErrorString(e_)); \
            return ret;                                                                 \
        }                                                                               \
    } while (0)
#define MSC_OR(cmd, ret)                                                                   \
    do {                                                                                   \
        mscclppResult_t r_ = cmd;                                                          \
        if (r_ != mscclppSuccess) {                                                        \
            fprintf(stderr, "msc-perf: %s failed: %s\n", #cmd, mscclppGetErrorString(r_)); \
            return ret;                                                                    \
        }                                                                                  \
    } while (0)

int mscPerfGpuSelect(int rank)
{
    int ndev = 0;
    CUDA_OR(cudaGetDeviceCount(&ndev), -1);
    CUDA_OR(cudaSetDevice(rank % ndev), -1);
    return rank % ndev;
}

MscPerfGpu *mscPerfGpuSetup(mscclppComm_t comm, int rank, int nranks, size_t bytes, int net)
{
    if (nranks > 65) {
        fprintf(stderr, "msc-perf: at most 65 ranks\n");
        return nullptr;
    }
    int dev = 0;
    CUDA_OR(cudaGetDevice(&dev), nullptr);
    MscPerfGpu *g = new MscPerfGpu{ comm, rank, nranks, 0, 0, nullptr, nullptr, nullptr, nullptr };
    CUDA_OR(cudaDeviceGetAttribute(&g->sms, cudaDevAttrMultiProcessorCount, dev), nullptr);
    CUDA_OR(cudaMalloc(&g->sync, 2 * 64 * sizeof(unsigned)), nullptr);
    CUDA_OR(cudaMalloc(&g->buf, bytes), nullptr);
    CUDA_OR(cudaMemset(g->buf, 0, bytes), nullptr);
    CUDA_OR(cudaEventCreate(&g->start), nullptr);
    CUDA_OR(cudaEventCreate(&g->stop), nullptr);
    for (int p = 0; p < nranks; p++)
        if (p != rank)
            MSC_OR(mscclppConnect(comm, p, 0, g->buf, bytes,
                                  net ? mscclppTransportIB : mscclppTransportP2P),
                   nullptr);
    MSC_OR(mscclppConnectionSetup(comm), nullptr);
    mscclppDevConn_t *conns;
    MSC_OR(mscclppGetAllDeviceConnections(comm, &conns, &g->nconns), nullptr);
    CUDA_OR(cudaMemcpyToSymbol(perfConns, conns, sizeof(mscclppDevConn_t) * g->nconns), nullptr);
    return g;
}

// Connection k goes to peer k (k < rank) or k + 1: the peer ranks in order.
__global__ void pingpongKernel(int rank, size_t bytes, int iters, int proxy)
{
    mscclppDevConn_t c = perfConns[0]; // rank 0's peer 1, rank 1's peer 0
    for (int i = 0; i < iters; i++) {
        if (rank == 1 && threadIdx.x == 0) proxy ? c.wait() : c.waitDirect();
        __syncthreads();
        if (proxy) {
            if (threadIdx.x == 0) c.putWithSignal(0, bytes);
        } else {
            c.putDirect(0, bytes, threadIdx.x, blockDim.x);
            __syncthreads();
            if (threadIdx.x == 0) c.signalDirect();
        }
        if (rank == 0 && threadIdx.x == 0) proxy ? c.wait() : c.waitDirect();
        __syncthreads();
    }
    if (proxy && threadIdx.x == 0) c.flush();
}

// Through the proxy, block k serves connection k: one thread's trigger moves the whole slice
// (the copy engine copies). Direct, blocks [k * bpc, (k + 1) * bpc) serve connection k: each
// stores its share of the slice into the peer's buffer, and the last of them to finish signals
// the peer and waits for the peer's signal while the others wait for it (sync: per connection
// the blocks arrived and the iterations released). One thread block alone cannot keep an
// NVLink busy; all blocks are resident at once (bpc * connections <= multiprocessors).
__global__ void allgatherKernel(int rank, size_t slice, int iters, int proxy, int bpc,
                                unsigned *sync)
{
    int k = blockIdx.x / bpc, j = blockIdx.x % bpc;
    mscclppDevConn_t c = perfConns[k];
    unsigned *arrived = sync + 2 * k, *released = sync + 2 * k + 1;
    size_t per = ((slice + bpc - 1) / bpc + 15) / 16 * 16;
    size_t lo = j * per < slice ? j * per : slice, hi = lo + per < slice ? lo + per : slice;
    for (int i = 0; i < iters; i++) {
        if (proxy) {
            if (threadIdx.x == 0) {
                c.putWithSignal(rank * slice, slice);
                c.wait();
            }
        } else {
            c.putDirect(rank * slice + lo, hi - lo, threadIdx.x, blockDim.x);
            __threadfence_system();
            __syncthreads();
            if (threadIdx.x == 0) {
                if (atomicAdd(arrived, 1u) == (unsigned)(i + 1) * bpc - 1) {
                    c.signalDirect();
                    c.waitDirect();
                    atomicExch(released, (unsigned)i + 1);
                } else {
                    while (*(volatile unsigned *)released < (unsigned)i + 1) {
                    }
                }
            }
        }
        __syncthreads();
    }
    if (proxy && threadIdx.x == 0) c.flush();
}

double mscPerfGpuRun(MscPerfGpu *g, int pingpong, size_t bytes, int iters, int mode)
{
    if (pingpong && g->rank > 1) return 0;
    CUDA_OR(cudaEventRecord(g->start), -1);
    size_t slice = bytes / g->nranks;
    // Direct: a block per 256 KB of the slice, as many as fit beside the other connections'.
    int bpc = 1;
    if (!mode) {
        size_t want = (slice + (256 << 10) - 1) / (256 << 10);
        int most = g->sms / g->nconns > 0 ? g->sms / g->nconns : 1;
        bpc = want < (size_t)most ? (int)(want ? want : 1) : most;
        CUDA_OR(cudaMemset(g->sync, 0, 2 * 64 * sizeof(unsigned)), -1);
    }
    if (pingpong)
        pingpongKernel<<<1, 1024>>>(g->rank, bytes, iters, mode);
    else
        allgatherKernel<<<g->nconns * bpc, 1024>>>(g->rank, slice, iters, mode, bpc, g->sync);
    CUDA_OR(cudaGetLastError(), -1);
    CUDA_OR(cudaEventRecord(g->stop), -1);
    CUDA_OR(cudaEventSynchronize(g->stop), -1);
    float ms = 0;
    CUDA_OR(cudaEventElapsedTime(&ms, g->start, g->stop), -1);
    return ms * 1e-3;
}

// The pattern of one check: ping-pong, rank 0's whole message (then bytes of rank 1 hold 0);
// allgather, this rank's slice. The rest is zero, so a missing copy shows.
void mscPerfGpuFill(MscPerfGpu *g, int pingpong, size_t bytes)
{
    std::vector<uint8_t> h(bytes, 0);
    size_t slice = pingpong ? bytes : bytes / g->nranks, at = pingpong ? 0 : g->rank * slice;
    if (!pingpong || g->rank == 0)
        for (size_t i = 0; i < slice; i++) h[at + i] = mscPerfByte(g->rank, i);
    // From pageable memory cudaMemcpy may return before the bytes have landed: without the
    // sync a peer's put after the barrier could land first and be overwritten by the pattern's
    // zeros (seen as a missing peer slice).
    if (cudaMemcpy(g->buf, h.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess)
        fprintf(stderr, "msc-perf: cudaMemcpy of the check pattern failed\n");
}

long mscPerfGpuCheck(MscPerfGpu *g, int pingpong, size_t bytes, int iters)
{
    std::vector<uint8_t> h(bytes);
    CUDA_OR(cudaMemcpy(h.data(), g->buf, bytes, cudaMemcpyDeviceToHost), -1);
    long wrong = 0;
    if (pingpong) {
        if (g->rank < 2)
            for (size_t i = 0; i < bytes; i++) wrong += h[i] != mscPerfByte(0, i);
        return wrong;
    }
    size_t slice = bytes / g->nranks;
    for (int p = 0; p < g->nranks; p++)
        for (size_t i = 0; i < slice; i++) wrong += h[p * slice + i] != mscPerfByte(p, i);
    return wrong;
}

void mscPerfGpuFree(MscPerfGpu *g)
{
    if (!g) return;
    cudaEventDestroy(g->start);
    cudaEventDestroy(g->stop);
    cudaFree(g->buf);
    cudaFree(g->sync);
    delete g;
}
