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
 *   reducescatter        push block j to rank j; reduce n contributions
 *   allgather, alltoall  push (block j) to rank j; copy out what arrives
 *   broadcast, scatter   the root pushes; the others copy out
 *   reduce, gather       everyone pushes to the root; the root reduces / copies out
 *
 * Small calls skip the FIFOs: LL packets (8 data bytes and two flags in one 16-byte store)
 * written straight into the peers' LL buffers, no fences (allreduce_ll, coll_ll).
 *
 * Ring kernels (ZN_DEV_ALGO_RING) push only to the next rank on the ring and consume only from
 * the previous one, so they run where only ring neighbours are mapped:
 *
 *   allreduce            per window of n pieces: n-1 reduce-scatter steps (take the partial
 *                        piece from prev, add the own input, pass it on), then n-1 allgather
 *                        steps (keep the finished piece, pass it on unless next finished it)
 *   reducescatter        the same reduce-scatter steps over the n blocks
 *   allgather            pass every block around the ring, keeping each
 *   broadcast, reduce    a chain from the root / ending at the root
 *
 * Collectives on registered buffers (ZN_DEV_ZEROCOPY) read and write the peers' user buffers
 * directly: no FIFO, no copies (allreduce_zc, coll_zc).
 *
 * Each output element is computed on exactly one rank (two-shot, reducescatter, reduce) or on
 * every rank from the same operands in rank order (one-shot), so all ranks get the same bits.
 */
#include "dev_abi.h"
#include "elem.cuh"
#include "fifo.cuh"

#include <cuda_runtime.h>

namespace zn
{

/* Piece j of a window of w elements split n ways, in multiples of 16 elements (vector
 * alignment; a window holds at most n slots of a multiple of 16 elements, so a piece still fits
 * one slot). */
__device__ void piece(uint64_t w, int n, int j, uint64_t *start, uint64_t *len)
{
    uint64_t pl = (w + n - 1) / n;
    pl = (pl + 15) / 16 * 16;
    uint64_t s = pl * j;
    *start = s < w ? s : w;
    *len = s < w ? (w - s < pl ? w - s : pl) : 0;
}

/* One 16-byte vector of a reduction source: this rank's own input through the caches, an arena
 * slot (written by a peer) through L2 only. */
__device__ __forceinline__ uint4 ld_src(const void *p, uint64_t v, bool own)
{
    return own ? ((const uint4 *)p)[v] : __ldcg((const uint4 *)p + v);
}

/* Block-wide: out[i] = srcs[0][i] op srcs[1][i] ... in order, and the same result also stored
 * to extra[0..nextra) (peers' FIFO slots: the two-shot allgather rides on the reduction);
 * srcs[self] is this rank's own input, multiplied by scalar first for PreMulSum; post_div
 * divides integer sums (avg). 16-byte vectors where every pointer allows, U of them per thread
 * with every load issued before the first reduction, one element at a time for the rest. One
 * instance per (type, op) so the op folds. */
template <typename T, int OP>
__device__ __noinline__ void reduce_n_op(T *out, T *const *extra, int nextra, const T *const *srcs,
                                         int n, uint64_t cnt, int self, int premul, T scalar,
                                         int post_div)
{
    constexpr int V = 16 / sizeof(T), U = 2;
    union Vec {
        uint4 u;
        T t[V];
    };
    bool aligned = ((uintptr_t)out & 15) == 0;
    for (int k = 0; k < nextra; k++) aligned = aligned && ((uintptr_t)extra[k] & 15) == 0;
    for (int k = 0; k < n; k++) aligned = aligned && ((uintptr_t)srcs[k] & 15) == 0;
    uint64_t nv = aligned ? cnt / V : 0;
    for (uint64_t v0 = threadIdx.x; v0 < nv; v0 += (uint64_t)U * blockDim.x) {
        Vec x[ZN_DEV_MAX_RANKS][U];
#pragma unroll
        for (int k = 0; k < ZN_DEV_MAX_RANKS; k++)
#pragma unroll
            for (int u = 0; u < U; u++) {
                uint64_t v = v0 + (uint64_t)u * blockDim.x;
                if (k < n && v < nv) x[k][u].u = ld_src(srcs[k], v, k == self);
            }
#pragma unroll
        for (int u = 0; u < U; u++) {
            uint64_t v = v0 + (uint64_t)u * blockDim.x;
            if (v >= nv) break;
            if (premul)
                for (int e = 0; e < V; e++) x[self][u].t[e] = Ops<T>::mul(x[self][u].t[e], scalar);
            Vec acc = x[0][u];
#pragma unroll
            for (int k = 1; k < ZN_DEV_MAX_RANKS; k++)
                if (k < n)
                    for (int e = 0; e < V; e++) acc.t[e] = Ops<T>::red(acc.t[e], x[k][u].t[e], OP);
            if (post_div)
                for (int e = 0; e < V; e++) acc.t[e] = Ops<T>::div_int(acc.t[e], post_div);
            ((uint4 *)out)[v] = acc.u;
            for (int k = 0; k < nextra; k++) ((uint4 *)extra[k])[v] = acc.u;
        }
    }
    for (uint64_t i = nv * V + threadIdx.x; i < cnt; i += blockDim.x) {
        T acc = self == 0 ? srcs[0][i] : ldcg(srcs[0] + i);
        if (self == 0 && premul) acc = Ops<T>::mul(acc, scalar);
        for (int k = 1; k < n; k++) {
            T v = self == k ? srcs[k][i] : ldcg(srcs[k] + i);
            if (self == k && premul) v = Ops<T>::mul(v, scalar);
            acc = Ops<T>::red(acc, v, OP);
        }
        if (post_div) acc = Ops<T>::div_int(acc, post_div);
        out[i] = acc;
        for (int k = 0; k < nextra; k++) extra[k][i] = acc;
    }
}

template <typename T>
__device__ void reduce_n(T *out, T *const *extra, int nextra, const T *const *srcs, int n,
                         uint64_t cnt, int op, int self, int premul, T scalar, int post_div)
{
#define ZN_REDUCE_N(OP) \
    reduce_n_op<T, OP>(out, extra, nextra, srcs, n, cnt, self, premul, scalar, post_div)
    switch (op) {
    case RED_SUM: ZN_REDUCE_N(RED_SUM); break;
    case RED_PROD: ZN_REDUCE_N(RED_PROD); break;
    case RED_MAX: ZN_REDUCE_N(RED_MAX); break;
    default: ZN_REDUCE_N(RED_MIN); break;
    }
#undef ZN_REDUCE_N
}

/* Block-wide: srcs[j] = this rank's own operand (own) for j == me, else the next FIFO slot
 * from rank j. Returns false if a wait failed. */
template <typename T> __device__ bool gather(Chan &s, const T *own, const T **srcs)
{
    for (int j = 0; j < s.n; j++) {
        const T *p = j == s.me ? own : consume<T>(s, j);
        if (!p) return false;
        if (threadIdx.x == 0) srcs[j] = p;
    }
    __syncthreads();
    return true;
}

/* Block-wide: dsts[k - 1] = the slot the next push to rank me + k fills (k = 1..n-1), once
 * each peer has drained it. Returns false if a wait failed. */
template <typename T> __device__ bool reserve_peers(Chan &s, T **dsts)
{
    for (int k = 1; k < s.n; k++) {
        T *d = reserve<T>(s, (s.me + k) % s.n);
        if (!d) return false;
        if (threadIdx.x == 0) dsts[k - 1] = d;
    }
    __syncthreads();
    return true;
}

/* Block-wide: every slot gather() handed out is free again. */
__device__ void release_peers(Chan &s)
{
    for (int j = 0; j < s.n; j++)
        if (j != s.me) release(s, j);
}

struct Ctx {
    const zn_dev_coll_args *a;
    Chan *s;
    int me, n;
};

template <typename T> __device__ T scalar_of(const zn_dev_coll_args &a)
{
    T v;
    if (a.scalar_dev)
        memcpy(&v, a.scalar_dev, sizeof(T));
    else
        memcpy(&v, &a.scalar, sizeof(T));
    return v;
}

template <typename T> __device__ void allreduce_oneshot(Chan &s, const zn_dev_coll_args &a)
{
    int me = s.me, n = s.n;
    const T *in = (const T *)a.sendbuf;
    T *out = (T *)a.recvbuf;
    T sc = scalar_of<T>(a);
    uint64_t W = a.comm.slot_bytes / sizeof(T);
    Range r = channel_range(a.count, a.nch, s.ch);
    __shared__ const T *srcs[ZN_DEV_MAX_RANKS];
    for (uint64_t w0 = r.lo; w0 < r.hi; w0 += W) {
        uint64_t wl = r.hi - w0 < W ? r.hi - w0 : W;
        for (int k = 1; k < n; k++)
            if (!push<T>(s, (me + k) % n, in + w0, wl, a.premul, sc)) return;
        if (!gather<T>(s, in + w0, srcs)) return;
        reduce_n<T>(out + w0, nullptr, 0, srcs, n, wl, a.op, me, a.premul, sc, a.post_div);
        release_peers(s);
    }
}

__device__ __forceinline__ uint4 ld_v4(const uint4 *p)
{
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

__device__ __forceinline__ void st_v4(uint4 *p, uint4 v)
{
    asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w)
                 : "memory");
}

/* 8 bytes of buf at packet p (of nbytes), zero-padded past the end; any alignment. */
__device__ __forceinline__ uint64_t load8(const uint8_t *buf, uint64_t p, uint64_t nbytes)
{
    uint64_t off = p * 8, v = 0;
    if (off + 8 <= nbytes && ((uintptr_t)(buf + off) & 7) == 0)
        return *(const uint64_t *)(buf + off);
    for (int b = 0; b < 8 && off + b < nbytes; b++) v |= (uint64_t)buf[off + b] << (8 * b);
    return v;
}

__device__ __forceinline__ void store8(uint8_t *buf, uint64_t p, uint64_t nbytes, uint64_t v)
{
    uint64_t off = p * 8;
    if (off + 8 <= nbytes && ((uintptr_t)(buf + off) & 7) == 0) {
        *(uint64_t *)(buf + off) = v;
        return;
    }
    for (int b = 0; b < 8 && off + b < nbytes; b++) buf[off + b] = (uint8_t)(v >> (8 * b));
}

/* Wait for the LL packet at line to carry flag e in both flag words (x and z are the data).
 * Polls 16 times, then sleeps 128 ns between polls: with 128 channels x 512 threads polling
 * without pause, the loads crowd out the peer's incoming packet stores (measured on 2 H200:
 * 512 KB calls stuck at ~1 ms instead of 8.4 us, in about half the runs). Returns false on
 * abort or deadline, after recording the reason. */
__device__ __forceinline__ bool ll_wait(const zn_dev_comm &c, const uint4 *line, uint32_t e,
                                        uint4 *out)
{
    uint4 v = ld_v4(line);
    uint64_t t0 = 0;
    for (unsigned i = 1; v.y != e || v.w != e; i++) {
        if (i > 16) __nanosleep(128);
        if ((i & 1023) == 0) {
            if (!t0) t0 = globaltimer();
            int code = *c.abort_flag                       ? ZN_DEV_ABORTED
                       : globaltimer() - t0 > c.timeout_ns ? ZN_DEV_TIMEOUT
                                                           : 0;
            if (code) {
                if (*c.error == 0) *(volatile uint32_t *)c.error = (uint32_t)code;
                __threadfence_system();
                return false;
            }
        }
        v = ld_v4(line);
    }
    *out = v;
    return true;
}

/* The 8 data bytes of an LL packet, as bits or as elements. */
template <typename T> union Pack8 {
    uint64_t u;
    T t[8 / sizeof(T)];
};

/* An LL call on channel s.ch: its flag is the channel's LL call count plus one (row 0 of this
 * rank's LLEPOCH array), which every rank advances in the same order, so the flags agree. */
__device__ __forceinline__ uint32_t ll_enter(Chan &s, const zn_dev_comm &c)
{
    __shared__ uint32_t s_epoch;
    if (threadIdx.x == 0)
        s_epoch =
            (uint32_t)(*((volatile uint64_t *)(c.arena[s.me] + ZN_DEV_LLEPOCH_OFF) + s.ch) + 1);
    __syncthreads();
    return s_epoch;
}

__device__ __forceinline__ void ll_leave(Chan &s, const zn_dev_comm &c, uint32_t e)
{
    __syncthreads();
    if (threadIdx.x == 0) *((volatile uint64_t *)(c.arena[s.me] + ZN_DEV_LLEPOCH_OFF) + s.ch) = e;
}

/* Packet p of an LL reduction: this rank's own input (scaled for PreMulSum) and every peer's
 * packet from its LL buffer, reduced in rank order and stored to out. False on abort or
 * deadline. */
template <typename T>
__device__ __forceinline__ bool ll_reduce_packet(Chan &s, const zn_dev_coll_args &a,
                                                 const uint8_t *own, uint8_t *out, uint64_t p,
                                                 uint64_t nbytes, uint32_t e, T sc)
{
    constexpr int L = 8 / sizeof(T);
    const zn_dev_comm &c = a.comm;
    Pack8<T> acc, x;
    for (int j = 0; j < s.n; j++) {
        if (j == s.me) {
            x.u = load8(own, p, nbytes);
            if (a.premul)
                for (int l = 0; l < L; l++) x.t[l] = Ops<T>::mul(x.t[l], sc);
        } else {
            const uint4 *line =
                (const uint4 *)(c.arena[s.me] + zn_dev_ll_buf(c.ll_off, j, s.ch, c.nch, e & 1)) + p;
            uint4 v;
            if (!ll_wait(c, line, e, &v)) return false;
            x.u = (uint64_t)v.x | ((uint64_t)v.z << 32);
        }
        if (j == 0)
            acc = x;
        else
            for (int l = 0; l < L; l++) acc.t[l] = Ops<T>::red(acc.t[l], x.t[l], a.op);
    }
    if (a.post_div)
        for (int l = 0; l < L; l++) acc.t[l] = Ops<T>::div_int(acc.t[l], a.post_div);
    store8(out, p, nbytes, acc.u);
    return true;
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
    const uint32_t e = ll_enter(s, c);
    const int buf = e & 1;
    Range r = channel_range(a.count, a.nch, s.ch);
    const uint8_t *in = (const uint8_t *)a.sendbuf + r.lo * sizeof(T);
    uint8_t *out = (uint8_t *)a.recvbuf + r.lo * sizeof(T);
    uint64_t nbytes = (r.hi - r.lo) * sizeof(T), np = (nbytes + 7) / 8;
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
    case ZN_DEV_ALLGATHER: return in;
    case ZN_DEV_BROADCAST: return from == a.root ? in : nullptr;
    case ZN_DEV_REDUCE:
    case ZN_DEV_GATHER: return to == a.root ? in : nullptr;
    case ZN_DEV_SCATTER: return from == a.root ? in + to * blk : nullptr;
    default: return in + to * blk; /* alltoall, reducescatter */
    }
}

/* Where a block from rank `from` lands in this rank's output (copying collectives). */
__device__ __forceinline__ uint8_t *ll_dest(const zn_dev_coll_args &a, int from, uint64_t blk)
{
    uint8_t *out = (uint8_t *)a.recvbuf;
    return a.coll == ZN_DEV_BROADCAST || a.coll == ZN_DEV_SCATTER ? out : out + from * blk;
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
    const uint32_t e = ll_enter(s, c);
    const int buf = e & 1;
    Range r = channel_range(a.count, a.nch, s.ch);
    const uint64_t blk = a.count * sizeof(T), lo = r.lo * sizeof(T);
    const uint64_t nbytes = (r.hi - r.lo) * sizeof(T), np = (nbytes + 7) / 8;
    const uint64_t npk = np ? np : 1; /* packets per pair, the flag-only one included */
    const bool reducing = a.coll == ZN_DEV_REDUCESCATTER || a.coll == ZN_DEV_REDUCE;
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
        uint8_t *out = a.coll == ZN_DEV_REDUCE && me != a.root ? nullptr : (uint8_t *)a.recvbuf;
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
    uint64_t W = a.comm.slot_bytes / sizeof(T) * n;
    Range r = channel_range(a.count, a.nch, s.ch);
    __shared__ const T *srcs[ZN_DEV_MAX_RANKS];
    __shared__ T *dsts[ZN_DEV_MAX_RANKS];
    for (uint64_t w0 = r.lo; w0 < r.hi; w0 += W) {
        uint64_t wl = r.hi - w0 < W ? r.hi - w0 : W, ps, pl, mps, mpl;
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
    uint64_t W = a.comm.slot_bytes / sizeof(T);
    Range r = channel_range(a.count, a.nch, s.ch);
    __shared__ const T *srcs[ZN_DEV_MAX_RANKS];
    for (uint64_t w0 = r.lo; w0 < r.hi; w0 += W) {
        uint64_t wl = r.hi - w0 < W ? r.hi - w0 : W;
        for (int k = 1; k < n; k++) {
            int d = (me + k) % n;
            if (!push<T>(s, d, in + d * a.count + w0, wl, a.premul, sc)) return;
        }
        if (!gather<T>(s, in + me * a.count + w0, srcs)) return;
        reduce_n<T>(out + w0, nullptr, 0, srcs, n, wl, a.op, me, a.premul, sc, a.post_div);
        release_peers(s);
    }
}

template <typename T> __device__ void reduce_root(Chan &s, const zn_dev_coll_args &a)
{
    int me = s.me, n = s.n, root = a.root;
    const T *in = (const T *)a.sendbuf;
    T *out = (T *)a.recvbuf;
    T sc = scalar_of<T>(a);
    uint64_t W = a.comm.slot_bytes / sizeof(T);
    Range r = channel_range(a.count, a.nch, s.ch);
    __shared__ const T *srcs[ZN_DEV_MAX_RANKS];
    for (uint64_t w0 = r.lo; w0 < r.hi; w0 += W) {
        uint64_t wl = r.hi - w0 < W ? r.hi - w0 : W;
        if (me != root) {
            if (!push<T>(s, root, in + w0, wl, a.premul, sc)) return;
            continue;
        }
        if (!gather<T>(s, in + w0, srcs)) return;
        reduce_n<T>(out + w0, nullptr, 0, srcs, n, wl, a.op, me, a.premul, sc, a.post_div);
        release_peers(s);
    }
}

/* The byte-moving collectives (launched with T = uint8_t, count in bytes per block). */
__device__ void move(Chan &s, const zn_dev_coll_args &a)
{
    int me = s.me, n = s.n, root = a.root;
    const uint8_t *in = (const uint8_t *)a.sendbuf;
    uint8_t *out = (uint8_t *)a.recvbuf;
    uint64_t W = a.comm.slot_bytes, cnt = a.count;
    Range r = channel_range(cnt, a.nch, s.ch);
    for (uint64_t w0 = r.lo; w0 < r.hi; w0 += W) {
        uint64_t wl = r.hi - w0 < W ? r.hi - w0 : W;
        switch (a.coll) {
        case ZN_DEV_BROADCAST:
            if (me == root) {
                for (int k = 1; k < n; k++)
                    if (!push<uint8_t>(s, (me + k) % n, in + w0, wl)) return;
                if (out != in) copy_bytes(out + w0, in + w0, wl);
            } else {
                const uint8_t *p = consume<uint8_t>(s, root);
                if (!p) return;
                copy_bytes(out + w0, p, wl);
                release(s, root);
            }
            break;
        case ZN_DEV_SCATTER:
            if (me == root) {
                for (int k = 1; k < n; k++) {
                    int d = (me + k) % n;
                    if (!push<uint8_t>(s, d, in + d * cnt + w0, wl)) return;
                }
                if (out != in + me * cnt) copy_bytes(out + w0, in + me * cnt + w0, wl);
            } else {
                const uint8_t *p = consume<uint8_t>(s, root);
                if (!p) return;
                copy_bytes(out + w0, p, wl);
                release(s, root);
            }
            break;
        case ZN_DEV_GATHER:
            if (me != root) {
                if (!push<uint8_t>(s, root, in + w0, wl)) return;
            } else {
                if (in != out + me * cnt) copy_bytes(out + me * cnt + w0, in + w0, wl);
                for (int k = 1; k < n; k++) {
                    int j = (me + k) % n;
                    const uint8_t *p = consume<uint8_t>(s, j);
                    if (!p) return;
                    copy_bytes(out + j * cnt + w0, p, wl);
                    release(s, j);
                }
            }
            break;
        default: { /* allgather, alltoall */
            int a2a = a.coll == ZN_DEV_ALLTOALL;
            for (int k = 1; k < n; k++) {
                int d = (me + k) % n;
                if (!push<uint8_t>(s, d, in + (a2a ? d * cnt : 0) + w0, wl)) return;
            }
            const uint8_t *own = in + (a2a ? me * cnt : 0) + w0;
            if (own != out + me * cnt + w0) copy_bytes(out + me * cnt + w0, own, wl);
            for (int k = 1; k < n; k++) {
                int j = (me + n - k) % n;
                const uint8_t *p = consume<uint8_t>(s, j);
                if (!p) return;
                copy_bytes(out + j * cnt + w0, p, wl);
                release(s, j);
            }
            break;
        }
        }
    }
}

/* ---- Ring kernels: talk to the ring neighbours only ---- */

struct Ring {
    int pos, next, prev;
};

__device__ Ring ring_of(const zn_dev_comm &c)
{
    int n = c.nranks, p = c.ring_pos;
    return { p, c.ring[(p + 1) % n], c.ring[(p + n - 1) % n] };
}

/* Block-wide, one reduce step of a ring: the next slot from prev reduced with this rank's own
 * operand `own` (cnt elements; PreMulSum scales own). The result goes to `out` (the final
 * output; NULL on intermediate steps) and, when `forward`, into a slot to next (committed), in
 * the same pass. Releases prev's slot. post_div only on the last step. Returns false if a wait
 * failed. */
template <typename T>
__device__ bool ring_reduce_step(Chan &s, const zn_dev_coll_args &a, const Ring &g, const T *own,
                                 T *out, bool forward, uint64_t cnt, T sc, int post_div)
{
    T *fwd = nullptr;
    if (forward && !(fwd = reserve<T>(s, g.next))) return false;
    const T *p = consume<T>(s, g.prev);
    if (!p) return false;
    const T *srcs[ZN_DEV_MAX_RANKS] = { p, own };
    T *extra[1] = { fwd };
    reduce_n<T>(out ? out : fwd, extra, out && fwd ? 1 : 0, srcs, 2, cnt, a.op, 1, a.premul, sc,
                post_div);
    release(s, g.prev);
    if (fwd) commit(s, g.next);
    return true;
}

/* Per window of n pieces (piece j indexed by ring position): reduce-scatter steps st = 0..n-1,
 * position p passing on piece p-st-1 (its own input at st = 0, the partial sum from prev plus
 * its own input after) and finishing piece p at st = n-1; the finished piece goes to the output
 * and to next, and allgather steps pass piece p-st on to the output and to next until it
 * reaches the position before its owner. */
template <typename T> __device__ void allreduce_ring(Chan &s, const zn_dev_coll_args &a)
{
    int n = s.n;
    Ring g = ring_of(a.comm);
    const T *in = (const T *)a.sendbuf;
    T *out = (T *)a.recvbuf;
    T sc = scalar_of<T>(a);
    uint64_t W = a.comm.slot_bytes / sizeof(T) * n;
    Range r = channel_range(a.count, a.nch, s.ch);
    for (uint64_t w0 = r.lo; w0 < r.hi; w0 += W) {
        uint64_t wl = r.hi - w0 < W ? r.hi - w0 : W, ps, pl;
        piece(wl, n, (g.pos + n - 1) % n, &ps, &pl);
        if (!push<T>(s, g.next, in + w0 + ps, pl, a.premul, sc)) return;
        for (int st = 1; st < n; st++) {
            int last = st == n - 1;
            piece(wl, n, (g.pos + 2 * n - 1 - st) % n, &ps, &pl);
            /* The finished piece goes to the output and, in the same pass, to next. */
            if (!ring_reduce_step<T>(s, a, g, in + w0 + ps, last ? out + w0 + ps : nullptr, true,
                                     pl, sc, last ? a.post_div : 0))
                return;
        }
        for (int st = 1; st < n; st++) {
            piece(wl, n, (g.pos + n - st) % n, &ps, &pl);
            T *fwd = nullptr;
            if (st < n - 1 && !(fwd = reserve<T>(s, g.next))) return;
            const T *p = consume<T>(s, g.prev);
            if (!p) return;
            copy_bytes2((uint8_t *)(out + w0 + ps), (uint8_t *)fwd, (const uint8_t *)p,
                        pl * sizeof(T));
            release(s, g.prev);
            if (fwd) commit(s, g.next);
        }
    }
}

/* Small allreduce on a ring, LL protocol: every rank's vector travels n-1 hops along the ring
 * as flagged packets (hop st lands in region st of the next rank's LL buffer from this rank),
 * each rank keeps every vector that passes and reduces all n in rank order, so all ranks get
 * the same bits. One hop per packet per rank, no fences. The two LL buffers alternate between
 * calls as in allreduce_ll; since a rank hears nothing back from next along the ring, next
 * acknowledges each call it finished reading in this rank's LLEPOCH row 1 (ZN_DEV_RING_ACK),
 * and a rank waits for call e-2's acknowledgement before writing call e into the same buffer.
 * The host sizes the channels so that n-1 regions fit in one LL buffer (ring_ll_fits). */
template <typename T> __device__ void allreduce_ring_ll(Chan &s, const zn_dev_coll_args &a)
{
    constexpr int L = 8 / sizeof(T);
    const zn_dev_comm &c = a.comm;
    int me = s.me, n = s.n;
    Ring g = ring_of(c);
    __shared__ uint32_t s_epoch;
    volatile uint64_t *ep = (volatile uint64_t *)(c.arena[me] + ZN_DEV_LLEPOCH_OFF) + s.ch;
    if (threadIdx.x == 0) {
        uint32_t e = (uint32_t)(*ep + 1);
        volatile uint64_t *ack = (volatile uint64_t *)(c.arena[me] + ZN_DEV_RING_ACK_OFF) + s.ch;
        s.fail = e > 2 && !wait_geq(s, ack, e - 2);
        s_epoch = e;
    }
    __syncthreads();
    if (s.fail) return;
    const uint32_t e = s_epoch;
    const int buf = e & 1;
    Range r = channel_range(a.count, a.nch, s.ch);
    const uint8_t *in = (const uint8_t *)a.sendbuf + r.lo * sizeof(T);
    uint8_t *out = (uint8_t *)a.recvbuf + r.lo * sizeof(T);
    uint64_t nbytes = (r.hi - r.lo) * sizeof(T), np = (nbytes + 7) / 8;
    uint4 *to = (uint4 *)(c.arena[g.next] + zn_dev_ll_buf(c.ll_off, me, s.ch, c.nch, buf));
    const uint4 *from =
        (const uint4 *)(c.arena[me] + zn_dev_ll_buf(c.ll_off, g.prev, s.ch, c.nch, buf));
    T sc = scalar_of<T>(a);
    int failed = 0;
    for (uint64_t p = threadIdx.x; p < np && !failed; p += blockDim.x) {
        Pack8<T> v[ZN_DEV_MAX_RANKS];
        v[me].u = load8(in, p, nbytes);
        if (a.premul)
            for (int l = 0; l < L; l++) v[me].t[l] = Ops<T>::mul(v[me].t[l], sc);
        st_v4(to + p, make_uint4((uint32_t)v[me].u, e, (uint32_t)(v[me].u >> 32), e));
        /* Hop st brings the vector of the rank st positions back on the ring. */
        for (int st = 1; st < n; st++) {
            uint4 x;
            if (!ll_wait(c, from + (st - 1) * np + p, e, &x)) {
                failed = 1;
                break;
            }
            if (st < n - 1) st_v4(to + st * np + p, x);
            v[c.ring[(g.pos + n - st) % n]].u = (uint64_t)x.x | ((uint64_t)x.z << 32);
        }
        if (failed) break;
        Pack8<T> acc = v[0];
        for (int j = 1; j < n; j++)
            for (int l = 0; l < L; l++) acc.t[l] = Ops<T>::red(acc.t[l], v[j].t[l], a.op);
        if (a.post_div)
            for (int l = 0; l < L; l++) acc.t[l] = Ops<T>::div_int(acc.t[l], a.post_div);
        store8(out, p, nbytes, acc.u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        *ep = e;
        /* Every thread's reads of this call's buffer are done: prev may reuse it at e+2. */
        __threadfence_system();
        *((volatile uint64_t *)(c.arena[g.prev] + ZN_DEV_RING_ACK_OFF) + s.ch) = e;
    }
}

/* Reduce-scatter steps over the n blocks (block of the rank at position q: in + ring[q] *
 * count); position p finishes its own block at the last step. */
template <typename T> __device__ void reducescatter_ring(Chan &s, const zn_dev_coll_args &a)
{
    int n = s.n;
    const zn_dev_comm &c = a.comm;
    Ring g = ring_of(c);
    const T *in = (const T *)a.sendbuf;
    T *out = (T *)a.recvbuf;
    T sc = scalar_of<T>(a);
    uint64_t W = c.slot_bytes / sizeof(T);
    Range r = channel_range(a.count, a.nch, s.ch);
    for (uint64_t w0 = r.lo; w0 < r.hi; w0 += W) {
        uint64_t wl = r.hi - w0 < W ? r.hi - w0 : W;
        int b = c.ring[(g.pos + n - 1) % n];
        if (!push<T>(s, g.next, in + b * a.count + w0, wl, a.premul, sc)) return;
        for (int st = 1; st < n; st++) {
            int last = st == n - 1;
            b = c.ring[(g.pos + 2 * n - 1 - st) % n];
            if (!ring_reduce_step<T>(s, a, g, in + b * a.count + w0, last ? out + w0 : nullptr,
                                     !last, wl, sc, last ? a.post_div : 0))
                return;
        }
    }
}

/* A chain along the ring that ends at the root: the position after the root starts it with its
 * own input, each next one adds its own, the root stores the result. */
template <typename T> __device__ void reduce_ring(Chan &s, const zn_dev_coll_args &a)
{
    int n = s.n;
    const zn_dev_comm &c = a.comm;
    Ring g = ring_of(c);
    int me = s.me, root = a.root, rpos = 0;
    while (c.ring[rpos] != root) rpos++;
    int first = (rpos + 1) % n == g.pos;
    const T *in = (const T *)a.sendbuf;
    T *out = (T *)a.recvbuf;
    T sc = scalar_of<T>(a);
    uint64_t W = c.slot_bytes / sizeof(T);
    Range r = channel_range(a.count, a.nch, s.ch);
    for (uint64_t w0 = r.lo; w0 < r.hi; w0 += W) {
        uint64_t wl = r.hi - w0 < W ? r.hi - w0 : W;
        if (first) {
            if (!push<T>(s, g.next, in + w0, wl, a.premul, sc)) return;
            continue;
        }
        if (!ring_reduce_step<T>(s, a, g, in + w0, me == root ? out + w0 : nullptr, me != root, wl,
                                 sc, me == root ? a.post_div : 0))
            return;
    }
}

/* The byte-moving ring collectives (T = uint8_t, count in bytes per block). */
__device__ void move_ring(Chan &s, const zn_dev_coll_args &a)
{
    int n = s.n, me = s.me, root = a.root;
    const zn_dev_comm &c = a.comm;
    Ring g = ring_of(c);
    const uint8_t *in = (const uint8_t *)a.sendbuf;
    uint8_t *out = (uint8_t *)a.recvbuf;
    uint64_t W = c.slot_bytes, cnt = a.count;
    Range r = channel_range(cnt, a.nch, s.ch);
    for (uint64_t w0 = r.lo; w0 < r.hi; w0 += W) {
        uint64_t wl = r.hi - w0 < W ? r.hi - w0 : W;
        if (a.coll == ZN_DEV_BROADCAST) {
            /* A chain from the root: each keeps the window and passes it on, up to the
             * position before the root. */
            if (me == root) {
                if (!push<uint8_t>(s, g.next, in + w0, wl)) return;
                if (out != in) copy_bytes(out + w0, in + w0, wl);
                continue;
            }
            uint8_t *fwd = nullptr;
            if (g.next != root && !(fwd = reserve<uint8_t>(s, g.next))) return;
            const uint8_t *p = consume<uint8_t>(s, g.prev);
            if (!p) return;
            copy_bytes2(out + w0, fwd, p, wl);
            release(s, g.prev);
            if (fwd) commit(s, g.next);
            continue;
        }
        /* Allgather: own block to next, then n-1 steps receiving the block of position p-st
         * and passing it on unless next owns it. */
        if (!push<uint8_t>(s, g.next, in + w0, wl)) return;
        if (in + w0 != out + me * cnt + w0) copy_bytes(out + me * cnt + w0, in + w0, wl);
        for (int st = 1; st < n; st++) {
            int b = c.ring[(g.pos + n - st) % n];
            uint8_t *fwd = nullptr;
            if (st < n - 1 && !(fwd = reserve<uint8_t>(s, g.next))) return;
            const uint8_t *p = consume<uint8_t>(s, g.prev);
            if (!p) return;
            copy_bytes2(out + b * cnt + w0, fwd, p, wl);
            release(s, g.prev);
            if (fwd) commit(s, g.next);
        }
    }
}

/* ---- Zero-copy allreduce on registered buffers ---- */

/* Every rank's send and receive buffers are mapped by every peer (ncclCommRegister). Per
 * channel: each rank tells every peer where that peer sees its buffers and that it entered the
 * call, and waits for the same from all; then it reduces its piece of the channel's range
 * straight from every rank's send buffer and stores the result into every rank's receive
 * buffer; then it tells everyone it is done and waits for all, so that no rank leaves (and
 * reuses its buffers) while a peer still reads or writes them. Each piece is reduced once, in
 * rank order, so all ranks get the same bits; in place works because only the piece's owner
 * touches a piece, loading each element before storing it. */
/* Zero-copy calls (thread 0): tell every peer where it sees this rank's send and receive
 * buffers, raise this rank's phase to 2k-1 and wait for everyone's, so that every rank has
 * entered call k (its buffers are ready). sv/rv get every rank's buffers as this GPU sees them.
 * Returns k; s.fail on abort or deadline. */
__device__ uint64_t zc_enter(Chan &s, const zn_dev_coll_args &a, const uint8_t **sv, uint8_t **rv)
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
__device__ void zc_leave(Chan &s, const zn_dev_comm &c, uint64_t call)
{
    int me = s.me, n = s.n, ch = s.ch;
    __threadfence_system(); /* every store of the block, before the flags */
    for (int k = 1; k < n; k++) *ctrl(c.arena[(me + k) % n], ZN_DEV_ZCSEQ_OFF, me, ch) = 2 * call;
    for (int k = 1; k < n; k++)
        if (!wait_geq(s, ctrl(c.arena[me], ZN_DEV_ZCSEQ_OFF, (me + k) % n, ch), 2 * call)) break;
    *ctrl(c.arena[me], ZN_DEV_ZCSEQ_OFF, me, ch) = call;
}

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
            srcs[q] = (const T *)(sv[q] + (coll == ZN_DEV_REDUCESCATTER ? me * blk : 0) + lo);
    }
    __syncthreads();
    if (s.fail) return;
    bool rooted = coll == ZN_DEV_BROADCAST || coll == ZN_DEV_SCATTER || coll == ZN_DEV_REDUCE ||
                  coll == ZN_DEV_GATHER;
    if (rooted && me != root) {
        /* nothing to move: the root reads or writes this rank's buffers */
    } else if (coll == ZN_DEV_REDUCESCATTER || coll == ZN_DEV_REDUCE) {
        reduce_n<T>((T *)(rv[me] + lo), nullptr, 0, srcs, n, len, a.op, me, 0, scalar_of<T>(a),
                    a.post_div);
    } else if (coll == ZN_DEV_GATHER) {
        for (int q = 0; q < n; q++)
            if (sv[q] + lo != rv[me] + q * blk + lo)
                copy_bytes(rv[me] + q * blk + lo, sv[q] + lo, len);
    } else {
        bool by_src = coll == ZN_DEV_ALLTOALL || coll == ZN_DEV_SCATTER;  /* block q to rank q */
        bool at_me = coll == ZN_DEV_ALLGATHER || coll == ZN_DEV_ALLTOALL; /* lands at block me */
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

template <typename T>
__global__ void __launch_bounds__(ZN_DEV_THREADS)
    coll_kernel(const __grid_constant__ zn_dev_coll_args a)
{
    __shared__ Chan s;
    chan_open(s, &a.comm);
    if (a.algo == ZN_DEV_ZEROCOPY) {
        if (a.coll == ZN_DEV_ALLREDUCE)
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
        case ZN_DEV_ALLREDUCE: allreduce_ring<T>(s, a); break;
        case ZN_DEV_REDUCESCATTER: reducescatter_ring<T>(s, a); break;
        case ZN_DEV_REDUCE: reduce_ring<T>(s, a); break;
        default: move_ring(s, a); break;
        }
        chan_close(s);
        return;
    }
    if (a.algo == ZN_DEV_ONESHOT_LL && a.coll != ZN_DEV_ALLREDUCE) {
        coll_ll<T>(s, a);
        chan_close(s);
        return;
    }
    switch (a.coll) {
    case ZN_DEV_ALLREDUCE:
        if (a.algo == ZN_DEV_TWOSHOT)
            allreduce_twoshot<T>(s, a);
        else if (a.algo == ZN_DEV_ONESHOT_LL)
            allreduce_ll<T>(s, a);
        else
            allreduce_oneshot<T>(s, a);
        break;
    case ZN_DEV_REDUCESCATTER: reducescatter<T>(s, a); break;
    case ZN_DEV_REDUCE: reduce_root<T>(s, a); break;
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
    dim3 grid(a->nch), block(ZN_DEV_THREADS);
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
