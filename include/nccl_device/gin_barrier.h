/*
 * nccl_device/gin_barrier.h -- barriers over GIN signals: each member adds one to signal
 * (signal0 + index) of every other member, then waits until its own signal has grown by
 * nRanks - 1 since the last sync. The count so far (the epoch) is kept in a resource buffer
 * (uint32 epoch[nBarriers]) between sessions.
 */
#ifndef ZINC_NCCL_DEVICE_GIN_BARRIER_H_
#define ZINC_NCCL_DEVICE_GIN_BARRIER_H_
#include "core.h"
#include "gin.h"

NCCL_EXTERN_C __host__ ncclResult_t ncclGinBarrierCreateRequirement(
    ncclComm_t, ncclTeam_t, int nBarriers, ncclGinBarrierHandle_t *outHandle,
    ncclDevResourceRequirements_t *outReq);

#if __cplusplus
enum class ncclGinFenceLevel { Relaxed };
#endif

#if __CUDACC__
template <typename Coop> struct ncclGinBarrierSession_internal {
    Coop coop;
    ncclGin net;
    ncclTeam team;
    ncclGinBarrierHandle handle;
    int index;
    uint32_t epoch;
    ncclGinSignal_t signal;

    NCCL_DEVICE_INLINE uint32_t *epochWord() const
    {
        return (uint32_t *)ncclGetResourceBufferLocalPointer(net.comm, handle.bufHandle) + index;
    }
};

template <typename Coop> struct ncclGinBarrierSession : ncclGinBarrierSession_internal<Coop> {
    NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGin net, ncclTeam team,
                                             ncclGinBarrierHandle handle, uint32_t index)
        : ncclGinBarrierSession_internal<Coop>{
              coop, net, team, handle, (int)index, 0, handle.signal0 + index
          }
    {
        this->epoch = *(volatile uint32_t *)this->epochWord();
    }

    NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGin net, ncclTeamTagRail,
                                             uint32_t index)
        : ncclGinBarrierSession(coop, net, ncclTeamRail(net.comm), net.comm.railGinBarrier, index)
    {
    }

    NCCL_DEVICE_INLINE ~ncclGinBarrierSession()
    {
        if (this->coop.thread_rank() == 0) *(volatile uint32_t *)this->epochWord() = this->epoch;
        this->coop.sync();
    }

    ncclGinBarrierSession(ncclGinBarrierSession const &) = delete;

    NCCL_DEVICE_INLINE void sync(Coop, cuda::memory_order ord, ncclGinFenceLevel)
    {
        this->coop.sync();
        int n = this->team.nRanks, me = this->team.rank;
        for (int i = this->coop.thread_rank(); i < n - 1; i += this->coop.size())
            this->net.signal(this->team, (me + 1 + i) % n, ncclGin_SignalInc{ this->signal },
                             ncclCoopThread());
        this->epoch += n - 1;
        if (this->coop.thread_rank() == 0)
            this->net.waitSignal(ncclCoopThread(), this->signal, this->epoch, 32,
                                 nccl::utility::acquireOrderOf(ord));
        this->coop.sync();
    }
};
#endif /* __CUDACC__ */

#endif
