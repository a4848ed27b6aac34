/*
 * Zero-copy kernels (ZN_DEV_ZEROCOPY): collectives on registered buffers read and write the
 * peers' user buffers directly, no FIFO, no copies.
 */
#ifndef ZN_DEVICE_COLL_ZC_CUH
#define ZN_DEVICE_COLL_ZC_CUH

#include "coll_common.cuh"

namespace zn
{

/* Zero-copy calls (thread 0): tell every peer where it sees this rank's send and receive
 * buffers, raise this rank's phase to 2k-1 and wait for everyone's, so that every rank has
 * entered call k (its buffers are ready). sv/rv get every rank's buffers as this GPU sees them.
 * Returns k; s.fail on abort or deadline. */
static __device__ uint64_t zc_enter(Chan &s, const zn_dev_coll_args &a, const uint8_t **sv,
                                    uint8_t **rv)
{
    const zn_dev_comm &c = a.comm;
    int me = s.me, n = s.n, ch = s.ch;
    uint64_t call = *ctrl(c.arena[me], ZN_DEV_ZCSEQ_OFF, me, ch) + 1;
    for (int k = 1; k < n; k++) {
        int q = (me + k) % n;
        *ctrl(c.arena[q], ZN_DEV_ZCSEND_OFF, me, ch) = a.zc_send[q];
        *ctrl(c.arena[q], ZN_DEV_ZCRECV_OFF, me, ch) = a.zc_recv[q];
    }
    __threadfence_system();
    for (int k = 1; k < n; k++)
        *ctrl(c.arena[(me + k) % n], ZN_DEV_ZCSEQ_OFF, me, ch) = 2 * call - 1;
    s.fail = 0;
    for (int k = 1; k < n && !s.fail; k++)
        s.fail = !wait_geq(s, ctrl(c.arena[me], ZN_DEV_ZCSEQ_OFF, (me + k) % n, ch), 2 * call - 1);
    __threadfence(); /* acquire: the views are read after the flags */
    for (int q = 0; q < n; q++) {
        sv[q] = q == me ? (const uint8_t *)a.sendbuf
                        : (const uint8_t *)*ctrl(c.arena[me], ZN_DEV_ZCSEND_OFF, q, ch);
        rv[q] = q == me ? (uint8_t *)a.recvbuf
                        : (uint8_t *)*ctrl(c.arena[me], ZN_DEV_ZCRECV_OFF, q, ch);
    }
    return call;
}

/* The end of zero-copy call k (thread 0, after the block's stores): raise 2k and wait for
 * everyone's, so that nobody reuses a buffer a peer still reads or writes. */
static __device__ void zc_leave(Chan &s, const zn_dev_comm &c, uint64_t call)
{
    int me = s.me, n = s.n, ch = s.ch;
    __threadfence_system(); /* every store of the block, before the flags */
    for (int k = 1; k < n; k++) *ctrl(c.arena[(me + k) % n], ZN_DEV_ZCSEQ_OFF, me, ch) = 2 * call;
    for (int k = 1; k < n; k++)
        if (!wait_geq(s, ctrl(c.arena[me], ZN_DEV_ZCSEQ_OFF, (me + k) % n, ch), 2 * call)) break;
    *ctrl(c.arena[me], ZN_DEV_ZCSEQ_OFF, me, ch) = call;
}

/* Allreduce: every rank's send and receive buffers are mapped by every peer. Per channel,
 * between the two phases, each rank reduces its piece of the channel's range straight from
 * every rank's send buffer and stores the result into every rank's receive buffer. Each piece
 * is reduced once, in rank order, so all ranks get the same bits; in place works because only
 * the piece's owner touches a piece, loading each element before storing it. */
template <typename T> __device__ void allreduce_zc(Chan &s, const zn_dev_coll_args &a)
{
    int me = s.me, n = s.n;
    __shared__ const uint8_t *sv[ZN_DEV_MAX_RANKS];
    __shared__ uint8_t *rv[ZN_DEV_MAX_RANKS];
    __shared__ const T *srcs[ZN_DEV_MAX_RANKS];
    __shared__ T *dsts[ZN_DEV_MAX_RANKS];
    __shared__ uint64_t call;
    Range r = channel_range(a.count, a.nch, s.ch);
    uint64_t ps, pl;
    piece(r.hi - r.lo, n, me, &ps, &pl);
    uint64_t off = r.lo + ps;
    if (threadIdx.x == 0) {
        call = zc_enter(s, a, sv, rv);
        for (int q = 0; q < n; q++) {
            srcs[q] = (const T *)sv[q] + off;
            /* dsts[0..n-2]: the peers' receive buffers (the extra stores); dsts[n-1]: own. */
            if (q != me) dsts[(q - me + n) % n - 1] = (T *)rv[q] + off;
        }
        dsts[n - 1] = (T *)a.recvbuf + off;
    }
    __syncthreads();
    if (s.fail) return;
    reduce_n<T>(dsts[n - 1], dsts, n - 1, srcs, n, pl, a.op, me, a.premul, scalar_of<T>(a),
                a.post_div);
    __syncthreads();
    if (threadIdx.x == 0) zc_leave(s, a.comm, call);
}

/* The other collectives on registered buffers: the copying ones store straight into the
 * receive buffers of their destinations (allgather, alltoall, broadcast, scatter: one NVLink
 * write per byte, no FIFO, no copy-out); reducescatter, reduce and gather read the peers'
 * send buffers (the reductions in rank order, as everywhere). Not PreMulSum (host check). */
template <typename T> __device__ void coll_zc(Chan &s, const zn_dev_coll_args &a)
{
    int me = s.me, n = s.n, root = a.root, coll = a.coll;
    __shared__ const uint8_t *sv[ZN_DEV_MAX_RANKS];
    __shared__ uint8_t *rv[ZN_DEV_MAX_RANKS];
    __shared__ const T *srcs[ZN_DEV_MAX_RANKS];
    __shared__ uint64_t call;
    Range r = channel_range(a.count, a.nch, s.ch);
    const uint64_t len = r.hi - r.lo, blk = a.count * sizeof(T), lo = r.lo * sizeof(T);
    if (threadIdx.x == 0) {
        call = zc_enter(s, a, sv, rv);
        for (int q = 0; q < n; q++)
            srcs[q] = (const T *)(sv[q] + (coll == ZN_COLL_REDUCESCATTER ? me * blk : 0) + lo);
    }
    __syncthreads();
    if (s.fail) return;
    if (zn_coll_rooted(coll) && me != root) {
        /* nothing to move: the root reads or writes this rank's buffers */
    } else if (zn_coll_reduces(coll)) { /* reducescatter, reduce (allreduce: allreduce_zc) */
        reduce_n<T>((T *)(rv[me] + lo), nullptr, 0, srcs, n, len, a.op, me, 0, scalar_of<T>(a),
                    a.post_div);
    } else if (coll == ZN_COLL_GATHER) {
        for (int q = 0; q < n; q++)
            if (sv[q] + lo != rv[me] + q * blk + lo)
                copy_bytes(rv[me] + q * blk + lo, sv[q] + lo, len);
    } else {
        bool by_src = coll == ZN_COLL_ALLTOALL || coll == ZN_COLL_SCATTER;  /* block q to rank q */
        bool at_me = coll == ZN_COLL_ALLGATHER || coll == ZN_COLL_ALLTOALL; /* lands at block me */
        for (int k = 0; k < n; k++) {
            int q = (me + k) % n;
            const uint8_t *src = sv[me] + (by_src ? q * blk : 0) + lo;
            uint8_t *dst = rv[q] + (at_me ? me * blk : 0) + lo;
            if (src != dst) copy_bytes(dst, src, len);
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) zc_leave(s, a.comm, call);
}

} // namespace zn

#endif
