/*
 * One-sided operations on cuda communicators (rma.c says how the pieces fit): stream-ordered,
 * captured into graphs like any other call. The launches are in exec/cuda_rma.c, the kernels in
 * device/rma.cu.
 *
 * LSA pairs (every GPU of the communicator maps every other, devapi.h's LSA team): each rank's
 * signal words are cuMem memory registered as a window of its own, so that every peer has
 * them mapped (api/devwin.c, as the user's windows). A put is a copy into the peer's window
 * as mapped here (by the kernel up to ZN_CUDA_RMA_CE_MIN bytes, else by the copy engine), a
 * system-scope fence, and an atomic add of 1 to the peer's word for (this rank, sigIdx, ctx).
 * A wait is a kernel that watches its own words. The counts a wait consumed live in device
 * memory: nothing on the host counts, so a graph replays as often as it is launched.
 *
 * Other pairs go through the GIN engine (rma_gin.c): a kernel queues the requests into its
 * FIFO and ends once the engine has read the sources; waits watch the engine's words (mapped
 * host memory).
 */
#include "rma.h"
#include "devapi.h"
#include "exec/cuda_rma.h"
#include "nccl_device/gin_proxy.h"
#include "util/cuda.h"

#include <stdlib.h>
#include <string.h>

struct zn_rma_gpu {
    struct zn_cumem sigmem;   /* LSA: this rank's signal words, exportable */
    struct zn_devwin *sigwin; /* LSA: every peer's signal words as mapped here */
    uint64_t *sig;            /* this rank's signal words (device memory) */
    uint64_t *consumed;       /* per (sender, ctx, sig): what waits consumed (device memory) */
};

static int lsa_all(const struct ncclComm *comm)
{
    int size, rank;
    zn_dev_lsa(comm, &size, &rank);
    return size == comm->nranks;
}

enum zn_rma_path zn_rma_gpu_path(const struct ncclComm *comm, int peer)
{
    if (peer == comm->rank) return ZN_RMA_SELF;
    return lsa_all(comm) ? ZN_RMA_LSA : ZN_RMA_GIN;
}

ncclResult_t zn_rma_gpu_setup(struct zn_rma *r, int *need_gin)
{
    struct ncclComm *c = r->comm;
    struct zn_rma_gpu *g;
    ZN_CHECK(zn_calloc(&g, 1, "one-sided GPU state"));
    r->gpu = g;
    size_t bytes = r->nwords * 8;
    int lsa = lsa_all(c) && c->nranks > 1;
    if (lsa) {
        /* Collective: every rank maps every other's words (a failure fails every rank). */
        ZN_CHECK(zn_cumem_alloc(c->cuda_dev, bytes, &g->sigmem));
        ZN_CHECK(zn_cumem_share_local(&g->sigmem));
        g->sig = g->sigmem.ptr;
        ZN_CHECK(zn_cuda_memset(g->sig, 0, bytes));
        ZN_CHECK(zn_devwin_create(c, g->sig, bytes, NULL, &g->sigwin));
        if (g->sigwin->unmapped)
            return zn_error(ncclInvalidUsage, ZN_CALL,
                            "one-sided setup of comm %p: the GPUs could not map each other's "
                            "signal words (%s)",
                            (void *)c, g->sigwin->why);
    } else {
        ZN_CHECK(zn_cuda_malloc((void **)&g->sig, bytes, "signal words"));
        ZN_CHECK(zn_cuda_memset(g->sig, 0, bytes));
    }
    ZN_CHECK(zn_cuda_malloc((void **)&g->consumed, bytes, "signal counts"));
    ZN_CHECK(zn_cuda_memset(g->consumed, 0, bytes));
    for (int p = 0; p < c->nranks; p++) r->path[p] = zn_rma_gpu_path(c, p);
    *need_gin = !lsa && c->nranks > 1;
    return ncclSuccess;
}

void zn_rma_gpu_fini(struct zn_rma *r)
{
    struct zn_rma_gpu *g = r->gpu;
    if (!g) return;
    /* Kernels that use these have ended: the communicator's device was synchronised. */
    if (g->sigwin) zn_devwin_destroy(g->sigwin, 0);
    if (g->sigmem.ptr)
        zn_cumem_free(&g->sigmem);
    else if (g->sig)
        zn_cuda_free(g->sig);
    if (g->consumed) zn_cuda_free(g->consumed);
    free(g);
    r->gpu = NULL;
}

static void watch(struct zn_rma *r, struct zn_dev_rma_watch *w)
{
    const struct zn_dev_comm *d = &r->comm->cuda.dev;
    struct zn_dev_gin dg = { 0 };
    if (r->gin) zn_rma_gin_dev(r, &dg);
    *w = (struct zn_dev_rma_watch){ .abort_flag = d->abort_flag,
                                    .error = d->error,
                                    .gin_error = r->gin ? dg.error : NULL,
                                    .timeout_ns = d->timeout_ns };
}

/* A run of consecutive operations on one stream and one kind of path, launched together. */
struct run {
    void *stream;
    int gin;
    int n;
    struct zn_dev_rma_put *puts;
    struct zn_dev_gin_req *reqs;
};

static ncclResult_t run_flush(struct zn_rma *r, struct run *x)
{
    if (!x->n) return ncclSuccess;
    ncclResult_t res;
    if (x->gin) {
        if (!r->gin) return zn_error(ncclInternalError, ZN_CALL, "one-sided: no GIN engine");
        struct zn_dev_gin dg;
        struct zn_dev_rma_watch w;
        zn_rma_gin_dev(r, &dg);
        watch(r, &w);
        res = zn_cuda_rma_gin(&dg, &w, x->reqs, x->n, x->stream);
    } else {
        res = zn_cuda_rma_put(x->puts, x->n, x->stream);
    }
    x->n = 0;
    return res;
}

ncclResult_t zn_rma_gpu_run(struct zn_rma *r, struct zn_rma_op **ops, int n)
{
    struct ncclComm *c = r->comm;
    struct zn_rma_gpu *g = r->gpu;
    if (r->gin) ZN_CHECK(zn_rma_gin_check(r, "ncclPutSignal"));
    struct run x = { 0 };
    x.puts = calloc((size_t)n, sizeof(*x.puts));
    x.reqs = calloc((size_t)n, sizeof(*x.reqs));
    ncclResult_t res = ncclSuccess;
    if (!x.puts || !x.reqs) {
        res = zn_error(ncclSystemError, ZN_CALL, "out of memory");
        goto out;
    }
    for (int i = 0; i < n && res == ncclSuccess; i++) {
        const struct zn_rma_op *op = ops[i];
        int path = r->path[op->peer], gin = path == ZN_RMA_GIN;
        if (x.n && (x.stream != op->stream || x.gin != gin)) res = run_flush(r, &x);
        if (res != ncclSuccess) break;
        x.stream = op->stream;
        x.gin = gin;
        size_t word = zn_rma_word(r, c->rank, op->ctx, op->sig);
        uint64_t bytes = op->kind == ZN_RMA_PUT ? op->bytes : 0;
        if (gin) {
            x.reqs[x.n++] = (struct zn_dev_gin_req){
                .op = bytes ? ZINC_GIN_OP_PUT : ZINC_GIN_OP_SIGNAL,
                .peer = op->peer,
                .src = (uint64_t)(uintptr_t)op->src,
                .dst_off = bytes ? op->off : 0,
                .bytes = bytes,
                .win = bytes ? op->win.dw->view.ginOffset4K : 0,
                .flags = ZINC_GIN_F_SIGNAL_INC,
                .signal = (uint32_t)word,
            };
            continue;
        }
        char *dst = NULL;
        uint64_t *sig;
        if (path == ZN_RMA_SELF) {
            if (bytes) dst = (char *)op->win.buf + op->off;
            sig = g->sig + word;
        } else {
            if (bytes) dst = op->win.dw->view.lsaPtrs[op->peer] + op->off;
            sig = (uint64_t *)g->sigwin->view.lsaPtrs[op->peer] + word;
        }
        x.puts[x.n++] =
            (struct zn_dev_rma_put){ .src = op->src, .dst = dst, .bytes = bytes, .sig = sig };
    }
    if (res == ncclSuccess) res = run_flush(r, &x);
out:
    free(x.puts);
    free(x.reqs);
    return res;
}

ncclResult_t zn_rma_gpu_wait(struct zn_rma *r, const struct zn_rma_want *want, int n, void *stream)
{
    struct zn_rma_gpu *g = r->gpu;
    volatile uint64_t *gin = r->gin ? zn_rma_gin_signals(r, 1) : NULL;
    struct zn_dev_rma_wait *w = calloc((size_t)n, sizeof(*w));
    if (!w) return zn_error(ncclSystemError, ZN_CALL, "out of memory");
    for (int i = 0; i < n; i++) {
        size_t k = zn_rma_word(r, want[i].peer, want[i].ctx, want[i].sig);
        w[i] = (struct zn_dev_rma_wait){
            .word = r->path[want[i].peer] == ZN_RMA_GIN && gin ? gin + k : g->sig + k,
            .consumed = g->consumed + k,
            .count = want[i].count,
        };
    }
    struct zn_dev_rma_watch wt;
    watch(r, &wt);
    ncclResult_t res = zn_cuda_rma_wait(&wt, w, n, stream);
    free(w);
    return res;
}
