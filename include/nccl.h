/*
 * nccl.h -- the NCCL 2.30 application interface, as implemented by zinc.
 *
 * Every type, enumerator, macro, struct layout and function signature here matches the
 * NCCL 2.30.7 header, so an object file compiled against either header links and runs
 * against either library. Programs built against an older NCCL header (2.19 and later) keep
 * working: their structs are prefixes of these, and the library reads each by its size and
 * version. tests/abi checks both claims (2.30.7's facts are stored in tests/abi/ref/; the
 * CUDA toolkit's 2.28.9 header is the older reference).
 *
 * Differences from the reference header that do not change the ABI:
 *  - the CUDA headers are included only when they exist; without them cudaStream_t is
 *    declared the way the CUDA runtime declares it (a pointer to struct CUstream_st), so
 *    host-only programs build on machines without a CUDA toolkit;
 *  - comments describe zinc's behaviour (host communicators, deadlines, errors).
 *
 * zinc's own extensions live in zinc.h.
 */
#ifndef NCCL_H_
#define NCCL_H_

#if defined(__has_include)
#if __has_include(<cuda_runtime.h>) && !defined(ZINC_NO_CUDA_HEADERS)
#define ZINC_NCCL_H_HAVE_CUDA 1
#endif
#endif

#ifdef ZINC_NCCL_H_HAVE_CUDA
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#if __cplusplus && CUDART_VERSION >= 11080
#include <cuda_fp8.h>
#endif
#else
/* Same declaration as the CUDA runtime's, so the type is identical with or without it. */
typedef struct CUstream_st *cudaStream_t;
#endif

#define NCCL_MAJOR        2
#define NCCL_MINOR        30
#define NCCL_PATCH        7
#define NCCL_SUFFIX       ""

#define NCCL_VERSION_CODE 23007
#define NCCL_VERSION(X, Y, Z) \
    (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* A communicator handle; zinc's struct is private. */
typedef struct ncclComm *ncclComm_t;
/* A registered memory window handle. */
typedef struct ncclWindow_vidmem *ncclWindow_t;
#define NCCL_COMM_NULL NULL

/* The rendezvous token every rank of a new communicator passes to init. zinc stores the
 * root's socket address and a random 64-bit job magic in it. */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* Result codes. */
typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    /* A wait that was given a time limit ran out of it (the device API's timed barrier waits).
     * zinc's own deadlines (ZINC_TIMEOUT) report ncclRemoteError naming the peer instead: a
     * program built against an older header does not know this value. */
    ncclTimeout = 8,
    ncclNumResults = 9
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR    -1
#define NCCL_UNDEF_FLOAT      -1.0f

/* The magic of NCCL_CONFIG_INITIALIZER (the library checks it). */
#define NCCL_API_MAGIC 0xcafebeef

/* ncclCommWindowRegister flags. */
#define NCCL_WIN_DEFAULT            0x00
#define NCCL_WIN_COLL_SYMMETRIC     0x01
#define NCCL_WIN_STRICT_ORDERING    0x02

#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy values. */
#define NCCL_CTA_POLICY_DEFAULT    0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO       0x02

/* ncclCommShrink flags. */
#define NCCL_SHRINK_DEFAULT 0x00 /* shrink a healthy parent */
#define NCCL_SHRINK_ABORT   0x01 /* abort the parent's pending work first, then shrink */

/* ncclCommRevoke flags (only the default exists). */
#define NCCL_REVOKE_DEFAULT 0x00

/* Per-communicator configuration. Start from NCCL_CONFIG_INITIALIZER and set what you need;
 * fields left at NCCL_CONFIG_UNDEF_* take the library default. */
typedef struct ncclConfig_v23000 {
    /* Filled by the initializer; the library uses them to recognise the struct's version. */
    size_t size;
    unsigned int magic;
    unsigned int version;
    /* User-settable fields. */
    int blocking;
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char *netName;
    int splitShare;
    int trafficClass;
    const char *commName;
    int collnetEnable;
    int CTAPolicy;
    int shrinkShare;
    int nvlsCTAs;
    int nChannelsPerNetPeer;
    int nvlinkCentricSched;
    /* Since 2.29: 0 (no CUDA graphs), 1 (one graph) or 2 (several graphs, or graphs mixed with
     * eager calls; the default). */
    int graphUsageMode;
    /* Since 2.29: contexts of ncclPutSignal / ncclSignal / ncclWaitSignal (default 1; 0 turns
     * them off for this communicator). */
    int numRmaCtx;
    /* Since 2.30: most peers one rank's send/recv (and alltoall, gather, scatter) works with
     * at once; default: every rank. */
    int maxP2pPeers;
    /* Since 2.30.5: 1 orders the communicator's kernels captured into graphs (the default), 0
     * leaves ordering to the application (needs graphUsageMode 0 or 1). */
    int graphStreamOrdering;
} ncclConfig_t;

/* Every ncclConfig_t must start from this value; the library rejects one that does not. */
#define NCCL_CONFIG_INITIALIZER                              \
    {                                                        \
        sizeof(ncclConfig_t),      /* size */                \
            NCCL_API_MAGIC,        /* magic */               \
            NCCL_VERSION_CODE,     /* version */             \
            NCCL_CONFIG_UNDEF_INT, /* blocking */            \
            NCCL_CONFIG_UNDEF_INT, /* cgaClusterSize */      \
            NCCL_CONFIG_UNDEF_INT, /* minCTAs */             \
            NCCL_CONFIG_UNDEF_INT, /* maxCTAs */             \
            NCCL_CONFIG_UNDEF_PTR, /* netName */             \
            NCCL_CONFIG_UNDEF_INT, /* splitShare */          \
            NCCL_CONFIG_UNDEF_INT, /* trafficClass */        \
            NCCL_CONFIG_UNDEF_PTR, /* commName */            \
            NCCL_CONFIG_UNDEF_INT, /* collnetEnable */       \
            NCCL_CONFIG_UNDEF_INT, /* CTAPolicy */           \
            NCCL_CONFIG_UNDEF_INT, /* shrinkShare */         \
            NCCL_CONFIG_UNDEF_INT, /* nvlsCTAs */            \
            NCCL_CONFIG_UNDEF_INT, /* nChannelsPerNetPeer */ \
            NCCL_CONFIG_UNDEF_INT, /* nvlinkCentricSched */  \
            NCCL_CONFIG_UNDEF_INT, /* graphUsageMode */      \
            NCCL_CONFIG_UNDEF_INT, /* numRmaCtx */           \
            NCCL_CONFIG_UNDEF_INT, /* maxP2pPeers */         \
            NCCL_CONFIG_UNDEF_INT, /* graphStreamOrdering */ \
    }

/* Result of ncclGroupSimulateEnd. */
typedef struct ncclSimInfo_v22200 {
    size_t size;
    unsigned int magic;
    unsigned int version;
    float estimatedTime;
} ncclSimInfo_t;

/* Every ncclSimInfo_t must start from this value. */
#define NCCL_SIM_INFO_INITIALIZER                  \
    {                                              \
        sizeof(ncclSimInfo_t), /* size */          \
            0x74685283,        /* magic */         \
            NCCL_VERSION_CODE, /* version */       \
            NCCL_UNDEF_FLOAT   /* estimatedTime */ \
    }

/* Allocate / free memory that peers can map (CUDA cuMem allocations). */
ncclResult_t ncclMemAlloc(void **ptr, size_t size);
ncclResult_t pncclMemAlloc(void **ptr, size_t size);

ncclResult_t ncclMemFree(void *ptr);
ncclResult_t pncclMemFree(void *ptr);

/* The NCCL API level implemented (23007); zinc's own version is in zinc.h. */
ncclResult_t ncclGetVersion(int *version);
ncclResult_t pncclGetVersion(int *version);

/* Create the token for a new communicator. Call once, share it with every rank. With
 * ZINC_COMM_ID / NCCL_COMM_ID set, every rank gets the same token without sharing it. */
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId);

/* Create a communicator with a configuration; config may be NULL. */
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t *config);

/* Create a communicator; blocks until all nranks ranks have joined (or the deadline). */
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);

/* Create ndev communicators in this process, one per CUDA device (devlist or 0..ndev-1). */
ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist);
ncclResult_t pncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist);

/* Complete all outstanding work; the communicator can then be destroyed without blocking. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);

/* Free the communicator's local resources. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

/* Stop all work on the communicator and free it; safe from any thread. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/* Stop in-flight work so that the communicator can be destroyed, split or shrunk. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/* Split into sub-communicators by color, ordered by key; NCCL_SPLIT_NOCOLOR gets NULL. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                            ncclConfig_t *config);

/* New communicator without the listed ranks; survivors keep their relative order. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                            ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                             ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags);

/* A token for ncclCommGrow, made by the rank that will be the grow's root. Single use: a
 * second call before the grow that consumes the first fails (ncclInvalidUsage). */
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId);
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId);

/* A new communicator of nRanks ranks: the existing ones keep their ranks, new processes take
 * the rest. Existing root: comm, &id from ncclCommGetUniqueId, rank -1. Other existing ranks:
 * comm, NULL, -1. New ranks: NULL, &id, their rank. */
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                          ncclComm_t *newcomm, ncclConfig_t *config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                           ncclComm_t *newcomm, ncclConfig_t *config);

/* Like ncclCommInitRankConfig with nId tokens (the same list on every rank). */
ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId *commIds, ncclConfig_t *config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId *commIds, ncclConfig_t *config);

/* A short name for a result code. */
const char *ncclGetErrorString(ncclResult_t result);
const char *pncclGetErrorString(ncclResult_t result);

/* The message of the last error (of comm, or of this thread when comm is NULL). */
const char *ncclGetLastError(ncclComm_t comm);
const char *pncclGetLastError(ncclComm_t comm);

/* Re-read the logging variables. Kept for ABI compatibility; as in NCCL's header, programs
 * see the functions only with NCCL_OS_LINUX defined (the library always exports them). */
#ifdef NCCL_OS_LINUX
__attribute__((deprecated("ncclResetDebugInit is not supported as part of the NCCL API and will "
                          "be removed in the future"))) void
ncclResetDebugInit();
__attribute__((deprecated("pncclResetDebugInit is not supported as part of the NCCL API and will "
                          "be removed in the future"))) void
pncclResetDebugInit();
#else
#define ncclResetDebugInit()
#define pncclResetDebugInit()
#endif

/* The communicator's asynchronous state: ncclSuccess, ncclInProgress or the error. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);

/* Number of ranks. */
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int *count);

/* CUDA device of a cuda communicator; -1 for a host communicator. */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device);

/* This caller's rank. */
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank);

/* Register a buffer so collectives on it skip staging copies. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle);

/* Undo ncclCommRegister. */
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle);

/* ncclCommSuspend flags. */
#define NCCL_SUSPEND_MEM 0x01 /* give the communicator's rebuildable GPU memory back */

/* Collective. With NCCL_SUSPEND_MEM, free the GPU memory the communicator can rebuild (FIFOs,
 * LL and staging buffers, the peers' mappings of them). Until ncclCommResume, collectives,
 * send/recv, one-sided operations, window registration and device-communicator creation fail
 * with ncclInvalidUsage; queries, buffer registration and deregistration, split, shrink,
 * finalize, destroy and abort work. */
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags);

/* Collective: rebuild what ncclCommSuspend freed, at the same addresses (CUDA graphs captured
 * before stay valid); the communicator is usable again. */
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t pncclCommResume(ncclComm_t comm);

/* ncclCommMemStats statistics. */
typedef enum {
    ncclStatGpuMemSuspend = 0,   /* bytes of GPU memory that suspend frees */
    ncclStatGpuMemSuspended = 1, /* 1 while suspended, else 0 */
    ncclStatGpuMemPersist = 2,   /* bytes of GPU memory that stay while suspended */
    ncclStatGpuMemTotal = 3      /* all GPU memory the communicator holds, in bytes */
} ncclCommMemStat_t;

/* One statistic of the communicator's memory. */
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value);
ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value);

/* Register a memory window (collective over the communicator). */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                    int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                     int winFlags);

/* Undo ncclCommWindowRegister. */
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* The buffer this rank registered as win. */
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void **outUserPtr);
ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void **outUserPtr);

/* Reduction operations. Values from ncclNumOps up are handles made by
 * ncclRedOpCreatePreMulSum. ncclMaxRedOp keeps the enum the size of an int. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
    ncclSum = 0,
    ncclProd = 1,
    ncclMax = 2,
    ncclMin = 3,
    ncclAvg = 4,
    ncclNumOps = 5,
    ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

/* Element types. */
typedef enum {
    ncclInt8 = 0,
    ncclChar = 0,
    ncclUint8 = 1,
    ncclInt32 = 2,
    ncclInt = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6,
    ncclHalf = 6,
    ncclFloat32 = 7,
    ncclFloat = 7,
    ncclFloat64 = 8,
    ncclDouble = 8,
    ncclBfloat16 = 9,
    ncclFloat8e4m3 = 10,
    ncclFloat8e5m2 = 11,
    ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar of ncclRedOpCreatePreMulSum lives and when it is read. */
typedef enum {
    /* Read while each collective runs (device memory for cuda communicators, host memory
     * for host communicators). */
    ncclScalarDevice = 0,
    /* Read once, before ncclRedOpCreatePreMulSum returns. */
    ncclScalarHostImmediate = 1
} ncclScalarResidence_t;

/* An op that multiplies each rank's input by *scalar, then sums across ranks. Valid only
 * with comm and datatype. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);

/* Release an op made by ncclRedOpCreatePreMulSum. */
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/*
 * Collectives. Every rank of the communicator calls each one, in the same order.
 * cuda communicators: asynchronous on stream. host communicators: stream must be NULL and
 * the call (or the enclosing group) has completed when it returns.
 * In-place forms are described next to each call.
 */

/* Reduce into recvbuff on root (recvbuff unused elsewhere). In place: sendbuff == recvbuff. */
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream);

/* In-place broadcast from root (older form of ncclBroadcast). */
ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);

/* Copy root's sendbuff into every rank's recvbuff. In place: sendbuff == recvbuff. */
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm,
                            cudaStream_t stream);

/* Reduce across ranks; every rank gets the result. In place: sendbuff == recvbuff. */
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream);

/* Reduce nranks*recvcount elements; rank i gets block i. In place:
 * recvbuff == sendbuff + rank * recvcount. */
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream);

/* Rank i's sendcount elements land at recvbuff + i * sendcount on every rank. In place:
 * sendbuff == recvbuff + rank * sendcount. */
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/* Block j of sendbuff goes to rank j; block i of recvbuff comes from rank i. */
ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/* Rank i's count elements land at root's recvbuff + i * count. In place:
 * sendbuff == recvbuff + root * count. */
ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);

/* Root's block i (sendbuff + i * count) goes to rank i's recvbuff. In place:
 * recvbuff == sendbuff + root * count. */
ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);

/* Point to point. The peer posts the matching call with the same count and type. Several
 * sends and receives that must progress together go inside one group. */
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);

ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);

/*
 * One-sided operations (NCCL 2.29). Stream-ordered like collectives (host communicators:
 * complete on return, or at the end of the enclosing group). Signals are counted per
 * (sender, signal index, context); operations to one peer and context arrive in program order.
 */

/* Write count elements of localbuff into peer's part of the window peerWin (the handle this
 * rank got from ncclCommWindowRegister) at byte offset peerWinOffset, then raise the signal
 * (sigIdx, ctx) that peer counts for this rank. flags must be 0. */
ncclResult_t ncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                           unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                            unsigned int flags, ncclComm_t comm, cudaStream_t stream);

/* Raise the signal (sigIdx, ctx) on peer without data, after this rank's earlier operations
 * to peer on ctx. */
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                         cudaStream_t stream);

/* What ncclWaitSignal waits for: opCnt more signals from peer on (sigIdx, ctx). */
typedef struct {
    int opCnt;
    int peer;
    int sigIdx;
    int ctx;
} ncclWaitSignalDesc_t;

/* Wait until every descriptor's signals have arrived; the data of the operations that raised
 * them is then visible in this rank's windows. */
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
                            cudaStream_t stream);
ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
                             cudaStream_t stream);

/*
 * Groups. Calls between ncclGroupStart and ncclGroupEnd are queued and issued together at
 * ncclGroupEnd: use them to drive several communicators from one thread, to fuse
 * collectives, and to let sends and receives progress concurrently. Groups nest; only the
 * outermost ncclGroupEnd issues the work.
 */
ncclResult_t ncclGroupStart();
ncclResult_t pncclGroupStart();

ncclResult_t ncclGroupEnd();
ncclResult_t pncclGroupEnd();

/* Like ncclGroupEnd, but runs nothing: fills simInfo with the estimated time. */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t *simInfo);

/*
 * Parameters (NCCL 2.30): zinc's parameter table (what zinc-info prints), by name. A key is a
 * parameter's ZINC_ name or its NCCL_ fallback name; values are the ones in effect (the
 * environment, then the config file, then the default).
 */
typedef struct ncclParamHandle *ncclParamHandle_t;

/* A handle to the parameter named key; owned by the library, valid for the process. */
ncclResult_t ncclParamBind(ncclParamHandle_t *out, const char *key);
ncclResult_t pncclParamBind(ncclParamHandle_t *out, const char *key);

/* The value as a fixed-width integer; ncclInvalidArgument if it is not a number of that range. */
ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t *out);
ncclResult_t pncclParamGetI8(ncclParamHandle_t h, int8_t *out);

ncclResult_t ncclParamGetI16(ncclParamHandle_t h, int16_t *out);
ncclResult_t pncclParamGetI16(ncclParamHandle_t h, int16_t *out);

ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t *out);
ncclResult_t pncclParamGetI32(ncclParamHandle_t h, int32_t *out);

ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t *out);
ncclResult_t pncclParamGetI64(ncclParamHandle_t h, int64_t *out);

ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t *out);
ncclResult_t pncclParamGetU8(ncclParamHandle_t h, uint8_t *out);

ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t *out);
ncclResult_t pncclParamGetU16(ncclParamHandle_t h, uint16_t *out);

ncclResult_t ncclParamGetU32(ncclParamHandle_t h, uint32_t *out);
ncclResult_t pncclParamGetU32(ncclParamHandle_t h, uint32_t *out);

ncclResult_t ncclParamGetU64(ncclParamHandle_t h, uint64_t *out);
ncclResult_t pncclParamGetU64(ncclParamHandle_t h, uint64_t *out);

/* The value as text; the string stays valid until this thread's next ncclParamGetStr. */
ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char **out);
ncclResult_t pncclParamGetStr(ncclParamHandle_t h, const char **out);

/* The value's bytes (integers as 8 native bytes, text with its terminating NUL) copied into
 * out when they fit in maxLen bytes (else ncclInvalidArgument, nothing copied); *len is the
 * value's full length. */
ncclResult_t ncclParamGet(ncclParamHandle_t h, void *out, int maxLen, int *len);
ncclResult_t pncclParamGet(ncclParamHandle_t h, void *out, int maxLen, int *len);

/* The value of key as text (valid until this thread's next call) and its length. */
ncclResult_t ncclParamGetParameter(const char *key, const char **value, int *valueLen);
ncclResult_t pncclParamGetParameter(const char *key, const char **value, int *valueLen);

/* Every key (valid until this thread's next call). */
ncclResult_t ncclParamGetAllParameterKeys(const char ***table, int *tableLen);
ncclResult_t pncclParamGetAllParameterKeys(const char ***table, int *tableLen);

/* Print every parameter with its value and origin to the log, as zinc-info does. */
void ncclParamDumpAll(void);
void pncclParamDumpAll(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NCCL_H_ */
