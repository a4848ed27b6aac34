/*
 * Communicator setup: join (bootstrap), exchange peer info, find the hosts, connect the
 * transports, map the shared-memory arena, and fill the views the lower layers get.
 */
#include "comm.h"
#include "util/clock.h"
#include "exec/cuda_stage.h"
#include "proxy/gpu_net_engine.h"
#include "proxy/service.h"
#include "topo/hosts.h"
#include "topo/reach.h"
#include "util/cuda.h"
#include "util/dump.h"
#include "util/param.h"
#include "util/thread.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Fields a config built against an older header does not have (or must not be trusted to
 * have set: NCCL's own rule, by the version in the struct) go back to the defaults. The size
 * decides what is copied, the version what is read: a config from a 2.28 header is 80 bytes
 * and says 22809, so the four fields of 2.29 and 2.30 keep their defaults. */
static void config_reset_newer(ncclConfig_t *c, const ncclConfig_t *def)
{
    unsigned v = c->version;
    if (v < (unsigned)NCCL_VERSION(2, 14, 0)) c->blocking = def->blocking;
    if (v < (unsigned)NCCL_VERSION(2, 17, 0)) {
        c->cgaClusterSize = def->cgaClusterSize;
        c->minCTAs = def->minCTAs;
        c->maxCTAs = def->maxCTAs;
        c->netName = def->netName;
    }
    if (v < (unsigned)NCCL_VERSION(2, 25, 0)) c->trafficClass = def->trafficClass;
    if (v < (unsigned)NCCL_VERSION(2, 27, 0)) {
        c->commName = def->commName;
        c->collnetEnable = def->collnetEnable;
        c->CTAPolicy = def->CTAPolicy;
        c->shrinkShare = def->shrinkShare;
        c->nvlsCTAs = def->nvlsCTAs;
    }
    if (v < (unsigned)NCCL_VERSION(2, 28, 0)) {
        c->nChannelsPerNetPeer = def->nChannelsPerNetPeer;
        c->nvlinkCentricSched = def->nvlinkCentricSched;
    }
    if (v < (unsigned)NCCL_VERSION(2, 29, 0)) {
        c->graphUsageMode = def->graphUsageMode;
        c->numRmaCtx = def->numRmaCtx;
    }
    if (v < (unsigned)NCCL_VERSION(2, 30, 0)) c->maxP2pPeers = def->maxP2pPeers;
    if (v < (unsigned)NCCL_VERSION(2, 30, 5)) c->graphStreamOrdering = def->graphStreamOrdering;
}

/* A field that must be UNDEF or in [lo, hi]. */
static ncclResult_t config_range(const char *field, int v, int lo, int hi)
{
    if (v == NCCL_CONFIG_UNDEF_INT || (v >= lo && v <= hi)) return ncclSuccess;
    return zn_error(ncclInvalidArgument, ZN_INIT, "config.%s must be %d..%d (got %d)", field, lo,
                    hi, v);
}

/* The environment's word on a config field (NCCL's rule: a valid value in the environment
 * overrides the config, an invalid one is ignored with a note). */
static void config_env(const char *name, int64_t env, int lo, int hi, int *field)
{
    if (env == NCCL_CONFIG_UNDEF_INT) return;
    if (env < lo || env > hi) {
        zn_info(ZN_ENV, "%s %lld is not valid (%d..%d): ignored", name, (long long)env, lo, hi);
        return;
    }
    if (*field != NCCL_CONFIG_UNDEF_INT && *field != env)
        zn_info(ZN_ENV, "config value %d replaced by %s=%lld", *field, name, (long long)env);
    *field = (int)env;
}

ncclResult_t zn_config_apply(const ncclConfig_t *user, ncclConfig_t *out)
{
    ncclConfig_t def = NCCL_CONFIG_INITIALIZER, c = def;
    if (user) {
        size_t size;
        memcpy(&size, user, sizeof(size)); /* only the size is sure to be there */
        if (size < offsetof(ncclConfig_t, blocking) + sizeof(int) || size > 4096)
            return zn_error(ncclInvalidArgument, ZN_INIT,
                            "config size %zu is not valid (not set by NCCL_CONFIG_INITIALIZER?)",
                            size);
        /* Older (smaller) config structs are accepted: copy what they have. */
        memcpy(&c, user, size < sizeof(c) ? size : sizeof(c));
        if (c.magic != NCCL_API_MAGIC)
            return zn_error(ncclInvalidArgument, ZN_INIT,
                            "config was not initialised with NCCL_CONFIG_INITIALIZER (magic 0x%x)",
                            c.magic);
        config_reset_newer(&c, &def);
    }
    c.size = sizeof(c);
    c.version = NCCL_VERSION_CODE;
    ZN_CHECK(config_range("blocking", c.blocking, 0, 1));
    ZN_CHECK(config_range("graphUsageMode", c.graphUsageMode, 0, 2));
    ZN_CHECK(config_range("numRmaCtx", c.numRmaCtx, 0, ZN_RMA_MAX_CTX));
    ZN_CHECK(config_range("maxP2pPeers", c.maxP2pPeers, 1, INT_MAX));
    ZN_CHECK(config_range("graphStreamOrdering", c.graphStreamOrdering, 0, 1));
    const struct zn_params *p = zn_params();
    config_env("NCCL_GRAPH_MIXING_SUPPORT", p->graph_mixing, 0, 1, &c.graphUsageMode);
    if (p->graph_mixing == 1) c.graphUsageMode = 2; /* mixing on: several graphs, or eager */
    config_env("NCCL_NUM_RMA_CTX", p->num_rma_ctx, 0, ZN_RMA_MAX_CTX, &c.numRmaCtx);
    config_env("NCCL_MAX_P2P_PEERS", p->max_p2p_peers, 1, INT_MAX, &c.maxP2pPeers);
    config_env("NCCL_GRAPH_STREAM_ORDERING", p->graph_stream_ordering, 0, 1,
               &c.graphStreamOrdering);
    if (c.blocking == NCCL_CONFIG_UNDEF_INT) c.blocking = 1;
    if (c.graphUsageMode == NCCL_CONFIG_UNDEF_INT) c.graphUsageMode = 2;
    if (c.numRmaCtx == NCCL_CONFIG_UNDEF_INT) c.numRmaCtx = 1;
    if (c.graphStreamOrdering == NCCL_CONFIG_UNDEF_INT) c.graphStreamOrdering = 1;
    if (c.graphStreamOrdering == 0 && c.graphUsageMode == 2) {
        zn_warn(ZN_INIT, "config: graphStreamOrdering 0 needs graphUsageMode 0 or 1 (graphs not "
                         "mixed), but graphUsageMode is 2: graphStreamOrdering 1 is used");
        c.graphStreamOrdering = 1;
    }
    /* maxP2pPeers stays UNDEF (every peer) until the communicator knows its size. */
    *out = c;
    return ncclSuccess;
}

struct zn_handle_pool zn_comm_pool = ZN_HANDLE_POOL_INIT("communicator");

ncclResult_t zn_comm_alloc(int nranks, int rank, const ncclConfig_t *config, struct ncclComm **out)
{
    struct ncclComm *c;
    ZN_CHECK(zn_handle_alloc(&zn_comm_pool, sizeof(*c), (void **)&c));
    zn_dump_add(zn_comm_dump_all, NULL);
    c->magic = ZN_COMM_MAGIC;
    c->rank = rank;
    c->nranks = nranks;
    c->config = *config;
    c->cuda_dev = -1;
    atomic_init(&c->async_err, ncclInProgress);
    pthread_mutex_init(&c->err_lock, NULL);
    pthread_mutex_init(&c->init_lock, NULL);
    pthread_cond_init(&c->init_cond, NULL);
    *out = c;
    return ncclSuccess;
}

ncclResult_t zn_comm_check(const struct ncclComm *comm, const char *fn)
{
    if (!comm) return zn_error(ncclInvalidArgument, ZN_CALL, "%s: comm is NULL", fn);
    if (comm->magic != ZN_COMM_MAGIC)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "%s: comm %p is not a communicator (destroyed, or never initialised?)", fn,
                        (const void *)comm);
    return ncclSuccess;
}

ncclResult_t zn_comm_check_active(const struct ncclComm *comm, const char *fn)
{
    ZN_CHECK(zn_comm_check(comm, fn));
    if (atomic_load(&comm->suspended))
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "%s: comm %p is suspended (ncclCommSuspend): call ncclCommResume first", fn,
                        (const void *)comm);
    return ncclSuccess;
}

ncclResult_t zn_comm_check_call(const struct ncclComm *comm, const char *fn, const void *stream)
{
    ZN_CHECK(zn_comm_check_active(comm, fn));
    if (comm->kind == ZN_COMM_HOST && stream != NULL)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "%s: stream must be NULL on a host communicator (got %p): host "
                        "communicators complete each call before returning",
                        fn, stream);
    return ncclSuccess;
}

void zn_comm_set_error(struct ncclComm *comm, ncclResult_t err)
{
    int expected = ncclSuccess;
    atomic_compare_exchange_strong(&comm->async_err, &expected, (int)err);
    zn_comm_save_error(comm);
}

void zn_comm_save_error(struct ncclComm *comm)
{
    pthread_mutex_lock(&comm->err_lock);
    snprintf(comm->last_error, sizeof(comm->last_error), "%s", zn_last_error());
    pthread_mutex_unlock(&comm->err_lock);
}

/* Ring order puts the ranks of one host next to each other (topo/hosts.h). */
static ncclResult_t topology(struct ncclComm *c)
{
    c->ring = malloc((size_t)c->nranks * sizeof(int));
    if (!c->ring) return zn_error(ncclSystemError, ZN_INIT, "out of memory");
    return zn_topo_host_ring(c->peers, c->nranks, c->rank, c->ring, &c->nhosts, &c->nlocal,
                             &c->actx.ring_pos);
}

static int arena_allowed(const struct ncclComm *c)
{
    const struct zn_params *p = zn_params();
    return c->nhosts == 1 && c->nranks >= 2 && !p->shm_disable &&
           strcmp(p->transport, "socket") != 0 && strcmp(p->transport, "net") != 0 &&
           (c->kind == ZN_COMM_HOST || c->staged);
}

static ncclResult_t join(struct ncclComm *c, struct zn_join *j)
{
    ncclResult_t res;
    if (j->from_addrs)
        res = zn_boot_init_addrs(j->magic, &j->secret, c->rank, c->nranks, &j->listener, j->addrs,
                                 &c->abort_flag, &c->boot);
    else if (j->nids > 1)
        res = zn_boot_init_scalable(j->ids, j->nids, c->rank, c->nranks, &c->abort_flag, &c->boot);
    else
        res = zn_boot_init(&j->id, c->rank, c->nranks, &c->abort_flag, &c->boot);
    free(j->addrs);
    j->addrs = NULL;
    free(j->ids);
    j->ids = NULL;
    return res;
}

static ncclResult_t exchange_peers(struct ncclComm *c)
{
    c->peers = calloc((size_t)c->nranks, sizeof(*c->peers));
    if (!c->peers) return zn_error(ncclSystemError, ZN_INIT, "out of memory");
    ZN_CHECK(zn_peer_info_local(&c->peers[c->rank]));
    c->peers[c->rank].rank = c->rank;
    c->peers[c->rank].host_hash = zn_host_hash_rank(c->rank);
    c->peers[c->rank].cuda_dev = c->cuda_dev;
    if (c->kind == ZN_COMM_CUDA)
        ZN_CHECK(zn_cuda_bus_id(c->cuda_dev, c->peers[c->rank].bus_id,
                                sizeof(c->peers[c->rank].bus_id)));
    ZN_CHECK(zn_boot_allgather(c->boot, c->peers, sizeof(*c->peers)));
    c->comm_hash = (zn_boot_magic(c->boot) ^ c->peers[0].nonce) * 0x9e3779b97f4a7c15ull;
    c->comm_hash ^= c->comm_hash >> 29;
    c->tctx = (struct zn_tctx){ .rank = c->rank,
                                .nranks = c->nranks,
                                .peers = c->peers,
                                .boot = c->boot,
                                .comm_hash = c->comm_hash,
                                .abort_flag = &c->abort_flag };
    return ncclSuccess;
}

/* The shared-memory arena: the shm transport's collective memory. */
static ncclResult_t setup_arena(struct ncclComm *c)
{
    const struct zn_transport_collmem_ops *cm = zn_transport_collmem(&zn_transport_shm);
    struct zn_collmem_args args = { .bytes = (size_t)zn_params()->shm_slot_size, .dev = -1 };
    void *mem = NULL;
    ZN_CHECK(cm->create(&c->tctx, &args, &mem));
    c->arena = mem;
    return ncclSuccess;
}

/* config.maxP2pPeers as the executors take it: the most steps of the send/recv schedule in
 * flight at once, 0 for no limit (unset, or at least the nranks - 1 steps there are). */
static int max_p2p_peers(const struct ncclComm *c)
{
    int m = c->config.maxP2pPeers;
    if (m == NCCL_CONFIG_UNDEF_INT || m >= c->nranks - 1) return 0;
    return m;
}

void zn_comm_arena_release(struct ncclComm *c)
{
    if (!c->arena) return;
    zn_transport_collmem(&zn_transport_shm)->destroy(c->arena);
    c->arena = NULL;
    c->actx.arena = NULL;
    c->exec.arena = NULL;
}

ncclResult_t zn_comm_arena_rebuild(struct ncclComm *c)
{
    if (c->arena) return ncclSuccess;
    ZN_CHECK(setup_arena(c));
    c->actx.arena = c->arena;
    c->exec.arena = c->arena;
    return ncclSuccess;
}

/* The host-mapped abort and error words and the executor's view, for both GPU paths. */
static ncclResult_t setup_cuda_words(struct ncclComm *c)
{
    void *dev_words = NULL;
    ZN_CHECK(zn_cuda_host_alloc(&c->host_words, &dev_words, 64));
    struct zn_cuda_ctx *x = &c->cuda;
    memset(x, 0, sizeof(*x));
    x->dev.abort_flag = (volatile uint32_t *)dev_words;
    x->dev.error = (uint32_t *)dev_words + 1;
    x->error_host = (volatile uint32_t *)c->host_words + 1;
    x->dev.timeout_ns = (uint64_t)zn_timeout_ns();
    x->dev.rank = c->rank;
    x->dev.nranks = c->nranks;
    x->dev.nbuf = ZN_DEV_NBUF;
    x->cuda_dev = c->cuda_dev;
    x->max_ch = 1;
    x->p2p_ch = 1;
    x->max_peers = max_p2p_peers(c);
    x->order.graph_mode = c->config.graphUsageMode;
    x->order.graph_order = c->config.graphStreamOrdering;
    x->force_algo = *zn_params()->algo ? zn_params()->algo : NULL;
    x->force_proto = *zn_params()->proto ? zn_params()->proto : NULL;
    return ncclSuccess;
}

/* Every rank must lay out its arena and cut each call into channels alike, and pick the same
 * GPU topology: the values come from each rank's environment, so a mismatch is refused on every
 * rank here rather than hanging or corrupting data later. */
#define ZN_GPU_NPARAMS 7
static ncclResult_t agree_gpu_params(struct ncclComm *c, long long *want)
{
    const struct zn_params *p = zn_params();
    const char *topo = p->p2p_topo;
    static const char *names[ZN_GPU_NPARAMS] = { "ZINC_GPU_CHANNELS",
                                                 "ZINC_GPU_SLOT_SIZE",
                                                 "ZINC_GPU_CHUNK",
                                                 "ZINC_GPU_LL_CHUNK",
                                                 "ZINC_P2P_TOPO (0 auto, 1 ring)",
                                                 "ZINC_GPU_P2P_CHANNELS",
                                                 "ZINC_GPU_P2P_LL" };
    want[0] = p->gpu_channels;
    want[1] = p->gpu_slot_size;
    want[2] = p->gpu_chunk;
    want[3] = p->gpu_ll_chunk;
    want[4] = !strcmp(topo, "auto") ? 0 : !strcmp(topo, "ring") ? 1 : -1;
    want[5] = p->gpu_p2p_channels;
    want[6] = p->gpu_p2p_ll;
    long long *every = calloc((size_t)c->nranks, ZN_GPU_NPARAMS * sizeof(long long));
    if (!every) return zn_error(ncclSystemError, ZN_INIT, "out of memory");
    memcpy(every + ZN_GPU_NPARAMS * c->rank, want, ZN_GPU_NPARAMS * sizeof(long long));
    ncclResult_t res = zn_boot_allgather(c->boot, every, ZN_GPU_NPARAMS * sizeof(long long));
    for (int r = 0; r < c->nranks && res == ncclSuccess; r++)
        for (int i = 0; i < ZN_GPU_NPARAMS && res == ncclSuccess; i++)
            if (every[ZN_GPU_NPARAMS * r + i] != want[i])
                res = zn_error(ncclInvalidUsage, ZN_INIT,
                               "rank %d has %s=%lld but rank %d has %lld: every rank needs the "
                               "same value",
                               c->rank, names[i], want[i], r, every[ZN_GPU_NPARAMS * r + i]);
    free(every);
    /* Range checks after the exchange, so that every rank leaves init together. */
    if (res == ncclSuccess && want[4] < 0)
        res = zn_error(ncclInvalidArgument, ZN_INIT, "ZINC_P2P_TOPO=%s is not auto or ring", topo);
    if (res == ncclSuccess && (want[0] < 1 || want[0] > ZN_DEV_MAX_CH))
        res = zn_error(ncclInvalidArgument, ZN_INIT, "ZINC_GPU_CHANNELS=%lld: must be 1-%d",
                       want[0], ZN_DEV_MAX_CH);
    if (res == ncclSuccess && (want[1] < 64 * 1024 || want[1] > 4 * 1024 * 1024 || want[1] % 4096))
        res = zn_error(ncclInvalidArgument, ZN_INIT,
                       "ZINC_GPU_SLOT_SIZE=%lld: must be a multiple of 4K from 64K to 4M", want[1]);
    if (res == ncclSuccess && want[2] < 512)
        res = zn_error(ncclInvalidArgument, ZN_INIT, "ZINC_GPU_CHUNK=%lld: must be at least 512",
                       want[2]);
    if (res == ncclSuccess && (want[3] < 512 || want[3] > ZN_DEV_LL_BYTES / 2))
        res = zn_error(ncclInvalidArgument, ZN_INIT, "ZINC_GPU_LL_CHUNK=%lld: must be 512-%d",
                       want[3], ZN_DEV_LL_BYTES / 2);
    if (res == ncclSuccess && (want[5] < 1 || want[5] > ZN_DEV_MAX_CH))
        res = zn_error(ncclInvalidArgument, ZN_INIT, "ZINC_GPU_P2P_CHANNELS=%lld: must be 1-%d",
                       want[5], ZN_DEV_MAX_CH);
    if (res == ncclSuccess &&
        (want[6] < 0 || want[6] > ZN_DEV_P2P_LL_CH * (ZN_DEV_P2P_LL_BYTES / 2)))
        res = zn_error(ncclInvalidArgument, ZN_INIT, "ZINC_GPU_P2P_LL=%lld: must be 0-%d", want[6],
                       ZN_DEV_P2P_LL_CH * (ZN_DEV_P2P_LL_BYTES / 2));
    return res;
}

/* Which GPU pairs can map each other's memory, agreed by all ranks: every rank judges the
 * pairs it can see, and a pair counts only if every rank said yes (topo/reach.h). */
static ncclResult_t agree_reach(struct ncclComm *c, uint8_t *all, char *why, size_t len)
{
    int n = c->nranks;
    size_t nn = (size_t)n * (size_t)n;
    uint8_t *each = calloc((size_t)n, nn);
    if (!each) return zn_error(ncclSystemError, ZN_INIT, "out of memory");
    zn_topo_gpu_reach(c->peers, n, c->rank, (int)zn_params()->p2p_disable, &zn_topo_cuda_probe,
                      each + (size_t)c->rank * nn, why, len);
    ncclResult_t res = zn_boot_allgather(c->boot, each, nn);
    zn_topo_reach_combine(each, n, all);
    free(each);
    return res;
}

/* Across hosts (ZINC_GPU_NET): whether the ring kernels run with the proxy carrying the ring's
 * hops between hosts, agreed by every rank. The ring is the host-ordered one of topology(): it
 * can, when the ranks of each host form a chain of GPUs that reach each other. *all: the proxy
 * carries the FIFOs to every rank on another host too, so that send/recv, alltoall, gather and
 * scatter run as kernels (ZINC_GPU_NET=auto where every two GPUs of a host reach each other).
 * *nch: the channels of such a communicator (ZINC_GPU_NET_CHANNELS). */
static ncclResult_t agree_gpu_net(struct ncclComm *c, const uint8_t *reach, int *use, int *all,
                                  int *nch)
{
    static const char *const mode[] = { "auto", "ring", "staged" };
    const struct zn_params *p = zn_params();
    int n = c->nranks, *every = calloc((size_t)n, 2 * sizeof(int));
    if (!every) return zn_error(ncclSystemError, ZN_INIT, "out of memory");
    int want[2] = { -1, (int)p->gpu_net_channels };
    for (int m = 0; m < 3; m++)
        if (!strcmp(p->gpu_net, mode[m])) want[0] = m;
    memcpy(every + 2 * c->rank, want, sizeof(want));
    ncclResult_t res = zn_boot_allgather(c->boot, every, 2 * sizeof(int));
    for (int r = 0; r < n && res == ncclSuccess; r++)
        if (memcmp(every + 2 * r, want, sizeof(want)) != 0)
            res = zn_error(ncclInvalidUsage, ZN_INIT,
                           "rank %d has ZINC_GPU_NET=%s ZINC_GPU_NET_CHANNELS=%d but rank %d has "
                           "%s, %d: every rank needs the same values",
                           c->rank, p->gpu_net, want[1], r,
                           every[2 * r] >= 0 && every[2 * r] < 3 ? mode[every[2 * r]] : "?",
                           every[2 * r + 1]);
    free(every);
    if (res == ncclSuccess && want[0] < 0)
        res = zn_error(ncclInvalidArgument, ZN_INIT, "ZINC_GPU_NET=%s is not auto, ring or staged",
                       p->gpu_net);
    if (res == ncclSuccess && (want[1] < 1 || want[1] > ZN_GPUNET_MAX_CH))
        res = zn_error(ncclInvalidArgument, ZN_INIT, "ZINC_GPU_NET_CHANNELS=%d: must be 1-%d",
                       want[1], ZN_GPUNET_MAX_CH);
    *use =
        res == ncclSuccess && want[0] != 2 && zn_topo_ring_hops_reach(c->peers, n, c->ring, reach);
    *all = *use && want[0] == 0 && n <= ZN_DEV_MAX_RANKS && /* kernels reach peers by rank */
           zn_topo_hosts_reach(c->peers, n, reach);
    *nch = want[1];
    return res;
}

/* The kernels' peer slots (abi/dev_abi.h, zn_dev_comm): slot[r] the slot of rank r, row_in[r]
 * the slot rank r gives this rank (-1: none). Up to ZN_DEV_MAX_RANKS ranks, the ranks; a ring
 * of more (across hosts) has this rank in slot 0, next in 1, prev in 2, and so is each rank
 * its next's slot 2 and its prev's slot 1. Returns the number of slots. */
static int dev_slots(int n, int me, int next, int prev, int8_t *slot, int8_t *row_in)
{
    if (n <= ZN_DEV_MAX_RANKS) {
        for (int r = 0; r < n; r++) {
            slot[r] = (int8_t)r;
            row_in[r] = (int8_t)me;
        }
        return n;
    }
    memset(slot, -1, (size_t)n);
    memset(row_in, -1, (size_t)n);
    slot[me] = 0;
    slot[next] = 1;
    slot[prev] = 2;
    row_in[me] = 0;
    row_in[next] = 2;
    row_in[prev] = 1;
    return 3;
}

/* The peers on another host that the kernels exchange FIFO slots with (every one, or the ring
 * neighbours) get net shadows for arenas (abi/dev_abi.h), served by the proxy's GPU net
 * engine. */
static ncclResult_t setup_gpu_net(struct ncclComm *c, int next, int prev, int all, int nch,
                                  size_t slot_bytes, const int8_t *slot, const int8_t *row_in)
{
    struct zn_cuda_ctx *x = &c->cuda;
    uint64_t remote = zn_topo_remote_ranks(c->peers, c->nranks, c->rank);
    uint64_t to = all ? remote : remote & (1ull << next);
    uint64_t from = all ? remote : remote & (1ull << prev);
    struct zn_gpunet_config cfg = { .ctx = &c->tctx,
                                    .send_to = to,
                                    .recv_from = from,
                                    .slot = slot,
                                    .row_in = row_in,
                                    .nch = nch,
                                    .slot_bytes = slot_bytes,
                                    .abort_word = (volatile uint32_t *)c->host_words,
                                    .cuda_dev = c->cuda_dev };
    struct zn_gpunet_view view[ZN_DEV_MAX_RING];
    ZN_CHECK(zn_gpunet_create(&cfg, &x->gnet, view));
    for (int r = 0; r < c->nranks; r++) {
        if (!view[r].ctrl) continue;
        x->dev.arena[slot[r]] = view[r].ctrl;
        x->dev.net_tx[slot[r]] = view[r].tx;
        x->dev.net_rx[slot[r]] = view[r].rx;
        x->dev.net_mask |= (uint8_t)(1u << slot[r]);
    }
    x->all_fifos = all;
    return ncclSuccess;
}

/* GPUs that all reach each other get arenas in device memory mapped by every peer and the
 * direct kernels. GPUs of which only a ring reaches each other (or with ZINC_P2P_TOPO=ring) map
 * their ring neighbours: allreduce, allgather, reducescatter, broadcast and reduce run as GPU
 * ring kernels, and the rest (alltoall, gather, scatter, send/recv) is staged through host
 * memory, except across hosts where every two GPUs of a host reach each other: there every
 * peer is mapped or has a net shadow and the rest runs as kernels too (up to ZN_DEV_MAX_RANKS
 * ranks; a ring across hosts can have up to ZN_DEV_MAX_RING). Without a ring, everything is
 * staged (exec/cuda_stage.h). */
static ncclResult_t setup_cuda(struct ncclComm *c)
{
    _Static_assert(ZN_DEV_MAX_RING <= ZN_P2P_MAX_COMM && ZN_DEV_MAX_RING <= ZN_GPUNET_MAX_RANKS,
                   "a ring across hosts fits the p2p transport and the GPU net engine");
    int n = c->nranks, cap = c->nhosts > 1 ? ZN_DEV_MAX_RING : ZN_P2P_MAX_RANKS;
    char why[160] = "";
    uint8_t reach[ZN_DEV_MAX_RING * ZN_DEV_MAX_RING];
    int order[ZN_DEV_MAX_RING], full = 0, ring = 0;
    if (n <= cap) {
        ZN_CHECK(agree_reach(c, reach, why, sizeof(why)));
        full = zn_topo_reach_full(reach, n);
        ring = n <= ZN_P2P_MAX_RANKS && zn_topo_gpu_ring(reach, n, order);
    } else {
        snprintf(why, sizeof(why), "more than %d GPUs", cap);
    }
    int net = 0, net_all = 0, net_nch = 0;
    if (!ring && n <= cap && c->nhosts > 1)
        ZN_CHECK(agree_gpu_net(c, reach, &net, &net_all, &net_nch));
    if (net)
        for (int p = 0; p < n; p++) order[p] = c->ring[p];
    if (!ring && !net) {
        c->staged = 1;
        zn_info(ZN_INIT, "cuda communicator: %s; staging through host memory",
                *why ? why : "another rank's GPUs cannot reach their peers");
        return setup_cuda_words(c);
    }
    long long want[ZN_GPU_NPARAMS];
    ZN_CHECK(agree_gpu_params(c, want));
    int ring_mode = !full || want[4] == 1;
    if (!ring_mode)
        for (int r = 0; r < n; r++) order[r] = r;
    int pos = 0;
    while (order[pos] != c->rank) pos++;
    int next = order[(pos + 1) % n], prev = order[(pos + n - 1) % n];
    uint8_t map[ZN_DEV_MAX_RING];
    zn_topo_gpu_maps(c->peers, n, c->rank, ring_mode && !net_all, next, prev, map);
    int8_t slot[ZN_DEV_MAX_RING], row_in[ZN_DEV_MAX_RING];
    int nslots = dev_slots(n, c->rank, next, prev, slot, row_in);
    int nch = (int)want[0];
    if (net && nch > net_nch) nch = net_nch;
    size_t slot_bytes = (size_t)want[1];
    /* Across hosts, FIFOs as deep as the net shadows' so that a ring step can move pieces of
     * several slots (nbuf / 2, coll_ring.cuh) on every hop: the net's round trip, and ranks
     * whose kernels take turns on a GPU, need more in flight than one slot per step. */
    int nbuf = net ? ZN_DEV_NET_NBUF : ZN_DEV_NBUF;
    struct zn_collmem_args args = { .bytes = zn_dev_arena_bytes(nslots, nch, nbuf, slot_bytes),
                                    .dev = c->cuda_dev,
                                    .want = map };
    void *mem = NULL;
    ZN_CHECK(zn_transport_collmem(&zn_transport_p2p)->create(&c->tctx, &args, &mem));
    c->p2p = mem;
    ZN_CHECK(setup_cuda_words(c));
    struct zn_cuda_ctx *x = &c->cuda;
    for (int r = 0; r < n; r++) {
        if (slot[r] < 0) continue;
        x->dev.arena[slot[r]] = c->p2p->peer[r];
        x->dev.row_at[slot[r]] = row_in[r];
    }
    x->dev.self = slot[c->rank];
    x->dev.nslots = nslots;
    x->dev.next = slot[next];
    x->dev.prev = slot[prev];
    if (net) ZN_CHECK(setup_gpu_net(c, next, prev, net_all, nch, slot_bytes, slot, row_in));
    for (int p = 0; p < n; p++) x->dev.ring[p] = (int8_t)order[p];
    x->dev.ring_pos = pos;
    x->ring = ring_mode;
    /* Every rank picks the same kernels: the choice must not hang on whether this rank's own
     * neighbours are on its host (a rank between two local ones would take ring LL where the
     * others take the FIFO ring, and the kernels would never meet). */
    x->net = net;
    x->max_ch = nch;
    x->p2p_ch = want[5] < nch ? (int)want[5] : nch;
    x->p2p_ll = (size_t)want[6];
    x->chunk = (size_t)want[2];
    x->ll_chunk = (size_t)want[3];
    x->dev.nch = nch;
    x->dev.slot_bytes = slot_bytes;
    x->dev.nbuf = nbuf;
    x->dev.ll_off = zn_dev_ll_off(nslots, nch, nbuf, slot_bytes);
    /* Ring mode stages what the ring kernels do not do: that needs the host path too. With
     * every peer mapped, registered buffers can be too (zero-copy). */
    c->staged = ring_mode;
    if (!ring_mode) {
        ZN_CHECK(zn_transport_check(&zn_transport_p2p));
        ZN_CHECK(zn_transport_p2p.init(&c->tctx, &c->p2p_state));
        x->regs = zn_p2p_regs(c->p2p_state);
    }
    if (ring_mode) {
        char list[256] = "";
        for (int p = 0; p < n; p++)
            snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%d", p ? " " : "",
                     order[p]);
        zn_info(ZN_INIT,
                "cuda communicator: GPU ring %s (%s); alltoall, gather, scatter and "
                "send/recv %s",
                list,
                net    ? "hops between hosts carried over the net by the proxy"
                : full ? "ZINC_P2P_TOPO=ring"
                : *why ? why
                       : "not every GPU pair is connected",
                net_all ? "as kernels, the proxy carrying every FIFO between hosts"
                        : "staged through host memory");
    }
    return ncclSuccess;
}

static void fill_views(struct ncclComm *c)
{
    const struct zn_params *p = zn_params();
    c->actx.rank = c->rank;
    c->actx.nranks = c->nranks;
    c->actx.nhosts = c->nhosts;
    c->actx.ring = c->ring;
    c->actx.arena = c->arena;
    c->actx.chunk_size = p->chunk_size > 0 ? (size_t)p->chunk_size : 512 * 1024;
    c->actx.shm_transport = zn_conns_uses_shm(c->conns);
    c->exec = (struct zn_exec_comm){ .tctx = &c->tctx,
                                     .conns = c->conns,
                                     .arena = c->arena,
                                     .watch = c->watch,
                                     .actx = &c->actx,
                                     .abort_flag = &c->abort_flag,
                                     .force_algo = *p->algo ? p->algo : NULL,
                                     .nlocal = c->nlocal,
                                     .max_peers = max_p2p_peers(c) };
}

/* Where init spends its time (logged at INFO): the phases of zn_comm_setup in order. */
enum { PH_JOIN, PH_PEERS, PH_TOPO, PH_CONNS, PH_CUDA, PH_ARENA, PH_WATCH, PH_BARRIER, PH_N };
static const char *const phase_name[PH_N] = { "join", "peers", "topology", "conns",
                                              "cuda", "arena", "watch",    "barrier" };

/* Wall and CPU time (this thread's) at the end of each phase. */
struct phase_clock {
    int64_t wall[PH_N + 1], cpu[PH_N + 1];
};

static void phase_mark(struct phase_clock *pc, int end_of)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    pc->wall[end_of + 1] = zn_now_ns();
    pc->cpu[end_of + 1] = (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* Wall time says where ranks wait for each other (a collective phase absorbs the skew of
 * the local phases before it); CPU time says what each rank itself spends. */
static void log_phases(const struct ncclComm *c, const struct phase_clock *pc)
{
    char line[256];
    int n = 0;
    for (int p = 0; p < PH_N && n < (int)sizeof(line); p++)
        n += snprintf(line + n, sizeof(line) - (size_t)n, "%s%s %.1f/%.1f", p ? ", " : "",
                      phase_name[p], (pc->wall[p + 1] - pc->wall[p]) / 1e6,
                      (pc->cpu[p + 1] - pc->cpu[p]) / 1e6);
    struct zn_boot_stats st;
    zn_boot_get_stats(c->boot, &st);
    zn_info(ZN_INIT,
            "init phases (wall/cpu ms): %s; bootstrap sent %llu msgs %llu bytes, received %llu "
            "msgs %llu "
            "bytes; cpu %.1f ms in all",
            line, (unsigned long long)st.msgs_sent, (unsigned long long)st.bytes_sent,
            (unsigned long long)st.msgs_recv, (unsigned long long)st.bytes_recv,
            (pc->cpu[PH_N] - pc->cpu[0]) / 1e6);
}

ncclResult_t zn_comm_setup(struct ncclComm *c, struct zn_join *j)
{
    struct phase_clock pc;
    phase_mark(&pc, -1);
    zn_log_rank = c->rank;
    ncclResult_t res;
    /* Setup may run on a thread of its own (non-blocking init, inits in a group): work on
     * the device the application chose when it called init. */
    if (c->kind == ZN_COMM_CUDA) ZN_CHECK_GOTO(zn_cuda_set_device(c->cuda_dev), res, fail);
    ZN_CHECK_GOTO(join(c, j), res, fail);
    phase_mark(&pc, PH_JOIN);
    ZN_CHECK_GOTO(exchange_peers(c), res, fail);
    phase_mark(&pc, PH_PEERS);
    ZN_CHECK_GOTO(topology(c), res, fail);
    phase_mark(&pc, PH_TOPO);
    ZN_CHECK_GOTO(zn_conns_create(&c->tctx, &c->conns), res, fail);
    phase_mark(&pc, PH_CONNS);
    if (c->kind == ZN_COMM_CUDA) {
        /* GPU memory handles cross processes through the proxy's service: one per process,
         * shared by its communicators (released in zn_comm_free). */
        ZN_CHECK_GOTO(zn_proxy_acquire(), res, fail);
        c->proxy_held = 1;
        c->tctx.svc = zn_proxy_svc();
        ZN_CHECK_GOTO(setup_cuda(c), res, fail);
    }
    phase_mark(&pc, PH_CUDA);
    if (arena_allowed(c)) ZN_CHECK_GOTO(setup_arena(c), res, fail);
    phase_mark(&pc, PH_ARENA);
    ZN_CHECK_GOTO(zn_peer_watch_create(&c->tctx, &c->watch), res, fail);
    fill_views(c);
    if (c->kind == ZN_COMM_CUDA && c->staged)
        ZN_CHECK_GOTO(zn_stage_create(&c->exec, c->cuda_dev, &c->cuda.stage), res, fail);
    phase_mark(&pc, PH_WATCH);
    /* Nobody starts a collective before every rank finished its setup. */
    ZN_CHECK_GOTO(zn_boot_barrier(c->boot), res, fail);
    phase_mark(&pc, PH_BARRIER);
    zn_info(ZN_INIT, "comm %p rank %d/%d %s: %d host(s), %d local rank(s), %s, ready in %.1f ms",
            (void *)c, c->rank, c->nranks, c->kind == ZN_COMM_HOST ? "host" : "cuda", c->nhosts,
            c->nlocal, c->arena ? "shm arena" : "no arena", (pc.wall[PH_N] - pc.wall[0]) / 1e6);
    log_phases(c, &pc);
    atomic_store(&c->async_err, ncclSuccess);
    return ncclSuccess;
fail:
    if (c->boot) zn_boot_abort(c->boot, res, zn_last_error());
    zn_comm_set_error(c, res);
    atomic_store(&c->async_err, res);
    return res;
}

struct setup_job {
    struct ncclComm *comm;
    struct zn_join join;
};

static void *setup_main(void *arg)
{
    struct setup_job *job = arg;
    struct ncclComm *c = job->comm;
    zn_comm_setup(c, &job->join);
    free(job);
    /* The last touch of c: a waiter may free it as soon as it holds the lock. */
    pthread_mutex_lock(&c->init_lock);
    atomic_store(&c->init_running, 0);
    pthread_cond_broadcast(&c->init_cond);
    pthread_mutex_unlock(&c->init_lock);
    return NULL;
}

ncclResult_t zn_comm_setup_async(struct ncclComm *comm, struct zn_join *j)
{
    struct setup_job *job = malloc(sizeof(*job));
    if (!job) return zn_error(ncclSystemError, ZN_INIT, "out of memory");
    job->comm = comm;
    job->join = *j;
    j->addrs = NULL;
    j->ids = NULL;
    atomic_store(&comm->init_running, 1);
    int err = zn_thread_start_detached(setup_main, job);
    if (err) {
        atomic_store(&comm->init_running, 0);
        free(job->join.addrs);
        free(job->join.ids);
        free(job);
        return zn_error(ncclSystemError, ZN_INIT, "cannot start an init thread: %s", strerror(err));
    }
    return ncclSuccess;
}

void zn_comm_wait_setup(struct ncclComm *comm)
{
    pthread_mutex_lock(&comm->init_lock);
    while (atomic_load(&comm->init_running)) pthread_cond_wait(&comm->init_cond, &comm->init_lock);
    pthread_mutex_unlock(&comm->init_lock);
}

int zn_comm_init_pending(struct ncclComm *comm)
{
    if (!atomic_load(&comm->init_running)) return 0;
    /* The init thread publishes its result in async_err, then drops init_running on its way
     * out: a caller that already saw the result waits for those last steps. */
    if (atomic_load(&comm->async_err) == ncclInProgress) return 1;
    zn_comm_wait_setup(comm);
    return 0;
}

void zn_comm_free(struct ncclComm *c)
{
    if (!c) return;
    /* Out of the dump's sight before anything it prints goes. */
    zn_handle_unlist(&zn_comm_pool, c);
    if (c->kind == ZN_COMM_CUDA && c->cuda_dev >= 0) {
        /* Kernels of this communicator may still run (or spin until the abort flag stops
         * them): nothing they touch may go before they end. */
        int cur = zn_cuda_current_device();
        if (zn_cuda_set_device(c->cuda_dev) == ncclSuccess) zn_cuda_device_sync();
        zn_cuda_ctx_fini(&c->cuda);
        if (c->p2p_state) zn_transport_p2p.fini(c->p2p_state);
        if (c->p2p) zn_transport_collmem(&zn_transport_p2p)->destroy(c->p2p);
        zn_cuda_host_free(c->host_words);
        if (cur >= 0) zn_cuda_set_device(cur);
    }
    if (c->proxy_held) zn_proxy_release();
    zn_peer_watch_destroy(c->watch);
    if (c->arena) zn_transport_collmem(&zn_transport_shm)->destroy(c->arena);
    zn_conns_destroy(c->conns);
    zn_exec_comm_fini(&c->exec);
    zn_boot_destroy(c->boot);
    zn_comm_grow_free(c);
    free(c->peers);
    free(c->ring);
    free(c->ops);
    free(c->suspend); /* what a suspension released is gone with the rest */
    pthread_mutex_destroy(&c->err_lock);
    pthread_mutex_destroy(&c->init_lock);
    pthread_cond_destroy(&c->init_cond);
    zn_handle_free(&zn_comm_pool, c); /* zeroes the magic: later calls on c are refused */
    zn_dump_remove(zn_comm_dump_all, NULL);
}

ncclResult_t zn_comm_pick_kind(enum zn_comm_kind *kind, int *dev)
{
    const char *want = zn_params()->device;
    *dev = -1;
    *kind = ZN_COMM_HOST;
    if (strcmp(want, "auto") && strcmp(want, "host") && strcmp(want, "cuda"))
        return zn_error(ncclInvalidArgument, ZN_INIT,
                        "ZINC_DEVICE=%s is not one of auto, host, cuda", want);
    if (!strcmp(want, "host")) return ncclSuccess;
    int d = zn_cuda_available() ? zn_cuda_current_device() : -1;
    if (d < 0) {
        if (!strcmp(want, "cuda"))
            return zn_error(ncclInvalidUsage, ZN_INIT,
                            "ZINC_DEVICE=cuda but this process has no usable CUDA device%s",
                            ZINC_HAVE_CUDA ? "" : " (zinc was built without CUDA)");
        return ncclSuccess;
    }
    *kind = ZN_COMM_CUDA;
    *dev = d;
    return ncclSuccess;
}
