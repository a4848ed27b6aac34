/*
 * Ring kernels (ZN_DEV_ALGO_RING, ZN_DEV_RING_LL): every rank talks only to its ring
 * neighbours, so they run where only those are mapped (ring mode). See coll.cu's header.
 */
#ifndef ZN_DEVICE_COLL_RING_CUH
#define ZN_DEVICE_COLL_RING_CUH

#include "coll_common.cuh"

namespace zn
{

/* ---- Ring kernels: talk to the ring neighbours only ---- */

/* This rank's ring position and its neighbours' slots (zn_dev_comm). */
struct Ring {
    int pos, next, prev;
};

static __device__ Ring ring_of(const zn_dev_comm &c)
{
    return { c.ring_pos, c.next, c.prev };
}

/* Block-wide, one reduce step of a ring: the next piece from prev reduced with this rank's own
 * operand `own` (cnt elements; PreMulSum scales own). The result goes to `out` (the final
 * output; NULL on intermediate steps) and, when `forward`, into slots to next, in the same
 * pass. post_div only on the last step. Returns false if a wait failed. */
template <typename T>
__device__ bool ring_reduce_step(Chan &s, const zn_dev_coll_args &a, const Ring &g, const T *own,
                                 T *out, bool forward, uint64_t cnt, T sc, int post_div)
{
    return piece_step<T>(s, g.prev, forward ? g.next : -1, cnt,
                         [&](const T *p, T *fwd, uint64_t off, uint64_t len) {
                             const T *srcs[ZN_DEV_MAX_RANKS] = { p, own + off };
                             T *extra[1] = { fwd };
                             T *o = out ? out + off : nullptr;
                             reduce_n<T>(o ? o : fwd, extra, o && fwd ? 1 : 0, srcs, 2, len, a.op,
                                         1, a.premul, sc, post_div);
                         });
}

/* Block-wide, a copy step of a ring: the next piece from prev (cnt elements) to out and, when
 * `forward`, in the same pass into slots to next. */
template <typename T>
__device__ bool ring_pass(Chan &s, const Ring &g, T *out, bool forward, uint64_t cnt)
{
    return piece_step<T>(s, g.prev, forward ? g.next : -1, cnt,
                         [&](const T *p, T *fwd, uint64_t off, uint64_t len) {
                             copy_bytes2((uint8_t *)(out + off), (uint8_t *)fwd, (const uint8_t *)p,
                                         len * sizeof(T));
                         });
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
    const Span sp = span<T>(a.count, a.nch, s.ch, a.comm.slot_bytes, n * piece_slots(a.comm));
    for (uint64_t w0 = sp.lo; w0 < sp.hi; w0 += sp.w) {
        uint64_t wl = sp.len(w0), ps, pl;
        piece(wl, n, (g.pos + n - 1) % n, &ps, &pl);
        if (!piece_push<T>(s, g.next, in + w0 + ps, pl, a.premul, sc)) return;
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
            if (!ring_pass<T>(s, g, out + w0 + ps, st < n - 1, pl)) return;
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
 * The host sizes the channels so that n-1 regions fit in one LL buffer (ring_ll_fits), and
 * runs it only on one host (at most ZN_DEV_MAX_RANKS ranks: slots are ranks). */
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
    const Span sp = span<T>(a.count, a.nch, s.ch, c.slot_bytes, piece_slots(c));
    for (uint64_t w0 = sp.lo; w0 < sp.hi; w0 += sp.w) {
        uint64_t wl = sp.len(w0);
        int b = c.ring[(g.pos + n - 1) % n];
        if (!piece_push<T>(s, g.next, in + b * a.count + w0, wl, a.premul, sc)) return;
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
    int me = c.rank, root = a.root, rpos = 0;
    while (c.ring[rpos] != root) rpos++;
    int first = (rpos + 1) % n == g.pos;
    const T *in = (const T *)a.sendbuf;
    T *out = (T *)a.recvbuf;
    T sc = scalar_of<T>(a);
    const Span sp = span<T>(a.count, a.nch, s.ch, c.slot_bytes, piece_slots(c));
    for (uint64_t w0 = sp.lo; w0 < sp.hi; w0 += sp.w) {
        uint64_t wl = sp.len(w0);
        if (first) {
            if (!piece_push<T>(s, g.next, in + w0, wl, a.premul, sc)) return;
            continue;
        }
        if (!ring_reduce_step<T>(s, a, g, in + w0, me == root ? out + w0 : nullptr, me != root, wl,
                                 sc, me == root ? a.post_div : 0))
            return;
    }
}

/* The byte-moving ring collectives (T = uint8_t, count in bytes per block). */
static __device__ void move_ring(Chan &s, const zn_dev_coll_args &a)
{
    int n = s.n, me = a.comm.rank, root = a.root;
    const zn_dev_comm &c = a.comm;
    Ring g = ring_of(c);
    const uint8_t *in = (const uint8_t *)a.sendbuf;
    uint8_t *out = (uint8_t *)a.recvbuf;
    uint64_t cnt = a.count;
    const Span sp = span<uint8_t>(cnt, a.nch, s.ch, c.slot_bytes, piece_slots(c));
    for (uint64_t w0 = sp.lo; w0 < sp.hi; w0 += sp.w) {
        uint64_t wl = sp.len(w0);
        if (a.coll == ZN_COLL_BROADCAST) {
            /* A chain from the root: each keeps the window and passes it on, up to the
             * position before the root. */
            if (me == root) {
                if (!piece_push<uint8_t>(s, g.next, in + w0, wl)) return;
                if (out != in) copy_bytes(out + w0, in + w0, wl);
                continue;
            }
            if (!ring_pass<uint8_t>(s, g, out + w0, c.ring[(g.pos + 1) % n] != root, wl)) return;
            continue;
        }
        /* Allgather: own block to next, then n-1 steps receiving the block of position p-st
         * and passing it on unless next owns it. */
        if (!piece_push<uint8_t>(s, g.next, in + w0, wl)) return;
        if (in + w0 != out + me * cnt + w0) copy_bytes(out + me * cnt + w0, in + w0, wl);
        for (int st = 1; st < n; st++) {
            int b = c.ring[(g.pos + n - st) % n];
            if (!ring_pass<uint8_t>(s, g, out + b * cnt + w0, st < n - 1, wl)) return;
        }
    }
}

} // namespace zn

#endif
