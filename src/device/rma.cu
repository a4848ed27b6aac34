/*
 * Kernels of the one-sided operations (dev_abi.h: zn_dev_rma_*; the host side is api/rma_gpu.c
 * through exec/cuda_rma.c).
 *
 * put: one block walks its operations in order: copy an operation's bytes into the peer's
 * window (mapped here), fence at system scope, add 1 to the peer's signal word, then the next
 * operation. One block keeps the program order of a (peer, context) without any cross-block
 * handshake; the host sends large puts through the copy engine instead, so a block only ever
 * copies small ones.
 *
 * wait: thread i watches count i until its word has grown by the count past what this rank
 * consumed, then consumes it. The consumed counts live in device memory and are read when the
 * kernel runs, so replays of a captured graph take up where the last launch stopped.
 *
 * gin: thread 0 queues the block's requests into the GIN engine's FIFO (the protocol of
 * nccl_device/gin_proxy.h: ticket, wait for room, fill, fence, sequence number), then waits
 * until the engine has taken the last one, which is when it has read every source.
 *
 * Every wait watches the communicator's abort flag, the GIN engine's error word and the
 * deadline, and gives up by writing its reason into the error word (zn_cuda_failure).
 */
#include "abi/dev_abi.h"

#include <cuda_runtime.h>

namespace zn
{
namespace rma
{

__device__ __forceinline__ uint64_t now_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* The reason to stop waiting, or 0 (t0: when the wait started). */
__device__ __forceinline__ uint32_t stop_reason(const zn_dev_rma_watch &w, uint64_t t0)
{
    if (*w.abort_flag) return ZN_DEV_ABORTED;
    if (w.gin_error && *w.gin_error) return ZN_DEV_PEER_GONE;
    if (now_ns() - t0 > w.timeout_ns) return ZN_DEV_TIMEOUT;
    return 0;
}

__device__ __forceinline__ void give_up(const zn_dev_rma_watch &w, uint32_t code)
{
    if (*(volatile uint32_t *)w.error == 0) *(volatile uint32_t *)w.error = code;
    __threadfence_system();
}

/* Copy n bytes with the widest unit that src, dst and n all allow. */
template <typename T>
__device__ __forceinline__ void copy_as(void *dst, const void *src, uint64_t n)
{
    T *d = (T *)dst;
    const T *s = (const T *)src;
    uint64_t m = n / sizeof(T);
    for (uint64_t i = threadIdx.x; i < m; i += blockDim.x) d[i] = s[i];
}

__device__ __forceinline__ void copy(void *dst, const void *src, uint64_t n)
{
    uint64_t a = (uint64_t)(uintptr_t)dst | (uint64_t)(uintptr_t)src | n;
    if (a % 16 == 0)
        copy_as<uint4>(dst, src, n);
    else if (a % 8 == 0)
        copy_as<uint64_t>(dst, src, n);
    else if (a % 4 == 0)
        copy_as<uint32_t>(dst, src, n);
    else
        copy_as<uint8_t>(dst, src, n);
}

template <int N> struct PutArgs {
    int32_t nops, pad;
    zn_dev_rma_put ops[N];
};
static_assert(sizeof(PutArgs<ZN_DEV_RMA_MAX_OPS>) == sizeof(zn_dev_rma_put_args), "same layout");

/* The data of every thread reaches the peer before thread 0's signal: each thread fences its
 * own stores at system scope, the barrier orders them before the signal. */
template <int N> __global__ void __launch_bounds__(ZN_DEV_THREADS) put_kernel(PutArgs<N> a)
{
    for (int i = 0; i < a.nops; i++) {
        const zn_dev_rma_put &op = a.ops[i];
        if (op.bytes) {
            copy(op.dst, op.src, op.bytes);
            __threadfence_system();
        }
        __syncthreads();
        if (threadIdx.x == 0 && op.sig) {
            atomicAdd_system((unsigned long long *)op.sig, 1ull);
            __threadfence_system();
        }
        __syncthreads();
    }
}

template <int N> struct WaitArgs {
    zn_dev_rma_watch watch;
    int32_t n, pad;
    zn_dev_rma_wait w[N];
};
static_assert(sizeof(WaitArgs<ZN_DEV_RMA_MAX_WAIT>) == sizeof(zn_dev_rma_wait_args), "same layout");

template <int N> __global__ void wait_kernel(WaitArgs<N> a)
{
    int i = threadIdx.x;
    if (i < a.n) {
        const zn_dev_rma_wait &w = a.w[i];
        uint64_t want = *w.consumed + w.count, t0 = 0;
        for (unsigned k = 1; *w.word < want; k++) {
            if ((k & 1023) == 0) {
                if (!t0) t0 = now_ns();
                uint32_t code = stop_reason(a.watch, t0);
                if (code) {
                    give_up(a.watch, code);
                    return;
                }
            }
        }
        __threadfence_system(); /* the data the signals announce is read after them */
        *w.consumed = want;
    }
}

template <int N> struct GinArgs {
    zn_dev_gin gin;
    zn_dev_rma_watch watch;
    int32_t nreqs, pad;
    zn_dev_gin_req reqs[N];
};
static_assert(sizeof(GinArgs<ZN_DEV_RMA_MAX_OPS>) == sizeof(zn_dev_rma_gin_args), "same layout");

/* Spin until *p >= v; false (reason written) if the wait had to stop. */
__device__ bool wait_ge(const zn_dev_rma_watch &w, const volatile uint64_t *p, uint64_t v)
{
    uint64_t t0 = 0;
    for (unsigned k = 1; *p < v; k++) {
        if ((k & 1023) == 0) {
            if (!t0) t0 = now_ns();
            uint32_t code = stop_reason(w, t0);
            if (code) {
                give_up(w, code);
                return false;
            }
        }
    }
    return true;
}

template <int N> __global__ void gin_kernel(GinArgs<N> a)
{
    if (threadIdx.x != 0) return;
    const zn_dev_gin &g = a.gin;
    uint64_t last = 0;
    for (int i = 0; i < a.nreqs; i++) {
        uint64_t t = atomicAdd((unsigned long long *)g.head, 1ull);
        /* Room: the engine has taken the request that used this slot last round. */
        if (t >= g.nslots && !wait_ge(a.watch, g.tail, t - g.nslots + 1)) return;
        zn_dev_gin_req *s = &g.slots[t % g.nslots];
        const zn_dev_gin_req &r = a.reqs[i];
        volatile uint64_t *d = (volatile uint64_t *)s;
        const uint64_t *src = (const uint64_t *)&r;
        for (int k = 1; k < (int)(sizeof(r) / 8); k++) d[k] = src[k];
        __threadfence_system();
        d[0] = t + 1; /* seq: the engine reads the slot once it names this ticket */
        __threadfence_system();
        last = t + 1;
    }
    if (last) wait_ge(a.watch, g.tail, last);
}

} // namespace rma
} // namespace zn

/* Small launches take a short copy of the arguments: the parameters travel with every launch
 * (device/sendrecv.cu measured what a 12.5 KB block costs). */
constexpr int FEW = 2;

extern "C" int zn_dev_launch_rma_put(const struct zn_dev_rma_put_args *a, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    int threads = ZN_DEV_THREADS;
    if (a->nops <= FEW) {
        zn::rma::PutArgs<FEW> k;
        k.nops = a->nops;
        k.pad = 0;
        uint64_t most = 0;
        for (int i = 0; i < a->nops; i++) {
            k.ops[i] = a->ops[i];
            if (a->ops[i].bytes > most) most = a->ops[i].bytes;
        }
        /* A signal alone or a few bytes: one warp is enough. */
        if (most <= 512) threads = 32;
        zn::rma::put_kernel<FEW><<<1, threads, 0, s>>>(k);
    } else {
        zn::rma::put_kernel<ZN_DEV_RMA_MAX_OPS>
            <<<1, threads, 0, s>>>(*(const zn::rma::PutArgs<ZN_DEV_RMA_MAX_OPS> *)a);
    }
    return (int)cudaGetLastError();
}

extern "C" int zn_dev_launch_rma_wait(const struct zn_dev_rma_wait_args *a, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (a->n <= FEW) {
        zn::rma::WaitArgs<FEW> k;
        k.watch = a->watch;
        k.n = a->n;
        k.pad = 0;
        for (int i = 0; i < a->n; i++) k.w[i] = a->w[i];
        zn::rma::wait_kernel<FEW><<<1, 32, 0, s>>>(k);
    } else {
        zn::rma::wait_kernel<ZN_DEV_RMA_MAX_WAIT>
            <<<1, ZN_DEV_RMA_MAX_WAIT, 0, s>>>(*(const zn::rma::WaitArgs<ZN_DEV_RMA_MAX_WAIT> *)a);
    }
    return (int)cudaGetLastError();
}

extern "C" int zn_dev_launch_rma_gin(const struct zn_dev_rma_gin_args *a, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (a->nreqs <= FEW) {
        zn::rma::GinArgs<FEW> k;
        k.gin = a->gin;
        k.watch = a->watch;
        k.nreqs = a->nreqs;
        k.pad = 0;
        for (int i = 0; i < a->nreqs; i++) k.reqs[i] = a->reqs[i];
        zn::rma::gin_kernel<FEW><<<1, 32, 0, s>>>(k);
    } else {
        zn::rma::gin_kernel<ZN_DEV_RMA_MAX_OPS>
            <<<1, 32, 0, s>>>(*(const zn::rma::GinArgs<ZN_DEV_RMA_MAX_OPS> *)a);
    }
    return (int)cudaGetLastError();
}
