/*
 * Communicator lifecycle: unique ids, init (blocking, non-blocking, grouped), finalize,
 * destroy, abort, and the queries.
 */
#include "group.h"
#include "mgmt.h"
#include "rma.h"
#include "util/cuda.h"
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

/* ids: nids unique ids (several only for ncclCommInitRankScalable). */
static ncclResult_t init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *ids, int nids,
                              int rank, const ncclConfig_t *config, const char *fn)
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
    struct zn_join join = { .id = ids[0] };
    if (nids > 1) {
        join.ids = malloc((size_t)nids * sizeof(*ids));
        if (!join.ids) {
            zn_comm_free(c);
            return zn_error(ncclSystemError, ZN_INIT, "%s: out of memory for %d ids", fn, nids);
        }
        memcpy(join.ids, ids, (size_t)nids * sizeof(*ids));
        join.nids = nids;
    }
    if (zn_group_depth() > 0) {
        struct zn_gop g = { .kind = ZN_GOP_INIT, .comm = c, .join = join };
        ncclResult_t res = zn_group_submit(&g);
        if (res != ncclSuccess) {
            free(join.ids);
            zn_comm_free(c);
            return res;
        }
        *out = c;
        return cfg.blocking ? ncclSuccess : ncclInProgress;
    }
    if (!cfg.blocking) {
        ncclResult_t res = zn_comm_setup_async(c, &join);
        if (res != ncclSuccess) {
            free(join.ids);
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
    return init_rank(comm, nranks, &commId, 1, rank, config, "ncclCommInitRankConfig");
}

ZN_API(ncclResult_t, ncclCommInitRank, ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    return init_rank(comm, nranks, &commId, 1, rank, NULL, "ncclCommInitRank");
}

ZN_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t *newcomm, int nranks, int myrank, int nId,
       ncclUniqueId *commIds, ncclConfig_t *config)
{
    zn_params();
    if (nId < 1 || !commIds)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "ncclCommInitRankScalable: invalid nId %d or commIds %p", nId,
                        (void *)commIds);
    /* Every rank has the same list; the roots share the rendezvous (bootstrap/scalable.c). */
    return init_rank(newcomm, nranks, commIds, nId, myrank, config, "ncclCommInitRankScalable");
}

ZN_API(ncclResult_t, ncclCommInitAll, ncclComm_t *comms, int ndev, const int *devlist)
{
    zn_params();
    if (!comms || ndev < 1)
        return zn_error(ncclInvalidArgument, ZN_INIT, "ncclCommInitAll: invalid comms %p / ndev %d",
                        (void *)comms, ndev);
    ncclUniqueId id;
    ZN_CHECK(zn_boot_get_private_id(&id));
    /* With GPUs, rank i drives device devlist[i] (or i); the communicator kind and device are
     * taken when each init is called, so set the device around each. */
    int gpus = zn_cuda_available() && strcmp(zn_params()->device, "host") != 0;
    int cur = gpus ? zn_cuda_current_device() : -1;
    ZN_CHECK(ncclGroupStart());
    ncclResult_t res = ncclSuccess;
    for (int i = 0; i < ndev && res == ncclSuccess; i++) {
        if (gpus) res = zn_cuda_set_device(devlist ? devlist[i] : i);
        if (res == ncclSuccess)
            res = init_rank(&comms[i], ndev, &id, 1, i, NULL, "ncclCommInitAll");
    }
    if (gpus && cur >= 0) zn_cuda_set_device(cur);
    ncclResult_t end = ncclGroupEnd();
    return res != ncclSuccess ? res : end;
}

/* Finalize on host communicators: every call completed before it returned, so what is left is
 * to know that every peer is done too. After the barrier no peer still needs this rank's
 * connections or shared memory, and destroy is a local matter. */
static ncclResult_t finalize_job(struct ncclComm *c)
{
    /* A cuda communicator's work is done when its kernels are: wait for the device first. */
    if (c->kind == ZN_COMM_CUDA) {
        ZN_CHECK(zn_cuda_set_device(c->cuda_dev));
        ZN_CHECK(zn_cuda_device_sync());
    }
    /* One-sided operations between hosts end with every peer (collective). */
    zn_rma_finalize(c);
    ncclResult_t res = zn_boot_barrier(c->boot);
    zn_info(ZN_INIT, "comm %p rank %d finalized%s", (void *)c, c->rank,
            res == ncclSuccess ? "" : " with an error");
    return res;
}

ZN_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm)
{
    ZN_CHECK(zn_comm_check(comm, "ncclCommFinalize"));
    if (atomic_load(&comm->revoked))
        return zn_error(ncclInvalidUsage, ZN_INIT,
                        "ncclCommFinalize: comm %p was revoked (ncclCommRevoke), and finalizing a "
                        "revoked communicator is invalid: destroy it (ncclCommDestroy)",
                        (void *)comm);
    ncclResult_t st = (ncclResult_t)atomic_load(&comm->async_err);
    if (comm->finalized) return st == ncclInProgress ? ncclInProgress : ncclSuccess;
    if (st == ncclInProgress)
        return zn_error(ncclInvalidUsage, ZN_INIT,
                        "ncclCommFinalize: comm %p is still initialising: wait for "
                        "ncclCommGetAsyncError to return ncclSuccess",
                        (void *)comm);
    comm->finalized = 1;
    /* A failed communicator finalizes without its peers (some may be gone); its error stays
     * readable. */
    if (st != ncclSuccess || !comm->boot) return ncclSuccess;
    if (!comm->config.blocking) return zn_comm_run_async(comm, finalize_job, "ncclCommFinalize");
    atomic_fetch_add(&comm->busy, 1);
    ncclResult_t res = finalize_job(comm);
    if (res != ncclSuccess) zn_comm_set_error(comm, res);
    atomic_fetch_sub(&comm->busy, 1);
    return res;
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
    zn_windows_free(comm);
    zn_comm_free(comm);
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclCommAbort, ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    ZN_CHECK(zn_comm_check(comm, "ncclCommAbort"));
    atomic_store(&comm->abort_flag, 1);
    atomic_store(&comm->boot_abort, 1); /* the bootstrap of a revoked communicator */
    char who[128] = "", msg[200];
    if (comm->peers)
        zn_peer_str(&comm->tctx, comm->rank, who, sizeof(who));
    else
        snprintf(who, sizeof(who), "rank %d", comm->rank);
    snprintf(msg, sizeof(msg), "%s aborted its communicator (ncclCommAbort)", who);
    /* Peers waiting on this rank through shared memory learn it at once. */
    if (comm->arena) zn_arena_set_abort(comm->arena, ncclRemoteError, msg);
    /* GPU kernels watch this word in their waits and stop. */
    if (comm->host_words) ((volatile uint32_t *)comm->host_words)[0] = 1;
    wait_idle(comm);
    zn_conns_abort(comm->conns, msg);
    zn_info(ZN_INIT, "comm %p rank %d aborted", (void *)comm, comm->rank);
    zn_windows_free(comm);
    zn_comm_free(comm);
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t *asyncError)
{
    ZN_CHECK(zn_comm_check(comm, "ncclCommGetAsyncError"));
    if (!asyncError)
        return zn_error(ncclInvalidArgument, ZN_CALL, "ncclCommGetAsyncError: asyncError is NULL");
    if (comm->kind == ZN_COMM_CUDA && atomic_load(&comm->async_err) == ncclSuccess) {
        const char *why = zn_cuda_failure(&comm->cuda);
        if (why) zn_comm_set_error(comm, zn_error(ncclRemoteError, ZN_COLL, "%s", why));
    }
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
