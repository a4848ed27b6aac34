/*
 * nccl_device/lsa_barrier.h -- barriers among the ranks of an LSA team, by stores into the
 * peers' memory.
 *
 * A barrier set (ncclLsaBarrierCreateRequirement) is a resource buffer in every rank, laid out
 * as
 *
 *   uint32 epoch[nBarriers]                 this rank's count of completed syncs, per barrier
 *   uint32 inbox[nBarriers][team.nRanks]    inbox[b][s]: the epoch rank s last reached on b
 *
 * arrive() stores epoch + 1 into inbox[b][me] of every peer (release); wait() polls its own
 * inbox[b][p] of every peer p until it reaches epoch + 1 (acquire), with a comparison that
 * survives wrap-around. A session keeps the epoch in registers and writes it back when it
 * ends, so that the next session (next kernel) continues from it.
 *
 * The timed wait and sync return ncclTimeout to every thread of the coop when a peer had not
 * arrived within timeoutCycles (clock64). The epoch then stays where it was: the round is
 * still open, and the next wait (or sync, whose arrival stores the same value again) finishes
 * it.
 */
#ifndef ZINC_NCCL_DEVICE_LSA_BARRIER_H_
#define ZINC_NCCL_DEVICE_LSA_BARRIER_H_
#include "core.h"

NCCL_EXTERN_C __host__ ncclResult_t
ncclLsaBarrierCreateRequirement(ncclTeam_t, int nBarriers, ncclLsaBarrierHandle_t *outHandle,
                                ncclDevResourceRequirements_t *outReq);

#if __CUDACC__
template <typename Coop> struct ncclLsaBarrierSession_internal {
    Coop coop;
    ncclDevComm const &comm;
    ncclTeam team;
    ncclLsaBarrierHandle handle;
    int index;
    uint32_t epoch;

    NCCL_DEVICE_INLINE uint32_t *epochWord() const
    {
        return (uint32_t *)ncclGetResourceBufferLocalPointer(comm, handle.bufHandle) + index;
    }
    /* inbox[index][sender] of the buffer of team member owner. */
    NCCL_DEVICE_INLINE uint32_t *inbox(int owner, int sender) const
    {
        uint32_t *buf =
            (uint32_t *)ncclGetResourceBufferPeerPointer(comm, handle.bufHandle, team, owner);
        return buf + handle.nBarriers + index * team.nRanks + sender;
    }
};

template <typename Coop> struct ncclLsaBarrierSession : ncclLsaBarrierSession_internal<Coop> {
    /* multimem: zinc has no multicast; a session asked for it runs the unicast protocol. */
    NCCL_DEVICE_INLINE ncclLsaBarrierSession(Coop coop, ncclDevComm const &comm, ncclTeam team,
                                             ncclLsaBarrierHandle handle, uint32_t index,
                                             bool multimem = false,
                                             ncclMultimemHandle mmHandle = {})
        : ncclLsaBarrierSession_internal<Coop>{ coop, comm, team, handle, (int)index, 0 }
    {
        this->epoch = *(volatile uint32_t *)this->epochWord();
    }

    NCCL_DEVICE_INLINE ncclLsaBarrierSession(Coop coop, ncclDevComm const &comm, ncclTeamTagLsa,
                                             uint32_t index, bool multimem = false)
        : ncclLsaBarrierSession(coop, comm, ncclTeamLsa(comm), comm.lsaBarrier, index, multimem,
                                comm.lsaMultimem)
    {
    }

    NCCL_DEVICE_INLINE ~ncclLsaBarrierSession()
    {
        if (this->coop.thread_rank() == 0) *(volatile uint32_t *)this->epochWord() = this->epoch;
        this->coop.sync();
    }

    ncclLsaBarrierSession(ncclLsaBarrierSession const &) = delete;

    NCCL_DEVICE_INLINE void arrive(Coop, cuda::memory_order order)
    {
        /* Everything the coop wrote before arriving is ordered before the stores below. */
        this->coop.sync();
        cuda::memory_order rel = nccl::utility::releaseOrderOf(order);
        int n = this->team.nRanks, me = this->team.rank;
        for (int i = this->coop.thread_rank(); i < n - 1; i += this->coop.size()) {
            int peer = (me + 1 + i) % n;
            cuda::atomic_ref<uint32_t, cuda::thread_scope_system> box(*this->inbox(peer, me));
            box.store(this->epoch + 1, rel);
        }
    }

    /* Each thread polls some peers' inboxes; with a deadline when timeoutCycles is not ~0. */
    NCCL_DEVICE_INLINE ncclResult_t _wait(cuda::memory_order order, uint64_t timeoutCycles)
    {
        uint64_t start = clock64();
        cuda::memory_order acq = nccl::utility::acquireOrderOf(order);
        int n = this->team.nRanks, me = this->team.rank;
        uint32_t want = this->epoch + 1;
        bool late = false;
        for (int i = this->coop.thread_rank(); i < n - 1 && !late; i += this->coop.size()) {
            int peer = (me + 1 + i) % n;
            cuda::atomic_ref<uint32_t, cuda::thread_scope_system> box(*this->inbox(me, peer));
            while (!nccl::utility::rollingLessEq<uint32_t>(want, box.load(acq))) {
                if (clock64() - start >= timeoutCycles) {
                    late = true;
                    break;
                }
            }
        }
        late = zincCoopAny(this->coop, late);
        if (late) return ncclTimeout;
        this->epoch = want;
        return ncclSuccess;
    }

    NCCL_DEVICE_INLINE void wait(Coop, cuda::memory_order order)
    {
        (void)_wait(order, ~uint64_t(0));
    }

    NCCL_DEVICE_INLINE ncclResult_t wait(Coop, cuda::memory_order order, uint64_t timeoutCycles)
    {
        this->coop.sync();
        return _wait(order, timeoutCycles);
    }

    NCCL_DEVICE_INLINE void sync(Coop coop, cuda::memory_order order)
    {
        arrive(coop, order);
        wait(coop, order);
    }

    NCCL_DEVICE_INLINE ncclResult_t sync(Coop coop, cuda::memory_order order,
                                         uint64_t timeoutCycles)
    {
        arrive(coop, order);
        return _wait(order, timeoutCycles);
    }
};
#endif /* __CUDACC__ */

#endif
