/*
 * compat_devapi: a C++ program built against the reference nccl_device.h (NCCL's device API)
 * and libnccl.so.2, run on zinc. zinc does not implement the device API: the functions that
 * return ncclResult_t must fail with ncclInvalidUsage and a message naming them, and the ones
 * that return a team or an int must return zinc's documented values (src/api/devapi.c). The
 * teams travel by value in registers, so this also checks that zinc's definitions have the
 * reference ABI.
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

#define EXPECT_UNSUPPORTED(call, name)                                                         \
    do {                                                                                       \
        ncclResult_t r_ = (call);                                                              \
        EXPECT(r_ == ncclInvalidUsage, "%s returned %d, expected ncclInvalidUsage", name, r_); \
        EXPECT(strstr(ncclGetLastError(NULL), name) != NULL,                                   \
               "%s: the message does not name it: %s", name, ncclGetLastError(NULL));          \
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
    EXPECT_UNSUPPORTED(ncclDevCommCreate(comm, &reqs, &dev), "ncclDevCommCreate");
    EXPECT_UNSUPPORTED(ncclDevCommDestroy(comm, &dev), "ncclDevCommDestroy");

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
    EXPECT_UNSUPPORTED(ncclLsaBarrierCreateRequirement(lsa, 1, &lsah, &res),
                       "ncclLsaBarrierCreateRequirement");
    EXPECT_UNSUPPORTED(ncclGinBarrierCreateRequirement(comm, rail, 1, &ginh, &res),
                       "ncclGinBarrierCreateRequirement");
    EXPECT_UNSUPPORTED(ncclLLA2ACreateRequirement(1, 20, &llh, &res), "ncclLLA2ACreateRequirement");

    long total = 0;
    if (ncclAllReduce(&failures, &total, 1, ncclInt64, ncclSum, comm, NULL) != ncclSuccess)
        total = 1;
    ncclCommFinalize(comm);
    ncclCommDestroy(comm);
    if (rank == 0) printf("compat_devapi: %d ranks: %ld failures\n", nranks, total);
    return total ? 1 : 0;
}
