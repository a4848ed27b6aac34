/*
 * ncclCommSuspend / ncclCommResume / ncclCommMemStats (NCCL 2.29): give a communicator's
 * memory back between phases of a program (an inference engine handing the GPU to training
 * and back), and say how much that is.
 *
 * The contract, as NCCL 2.30.7 has it (its mem_manager.cc meets every rank at a barrier in
 * both calls, so both are collective there too):
 *   - Both calls are collective: every rank of the communicator makes them. One process driving
 *     several ranks makes them inside ncclGroupStart / ncclGroupEnd (each communicator's call
 *     then runs on a thread of its own, as window registration does) or from a thread per rank.
 *   - flags: NCCL_SUSPEND_MEM suspends. 0 asks for nothing and does nothing (NCCL: no barrier,
 *     the communicator stays active). Other bits are refused with ncclInvalidArgument (NCCL
 *     ignores them; a flag of a later version that zinc does not know should not pass as done).
 *   - Suspending a suspended communicator, or resuming an active one, is ncclInvalidUsage, as
 *     in NCCL; it is checked before anything collective, so it does not hang.
 *   - No operation of the communicator may be running on the GPU (NCCL's rule). zinc waits for
 *     the calls of other threads to return and synchronizes the device (NCCL does the latter),
 *     and refuses (on every rank) if one of its kernels failed.
 *
 * While suspended, the communicator refuses with ncclInvalidUsage what would run on the memory
 * that went, or add device state to it: collectives and send/recv (zn_comm_check_active; an
 * operation queued before the suspend in the same group is refused at ncclGroupEnd),
 * ncclCommWindowRegister and ncclDevCommCreate. What only looks, releases or derives works:
 * the queries, ncclCommMemStats, ncclCommRegister / ncclCommDeregister (they share the caller's
 * buffer through the process service, which suspension leaves running; PyTorch's allocator
 * hooks call them whenever it allocates or frees a segment), ncclCommWindowDeregister,
 * ncclDevCommDestroy, split and shrink (they need only the bootstrap), revoke, finalize,
 * destroy and abort. A CUDA graph holding calls of the communicator must not be launched
 * while it is suspended (its kernels would touch unmapped memory).
 *
 * What goes (NCCL_SUSPEND_MEM), per communicator:
 *   - the p2p arena in device memory (FIFOs of every peer and channel, the LL buffers of the
 *     collectives and of send/recv): cuMem memory is unmapped and released while its address
 *     range stays reserved, and the peers unmap their imports of it (an importer's mapping keeps
 *     the owner's memory alive, so releasing locally alone would free nothing). That is why
 *     suspend is collective here as in NCCL: the memory is back on every GPU when the calls
 *     return (they end at a barrier), visible in cudaMemGetInfo. Resume maps new memory at the
 *     same addresses, so the executor's pointers and graphs captured before the suspend stay
 *     valid. The arena's control words (FIFO positions, LL call counts, zero-copy phases) are
 *     kept in host memory meanwhile (the first ZN_DEV_DATA_OFF bytes) and written back; the rest
 *     comes back zeroed, as at init: with every kernel finished nothing is in flight in the FIFO
 *     slots, and LL flags are call numbers plus one, never 0. A cudaMalloc arena (the CUDA IPC
 *     fallback, ZINC_P2P_IPC) cannot come back at the same address and stays: it counts as
 *     persistent;
 *   - the shared-memory arena (host communicators, and cuda communicators that stage through
 *     host memory on one host): unmapped (its segment is unlinked since init, so the last rank
 *     to unmap frees it) and made again on resume, fresh, with every rank's window numbers
 *     starting over;
 *   - the staged path's pinned buffers of past operations (host memory; the next operation
 *     allocates its own).
 * What stays: memory a user handle or a kernel argument points at (device communicators,
 * window records and tables, GIN counters), the GPU net engine's rows in device memory
 * (registered with the NIC, written by peers on other hosts), the staged path's counter,
 * host-mapped words and net shadows, the transports' connections, and the mappings of the
 * users' registered buffers (window and ncclCommRegister imports: the owners keep those
 * buffers until they deregister, so unmapping them would return nothing).
 *
 * ncclCommMemStats counts device memory the communicator allocated itself, in bytes as the
 * driver sized it (cuMem rounds to its granularity): Suspend what NCCL_SUSPEND_MEM releases,
 * Persist the rest of it, Total the two; neither the users' buffers nor the peers' memory
 * mapped here. The numbers do not change while suspended (NCCL's neither); Suspended is 1 from
 * suspend to resume. A host communicator has no device memory: 0 bytes, and Suspended as
 * above.
 *
 * A failed step leaves every rank where it was: a suspend that cannot go through on some rank
 * (a kernel failed, a call on another thread did not return within ZINC_TIMEOUT) is refused on
 * all, and a resume that fails on some rank (say, a GPU filled meanwhile) releases again on
 * all, so that the communicator stays suspended and resume can be retried.
 */
#include "devapi.h"
#include "group.h"
#include "exec/cuda_stage.h"
#include "proxy/gpu_net_engine.h"
#include "util/clock.h"
#include "util/cuda.h"

#include <stdlib.h>
#include <time.h>

/* What a suspension released, for resume to rebuild. */
struct zn_suspend {
    int arena;        /* the shared-memory arena */
    int p2p;          /* the p2p arenas (zn_p2p_suspend) */
    int64_t since_ns; /* when, for the log */
};

/* The communicator's state must allow a suspend or resume (not its suspension, which the
 * callers check themselves). */
static ncclResult_t check_state(struct ncclComm *c, const char *fn)
{
    if (atomic_load(&c->revoked))
        return zn_error(ncclInvalidUsage, ZN_CALL, "%s: comm %p was revoked (ncclCommRevoke)", fn,
                        (void *)c);
    if (c->finalized)
        return zn_error(ncclInvalidUsage, ZN_CALL, "%s: comm %p was finalized (ncclCommFinalize)",
                        fn, (void *)c);
    ncclResult_t st = (ncclResult_t)atomic_load(&c->async_err);
    if (st == ncclInProgress)
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "%s: comm %p is still busy with a non-blocking call (init, finalize): "
                        "wait for ncclCommGetAsyncError to return ncclSuccess",
                        fn, (void *)c);
    if (st != ncclSuccess)
        return zn_error(st, ZN_CALL, "%s: comm %p failed earlier (%s)", fn, (void *)c,
                        c->last_error);
    return ncclSuccess;
}

/* Every rank's verdict on a step: this rank's failure, or the first other rank's. */
static ncclResult_t agree(struct ncclComm *c, ncclResult_t mine, const char *fn, const char *what)
{
    int32_t *all = calloc((size_t)c->nranks, sizeof(*all));
    if (!all) return zn_error(ncclSystemError, ZN_CALL, "out of memory");
    all[c->rank] = (int32_t)mine;
    ncclResult_t res = zn_boot_allgather(c->boot, all, sizeof(*all));
    if (mine != ncclSuccess) res = mine; /* logged where it happened */
    for (int r = 0; res == ncclSuccess && r < c->nranks; r++)
        if (all[r] != ncclSuccess)
            res = zn_error(ncclRemoteError, ZN_CALL, "%s: rank %d could not %s (see its log)", fn,
                           r, what);
    free(all);
    return res;
}

/* Device memory of comm (its device current): what a suspension releases and what stays. */
static void gpu_bytes(const struct ncclComm *c, uint64_t *dynamic, uint64_t *persist)
{
    *dynamic = *persist = 0;
    if (c->kind != ZN_COMM_CUDA) return;
    if (c->p2p) {
        int releasable = 0;
        size_t b = zn_p2p_own_bytes(c->p2p, &releasable);
        *(releasable ? dynamic : persist) += b;
    }
    *persist += zn_stage_gpu_bytes(c->cuda.stage) + zn_gpunet_gpu_bytes(c->cuda.gnet) +
                zn_devcomms_gpu_bytes(c) + zn_devwins_gpu_bytes(c);
}

/* This rank's share of a suspend: nothing of another thread in flight, nothing on the GPU. */
static ncclResult_t quiesce(struct ncclComm *c)
{
    int64_t deadline = zn_now_ns() + zn_timeout_ns();
    while (atomic_load(&c->busy) > 1) { /* the 1 is this call */
        if (zn_now_ns() > deadline)
            return zn_error(ncclInvalidUsage, ZN_CALL,
                            "ncclCommSuspend: %d call(s) on comm %p on other threads did not "
                            "return within ZINC_TIMEOUT",
                            atomic_load(&c->busy) - 1, (void *)c);
        struct timespec ts = { 0, 100000 };
        nanosleep(&ts, NULL);
    }
    if (c->kind != ZN_COMM_CUDA) return ncclSuccess;
    ZN_CHECK(zn_cuda_device_sync());
    const char *why = zn_cuda_failure(&c->cuda);
    if (why)
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "ncclCommSuspend: a kernel of comm %p failed (%s): it cannot be suspended",
                        (void *)c, why);
    return ncclSuccess;
}

static ncclResult_t suspend(struct ncclComm *c)
{
    /* From here on, new calls on other threads are refused; those in flight end (quiesce). */
    if (atomic_exchange(&c->suspended, 1))
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "ncclCommSuspend: comm %p is suspended already (ncclCommResume first)",
                        (void *)c);
    struct zn_suspend *s = calloc(1, sizeof(*s));
    ncclResult_t mine = s ? quiesce(c) : zn_error(ncclSystemError, ZN_CALL, "out of memory");
    ncclResult_t res = agree(c, mine, "ncclCommSuspend", "quiesce its communicator");
    /* The GPU arenas: if the step fails before anything was released (the ranks agree on
     * that), the communicator stays active. */
    if (res == ncclSuccess && c->p2p) {
        res = zn_p2p_suspend(&c->tctx, c->p2p, ZN_DEV_DATA_OFF);
        s->p2p = c->p2p->suspended;
    }
    if (res != ncclSuccess && !(s && s->p2p)) {
        free(s);
        atomic_store(&c->suspended, 0);
        return res;
    }
    if (c->arena) {
        zn_comm_arena_release(c);
        s->arena = 1;
    }
    if (c->kind == ZN_COMM_CUDA) zn_stage_trim(c->cuda.stage);
    s->since_ns = zn_now_ns();
    c->suspend = s;
    /* Every rank has released what it holds when any returns. */
    if (res == ncclSuccess) res = zn_boot_barrier(c->boot);
    const char *shm = s->arena ? "shared-memory arena unmapped" : "no shared-memory arena";
    if (c->kind == ZN_COMM_CUDA) {
        uint64_t dyn, per;
        size_t fr = 0, tot = 0;
        gpu_bytes(c, &dyn, &per);
        zn_cuda_mem_info(&fr, &tot);
        zn_info(ZN_INIT | ZN_ALLOC,
                "comm %p rank %d suspended: %llu bytes of GPU memory released, %llu stay; %s; "
                "GPU %d now has %zu of %zu bytes free",
                (void *)c, c->rank, (unsigned long long)(s->p2p ? dyn : 0), (unsigned long long)per,
                shm, c->cuda_dev, fr, tot);
    } else {
        zn_info(ZN_INIT | ZN_ALLOC, "comm %p rank %d suspended: %s", (void *)c, c->rank, shm);
    }
    return res;
}

static ncclResult_t resume(struct ncclComm *c)
{
    struct zn_suspend *s = c->suspend;
    if (!s)
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "ncclCommResume: comm %p is still being suspended (on another thread?)",
                        (void *)c);
    ncclResult_t res = ncclSuccess;
    /* Each step is agreed on by every rank, and a failed one undoes the steps before it: the
     * communicator stays suspended on every rank, and resume can be retried. */
    if (s->arena) {
        res = agree(c, zn_comm_arena_rebuild(c), "ncclCommResume", "map the shared-memory arena");
        if (res != ncclSuccess) {
            zn_comm_arena_release(c);
            return res;
        }
    }
    if (s->p2p) {
        res = zn_p2p_resume(&c->tctx, c->p2p);
        if (res != ncclSuccess) {
            zn_comm_arena_release(c);
            return res;
        }
    }
    /* Nobody runs a collective before every rank has rebuilt its part. */
    res = zn_boot_barrier(c->boot);
    c->suspend = NULL;
    atomic_store(&c->suspended, 0);
    zn_info(ZN_INIT | ZN_ALLOC, "comm %p rank %d resumed after %.3f s", (void *)c, c->rank,
            (double)(zn_now_ns() - s->since_ns) / 1e9);
    free(s);
    return res;
}

/* The collective part, run now or at the end of the caller's group (zn_group_defer). */
static ncclResult_t suspend_call(void *arg, int run)
{
    struct ncclComm *c = arg;
    if (!run) return ncclSuccess;
    atomic_fetch_add(&c->busy, 1);
    int cur = c->kind == ZN_COMM_CUDA ? zn_cuda_enter(c->cuda_dev) : -1;
    ncclResult_t res = suspend(c);
    if (c->kind == ZN_COMM_CUDA) zn_cuda_leave(c->cuda_dev, cur);
    if (res != ncclSuccess) zn_comm_save_error(c);
    atomic_fetch_sub(&c->busy, 1);
    return res;
}

static ncclResult_t resume_call(void *arg, int run)
{
    struct ncclComm *c = arg;
    if (!run) return ncclSuccess;
    atomic_fetch_add(&c->busy, 1);
    int cur = c->kind == ZN_COMM_CUDA ? zn_cuda_enter(c->cuda_dev) : -1;
    ncclResult_t res = resume(c);
    if (c->kind == ZN_COMM_CUDA) zn_cuda_leave(c->cuda_dev, cur);
    if (res != ncclSuccess) zn_comm_save_error(c);
    atomic_fetch_sub(&c->busy, 1);
    return res;
}

ZN_API(ncclResult_t, ncclCommSuspend, ncclComm_t comm, int flags)
{
    ZN_CHECK(zn_comm_check(comm, "ncclCommSuspend"));
    if (flags & ~NCCL_SUSPEND_MEM)
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "ncclCommSuspend: flags 0x%x has bits other than NCCL_SUSPEND_MEM (0x%x)",
                        (unsigned)flags, (unsigned)NCCL_SUSPEND_MEM);
    ZN_CHECK(check_state(comm, "ncclCommSuspend"));
    if (atomic_load(&comm->suspended))
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "ncclCommSuspend: comm %p is suspended already (ncclCommResume first)",
                        (void *)comm);
    if (!(flags & NCCL_SUSPEND_MEM)) return ncclSuccess; /* nothing asked for: NCCL's no-op */
    return zn_group_defer(comm, suspend_call, comm);
}

ZN_API(ncclResult_t, ncclCommResume, ncclComm_t comm)
{
    ZN_CHECK(zn_comm_check(comm, "ncclCommResume"));
    ZN_CHECK(check_state(comm, "ncclCommResume"));
    if (!atomic_load(&comm->suspended))
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "ncclCommResume: comm %p is not suspended (ncclCommSuspend with "
                        "NCCL_SUSPEND_MEM first)",
                        (void *)comm);
    return zn_group_defer(comm, resume_call, comm);
}

ZN_API(ncclResult_t, ncclCommMemStats, ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value)
{
    ZN_CHECK(zn_comm_check(comm, "ncclCommMemStats"));
    if (!value) return zn_error(ncclInvalidArgument, ZN_CALL, "ncclCommMemStats: value is NULL");
    if (zn_comm_init_pending(comm))
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "ncclCommMemStats: comm %p is still initialising (non-blocking init)",
                        (void *)comm);
    uint64_t dyn = 0, per = 0;
    switch (stat) {
    case ncclStatGpuMemSuspended:
        *value = atomic_load(&comm->suspended) ? 1 : 0;
        return ncclSuccess;
    case ncclStatGpuMemSuspend:
    case ncclStatGpuMemPersist:
    case ncclStatGpuMemTotal: break;
    default:
        return zn_error(ncclInvalidArgument, ZN_CALL,
                        "ncclCommMemStats: stat %d is not an ncclCommMemStat_t (0-3)", (int)stat);
    }
    /* The driver sizes an allocation in the context of its device. */
    int cur = comm->kind == ZN_COMM_CUDA ? zn_cuda_enter(comm->cuda_dev) : -1;
    gpu_bytes(comm, &dyn, &per);
    if (comm->kind == ZN_COMM_CUDA) zn_cuda_leave(comm->cuda_dev, cur);
    *value = stat == ncclStatGpuMemSuspend ? dyn : stat == ncclStatGpuMemPersist ? per : dyn + per;
    return ncclSuccess;
}
