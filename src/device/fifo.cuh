/*
 * Per-channel FIFOs between GPUs (layout in dev_abi.h), used by one thread block.
 *
 * push(dst): wait until dst drained the slot we are about to reuse (its ack), copy the data
 * into dst's arena over NVLink, make it visible system-wide, then bump dst's ready counter.
 * consume(src): wait for src's ready counter, read the slot (bypassing L1), then release() it
 * by bumping src's ack counter. A peer on another host has a net shadow for arena (dev_abi.h):
 * pushes to it and releases of its slots go there, and the proxy puts what comes from it (its
 * slots and ready counts, the count of our slots it took) into the same shadow (inbox()). Thread 0
 * does the waiting; every wait is bounded by the communicator's timeout and watches the host's
 * abort flag, so a dead peer ends the kernel with an error word instead of hanging the GPU.
 */
#ifndef ZN_DEVICE_FIFO_CUH
#define ZN_DEVICE_FIFO_CUH

#include "abi/dev_abi.h"
#include "elem.cuh"

namespace zn
{

__device__ __forceinline__ uint64_t globaltimer()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

struct Range {
    uint64_t lo, hi;
};

/* Channel ch's share of n elements (or bytes), in multiples of 16 so that windows keep vector
 * alignment where the buffers have it. */
__device__ __forceinline__ Range channel_range(uint64_t n, int nch, int ch)
{
    uint64_t per = (n + nch - 1) / nch;
    per = (per + 15) / 16 * 16;
    uint64_t lo = per * ch, hi = lo + per;
    if (lo > n) lo = n;
    if (hi > n) hi = n;
    return { lo, hi };
}

/* The windows of a channel's range that the Simple kernels walk one at a time:
 *   for (uint64_t w0 = sp.lo; w0 < sp.hi; w0 += sp.w) { uint64_t wl = sp.len(w0); ... }
 * each at most w elements (a FIFO slot, or `slots` of them for patterns that send a window's
 * pieces to several ranks at once). */
struct Span {
    uint64_t lo, hi, w;
    __device__ __forceinline__ uint64_t len(uint64_t w0) const
    {
        return hi - w0 < w ? hi - w0 : w;
    }
};

/* Channel ch's windows of n elements of T with slot_bytes-byte slots. */
template <typename T>
__device__ __forceinline__ Span span(uint64_t n, int nch, int ch, uint64_t slot_bytes, int slots)
{
    Range r = channel_range(n, nch, ch);
    return { r.lo, r.hi, slot_bytes / sizeof(T) * slots };
}

/* me and the peers are slots (zn_dev_comm), n is the communicator's ranks, np its slots. */
struct Chan {
    const zn_dev_comm *c;
    int ch, me, n, np;
    uint64_t sent[ZN_DEV_MAX_RANKS];
    uint64_t recvd[ZN_DEV_MAX_RANKS];
    int fail;
    int flag; /* scratch for broadcasting a try-result to the block */
};

__device__ __forceinline__ volatile uint64_t *ctrl(uint8_t *arena, size_t off, int peer, int ch)
{
    return (volatile uint64_t *)(arena + off) + (size_t)peer * ZN_DEV_MAX_CH + ch;
}

__device__ __forceinline__ int net_peer(const Chan &s, int peer)
{
    return (s.c->net_mask >> peer) & 1;
}

/* Where the words and slots addressed to this rank about peer live: the own arena, or for a
 * peer on another host its net shadow (abi/dev_abi.h), where the proxy lands the peer's slots
 * and ready counts (row peer) and the count of slots it sent to the peer (ack, row peer). */
__device__ __forceinline__ uint8_t *inbox(const Chan &s, int peer)
{
    return net_peer(s, peer) ? s.c->arena[peer] : s.c->arena[s.me];
}

/* Slots per FIFO with peer (dev_abi.h). */
__device__ __forceinline__ int depth(const Chan &s, int peer)
{
    return net_peer(s, peer) ? ZN_DEV_NET_NBUF : s.c->nbuf;
}

/* Slot pos of the FIFO from src to this rank (src != me, in inbox(s, src)) or from this rank
 * to peer (src == me, in arena[peer], in the row peer keeps for this rank); for a peer on
 * another host, in the rows the GPU net engine gave it (zn_dev_comm.net_tx / net_rx: in its
 * shadow, or in device memory that the net reads and writes directly). */
__device__ __forceinline__ uint8_t *fifo_slot(const Chan &s, int peer, int src, uint64_t pos)
{
    if (net_peer(s, peer)) return zn_dev_net_slot(s.c, peer, src != s.me, s.ch, pos);
    uint8_t *base = src == s.me ? s.c->arena[peer] : s.c->arena[s.me];
    int nb = s.c->nbuf, row = src == s.me ? s.c->row_at[peer] : src;
    return base +
           zn_dev_slot_off(row, s.ch, s.c->nch, nb, (int)(pos % (uint64_t)nb), s.c->slot_bytes);
}

/* The word that says whether peer's connection of this channel closed (ZN_DEV_NETGONE_OFF), for
 * a peer on another host; NULL for the others. */
__device__ __forceinline__ volatile uint64_t *gone_word(const Chan &s, int peer)
{
    return net_peer(s, peer) ? ctrl(s.c->arena[peer], ZN_DEV_NETGONE_OFF, peer, s.ch) : nullptr;
}

/* Whether a wait for *p >= v can still end: not once gone (gone_word) says that the peer
 * closed before sending it. The engine raises the count before it marks the close, so the
 * count is read again after the mark. */
__device__ __forceinline__ bool peer_gone(volatile uint64_t *gone, volatile uint64_t *p, uint64_t v)
{
    if (!gone || *gone == 0) return false;
    __threadfence_system();
    return *p < v;
}

/* Thread 0 only: spin until *p >= v. Returns 0 on timeout / abort / the peer whose count it is
 * gone (gone: its gone_word, or NULL) (error word written). */
static __device__ int wait_geq(const Chan &s, volatile uint64_t *p, uint64_t v,
                               volatile uint64_t *gone = nullptr)
{
    if (*p >= v) return 1;
    uint64_t t0 = globaltimer();
    for (unsigned i = 1;; i++) {
        if (*p >= v) return 1;
        if ((i & 1023) == 0) {
            int code = 0;
            if (*s.c->abort_flag)
                code = ZN_DEV_ABORTED;
            else if (peer_gone(gone, p, v))
                code = ZN_DEV_PEER_GONE;
            else if (globaltimer() - t0 > s.c->timeout_ns)
                code = ZN_DEV_TIMEOUT;
            if (code) {
                volatile uint32_t *e = s.c->error;
                if (*e == 0) *e = (uint32_t)code;
                __threadfence_system();
                return 0;
            }
        }
    }
}

/* What chan_close writes back: the counts of pushed slots, of consumed ones, or both (a block
 * that only pushes or only consumes must leave the other count to the block that owns it). */
enum { CHAN_SENT = 1, CHAN_RECVD = 2, CHAN_BOTH = 3 };

/* Block-wide: load channel ch's counters (by default the block's own), a thread per peer slot
 * (one thread loading them all waited for each load in turn before the next). */
static __device__ void chan_open(Chan &s, const zn_dev_comm *c, int ch = -1)
{
    if (ch < 0) ch = blockIdx.x;
    for (int p = threadIdx.x; p < c->nslots; p += blockDim.x) {
        s.sent[p] = *ctrl(c->arena[c->self], ZN_DEV_SENT_OFF, p, ch);
        s.recvd[p] = *ctrl(c->arena[c->self], ZN_DEV_RECVD_OFF, p, ch);
    }
    if (threadIdx.x == 0) {
        s.c = c;
        s.ch = ch;
        s.me = c->self;
        s.n = c->nranks;
        s.np = c->nslots;
        s.fail = 0;
    }
    __syncthreads();
}

static __device__ void chan_close(Chan &s, int which = CHAN_BOTH)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int p = 0; p < s.np; p++) {
            if (which & CHAN_SENT) *ctrl(s.c->arena[s.me], ZN_DEV_SENT_OFF, p, s.ch) = s.sent[p];
            if (which & CHAN_RECVD) *ctrl(s.c->arena[s.me], ZN_DEV_RECVD_OFF, p, s.ch) = s.recvd[p];
        }
    }
}

/* Block-wide byte copy to dst and, unless it is NULL, to dst2 as well (a ring step that keeps
 * a window and forwards it), 16-byte vectors when every end allows it. src may be an arena slot
 * (read through L2). */
static __device__ void copy_bytes2(uint8_t *dst, uint8_t *dst2, const uint8_t *src, uint64_t n)
{
    uint64_t i0 = 0;
    if ((((uintptr_t)dst | (uintptr_t)dst2 | (uintptr_t)src) & 15) == 0) {
        uint64_t nv = n / 16;
        const uint4 *s4 = (const uint4 *)src;
        uint4 *d4 = (uint4 *)dst, *e4 = (uint4 *)dst2;
        uint64_t i = threadIdx.x;
        for (; i + 3 * blockDim.x < nv; i += 4 * blockDim.x) {
            uint4 a = __ldcg(s4 + i), b = __ldcg(s4 + i + blockDim.x);
            uint4 c = __ldcg(s4 + i + 2 * blockDim.x), d = __ldcg(s4 + i + 3 * blockDim.x);
            d4[i] = a;
            d4[i + blockDim.x] = b;
            d4[i + 2 * blockDim.x] = c;
            d4[i + 3 * blockDim.x] = d;
            if (e4) {
                e4[i] = a;
                e4[i + blockDim.x] = b;
                e4[i + 2 * blockDim.x] = c;
                e4[i + 3 * blockDim.x] = d;
            }
        }
        for (; i < nv; i += blockDim.x) {
            uint4 a = __ldcg(s4 + i);
            d4[i] = a;
            if (e4) e4[i] = a;
        }
        i0 = nv * 16;
    }
    for (uint64_t i = i0 + threadIdx.x; i < n; i += blockDim.x) {
        uint8_t v = __ldcg(src + i);
        dst[i] = v;
        if (dst2) dst2[i] = v;
    }
}

static __device__ void copy_bytes(uint8_t *dst, const uint8_t *src, uint64_t n)
{
    copy_bytes2(dst, nullptr, src, n);
}

/* Block-wide: dst[i] = src[i] * scalar (PreMulSum's local step on the way out). */
template <typename T>
__device__ void copy_scaled(T *dst, const T *src, uint64_t n, int premul, T scalar)
{
    if (!premul) {
        copy_bytes((uint8_t *)dst, (const uint8_t *)src, n * sizeof(T));
        return;
    }
    for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = Ops<T>::mul(src[i], scalar);
}

/* Block-wide: the slot of dst's FIFO that the next push fills, once dst has drained it (NULL if
 * the wait failed). Fill it, then commit(). */
template <typename T> __device__ T *reserve(Chan &s, int dst)
{
    uint64_t pos = s.sent[dst], nb = (uint64_t)depth(s, dst);
    if (threadIdx.x == 0 && pos >= nb)
        s.fail = !wait_geq(s, ctrl(inbox(s, dst), ZN_DEV_ACK_OFF, dst, s.ch), pos + 1 - nb);
    __syncthreads();
    if (s.fail) return nullptr;
    return (T *)fifo_slot(s, dst, s.me, pos);
}

/* Block-wide: the reserved slots of dst (one peer), or of every peer (dst < 0), are filled;
 * raise their ready counters. One fence, by the thread that raises the flags, after the
 * barrier: the barrier orders the other threads' stores before it, and the fence is cumulative
 * (PTX release semantics), so a peer that sees its flag sees the whole slot. bytes, where the
 * caller knows it, is what the slot holds: a net shadow's engine sends only that much (without
 * it, the whole slot). */
static __device__ void commit(Chan &s, int dst, uint64_t bytes = ~0ull)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        if (s.c->net_mask)
            for (int k = 1; k < s.np; k++) {
                int d = (s.me + k) % s.np;
                if ((dst >= 0 && d != dst) || !((s.c->net_mask >> d) & 1)) continue;
                *ctrl(s.c->arena[d], ZN_DEV_NETSIZE_OFF, (int)(s.sent[d] % ZN_DEV_NET_NBUF), s.ch) =
                    bytes < s.c->slot_bytes ? bytes : s.c->slot_bytes;
            }
        __threadfence_system();
        for (int k = 1; k < s.np; k++) {
            int d = (s.me + k) % s.np;
            if (dst >= 0 && d != dst) continue;
            *ctrl(s.c->arena[d], ZN_DEV_READY_OFF, s.c->row_at[d], s.ch) = s.sent[d] + 1;
            s.sent[d] += 1;
        }
    }
    __syncthreads(); /* every thread sees the new positions before the next reserve */
}

/* Block-wide push of n elements to dst's FIFO. Returns 0 if the wait failed. */
template <typename T>
__device__ int push(Chan &s, int dst, const T *src, uint64_t n, int premul = 0, T scalar = T())
{
    T *d = reserve<T>(s, dst);
    if (!d) return 0;
    copy_scaled<T>(d, src, n, premul, scalar);
    commit(s, dst, n * sizeof(T));
    return 1;
}

/* Block-wide: wait for src's next slot; returns it (NULL if the wait failed). A slot from
 * another host is read where the proxy landed it, in pinned host memory, or in device memory
 * that the net wrote and flushed (GPUDirect RDMA): the fence is then system-wide, as the flag
 * was written by a CPU thread after the bytes. */
template <typename T> __device__ const T *consume(Chan &s, int src)
{
    uint64_t pos = s.recvd[src];
    uint8_t *box = inbox(s, src);
    if (threadIdx.x == 0) {
        s.fail = !wait_geq(s, ctrl(box, ZN_DEV_READY_OFF, src, s.ch), pos + 1, gone_word(s, src));
        if (net_peer(s, src))
            __threadfence_system();
        else
            __threadfence(); /* acquire: the slot's bytes are read after the flag */
    }
    __syncthreads();
    if (s.fail) return nullptr;
    return (const T *)fifo_slot(s, src, src, pos);
}

/* Block-wide: the slot of src read last is free again. */
static __device__ void release(Chan &s, int src)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        uint64_t pos = s.recvd[src] + 1;
        *ctrl(s.c->arena[src], ZN_DEV_ACK_OFF, s.c->row_at[src], s.ch) = pos;
        s.recvd[src] = pos;
    }
    __syncthreads();
}

/* Non-blocking tests for the send/recv engine (thread 0 looks, the block learns). */
static __device__ int can_push(Chan &s, int dst)
{
    uint64_t pos = s.sent[dst], nb = (uint64_t)depth(s, dst);
    if (threadIdx.x == 0)
        s.flag = pos < nb || *ctrl(inbox(s, dst), ZN_DEV_ACK_OFF, dst, s.ch) >= pos + 1 - nb;
    __syncthreads();
    int r = s.flag;
    __syncthreads();
    return r;
}

static __device__ int can_consume(Chan &s, int src)
{
    if (threadIdx.x == 0)
        s.flag = *ctrl(inbox(s, src), ZN_DEV_READY_OFF, src, s.ch) >= s.recvd[src] + 1;
    __syncthreads();
    int r = s.flag;
    __syncthreads();
    return r;
}

} // namespace zn

#endif
