/*
 * The network plugin ABI of NCCL 2.30 (`ncclNet_t`, `libnccl-net*.so`), written for zinc.
 *
 * A net moves tagged buffers between two endpoints: a listener publishes an opaque handle of
 * at most NCCL_NET_HANDLE_MAXSIZE bytes, the peer connects to it, and the two sides then post
 * isend / irecv requests and poll them with test(). A plugin library exports one table per
 * version it speaks, named ncclNetPlugin_vN (and optionally ncclCollNetPlugin_vN); NCCL 2.30
 * looks for v12, then v11, v10, v9, v8, v7, v6, and takes the first it finds.
 *
 * Every struct here must match NCCL's layout byte for byte, since plugins built against NCCL's
 * headers are loaded by zinc and zinc's nets are loaded by NCCL (libnccl-net-zinc.so).
 * tests/net/net_abi_test.c pins the sizes and member offsets of every version on LP64.
 *
 * What changed between versions (the reason each table exists):
 *   v6   the oldest NCCL 2.30 still loads; int sizes; no device offload.
 *   v7   connect/accept gain a device-offload handle out-parameter; getDeviceMr, irecvConsumed;
 *        properties gain netDeviceType / netDeviceVersion.
 *   v8   regMr takes a size_t; properties gain regIsGlobal.
 *   v9   isend / irecv take size_t sizes; makeVDevice; properties gain forceFlush, the
 *        virtual-device list and maxP2pBytes / maxCollBytes.
 *   v10  init takes a profiler callback; connect takes a per-connection config (traffic
 *        class); isend / irecv take profiler handles (phandle).
 *   v11  per-communicator contexts: init returns a context (and gets the communicator id and
 *        the config), listen and connect take it, finalize and setNetAttr are added;
 *        properties gain maxMultiRequestSize.
 *   v12  the functions are v11's; the properties change: a virtual NIC may merge 8 physical
 *        ones instead of 4 (so vProps grows and every later member moves), and railId /
 *        planeId are appended. NCCL 2.30 left the v6..v11 layouts as 2.28 had them.
 *
 * The GIN tables (ncclGinPlugin_vN, device-initiated networking; their own header since NCCL
 * 2.30) are not described here: zinc neither loads nor exports them.
 */
#ifndef ZN_NET_NCCL_NET_H
#define ZN_NET_NCCL_NET_H

#include "nccl.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------- */
/* Constants shared by every version                                                        */
/* ---------------------------------------------------------------------------------------- */

/* Bytes a listen handle may use; the caller always provides this many. */
#define NCCL_NET_HANDLE_MAXSIZE 128

/* Memory kinds: the bits of ncclNetProperties.ptrSupport and the `type` of regMr. */
#define NCCL_PTR_HOST   0x1
#define NCCL_PTR_CUDA   0x2
#define NCCL_PTR_DMABUF 0x4

/* Requests a single send or receive comm must accept in flight (v7 and later). */
#define NCCL_NET_MAX_REQUESTS 32
/* The same limit for v6 plugins. */
#define NCCL_NET_MAX_REQUESTS_V6 8

/* Largest message NCCL sends through a plugin that cannot report maxP2pBytes (v8 and older):
 * a power of two rather than INT_MAX. */
#define NCCL_NET_MAX_SIZE_LEGACY (1024L * 1024L * 1024L)
/* Default maxCollBytes for collnet plugins older than v9. */
#define NCCL_COLLNET_MAX_SIZE_LEGACY (512L * 1024L * 1024L)
/* Largest maxP2pBytes / maxCollBytes NCCL accepts. */
#define NCCL_MAX_NET_SIZE_BYTES (1024L * 1024L * 1024L * 1024L)

/* Bits NCCL passes in irecv's request hints (v11). */
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
#define NCCL_NET_MULTI_REQUEST            0x2

#define NCCL_NET_MR_FLAG_FORCE_SO         (1 << 0)
/* regMr hint (GIN): the region is a signal that is never reset. */
#define NCCL_NET_MR_FLAG_SIGNAL_NEVER_RESET (1 << 1)
#define NCCL_NET_SIGNAL_OP_INC              0x1
#define NCCL_NET_SIGNAL_OP_ADD              0x2

/* Nets that may be loaded in one process, and physical NICs one virtual NIC may merge: 4 in
 * the vProps of v9..v11, 8 in v12's. NCCL never asks an older plugin to merge more than its
 * version holds. */
#define NCCL_NET_MAX_PLUGINS          16
#define NCCL_NET_MAX_DEVS_PER_NIC_V11 4
#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
#define NCCL_NET_MAX_DEVS_PER_NIC     NCCL_NET_MAX_DEVS_PER_NIC_V12

/* Unset values of ncclNetCommConfig.trafficClass and of ncclNetAttr members. */
#define NCCL_NET_TRAFFIC_CLASS_UNDEF -1
#define NCCL_NET_ATTR_UNDEF          -1
/* Unset railId / planeId (v12 properties): NCCL then ignores the member. */
#define NCCL_NET_ID_UNDEF -1

/* ---------------------------------------------------------------------------------------- */
/* Logging: the function NCCL (or zinc) hands to init()                                     */
/* ---------------------------------------------------------------------------------------- */

typedef enum {
    NCCL_LOG_NONE = 0,
    NCCL_LOG_VERSION = 1,
    NCCL_LOG_WARN = 2,
    NCCL_LOG_INFO = 3,
    NCCL_LOG_ABORT = 4,
    NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

/* Subsystem bits of the logger's `flags`. */
typedef enum {
    NCCL_INIT = 0x1,
    NCCL_COLL = 0x2,
    NCCL_P2P = 0x4,
    NCCL_SHM = 0x8,
    NCCL_NET = 0x10,
    NCCL_GRAPH = 0x20,
    NCCL_TUNING = 0x40,
    NCCL_ENV = 0x80,
    NCCL_ALLOC = 0x100,
    NCCL_CALL = 0x200,
    NCCL_PROXY = 0x400,
    NCCL_NVLS = 0x800,
    NCCL_BOOTSTRAP = 0x1000,
    NCCL_REG = 0x2000,
    NCCL_PROFILE = 0x4000,
    NCCL_RAS = 0x8000,
    NCCL_DESTROY = 0x10000,
    NCCL_ALLOC_HOST = 0x20000,
    NCCL_ALL = ~0
} ncclDebugLogSubSys;

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char *file,
                                  int line, const char *fmt, ...);

/* Profiler callback (v10+): a net may report its own events; `type` is one of these. */
enum {
    ncclProfilerNetEventStart = 0,
    ncclProfilerNetEventStop,
    ncclProfilerNetEventUpdate,
    ncclProfilerNetEventUpdateAndStop,
};
typedef ncclResult_t (*ncclProfilerCallback_t)(void **eHandle, int type, void *pHandle,
                                               int64_t pluginId, void *extData);

/* ---------------------------------------------------------------------------------------- */
/* Device offload (v7+): what connect/accept return when NCCL asks for device-side access   */
/* ---------------------------------------------------------------------------------------- */

/* The types are public (the device API's header uses them too): one definition, there. */
#include "nccl_device/net_device.h" /* ncclNetDeviceHandle_v7_t .. _v12_t: one struct */

/* ---------------------------------------------------------------------------------------- */
/* Properties                                                                               */
/* ---------------------------------------------------------------------------------------- */

/* The physical devices a virtual NIC (makeVDevice) aggregates. */
typedef struct {
    int ndevs;
    int devs[NCCL_NET_MAX_DEVS_PER_NIC_V11];
} ncclNetVDeviceProps_v9_t;
typedef ncclNetVDeviceProps_v9_t ncclNetVDeviceProps_v10_t;
typedef ncclNetVDeviceProps_v9_t ncclNetVDeviceProps_v11_t;

/* v12: the same with room for 8 devices (36 bytes instead of 20). */
typedef struct {
    int ndevs;
    int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

/* Per-communicator options (v10: passed to connect; v11, v12: to init). */
typedef struct {
    int trafficClass; /* plugin-specific; NCCL_NET_TRAFFIC_CLASS_UNDEF when unset */
} ncclNetCommConfig_v10_t;
typedef ncclNetCommConfig_v10_t ncclNetCommConfig_v11_t;
typedef ncclNetCommConfig_v10_t ncclNetCommConfig_v12_t;

/* v6: the base set. name and pciPath stay owned by the net. */
typedef struct {
    char *name;
    char *pciPath;  /* sysfs path of the PCI function, or NULL */
    uint64_t guid;  /* identifies the NIC chip across its PCI functions */
    int ptrSupport; /* NCCL_PTR_* bits */
    int speed;      /* Mb/s */
    int port;
    float latency; /* microseconds */
    int maxComms;
    int maxRecvs; /* buffers one grouped irecv may carry */
} ncclNetProperties_v6_t;

/* v7: device offload type and version appended. */
typedef struct {
    char *name;
    char *pciPath;
    uint64_t guid;
    int ptrSupport;
    int speed;
    int port;
    float latency;
    int maxComms;
    int maxRecvs;
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
} ncclNetProperties_v7_t;

/* v8: regIsGlobal inserted after ptrSupport (1: a registration is valid on every comm). */
typedef struct {
    char *name;
    char *pciPath;
    uint64_t guid;
    int ptrSupport;
    int regIsGlobal;
    int speed;
    int port;
    float latency;
    int maxComms;
    int maxRecvs;
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
} ncclNetProperties_v8_t;

/* v9 and v10 (same layout): forceFlush, virtual devices, size limits. */
typedef struct {
    char *name;
    char *pciPath;
    uint64_t guid;
    int ptrSupport;
    int regIsGlobal;
    int forceFlush; /* 1: NCCL must iflush every receive, even when it thinks it need not */
    int speed;
    int port;
    float latency;
    int maxComms;
    int maxRecvs;
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
    ncclNetVDeviceProps_v9_t vProps;
    size_t maxP2pBytes;  /* largest single isend / irecv */
    size_t maxCollBytes; /* largest collnet operation */
} ncclNetProperties_v9_t;
typedef ncclNetProperties_v9_t ncclNetProperties_v10_t;

/* v11: maxMultiRequestSize appended (requests NCCL may merge into one; 1 for none). */
typedef struct {
    char *name;
    char *pciPath;
    uint64_t guid;
    int ptrSupport;
    int regIsGlobal;
    int forceFlush;
    int speed;
    int port;
    float latency;
    int maxComms;
    int maxRecvs;
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
    ncclNetVDeviceProps_v11_t vProps;
    size_t maxP2pBytes;
    size_t maxCollBytes;
    int maxMultiRequestSize;
} ncclNetProperties_v11_t;

/* v12: the larger vProps (so maxP2pBytes moves from 88 to 104), then the NIC's rail and plane.
 * NCCL's topology search keeps a ring or tree that enters a host through one NIC leaving it
 * through a NIC of the same rail (when both rails are set), and never joins NICs of different
 * planes; NCCL_NET_ID_UNDEF lets it decide from PCI and GUIDs as before. */
typedef struct {
    char *name;
    char *pciPath;
    uint64_t guid;
    int ptrSupport;
    int regIsGlobal;
    int forceFlush;
    int speed;
    int port;
    float latency;
    int maxComms;
    int maxRecvs;
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
    ncclNetVDeviceProps_v12_t vProps;
    size_t maxP2pBytes;
    size_t maxCollBytes;
    int maxMultiRequestSize;
    int16_t railId;  /* NIC's rail (the switch its port reaches); NCCL_NET_ID_UNDEF if unknown */
    int16_t planeId; /* fabric plane; NCCL_NET_ID_UNDEF if unknown */
} ncclNetProperties_v12_t;

/* v11 setNetAttr: hints about the traffic a communicator is about to run. */
typedef struct {
    int32_t maxConcurrentPeers;
    int32_t minConcurrentPeers;
    int32_t maxFlowsPerPeer;
    int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

typedef struct {
    ncclNetCommAttr_v11_t sendCommAttr;
    ncclNetCommAttr_v11_t recvCommAttr;
    uint32_t op;
    uint32_t algo;
    uint32_t proto;
} ncclNetAttr_v11_t;
typedef ncclNetCommAttr_v11_t ncclNetCommAttr_v12_t;
typedef ncclNetAttr_v11_t ncclNetAttr_v12_t;

/* ---------------------------------------------------------------------------------------- */
/* The net tables. Slot order is the ABI; comments give the contract zinc relies on.        */
/*                                                                                          */
/* Common semantics of every version:                                                       */
/*  - listen writes a handle (<= NCCL_NET_HANDLE_MAXSIZE bytes) that the peer passes to     */
/*    connect; connect and accept never block: they return ncclSuccess with a NULL comm     */
/*    until the connection is ready and are called again;                                   */
/*  - isend / irecv may return a NULL request when they cannot start now (try again);       */
/*    a receive matches the next send with the same tag; the sent size must not exceed the  */
/*    posted size; test() reports done and, when sizes is not NULL, the bytes moved (one    */
/*    per buffer of a grouped receive);                                                     */
/*  - iflush makes data received into NCCL_PTR_CUDA memory visible to the GPU; it may       */
/*    return a NULL request when nothing is needed.                                         */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v6_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(int dev, void *handle, void **sendComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm);
    ncclResult_t (*regMr)(void *comm, void *data, int size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *comm, void *mhandle);
    ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
                          void **request);
    ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
                          void **mhandles, void **request);
    ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                           void **request);
    ncclResult_t (*test)(void *request, int *done, int *sizes);
    ncclResult_t (*closeSend)(void *sendComm);
    ncclResult_t (*closeRecv)(void *recvComm);
    ncclResult_t (*closeListen)(void *listenComm);
} ncclNet_v6_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v7_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
    /* A non-NULL *sendDevComm asks for device offload. */
    ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
                            ncclNetDeviceHandle_v7_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm,
                           ncclNetDeviceHandle_v7_t **recvDevComm);
    ncclResult_t (*regMr)(void *comm, void *data, int size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *comm, void *mhandle);
    ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
                          void **request);
    ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
                          void **mhandles, void **request);
    ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                           void **request);
    ncclResult_t (*test)(void *request, int *done, int *sizes);
    ncclResult_t (*closeSend)(void *sendComm);
    ncclResult_t (*closeRecv)(void *recvComm);
    ncclResult_t (*closeListen)(void *listenComm);
    /* Translate an mhandle for the net's device code. */
    ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
    /* The device has consumed a completed receive (offload nets only). */
    ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
} ncclNet_v7_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
                            ncclNetDeviceHandle_v8_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm,
                           ncclNetDeviceHandle_v8_t **recvDevComm);
    ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *comm, void *mhandle);
    ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
                          void **request);
    ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
                          void **mhandles, void **request);
    ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                           void **request);
    ncclResult_t (*test)(void *request, int *done, int *sizes);
    ncclResult_t (*closeSend)(void *sendComm);
    ncclResult_t (*closeRecv)(void *recvComm);
    ncclResult_t (*closeListen)(void *listenComm);
    ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
    ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
} ncclNet_v8_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
                            ncclNetDeviceHandle_v9_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm,
                           ncclNetDeviceHandle_v9_t **recvDevComm);
    ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *comm, void *mhandle);
    ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                          void **request);
    ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                          void **mhandles, void **request);
    ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                           void **request);
    ncclResult_t (*test)(void *request, int *done, int *sizes);
    ncclResult_t (*closeSend)(void *sendComm);
    ncclResult_t (*closeRecv)(void *recvComm);
    ncclResult_t (*closeListen)(void *listenComm);
    ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
    ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
    /* Create a virtual NIC over props->devs; its index is returned in *d. */
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
} ncclNet_v9_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t *config, void *handle, void **sendComm,
                            ncclNetDeviceHandle_v10_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm,
                           ncclNetDeviceHandle_v10_t **recvDevComm);
    ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *comm, void *mhandle);
    /* phandle / phandles: the profiler's handles for the request (may be NULL). */
    ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                          void *phandle, void **request);
    ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                          void **mhandles, void **phandles, void **request);
    ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                           void **request);
    ncclResult_t (*test)(void *request, int *done, int *sizes);
    ncclResult_t (*closeSend)(void *sendComm);
    ncclResult_t (*closeRecv)(void *recvComm);
    ncclResult_t (*closeListen)(void *listenComm);
    ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
    ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v10_t *props);
} ncclNet_v10_t;

typedef struct {
    const char *name;
    /* Called once per communicator; *ctx is that communicator's context for the net. */
    ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_v11_t *config,
                         ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t *props);
    ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
                            ncclNetDeviceHandle_v11_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm,
                           ncclNetDeviceHandle_v11_t **recvDevComm);
    ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *comm, void *mhandle);
    ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                          void *phandle, void **request);
    ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                          void **mhandles, void **phandles, void **request);
    ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                           void **request);
    ncclResult_t (*test)(void *request, int *done, int *sizes);
    ncclResult_t (*closeSend)(void *sendComm);
    ncclResult_t (*closeRecv)(void *recvComm);
    ncclResult_t (*closeListen)(void *listenComm);
    ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
    ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v11_t *props);
    /* Release what init created for this context. */
    ncclResult_t (*finalize)(void *ctx);
    ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v11_t *netAttr);
} ncclNet_v11_t;

/* v12: v11's slots and contracts; only the properties and vProps it points to differ. */
typedef struct {
    const char *name;
    ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_v12_t *config,
                         ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t *props);
    ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
                            ncclNetDeviceHandle_v12_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm,
                           ncclNetDeviceHandle_v12_t **recvDevComm);
    ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *comm, void *mhandle);
    ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                          void *phandle, void **request);
    ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                          void **mhandles, void **phandles, void **request);
    ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                           void **request);
    ncclResult_t (*test)(void *request, int *done, int *sizes);
    ncclResult_t (*closeSend)(void *sendComm);
    ncclResult_t (*closeRecv)(void *recvComm);
    ncclResult_t (*closeListen)(void *listenComm);
    ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
    ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v12_t *props);
    ncclResult_t (*finalize)(void *ctx);
    ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v12_t *netAttr);
} ncclNet_v12_t;

/* ---------------------------------------------------------------------------------------- */
/* Collective nets (ncclCollNetPlugin_vN): in-network reductions such as SHARP. zinc has no  */
/* collective net; the tables are here so that a plugin exporting one is understood and so */
/* the layouts are pinned with the rest.                                                    */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    void *mhandle;
    void *address;
    uint32_t size;
} ncclNetSGE_v8_t;

typedef struct {
    void *mhandle;
    void *address;
    size_t size;
} ncclNetSGE_v9_t;
typedef ncclNetSGE_v9_t ncclNetSGE_v10_t;
typedef ncclNetSGE_v9_t ncclNetSGE_v11_t;
typedef ncclNetSGE_v9_t ncclNetSGE_v12_t;

/* Members common to every collnet version, in ABI order, up to the version's test(). */
typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v6_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(void *handles[], int nranks, int rank, void *listenComm,
                            void **collComm);
    ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int *supported);
    ncclResult_t (*regMr)(void *collComm, void *data, int size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *collComm, void *mhandle);
    ncclResult_t (*iallreduce)(void *collComm, void *sendData, void *recvData, int count,
                               ncclDataType_t dataType, ncclRedOp_t redOp, void *sendMhandle,
                               void *recvMhandle, void **request);
    ncclResult_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
    ncclResult_t (*test)(void *request, int *done, int *size);
    ncclResult_t (*closeColl)(void *collComm);
    ncclResult_t (*closeListen)(void *listenComm);
} ncclCollNet_v6_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v7_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(void *handles[], int nranks, int rank, void *listenComm,
                            void **collComm);
    ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int *supported);
    ncclResult_t (*regMr)(void *collComm, void *data, int size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *collComm, void *mhandle);
    ncclResult_t (*iallreduce)(void *collComm, void *sendData, void *recvData, int count,
                               ncclDataType_t dataType, ncclRedOp_t redOp, void *sendMhandle,
                               void *recvMhandle, void **request);
    ncclResult_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
    ncclResult_t (*test)(void *request, int *done, int *size);
    ncclResult_t (*closeColl)(void *collComm);
    ncclResult_t (*closeListen)(void *listenComm);
} ncclCollNet_v7_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(void *handles[], int nranks, int rank, void *listenComm,
                            void **collComm);
    ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int *supported);
    ncclResult_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *collComm, void *mhandle);
    ncclResult_t (*iallreduce)(void *collComm, void *sendData, void *recvData, int count,
                               ncclDataType_t dataType, ncclRedOp_t redOp, void *sendMhandle,
                               void *recvMhandle, void **request);
    ncclResult_t (*iallgather)(void *collComm, void *sendData, int nRecvParts,
                               ncclNetSGE_v8_t *recvParts, size_t bytesPerRank, size_t windowOffset,
                               size_t windowBytes, void *sendMhandle, void **request);
    ncclResult_t (*ireducescatter)(void *collComm, int nSendParts, ncclNetSGE_v8_t *sendParts,
                                   void *recvData, size_t bytesPerRank, size_t windowOffset,
                                   size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                   void *recvMhandle, void **request);
    ncclResult_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
    ncclResult_t (*test)(void *request, int *done, int *size);
    ncclResult_t (*closeColl)(void *collComm);
    ncclResult_t (*closeListen)(void *listenComm);
} ncclCollNet_v8_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(void *handles[], int nranks, int rank, void *listenComm,
                            void **collComm);
    ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int *supported);
    ncclResult_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *collComm, void *mhandle);
    ncclResult_t (*iallreduce)(void *collComm, void *sendData, void *recvData, size_t count,
                               ncclDataType_t dataType, ncclRedOp_t redOp, void *sendMhandle,
                               void *recvMhandle, void **request);
    ncclResult_t (*iallgather)(void *collComm, void *sendData, int nRecvParts,
                               ncclNetSGE_v9_t *recvParts, size_t bytesPerRank, size_t windowOffset,
                               size_t windowBytes, void *sendMhandle, void **request);
    ncclResult_t (*ireducescatter)(void *collComm, int nSendParts, ncclNetSGE_v9_t *sendParts,
                                   void *recvData, size_t bytesPerRank, size_t windowOffset,
                                   size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                   void *recvMhandle, void **request);
    ncclResult_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
    ncclResult_t (*test)(void *request, int *done, int *size);
    ncclResult_t (*closeColl)(void *collComm);
    ncclResult_t (*closeListen)(void *listenComm);
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
} ncclCollNet_v9_t;
/* v10 has the v9 layout; its pointer types name v10 structs that are the same as v9's. */
typedef ncclCollNet_v9_t ncclCollNet_v10_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **ctx, uint64_t commId, ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t *props);
    ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(void *handles[], int nranks, int rank, void *listenComm,
                            void **collComm);
    ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int *supported);
    ncclResult_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *collComm, void *mhandle);
    ncclResult_t (*iallreduce)(void *collComm, void *sendData, void *recvData, size_t count,
                               ncclDataType_t dataType, ncclRedOp_t redOp, void *sendMhandle,
                               void *recvMhandle, void **request);
    ncclResult_t (*iallgather)(void *collComm, void *sendData, int nRecvParts,
                               ncclNetSGE_v11_t *recvParts, size_t bytesPerRank,
                               size_t windowOffset, size_t windowBytes, void *sendMhandle,
                               void **request);
    ncclResult_t (*ireducescatter)(void *collComm, int nSendParts, ncclNetSGE_v11_t *sendParts,
                                   void *recvData, size_t bytesPerRank, size_t windowOffset,
                                   size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                   void *recvMhandle, void **request);
    ncclResult_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
    ncclResult_t (*test)(void *request, int *done, int *size);
    ncclResult_t (*closeColl)(void *collComm);
    ncclResult_t (*closeListen)(void *listenComm);
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v11_t *props);
    ncclResult_t (*finalize)(void *ctx);
} ncclCollNet_v11_t;

/* v12: v11 with the v12 properties and vProps. */
typedef struct {
    const char *name;
    ncclResult_t (*init)(void **ctx, uint64_t commId, ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t *props);
    ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(void *handles[], int nranks, int rank, void *listenComm,
                            void **collComm);
    ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int *supported);
    ncclResult_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *collComm, void *mhandle);
    ncclResult_t (*iallreduce)(void *collComm, void *sendData, void *recvData, size_t count,
                               ncclDataType_t dataType, ncclRedOp_t redOp, void *sendMhandle,
                               void *recvMhandle, void **request);
    ncclResult_t (*iallgather)(void *collComm, void *sendData, int nRecvParts,
                               ncclNetSGE_v12_t *recvParts, size_t bytesPerRank,
                               size_t windowOffset, size_t windowBytes, void *sendMhandle,
                               void **request);
    ncclResult_t (*ireducescatter)(void *collComm, int nSendParts, ncclNetSGE_v12_t *sendParts,
                                   void *recvData, size_t bytesPerRank, size_t windowOffset,
                                   size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                   void *recvMhandle, void **request);
    ncclResult_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
    ncclResult_t (*test)(void *request, int *done, int *size);
    ncclResult_t (*closeColl)(void *collComm);
    ncclResult_t (*closeListen)(void *listenComm);
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v12_t *props);
    ncclResult_t (*finalize)(void *ctx);
} ncclCollNet_v12_t;

/* ---------------------------------------------------------------------------------------- */
/* The newest version: what zinc uses internally (older plugins are adapted to it).         */
/* ---------------------------------------------------------------------------------------- */

typedef ncclNet_v12_t ncclNet_t;
typedef ncclCollNet_v12_t ncclCollNet_t;
typedef ncclNetProperties_v12_t ncclNetProperties_t;
typedef ncclNetVDeviceProps_v12_t ncclNetVDeviceProps_t;
typedef ncclNetCommConfig_v12_t ncclNetCommConfig_t;
typedef ncclNetAttr_v12_t ncclNetAttr_t;
typedef ncclNetSGE_v12_t ncclNetSGE_t;

/* Opaque listen handle as the caller stores it. */
typedef char ncclNetHandle_t[NCCL_NET_HANDLE_MAXSIZE];

/* v11 and v12 properties share every member but the rail and plane ids; v12 moved the ones
 * after vProps (which grew from 4 to 8 devices). The two conversions the loader (an older
 * plugin's properties) and the exported plugin (zinc's for an older loader) need: */
#define ZN_NET_PROPS_V11_COMMON(X)                                                            \
    X(name)                                                                                   \
    X(pciPath) X(guid) X(ptrSupport) X(regIsGlobal) X(forceFlush) X(speed) X(port) X(latency) \
        X(maxComms) X(maxRecvs) X(netDeviceType) X(netDeviceVersion) X(maxP2pBytes)           \
            X(maxCollBytes) X(maxMultiRequestSize)
#define ZN_NET_PROPS_COPY(m) out->m = in->m;

/* v11 to v12: rail and plane unset, as NCCL 2.30 adapts an older plugin. Returns 0, or -1 if
 * vProps claims more devices than v11 holds. */
static inline int zn_net_props_v11_to_v12(const ncclNetProperties_v11_t *in,
                                          ncclNetProperties_v12_t *out)
{
    if (in->vProps.ndevs < 0 || in->vProps.ndevs > NCCL_NET_MAX_DEVS_PER_NIC_V11) return -1;
    memset(out, 0, sizeof(*out));
    ZN_NET_PROPS_V11_COMMON(ZN_NET_PROPS_COPY)
    out->vProps.ndevs = in->vProps.ndevs;
    memcpy(out->vProps.devs, in->vProps.devs, sizeof(in->vProps.devs));
    out->railId = NCCL_NET_ID_UNDEF;
    out->planeId = NCCL_NET_ID_UNDEF;
    return 0;
}

/* v12 to v11 (rail and plane dropped). Returns 0, or -1 if vProps merges more devices than v11
 * holds. */
static inline int zn_net_props_v12_to_v11(const ncclNetProperties_v12_t *in,
                                          ncclNetProperties_v11_t *out)
{
    if (in->vProps.ndevs < 0 || in->vProps.ndevs > NCCL_NET_MAX_DEVS_PER_NIC_V11) return -1;
    memset(out, 0, sizeof(*out));
    ZN_NET_PROPS_V11_COMMON(ZN_NET_PROPS_COPY)
    out->vProps.ndevs = in->vProps.ndevs;
    memcpy(out->vProps.devs, in->vProps.devs, sizeof(out->vProps.devs));
    return 0;
}

/* Exported table names, newest first: the order a loader tries them in. */
#define ZN_NET_PLUGIN_SYMBOLS(X) \
    X(12)                        \
    X(11)                        \
    X(10)                        \
    X(9)                         \
    X(8)                         \
    X(7)                         \
    X(6)

#ifdef __cplusplus
}
#endif

#endif
