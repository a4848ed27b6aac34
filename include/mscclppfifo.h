/*
 * mscclppfifo.h -- the trigger FIFO of MSCCL++ 0.1's one-sided connections, as zinc serves it.
 *
 * Source-compatible with MSCCL++ 0.1's header of the same name: the same names, trigger types,
 * bit layout and struct members. GPU threads push 16-byte triggers ("put this range", "signal",
 * "flush") into a ring of MSCCLPP_PROXY_FIFO_SIZE slots in pinned host memory; a CPU proxy
 * consumes them in order and moves the data with the copy engine (P2P) or the network.
 *
 *   head (device memory)  next slot a GPU thread claims, by atomicAdd; never wraps (64 bits)
 *   tail (host-mapped)    the proxy's count of consumed slots as the GPU last saw it: the proxy
 *                         publishes it every MSCCLPP_PROXY_FIFO_FLUSH_COUNTER triggers and after
 *                         every trigger with mscclppSync, so it may lag behind, never lead
 *   slot                  empty while its first word is 0; the proxy zeroes it when done,
 *                         before it publishes a tail past it (so a GPU thread that saw the
 *                         tail pass its slot's previous trigger writes without reading it)
 *
 * A trigger, two 64-bit words:
 *
 *   value[0]   bits  0-31 dataSize        bits 32-63 srcDataOffset
 *   value[1]   bits  0-31 dstDataOffset   bits 32-41 connId   bits 42-44 type
 *              bits 45-63 (zinc; zero in MSCCL++ 0.1) a signal's count, its low 19 bits
 *
 * so offsets and sizes of FIFO transfers must be below 4 GiB, and a communicator has at most
 * 1024 connections. zinc adds three members at the end of mscclppConcurrentFifo (zincAbort,
 * zincError, zincTimeoutNs) that bound every spin of the device methods; see mscclpp.h.
 *
 * A trigger with mscclppFlag names the count it signals: the kernel may raise the connection's
 * count again before the proxy serves it, so the proxy cannot read the count from device
 * memory; it rebuilds it from these bits and the count it signalled last. A trigger without
 * them (a kernel built against MSCCL++ 0.1's header) is served as before, by copying the
 * kernel's counter, which a later signal of that kernel may already have raised.
 *
 * The header is C++ as MSCCL++ 0.1's is (an enum with a fixed underlying type, alignas); from C
 * it declares the same types with C spellings.
 */
#ifndef MSCCLPPFIFO_H_
#define MSCCLPPFIFO_H_

#include <stdint.h>

#ifndef MSCCLPP_PROXY_FIFO_SIZE
#define MSCCLPP_PROXY_FIFO_SIZE 128
#endif
#ifndef MSCCLPP_PROXY_FIFO_FLUSH_COUNTER
#define MSCCLPP_PROXY_FIFO_FLUSH_COUNTER 4
#endif

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
typedef enum : uint64_t {
    mscclppData = 0x1,
    mscclppFlag = 0x2,
    mscclppSync = 0x4
} mscclppTriggerType_t;
#else
typedef enum { mscclppData = 0x1, mscclppFlag = 0x2, mscclppSync = 0x4 } mscclppTriggerType_t;
#endif

#define MSCCLPP_BITS_SIZE   32
#define MSCCLPP_BITS_OFFSET 32
#define MSCCLPP_BITS_TYPE   3
#define MSCCLPP_BITS_CONNID 10
/* zinc: where a signalling trigger carries the low bits of its count (value[1]). */
#define ZINC_SIGNAL_SHIFT 45
#define ZINC_SIGNAL_BITS  19

/* One work element of the FIFO (the layout above). */
union __attribute__((aligned(16))) mscclppTrigger {
    uint64_t value[2];
    struct {
        uint64_t dataSize : MSCCLPP_BITS_SIZE;
        uint64_t srcDataOffset : MSCCLPP_BITS_OFFSET;
        uint64_t dstDataOffset : MSCCLPP_BITS_OFFSET;
        uint64_t connId : MSCCLPP_BITS_CONNID;
        uint64_t type : MSCCLPP_BITS_TYPE;
        uint64_t : (64 - MSCCLPP_BITS_OFFSET - MSCCLPP_BITS_CONNID - MSCCLPP_BITS_TYPE);
    } fields;
};
typedef union mscclppTrigger mscclppTrigger;
typedef mscclppTrigger *mscclppTrigger_t;

#ifdef __CUDACC__
/* zinc: why a device wait gave up, as recorded in *zincError: (reason << 16) | connId. */
#define ZINC_DEV_GAVE_UP_PUSH  1 /* no free FIFO slot: does the proxy run (mscclppProxyLaunch)? */
#define ZINC_DEV_GAVE_UP_FLUSH 2 /* a flush did not complete */
#define ZINC_DEV_GAVE_UP_WAIT  3 /* no signal arrived */

/* zinc: a bounded spin. Every 1024 polls it checks the communicator's abort word (set by the
 * proxy when a peer died, or after any give-up) and the deadline (ZINC_TIMEOUT at setup);
 * past either, the caller stops waiting. A connection made elsewhere (zincAbort NULL) spins
 * without bound, as MSCCL++ 0.1 does. */
struct zincDevSpin {
    uint32_t *abortWord, *errorWord;
    uint64_t timeoutNs, start;
    uint32_t polls;
    __forceinline__ __device__ zincDevSpin(uint32_t *a, uint32_t *e, uint64_t t)
        : abortWord(a), errorWord(e), timeoutNs(t), start(0), polls(0)
    {
    }
    __forceinline__ __device__ bool giveUp(uint32_t reason, uint32_t connId)
    {
        if (!abortWord || (++polls & 1023) != 0) return false;
        if (*(volatile uint32_t *)abortWord) return true;
        uint64_t now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (start == 0) start = now;
        if (now - start <= timeoutNs) return false;
        atomicCAS((unsigned int *)errorWord, 0u, (reason << 16) | connId);
        *(volatile uint32_t *)abortWord = 1;
        return true;
    }
};
#endif

/* Many GPU threads push, one proxy consumes (the layout and invariants are described above). */
struct mscclppConcurrentFifo {
#ifdef __CUDACC__
    /* Claim a slot, wait for it to be free, fill it. Returns the slot's sequence number, for
     * flushes that wait until the proxy has handled it. */
    __forceinline__ __device__ uint64_t push(uint64_t type, uint64_t dstDataOffset,
                                             uint64_t srcDataOffset, uint64_t dataSize,
                                             uint64_t zincSignal = 0)
    {
        uint64_t head = atomicAdd((unsigned long long *)triggerFifoHead, 1ull);
        zincDevSpin spin(zincAbort, zincError, zincTimeoutNs);
        /* zinc's proxy clears a slot before it publishes a tail past it, so a tail past the
         * slot's previous trigger says that the slot is free: no second read over PCIe (of the
         * slot itself, as MSCCL++ 0.1 does), which cost ~1 us of every push. */
        while (head >= MSCCLPP_PROXY_FIFO_SIZE + *(volatile uint64_t *)triggerFifoTail)
            if (spin.giveUp(ZINC_DEV_GAVE_UP_PUSH, (uint32_t)connId)) return head;
        uint64_t *slot = triggerFifo[head % MSCCLPP_PROXY_FIFO_SIZE].value;
        uint64_t w0 = (srcDataOffset << MSCCLPP_BITS_SIZE) | (dataSize & 0xffffffffull);
        uint64_t w1 = (((type << MSCCLPP_BITS_CONNID) | (uint64_t)connId) << MSCCLPP_BITS_OFFSET) |
                      (dstDataOffset & 0xffffffffull) | (zincSignal << ZINC_SIGNAL_SHIFT);
        /* What this thread (and, after the caller's __syncthreads, its block) wrote must be
         * visible to the copy engine before the proxy can read the trigger. */
        __threadfence_system();
        asm volatile("st.volatile.global.v2.u64 [%0], {%1,%2};" ::"l"(slot), "l"(w0), "l"(w1)
                     : "memory");
        return head;
    }

    /* zinc: wait until the proxy has handled the trigger of sequence number seq. */
    __forceinline__ __device__ void zincWaitHandled(uint64_t seq)
    {
        zincDevSpin spin(zincAbort, zincError, zincTimeoutNs);
        while (*(volatile uint64_t *)&triggerFifo[seq % MSCCLPP_PROXY_FIFO_SIZE] != 0 &&
               *(volatile uint64_t *)triggerFifoTail <= seq)
            if (spin.giveUp(ZINC_DEV_GAVE_UP_FLUSH, (uint32_t)connId)) return;
    }
#endif
    mscclppTrigger *triggerFifo; /* MSCCLPP_PROXY_FIFO_SIZE slots in pinned host memory */
    uint64_t *triggerFifoTail;   /* the proxy's published tail (host-mapped in zinc) */
    uint64_t *triggerFifoHead;   /* device memory; only GPU threads touch it */
    int connId;
    /* zinc additions (not in MSCCL++ 0.1): */
    uint32_t *zincAbort;    /* host-mapped; nonzero makes every device wait give up */
    uint32_t *zincError;    /* host-mapped; the first give-up is recorded here */
    uint64_t zincTimeoutNs; /* how long a device wait may spin (ZINC_TIMEOUT) */
};

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(mscclppTrigger) == 16, "a trigger is 16 bytes");
#else
_Static_assert(sizeof(mscclppTrigger) == 16, "a trigger is 16 bytes");
#endif

#endif /* MSCCLPPFIFO_H_ */
