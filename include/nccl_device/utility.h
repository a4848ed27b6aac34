/*
 * nccl_device/utility.h -- zinc's implementation of NCCL 2.30's device API: the qualifier
 * macros and the small helpers the other device headers build on (namespace nccl::utility).
 *
 * The macros and helper names are those of NCCL 2.30.7's header, because device code written
 * for NCCL uses some of them directly; the bodies are zinc's own.
 */
#ifndef ZINC_NCCL_DEVICE_UTILITY_H_
#define ZINC_NCCL_DEVICE_UTILITY_H_

/* 1 when compiling CUDA code (nvcc or clang), where the device functions exist. */
#ifndef NCCL_CHECK_CUDACC
#ifdef __CUDACC__
#define NCCL_CHECK_CUDACC 1
#else
#define NCCL_CHECK_CUDACC 0
#endif
#endif

#if __CUDACC__
#define NCCL_DEVICE_INLINE      __device__ __forceinline__
#define NCCL_HOST_DEVICE_INLINE __host__ __device__ __forceinline__
#else
#ifndef __host__
#define __host__
#endif
#define NCCL_DEVICE_INLINE
#define NCCL_HOST_DEVICE_INLINE inline __attribute__((always_inline))
#endif

#if defined(__cpp_if_constexpr) && __cpp_if_constexpr >= 201606
#ifndef NCCL_IF_CONSTEXPR
#define NCCL_IF_CONSTEXPR constexpr
#endif
#else
#ifndef NCCL_IF_CONSTEXPR
#define NCCL_IF_CONSTEXPR
#endif
#endif

/* Loop unrolling hints for the loop that follows. */
#define DO_PRAGMA(x)                   _Pragma(#x)
#define NVCC_PRAGMA_UNROLL(trip_count) DO_PRAGMA(unroll trip_count)
#define NVCC_PRAGMA_UNROLL_AUTO        DO_PRAGMA(unroll)
#define NVCC_PRAGMA_UNROLL_DISABLED    NVCC_PRAGMA_UNROLL(1)

#if __cplusplus
#define NCCL_EXTERN_C extern "C"
#else
#define NCCL_EXTERN_C
#endif
/* extern "C" only in NCCL's LLVM bitcode library build, which zinc has not. */
#define NCCL_IR_EXTERN_C

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if __CUDACC__
#include <cuda/atomic>
#endif

#if __cplusplus
namespace nccl
{
namespace utility
{

template <typename T> T &&declval() noexcept;

template <typename X, typename Y, typename Z = decltype(X() + Y())>
NCCL_HOST_DEVICE_INLINE constexpr Z divUp(X x, Y y)
{
    return (x + y - 1) / y;
}

template <typename X, typename Y, typename Z = decltype(X() + Y())>
NCCL_HOST_DEVICE_INLINE constexpr Z roundUp(X x, Y y)
{
    return divUp(x, y) * y;
}

template <typename X, typename Y, typename Z = decltype(X() + Y())>
NCCL_HOST_DEVICE_INLINE constexpr Z roundDown(X x, Y y)
{
    return (x / y) * y;
}

/* a must be a power of two. */
template <typename X, typename Y, typename Z = decltype(X() + Y())>
NCCL_HOST_DEVICE_INLINE constexpr Z alignUp(X x, Y a)
{
    return (x + (a - 1)) & ~Z(a - 1);
}

template <typename X, typename Y, typename Z = decltype(X() + int())>
NCCL_HOST_DEVICE_INLINE constexpr Z alignDown(X x, Y a)
{
    return x & ~Z(a - 1);
}

template <typename T> NCCL_HOST_DEVICE_INLINE T *alignUp(T *x, size_t a)
{
    return (T *)alignUp((uintptr_t)x, a);
}

template <typename T> NCCL_HOST_DEVICE_INLINE T *alignDown(T *x, size_t a)
{
    return (T *)alignDown((uintptr_t)x, a);
}

/* base advanced by delta4G times 4 GiB. */
template <typename T> NCCL_HOST_DEVICE_INLINE T add4G(T base, int delta4G)
{
    return (T)((char *)base + ((int64_t)delta4G << 32));
}

template <typename Int> NCCL_HOST_DEVICE_INLINE constexpr bool isPow2(Int x)
{
    return x > 0 && (x & (x - 1)) == 0;
}

/* a <= b on a circle of 2^nBits values (a counter that wraps stays ordered). */
template <typename Uint>
NCCL_HOST_DEVICE_INLINE bool rollingLessEq(Uint a, Uint b, int nBits = 8 * sizeof(Uint))
{
    Uint mask = nBits >= (int)(8 * sizeof(Uint)) ? Uint(-1) : (Uint(1) << nBits) - 1;
    return Uint((b - a) & mask) <= Uint(mask >> 1);
}

template <typename Uint>
NCCL_HOST_DEVICE_INLINE bool rollingLessThan(Uint a, Uint b, int nBits = 8 * sizeof(Uint))
{
    return a != b && rollingLessEq(a, b, nBits);
}

/* Reciprocals for division by a run-time constant: idivFast32(x, y, idivRcp32(y)) == x / y. */
NCCL_HOST_DEVICE_INLINE constexpr uint32_t idivRcp32(uint32_t y)
{
    return y <= 1 ? 0xffffffffu : uint32_t((uint64_t(1) << 32) / y);
}

NCCL_HOST_DEVICE_INLINE uint32_t mul32hi(uint32_t a, uint32_t b)
{
    return uint32_t((uint64_t(a) * b) >> 32);
}

NCCL_HOST_DEVICE_INLINE void idivmodFast32(uint32_t *quo, uint32_t *rem, uint32_t x, uint32_t y,
                                           uint32_t yrcp)
{
    /* The estimate from the reciprocal is the quotient or one less; fix it up. */
    uint32_t q = y <= 1 ? x : mul32hi(x, yrcp);
    uint32_t r = x - q * y;
    if (y > 1 && r >= y) {
        q += 1;
        r -= y;
    }
    *quo = q;
    *rem = y <= 1 ? 0 : r;
}

NCCL_HOST_DEVICE_INLINE uint32_t idivFast32(uint32_t x, uint32_t y, uint32_t yrcp)
{
    uint32_t q, r;
    idivmodFast32(&q, &r, x, y, yrcp);
    return q;
}

NCCL_HOST_DEVICE_INLINE uint32_t imodFast32(uint32_t x, uint32_t y, uint32_t yrcp)
{
    uint32_t q, r;
    idivmodFast32(&q, &r, x, y, yrcp);
    return r;
}

#if __CUDACC__
/* The acquire half (for loads) and the release half (for stores) of a memory order. */
NCCL_DEVICE_INLINE cuda::memory_order acquireOrderOf(cuda::memory_order ord)
{
    if (ord == cuda::memory_order_release) return cuda::memory_order_relaxed;
    if (ord == cuda::memory_order_acq_rel) return cuda::memory_order_acquire;
    return ord;
}

NCCL_DEVICE_INLINE cuda::memory_order releaseOrderOf(cuda::memory_order ord)
{
    if (ord == cuda::memory_order_acquire) return cuda::memory_order_relaxed;
    if (ord == cuda::memory_order_acq_rel) return cuda::memory_order_release;
    return ord;
}

template <typename T, cuda::thread_scope S>
NCCL_DEVICE_INLINE T atomicLoadAt(T *p, cuda::memory_order ord)
{
    return cuda::atomic_ref<T, S>(*p).load(ord);
}

template <typename T>
NCCL_DEVICE_INLINE T atomicLoad(T *ptr, cuda::memory_order ord, cuda::thread_scope scope)
{
    if (scope == cuda::thread_scope_system)
        return atomicLoadAt<T, cuda::thread_scope_system>(ptr, ord);
    if (scope == cuda::thread_scope_device)
        return atomicLoadAt<T, cuda::thread_scope_device>(ptr, ord);
    if (scope == cuda::thread_scope_block)
        return atomicLoadAt<T, cuda::thread_scope_block>(ptr, ord);
    return atomicLoadAt<T, cuda::thread_scope_thread>(ptr, ord);
}

template <typename T, cuda::thread_scope S>
NCCL_DEVICE_INLINE void atomicStoreAt(T *p, T v, cuda::memory_order ord)
{
    cuda::atomic_ref<T, S>(*p).store(v, ord);
}

template <typename T>
NCCL_DEVICE_INLINE void atomicStore(T *ptr, T val, cuda::memory_order ord, cuda::thread_scope scope)
{
    if (scope == cuda::thread_scope_system)
        atomicStoreAt<T, cuda::thread_scope_system>(ptr, val, ord);
    else if (scope == cuda::thread_scope_device)
        atomicStoreAt<T, cuda::thread_scope_device>(ptr, val, ord);
    else if (scope == cuda::thread_scope_block)
        atomicStoreAt<T, cuda::thread_scope_block>(ptr, val, ord);
    else
        atomicStoreAt<T, cuda::thread_scope_thread>(ptr, val, ord);
}

NCCL_DEVICE_INLINE int lane()
{
    return (int)(threadIdx.x & 31);
}

/* Lanes below the calling one. */
NCCL_DEVICE_INLINE unsigned int lanemask_lt()
{
    unsigned int m;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
    return m;
}

/* A read of memory that does not change while the kernel runs (windows, the device
 * communicator's tables). A plain load: the compiler may cache it, which is the point. */
template <typename T> NCCL_DEVICE_INLINE T loadConst(T const *p)
{
    return *p;
}
#endif

/* Optional<T>: a T that is constructed or not, chosen at run time (barrier sessions have an
 * LSA part, a GIN part, or both). Present<Arg...> carries constructor arguments to it. */
template <int... v> struct IntSeq {
};
template <int n, int m, int... i> struct IntSeqUpTo : IntSeqUpTo<n, m + 1, i..., m> {
};
template <int n, int... i> struct IntSeqUpTo<n, n, i...> {
    using Type = IntSeq<i...>;
};

template <typename... Arg> struct Present;
template <> struct Present<> {
};
template <typename H, typename... T> struct Present<H, T...> {
    H h;
    Present<T...> t;
    NCCL_HOST_DEVICE_INLINE H get(IntSeq<0>) const
    {
        return static_cast<H>(h);
    }
    template <int i> NCCL_HOST_DEVICE_INLINE decltype(auto) get(IntSeq<i>) const
    {
        return t.get(IntSeq<i - 1>{});
    }
};

NCCL_HOST_DEVICE_INLINE Present<> present()
{
    return Present<>{};
}
template <typename H, typename... T>
NCCL_HOST_DEVICE_INLINE Present<H &&, T &&...> present(H &&h, T &&...t)
{
    return Present<H &&, T &&...>{ static_cast<H &&>(h), present(static_cast<T &&>(t)...) };
}

struct Absent {
};

template <typename T> struct Optional {
    bool present;
    union {
        T thing;
    };
    NCCL_HOST_DEVICE_INLINE constexpr Optional() : present(false) {}
    NCCL_HOST_DEVICE_INLINE constexpr Optional(Absent) : present(false) {}
    template <int... i, typename... Arg>
    NCCL_HOST_DEVICE_INLINE Optional(Present<Arg...> const &args, IntSeq<i...>)
        : present(true), thing{ args.get(IntSeq<i>())... }
    {
    }
    template <typename... Arg>
    NCCL_HOST_DEVICE_INLINE Optional(Present<Arg...> const &args)
        : Optional(args, typename IntSeqUpTo<sizeof...(Arg), 0>::Type())
    {
    }
    NCCL_HOST_DEVICE_INLINE ~Optional()
    {
        if (present) thing.~T();
    }
};

} // namespace utility
} // namespace nccl
#endif /* __cplusplus */

#endif
