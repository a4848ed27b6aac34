/*
 * layout: the offsets and sizes of the device API's public structs and the values of its
 * enums, printed one per line. Built twice, against zinc's headers and against the reference
 * NCCL 2.28.9 headers; devapi_layout compares the two outputs, so that a program built against
 * either header passes these structs to either library safely.
 */
#include <cuda_runtime.h>
#include <stddef.h>

#include <nccl.h>
#include <nccl_device.h>

#include <stdio.h>

#define SIZE(T)     printf("sizeof(%s) %zu align %zu\n", #T, sizeof(T), alignof(T))
#define FIELD(T, f) printf("%s.%s %zu %zu\n", #T, #f, offsetof(T, f), sizeof(((T *)0)->f))
#define VALUE(v)    printf("%s %lld\n", #v, (long long)(v))

int main()
{
    SIZE(ncclTeam_t);
    FIELD(ncclTeam_t, nRanks);
    FIELD(ncclTeam_t, rank);
    FIELD(ncclTeam_t, stride);

    SIZE(ncclDevCommRequirements_t);
    FIELD(ncclDevCommRequirements_t, resourceRequirementsList);
    FIELD(ncclDevCommRequirements_t, teamRequirementsList);
    FIELD(ncclDevCommRequirements_t, lsaMultimem);
    FIELD(ncclDevCommRequirements_t, barrierCount);
    FIELD(ncclDevCommRequirements_t, lsaBarrierCount);
    FIELD(ncclDevCommRequirements_t, railGinBarrierCount);
    FIELD(ncclDevCommRequirements_t, lsaLLA2ABlockCount);
    FIELD(ncclDevCommRequirements_t, lsaLLA2ASlotCount);
    FIELD(ncclDevCommRequirements_t, ginForceEnable);
    FIELD(ncclDevCommRequirements_t, ginContextCount);
    FIELD(ncclDevCommRequirements_t, ginSignalCount);
    FIELD(ncclDevCommRequirements_t, ginCounterCount);

    SIZE(ncclDevResourceRequirements_t);
    FIELD(ncclDevResourceRequirements_t, next);
    FIELD(ncclDevResourceRequirements_t, bufferSize);
    FIELD(ncclDevResourceRequirements_t, bufferAlign);
    FIELD(ncclDevResourceRequirements_t, outBufferHandle);
    FIELD(ncclDevResourceRequirements_t, ginSignalCount);
    FIELD(ncclDevResourceRequirements_t, ginCounterCount);
    FIELD(ncclDevResourceRequirements_t, outGinSignalStart);
    FIELD(ncclDevResourceRequirements_t, outGinCounterStart);

    SIZE(ncclTeamRequirements_t);
    FIELD(ncclTeamRequirements_t, next);
    FIELD(ncclTeamRequirements_t, team);
    FIELD(ncclTeamRequirements_t, multimem);
    FIELD(ncclTeamRequirements_t, outMultimemHandle);

    SIZE(ncclLsaBarrierHandle_t);
    FIELD(ncclLsaBarrierHandle_t, bufHandle);
    FIELD(ncclLsaBarrierHandle_t, nBarriers);
    SIZE(ncclGinBarrierHandle_t);
    FIELD(ncclGinBarrierHandle_t, signal0);
    FIELD(ncclGinBarrierHandle_t, bufHandle);
    SIZE(ncclLLA2AHandle_t);
    FIELD(ncclLLA2AHandle_t, bufHandle);
    FIELD(ncclLLA2AHandle_t, nSlots);
    SIZE(ncclMultimemHandle_t);
    SIZE(ncclDevResourceHandle_t);
    SIZE(ncclGinSignal_t);
    SIZE(ncclGinCounter_t);

    /* Programs allocate ncclDevComm and ncclDevCommCreate fills it: size and the fields a
     * kernel reads must agree. */
    SIZE(ncclDevComm_t);
    FIELD(ncclDevComm_t, rank);
    FIELD(ncclDevComm_t, nRanks);
    FIELD(ncclDevComm_t, nRanks_rcp32);
    FIELD(ncclDevComm_t, lsaRank);
    FIELD(ncclDevComm_t, lsaSize);
    FIELD(ncclDevComm_t, lsaSize_rcp32);
    FIELD(ncclDevComm_t, windowTable);
    FIELD(ncclDevComm_t, resourceWindow);
    FIELD(ncclDevComm_t, resourceWindow_inlined);
    FIELD(ncclDevComm_t, lsaMultimem);
    FIELD(ncclDevComm_t, lsaBarrier);
    FIELD(ncclDevComm_t, railGinBarrier);
    FIELD(ncclDevComm_t, ginContextCount);
    FIELD(ncclDevComm_t, ginTypes);
    FIELD(ncclDevComm_t, ginHandles);
    FIELD(ncclDevComm_t, ginSignalBase);
    FIELD(ncclDevComm_t, ginSignalCount);
    FIELD(ncclDevComm_t, ginCounterBase);
    FIELD(ncclDevComm_t, ginCounterCount);
    FIELD(ncclDevComm_t, ginSignalShadows);

    /* The window record's leading fields (zinc appends its own after them). */
    FIELD(struct ncclWindow_vidmem, winHost);
    FIELD(struct ncclWindow_vidmem, lsaFlatBase);
    FIELD(struct ncclWindow_vidmem, lsaRank);
    FIELD(struct ncclWindow_vidmem, worldRank);
    FIELD(struct ncclWindow_vidmem, stride4G);
    FIELD(struct ncclWindow_vidmem, mcOffset4K);
    FIELD(struct ncclWindow_vidmem, ginOffset4K);
    FIELD(struct ncclWindow_vidmem, ginWins);

    VALUE(NCCL_GIN_MAX_CONTEXTS);
    VALUE(NCCL_NET_DEVICE_HOST);
    VALUE(NCCL_NET_DEVICE_UNPACK);
    VALUE(NCCL_NET_DEVICE_GIN_PROXY);
    VALUE(NCCL_NET_DEVICE_GIN_GDAKI);
    VALUE(ncclGinSignalInc);
    VALUE(ncclGinSignalAdd);
    VALUE(ncclGetResourceBufferOffset(3));
    return 0;
}
