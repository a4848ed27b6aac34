/*
 * mscclpp.h -- MSCCL++ 0.1's one-sided connection API, served by zinc's libmscclpp.so.
 *
 * Source-compatible with MSCCL++ 0.1's public header: the same names, enum values, struct
 * members, constants and function signatures, so a program written for MSCCL++ 0.1 builds
 * against this header unchanged and links with -lmscclpp.
 *
 * Model. A connection joins this rank and a remote rank over a buffer on each side; it is named
 * by (remoteRank, tag) and must be declared on both sides (mscclppConnect), then every rank calls
 * mscclppConnectionSetup. A kernel gets the connection as a mscclppDevConn_t and moves data
 * one-sidedly:
 *
 *   put()            [non-blocking] copy a range of localBuff into the peer's buffer
 *   signal()         [non-blocking] tell the peer that what was put before is there
 *   putWithSignal()  both in one trigger
 *   flush()          [blocking] wait until everything put so far has left localBuff
 *   wait()           [blocking] wait for the peer's next signal
 *
 * put / signal / flush go through a FIFO to a CPU proxy that copies with the copy engine
 * (mscclppProxyLaunch starts it). On P2P connections the peer's buffer and signal words are
 * also mapped, so a kernel may store into remoteBuff itself: putDirect / signalDirect /
 * waitDirect. The sender may reuse a range after flush(); the receiver may read it after
 * wait().
 *
 * zinc: every device spin (FIFO full, flush, wait) is bounded by ZINC_TIMEOUT and gives up at
 * once when the proxy sees a peer die; mscclppProxyStop then reports what happened. zinc's
 * transports: mscclppTransportP2P (GPU memory, same host), mscclppTransportSHM (host memory of
 * processes of one host, driven by host threads through zinc.h's zincConn* functions); not yet
 * mscclppTransportIB.
 *
 * From C: the types and functions are the same, without default arguments (pass ibDev
 * explicitly) and without mscclppRegisteredMemory's contents (a std::vector in MSCCL++ 0.1), so
 * mscclppRegisterBuffer and mscclppRegisteredBufferWrite need C++. mscclppResult_t has the
 * values of ncclResult_t.
 */
#ifndef MSCCLPP_H_
#define MSCCLPP_H_

#define MSCCLPP_MAJOR   0
#define MSCCLPP_MINOR   1
#define MSCCLPP_PATCH   0
#define MSCCLPP_VERSION (MSCCLPP_MAJOR * 10000 + MSCCLPP_MINOR * 100 + MSCCLPP_PATCH)

/* Every MSCCLPP_PROXY_FIFO_FLUSH_COUNTER triggers the proxy publishes its tail to the GPU; a
 * large enough FIFO makes a stale tail harmless. */
#define MSCCLPP_PROXY_FIFO_SIZE          128
#define MSCCLPP_PROXY_FIFO_FLUSH_COUNTER 4

#include <mscclppfifo.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
#include <vector>
#define MSCCLPP_DEFAULT_ARG(v) = v
#else
#define MSCCLPP_DEFAULT_ARG(v)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The two signal counters of one side of a connection. */
struct __attribute__((aligned(16))) mscclppDevConnSignalEpochId {
    /* Raised by every signal of this side; only this side writes it. The proxy stores the
     * count a trigger names in the peer's `proxy` word (signal()), or the GPU stores it there
     * itself (signalDirect()). */
    uint64_t device;
    /* The peer's signal count, written by the peer's proxy or GPU; wait() watches it. Do not
     * mix signal() and signalDirect() on one connection without a flush() between them: a
     * proxy store still in flight could lower the count a direct store raised. zinc: at most
     * 524287 signalDirect() between two proxied signals of one connection (the trigger carries
     * the count's low 19 bits, mscclppfifo.h). */
    uint64_t proxy;
};

typedef uint32_t mscclppBufferHandle_t;

#ifdef __CUDACC__
/* zinc: acquire load of a signal word written by another GPU or the copy engine. */
__forceinline__ __device__ uint64_t zincLoadAcquire(const uint64_t *p)
{
    uint64_t v;
#if __CUDA_ARCH__ >= 700
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
#else
    v = *(volatile const uint64_t *)p;
    __threadfence_system();
#endif
    return v;
}
#endif

/* The fields both sides of a connection share with MSCCL++ 0.1 (its mscclppBaseConn). */
#define MSCCLPP_BASE_CONN_FIELDS                                                                  \
    int remoteRank;                                                                               \
    int tag;                                                                                      \
    /* This side's buffer (device memory for P2P, any host memory for SHM). */                    \
    void *localBuff;                                                                              \
    /* This side's signal words, and the peer's (mapped here; P2P and SHM). */                    \
    struct mscclppDevConnSignalEpochId *localSignalEpochId;                                       \
    struct mscclppDevConnSignalEpochId *remoteSignalEpochId;                                      \
    /* How many signals this side has waited for: wait() raises it, then waits for the signal     \
     * word to reach it. */                                                                       \
    uint64_t *waitEpochId;                                                                        \
    /* The peer's buffer, mapped here: kernels may store into it (P2P); host threads do (SHM). */ \
    void *remoteBuff;

struct mscclppBaseConn {
    MSCCLPP_BASE_CONN_FIELDS
};

/* One side of a connection, as a kernel uses it: the base fields, then the FIFO (C++ derives
 * it from mscclppBaseConn as MSCCL++ 0.1 does; C repeats the fields, the layout is the same).
 * Copy it to the device by value (e.g. into __constant__ memory); the pointers inside stay
 * valid until mscclppCommDestroy. */
#ifdef __cplusplus
struct mscclppDevConn : mscclppBaseConn {
#else
struct mscclppDevConn {
    MSCCLPP_BASE_CONN_FIELDS
#endif
#ifdef __CUDACC__
    __forceinline__ __device__ void put(uint64_t dstDataOffset, uint64_t srcDataOffset,
                                        uint64_t dataSize)
    {
        /* An empty trigger would read as a free slot, so nothing is pushed for 0 bytes. */
        if (dataSize) fifo.push(mscclppData, dstDataOffset, srcDataOffset, dataSize);
    }

    __forceinline__ __device__ void put(uint64_t dataOffset, uint64_t dataSize)
    {
        put(dataOffset, dataOffset, dataSize);
    }

    /* The trigger names the count it signals (mscclppfifo.h): the proxy may serve it after this
     * thread raised the count again. */
    __forceinline__ __device__ void signal()
    {
        fifo.push(mscclppFlag, 0, 0, 1, epochIncrement());
    }

    __forceinline__ __device__ void putWithSignal(uint64_t dstDataOffset, uint64_t srcDataOffset,
                                                  uint64_t dataSize)
    {
        uint64_t e = epochIncrement();
        if (dataSize)
            fifo.push(mscclppData | mscclppFlag, dstDataOffset, srcDataOffset, dataSize, e);
        else
            fifo.push(mscclppFlag, 0, 0, 1, e);
    }

    __forceinline__ __device__ void putWithSignal(uint64_t dataOffset, uint64_t dataSize)
    {
        putWithSignal(dataOffset, dataOffset, dataSize);
    }

    __forceinline__ __device__ void putWithSignalAndFlush(uint64_t dstDataOffset,
                                                          uint64_t srcDataOffset, uint64_t dataSize)
    {
        uint64_t e = epochIncrement();
        uint64_t seq = dataSize ? fifo.push(mscclppData | mscclppFlag | mscclppSync, dstDataOffset,
                                            srcDataOffset, dataSize, e)
                                : fifo.push(mscclppFlag | mscclppSync, 0, 0, 1, e);
        fifo.zincWaitHandled(seq);
    }

    __forceinline__ __device__ void putWithSignalAndFlush(uint64_t dataOffset, uint64_t dataSize)
    {
        putWithSignalAndFlush(dataOffset, dataOffset, dataSize);
    }

    __forceinline__ __device__ void flush()
    {
        fifo.zincWaitHandled(fifo.push(mscclppSync, 0, 0, 1));
    }

    /* The calling threads copy the range into the peer's buffer themselves (P2P only, where
     * remoteBuff is mapped). Not bounds-checked: the range must lie inside both buffers. */
    __forceinline__ __device__ void putDirect(uint64_t dstDataOffset, uint64_t srcDataOffset,
                                              uint64_t dataSize, uint32_t threadId,
                                              uint32_t numThreads)
    {
        const char *src = (const char *)localBuff + srcDataOffset;
        char *dst = (char *)remoteBuff + dstDataOffset;
        if ((((uintptr_t)src | (uintptr_t)dst | dataSize) & 15) == 0) {
            /* Four loads in flight per thread before the stores: one at a time leaves a remote
             * link mostly idle. */
            const int4 *s4 = (const int4 *)src;
            int4 *d4 = (int4 *)dst;
            uint64_t n = dataSize / 16, i = threadId;
            for (; i + 3 * numThreads < n; i += 4 * numThreads) {
                int4 a = s4[i], b = s4[i + numThreads], c = s4[i + 2 * numThreads],
                     d = s4[i + 3 * numThreads];
                d4[i] = a;
                d4[i + numThreads] = b;
                d4[i + 2 * numThreads] = c;
                d4[i + 3 * numThreads] = d;
            }
            for (; i < n; i += numThreads) d4[i] = s4[i];
        } else if ((((uintptr_t)src | (uintptr_t)dst) & 7) == 0) {
            for (uint64_t i = threadId; i < dataSize / 8; i += numThreads)
                ((uint64_t *)dst)[i] = ((const uint64_t *)src)[i];
            for (uint64_t i = dataSize / 8 * 8 + threadId; i < dataSize; i += numThreads)
                dst[i] = src[i];
        } else {
            for (uint64_t i = threadId; i < dataSize; i += numThreads) dst[i] = src[i];
        }
    }

    __forceinline__ __device__ void putDirect(uint64_t dataOffset, uint64_t dataSize,
                                              uint32_t threadId, uint32_t numThreads)
    {
        putDirect(dataOffset, dataOffset, dataSize, threadId, numThreads);
    }

    /* After putDirect by every thread involved (and a barrier among them), one thread signals:
     * the data is made visible system-wide before the raised count lands in the peer's
     * `proxy` word. */
    __forceinline__ __device__ void signalDirect()
    {
        __threadfence_system();
        epochIncrement();
        uint64_t e = *(volatile uint64_t *)&localSignalEpochId->device;
        uint64_t *dst = &remoteSignalEpochId->proxy;
#if __CUDA_ARCH__ >= 700
        asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(dst), "l"(e) : "memory");
#else
        *(volatile uint64_t *)dst = e;
#endif
    }

    __forceinline__ __device__ void wait()
    {
        uint64_t want = ++(*waitEpochId);
        zincDevSpin spin(fifo.zincAbort, fifo.zincError, fifo.zincTimeoutNs);
        while (zincLoadAcquire(&localSignalEpochId->proxy) < want)
            if (spin.giveUp(ZINC_DEV_GAVE_UP_WAIT, (uint32_t)fifo.connId)) return;
    }

    /* The same as wait(): both kinds of signal land in the `proxy` word. */
    __forceinline__ __device__ void waitDirect()
    {
        wait();
    }

    /* Raise this side's signal count; returns its low ZINC_SIGNAL_BITS bits. */
    __forceinline__ __device__ uint64_t epochIncrement()
    {
        uint64_t e = *(volatile uint64_t *)&localSignalEpochId->device + 1;
        *(volatile uint64_t *)&localSignalEpochId->device = e;
        return e & ((1ull << ZINC_SIGNAL_BITS) - 1);
    }
#endif /* __CUDACC__ */

    /* Triggers for this connection's proxy (P2P: the communicator's FIFO). */
    struct mscclppConcurrentFifo fifo;

    /* zinc addition: the library's host-side state of this connection (zincConn* functions). */
    void *zincHostConn;
};

#ifdef __cplusplus
/* MSCCL++ 0.1's host-side view of a connection (its proxy's interface); declared for source
 * compatibility, zinc hands none out. Host threads use zinc.h's zincConn* functions. */
struct mscclppHostConn {
    virtual ~mscclppHostConn() = default;
    virtual void put(uint64_t dstDataOffset, uint64_t srcDataOffset, uint64_t dataSize) = 0;
    virtual void put(mscclppBufferHandle_t dst, uint64_t dstDataOffset, mscclppBufferHandle_t src,
                     uint64_t srcDataOffset, uint64_t dataSize) = 0;
    virtual void signal() = 0;
    virtual void wait() = 0;
    virtual void flush() = 0;
};
typedef struct mscclppHostConn mscclppHostConn_t;
#endif

typedef struct mscclppComm *mscclppComm_t;
typedef struct mscclppDevConn mscclppDevConn_t;

#define MSCCLPP_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[MSCCLPP_UNIQUE_ID_BYTES];
} mscclppUniqueId;

/* A registered buffer of each connection's peer, mapped here (mscclppRegisterBuffer). */
/* An IB memory region as MSCCL++ 0.1 describes it (zinc has no IB transport yet: IbMr is
 * always NULL). */
struct ibv_mr;
struct mscclppIbMrInfo {
    uint64_t addr;
    uint32_t rkey;
};
struct mscclppIbMr {
    struct ibv_mr *mr;
    void *buff;
    struct mscclppIbMrInfo info;
};

struct mscclppRegisteredMemoryP2P {
    void *remoteBuff;
    struct mscclppIbMr *IbMr;
};

#ifdef __cplusplus
struct mscclppRegisteredMemory {
    std::vector<mscclppRegisteredMemoryP2P> p2p; /* one per connection, in connection order */
};
#else
struct mscclppRegisteredMemory; /* C++ only: holds a std::vector */
#endif
typedef struct mscclppRegisteredMemory mscclppRegisteredMemory;

typedef enum {
    mscclppSuccess = 0,
    mscclppUnhandledCudaError = 1,
    mscclppSystemError = 2,
    mscclppInternalError = 3,
    mscclppInvalidArgument = 4,
    mscclppInvalidUsage = 5,
    mscclppRemoteError = 6,
    mscclppInProgress = 7,
    mscclppNumResults = 8
} mscclppResult_t;

/* A new unique id; one process makes it and passes it to the others (mscclppCommInitRankFromId).
 * With ZINC_COMM_ID set every rank gets the same id. */
mscclppResult_t mscclppGetUniqueId(mscclppUniqueId *uniqueId);

typedef enum {
    mscclppTransportP2P = 0,
    mscclppTransportSHM = 1, /* host memory of processes of one host (zinc) */
    mscclppTransportIB = 2,  /* not yet in zinc */
} mscclppTransport_t;

/* Join a communicator of nranks ranks; rank 0 serves the rendezvous at ipPortPair ("ip:port"),
 * the others connect to it. The calling thread's CUDA device (if any) is the one used. */
mscclppResult_t mscclppCommInitRank(mscclppComm_t *comm, int nranks, const char *ipPortPair,
                                    int rank);

/* The same with a unique id from mscclppGetUniqueId. */
mscclppResult_t mscclppCommInitRankFromId(mscclppComm_t *comm, int nranks, mscclppUniqueId id,
                                          int rank);

/* Allgather over the bootstrap: rank r's size bytes are at data + r * size. */
mscclppResult_t mscclppBootstrapAllGather(mscclppComm_t comm, void *data, int size);

/* Every rank waits for every other. */
mscclppResult_t mscclppBootstrapBarrier(mscclppComm_t comm);

/* Stop the proxy if running, unmap and free everything of the communicator. */
mscclppResult_t mscclppCommDestroy(mscclppComm_t comm);

const char *mscclppGetErrorString(mscclppResult_t result);

/* Declare a connection to remoteRank named by tag over localBuff (buffSize bytes); remoteRank
 * declares its side the same way. Setup happens in mscclppConnectionSetup. ibDev names the IB
 * device (NULL otherwise). */
mscclppResult_t mscclppConnect(mscclppComm_t comm, int remoteRank, int tag, void *localBuff,
                               uint64_t buffSize, mscclppTransport_t transportType,
                               const char *ibDev MSCCLPP_DEFAULT_ARG(0));

/* A connection whose buffer comes later (mscclppRegisterBufferForConnection). */
mscclppResult_t mscclppConnectWithoutBuffer(mscclppComm_t comm, int remoteRank, int tag,
                                            mscclppTransport_t transportType,
                                            const char *ibDev MSCCLPP_DEFAULT_ARG(0));

/* Give connection connIdx (in order of declaration) its buffer before setup; the handle of the
 * first data buffer is 1 (0 is the signal words). zinc: one data buffer per connection. */
mscclppResult_t mscclppRegisterBufferForConnection(mscclppComm_t comm, int connIdx, void *localBuff,
                                                   uint64_t buffSize,
                                                   mscclppBufferHandle_t *handle);

/* Collective: set up every connection declared since the last call. A declaration without a
 * counterpart on its peer fails on both sides, naming the rank and tag. */
mscclppResult_t mscclppConnectionSetup(mscclppComm_t comm);

/* The connections, in the order they were declared (the array belongs to the communicator). */
mscclppResult_t mscclppGetAllDeviceConnections(mscclppComm_t comm, mscclppDevConn_t **devConns,
                                               int *nConns);

/* The connection to remoteRank named tag. */
mscclppResult_t mscclppGetDeviceConnection(mscclppComm_t comm, int remoteRank, int tag,
                                           mscclppDevConn_t **devConn);

/* Start the proxy that serves the kernels' triggers. zinc: a thread of the library for now. */
mscclppResult_t mscclppProxyLaunch(mscclppComm_t comm);

/* Collective: stop the proxy once every rank got here; reports a transfer the proxy refused or
 * a device wait that gave up. */
mscclppResult_t mscclppProxyStop(mscclppComm_t comm);

mscclppResult_t mscclppCommRank(mscclppComm_t comm, int *rank);
mscclppResult_t mscclppCommSize(mscclppComm_t comm, int *size);

/* Seconds any bootstrap wait of this library may take (ZINC_TIMEOUT otherwise). */
mscclppResult_t mscclppSetBootstrapConnTimeout(int timeout);

/* Where log lines go: each call gets one line, newline included. */
typedef void (*mscclppLogHandler_t)(const char *msg);
void mscclppDefaultLogHandler(const char *msg);
mscclppResult_t mscclppSetLogHandler(mscclppLogHandler_t handler);

/* Collective over the connections: register local_memory (size bytes) with every connection's
 * peer; regMem->p2p[i].remoteBuff is then the buffer connection i's peer registered. */
mscclppResult_t mscclppRegisterBuffer(mscclppComm_t comm, void *local_memory, size_t size,
                                      mscclppRegisteredMemory *regMem);

/* Copy size bytes from srcBuff + srcOffset to every peer's registered buffer at dstOffset, on
 * stream (P2P; SHM copies before returning and takes stream 0). */
mscclppResult_t mscclppRegisteredBufferWrite(mscclppComm_t comm, mscclppRegisteredMemory *regMem,
                                             void *srcBuff, size_t size, uint32_t srcOffset,
                                             uint32_t dstOffset, int64_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* C and C++ callers must agree on the connection's layout (the library is C, kernels C++). */
#if defined(__LP64__) || defined(_LP64)
#ifdef __cplusplus
static_assert(sizeof(mscclppDevConn) == 112, "mscclppDevConn layout");
#else
_Static_assert(sizeof(struct mscclppDevConn) == 112, "mscclppDevConn layout");
#endif
#endif

#endif /* MSCCLPP_H_ */
