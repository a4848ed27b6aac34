/*
 * Pieces shared by the collective kernels (coll.cu, coll_ring.cuh, coll_zc.cuh): splitting a
 * window, the n-way reduction, FIFO helpers over all peers, and the LL protocol's packets
 * (16-byte stores of 8 data bytes and two flags), waits and per-channel call counts.
 */
#ifndef ZN_DEVICE_COLL_COMMON_CUH
#define ZN_DEVICE_COLL_COMMON_CUH

#include "abi/dev_abi.h"
#include "elem.cuh"
#include "fifo.cuh"

namespace zn
{

/* Piece j of a window of w elements split n ways, in multiples of 16 elements (vector
 * alignment; a window holds at most n slots of a multiple of 16 elements, so a piece still fits
 * one slot). */
static __device__ void piece(uint64_t w, int n, int j, uint64_t *start, uint64_t *len)
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
static __device__ void release_peers(Chan &s)
{
    for (int j = 0; j < s.n; j++)
        if (j != s.me) release(s, j);
}

template <typename T> __device__ T scalar_of(const zn_dev_coll_args &a)
{
    T v;
    if (a.scalar_dev)
        memcpy(&v, a.scalar_dev, sizeof(T));
    else
        memcpy(&v, &a.scalar, sizeof(T));
    return v;
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

/* An LL call's channel: its flag (ll_enter) and its byte range of a block, in 8-byte packets. */
struct LLSpan {
    uint32_t e;
    uint64_t lo, nbytes, np;
};

template <typename T> __device__ __forceinline__ LLSpan ll_span(Chan &s, const zn_dev_coll_args &a)
{
    Range r = channel_range(a.count, a.nch, s.ch);
    uint64_t nbytes = (r.hi - r.lo) * sizeof(T);
    return { ll_enter(s, a.comm), r.lo * sizeof(T), nbytes, (nbytes + 7) / 8 };
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

/* Pieces. A step of a FIFO pattern (the ring kernels, the direct byte-moving ones) moves a
 * piece of up to piece_slots() slots to a peer, one slot at a time, before it waits for what
 * comes back (NCCL's chunk steps): a rank fills several slots before it waits. A FIFO holds
 * nbuf = 2 x piece_slots() slots, the piece being drained and the next one, so a step's pushes
 * wait only for the peer to have taken the pieces of two steps before, and no chain of such
 * waits closes on itself. A piece takes ceil(cnt / slot) slots, and one when it is empty,
 * counted alike on both ends. On one host nbuf is 2: a piece is one slot. */
__device__ __forceinline__ int piece_slots(const zn_dev_comm &c)
{
    return c.nbuf / 2;
}

template <typename T> struct Sub {
    uint64_t per, off, len;
    __device__ Sub(const Chan &s, uint64_t cnt) : per(s.c->slot_bytes / sizeof(T)), off(0)
    {
        len = cnt < per ? cnt : per;
    }
    __device__ bool next(uint64_t cnt)
    {
        off += len;
        len = cnt - off < per ? cnt - off : per;
        return off < cnt;
    }
};

/* Block-wide: a piece of cnt elements from src (PreMulSum scales it) to dst. */
template <typename T>
__device__ bool piece_push(Chan &s, int dst, const T *src, uint64_t cnt, int premul = 0, T sc = T())
{
    Sub<T> u(s, cnt);
    do {
        if (!push<T>(s, dst, src + u.off, u.len, premul, sc)) return false;
    } while (u.next(cnt));
    return true;
}

/* Block-wide, a piece of cnt elements from src's FIFO (piece_push's other end), slot by slot:
 * a slot of dst reserved (dst >= 0: passing the piece on), src's next slot consumed, body(src's
 * slot, dst's slot or NULL, offset in the piece, elements) run by the block, src's slot
 * released and dst's committed. */
template <typename T, typename F>
__device__ bool piece_step(Chan &s, int src, int dst, uint64_t cnt, F body)
{
    Sub<T> u(s, cnt);
    do {
        T *fwd = nullptr;
        if (dst >= 0 && !(fwd = reserve<T>(s, dst))) return false;
        const T *p = consume<T>(s, src);
        if (!p) return false;
        body(p, fwd, u.off, u.len);
        release(s, src);
        if (fwd) commit(s, dst, u.len * sizeof(T));
    } while (u.next(cnt));
    return true;
}

/* Block-wide: a piece of cnt elements from src's FIFO to out. */
template <typename T> __device__ bool piece_pull(Chan &s, int src, T *out, uint64_t cnt)
{
    return piece_step<T>(s, src, -1, cnt, [&](const T *p, T *, uint64_t off, uint64_t len) {
        copy_bytes((uint8_t *)(out + off), (const uint8_t *)p, len * sizeof(T));
    });
}

} // namespace zn

#endif
