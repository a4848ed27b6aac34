/*
 * coll_check: every collective x type x op x {out-of-place, in-place} x count, checked against
 * a reference computed here from the inputs every rank can regenerate. Run under zinc-run:
 *
 *   zinc-run -n 4 coll_check [-c COLLS] [-t TYPES] [-o OPS] [-n COUNTS] [-v]
 *
 * Inputs are small integers (or +-1, 0 and powers of two) chosen so that every partial
 * result is exactly representable even in fp8, which makes the check exact for every type
 * and every reduction order; only avg on floating types (a multiplication by 1/n) is checked
 * with a tolerance. Uses only the public NCCL API.
 */
#include "nccl.h"
#include "types.h"
#include "bootstrap/launcher.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { C_ALLREDUCE, C_BROADCAST, C_REDUCE, C_ALLGATHER, C_REDUCESCATTER, C_ALLTOALL, C_GATHER,
       C_SCATTER, NCOLL };
static const char *coll_names[NCOLL] = {"allreduce", "broadcast", "reduce", "allgather",
                                        "reducescatter", "alltoall", "gather", "scatter"};
static const int coll_reduces[NCOLL] = {1, 0, 1, 0, 1, 0, 0, 0};
static const int coll_rooted[NCOLL] = {0, 1, 1, 0, 0, 0, 1, 1};

enum { O_SUM, O_PROD, O_MAX, O_MIN, O_AVG, O_PREMUL_IMM, O_PREMUL_DEV, NOPS };
static const char *op_names[NOPS] = {"sum", "prod", "max", "min", "avg", "premul", "premul_dev"};

static int rank, nranks, verbose;
static ncclComm_t comm;
static long checks, failures;

#define NCCLCHECK(call)                                                                            \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "[%d] %s:%d %s failed: %s (%s)\n", rank, __FILE__, __LINE__, #call,    \
                    ncclGetErrorString(r_), ncclGetLastError(comm));                               \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

/* --- inputs and reference ----------------------------------------------------------------- */

static int is_unsigned(ncclDataType_t t)
{
    return t == ncclUint8 || t == ncclUint32 || t == ncclUint64;
}

/* Input element i of rank r for op (and block b for blocked collectives: i is global). */
static double input(int r, size_t i, ncclDataType_t t, int op)
{
    int sgn = !is_unsigned(t);
    switch (op) {
    case O_PROD: {
        if ((r + i) % 4 == 0) return 2;
        if (sgn && (r * 3 + i) % 5 == 0) return -1;
        return 1;
    }
    case O_MAX:
    case O_MIN: return (double)((r * 5 + (long)i * 7) % 9) - (sgn ? 4 : 0);
    default: return (double)((r * 7 + (long)i * 3 + 1) % 3) - (sgn ? 1 : 0);
    }
}

static double premul_scalar(int r, ncclDataType_t t)
{
    if (t == ncclFloat8e4m3 || t == ncclFloat8e5m2) return r % 2 ? -1 : 1;
    if (is_unsigned(t) || !tt_is_float(t)) return r % 2 ? 2 : 1;
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

/* The reduced value of element i over all ranks; *tol is the allowed error. */
static double reduce_ref(size_t i, ncclDataType_t t, int op, double *tol)
{
    *tol = 0;
    if (!tt_is_float(t)) {
        uint64_t acc = 0;
        for (int r = 0; r < nranks; r++) {
            double x = input(r, i, t, op);
            if (op == O_PREMUL_IMM || op == O_PREMUL_DEV) x *= premul_scalar(r, t);
            uint64_t v = (uint64_t)(int64_t)x;
            if (r == 0) {
                acc = v;
                continue;
            }
            double a = int_value(t, acc);
            switch (op) {
            case O_PROD: acc = acc * v; break;
            case O_MAX: acc = x > a ? v : acc; break;
            case O_MIN: acc = x < a ? v : acc; break;
            default: acc = acc + v; break;
            }
        }
        double s = int_value(t, acc);
        if (op == O_AVG) {
            /* C division truncates toward zero, on the wrapped sum. */
            int64_t sv = (int64_t)s;
            return (double)(sv / nranks);
        }
        return s;
    }
    double acc = 0, mag = 0;
    for (int r = 0; r < nranks; r++) {
        double x = input(r, i, t, op);
        if (op == O_PREMUL_IMM || op == O_PREMUL_DEV) x *= premul_scalar(r, t);
        mag += fabs(x);
        if (r == 0) {
            acc = x;
            continue;
        }
        switch (op) {
        case O_PROD: acc *= x; break;
        case O_MAX: acc = x > acc ? x : acc; break;
        case O_MIN: acc = x < acc ? x : acc; break;
        default: acc += x; break;
        }
    }
    if (op == O_AVG) {
        acc /= nranks;
        *tol = 2.0 * (nranks + 2) * tt_eps(t) * (mag + 1.0);
    }
    return acc;
}

/* --- one check ---------------------------------------------------------------------------- */

struct bufs {
    void *send, *recv;
    size_t send_elems, recv_elems;
};

static void fill_input(void *buf, size_t n, ncclDataType_t t, int op, int r, size_t base)
{
    for (size_t i = 0; i < n; i++)
        if (tt_set(t, buf, i, input(r, base + i, t, op)) != 0) {
            fprintf(stderr, "test bug: input not representable\n");
            exit(3);
        }
}

static void fill_garbage(void *buf, size_t bytes)
{
    memset(buf, 0x5b, bytes);
}

static int mismatch(const char *what, size_t i, double got, double want, double tol)
{
    if (got == want || fabs(got - want) <= tol || (isnan(got) && isnan(want))) return 0;
    if (verbose || failures < 20)
        fprintf(stderr, "[%d] MISMATCH %s: element %zu = %g, expected %g (tol %g)\n", rank, what,
                i, got, want, tol);
    return 1;
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
    NCCLCHECK(ncclRedOpCreatePreMulSum(&h, scalar_store, t,
                                       op == O_PREMUL_IMM ? ncclScalarHostImmediate
                                                          : ncclScalarDevice,
                                       comm));
    if (op == O_PREMUL_IMM) memset(scalar_store, 0x77, 8); /* must have been read already */
    return h;
}

/* Run coll once and check this rank's output. Returns the number of wrong elements. */
static long run_one(int coll, ncclDataType_t t, int op, size_t count, int root, int inplace)
{
    size_t es = tt_size[t], n = (size_t)nranks;
    int blocked_send = coll == C_REDUCESCATTER || coll == C_ALLTOALL ||
                       (coll == C_SCATTER && rank == root);
    int blocked_recv = coll == C_ALLGATHER || coll == C_ALLTOALL ||
                       (coll == C_GATHER && rank == root);
    size_t send_elems = blocked_send ? count * n : count;
    size_t recv_elems = blocked_recv ? count * n : count;
    size_t big = (send_elems > recv_elems ? send_elems : recv_elems);
    uint8_t *mem = malloc(2 * big * es + 64);
    uint8_t *send = mem, *recv = mem + big * es + 32;
    fill_garbage(mem, 2 * big * es + 64);
    int opk = coll_reduces[coll] ? op : O_SUM;

    /* Inputs: element index is global across blocks for blocked sends. */
    if (coll == C_REDUCESCATTER || coll == C_ALLTOALL || (coll == C_SCATTER && rank == root))
        fill_input(send, send_elems, t, opk, rank, 0);
    else
        fill_input(send, count, t, opk, rank, coll == C_ALLGATHER || coll == C_GATHER ? 0 : 0);

    /* In-place layouts (NCCL's definitions). */
    void *sb = send, *rb = recv;
    if (inplace) {
        switch (coll) {
        case C_ALLREDUCE:
        case C_BROADCAST:
        case C_REDUCE: rb = sb; break;
        case C_ALLGATHER:
            memcpy(recv + (size_t)rank * count * es, send, count * es);
            sb = recv + (size_t)rank * count * es;
            break;
        case C_REDUCESCATTER: rb = send + (size_t)rank * count * es; break;
        case C_GATHER:
            if (rank == root) {
                memcpy(recv + (size_t)root * count * es, send, count * es);
                sb = recv + (size_t)root * count * es;
            }
            break;
        case C_SCATTER:
            if (rank == root) rb = send + (size_t)root * count * es;
            break;
        default: break;
        }
    }
    uint64_t scalar_store[2];
    ncclRedOp_t h = coll_reduces[coll] ? make_op(op, t, scalar_store) : ncclSum;
    switch (coll) {
    case C_ALLREDUCE: NCCLCHECK(ncclAllReduce(sb, rb, count, t, h, comm, NULL)); break;
    case C_BROADCAST: NCCLCHECK(ncclBroadcast(sb, rb, count, t, root, comm, NULL)); break;
    case C_REDUCE: NCCLCHECK(ncclReduce(sb, rb, count, t, h, root, comm, NULL)); break;
    case C_ALLGATHER: NCCLCHECK(ncclAllGather(sb, rb, count, t, comm, NULL)); break;
    case C_REDUCESCATTER: NCCLCHECK(ncclReduceScatter(sb, rb, count, t, h, comm, NULL)); break;
    case C_ALLTOALL: NCCLCHECK(ncclAlltoAll(sb, rb, count, t, comm, NULL)); break;
    case C_GATHER: NCCLCHECK(ncclGather(sb, rb, count, t, root, comm, NULL)); break;
    case C_SCATTER: NCCLCHECK(ncclScatter(sb, rb, count, t, root, comm, NULL)); break;
    }
    if (h >= ncclNumOps) NCCLCHECK(ncclRedOpDestroy(h, comm));

    char what[160];
    snprintf(what, sizeof(what), "%s %s %s count %zu root %d %s", coll_names[coll], tt_names[t],
             coll_reduces[coll] ? op_names[op] : "-", count, root, inplace ? "in-place" : "out-of-place");
    long bad = 0;
    double tol;
    switch (coll) {
    case C_ALLREDUCE:
    case C_REDUCE:
        if (coll == C_REDUCE && rank != root) break;
        for (size_t i = 0; i < count; i++) {
            double want = reduce_ref(i, t, op, &tol);
            bad += mismatch(what, i, tt_get(t, rb, i), want, tol);
        }
        break;
    case C_BROADCAST:
        for (size_t i = 0; i < count; i++)
            bad += mismatch(what, i, tt_get(t, rb, i), input(root, i, t, O_SUM), 0);
        break;
    case C_ALLGATHER:
        for (size_t i = 0; i < count * n; i++)
            bad += mismatch(what, i, tt_get(t, rb, i), input((int)(i / count), i % count, t, O_SUM), 0);
        break;
    case C_REDUCESCATTER:
        for (size_t i = 0; i < count; i++) {
            double want = reduce_ref((size_t)rank * count + i, t, op, &tol);
            bad += mismatch(what, i, tt_get(t, rb, i), want, tol);
        }
        break;
    case C_ALLTOALL:
        for (size_t i = 0; i < count * n; i++) {
            int src = (int)(i / count);
            bad += mismatch(what, i, tt_get(t, rb, i),
                            input(src, (size_t)rank * count + i % count, t, O_SUM), 0);
        }
        break;
    case C_GATHER:
        if (rank != root) break;
        for (size_t i = 0; i < count * n; i++)
            bad += mismatch(what, i, tt_get(t, rb, i), input((int)(i / count), i % count, t, O_SUM), 0);
        break;
    case C_SCATTER:
        for (size_t i = 0; i < count; i++)
            bad += mismatch(what, i, tt_get(t, rb, i),
                            input(root, (size_t)rank * count + i, t, O_SUM), 0);
        break;
    }
    free(mem);
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
            fprintf(stderr, "[%d] NOT BIT-IDENTICAL: allreduce %s count %zu: rank %d differs from rank 0\n",
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
        if (!strcmp(argv[i], "-c") && i + 1 < argc) colls = argv[++i];
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) types = argv[++i];
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) ops = argv[++i];
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) counts_arg = argv[++i];
        else if (!strcmp(argv[i], "-v")) verbose = 1;
        else {
            fprintf(stderr, "usage: coll_check [-c colls] [-t types] [-o ops] [-n counts] [-v]\n");
            return 2;
        }
    }
    struct zn_launch_info li;
    zn_launch_info_get(&li);
    rank = li.rank;
    nranks = li.nranks;
    ncclUniqueId id;
    NCCLCHECK(ncclGetUniqueId(&id));
    NCCLCHECK(ncclCommInitRank(&comm, nranks, id, rank));

    size_t counts[16];
    int ncounts = 0;
    if (counts_arg) {
        for (const char *p = counts_arg; *p && ncounts < 16;) {
            counts[ncounts++] = strtoull(p, (char **)&p, 0);
            if (*p == ',') p++;
        }
    } else {
        size_t def[] = {0, 1, 2, (size_t)nranks + 1, 7, 1023, 70001};
        for (size_t i = 0; i < sizeof(def) / sizeof(def[0]); i++) counts[ncounts++] = def[i];
    }
    for (int c = 0; c < NCOLL; c++) {
        if (!in_list(colls, coll_names[c])) continue;
        for (int t = 0; t < ncclNumTypes; t++) {
            if (!in_list(types, tt_names[t])) continue;
            for (int op = 0; op < (coll_reduces[c] ? NOPS : 1); op++) {
                if (coll_reduces[c] && !in_list(ops, op_names[op])) continue;
                for (int k = 0; k < ncounts; k++) {
                    int roots[3] = {0, nranks - 1, nranks / 2};
                    for (int ri = 0; ri < (coll_rooted[c] ? 3 : 1); ri++) {
                        if (ri && roots[ri] == roots[ri - 1]) continue;
                        for (int inplace = 0; inplace < 2; inplace++) {
                            if (c == C_ALLTOALL && inplace) continue;
                            run_one(c, (ncclDataType_t)t, op, counts[k], roots[ri], inplace);
                        }
                    }
                }
            }
        }
    }
    if (in_list(colls, "allreduce")) {
        ncclDataType_t ft[] = {ncclFloat32, ncclFloat16, ncclBfloat16, ncclFloat64};
        for (int i = 0; i < 4; i++)
            if (in_list(types, tt_names[ft[i]])) check_identical(ft[i], 100003);
    }
    long local[2] = {checks, failures}, total[2];
    NCCLCHECK(ncclAllReduce(local, total, 2, ncclInt64, ncclSum, comm, NULL));
    if (rank == 0)
        printf("coll_check: %d ranks: %ld checks, %ld failed\n", nranks, total[0], total[1]);
    NCCLCHECK(ncclCommDestroy(comm));
    return total[1] ? 1 : 0;
}
