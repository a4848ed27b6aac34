#include "cuda_exec.h"
#include "cuda_stage.h"
#include "algo/gpu.h"
#include "proxy/gpu_net_engine.h"
#include "util/cuda.h"
#include "util/err.h"
#include "util/param.h"

#include <stdlib.h>
#include <string.h>

#if ZINC_HAVE_CUDA
#include <cuda_runtime_api.h>

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

static int reduces(enum zn_coll c)
{
    return c == ZN_COLL_ALLREDUCE || c == ZN_COLL_REDUCE || c == ZN_COLL_REDUCESCATTER;
}

/* Registered buffers (NCCL's contract: then every rank's are) that a zero-copy kernel would
 * touch: allreduce needs both; the collectives that store into their destinations (allgather,
 * alltoall, broadcast, scatter) the receive buffers; those that read the peers' inputs
 * (reducescatter, reduce, gather) the send buffers. 1 if every one it needs is registered. */
static int zc_regs(const struct zn_cuda_ctx *cx, const struct zn_coll_args *a, size_t bytes,
                   const struct zn_reg_entry **rs, const struct zn_reg_entry **rr)
{
    int coll = a->coll;
    size_t nb = bytes * (size_t)cx->dev.nranks;
    int push = coll == ZN_COLL_ALLGATHER || coll == ZN_COLL_ALLTOALL || coll == ZN_COLL_BROADCAST ||
               coll == ZN_COLL_SCATTER;
    int both = coll == ZN_COLL_ALLREDUCE;
    size_t sb = coll == ZN_COLL_REDUCESCATTER ? nb : bytes;
    size_t rb = coll == ZN_COLL_ALLGATHER || coll == ZN_COLL_ALLTOALL ? nb : bytes;
    *rs = *rr = NULL;
    if ((both || !push) && !(*rs = zn_reg_find(cx->regs, a->sendbuf, sb))) return 0;
    if ((both || push) && !(*rr = zn_reg_find(cx->regs, a->recvbuf, rb))) return 0;
    return 1;
}

/* Point a zero-copy kernel at where each peer sees the buffers it touches. */
static void zc_pack(const struct zn_cuda_ctx *cx, const struct zn_coll_args *a,
                    const struct zn_reg_entry *rs, const struct zn_reg_entry *rr,
                    struct zn_dev_coll_args *k)
{
    for (int q = 0; q < cx->dev.nranks; q++) {
        if (rs)
            k->zc_send[q] = (uint64_t)((uintptr_t)rs->peer[q] + ((uintptr_t)a->sendbuf - rs->base));
        if (rr)
            k->zc_recv[q] = (uint64_t)((uintptr_t)rr->peer[q] + ((uintptr_t)a->recvbuf - rr->base));
    }
}

/* The kernel arguments of o apart from the algorithm and its channels. */
static void pack_coll(const struct zn_cuda_ctx *cx, const struct zn_cuda_op *o,
                      struct zn_dev_coll_args *k)
{
    const struct zn_coll_args *a = &o->a;
    memset(k, 0, sizeof(*k));
    k->comm = cx->dev;
    k->sendbuf = a->sendbuf;
    k->recvbuf = a->recvbuf;
    k->coll = dev_coll[a->coll];
    k->root = a->root;
    if (reduces(a->coll)) {
        k->dtype = (int32_t)a->dtype;
        k->count = a->count;
        k->op = (int32_t)o->op.red;
        k->premul = o->op.premul;
        memcpy(&k->scalar, o->op.scalar, sizeof(k->scalar));
        k->post_div = o->op.post_div ? cx->dev.nranks : 0;
        /* ncclScalarDevice: the value is read from device memory when the kernel runs. */
        if (o->scalar_dev) k->scalar_dev = o->scalar_dev;
    } else {
        /* Moving bytes: one kernel for every type. */
        k->dtype = (int32_t)ncclUint8;
        k->count = a->count * a->esize;
    }
}

/* One collective: the algorithm registry (algo/gpu.h) picks the kernel pattern and channels;
 * this packs its arguments and launches it in the communicator's order. */
static ncclResult_t launch_coll(struct zn_cuda_ctx *cx, const struct zn_cuda_op *o)
{
    const struct zn_coll_args *a = &o->a;
    if (a->count == 0) return ncclSuccess;
    struct zn_dev_coll_args k;
    pack_coll(cx, o, &k);
    size_t bytes = a->count * a->esize;
    const struct zn_reg_entry *rs, *rr;
    struct zn_gpu_call call = { .coll = a->coll,
                                .bytes = bytes,
                                .count = a->count,
                                .esize = a->esize,
                                .nranks = cx->dev.nranks,
                                .ring_mode = cx->ring,
                                .all_fifos = cx->all_fifos,
                                .net = cx->net,
                                .premul = k.premul,
                                .in_place = a->sendbuf == a->recvbuf,
                                .registered = zc_regs(cx, a, bytes, &rs, &rr),
                                .max_ch = cx->max_ch,
                                .chunk = cx->chunk,
                                .ll_chunk = cx->ll_chunk,
                                .force_algo = cx->force_algo,
                                .force_proto = cx->force_proto };
    int nch = 0;
    const struct zn_gpu_algo *g = zn_gpu_algo_select(&call, &nch);
    if (!g)
        return zn_error(ncclInternalError, ZN_COLL, "no GPU pattern for %s on this communicator",
                        zn_coll_name(a->coll));
    k.algo = g->dev_algo;
    k.nch = nch;
    if (g->registered) zc_pack(cx, a, rs, rr, &k);
    zn_log(ZN_LOG_INFO, ZN_TUNE, "%s count %zu type %d: GPU %s, %d channel(s)",
           zn_coll_name(a->coll), a->count, (int)a->dtype, g->label, k.nch);
    ZN_CHECK(zn_cuda_order(&cx->order, o->stream));
    int e = zn_dev_launch_coll(&k, o->stream);
    if (e)
        return zn_error(ncclUnhandledCudaError, ZN_COLL, "launching the %s kernel failed: %s",
                        zn_coll_name(a->coll), zn_dev_error_string(e));
    return zn_cuda_note(&cx->order, o->stream);
}

/* Channels of one send or receive. One block moves about 14 GB/s (it alternates a window over
 * NVLink with a local one), and more than ~16 blocks in flight slow each other: a channel per
 * 128 KB up to 16 channels, then one per 512 KB up to ZINC_GPU_P2P_CHANNELS. Measured on 2
 * H200 (2026-11-27, procs): 2 MB 36 us with 16 channels against 44 with 4; 8 MB 65 us with 16
 * against 107 with 64; 32 MB 142 us with 64 against 185 with 16. The two ends of a pair must
 * cut a message alike, so this depends on nothing but its size (the same at both ends) and
 * values every rank agreed on. */
static int p2p_channels(const struct zn_cuda_ctx *cx, size_t bytes)
{
    size_t fine = (bytes + (128 << 10) - 1) >> 17, coarse = (bytes + (512 << 10) - 1) >> 19;
    size_t n = fine < 16 ? fine : coarse > 16 ? coarse : 16;
    return n < 1 ? 1 : n > (size_t)cx->p2p_ch ? cx->p2p_ch : (int)n;
}

/* Sends and receives of the group, fused into one kernel on the first operation's stream;
 * the other streams join it through events. A send to self meets its receive with a copy. */
static ncclResult_t launch_p2p(struct zn_cuda_ctx *cx, struct zn_cuda_op *ops, int n)
{
    struct zn_dev_p2p_args k;
    memset(&k, 0, sizeof(k));
    k.comm = cx->dev;
    void *stream = NULL;
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
        int nch = p2p_channels(cx, bytes);
        k.ops[k.nops++] =
            (struct zn_dev_p2p_op){ .buf = is_send ? (void *)o->a.sendbuf : o->a.recvbuf,
                                    .bytes = bytes,
                                    .peer = o->a.root,
                                    .is_send = (int16_t)is_send,
                                    .nch = (int16_t)nch };
        if (nch > k.nch) k.nch = nch;
    }
    if (!k.nops) return ncclSuccess;
    ZN_CHECK(zn_cuda_order(&cx->order, stream));
    int e = zn_dev_launch_p2p(&k, stream);
    if (e)
        return zn_error(ncclUnhandledCudaError, ZN_COLL,
                        "launching the send/recv kernel failed: %s", zn_dev_error_string(e));
    return zn_cuda_note(&cx->order, stream);
}

/* Alltoall, gather and scatter as the send/recv kernel's sends and receives (NCCL's scheme for
 * them): each peer's FIFO moves as fast as that peer takes it, with every slot of it in flight,
 * where the direct pattern waits for every peer's piece per step. Not in-place alltoall (a
 * block would be overwritten while it is still being sent): that one keeps the direct pattern,
 * whose steps read a window of every block before they write any. Returns 0 for those. */
static int as_p2p(const struct zn_cuda_op *o)
{
    const struct zn_coll_args *a = &o->a;
    return (a->coll == ZN_COLL_ALLTOALL && a->sendbuf != a->recvbuf) || a->coll == ZN_COLL_GATHER ||
           a->coll == ZN_COLL_SCATTER;
}

static ncclResult_t launch_coll_p2p(struct zn_cuda_ctx *cx, const struct zn_cuda_op *o)
{
    const struct zn_coll_args *a = &o->a;
    int n = cx->dev.nranks, me = cx->dev.rank, m = 0;
    size_t blk = a->count * a->esize;
    const uint8_t *in = a->sendbuf;
    uint8_t *out = a->recvbuf;
    struct zn_cuda_op *ops = calloc(2 * (size_t)n, sizeof(*ops));
    if (!ops) return zn_error(ncclSystemError, ZN_COLL, "out of memory");
    for (int j = 0; j < n; j++) {
        /* What this rank sends to j and where what j sends lands (NULL: nothing). */
        const uint8_t *src = NULL;
        uint8_t *dst = NULL;
        switch (a->coll) {
        case ZN_COLL_ALLTOALL:
            src = in + (size_t)j * blk;
            dst = out + (size_t)j * blk;
            break;
        case ZN_COLL_GATHER:
            src = j == a->root ? in : NULL;
            dst = me == a->root ? out + (size_t)j * blk : NULL;
            break;
        default: /* scatter */
            src = me == a->root ? in + (size_t)j * blk : NULL;
            dst = j == a->root ? out : NULL;
            break;
        }
        if (j == me && src == dst) continue; /* in place: the own block is there */
        struct zn_coll_args p = *a;
        p.root = j;
        if (src) {
            p.sendbuf = src;
            ops[m++] = (struct zn_cuda_op){ .kind = ZN_CUDA_SEND, .a = p, .stream = o->stream };
        }
        if (dst) {
            p.recvbuf = dst;
            ops[m++] = (struct zn_cuda_op){ .kind = ZN_CUDA_RECV, .a = p, .stream = o->stream };
        }
    }
    ncclResult_t res = launch_p2p(cx, ops, m);
    free(ops);
    return res;
}

/* Ring mode: the collectives with ring kernels run on the GPU, in call order with the staged
 * ones; every send and receive is staged (peers need not be neighbours). Across hosts with
 * every peer's FIFO there (all_fifos), the rest runs as kernels too: alltoall, gather and
 * scatter as the send/recv kernel (as_p2p; in-place alltoall as the direct pattern), each in
 * its place in call order, and the group's sends and receives in one send/recv kernel. */
static ncclResult_t launch_ring_mode(struct zn_cuda_ctx *cx, struct zn_cuda_op *ops, int n)
{
    int np2p = 0;
    for (int i = 0; i < n; i++) {
        if (ops[i].kind != ZN_CUDA_COLL)
            np2p++;
        else if (cx->all_fifos && ops[i].a.count && as_p2p(&ops[i]))
            ZN_CHECK(launch_coll_p2p(cx, &ops[i]));
        else if (cx->all_fifos || zn_gpu_ring_on_gpu(ops[i].a.coll))
            ZN_CHECK(launch_coll(cx, &ops[i]));
        else
            ZN_CHECK(zn_stage_launch(cx->stage, &cx->order, &cx->dev, &ops[i], 1));
    }
    if (!np2p) return ncclSuccess;
    if (cx->all_fifos) return launch_p2p(cx, ops, n);
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
    if (!cx->error_host || *cx->error_host == ZN_DEV_OK) return NULL;
    /* The net engine ends the kernels (abort word) when a net call fails: its reason is the
     * better one. It counts only once a kernel gave up. */
    const char *net = zn_gpunet_failure(cx->gnet);
    if (net) return net;
    switch (*cx->error_host) {
    case ZN_DEV_ABORTED: return "a GPU kernel stopped because the communicator was aborted";
    case ZN_DEV_PEER_GONE: {
        const char *gone = zn_gpunet_gone(cx->gnet);
        return gone ? gone
                    : "a GPU kernel waited for a peer on another host that closed its "
                      "connections";
    }
    default:
        return "a GPU kernel waited longer than ZINC_TIMEOUT for a peer GPU (a peer process "
               "exited, aborted, or made different calls)";
    }
}

void zn_cuda_ctx_fini(struct zn_cuda_ctx *cx)
{
    cx->regs = NULL;
    zn_stage_destroy(cx->stage);
    cx->stage = NULL;
    zn_gpunet_destroy(cx->gnet);
    cx->gnet = NULL;
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

void zn_cuda_ctx_fini(struct zn_cuda_ctx *cx) {}

#endif
