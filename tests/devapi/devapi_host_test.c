/*
 * devapi_host: the device API's host calls on host communicators (no GPU), built in C against
 * zinc's nccl_device.h: argument checks, what a host communicator supports, teams, the
 * requirement helpers' sizes, and window pointers (a host window: an LSA team of one).
 *
 * Layouts: requirements, properties and device communicators of NCCL 2.30's layout (made
 * with the initializers) and of 2.28.9's (devapi_legacy.h's copy of it, as a program built
 * against that header passes them) are read; structs of neither (no initializer, a 2.29 or a
 * future version, an impossible size) are refused with a message saying why.
 *
 * Also, within one process: three communicators of one thread (ncclCommInitAll) register two
 * windows each inside one group. Each registration waits for its peers' (an allgather), so
 * they can only complete if the group runs them together at ncclGroupEnd; registered one at a
 * time they would wait for ZINC_TIMEOUT and fail.
 *
 *   ZINC_DEVICE=host zinc-run -n N devapi_host
 */
#include <nccl.h>
#include <nccl_device.h>

#include "devapi_legacy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;
static long failures;

#define EXPECT(cond, ...)                                                   \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "[%d] FAIL %s:%d: ", rank, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fprintf(stderr, "\n");                                          \
            failures++;                                                     \
        }                                                                   \
    } while (0)

/* call must return want, and the last error must mention what. */
#define EXPECT_ERR(call, want, what)                                                      \
    do {                                                                                  \
        ncclResult_t r_ = (call);                                                         \
        EXPECT(r_ == (want) && strstr(ncclGetLastError(NULL), (what)),                    \
               "%s returned %d (%s), expected %d and a message naming \"%s\"", #call, r_, \
               ncclGetLastError(NULL), (int)(want), (what));                              \
    } while (0)

static int env_int(const char *a, int def)
{
    const char *v = getenv(a);
    return v && *v ? atoi(v) : def;
}

int main(void)
{
    rank = env_int("ZINC_RANK", 0);
    nranks = env_int("ZINC_NRANKS", 1);
    ncclUniqueId id;
    ncclComm_t comm;
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, nranks, id, rank)) {
        fprintf(stderr, "[%d] init failed: %s\n", rank, ncclGetLastError(NULL));
        return 2;
    }
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    ncclDevComm_t dev;
    memset(&dev, 0, sizeof(dev));

    /* Arguments, checked before anything else. */
    EXPECT_ERR(ncclDevCommCreate(NULL, &reqs, &dev), ncclInvalidArgument, "comm is NULL");
    EXPECT_ERR(ncclDevCommCreate(comm, NULL, &dev), ncclInvalidArgument, "reqs is NULL");
    EXPECT_ERR(ncclDevCommCreate(comm, &reqs, NULL), ncclInvalidArgument, "outDevComm is NULL");
    reqs.lsaBarrierCount = -1;
    EXPECT_ERR(ncclDevCommCreate(comm, &reqs, &dev), ncclInvalidArgument, "lsaBarrierCount");
    reqs.lsaBarrierCount = 0;
    reqs.ginSignalCount = -3;
    EXPECT_ERR(ncclDevCommCreate(comm, &reqs, &dev), ncclInvalidArgument, "ginSignalCount");
    reqs.ginSignalCount = 1 << 30;
    EXPECT_ERR(ncclDevCommCreate(comm, &reqs, &dev), ncclInvalidArgument, "ginSignalCount");
    /* GIN resources need GIN turned on (NCCL 2.30's rule). */
    reqs.ginSignalCount = 1;
    EXPECT_ERR(ncclDevCommCreate(comm, &reqs, &dev), ncclInvalidArgument, "ginConnectionType");
    reqs.ginSignalCount = 0;
    reqs.barrierCount = 2;
    EXPECT_ERR(ncclDevCommCreate(comm, &reqs, &dev), ncclInvalidArgument, "ginConnectionType");
    reqs.barrierCount = 0;
    reqs.worldGinBarrierCount = 1;
    reqs.ginConnectionType = NCCL_GIN_CONNECTION_RAIL;
    EXPECT_ERR(ncclDevCommCreate(comm, &reqs, &dev), ncclInvalidArgument, "worldGinBarrierCount");
    reqs.worldGinBarrierCount = 0;
    reqs.ginConnectionType = NCCL_GIN_CONNECTION_NONE;
    reqs.lsaMultimem = true;
    EXPECT_ERR(ncclDevCommCreate(comm, &reqs, &dev), ncclInvalidUsage, "multimem");
    reqs.lsaMultimem = false;
    ncclTeamRequirements_t treq;
    memset(&treq, 0, sizeof(treq));
    treq.team = ncclTeamWorld(comm);
    treq.multimem = true;
    reqs.teamRequirementsList = &treq;
    EXPECT_ERR(ncclDevCommCreate(comm, &reqs, &dev), ncclInvalidUsage, "multimem");
    reqs.teamRequirementsList = NULL;
    ncclDevResourceRequirements_t bad;
    memset(&bad, 0, sizeof(bad));
    bad.bufferAlign = 48;
    reqs.resourceRequirementsList = &bad;
    EXPECT_ERR(ncclDevCommCreate(comm, &reqs, &dev), ncclInvalidArgument, "bufferAlign");
    reqs.resourceRequirementsList = NULL;
    /* Valid requirements on a host communicator: the device API needs a CUDA one. */
    EXPECT_ERR(ncclDevCommCreate(comm, &reqs, &dev), ncclInvalidUsage, "host communicator");
    reqs.barrierCount = reqs.ginSignalCount = reqs.worldGinBarrierCount = 2;
    reqs.ginConnectionType = NCCL_GIN_CONNECTION_FULL;
    EXPECT_ERR(ncclDevCommCreate(comm, &reqs, &dev), ncclInvalidUsage, "host communicator");
    reqs.ginConnectionType = NCCL_GIN_CONNECTION_NONE;
    reqs.ginForceEnable = true; /* the old way to ask for GIN */
    EXPECT_ERR(ncclDevCommCreate(comm, &reqs, &dev), ncclInvalidUsage, "host communicator");
    ncclDevCommRequirements_t fresh = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs = fresh;

    /* Requirements of neither layout. Not made with the initializer: */
    ncclDevCommRequirements_t bare;
    memset(&bare, 0, sizeof(bare));
    bare.size = sizeof(bare);
    EXPECT_ERR(ncclDevCommCreate(comm, &bare, &dev), ncclInvalidUsage, "INITIALIZER");
    /* zeroed by hand: reads as a 2.28.9 struct whose ginForceEnable byte holds 2 */
    bare.size = 0;
    bare.lsaBarrierCount = 2;
    EXPECT_ERR(ncclDevCommCreate(comm, &bare, &dev), ncclInvalidUsage, "2.28.9");
    /* from NCCL 2.29's header, from a newer one, an impossible size: */
    ncclDevCommRequirements_t other = reqs;
    other.version = NCCL_VERSION(2, 29, 7);
    EXPECT_ERR(ncclDevCommCreate(comm, &other, &dev), ncclInvalidUsage, "2.29.7");
    other.version = NCCL_VERSION(2, 31, 0);
    EXPECT_ERR(ncclDevCommCreate(comm, &other, &dev), ncclInvalidUsage, "newer");
    other = reqs;
    other.size = 8;
    EXPECT_ERR(ncclDevCommCreate(comm, &other, &dev), ncclInvalidUsage, "reqs->size is 8");
    /* An older 2.30 (2.30.4: no GIN signal hints; its padding is not read) is taken. */
    other = reqs;
    other.version = NCCL_VERSION(2, 30, 4);
    other.ginStrongSignalsRequired = 7;
    EXPECT_ERR(ncclDevCommCreate(comm, &other, &dev), ncclInvalidUsage, "host communicator");

    /* NCCL 2.28.9's layout, as a program built against that header passes it. */
    struct zn_devreqs_v22809 old;
    memset(&old, 0, sizeof(old));
    old.lsaMultimem = true;
    EXPECT_ERR(ncclDevCommCreate(comm, (ncclDevCommRequirements_t *)&old, &dev), ncclInvalidUsage,
               "multimem");
    old.lsaMultimem = false;
    old.ginCounterCount = -1;
    EXPECT_ERR(ncclDevCommCreate(comm, (ncclDevCommRequirements_t *)&old, &dev),
               ncclInvalidArgument, "ginCounterCount");
    /* 2.28.9 had no connection type: GIN resources alone turned GIN on. */
    old.ginCounterCount = 1;
    old.barrierCount = 3;
    EXPECT_ERR(ncclDevCommCreate(comm, (ncclDevCommRequirements_t *)&old, &dev), ncclInvalidUsage,
               "host communicator");
    ncclTeamRequirements_t oldteam;
    memset(&oldteam, 0, sizeof(oldteam));
    oldteam.multimem = true;
    old.teamRequirementsList = &oldteam;
    EXPECT_ERR(ncclDevCommCreate(comm, (ncclDevCommRequirements_t *)&old, &dev), ncclInvalidUsage,
               "team requirement 0");
    EXPECT_ERR(ncclDevCommDestroy(comm, NULL), ncclInvalidArgument, "devComm is NULL");
    /* A device communicator of either layout that this library did not make. */
    EXPECT_ERR(ncclDevCommDestroy(comm, &dev), ncclInvalidArgument, "not made by");
    dev.magic = NCCL_API_MAGIC;
    dev.version = NCCL_VERSION_CODE;
    EXPECT_ERR(ncclDevCommDestroy(comm, &dev), ncclInvalidArgument, "not made by");
    dev.version = NCCL_VERSION(2, 31, 0);
    EXPECT_ERR(ncclDevCommDestroy(comm, &dev), ncclInvalidUsage, "newer");
    struct zn_devcomm_v22809 olddev;
    memset(&olddev, 0, sizeof(olddev));
    EXPECT_ERR(ncclDevCommDestroy(comm, (ncclDevComm_t *)&olddev), ncclInvalidArgument,
               "not made by");

    /* What a host communicator supports. */
    ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
    EXPECT(ncclCommQueryProperties(comm, &props) == ncclSuccess, "ncclCommQueryProperties: %s",
           ncclGetLastError(NULL));
    EXPECT(props.rank == rank && props.nRanks == nranks && !props.deviceApiSupport &&
               !props.multimemSupport && props.ginType == NCCL_GIN_TYPE_NONE &&
               props.nLsaTeams == nranks && props.cudaDev == -1,
           "properties: rank %d nRanks %d deviceApi %d multimem %d gin %d nLsaTeams %d cudaDev %d",
           props.rank, props.nRanks, props.deviceApiSupport, props.multimemSupport,
           (int)props.ginType, props.nLsaTeams, props.cudaDev);
    EXPECT_ERR(ncclCommQueryProperties(comm, NULL), ncclInvalidArgument, "props is NULL");
    ncclCommProperties_t small = props;
    small.size = 8;
    EXPECT_ERR(ncclCommQueryProperties(comm, &small), ncclInvalidUsage, "props->size");
    small.size = sizeof(small);
    small.magic = 0;
    EXPECT_ERR(ncclCommQueryProperties(comm, &small), ncclInvalidUsage, "INITIALIZER");
    small.magic = NCCL_API_MAGIC;
    small.version = NCCL_VERSION(2, 31, 0);
    EXPECT_ERR(ncclCommQueryProperties(comm, &small), ncclInvalidUsage, "newer");
    /* An older, shorter struct (2.29.2's ended after multimemSupport, 40 bytes): the fields
     * past its size are not written. */
    ncclCommProperties_t shorter = NCCL_COMM_PROPERTIES_INITIALIZER;
    shorter.size = 40;
    shorter.version = NCCL_VERSION(2, 29, 2);
    shorter.nLsaTeams = -7;
    shorter.railedGinType = (ncclGinType_t)99;
    EXPECT(ncclCommQueryProperties(comm, &shorter) == ncclSuccess && shorter.rank == rank &&
               shorter.nRanks == nranks && shorter.nLsaTeams == -7 &&
               (int)shorter.railedGinType == 99,
           "40-byte properties: rank %d nRanks %d nLsaTeams %d railedGinType %d", shorter.rank,
           shorter.nRanks, shorter.nLsaTeams, (int)shorter.railedGinType);
    void *mp = NULL;
    ncclMultimemHandle_t mmh = { NULL };
    EXPECT_ERR(ncclGetMultimemDevicePointer(NULL, 0, mmh, &mp), ncclInvalidUsage, "multimem");

    /* Teams: host communicators have LSA teams of one. */
    ncclTeam_t world = ncclTeamWorld(comm), lsa = ncclTeamLsa(comm), rail = ncclTeamRail(comm);
    EXPECT(world.nRanks == nranks && world.rank == rank && world.stride == 1, "world {%d %d %d}",
           world.nRanks, world.rank, world.stride);
    EXPECT(lsa.nRanks == 1 && lsa.rank == 0 && lsa.stride == 1, "lsa {%d %d %d}", lsa.nRanks,
           lsa.rank, lsa.stride);
    EXPECT(rail.nRanks == nranks && rail.rank == rank && rail.stride == 1, "rail {%d %d %d}",
           rail.nRanks, rail.rank, rail.stride);
    for (int r = 0; r < nranks; r++) {
        EXPECT(ncclTeamRankToWorld(comm, world, r) == r, "ncclTeamRankToWorld(%d)", r);
        EXPECT(ncclTeamRankToLsa(comm, world, r) == (r == rank ? 0 : -1), "ncclTeamRankToLsa(%d)",
               r);
        EXPECT(ncclTeamRankIsMember(rail, world, r), "rank %d not in the rail team", r);
        EXPECT(ncclTeamRankToTeam(rail, world, r) == r, "ncclTeamRankToTeam(%d)", r);
    }
    EXPECT(ncclTeamRankToWorld(comm, world, nranks) == -1, "a rank past the world maps");
    /* Difference of a team of 8 and its evens (caller 4 = even index 2): the odds. */
    ncclTeam_t eight = { 8, 4, 1 }, evens = { 4, 2, 2 };
    for (int i = 0; i < 4; i++)
        EXPECT(ncclTeamRankInDifference(eight, evens, i) == 2 * i + 1,
               "ncclTeamRankInDifference(%d) = %d", i, ncclTeamRankInDifference(eight, evens, i));
    ncclTeam_t inner = ncclTeamInnerFactor(eight, 2), outer = ncclTeamOuterFactor(eight, 2);
    EXPECT(inner.nRanks == 2 && inner.rank == 0 && inner.stride == 1 && outer.nRanks == 4 &&
               outer.rank == 2 && outer.stride == 2,
           "factors {%d %d %d} {%d %d %d}", inner.nRanks, inner.rank, inner.stride, outer.nRanks,
           outer.rank, outer.stride);

    /* Requirement helpers: sizes as their headers lay the buffers out. */
    ncclDevResourceRequirements_t res;
    ncclLsaBarrierHandle_t lh;
    ncclTeam_t four = { 4, 1, 1 };
    EXPECT(ncclLsaBarrierCreateRequirement(four, 3, &lh, &res) == ncclSuccess &&
               res.bufferSize == 3 * (1 + 4) * 4 && res.outBufferHandle == &lh.bufHandle &&
               lh.nBarriers == 3 && res.next == NULL,
           "LSA barrier requirement: %zu bytes", res.bufferSize);
    EXPECT_ERR(ncclLsaBarrierCreateRequirement(four, -1, &lh, &res), ncclInvalidArgument,
               "nBarriers -1");
    EXPECT_ERR(ncclLsaBarrierCreateRequirement(four, 1, NULL, &res), ncclInvalidArgument,
               "outHandle is NULL");
    ncclGinBarrierHandle_t gh;
    EXPECT(ncclGinBarrierCreateRequirement(comm, rail, 5, &gh, &res) == ncclSuccess &&
               res.bufferSize == 0 && res.ginSignalCount == 5 &&
               res.outGinSignalStart == &gh.signal0 && res.outBufferHandle == NULL,
           "GIN barrier requirement: %zu bytes, %d signals", res.bufferSize, res.ginSignalCount);
    EXPECT_ERR(ncclGinBarrierCreateRequirement(NULL, rail, 1, &gh, &res), ncclInvalidArgument,
               "comm is NULL");
    ncclLLA2AHandle_t ah;
    EXPECT(ncclLLA2ACalcSlots(10, 16) == 20 && ncclLLA2ACalcSlots(3, 1) == 3 &&
               ncclLLA2ACalcSlots(-1, 8) == 0,
           "ncclLLA2ACalcSlots");
    EXPECT(ncclLLA2ACreateRequirement(2, 20, &ah, &res) == ncclSuccess &&
               res.bufferSize == 2 * (1 + 40) * 16 && ah.nSlots == 20 &&
               res.outBufferHandle == &ah.bufHandle,
           "LL all-to-all requirement: %zu bytes", res.bufferSize);
    EXPECT_ERR(ncclLLA2ACreateRequirement(-1, 2, &ah, &res), ncclInvalidArgument, "nBlocks -1");

    /* Window pointers: a host window is its own LSA team. */
    enum { N = 4096 };
    char *buf = aligned_alloc(4096, N);
    ncclWindow_t win = NULL;
    EXPECT(ncclCommWindowRegister(comm, buf, N, &win, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess,
           "ncclCommWindowRegister: %s", ncclGetLastError(NULL));
    void *p = NULL;
    EXPECT(ncclGetLsaDevicePointer(win, 100, 0, &p) == ncclSuccess && p == buf + 100,
           "ncclGetLsaDevicePointer(self) = %p, expected %p", p, (void *)(buf + 100));
    EXPECT(ncclGetPeerDevicePointer(win, 7, rank, &p) == ncclSuccess && p == buf + 7,
           "ncclGetPeerDevicePointer(self) = %p", p);
    EXPECT_ERR(ncclGetLsaDevicePointer(win, N, 0, &p), ncclInvalidArgument, "past the window");
    EXPECT_ERR(ncclGetLsaDevicePointer(win, 0, 1, &p), ncclInvalidArgument, "outside the LSA");
    EXPECT_ERR(ncclGetLsaDevicePointer(win, 0, 0, NULL), ncclInvalidArgument, "outPtr is NULL");
    if (nranks > 1)
        EXPECT_ERR(ncclGetPeerDevicePointer(win, 0, (rank + 1) % nranks, &p), ncclInvalidArgument,
                   "not in the LSA team");
    EXPECT_ERR(ncclGetLsaMultimemDevicePointer(win, 0, &p), ncclInvalidUsage, "multimem");
    /* A window that is not registered (a stray pointer, a deregistered handle). */
    EXPECT_ERR(ncclGetLsaDevicePointer((ncclWindow_t)buf, 0, 0, &p), ncclInvalidArgument,
               "not a registered window");
    EXPECT(ncclCommWindowDeregister(comm, win) == ncclSuccess, "deregister: %s",
           ncclGetLastError(NULL));
    EXPECT_ERR(ncclGetLsaDevicePointer(win, 0, 0, &p), ncclInvalidArgument,
               "not a registered window");
    free(buf);

    /* Windows of several communicators of this thread in one group. */
    enum { NC = 3 };
    ncclComm_t all[NC];
    EXPECT(ncclCommInitAll(all, NC, NULL) == ncclSuccess, "ncclCommInitAll: %s",
           ncclGetLastError(NULL));
    char *bufs[NC][2];
    ncclWindow_t wins[NC][2];
    memset(wins, 0, sizeof(wins));
    EXPECT(ncclGroupStart() == ncclSuccess, "ncclGroupStart");
    for (int c = 0; c < NC; c++)
        for (int k = 0; k < 2; k++) {
            bufs[c][k] = aligned_alloc(4096, N);
            EXPECT(ncclCommWindowRegister(all[c], bufs[c][k], N, &wins[c][k],
                                          NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess,
                   "ncclCommWindowRegister in a group: %s", ncclGetLastError(NULL));
        }
    EXPECT(ncclGroupEnd() == ncclSuccess, "ncclGroupEnd of the registrations: %s",
           ncclGetLastError(NULL));
    for (int c = 0; c < NC; c++)
        for (int k = 0; k < 2; k++) {
            p = NULL;
            EXPECT(wins[c][k] && ncclGetLsaDevicePointer(wins[c][k], 8, 0, &p) == ncclSuccess &&
                       p == bufs[c][k] + 8,
                   "comm %d window %d: %p -> %p, expected %p", c, k, (void *)wins[c][k], p,
                   (void *)(bufs[c][k] + 8));
            EXPECT(ncclCommWindowDeregister(all[c], wins[c][k]) == ncclSuccess,
                   "deregister comm %d window %d: %s", c, k, ncclGetLastError(NULL));
            free(bufs[c][k]);
        }
    for (int c = 0; c < NC; c++) ncclCommDestroy(all[c]);

    long total = 0;
    if (ncclAllReduce(&failures, &total, 1, ncclInt64, ncclSum, comm, NULL) != ncclSuccess)
        total = 1;
    ncclCommFinalize(comm);
    ncclCommDestroy(comm);
    if (rank == 0) printf("devapi_host: %d ranks: %ld failures\n", nranks, total);
    return total ? 1 : 0;
}
