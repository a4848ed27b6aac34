/*
 * nccl_device/gin.h -- GPU-initiated networking (GIN) of NCCL 2.28's device API, as zinc
 * serves it: within the LSA team, by the GPU's own loads, stores and system-scope atomics
 * through zinc's p2p mappings; to a peer outside the LSA team (another host), through a FIFO
 * in mapped host memory that a host thread of the device communicator serves over zinc's net
 * transport (nccl_device/gin_proxy.h, src/proxy/gin.c).
 *
 *   put(team, peer, dst, src, bytes, SignalInc/SignalAdd, CounterInc, coop)
 *     LSA peer: the coop's threads copy bytes from this rank's src window into peer's dst
 *     window; then one thread fences (the payload is visible system-wide first) and adds to
 *     signal s of peer; CounterInc then adds one to this rank's counter: the source may be
 *     reused.
 *     other peer: one thread fences and queues the request; the host engine reads the source,
 *     raises the counter, and the peer's engine writes the bytes and then adds to the signal.
 *   signal(team, peer, action)          the signal update alone, after a fence
 *   readSignal / waitSignal / shadows   this rank's signals, as peers updated them
 *   flush(coop)                         LSA puts are finished when put returns: a fence; queued
 *                                       requests: wait until the engine took them all
 *
 * Signals and counters are 64-bit words in the device communicator's resource window
 * (ncclDevComm.ginHandles[0] / [1] are this rank's arrays); a peer's signal is the same word
 * of the peer's resource buffer. When some rank is outside the LSA team, ginHandles[2] is the
 * FIFO record, whose netSignals / netCounters hold the engine's share of each signal and
 * counter: a value as read here is the sum of the two words (a wait stops early, leaving the
 * value short, if the engine failed: ncclCommGetAsyncError says why).
 */
#ifndef ZINC_NCCL_DEVICE_GIN_H_
#define ZINC_NCCL_DEVICE_GIN_H_
#include "core.h"
#include "gin_proxy.h"
#include "ptr.h"

#define NCCL_GIN_PROXY_ENABLE     1
#define NCCL_GIN_GDAKI_ENABLE     0
#define NCCL_GIN_BACKEND_MASK_ALL (1u << (unsigned)NCCL_NET_DEVICE_GIN_PROXY)

#if __cplusplus
/* The space a caller may give put() in shared memory for a descriptor (unused by zinc). */
struct ncclGinDescriptorSmem {
    alignas(16) char space[64];
};

/* Completion actions of put() and signal(). */
struct ncclGin_None {
};
struct ncclGin_SignalAdd {
    ncclGinSignal_t signal;
    uint64_t value;
};
/* +1; for one signal, do not mix with SignalAdd between two resetSignal() calls. */
struct ncclGin_SignalInc {
    ncclGinSignal_t signal;
};
struct ncclGin_CounterInc {
    ncclGinCounter_t counter;
};
struct ncclGin_DescriptorSmem {
    ncclGinDescriptorSmem *descriptor;
};
#endif

#if __CUDACC__
template <unsigned backendMask> struct ncclGin_BackendMask;
template <ncclNetDeviceType backend>
using ncclGin_BackendOne = ncclGin_BackendMask<(1u << (int)backend)>;
using ncclGin = ncclGin_BackendMask<NCCL_GIN_BACKEND_MASK_ALL>;

/* Copy bytes with the threads of coop: 16-byte words where both ends allow it, eight loads
 * in flight per thread before their stores. One word at a time waits a load's latency per 16
 * bytes, which is all a put gets when one thread issues it (nccl-tests' GIN alltoall: one
 * thread per peer, 0.3 GB/s on 2 H200). */
template <typename Coop>
NCCL_DEVICE_INLINE void zincGinCopy(Coop coop, char *dst, char const *src, size_t bytes)
{
    size_t done = 0;
    if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
        size_t n16 = bytes / 16, t = coop.thread_rank(), k = coop.size(), i = t;
        uint4 *d = (uint4 *)dst;
        uint4 const *s = (uint4 const *)src;
        for (; i + 7 * k < n16; i += 8 * k) {
            uint4 v[8];
#pragma unroll
            for (int u = 0; u < 8; u++) v[u] = s[i + u * k];
#pragma unroll
            for (int u = 0; u < 8; u++) d[i + u * k] = v[u];
        }
        for (; i < n16; i += k) d[i] = s[i];
        done = n16 * 16;
    }
    for (size_t i = done + coop.thread_rank(); i < bytes; i += coop.size()) dst[i] = src[i];
}

NCCL_DEVICE_INLINE uint64_t zincGinMask(int bits)
{
    return bits >= 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
}

template <unsigned backendMask> struct ncclGin_BackendMask {
    ncclDevComm const &comm;
    uint32_t nContexts : 8, contextId : 8, _ginBackend : 8;
    void *_ginHandle;         /* this rank's signal array */
    uint64_t *_signalShadows; /* this rank's shadows */

    NCCL_DEVICE_INLINE ncclGin_BackendMask(ncclDevComm const &comm, int contextIndex)
        : comm(comm), nContexts(comm.ginContextCount), contextId(0), _ginBackend(comm.ginTypes[0]),
          _ginHandle(comm.ginHandles[0]), _signalShadows(comm.ginSignalShadows)
    {
        /* One context: every index maps to it. */
        (void)contextIndex;
    }

    NCCL_DEVICE_INLINE uint64_t *_signals() const
    {
        return (uint64_t *)_ginHandle;
    }
    NCCL_DEVICE_INLINE uint64_t *_counters() const
    {
        return (uint64_t *)comm.ginHandles[1];
    }
    /* The FIFO to the host engine, or NULL when every rank is in the LSA team. */
    NCCL_DEVICE_INLINE zincGinProxy *_net() const
    {
        return (zincGinProxy *)comm.ginHandles[2];
    }
    NCCL_DEVICE_INLINE bool _netFailed() const
    {
        zincGinProxy *px = _net();
        return px && *(volatile uint32_t *)&px->error != 0;
    }
    /* The engine's share of signal s / counter c (0 without an engine). */
    NCCL_DEVICE_INLINE uint64_t _netSignal(ncclGinSignal_t s) const
    {
        zincGinProxy *px = _net();
        if (!px) return 0;
        return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(px->netSignals[s])
            .load(cuda::memory_order_acquire);
    }
    NCCL_DEVICE_INLINE uint64_t _netCounter(ncclGinCounter_t c) const
    {
        zincGinProxy *px = _net();
        if (!px) return 0;
        return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(px->netCounters[c])
            .load(cuda::memory_order_acquire);
    }
    /* World rank of team member peer, and whether this GPU maps its memory. */
    NCCL_DEVICE_INLINE int _world(ncclTeam team, int peer) const
    {
        return comm.rank + (peer - team.rank) * team.stride;
    }
    NCCL_DEVICE_INLINE bool _isLsa(int world) const
    {
        int lsa = comm.lsaRank + (world - comm.rank);
        return lsa >= 0 && lsa < comm.lsaSize;
    }

    /* One thread: queue r for the host engine (gin_proxy.h's protocol). Everything this thread
     * stored before, and what the coop stored before its sync, is visible to the engine's
     * copy: the fence comes first. Gives up if the engine failed. */
    NCCL_DEVICE_INLINE void _push(zincGinRequest r) const
    {
        zincGinProxy *px = _net();
        __threadfence_system();
        uint64_t t = atomicAdd((unsigned long long *)px->head, 1ull);
        uint32_t n = *(volatile uint32_t *)&px->nslots;
        while (t >= *(volatile uint64_t *)&px->tail + n)
            if (_netFailed()) return;
        volatile uint64_t *w = (volatile uint64_t *)(px->slots + t % n);
        uint64_t const *words = (uint64_t const *)&r;
        for (int i = 1; i < 8; i++) w[i] = words[i];
        __threadfence_system();
        w[0] = t + 1;
    }
    NCCL_DEVICE_INLINE void _netRemote(zincGinRequest &r, ncclGin_None) const {}
    NCCL_DEVICE_INLINE void _netRemote(zincGinRequest &r, ncclGin_SignalInc a) const
    {
        r.flags |= ZINC_GIN_F_SIGNAL_INC;
        r.signal = a.signal;
    }
    NCCL_DEVICE_INLINE void _netRemote(zincGinRequest &r, ncclGin_SignalAdd a) const
    {
        r.flags |= ZINC_GIN_F_SIGNAL_ADD;
        r.signal = a.signal;
        r.signalValue = a.value;
    }
    NCCL_DEVICE_INLINE void _netLocal(zincGinRequest &r, ncclGin_None) const {}
    NCCL_DEVICE_INLINE void _netLocal(zincGinRequest &r, ncclGin_CounterInc a) const
    {
        r.flags |= ZINC_GIN_F_COUNTER;
        r.counter = a.counter;
    }
    /* After the coop's stores: one thread queues r with its actions. */
    template <typename RemoteAction, typename LocalAction, typename Coop>
    NCCL_DEVICE_INLINE void _netSubmit(zincGinRequest r, RemoteAction ra, LocalAction la,
                                       Coop coop) const
    {
        coop.sync();
        if (coop.thread_rank() == 0) {
            _netRemote(r, ra);
            _netLocal(r, la);
            _push(r);
        }
        coop.sync();
    }
    NCCL_DEVICE_INLINE zincGinRequest _request(uint32_t op, int world) const
    {
        zincGinRequest r;
        r.seq = 0;
        r.op = op;
        r.peer = world;
        r.src = 0;
        r.dstOffset = 0;
        r.bytes = 0;
        r.dstWindow = 0;
        r.flags = 0;
        r.signal = 0;
        r.counter = 0;
        r.signalValue = 0;
        return r;
    }

    /* Signal s of team member peer, as this GPU maps it. */
    NCCL_DEVICE_INLINE uint64_t *_peerSignal(ncclTeam team, int peer, ncclGinSignal_t s) const
    {
        ncclWindow_t w = comm.resourceWindow;
        size_t off = (size_t)((char *)_ginHandle - w->lsaFlatBase);
        int lsa = comm.lsaRank + (peer - team.rank) * team.stride;
        return (uint64_t *)(w->lsaPtrs[lsa] + off) + s;
    }

    NCCL_DEVICE_INLINE void _remote(ncclTeam team, int peer, ncclGin_None) const {}
    NCCL_DEVICE_INLINE void _remote(ncclTeam team, int peer, ncclGin_SignalInc a) const
    {
        cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*_peerSignal(team, peer, a.signal))
            .fetch_add(1, cuda::memory_order_release);
    }
    NCCL_DEVICE_INLINE void _remote(ncclTeam team, int peer, ncclGin_SignalAdd a) const
    {
        cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*_peerSignal(team, peer, a.signal))
            .fetch_add(a.value, cuda::memory_order_release);
    }
    NCCL_DEVICE_INLINE void _local(ncclGin_None) const {}
    NCCL_DEVICE_INLINE void _local(ncclGin_CounterInc a) const
    {
        cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(_counters()[a.counter])
            .fetch_add(1, cuda::memory_order_release);
    }

    /* After the coop's stores: one thread publishes them and runs the actions. */
    template <typename RemoteAction, typename LocalAction, typename Coop>
    NCCL_DEVICE_INLINE void _complete(ncclTeam team, int peer, RemoteAction ra, LocalAction la,
                                      Coop coop) const
    {
        coop.sync();
        if (coop.thread_rank() == 0) {
            __threadfence_system();
            _remote(team, peer, ra);
            _local(la);
        }
        coop.sync();
    }

    template <typename RemoteAction = ncclGin_None, typename LocalAction = ncclGin_None,
              typename Coop = ncclCoopThread, typename DescriptorSmem = ncclGin_None>
    NCCL_DEVICE_INLINE void
    put(ncclTeam team, int peer, ncclWindow_t dstWnd, size_t dstOffset, ncclWindow_t srcWnd,
        size_t srcOffset, size_t bytes, RemoteAction remoteAction = ncclGin_None{},
        LocalAction localAction = ncclGin_None{}, Coop coop = ncclCoopThread{},
        DescriptorSmem descriptor = ncclGin_None{},
        cuda::thread_scope alreadyReleased = cuda::thread_scope_thread,
        cuda::thread_scope expected_scope = cuda::thread_scope_device) const
    {
        int world = _world(team, peer);
        if (!_isLsa(world)) {
            zincGinRequest r = _request(ZINC_GIN_OP_PUT, world);
            r.src = (uint64_t)(uintptr_t)ncclGetLocalPointer(srcWnd, srcOffset);
            r.dstOffset = dstOffset;
            r.bytes = bytes;
            r.dstWindow = dstWnd->ginOffset4K;
            _netSubmit(r, remoteAction, localAction, coop);
            return;
        }
        char *dst = (char *)ncclGetPeerPointer(dstWnd, dstOffset, team, peer);
        char const *src = (char const *)ncclGetLocalPointer(srcWnd, srcOffset);
        zincGinCopy(coop, dst, src, bytes);
        _complete(team, peer, remoteAction, localAction, coop);
    }

    template <typename T, typename RemoteAction = ncclGin_None, typename LocalAction = ncclGin_None,
              typename Coop = ncclCoopThread, typename DescriptorSmem = ncclGin_None>
    NCCL_DEVICE_INLINE void
    put(ncclTeam team, int peer, ncclSymPtr<T> dstElts, ncclSymPtr<T> srcElts, size_t nElts,
        RemoteAction remoteAction = ncclGin_None{}, LocalAction localAction = ncclGin_None{},
        Coop coop = ncclCoopThread{}, DescriptorSmem descriptor = ncclGin_None{},
        cuda::thread_scope alreadyReleased = cuda::thread_scope_thread,
        cuda::thread_scope expected_scope = cuda::thread_scope_device) const
    {
        put(team, peer, dstElts.window, dstElts.offset, srcElts.window, srcElts.offset,
            nElts * sizeof(T), remoteAction, localAction, coop, descriptor, alreadyReleased,
            expected_scope);
    }

    template <typename T, typename RemoteAction = ncclGin_None, typename Coop = ncclCoopThread,
              typename DescriptorSmem = ncclGin_None>
    NCCL_DEVICE_INLINE void
    putValue(ncclTeam team, int peer, ncclWindow_t dstWnd, size_t dstOffset, T value,
             RemoteAction remoteAction = ncclGin_None{}, Coop coop = ncclCoopThread{},
             DescriptorSmem descriptor = ncclGin_None{},
             cuda::thread_scope alreadyReleased = cuda::thread_scope_thread,
             cuda::thread_scope expected_scope = cuda::thread_scope_device) const
    {
        static_assert(sizeof(T) <= 8, "putValue carries at most 8 bytes");
        int world = _world(team, peer);
        if (!_isLsa(world)) {
            zincGinRequest r = _request(ZINC_GIN_OP_PUT_VALUE, world);
            memcpy(&r.src, &value, sizeof(T));
            r.dstOffset = dstOffset;
            r.bytes = sizeof(T);
            r.dstWindow = dstWnd->ginOffset4K;
            _netSubmit(r, remoteAction, ncclGin_None{}, coop);
            return;
        }
        if (coop.thread_rank() == 0)
            *(volatile T *)ncclGetPeerPointer(dstWnd, dstOffset, team, peer) = value;
        _complete(team, peer, remoteAction, ncclGin_None{}, coop);
    }

    template <typename T, typename RemoteAction = ncclGin_None, typename Coop = ncclCoopThread,
              typename DescriptorSmem = ncclGin_None>
    NCCL_DEVICE_INLINE void
    putValue(ncclTeam team, int peer, ncclSymPtr<T> dst, T value,
             RemoteAction remoteAction = ncclGin_None{}, Coop coop = ncclCoopThread{},
             DescriptorSmem descriptor = ncclGin_None{},
             cuda::thread_scope alreadyReleased = cuda::thread_scope_thread,
             cuda::thread_scope expected_scope = cuda::thread_scope_device) const
    {
        putValue(team, peer, dst.window, dst.offset, value, remoteAction, coop, descriptor,
                 alreadyReleased, expected_scope);
    }

    template <typename RemoteAction, typename Coop = ncclCoopThread,
              typename DescriptorSmem = ncclGin_None>
    NCCL_DEVICE_INLINE void
    signal(ncclTeam team, int peer, RemoteAction remoteAction, Coop coop = ncclCoopThread(),
           DescriptorSmem descriptor = ncclGin_None{},
           cuda::thread_scope alreadyReleased = cuda::thread_scope_thread,
           cuda::thread_scope expected_scope = cuda::thread_scope_device) const
    {
        int world = _world(team, peer);
        if (!_isLsa(world)) {
            _netSubmit(_request(ZINC_GIN_OP_SIGNAL, world), remoteAction, ncclGin_None{}, coop);
            return;
        }
        _complete(team, peer, remoteAction, ncclGin_None{}, coop);
    }

    /* The copies of LSA puts are done when put returns; what remains is ordering. Requests
     * queued for the engine are done (their sources read) once the engine took them all. */
    template <typename Coop>
    NCCL_DEVICE_INLINE void flush(Coop coop,
                                  cuda::memory_order ord = cuda::memory_order_acquire) const
    {
        coop.sync();
        zincGinProxy *px = _net();
        if (px && coop.thread_rank() == 0) {
            uint64_t issued = *(volatile uint64_t *)px->head;
            while (*(volatile uint64_t *)&px->tail < issued && !_netFailed()) {
            }
        }
        coop.sync();
        __threadfence_system();
    }

    NCCL_DEVICE_INLINE uint64_t
    readCounter(ncclGinCounter_t counter, int bits = 56,
                cuda::memory_order ord = cuda::memory_order_acquire) const
    {
        cuda::atomic_ref<uint64_t, cuda::thread_scope_device> c(_counters()[counter]);
        return (c.load(ord) + _netCounter(counter)) & zincGinMask(bits);
    }

    template <typename Coop>
    NCCL_DEVICE_INLINE void waitCounter(Coop coop, ncclGinCounter_t counter, uint64_t least,
                                        int bits = 56,
                                        cuda::memory_order ord = cuda::memory_order_acquire) const
    {
        if (coop.thread_rank() == 0)
            while (!nccl::utility::rollingLessEq<uint64_t>(least, readCounter(counter, bits, ord),
                                                           bits) &&
                   !_netFailed()) {
            }
        coop.sync();
    }

    NCCL_DEVICE_INLINE uint64_t *getSignalShadowPtr(ncclGinSignal_t signal) const
    {
        return _signalShadows + signal;
    }

    NCCL_DEVICE_INLINE void increaseSignalShadow(ncclGinSignal_t signal, uint64_t delta) const
    {
        _signalShadows[signal] += delta;
    }

    NCCL_DEVICE_INLINE uint64_t
    readSignal(ncclGinSignal_t signal, int bits = 64,
               cuda::memory_order ord = cuda::memory_order_acquire) const
    {
        cuda::atomic_ref<uint64_t, cuda::thread_scope_system> s(_signals()[signal]);
        return (s.load(ord) + _netSignal(signal)) & zincGinMask(bits);
    }

    template <typename Coop>
    NCCL_DEVICE_INLINE void waitSignal(Coop coop, ncclGinSignal_t signal, uint64_t least,
                                       int bits = 64,
                                       cuda::memory_order ord = cuda::memory_order_acquire) const
    {
        if (coop.thread_rank() == 0)
            while (!nccl::utility::rollingLessEq<uint64_t>(least & zincGinMask(bits),
                                                           readSignal(signal, bits, ord), bits) &&
                   !_netFailed()) {
            }
        coop.sync();
    }

    template <typename Coop>
    NCCL_DEVICE_INLINE void
    waitSignalMeetShadow(Coop coop, ncclGinSignal_t signal, int bits = 64,
                         cuda::memory_order ord = cuda::memory_order_acquire) const
    {
        waitSignal(coop, signal, *getSignalShadowPtr(signal), bits, ord);
    }

    template <typename Coop, typename Uint>
    NCCL_DEVICE_INLINE void
    waitSignalFollowShadow(Coop coop, ncclGinSignal_t signal, Uint leastDelta, Uint *before,
                           Uint *delta, int bits = 64,
                           cuda::memory_order ord = cuda::memory_order_acquire) const
    {
        struct Seen {
            uint64_t shadow, now;
        } seen = { 0, 0 };
        if (coop.thread_rank() == 0) {
            seen.shadow = *getSignalShadowPtr(signal);
            uint64_t want = (seen.shadow + (uint64_t)leastDelta) & zincGinMask(bits);
            do {
                seen.now = readSignal(signal, bits, ord);
            } while (!nccl::utility::rollingLessEq<uint64_t>(want, seen.now, bits) &&
                     !_netFailed());
        }
        seen = ncclCoopBcast(coop, seen, 0);
        *before = (Uint)seen.shadow;
        *delta = (Uint)((seen.now - seen.shadow) & zincGinMask(bits));
        coop.sync();
        if (coop.thread_rank() == 0) *getSignalShadowPtr(signal) = seen.now;
        coop.sync();
    }

    NCCL_DEVICE_INLINE void resetCounter(ncclGinCounter_t counter) const
    {
        cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(_counters()[counter])
            .store(0, cuda::memory_order_relaxed);
        if (zincGinProxy *px = _net()) *(volatile uint64_t *)&px->netCounters[counter] = 0;
    }

    NCCL_DEVICE_INLINE void resetSignal(ncclGinSignal_t signal) const
    {
        cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(_signals()[signal])
            .store(0, cuda::memory_order_relaxed);
        if (zincGinProxy *px = _net()) *(volatile uint64_t *)&px->netSignals[signal] = 0;
        _signalShadows[signal] = 0;
    }
};
#endif /* __CUDACC__ */

#endif
