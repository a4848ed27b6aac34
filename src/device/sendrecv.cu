/*
 * Send/receive kernel: all sends and receives of one group of one communicator in a single
 * launch, so that they progress together (a group of a send to A and a receive from A must not
 * depend on the order the two ranks listed them in).
 *
 * Every operation is cut into nch contiguous slices, slice ch handled by block ch, which walks
 * its operations round-robin and moves whichever can move: a send window when the peer has
 * drained the slot, a receive window when the peer has filled one. Operations with the same
 * peer and direction go in call order (they share the FIFO), which is how NCCL matches them.
 *
 * Small messages to peers of this host (op.ll, ZINC_GPU_P2P_LL) skip the FIFO: each of the first
 * few blocks writes its slice (up to 16 KB) as LL packets (8 data bytes and two copies of the
 * flag in one 16-byte store) into one of two buffers the receiver keeps for this rank and
 * channel, and the receiver's threads wait for their packets' flags; no fence, no ready
 * counter, one NVLink crossing before the data is seen. The receiver raises its count of
 * messages taken in the sender's arena, which the sender waits for before it reuses a buffer.
 */
#include "abi/dev_abi.h"
#include "fifo.cuh"
#include "coll_common.cuh"

#include <cuda_runtime.h>

namespace zn
{

/* The kernel's parameters with room for N operations: zn_dev_p2p_args (N = ZN_DEV_MAX_P2P,
 * 12.5 KB) or, for the usual group of a few operations, the same layout cut short. The
 * parameters travel with every launch: on 2 H200, one process driving both GPUs, a send and a
 * receive took 14.4 - 15.1 us per call with the 12.5 KB block and 10.7 - 13.6 us with the
 * short one (no change with one process per GPU). */
template <int N> struct P2pArgs {
    zn_dev_comm comm;
    int32_t nops;
    int32_t nch;
    zn_dev_p2p_op ops[N];
};
static_assert(sizeof(P2pArgs<ZN_DEV_MAX_P2P>) == sizeof(zn_dev_p2p_args), "same layout");

constexpr int FEW_OPS = 8;

/* The most packets a thread holds in flight. A slice of 16 KB is 2048 packets, so a thread of
 * a block holds 4 of them; 8 is what the 32 KB slices used before needed, kept because a lower
 * bound was not measured on a GPU (the unrolled loops skip the packets past a slice). */
constexpr int LL_UNROLL = 8;
static_assert(LL_UNROLL * ZN_DEV_THREADS * 8 >= ZN_DEV_P2P_LL_BYTES / 2,
              "a thread reads all its packets of a slice at once");

/* A block's LL message counts (ZN_DEV_P2PLL_*_OFF, by peer slot). */
struct LLCounts {
    uint64_t sent[ZN_DEV_MAX_RANKS], taken[ZN_DEV_MAX_RANKS];
    uint64_t acked[ZN_DEV_MAX_RANKS]; /* the peer's count of ours taken, as last read */
};

__device__ __forceinline__ volatile uint64_t *llword(uint8_t *arena, size_t off, int peer, int ch)
{
    return (volatile uint64_t *)(arena + off) + peer * ZN_DEV_P2P_LL_CH + ch;
}

/* Block-wide, op.ll: send this channel's slice [lo, lo + bytes) of the message if the receiver
 * has taken the one before the last (its buffer is free), or receive it if its first packet is
 * there. Returns 1 if it moved, 0 if it cannot yet, -1 if a wait failed (error word written). */
__device__ int ll_move(Chan &s, LLCounts &q, const zn_dev_p2p_op &op, uint64_t lo, uint64_t bytes)
{
    const zn_dev_comm &c = *s.c;
    const int peer = op.peer, ch = s.ch;
    const uint64_t np = (bytes + 7) / 8;
    if (op.is_send) {
        const uint64_t seq = q.sent[peer];
        /* The count read at the kernel's start usually suffices (it only grows). */
        if (threadIdx.x == 0)
            s.flag =
                seq < 2 || q.acked[peer] + 1 >= seq ||
                (q.acked[peer] = *llword(c.arena[s.me], ZN_DEV_P2PLL_ACK_OFF, peer, ch)) + 1 >= seq;
        __syncthreads();
        if (!s.flag) return 0;
        const uint32_t e = (uint32_t)(seq + 1);
        uint4 *line = (uint4 *)(c.arena[peer] + zn_dev_p2p_ll_buf(c.ll_off, c.nslots, c.nch,
                                                                  c.row_at[peer], ch, seq & 1));
        const uint8_t *src = (const uint8_t *)op.buf + lo;
        /* A thread's packets loaded first, then stored: one load at a time before each store
         * made a 32 KB message take ~4 us more than an 8 KB one. */
        for (uint64_t p0 = threadIdx.x; p0 < np; p0 += LL_UNROLL * blockDim.x) {
            uint64_t v[LL_UNROLL];
#pragma unroll
            for (int u = 0; u < LL_UNROLL; u++) {
                uint64_t p = p0 + u * blockDim.x;
                v[u] = p < np ? load8(src, p, bytes) : 0;
            }
#pragma unroll
            for (int u = 0; u < LL_UNROLL; u++) {
                uint64_t p = p0 + u * blockDim.x;
                if (p < np)
                    st_v4(line + p, make_uint4((uint32_t)v[u], e, (uint32_t)(v[u] >> 32), e));
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) q.sent[peer] = seq + 1;
        __syncthreads();
        return 1;
    }
    const uint64_t seq = q.taken[peer];
    const uint32_t e = (uint32_t)(seq + 1);
    const uint4 *line = (const uint4 *)(c.arena[s.me] + zn_dev_p2p_ll_buf(c.ll_off, c.nslots, c.nch,
                                                                          peer, ch, seq & 1));
    /* Every thread reads its packets (a slice is at most LL_UNROLL per thread); the message has
     * started to arrive if any of them carries the flag, and then the rest are waited for. A
     * probe by one thread first would cost a round trip more. */
    uint4 v[LL_UNROLL];
    int any = 0;
#pragma unroll
    for (int u = 0; u < LL_UNROLL; u++) {
        uint64_t p = threadIdx.x + u * blockDim.x;
        if (p >= np) continue;
        v[u] = ld_v4(line + p);
        any |= v[u].y == e && v[u].w == e;
    }
    if (!__syncthreads_or(any)) return 0;
    uint8_t *dst = (uint8_t *)op.buf + lo;
    int failed = 0;
#pragma unroll
    for (int u = 0; u < LL_UNROLL; u++) {
        uint64_t p = threadIdx.x + u * blockDim.x;
        if (p >= np || failed) continue;
        if ((v[u].y != e || v[u].w != e) && !ll_wait(c, line + p, e, &v[u])) {
            failed = 1;
            continue;
        }
        store8(dst, p, bytes, (uint64_t)v[u].x | ((uint64_t)v[u].z << 32));
    }
    if (__syncthreads_or(failed)) return -1;
    if (threadIdx.x == 0) {
        /* Every thread has its packets (the barrier): the sender may reuse the buffer. */
        *llword(c.arena[peer], ZN_DEV_P2PLL_ACK_OFF, c.row_at[peer], ch) = seq + 1;
        q.taken[peer] = seq + 1;
    }
    __syncthreads();
    return 1;
}

template <int N>
__global__ void __launch_bounds__(ZN_DEV_THREADS)
    sendrecv_kernel(const __grid_constant__ P2pArgs<N> a)
{
    __shared__ Chan s;
    __shared__ LLCounts q;
    __shared__ uint64_t done[N];
    __shared__ int16_t dep[N];
    __shared__ int idle;
    /* The LL counts are loaded before chan_open's loads and barrier, so that both wait out
     * one memory round trip together rather than one after the other. */
    const bool ll_block = blockIdx.x < ZN_DEV_P2P_LL_CH; /* a channel that carries LL slices */
    if (ll_block)
        for (int p = threadIdx.x; p < a.comm.nslots; p += blockDim.x) {
            q.sent[p] = *llword(a.comm.arena[a.comm.self], ZN_DEV_P2PLL_SENT_OFF, p, blockIdx.x);
            q.taken[p] = *llword(a.comm.arena[a.comm.self], ZN_DEV_P2PLL_RECVD_OFF, p, blockIdx.x);
            q.acked[p] = *llword(a.comm.arena[a.comm.self], ZN_DEV_P2PLL_ACK_OFF, p, blockIdx.x);
        }
    chan_open(s, &a.comm);
    for (int k = threadIdx.x; k < a.nops; k += blockDim.x) done[k] = 0;
    if (threadIdx.x == 0) {
        /* dep[k]: the last earlier operation on the same FIFO whose slice on this channel is
         * not empty (an empty one is done from the start and orders nothing), or -1. */
        int16_t last[ZN_DEV_MAX_RANKS][2];
        for (int p = 0; p < ZN_DEV_MAX_RANKS; p++) last[p][0] = last[p][1] = -1;
        for (int k = 0; k < a.nops; k++) {
            const zn_dev_p2p_op &op = a.ops[k];
            dep[k] = last[op.peer][op.is_send];
            Range r = channel_range(op.bytes, op.nch, s.ch);
            if (r.lo < r.hi) last[op.peer][op.is_send] = (int16_t)k;
        }
    }
    __syncthreads();
    const uint64_t W = a.comm.slot_bytes;
    uint64_t t0 = globaltimer();
    uint32_t idle_passes = 0; /* thread 0's */
    for (;;) {
        int remaining = 0, moved = 0;
        for (int k = 0; k < a.nops; k++) {
            const zn_dev_p2p_op &op = a.ops[k];
            Range r = channel_range(op.bytes, op.nch, s.ch);
            uint64_t lo = r.lo, hi = r.hi;
            if (lo + done[k] >= hi) continue;
            remaining++;
            /* An earlier unfinished operation on the same FIFO goes first (it waited for its
             * own predecessor in turn, so looking one back is enough). */
            if (dep[k] >= 0) {
                Range e = channel_range(a.ops[dep[k]].bytes, a.ops[dep[k]].nch, s.ch);
                if (e.lo + done[dep[k]] < e.hi) continue;
            }
            uint64_t off = lo + done[k], len = hi - off < W ? hi - off : W;
            uint8_t *buf = (uint8_t *)op.buf;
            if (op.ll) {
                int m = ll_move(s, q, op, lo, hi - lo);
                if (m < 0) goto out;
                if (m == 0) continue;
                len = hi - lo;
            } else if (op.is_send) {
                if (!can_push(s, op.peer)) continue;
                if (!push<uint8_t>(s, op.peer, buf + off, len)) goto out;
            } else {
                if (!can_consume(s, op.peer)) continue;
                const uint8_t *p = consume<uint8_t>(s, op.peer);
                if (!p) goto out;
                copy_bytes(buf + off, p, len);
                release(s, op.peer);
            }
            if (threadIdx.x == 0) done[k] += len;
            __syncthreads();
            moved = 1;
        }
        if (!remaining) break;
        if (moved) {
            t0 = globaltimer();
            continue;
        }
        /* Nothing could move: bounded by the timeout and the abort flag, like every wait, but
         * looked at only every 1024 idle passes as wait_geq does. The abort flag lives in
         * pinned host memory: a read of it is a PCIe round trip, and dozens of blocks reading
         * it on every pass queue behind each other (at 64 blocks, each took ~10x longer to see
         * its peer's flag). */
        if (threadIdx.x == 0) {
            idle = 0;
            if ((++idle_passes & 1023) == 0) {
                if (*a.comm.abort_flag)
                    idle = ZN_DEV_ABORTED;
                else if (globaltimer() - t0 > a.comm.timeout_ns)
                    idle = ZN_DEV_TIMEOUT;
                /* A receive from a peer on another host that closed before sending what it
                 * waits for cannot finish. */
                for (int k = 0; k < a.nops && !idle; k++) {
                    const zn_dev_p2p_op &op = a.ops[k];
                    Range r = channel_range(op.bytes, op.nch, s.ch);
                    if (op.is_send || op.ll || r.lo + done[k] >= r.hi) continue;
                    volatile uint64_t *ready =
                        ctrl(inbox(s, op.peer), ZN_DEV_READY_OFF, op.peer, s.ch);
                    if (peer_gone(gone_word(s, op.peer), ready, s.recvd[op.peer] + 1))
                        idle = ZN_DEV_PEER_GONE;
                }
                if (idle && *a.comm.error == 0) {
                    *(volatile uint32_t *)a.comm.error = (uint32_t)idle;
                    __threadfence_system();
                }
            }
        }
        __syncthreads();
        if (idle) goto out;
    }
out:
    chan_close(s);
    if (ll_block)
        for (int p = threadIdx.x; p < a.comm.nslots; p += blockDim.x) {
            *llword(a.comm.arena[a.comm.self], ZN_DEV_P2PLL_SENT_OFF, p, blockIdx.x) = q.sent[p];
            *llword(a.comm.arena[a.comm.self], ZN_DEV_P2PLL_RECVD_OFF, p, blockIdx.x) = q.taken[p];
        }
}

} // namespace zn

extern "C" int zn_dev_launch_p2p(const struct zn_dev_p2p_args *a, void *stream)
{
    using namespace zn;
    if (a->nops <= FEW_OPS) {
        P2pArgs<FEW_OPS> f;
        f.comm = a->comm;
        f.nops = a->nops;
        f.nch = a->nch;
        for (int k = 0; k < a->nops; k++) f.ops[k] = a->ops[k];
        sendrecv_kernel<FEW_OPS><<<a->nch, ZN_DEV_THREADS, 0, (cudaStream_t)stream>>>(f);
    } else {
        sendrecv_kernel<ZN_DEV_MAX_P2P><<<a->nch, ZN_DEV_THREADS, 0, (cudaStream_t)stream>>>(
            *(const P2pArgs<ZN_DEV_MAX_P2P> *)a);
    }
    return (int)cudaGetLastError();
}
