/*
 * nccl_device/gin_barrier.h -- barriers over GIN signals: each member adds one to signal
 * (signal0 + index) of every other member, then waits until its own signal has grown by
 * nRanks - 1 since the last sync. The count so far (the epoch) is kept in that signal's
 * shadow between sessions (the signal is the barrier's alone).
 *
 * Fences. A barrier's signals go out after every put the coop queued before it, to the same
 * peers and in order (gin.h), so the puts that team members made to the caller before the
 * barrier are visible when it returns: the Put level always holds. zinc has no get, so the
 * Get level has nothing to drain; None asks for less and gets the same.
 *
 * Timed syncs return ncclTimeout to every thread of the coop when the wait took more than
 * timeoutCycles (clock64) or GIN between hosts failed; the round stays open: the next sync on
 * the session sends nothing new and finishes waiting for it.
 */
#ifndef ZINC_NCCL_DEVICE_GIN_BARRIER_H_
#define ZINC_NCCL_DEVICE_GIN_BARRIER_H_
#include "core.h"
#include "gin.h"

NCCL_EXTERN_C __host__ ncclResult_t ncclGinBarrierCreateRequirement(
    ncclComm_t comm, ncclTeam_t team, int nBarriers, ncclGinBarrierHandle_t *outHandle,
    ncclDevResourceRequirements_t *outReq);

#if __cplusplus
/* Bit flags (NCCL's unscoped enum: callers write ncclGinFenceLevel::Put | ...::Get). */
enum ncclGinFenceLevel : uint32_t {
    None = 0,
    Put = 1u << 0,
    Get = 1u << 1,
    Relaxed = None, /* the old name of None */
};

NCCL_HOST_DEVICE_INLINE constexpr ncclGinFenceLevel operator|(ncclGinFenceLevel a,
                                                              ncclGinFenceLevel b)
{
    return static_cast<ncclGinFenceLevel>(static_cast<uint32_t>(a) | static_cast<uint32_t>(b));
}
NCCL_HOST_DEVICE_INLINE constexpr ncclGinFenceLevel operator&(ncclGinFenceLevel a,
                                                              ncclGinFenceLevel b)
{
    return static_cast<ncclGinFenceLevel>(static_cast<uint32_t>(a) & static_cast<uint32_t>(b));
}

/* A barrier given this instead of an ncclGin fences every GIN context of the communicator:
 * zinc has one, so it is the same as ncclGin(comm, 0). */
struct ncclGinAllContexts {
    ncclDevComm const &comm;
    NCCL_HOST_DEVICE_INLINE constexpr ncclGinAllContexts(ncclDevComm const &comm_) : comm(comm_) {}
};
#endif

#if __CUDACC__
template <typename Coop> struct ncclGinBarrierSession_internal {
    Coop coop;
    ncclGin net;
    ncclTeam team;
    ncclGinBarrierHandle handle;
    int index;
    uint64_t epoch;
    ncclGinSignal_t signal;
    bool pending; /* the last sync timed out: its signals are out, its wait is not done */
    bool fenceAllContexts;
};

template <typename Coop> struct ncclGinBarrierSession : ncclGinBarrierSession_internal<Coop> {
    NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGin net, ncclTeam team,
                                             ncclGinBarrierHandle handle, uint32_t index)
        : ncclGinBarrierSession_internal<Coop>{
              coop, net, team, handle, (int)index, 0, handle.signal0 + index, false, false
          }
    {
        this->epoch = *(volatile uint64_t *)net.getSignalShadowPtr(this->signal);
    }

    NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGin net, ncclTeamTagRail,
                                             uint32_t index)
        : ncclGinBarrierSession(coop, net, ncclTeamRail(net.comm), net.comm.railGinBarrier, index)
    {
    }

    NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGin net, ncclTeamTagWorld,
                                             uint32_t index)
        : ncclGinBarrierSession(coop, net, ncclTeamWorld(net.comm), net.comm.worldGinBarrier, index)
    {
    }

    NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGinAllContexts all, ncclTeam team,
                                             ncclGinBarrierHandle handle, uint32_t index)
        : ncclGinBarrierSession(coop, ncclGin(all.comm, 0), team, handle, index)
    {
        this->fenceAllContexts = true;
    }

    NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGinAllContexts all, ncclTeamTagRail,
                                             uint32_t index)
        : ncclGinBarrierSession(coop, all, ncclTeamRail(all.comm), all.comm.railGinBarrier, index)
    {
    }

    NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGinAllContexts all, ncclTeamTagWorld,
                                             uint32_t index)
        : ncclGinBarrierSession(coop, all, ncclTeamWorld(all.comm), all.comm.worldGinBarrier, index)
    {
    }

    NCCL_DEVICE_INLINE ~ncclGinBarrierSession()
    {
        if (this->coop.thread_rank() == 0)
            *(volatile uint64_t *)this->net.getSignalShadowPtr(this->signal) = this->epoch;
        this->coop.sync();
    }

    ncclGinBarrierSession(ncclGinBarrierSession const &) = delete;

    /* One round: signal every other member (unless a timed-out round is being finished),
     * then thread 0 waits, with a deadline when timeoutCycles is not ~0. */
    NCCL_DEVICE_INLINE ncclResult_t _sync(cuda::memory_order ord, uint64_t timeoutCycles)
    {
        uint64_t start = clock64();
        this->coop.sync();
        int n = this->team.nRanks, me = this->team.rank;
        if (!this->pending) {
            for (int i = this->coop.thread_rank(); i < n - 1; i += this->coop.size())
                this->net.signal(this->team, (me + 1 + i) % n, ncclGin_SignalInc{ this->signal },
                                 ncclCoopThread());
            this->epoch += n - 1;
        }
        bool late = false;
        if (this->coop.thread_rank() == 0) {
            cuda::memory_order acq = nccl::utility::acquireOrderOf(ord);
            while (!nccl::utility::rollingLessEq<uint64_t>(
                this->epoch, this->net.readSignal(this->signal, 64, acq))) {
                if (this->net._netFailed() || clock64() - start >= timeoutCycles) {
                    late = true;
                    break;
                }
            }
        }
        late = zincCoopAny(this->coop, late);
        this->pending = late;
        return late ? ncclTimeout : ncclSuccess;
    }

    NCCL_DEVICE_INLINE void sync(Coop, cuda::memory_order ord,
                                 ncclGinFenceLevel fence = ncclGinFenceLevel::Put |
                                                           ncclGinFenceLevel::Get)
    {
        (void)fence;
        (void)_sync(ord, ~uint64_t(0));
    }

    NCCL_DEVICE_INLINE ncclResult_t sync(Coop, cuda::memory_order ord, ncclGinFenceLevel fence,
                                         uint64_t timeoutCycles)
    {
        (void)fence;
        return _sync(ord, timeoutCycles);
    }
};

/* One barrier without a session of one's own. */
template <typename Coop, typename Gin, typename... Team>
NCCL_DEVICE_INLINE void zincGinBarrier(Coop coop, Gin gin, uint32_t index, cuda::memory_order ord,
                                       ncclGinFenceLevel fence, Team... team)
{
    ncclGinBarrierSession<Coop> session(coop, gin, team..., index);
    session.sync(coop, ord, fence);
}

template <typename Coop>
NCCL_DEVICE_INLINE void
ncclGinBarrier(Coop coop, ncclGin gin, ncclTeam team, ncclGinBarrierHandle handle, uint32_t index,
               cuda::memory_order ord = cuda::memory_order_acq_rel,
               ncclGinFenceLevel fence = ncclGinFenceLevel::Put | ncclGinFenceLevel::Get)
{
    zincGinBarrier(coop, gin, index, ord, fence, team, handle);
}
template <typename Coop>
NCCL_DEVICE_INLINE void ncclGinBarrier(Coop coop, ncclGin gin, ncclTeamTagRail tag, uint32_t index,
                                       cuda::memory_order ord = cuda::memory_order_acq_rel,
                                       ncclGinFenceLevel fence = ncclGinFenceLevel::Put |
                                                                 ncclGinFenceLevel::Get)
{
    zincGinBarrier(coop, gin, index, ord, fence, tag);
}
template <typename Coop>
NCCL_DEVICE_INLINE void ncclGinBarrier(Coop coop, ncclGin gin, ncclTeamTagWorld tag, uint32_t index,
                                       cuda::memory_order ord = cuda::memory_order_acq_rel,
                                       ncclGinFenceLevel fence = ncclGinFenceLevel::Put |
                                                                 ncclGinFenceLevel::Get)
{
    zincGinBarrier(coop, gin, index, ord, fence, tag);
}
template <typename Coop>
NCCL_DEVICE_INLINE void
ncclGinBarrier(Coop coop, ncclGinAllContexts all, ncclTeam team, ncclGinBarrierHandle handle,
               uint32_t index, cuda::memory_order ord = cuda::memory_order_acq_rel,
               ncclGinFenceLevel fence = ncclGinFenceLevel::Put | ncclGinFenceLevel::Get)
{
    zincGinBarrier(coop, all, index, ord, fence, team, handle);
}
template <typename Coop>
NCCL_DEVICE_INLINE void
ncclGinBarrier(Coop coop, ncclGinAllContexts all, ncclTeamTagRail tag, uint32_t index,
               cuda::memory_order ord = cuda::memory_order_acq_rel,
               ncclGinFenceLevel fence = ncclGinFenceLevel::Put | ncclGinFenceLevel::Get)
{
    zincGinBarrier(coop, all, index, ord, fence, tag);
}
template <typename Coop>
NCCL_DEVICE_INLINE void
ncclGinBarrier(Coop coop, ncclGinAllContexts all, ncclTeamTagWorld tag, uint32_t index,
               cuda::memory_order ord = cuda::memory_order_acq_rel,
               ncclGinFenceLevel fence = ncclGinFenceLevel::Put | ncclGinFenceLevel::Get)
{
    zincGinBarrier(coop, all, index, ord, fence, tag);
}
#endif /* __CUDACC__ */

#endif
