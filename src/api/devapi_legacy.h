/*
 * The device API's structs as NCCL 2.28.9's header laid them out, before NCCL 2.29 put size /
 * magic / version fields into them: what a program built against that header passes to
 * ncclDevCommCreate and ncclDevCommDestroy (the CUDA 13 toolkit ships that header). Plain C,
 * no zinc headers beyond the device API's: tests/devapi/layout_test.cc prints these layouts
 * and compares them with the 2.28.9 reference header.
 *
 *   ncclDevCommRequirements (56 bytes)      ncclDevComm (200 bytes)
 *     0 resourceRequirementsList              0 rank, nRanks, nRanks_rcp32, lsaRank, lsaSize,
 *     8 teamRequirementsList                    lsaSize_rcp32 (6 x 4 bytes)
 *    16 lsaMultimem (bool)                   24 windowTable   32 resourceWindow
 *    20 barrierCount, lsaBarrierCount,       40 resourceWindow_inlined (72 bytes)
 *       railGinBarrierCount,                112 lsaMultimem   120 lsaBarrier   128 railGinBarrier
 *       lsaLLA2ABlockCount, lsaLLA2ASlotCount  136 ginContextCount (uint8), ginTypes[4] (uint8)
 *    40 ginForceEnable (bool)               144 ginHandles[4]
 *    44 ginContextCount, ginSignalCount,    176 ginSignalBase, ginSignalCount, ginCounterBase,
 *       ginCounterCount                         ginCounterCount (4 x 4 bytes)
 *                                           192 ginSignalShadows
 */
#ifndef ZN_API_DEVAPI_LEGACY_H
#define ZN_API_DEVAPI_LEGACY_H

#include "nccl_device/core.h"

struct zn_devreqs_v22809 {
    ncclDevResourceRequirements_t *resourceRequirementsList;
    ncclTeamRequirements_t *teamRequirementsList;
    bool lsaMultimem;
    int barrierCount;
    int lsaBarrierCount;
    int railGinBarrierCount;
    int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
    bool ginForceEnable;
    int ginContextCount;
    int ginSignalCount;
    int ginCounterCount;
};

/* The window record's head as 2.28.9's ncclDevComm inlines it. */
struct zn_devwin_head_v22809 {
    void *winHost;
    char *lsaFlatBase;
    int lsaRank;
    int worldRank;
    uint32_t stride4G;
    uint32_t mcOffset4K;
    uint32_t ginOffset4K;
    void *ginWins[4];
};

struct zn_devcomm_v22809 {
    int rank, nRanks;
    uint32_t nRanks_rcp32;
    int lsaRank, lsaSize;
    uint32_t lsaSize_rcp32;
    void *windowTable;
    ncclWindow_t resourceWindow;
    struct zn_devwin_head_v22809 resourceWindow_inlined;
    ncclMultimemHandle_t lsaMultimem;
    ncclLsaBarrierHandle_t lsaBarrier;
    ncclGinBarrierHandle_t railGinBarrier;
    uint8_t ginContextCount;
    uint8_t ginTypes[4];
    void *ginHandles[4];
    uint32_t ginSignalBase;
    int ginSignalCount;
    uint32_t ginCounterBase;
    int ginCounterCount;
    uint64_t *ginSignalShadows;
};

#define ZN_NCCL_VERSION_V22809 22809

#endif
