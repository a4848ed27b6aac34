/*
 * zinc-perf: zinc's collective benchmark, compatible with NVIDIA's nccl-tests.
 *
 *   zinc-perf [COLLECTIVE] [options]       (zinc-perf -h lists them)
 *
 * It takes nccl-tests' options, prints nccl-tests' table (size, count, type, redop, root,
 * then time / algbw / busbw / #wrong out of place and in place) and its footer, and can also
 * write the results as JSON (-J). It uses nothing but the public NCCL API, the launcher's
 * environment (launcher.h, header-only) and, in a CUDA build, the CUDA runtime: the same
 * binary runs against real NCCL by switching LD_LIBRARY_PATH, which is how zinc is compared
 * with NCCL (docs/benchmarks.md says how speed is compared).
 *
 * Model: every process runs -g ranks from its one thread (global rank = process rank * g + i),
 * creates them with ncclCommInitRank inside one group and issues each collective on all of
 * them inside one group, the NCCL "one thread, several devices" model. Processes rendezvous
 * through ZINC_COMM_ID / NCCL_COMM_ID, which zinc-run sets: every process calls
 * ncclGetUniqueId and gets the same token, so no MPI is needed.
 *
 * Per size, like nccl-tests: fill the inputs, one untimed call, `iters` timed calls (rotating
 * through the buffer to avoid cache effects), then a separate checked call on freshly filled
 * buffers. Times and error counts are combined across ranks with an allreduce on the
 * communicator being measured.
 *
 * Differences from nccl-tests: one thread per process (-t 1), no -m/-N/-y/-T/-C/-F, -R 1 only, and
 * PreMulSum ops are created once per block instead of around every call, to keep op creation
 * out of the timings and to ask nothing of the library about destroying an op that a pending
 * group still uses.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "launcher.h"
#include "zinc-perf.h"

#define ZP_LINE 192 /* bytes of one rank's "Using devices" line, gathered to rank 0 */

struct zp_opts {
    const struct zp_coll *coll;
    size_t min_bytes, max_bytes, step_bytes, step_factor;
    int iters, warmup, check, blocking, graphs, average, ngpus, root;
    int local_register; /* -R 1: ncclMemAlloc'd buffers registered with ncclCommRegister */
    int type, op;       /* index into zp_types / enum zp_op; -1 for all */
    const char *json;
};

/* One rank driven by this process. */
struct zp_rank {
    int rank, dev; /* global rank; CUDA device or -1 */
    ncclComm_t comm;
    cudaStream_t stream;
    void *send, *recv;         /* max_bytes each */
    void *send_reg, *recv_reg; /* ncclCommRegister handles (-R 1) */
    int memalloc;              /* send and recv come from ncclMemAlloc */
    void *small;               /* ZP_LINE bytes: one double for combining, or a device line */
    ncclRedOp_t op;            /* the op of the current block */
    int op_created;            /* op came from ncclRedOpCreatePreMulSum */
    void *graph, *exec;        /* captured / instantiated CUDA graph while one exists */
};

struct zp_place {
    double time_us, algbw, busbw;
    long long wrong; /* summed over ranks; -1 when not checked (N/A) */
};

struct zp_result {
    size_t bytes, count;
    const char *type, *op;
    int root;
    struct zp_place oop, ip;
};

/* The current block: one type, op and root swept over all sizes. */
struct zp_block {
    const struct zp_type *t;
    enum zp_op op;
    int root; /* -1 for collectives without one */
};

struct zp_bench {
    struct zp_opts o;
    struct zn_launch_info li;
    const struct zp_mem *mem;
    int ndev, nlocal, nranks, main, version;
    struct zp_rank *r;
    double *vals;  /* nlocal values for combine() */
    char *host;    /* max_bytes of host staging for fill and check */
    uint64_t rep;  /* validation round, part of the input seed */
    int errors;    /* rows with wrong results (nccl-tests' "Out of bounds values") */
    double bw_sum; /* busbw summed over all rows and places */
    int bw_count;
    struct zp_result *res;
    size_t nres, capres;
};

/* ---------------------------------------------------------------------------------------
 * Options
 * --------------------------------------------------------------------------------------- */

/* The collectives of zp_colls, the first the default, in lines of at most 90 columns. */
static void usage_colls(FILE *f)
{
    char item[96];
    int col = fprintf(f, "  COLLECTIVE:"), n = 0;
    for (int i = 0; i <= zp_ncolls; i++) {
        if (i < zp_ncolls && !zp_colls[i].run) continue;
        if (i < zp_ncolls)
            snprintf(item, sizeof(item), "%s%s%s", n ? ", " : " ", zp_colls[i].name,
                     n ? "" : " (default)");
        else
            snprintf(item, sizeof(item), " (or nccl-tests' %s_perf...)", zp_colls[0].name);
        if (col + (int)strlen(item) > 90) {
            col = fprintf(f, "%s\n             ", n && i < zp_ncolls ? "," : "");
            memmove(item, item + (item[0] == ',' ? 1 : 0), strlen(item));
        }
        col += fprintf(f, "%s", item);
        n++;
    }
    fprintf(f, "\n");
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f, "USAGE: %s [COLLECTIVE] [options]\n", prog);
    usage_colls(f);
    fprintf(
        f,
        "\t[-b,--minbytes <min size in bytes, K/M/G suffixes>] (32M)\n"
        "\t[-e,--maxbytes <max size in bytes>] (32M)\n"
        "\t[-i,--stepbytes <increment size>] (1M)\n"
        "\t[-f,--stepfactor <increment factor>] (1: step by stepbytes)\n"
        "\t[-n,--iters <iteration count>] (20)\n"
        "\t[-w,--warmup_iters <warmup iteration count>] (5)\n"
        "\t[-c,--check <check iteration count>] (1)\n"
        "\t[-o,--op <sum/prod/min/max/avg/mulsum/all>] (sum)\n"
        "\t[-d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/float/double/\n"
        "\t               bfloat16/f8e4m3/f8e5m2/all>] (float)\n"
        "\t[-r,--root <root rank, -1 for every root>] (0)\n"
        "\t[-g,--ngpus <ranks per process>] (1)\n"
        "\t[-t,--nthreads <1>] (one thread per process; use -g for more ranks)\n"
        "\t[-z,--blocking <0/1>] (wait for each collective to complete)\n"
        "\t[-G,--cudagraph <num graph launches>] (GPU buffers only)\n"
        "\t[-R,--local_register <0/1> ncclMemAlloc buffers registered with ncclCommRegister] (0)\n"
        "\t[-a,--average <0/1/2/3> time across ranks: 0=rank 0, 1=avg, 2=min, 3=max] (1)\n"
        "\t[-J,--json <file> write the results as JSON (rank 0)]\n"
        "\t[-h,--help]\n"
        "Environment: ZINC_DEVICE=host uses host memory even where a GPU is visible.\n"
        "  With several processes every process needs ZINC_COMM_ID (or NCCL_COMM_ID);\n"
        "  zinc-run sets it. Ranks come from zinc-run, mpirun, srun or torchrun.\n"
        "Exit status: 0 success, 1 wrong results, 2 error.\n");
}

/* Prints "zinc-perf: <message>" on stderr; returns -1 for the caller to pass up. */
__attribute__((format(printf, 1, 2))) static int complain(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "zinc-perf: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return -1;
}

/* nccl-tests' size syntax: a number with an optional K, M or G (powers of 1024). */
static int parse_size(const char *s, const char *what, size_t *out)
{
    static const char units[] = "KkMmGg";
    char *end;
    double v = strtod(s, &end);
    const char *u = end != s && *end ? strchr(units, *end) : NULL;
    if (u) {
        v = ldexp(v, 10 * (int)((u - units) / 2 + 1));
        end++;
    }
    if (end == s || *end || !(v >= 0) || v > 0x1p62) return complain("invalid %s '%s'", what, s);
    *out = (size_t)v;
    return 0;
}

static int parse_int(const char *s, const char *what, long lo, long hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 0);
    if (end == s || *end || v < lo || v > hi)
        return complain("invalid %s '%s' (expected %ld..%ld)", what, s, lo, hi);
    *out = (int)v;
    return 0;
}

/* Names for "all" and the named entries of -o and -d. */
static int parse_choice(const char *s, const char *what, int (*find)(const char *), int *out)
{
    if (strcmp(s, "all") == 0) {
        *out = -1;
        return 0;
    }
    if ((*out = find(s)) < 0) return complain("unknown %s '%s' (see -h)", what, s);
    return 0;
}

static int parse_option(struct zp_opts *o, int c, const char *arg)
{
    int v = 0;
    switch (c) {
    case 'b': return parse_size(arg, "minbytes", &o->min_bytes);
    case 'e': return parse_size(arg, "maxbytes", &o->max_bytes);
    case 'i': return parse_size(arg, "stepbytes", &o->step_bytes);
    case 'f':
        if (parse_int(arg, "stepfactor", 1, 1 << 20, &v)) return -1;
        o->step_factor = (size_t)v;
        return 0;
    case 'n': return parse_int(arg, "iters", 1, 1 << 30, &o->iters);
    case 'w': return parse_int(arg, "warmup_iters", 0, 1 << 30, &o->warmup);
    case 'c': return parse_int(arg, "check", 0, 1 << 20, &o->check);
    case 'z': return parse_int(arg, "blocking", 0, 1, &o->blocking);
    case 'G': return parse_int(arg, "cudagraph", 0, 1 << 20, &o->graphs);
    case 'R': return parse_int(arg, "local_register (0 or 1)", 0, 1, &o->local_register);
    case 'a': return parse_int(arg, "average", 0, 3, &o->average);
    case 'g': return parse_int(arg, "ngpus", 1, 1024, &o->ngpus);
    case 'r': return parse_int(arg, "root", -1, 1 << 30, &o->root);
    case 't': return parse_int(arg, "nthreads (only 1; use -g)", 1, 1, &v);
    case 'o': return parse_choice(arg, "op", zp_op_find, &o->op);
    case 'd': return parse_choice(arg, "datatype", zp_type_find, &o->type);
    case 'J': o->json = arg; return 0;
    default: return -1;
    }
}

/* Returns 0 to run, 1 after -h, -1 on a bad command line. */
static int parse_opts(int argc, char **argv, struct zp_opts *o)
{
    static const struct option longopts[] = {
        { "nthreads", required_argument, 0, 't' },
        { "ngpus", required_argument, 0, 'g' },
        { "minbytes", required_argument, 0, 'b' },
        { "maxbytes", required_argument, 0, 'e' },
        { "stepbytes", required_argument, 0, 'i' },
        { "stepfactor", required_argument, 0, 'f' },
        { "iters", required_argument, 0, 'n' },
        { "warmup_iters", required_argument, 0, 'w' },
        { "check", required_argument, 0, 'c' },
        { "op", required_argument, 0, 'o' },
        { "datatype", required_argument, 0, 'd' },
        { "root", required_argument, 0, 'r' },
        { "blocking", required_argument, 0, 'z' },
        { "cudagraph", required_argument, 0, 'G' },
        { "local_register", required_argument, 0, 'R' },
        { "average", required_argument, 0, 'a' },
        { "json", required_argument, 0, 'J' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 },
    };
    const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    int c;
    *o = (struct zp_opts){ .min_bytes = 32u << 20,
                           .max_bytes = 32u << 20,
                           .step_bytes = 1u << 20,
                           .step_factor = 1,
                           .iters = 20,
                           .warmup = 5,
                           .check = 1,
                           .average = 1,
                           .ngpus = 1,
                           .type = zp_type_find("float"),
                           .op = ZP_SUM };
    /* A binary or link named like nccl-tests' (all_gather_perf) defaults to that collective. */
    o->coll = zp_coll_find(prog) ? zp_coll_find(prog) : &zp_colls[0];
    while ((c = getopt_long(argc, argv, "t:g:b:e:i:f:n:w:c:o:d:r:z:G:R:a:J:h", longopts, NULL)) !=
           -1) {
        if (c == 'h') {
            usage(stdout, prog);
            return 1;
        }
        if (c == '?' || parse_option(o, c, optarg))
            return complain("run '%s -h' for the options", prog);
    }
    if (optind < argc && !(o->coll = zp_coll_find(argv[optind])))
        return complain("unknown collective '%s' (see -h)", argv[optind]);
    if (++optind < argc) return complain("unexpected argument '%s'", argv[optind]);
    if (o->min_bytes > o->max_bytes)
        return complain("minbytes %zu > maxbytes %zu", o->min_bytes, o->max_bytes);
    if (o->step_factor <= 1 && o->step_bytes == 0)
        return complain("stepbytes must be > 0 without a stepfactor");
    if (o->graphs && o->blocking)
        return complain("-z 1 cannot wait inside a CUDA graph capture (-G)");
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Errors, timing, waiting, combining across ranks
 * --------------------------------------------------------------------------------------- */

/* Prints "zinc-perf: rank R: <function> failed: <error string> (<last error>)"; expr is the
 * call's source text or a function name. Returns -1 for the caller to pass up. */
static int nccl_failed(const struct zp_rank *r, const char *expr, ncclResult_t res)
{
    const char *last = ncclGetLastError(r ? r->comm : NULL);
    fprintf(stderr, "zinc-perf: rank %d: %.*s failed: %s (%s)\n", r ? r->rank : -1,
            (int)strcspn(expr, "("), expr, ncclGetErrorString(res),
            last && *last ? last : "no details");
    return -1;
}

#define NCCL_TRY(r, call)                                                                      \
    do {                                                                                       \
        ncclResult_t res_ = (call);                                                            \
        if (res_ != ncclSuccess && res_ != ncclInProgress) return nccl_failed(r, #call, res_); \
    } while (0)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Wait until every rank's stream is idle and its communicator no longer reports
 * ncclInProgress, failing on an asynchronous error (nccl-tests' testStreamSynchronize). Host
 * streams are always idle, so for host communicators this is only the error poll. */
static int wait_done(struct zp_bench *b)
{
    for (int i = 0; i < b->nlocal; i++) {
        struct zp_rank *r = &b->r[i];
        for (;;) {
            ncclResult_t st = ncclSuccess;
            int done = b->mem->query(r->dev, r->stream);
            if (done < 0) return -1;
            NCCL_TRY(r, ncclCommGetAsyncError(r->comm, &st));
            if (st != ncclSuccess && st != ncclInProgress)
                return nccl_failed(r, "ncclCommGetAsyncError", st);
            if (done && st == ncclSuccess) break;
            sched_yield();
        }
    }
    return 0;
}

/* Allreduce one double per local rank (b->vals) over all ranks, through the communicator
 * under test, so that no second transport (MPI) is needed. */
static int combine(struct zp_bench *b, ncclRedOp_t op, double *out)
{
    for (int i = 0; i < b->nlocal; i++)
        if (b->mem->put(b->r[i].dev, b->r[i].small, &b->vals[i], sizeof(double))) return -1;
    if (b->nlocal > 1) NCCL_TRY(&b->r[0], ncclGroupStart());
    for (int i = 0; i < b->nlocal; i++) {
        struct zp_rank *r = &b->r[i];
        NCCL_TRY(r, ncclAllReduce(r->small, r->small, 1, ncclFloat64, op, r->comm, r->stream));
    }
    if (b->nlocal > 1) NCCL_TRY(&b->r[0], ncclGroupEnd());
    if (wait_done(b)) return -1;
    return b->mem->get(b->r[0].dev, out, b->r[0].small, sizeof(double));
}

/* nccl-tests' -a: 0 = rank 0's time, 1 = average, 2 = minimum, 3 = maximum over ranks. */
static int combine_time(struct zp_bench *b, double sec, double *out)
{
    static const ncclRedOp_t ops[] = { ncclSum, ncclSum, ncclMin, ncclMax };
    for (int i = 0; i < b->nlocal; i++)
        b->vals[i] = b->o.average == 0 && b->r[i].rank != 0 ? 0 : sec;
    if (combine(b, ops[b->o.average], out)) return -1;
    if (b->o.average == 1) *out /= b->nranks;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Issuing collectives
 * --------------------------------------------------------------------------------------- */

static int ops_create(struct zp_bench *b, const struct zp_block *k)
{
    static const ncclRedOp_t builtin[] = { ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg };
    for (int i = 0; i < b->nlocal; i++) {
        struct zp_rank *r = &b->r[i];
        r->op = k->op < ZP_MULSUM ? builtin[k->op] : ncclSum;
        if (k->op != ZP_MULSUM) continue;
        unsigned char scalar[8];
        zp_encode(k->t, zp_premul_scalar(r->rank), scalar);
        NCCL_TRY(r, ncclRedOpCreatePreMulSum(&r->op, scalar, k->t->nccl, ncclScalarHostImmediate,
                                             r->comm));
        r->op_created = 1;
    }
    return 0;
}

static int ops_destroy(struct zp_bench *b)
{
    for (int i = 0; i < b->nlocal; i++) {
        struct zp_rank *r = &b->r[i];
        if (!r->op_created) continue;
        r->op_created = 0;
        NCCL_TRY(r, ncclRedOpDestroy(r->op, r->comm));
    }
    return 0;
}

/* Issue one collective on every local rank. Like nccl-tests, iteration `iter` works at a
 * different offset of the max_bytes buffers, so that consecutive calls do not hit the same
 * cache lines and a library cannot get away with reusing stale pointers. */
static int start_coll(struct zp_bench *b, const struct zp_block *k, const struct zp_sizes *sz,
                      int in_place, int iter)
{
    size_t ts = (size_t)k->t->size;
    size_t total = (sz->sendcount > sz->recvcount ? sz->sendcount : sz->recvcount) * ts;
    size_t steps = total ? b->o.max_bytes / total : 1;
    size_t shift = total * ((size_t)iter % steps);
    if (b->nlocal > 1) NCCL_TRY(&b->r[0], ncclGroupStart());
    for (int i = 0; i < b->nlocal; i++) {
        struct zp_rank *r = &b->r[i];
        char *rb = (char *)r->recv + shift, *sb = (char *)r->send + shift;
        struct zp_call c = {
            .send = in_place ? rb + sz->send_ip * (size_t)r->rank * ts : sb,
            .recv = in_place ? rb + sz->recv_ip * (size_t)r->rank * ts : rb,
            .count = sz->count,
            .type = k->t->nccl,
            .op = r->op,
            .root = k->root,
            .rank = r->rank,
            .nranks = b->nranks,
            .comm = r->comm,
            .stream = r->stream,
        };
        const char *fn = "collective";
        ncclResult_t res = b->o.coll->run(&c, &fn);
        if (res != ncclSuccess) return nccl_failed(r, fn, res);
    }
    if (b->nlocal > 1) NCCL_TRY(&b->r[0], ncclGroupEnd());
    return b->o.blocking ? wait_done(b) : 0;
}

/* Issue n iterations. With -G they are captured into one graph per rank, which is then
 * launched `launches` times. *t0 is taken just before the work to be timed is issued. */
static int issue(struct zp_bench *b, const struct zp_block *k, const struct zp_sizes *sz,
                 int in_place, int n, int launches, double *t0)
{
    for (int i = 0; launches && i < b->nlocal; i++)
        if (b->mem->graph_begin(b->r[i].dev, b->r[i].stream)) return -1;
    *t0 = now();
    for (int it = 0; it < n; it++)
        if (start_coll(b, k, sz, in_place, it)) return -1;
    if (!launches) return 0;
    for (int i = 0; i < b->nlocal; i++)
        if (b->mem->graph_end(b->r[i].dev, b->r[i].stream, &b->r[i].graph)) return -1;
    /* Only now that no stream of this thread is capturing may graphs be instantiated. */
    for (int i = 0; i < b->nlocal; i++) {
        struct zp_rank *r = &b->r[i];
        int rc = b->mem->graph_instantiate(r->dev, r->graph, &r->exec);
        r->graph = NULL;
        if (rc) return -1;
    }
    *t0 = now();
    for (int l = 0; l < launches; l++)
        for (int i = 0; i < b->nlocal; i++)
            if (b->mem->graph_launch(b->r[i].dev, b->r[i].stream, b->r[i].exec)) return -1;
    return 0;
}

static void graphs_free(struct zp_bench *b)
{
    for (int i = 0; i < b->nlocal; i++) {
        b->mem->graph_free(b->r[i].dev, b->r[i].graph, b->r[i].exec);
        b->r[i].graph = b->r[i].exec = NULL;
    }
}

/* ---------------------------------------------------------------------------------------
 * Fill and check
 * --------------------------------------------------------------------------------------- */

static uint64_t seed_of(uint64_t rep, int in_place)
{
    return rep * 2 + (uint64_t)in_place;
}

/* Out of place: inputs in the send buffer, zeros in the receive buffer. In place: one image
 * of the receive buffer, zeros with this rank's inputs at its in-place offset. */
static int fill_all(struct zp_bench *b, const struct zp_block *k, const struct zp_sizes *sz,
                    int in_place, uint64_t seed)
{
    size_t ts = (size_t)k->t->size;
    size_t total = sz->sendcount > sz->recvcount ? sz->sendcount : sz->recvcount;
    struct zp_pattern p;
    zp_pattern_init(&p, k->t, k->op, b->nranks, seed);
    for (int i = 0; i < b->nlocal; i++) {
        struct zp_rank *r = &b->r[i];
        if (!in_place) {
            zp_fill(&p, r->rank, b->host, sz->sendcount);
            if (b->mem->put(r->dev, r->send, b->host, sz->sendcount * ts)) return -1;
            memset(b->host, 0, sz->recvcount * ts);
            if (b->mem->put(r->dev, r->recv, b->host, sz->recvcount * ts)) return -1;
            continue;
        }
        memset(b->host, 0, total * ts);
        zp_fill(&p, r->rank, b->host + sz->send_ip * (size_t)r->rank * ts, sz->sendcount);
        if (b->mem->put(r->dev, r->recv, b->host, total * ts)) return -1;
    }
    return 0;
}

static int check_all(struct zp_bench *b, const struct zp_block *k, const struct zp_sizes *sz,
                     int in_place, uint64_t seed, double *wrong)
{
    size_t ts = (size_t)k->t->size;
    struct zp_pattern p;
    zp_pattern_init(&p, k->t, k->op, b->nranks, seed);
    for (int i = 0; i < b->nlocal; i++) {
        struct zp_rank *r = &b->r[i];
        const char *out = (char *)r->recv + (in_place ? sz->recv_ip * (size_t)r->rank * ts : 0);
        if (b->mem->get(r->dev, b->host, out, sz->recvcount * ts)) return -1;
        b->vals[i] = (double)zp_check(&p, b->o.coll, r->rank, k->root, sz, in_place, b->host);
    }
    return combine(b, ncclSum, wrong);
}

/* ---------------------------------------------------------------------------------------
 * One row, one block, everything
 * --------------------------------------------------------------------------------------- */

/* Time one place (out of place or in place) of one size, then validate it (nccl-tests'
 * BenchTime). */
static int bench_time(struct zp_bench *b, const struct zp_block *k, const struct zp_sizes *sz,
                      int in_place, struct zp_place *res)
{
    int launches = b->o.graphs;
    int checked = b->o.check && (!in_place || zp_coll_ip_checked(b->o.coll));
    double t0 = 0, sec, wrong = 0;
    /* Valid inputs for the timed calls too, so that floating-point work runs on numbers. */
    if (b->o.check && fill_all(b, k, sz, in_place, seed_of(99, in_place))) return -1;
    if (start_coll(b, k, sz, in_place, 0) || wait_done(b)) return -1;
    if (issue(b, k, sz, in_place, b->o.iters, launches, &t0) || wait_done(b)) return -1;
    sec = (now() - t0) / b->o.iters / (launches ? launches : 1);
    graphs_free(b);
    if (combine_time(b, sec, &sec)) return -1;
    res->time_us = sec * 1e6;
    zp_bandwidth(b->o.coll, sz, k->t->size, b->nranks, sec, &res->algbw, &res->busbw);
    b->rep++;
    for (int c = 0; checked && c < b->o.check && wrong == 0; c++) {
        uint64_t seed = seed_of(b->rep, in_place);
        if (fill_all(b, k, sz, in_place, seed)) return -1;
        if (issue(b, k, sz, in_place, 1, launches ? 1 : 0, &t0) || wait_done(b)) return -1;
        graphs_free(b);
        if (check_all(b, k, sz, in_place, seed, &wrong)) return -1;
    }
    res->wrong = checked ? (long long)wrong : -1;
    if (res->wrong > 0) b->errors++;
    b->bw_sum += res->busbw;
    b->bw_count++;
    return 0;
}

static void print_place(const struct zp_bench *b, const struct zp_place *p)
{
    char t[32], w[32];
    if (!b->main) return;
    snprintf(t, sizeof(t),
             p->time_us >= 10000 ? "%7.0f"
             : p->time_us >= 100 ? "%7.1f"
                                 : "%7.2f",
             p->time_us);
    if (p->wrong < 0)
        snprintf(w, sizeof(w), "N/A");
    else
        snprintf(w, sizeof(w), "%lld", p->wrong);
    printf("  %7s  %6.2f  %6.2f  %5s", t, p->algbw, p->busbw, w);
}

static int record(struct zp_bench *b, const struct zp_result *res)
{
    if (b->nres == b->capres) {
        size_t cap = b->capres ? 2 * b->capres : 64;
        struct zp_result *n = realloc(b->res, cap * sizeof(*n));
        if (!n) return complain("out of memory");
        b->res = n;
        b->capres = cap;
    }
    b->res[b->nres++] = *res;
    return 0;
}

static int run_size(struct zp_bench *b, const struct zp_block *k, size_t bytes)
{
    struct zp_sizes sz;
    struct zp_result res = { .type = k->t->name, .op = zp_op_names[k->op], .root = k->root };
    zp_sizes_get(b->o.coll, bytes, k->t->size, b->nranks, &sz);
    res.count = sz.count;
    res.bytes = (sz.sendcount > sz.recvcount ? sz.sendcount : sz.recvcount) * (size_t)k->t->size;
    if (b->main)
        printf("%12zu  %12zu  %8s  %6s  %6d", res.bytes, res.count, res.type, res.op, res.root);
    if (bench_time(b, k, &sz, 0, &res.oop)) return -1;
    print_place(b, &res.oop);
    if (bench_time(b, k, &sz, 1, &res.ip)) return -1;
    print_place(b, &res.ip);
    if (b->main) printf("\n");
    return b->main && b->o.json ? record(b, &res) : 0;
}

static int warmup(struct zp_bench *b, const struct zp_block *k, size_t bytes)
{
    struct zp_sizes sz;
    zp_sizes_get(b->o.coll, bytes, k->t->size, b->nranks, &sz);
    for (int it = 0; it < b->o.warmup; it++)
        if (start_coll(b, k, &sz, 0, it)) return -1;
    return wait_done(b);
}

/* One type, op and root over all sizes (nccl-tests' TimeTest). Warming up at the largest
 * and the smallest size first keeps connection setup out of the first rows. */
static int time_test(struct zp_bench *b, const struct zp_block *k)
{
    int rc = ops_create(b, k);
    if (!rc) rc = warmup(b, k, b->o.max_bytes);
    if (!rc) rc = warmup(b, k, b->o.min_bytes);
    for (size_t size = b->o.min_bytes; !rc && size <= b->o.max_bytes;) {
        rc = run_size(b, k, size);
        size_t next =
            b->o.step_factor > 1 ? (size ? size * b->o.step_factor : 1) : size + b->o.step_bytes;
        if (next <= size) break; /* overflow */
        size = next;
    }
    if (ops_destroy(b)) rc = -1;
    return rc;
}

/* Types, then ops, then roots, as nccl-tests nests them. */
static int run_all(struct zp_bench *b)
{
    const struct zp_coll *c = b->o.coll;
    int t0 = b->o.type < 0 ? 0 : b->o.type, t1 = b->o.type < 0 ? zp_ntypes : b->o.type + 1;
    int o0 = ZP_NOP, o1 = ZP_NOP + 1, r0 = -1, r1 = 0;
    if (zp_coll_has_op(c)) {
        o0 = b->o.op < 0 ? 0 : b->o.op;
        o1 = b->o.op < 0 ? ZP_NUM_OPS : b->o.op + 1;
    }
    if (zp_coll_has_root(c)) {
        r0 = b->o.root < 0 ? 0 : b->o.root;
        r1 = b->o.root < 0 ? b->nranks : b->o.root + 1;
    }
    for (int t = t0; t < t1; t++)
        for (int op = o0; op < o1; op++)
            for (int root = r0; root < r1; root++) {
                struct zp_block k = { .t = &zp_types[t], .op = (enum zp_op)op, .root = root };
                if (time_test(b, &k)) return -1;
            }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Setup and report
 * --------------------------------------------------------------------------------------- */

/* Bytes of each ncclMemAlloc'd and registered buffer (-R 1): never 0. */
static size_t reg_bytes(const struct zp_bench *b)
{
    return b->o.max_bytes ? b->o.max_bytes : 1;
}

static int setup_ranks(struct zp_bench *b)
{
    b->r = calloc((size_t)b->nlocal, sizeof(*b->r));
    b->vals = calloc((size_t)b->nlocal, sizeof(*b->vals));
    b->host = malloc(b->o.max_bytes ? b->o.max_bytes : 1);
    if (!b->r || !b->vals || !b->host) return complain("out of memory");
    for (int i = 0; i < b->nlocal; i++) {
        struct zp_rank *r = &b->r[i];
        r->rank = b->li.rank * b->nlocal + i;
        r->dev = b->ndev ? (b->li.local_rank * b->nlocal + i) % b->ndev : -1;
        if (b->o.local_register && r->dev >= 0) {
            /* As nccl-tests -R 1: memory peers can map, registered once the comms exist. */
            if (b->mem->use(r->dev)) return -1;
            NCCL_TRY(r, ncclMemAlloc(&r->send, reg_bytes(b)));
            NCCL_TRY(r, ncclMemAlloc(&r->recv, reg_bytes(b)));
            r->memalloc = 1;
        } else if (b->mem->alloc(r->dev, b->o.max_bytes, &r->send) ||
                   b->mem->alloc(r->dev, b->o.max_bytes, &r->recv)) {
            return -1;
        }
        if (b->mem->alloc(r->dev, ZP_LINE, &r->small) || b->mem->stream_create(r->dev, &r->stream))
            return -1;
    }
    return 0;
}

static int init_comms(struct zp_bench *b)
{
    ncclUniqueId id;
    if (b->li.nranks > 1 && !getenv("ZINC_COMM_ID") && !getenv("NCCL_COMM_ID")) {
        fprintf(stderr,
                "zinc-perf: %d processes, but neither ZINC_COMM_ID nor NCCL_COMM_ID is set.\n"
                "  Every process must find the same rendezvous address without MPI: start them\n"
                "  with zinc-run (it sets both), or export ZINC_COMM_ID=<host>:<port> on every\n"
                "  process, with <host> the first process's host, e.g.\n"
                "  ZINC_COMM_ID=node0:29500 mpirun -x ZINC_COMM_ID -np 4 zinc-perf ...\n",
                b->li.nranks);
        return -1;
    }
    NCCL_TRY(&b->r[0], ncclGetUniqueId(&id));
    NCCL_TRY(&b->r[0], ncclGroupStart());
    for (int i = 0; i < b->nlocal; i++) {
        struct zp_rank *r = &b->r[i];
        if (b->mem->use(r->dev)) return -1;
        NCCL_TRY(r, ncclCommInitRank(&r->comm, b->nranks, id, r->rank));
    }
    NCCL_TRY(&b->r[0], ncclGroupEnd());
    if (wait_done(b)) return -1;
    for (int i = 0; i < b->nlocal; i++) {
        struct zp_rank *r = &b->r[i];
        if (!r->memalloc) continue;
        if (b->mem->use(r->dev)) return -1;
        NCCL_TRY(r, ncclCommRegister(r->comm, r->send, reg_bytes(b), &r->send_reg));
        NCCL_TRY(r, ncclCommRegister(r->comm, r->recv, reg_bytes(b), &r->recv_reg));
    }
    return 0;
}

static void print_header(const struct zp_bench *b)
{
    const struct zp_opts *o = &b->o;
    int factor = o->step_factor > 1;
    if (!b->main) return;
    printf("# Collective test starting: %s_perf\n", o->coll->name);
    printf("# nThread 1 nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
           "iters: %d agg iters: 1 validation: %d graph: %d\n",
           o->ngpus, o->min_bytes, o->max_bytes, factor ? o->step_factor : o->step_bytes,
           factor ? "factor" : "bytes", o->warmup, o->iters, o->check, o->graphs);
    printf("# zinc-perf: nccl-library %d, %d process%s x %d rank%s, %s memory, launcher %s\n",
           b->version, b->li.nranks, b->li.nranks > 1 ? "es" : "", o->ngpus,
           o->ngpus > 1 ? "s" : "", b->mem->name, b->li.launcher ? b->li.launcher : "none");
    if (o->blocking)
        printf("# Blocking Enabled: wait for completion and barrier after each collective \n");
    printf("#\n");
}

/* Every rank formats its line into its small buffer; an allgather into bufs brings all of
 * them, in rank order, to the host copy all. */
static int gather_lines(struct zp_bench *b, void **bufs, char *all, size_t all_bytes)
{
    char host[64] = "unknown", dev[80], line[ZP_LINE];
    gethostname(host, sizeof(host) - 1);
    host[strcspn(host, ".")] = '\0'; /* nccl-tests prints the short name */
    for (int i = 0; i < b->nlocal; i++) {
        struct zp_rank *r = &b->r[i];
        b->mem->describe(r->dev, dev, sizeof(dev));
        memset(line, 0, sizeof(line));
        snprintf(line, sizeof(line), "#  Rank %2d Group  0 Pid %6d on %10.40s %.80s", r->rank,
                 (int)getpid(), host, dev);
        if (b->mem->alloc(r->dev, all_bytes, &bufs[i]) ||
            b->mem->put(r->dev, r->small, line, ZP_LINE))
            return -1;
    }
    if (b->nlocal > 1) NCCL_TRY(&b->r[0], ncclGroupStart());
    for (int i = 0; i < b->nlocal; i++) {
        struct zp_rank *r = &b->r[i];
        NCCL_TRY(r, ncclAllGather(r->small, bufs[i], ZP_LINE, ncclUint8, r->comm, r->stream));
    }
    if (b->nlocal > 1) NCCL_TRY(&b->r[0], ncclGroupEnd());
    if (wait_done(b)) return -1;
    return b->mem->get(b->r[0].dev, all, bufs[0], all_bytes);
}

static int print_devices(struct zp_bench *b)
{
    size_t all_bytes = (size_t)b->nranks * ZP_LINE;
    char *all = malloc(all_bytes);
    void **bufs = calloc((size_t)b->nlocal, sizeof(*bufs));
    int rc = all && bufs ? gather_lines(b, bufs, all, all_bytes) : -1;
    if (!all || !bufs) complain("out of memory");
    if (!rc && b->main) {
        printf("# Using devices\n");
        for (int r = 0; r < b->nranks; r++)
            printf("%.*s\n", ZP_LINE - 1, all + (size_t)r * ZP_LINE);
        printf("#\n");
    }
    for (int i = 0; bufs && i < b->nlocal; i++)
        if (bufs[i]) b->mem->release(b->r[i].dev, bufs[i]);
    free(bufs);
    free(all);
    return rc;
}

static void print_columns(const struct zp_bench *b)
{
    if (!b->main) return;
    printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place      "
           "    \n",
           "", "", "", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count",
           "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
           "#wrong");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
           "");
}

static double avg_busbw(const struct zp_bench *b)
{
    return b->bw_count ? b->bw_sum / b->bw_count : 0;
}

static void print_footer(const struct zp_bench *b)
{
    if (!b->main) return;
    printf("# Out of bounds values : %d %s\n", b->errors, b->errors ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n", avg_busbw(b));
    printf("#\n");
}

/* ---------------------------------------------------------------------------------------
 * JSON (-J), written by rank 0 with plain fprintf
 * --------------------------------------------------------------------------------------- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

/* JSON has no inf or nan: a zero time would make the bandwidth infinite. */
static void json_num(FILE *f, const char *key, double v)
{
    if (isfinite(v))
        fprintf(f, "\"%s\": %.6g", key, v);
    else
        fprintf(f, "\"%s\": null", key);
}

static void json_place(FILE *f, const char *key, const struct zp_place *p)
{
    fprintf(f, "\"%s\": {", key);
    json_num(f, "time_us", p->time_us);
    fprintf(f, ", ");
    json_num(f, "algbw", p->algbw);
    fprintf(f, ", ");
    json_num(f, "busbw", p->busbw);
    if (p->wrong < 0)
        fprintf(f, ", \"wrong\": null}");
    else
        fprintf(f, ", \"wrong\": %lld}", p->wrong);
}

static void json_params(FILE *f, const struct zp_bench *b)
{
    const struct zp_opts *o = &b->o;
    fprintf(f, "{\n  \"tool\": \"zinc-perf\",\n  \"collective\": ");
    json_str(f, o->coll->name);
    fprintf(f, ",\n  \"nranks\": %d,\n  \"nprocs\": %d,\n  \"ranks_per_proc\": %d,\n  \"mode\": ",
            b->nranks, b->li.nranks, b->nlocal);
    json_str(f, b->mem->name);
    fprintf(f, ",\n  \"launcher\": ");
    json_str(f, b->li.launcher ? b->li.launcher : "none");
    fprintf(f,
            ",\n  \"nccl_version\": %d,\n  \"min_bytes\": %zu,\n  \"max_bytes\": %zu,\n"
            "  \"step_bytes\": %zu,\n  \"step_factor\": %zu,\n  \"iters\": %d,\n"
            "  \"warmup_iters\": %d,\n  \"check\": %d,\n  \"blocking\": %d,\n"
            "  \"cudagraph\": %d,\n  \"average\": %d,\n  \"datatype\": ",
            b->version, o->min_bytes, o->max_bytes, o->step_bytes, o->step_factor, o->iters,
            o->warmup, o->check, o->blocking, o->graphs, o->average);
    json_str(f, o->type < 0 ? "all" : zp_types[o->type].name);
    fprintf(f, ",\n  \"op\": ");
    json_str(f, !zp_coll_has_op(o->coll) ? "none" : o->op < 0 ? "all" : zp_op_names[o->op]);
    fprintf(f, ",\n  \"root\": %d,\n", zp_coll_has_root(o->coll) ? o->root : -1);
}

static int write_json(const struct zp_bench *b)
{
    FILE *f;
    if (!b->main || !b->o.json) return 0;
    if (!(f = fopen(b->o.json, "w")))
        return complain("cannot write %s: %s", b->o.json, strerror(errno));
    json_params(f, b);
    fprintf(f, "  \"results\": [");
    for (size_t i = 0; i < b->nres; i++) {
        const struct zp_result *r = &b->res[i];
        fprintf(f, "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": ", i ? "," : "", r->bytes,
                r->count);
        json_str(f, r->type);
        fprintf(f, ", \"redop\": ");
        json_str(f, r->op);
        fprintf(f, ", \"root\": %d, ", r->root);
        json_place(f, "oop", &r->oop);
        fprintf(f, ", ");
        json_place(f, "ip", &r->ip);
        fprintf(f, "}");
    }
    fprintf(f, "\n  ],\n  \"out_of_bounds\": %d,\n  ", b->errors);
    json_num(f, "avg_busbw", avg_busbw(b));
    fprintf(f, "\n}\n");
    if (fclose(f) != 0) return complain("cannot write %s: %s", b->o.json, strerror(errno));
    return 0;
}

/* Destroy communicators (abort them after a failure, so that nothing waits on a peer), then
 * free what setup_ranks made. */
static void teardown(struct zp_bench *b, int failed)
{
    for (int i = 0; b->r && i < b->nlocal; i++) {
        struct zp_rank *r = &b->r[i];
        b->mem->graph_free(r->dev, r->graph, r->exec);
        if (r->comm && !failed) {
            if (r->send_reg) ncclCommDeregister(r->comm, r->send_reg);
            if (r->recv_reg) ncclCommDeregister(r->comm, r->recv_reg);
        }
        if (r->comm) {
            ncclResult_t res = failed ? ncclCommAbort(r->comm) : ncclCommDestroy(r->comm);
            if (res != ncclSuccess)
                nccl_failed(r, failed ? "ncclCommAbort" : "ncclCommDestroy", res);
        }
        if (r->stream) b->mem->stream_destroy(r->dev, r->stream);
        if (r->small) b->mem->release(r->dev, r->small);
        if (r->memalloc) {
            if (r->recv) ncclMemFree(r->recv);
            if (r->send) ncclMemFree(r->send);
        } else {
            if (r->recv) b->mem->release(r->dev, r->recv);
            if (r->send) b->mem->release(r->dev, r->send);
        }
    }
    free(b->r);
    free(b->vals);
    free(b->host);
    free(b->res);
}

/* Ranks from the launcher, the memory mode, and the checks that need them. */
static int configure(struct zp_bench *b)
{
    zn_launch_info_get(&b->li);
    b->nlocal = b->o.ngpus;
    b->nranks = b->li.nranks * b->nlocal;
    b->main = b->li.rank == 0;
    if (b->o.root >= b->nranks)
        return complain("root %d out of range (%d ranks)", b->o.root, b->nranks);
    b->mem = zp_mem_select(&b->ndev);
    if (b->o.graphs && !b->ndev)
        return complain("-G (CUDA graphs) needs GPU buffers; this run uses host memory");
    /* zinc picks host communicators when told so; real NCCL ignores the variable. Without
     * it, a CUDA build of zinc on a GPU machine would expect device buffers from us. */
    if (!b->ndev) setenv("ZINC_DEVICE", "host", 0);
    if (ncclGetVersion(&b->version) != ncclSuccess) b->version = 0;
    return 0;
}

int main(int argc, char **argv)
{
    struct zp_bench b = { 0 };
    int rc = parse_opts(argc, argv, &b.o);
    if (rc) return rc > 0 ? 0 : 2;
    setvbuf(stdout, NULL, _IOLBF, 0); /* rows appear as they are measured */
    if (configure(&b)) return 2;
    print_header(&b);
    rc = setup_ranks(&b) || init_comms(&b) || print_devices(&b);
    if (!rc) {
        print_columns(&b);
        rc = run_all(&b);
    }
    if (!rc) {
        print_footer(&b);
        rc = write_json(&b);
    }
    teardown(&b, rc);
    return rc ? 2 : b.errors ? 1 : 0; /* as in the usage text */
}
