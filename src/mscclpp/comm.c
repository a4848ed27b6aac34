/*
 * MSCCL++ communicators on zinc's bootstrap: init from a unique id or from the root's
 * "ip:port", the bootstrap collectives, destroy; error strings, logging and the bootstrap
 * timeout.
 */
#include "msc.h"
#include "util/clock.h"
#include "util/cuda.h"
#include "util/dump.h"
#include "util/err.h"
#include "util/handle.h"
#include "util/log.h"
#include "util/param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(mscclppUniqueId) == sizeof(ncclUniqueId), "ids are the same 128 bytes");

ZN_MSC_EXPORT mscclppResult_t mscclppGetUniqueId(mscclppUniqueId *uniqueId)
{
    (void)zn_params(); /* loads the parameters, which configures logging */
    if (!uniqueId)
        return zn_msc_res(
            zn_error(ncclInvalidArgument, ZN_INIT, "mscclppGetUniqueId: uniqueId is NULL"));
    ncclUniqueId id;
    ncclResult_t res = zn_boot_get_unique_id(&id);
    if (res == ncclSuccess) memcpy(uniqueId, &id, sizeof(id));
    return zn_msc_res(res);
}

/* Every rank's host, pid and GPU, and the communicator's hash that names its segments. */
static ncclResult_t exchange_peers(struct mscclppComm *c)
{
    ZN_CHECK(zn_calloc(&c->peers, (size_t)c->nranks, "peer table"));
    ZN_CHECK(zn_peer_info_local(&c->peers[c->rank]));
    c->peers[c->rank].rank = c->rank;
    c->peers[c->rank].cuda_dev = c->cuda_dev;
    if (c->cuda_dev >= 0)
        ZN_CHECK(zn_cuda_bus_id(c->cuda_dev, c->peers[c->rank].bus_id,
                                sizeof(c->peers[c->rank].bus_id)));
    ZN_CHECK(zn_boot_allgather(c->boot, c->peers, sizeof(*c->peers)));
    /* Like libnccl's hash, but salted differently, so that a communicator of each library
     * made over the same bootstrap id never shares segment names. */
    uint64_t h = (zn_boot_magic(c->boot) ^ c->peers[0].nonce ^ 0x6d7363636c707070ull) *
                 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    c->tctx = (struct zn_tctx){ .rank = c->rank,
                                .nranks = c->nranks,
                                .peers = c->peers,
                                .boot = c->boot,
                                .comm_hash = h,
                                .abort_flag = &c->abort_flag };
    return ncclSuccess;
}

/* Communicators' memory (util/handle.h): a destroyed one stays readable, zeroed, so that a
 * second destroy or a call on it is refused instead of reading freed memory. */
static struct zn_handle_pool comm_pool = ZN_HANDLE_POOL_INIT("mscclpp communicator");

ncclResult_t zn_msc_comm_check(const struct mscclppComm *c, const char *fn)
{
    if (!c) return zn_error(ncclInvalidArgument, ZN_INIT, "%s: comm is NULL", fn);
    if (c->magic != ZN_MSC_COMM_MAGIC)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "%s: comm %p is not an mscclpp communicator (destroyed, or never "
                        "initialised?)",
                        fn, (const void *)c);
    return ncclSuccess;
}

/* The state dump (util/dump.h): one block per live communicator. */
static void dump_comm(void *obj, void *arg)
{
    (void)arg;
    const struct mscclppComm *c = obj;
    int nshm = 0, nib = 0, np2p = 0, own = 0;
    for (int i = 0; i < c->nconns; i++) {
        nshm += c->host[i].transport == mscclppTransportSHM;
        nib += c->host[i].transport == mscclppTransportIB;
        np2p += c->host[i].transport == mscclppTransportP2P;
    }
    for (const struct zn_msc_buf *b = c->own_bufs; b; b = b->next) own++;
    zn_warn(ZN_INIT,
            "state dump: mscclpp comm %p rank %d of %d, %s: %d connections declared (%d SHM, "
            "%d IB, %d P2P), %d set up in %d rounds; %d zincConnMemAlloc buffers, %d "
            "registered buffers; proxy %s%s",
            (const void *)c, c->rank, c->nranks, c->cuda_dev >= 0 ? "GPU" : "no GPU", c->nconns,
            nshm, nib, np2p, c->nsetup, c->nrounds, own, c->nregs,
            c->proxy ? "launched" : "not running", atomic_load(&c->abort_flag) ? ", aborting" : "");
    for (int i = 0; i < c->nconns; i++) {
        const struct zn_msc_conn *h = &c->host[i];
        zn_warn(ZN_INIT,
                "state dump:  connection %d to rank %d tag %d: %s, %llu bytes here, %llu at the "
                "peer, %s",
                i, h->remote_rank, h->tag,
                h->transport == mscclppTransportSHM  ? "SHM"
                : h->transport == mscclppTransportIB ? "IB"
                                                     : "P2P",
                (unsigned long long)h->local_size, (unsigned long long)h->remote_size,
                h->ready ? "set up" : "awaiting setup");
    }
}

static void dump_all(void *arg)
{
    zn_handle_each(&comm_pool, dump_comm, arg);
}

static void comm_free(struct mscclppComm *c)
{
    zn_handle_unlist(&comm_pool, c); /* out of the dump's sight first */
    zn_msc_proxy_free(c);
    for (int i = 0; c->host && i < c->nconns; i++) zn_msc_net_free(&c->host[i]);
    zn_msc_net_fini(c);
    zn_msc_reg_free_all(c);
    zn_msc_p2p_free_all(c);
    zn_msc_shm_free_all(c);
    if (c->watch) zn_peer_watch_destroy(c->watch);
    if (c->boot) zn_boot_destroy(c->boot);
    free(c->peers);
    free(c->dev);
    free(c->host);
    zn_handle_free(&comm_pool, c); /* zeroes the magic: later calls on c are refused */
    zn_dump_remove(dump_all, NULL);
}

static ncclResult_t comm_init(struct mscclppComm **out, int nranks, const ncclUniqueId *id,
                              int rank)
{
    if (nranks < 1)
        return zn_error(ncclInvalidArgument, ZN_INIT, "mscclppCommInitRank: nranks %d < 1", nranks);
    if (rank < 0 || rank >= nranks)
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "mscclppCommInitRank: rank %d outside [0, %d)", rank, nranks);
    struct mscclppComm *c;
    ZN_CHECK(zn_handle_alloc(&comm_pool, sizeof(*c), (void **)&c));
    zn_dump_add(dump_all, NULL);
    c->magic = ZN_MSC_COMM_MAGIC;
    ncclResult_t res;
    c->rank = rank;
    c->nranks = nranks;
    c->cuda_dev = zn_cuda_available() ? zn_cuda_current_device() : -1;
    zn_log_rank = rank;
    /* Fixed arrays: the pointers handed out by mscclppGetDeviceConnection stay valid while
     * more connections are declared. */
    c->cap = ZN_MSC_MAX_CONNS;
    ZN_CHECK_GOTO(zn_calloc(&c->dev, (size_t)c->cap, "connections"), res, fail);
    ZN_CHECK_GOTO(zn_calloc(&c->host, (size_t)c->cap, "connections"), res, fail);
    ZN_CHECK_GOTO(zn_boot_init(id, rank, nranks, &c->abort_flag, &c->boot), res, fail);
    ZN_CHECK_GOTO(exchange_peers(c), res, fail);
    ZN_CHECK_GOTO(zn_peer_watch_create(&c->tctx, &c->watch), res, fail);
    zn_info(ZN_INIT, "mscclpp communicator: rank %d of %d, %s", rank, nranks,
            c->cuda_dev >= 0 ? "GPU" : "no GPU");
    *out = c;
    return ncclSuccess;
fail:
    comm_free(c);
    return res;
}

ZN_MSC_EXPORT mscclppResult_t mscclppCommInitRank(mscclppComm_t *comm, int nranks,
                                                  const char *ipPortPair, int rank)
{
    (void)zn_params(); /* loads the parameters, which configures logging */
    if (!comm || !ipPortPair)
        return zn_msc_res(zn_error(ncclInvalidArgument, ZN_INIT, "mscclppCommInitRank: %s is NULL",
                                   !comm ? "comm" : "ipPortPair"));
    ncclUniqueId id;
    ncclResult_t res = zn_boot_id_from_addr(ipPortPair, &id);
    if (res == ncclSuccess) res = comm_init(comm, nranks, &id, rank);
    return zn_msc_res(res);
}

ZN_MSC_EXPORT mscclppResult_t mscclppCommInitRankFromId(mscclppComm_t *comm, int nranks,
                                                        mscclppUniqueId id, int rank)
{
    (void)zn_params(); /* loads the parameters, which configures logging */
    if (!comm)
        return zn_msc_res(
            zn_error(ncclInvalidArgument, ZN_INIT, "mscclppCommInitRankFromId: comm is NULL"));
    ncclUniqueId nid;
    memcpy(&nid, &id, sizeof(nid));
    return zn_msc_res(comm_init(comm, nranks, &nid, rank));
}

ZN_MSC_EXPORT mscclppResult_t mscclppBootstrapAllGather(mscclppComm_t comm, void *data, int size)
{
    ncclResult_t r = zn_msc_comm_check(comm, "mscclppBootstrapAllGather");
    if (r != ncclSuccess) return zn_msc_res(r);
    if (!data || size < 0)
        return zn_msc_res(zn_error(ncclInvalidArgument, ZN_BOOT,
                                   "mscclppBootstrapAllGather: bad argument (data %p, size %d)",
                                   data, size));
    return zn_msc_res(zn_boot_allgather(comm->boot, data, (size_t)size));
}

ZN_MSC_EXPORT mscclppResult_t mscclppBootstrapBarrier(mscclppComm_t comm)
{
    ncclResult_t r = zn_msc_comm_check(comm, "mscclppBootstrapBarrier");
    if (r != ncclSuccess) return zn_msc_res(r);
    return zn_msc_res(zn_boot_barrier(comm->boot));
}

ZN_MSC_EXPORT mscclppResult_t mscclppCommDestroy(mscclppComm_t comm)
{
    if (!comm) return mscclppSuccess;
    ncclResult_t r = zn_msc_comm_check(comm, "mscclppCommDestroy");
    if (r != ncclSuccess) return zn_msc_res(r);
    comm_free(comm);
    return mscclppSuccess;
}

ZN_MSC_EXPORT const char *mscclppGetErrorString(mscclppResult_t result)
{
    switch (result) {
    case mscclppSuccess: return "no error";
    case mscclppUnhandledCudaError: return "unhandled cuda error";
    case mscclppSystemError: return "unhandled system error";
    case mscclppInternalError: return "internal error";
    case mscclppInvalidArgument: return "invalid argument";
    case mscclppInvalidUsage: return "invalid usage";
    case mscclppRemoteError: return "remote process exited or there was a network error";
    case mscclppInProgress: return "MSCCL++ operation in progress";
    default: return "unknown result code";
    }
}

ZN_MSC_EXPORT mscclppResult_t mscclppCommRank(mscclppComm_t comm, int *rank)
{
    ncclResult_t r = zn_msc_comm_check(comm, "mscclppCommRank");
    if (r != ncclSuccess) return zn_msc_res(r);
    if (!rank)
        return zn_msc_res(zn_error(ncclInvalidArgument, ZN_INIT, "mscclppCommRank: rank is NULL"));
    *rank = comm->rank;
    return mscclppSuccess;
}

ZN_MSC_EXPORT mscclppResult_t mscclppCommSize(mscclppComm_t comm, int *size)
{
    ncclResult_t r = zn_msc_comm_check(comm, "mscclppCommSize");
    if (r != ncclSuccess) return zn_msc_res(r);
    if (!size)
        return zn_msc_res(zn_error(ncclInvalidArgument, ZN_INIT, "mscclppCommSize: size is NULL"));
    *size = comm->nranks;
    return mscclppSuccess;
}

/* zinc has one deadline for every wait (ZINC_TIMEOUT); this sets it for libmscclpp's copy of
 * zinc only, so libnccl's communicators in the same process keep theirs. */
ZN_MSC_EXPORT mscclppResult_t mscclppSetBootstrapConnTimeout(int timeout)
{
    if (timeout <= 0)
        return zn_msc_res(zn_error(ncclInvalidArgument, ZN_BOOT,
                                   "mscclppSetBootstrapConnTimeout: timeout %d s is not positive",
                                   timeout));
    zn_set_timeout_s(timeout);
    return mscclppSuccess;
}

ZN_MSC_EXPORT void mscclppDefaultLogHandler(const char *msg)
{
    fputs(msg, stderr);
}

ZN_MSC_EXPORT mscclppResult_t mscclppSetLogHandler(mscclppLogHandler_t handler)
{
    if (!handler)
        return zn_msc_res(
            zn_error(ncclInvalidArgument, ZN_INIT, "mscclppSetLogHandler: handler is NULL"));
    (void)zn_params(); /* loads the parameters, which configures logging */
    /* The default handler writes to stderr, as zinc's own log does unless ZINC_DEBUG_FILE
     * names a file: keep that file in use then. */
    zn_log_set_sink(handler == mscclppDefaultLogHandler ? NULL : handler);
    return mscclppSuccess;
}
