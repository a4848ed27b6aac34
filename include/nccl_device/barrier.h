/*
 * nccl_device/barrier.h -- a barrier over a team split in two levels: an LSA barrier among
 * the ranks that reach each other's memory, then a GIN barrier among the LSA teams (the rail
 * team). Either part may be absent (ncclTeamTagLsa: LSA only; ncclTeamTagRail: GIN only).
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
    nccl::utility::Optional<ncclGinBarrierSession<Coop>> outerGinBar;

    template <typename GinInit, typename InnerInit, typename OuterInit>
    NCCL_DEVICE_INLINE ncclBarrierSession_internal(Coop coop, GinInit const &g,
                                                   InnerInit const &inner, OuterInit const &outer)
        : coop(coop), gin{ g }, innerLsaBar{ inner }, outerGinBar{ outer }
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
              nccl::utility::present(coop, gin, outerTeam, outerBarHandle, index))
    {
    }

    NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagWorld, ncclGin gin, uint32_t index,
                                          bool multimem = false)
        : ncclBarrierSession(coop, ncclTeamLsa(gin.comm), ncclTeamRail(gin.comm), gin,
                             gin.comm.lsaBarrier, gin.comm.railGinBarrier, index, multimem,
                             gin.comm.lsaMultimem)
    {
    }

    NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagLsa, ncclDevComm const &comm,
                                          uint32_t index, bool multimem = false)
        : ncclBarrierSession_internal<Coop>(coop, nccl::utility::Absent(),
                                            nccl::utility::present(coop, comm, ncclTeamLsa(comm),
                                                                   comm.lsaBarrier, index, multimem,
                                                                   comm.lsaMultimem),
                                            nccl::utility::Absent())
    {
    }

    NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagRail, ncclGin gin, uint32_t index)
        : ncclBarrierSession_internal<Coop>(
              coop, nccl::utility::present(gin), nccl::utility::Absent(),
              nccl::utility::present(coop, gin, ncclTeamRail(gin.comm), gin.comm.railGinBarrier,
                                     index))
    {
    }

    ncclBarrierSession(ncclBarrierSession const &) = delete;

    NCCL_DEVICE_INLINE ncclLsaBarrierSession<Coop> &lsaBarrier()
    {
        return this->innerLsaBar.thing;
    }
    NCCL_DEVICE_INLINE ncclGinBarrierSession<Coop> &ginBarrier()
    {
        return this->outerGinBar.thing;
    }

    /* LSA first, then GIN, each with the whole order asked for: splitting it (release in the
     * first, acquire in the second) would lose the acquire when the rail team is one rank. */
    NCCL_DEVICE_INLINE void sync(Coop, cuda::memory_order ord, ncclGinFenceLevel fence)
    {
        if (this->innerLsaBar.present) this->innerLsaBar.thing.sync(this->coop, ord);
        if (this->outerGinBar.present) this->outerGinBar.thing.sync(this->coop, ord, fence);
    }
};
#endif /* __CUDACC__ */

#endif
