/*
 * Collective kernels for GPUs that can all reach each other (NVLink or PCIe peer access).
 *
 * One kernel per call, one thread block per channel. The call's vector is cut into nch
 * contiguous ranges (one per channel) and each range into windows no larger than a FIFO slot
 * (fifo.cuh). Every collective is a pattern of pushes into peers' FIFOs followed by consuming
 * one's own FIFOs:
 *
 *   allreduce one-shot   push the window to every peer; reduce all n windows in rank order
 *   allreduce two-shot   push piece j to rank j; rank j reduces piece j and pushes the result to
 *                        everyone; everyone copies the results out (reduce-scatter + allgather)
 *   reducescatter        push block j to rank j; reduce n contributions (from 16 MB blocks
 *                        in two blocks per channel, one pushing and one reducing: split)
 *   allgather, alltoall  push (block j) to rank j; copy out what arrives
 *   broadcast, scatter   the root pushes; the others copy out
 *   reduce, gather       everyone pushes to the root; the root reduces / copies out
 *
 * Small calls skip the FIFOs: LL packets (8 data bytes and two flags in one 16-byte store)
 * written straight into the peers' LL buffers, no fences (allreduce_ll, coll_ll).
 *
 * The patterns above reach every peer and address it by rank (its slot, zn_dev_comm: at most
 * ZN_DEV_MAX_RANKS ranks).
 *
 * Ring kernels (ZN_DEV_ALGO_RING, coll_ring.cuh) push only to the next rank on the ring and consume
 * only from the previous one, so they run where only ring neighbours are mapped, and on a ring
 * across hosts of up to ZN_DEV_MAX_RING ranks (the neighbours in slots 1 and 2):
 *
 *   allreduce            per window of n pieces: n-1 reduce-scatter steps (take the partial
 *                        piece from prev, add the own input, pass it on), then n-1 allgather
 *                        steps (keep the finished piece, pass it on unless next finished it)
 *   reducescatter        the same reduce-scatter steps over the n blocks
 *   allgather            pass every block around the ring, keeping each
 *   broadcast, reduce    a chain from the root / ending at the root
 *
 * Collectives on registered buffers (ZN_DEV_ZEROCOPY) read and write the peers' user buffers
 * directly: no FIFO, no copies (coll_zc.cuh).
 *
 * Each output element is computed on exactly one rank (two-shot, reducescatter, reduce) or on
 * every rank from the same operands in rank order (one-shot), so all ranks get the same bits.
 */
#include "abi/dev_abi.h"
#include "elem.cuh"
#include "fifo.cuh"
#include "coll_common.cuh"
#include "coll_ring.cuh"
#include "coll_zc.cuh"

#include <cuda_runtime.h>

namespace zn
{

template <typename T> __device__ void allreduce_oneshot(Chan &s, const zn_dev_coll_args &a)
{
    int me = s.me, n = s.n;
    const T *in = (const T *)a.sendbuf;
    T *out = (T *)a.recvbuf;
    T sc = scalar_of<T>(a);
    const Span sp = span<T>(a.count, a.nch, s.ch, a.comm.slot_bytes, 1);
    __shared__ const T *srcs[ZN_DEV_MAX_RANKS];
    for (uint64_t w0 = sp.lo; w0 < sp.hi; w0 += sp.w) {
        uint64_t wl = sp.len(w0);
        for (int k = 1; k < n; k++)
            if (!push<T>(s, (me + k) % n, in + w0, wl, a.premul, sc)) return;
        if (!gather<T>(s, in + w0, srcs)) return;
        reduce_n<T>(out + w0, nullptr, 0, srcs, n, wl, a.op, me, a.premul, sc, a.post_div);
        release_peers(s);
    }
}

/* Small allreduce, LL protocol: every rank writes its data as flagged packets straight into
 * every peer's LL buffer (no fence, no separate flag) and reduces the packets it receives as
 * they arrive. The flag is the channel's call counter, so the two buffers alternate between
 * calls; a rank can only start call k+2 after everyone finished reading call k (each call
 * needs every rank's data), which makes the alternation safe. */
template <typename T> __device__ void allreduce_ll(Chan &s, const zn_dev_coll_args &a)
{
    constexpr int L = 8 / sizeof(T);
    const zn_dev_comm &c = a.comm;
    int me = s.me, n = s.n;
    const LLSpan sp = ll_span<T>(s, a);
    const uint32_t e = sp.e;
    const int buf = e & 1;
    const uint8_t *in = (const uint8_t *)a.sendbuf + sp.lo;
    uint8_t *out = (uint8_t *)a.recvbuf + sp.lo;
    const uint64_t nbytes = sp.nbytes, np = sp.np;
    T sc = scalar_of<T>(a);
    for (uint64_t p = threadIdx.x; p < np; p += blockDim.x) {
        Pack8<T> d;
        d.u = load8(in, p, nbytes);
        if (a.premul)
            for (int l = 0; l < L; l++) d.t[l] = Ops<T>::mul(d.t[l], sc);
        uint4 pk = make_uint4((uint32_t)d.u, e, (uint32_t)(d.u >> 32), e);
        for (int k = 1; k < n; k++) {
            int dst = (me + k) % n;
            uint4 *line =
                (uint4 *)(c.arena[dst] + zn_dev_ll_buf(c.ll_off, me, s.ch, c.nch, buf)) + p;
            st_v4(line, pk);
        }
    }
    int failed = 0;
    for (uint64_t p = threadIdx.x; p < np && !failed; p += blockDim.x)
        failed = !ll_reduce_packet<T>(s, a, in, out, p, nbytes, e, sc);
    ll_leave(s, c, e);
}

/* Where the block that `from` sends to `to` starts in from's send buffer, or NULL if from sends
 * to nothing to `to` in this collective (blk: bytes per block). */
__device__ __forceinline__ const uint8_t *ll_block(const zn_dev_coll_args &a, int from, int to,
                                                   uint64_t blk)
{
    const uint8_t *in = (const uint8_t *)a.sendbuf;
    switch (a.coll) {
    case ZN_COLL_ALLGATHER: return in;
    case ZN_COLL_BROADCAST: return from == a.root ? in : nullptr;
    case ZN_COLL_REDUCE:
    case ZN_COLL_GATHER: return to == a.root ? in : nullptr;
    case ZN_COLL_SCATTER: return from == a.root ? in + to * blk : nullptr;
    default: return in + to * blk; /* alltoall, reducescatter */
    }
}

/* Where a block from rank `from` lands in this rank's output (copying collectives). */
__device__ __forceinline__ uint8_t *ll_dest(const zn_dev_coll_args &a, int from, uint64_t blk)
{
    uint8_t *out = (uint8_t *)a.recvbuf;
    return a.coll == ZN_COLL_BROADCAST || a.coll == ZN_COLL_SCATTER ? out : out + from * blk;
}

/* Small calls of the other collectives, LL protocol (ZN_DEV_ONESHOT_LL): each rank writes
 * every block it owes a peer as flagged packets straight into that peer's LL buffer and takes
 * what it is owed from its own, copying it out (allgather, alltoall, broadcast, gather,
 * scatter) or reducing it with its own block in rank order (reducescatter, reduce). A rank
 * that owes a peer nothing still sends it one flag-only packet: then, as in allreduce_ll,
 * finishing call k on a channel means every rank has entered it, so nobody overwrites the
 * buffer of call k-1 before its reader is done (the LL buffers alternate). */
template <typename T> __device__ void coll_ll(Chan &s, const zn_dev_coll_args &a)
{
    constexpr int L = 8 / sizeof(T);
    const zn_dev_comm &c = a.comm;
    int me = s.me, n = s.n;
    const LLSpan sp = ll_span<T>(s, a);
    const uint32_t e = sp.e;
    const int buf = e & 1;
    const uint64_t blk = a.count * sizeof(T), lo = sp.lo, nbytes = sp.nbytes, np = sp.np;
    const uint64_t npk = np ? np : 1; /* packets per pair, the flag-only one included */
    const bool reducing = zn_coll_reduces(a.coll); /* reducescatter, reduce (not allreduce) */
    T sc = scalar_of<T>(a);
    for (int k = 1; k < n; k++) {
        int d = (me + k) % n;
        const uint8_t *src = ll_block(a, me, d, blk);
        uint4 *line = (uint4 *)(c.arena[d] + zn_dev_ll_buf(c.ll_off, me, s.ch, c.nch, buf));
        for (uint64_t p = threadIdx.x; p < (src ? npk : 1); p += blockDim.x) {
            Pack8<T> v;
            v.u = src ? load8(src + lo, p, nbytes) : 0;
            if (reducing && a.premul)
                for (int l = 0; l < L; l++) v.t[l] = Ops<T>::mul(v.t[l], sc);
            st_v4(line + p, make_uint4((uint32_t)v.u, e, (uint32_t)(v.u >> 32), e));
        }
    }
    const uint8_t *own = ll_block(a, me, me, blk);
    int failed = 0;
    if (reducing) {
        uint8_t *out = a.coll == ZN_COLL_REDUCE && me != a.root ? nullptr : (uint8_t *)a.recvbuf;
        for (uint64_t p = threadIdx.x; out && p < np && !failed; p += blockDim.x)
            failed = !ll_reduce_packet<T>(s, a, own + lo, out + lo, p, nbytes, e, sc);
    } else {
        /* This rank's own block, where the collective keeps one and it is not in place. */
        uint8_t *mine = ll_dest(a, me, blk);
        if (own && own != mine)
            for (uint64_t p = threadIdx.x; p < np; p += blockDim.x)
                store8(mine + lo, p, nbytes, load8(own + lo, p, nbytes));
        for (int k = 1; k < n && !failed; k++) {
            int j = (me + n - k) % n;
            if (!ll_block(a, j, me, blk)) continue;
            const uint4 *line =
                (const uint4 *)(c.arena[me] + zn_dev_ll_buf(c.ll_off, j, s.ch, c.nch, buf));
            uint8_t *dst = ll_dest(a, j, blk) + lo;
            for (uint64_t p = threadIdx.x; p < np; p += blockDim.x) {
                uint4 v;
                if (!ll_wait(c, line + p, e, &v)) {
                    failed = 1;
                    break;
                }
                store8(dst, p, nbytes, (uint64_t)v.x | ((uint64_t)v.z << 32));
            }
        }
    }
    /* The flag-only packets (peers that owe this rank nothing, or an empty range). */
    for (int j = threadIdx.x; j < n && !failed; j += blockDim.x) {
        if (j == me || (np && ll_block(a, j, me, blk))) continue; /* waited for above */
        uint4 v;
        failed = !ll_wait(
            c, (const uint4 *)(c.arena[me] + zn_dev_ll_buf(c.ll_off, j, s.ch, c.nch, buf)), e, &v);
    }
    ll_leave(s, c, e);
}

/* Per window: reduce-scatter (piece d to rank d, every piece in one pass), the reduction of
 * this rank's piece written both to its output and straight into every peer's FIFO (the
 * allgather needs no second pass over the result), then the other ranks' pieces copied out. */
template <typename T> __device__ void allreduce_twoshot(Chan &s, const zn_dev_coll_args &a)
{
    int me = s.me, n = s.n;
    const T *in = (const T *)a.sendbuf;
    T *out = (T *)a.recvbuf;
    T sc = scalar_of<T>(a);
    const Span sp = span<T>(a.count, a.nch, s.ch, a.comm.slot_bytes, n);
    __shared__ const T *srcs[ZN_DEV_MAX_RANKS];
    __shared__ T *dsts[ZN_DEV_MAX_RANKS];
    for (uint64_t w0 = sp.lo; w0 < sp.hi; w0 += sp.w) {
        uint64_t wl = sp.len(w0), ps, pl, mps, mpl;
        if (!reserve_peers<T>(s, dsts)) return;
        for (int k = 1; k < n; k++) {
            piece(wl, n, (me + k) % n, &ps, &pl);
            copy_scaled<T>(dsts[k - 1], in + w0 + ps, pl, a.premul, sc);
        }
        commit(s, -1);
        piece(wl, n, me, &mps, &mpl);
        if (!gather<T>(s, in + w0 + mps, srcs)) return;
        if (!reserve_peers<T>(s, dsts)) return;
        reduce_n<T>(out + w0 + mps, dsts, n - 1, srcs, n, mpl, a.op, me, a.premul, sc, a.post_div);
        release_peers(s);
        commit(s, -1);
        for (int k = 1; k < n; k++) {
            int j = (me + n - k) % n;
            const T *p = consume<T>(s, j);
            if (!p) return;
            piece(wl, n, j, &ps, &pl);
            copy_bytes((uint8_t *)(out + w0 + ps), (const uint8_t *)p, pl * sizeof(T));
            release(s, j);
        }
    }
}

template <typename T> __device__ void reducescatter(Chan &s, const zn_dev_coll_args &a)
{
    int me = s.me, n = s.n;
    const T *in = (const T *)a.sendbuf;
    T *out = (T *)a.recvbuf;
    T sc = scalar_of<T>(a);
    const Span sp = span<T>(a.count, a.nch, s.ch, a.comm.slot_bytes, 1);
    __shared__ const T *srcs[ZN_DEV_MAX_RANKS];
    /* One window ahead: window w + 1 goes out before window w is reduced, so the peers' slots
     * of w have had a window's time to arrive and the link is not idle while this block
     * reduces (a FIFO has at least two slots). */
    for (uint64_t w0 = sp.lo, prev = sp.hi;; w0 += sp.w) {
        if (w0 < sp.hi) {
            uint64_t wl = sp.len(w0);
            for (int k = 1; k < n; k++) {
                int d = (me + k) % n;
                if (!push<T>(s, d, in + d * a.count + w0, wl, a.premul, sc)) return;
            }
        }
        if (prev < sp.hi) {
            uint64_t wl = sp.len(prev);
            if (!gather<T>(s, in + me * a.count + prev, srcs)) return;
            reduce_n<T>(out + prev, nullptr, 0, srcs, n, wl, a.op, me, a.premul, sc, a.post_div);
            release_peers(s);
        }
        if (w0 >= sp.hi) break;
        prev = w0;
    }
}

/* Reducescatter with two blocks per channel (zn_dev_coll_blocks): the even block pushes every
 * window to the peers, the odd one reduces the windows that arrive, so that the link carries
 * window w + 1 while window w is reduced. (One block doing both in turn left NVLink idle while
 * it reduced: on 2 H200 a 1 GB reducescatter took 2064 us, NCCL 1941, an allgather moving the
 * same bytes 1554.) A channel's range is cut into at least RS_WINDOWS windows, so that even a
 * range of one slot is pipelined (4 against 1 and 8 on 2 H100: 64 MB 151 us against 173 and
 * 146, 16 MB 52 against 57 and 63). */
constexpr uint64_t RS_WINDOWS = 4;

template <typename T>
__device__ void reducescatter_split(Chan &s, const zn_dev_coll_args &a, int reducer)
{
    int me = s.me, n = s.n;
    const T *in = (const T *)a.sendbuf;
    T sc = scalar_of<T>(a);
    Span sp = span<T>(a.count, a.nch, s.ch, a.comm.slot_bytes, 1);
    uint64_t w = ((sp.hi - sp.lo + RS_WINDOWS - 1) / RS_WINDOWS + 15) / 16 * 16;
    const uint64_t wmin = 16384 / sizeof(T);
    if (w < wmin) w = wmin;
    if (w < sp.w) sp.w = w;
    if (!reducer) {
        for (uint64_t w0 = sp.lo; w0 < sp.hi; w0 += sp.w)
            for (int k = 1; k < n; k++) {
                int d = (me + k) % n;
                if (!push<T>(s, d, in + d * a.count + w0, sp.len(w0), a.premul, sc)) return;
            }
        return;
    }
    T *out = (T *)a.recvbuf;
    __shared__ const T *srcs[ZN_DEV_MAX_RANKS];
    for (uint64_t w0 = sp.lo; w0 < sp.hi; w0 += sp.w) {
        if (!gather<T>(s, in + me * a.count + w0, srcs)) return;
        reduce_n<T>(out + w0, nullptr, 0, srcs, n, sp.len(w0), a.op, me, a.premul, sc, a.post_div);
        release_peers(s);
    }
}

template <typename T> __device__ void reduce_root(Chan &s, const zn_dev_coll_args &a)
{
    int me = s.me, n = s.n, root = a.root;
    const T *in = (const T *)a.sendbuf;
    T *out = (T *)a.recvbuf;
    T sc = scalar_of<T>(a);
    const Span sp = span<T>(a.count, a.nch, s.ch, a.comm.slot_bytes, 1);
    __shared__ const T *srcs[ZN_DEV_MAX_RANKS];
    for (uint64_t w0 = sp.lo; w0 < sp.hi; w0 += sp.w) {
        uint64_t wl = sp.len(w0);
        if (me != root) {
            if (!push<T>(s, root, in + w0, wl, a.premul, sc)) return;
            continue;
        }
        if (!gather<T>(s, in + w0, srcs)) return;
        reduce_n<T>(out + w0, nullptr, 0, srcs, n, wl, a.op, me, a.premul, sc, a.post_div);
        release_peers(s);
    }
}

/* The byte-moving collectives (launched with T = uint8_t, count in bytes per block), a step
 * per window of piece_slots() slots: every piece this rank sends for the window, then every
 * piece it receives. A window's pieces are read before any is written, so in-place alltoall
 * and gather/scatter are safe. */
__device__ void move(Chan &s, const zn_dev_coll_args &a)
{
    int me = s.me, n = s.n, root = a.root;
    const uint8_t *in = (const uint8_t *)a.sendbuf;
    uint8_t *out = (uint8_t *)a.recvbuf;
    uint64_t cnt = a.count;
    const Span sp = span<uint8_t>(cnt, a.nch, s.ch, a.comm.slot_bytes, piece_slots(a.comm));
    for (uint64_t w0 = sp.lo; w0 < sp.hi; w0 += sp.w) {
        uint64_t wl = sp.len(w0);
        switch (a.coll) {
        case ZN_COLL_BROADCAST:
            if (me == root) {
                for (int k = 1; k < n; k++)
                    if (!piece_push<uint8_t>(s, (me + k) % n, in + w0, wl)) return;
                if (out != in) copy_bytes(out + w0, in + w0, wl);
            } else if (!piece_pull<uint8_t>(s, root, out + w0, wl)) {
                return;
            }
            break;
        case ZN_COLL_SCATTER:
            if (me == root) {
                for (int k = 1; k < n; k++) {
                    int d = (me + k) % n;
                    if (!piece_push<uint8_t>(s, d, in + d * cnt + w0, wl)) return;
                }
                if (out != in + me * cnt) copy_bytes(out + w0, in + me * cnt + w0, wl);
            } else if (!piece_pull<uint8_t>(s, root, out + w0, wl)) {
                return;
            }
            break;
        case ZN_COLL_GATHER:
            if (me != root) {
                if (!piece_push<uint8_t>(s, root, in + w0, wl)) return;
            } else {
                if (in != out + me * cnt) copy_bytes(out + me * cnt + w0, in + w0, wl);
                for (int k = 1; k < n; k++) {
                    int j = (me + k) % n;
                    if (!piece_pull<uint8_t>(s, j, out + j * cnt + w0, wl)) return;
                }
            }
            break;
        default: { /* allgather, alltoall */
            int a2a = a.coll == ZN_COLL_ALLTOALL;
            for (int k = 1; k < n; k++) {
                int d = (me + k) % n;
                if (!piece_push<uint8_t>(s, d, in + (a2a ? d * cnt : 0) + w0, wl)) return;
            }
            const uint8_t *own = in + (a2a ? me * cnt : 0) + w0;
            if (own != out + me * cnt + w0) copy_bytes(out + me * cnt + w0, own, wl);
            for (int k = 1; k < n; k++) {
                int j = (me + n - k) % n;
                if (!piece_pull<uint8_t>(s, j, out + j * cnt + w0, wl)) return;
            }
            break;
        }
        }
    }
}

template <typename T>
__global__ void __launch_bounds__(ZN_DEV_THREADS)
    coll_kernel(const __grid_constant__ zn_dev_coll_args a)
{
    __shared__ Chan s;
    if (a.algo == ZN_DEV_SPLIT) { /* two blocks per channel (zn_dev_coll_blocks) */
        const int reducer = blockIdx.x & 1;
        chan_open(s, &a.comm, blockIdx.x >> 1);
        reducescatter_split<T>(s, a, reducer);
        chan_close(s, reducer ? CHAN_RECVD : CHAN_SENT);
        return;
    }
    chan_open(s, &a.comm);
    if (a.algo == ZN_DEV_ZEROCOPY) {
        if (a.coll == ZN_COLL_ALLREDUCE)
            allreduce_zc<T>(s, a);
        else
            coll_zc<T>(s, a);
        chan_close(s);
        return;
    }
    if (a.algo == ZN_DEV_RING_LL) {
        allreduce_ring_ll<T>(s, a);
        chan_close(s);
        return;
    }
    if (a.algo == ZN_DEV_ALGO_RING) {
        switch (a.coll) {
        case ZN_COLL_ALLREDUCE: allreduce_ring<T>(s, a); break;
        case ZN_COLL_REDUCESCATTER: reducescatter_ring<T>(s, a); break;
        case ZN_COLL_REDUCE: reduce_ring<T>(s, a); break;
        default: move_ring(s, a); break;
        }
        chan_close(s);
        return;
    }
    if (a.algo == ZN_DEV_ONESHOT_LL && a.coll != ZN_COLL_ALLREDUCE) {
        coll_ll<T>(s, a);
        chan_close(s);
        return;
    }
    switch (a.coll) {
    case ZN_COLL_ALLREDUCE:
        if (a.algo == ZN_DEV_TWOSHOT)
            allreduce_twoshot<T>(s, a);
        else if (a.algo == ZN_DEV_ONESHOT_LL)
            allreduce_ll<T>(s, a);
        else
            allreduce_oneshot<T>(s, a);
        break;
    case ZN_COLL_REDUCESCATTER: reducescatter<T>(s, a); break;
    case ZN_COLL_REDUCE: reduce_root<T>(s, a); break;
    default: move(s, a); break;
    }
    /* After a failed wait the counters are out of step with the peers: the communicator is
     * broken, and the error word says so; writing them back changes nothing. */
    chan_close(s);
}

} // namespace zn

using namespace zn;

extern "C" int zn_dev_launch_coll(const struct zn_dev_coll_args *a, void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    dim3 grid(zn_dev_coll_blocks(a)), block(ZN_DEV_THREADS);
    switch (a->dtype) {
    case 0: coll_kernel<int8_t><<<grid, block, 0, st>>>(*a); break;
    case 1: coll_kernel<uint8_t><<<grid, block, 0, st>>>(*a); break;
    case 2: coll_kernel<int32_t><<<grid, block, 0, st>>>(*a); break;
    case 3: coll_kernel<uint32_t><<<grid, block, 0, st>>>(*a); break;
    case 4: coll_kernel<int64_t><<<grid, block, 0, st>>>(*a); break;
    case 5: coll_kernel<uint64_t><<<grid, block, 0, st>>>(*a); break;
    case 6: coll_kernel<half_t><<<grid, block, 0, st>>>(*a); break;
    case 7: coll_kernel<float><<<grid, block, 0, st>>>(*a); break;
    case 8: coll_kernel<double><<<grid, block, 0, st>>>(*a); break;
    case 9: coll_kernel<bf16_t><<<grid, block, 0, st>>>(*a); break;
    case 10: coll_kernel<e4m3_t><<<grid, block, 0, st>>>(*a); break;
    case 11: coll_kernel<e5m2_t><<<grid, block, 0, st>>>(*a); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

extern "C" const char *zn_dev_error_string(int err)
{
    return cudaGetErrorString((cudaError_t)err);
}
