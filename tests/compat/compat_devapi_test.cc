/*
 * compat_devapi: a C++ program built against the reference nccl_device.h (NCCL's device API)
 * and libnccl.so.2, run on zinc's library on host communicators: the host functions must have
 * the reference ABI (teams travel by value in registers; requirements and handles through
 * pointers with the reference layouts). zinc's headers are NCCL 2.30's, whose structs start
 * with size / magic / version; the host calls must still read this program's 2.28.9 structs,
 * which have none: each field is checked at its 2.28.9 place (lsaMultimem, a negative
 * ginCounterCount, a multimem team, the GIN use that 2.28.9 needed no connection type for).
 * ncclDevCommCreate needs a CUDA communicator, so valid requirements must fail with
 * ncclInvalidUsage naming the host communicator; the requirement helpers must fill the
 * reference structs as zinc's headers lay the buffers out (src/api/devcomm.c).
 *
 *   LD_LIBRARY_PATH=<zinc>/lib ZINC_DEVICE=host zinc-run -n 3 compat_devapi
 */
#include <cuda_runtime.h>
#include <stddef.h>

#include <nccl.h>
#include <nccl_device.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;
static long failures;

#include "../coll/mp_check.h"

#define EXPECT_ERROR(call, want, name)                                                \
    do {                                                                              \
        ncclResult_t r_ = (call);                                                     \
        EXPECT(r_ == (want), "%s returned %d, expected %d", name, r_, (int)(want));   \
        EXPECT(strstr(ncclGetLastError(NULL), name) != NULL,                          \
               "%s: the message does not name it: %s", name, ncclGetLastError(NULL)); \
    } while (0)

static int env_int(const char *a, int def)
{
    const char *v = getenv(a);
    return v && *v ? atoi(v) : def;
}

int main()
{
    rank = env_int("ZINC_RANK", 0);
    nranks = env_int("ZINC_NRANKS", 1);
    if (!dlsym(RTLD_DEFAULT, "zincGetVersionString")) {
        fprintf(stderr, "compat_devapi: the libnccl.so.2 loaded is not zinc's\n");
        return 3;
    }
    ncclUniqueId id;
    ncclComm_t comm;
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, nranks, id, rank)) {
        fprintf(stderr, "[%d] init failed: %s\n", rank, ncclGetLastError(NULL));
        return 2;
    }
    ncclDevCommRequirements_t reqs;
    memset(&reqs, 0, sizeof(reqs));
    ncclDevComm_t dev;
    EXPECT_ERROR(ncclDevCommCreate(comm, &reqs, &dev), ncclInvalidUsage, "ncclDevCommCreate");
    EXPECT(strstr(ncclGetLastError(NULL), "host communicator") != NULL,
           "ncclDevCommCreate on a host communicator: %s", ncclGetLastError(NULL));
    reqs.lsaMultimem = true;
    EXPECT_ERROR(ncclDevCommCreate(comm, &reqs, &dev), ncclInvalidUsage, "multimem");
    reqs.lsaMultimem = false;
    reqs.ginCounterCount = -1;
    EXPECT_ERROR(ncclDevCommCreate(comm, &reqs, &dev), ncclInvalidArgument, "ginCounterCount");
    /* GIN resources without a connection type (2.30 would refuse them) and world barriers:
     * accepted, up to the host communicator. */
    reqs.ginCounterCount = 2;
    reqs.ginSignalCount = 3;
    reqs.barrierCount = 4;
    EXPECT_ERROR(ncclDevCommCreate(comm, &reqs, &dev), ncclInvalidUsage, "host communicator");
    ncclTeamRequirements_t team;
    memset(&team, 0, sizeof(team));
    team.team = ncclTeamWorld(comm);
    team.multimem = true;
    reqs.teamRequirementsList = &team;
    EXPECT_ERROR(ncclDevCommCreate(comm, &reqs, &dev), ncclInvalidUsage, "team requirement 0");
    memset(&reqs, 0, sizeof(reqs));
    memset(&dev, 0, sizeof(dev));
    EXPECT_ERROR(ncclDevCommDestroy(comm, &dev), ncclInvalidArgument, "ncclDevCommDestroy");

    ncclTeam_t world = ncclTeamWorld(comm), lsa = ncclTeamLsa(comm), rail = ncclTeamRail(comm);
    EXPECT(world.nRanks == nranks && world.rank == rank && world.stride == 1,
           "ncclTeamWorld: {%d, %d, %d}", world.nRanks, world.rank, world.stride);
    EXPECT(lsa.nRanks == 1 && lsa.rank == 0 && lsa.stride == 1, "ncclTeamLsa: {%d, %d, %d}",
           lsa.nRanks, lsa.rank, lsa.stride);
    EXPECT(rail.nRanks == nranks && rail.rank == rank && rail.stride == 1,
           "ncclTeamRail: {%d, %d, %d}", rail.nRanks, rail.rank, rail.stride);
    for (int r = 0; r < nranks; r++)
        EXPECT(ncclTeamRankToWorld(comm, world, r) == r, "ncclTeamRankToWorld(%d) = %d", r,
               ncclTeamRankToWorld(comm, world, r));
    EXPECT(ncclTeamRankToWorld(comm, world, nranks) == -1, "a rank past the team maps to %d",
           ncclTeamRankToWorld(comm, world, nranks));
    EXPECT(ncclTeamRankToLsa(comm, world, rank) == 0, "ncclTeamRankToLsa(self) = %d",
           ncclTeamRankToLsa(comm, world, rank));
    if (nranks > 1)
        EXPECT(ncclTeamRankToLsa(comm, world, (rank + 1) % nranks) == -1,
               "ncclTeamRankToLsa(other) = %d",
               ncclTeamRankToLsa(comm, world, (rank + 1) % nranks));
    EXPECT(ncclLLA2ACalcSlots(10, 16) == 20, "ncclLLA2ACalcSlots(10, 16) = %d",
           ncclLLA2ACalcSlots(10, 16));
    EXPECT(ncclLLA2ACalcSlots(-1, 16) == 0, "ncclLLA2ACalcSlots(-1, 16) = %d",
           ncclLLA2ACalcSlots(-1, 16));

    ncclDevResourceRequirements_t res;
    memset(&res, 0, sizeof(res));
    ncclLsaBarrierHandle_t lsah;
    ncclGinBarrierHandle_t ginh;
    ncclLLA2AHandle_t llh;
    EXPECT(ncclLsaBarrierCreateRequirement(lsa, 3, &lsah, &res) == ncclSuccess &&
               res.bufferSize == 3 * 2 * 4 && res.outBufferHandle == &lsah.bufHandle &&
               lsah.nBarriers == 3,
           "ncclLsaBarrierCreateRequirement: %zu bytes, %d barriers", res.bufferSize,
           lsah.nBarriers);
    /* A GIN barrier keeps its epoch in its signal's shadow: signals, no buffer. */
    EXPECT(ncclGinBarrierCreateRequirement(comm, rail, 2, &ginh, &res) == ncclSuccess &&
               res.bufferSize == 0 && res.ginSignalCount == 2 &&
               res.outGinSignalStart == &ginh.signal0 && res.outBufferHandle == NULL,
           "ncclGinBarrierCreateRequirement: %zu bytes, %d signals", res.bufferSize,
           res.ginSignalCount);
    EXPECT(ncclLLA2ACreateRequirement(1, 20, &llh, &res) == ncclSuccess &&
               res.bufferSize == 41 * 16 && llh.nSlots == 20 &&
               res.outBufferHandle == &llh.bufHandle,
           "ncclLLA2ACreateRequirement: %zu bytes, %u slots", res.bufferSize, llh.nSlots);
    EXPECT_ERROR(ncclLsaBarrierCreateRequirement(lsa, -1, &lsah, &res), ncclInvalidArgument,
                 "ncclLsaBarrierCreateRequirement");

    long total = 0;
    if (ncclAllReduce(&failures, &total, 1, ncclInt64, ncclSum, comm, NULL) != ncclSuccess)
        total = 1;
    ncclCommFinalize(comm);
    ncclCommDestroy(comm);
    if (rank == 0) printf("compat_devapi: %d ranks: %ld failures\n", nranks, total);
    return total ? 1 : 0;
}
