/*
 * layout: the offsets and sizes of the device API's public structs, the values of its enums
 * and macros and what its initializers hold, printed one per line as "section name values".
 * Sections: "common" (the same in NCCL 2.28.9 and 2.30.7), "v22809" (2.28.9's layouts of what
 * 2.29 and 2.30 changed), "v23007" (2.30.7's).
 *
 * Built against zinc's headers it prints common + v23007, which devapi_layout compares with
 * layout_nccl_2.30.7.txt (this program's output built against NCCL 2.30.7's header:
 * layout_regen.sh). Built against the CUDA toolkit's NCCL 2.28.9 header it prints common +
 * v22809, which must equal this program built with ZINC_LAYOUT_V22809: zinc's headers for
 * the common part and zinc's own copies of the 2.28.9 structs (src/api/devapi_legacy.h, what
 * the host calls read from programs built against 2.28.9) for the rest.
 */
#if __has_include(<cuda_runtime.h>)
#include <cuda_runtime.h> /* NCCL's nccl.h needs it first */
#endif
#include <stddef.h>

#include <nccl.h>
#include <nccl_device.h>

#include <stdio.h>

#ifdef ZINC_LAYOUT_V22809
#include "devapi_legacy.h"
#define V22809 1
typedef struct zn_devreqs_v22809 Reqs_v22809;
typedef struct zn_devcomm_v22809 DevComm_v22809;
#define GIN_MAX_CONTEXTS_V22809 4 /* devapi_legacy.h: ginHandles[4] */
#elif NCCL_VERSION_CODE < NCCL_VERSION(2, 29, 0)
#define V22809                  1
typedef ncclDevCommRequirements_t Reqs_v22809;
typedef ncclDevComm_t DevComm_v22809;
#define GIN_MAX_CONTEXTS_V22809 NCCL_GIN_MAX_CONTEXTS
#else
#define V22809 0
#endif

static const char *section = "common";
#define SIZE_AS(name, T) \
    printf("%s sizeof(%s) %zu align %zu\n", section, name, sizeof(T), alignof(T))
#define FIELD_AS(name, T, f) \
    printf("%s %s.%s %zu %zu\n", section, name, #f, offsetof(T, f), sizeof(((T *)0)->f))
#define SIZE(T)      SIZE_AS(#T, T)
#define FIELD(T, f)  FIELD_AS(#T, T, f)
#define VALUE(v)     printf("%s %s %lld\n", section, #v, (long long)(v))
#define INIT(var, f) printf("%s %s.%s = %lld\n", section, #var, #f, (long long)(var).f)

static void common_facts()
{
    section = "common";
    SIZE(ncclTeam_t);
    FIELD(ncclTeam_t, nRanks);
    FIELD(ncclTeam_t, rank);
    FIELD(ncclTeam_t, stride);

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
    SIZE(ncclLLA2AHandle_t);
    FIELD(ncclLLA2AHandle_t, bufHandle);
    FIELD(ncclLLA2AHandle_t, nSlots);
    SIZE(ncclMultimemHandle_t);
    SIZE(ncclDevResourceHandle_t);
    SIZE(ncclGinSignal_t);
    SIZE(ncclGinCounter_t);
    SIZE(ncclNetDeviceHandle_t);

    /* The window record's leading fields (zinc appends its own after them). */
    FIELD(struct ncclWindow_vidmem, winHost);
    FIELD(struct ncclWindow_vidmem, lsaFlatBase);
    FIELD(struct ncclWindow_vidmem, lsaRank);
    FIELD(struct ncclWindow_vidmem, worldRank);
    FIELD(struct ncclWindow_vidmem, stride4G);
    FIELD(struct ncclWindow_vidmem, mcOffset4K);
    FIELD(struct ncclWindow_vidmem, ginOffset4K);
    FIELD(struct ncclWindow_vidmem, ginWins);
    SIZE(struct ncclDevCommWindowTable);

    VALUE(NCCL_NET_DEVICE_HOST);
    VALUE(NCCL_NET_DEVICE_UNPACK);
    VALUE(NCCL_NET_DEVICE_GIN_PROXY);
    VALUE(NCCL_NET_DEVICE_GIN_GDAKI);
    VALUE(ncclGinSignalInc);
    VALUE(ncclGinSignalAdd);
    VALUE(ncclGetResourceBufferOffset(3));
}

#if V22809
static void v22809_facts()
{
    section = "v22809";
    SIZE_AS("ncclDevCommRequirements_t", Reqs_v22809);
#define R(f) FIELD_AS("ncclDevCommRequirements_t", Reqs_v22809, f)
    R(resourceRequirementsList);
    R(teamRequirementsList);
    R(lsaMultimem);
    R(barrierCount);
    R(lsaBarrierCount);
    R(railGinBarrierCount);
    R(lsaLLA2ABlockCount);
    R(lsaLLA2ASlotCount);
    R(ginForceEnable);
    R(ginContextCount);
    R(ginSignalCount);
    R(ginCounterCount);
#undef R
    SIZE_AS("ncclDevComm_t", DevComm_v22809);
#define D(f) FIELD_AS("ncclDevComm_t", DevComm_v22809, f)
    D(rank);
    D(nRanks);
    D(nRanks_rcp32);
    D(lsaRank);
    D(lsaSize);
    D(lsaSize_rcp32);
    D(windowTable);
    D(resourceWindow);
    D(resourceWindow_inlined);
    D(resourceWindow_inlined.lsaFlatBase);
    D(resourceWindow_inlined.lsaRank);
    D(resourceWindow_inlined.worldRank);
    D(lsaMultimem);
    D(lsaBarrier);
    D(railGinBarrier);
    D(ginContextCount);
    D(ginTypes);
    D(ginHandles);
    D(ginSignalBase);
    D(ginSignalCount);
    D(ginCounterBase);
    D(ginCounterCount);
    D(ginSignalShadows);
#undef D
    VALUE(GIN_MAX_CONTEXTS_V22809);
}
#else
static void v23007_facts()
{
    section = "v23007";
    VALUE(NCCL_API_MAGIC);
    VALUE(NCCL_GIN_MAX_CONNECTIONS);
    VALUE(NCCL_NET_DEVICE_GIN_GPI);
    VALUE(NCCL_GIN_CONNECTION_NONE);
    VALUE(NCCL_GIN_CONNECTION_FULL);
    VALUE(NCCL_GIN_CONNECTION_RAIL);
    VALUE(NCCL_GIN_TYPE_NONE);
    VALUE(NCCL_GIN_TYPE_PROXY);
    VALUE(NCCL_GIN_TYPE_GDAKI);
    VALUE(NCCL_GIN_TYPE_GPI);
    SIZE(ncclGinConnectionType_t);
    SIZE(ncclGinType_t);
    SIZE(ncclGinRequest_t);
    SIZE(ncclNetDeviceHandle_v12_t);
    FIELD(ncclGinBarrierHandle_t, unused);

    SIZE(ncclDevCommRequirements_t);
#define R(f) FIELD(ncclDevCommRequirements_t, f)
    R(size);
    R(magic);
    R(version);
    R(resourceRequirementsList);
    R(teamRequirementsList);
    R(lsaMultimem);
    R(barrierCount);
    R(lsaBarrierCount);
    R(railGinBarrierCount);
    R(lsaLLA2ABlockCount);
    R(lsaLLA2ASlotCount);
    R(ginForceEnable);
    R(ginContextCount);
    R(ginSignalCount);
    R(ginCounterCount);
    R(ginConnectionType);
    R(ginExclusiveContexts);
    R(ginQueueDepth);
    R(ginTrafficClass);
    R(worldGinBarrierCount);
    R(ginStrongSignalsRequired);
    R(ginVaSignalsRequired);
#undef R
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    INIT(reqs, size);
    INIT(reqs, magic);
    INIT(reqs, version);
    printf("%s reqs.lists %d %d\n", section, reqs.resourceRequirementsList != NULL,
           reqs.teamRequirementsList != NULL);
    INIT(reqs, lsaMultimem);
    INIT(reqs, barrierCount);
    INIT(reqs, lsaBarrierCount);
    INIT(reqs, railGinBarrierCount);
    INIT(reqs, lsaLLA2ABlockCount);
    INIT(reqs, lsaLLA2ASlotCount);
    INIT(reqs, ginForceEnable);
    INIT(reqs, ginContextCount);
    INIT(reqs, ginSignalCount);
    INIT(reqs, ginCounterCount);
    INIT(reqs, ginConnectionType);
    INIT(reqs, ginExclusiveContexts);
    INIT(reqs, ginQueueDepth);
    INIT(reqs, ginTrafficClass);
    INIT(reqs, worldGinBarrierCount);
    INIT(reqs, ginStrongSignalsRequired);
    INIT(reqs, ginVaSignalsRequired);

    SIZE(ncclCommProperties_t);
#define P(f) FIELD(ncclCommProperties_t, f)
    P(size);
    P(magic);
    P(version);
    P(rank);
    P(nRanks);
    P(cudaDev);
    P(nvmlDev);
    P(deviceApiSupport);
    P(multimemSupport);
    P(ginType);
    P(nLsaTeams);
    P(hostRmaSupport);
    P(railedGinType);
#undef P
    ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
    INIT(props, size);
    INIT(props, magic);
    INIT(props, version);
    INIT(props, rank);
    INIT(props, nRanks);
    INIT(props, cudaDev);
    INIT(props, nvmlDev);
    INIT(props, deviceApiSupport);
    INIT(props, multimemSupport);
    INIT(props, ginType);
    INIT(props, nLsaTeams);
    INIT(props, hostRmaSupport);
    INIT(props, railedGinType);

    /* Programs allocate ncclDevComm and ncclDevCommCreate fills it: size and the fields a
     * kernel reads must agree. */
    SIZE(ncclDevComm_t);
#define D(f) FIELD(ncclDevComm_t, f)
    D(magic);
    D(version);
    D(rank);
    D(nRanks);
    D(nRanks_rcp32);
    D(lsaRank);
    D(lsaSize);
    D(lsaSize_rcp32);
    D(windowTable);
    D(resourceWindow);
    D(resourceWindow_inlined);
    D(hybridWorldGinBarrier);
    D(lsaMultimem);
    D(lsaBarrier);
    D(railGinBarrier);
    D(ginConnectionCount);
    D(ginNetDeviceTypes);
    D(ginHandles);
    D(ginSignalCount);
    D(ginCounterCount);
    D(ginSignalShadows);
    D(ginContextCount);
    D(ginConnectionsRailed);
    D(ginStrongLegacySignals);
    D(ginContextsRailed);
    D(abortFlag);
    D(hybridLsaBarrier);
    D(hybridRailGinBarrier);
    D(worldGinBarrier);
#undef D
    SIZE(ncclResourceWindow_vidmem_t);
    FIELD(ncclResourceWindow_vidmem_t, lsaFlatBase);
    FIELD(ncclResourceWindow_vidmem_t, stride4G);
    FIELD(ncclResourceWindow_vidmem_t, mcOffset4K);
    FIELD(struct ncclWindow_vidmem, ginMultiSegmentWins);
    FIELD(struct ncclWindow_vidmem, numSegments);
    SIZE(struct ncclSegmentWindow);
    FIELD(struct ncclSegmentWindow, ginWins);
    FIELD(struct ncclSegmentWindow, segmentSize);
    FIELD(struct ncclSegmentWindow, memType);
}
#endif

int main()
{
    common_facts();
#if V22809
    v22809_facts();
#else
    v23007_facts();
#endif
    return 0;
}
