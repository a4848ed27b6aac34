/*
 * nccl_device/core.h -- NCCL 2.30's device API as zinc implements it: device communicators,
 * their requirements, teams, windows and the pointers into them.
 *
 * Compatibility. The structs a program fills or allocates itself (ncclTeam,
 * ncclDevCommRequirements, ncclDevResourceRequirements, ncclTeamRequirements,
 * ncclCommProperties, the handles, ncclDevComm) have NCCL 2.30.7's layout, so a program built
 * against NCCL's headers passes them to zinc's libnccl.so.2 safely (tests/devapi checks the
 * layouts against facts recorded from NCCL 2.30.7's header). The host functions also take
 * the structs of a program built against NCCL 2.28.9's header, which had no size / magic /
 * version fields (src/api/devcomm.c says how the two are told apart). The device functions
 * are inline here and read zinc's window records (struct ncclWindow_vidmem below): it starts
 * with NCCL's fields and adds a table of peer pointers, because zinc maps each peer's memory
 * wherever the CUDA driver puts it rather than at a fixed stride in one reserved range.
 * Device code must therefore be compiled against these headers to run on zinc (source
 * compatibility); kernels compiled against NCCL's headers would compute peer addresses from a
 * stride that zinc leaves at 0.
 *
 * Teams. The world team is the communicator. The LSA team ("load/store accessible") is the
 * ranks whose GPU memory this rank's kernels reach through zinc's p2p mappings: every rank
 * when the communicator is on one host and all its GPUs map each other, otherwise the calling
 * rank alone. The rail team is the world divided by the LSA team (ncclTeamOuterFactor).
 */
#ifndef ZINC_NCCL_DEVICE_CORE_H_
#define ZINC_NCCL_DEVICE_CORE_H_
#include <nccl.h>

#include "coop.h"
#include "net_device.h"
#include "utility.h"

/* Ranks of an LSA team that zinc maps (as its p2p transport: GPUs of one host). */
#define ZINC_DEVICE_LSA_MAX 8
/* GIN connections a device communicator may have (NCCL's value; zinc uses one). */
#define NCCL_GIN_MAX_CONNECTIONS 4

struct ncclDevComm;
typedef struct ncclDevComm ncclDevComm_t;
struct ncclTeam;
typedef struct ncclTeam ncclTeam_t;
typedef struct ncclWindow_vidmem ncclWindow_vidmem_t;
struct ncclMultimemHandle;
typedef struct ncclMultimemHandle ncclMultimemHandle_t;

/* A resource buffer: its offset in the communicator's resource window, in 128-byte units. */
typedef uint32_t ncclDevResourceHandle;
typedef ncclDevResourceHandle ncclDevResourceHandle_t;

typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;

/* An outstanding flushAsync (nccl_device/gin.h): what wait() needs to finish it. */
typedef struct {
    uint64_t opaque[2];
} ncclGinRequest_t;

struct ncclLsaBarrierHandle;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
struct ncclGinBarrierHandle;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
struct ncclLLA2AHandle;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;

typedef struct ncclGinGpuCtx *ncclGinGpuCtx_t;
typedef void *ncclGinWindow_t;
typedef enum ncclGinSignalOp_t { ncclGinSignalInc = 0, ncclGinSignalAdd } ncclGinSignalOp_t;

/* A team: nRanks ranks, of which the caller is rank; consecutive members are stride world
 * ranks apart. */
struct ncclTeam {
    int nRanks, rank, stride;
};

#if __cplusplus
template <typename T> struct ncclSymPtr;
struct ncclTeamTagWorld {
};
struct ncclTeamTagLsa {
};
struct ncclTeamTagRail {
};
#endif

struct ncclDevCommRequirements;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
struct ncclDevResourceRequirements;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
struct ncclTeamRequirements;
typedef struct ncclTeamRequirements ncclTeamRequirements_t;
struct ncclCommProperties;
typedef struct ncclCommProperties ncclCommProperties_t;

/* Which peers GIN must reach: none, every rank, or the rail team's. zinc reaches every rank
 * either way (loads and stores in the LSA team, the host engine beyond it). */
typedef enum {
    NCCL_GIN_CONNECTION_NONE,
    NCCL_GIN_CONNECTION_FULL,
    NCCL_GIN_CONNECTION_RAIL,
} ncclGinConnectionType_t;

/* What a device communicator must hold. Start from NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER
 * (size, magic and version say which layout the program was built with), then set what the
 * kernels use. Asking for GIN signals, counters or GIN barriers needs ginConnectionType (or
 * ginForceEnable). */
struct ncclDevCommRequirements {
    size_t size; /* set by the initializer, never by hand */
    unsigned int magic;
    unsigned int version;

    ncclDevResourceRequirements_t *resourceRequirementsList; /* extra buffers, signals */
    ncclTeamRequirements_t *teamRequirementsList;

    bool lsaMultimem; /* multicast over the LSA team: zinc refuses it (no NVLink multicast) */

    int barrierCount;        /* ncclBarrierSession: LSA + rail GIN (+ world GIN) barriers */
    int lsaBarrierCount;     /* LSA barriers (comm.lsaBarrier) */
    int railGinBarrierCount; /* GIN barriers over the rail team (comm.railGinBarrier) */

    int lsaLLA2ABlockCount, lsaLLA2ASlotCount; /* an LL all-to-all over the LSA team */

    bool ginForceEnable; /* old spelling of ginConnectionType = NCCL_GIN_CONNECTION_FULL */

    int ginContextCount; /* a hint: zinc gives one context */
    int ginSignalCount;  /* signals 0 .. ginSignalCount - 1 */
    int ginCounterCount; /* counters 0 .. ginCounterCount - 1 */
    ncclGinConnectionType_t ginConnectionType;
    bool ginExclusiveContexts; /* hints that zinc's single context ignores */
    int ginQueueDepth;
    int ginTrafficClass;

    int worldGinBarrierCount; /* GIN barriers over the world team (comm.worldGinBarrier) */

    /* Whether kernels use strong signals / signals at window addresses (VA signals). zinc's
     * signals cost the same either way, so these change nothing. */
    bool ginStrongSignalsRequired;
    bool ginVaSignalsRequired;
};

/* clang-format off */
#define NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER {                                               \
        sizeof(ncclDevCommRequirements_t), /* size */                                          \
        NCCL_API_MAGIC,                    /* magic */                                         \
        NCCL_VERSION_CODE,                 /* version */                                       \
        NULL,                              /* resourceRequirementsList */                      \
        NULL,                              /* teamRequirementsList */                          \
        false,                             /* lsaMultimem */                                   \
        0,                                 /* barrierCount */                                  \
        0,                                 /* lsaBarrierCount */                               \
        0,                                 /* railGinBarrierCount */                           \
        0,                                 /* lsaLLA2ABlockCount */                            \
        0,                                 /* lsaLLA2ASlotCount */                             \
        false,                             /* ginForceEnable */                                \
        4,                                 /* ginContextCount */                               \
        0,                                 /* ginSignalCount */                                \
        0,                                 /* ginCounterCount */                               \
        NCCL_GIN_CONNECTION_NONE,          /* ginConnectionType */                             \
        false,                             /* ginExclusiveContexts */                          \
        0,                                 /* ginQueueDepth */                                 \
        NCCL_CONFIG_UNDEF_INT,             /* ginTrafficClass */                               \
        0,                                 /* worldGinBarrierCount */                          \
        true,                              /* ginStrongSignalsRequired */                      \
        true,                              /* ginVaSignalsRequired */                          \
    }
/* clang-format on */

/* A resource buffer and GIN signals/counters, chained by next; the out fields are written by
 * ncclDevCommCreate. */
struct ncclDevResourceRequirements {
    ncclDevResourceRequirements_t *next;
    size_t bufferSize, bufferAlign;
    ncclDevResourceHandle_t *outBufferHandle;
    int ginSignalCount;
    int ginCounterCount;
    ncclGinSignal_t *outGinSignalStart;
    ncclGinCounter_t *outGinCounterStart;
};

struct ncclTeamRequirements {
    ncclTeamRequirements_t *next;
    ncclTeam_t team;
    bool multimem;
    ncclMultimemHandle_t *outMultimemHandle;
};

/* What the communicator supports (ncclCommQueryProperties). Start from
 * NCCL_COMM_PROPERTIES_INITIALIZER. */
typedef enum {
    NCCL_GIN_TYPE_NONE = 0,
    NCCL_GIN_TYPE_PROXY = 2, /* NCCL_NET_DEVICE_GIN_PROXY's value */
    NCCL_GIN_TYPE_GDAKI = 3,
    NCCL_GIN_TYPE_GPI = 4,
} ncclGinType_t;

struct ncclCommProperties {
    size_t size; /* set by the initializer, never by hand */
    unsigned int magic;
    unsigned int version;

    int rank;
    int nRanks;
    int cudaDev;
    int nvmlDev;
    bool deviceApiSupport;
    bool multimemSupport;
    ncclGinType_t ginType;
    int nLsaTeams;
    bool hostRmaSupport;
    ncclGinType_t railedGinType;
};

/* NCCL's initializer sets size, magic and version and leaves the rest zero; every field is
 * written out here so that -Wextra has nothing to say about it. */
/* clang-format off */
#define NCCL_COMM_PROPERTIES_INITIALIZER {                                                     \
        sizeof(ncclCommProperties_t), /* size */                                               \
        NCCL_API_MAGIC,               /* magic */                                              \
        NCCL_VERSION_CODE,            /* version */                                            \
        0, 0, 0, 0,                   /* rank, nRanks, cudaDev, nvmlDev */                     \
        false, false,                 /* deviceApiSupport, multimemSupport */                  \
        NCCL_GIN_TYPE_NONE,           /* ginType */                                            \
        0,                            /* nLsaTeams */                                          \
        false,                        /* hostRmaSupport */                                     \
        NCCL_GIN_TYPE_NONE,           /* railedGinType */                                      \
    }
/* clang-format on */

/* One segment of a window made of several allocations (NCCL's GIN registration of each);
 * zinc's windows are one segment. memType is a CUmemLocationType. */
struct ncclSegmentWindow {
    ncclGinWindow_t ginWins[NCCL_GIN_MAX_CONNECTIONS];
    size_t segmentSize;
    int memType;
};

/* A registered window as kernels see it (ncclWindow_t points to one in device memory). The
 * fields up to numSegments are NCCL's; lsaFlatBase is this rank's own buffer and stride4G is
 * 0 (see the top of this file); the peer table follows. */
struct ncclWindow_vidmem {
    void *winHost;     /* zinc's host record */
    char *lsaFlatBase; /* this rank's buffer */
    int lsaRank;
    int worldRank;
    uint32_t stride4G;   /* 0: zinc has no flat mapping */
    uint32_t mcOffset4K; /* 0: no multicast */
    uint32_t ginOffset4K;
    ncclGinWindow_t ginWins[NCCL_GIN_MAX_CONNECTIONS];
    struct ncclSegmentWindow *ginMultiSegmentWins; /* NULL: one segment */
    int numSegments;
    /* zinc's part */
    int lsaSize;
    int zincMagic;                      /* ZINC_DEVICE_WINDOW_MAGIC */
    size_t size;                        /* bytes of each rank's buffer */
    char *lsaPtrs[ZINC_DEVICE_LSA_MAX]; /* each LSA rank's buffer as this GPU maps it */
};
#define ZINC_DEVICE_WINDOW_MAGIC 0x7a6e7764 /* "znwd" */

/* The part of the resource window's record that ncclDevComm carries inline: lsaFlatBase,
 * stride4G and mcOffset4K at their offsets in struct ncclWindow_vidmem. */
typedef struct ncclResourceWindow_vidmem {
    char reserved1[8];
    char *lsaFlatBase;
    char reserved2[8];
    uint32_t stride4G;
    uint32_t mcOffset4K;
    char reserved3[32];
} ncclResourceWindow_vidmem_t;

struct ncclMultimemHandle {
    void *mcBasePtr;
};

struct ncclLsaBarrierHandle {
    ncclDevResourceHandle_t bufHandle;
    int nBarriers;
};

/* A GIN barrier's signals start at signal0 (one per barrier in zinc); the epoch of each is
 * kept in its signal shadow, so there is no buffer. */
struct ncclGinBarrierHandle {
    ncclGinSignal_t signal0;
    ncclDevResourceHandle_t unused;
};

struct ncclLLA2AHandle {
    ncclDevResourceHandle_t bufHandle;
    uint32_t nSlots;
};

#if __cplusplus
/* Windows by address, for ncclFindWindow: a chain of 32-entry tables. */
struct ncclDevCommWindowTable {
    struct Entry {
        uintptr_t base, size;
        ncclWindow_t window;
    } entries[32];
    struct ncclDevCommWindowTable *next;
};
#else
struct ncclDevCommWindowTable;
#endif
typedef struct ncclDevCommWindowTable *ncclDevCommWindowTable_t;

/* The device communicator: filled by ncclDevCommCreate, passed to kernels by value. NCCL
 * 2.30.7's layout. How zinc uses the GIN fields: one connection and one context;
 * ginHandles[0] is this rank's signal array and ginHandles[1] its counter array, both in the
 * resource window (so peers reach the signals through the window's peer table);
 * ginHandles[2] the FIFO to the host engine when some rank is outside the LSA team;
 * ginNetDeviceTypes[0] is NCCL_NET_DEVICE_HOST (zinc serves GIN by loads and stores within
 * the LSA team). abortFlag is NULL, as NCCL leaves it for the device communicators of
 * programs. */
struct ncclDevComm {
    unsigned int magic; /* NCCL_API_MAGIC and the version of the requirements */
    unsigned int version;

    int rank, nRanks;
    uint32_t nRanks_rcp32;
    int lsaRank, lsaSize;
    uint32_t lsaSize_rcp32;

    ncclDevCommWindowTable_t windowTable;

    ncclWindow_t resourceWindow;
    ncclResourceWindow_vidmem_t resourceWindow_inlined;

    ncclGinBarrierHandle_t hybridWorldGinBarrier; /* barrierCount's barriers */

    ncclMultimemHandle_t lsaMultimem;
    ncclLsaBarrierHandle_t lsaBarrier;     /* lsaBarrierCount's */
    ncclGinBarrierHandle_t railGinBarrier; /* railGinBarrierCount's */

    uint8_t ginConnectionCount;
    uint8_t ginNetDeviceTypes[NCCL_GIN_MAX_CONNECTIONS];
    void *ginHandles[NCCL_GIN_MAX_CONNECTIONS];
    int ginSignalCount;
    int ginCounterCount;
    uint64_t *ginSignalShadows;
    uint32_t ginContextCount;
    bool ginConnectionsRailed;
    bool ginStrongLegacySignals; /* true: ncclGin_SignalInc / SignalAdd are strong */
    bool ginContextsRailed;

    uint32_t *abortFlag;

    ncclLsaBarrierHandle_t hybridLsaBarrier;     /* barrierCount's */
    ncclGinBarrierHandle_t hybridRailGinBarrier; /* barrierCount's */

    ncclGinBarrierHandle_t worldGinBarrier; /* worldGinBarrierCount's */
};

/* Host functions (libnccl.so.2). */
NCCL_EXTERN_C __host__ ncclResult_t ncclCommQueryProperties(ncclComm_t comm,
                                                            ncclCommProperties_t *props);
NCCL_EXTERN_C __host__ ncclResult_t ncclDevCommCreate(ncclComm_t comm,
                                                      ncclDevCommRequirements_t const *reqs,
                                                      ncclDevComm_t *outDevComm);
NCCL_EXTERN_C __host__ ncclResult_t ncclDevCommDestroy(ncclComm_t comm,
                                                       ncclDevComm_t const *devComm);

/* Where a window's buffer of an LSA rank (or of a world rank in the LSA team) is mapped in
 * the calling process. No multimem: the two multimem queries fail. */
NCCL_EXTERN_C __host__ ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window,
                                                                    size_t offset, void **outPtr);
NCCL_EXTERN_C __host__ ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                                                 ncclMultimemHandle_t multimem,
                                                                 void **outPtr);
NCCL_EXTERN_C __host__ ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset,
                                                            int lsaRank, void **outPtr);
NCCL_EXTERN_C __host__ ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset,
                                                             int peer, void **outPtr);

NCCL_EXTERN_C __host__ ncclTeam_t ncclTeamWorld(ncclComm_t comm);
NCCL_EXTERN_C __host__ ncclTeam_t ncclTeamLsa(ncclComm_t comm);
NCCL_EXTERN_C __host__ ncclTeam_t ncclTeamRail(ncclComm_t comm);
NCCL_EXTERN_C __host__ int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
NCCL_EXTERN_C __host__ int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

/* Team arithmetic (host and device). */
#if __cplusplus
NCCL_HOST_DEVICE_INLINE ncclTeam ncclTeamWorld(ncclDevComm const &comm)
{
    ncclTeam t;
    t.nRanks = comm.nRanks;
    t.rank = comm.rank;
    t.stride = 1;
    return t;
}

NCCL_HOST_DEVICE_INLINE ncclTeam ncclTeamLsa(ncclDevComm const &comm)
{
    ncclTeam t;
    t.nRanks = comm.lsaSize;
    t.rank = comm.lsaRank;
    t.stride = 1;
    return t;
}

NCCL_HOST_DEVICE_INLINE ncclTeam ncclTeamRail(ncclDevComm const &comm)
{
    ncclTeam t;
    t.nRanks = comm.nRanks / comm.lsaSize;
    t.rank = comm.rank / comm.lsaSize;
    t.stride = comm.lsaSize;
    return t;
}

/* World rank of member `rank` of tm (tm must contain the caller). */
NCCL_HOST_DEVICE_INLINE int ncclTeamRankToWorld(ncclDevComm const &comm, ncclTeam tm, int rank)
{
    return comm.rank + (rank - tm.rank) * tm.stride;
}

/* LSA rank of member `rank` of tm (which must lie within the LSA team). */
NCCL_HOST_DEVICE_INLINE int ncclTeamRankToLsa(ncclDevComm const &comm, ncclTeam tm, int rank)
{
    return comm.lsaRank + (rank - tm.rank) * tm.stride;
}
#endif

/* Whether member bRank of team b is a member of team a (both contain the caller). */
NCCL_EXTERN_C NCCL_HOST_DEVICE_INLINE bool ncclTeamRankIsMember(ncclTeam_t a, ncclTeam_t b,
                                                                int bRank)
{
    int dWorld = (bRank - b.rank) * b.stride;
    if (dWorld % a.stride != 0) return false;
    int aRank = a.rank + dWorld / a.stride;
    return aRank >= 0 && aRank < a.nRanks;
}

/* The rank in team a of member bRank of team b (valid when ncclTeamRankIsMember). */
NCCL_EXTERN_C NCCL_HOST_DEVICE_INLINE int ncclTeamRankToTeam(ncclTeam_t a, ncclTeam_t b, int bRank)
{
    return a.rank + ((bRank - b.rank) * b.stride) / a.stride;
}

/* Split parent into consecutive blocks of innerSize: the block holding the caller (inner) and
 * the team of the callers' counterparts in every block (outer). */
NCCL_EXTERN_C NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamInnerFactor(ncclTeam_t parent,
                                                                     int innerSize)
{
    ncclTeam_t t;
    t.nRanks = innerSize;
    t.rank = parent.rank % innerSize;
    t.stride = parent.stride;
    return t;
}

NCCL_EXTERN_C NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamOuterFactor(ncclTeam_t parent,
                                                                     int innerSize)
{
    ncclTeam_t t;
    t.nRanks = parent.nRanks / innerSize;
    t.rank = parent.rank / innerSize;
    t.stride = parent.stride * innerSize;
    return t;
}

/* The index-th member (in parent's numbering) of parent minus subset, subset being a
 * sub-team of parent that contains the caller. */
NCCL_EXTERN_C NCCL_HOST_DEVICE_INLINE int ncclTeamRankInDifference(ncclTeam_t parent,
                                                                   ncclTeam_t subset, int index)
{
    /* In parent's numbering subset is first, first + step, ..., first + (n-1) * step. */
    int step = subset.stride / parent.stride;
    int first = parent.rank - subset.rank * step;
    int n = subset.nRanks;
    if (step < 0) {
        step = -step;
        first -= (n - 1) * step;
    }
    if (index < first) return index; /* below the subset */
    int r = index - first;           /* skipped members after first */
    int gaps = (n - 1) * (step - 1); /* parent members strictly inside the subset's span */
    if (r < gaps) return first + 1 + (r / (step - 1)) * step + r % (step - 1);
    return first + (n - 1) * step + 1 + (r - gaps);
}

/* Offset of a resource buffer in the resource window. */
NCCL_EXTERN_C NCCL_HOST_DEVICE_INLINE size_t ncclGetResourceBufferOffset(ncclDevResourceHandle_t h)
{
    return (size_t)h * 128;
}

#if __CUDACC__
/* Window pointers. peer in ncclGetLsaPointer is an LSA rank; in ncclGetPeerPointer a world
 * rank (or a member of tm) that lies in the LSA team. */
NCCL_DEVICE_INLINE void *ncclGetLsaPointer(ncclWindow_t w, size_t offset, int peer)
{
    return w->lsaPtrs[peer] + offset;
}

NCCL_DEVICE_INLINE void *ncclGetLocalPointer(ncclWindow_t w, size_t offset)
{
    return w->lsaFlatBase + offset;
}

NCCL_DEVICE_INLINE void *ncclGetPeerPointer(ncclWindow_t w, size_t offset, int peer)
{
    return w->lsaPtrs[w->lsaRank + (peer - w->worldRank)] + offset;
}

NCCL_DEVICE_INLINE void *ncclGetPeerPointer(ncclWindow_t w, size_t offset, ncclTeam tm, int peer)
{
    return w->lsaPtrs[w->lsaRank + (peer - tm.rank) * tm.stride] + offset;
}

/* Multicast is never set up by zinc (ncclDevCommCreate refuses lsaMultimem and team
 * multimem), so no valid handle reaches these; they compute NCCL's address arithmetic on
 * whatever handle they are given. */
NCCL_DEVICE_INLINE void *ncclGetMultimemPointer(ncclWindow_t w, size_t offset,
                                                ncclMultimemHandle mm)
{
    return (char *)mm.mcBasePtr + (size_t)w->mcOffset4K * 4096 + offset;
}

NCCL_DEVICE_INLINE void *ncclGetLsaMultimemPointer(ncclWindow_t w, size_t offset,
                                                   ncclDevComm const &comm)
{
    return ncclGetMultimemPointer(w, offset, comm.lsaMultimem);
}

/* Resource buffers: offsets in the device communicator's resource window. */
NCCL_DEVICE_INLINE void *ncclGetResourceBufferLsaPointer(ncclDevComm const &comm,
                                                         ncclDevResourceHandle h, int peer)
{
    return ncclGetLsaPointer(comm.resourceWindow, ncclGetResourceBufferOffset(h), peer);
}

NCCL_DEVICE_INLINE void *ncclGetResourceBufferLocalPointer(ncclDevComm const &comm,
                                                           ncclDevResourceHandle h)
{
    return comm.resourceWindow_inlined.lsaFlatBase + ncclGetResourceBufferOffset(h);
}

NCCL_DEVICE_INLINE void *ncclGetResourceBufferPeerPointer(ncclDevComm const &comm,
                                                          ncclDevResourceHandle h, ncclTeam tm,
                                                          int peer)
{
    return ncclGetLsaPointer(comm.resourceWindow, ncclGetResourceBufferOffset(h),
                             comm.lsaRank + (peer - tm.rank) * tm.stride);
}

NCCL_DEVICE_INLINE void *ncclGetResourceBufferMultimemPointer(ncclDevComm const &comm,
                                                              ncclDevResourceHandle h,
                                                              ncclMultimemHandle mm)
{
    return ncclGetMultimemPointer(comm.resourceWindow, ncclGetResourceBufferOffset(h), mm);
}

NCCL_DEVICE_INLINE void *ncclGetResourceBufferLsaMultimemPointer(ncclDevComm const &comm,
                                                                 ncclDevResourceHandle h)
{
    return ncclGetResourceBufferMultimemPointer(comm, h, comm.lsaMultimem);
}

/* The window holding ptr among the windows registered on the communicator before the device
 * communicator was made (ncclDevCommCreate copies the list into device memory then), searched
 * by the threads of coop's warp together. nullptr when ptr is in none of them. */
template <typename Coop>
NCCL_DEVICE_INLINE ncclWindow_t ncclFindWindow(Coop coop, ncclDevComm const &comm, void const *ptr)
{
    auto lanes = ncclCoopCoalesced(coop);
    uint32_t mask = ncclCoopGetLaneMask(lanes);
    uintptr_t p = (uintptr_t)ptr;
    for (ncclDevCommWindowTable const *t = comm.windowTable; t; t = t->next) {
        ncclWindow_t mine = nullptr;
        for (int i = lanes.thread_rank(); i < 32; i += lanes.size()) {
            ncclDevCommWindowTable::Entry const &e = t->entries[i];
            if (e.window && p - e.base < e.size) mine = e.window;
        }
        uint32_t hit = __ballot_sync(mask, mine != nullptr);
        if (hit) {
            int src = __ffs(hit) - 1;
            return (ncclWindow_t)__shfl_sync(mask, (unsigned long long)mine, src);
        }
    }
    return nullptr;
}
#endif /* __CUDACC__ */

#endif
