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

/* Registered buffers (NCCL's contract: then every rank's are) that a zero-copy kernel would
 * touch (zn_gpu_zc_buffers), each looked up at the size of the largest rank's buffer. 1 if
 * every one it needs is registered. */
static int zc_regs(const struct zn_cuda_ctx *cuda, const struct zn_coll_args *a, size_t bytes,
                   const struct zn_reg_entry **rs, const struct zn_reg_entry **rr)
{
    int n = cuda->dev.nranks, need = zn_gpu_zc_buffers(a->coll);
    size_t sb = bytes * (size_t)zn_coll_send_blocks(a->coll, n);
    size_t rb = bytes * (size_t)zn_coll_recv_blocks(a->coll, n);
    *rs = *rr = NULL;
    if ((need & ZN_GPU_ZC_SEND) && !(*rs = zn_reg_find(cuda->regs, a->sendbuf, sb))) return 0;
    if ((need & ZN_GPU_ZC_RECV) && !(*rr = zn_reg_find(cuda->regs, a->recvbuf, rb))) return 0;
    return 1;
}

/* Point a zero-copy kernel at where each peer sees the buffers it touches. */
static void zc_pack(const struct zn_cuda_ctx *cuda, const struct zn_coll_args *a,
                    const struct zn_reg_entry *rs, const struct zn_reg_entry *rr,
                    struct zn_dev_coll_args *k)
{
    for (int q = 0; q < cuda->dev.nranks; q++) {
        if (rs)
            k->zc_send[q] = (uint64_t)((uintptr_t)rs->peer[q] + ((uintptr_t)a->sendbuf - rs->base));
        if (rr)
            k->zc_recv[q] = (uint64_t)((uintptr_t)rr->peer[q] + ((uintptr_t)a->recvbuf - rr->base));
    }
}

/* The kernel arguments of o apart from the algorithm and its channels. */
static void pack_coll(const struct zn_cuda_ctx *cuda, const struct zn_cuda_op *o,
                      struct zn_dev_coll_args *k)
{
    const struct zn_coll_args *a = &o->a;
    memset(k, 0, sizeof(*k));
    k->comm = cuda->dev;
    k->sendbuf = a->sendbuf;
    k->recvbuf = a->recvbuf;
    k->coll = zn_coll_facts(a->coll)->dev_coll;
    k->root = a->root;
    if (zn_coll_facts(a->coll)->reduces) {
        k->dtype = (int32_t)a->dtype;
        k->count = a->count;
        k->op = (int32_t)o->op.red;
        k->premul = o->op.premul;
        memcpy(&k->scalar, o->op.scalar, sizeof(k->scalar));
        k->post_div = o->op.post_div ? cuda->dev.nranks : 0;
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
static ncclResult_t launch_coll(struct zn_cuda_ctx *cuda, const struct zn_cuda_op *o)
{
    const struct zn_coll_args *a = &o->a;
    if (a->count == 0) return ncclSuccess;
    struct zn_dev_coll_args k;
    pack_coll(cuda, o, &k);
    size_t bytes = a->count * a->esize;
    const struct zn_reg_entry *rs, *rr;
    struct zn_gpu_call call = { .coll = a->coll,
                                .bytes = bytes,
                                .count = a->count,
                                .esize = a->esize,
                                .nranks = cuda->dev.nranks,
                                .ring_mode = cuda->ring,
                                .all_fifos = cuda->all_fifos,
                                .net = cuda->net,
                                .premul = k.premul,
                                .in_place = a->sendbuf == a->recvbuf,
                                .registered = zc_regs(cuda, a, bytes, &rs, &rr),
                                .max_ch = cuda->max_ch,
                                .chunk = cuda->chunk,
                                .ll_chunk = cuda->ll_chunk,
                                .force_algo = cuda->force_algo,
                                .force_proto = cuda->force_proto };
    int nch = 0;
    const struct zn_gpu_algo *g = zn_gpu_algo_select(&call, &nch);
    if (!g)
        return zn_error(ncclInternalError, ZN_COLL, "no GPU pattern for %s on this communicator",
                        zn_coll_name(a->coll));
    k.algo = g->dev_algo;
    k.nch = nch;
    if (g->registered) zc_pack(cuda, a, rs, rr, &k);
    zn_log(ZN_LOG_INFO, ZN_TUNE, "%s count %zu type %d: GPU %s, %d channel(s)",
           zn_coll_name(a->coll), a->count, (int)a->dtype, g->label, k.nch);
    ZN_CHECK(zn_cuda_order(&cuda->order, o->stream));
    int e = zn_dev_launch_coll(&k, o->stream);
    if (e)
        return zn_error(ncclUnhandledCudaError, ZN_COLL, "launching the %s kernel failed: %s",
                        zn_coll_name(a->coll), zn_dev_error_string(e));
    return zn_cuda_note(&cuda->order, o->stream);
}

/* Channels of one send or receive: one per 32 KB, up to ZINC_GPU_P2P_CHANNELS (128). Spreading
 * even a 128 KB message over blocks is what keeps NVLink busy, as for the collectives. Measured
 * on 2 H200 (2026-11-27, procs, zinc / NCCL time): 128 KB 1.01, 2 MB 0.86, 8 MB 0.75, 32 MB
 * 0.83, 128 MB 0.89, 512 MB 1.05; a channel per 128 KB up to 16 was 1.37 at 128 KB and 0.97 at
 * 8 MB. (Before the send/recv kernel polled its abort flag in host memory only every 1024 idle
 * passes, more blocks made every block slower, and 16 was the best count.) The two ends of a
 * pair must cut a message alike, so this depends on nothing but its size (the same at both
 * ends) and values every rank agreed on. */
static int p2p_channels(const struct zn_cuda_ctx *cuda, size_t bytes)
{
    size_t n = (bytes + (32 << 10) - 1) >> 15;
    return n < 1 ? 1 : n > (size_t)cuda->p2p_ch ? cuda->p2p_ch : (int)n;
}

/* The wave of a send or receive under config.maxP2pPeers: the host executor's rule (exec.c
 * says why both ends agree and why waves cannot deadlock), so that a group runs alike on host
 * and cuda communicators. */
static int p2p_wave(const struct zn_cuda_ctx *cuda, const struct zn_cuda_op *o)
{
    int n = cuda->dev.nranks, me = cuda->dev.rank, p = o->a.peer;
    if (cuda->max_peers <= 0) return 0;
    int step = o->kind == ZN_CUDA_SEND ? (p - me + n) % n : (me - p + n) % n;
    return step == 0 ? 0 : (step - 1) / cuda->max_peers;
}

/* Sends and receives of the group (of one wave, or all: wave -1), fused into one kernel on the
 * first operation's stream; the other streams join it through events. A send to self meets
 * its receive with a copy. */
static ncclResult_t launch_p2p_wave(struct zn_cuda_ctx *cuda, struct zn_cuda_op *ops, int n,
                                    int wave)
{
    struct zn_dev_p2p_args k;
    memset(&k, 0, sizeof(k));
    k.comm = cuda->dev;
    void *stream = NULL;
    int self_recv = 0;
    for (int i = 0; i < n; i++) {
        struct zn_cuda_op *o = &ops[i];
        if (o->kind == ZN_CUDA_COLL) continue;
        size_t bytes = o->a.count * o->a.esize;
        if (!stream) stream = o->stream;
        if (wave >= 0 && p2p_wave(cuda, o) != wave) continue;
        if (o->a.peer == cuda->dev.rank) {
            if (o->kind == ZN_CUDA_RECV) continue;
            /* Send to self: pair with this rank's next unmatched receive from self. */
            int j = -1;
            for (int m = self_recv; m < n && j < 0; m++)
                if (ops[m].kind == ZN_CUDA_RECV && ops[m].a.peer == cuda->dev.rank) j = m;
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
        /* Small messages to a peer of this host as LL messages, a channel per 16 KB: no fence,
         * no ready counter (both ends decide alike, from the size and agreed values). */
        int ll = bytes <= cuda->p2p_ll &&
                 bytes <= (size_t)cuda->p2p_ch * (ZN_DEV_P2P_LL_BYTES / 2) &&
                 !((cuda->dev.net_mask >> o->a.peer) & 1);
        int nch = ll ? (int)((bytes + ZN_DEV_P2P_LL_BYTES / 2 - 1) / (ZN_DEV_P2P_LL_BYTES / 2))
                     : p2p_channels(cuda, bytes);
        k.ops[k.nops++] =
            (struct zn_dev_p2p_op){ .buf = is_send ? (void *)o->a.sendbuf : o->a.recvbuf,
                                    .bytes = bytes,
                                    .peer = o->a.peer,
                                    .is_send = (int8_t)is_send,
                                    .ll = (int8_t)ll,
                                    .nch = (int16_t)nch };
        if (nch > k.nch) k.nch = nch;
    }
    if (!k.nops) return ncclSuccess;
    ZN_CHECK(zn_cuda_order(&cuda->order, stream));
    int e = zn_dev_launch_p2p(&k, stream);
    if (e)
        return zn_error(ncclUnhandledCudaError, ZN_COLL,
                        "launching the send/recv kernel failed: %s", zn_dev_error_string(e));
    return zn_cuda_note(&cuda->order, stream);
}

/* Sends and receives of the group: one kernel, or with config.maxP2pPeers one per wave, in
 * wave order on one stream. */
static ncclResult_t launch_p2p(struct zn_cuda_ctx *cuda, struct zn_cuda_op *ops, int n)
{
    int last = 0;
    for (int i = 0; i < n; i++)
        if (ops[i].kind != ZN_CUDA_COLL && p2p_wave(cuda, &ops[i]) > last)
            last = p2p_wave(cuda, &ops[i]);
    if (last == 0) return launch_p2p_wave(cuda, ops, n, -1);
    zn_trace(ZN_COLL, "the group's sends and receives run in %d waves (config.maxP2pPeers)",
             last + 1);
    for (int w = 0; w <= last; w++) ZN_CHECK(launch_p2p_wave(cuda, ops, n, w));
    return ncclSuccess;
}

/* A collective that moves blocks, as the send/recv kernel's sends and receives (NCCL's scheme
 * for alltoall, gather and scatter; zn_gpu_as_sendrecv says which): the routes of
 * algo/coll_facts.h say what this rank sends to each peer and where each peer's block lands. */
static ncclResult_t launch_coll_p2p(struct zn_cuda_ctx *cuda, const struct zn_cuda_op *o)
{
    const struct zn_coll_args *a = &o->a;
    int n = cuda->dev.nranks, me = cuda->dev.rank, m = 0;
    size_t blk = a->count * a->esize;
    const uint8_t *in = a->sendbuf;
    uint8_t *out = a->recvbuf;
    struct zn_cuda_op *ops = calloc(2 * (size_t)n, sizeof(*ops));
    if (!ops) return zn_error(ncclSystemError, ZN_COLL, "out of memory");
    for (int j = 0; j < n; j++) {
        /* What this rank sends to j and where what j sends lands (NULL: nothing). */
        int sblk, dblk;
        const uint8_t *src =
            zn_coll_route(a->coll, me, j, a->root, &sblk, &dblk) ? in + (size_t)sblk * blk : NULL;
        uint8_t *dst =
            zn_coll_route(a->coll, j, me, a->root, &sblk, &dblk) ? out + (size_t)dblk * blk : NULL;
        if (j == me && src == dst) continue; /* in place: the own block is there */
        struct zn_coll_args p = *a;
        p.peer = j;
        if (src) {
            p.coll = ZN_COLL_SEND;
            p.sendbuf = src;
            ops[m++] = (struct zn_cuda_op){ .kind = ZN_CUDA_SEND, .a = p, .stream = o->stream };
        }
        if (dst) {
            p.coll = ZN_COLL_RECV;
            p.recvbuf = dst;
            ops[m++] = (struct zn_cuda_op){ .kind = ZN_CUDA_RECV, .a = p, .stream = o->stream };
        }
    }
    ncclResult_t res = launch_p2p(cuda, ops, m);
    free(ops);
    return res;
}

/* Ring mode: the collectives with ring kernels run on the GPU, in call order with the staged
 * ones; every send and receive is staged (peers need not be neighbours). Across hosts with
 * every peer's FIFO there (all_fifos), the rest runs as kernels too: alltoall, gather and
 * scatter as the send/recv kernel (zn_gpu_as_sendrecv; in-place alltoall as the direct pattern),
 * each in its place in call order, and the group's sends and receives in one send/recv kernel. */
static ncclResult_t launch_ring_mode(struct zn_cuda_ctx *cuda, struct zn_cuda_op *ops, int n)
{
    int np2p = 0;
    for (int i = 0; i < n; i++) {
        if (ops[i].kind != ZN_CUDA_COLL)
            np2p++;
        else if (cuda->all_fifos && ops[i].a.count &&
                 zn_gpu_as_sendrecv(ops[i].a.coll, ops[i].a.sendbuf == ops[i].a.recvbuf))
            ZN_CHECK(launch_coll_p2p(cuda, &ops[i]));
        else if (cuda->all_fifos || zn_gpu_ring_on_gpu(ops[i].a.coll))
            ZN_CHECK(launch_coll(cuda, &ops[i]));
        else
            ZN_CHECK(zn_stage_launch(cuda->stage, &cuda->order, &cuda->dev, &ops[i], 1));
    }
    if (!np2p) return ncclSuccess;
    if (cuda->all_fifos) return launch_p2p(cuda, ops, n);
    struct zn_cuda_op *p2p = malloc((size_t)np2p * sizeof(*p2p));
    if (!p2p) return zn_error(ncclSystemError, ZN_COLL, "out of memory");
    np2p = 0;
    for (int i = 0; i < n; i++)
        if (ops[i].kind != ZN_CUDA_COLL) p2p[np2p++] = ops[i];
    ncclResult_t r = zn_stage_launch(cuda->stage, &cuda->order, &cuda->dev, p2p, np2p);
    free(p2p);
    return r;
}

ncclResult_t zn_cuda_launch(struct zn_cuda_ctx *cuda, struct zn_cuda_op *ops, int n)
{
    int cur = zn_cuda_current_device();
    if (cur != cuda->cuda_dev) ZN_CHECK(zn_cuda_set_device(cuda->cuda_dev));
    ncclResult_t res = ncclSuccess;
    if (cuda->ring) {
        res = launch_ring_mode(cuda, ops, n);
    } else if (cuda->stage) {
        res = zn_stage_launch(cuda->stage, &cuda->order, &cuda->dev, ops, n);
    } else {
        int has_p2p = 0;
        for (int i = 0; i < n && res == ncclSuccess; i++) {
            if (ops[i].kind == ZN_CUDA_COLL)
                res = launch_coll(cuda, &ops[i]);
            else
                has_p2p = 1;
        }
        if (res == ncclSuccess && has_p2p) res = launch_p2p(cuda, ops, n);
    }
    if (cur >= 0 && cur != cuda->cuda_dev) zn_cuda_set_device(cur);
    return res;
}

const char *zn_cuda_failure(const struct zn_cuda_ctx *cuda)
{
    const char *staged = cuda->stage ? zn_stage_failure(cuda->stage) : NULL;
    if (staged) return staged;
    if (!cuda->error_host || *cuda->error_host == ZN_DEV_OK) return NULL;
    /* The net engine ends the kernels (abort word) when a net call fails: its reason is the
     * better one. It counts only once a kernel gave up. */
    const char *net = zn_gpunet_failure(cuda->gnet);
    if (net) return net;
    switch (*cuda->error_host) {
    case ZN_DEV_ABORTED: return "a GPU kernel stopped because the communicator was aborted";
    case ZN_DEV_PEER_GONE: {
        const char *gone = zn_gpunet_gone(cuda->gnet);
        return gone ? gone
                    : "a GPU kernel waited for a peer on another host that closed its "
                      "connections";
    }
    default:
        return "a GPU kernel waited longer than ZINC_TIMEOUT for a peer GPU (a peer process "
               "exited, aborted, or made different calls)";
    }
}

void zn_cuda_ctx_fini(struct zn_cuda_ctx *cuda)
{
    cuda->regs = NULL;
    zn_stage_destroy(cuda->stage);
    cuda->stage = NULL;
    zn_gpunet_destroy(cuda->gnet);
    cuda->gnet = NULL;
    zn_cuda_order_fini(&cuda->order);
}

#else

ncclResult_t zn_cuda_launch(struct zn_cuda_ctx *cuda, struct zn_cuda_op *ops, int n)
{
    return zn_error(ncclInvalidUsage, ZN_COLL, "this zinc build has no CUDA support");
}

const char *zn_cuda_failure(const struct zn_cuda_ctx *cuda)
{
    return NULL;
}

void zn_cuda_ctx_fini(struct zn_cuda_ctx *cuda) {}

#endif
