// peer_copy: what the copy engine gives between two GPUs, the reference for zinc's paths that
// use it (the one-sided proxy's puts and signals) and the link's ceiling for every other path.
//   peer_copy [MAXBYTES=1G]
// Prints: the time of one 8-byte cudaMemcpyAsync from GPU 0 to GPU 1 followed by a stream
// synchronize (mean of 2000 after 200 warm-ups), then GB/s of cudaMemcpyPeerAsync from 0 to 1
// and of both directions at once, 8 KB to MAXBYTES. Needs 2 GPUs with peer access.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                   \
    do {                                                                        \
        cudaError_t e_ = (x);                                                   \
        if (e_ != cudaSuccess) {                                                \
            fprintf(stderr, "peer_copy: %s: %s\n", #x, cudaGetErrorString(e_)); \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

int main(int argc, char **argv)
{
    size_t max = argc > 1 ? strtoull(argv[1], nullptr, 0) : (size_t)1 << 30;
    int n = 0;
    CK(cudaGetDeviceCount(&n));
    if (n < 2) {
        printf("peer_copy: needs 2 GPUs, found %d\n", n);
        return 77;
    }
    void *a, *b, *a2, *b2;
    cudaStream_t s0, s1;
    CK(cudaSetDevice(1));
    CK(cudaDeviceEnablePeerAccess(0, 0));
    CK(cudaMalloc(&b, max));
    CK(cudaMalloc(&b2, max));
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaSetDevice(0));
    CK(cudaDeviceEnablePeerAccess(1, 0));
    CK(cudaMalloc(&a, max));
    CK(cudaMalloc(&a2, max));
    CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    using clk = std::chrono::steady_clock;
    for (int i = 0; i < 200; i++) {
        CK(cudaMemcpyAsync(b, a, 8, cudaMemcpyDeviceToDevice, s0));
        CK(cudaStreamSynchronize(s0));
    }
    auto t0 = clk::now();
    for (int i = 0; i < 2000; i++) {
        CK(cudaMemcpyAsync(b, a, 8, cudaMemcpyDeviceToDevice, s0));
        CK(cudaStreamSynchronize(s0));
    }
    double us = std::chrono::duration<double, std::micro>(clk::now() - t0).count() / 2000;
    printf("# 8-byte cudaMemcpyAsync GPU 0 -> GPU 1 + cudaStreamSynchronize: %.2f us\n", us);
    printf("#%12s %14s %14s\n", "bytes", "0->1 GB/s", "both GB/s");
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (size_t bytes = 8192; bytes <= max; bytes *= 4) {
        int iters = bytes < (64 << 20) ? 50 : 10;
        double gb[2];
        for (int both = 0; both < 2; both++) {
            for (int w = 0; w < 2; w++) {
                CK(cudaMemcpyPeerAsync(b, 1, a, 0, bytes, s0));
                if (both) CK(cudaMemcpyPeerAsync(a2, 0, b2, 1, bytes, s1));
            }
            CK(cudaDeviceSynchronize());
            CK(cudaSetDevice(1));
            CK(cudaDeviceSynchronize());
            CK(cudaSetDevice(0));
            auto t = clk::now();
            for (int i = 0; i < iters; i++) {
                CK(cudaMemcpyPeerAsync(b, 1, a, 0, bytes, s0));
                if (both) CK(cudaMemcpyPeerAsync(a2, 0, b2, 1, bytes, s1));
            }
            CK(cudaStreamSynchronize(s0));
            CK(cudaStreamSynchronize(s1));
            double sec = std::chrono::duration<double>(clk::now() - t).count();
            gb[both] = (double)bytes * iters * (both ? 2 : 1) / sec / 1e9;
        }
        printf(" %12zu %14.1f %14.1f\n", bytes, gb[0], gb[1]);
    }
    return 0;
}
