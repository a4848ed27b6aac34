/*
 * nccl_device/ptr.h -- ncclSymPtr<T>: a window and a byte offset in it, the same offset in
 * every rank's buffer of a symmetric window. Arithmetic moves the offset by whole elements;
 * localPtr / lsaPtr / peerPtr turn it into an address this GPU can use.
 */
#ifndef ZINC_NCCL_DEVICE_PTR_H_
#define ZINC_NCCL_DEVICE_PTR_H_
#include "core.h"

#include <stddef.h>
#include <stdint.h>

#if __cplusplus
template <typename T> struct ncclSymPtr {
    using ElementType = T;
    ncclWindow_t window;
    size_t offset;

    NCCL_HOST_DEVICE_INLINE constexpr ncclSymPtr(ncclWindow_t window = nullptr, size_t offset = 0)
        : window(window), offset(offset)
    {
    }

    template <typename U> NCCL_HOST_DEVICE_INLINE operator ncclSymPtr<U>() const
    {
        return ncclSymPtr<U>(window, offset);
    }

#define ZINC_SYMPTR_STEP(Int)                                                     \
    NCCL_HOST_DEVICE_INLINE ncclSymPtr<T> &operator+=(Int d)                      \
    {                                                                             \
        offset = size_t((long long)offset + (long long)d * (long long)sizeof(T)); \
        return *this;                                                             \
    }                                                                             \
    NCCL_HOST_DEVICE_INLINE ncclSymPtr<T> &operator-=(Int d)                      \
    {                                                                             \
        offset = size_t((long long)offset - (long long)d * (long long)sizeof(T)); \
        return *this;                                                             \
    }
    ZINC_SYMPTR_STEP(int)
    ZINC_SYMPTR_STEP(unsigned int)
    ZINC_SYMPTR_STEP(long)
    ZINC_SYMPTR_STEP(unsigned long)
    ZINC_SYMPTR_STEP(long long)
    ZINC_SYMPTR_STEP(unsigned long long)
#undef ZINC_SYMPTR_STEP

#if __CUDACC__
    NCCL_DEVICE_INLINE T *localPtr() const
    {
        return (T *)ncclGetLocalPointer(window, offset);
    }
    NCCL_DEVICE_INLINE T *lsaPtr(int peer) const
    {
        return (T *)ncclGetLsaPointer(window, offset, peer);
    }
    NCCL_DEVICE_INLINE T *peerPtr(int peer) const
    {
        return (T *)ncclGetPeerPointer(window, offset, peer);
    }
    NCCL_DEVICE_INLINE T *peerPtr(ncclTeam team, int peer) const
    {
        return (T *)ncclGetPeerPointer(window, offset, team, peer);
    }
    NCCL_DEVICE_INLINE T *multimemPtr(ncclMultimemHandle mm) const
    {
        return (T *)ncclGetMultimemPointer(window, offset, mm);
    }
    NCCL_DEVICE_INLINE T *lsaMultimemPtr(ncclDevComm const &comm) const
    {
        return (T *)ncclGetLsaMultimemPointer(window, offset, comm);
    }
#endif
};

template <typename T, typename Int>
NCCL_HOST_DEVICE_INLINE ncclSymPtr<T> operator+(ncclSymPtr<T> p, Int d)
{
    return p += d;
}

template <typename T, typename Int>
NCCL_HOST_DEVICE_INLINE ncclSymPtr<T> operator-(ncclSymPtr<T> p, Int d)
{
    return p -= d;
}

/* Elements between two pointers into the same window. */
template <typename T> NCCL_HOST_DEVICE_INLINE ptrdiff_t operator-(ncclSymPtr<T> a, ncclSymPtr<T> b)
{
    return ((ptrdiff_t)a.offset - (ptrdiff_t)b.offset) / (ptrdiff_t)sizeof(T);
}

template <typename T> NCCL_HOST_DEVICE_INLINE bool operator==(ncclSymPtr<T> a, ncclSymPtr<T> b)
{
    return a.window == b.window && a.offset == b.offset;
}

template <typename T> NCCL_HOST_DEVICE_INLINE bool operator!=(ncclSymPtr<T> a, ncclSymPtr<T> b)
{
    return !(a == b);
}

#if __CUDACC__
/* A resource buffer as a symmetric pointer into the resource window. */
NCCL_DEVICE_INLINE ncclSymPtr<char> ncclGetResourceBuffer(ncclDevComm const &comm,
                                                          ncclDevResourceHandle h)
{
    return ncclSymPtr<char>(comm.resourceWindow, ncclGetResourceBufferOffset(h));
}
#endif
#endif /* __cplusplus */

#endif
