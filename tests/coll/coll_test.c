/*
 * coll_check: every collective x type x op x {out-of-place, in-place} x count, checked against
 * a reference computed here from the inputs every rank can regenerate. Run under zinc-run:
 *
 *   zinc-run -n 4 coll_check [-c COLLS] [-t TYPES] [-o OPS] [-n COUNTS] [-v]
 *
 * Inputs are small integers (or +-1, 0 and powers of two) chosen so that every partial
 * result is exactly representable even in fp8, which makes the check exact for every type
 * and every reduction order; only avg on floating types (a multiplication by 1/n) is checked
 * with a tolerance. Uses only the public NCCL API; the collectives, their buffer sizes and
 * in-place layouts come from the collective list and its facts (abi/coll_list.h,
 * algo/coll_facts.c compiled in, as zinc-perf does), the expected results from here.
 */
#include "nccl.h"
#include "types.h"
#include "algo/coll_facts.h"
#include "bootstrap/launcher.h"

#include <ctype.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The collectives of the list as -c names them: the name in lower case ("allreduce"). */
static char coll_names[ZN_NCOLLS][32];

static void name_colls(void)
{
    for (int c = 0; c < ZN_NCOLLS; c++) {
        const char *name = zn_coll_name((enum zn_coll)c);
        size_t i = 0;
        for (; name[i] && i + 1 < sizeof(coll_names[c]); i++)
            coll_names[c][i] = (char)tolower((unsigned char)name[i]);
        coll_names[c][i] = 0;
    }
}

enum { O_SUM, O_PROD, O_MAX, O_MIN, O_AVG, O_PREMUL_IMM, O_PREMUL_DEV, NOPS };
static const char *op_names[NOPS] = { "sum", "prod", "max", "min", "avg", "premul", "premul_dev" };

static int rank, nranks, verbose;
static ncclComm_t comm;
static long checks, failures;

#include "mp_check.h"

/* --- inputs and reference ----------------------------------------------------------------- */
/*
 * Reductions: element g (global index across blocks) of rank r is a small integer picked by a
 * hash of (r, g mod PERIOD); results are then periodic in g, so the reference is computed for
 * PERIOD elements and outputs of any length (2^31 and more) are checked against it quickly.
 * Data movement (broadcast, gather, ...): bytes (r*31 + k) mod 251, which differ for every
 * rank and every offset, so a block landing in the wrong place is caught.
 */
#define PERIOD      61
#define BYTE_PERIOD 251

static int is_unsigned(ncclDataType_t t)
{
    return t == ncclUint8 || t == ncclUint32 || t == ncclUint64;
}

static uint32_t mix(int r, size_t g)
{
    uint32_t h = (uint32_t)(r * 0x9e3779b1u) ^ (uint32_t)((g % PERIOD) * 0x85ebca6bu);
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return h;
}

static double input(int r, size_t g, ncclDataType_t t, int op)
{
    int sgn = !is_unsigned(t);
    uint32_t h = mix(r, g);
    switch (op) {
    case O_PROD: return h % 8 == 0 ? 2 : (sgn && h % 8 == 1) ? -1 : 1;
    case O_MAX:
    case O_MIN: return (double)(h % 9) - (sgn ? 4 : 0);
    default: return (double)(h % 3) - (sgn ? 1 : 0);
    }
}

static uint8_t move_byte(int r, size_t k)
{
    return (uint8_t)(((size_t)r * 31 + k) % BYTE_PERIOD);
}

static double premul_scalar(int r, ncclDataType_t t)
{
    if (t == ncclFloat8e4m3 || t == ncclFloat8e5m2) return r % 2 ? -1 : 1;
    if (!tt_is_float(t)) return r % 2 ? 2 : 1;
    return r % 2 ? 2 : 0.5;
}

/* Integer types are reduced modulo 2^bits, as the library does. */
static uint64_t wrap(ncclDataType_t t, uint64_t v)
{
    switch (t) {
    case ncclInt8:
    case ncclUint8: return v & 0xff;
    case ncclInt32:
    case ncclUint32: return v & 0xffffffffu;
    default: return v;
    }
}

static double int_value(ncclDataType_t t, uint64_t v)
{
    v = wrap(t, v);
    switch (t) {
    case ncclInt8: return (int8_t)v;
    case ncclInt32: return (int32_t)v;
    case ncclInt64: return (double)(int64_t)v;
    default: return (double)v;
    }
}

/* The reduced value of global element g over all ranks; *tol is the allowed error. */
static double reduce_ref(size_t g, ncclDataType_t t, int op, double *tol)
{
    *tol = 0;
    int premul = op == O_PREMUL_IMM || op == O_PREMUL_DEV;
    if (!tt_is_float(t)) {
        uint64_t acc = 0;
        for (int r = 0; r < nranks; r++) {
            double x = input(r, g, t, op) * (premul ? premul_scalar(r, t) : 1);
            uint64_t v = (uint64_t)(int64_t)x;
            double a = int_value(t, acc);
            if (r == 0)
                acc = v;
            else if (op == O_PROD)
                acc = acc * v;
            else if (op == O_MAX)
                acc = x > a ? v : acc;
            else if (op == O_MIN)
                acc = x < a ? v : acc;
            else
                acc = acc + v;
        }
        double s = int_value(t, acc);
        /* ncclAvg on integers: C division (toward zero) of the wrapped sum. */
        return op == O_AVG ? (double)((int64_t)s / nranks) : s;
    }
    double acc = 0, mag = 0;
    for (int r = 0; r < nranks; r++) {
        double x = input(r, g, t, op) * (premul ? premul_scalar(r, t) : 1);
        mag += fabs(x);
        if (r == 0)
            acc = x;
        else if (op == O_PROD)
            acc *= x;
        else if (op == O_MAX)
            acc = x > acc ? x : acc;
        else if (op == O_MIN)
            acc = x < acc ? x : acc;
        else
            acc += x;
    }
    if (op == O_AVG) {
        acc /= nranks;
        *tol = 2.0 * (nranks + 2) * tt_eps(t) * (mag + 1.0);
    }
    return acc;
}

/* Replicate the first `period` elements of buf over all n elements. */
static void replicate(uint8_t *buf, size_t n, size_t period, size_t es)
{
    size_t have = n < period ? n : period;
    while (have < n) {
        size_t k = have < n - have ? have : n - have;
        k -= k % period; /* keep the phase */
        if (k == 0) k = n - have < period ? n - have : period;
        memcpy(buf + have * es, buf + (have % period) * es, k * es);
        have += k;
    }
}

/* Rank r's input for a reduction, elements [g0, g0+n) of its global index. */
static void fill_reduce_input(void *buf, size_t n, ncclDataType_t t, int op, int r, size_t g0)
{
    size_t m = n < PERIOD ? n : PERIOD;
    for (size_t i = 0; i < m; i++)
        if (tt_set(t, buf, i, input(r, g0 + i, t, op)) != 0) {
            fprintf(stderr, "test bug: input not representable\n");
            exit(3);
        }
    replicate(buf, n, PERIOD, tt_size[t]);
}

static void fill_move_input(uint8_t *buf, size_t bytes, int r, size_t k0)
{
    size_t m = bytes < BYTE_PERIOD ? bytes : BYTE_PERIOD;
    for (size_t k = 0; k < m; k++) buf[k] = move_byte(r, k0 + k);
    replicate(buf, bytes, BYTE_PERIOD, 1);
}

static void fill_garbage(void *buf, size_t bytes)
{
    memset(buf, 0x5b, bytes);
}

static long report(const char *what, size_t i, double got, double want, double tol)
{
    if (verbose || failures < 20)
        fprintf(stderr, "[%d] MISMATCH %s: element %zu = %g, expected %g (tol %g)\n", rank, what, i,
                got, want, tol);
    return 1;
}

/* Check n reduced elements at out against the reference for global indices [g0, g0+n). */
static long check_reduced(const char *what, const void *out, size_t n, ncclDataType_t t, int op,
                          size_t g0)
{
    size_t es = tt_size[t];
    double want[PERIOD], tol[PERIOD];
    uint8_t expect[2 * PERIOD * 8];
    int exact = 1;
    for (size_t k = 0; k < PERIOD; k++) {
        want[k] = reduce_ref(g0 + k, t, op, &tol[k]);
        if (tol[k] > 0 || tt_set(t, expect, k, want[k]) != 0) exact = 0;
    }
    long bad = 0;
    if (exact) {
        memcpy(expect + PERIOD * es, expect, PERIOD * es);
        for (size_t i = 0; i < n; i += PERIOD) {
            size_t m = n - i < PERIOD ? n - i : PERIOD;
            if (memcmp((const uint8_t *)out + i * es, expect, m * es) == 0) continue;
            for (size_t k = 0; k < m && bad < 5; k++) {
                double got = tt_get(t, out, i + k);
                if (got != want[k] && !(isnan(got) && isnan(want[k])))
                    bad += report(what, i + k, got, want[k], 0);
            }
            if (!bad) bad = 1; /* same value, other bits (e.g. -0 vs +0) */
        }
        return bad;
    }
    for (size_t i = 0; i < n && bad < 5; i++) {
        double got = tt_get(t, out, i), w = want[i % PERIOD], tl = tol[i % PERIOD];
        if (got != w && !(fabs(got - w) <= tl)) bad += report(what, i, got, w, tl);
    }
    return bad;
}

/* Check moved bytes: out[k] for k in [0, bytes) must be rank r's byte at offset k0 + k. */
static long check_moved(const char *what, const uint8_t *out, size_t bytes, int r, size_t k0)
{
    uint8_t expect[2 * BYTE_PERIOD];
    for (size_t k = 0; k < 2 * BYTE_PERIOD; k++) expect[k] = move_byte(r, k0 + k);
    for (size_t i = 0; i < bytes; i += BYTE_PERIOD) {
        size_t m = bytes - i < BYTE_PERIOD ? bytes - i : BYTE_PERIOD;
        if (memcmp(out + i, expect + (i % BYTE_PERIOD), m) != 0) {
            for (size_t k = 0; k < m; k++)
                if (out[i + k] != expect[(i + k) % BYTE_PERIOD])
                    return report(what, i + k, out[i + k], expect[(i + k) % BYTE_PERIOD], 0);
        }
    }
    return 0;
}

static ncclRedOp_t make_op(int op, ncclDataType_t t, void *scalar_store)
{
    switch (op) {
    case O_SUM: return ncclSum;
    case O_PROD: return ncclProd;
    case O_MAX: return ncclMax;
    case O_MIN: return ncclMin;
    case O_AVG: return ncclAvg;
    default: break;
    }
    ncclRedOp_t h;
    tt_set(t, scalar_store, 0, premul_scalar(rank, t));
    NCCLCHECK(ncclRedOpCreatePreMulSum(
        &h, scalar_store, t, op == O_PREMUL_IMM ? ncclScalarHostImmediate : ncclScalarDevice,
        comm));
    if (op == O_PREMUL_IMM) memset(scalar_store, 0x77, 8); /* must have been read already */
    return h;
}

static int inplace_only;

/* Run coll once and check this rank's output. Returns the number of wrong elements found. */
static long run_one(enum zn_coll coll, ncclDataType_t t, int op, size_t count, int root,
                    int inplace)
{
    const struct zn_coll_facts *f = zn_coll_facts(coll);
    size_t es = tt_size[t], cb = count * es;
    int is_root = rank == root;
    /* What this rank's part of the call holds, and a block where it passes a buffer it does
     * not use. */
    size_t send_elems = zn_coll_send_elems(coll, count, nranks, is_root);
    size_t recv_elems = zn_coll_recv_elems(coll, count, nranks, is_root);
    size_t send_bytes = (send_elems ? send_elems : count) * es;
    size_t recv_bytes = (recv_elems ? recv_elems : count) * es;
    /* Buffers carry guard bytes on both sides. */
    uint8_t *smem = malloc(send_bytes + 128), *rmem = NULL;
    uint8_t *send = smem + 64, *recv = NULL;
    fill_garbage(smem, send_bytes + 128);
    int in_place_same = inplace && zn_coll_in_place_offset(coll) == 0;
    if (!in_place_same) {
        rmem = malloc(recv_bytes + 128);
        recv = rmem + 64;
        fill_garbage(rmem, recv_bytes + 128);
    }
    int reduces = f->reduces;
    if (reduces)
        fill_reduce_input(send, send_bytes / es, t, op, rank, 0);
    else
        fill_move_input(send, send_bytes, rank, 0);

    void *sb = send, *rb = recv;
    /* NCCL's in-place layouts: one buffer, the send block inside the receive buffer (allgather,
     * gather on the root) or the receive block inside the send buffer (reducescatter, scatter on
     * the root). */
    int ip = zn_coll_in_place_offset(coll);
    if (inplace && ip == 0) {
        rb = sb;
    } else if (inplace && ip > 0 && zn_coll_extent_used(f->recv, is_root)) {
        memcpy(recv + (size_t)rank * cb, send, cb);
        sb = recv + (size_t)rank * cb;
    } else if (inplace && ip < 0 && zn_coll_extent_used(f->send, is_root)) {
        rb = send + (size_t)rank * cb;
    }
    uint64_t scalar_store[2];
    ncclRedOp_t h = reduces ? make_op(op, t, scalar_store) : ncclSum;
    switch (coll) {
    case ZN_COLL_ALLREDUCE: NCCLCHECK(ncclAllReduce(sb, rb, count, t, h, comm, NULL)); break;
    case ZN_COLL_BROADCAST: NCCLCHECK(ncclBroadcast(sb, rb, count, t, root, comm, NULL)); break;
    case ZN_COLL_REDUCE: NCCLCHECK(ncclReduce(sb, rb, count, t, h, root, comm, NULL)); break;
    case ZN_COLL_ALLGATHER: NCCLCHECK(ncclAllGather(sb, rb, count, t, comm, NULL)); break;
    case ZN_COLL_REDUCESCATTER:
        NCCLCHECK(ncclReduceScatter(sb, rb, count, t, h, comm, NULL));
        break;
    case ZN_COLL_ALLTOALL: NCCLCHECK(ncclAlltoAll(sb, rb, count, t, comm, NULL)); break;
    case ZN_COLL_GATHER: NCCLCHECK(ncclGather(sb, rb, count, t, root, comm, NULL)); break;
    case ZN_COLL_SCATTER: NCCLCHECK(ncclScatter(sb, rb, count, t, root, comm, NULL)); break;
    default:
        fprintf(stderr, "coll_check: no call and no check for %s here\n", coll_names[coll]);
        exit(2);
    }
    if (h >= ncclNumOps) NCCLCHECK(ncclRedOpDestroy(h, comm));

    char what[160];
    snprintf(what, sizeof(what), "%.31s %s %s count %zu root %d %s", coll_names[coll], tt_names[t],
             reduces ? op_names[op] : "-", count, root, inplace ? "in-place" : "out-of-place");
    long bad = 0;
    const uint8_t *out = rb;
    switch (coll) {
    case ZN_COLL_ALLREDUCE: bad = check_reduced(what, out, count, t, op, 0); break;
    case ZN_COLL_REDUCE:
        if (rank == root) bad = check_reduced(what, out, count, t, op, 0);
        break;
    case ZN_COLL_REDUCESCATTER:
        bad = check_reduced(what, out, count, t, op, (size_t)rank * count);
        break;
    case ZN_COLL_BROADCAST: bad = check_moved(what, out, cb, root, 0); break;
    case ZN_COLL_ALLGATHER:
    case ZN_COLL_GATHER:
        if (coll == ZN_COLL_GATHER && rank != root) break;
        for (int j = 0; j < nranks && !bad; j++) bad = check_moved(what, out + j * cb, cb, j, 0);
        break;
    case ZN_COLL_ALLTOALL:
        for (int j = 0; j < nranks && !bad; j++)
            bad = check_moved(what, out + j * cb, cb, j, (size_t)rank * cb);
        break;
    case ZN_COLL_SCATTER: bad = check_moved(what, out, cb, root, (size_t)rank * cb); break;
    default: break;
    }
    /* Nothing may be written outside the output. */
    uint8_t *mems[2] = { smem, rmem };
    size_t sizes[2] = { send_bytes, recv_bytes };
    for (int m = 0; m < 2; m++) {
        if (!mems[m]) continue;
        for (int k = 0; k < 64; k++)
            if (mems[m][k] != 0x5b || mems[m][64 + sizes[m] + k] != 0x5b) {
                fprintf(stderr, "[%d] %s: wrote outside its buffers\n", rank, what);
                bad++;
                break;
            }
    }
    free(smem);
    free(rmem);
    checks++;
    if (bad) failures++;
    return bad;
}

/* --- bit-identical results across ranks -------------------------------------------------- */

static uint64_t fnv(const void *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)p)[i]) * 0x100000001b3ull;
    return h;
}

/* Inexact float inputs: every rank must still end with exactly the same bits. */
static void check_identical(ncclDataType_t t, size_t count)
{
    size_t es = tt_size[t];
    uint8_t *buf = malloc(count * es);
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1);
    for (size_t i = 0; i < count * es; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        buf[i] = (uint8_t)seed;
    }
    /* Keep the values finite: clear the top exponent bit of each element. */
    for (size_t i = 0; i < count; i++) buf[i * es + es - 1] &= 0x3f;
    NCCLCHECK(ncclAllReduce(buf, buf, count, t, ncclSum, comm, NULL));
    uint64_t h = fnv(buf, count * es), *all = calloc((size_t)nranks, 8);
    NCCLCHECK(ncclAllGather(&h, all, 1, ncclUint64, comm, NULL));
    checks++;
    for (int r = 1; r < nranks; r++)
        if (all[r] != all[0]) {
            fprintf(stderr,
                    "[%d] NOT BIT-IDENTICAL: allreduce %s count %zu: rank %d differs from rank 0\n",
                    rank, tt_names[t], count, r);
            failures++;
            break;
        }
    free(all);
    free(buf);
}

/* --- options ------------------------------------------------------------------------------ */

static int in_list(const char *list, const char *name)
{
    if (!list) return 1;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return 1;
    return 0;
}

int main(int argc, char **argv)
{
    const char *colls = NULL, *types = NULL, *ops = NULL, *counts_arg = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-c") && i + 1 < argc)
            colls = argv[++i];
        else if (!strcmp(argv[i], "-t") && i + 1 < argc)
            types = argv[++i];
        else if (!strcmp(argv[i], "-o") && i + 1 < argc)
            ops = argv[++i];
        else if (!strcmp(argv[i], "-n") && i + 1 < argc)
            counts_arg = argv[++i];
        else if (!strcmp(argv[i], "-v"))
            verbose = 1;
        else if (!strcmp(argv[i], "-i"))
            inplace_only = 1;
        else {
            fprintf(stderr,
                    "usage: coll_check [-c colls] [-t types] [-o ops] [-n counts] [-i] [-v]\n");
            return 2;
        }
    }
    comm = mp_world();
    name_colls();

    size_t counts[16];
    int ncounts = 0;
    if (counts_arg) {
        for (const char *p = counts_arg; *p && ncounts < 16;) {
            counts[ncounts++] = strtoull(p, (char **)&p, 0);
            if (*p == ',') p++;
        }
    } else {
        size_t def[] = { 0, 1, 2, (size_t)nranks + 1, 7, 1023, 70001 };
        for (size_t i = 0; i < sizeof(def) / sizeof(def[0]); i++) counts[ncounts++] = def[i];
    }
    for (int c = 0; c < ZN_NCOLLS; c++) {
        const struct zn_coll_facts *f = zn_coll_facts((enum zn_coll)c);
        if (!in_list(colls, coll_names[c])) continue;
        for (int t = 0; t < ncclNumTypes; t++) {
            if (!in_list(types, tt_names[t])) continue;
            for (int op = 0; op < (f->reduces ? NOPS : 1); op++) {
                if (f->reduces && !in_list(ops, op_names[op])) continue;
                for (int k = 0; k < ncounts; k++) {
                    int roots[3] = { 0, nranks - 1, nranks / 2 };
                    for (int ri = 0; ri < (f->rooted ? 3 : 1); ri++) {
                        if (ri && roots[ri] == roots[ri - 1]) continue;
                        for (int inplace = inplace_only; inplace < 2; inplace++) {
                            /* In place with overlapping blocks (alltoall): undefined in NCCL. */
                            if (inplace && zn_coll_in_place_overlaps((enum zn_coll)c)) continue;
                            run_one((enum zn_coll)c, (ncclDataType_t)t, op, counts[k], roots[ri],
                                    inplace);
                        }
                    }
                }
            }
        }
    }
    if (in_list(colls, "allreduce") && !inplace_only) {
        ncclDataType_t ft[] = { ncclFloat32, ncclFloat16, ncclBfloat16, ncclFloat64 };
        for (int i = 0; i < 4; i++)
            if (in_list(types, tt_names[ft[i]])) check_identical(ft[i], 100003);
    }
    long local[2] = { checks, failures }, total[2];
    NCCLCHECK(ncclAllReduce(local, total, 2, ncclInt64, ncclSum, comm, NULL));
    if (rank == 0)
        printf("coll_check: %d ranks: %ld checks, %ld failed\n", nranks, total[0], total[1]);
    NCCLCHECK(ncclCommDestroy(comm));
    return total[1] ? 1 : 0;
}
