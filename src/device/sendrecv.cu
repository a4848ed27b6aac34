/*
 * Send/receive kernel: all sends and receives of one group of one communicator in a single
 * launch, so that they progress together (a group of a send to A and a receive from A must not
 * depend on the order the two ranks listed them in).
 *
 * Every operation is cut into nch contiguous slices, slice ch handled by block ch, which walks
 * its operations round-robin and moves whichever can move: a send window when the peer has
 * drained the slot, a receive window when the peer has filled one. Operations with the same
 * peer and direction go in call order (they share the FIFO), which is how NCCL matches them.
 */
#include "abi/dev_abi.h"
#include "fifo.cuh"

#include <cuda_runtime.h>

namespace zn
{

__global__ void __launch_bounds__(ZN_DEV_THREADS)
    sendrecv_kernel(const __grid_constant__ zn_dev_p2p_args a)
{
    __shared__ Chan s;
    __shared__ uint64_t done[ZN_DEV_MAX_P2P];
    __shared__ int16_t dep[ZN_DEV_MAX_P2P];
    __shared__ int idle;
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
            if (op.is_send) {
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
                    if (op.is_send || r.lo + done[k] >= r.hi) continue;
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
}

} // namespace zn

extern "C" int zn_dev_launch_p2p(const struct zn_dev_p2p_args *a, void *stream)
{
    zn::sendrecv_kernel<<<a->nch, ZN_DEV_THREADS, 0, (cudaStream_t)stream>>>(*a);
    return (int)cudaGetLastError();
}
