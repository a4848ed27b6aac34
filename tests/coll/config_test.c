/*
 * config_check: the communicator config of NCCL 2.19 to 2.30 headers, on host communicators.
 *
 *   - configs laid out as each NCCL header from 2.19 to 2.30.7 lays them out (older ones are
 *     prefixes of 2.30.7's; size and version say which) are accepted, read by their size and
 *     version: bytes past the size and fields newer than the version are never read (a
 *     2.28-built program's config followed by garbage works; the same values in a 2.30.7
 *     config are refused with the field's name);
 *   - the 2.29 / 2.30 fields are checked (graphUsageMode 0-2, numRmaCtx >= 0, maxP2pPeers >= 1,
 *     graphStreamOrdering 0-1) and honoured: maxP2pPeers splits a group's sends and receives
 *     into waves (the executor's TRACE line says how many, from the log this program reads),
 *     with every result exact;
 *   - the version and the result code NCCL 2.30 added (ncclTimeout).
 *
 *   ZINC_DEBUG=TRACE ZINC_DEBUG_SUBSYS=COLL ZINC_DEBUG_FILE=/tmp/cfg.%h.%p zinc-run -n 4
 * config_check
 *
 * Public API only (zinc's nccl.h: NCCL 2.30.7's).
 */
#include "nccl.h"
#include "bootstrap/launcher.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks;
static ncclComm_t world;
static long failures;

#include "mp_check.h"

/* The config of an older header: the first `size` bytes of 2.30.7's layout, then `tail` (what
 * follows the caller's struct in its memory, which the library must not read). */
struct old_config {
    union {
        ncclConfig_t cfg;
        unsigned char bytes[sizeof(ncclConfig_t)];
    } u;
};

static ncclConfig_t *old_config(struct old_config *o, size_t size, unsigned version,
                                unsigned char tail)
{
    ncclConfig_t def = NCCL_CONFIG_INITIALIZER;
    memset(o->u.bytes, tail, sizeof(o->u.bytes));
    memcpy(o->u.bytes, &def, size);
    o->u.cfg.size = size;
    o->u.cfg.version = version;
    return &o->u.cfg;
}

/* A split of world with cfg (every rank in one color): the result, and the comm checked with
 * an allreduce when it was made. */
static ncclResult_t split_with(ncclConfig_t *cfg, const char *what)
{
    ncclComm_t c = NULL;
    ncclResult_t r = ncclCommSplit(world, 0, rank, &c, cfg);
    if (r != ncclSuccess) return r;
    int64_t x = rank + 1, sum = 0;
    NCCLCHECK(ncclAllReduce(&x, &sum, 1, ncclInt64, ncclSum, c, NULL));
    EXPECT(sum == (int64_t)nranks * (nranks + 1) / 2, "%s: allreduce gave %lld", what,
           (long long)sum);
    NCCLCHECK(ncclCommDestroy(c));
    return ncclSuccess;
}

/* The sizes and versions of the headers that changed the struct (older ones are prefixes). */
static const struct {
    size_t size;
    unsigned version;
    const char *header;
} layouts[] = {
    { offsetof(ncclConfig_t, trafficClass), 21903, "2.19.3" },
    { offsetof(ncclConfig_t, commName), 22605, "2.26.5" },
    { offsetof(ncclConfig_t, nChannelsPerNetPeer), 22707, "2.27.7" },
    { offsetof(ncclConfig_t, graphUsageMode), 22809, "2.28.9" },
    { offsetof(ncclConfig_t, maxP2pPeers), 22907, "2.29.7" },
    { offsetof(ncclConfig_t, graphStreamOrdering), 23004, "2.30.4" },
    { sizeof(ncclConfig_t), 23007, "2.30.7" },
};

static void check_layouts(void)
{
    struct old_config o;
    for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
        /* The struct of that header is padded to 8 bytes. */
        size_t size = (layouts[i].size + 7) & ~(size_t)7;
        /* 0x7f bytes after the struct: as fields, values every check would refuse. */
        ncclConfig_t *c = old_config(&o, size, layouts[i].version, 0x7f);
        ncclResult_t r = split_with(c, layouts[i].header);
        EXPECT(r == ncclSuccess, "a config of the %s header (%zu bytes) was refused: %s",
               layouts[i].header, size, ncclGetLastError(NULL));
    }
}

/* The same invalid values are ignored in a config whose version predates the field, and
 * refused (naming the field) in one of the version that has it. */
static void check_new_fields(void)
{
    static const struct {
        size_t off;
        int bad;
        const char *field;
        unsigned since;
    } fields[] = {
        { offsetof(ncclConfig_t, graphUsageMode), 3, "graphUsageMode", 22900 },
        { offsetof(ncclConfig_t, numRmaCtx), -2, "numRmaCtx", 22900 },
        { offsetof(ncclConfig_t, maxP2pPeers), 0, "maxP2pPeers", 23000 },
        { offsetof(ncclConfig_t, graphStreamOrdering), 2, "graphStreamOrdering", 23005 },
    };
    struct old_config o;
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        ncclConfig_t *c = old_config(&o, sizeof(ncclConfig_t), fields[i].since - 1, 0);
        memcpy(o.u.bytes + fields[i].off, &fields[i].bad, sizeof(int));
        ncclResult_t r = split_with(c, fields[i].field);
        EXPECT(r == ncclSuccess,
               "%s %d in a config of version %u (before the field) was not "
               "ignored: %s",
               fields[i].field, fields[i].bad, fields[i].since - 1, ncclGetLastError(NULL));
        c = old_config(&o, sizeof(ncclConfig_t), NCCL_VERSION_CODE, 0);
        memcpy(o.u.bytes + fields[i].off, &fields[i].bad, sizeof(int));
        r = split_with(c, fields[i].field);
        EXPECT(r == ncclInvalidArgument && strstr(ncclGetLastError(NULL), fields[i].field),
               "%s %d in a %d config: %s (%s), expected ncclInvalidArgument naming it",
               fields[i].field, fields[i].bad, NCCL_VERSION_CODE, ncclGetErrorString(r),
               ncclGetLastError(NULL));
    }
    ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
    bad.magic = 0x12345678;
    ncclComm_t c = NULL;
    EXPECT(ncclCommSplit(world, 0, rank, &c, &bad) == ncclInvalidArgument,
           "a config without NCCL_CONFIG_INITIALIZER's magic was accepted");
    /* graphStreamOrdering 0 needs graphUsageMode 0 or 1: with 2 it falls back (NCCL's rule). */
    ncclConfig_t mix = NCCL_CONFIG_INITIALIZER;
    mix.graphStreamOrdering = 0;
    mix.graphUsageMode = 2;
    EXPECT(split_with(&mix, "graphStreamOrdering 0 with graphUsageMode 2") == ncclSuccess,
           "graphStreamOrdering 0 with graphUsageMode 2 was refused: %s", ncclGetLastError(NULL));
    mix.graphUsageMode = 1;
    EXPECT(split_with(&mix, "graphStreamOrdering 0 with graphUsageMode 1") == ncclSuccess,
           "graphStreamOrdering 0 with graphUsageMode 1 was refused: %s", ncclGetLastError(NULL));
}

/* "send/recv ... in N waves" lines of this process's log so far. */
static int count_wave_lines(int waves)
{
    const char *pat = getenv("ZINC_DEBUG_FILE");
    if (!pat) return -1;
    char path[512], host[128] = "";
    gethostname(host, sizeof(host) - 1);
    size_t k = 0;
    for (const char *p = pat; *p && k + 64 < sizeof(path); p++) {
        if (p[0] == '%' && p[1] == 'p') {
            k += (size_t)snprintf(path + k, sizeof(path) - k, "%d", (int)getpid());
            p++;
        } else if (p[0] == '%' && p[1] == 'h') {
            k += (size_t)snprintf(path + k, sizeof(path) - k, "%s", host);
            p++;
        } else {
            path[k++] = *p;
        }
    }
    path[k] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char want[96], line[1024];
    snprintf(want, sizeof(want), "run in %d waves (config.maxP2pPeers)", waves);
    int n = 0;
    while (fgets(line, sizeof(line), f)) n += strstr(line, want) != NULL;
    fclose(f);
    return n;
}

/* Every rank sends a distinct block to every rank (itself too) in one group, on a comm with
 * maxP2pPeers = max (NCCL_CONFIG_UNDEF_INT: unset); every block is checked. Returns the
 * number of waves the group must have run in. */
static int exchange(int max)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.maxP2pPeers = max;
    ncclComm_t c = NULL;
    NCCLCHECK(ncclCommSplit(world, 0, rank, &c, &cfg));
    enum { N = 1000 };
    int32_t *out = malloc((size_t)nranks * N * sizeof(int32_t));
    int32_t *in = malloc((size_t)nranks * N * sizeof(int32_t));
    if (!out || !in) exit(2);
    for (int p = 0; p < nranks; p++)
        for (int i = 0; i < N; i++) {
            out[(size_t)p * N + i] = rank * 1000003 + p * 1009 + i;
            in[(size_t)p * N + i] = -1;
        }
    NCCLCHECK(ncclGroupStart());
    for (int p = 0; p < nranks; p++) {
        NCCLCHECK(ncclSend(out + (size_t)p * N, N, ncclInt32, p, c, NULL));
        NCCLCHECK(ncclRecv(in + (size_t)p * N, N, ncclInt32, p, c, NULL));
    }
    NCCLCHECK(ncclGroupEnd());
    long bad = 0;
    for (int p = 0; p < nranks; p++)
        for (int i = 0; i < N; i++) bad += in[(size_t)p * N + i] != p * 1000003 + rank * 1009 + i;
    EXPECT(bad == 0, "maxP2pPeers %d: %ld received elements wrong", max, bad);
    free(out);
    free(in);
    NCCLCHECK(ncclCommDestroy(c));
    if (max == NCCL_CONFIG_UNDEF_INT || max >= nranks - 1) return 1;
    return (nranks - 1 + max - 1) / max; /* steps 1..n-1 in waves of max */
}

static void check_max_p2p_peers(void)
{
    const int maxes[] = { NCCL_CONFIG_UNDEF_INT, 1, 2, 3, 64 };
    for (size_t i = 0; i < sizeof(maxes) / sizeof(maxes[0]); i++) {
        int waves = exchange(maxes[i]);
        if (waves < 2) continue;
        int lines = count_wave_lines(waves);
        if (lines < 0) continue; /* no log file to read: results were still checked */
        EXPECT(lines >= 1,
               "maxP2pPeers %d on %d ranks: the log has no line saying the group ran "
               "in %d waves",
               maxes[i], nranks, waves);
    }
}

static void check_version(void)
{
    int v = 0;
    NCCLCHECK(ncclGetVersion(&v));
    EXPECT(v == NCCL_VERSION_CODE && v == NCCL_VERSION(2, 30, 7),
           "ncclGetVersion %d, NCCL_VERSION_CODE %d", v, NCCL_VERSION_CODE);
    EXPECT(ncclTimeout == 8 && ncclNumResults == 9, "ncclTimeout %d ncclNumResults %d",
           (int)ncclTimeout, (int)ncclNumResults);
    EXPECT(strcmp(ncclGetErrorString(ncclTimeout), ncclGetErrorString(ncclNumResults)) != 0,
           "ncclTimeout has no string of its own: %s", ncclGetErrorString(ncclTimeout));
}

int main(void)
{
    world = mp_world();
    check_version();
    check_layouts();
    check_new_fields();
    check_max_p2p_peers();
    return mp_finish(world, "config_check");
}
