/*
 * The collective list (abi/coll_list.h) against everything derived from it: enum zn_coll and
 * ZN_NCOLLS, the facts table (algo/coll_facts.c), the kernels' helpers, the GPU predicates
 * (algo/gpu.c), the host algorithms that read its columns, zinc-perf's rows
 * (tools/zinc-perf-coll.c, compiled in) and the lists of benchmarks that CMake read from the
 * header for the tests (cmake/ZincCollList.cmake; CMake passes them in as ZINC_CMAKE_BENCHES*).
 * The rows below are the list as the compiler reads it, column by column.
 */
#include "abi/coll_list.h"
#include "algo/algo.h"
#include "algo/coll_facts.h"
#include "algo/gpu.h"
#include "zinc-perf.h"
#include "zt.h"

#include <stdio.h>
#include <string.h>

struct row {
    int id;
    const char *sid, *name, *api, *bench;
    int reduces, rooted, send, recv, kernel, ring, sendrecv, zc, bus;
};

static const struct row rows[] = {
#define X(id, name, api, bench, red, root, send, recv, kernel, ring, sr, zc, bus) \
    { ZN_COLL_##id, #id,  #name,         #api,          #bench,                   \
      red,          root, ZN_EXT_##send, ZN_EXT_##recv, ZN_KERN_##kernel,         \
      ring,         sr,   ZN_ZC_##zc,    ZP_BUS_##bus },
    ZN_COLL_LIST(X)
#undef X
};
#define NROWS ((int)(sizeof(rows) / sizeof(rows[0])))

static int has_bench(const struct row *r)
{
    return strcmp(r->bench, "none") != 0;
}

/* The enum is the rows in order; the collectives come before the point-to-point rows, and
 * ZN_NCOLLS counts them. */
ZT_TEST(enum_is_the_rows)
{
    ZT_EQ_INT(NROWS, ZN_NCOLL_FACTS);
    int ncoll = 0;
    for (int i = 0; i < NROWS; i++) {
        ZT_EQ_INT(rows[i].id, i);
        int p2p = rows[i].kernel == ZN_KERN_P2P;
        ZT_EQ_INT(p2p, i >= ZN_NCOLLS);
        ncoll += !p2p;
    }
    ZT_EQ_INT(ncoll, ZN_NCOLLS);
}

/* Every name is unique, each API name is NCCL's, and every collective has a benchmark (the
 * receive row may share its send row's). */
ZT_TEST(names_are_unique)
{
    for (int i = 0; i < NROWS; i++) {
        const struct row *r = &rows[i];
        ZT_ASSERT(!strncmp(r->api, "nccl", 4) && strlen(r->api) > 4);
        ZT_ASSERT(strspn(r->bench, "abcdefghijklmnopqrstuvwxyz_") == strlen(r->bench));
        ZT_ASSERT(has_bench(r) || r->kernel == ZN_KERN_P2P);
        for (int j = 0; j < i; j++) {
            ZT_ASSERT(strcmp(r->sid, rows[j].sid));
            ZT_ASSERT(strcmp(r->name, rows[j].name));
            ZT_ASSERT(strcmp(r->api, rows[j].api));
            ZT_ASSERT(!has_bench(r) || strcmp(r->bench, rows[j].bench));
        }
    }
}

/* The facts table says what the rows say; the kernels take the host's enum (dev_coll maps
 * back to its own row), the point-to-point rows the send/recv kernel. */
ZT_TEST(facts_table_is_the_rows)
{
    for (int i = 0; i < NROWS; i++) {
        const struct row *r = &rows[i];
        const struct zn_coll_facts *f = zn_coll_facts((enum zn_coll)i);
        ZT_EQ_STR(f->name, r->name);
        ZT_EQ_STR(zn_coll_name((enum zn_coll)i), r->name);
        ZT_EQ_STR(f->api, r->api);
        ZT_EQ_INT(f->reduces, r->reduces);
        ZT_EQ_INT(f->rooted, r->rooted);
        ZT_EQ_INT(f->send, r->send);
        ZT_EQ_INT(f->recv, r->recv);
        ZT_EQ_INT(f->kernel, r->kernel);
        ZT_EQ_INT(f->ring, r->ring);
        ZT_EQ_INT(f->sendrecv, r->sendrecv);
        ZT_EQ_INT(f->zc, r->zc);
        ZT_EQ_INT(f->p2p, r->kernel == ZN_KERN_P2P);
        if (f->p2p) {
            ZT_EQ_INT(f->dev_coll, -1);
            continue;
        }
        ZT_EQ_INT(f->dev_coll, i);
        ZT_EQ_STR(zn_coll_facts((enum zn_coll)f->dev_coll)->name, r->name);
    }
}

/* What kernels read (abi/coll_list.h's helpers) agrees with the facts, and is 0 out of range. */
ZT_TEST(kernel_helpers_are_the_facts)
{
    for (int i = 0; i < NROWS; i++) {
        ZT_EQ_INT(zn_coll_reduces(i), zn_coll_facts((enum zn_coll)i)->reduces);
        ZT_EQ_INT(zn_coll_rooted(i), zn_coll_facts((enum zn_coll)i)->rooted);
    }
    ZT_EQ_INT(zn_coll_reduces(-1), 0);
    ZT_EQ_INT(zn_coll_rooted(NROWS), 0);
}

/* The GPU predicates and the host algorithms that read the list's columns. */
ZT_TEST(predicates_are_the_columns)
{
    ZT_EQ_INT(ZN_GPU_ZC_SEND | ZN_GPU_ZC_RECV, ZN_ZC_BOTH);
    const struct zn_algo *pairwise = zn_algo_find("pairwise");
    int ring[3] = { 0, 1, 2 };
    struct zn_algo_ctx ctx = { .rank = 0, .nranks = 3, .nhosts = 1, .ring = ring };
    ZT_ASSERT(pairwise);
    for (int i = 0; i < ZN_NCOLLS; i++) {
        const struct row *r = &rows[i];
        enum zn_coll c = (enum zn_coll)i;
        int overlaps = r->send == ZN_EXT_BLOCKS && r->recv == ZN_EXT_BLOCKS;
        ZT_EQ_INT(zn_coll_in_place_overlaps(c), overlaps);
        ZT_EQ_INT(zn_gpu_ring_on_gpu(c), r->ring);
        ZT_EQ_INT(zn_gpu_as_sendrecv(c, 0), r->sendrecv);
        ZT_EQ_INT(zn_gpu_as_sendrecv(c, 1), r->sendrecv && !overlaps);
        ZT_EQ_INT(zn_gpu_zc_buffers(c), r->zc);
        struct zn_coll_args a = { .coll = c, .count = 10, .dtype = ncclFloat32, .esize = 4 };
        ZT_EQ_INT(pairwise->supports(&ctx, &a), r->sendrecv);
    }
}

/* zinc-perf has a row per row at its enum value, found by its benchmark name (and
 * nccl-tests' binary name), with the list's bus factor and facts; rows without a benchmark
 * are not found. */
ZT_TEST(zinc_perf_rows_are_the_rows)
{
    ZT_EQ_INT(zp_ncolls, NROWS);
    ZT_ASSERT(zp_coll_find("none") == NULL);
    for (int i = 0; i < NROWS; i++) {
        const struct row *r = &rows[i];
        const struct zp_coll *p = &zp_colls[i];
        ZT_EQ_STR(p->name, r->bench);
        if (!has_bench(r)) {
            ZT_ASSERT(!p->run && !p->source);
            continue;
        }
        char perf[64];
        snprintf(perf, sizeof(perf), "%s_perf", r->bench);
        ZT_ASSERT(zp_coll_find(r->bench) == p);
        ZT_ASSERT(zp_coll_find(perf) == p);
        ZT_ASSERT(p->run && p->source);
        ZT_EQ_INT(p->bus, r->bus);
        int p2p = r->kernel == ZN_KERN_P2P;
        ZT_EQ_INT(p->send_side, p2p ? ZN_COLL_SEND : i);
        ZT_EQ_INT(p->recv_side, p2p ? ZN_COLL_RECV : i);
        ZT_EQ_INT(zp_coll_has_op(p), r->reduces);
        ZT_EQ_INT(zp_coll_has_root(p), r->rooted);
    }
}

/* The benchmarks of the rows that pass `keep`, joined by commas, as CMake lists them. */
static void join(char *out, size_t len, int (*keep)(const struct row *r))
{
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < NROWS; i++)
        if (has_bench(&rows[i]) && keep(&rows[i]))
            used +=
                (size_t)snprintf(out + used, len - used, "%s%s", used ? "," : "", rows[i].bench);
}

static int all(const struct row *r)
{
    return 1;
}

static int ring_rows(const struct row *r)
{
    return r->ring;
}

static int allreduce_rows(const struct row *r)
{
    return r->kernel == ZN_KERN_ALLREDUCE;
}

static int direct_rows(const struct row *r)
{
    return r->kernel == ZN_KERN_DIRECT;
}

static int p2p_rows(const struct row *r)
{
    return r->kernel == ZN_KERN_P2P;
}

/* CMake's reading of the header (the test lists of tests/gpu and tests/perf) is the
 * compiler's. */
ZT_TEST(cmake_lists_are_the_rows)
{
    static const struct {
        const char *what, *cmake;
        int (*keep)(const struct row *r);
    } lists[] = {
        { "ZINC_COLL_BENCHES", ZINC_CMAKE_BENCHES, all },
        { "ZINC_COLL_BENCHES_RING", ZINC_CMAKE_BENCHES_RING, ring_rows },
        { "ZINC_COLL_BENCHES_ALLREDUCE", ZINC_CMAKE_BENCHES_ALLREDUCE, allreduce_rows },
        { "ZINC_COLL_BENCHES_DIRECT", ZINC_CMAKE_BENCHES_DIRECT, direct_rows },
        { "ZINC_COLL_BENCHES_P2P", ZINC_CMAKE_BENCHES_P2P, p2p_rows },
    };
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        char want[512];
        join(want, sizeof(want), lists[i].keep);
        if (strcmp(lists[i].cmake, want) != 0)
            ZT_FAIL("%s: CMake read \"%s\", the header's rows are \"%s\"", lists[i].what,
                    lists[i].cmake, want);
    }
}

ZT_MAIN(ZT_CASE(enum_is_the_rows), ZT_CASE(names_are_unique), ZT_CASE(facts_table_is_the_rows),
        ZT_CASE(kernel_helpers_are_the_facts), ZT_CASE(predicates_are_the_columns),
        ZT_CASE(zinc_perf_rows_are_the_rows), ZT_CASE(cmake_lists_are_the_rows))
