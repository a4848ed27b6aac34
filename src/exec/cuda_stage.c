#include "cuda_stage.h"
#include "proxy/staging_client.h"
#include "util/cuda.h"
#include "util/err.h"
#include "util/size.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if ZINC_HAVE_CUDA
#include <cuda_runtime_api.h>

struct zn_stage {
    struct zn_exec_comm *host; /* the host executor's view of the same communicator */
    int rank, nranks;
    struct zn_staging_client *proxy; /* steps the descriptors (stage_step) when the GPU rings */
    void *pool; /* pinned staging of non-captured operations (they run one at a time) */
    size_t pool_size;
    void **retired; /* outgrown pools, freed at the end (a queued copy may still use one) */
    int nretired;
    atomic_int failed; /* ncclResult_t of a failed operation (the stream still moves on) */
    char fail_msg[512];
};

/* What the proxy runs for one doorbell signal: host copies of the group's operations,
 * pointing into pinned staging memory. */
struct zn_stage_desc {
    int persistent; /* captured into a graph: kept until the communicator goes */
    int nops;
    void *mem; /* persistent descriptors own their staging */
    /* While the proxy steps it (NULL between runs): the host tasks and their run. */
    struct zn_task *tasks;
    struct zn_task **ptrs;
    struct zn_exec_run run;
    struct zn_cuda_op ops[]; /* nops of them */
};

static struct zn_stage_desc *desc_new(int nops)
{
    return calloc(1, sizeof(struct zn_stage_desc) + (size_t)nops * sizeof(struct zn_cuda_op));
}

static ncclResult_t cuda_err(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return ncclSuccess;
    return zn_error(ncclUnhandledCudaError, ZN_PROXY, "%s failed: %s", what, cudaGetErrorString(e));
}

/* --- on the proxy progress thread ------------------------------------------------------ */

static void fail(struct zn_stage *st, ncclResult_t r)
{
    if (r != ncclSuccess && !atomic_load(&st->failed)) {
        snprintf(st->fail_msg, sizeof(st->fail_msg), "%s", zn_last_error());
        atomic_store(&st->failed, (int)r);
    }
}

/* The host tasks of d's operations, started. */
static ncclResult_t begin_desc(struct zn_stage *st, struct zn_stage_desc *d)
{
    d->tasks = calloc((size_t)d->nops, sizeof(*d->tasks));
    d->ptrs = calloc((size_t)d->nops, sizeof(*d->ptrs));
    if (!d->tasks || !d->ptrs)
        return zn_error(ncclSystemError, ZN_PROXY, "out of memory for %d staged operations",
                        d->nops);
    for (int i = 0; i < d->nops; i++) {
        const struct zn_cuda_op *o = &d->ops[i];
        struct zn_task *t = &d->tasks[i];
        t->kind = o->kind == ZN_CUDA_COLL   ? ZN_TASK_COLL
                  : o->kind == ZN_CUDA_SEND ? ZN_TASK_SEND
                                            : ZN_TASK_RECV;
        t->ecomm = st->host;
        t->a = o->a;
        t->op = o->op;
        if (o->scalar_dev) /* ncclScalarDevice: read now, in stream order */
            cudaMemcpy(t->op.scalar, o->scalar_dev, o->a.esize, cudaMemcpyDeviceToHost);
        d->ptrs[i] = t;
    }
    return zn_exec_begin(&d->run, d->ptrs, d->nops);
}

static void end_desc(struct zn_stage_desc *d)
{
    for (int i = 0; d->tasks && i < d->nops; i++) zn_task_release(&d->tasks[i]);
    free(d->tasks);
    free(d->ptrs);
    d->tasks = NULL;
    d->ptrs = NULL;
}

/* The proxy's callbacks: "run a staged collective" (or a group's sends and receives), one
 * pass of the host executor at a time. A failure ends the descriptor (the stream goes on; the
 * next call and ncclCommGetAsyncError report it). */
static int stage_step(void *owner, void *desc, int *moved)
{
    struct zn_stage *st = owner;
    struct zn_stage_desc *d = desc;
    ncclResult_t r = ncclSuccess;
    if (!d->tasks) {
        *moved = 1;
        r = begin_desc(st, d);
    }
    if (r == ncclSuccess) r = zn_exec_pass(&d->run, moved);
    if (r == ncclSuccess && !*moved) r = zn_exec_check(&d->run);
    if (r == ncclSuccess && d->run.remaining > 0) return ZN_STAGING_RUNNING;
    end_desc(d);
    fail(st, r);
    return d->persistent ? ZN_STAGING_KEEP : ZN_STAGING_DONE;
}

static void stage_release(void *owner, void *desc)
{
    struct zn_stage_desc *d = desc;
    end_desc(d);
    zn_cuda_host_free(d->mem);
    free(d);
}

static const struct zn_staging_client_ops stage_proxy_ops = {
    .size = sizeof(struct zn_staging_client_ops),
    .step = stage_step,
    .release = stage_release,
};

ncclResult_t zn_stage_create(struct zn_exec_comm *host, int cuda_dev, struct zn_stage **out)
{
    struct zn_stage *st = calloc(1, sizeof(*st));
    if (!st) return zn_error(ncclSystemError, ZN_PROXY, "out of memory");
    st->host = host;
    st->rank = host->tctx->rank;
    st->nranks = host->tctx->nranks;
    struct zn_staging_client_config cfg = {
        .ops = &stage_proxy_ops, .owner = st, .cuda_dev = cuda_dev, .rank = st->rank
    };
    ncclResult_t res = zn_staging_client_create(&cfg, &st->proxy);
    if (res != ncclSuccess) {
        free(st);
        return res;
    }
    *out = st;
    return ncclSuccess;
}

const char *zn_stage_failure(const struct zn_stage *st)
{
    return atomic_load(&st->failed) ? st->fail_msg : NULL;
}

void zn_stage_destroy(struct zn_stage *st)
{
    if (!st) return;
    zn_staging_client_destroy(st->proxy);
    for (int i = 0; i < st->nretired; i++) zn_cuda_host_free(st->retired[i]);
    free(st->retired);
    zn_cuda_host_free(st->pool);
    free(st);
}

void zn_stage_trim(struct zn_stage *st)
{
    if (!st) return;
    for (int i = 0; i < st->nretired; i++) zn_cuda_host_free(st->retired[i]);
    free(st->retired);
    st->retired = NULL;
    st->nretired = 0;
    zn_cuda_host_free(st->pool);
    st->pool = NULL;
    st->pool_size = 0; /* the next operation allocates one of its size */
}

size_t zn_stage_gpu_bytes(const struct zn_stage *st)
{
    return st ? zn_cuda_alloc_bytes(zn_staging_client_seq_dev(st->proxy)) : 0;
}

/* --- enqueueing ------------------------------------------------------------------------- */

/* Bytes this rank copies to the host before, and back after, the host operation: what it
 * reads from its send buffer and writes to its receive buffer (algo/coll_facts.h). */
static void io_bytes(const struct zn_cuda_op *o, int rank, int n, size_t *in, size_t *outb)
{
    const struct zn_coll_args *a = &o->a;
    int root = zn_coll_facts(a->coll)->rooted && a->root == rank;
    *in = zn_coll_send_elems(a->coll, a->count, n, root) * a->esize;
    *outb = zn_coll_recv_elems(a->coll, a->count, n, root) * a->esize;
}

/* Bytes of one staged buffer of an operation: the larger of its own and its gathered size,
 * 256-byte aligned; -1 if that does not fit a size_t (a count near SIZE_MAX on one rank). */
static int stage_bytes(const struct zn_cuda_op *o, int nranks, size_t *out)
{
    size_t b = o->a.count * o->a.esize, nb;
    if (__builtin_mul_overflow(b, (size_t)nranks, &nb)) return -1;
    return zn_round_up(nb > b ? nb : b, 256, out);
}

static ncclResult_t host_alloc_capturable(void **p, size_t bytes)
{
    /* Allowed while a stream captures (it is no stream work), in relaxed mode. */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t e = cudaHostAlloc(p, bytes ? bytes : 1, cudaHostAllocPortable);
    cudaThreadExchangeStreamCaptureMode(&mode);
    return cuda_err(e, "cudaHostAlloc for staging");
}

/* Stage one descriptor's operations: copies in, doorbell, gate, copies out. Once
 * zn_staging_client_post has published d, the proxy thread may run it and free it (the GPU can
 * reach the doorbell before this thread gets past it), so nothing here reads d afterwards. */
static ncclResult_t stage_ops(struct zn_stage *st, const struct zn_dev_comm *dev,
                              struct zn_stage_desc *d, const struct zn_cuda_op *orig, void *stream,
                              size_t *ins, size_t *outs, uint8_t **staged_out)
{
    size_t total = 0;
    int nops = d->nops;
    for (int i = 0; i < d->nops; i++) {
        io_bytes(&orig[i], st->rank, st->nranks, &ins[i], &outs[i]);
        /* The host operation gets full-size buffers even where this rank moves nothing. */
        size_t sz;
        if (stage_bytes(&orig[i], st->nranks, &sz) != 0 || sz > (SIZE_MAX - total) / 2)
            return zn_error(ncclInvalidArgument, ZN_PROXY,
                            "staging: operation %d of %zu elements of %zu bytes on %d ranks "
                            "does not fit the address space",
                            i, orig[i].a.count, orig[i].a.esize, st->nranks);
        total += sz * 2;
    }
    uint8_t *mem;
    if (zn_cuda_stream_capturing(stream)) {
        ZN_CHECK(host_alloc_capturable(&d->mem, total));
        d->persistent = 1;
        mem = d->mem;
    } else {
        if (total > st->pool_size) {
            /* Earlier operations may still copy through the old pool: keep it until the end. */
            void **r = realloc(st->retired, (size_t)(st->nretired + 1) * sizeof(*r));
            if (!r) return zn_error(ncclSystemError, ZN_PROXY, "out of memory");
            st->retired = r;
            if (st->pool) st->retired[st->nretired++] = st->pool;
            st->pool = NULL;
            size_t sz = total < (1u << 20) ? (1u << 20) : total;
            ZN_CHECK(host_alloc_capturable(&st->pool, sz));
            st->pool_size = sz;
        }
        mem = st->pool;
    }
    cudaStream_t s = (cudaStream_t)stream;
    size_t off = 0;
    for (int i = 0; i < d->nops; i++) {
        const struct zn_cuda_op *o = &orig[i];
        size_t sz = 0;
        (void)stage_bytes(o, st->nranks, &sz); /* fits: checked above */
        uint8_t *hin = mem + off, *hout = mem + off + sz;
        off += 2 * sz;
        d->ops[i].a.sendbuf = hin;
        d->ops[i].a.recvbuf = hout;
        staged_out[i] = hout;
        if (ins[i])
            ZN_CHECK(cuda_err(cudaMemcpyAsync(hin, o->a.sendbuf, ins[i], cudaMemcpyDeviceToHost, s),
                              "cudaMemcpyAsync to staging"));
    }
    uint64_t id = 0;
    ZN_CHECK(zn_staging_client_post(st->proxy, d, &id));
    struct zn_dev_doorbell *bell = zn_staging_client_bell_dev(st->proxy);
    uint64_t *seq = zn_staging_client_seq_dev(st->proxy);
    int e = zn_dev_launch_signal(bell, seq, id, stream);
    if (!e) e = zn_dev_launch_wait(bell, seq, dev, stream);
    if (e)
        return zn_error(ncclUnhandledCudaError, ZN_PROXY, "launching the staging gate failed: %s",
                        zn_dev_error_string(e));
    for (int i = 0; i < nops; i++)
        if (outs[i])
            ZN_CHECK(cuda_err(cudaMemcpyAsync(orig[i].a.recvbuf, staged_out[i], outs[i],
                                              cudaMemcpyHostToDevice, s),
                              "cudaMemcpyAsync from staging"));
    return ncclSuccess;
}

static ncclResult_t stage_desc(struct zn_stage *st, const struct zn_dev_comm *dev,
                               struct zn_stage_desc *d, const struct zn_cuda_op *orig, void *stream)
{
    size_t *ins = calloc((size_t)d->nops, 2 * sizeof(size_t));
    uint8_t **staged_out = calloc((size_t)d->nops, sizeof(*staged_out));
    ncclResult_t r = ins && staged_out
                         ? stage_ops(st, dev, d, orig, stream, ins, ins + d->nops, staged_out)
                         : zn_error(ncclSystemError, ZN_PROXY, "out of memory");
    free(ins);
    free(staged_out);
    return r;
}

ncclResult_t zn_stage_launch(struct zn_stage *st, struct zn_cuda_order *ord,
                             const struct zn_dev_comm *dev, struct zn_cuda_op *ops, int n)
{
    /* Collectives one descriptor each, in call order; then every send and receive together. */
    void *p2p_stream = NULL;
    int np2p = 0;
    for (int i = 0; i < n; i++) {
        if (ops[i].kind != ZN_CUDA_COLL) {
            if (!p2p_stream) p2p_stream = ops[i].stream;
            np2p++;
            continue;
        }
        if (ops[i].a.count == 0) continue;
        struct zn_stage_desc *d = desc_new(1);
        if (!d) return zn_error(ncclSystemError, ZN_PROXY, "out of memory");
        d->nops = 1;
        d->ops[0] = ops[i];
        ncclResult_t r = zn_cuda_order(ord, ops[i].stream);
        if (r == ncclSuccess) r = stage_desc(st, dev, d, &ops[i], ops[i].stream);
        if (r == ncclSuccess) r = zn_cuda_note(ord, ops[i].stream);
        if (r != ncclSuccess) return r;
    }
    if (!np2p) return ncclSuccess;
    /* The proxy rewrites the descriptor's buffers to staging memory: stage_desc reads the
     * users' buffers from a copy. */
    struct zn_stage_desc *d = desc_new(np2p);
    struct zn_cuda_op *orig = calloc((size_t)np2p, sizeof(*orig));
    if (!d || !orig) {
        free(d);
        free(orig);
        return zn_error(ncclSystemError, ZN_PROXY, "out of memory");
    }
    for (int i = 0; i < n; i++)
        if (ops[i].kind != ZN_CUDA_COLL) {
            orig[d->nops] = ops[i];
            d->ops[d->nops++] = ops[i];
        }
    ncclResult_t r = zn_cuda_order(ord, p2p_stream);
    if (r == ncclSuccess) r = stage_desc(st, dev, d, orig, p2p_stream);
    free(orig);
    if (r == ncclSuccess) r = zn_cuda_note(ord, p2p_stream);
    return r;
}

#else

ncclResult_t zn_stage_create(struct zn_exec_comm *host, int cuda_dev, struct zn_stage **out)
{
    return zn_error(ncclInvalidUsage, ZN_PROXY, "this zinc build has no CUDA support");
}

ncclResult_t zn_stage_launch(struct zn_stage *st, struct zn_cuda_order *ord,
                             const struct zn_dev_comm *dev, struct zn_cuda_op *ops, int n)
{
    return zn_error(ncclInvalidUsage, ZN_PROXY, "this zinc build has no CUDA support");
}

const char *zn_stage_failure(const struct zn_stage *st)
{
    return NULL;
}

void zn_stage_destroy(struct zn_stage *st) {}

void zn_stage_trim(struct zn_stage *st) {}

size_t zn_stage_gpu_bytes(const struct zn_stage *st)
{
    return 0;
}

#endif
