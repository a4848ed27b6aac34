#include "cuda_exec.h"
#include "cuda_stage.h"
#include "util/cuda.h"
#include "util/err.h"
#include "util/param.h"

#include <stdlib.h>
#include <string.h>

#if ZINC_HAVE_CUDA
#include <cuda_runtime_api.h>

/* Channels for a call moving `bytes` per rank: one per 32 KB, up to the communicator's
 * maximum (spreading even a 1 MB call over many SMs is what keeps NVLink busy); the same on
 * every rank since it depends only on the call. */
static int channels(const struct zn_cuda_ctx *cx, size_t bytes, size_t per)
{
    size_t n = (bytes + per - 1) / per;
    if (n < 1) n = 1;
    if (n > (size_t)cx->max_ch) n = (size_t)cx->max_ch;
    return (int)n;
}

static const int dev_coll[ZN_NCOLLS] = {
    [ZN_COLL_ALLREDUCE] = ZN_DEV_ALLREDUCE,
    [ZN_COLL_BROADCAST] = ZN_DEV_BROADCAST,
    [ZN_COLL_REDUCE] = ZN_DEV_REDUCE,
    [ZN_COLL_ALLGATHER] = ZN_DEV_ALLGATHER,
    [ZN_COLL_REDUCESCATTER] = ZN_DEV_REDUCESCATTER,
    [ZN_COLL_ALLTOALL] = ZN_DEV_ALLTOALL,
    [ZN_COLL_GATHER] = ZN_DEV_GATHER,
    [ZN_COLL_SCATTER] = ZN_DEV_SCATTER,
};

/* Registered buffers go zero-copy by default for allreduces up to ZC_MAX_BYTES and for
 * reducescatter blocks above ZC_RS_MIN_BYTES (see launch_coll). */
#define ZC_MAX_BYTES    ((size_t)16 << 20)
#define ZC_RS_MIN_BYTES ((size_t)2 << 20)

static int reduces(enum zn_coll c)
{
    return c == ZN_COLL_ALLREDUCE || c == ZN_COLL_REDUCE || c == ZN_COLL_REDUCESCATTER;
}

/* Collectives with a GPU ring kernel (neighbours only). */
static int ring_capable(enum zn_coll c)
{
    return c == ZN_COLL_ALLREDUCE || c == ZN_COLL_ALLGATHER || c == ZN_COLL_REDUCESCATTER ||
           c == ZN_COLL_BROADCAST || c == ZN_COLL_REDUCE;
}

ncclResult_t zn_cuda_reg_add(struct zn_cuda_ctx *cx, const struct zn_cuda_reg *r)
{
    struct zn_cuda_reg *n = realloc(cx->regs, (size_t)(cx->nregs + 1) * sizeof(*n));
    if (!n) return zn_error(ncclSystemError, ZN_COLL, "out of memory");
    cx->regs = n;
    cx->regs[cx->nregs++] = *r;
    return ncclSuccess;
}

void zn_cuda_reg_remove(struct zn_cuda_ctx *cx, uint32_t id)
{
    for (int i = 0; i < cx->nregs; i++)
        if (cx->regs[i].id == id) {
            cx->regs[i] = cx->regs[--cx->nregs];
            return;
        }
}

/* The registration that holds [p, p + bytes), or NULL. */
static const struct zn_cuda_reg *reg_find(const struct zn_cuda_ctx *cx, const void *p, size_t bytes)
{
    uintptr_t lo = (uintptr_t)p;
    for (int i = 0; i < cx->nregs; i++)
        if (lo >= cx->regs[i].lo && lo + bytes <= cx->regs[i].hi) return &cx->regs[i];
    return NULL;
}

/* Channels for a ring-LL allreduce of a, or 0 if it does not fit: the kernel (device/coll.cu,
 * allreduce_ring_ll) keeps the n-1 hops of a channel's packets (16 bytes per 8 data bytes) in
 * one LL buffer, with channel ranges as channel_range() cuts them (multiples of 16 elements). */
static int ring_ll_channels(const struct zn_cuda_ctx *cx, const struct zn_coll_args *a, int n)
{
    size_t bytes = a->count * a->esize;
    for (int nch = channels(cx, bytes, cx->ll_chunk);; nch *= 2) {
        if (nch > cx->max_ch) nch = cx->max_ch;
        size_t per = ((a->count + (size_t)nch - 1) / (size_t)nch + 15) / 16 * 16;
        size_t packets = (per * a->esize + 7) / 8;
        if ((size_t)(n - 1) * packets * 16 <= ZN_DEV_LL_BYTES) return nch;
        if (nch == cx->max_ch) return 0;
    }
}

/* Registered buffers (NCCL's contract: then every rank's are): point the kernel at where each
 * peer sees the ones it touches. Allreduce needs both; the collectives that store into their
 * destinations (allgather, alltoall, broadcast, scatter) the receive buffers; those that read
 * the peers' inputs (reducescatter, reduce, gather) the send buffers. Not in-place alltoall:
 * a rank would overwrite a block its peer is still sending. */
static int zero_copy(const struct zn_cuda_ctx *cx, const struct zn_coll_args *a, size_t bytes,
                     struct zn_dev_coll_args *k)
{
    int n = cx->dev.nranks, coll = a->coll;
    if (cx->ring || n < 2) return 0;
    if (coll == ZN_COLL_ALLTOALL && a->sendbuf == a->recvbuf) return 0;
    size_t nb = bytes * (size_t)n;
    int push = coll == ZN_COLL_ALLGATHER || coll == ZN_COLL_ALLTOALL || coll == ZN_COLL_BROADCAST ||
               coll == ZN_COLL_SCATTER;
    int both = coll == ZN_COLL_ALLREDUCE;
    size_t sb = coll == ZN_COLL_REDUCESCATTER ? nb : bytes;
    size_t rb = coll == ZN_COLL_ALLGATHER || coll == ZN_COLL_ALLTOALL ? nb : bytes;
    const struct zn_cuda_reg *rs = NULL, *rr = NULL;
    if ((both || !push) && !(rs = reg_find(cx, a->sendbuf, sb))) return 0;
    if ((both || push) && !(rr = reg_find(cx, a->recvbuf, rb))) return 0;
    for (int q = 0; q < n; q++) {
        if (rs)
            k->zc_send[q] = (uint64_t)((uintptr_t)rs->peer[q] + ((uintptr_t)a->sendbuf - rs->base));
        if (rr)
            k->zc_recv[q] = (uint64_t)((uintptr_t)rr->peer[q] + ((uintptr_t)a->recvbuf - rr->base));
    }
    return 1;
}

static ncclResult_t launch_coll(struct zn_cuda_ctx *cx, const struct zn_cuda_op *o)
{
    const struct zn_coll_args *a = &o->a;
    if (a->count == 0) return ncclSuccess;
    struct zn_dev_coll_args k;
    memset(&k, 0, sizeof(k));
    k.comm = cx->dev;
    k.sendbuf = a->sendbuf;
    k.recvbuf = a->recvbuf;
    k.coll = dev_coll[a->coll];
    k.root = a->root;
    size_t bytes = a->count * a->esize;
    if (reduces(a->coll)) {
        k.dtype = (int32_t)a->dtype;
        k.count = a->count;
        k.op = (int32_t)o->op.red;
        k.premul = o->op.premul;
        memcpy(&k.scalar, o->op.scalar, sizeof(k.scalar));
        k.post_div = o->op.post_div ? cx->dev.nranks : 0;
        if (o->scalar_dev) {
            /* ncclScalarDevice: the value is read from device memory when the kernel runs. */
            k.scalar_dev = o->scalar_dev;
        }
    } else {
        /* Moving bytes: one kernel for every type. */
        k.dtype = (int32_t)ncclUint8;
        k.count = bytes;
    }
    /* Ring mode (only neighbours mapped), or ZINC_ALGO=ring: the ring kernels. Otherwise
     * allreduce goes LL one-shot (flagged packets, no fences) for small vectors, one-shot
     * (everyone reduces everything) next, two-shot (reduce-scatter + allgather) for large ones;
     * the other collectives have one direct pattern each, LL for blocks up to ll_max. */
    const char *f = cx->force_algo, *proto = cx->force_proto;
    /* LL carries at most 512 KB unless forced (ZINC_PROTO=LL), and no channel more than its
     * buffer holds. Measured on 4 H200 (procs): LL 19.5 us at 512 KB against two-shot 26.8,
     * even at 1 MB (28.7 against 28.1). */
    size_t ll_max = (size_t)cx->max_ch * (ZN_DEV_LL_BYTES / 2);
    if (ll_max > 512 * 1024 && !(proto && !strcmp(proto, "LL"))) ll_max = 512 * 1024;
    int ll_ok = bytes <= ll_max && !(proto && !strcmp(proto, "SIMPLE"));
    int n = cx->dev.nranks;
    /* Registered buffers: zero-copy allreduce above the LL sizes up to 16 MB, zero-copy
     * reducescatter for blocks above 2 MB, the other collectives only when forced
     * (ZINC_ALGO=zerocopy, which also forces it for every size). Measured on 2 H200 (procs,
     * float): allreduce 2 MB 22.0 us against 23.8 through the FIFOs, 8 MB 41.7 against 43.0;
     * at 32 MB and above the FIFO two-shot is faster (1 GB: 333 against 352 GB/s busbw), since
     * zero-copy reads the peers' memory where the FIFOs only write it; below 512 KB LL is faster
     * (its two handshakes cost ~6 us). Reducescatter reads the peers' inputs too but saves more:
     * blocks of 8 MB 39.5 us against 44.7, 128 MB 424.6 against 559.6 (NCCL -R 1: 561.8); 2 MB
     * 19.5 against 18.2. Allgather (stores into the peers' outputs) was no better than the FIFOs
     * beyond noise (16 MB 36.6 against 36.4 us, 256 MB 437.8 against 426.6). Not PreMulSum: each
     * rank scales its own input by its own scalar, which zero-copy, reading the peers' inputs
     * as they are, cannot do. */
    int zc_default = a->coll == ZN_COLL_ALLREDUCE       ? !ll_ok && bytes <= ZC_MAX_BYTES
                     : a->coll == ZN_COLL_REDUCESCATTER ? bytes > ZC_RS_MIN_BYTES
                                                        : 0;
    int zc =
        !k.premul && (zc_default || (f && !strcmp(f, "zerocopy"))) && zero_copy(cx, a, bytes, &k);
    if (zc)
        k.algo = ZN_DEV_ZEROCOPY;
    else if (n > 1 && (cx->ring || (f && !strcmp(f, "ring")))) {
        k.algo = ZN_DEV_ALGO_RING;
        /* Small allreduces: LL packets forwarded along the ring (n-1 hops) instead of the
         * 2(n-1) fenced FIFO steps. */
        int nch = a->coll == ZN_COLL_ALLREDUCE && ll_ok ? ring_ll_channels(cx, a, n) : 0;
        if (nch) {
            k.algo = ZN_DEV_RING_LL;
            k.nch = nch;
        }
    } else if (f && !strcmp(f, "oneshot"))
        k.algo = ll_ok ? ZN_DEV_ONESHOT_LL : ZN_DEV_ONESHOT;
    else if (f && !strcmp(f, "twoshot"))
        k.algo = ZN_DEV_TWOSHOT;
    else if (ll_ok)
        k.algo = ZN_DEV_ONESHOT_LL;
    else
        k.algo = bytes <= 256 * 1024 ? ZN_DEV_ONESHOT : ZN_DEV_TWOSHOT; /* LL off, or too big */
    /* The other collectives: LL packets for small blocks (measured on 2 H200, procs, 32 B to
     * 512 KB: 0.70-0.99x NCCL's time where the FIFOs took up to 1.4x), else the FIFOs. */
    if (a->coll != ZN_COLL_ALLREDUCE && k.algo != ZN_DEV_ALGO_RING && k.algo != ZN_DEV_ZEROCOPY)
        k.algo = k.algo == ZN_DEV_ONESHOT_LL ? ZN_DEV_ONESHOT_LL : ZN_DEV_ONESHOT;
    if (k.algo == ZN_DEV_RING_LL)
        ; /* sized by ring_ll_channels */
    else if (k.algo == ZN_DEV_ONESHOT_LL)
        k.nch = channels(cx, bytes, cx->ll_chunk);
    else if (a->coll == ZN_COLL_ALLREDUCE && k.algo != ZN_DEV_ONESHOT)
        k.nch = channels(cx, bytes / (size_t)n, cx->chunk); /* per rank's piece */
    else
        k.nch = channels(cx, bytes, cx->chunk);
    zn_log(ZN_LOG_INFO, ZN_TUNE, "%s count %zu type %d: GPU %s, %d channel(s)",
           zn_coll_name(a->coll), a->count, (int)a->dtype,
           k.algo == ZN_DEV_ZEROCOPY      ? "zero-copy (registered buffers)"
           : k.algo == ZN_DEV_ALGO_RING   ? "ring"
           : k.algo == ZN_DEV_RING_LL     ? "ring LL"
           : a->coll != ZN_COLL_ALLREDUCE ? (k.algo == ZN_DEV_ONESHOT_LL ? "direct LL" : "direct")
           : k.algo == ZN_DEV_TWOSHOT     ? "two-shot"
           : k.algo == ZN_DEV_ONESHOT_LL  ? "one-shot LL"
                                          : "one-shot",
           k.nch);
    ZN_CHECK(zn_cuda_order(&cx->order, o->stream));
    int e = zn_dev_launch_coll(&k, o->stream);
    if (e)
        return zn_error(ncclUnhandledCudaError, ZN_COLL, "launching the %s kernel failed: %s",
                        zn_coll_name(a->coll), zn_dev_error_string(e));
    return zn_cuda_note(&cx->order, o->stream);
}

/* Sends and receives of the group, fused into one kernel on the first operation's stream;
 * the other streams join it through events. A send to self meets its receive with a copy. */
static ncclResult_t launch_p2p(struct zn_cuda_ctx *cx, struct zn_cuda_op *ops, int n)
{
    struct zn_dev_p2p_args k;
    memset(&k, 0, sizeof(k));
    k.comm = cx->dev;
    void *stream = NULL;
    size_t maxb = 0;
    int self_recv = 0;
    for (int i = 0; i < n; i++) {
        struct zn_cuda_op *o = &ops[i];
        if (o->kind == ZN_CUDA_COLL) continue;
        size_t bytes = o->a.count * o->a.esize;
        if (!stream) stream = o->stream;
        if (o->a.root == cx->dev.rank) {
            if (o->kind == ZN_CUDA_RECV) continue;
            /* Send to self: pair with this rank's next unmatched receive from self. */
            int j = -1;
            for (int m = self_recv; m < n && j < 0; m++)
                if (ops[m].kind == ZN_CUDA_RECV && ops[m].a.root == cx->dev.rank) j = m;
            if (j < 0)
                return zn_error(ncclInvalidUsage, ZN_COLL,
                                "ncclSend to self without a matching ncclRecv from self in the "
                                "same group");
            self_recv = j + 1;
            if (bytes != ops[j].a.count * ops[j].a.esize)
                return zn_error(ncclInvalidUsage, ZN_COLL,
                                "send to self of %zu bytes but receive from self of %zu bytes",
                                bytes, ops[j].a.count * ops[j].a.esize);
            if (bytes &&
                cudaMemcpyAsync(ops[j].a.recvbuf, o->a.sendbuf, bytes, cudaMemcpyDeviceToDevice,
                                (cudaStream_t)stream) != cudaSuccess)
                return zn_error(ncclUnhandledCudaError, ZN_COLL, "cudaMemcpyAsync failed");
            continue;
        }
        if (bytes == 0) continue;
        if (k.nops == ZN_DEV_MAX_P2P)
            return zn_error(ncclInvalidUsage, ZN_COLL,
                            "more than %d sends and receives with peers in one group on a GPU "
                            "communicator (not supported yet: split the group)",
                            ZN_DEV_MAX_P2P);
        int is_send = o->kind == ZN_CUDA_SEND;
        k.ops[k.nops++] =
            (struct zn_dev_p2p_op){ .buf = is_send ? (void *)o->a.sendbuf : o->a.recvbuf,
                                    .bytes = bytes,
                                    .peer = o->a.root,
                                    .is_send = is_send };
        if (bytes > maxb) maxb = bytes;
    }
    if (!k.nops) return ncclSuccess;
    /* The channel count must agree between the two ends of every pair: it depends only on the
     * group's largest message, which both ends see... only when they list the same ops. Use a
     * fixed count so that any group matches. */
    k.nch = cx->max_ch < 8 ? cx->max_ch : 8;
    (void)maxb;
    ZN_CHECK(zn_cuda_order(&cx->order, stream));
    int e = zn_dev_launch_p2p(&k, stream);
    if (e)
        return zn_error(ncclUnhandledCudaError, ZN_COLL,
                        "launching the send/recv kernel failed: %s", zn_dev_error_string(e));
    return zn_cuda_note(&cx->order, stream);
}

/* Ring mode: the collectives with ring kernels run on the GPU, in call order with the staged
 * ones; every send and receive is staged (peers need not be neighbours). */
static ncclResult_t launch_ring_mode(struct zn_cuda_ctx *cx, struct zn_cuda_op *ops, int n)
{
    int np2p = 0;
    for (int i = 0; i < n; i++) {
        if (ops[i].kind != ZN_CUDA_COLL)
            np2p++;
        else if (ring_capable(ops[i].a.coll))
            ZN_CHECK(launch_coll(cx, &ops[i]));
        else
            ZN_CHECK(zn_stage_launch(cx->stage, &cx->order, &cx->dev, &ops[i], 1));
    }
    if (!np2p) return ncclSuccess;
    struct zn_cuda_op *p2p = malloc((size_t)np2p * sizeof(*p2p));
    if (!p2p) return zn_error(ncclSystemError, ZN_COLL, "out of memory");
    np2p = 0;
    for (int i = 0; i < n; i++)
        if (ops[i].kind != ZN_CUDA_COLL) p2p[np2p++] = ops[i];
    ncclResult_t r = zn_stage_launch(cx->stage, &cx->order, &cx->dev, p2p, np2p);
    free(p2p);
    return r;
}

ncclResult_t zn_cuda_launch(struct zn_cuda_ctx *cx, struct zn_cuda_op *ops, int n)
{
    int cur = zn_cuda_current_device();
    if (cur != cx->cuda_dev) ZN_CHECK(zn_cuda_set_device(cx->cuda_dev));
    ncclResult_t res = ncclSuccess;
    if (cx->ring) {
        res = launch_ring_mode(cx, ops, n);
    } else if (cx->stage) {
        res = zn_stage_launch(cx->stage, &cx->order, &cx->dev, ops, n);
    } else {
        int has_p2p = 0;
        for (int i = 0; i < n && res == ncclSuccess; i++) {
            if (ops[i].kind == ZN_CUDA_COLL)
                res = launch_coll(cx, &ops[i]);
            else
                has_p2p = 1;
        }
        if (res == ncclSuccess && has_p2p) res = launch_p2p(cx, ops, n);
    }
    if (cur >= 0 && cur != cx->cuda_dev) zn_cuda_set_device(cur);
    return res;
}

const char *zn_cuda_failure(const struct zn_cuda_ctx *cx)
{
    const char *staged = cx->stage ? zn_stage_failure(cx->stage) : NULL;
    if (staged) return staged;
    if (!cx->error_host) return NULL;
    switch (*cx->error_host) {
    case ZN_DEV_OK: return NULL;
    case ZN_DEV_ABORTED: return "a GPU kernel stopped because the communicator was aborted";
    default:
        return "a GPU kernel waited longer than ZINC_TIMEOUT for a peer GPU (a peer process "
               "exited, aborted, or made different calls)";
    }
}

void zn_cuda_ctx_fini(struct zn_cuda_ctx *cx)
{
    free(cx->regs);
    cx->regs = NULL;
    cx->nregs = 0;
    zn_stage_destroy(cx->stage);
    cx->stage = NULL;
    zn_cuda_order_fini(&cx->order);
}

#else

ncclResult_t zn_cuda_launch(struct zn_cuda_ctx *cx, struct zn_cuda_op *ops, int n)
{
    return zn_error(ncclInvalidUsage, ZN_COLL, "this zinc build has no CUDA support");
}

const char *zn_cuda_failure(const struct zn_cuda_ctx *cx)
{
    return NULL;
}

ncclResult_t zn_cuda_reg_add(struct zn_cuda_ctx *cx, const struct zn_cuda_reg *r)
{
    return zn_error(ncclInvalidUsage, ZN_COLL, "this zinc build has no CUDA support");
}

void zn_cuda_reg_remove(struct zn_cuda_ctx *cx, uint32_t id) {}

void zn_cuda_ctx_fini(struct zn_cuda_ctx *cx) {}

#endif
