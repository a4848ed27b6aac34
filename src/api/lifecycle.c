/*
 * Communicator lifecycle: unique ids, init (blocking, non-blocking, grouped), finalize,
 * destroy, abort, and the queries.
 */
#include "group.h"
#include "util/param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

ZN_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId *uniqueId)
{
    zn_params();
    if (!uniqueId)
        return zn_error(ncclInvalidArgument, ZN_INIT, "ncclGetUniqueId: uniqueId is NULL");
    return zn_boot_get_unique_id(uniqueId);
}

static ncclResult_t init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank,
                              const ncclConfig_t *config, const char *fn)
{
    zn_params();
    if (!out) return zn_error(ncclInvalidArgument, ZN_INIT, "%s: comm is NULL", fn);
    *out = NULL;
    if (nranks < 1)
        return zn_error(ncclInvalidArgument, ZN_INIT, "%s: invalid nranks %d", fn, nranks);
    if (rank < 0 || rank >= nranks)
        return zn_error(ncclInvalidArgument, ZN_INIT, "%s: invalid rank %d (nranks %d)", fn, rank,
                        nranks);
    ncclConfig_t cfg;
    ZN_CHECK(zn_config_apply(config, &cfg));
    enum zn_comm_kind kind;
    int dev;
    ZN_CHECK(zn_comm_pick_kind(&kind, &dev));
    struct ncclComm *c;
    ZN_CHECK(zn_comm_alloc(nranks, rank, &cfg, &c));
    c->kind = kind;
    c->cuda_dev = dev;
    struct zn_join join = { .id = *id };
    if (zn_group_depth() > 0) {
        struct zn_gop g = { .kind = ZN_GOP_INIT, .comm = c, .join = join };
        ncclResult_t res = zn_group_submit(&g);
        if (res != ncclSuccess) {
            zn_comm_free(c);
            return res;
        }
        *out = c;
        return cfg.blocking ? ncclSuccess : ncclInProgress;
    }
    if (!cfg.blocking) {
        ncclResult_t res = zn_comm_setup_async(c, &join);
        if (res != ncclSuccess) {
            zn_comm_free(c);
            return res;
        }
        *out = c;
        return ncclInProgress;
    }
    ncclResult_t res = zn_comm_setup(c, &join);
    if (res != ncclSuccess) {
        zn_comm_free(c);
        return res;
    }
    *out = c;
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t *comm, int nranks, ncclUniqueId commId,
       int rank, ncclConfig_t *config)
{
    return init_rank(comm, nranks, &commId, rank, config, "ncclCommInitRankConfig");
}

ZN_API(ncclResult_t, ncclCommInitRank, ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    return init_rank(comm, nranks, &commId, rank, NULL, "ncclCommInitRank");
}

ZN_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t *newcomm, int nranks, int myrank, int nId,
       ncclUniqueId *commIds, ncclConfig_t *config)
{
    zn_params();
    if (nId < 1 || !commIds)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "ncclCommInitRankScalable: invalid nId %d or commIds %p", nId,
                        (void *)commIds);
    /* Every rank has the same list; the first root serves the whole rendezvous. */
    return init_rank(newcomm, nranks, &commIds[0], myrank, config, "ncclCommInitRankScalable");
}

ZN_API(ncclResult_t, ncclCommInitAll, ncclComm_t *comms, int ndev, const int *devlist)
{
    zn_params();
    if (!comms || ndev < 1)
        return zn_error(ncclInvalidArgument, ZN_INIT, "ncclCommInitAll: invalid comms %p / ndev %d",
                        (void *)comms, ndev);
    ncclUniqueId id;
    ZN_CHECK(zn_boot_get_private_id(&id));
    ZN_CHECK(ncclGroupStart());
    ncclResult_t res = ncclSuccess;
    for (int i = 0; i < ndev && res == ncclSuccess; i++)
        res = init_rank(&comms[i], ndev, &id, i, NULL, "ncclCommInitAll");
    ncclResult_t end = ncclGroupEnd();
    return res != ncclSuccess ? res : end;
}

ZN_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm)
{
    ZN_CHECK(zn_comm_check(comm, "ncclCommFinalize"));
    /* Host communicators complete every call before it returns, so there is nothing in flight
     * to flush; a failed communicator still finalizes (its error stays readable). */
    comm->finalized = 1;
    return ncclSuccess;
}

static void wait_idle(struct ncclComm *c)
{
    while (atomic_load(&c->busy) > 0 || atomic_load(&c->init_running)) {
        struct timespec ts = { 0, 100000 };
        nanosleep(&ts, NULL);
    }
}

ZN_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    ZN_CHECK(zn_comm_check(comm, "ncclCommDestroy"));
    if (atomic_load(&comm->init_running)) {
        /* A non-blocking init still running: stop it rather than wait up to the deadline. */
        atomic_store(&comm->abort_flag, 1);
    }
    wait_idle(comm);
    zn_info(ZN_INIT, "comm %p rank %d destroyed", (void *)comm, comm->rank);
    zn_comm_free(comm);
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclCommAbort, ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    ZN_CHECK(zn_comm_check(comm, "ncclCommAbort"));
    atomic_store(&comm->abort_flag, 1);
    char who[128] = "", msg[200];
    if (comm->peers)
        zn_peer_str(&comm->tctx, comm->rank, who, sizeof(who));
    else
        snprintf(who, sizeof(who), "rank %d", comm->rank);
    snprintf(msg, sizeof(msg), "%s aborted its communicator (ncclCommAbort)", who);
    /* Peers waiting on this rank through shared memory learn it at once. */
    if (comm->arena) zn_arena_set_abort(comm->arena, ncclRemoteError, msg);
    wait_idle(comm);
    zn_conns_abort(comm->conns, msg);
    zn_info(ZN_INIT, "comm %p rank %d aborted", (void *)comm, comm->rank);
    zn_comm_free(comm);
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t *asyncError)
{
    ZN_CHECK(zn_comm_check(comm, "ncclCommGetAsyncError"));
    if (!asyncError)
        return zn_error(ncclInvalidArgument, ZN_CALL, "ncclCommGetAsyncError: asyncError is NULL");
    *asyncError = (ncclResult_t)atomic_load(&comm->async_err);
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int *count)
{
    ZN_CHECK(zn_comm_check(comm, "ncclCommCount"));
    if (!count) return zn_error(ncclInvalidArgument, ZN_CALL, "ncclCommCount: count is NULL");
    *count = comm->nranks;
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int *rank)
{
    ZN_CHECK(zn_comm_check(comm, "ncclCommUserRank"));
    if (!rank) return zn_error(ncclInvalidArgument, ZN_CALL, "ncclCommUserRank: rank is NULL");
    *rank = comm->rank;
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int *device)
{
    ZN_CHECK(zn_comm_check(comm, "ncclCommCuDevice"));
    if (!device) return zn_error(ncclInvalidArgument, ZN_CALL, "ncclCommCuDevice: device is NULL");
    *device = comm->cuda_dev;
    return ncclSuccess;
}
