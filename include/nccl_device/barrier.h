/*
 * nccl_device/barrier.h -- a barrier over a team split in two levels: an LSA barrier among
 * the ranks that reach each other's memory, then a GIN barrier among the LSA teams (the rail
 * team). Either part may be absent (ncclTeamTagLsa: LSA only; ncclTeamTagRail: GIN only).
 * The world team's session (ncclTeamTagWorld) uses the device communicator's hybrid barriers
 * (barrierCount of them) and, when the fence asks for Put and GIN reaches every rank, one GIN
 * barrier over the world team instead of the two levels, as NCCL 2.30 does.
 */
#ifndef ZINC_NCCL_DEVICE_BARRIER_H_
#define ZINC_NCCL_DEVICE_BARRIER_H_
#include "core.h"
#include "gin_barrier.h"
#include "lsa_barrier.h"

#if __CUDACC__
template <typename Coop> struct ncclBarrierSession_internal {
    Coop coop;
    nccl::utility::Optional<ncclGin> gin;
    nccl::utility::Optional<ncclLsaBarrierSession<Coop>> innerLsaBar;
    nccl::utility::Optional<ncclGinBarrierSession<Coop>> outerRailGinBar;
    nccl::utility::Optional<ncclGinBarrierSession<Coop>> outerWorldGinBar;

    template <typename GinInit, typename InnerInit, typename OuterInit, typename WorldInit>
    NCCL_DEVICE_INLINE ncclBarrierSession_internal(Coop coop, GinInit const &g,
                                                   InnerInit const &inner, OuterInit const &outer,
                                                   WorldInit const &world)
        : coop(coop), gin{ g }, innerLsaBar{ inner }, outerRailGinBar{ outer }, outerWorldGinBar{
              world
          }
    {
    }
};

template <typename Coop> struct ncclBarrierSession : ncclBarrierSession_internal<Coop> {
    NCCL_DEVICE_INLINE
    ncclBarrierSession(Coop coop, ncclTeam innerTeam, ncclTeam outerTeam, ncclGin gin,
                       ncclLsaBarrierHandle innerBarHandle, ncclGinBarrierHandle outerBarHandle,
                       uint32_t index, bool multimem = false, ncclMultimemHandle innerMmHandle = {})
        : ncclBarrierSession_internal<Coop>(
              coop, nccl::utility::present(gin),
              nccl::utility::present(coop, gin.comm, innerTeam, innerBarHandle, index, multimem,
                                     innerMmHandle),
              nccl::utility::present(coop, gin, outerTeam, outerBarHandle, index),
              nccl::utility::Absent())
    {
    }

    NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagWorld, ncclGin gin, uint32_t index,
                                          bool multimem = false)
        : ncclBarrierSession_internal<Coop>(
              coop, nccl::utility::present(gin),
              nccl::utility::present(coop, gin.comm, ncclTeamLsa(gin.comm),
                                     gin.comm.hybridLsaBarrier, index, multimem,
                                     gin.comm.lsaMultimem),
              nccl::utility::present(coop, gin, ncclTeamRail(gin.comm),
                                     gin.comm.hybridRailGinBarrier, index),
              nccl::utility::present(coop, gin, ncclTeamWorld(gin.comm),
                                     gin.comm.hybridWorldGinBarrier, index))
    {
    }

    NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagLsa, ncclDevComm const &comm,
                                          uint32_t index, bool multimem = false)
        : ncclBarrierSession_internal<Coop>(coop, nccl::utility::Absent(),
                                            nccl::utility::present(coop, comm, ncclTeamLsa(comm),
                                                                   comm.hybridLsaBarrier, index,
                                                                   multimem, comm.lsaMultimem),
                                            nccl::utility::Absent(), nccl::utility::Absent())
    {
    }

    NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagRail, ncclGin gin, uint32_t index)
        : ncclBarrierSession_internal<Coop>(
              coop, nccl::utility::present(gin), nccl::utility::Absent(),
              nccl::utility::present(coop, gin, ncclTeamRail(gin.comm),
                                     gin.comm.hybridRailGinBarrier, index),
              nccl::utility::Absent())
    {
    }

    ncclBarrierSession(ncclBarrierSession const &) = delete;

    NCCL_DEVICE_INLINE ncclLsaBarrierSession<Coop> &lsaBarrier()
    {
        return this->innerLsaBar.thing;
    }
    NCCL_DEVICE_INLINE ncclGinBarrierSession<Coop> &ginBarrier()
    {
        return this->outerRailGinBar.thing;
    }

    /* One GIN barrier over the world when the hybrid world barrier exists (not with railed
     * GIN contexts) and the fence asks for Put. */
    NCCL_DEVICE_INLINE bool _worldOnly(ncclGinFenceLevel fence) const
    {
        return (fence & ncclGinFenceLevel::Put) && this->gin.present &&
               !this->gin.thing.comm.ginContextsRailed && this->outerWorldGinBar.present;
    }

    /* LSA first, then GIN, each with the whole order asked for: splitting it (release in the
     * first, acquire in the second) would lose the acquire when the rail team is one rank.
     * A timed sync that times out in the LSA part stops there (every thread of the coop saw
     * the same result); a later sync finishes the round. */
    NCCL_DEVICE_INLINE ncclResult_t _sync(cuda::memory_order ord, ncclGinFenceLevel fence,
                                          uint64_t timeoutCycles)
    {
        if (_worldOnly(fence))
            return this->outerWorldGinBar.thing.sync(this->coop, ord, fence, timeoutCycles);
        uint64_t start = clock64();
        if (this->innerLsaBar.present) {
            ncclResult_t res = this->innerLsaBar.thing.sync(this->coop, ord, timeoutCycles);
            if (res != ncclSuccess) return res;
        }
        if (this->outerRailGinBar.present) {
            uint64_t spent = clock64() - start;
            uint64_t left = timeoutCycles == ~uint64_t(0) ? timeoutCycles
                            : spent < timeoutCycles       ? timeoutCycles - spent
                                                          : 0;
            return this->outerRailGinBar.thing.sync(this->coop, ord, fence, left);
        }
        return ncclSuccess;
    }

    NCCL_DEVICE_INLINE void sync(Coop, cuda::memory_order ord,
                                 ncclGinFenceLevel fence = ncclGinFenceLevel::Put |
                                                           ncclGinFenceLevel::Get)
    {
        (void)_sync(ord, fence, ~uint64_t(0));
    }

    NCCL_DEVICE_INLINE ncclResult_t sync(Coop, cuda::memory_order ord, ncclGinFenceLevel fence,
                                         uint64_t timeoutCycles)
    {
        return _sync(ord, fence, timeoutCycles);
    }
};

/* One barrier without a session of one's own. */
template <typename Coop>
NCCL_DEVICE_INLINE void ncclBarrier(Coop coop, ncclTeamTagWorld tag, ncclGin gin, uint32_t index,
                                    cuda::memory_order ord = cuda::memory_order_acq_rel,
                                    ncclGinFenceLevel fence = ncclGinFenceLevel::Put |
                                                              ncclGinFenceLevel::Get,
                                    bool multimem = false)
{
    ncclBarrierSession<Coop> session(coop, tag, gin, index, multimem);
    session.sync(coop, ord, fence);
}

template <typename Coop>
NCCL_DEVICE_INLINE void ncclBarrier(Coop coop, ncclTeamTagRail tag, ncclGin gin, uint32_t index,
                                    cuda::memory_order ord = cuda::memory_order_acq_rel,
                                    ncclGinFenceLevel fence = ncclGinFenceLevel::Put |
                                                              ncclGinFenceLevel::Get)
{
    ncclBarrierSession<Coop> session(coop, tag, gin, index);
    session.sync(coop, ord, fence);
}
#endif /* __CUDACC__ */

#endif
