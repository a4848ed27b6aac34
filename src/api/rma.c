/*
 * One-sided operations (NCCL 2.29): ncclPutSignal writes bytes into a peer's part of a window
 * and raises a signal there, ncclSignal raises one alone, ncclWaitSignal waits for signals.
 * This file holds the entry points, their argument checks, how they go through groups, the
 * communicator's setup and teardown; rma_host.c runs them on host communicators, rma_gpu.c on
 * cuda communicators, rma_gin.c drives the GIN engine that carries them between hosts.
 *
 * Signals. Each rank counts the signals it gets per (sender, sigIdx, ctx): sigIdx in
 * [0, ZN_RMA_NSIG), ctx in [0, config.numRmaCtx) (NCCL 2.30 takes only 0 and 0). A sender adds
 * 1 to the receiver's word for the triple; a wait for opCnt signals waits until the word has
 * grown by opCnt past what earlier waits consumed, then consumes them. Operations to one peer
 * and context arrive in program order, data and signals alike: a signal seen means the data
 * of every earlier put to that peer is visible (here: on any context, a stronger order).
 *
 * Paths (one per pair, the same on both sides; enum zn_rma_path):
 *   SELF  a copy and a signal of this rank's own;
 *   SHM   host communicators, host memory of one host: puts by cross-memory attach into the
 *         peer's window (the shm transport's one-sided table, transport/shm_rma.c), signals as
 *         release stores of the sender's running count into the peer's words in a shm segment;
 *   LSA   cuda communicators whose GPUs all map each other: the windows and the signal words
 *         are mapped into every peer (api/devwin.c); a kernel copies, fences and adds 1 to the
 *         peer's word, large puts go through the copy engine followed by that kernel;
 *   GIN   everything else (other hosts; one host with cross-memory attach refused or with
 *         ZINC_TRANSPORT=socket; GPUs that do not map each other): the GIN engine of the device
 *         API (proxy/gin.c), a thread per communicator that carries requests over the net
 *         transport and applies the peer's into this rank's windows and signal words.
 *
 * Setup: collective, at each rank's first one-sided call (queued at the end of the caller's
 * group, before its operations), as in NCCL 2.30, whose first such call registers a signal
 * window on every rank: every rank must make one, in the same order as its other collective
 * calls (else the setup waits up to ZINC_TIMEOUT, as NCCL's would hang). It makes this rank's
 * signal words (a shm segment, device memory mapped by the peers, or the engine's), decides
 * the paths, and starts the GIN engine where a pair needs it. A window registered on a host
 * communicator exchanges its buffer's key for cross-memory attach at registration (collective
 * already); a peer imports it at its first put into it.
 *
 * Rejected: connections made when first used, the target accepting them whenever it
 * progresses (a listener per rank whose address the ranks exchange at init). The target of a
 * put makes no call, and on a host communicator it may be blocked in a collective that waits
 * for the very rank that puts to it: a put that has to wait for the target to accept a
 * connection, or to land the data, turns such a legal program into a timeout. The paths used
 * instead never wait for the target: cross-memory attach writes the peer's memory from the
 * caller, and the GIN engine is a thread of the target's own. The costs, per communicator
 * that uses one-sided calls, at 16 / 64 / 256 ranks:
 *   - host communicators: two allgathers of 8 and 184 bytes per rank at setup (log2 n rounds
 *     each); cuda communicators on one host: the allgather of a window registration;
 *   - signal words, per rank: nranks * numRmaCtx * 8 words (1 / 4 / 16 KB with one context;
 *     on GPUs one cuMem allocation, 2 MB at least); on one host a shm segment that every rank
 *     of the host maps at setup (so that its name leaves /dev/shm at once, whatever happens
 *     later): n^2 small mappings per host;
 *   - a window on a host communicator: one allgather of a 168-byte key per rank;
 *   - GIN, where some pair needs it: a listener per rank and an allgather of its handle (the
 *     net transport's init), an engine thread per rank, and, as the engine is written today,
 *     a connection to every peer it serves as soon as it starts: 15 / 63 / 255 connections
 *     per rank (on the socket net each with its data streams and helper threads). Connecting
 *     only to the peers used needs the net transport to hand the engine the connections that
 *     peers opened to it, which its listener accepts already (a change in proxy/gin.c).
 *
 * Groups: the puts and signals of a group run before its other operations, the waits after
 * them (NCCL: operations of a group complete in any order), so that a group that both signals
 * a peer and waits for it cannot deadlock. Host communicators complete a call (or the whole
 * group) before returning: localbuff is reusable and waits are over.
 *
 * Buffers: localbuff may be any buffer (host communicators: any host memory of the process;
 * cuda communicators: memory the GPU reads), where NCCL requires it to lie in a symmetric
 * window. The window of a put on GPUs of one host must be mapped in the peers (ncclMemAlloc
 * memory), as NCCL requires too.
 */
#include "rma.h"
#include "devapi.h"
#include "exec/reduce.h"
#include "util/cuda.h"
#include "util/param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- argument checks ----------------------------------------------------------------------- */

static ncclResult_t fail(ncclResult_t r)
{
    zn_group_set_error(r);
    return r;
}

static ncclResult_t bad(const char *fn, const char *arg, long long v, const char *why)
{
    return fail(
        zn_error(ncclInvalidArgument, ZN_CALL, "%s: invalid %s %lld (%s)", fn, arg, v, why));
}

/* What every one-sided call checks first. */
static ncclResult_t check_comm(struct ncclComm *c, const char *fn, cudaStream_t stream)
{
    ncclResult_t r = zn_comm_check_call(c, fn, (const void *)stream);
    if (r != ncclSuccess) return fail(r);
    if (c->config.numRmaCtx <= 0)
        return fail(zn_error(ncclInvalidUsage, ZN_CALL,
                             "%s: one-sided operations are off on comm %p (config.numRmaCtx is 0)",
                             fn, (void *)c));
    return ncclSuccess;
}

static ncclResult_t check_target(struct ncclComm *c, const char *fn, const char *what, int peer,
                                 int sig, int ctx)
{
    char arg[32];
    if (peer < 0 || peer >= c->nranks) {
        snprintf(arg, sizeof(arg), "%speer", what);
        return bad(fn, arg, peer,
                   c->nranks == 1 ? "the communicator has 1 rank"
                                  : "outside the communicator's ranks");
    }
    if (sig < 0 || sig >= ZN_RMA_NSIG) {
        snprintf(arg, sizeof(arg), "%ssigIdx", what);
        return bad(fn, arg, sig, "zinc has signal indexes 0 to 7");
    }
    if (ctx < 0 || ctx >= c->config.numRmaCtx) {
        snprintf(arg, sizeof(arg), "%sctx", what);
        char why[80];
        snprintf(why, sizeof(why), "config.numRmaCtx is %d", c->config.numRmaCtx);
        return bad(fn, arg, ctx, why);
    }
    return ncclSuccess;
}

static ncclResult_t check_flags(const char *fn, unsigned int flags)
{
    if (flags != 0)
        return fail(zn_error(ncclInvalidArgument, ZN_CALL, "%s: invalid flags 0x%x (must be 0)", fn,
                             flags));
    return ncclSuccess;
}

/* --- setup ----------------------------------------------------------------------------------- */

static ncclResult_t setup(struct zn_rma *r)
{
    struct ncclComm *c = r->comm;
    int need_gin = 0;
    ZN_CHECK(zn_calloc(&r->path, (size_t)c->nranks, "one-sided paths"));
    if (c->kind == ZN_COMM_CUDA)
        ZN_CHECK(zn_rma_gpu_setup(r, &need_gin));
    else
        ZN_CHECK(zn_rma_host_setup(r, &need_gin));
    if (need_gin) ZN_CHECK(zn_rma_gin_setup(r));
    int counts[4] = { 0 };
    for (int p = 0; p < c->nranks; p++) counts[r->path[p]]++;
    zn_info(ZN_INIT | ZN_CALL,
            "comm %p rank %d: one-sided operations set up (%d contexts, %d signal indexes): %d "
            "peers by cross-memory attach, %d mapped GPUs, %d through the GIN engine",
            (void *)c, c->rank, r->nctx, ZN_RMA_NSIG, counts[ZN_RMA_SHM], counts[ZN_RMA_LSA],
            counts[ZN_RMA_GIN]);
    return ncclSuccess;
}

/* The deferred setup (zn_group_defer): collective, before the group's operations. */
static ncclResult_t setup_call(void *arg, int run)
{
    struct zn_rma *r = arg;
    r->queued = 0;
    if (!run || r->ready || r->setup_err != ncclSuccess) return ncclSuccess;
    struct ncclComm *c = r->comm;
    atomic_fetch_add(&c->busy, 1);
    int cur = c->kind == ZN_COMM_CUDA ? zn_cuda_enter(c->cuda_dev) : -1;
    ncclResult_t res = setup(r);
    if (c->kind == ZN_COMM_CUDA) zn_cuda_leave(c->cuda_dev, cur);
    atomic_fetch_sub(&c->busy, 1);
    if (res != ncclSuccess) {
        r->setup_err = res;
        return res;
    }
    r->ready = 1;
    return ncclSuccess;
}

/* The communicator's state, and its setup queued (or run, outside a group) if it is new. */
ncclResult_t zn_rma_state(struct ncclComm *c, struct zn_rma **out)
{
    struct zn_rma *r = c->rma;
    if (!r) {
        ZN_CHECK(zn_calloc(&r, 1, "one-sided state"));
        r->comm = c;
        r->nctx = c->config.numRmaCtx;
        r->nwords = (size_t)c->nranks * (size_t)r->nctx * ZN_RMA_NSIG;
        c->rma = r;
    }
    *out = r;
    return ncclSuccess;
}

static ncclResult_t ensure_setup(struct ncclComm *c, const char *fn)
{
    struct zn_rma *r;
    ncclResult_t res = zn_rma_state(c, &r);
    if (res != ncclSuccess) return fail(res);
    if (r->setup_err != ncclSuccess)
        return fail(zn_error(r->setup_err, ZN_CALL,
                             "%s: the one-sided setup of comm %p failed earlier (see its message)",
                             fn, (void *)c));
    if (r->ready || r->queued) return ncclSuccess;
    r->queued = 1;
    return zn_group_defer(c, setup_call, r);
}

/* --- submission --------------------------------------------------------------------------- */

ncclResult_t zn_rma_op_free(void *arg, int run)
{
    struct zn_rma_op *op = arg;
    if (op) free(op->descs);
    free(op);
    return ncclSuccess;
}

static ncclResult_t submit(struct ncclComm *c, struct zn_rma_op *op, const char *fn)
{
    ncclResult_t res = ensure_setup(c, fn);
    if (res != ncclSuccess) {
        zn_rma_op_free(op, 0);
        return res;
    }
    struct zn_gop g = {
        .kind = ZN_GOP_RMA, .comm = c, .stream = op->stream, .fn = zn_rma_op_free, .arg = op
    };
    g.a.peer = op->peer;
    return zn_group_submit(&g);
}

static ncclResult_t new_op(enum zn_rma_kind kind, cudaStream_t stream, struct zn_rma_op **out)
{
    struct zn_rma_op *op = calloc(1, sizeof(*op));
    if (!op) return fail(zn_error(ncclSystemError, ZN_CALL, "out of memory"));
    op->kind = kind;
    op->stream = (void *)stream;
    *out = op;
    return ncclSuccess;
}

ZN_API(ncclResult_t, ncclPutSignal, const void *localbuff, size_t count, ncclDataType_t datatype,
       int peer, ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
       unsigned int flags, ncclComm_t comm, cudaStream_t stream)
{
    const char *fn = "ncclPutSignal";
    zn_params();
    ZN_CHECK(check_comm(comm, fn, stream));
    if ((int)datatype < 0 || (int)datatype >= ncclNumTypes)
        return bad(fn, "datatype", (int)datatype, "not an ncclDataType_t");
    ZN_CHECK(check_target(comm, fn, "", peer, sigIdx, ctx));
    ZN_CHECK(check_flags(fn, flags));
    struct zn_window_parts w;
    if (!peerWin || !zn_window_lookup(comm, peerWin, &w))
        return fail(zn_error(ncclInvalidArgument, ZN_CALL,
                             "%s: peerWin %p is not a window registered on comm %p "
                             "(ncclCommWindowRegister; deregistered already, or another "
                             "communicator's?)",
                             fn, (void *)peerWin, (void *)comm));
    size_t es = zn_dtype_size(datatype);
    if (count > SIZE_MAX / es)
        return fail(zn_error(ncclInvalidArgument, ZN_CALL,
                             "%s: invalid count %zu (the buffer would overflow the address space)",
                             fn, count));
    size_t bytes = count * es;
    if (!localbuff && bytes)
        return fail(zn_error(ncclInvalidArgument, ZN_CALL, "%s: localbuff is NULL with count %zu",
                             fn, count));
    if (peerWinOffset > w.size || bytes > w.size - peerWinOffset)
        return fail(zn_error(ncclInvalidArgument, ZN_CALL,
                             "%s: %zu bytes at peerWinOffset %zu run past the end of window %p "
                             "(%zu bytes)",
                             fn, bytes, peerWinOffset, (void *)peerWin, w.size));
    if (comm->kind == ZN_COMM_CUDA && bytes && zn_rma_gpu_path(comm, peer) == ZN_RMA_LSA &&
        w.dw->unmapped)
        return fail(zn_error(ncclInvalidUsage, ZN_CALL,
                             "%s: window %p is not mapped into the peers' GPUs (%s); a window "
                             "that peers put into must be allocated with ncclMemAlloc",
                             fn, (void *)peerWin, w.dw->why));
    struct zn_rma_op *op = NULL;
    ZN_CHECK(new_op(ZN_RMA_PUT, stream, &op));
    op->peer = peer;
    op->sig = sigIdx;
    op->ctx = ctx;
    op->src = localbuff;
    op->bytes = bytes;
    op->win = w;
    op->off = peerWinOffset;
    zn_log(ZN_LOG_INFO, ZN_CALL,
           "%s: localbuff %p count %zu datatype %s peer %d win %p offset %zu sigIdx %d ctx %d "
           "comm %p stream %p",
           fn, localbuff, count, zn_dtype_name(datatype), peer, (void *)peerWin, peerWinOffset,
           sigIdx, ctx, (void *)comm, (void *)stream);
    return submit(comm, op, fn);
}

ZN_API(ncclResult_t, ncclSignal, int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
       cudaStream_t stream)
{
    const char *fn = "ncclSignal";
    zn_params();
    ZN_CHECK(check_comm(comm, fn, stream));
    ZN_CHECK(check_target(comm, fn, "", peer, sigIdx, ctx));
    ZN_CHECK(check_flags(fn, flags));
    struct zn_rma_op *op = NULL;
    ZN_CHECK(new_op(ZN_RMA_SIGNAL, stream, &op));
    op->peer = peer;
    op->sig = sigIdx;
    op->ctx = ctx;
    zn_log(ZN_LOG_INFO, ZN_CALL, "%s: peer %d sigIdx %d ctx %d comm %p stream %p", fn, peer, sigIdx,
           ctx, (void *)comm, (void *)stream);
    return submit(comm, op, fn);
}

ZN_API(ncclResult_t, ncclWaitSignal, int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
       cudaStream_t stream)
{
    const char *fn = "ncclWaitSignal";
    zn_params();
    ZN_CHECK(check_comm(comm, fn, stream));
    if (nDesc <= 0) return bad(fn, "nDesc", nDesc, "at least one descriptor");
    if (!signalDescs)
        return fail(zn_error(ncclInvalidArgument, ZN_CALL, "%s: signalDescs is NULL with nDesc %d",
                             fn, nDesc));
    for (int i = 0; i < nDesc; i++) {
        const ncclWaitSignalDesc_t *d = &signalDescs[i];
        char what[40];
        snprintf(what, sizeof(what), "signalDescs[%d].", i);
        if (d->opCnt <= 0) {
            snprintf(what, sizeof(what), "signalDescs[%d].opCnt", i);
            return bad(fn, what, d->opCnt, "must be at least 1");
        }
        ZN_CHECK(check_target(comm, fn, what, d->peer, d->sigIdx, d->ctx));
    }
    struct zn_rma_op *op = NULL;
    ZN_CHECK(new_op(ZN_RMA_WAIT, stream, &op));
    op->descs = malloc((size_t)nDesc * sizeof(*op->descs));
    if (!op->descs) {
        zn_rma_op_free(op, 0);
        return fail(zn_error(ncclSystemError, ZN_CALL, "out of memory"));
    }
    memcpy(op->descs, signalDescs, (size_t)nDesc * sizeof(*op->descs));
    op->ndesc = nDesc;
    op->peer = signalDescs[0].peer;
    zn_log(ZN_LOG_INFO, ZN_CALL, "%s: nDesc %d (first: %d signals from peer %d) comm %p stream %p",
           fn, nDesc, signalDescs[0].opCnt, signalDescs[0].peer, (void *)comm, (void *)stream);
    return submit(comm, op, fn);
}

/* --- running a group's operations --------------------------------------------------------- */

static int is_wait(const struct zn_gop *g)
{
    return ((const struct zn_rma_op *)g->arg)->kind == ZN_RMA_WAIT;
}

/* Counts naming the same signal add up: merge w[from, to) in place; the new end. */
static int merge(struct zn_rma_want *w, int from, int to)
{
    int k = from;
    for (int i = from; i < to; i++) {
        int j = from;
        while (j < k && !(w[j].peer == w[i].peer && w[j].sig == w[i].sig && w[j].ctx == w[i].ctx))
            j++;
        if (j < k)
            w[j].count += w[i].count;
        else
            w[k++] = w[i];
    }
    return k;
}

/* One communicator's waits of the group: on a cuda communicator each on its stream, on a host
 * communicator all of them as one wait. */
static ncclResult_t run_waits(struct zn_rma *r, struct zn_rma_op **ops, int n)
{
    int total = 0;
    for (int i = 0; i < n; i++) total += ops[i]->ndesc;
    struct zn_rma_want *w = calloc((size_t)total, sizeof(*w));
    if (!w) return zn_error(ncclSystemError, ZN_CALL, "out of memory");
    ncclResult_t res = ncclSuccess;
    int m = 0;
    for (int i = 0; i < n && res == ncclSuccess; i++) {
        int first = m;
        for (int k = 0; k < ops[i]->ndesc; k++) {
            const ncclWaitSignalDesc_t *d = &ops[i]->descs[k];
            w[m++] = (struct zn_rma_want){
                .peer = d->peer, .sig = d->sigIdx, .ctx = d->ctx, .count = (uint64_t)d->opCnt
            };
        }
        if (r->comm->kind == ZN_COMM_CUDA) {
            m = merge(w, first, m);
            res = zn_rma_gpu_wait(r, w + first, m - first, ops[i]->stream);
        }
    }
    if (res == ncclSuccess && r->comm->kind == ZN_COMM_HOST)
        res = zn_rma_host_wait(r, w, merge(w, 0, m));
    free(w);
    return res;
}

static ncclResult_t run_comm(struct ncclComm *c, struct zn_rma_op **ops, int n, int waits)
{
    struct zn_rma *r = c->rma;
    if (!r || !r->ready)
        return zn_error(ncclInternalError, ZN_CALL,
                        "comm %p: one-sided operations without their setup", (void *)c);
    if (waits) return run_waits(r, ops, n);
    if (c->kind == ZN_COMM_CUDA) return zn_rma_gpu_run(r, ops, n);
    return zn_rma_host_run(r, ops, n);
}

ncclResult_t zn_rma_run(struct zn_gop *ops, int n, int waits)
{
    struct zn_rma_op *stack[16], **mine = NULL;
    ncclResult_t res = ncclSuccess;
    for (int i = 0; i < n && res == ncclSuccess; i++) {
        if (ops[i].kind != ZN_GOP_RMA || is_wait(&ops[i]) != waits) continue;
        struct ncclComm *c = ops[i].comm;
        int first = 1;
        for (int j = 0; j < i && first; j++)
            first = !(ops[j].kind == ZN_GOP_RMA && ops[j].comm == c && is_wait(&ops[j]) == waits);
        if (!first) continue;
        int m = 0;
        for (int j = i; j < n; j++)
            m += ops[j].kind == ZN_GOP_RMA && ops[j].comm == c && is_wait(&ops[j]) == waits;
        mine = m <= 16 ? stack : malloc((size_t)m * sizeof(*mine));
        if (!mine) return zn_error(ncclSystemError, ZN_CALL, "out of memory");
        m = 0;
        for (int j = i; j < n; j++)
            if (ops[j].kind == ZN_GOP_RMA && ops[j].comm == c && is_wait(&ops[j]) == waits)
                mine[m++] = ops[j].arg;
        int cur = -1;
        if (c->kind == ZN_COMM_CUDA) cur = zn_cuda_enter(c->cuda_dev);
        res = run_comm(c, mine, m, waits);
        if (c->kind == ZN_COMM_CUDA) zn_cuda_leave(c->cuda_dev, cur);
        /* A peer lost (or the engine) leaves the communicator out of step; argument trouble
         * found this late leaves it usable. */
        if (res == ncclRemoteError || res == ncclSystemError) zn_comm_set_error(c, res);
        if (mine != stack) free(mine);
    }
    return res;
}

/* --- lifecycle ------------------------------------------------------------------------------ */

ncclResult_t zn_rma_win_create(struct ncclComm *comm, void *buf, size_t size,
                               struct zn_rma_win **out)
{
    *out = NULL;
    if (comm->kind != ZN_COMM_HOST || comm->config.numRmaCtx <= 0 || comm->nranks == 1)
        return ncclSuccess;
    return zn_rma_host_win_create(comm, buf, size, out);
}

void zn_rma_win_destroy(struct ncclComm *comm, struct zn_rma_win *w)
{
    if (w) zn_rma_host_win_destroy(w);
}

void zn_rma_finalize(struct ncclComm *comm)
{
    struct zn_rma *r = comm->rma;
    if (r && r->ready && r->gin) zn_rma_gin_destroy(r, 1);
}

void zn_rma_stop(struct ncclComm *comm)
{
    struct zn_rma *r = comm->rma;
    if (r && r->gin) zn_rma_gin_destroy(r, 0);
}

void zn_rma_free(struct ncclComm *comm)
{
    struct zn_rma *r = comm->rma;
    if (!r) return;
    zn_rma_stop(comm);
    if (comm->kind == ZN_COMM_CUDA)
        zn_rma_gpu_fini(r);
    else
        zn_rma_host_fini(r);
    free(r->path);
    free(r);
    comm->rma = NULL;
}
