/*
 * nccl_device/ll_a2a.h -- an all-to-all among an LSA team with the LL protocol: every 8 bytes
 * of payload travel in a 16-byte line with a 32-bit flag beside each 32-bit half, stored by the
 * sender straight into the receiver's buffer; the receiver polls until both flags equal the
 * current epoch, so no separate signal or fence is needed.
 *
 * Resource buffer (ncclLLA2ACreateRequirement(nBlocks, nSlots)), per block b:
 *
 *   line 0                      x: the last epoch a session of block b ended with
 *   lines 1 .. nSlots           slots of odd epochs
 *   lines 1 + nSlots .. 2nSlots slots of even epochs
 *
 * Element elt of a session made with maxElts uses slot elt + u * maxElts for its u-th 8 bytes
 * (ncclLLA2ACalcSlots gives how many slots that needs). Two halves alternate by epoch: a peer
 * can be at most one epoch ahead (endEpoch needs a message from every peer), so it never
 * writes a slot that is still to be read.
 */
#ifndef ZINC_NCCL_DEVICE_LL_A2A_H_
#define ZINC_NCCL_DEVICE_LL_A2A_H_
#include "core.h"

NCCL_EXTERN_C __host__ int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
NCCL_EXTERN_C __host__ ncclResult_t ncclLLA2ACreateRequirement(
    int nBlocks, int nSlots, ncclLLA2AHandle_t *outHandle, ncclDevResourceRequirements_t *outReq);

#if __CUDACC__
template <typename Coop> struct ncclLLA2ASession_internal {
    Coop coop;
    ncclDevComm const &comm;
    ncclTeam team;
    ncclLLA2AHandle handle;
    int block;
    int pitch;
    uint32_t epoch;

    /* First line of block's slots for the current epoch, in the buffer of team member owner
     * (the caller: -1). */
    NCCL_DEVICE_INLINE uint4 *slots(int owner) const
    {
        uint4 *buf = owner < 0 ? (uint4 *)ncclGetResourceBufferLocalPointer(comm, handle.bufHandle)
                               : (uint4 *)ncclGetResourceBufferPeerPointer(comm, handle.bufHandle,
                                                                           team, owner);
        return buf + (size_t)block * (1 + 2 * handle.nSlots) + 1 + (epoch & 1) * handle.nSlots;
    }
    NCCL_DEVICE_INLINE uint4 *header() const
    {
        return (uint4 *)ncclGetResourceBufferLocalPointer(comm, handle.bufHandle) +
               (size_t)block * (1 + 2 * handle.nSlots);
    }
};

/* One 16-byte line in a single access, never torn into smaller ones nor cached. */
NCCL_DEVICE_INLINE void zincLLStore(uint4 *p, uint4 v)
{
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w)
                 : "memory");
}

NCCL_DEVICE_INLINE uint4 zincLLLoad(uint4 const *p)
{
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p)
                 : "memory");
    return v;
}

template <typename T> struct ncclLLA2AWords {
    static constexpr int n = (int)((sizeof(T) + 7) / 8);
    union {
        T v;
        uint32_t w[2 * n];
    };
};

template <typename Coop> struct ncclLLA2ASession : ncclLLA2ASession_internal<Coop> {
    NCCL_DEVICE_INLINE ncclLLA2ASession(Coop coop, ncclDevComm const &comm, ncclTeam team,
                                        ncclLLA2AHandle handle, uint32_t block, int maxElts,
                                        bool multimem = false, ncclMultimemHandle mmHandle = {})
        : ncclLLA2ASession_internal<Coop>{ coop, comm, team, handle, (int)block, maxElts, 0 }
    {
        /* Epochs start at 1: a zeroed buffer holds no valid line. */
        this->epoch = *(volatile uint32_t *)this->header() + 1;
    }

    NCCL_DEVICE_INLINE ~ncclLLA2ASession()
    {
        if (this->coop.thread_rank() == 0) *(volatile uint32_t *)this->header() = this->epoch - 1;
        this->coop.sync();
    }

    ncclLLA2ASession(ncclLLA2ASession const &) = delete;

    template <typename T> NCCL_DEVICE_INLINE void sendTo(uint4 *slot0, int elt, T data)
    {
        ncclLLA2AWords<T> u;
        for (int i = 0; i < 2 * u.n; i++) u.w[i] = 0;
        u.v = data;
#pragma unroll
        for (int k = 0; k < u.n; k++) {
            uint4 line = make_uint4(u.w[2 * k], this->epoch, u.w[2 * k + 1], this->epoch);
            zincLLStore(slot0 + elt + k * this->pitch, line);
        }
    }

    template <typename T> NCCL_DEVICE_INLINE void send(int peer, int slot, T data)
    {
        sendTo(this->slots(peer), slot, data);
    }

    /* To every member of the team, the caller included. */
    template <typename T> NCCL_DEVICE_INLINE void bcast(int slot, T data)
    {
        for (int i = 0; i < this->team.nRanks; i++) {
            int peer = (this->team.rank + i) % this->team.nRanks;
            sendTo(this->slots(peer), slot, data);
        }
    }

    template <typename T> NCCL_DEVICE_INLINE T recvAt(uint4 const *slot0, int elt)
    {
        ncclLLA2AWords<T> u;
#pragma unroll
        for (int k = 0; k < u.n; k++) {
            uint4 line;
            do {
                line = zincLLLoad(slot0 + elt + k * this->pitch);
            } while (line.y != this->epoch || line.w != this->epoch);
            u.w[2 * k] = line.x;
            u.w[2 * k + 1] = line.z;
        }
        return u.v;
    }

    template <typename T> NCCL_DEVICE_INLINE T recv(int slot)
    {
        return recvAt<T>(this->slots(-1), slot);
    }

    /* vals[u] = element eltStart + u * eltStride, for u < eltCount (MinEltCount <= eltCount <=
     * MaxEltCount). */
    template <int MinEltCount, int MaxEltCount, typename T>
    NCCL_DEVICE_INLINE void recvUnrolled(int eltStart, int eltCount, int eltStride,
                                         T (&vals)[MaxEltCount])
    {
        uint4 const *s = this->slots(-1);
#pragma unroll
        for (int u = 0; u < MaxEltCount; u++)
            if (u < MinEltCount || u < eltCount) vals[u] = recvAt<T>(s, eltStart + u * eltStride);
    }

    /* red over eltToAcc(element) of eltCount elements from eltStart, eltStride apart. */
    template <int Unroll, typename Elt, typename EltToAcc, typename Reduce>
    NCCL_DEVICE_INLINE auto recvReduce(int eltStart, int eltCount, int eltStride, EltToAcc eltToAcc,
                                       Reduce red)
        -> decltype(eltToAcc(nccl::utility::declval<Elt>()))
    {
        uint4 const *s = this->slots(-1);
        auto acc = eltToAcc(recvAt<Elt>(s, eltStart));
        for (int i = 1; i < eltCount; i++)
            acc = red(acc, eltToAcc(recvAt<Elt>(s, eltStart + i * eltStride)));
        return acc;
    }

    /* End an all-to-all round. Before it, each member must have sent to every peer and
     * received from every peer at least once in this round. */
    NCCL_DEVICE_INLINE void endEpoch(Coop)
    {
        this->coop.sync();
        this->epoch += 1;
    }
};
#endif /* __CUDACC__ */

#endif
