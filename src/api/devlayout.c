/*
 * The device API's structs as callers built against different NCCL headers lay them out.
 *
 * NCCL 2.29 put size / magic / version fields at the head of ncclDevCommRequirements and
 * ncclCommProperties, filled by their *_INITIALIZER macros, and 2.30 put magic / version at
 * the head of ncclDevComm; each release may append fields. zinc's headers are 2.30.7's. The
 * host calls take:
 *
 *   2.30.x layout   magic == NCCL_API_MAGIC at offset 8 (ncclDevComm: offset 0) and a
 *                   version from 2.30.0 to zinc's own: read by size and version, fields the
 *                   caller's header did not have take the initializer's values
 *   2.28.9 layout   no magic (the CUDA 13 toolkit's header, devapi_legacy.h): the same
 *                   requirements, read at their old offsets; the device communicator is
 *                   written back in the old layout
 *
 * and refuse everything else with ncclInvalidUsage saying why: a version newer than zinc's
 * (fields zinc cannot know), a 2.29 one (device communicators of a layout zinc does not
 * write), a versioned struct whose size is impossible.
 *
 * Telling the two requirement layouts apart. A 2.30 struct starts with its size (under 4096)
 * and then the magic. A 2.28.9 struct starts with two pointers, each NULL or an address,
 * which is never below 4096 (the first page is never mapped). So a first word between 1 and
 * 4095 means a 2.30 struct: without the magic it was not made with the initializer, and it is
 * refused. NCCL itself refuses every struct without the magic; zinc cannot, because 2.28.9's
 * have none. The price: a 2.30 struct zeroed by hand (memset) before its fields were set
 * reads as a 2.28.9 one, its fields at the wrong offsets. Where that puts a value other than
 * 0 or 1 into a 2.28.9 bool, or an absurd count, it is refused as neither layout; otherwise
 * it is taken as the 2.28.9 struct it looks like. The headers say to use the initializer.
 */
#include "devapi.h"
#include "devapi_legacy.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

_Static_assert(sizeof(struct zn_devreqs_v22809) == 56, "2.28.9 ncclDevCommRequirements");
_Static_assert(offsetof(struct zn_devreqs_v22809, ginForceEnable) == 40,
               "2.28.9 ncclDevCommRequirements");
_Static_assert(sizeof(struct zn_devcomm_v22809) == 200, "2.28.9 ncclDevComm");
_Static_assert(offsetof(struct zn_devcomm_v22809, ginContextCount) == 136, "2.28.9 ncclDevComm");
_Static_assert(offsetof(struct zn_devcomm_v22809, ginSignalShadows) == 192, "2.28.9 ncclDevComm");

/* The versions whose layouts zinc reads, and the first with each appended field. */
#define V2_30_0  NCCL_VERSION(2, 30, 0)
#define V2_30_7  NCCL_VERSION(2, 30, 7)
#define MIN_SIZE 16 /* size, magic, version */

static void version_text(unsigned v, char *buf, size_t n)
{
    snprintf(buf, n, "%u.%u.%u", v / 10000, v / 100 % 100, v % 100);
}

/* A version zinc reads: from 2.30.0 to its own. what names the struct and its initializer. */
static ncclResult_t check_version(const char *fn, const char *what, unsigned version)
{
    char v[32], mine[32];
    version_text(version, v, sizeof(v));
    version_text(NCCL_VERSION_CODE, mine, sizeof(mine));
    if (version > NCCL_VERSION_CODE)
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "%s: %s comes from NCCL %s's header, newer than this library's (%s); "
                        "rebuild the program against zinc's nccl_device.h",
                        fn, what, v, mine);
    if (version < V2_30_0)
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "%s: %s comes from NCCL %s's header (version %u); zinc takes the layouts "
                        "of NCCL 2.28.9 and 2.30: rebuild the program against zinc's "
                        "nccl_device.h",
                        fn, what, v, version);
    return ncclSuccess;
}

static ncclResult_t read_v22809(const void *user, ncclDevCommRequirements_t *r)
{
    const char *fn = "ncclDevCommCreate";
    struct zn_devreqs_v22809 o;
    memcpy(&o, user, sizeof(o));
    /* Bytes of the two bools, read as bytes: a bool holding another value is no 2.28.9 bool. */
    uint8_t mm, force;
    memcpy(&mm, (const char *)user + offsetof(struct zn_devreqs_v22809, lsaMultimem), 1);
    memcpy(&force, (const char *)user + offsetof(struct zn_devreqs_v22809, ginForceEnable), 1);
    int counts[] = { o.barrierCount,       o.lsaBarrierCount,   o.railGinBarrierCount,
                     o.lsaLLA2ABlockCount, o.lsaLLA2ASlotCount, o.ginContextCount,
                     o.ginSignalCount,     o.ginCounterCount };
    int absurd = 0;
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
        absurd |= counts[i] > ZN_DEVAPI_COUNT_MAX;
    if (mm > 1 || force > 1 || absurd)
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "%s: reqs has no NCCL_API_MAGIC and is not a valid NCCL 2.28.9 struct "
                        "either (bool bytes %u and %u, a count above %d): make it with "
                        "NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER",
                        fn, mm, force, ZN_DEVAPI_COUNT_MAX);
    ncclDevCommRequirements_t init = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    *r = init;
    r->version = ZN_NCCL_VERSION_V22809;
    r->resourceRequirementsList = o.resourceRequirementsList;
    r->teamRequirementsList = o.teamRequirementsList;
    r->lsaMultimem = mm;
    /* 2.28.9's barrierCount gave the built-in LSA and rail GIN barriers (lsaBarrier,
     * railGinBarrier) that many barriers at least: its kernels' world barriers use those. */
    r->lsaBarrierCount = o.lsaBarrierCount > o.barrierCount ? o.lsaBarrierCount : o.barrierCount;
    r->railGinBarrierCount =
        o.railGinBarrierCount > o.barrierCount ? o.railGinBarrierCount : o.barrierCount;
    r->barrierCount = 0;
    r->lsaLLA2ABlockCount = o.lsaLLA2ABlockCount;
    r->lsaLLA2ASlotCount = o.lsaLLA2ASlotCount;
    r->ginContextCount = o.ginContextCount;
    r->ginSignalCount = o.ginSignalCount;
    r->ginCounterCount = o.ginCounterCount;
    /* 2.28.9 had no connection type: GIN was on when forced or when anything needed it. */
    int gin = force || o.ginSignalCount > 0 || o.ginCounterCount > 0 || r->railGinBarrierCount > 0;
    int n = 0;
    for (const ncclDevResourceRequirements_t *q = o.resourceRequirementsList; q && !gin && n < 4096;
         q = q->next, n++)
        gin = q->ginSignalCount > 0 || q->ginCounterCount > 0;
    r->ginConnectionType = gin ? NCCL_GIN_CONNECTION_FULL : NCCL_GIN_CONNECTION_NONE;
    return ncclSuccess;
}

ncclResult_t zn_devreqs_read(const void *user, ncclDevCommRequirements_t *r)
{
    const char *fn = "ncclDevCommCreate";
    size_t size;
    unsigned magic, version;
    memcpy(&size, user, sizeof(size));
    memcpy(&magic, (const char *)user + 8, sizeof(magic));
    memcpy(&version, (const char *)user + 12, sizeof(version));
    if (magic != NCCL_API_MAGIC) {
        if (size > 0 && size < 4096)
            return zn_error(ncclInvalidUsage, ZN_CALL,
                            "%s: reqs->size is %zu but reqs->magic is 0x%x, not NCCL_API_MAGIC: "
                            "make reqs with NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER",
                            fn, size, magic);
        return read_v22809(user, r);
    }
    ZN_CHECK(check_version(fn, "reqs", version));
    if (size < MIN_SIZE || size > sizeof(*r))
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "%s: reqs->size is %zu; NCCL %u.%u's ncclDevCommRequirements has at most "
                        "%zu bytes (make reqs with NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER)",
                        fn, size, version / 10000, version / 100 % 100, sizeof(*r));
    ncclDevCommRequirements_t init = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    *r = init;
    memcpy(r, user, size);
    /* 2.30.3 and 2.30.4 end at worldGinBarrierCount; their padding is not ours to read. */
    if (version < V2_30_7) {
        r->ginStrongSignalsRequired = init.ginStrongSignalsRequired;
        r->ginVaSignalsRequired = init.ginVaSignalsRequired;
    }
    r->size = sizeof(*r);
    return ncclSuccess;
}

void zn_devcomm_write(void *user, const ncclDevComm_t *c)
{
    if (c->version != ZN_NCCL_VERSION_V22809) {
        memcpy(user, c, sizeof(*c));
        return;
    }
    struct zn_devcomm_v22809 o;
    memset(&o, 0, sizeof(o));
    o.rank = c->rank;
    o.nRanks = c->nRanks;
    o.nRanks_rcp32 = c->nRanks_rcp32;
    o.lsaRank = c->lsaRank;
    o.lsaSize = c->lsaSize;
    o.lsaSize_rcp32 = c->lsaSize_rcp32;
    o.windowTable = c->windowTable;
    o.resourceWindow = c->resourceWindow;
    o.resourceWindow_inlined.lsaFlatBase = c->resourceWindow_inlined.lsaFlatBase;
    o.resourceWindow_inlined.lsaRank = c->lsaRank;
    o.resourceWindow_inlined.worldRank = c->rank;
    o.lsaMultimem = c->lsaMultimem;
    o.lsaBarrier = c->lsaBarrier;
    o.railGinBarrier = c->railGinBarrier;
    o.ginContextCount = (uint8_t)c->ginContextCount;
    memcpy(o.ginTypes, c->ginNetDeviceTypes, sizeof(o.ginTypes));
    memcpy(o.ginHandles, c->ginHandles, sizeof(o.ginHandles));
    o.ginSignalCount = c->ginSignalCount;
    o.ginCounterCount = c->ginCounterCount;
    o.ginSignalShadows = c->ginSignalShadows;
    memcpy(user, &o, sizeof(o));
}

ncclResult_t zn_devcomm_read_window(const void *user, ncclWindow_t *win)
{
    unsigned magic, version;
    memcpy(&magic, user, sizeof(magic));
    memcpy(&version, (const char *)user + 4, sizeof(version));
    /* A 2.28.9 ncclDevComm starts with its rank, never negative; the magic is. */
    if (magic != NCCL_API_MAGIC) {
        memcpy(win, (const char *)user + offsetof(struct zn_devcomm_v22809, resourceWindow),
               sizeof(*win));
        return ncclSuccess;
    }
    ZN_CHECK(check_version("ncclDevCommDestroy", "devComm", version));
    memcpy(win, (const char *)user + offsetof(ncclDevComm_t, resourceWindow), sizeof(*win));
    return ncclSuccess;
}

/* Each field of the caller's properties that lies within its size. */
#define PUT(field)                                                                     \
    do {                                                                               \
        if (offsetof(ncclCommProperties_t, field) + sizeof(mine->field) <= size)       \
            memcpy((char *)user + offsetof(ncclCommProperties_t, field), &mine->field, \
                   sizeof(mine->field));                                               \
    } while (0)

ncclResult_t zn_props_write(ncclCommProperties_t *user, const ncclCommProperties_t *mine)
{
    const char *fn = "ncclCommQueryProperties";
    if (user->magic != NCCL_API_MAGIC)
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "%s: props->magic is 0x%x, not NCCL_API_MAGIC: make props with "
                        "NCCL_COMM_PROPERTIES_INITIALIZER",
                        fn, user->magic);
    /* Properties carry no device communicator, so every version that has the magic is read
     * by size (2.29's too); only a newer one is refused, as NCCL refuses it. */
    if (user->version > NCCL_VERSION_CODE) ZN_CHECK(check_version(fn, "props", user->version));
    size_t size = user->size;
    if (size < MIN_SIZE)
        return zn_error(ncclInvalidUsage, ZN_CALL,
                        "%s: props->size is %zu: make props with NCCL_COMM_PROPERTIES_INITIALIZER",
                        fn, size);
    PUT(rank);
    PUT(nRanks);
    PUT(cudaDev);
    PUT(nvmlDev);
    PUT(deviceApiSupport);
    PUT(multimemSupport);
    PUT(ginType);
    PUT(nLsaTeams);
    PUT(hostRmaSupport);
    PUT(railedGinType);
    return ncclSuccess;
}
