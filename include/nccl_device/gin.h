/*
 * nccl_device/gin.h -- GPU-initiated networking (GIN) of NCCL 2.30's device API, as zinc
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
 *   flushAsync(team, peer, &req), wait  flush split in two: the engine's tickets issued so far
 *                                       go into req, wait() waits until it took them
 *
 * Signals are always strong: a signal is raised after every put this thread queued to that
 * peer before it (the engine sends in order, and an LSA put is complete when put returns), so
 * ncclGin_StrongSignal*, ncclGin_WeakSignal* and the older ncclGin_Signal* act alike, and
 * ncclGin_WeakCounterInc is ncclGin_CounterInc. The C-callable functions (ncclGin_C,
 * ncclGinPut, ...) run the methods below. The hints NCCL 2.30 added (optFlags, the
 * resource sharing mode, the segment type, a descriptor in shared memory) change nothing here.
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
#define NCCL_GIN_GPI_ENABLE       0
#define NCCL_GIN_BACKEND_MASK_ALL (1u << (unsigned)NCCL_NET_DEVICE_GIN_PROXY)

#if __cplusplus
/* Hints for put(), putValue(), signal() and flushAsync(). */
enum ncclGinOptFlags {
    ncclGinOptFlagsDefault = 0,
    ncclGinOptFlagsMaySkipCreditCheck = (1 << 0),
    ncclGinOptFlagsAggregateRequests = (1 << 1),
};

/* How the threads of a kernel share a GIN context (a hint for the ncclGin constructor). */
enum ncclGinResourceSharingMode : uint8_t {
    NCCL_GIN_RESOURCE_SHARING_GPU = 0,
    NCCL_GIN_RESOURCE_SHARING_CTA = 1,
    NCCL_GIN_RESOURCE_SHARING_THREAD = 2,
};

/* The space a caller may give put() in shared memory for a descriptor (unused by zinc). */
struct ncclGinDescriptorSmem {
    alignas(16) char space[64];
};

/* Completion actions of put() and signal(). Strong and weak act alike (see above). */
struct ncclGin_None {
};
struct ncclGin_StrongSignalAdd {
    ncclGinSignal_t signal;
    uint64_t value;
};
struct ncclGin_WeakSignalAdd {
    ncclGinSignal_t signal;
    uint64_t value;
};
struct ncclGin_SignalAdd {
    ncclGinSignal_t signal;
    uint64_t value;
};
/* +1; for one signal, do not mix with an Add between two resetSignal() calls. */
struct ncclGin_StrongSignalInc {
    ncclGinSignal_t signal;
};
struct ncclGin_WeakSignalInc {
    ncclGinSignal_t signal;
};
struct ncclGin_SignalInc {
    ncclGinSignal_t signal;
};
struct ncclGin_CounterInc {
    ncclGinCounter_t counter;
};
struct ncclGin_WeakCounterInc {
    ncclGinCounter_t counter;
};
struct ncclGin_DescriptorSmem {
    ncclGinDescriptorSmem *descriptor;
};

/* What memory a put's buffers are made of (a hint: zinc's copies take any). */
struct ncclGin_SegmentDevice {
};
struct ncclGin_SegmentMixed {
};
struct ncclGin_SegmentHostNuma {
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

/* Every completion action as one of the four zinc carries out (strong and weak alike). */
NCCL_DEVICE_INLINE ncclGin_None zincGinAction(ncclGin_None a)
{
    return a;
}
NCCL_DEVICE_INLINE ncclGin_SignalInc zincGinAction(ncclGin_SignalInc a)
{
    return a;
}
NCCL_DEVICE_INLINE ncclGin_SignalInc zincGinAction(ncclGin_StrongSignalInc a)
{
    return ncclGin_SignalInc{ a.signal };
}
NCCL_DEVICE_INLINE ncclGin_SignalInc zincGinAction(ncclGin_WeakSignalInc a)
{
    return ncclGin_SignalInc{ a.signal };
}
NCCL_DEVICE_INLINE ncclGin_SignalAdd zincGinAction(ncclGin_SignalAdd a)
{
    return a;
}
NCCL_DEVICE_INLINE ncclGin_SignalAdd zincGinAction(ncclGin_StrongSignalAdd a)
{
    return ncclGin_SignalAdd{ a.signal, a.value };
}
NCCL_DEVICE_INLINE ncclGin_SignalAdd zincGinAction(ncclGin_WeakSignalAdd a)
{
    return ncclGin_SignalAdd{ a.signal, a.value };
}
NCCL_DEVICE_INLINE ncclGin_CounterInc zincGinAction(ncclGin_CounterInc a)
{
    return a;
}
NCCL_DEVICE_INLINE ncclGin_CounterInc zincGinAction(ncclGin_WeakCounterInc a)
{
    return ncclGin_CounterInc{ a.counter };
}

template <unsigned backendMask> struct ncclGin_BackendMask {
    ncclDevComm const &comm;
    uint32_t nConnections : 8, connectionId : 8, _ginBackend : 8;
    uint32_t contextId;
    ncclGinResourceSharingMode resourceSharingMode;
    void *_ginHandle;         /* this rank's signal array */
    uint64_t *_signalShadows; /* this rank's shadows */

    NCCL_DEVICE_INLINE
    ncclGin_BackendMask(
        ncclDevComm const &comm, int contextIndex,
        ncclGinResourceSharingMode resourceSharingMode_ = NCCL_GIN_RESOURCE_SHARING_GPU)
        : comm(comm), nConnections(comm.ginConnectionCount), connectionId(0),
          _ginBackend(comm.ginNetDeviceTypes[0]), contextId(0),
          resourceSharingMode(resourceSharingMode_), _ginHandle(comm.ginHandles[0]),
          _signalShadows(comm.ginSignalShadows)
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
              typename Coop = ncclCoopThread, typename DescriptorSmem = ncclGin_None,
              typename SegmentType = ncclGin_SegmentDevice>
    NCCL_DEVICE_INLINE void
    put(ncclTeam team, int peer, ncclWindow_t dstWnd, size_t dstOffset, ncclWindow_t srcWnd,
        size_t srcOffset, size_t bytes, RemoteAction remoteAction = ncclGin_None{},
        LocalAction localAction = ncclGin_None{}, Coop coop = ncclCoopThread{},
        DescriptorSmem descriptor = ncclGin_None{},
        cuda::thread_scope givenRelease = cuda::thread_scope_thread,
        cuda::thread_scope requiredRelease = cuda::thread_scope_device,
        uint32_t optFlags = ncclGinOptFlagsDefault,
        SegmentType bufType = ncclGin_SegmentDevice{}) const
    {
        int world = _world(team, peer);
        if (!_isLsa(world)) {
            zincGinRequest r = _request(ZINC_GIN_OP_PUT, world);
            r.src = (uint64_t)(uintptr_t)ncclGetLocalPointer(srcWnd, srcOffset);
            r.dstOffset = dstOffset;
            r.bytes = bytes;
            r.dstWindow = dstWnd->ginOffset4K;
            _netSubmit(r, zincGinAction(remoteAction), zincGinAction(localAction), coop);
            return;
        }
        char *dst = (char *)ncclGetPeerPointer(dstWnd, dstOffset, team, peer);
        char const *src = (char const *)ncclGetLocalPointer(srcWnd, srcOffset);
        zincGinCopy(coop, dst, src, bytes);
        _complete(team, peer, zincGinAction(remoteAction), zincGinAction(localAction), coop);
    }

    template <typename T, typename RemoteAction = ncclGin_None, typename LocalAction = ncclGin_None,
              typename Coop = ncclCoopThread, typename DescriptorSmem = ncclGin_None,
              typename SegmentType = ncclGin_SegmentDevice>
    NCCL_DEVICE_INLINE void
    put(ncclTeam team, int peer, ncclSymPtr<T> dstElts, ncclSymPtr<T> srcElts, size_t nElts,
        RemoteAction remoteAction = ncclGin_None{}, LocalAction localAction = ncclGin_None{},
        Coop coop = ncclCoopThread{}, DescriptorSmem descriptor = ncclGin_None{},
        cuda::thread_scope givenRelease = cuda::thread_scope_thread,
        cuda::thread_scope requiredRelease = cuda::thread_scope_device,
        uint32_t optFlags = ncclGinOptFlagsDefault,
        SegmentType bufType = ncclGin_SegmentDevice{}) const
    {
        put(team, peer, dstElts.window, dstElts.offset, srcElts.window, srcElts.offset,
            nElts * sizeof(T), remoteAction, localAction, coop, descriptor, givenRelease,
            requiredRelease, optFlags, bufType);
    }

    template <typename T, typename RemoteAction = ncclGin_None, typename Coop = ncclCoopThread,
              typename DescriptorSmem = ncclGin_None>
    NCCL_DEVICE_INLINE void putValue(ncclTeam team, int peer, ncclWindow_t dstWnd, size_t dstOffset,
                                     T value, RemoteAction remoteAction = ncclGin_None{},
                                     Coop coop = ncclCoopThread{},
                                     DescriptorSmem descriptor = ncclGin_None{},
                                     cuda::thread_scope givenRelease = cuda::thread_scope_thread,
                                     cuda::thread_scope requiredRelease = cuda::thread_scope_device,
                                     uint32_t optFlags = ncclGinOptFlagsDefault) const
    {
        static_assert(sizeof(T) <= 8, "putValue carries at most 8 bytes");
        int world = _world(team, peer);
        if (!_isLsa(world)) {
            zincGinRequest r = _request(ZINC_GIN_OP_PUT_VALUE, world);
            memcpy(&r.src, &value, sizeof(T));
            r.dstOffset = dstOffset;
            r.bytes = sizeof(T);
            r.dstWindow = dstWnd->ginOffset4K;
            _netSubmit(r, zincGinAction(remoteAction), ncclGin_None{}, coop);
            return;
        }
        if (coop.thread_rank() == 0)
            *(volatile T *)ncclGetPeerPointer(dstWnd, dstOffset, team, peer) = value;
        _complete(team, peer, zincGinAction(remoteAction), ncclGin_None{}, coop);
    }

    template <typename T, typename RemoteAction = ncclGin_None, typename Coop = ncclCoopThread,
              typename DescriptorSmem = ncclGin_None>
    NCCL_DEVICE_INLINE void putValue(ncclTeam team, int peer, ncclSymPtr<T> dst, T value,
                                     RemoteAction remoteAction = ncclGin_None{},
                                     Coop coop = ncclCoopThread{},
                                     DescriptorSmem descriptor = ncclGin_None{},
                                     cuda::thread_scope givenRelease = cuda::thread_scope_thread,
                                     cuda::thread_scope requiredRelease = cuda::thread_scope_device,
                                     uint32_t optFlags = ncclGinOptFlagsDefault) const
    {
        putValue(team, peer, dst.window, dst.offset, value, remoteAction, coop, descriptor,
                 givenRelease, requiredRelease, optFlags);
    }

    template <typename RemoteAction, typename Coop = ncclCoopThread,
              typename DescriptorSmem = ncclGin_None>
    NCCL_DEVICE_INLINE void signal(ncclTeam team, int peer, RemoteAction remoteAction,
                                   Coop coop = ncclCoopThread(),
                                   DescriptorSmem descriptor = ncclGin_None{},
                                   cuda::thread_scope givenRelease = cuda::thread_scope_thread,
                                   cuda::thread_scope requiredRelease = cuda::thread_scope_device,
                                   uint32_t optFlags = ncclGinOptFlagsDefault) const
    {
        int world = _world(team, peer);
        if (!_isLsa(world)) {
            _netSubmit(_request(ZINC_GIN_OP_SIGNAL, world), zincGinAction(remoteAction),
                       ncclGin_None{}, coop);
            return;
        }
        _complete(team, peer, zincGinAction(remoteAction), ncclGin_None{}, coop);
    }

    /* The copies of LSA puts are done when put returns; what remains is ordering. Requests
     * queued for the engine are done (their sources read) once the engine took them all. */
    template <typename Coop, typename DescriptorSmem = ncclGin_None>
    NCCL_DEVICE_INLINE void flush(Coop coop, cuda::memory_order ord = cuda::memory_order_acquire,
                                  DescriptorSmem descriptor = ncclGin_None{}) const
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

    /* flush() in two halves, for one peer: req remembers the engine's tickets handed out so
     * far (all peers' requests share the FIFO, so waiting for those covers peer's); wait()
     * waits until the engine took them. LSA puts need nothing more than the fence. */
    template <typename Coop = ncclCoopThread, typename DescriptorSmem = ncclGin_None>
    NCCL_DEVICE_INLINE void flushAsync(ncclTeam team, uint32_t peer, ncclGinRequest_t *outRequest,
                                       Coop coop = ncclCoopThread{},
                                       uint32_t optFlags = ncclGinOptFlagsDefault,
                                       DescriptorSmem descriptor = ncclGin_None{}) const
    {
        /* Every thread fills its own request: each reads the tickets after the coop's puts. */
        coop.sync();
        zincGinProxy *px = _net();
        outRequest->opaque[0] = px ? *(volatile uint64_t *)px->head : 0;
        outRequest->opaque[1] = px != nullptr;
    }

    template <typename Coop = ncclCoopThread, typename DescriptorSmem = ncclGin_None>
    NCCL_DEVICE_INLINE void wait(ncclGinRequest_t &request, Coop coop = ncclCoopThread{},
                                 DescriptorSmem descriptor = ncclGin_None{},
                                 cuda::memory_order ord = cuda::memory_order_acquire) const
    {
        coop.sync();
        zincGinProxy *px = _net();
        if (px && request.opaque[1] && coop.thread_rank() == 0)
            while (*(volatile uint64_t *)&px->tail < request.opaque[0] && !_netFailed()) {
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
/* The C-callable GIN functions (NCCL 2.30's ncclGin_C API): an ncclGin behind a plain
 * struct, the completion actions as flags, any coop as ncclCoopAny. Each call runs the
 * ncclGin method of the same name. */
struct ncclGin_C {
    ncclDevComm const &comm;
    uint32_t nConnections : 8, connectionId : 8, _ginBackend : 8;
    uint32_t contextId;
    ncclGinResourceSharingMode resourceSharingMode;
    void *_ginHandle;
    uint64_t *_signalShadows;
    unsigned backendMask;

    NCCL_DEVICE_INLINE
    ncclGin_C(ncclDevComm const &comm_, unsigned backendMask_, int contextIndex,
              ncclGinResourceSharingMode resourceSharingMode_ = NCCL_GIN_RESOURCE_SHARING_GPU)
        : comm(comm_), nConnections(comm_.ginConnectionCount), connectionId(0),
          _ginBackend(comm_.ginNetDeviceTypes[0]), contextId((uint32_t)contextIndex),
          resourceSharingMode(resourceSharingMode_), _ginHandle(comm_.ginHandles[0]),
          _signalShadows(comm_.ginSignalShadows), backendMask(backendMask_)
    {
    }

    NCCL_DEVICE_INLINE ncclGin _gin() const
    {
        return ncclGin(comm, (int)contextId, resourceSharingMode);
    }
};

NCCL_DEVICE_INLINE void ncclGin_C_init(ncclGin_C *net, unsigned backendMask,
                                       ncclDevComm const &comm, int contextIndex)
{
    ::new (net) ncclGin_C(comm, backendMask, contextIndex);
}

NCCL_DEVICE_INLINE void
ncclGin_C_initWithResourceSharingMode(ncclGin_C *net, unsigned backendMask, ncclDevComm const &comm,
                                      int contextIndex,
                                      ncclGinResourceSharingMode resourceSharingMode)
{
    ::new (net) ncclGin_C(comm, backendMask, contextIndex, resourceSharingMode);
}

/* f(remote action) for the signal flags of the C calls. */
template <typename F>
NCCL_DEVICE_INLINE void zincGinWithSignal(bool isSignal, ncclGinSignal_t signalId,
                                          ncclGinSignalOp_t signalOp, uint64_t signalOpArg, F f)
{
    if (!isSignal)
        f(ncclGin_None{});
    else if (signalOp == ncclGinSignalInc)
        f(ncclGin_SignalInc{ signalId });
    else
        f(ncclGin_SignalAdd{ signalId, signalOpArg });
}

NCCL_DEVICE_INLINE void ncclGinPut_v2(ncclGin_C *net, ncclTeam team, int peer, ncclWindow_t dstWin,
                                      size_t dstOffset, ncclWindow_t srcWin, size_t srcOffset,
                                      size_t bytes, bool isSignal, ncclGinSignal_t signalId,
                                      ncclGinSignalOp_t signalOp, uint64_t signalOpArg,
                                      bool isCounter, ncclGinCounter_t counterId, ncclCoopAny coop,
                                      bool isDescriptor, ncclGinDescriptorSmem *descriptor,
                                      cuda::thread_scope givenRelease,
                                      cuda::thread_scope requiredRelease, uint32_t optFlags)
{
    ncclGin gin = net->_gin();
    zincGinWithSignal(isSignal, signalId, signalOp, signalOpArg, [&](auto remote) {
        if (isCounter)
            gin.put(team, peer, dstWin, dstOffset, srcWin, srcOffset, bytes, remote,
                    ncclGin_CounterInc{ counterId }, coop);
        else
            gin.put(team, peer, dstWin, dstOffset, srcWin, srcOffset, bytes, remote, ncclGin_None{},
                    coop);
    });
}

NCCL_DEVICE_INLINE void ncclGinPut(ncclGin_C *net, ncclTeam team, int peer, ncclWindow_t dstWin,
                                   size_t dstOffset, ncclWindow_t srcWin, size_t srcOffset,
                                   size_t bytes, bool isSignal, ncclGinSignal_t signalId,
                                   ncclGinSignalOp_t signalOp, uint64_t signalOpArg, bool isCounter,
                                   ncclGinCounter_t counterId, ncclCoopAny coop, bool isDescriptor,
                                   ncclGinDescriptorSmem *descriptor,
                                   cuda::thread_scope givenRelease,
                                   cuda::thread_scope requiredRelease)
{
    ncclGinPut_v2(net, team, peer, dstWin, dstOffset, srcWin, srcOffset, bytes, isSignal, signalId,
                  signalOp, signalOpArg, isCounter, counterId, coop, isDescriptor, descriptor,
                  givenRelease, requiredRelease, ncclGinOptFlagsDefault);
}

NCCL_DEVICE_INLINE void ncclGinSignal_v2(ncclGin_C *net, ncclTeam team, int peer, bool isSignal,
                                         ncclGinSignal_t signalId, ncclGinSignalOp_t signalOp,
                                         uint64_t signalOpArg, ncclCoopAny coop, bool isDescriptor,
                                         ncclGinDescriptorSmem *descriptor,
                                         cuda::thread_scope givenRelease,
                                         cuda::thread_scope requiredRelease, uint32_t optFlags)
{
    ncclGin gin = net->_gin();
    zincGinWithSignal(isSignal, signalId, signalOp, signalOpArg,
                      [&](auto remote) { gin.signal(team, peer, remote, coop); });
}

NCCL_DEVICE_INLINE void ncclGinSignal(ncclGin_C *net, ncclTeam team, int peer, bool isSignal,
                                      ncclGinSignal_t signalId, ncclGinSignalOp_t signalOp,
                                      uint64_t signalOpArg, ncclCoopAny coop, bool isDescriptor,
                                      ncclGinDescriptorSmem *descriptor,
                                      cuda::thread_scope givenRelease,
                                      cuda::thread_scope requiredRelease)
{
    ncclGinSignal_v2(net, team, peer, isSignal, signalId, signalOp, signalOpArg, coop, isDescriptor,
                     descriptor, givenRelease, requiredRelease, ncclGinOptFlagsDefault);
}

/* size: 1, 2, 4 or 8 bytes of value (its low bytes) go to the peer. */
NCCL_DEVICE_INLINE void ncclGinPutValue_v2(
    ncclGin_C *net, ncclTeam team, int peer, ncclWindow_t dstWin, size_t dstOffset, uint64_t value,
    size_t size, bool isSignal, ncclGinSignal_t signalId, ncclGinSignalOp_t signalOp,
    uint64_t signalOpArg, ncclCoopAny coop, bool isDescriptor, ncclGinDescriptorSmem *descriptor,
    cuda::thread_scope givenRelease, cuda::thread_scope requiredRelease, uint32_t optFlags)
{
    ncclGin gin = net->_gin();
    zincGinWithSignal(isSignal, signalId, signalOp, signalOpArg, [&](auto remote) {
        if (size == 1)
            gin.putValue(team, peer, dstWin, dstOffset, (uint8_t)value, remote, coop);
        else if (size == 2)
            gin.putValue(team, peer, dstWin, dstOffset, (uint16_t)value, remote, coop);
        else if (size == 4)
            gin.putValue(team, peer, dstWin, dstOffset, (uint32_t)value, remote, coop);
        else
            gin.putValue(team, peer, dstWin, dstOffset, value, remote, coop);
    });
}

NCCL_DEVICE_INLINE void
ncclGinPutValue(ncclGin_C *net, ncclTeam team, int peer, ncclWindow_t dstWin, size_t dstOffset,
                uint64_t value, size_t size, bool isSignal, ncclGinSignal_t signalId,
                ncclGinSignalOp_t signalOp, uint64_t signalOpArg, ncclCoopAny coop,
                bool isDescriptor, ncclGinDescriptorSmem *descriptor,
                cuda::thread_scope givenRelease, cuda::thread_scope requiredRelease)
{
    ncclGinPutValue_v2(net, team, peer, dstWin, dstOffset, value, size, isSignal, signalId,
                       signalOp, signalOpArg, coop, isDescriptor, descriptor, givenRelease,
                       requiredRelease, ncclGinOptFlagsDefault);
}

NCCL_DEVICE_INLINE void ncclGinFlush(ncclGin_C *net, ncclCoopAny coop, cuda::memory_order ord)
{
    net->_gin().flush(coop, ord);
}

NCCL_DEVICE_INLINE uint64_t ncclGinReadCounter(ncclGin_C *net, ncclGinCounter_t counter, int bits,
                                               cuda::memory_order ord)
{
    return net->_gin().readCounter(counter, bits, ord);
}

NCCL_DEVICE_INLINE void ncclGinWaitCounter(ncclGin_C *net, ncclCoopAny coop,
                                           ncclGinCounter_t counter, uint64_t least, int bits,
                                           cuda::memory_order ord)
{
    net->_gin().waitCounter(coop, counter, least, bits, ord);
}

NCCL_DEVICE_INLINE uint64_t ncclGinReadSignal(ncclGin_C *net, ncclGinSignal_t signal, int bits,
                                              cuda::memory_order ord)
{
    return net->_gin().readSignal(signal, bits, ord);
}

NCCL_DEVICE_INLINE void ncclGinWaitSignal(ncclGin_C *net, ncclCoopAny coop, ncclGinSignal_t signal,
                                          uint64_t least, int bits, cuda::memory_order ord)
{
    net->_gin().waitSignal(coop, signal, least, bits, ord);
}

NCCL_DEVICE_INLINE void ncclGinResetCounter(ncclGin_C *net, ncclGinCounter_t counter)
{
    net->_gin().resetCounter(counter);
}

NCCL_DEVICE_INLINE void ncclGinResetSignal(ncclGin_C *net, ncclGinSignal_t signal)
{
    net->_gin().resetSignal(signal);
}

NCCL_DEVICE_INLINE uint64_t *ncclGinGetSignalShadowPtr(ncclGin_C *net, ncclGinSignal_t signal)
{
    return net->_gin().getSignalShadowPtr(signal);
}
#endif /* __CUDACC__ */

#endif
