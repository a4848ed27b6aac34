/*
 * NCCL's device API, host side: exported with NCCL's ABI, not implemented.
 *
 * Functions that return ncclResult_t fail with ncclInvalidUsage and a message that names the
 * function and what to use instead. The ones that return an int or a team by value cannot
 * report an error, so they return a value that is consistent and safe to use, and log one
 * WARN per function and process:
 *
 *   ncclTeamWorld        {nranks, rank, 1}: the real world team, known on the host
 *   ncclTeamLsa          {1, 0, 1}: a team of this rank alone (zinc gives no peer
 *                        load/store access through this API)
 *   ncclTeamRail         {nranks, rank, 1}: the outer factor of the world by that lsa size
 *   ncclTeamRankToWorld  comm rank + (rank - team.rank) * team.stride, or -1 when that is not
 *                        a rank of the communicator
 *   ncclTeamRankToLsa    0 for this rank, -1 for any other (the lsa team above)
 *   ncclLLA2ACalcSlots   maxElts * ceil(maxEltSize / 8), the slots an LL protocol with 8-byte
 *                        payload words would need; 0 for negative arguments. Positive, so a
 *                        caller's arithmetic on it is safe; the requirement call that takes it
 *                        then fails.
 */
#include "devapi.h"
#include "group.h"

#include <limits.h>
#include <stdatomic.h>

#define ZN_DEVAPI_ALT                                                                 \
    "NCCL's device API is not implemented in zinc; use zinc's one-sided connections " \
    "(zinc.h) once available, or the collective API"

static ncclResult_t unsupported(const char *fn)
{
    return zn_error(ncclInvalidUsage, ZN_CALL, "%s: " ZN_DEVAPI_ALT, fn);
}

/* One WARN per function and process: these are often called in loops. */
static void warn_once(atomic_flag *once, const char *fn, const char *returned)
{
    if (!atomic_flag_test_and_set(once))
        zn_warn(ZN_CALL, "%s: " ZN_DEVAPI_ALT "; returning %s", fn, returned);
}

static struct zn_dev_team team(int nranks, int rank, int stride)
{
    struct zn_dev_team t = { .nranks = nranks, .rank = rank, .stride = stride };
    return t;
}

ZN_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, const struct zn_dev_comm_reqs *reqs,
       struct zn_dev_comm *outDevComm)
{
    return unsupported("ncclDevCommCreate");
}

ZN_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, const struct zn_dev_comm *devComm)
{
    return unsupported("ncclDevCommDestroy");
}

ZN_API(struct zn_dev_team, ncclTeamWorld, ncclComm_t comm)
{
    static atomic_flag once = ATOMIC_FLAG_INIT;
    warn_once(&once, "ncclTeamWorld", "the world team computed on the host");
    if (zn_comm_check(comm, "ncclTeamWorld") != ncclSuccess) return team(1, 0, 1);
    return team(comm->nranks, comm->rank, 1);
}

ZN_API(struct zn_dev_team, ncclTeamLsa, ncclComm_t comm)
{
    static atomic_flag once = ATOMIC_FLAG_INIT;
    warn_once(&once, "ncclTeamLsa", "a team of the calling rank alone {1, 0, 1}");
    if (zn_comm_check(comm, "ncclTeamLsa") != ncclSuccess) return team(1, 0, 1);
    return team(1, 0, 1);
}

ZN_API(struct zn_dev_team, ncclTeamRail, ncclComm_t comm)
{
    static atomic_flag once = ATOMIC_FLAG_INIT;
    warn_once(&once, "ncclTeamRail", "the world team (the lsa team has one rank)");
    if (zn_comm_check(comm, "ncclTeamRail") != ncclSuccess) return team(1, 0, 1);
    return team(comm->nranks, comm->rank, 1);
}

ZN_API(int, ncclTeamRankToWorld, ncclComm_t comm, struct zn_dev_team t, int rank)
{
    static atomic_flag once = ATOMIC_FLAG_INIT;
    warn_once(&once, "ncclTeamRankToWorld", "the world rank computed on the host");
    if (zn_comm_check(comm, "ncclTeamRankToWorld") != ncclSuccess) return -1;
    long long w = (long long)comm->rank + ((long long)rank - t.rank) * t.stride;
    return w >= 0 && w < comm->nranks ? (int)w : -1;
}

ZN_API(int, ncclTeamRankToLsa, ncclComm_t comm, struct zn_dev_team t, int rank)
{
    static atomic_flag once = ATOMIC_FLAG_INIT;
    warn_once(&once, "ncclTeamRankToLsa", "0 for the calling rank, -1 for others");
    if (zn_comm_check(comm, "ncclTeamRankToLsa") != ncclSuccess) return -1;
    long long off = ((long long)rank - t.rank) * t.stride;
    return off == 0 ? 0 : -1;
}

ZN_API(ncclResult_t, ncclLsaBarrierCreateRequirement, struct zn_dev_team t, int nBarriers,
       struct zn_dev_lsa_barrier_handle *outHandle, struct zn_dev_res_reqs *outReq)
{
    return unsupported("ncclLsaBarrierCreateRequirement");
}

ZN_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t comm, struct zn_dev_team t,
       int nBarriers, struct zn_dev_gin_barrier_handle *outHandle, struct zn_dev_res_reqs *outReq)
{
    return unsupported("ncclGinBarrierCreateRequirement");
}

ZN_API(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize)
{
    static atomic_flag once = ATOMIC_FLAG_INIT;
    warn_once(&once, "ncclLLA2ACalcSlots", "maxElts * ceil(maxEltSize / 8)");
    if (maxElts < 0 || maxEltSize < 0) return 0;
    long long slots = (long long)maxElts * (((long long)maxEltSize + 7) / 8);
    return slots > INT_MAX ? INT_MAX : (int)slots;
}

ZN_API(ncclResult_t, ncclLLA2ACreateRequirement, int nBlocks, int nSlots,
       struct zn_dev_lla2a_handle *outHandle, struct zn_dev_res_reqs *outReq)
{
    return unsupported("ncclLLA2ACreateRequirement");
}
