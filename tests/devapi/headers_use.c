/* headers_use.c: zinc's nccl_device.h in a C program (the host part); compiled, not run. */
#include <nccl_device.h>

int host_part(ncclComm_t comm)
{
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    ncclDevResourceRequirements_t res = { 0 };
    ncclLsaBarrierHandle_t lh;
    ncclTeam_t world = ncclTeamWorld(comm);
    ncclDevComm_t dc;
    reqs.resourceRequirementsList = &res;
    ncclLsaBarrierCreateRequirement(ncclTeamLsa(comm), 1, &lh, &res);
    ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
    ncclCommQueryProperties(comm, &props);
    void *p = NULL;
    ncclMultimemHandle_t mm = { NULL };
    ncclGetMultimemDevicePointer(NULL, 0, mm, &p);
    reqs.ginConnectionType = NCCL_GIN_CONNECTION_RAIL;
    ncclGinRequest_t req;
    req.opaque[0] = (uint64_t)props.ginType + NCCL_GIN_TYPE_GPI + NCCL_NET_DEVICE_GIN_GPI;
    if (ncclDevCommCreate(comm, &reqs, &dc) == ncclSuccess) ncclDevCommDestroy(comm, &dc);
    return ncclTeamRankIsMember(world, world, 0) + ncclTeamRankToTeam(world, world, 0) +
           ncclTeamInnerFactor(world, 1).nRanks + ncclTeamOuterFactor(world, 1).nRanks +
           ncclTeamRankInDifference(world, world, 0) + (int)ncclGetResourceBufferOffset(2) +
           props.nRanks + (int)req.opaque[0];
}
