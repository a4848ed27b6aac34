// proxy_probe: where a CPU proxy's round trip with a running kernel spends its time.
//   proxy_probe [ITERS=2000] [ipc]
// A one-thread kernel on GPU 0 loops: it writes a request word into pinned host memory and
// waits for the answer; a host thread (the "proxy") spins on the request and answers. Each mode
// answers differently, and prints the mean round trip in microseconds:
//   host        the proxy stores the answer into pinned host memory (no copy engine)
//   ce-h2d      cudaMemcpyAsync of 8 bytes from pinned host memory to a device word
//   ce-d2d      cudaMemcpyAsync of 8 bytes device to device (GPU 0 memory)
//   ce-peer     as ce-d2d, into GPU 1's memory which the kernel reads through a peer mapping
//               (the one-sided proxy's signal between two GPUs); needs 2 GPUs
// With "ipc" as second argument instead: two processes, one GPU each, each with its own proxy
// thread; put + signal -> wait as libmscclpp's proxy does it, without zinc (half round trip).
// PROBE_BLOCKING=1 makes the main thread wait with cudaDeviceScheduleBlockingSync; in ipc mode
// PROBE_LEGACY=1 launches as msc-perf does (legacy stream, 1024 threads, events) and
// PROBE_KCOPY=1 has the proxy store the signal with a kernel on its stream, PROBE_SIGNAL picks
// how the proxy signals (see proxy2).
#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#define CK(x)                                                                     \
    do {                                                                          \
        cudaError_t e_ = (x);                                                     \
        if (e_ != cudaSuccess) {                                                  \
            fprintf(stderr, "proxy_probe: %s: %s\n", #x, cudaGetErrorString(e_)); \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

__device__ __forceinline__ uint64_t load_acquire(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

// req: pinned host word the kernel writes; ans: the word it waits on (host or device memory);
// src: device word holding the value for d2d copies (the kernel writes it before the request).
__global__ void pingKernel(uint64_t *req, const uint64_t *ans, uint64_t *src, int iters,
                           unsigned long long *ns)
{
    uint64_t t0, t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (uint64_t i = 1; i <= (uint64_t)iters; i++) {
        if (src) *(volatile uint64_t *)src = i;
        __threadfence_system();
        *(volatile uint64_t *)req = i;
        uint64_t spins = 0;
        while (load_acquire(ans) < i)
            if (++spins > (1ull << 34)) return;
    }
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    *ns = t1 - t0;
}

enum { HOST, CE_H2D, CE_D2D, CE_PEER, NMODES, K_COPY };

__global__ void storeKernel(uint64_t *dst, const uint64_t *src)
{
    *(volatile uint64_t *)dst = *(volatile const uint64_t *)src;
}
static const char *names[] = { "host", "ce-h2d", "ce-d2d", "ce-peer" };

// The proxy thread: answer request i as the mode says. dev selects the thread's GPU.
static void proxy(int dev, int mode, volatile uint64_t *req, uint64_t *ans_host, uint64_t *ans_dev,
                  uint64_t *src_host, uint64_t *src_dev, cudaStream_t s, int iters,
                  std::atomic<int> *quit)
{
    CK(cudaSetDevice(dev));
    for (uint64_t i = 1; i <= (uint64_t)iters; i++) {
        while (*req < i)
            if (quit->load(std::memory_order_relaxed)) return;
        if (mode == HOST) {
            __atomic_store_n(ans_host, i, __ATOMIC_RELEASE);
        } else if (mode == CE_H2D) {
            *src_host = i;
            CK(cudaMemcpyAsync(ans_dev, src_host, 8, cudaMemcpyHostToDevice, s));
        } else if (mode == K_COPY) {
            storeKernel<<<1, 1, 0, s>>>(ans_dev, src_dev);
            CK(cudaGetLastError());
        } else {
            CK(cudaMemcpyAsync(ans_dev, src_dev, 8, cudaMemcpyDeviceToDevice, s));
        }
    }
}

// The two-process proxy: a data copy of 8 bytes (when the variant has one) and the signal,
// each way PROBE_SIGNAL names: copy (device to device, the default), h2d (from a pinned host
// counter), wv (cuStreamWriteValue64 of the host counter); "data+" in front adds the data copy.
static void proxy2(int dev, const char *variant, volatile uint64_t *req, uint64_t *flag_peer,
                   uint64_t *src_dev, uint64_t *data_peer, uint64_t *data_dev, uint64_t *counter,
                   cudaStream_t s, int iters, std::atomic<int> *quit)
{
    CK(cudaSetDevice(dev));
    int data = strncmp(variant, "data+", 5) == 0;
    const char *sig = data ? variant + 5 : variant;
    for (uint64_t i = 1; i <= (uint64_t)iters; i++) {
        while (*req < i)
            if (quit->load(std::memory_order_relaxed)) return;
        if (data) CK(cudaMemcpyAsync(data_peer, data_dev, 8, cudaMemcpyDeviceToDevice, s));
        if (!strcmp(sig, "h2d")) {
            *counter = i;
            CK(cudaMemcpyAsync(flag_peer, counter, 8, cudaMemcpyHostToDevice, s));
        } else if (!strcmp(sig, "wv")) {
            if (cuStreamWriteValue64(s, (CUdeviceptr)flag_peer, i, 0) != CUDA_SUCCESS) {
                fprintf(stderr, "proxy_probe: cuStreamWriteValue64 failed\n");
                exit(1);
            }
        } else {
            CK(cudaMemcpyAsync(flag_peer, src_dev, 8, cudaMemcpyDeviceToDevice, s));
        }
    }
}

// Rank r of the two-process ping-pong: rank 0 signals then waits, rank 1 waits then signals.
__global__ void pongKernel(int rank, uint64_t *req, const uint64_t *flag, uint64_t *src, int iters,
                           unsigned long long *ns)
{
    uint64_t t0, t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (uint64_t i = 1; i <= (uint64_t)iters; i++) {
        uint64_t spins = 0;
        if (rank == 1 && threadIdx.x == 0)
            while (load_acquire(flag) < i)
                if (++spins > (1ull << 34)) return;
        __syncthreads();
        if (threadIdx.x == 0) {
            *(volatile uint64_t *)src = i;
            __threadfence_system();
            *(volatile uint64_t *)req = i;
        }
        if (rank == 0 && threadIdx.x == 0)
            while (load_acquire(flag) < i)
                if (++spins > (1ull << 34)) return;
        __syncthreads();
    }
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    *ns = t1 - t0;
}

// Two processes, one GPU each, the flag words exchanged through CUDA IPC: the one-sided
// proxy's put + signal -> wait without zinc.
static int two_process(int iters)
{
    int up[2], down[2];
    if (pipe(up) || pipe(down)) return 1;
    pid_t pid = fork();
    int rank = pid == 0 ? 1 : 0;
    CK(cudaSetDevice(rank));
    uint64_t *host, *dev;
    CK(cudaHostAlloc(&host, 4096, cudaHostAllocMapped | cudaHostAllocPortable));
    memset(host, 0, 4096);
    CK(cudaMalloc(&dev, 4096));
    CK(cudaMemset(dev, 0, 4096));
    CK(cudaDeviceSynchronize());
    cudaIpcMemHandle_t mine, theirs;
    CK(cudaIpcGetMemHandle(&mine, dev));
    int wr = rank ? up[1] : down[1], rd = rank ? down[0] : up[0];
    if (write(wr, &mine, sizeof(mine)) != sizeof(mine) ||
        read(rd, &theirs, sizeof(theirs)) != sizeof(theirs))
        return 1;
    uint64_t *peer;
    CK(cudaIpcOpenMemHandle((void **)&peer, theirs, cudaIpcMemLazyEnablePeerAccess));
    unsigned long long *ns;
    CK(cudaMalloc(&ns, sizeof(*ns)));
    cudaStream_t ks, ps;
    CK(cudaStreamCreateWithFlags(&ks, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&ps, cudaStreamNonBlocking));
    char go = 0;
    if (write(wr, &go, 1) != 1 || read(rd, &go, 1) != 1) return 1;
    std::atomic<int> quit{ 0 };
    // The flag this rank waits on is dev[0]; the proxy copies src (dev[64]) into the peer's.
    // PROBE_LEGACY=1: the kernel on the legacy default stream with 1024 threads, timed with
    // events, as msc-perf does; PROBE_KCOPY=1: the proxy stores the signal with a kernel.
    int legacy = getenv("PROBE_LEGACY") != nullptr;
    const char *variant = getenv("PROBE_SIGNAL") ? getenv("PROBE_SIGNAL") : "copy";
    std::thread t =
        getenv("PROBE_KCOPY")
            ? std::thread(proxy, rank, K_COPY, (volatile uint64_t *)host, nullptr, peer, nullptr,
                          dev + 64, ps, iters, &quit)
            : std::thread(proxy2, rank, variant, (volatile uint64_t *)host, peer, dev + 64,
                          peer + 128, dev + 128, host + 256, ps, iters, &quit);
    if (legacy) {
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        CK(cudaEventRecord(e0));
        pongKernel<<<1, 1024>>>(rank, host, dev, dev + 64, iters, ns);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
    } else {
        pongKernel<<<1, 1, 0, ks>>>(rank, host, dev, dev + 64, iters, ns);
    }
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(ks));
    quit = 1;
    t.join();
    CK(cudaStreamSynchronize(ps));
    unsigned long long kns = 0;
    CK(cudaMemcpy(&kns, ns, sizeof(kns), cudaMemcpyDeviceToHost));
    if (rank == 0) {
        printf("%-12s %9.2f us per half round trip (two processes, IPC, %s, %s)\n", "ipc-2proc",
               kns / 2e3 / iters, getenv("PROBE_KCOPY") ? "store kernel" : variant,
               legacy ? "legacy stream, 1024 threads" : "own stream, 1 thread");
        int st = 0;
        waitpid(pid, &st, 0);
    }
    CK(cudaIpcCloseMemHandle(peer));
    return 0;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 2000;
    if (argc > 2 && !strcmp(argv[2], "ipc")) return two_process(iters);
    int ndev = 0;
    CK(cudaGetDeviceCount(&ndev));
    if (getenv("PROBE_BLOCKING")) CK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
    uint64_t *peer = nullptr;
    if (ndev > 1) {
        CK(cudaSetDevice(1));
        CK(cudaMalloc(&peer, 4096));
    }
    CK(cudaSetDevice(0));
    if (ndev > 1) CK(cudaDeviceEnablePeerAccess(1, 0));
    uint64_t *host, *dev;
    CK(cudaHostAlloc(&host, 4096, cudaHostAllocMapped | cudaHostAllocPortable));
    CK(cudaMalloc(&dev, 4096));
    unsigned long long *ns;
    CK(cudaMalloc(&ns, sizeof(*ns)));
    cudaStream_t ks, ps;
    CK(cudaStreamCreateWithFlags(&ks, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&ps, cudaStreamNonBlocking));
    printf("proxy_probe: %d GPUs, %d round trips per mode, main thread %s\n", ndev, iters,
           getenv("PROBE_BLOCKING") ? "blocking-sync" : "spinning");
    for (int mode = 0; mode < NMODES; mode++) {
        if (mode == CE_PEER && ndev < 2) continue;
        memset(host, 0, 4096);
        CK(cudaMemset(dev, 0, 4096));
        if (peer) CK(cudaMemset(peer, 0, 4096));
        uint64_t *req = host, *ans_host = host + 64, *src_host = host + 128;
        uint64_t *ans_dev = mode == CE_PEER ? peer : dev, *src_dev = dev + 64;
        const uint64_t *ans = mode == HOST ? ans_host : ans_dev;
        CK(cudaDeviceSynchronize());
        std::atomic<int> quit{ 0 };
        std::thread t(proxy, 0, mode, (volatile uint64_t *)req, ans_host, ans_dev, src_host,
                      mode >= CE_D2D ? src_dev : nullptr, ps, iters, &quit);
        auto w0 = std::chrono::steady_clock::now();
        pingKernel<<<1, 1, 0, ks>>>(req, ans, mode >= CE_D2D ? src_dev : nullptr, iters, ns);
        CK(cudaGetLastError());
        CK(cudaStreamSynchronize(ks));
        auto w1 = std::chrono::steady_clock::now();
        quit = 1;
        t.join();
        CK(cudaStreamSynchronize(ps));
        unsigned long long kns = 0;
        CK(cudaMemcpy(&kns, ns, sizeof(kns), cudaMemcpyDeviceToHost));
        double wall = std::chrono::duration<double, std::micro>(w1 - w0).count();
        printf("%-12s %9.2f us per round trip (kernel clock), %9.2f us (wall, with launch)\n",
               names[mode], kns / 1e3 / iters, wall / iters);
        fflush(stdout);
    }
    return 0;
}
