/*
 * nccl_device/coop.h -- cooperative groups of NCCL 2.30's device API, as zinc implements them.
 *
 * A "coop" names the threads that call a device-API function together: one thread, an aligned
 * power-of-two tile of a warp, any set of lanes of one warp, a span of whole warps, or the
 * whole block. Every coop has thread_rank(), size() (= num_threads()) and sync().
 */
#ifndef ZINC_NCCL_DEVICE_COOP_H_
#define ZINC_NCCL_DEVICE_COOP_H_
#include "utility.h"

#if __CUDACC__
#include <new>
#endif

#if __CUDACC__
/* nThreads consecutive lanes, starting at a multiple of nThreads. */
template <int nThreadsPow2> struct ncclCoopTile {
    static_assert(nccl::utility::isPow2(nThreadsPow2) && nThreadsPow2 <= 32,
                  "a tile is a power of two of at most 32 threads");
    NCCL_DEVICE_INLINE int thread_rank() const
    {
        return nccl::utility::lane() & (nThreadsPow2 - 1);
    }
    NCCL_DEVICE_INLINE constexpr int size() const
    {
        return nThreadsPow2;
    }
    NCCL_DEVICE_INLINE constexpr int num_threads() const
    {
        return nThreadsPow2;
    }
    NCCL_DEVICE_INLINE uint32_t laneMask() const
    {
        uint32_t ones = nThreadsPow2 == 32 ? 0xffffffffu : ((1u << nThreadsPow2) - 1);
        return ones << (nccl::utility::lane() & ~(nThreadsPow2 - 1));
    }
    NCCL_DEVICE_INLINE void sync()
    {
        if (nThreadsPow2 > 1) __syncwarp(laneMask());
    }
};

typedef ncclCoopTile<1> ncclCoopThread;
typedef ncclCoopTile<32> ncclCoopWarp;

/* Any lanes of one warp, given by mask. */
struct ncclCoopLanes {
    uint32_t lmask;
    NCCL_DEVICE_INLINE constexpr ncclCoopLanes(uint32_t lmask = 0xffffffffu) : lmask(lmask) {}
    NCCL_DEVICE_INLINE int thread_rank() const
    {
        return __popc(lmask & nccl::utility::lanemask_lt());
    }
    NCCL_DEVICE_INLINE int size() const
    {
        return __popc(lmask);
    }
    NCCL_DEVICE_INLINE int num_threads() const
    {
        return __popc(lmask);
    }
    NCCL_DEVICE_INLINE void sync()
    {
        __syncwarp(lmask);
    }
};

/* nWarps whole warps from warp0 of the block; id picks the named barrier (1 + id) they sync
 * on, so that several spans of one block sync independently. */
struct ncclCoopWarpSpan {
    uint32_t warp0 : 8, nWarps : 8, id : 8;
    NCCL_DEVICE_INLINE constexpr ncclCoopWarpSpan(int warp0, int nWarps, int id)
        : warp0(warp0), nWarps(nWarps), id(id)
    {
    }
    NCCL_DEVICE_INLINE int thread_rank() const
    {
        return (int)threadIdx.x - 32 * (int)warp0;
    }
    NCCL_DEVICE_INLINE int size() const
    {
        return 32 * (int)nWarps;
    }
    NCCL_DEVICE_INLINE int num_threads() const
    {
        return 32 * (int)nWarps;
    }
    NCCL_DEVICE_INLINE void sync()
    {
        asm volatile("bar.sync %0, %1;" ::"r"(1 + (int)id), "r"(32 * (int)nWarps) : "memory");
    }
};

/* The whole thread block (one-dimensional blocks). */
struct ncclCoopCta {
    NCCL_DEVICE_INLINE int thread_rank() const
    {
        return (int)threadIdx.x;
    }
    NCCL_DEVICE_INLINE int size() const
    {
        return (int)blockDim.x;
    }
    NCCL_DEVICE_INLINE int num_threads() const
    {
        return (int)blockDim.x;
    }
    NCCL_DEVICE_INLINE void sync()
    {
        __syncthreads();
    }
};

/* The lanes of the calling warp that belong to the coop (all of them for coops wider than a
 * warp). */
template <int n> NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopTile<n> coop)
{
    return coop.laneMask();
}
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopLanes coop)
{
    return coop.lmask;
}
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopWarpSpan)
{
    return 0xffffffffu;
}
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopCta)
{
    return 0xffffffffu;
}

template <int n> NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopTile<n>)
{
    return n == 1;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopLanes)
{
    return false;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopWarpSpan)
{
    return false;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopCta)
{
    return false;
}

template <int n> NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopTile<n>)
{
    return true;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopLanes)
{
    return true;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopWarpSpan)
{
    return false;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopCta)
{
    return false;
}

/* The threads of the calling warp that are active now. */
NCCL_DEVICE_INLINE ncclCoopLanes ncclCoopCoalesced()
{
    return ncclCoopLanes(__activemask());
}

/* The part of coop inside the calling warp: the coop itself when it fits in a warp, else the
 * whole warp. */
template <typename Coop> NCCL_DEVICE_INLINE ncclCoopTile<32> ncclCoopCoalesced(Coop)
{
    return ncclCoopTile<32>();
}
NCCL_DEVICE_INLINE ncclCoopLanes ncclCoopCoalesced(ncclCoopLanes coop)
{
    return coop;
}
template <int n> NCCL_DEVICE_INLINE ncclCoopTile<n> ncclCoopCoalesced(ncclCoopTile<n> coop)
{
    return coop;
}

/* Any coop behind one type, for the C-callable functions (ncclGinPut ...): the coop's value
 * in 16 bytes and a table of its three operations. */
struct ncclCoopAny {
    struct Storage {
        alignas(alignof(void *)) char space[16];
    };
    struct VTable {
        int (*thread_rank)(void const *);
        int (*size)(void const *);
        void (*sync)(void *);
    };

    template <typename Impl> __device__ static int thread_rank_of(void const *o)
    {
        return static_cast<Impl const *>(o)->thread_rank();
    }
    template <typename Impl> __device__ static int size_of(void const *o)
    {
        return static_cast<Impl const *>(o)->size();
    }
    template <typename Impl> __device__ static void sync_of(void *o)
    {
        static_cast<Impl *>(o)->sync();
    }
    template <typename Impl> __device__ static VTable const *vtable_of()
    {
        static_assert(sizeof(Impl) <= sizeof(Storage), "a coop of at most 16 bytes");
        static_assert(alignof(Impl) <= alignof(Storage), "a coop aligned like a pointer");
        static constexpr VTable v = { &thread_rank_of<Impl>, &size_of<Impl>, &sync_of<Impl> };
        return &v;
    }

    Storage storage;
    VTable const *vtable;

    ncclCoopAny() = default;
    ncclCoopAny(ncclCoopAny const &) = default;
    ncclCoopAny(ncclCoopAny &&) = default;
    template <typename Impl> __device__ ncclCoopAny(Impl impl)
    {
        ::new (&this->storage) Impl(impl);
        this->vtable = vtable_of<Impl>();
    }

    __device__ int thread_rank() const
    {
        return vtable->thread_rank(&storage);
    }
    __device__ int size() const
    {
        return vtable->size(&storage);
    }
    __device__ int num_threads() const
    {
        return vtable->size(&storage);
    }
    __device__ void sync()
    {
        vtable->sync(&storage);
    }
};

/* Whether flag is set in any thread of the coop, returned to every thread (and a sync of the
 * coop): timed waits use it so that a whole coop sees one result. */
template <int n> NCCL_DEVICE_INLINE bool zincCoopAny(ncclCoopTile<n> coop, bool flag)
{
    return __any_sync(coop.laneMask(), flag) != 0;
}
NCCL_DEVICE_INLINE bool zincCoopAny(ncclCoopLanes coop, bool flag)
{
    return __any_sync(coop.lmask, flag) != 0;
}
NCCL_DEVICE_INLINE bool zincCoopAny(ncclCoopWarpSpan coop, bool flag)
{
    unsigned int any;
    asm volatile("{ .reg .pred p, q;\n\t"
                 "setp.ne.u32 p, %1, 0;\n\t"
                 "bar.red.or.pred q, %2, %3, p;\n\t"
                 "selp.u32 %0, 1, 0, q; }"
                 : "=r"(any)
                 : "r"((unsigned int)flag), "r"(1 + (int)coop.id), "r"(32 * (int)coop.nWarps)
                 : "memory");
    return any != 0;
}
NCCL_DEVICE_INLINE bool zincCoopAny(ncclCoopCta, bool flag)
{
    return __syncthreads_or(flag) != 0;
}

/* value as the coop's thread of rank root holds it, returned to every thread of the coop. */
template <typename T, typename Shuffle>
NCCL_DEVICE_INLINE T ncclCoopBcast_words(T value, Shuffle shfl)
{
    constexpr int nWords = (int)((sizeof(T) + 3) / 4);
    union {
        uint32_t w[nWords];
        T v;
    } u;
    u.v = value;
#pragma unroll
    for (int i = 0; i < nWords; i++) u.w[i] = shfl(u.w[i]);
    return u.v;
}

template <int n, typename T>
NCCL_DEVICE_INLINE T ncclCoopBcast(ncclCoopTile<n> coop, T value, int root, bool entrySync = true)
{
    uint32_t mask = coop.laneMask();
    return ncclCoopBcast_words(value, [=](uint32_t w) { return __shfl_sync(mask, w, root, n); });
}

template <typename T>
NCCL_DEVICE_INLINE T ncclCoopBcast(ncclCoopLanes coop, T value, int root, bool entrySync = true)
{
    /* The lane of rank root: the (root + 1)-th set bit of the mask. */
    uint32_t m = coop.lmask;
    for (int i = 0; i < root; i++) m &= m - 1;
    int src = __ffs(m) - 1;
    uint32_t mask = coop.lmask;
    return ncclCoopBcast_words(value, [=](uint32_t w) { return __shfl_sync(mask, w, src); });
}

/* Wider coops go through shared memory: one 16-byte cell per warp span id, one for the CTA. */
NCCL_DEVICE_INLINE ulonglong2 *ncclCoopBcast_cell(int which)
{
    __shared__ ulonglong2 zincCoopBcastCells[33];
    return &zincCoopBcastCells[which];
}

template <typename T>
NCCL_DEVICE_INLINE T ncclCoopBcast(ncclCoopWarpSpan coop, T value, int root, bool entrySync = true)
{
    static_assert(sizeof(T) <= 16, "ncclCoopBcast over warps carries at most 16 bytes");
    T *cell = (T *)ncclCoopBcast_cell(1 + (int)coop.id % 32);
    if (entrySync) coop.sync();
    if (coop.thread_rank() == root) *cell = value;
    coop.sync();
    return *cell;
}

template <typename T>
NCCL_DEVICE_INLINE T ncclCoopBcast(ncclCoopCta coop, T value, int root, bool entrySync = true)
{
    static_assert(sizeof(T) <= 16, "ncclCoopBcast over a CTA carries at most 16 bytes");
    T *cell = (T *)ncclCoopBcast_cell(0);
    if (entrySync) coop.sync();
    if (coop.thread_rank() == root) *cell = value;
    coop.sync();
    return *cell;
}
#endif /* __CUDACC__ */

#endif
