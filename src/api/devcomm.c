/*
 * NCCL 2.30's device API, host side: device communicators (ncclDevCommCreate / Destroy),
 * teams, the requirement helpers of barriers and the LL all-to-all, and
 * ncclCommQueryProperties. The caller's structs may have NCCL 2.30's layout or 2.28.9's
 * (devlayout.c reads and writes them); everything here works on 2.30.7's.
 *
 * A device communicator owns one resource arena per rank, mapped by every LSA peer (a p2p
 * arena, as the collectives' arenas are made), seen by kernels as the resource window. Its
 * layout, in 128-byte units (a ncclDevResourceHandle is an offset in units):
 *
 *   LSA barriers      lsaBarrierCount of them, for comm.lsaBarrier
 *   hybrid LSA        barrierCount of them, for comm.hybridLsaBarrier (ncclBarrierSession)
 *   user buffers      each ncclDevResourceRequirements of the list, at its alignment
 *   GIN signals       uint64 each: ginSignalCount (ids 0..), then one per GIN barrier of
 *                     railGinBarrier, hybridRailGinBarrier, hybridWorldGinBarrier and
 *                     worldGinBarrier, then the list's, in order
 *   GIN counters      uint64 each: ginCounterCount, then the list's
 *   signal shadows    uint64 per signal (local use only; a GIN barrier keeps its epoch in its
 *                     signal's shadow)
 *
 * GIN is served within the LSA team by loads, stores and atomics (nccl_device/gin.h). When GIN
 * is asked for and some rank is outside the caller's LSA team (several hosts, GPUs that do not
 * all map each other), the device communicator also gets a FIFO to a host engine that carries
 * the requests for those ranks over zinc's net transport (devgin.c, proxy/gin.c). As in NCCL
 * 2.30, GIN signals, counters and GIN barriers need ginConnectionType (or ginForceEnable);
 * zinc reaches every rank with either connection type. Multicast (lsaMultimem, team multimem)
 * is refused: zinc never uses NVLink multicast.
 */
#include "devapi.h"
#include "group.h"
#include "transport/gpu_peer.h"
#include "util/cuda.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNIT 128 /* bytes per resource handle step */

struct zn_devcomm {
    struct ncclComm *comm;
    struct zn_p2p *p2p;               /* the arena, mapped by the LSA peers (LSA team > 1) */
    void *plain;                      /* the arena (LSA team of one) */
    struct ncclWindow_vidmem *reswin; /* device copy of the resource window's record */
    void *table;                      /* device copy of the window tables */
    struct zn_devgin *gin;            /* GIN to ranks outside the LSA team, or NULL */
    int retired;                      /* ncclDevCommDestroy'd, freed with its communicator */
    struct zn_devcomm *next;
};

static pthread_mutex_t devcomm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct zn_devcomm *devcomms;

static uint32_t rcp32(uint32_t y)
{
    return y <= 1 ? 0xffffffffu : (uint32_t)((1ull << 32) / y);
}

/* ------------------------------------------------------------------------------------------ */
/* Layout                                                                                      */

struct plan {
    size_t units;                      /* cursor */
    int lsa_bars, hyb_bars;            /* LSA barriers: lsaBarrier's, hybridLsaBarrier's */
    uint32_t lsa_bar_buf, hyb_bar_buf; /* their buffers */
    int rail_bars, hyb_world_bars, world_bars;
    ncclGinSignal_t rail_sig, hyb_rail_sig, hyb_world_sig, world_sig; /* GIN barriers' signal0 */
    int nsignals, ncounters;
    uint32_t signals, counters, shadows; /* handles of the arrays */
    int gin;                             /* GIN on (a connection type) */
};

static uint32_t take(struct plan *p, size_t bytes, size_t align)
{
    size_t a = align > UNIT ? align / UNIT : 1;
    p->units = (p->units + a - 1) / a * a;
    uint32_t h = (uint32_t)p->units;
    p->units += (bytes + UNIT - 1) / UNIT;
    return h;
}

static ncclResult_t check_reqs(const ncclDevCommRequirements_t *r)
{
    const char *fn = "ncclDevCommCreate";
    int gin_res = 0;
    struct {
        const char *name;
        int v;
    } counts[] = { { "barrierCount", r->barrierCount },
                   { "lsaBarrierCount", r->lsaBarrierCount },
                   { "railGinBarrierCount", r->railGinBarrierCount },
                   { "lsaLLA2ABlockCount", r->lsaLLA2ABlockCount },
                   { "lsaLLA2ASlotCount", r->lsaLLA2ASlotCount },
                   { "ginContextCount", r->ginContextCount },
                   { "ginSignalCount", r->ginSignalCount },
                   { "ginCounterCount", r->ginCounterCount },
                   { "worldGinBarrierCount", r->worldGinBarrierCount } };
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
        if (counts[i].v < 0 || counts[i].v > ZN_DEVAPI_COUNT_MAX)
            return zn_error(ncclInvalidArgument, ZN_CALL, "%s: reqs->%s is %d (must be 0 to %d)",
                            fn, counts[i].name, counts[i].v, ZN_DEVAPI_COUNT_MAX);
    if (r->ginConnectionType != NCCL_GIN_CONNECTION_NONE &&
        r->ginConnectionType != NCCL_GIN_CONNECTION_FULL &&
        r->ginConnectionType != NCCL_GIN_CONNECTION_RAIL)
        return zn_error(ncclInvalidArgument, ZN_CALL, "%s: reqs->ginConnectionType is %d", fn,
                        (int)r->ginConnectionType);
    if (r->lsaMultimem)
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "%s: reqs->lsaMultimem: multimem (NVLink multicast) is not supported by "
                        "zinc; use LSA pointers (ncclGetLsaPointer) instead",
                        fn);
    int n = 0;
    for (const ncclTeamRequirements_t *t = r->teamRequirementsList; t; t = t->next, n++) {
        if (n > 4096)
            return zn_error(ncclInvalidArgument, ZN_CALL,
                            "%s: reqs->teamRequirementsList has a cycle", fn);
        if (t->multimem)
            return zn_error(ncclInvalidUsage, ZN_CALL,
                            "%s: team requirement %d asks for multimem (NVLink multicast), which "
                            "zinc does not support",
                            fn, n);
    }
    n = 0;
    for (const ncclDevResourceRequirements_t *q = r->resourceRequirementsList; q;
         q = q->next, n++) {
        if (n > 4096)
            return zn_error(ncclInvalidArgument, ZN_CALL,
                            "%s: reqs->resourceRequirementsList has a cycle", fn);
        if (q->ginSignalCount < 0 || q->ginCounterCount < 0 ||
            q->ginSignalCount > ZN_DEVAPI_COUNT_MAX || q->ginCounterCount > ZN_DEVAPI_COUNT_MAX)
            return zn_error(ncclInvalidArgument, ZN_CALL,
                            "%s: resource requirement %d has ginSignalCount %d, ginCounterCount "
                            "%d (must be 0 to %d)",
                            fn, n, q->ginSignalCount, q->ginCounterCount, ZN_DEVAPI_COUNT_MAX);
        gin_res |= q->ginSignalCount > 0 || q->ginCounterCount > 0;
        if (q->bufferAlign & (q->bufferAlign - 1))
            return zn_error(ncclInvalidArgument, ZN_CALL,
                            "%s: resource requirement %d has bufferAlign %zu (not a power of two)",
                            fn, n, q->bufferAlign);
        if (q->bufferAlign > 4096 || q->bufferSize > ((size_t)1 << 40))
            return zn_error(ncclInvalidArgument, ZN_CALL,
                            "%s: resource requirement %d: bufferSize %zu / bufferAlign %zu too "
                            "large (alignment up to 4096)",
                            fn, n, q->bufferSize, q->bufferAlign);
    }
    /* NCCL 2.30's rule: GIN resources need GIN turned on, and world GIN barriers need more
     * than the rail connections. */
    gin_res |= r->ginSignalCount > 0 || r->ginCounterCount > 0 || r->barrierCount > 0 ||
               r->railGinBarrierCount > 0 || r->worldGinBarrierCount > 0;
    if (gin_res && r->ginConnectionType == NCCL_GIN_CONNECTION_NONE && !r->ginForceEnable)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "%s: reqs asks for GIN resources (ginSignalCount %d, ginCounterCount %d, "
                        "barrierCount %d, railGinBarrierCount %d, worldGinBarrierCount %d, or "
                        "signals/counters in its resource list) but ginConnectionType is "
                        "NCCL_GIN_CONNECTION_NONE: set it to NCCL_GIN_CONNECTION_FULL",
                        fn, r->ginSignalCount, r->ginCounterCount, r->barrierCount,
                        r->railGinBarrierCount, r->worldGinBarrierCount);
    if (r->worldGinBarrierCount > 0 && r->ginConnectionType == NCCL_GIN_CONNECTION_RAIL &&
        !r->ginForceEnable)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "%s: reqs->worldGinBarrierCount is %d with ginConnectionType "
                        "NCCL_GIN_CONNECTION_RAIL: world GIN barriers need "
                        "NCCL_GIN_CONNECTION_FULL",
                        fn, r->worldGinBarrierCount);
    return ncclSuccess;
}

/* The layout for r. With commit set (after success), also write the handles and first
 * signal/counter ids that the requirement list asks for: the same walk, so the same values. */
static void make_plan(const ncclDevCommRequirements_t *r, int lsa_size, struct plan *p, int commit)
{
    memset(p, 0, sizeof(*p));
    int rail = r->ginConnectionType == NCCL_GIN_CONNECTION_RAIL && !r->ginForceEnable;
    p->gin = r->ginForceEnable || r->ginConnectionType != NCCL_GIN_CONNECTION_NONE;
    p->lsa_bars = r->lsaBarrierCount;
    p->hyb_bars = r->barrierCount;
    p->rail_bars = r->railGinBarrierCount;
    p->hyb_world_bars = rail ? 0 : r->barrierCount;
    p->world_bars = r->worldGinBarrierCount;
    /* LSA barriers: epochs, then an inbox per barrier and sender (lsa_barrier.h). */
    p->lsa_bar_buf = take(p, (size_t)p->lsa_bars * (1 + (size_t)lsa_size) * 4, 16);
    p->hyb_bar_buf = take(p, (size_t)p->hyb_bars * (1 + (size_t)lsa_size) * 4, 16);
    /* GIN barriers: one signal each, after the program's own (gin_barrier.h). */
    int sig = r->ginSignalCount, cnt = r->ginCounterCount;
    p->rail_sig = (ncclGinSignal_t)sig;
    sig += p->rail_bars;
    p->hyb_rail_sig = (ncclGinSignal_t)sig;
    sig += p->hyb_bars;
    p->hyb_world_sig = (ncclGinSignal_t)sig;
    sig += p->hyb_world_bars;
    p->world_sig = (ncclGinSignal_t)sig;
    sig += p->world_bars;
    for (const ncclDevResourceRequirements_t *q = r->resourceRequirementsList; q; q = q->next) {
        uint32_t h = take(p, q->bufferSize, q->bufferAlign);
        if (commit && q->outBufferHandle) *q->outBufferHandle = h;
        if (commit && q->outGinSignalStart) *q->outGinSignalStart = (ncclGinSignal_t)sig;
        if (commit && q->outGinCounterStart) *q->outGinCounterStart = (ncclGinCounter_t)cnt;
        sig += q->ginSignalCount;
        cnt += q->ginCounterCount;
    }
    p->nsignals = sig;
    p->ncounters = cnt;
    p->signals = take(p, (size_t)p->nsignals * 8, 8);
    p->counters = take(p, (size_t)p->ncounters * 8, 8);
    p->shadows = take(p, (size_t)p->nsignals * 8, 8);
    if (p->units == 0) p->units = 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Create / destroy                                                                            */

/* drain: the GIN engine finishes the peers' operations first (collective: destroy). */
static void devcomm_free(struct zn_devcomm *d, int drain)
{
    if (!d) return;
    if (d->comm->kind == ZN_COMM_CUDA) {
        int cur = zn_cuda_enter(d->comm->cuda_dev);
        /* Freed without its peers (abort): kernels waiting on GIN stop instead of hanging. */
        if (!drain) zn_devgin_stop_kernels(d->gin);
        zn_cuda_device_sync(); /* no kernel of this rank still uses what is freed below */
        zn_devgin_destroy(d->gin, drain);
        if (d->table) zn_cuda_free(d->table);
        if (d->reswin) zn_cuda_free(d->reswin);
        if (d->plain) zn_cuda_free(d->plain);
        zn_p2p_destroy(d->p2p);
        zn_cuda_leave(d->comm->cuda_dev, cur);
    }
    free(d);
}

/* What every rank allgathers before allocating, so that all agree or all fail. */
struct verdict {
    uint64_t units;
    int32_t problem; /* 0, or the rank's error code */
    int32_t pad;
};

static ncclResult_t agree(struct ncclComm *comm, ncclResult_t mine, uint64_t units)
{
    struct verdict *all = calloc((size_t)comm->nranks, sizeof(*all));
    if (!all) return zn_error(ncclSystemError, ZN_CALL, "out of memory");
    all[comm->rank] = (struct verdict){ .units = units, .problem = (int32_t)mine };
    char mine_msg[ZN_ERRMSG_MAX];
    snprintf(mine_msg, sizeof(mine_msg), "%s", mine != ncclSuccess ? zn_last_error() : "");
    ncclResult_t res = zn_boot_allgather(comm->boot, all, sizeof(*all));
    for (int r = 0; res == ncclSuccess && r < comm->nranks; r++) {
        if (all[r].problem != ncclSuccess)
            res = r == comm->rank ? zn_error(mine, ZN_CALL, "%s", mine_msg)
                                  : zn_error((ncclResult_t)all[r].problem, ZN_CALL,
                                             "ncclDevCommCreate: rank %d failed (see its log)", r);
        else if (all[r].units != all[0].units)
            res = zn_error(ncclInvalidUsage, ZN_CALL,
                           "ncclDevCommCreate: the requirements differ between ranks: rank 0 "
                           "needs %llu bytes of resources, rank %d %llu",
                           (unsigned long long)all[0].units * UNIT, r,
                           (unsigned long long)all[r].units * UNIT);
    }
    free(all);
    return res;
}

/* What this rank can serve; ncclSuccess or an error already logged. Every rank reaches the
 * same answer from the same facts (the communicator's kind). */
static ncclResult_t servable(struct ncclComm *comm)
{
    if (comm->kind != ZN_COMM_CUDA)
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "ncclDevCommCreate: comm %p is a host communicator; the device API needs "
                        "a CUDA communicator (one GPU per rank)",
                        (void *)comm);
    return ncclSuccess;
}

static ncclResult_t build(struct ncclComm *comm, const ncclDevCommRequirements_t *reqs,
                          const struct plan *p, int lsa_size, int lsa_rank, struct zn_devcomm *d,
                          ncclDevComm_t *out)
{
    size_t bytes = p->units * UNIT;
    char *base;
    struct ncclWindow_vidmem view = { .lsaRank = lsa_rank,
                                      .worldRank = comm->rank,
                                      .lsaSize = lsa_size,
                                      .zincMagic = ZINC_DEVICE_WINDOW_MAGIC,
                                      .size = bytes };
    if (lsa_size > 1) {
        uint8_t want[ZN_P2P_MAX_COMM];
        memset(want, 1, sizeof(want));
        ZN_CHECK(zn_p2p_create(&comm->tctx, comm->cuda_dev, bytes, want, &d->p2p));
        for (int r = 0; r < lsa_size; r++) view.lsaPtrs[r] = d->p2p->peer[r];
        base = d->p2p->peer[comm->rank];
    } else {
        ZN_CHECK(zn_cuda_malloc(&d->plain, bytes, "device communicator resources"));
        ZN_CHECK(zn_cuda_memset(d->plain, 0, bytes));
        base = d->plain;
        view.lsaPtrs[0] = base;
    }
    view.lsaFlatBase = base;
    void *dev = NULL;
    ZN_CHECK(zn_cuda_malloc(&dev, sizeof(view), "resource window record"));
    d->reswin = dev;
    ZN_CHECK(zn_cuda_memcpy_htod(d->reswin, &view, sizeof(view)));
    ZN_CHECK(zn_devwin_table(comm, &d->table));
    void *gin_record = NULL;
    if (p->gin && lsa_size < comm->nranks)
        ZN_CHECK(
            zn_devgin_create(comm, base, bytes, p->nsignals, p->ncounters, &d->gin, &gin_record));

    ncclDevComm_t c;
    memset(&c, 0, sizeof(c));
    c.magic = NCCL_API_MAGIC;
    c.version = reqs->version;
    c.rank = comm->rank;
    c.nRanks = comm->nranks;
    c.nRanks_rcp32 = rcp32((uint32_t)comm->nranks);
    c.lsaRank = lsa_rank;
    c.lsaSize = lsa_size;
    c.lsaSize_rcp32 = rcp32((uint32_t)lsa_size);
    c.windowTable = d->table;
    c.resourceWindow = d->reswin;
    c.resourceWindow_inlined.lsaFlatBase = base;
    c.lsaBarrier =
        (ncclLsaBarrierHandle_t){ .bufHandle = p->lsa_bar_buf, .nBarriers = p->lsa_bars };
    c.hybridLsaBarrier =
        (ncclLsaBarrierHandle_t){ .bufHandle = p->hyb_bar_buf, .nBarriers = p->hyb_bars };
    c.railGinBarrier = (ncclGinBarrierHandle_t){ .signal0 = p->rail_sig };
    c.hybridRailGinBarrier = (ncclGinBarrierHandle_t){ .signal0 = p->hyb_rail_sig };
    c.hybridWorldGinBarrier = (ncclGinBarrierHandle_t){ .signal0 = p->hyb_world_sig };
    c.worldGinBarrier = (ncclGinBarrierHandle_t){ .signal0 = p->world_sig };
    /* One connection and one context, whatever ginContextCount hinted: every context index a
     * kernel names maps to it (nccl_device/gin.h). */
    c.ginConnectionCount = p->gin ? 1 : 0;
    c.ginContextCount = p->gin ? 1 : 0;
    c.ginNetDeviceTypes[0] = NCCL_NET_DEVICE_HOST;
    c.ginHandles[0] = base + (size_t)p->signals * UNIT;
    c.ginHandles[1] = base + (size_t)p->counters * UNIT;
    c.ginHandles[2] = gin_record;
    c.ginSignalCount = reqs->ginSignalCount;
    c.ginCounterCount = reqs->ginCounterCount;
    c.ginSignalShadows = (uint64_t *)(base + (size_t)p->shadows * UNIT);
    c.ginConnectionsRailed = false; /* zinc reaches every rank */
    c.ginContextsRailed =
        reqs->ginConnectionType == NCCL_GIN_CONNECTION_RAIL && !reqs->ginForceEnable;
    /* zinc's signals always order the puts before them (gin.h): legacy signals are strong. */
    c.ginStrongLegacySignals = true;
    *out = c;
    return ncclSuccess;
}

/* The collective part of one ncclDevCommCreate, run now or at the end of the caller's group. */
struct create_call {
    struct ncclComm *comm;
    ncclDevCommRequirements_t reqs; /* 2.30.7's layout; its lists must live until then, as NCCL's */
    void *out;                      /* the caller's ncclDevComm, of reqs.version's layout */
};

static ncclResult_t create_call(void *arg, int run)
{
    struct create_call *cc = arg;
    struct ncclComm *comm = cc->comm;
    const ncclDevCommRequirements_t *reqs = &cc->reqs;
    ncclResult_t res = ncclSuccess;
    if (!run) {
        free(cc);
        return ncclSuccess;
    }
    int lsa_size, lsa_rank;
    zn_dev_lsa(comm, &lsa_size, &lsa_rank);
    struct plan p;
    make_plan(reqs, lsa_size, &p, 0);
    atomic_fetch_add(&comm->busy, 1);
    struct zn_devcomm *d = calloc(1, sizeof(*d));
    if (!d) res = zn_error(ncclSystemError, ZN_CALL, "out of memory");
    res = agree(comm, res, p.units);
    if (res != ncclSuccess) goto out;
    d->comm = comm;
    int cur = zn_cuda_enter(comm->cuda_dev);
    if (cur < 0) res = zn_cuda_set_device(comm->cuda_dev);
    ncclDevComm_t made;
    if (res == ncclSuccess) res = build(comm, reqs, &p, lsa_size, lsa_rank, d, &made);
    zn_cuda_leave(comm->cuda_dev, cur);
    if (res != ncclSuccess) goto out;
    make_plan(reqs, lsa_size, &p, 1);
    pthread_mutex_lock(&devcomm_lock);
    d->next = devcomms;
    devcomms = d;
    pthread_mutex_unlock(&devcomm_lock);
    int d_gin = d->gin != NULL;
    d = NULL;
    zn_devcomm_write(cc->out, &made);
    zn_info(ZN_CALL,
            "comm %p: device communicator made (caller's header: NCCL %u): LSA team %d of %d "
            "ranks, %zu bytes of resources, %d + %d LSA barriers, %d + %d + %d + %d GIN "
            "barriers, %d GIN signals, %d counters, GIN %s",
            (void *)comm, reqs->version, lsa_size, comm->nranks, (size_t)p.units * UNIT, p.lsa_bars,
            p.hyb_bars, p.rail_bars, p.hyb_bars, p.hyb_world_bars, p.world_bars, p.nsignals,
            p.ncounters,
            !p.gin  ? "off"
            : d_gin ? "in the LSA team and by the host engine"
                    : "in the LSA team");
out:
    if (d) {
        if (d->comm)
            devcomm_free(d, 0);
        else
            free(d);
    }
    atomic_fetch_sub(&comm->busy, 1);
    free(cc);
    return res;
}

/* Arguments are checked at the call; inside a group the collective part runs at ncclGroupEnd
 * (*outDevComm is written then), as nccl-tests creates device communicators in a group. */
ZN_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, const ncclDevCommRequirements_t *reqs,
       ncclDevComm_t *outDevComm)
{
    ZN_CHECK(zn_comm_check_active(comm, "ncclDevCommCreate"));
    if (!reqs) return zn_error(ncclInvalidArgument, ZN_CALL, "ncclDevCommCreate: reqs is NULL");
    if (!outDevComm)
        return zn_error(ncclInvalidArgument, ZN_CALL, "ncclDevCommCreate: outDevComm is NULL");
    ncclDevCommRequirements_t r;
    ZN_CHECK(zn_devreqs_read(reqs, &r));
    ZN_CHECK(check_reqs(&r));
    /* Host communicators fail alike on every rank, without a collective. */
    ZN_CHECK(servable(comm));
    struct create_call *cc = malloc(sizeof(*cc));
    if (!cc) return zn_error(ncclSystemError, ZN_CALL, "out of memory");
    *cc = (struct create_call){ .comm = comm, .reqs = r, .out = outDevComm };
    return zn_group_defer(comm, create_call, cc);
}

ZN_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, const ncclDevComm_t *devComm)
{
    ZN_CHECK(zn_comm_check(comm, "ncclDevCommDestroy"));
    if (!devComm)
        return zn_error(ncclInvalidArgument, ZN_CALL, "ncclDevCommDestroy: devComm is NULL");
    ncclWindow_t reswin;
    ZN_CHECK(zn_devcomm_read_window(devComm, &reswin));
    pthread_mutex_lock(&devcomm_lock);
    struct zn_devcomm **p = &devcomms;
    while (*p && ((*p)->retired || !((*p)->comm == comm && (void *)(*p)->reswin == (void *)reswin)))
        p = &(*p)->next;
    struct zn_devcomm *d = *p;
    /* LSA peers map this rank's arena: it stays (retired) until the communicator goes, as its
     * other arenas do, so that a peer's kernel still storing into it stores into live memory.
     * No barrier here: nccl-tests (-g N) destroys the device communicators of all its GPUs one
     * after the other from one thread, where a barrier would wait for itself. */
    int keep = d && d->p2p && !d->gin;
    if (d && keep)
        d->retired = 1;
    else if (d)
        *p = d->next;
    pthread_mutex_unlock(&devcomm_lock);
    if (!d)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "ncclDevCommDestroy: devComm %p was not made by ncclDevCommCreate on comm "
                        "%p (destroyed already?)",
                        (const void *)devComm, (void *)comm);
    /* This rank's kernels are done with it before anything goes. */
    int cur = zn_cuda_enter(comm->cuda_dev);
    zn_cuda_device_sync();
    zn_cuda_leave(comm->cuda_dev, cur);
    if (keep) return ncclSuccess;
    /* GIN between hosts: the engines drain what is queued to each other (one rank per
     * process there), then every rank agrees before anything is freed. */
    ncclResult_t res = d->p2p ? zn_boot_barrier(comm->boot) : ncclSuccess;
    devcomm_free(d, 1);
    return res;
}

void zn_devcomms_free(struct ncclComm *comm)
{
    pthread_mutex_lock(&devcomm_lock);
    struct zn_devcomm *mine = NULL;
    for (struct zn_devcomm **p = &devcomms; *p;) {
        struct zn_devcomm *d = *p;
        if (d->comm == comm) {
            *p = d->next;
            d->next = mine;
            mine = d;
        } else {
            p = &d->next;
        }
    }
    pthread_mutex_unlock(&devcomm_lock);
    while (mine) {
        struct zn_devcomm *d = mine;
        mine = d->next;
        devcomm_free(d, 0);
    }
}

size_t zn_devcomms_gpu_bytes(const struct ncclComm *comm)
{
    size_t n = 0;
    pthread_mutex_lock(&devcomm_lock);
    for (const struct zn_devcomm *d = devcomms; d; d = d->next) {
        if (d->comm != comm) continue;
        int releasable;
        n += d->p2p ? zn_p2p_own_bytes(d->p2p, &releasable) : zn_cuda_alloc_bytes(d->plain);
        n += zn_cuda_alloc_bytes(d->reswin) + zn_cuda_alloc_bytes(d->table);
        n += d->gin ? zn_devgin_gpu_bytes(d->gin) : 0;
    }
    pthread_mutex_unlock(&devcomm_lock);
    return n;
}

/* ------------------------------------------------------------------------------------------ */
/* Teams                                                                                       */

static ncclTeam_t team(int nranks, int rank, int stride)
{
    ncclTeam_t t = { .nRanks = nranks, .rank = rank, .stride = stride };
    return t;
}

/* These return a team or an int and cannot report an error: on a bad communicator they log it
 * and return the team of one rank, or -1. */
ZN_API(ncclTeam_t, ncclTeamWorld, ncclComm_t comm)
{
    if (zn_comm_check(comm, "ncclTeamWorld") != ncclSuccess) return team(1, 0, 1);
    return team(comm->nranks, comm->rank, 1);
}

ZN_API(ncclTeam_t, ncclTeamLsa, ncclComm_t comm)
{
    if (zn_comm_check(comm, "ncclTeamLsa") != ncclSuccess) return team(1, 0, 1);
    int size, rank;
    zn_dev_lsa(comm, &size, &rank);
    return team(size, rank, 1);
}

ZN_API(ncclTeam_t, ncclTeamRail, ncclComm_t comm)
{
    if (zn_comm_check(comm, "ncclTeamRail") != ncclSuccess) return team(1, 0, 1);
    int size, rank;
    zn_dev_lsa(comm, &size, &rank);
    return team(comm->nranks / size, comm->rank / size, size);
}

/* World rank of member `rank` of t, or -1 when that is not a rank of the communicator. */
ZN_API(int, ncclTeamRankToWorld, ncclComm_t comm, ncclTeam_t t, int rank)
{
    if (zn_comm_check(comm, "ncclTeamRankToWorld") != ncclSuccess) return -1;
    long long w = (long long)comm->rank + ((long long)rank - t.rank) * t.stride;
    return w >= 0 && w < comm->nranks ? (int)w : -1;
}

/* LSA rank of member `rank` of t, or -1 when it is outside the caller's LSA team. */
ZN_API(int, ncclTeamRankToLsa, ncclComm_t comm, ncclTeam_t t, int rank)
{
    if (zn_comm_check(comm, "ncclTeamRankToLsa") != ncclSuccess) return -1;
    int size, me;
    zn_dev_lsa(comm, &size, &me);
    long long l = (long long)me + ((long long)rank - t.rank) * t.stride;
    return l >= 0 && l < size ? (int)l : -1;
}

/* ------------------------------------------------------------------------------------------ */
/* Requirement helpers                                                                         */

ZN_API(ncclResult_t, ncclLsaBarrierCreateRequirement, ncclTeam_t t, int nBarriers,
       ncclLsaBarrierHandle_t *outHandle, ncclDevResourceRequirements_t *outReq)
{
    const char *fn = "ncclLsaBarrierCreateRequirement";
    if (!outHandle || !outReq)
        return zn_error(ncclInvalidArgument, ZN_CALL, "%s: %s is NULL", fn,
                        !outHandle ? "outHandle" : "outReq");
    if (nBarriers < 0 || t.nRanks < 1 || t.nRanks > ZINC_DEVICE_LSA_MAX)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "%s: nBarriers %d, team of %d ranks (need nBarriers >= 0 and 1 to %d "
                        "ranks)",
                        fn, nBarriers, t.nRanks, ZINC_DEVICE_LSA_MAX);
    memset(outReq, 0, sizeof(*outReq));
    outReq->bufferSize = (size_t)nBarriers * (1 + (size_t)t.nRanks) * 4;
    outReq->bufferAlign = 16;
    outReq->outBufferHandle = &outHandle->bufHandle;
    outHandle->bufHandle = 0;
    outHandle->nBarriers = nBarriers;
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t comm, ncclTeam_t t, int nBarriers,
       ncclGinBarrierHandle_t *outHandle, ncclDevResourceRequirements_t *outReq)
{
    const char *fn = "ncclGinBarrierCreateRequirement";
    ZN_CHECK(zn_comm_check(comm, fn));
    if (!outHandle || !outReq)
        return zn_error(ncclInvalidArgument, ZN_CALL, "%s: %s is NULL", fn,
                        !outHandle ? "outHandle" : "outReq");
    if (nBarriers < 0 || t.nRanks < 1 || t.nRanks > comm->nranks)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "%s: nBarriers %d, team of %d ranks (need nBarriers >= 0 and 1 to %d "
                        "ranks)",
                        fn, nBarriers, t.nRanks, comm->nranks);
    /* One signal per barrier; its shadow keeps the epoch (gin_barrier.h), so no buffer. */
    memset(outReq, 0, sizeof(*outReq));
    outReq->ginSignalCount = nBarriers;
    outReq->outGinSignalStart = &outHandle->signal0;
    outHandle->unused = 0;
    outHandle->signal0 = 0;
    return ncclSuccess;
}

/* Slots for maxElts elements of up to maxEltSize bytes: one 16-byte line per 8 bytes. */
ZN_API(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize)
{
    if (maxElts < 0 || maxEltSize < 0) return 0;
    long long slots = (long long)maxElts * (((long long)maxEltSize + 7) / 8);
    return slots > INT_MAX ? INT_MAX : (int)slots;
}

ZN_API(ncclResult_t, ncclLLA2ACreateRequirement, int nBlocks, int nSlots,
       ncclLLA2AHandle_t *outHandle, ncclDevResourceRequirements_t *outReq)
{
    const char *fn = "ncclLLA2ACreateRequirement";
    if (!outHandle || !outReq)
        return zn_error(ncclInvalidArgument, ZN_CALL, "%s: %s is NULL", fn,
                        !outHandle ? "outHandle" : "outReq");
    if (nBlocks < 0 || nSlots < 0 || nSlots > (1 << 24))
        return zn_error(ncclInvalidArgument, ZN_CALL, "%s: nBlocks %d, nSlots %d", fn, nBlocks,
                        nSlots);
    memset(outReq, 0, sizeof(*outReq));
    /* Per block: a header line and two halves of nSlots lines (ll_a2a.h). */
    outReq->bufferSize = (size_t)nBlocks * (1 + 2 * (size_t)nSlots) * 16;
    outReq->bufferAlign = 16;
    outReq->outBufferHandle = &outHandle->bufHandle;
    outHandle->bufHandle = 0;
    outHandle->nSlots = (uint32_t)nSlots;
    return ncclSuccess;
}

/* ------------------------------------------------------------------------------------------ */
/* Properties                                                                                  */

ZN_API(ncclResult_t, ncclCommQueryProperties, ncclComm_t comm, ncclCommProperties_t *props)
{
    ZN_CHECK(zn_comm_check(comm, "ncclCommQueryProperties"));
    if (!props)
        return zn_error(ncclInvalidArgument, ZN_CALL, "ncclCommQueryProperties: props is NULL");
    int lsa_size, lsa_rank;
    zn_dev_lsa(comm, &lsa_size, &lsa_rank);
    int cuda = comm->kind == ZN_COMM_CUDA;
    ncclCommProperties_t mine = NCCL_COMM_PROPERTIES_INITIALIZER;
    mine.rank = comm->rank;
    mine.nRanks = comm->nranks;
    mine.cudaDev = cuda ? comm->cuda_dev : -1;
    mine.nvmlDev = cuda ? comm->cuda_dev : -1;
    mine.deviceApiSupport = cuda;
    mine.multimemSupport = false;
    /* GIN is served by loads and stores in the LSA team, through the host engine beyond it,
     * with every rank or the rail team's connected alike. */
    mine.ginType = cuda ? NCCL_GIN_TYPE_PROXY : NCCL_GIN_TYPE_NONE;
    mine.railedGinType = mine.ginType;
    mine.nLsaTeams = comm->nranks / lsa_size;
    mine.hostRmaSupport = false;
    return zn_props_write(props, &mine);
}

/* No multimem handle is ever made (ncclDevCommCreate refuses multimem), so none is valid. */
ZN_API(ncclResult_t, ncclGetMultimemDevicePointer, ncclWindow_t window, size_t offset,
       ncclMultimemHandle_t multimem, void **outPtr)
{
    (void)window;
    (void)offset;
    (void)multimem;
    (void)outPtr;
    return zn_error(ncclInvalidUsage, ZN_CALL,
                    "ncclGetMultimemDevicePointer: multimem (NVLink multicast) is not supported "
                    "by zinc; use ncclGetLsaDevicePointer for each LSA rank");
}
