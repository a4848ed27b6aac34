/*
 * test_algo_sim: every point-to-point algorithm (ring, rd, tree, pairwise) for every collective
 * it supports, run for n ranks inside one process by the simulator (sim.h), against a reference
 * computed here.
 *
 * Sweep: n in {1,2,3,4,5,7,8,9,16,17}; counts {1, 2, n-1, n, n+1, 7n+3, 10007}; for each, every
 * (type, op) pair (int32, float, half, bf16, uint8, double x sum, prod, max, min) for the
 * reducing collectives and every type for the others, with the chunk size (8, 64, 4096 bytes),
 * root (0, n-1, n/2), in place or not, NULL or canary buffers on non-roots and ring order
 * (identity, two interleaved "hosts", random) rotating between variants; the count 10007 gets
 * a few of those variants only, to keep the test fast under ASan. The inputs make every
 * reduction order exact (small integers, products of +-1 and a few 2s), so outputs must equal
 * the reference bit for bit. Separately, allreduce of random floats must give bit-identical
 * outputs on every rank (ring, rd), and the cost model must pick rd/tree for small messages and
 * ring for large ones.
 */
#include "sim.h"
#include "zt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const int NS[] = { 1, 2, 3, 4, 5, 7, 8, 9, 16, 17 };
static const ncclDataType_t TYPES[] = { ncclInt32,    ncclFloat32, ncclFloat16,
                                        ncclBfloat16, ncclUint8,   ncclFloat64 };
static const enum zn_red OPS[] = { ZN_RED_SUM, ZN_RED_PROD, ZN_RED_MAX, ZN_RED_MIN };
static const size_t CHUNKS[] = { 8, 64, 4096 };
#define NTYPES 6
#define BIG    10007

struct cfg {
    const struct zn_algo *algo;
    enum zn_coll coll;
    int n, root, in_place, null_bufs, order, random;
    size_t count, chunk;
    ncclDataType_t dtype;
    enum zn_red op;
};

/* The collectives' facts (algo/coll_facts.h, from the collective list); the expected results
 * are computed here (expect). */
static int reduces(enum zn_coll c)
{
    return zn_coll_facts(c)->reduces;
}

static int rooted(enum zn_coll c)
{
    return zn_coll_facts(c)->rooted;
}

/* Elements of rank r's logical input and output (0 where NCCL ignores the buffer). */
static size_t in_elems(const struct cfg *c, int r)
{
    return zn_coll_send_elems(c->coll, c->count, c->n, r == c->root);
}

static size_t out_elems(const struct cfg *c, int r)
{
    return zn_coll_recv_elems(c->coll, c->count, c->n, r == c->root);
}

static uint32_t mix(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t h = a * 0x9e3779b1u ^ (b + 0x7f4a7c15u) * 0x85ebca6bu ^ c * 0xc2b2ae35u;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return h;
}

/* Element i of rank r's input: every reduction order of these gives the same exact result. */
static double value(const struct cfg *c, int r, size_t i)
{
    uint32_t h = mix((uint32_t)r, (uint32_t)i, (uint32_t)c->count);
    int u8 = c->dtype == ncclUint8;
    if (c->random) return ((double)(h % 20001) - 10000.0) * ldexp(1.0, (int)(h >> 24) % 16 - 20);
    switch (c->op) {
    case ZN_RED_SUM: return u8 ? h % 256 : (double)(h % 15) - 7;
    case ZN_RED_PROD:
        if (!zn_dtype_is_float(c->dtype)) return u8 ? h % 256 : (double)(h % 7) - 3;
        return (i + (size_t)r) % 7 == 0 ? 2.0 : (h % 5 == 0 ? -1.0 : 1.0);
    default: return u8 ? h % 256 : ((double)(h % 2001) - 1000) / 8;
    }
}

/* A rank's buffers: what to free, and what must come back unchanged. */
struct rank_bufs {
    void *alloc[2];
    int nalloc;
    const void *keep[2];
    void *keep_copy[2];
    size_t keep_len[2];
    int nkeep;
};

/* A new buffer of len bytes holding src, or poison when src is NULL. */
static char *take(struct rank_bufs *rb, const void *src, size_t len)
{
    char *p = malloc(len ? len : 1);
    if (src)
        memcpy(p, src, len);
    else
        memset(p, 0x5c, len);
    rb->alloc[rb->nalloc++] = p;
    return p;
}

static void keep(struct rank_bufs *rb, const void *p, size_t len)
{
    rb->keep[rb->nkeep] = p;
    rb->keep_copy[rb->nkeep] = malloc(len ? len : 1);
    memcpy(rb->keep_copy[rb->nkeep], p, len);
    rb->keep_len[rb->nkeep++] = len;
}

/* Builds rank r's args and memory rules as an NCCL application would pass them. */
static void setup_rank(const struct cfg *c, int r, void *const *in, struct rank_bufs *rb,
                       struct zn_coll_args *a, struct sim_mem *m)
{
    size_t es = zn_dtype_size(c->dtype), ib = in_elems(c, r) * es, ob = out_elems(c, r) * es;
    size_t blk = c->count * es;
    *a = (struct zn_coll_args){ .coll = c->coll,
                                .count = c->count,
                                .dtype = c->dtype,
                                .esize = es,
                                .op = c->op,
                                .root = c->root };
    char *s = NULL, *d = NULL;
    /* In place, NCCL's layouts (coll_facts.h): the send block inside the receive buffer
     * (allgather, gather on the root), the receive block inside the send buffer (reducescatter,
     * scatter on the root), or one buffer (allreduce, reduce, alltoall, ncclBcast). A rank
     * without the buffer that holds the other passes both as out of place. */
    int ip = zn_coll_in_place_offset(c->coll);
    if (c->in_place && ip > 0 && ob) {
        d = take(rb, NULL, ob);
        s = d + (size_t)r * blk;
        memcpy(s, in[r], ib);
    } else if (c->in_place && ip < 0 && ib) {
        s = take(rb, in[r], ib);
        d = s + (size_t)r * blk;
        /* A block copied onto itself: the send buffer must come back as it was. */
        if (!reduces(c->coll)) keep(rb, s, ib);
    } else if (c->in_place && ip == 0) {
        s = d = take(rb, ib ? in[r] : NULL, ib > ob ? ib : ob);
        if (!ob) keep(rb, s, ib); /* a non-root's input of an in-place reduce */
    }
    if (!s && !d) { /* out of place, or a non-root of gather/scatter */
        if (ib) keep(rb, s = take(rb, in[r], ib), ib);
        if (ob) d = take(rb, NULL, ob);
        /* A buffer NCCL ignores on this rank: NULL, or a canary that must stay untouched. */
        if (!ib && !c->null_bufs) keep(rb, s = take(rb, NULL, blk), blk);
        if (!ob && !c->null_bufs) keep(rb, d = take(rb, NULL, blk), blk);
    }
    a->sendbuf = s;
    a->recvbuf = d;
    /* Readable: the input where NCCL reads it; writable: the output where NCCL writes it. */
    m->rd = ib ? s : NULL;
    m->rd_bytes = ib;
    m->wr = ob ? d : NULL;
    m->wr_bytes = ob;
}

static size_t logical_in_elems(const struct cfg *c)
{
    return (size_t)zn_coll_send_blocks(c->coll, c->n) * c->count;
}

static void make_ring(const struct cfg *c, int *ring, int *nhosts)
{
    int n = c->n, k = 0;
    *nhosts = c->order == 0 || n == 1 ? 1 : 2;
    if (c->order == 1) { /* hosts {0,2,4,...} and {1,3,5,...} */
        for (int r = 0; r < n; r += 2) ring[k++] = r;
        for (int r = 1; r < n; r += 2) ring[k++] = r;
        return;
    }
    for (int r = 0; r < n; r++) ring[r] = r;
    if (c->order == 2) {
        for (int i = n - 1; i > 0; i--) {
            int j = (int)(mix((uint32_t)i, (uint32_t)n, (uint32_t)c->count) % (uint32_t)(i + 1));
            int t = ring[i];
            ring[i] = ring[j];
            ring[j] = t;
        }
    }
}

static void describe(const struct cfg *c)
{
    fprintf(stderr,
            "  config: %s %s n=%d count=%zu type=%s op=%d root=%d in_place=%d null_bufs=%d "
            "chunk=%zu order=%d random=%d\n",
            c->algo->name, zn_coll_name(c->coll), c->n, c->count, zn_dtype_name(c->dtype),
            (int)c->op, c->root, c->in_place, c->null_bufs, c->chunk, c->order, c->random);
}

/* What rank r's output must hold. */
static void expect(const struct cfg *c, int r, void *const *in, const char *red, char *out)
{
    size_t es = zn_dtype_size(c->dtype), blk = c->count * es;
    switch (c->coll) {
    case ZN_COLL_ALLREDUCE:
    case ZN_COLL_REDUCE: memcpy(out, red, blk); break;
    case ZN_COLL_REDUCESCATTER: memcpy(out, red + (size_t)r * blk, blk); break;
    case ZN_COLL_BROADCAST: memcpy(out, in[c->root], blk); break;
    case ZN_COLL_SCATTER: memcpy(out, (char *)in[c->root] + (size_t)r * blk, blk); break;
    case ZN_COLL_ALLGATHER:
    case ZN_COLL_GATHER:
        for (int i = 0; i < c->n; i++) memcpy(out + (size_t)i * blk, in[i], blk);
        break;
    case ZN_COLL_ALLTOALL:
        for (int i = 0; i < c->n; i++)
            memcpy(out + (size_t)i * blk, (char *)in[i] + (size_t)r * blk, blk);
        break;
    default: break;
    }
}

static int compare(const struct cfg *c, int r, const char *what, const void *got, const void *want,
                   size_t elems)
{
    size_t es = zn_dtype_size(c->dtype);
    if (!memcmp(got, want, elems * es)) return 0;
    size_t i = 0;
    while (i < elems && !memcmp((const char *)got + i * es, (const char *)want + i * es, es)) i++;
    fprintf(stderr, "  rank %d: %s differs at element %zu of %zu: %.17g, expected %.17g\n", r, what,
            i, elems, zn_dtype_to_double(c->dtype, got, i), zn_dtype_to_double(c->dtype, want, i));
    return -1;
}

static int run_cfg(const struct cfg *c, struct sim_stats *stats)
{
    int n = c->n, ring[64], nhosts, rc = -1;
    size_t es = zn_dtype_size(c->dtype), len = logical_in_elems(c);
    void *in[64] = { 0 };
    struct rank_bufs rb[64];
    struct zn_coll_args args[64];
    struct sim_mem mem[64];
    memset(rb, 0, sizeof(rb));
    make_ring(c, ring, &nhosts);
    char *red = malloc(len * es), *want = malloc((size_t)n * c->count * es);
    for (int r = 0; r < n; r++) {
        in[r] = malloc(len * es);
        if (!reduces(c->coll)) { /* any bits will do where nothing is computed */
            for (size_t i = 0; i < len * es; i += 4) {
                uint32_t h = mix((uint32_t)r, (uint32_t)i, (uint32_t)c->count);
                memcpy((char *)in[r] + i, &h, len * es - i < 4 ? len * es - i : 4);
            }
            continue;
        }
        for (size_t i = 0; i < len; i++)
            zn_dtype_from_double(c->dtype, value(c, r, i), (char *)in[r] + i * es);
    }
    memcpy(red, in[0], len * es);
    for (int r = 1; r < n && reduces(c->coll); r++)
        zn_reduce2(c->dtype, c->op, red, red, in[r], len);
    for (int r = 0; r < n; r++) setup_rank(c, r, in, &rb[r], &args[r], &mem[r]);
    if (sim_run(c->algo, n, ring, nhosts, c->chunk, args, mem, stats)) goto out;
    for (int r = 0; r < n; r++) {
        size_t oe = out_elems(c, r);
        if (c->random) { /* bit-identical on every rank, and close to the reference */
            if (compare(c, r, "output vs rank 0", args[r].recvbuf, args[0].recvbuf, oe)) goto out;
            for (size_t i = 0; i < oe && c->dtype == ncclFloat32; i++) {
                double g = zn_dtype_to_double(c->dtype, args[r].recvbuf, i), w = 0, e = 0;
                for (int k = 0; k < n; k++) w += zn_dtype_to_double(c->dtype, in[k], i);
                for (int k = 0; k < n; k++) e += fabs(zn_dtype_to_double(c->dtype, in[k], i));
                if (fabs(g - w) > 1e-5 * e) {
                    fprintf(stderr, "  rank %d element %zu: %g, expected about %g\n", r, i, g, w);
                    goto out;
                }
            }
        } else if (oe) {
            expect(c, r, in, red, want);
            if (compare(c, r, "output", args[r].recvbuf, want, oe)) goto out;
        }
        for (int k = 0; k < rb[r].nkeep; k++)
            if (memcmp(rb[r].keep[k], rb[r].keep_copy[k], rb[r].keep_len[k])) {
                fprintf(stderr, "  rank %d: a buffer the plan must not write changed\n", r);
                goto out;
            }
    }
    rc = 0;
out:
    if (rc) describe(c);
    for (int r = 0; r < n; r++) {
        for (int k = 0; k < rb[r].nalloc; k++) free(rb[r].alloc[k]);
        for (int k = 0; k < rb[r].nkeep; k++) free(rb[r].keep_copy[k]);
        free(in[r]);
    }
    free(red);
    free(want);
    return rc;
}

/* Every variant of one (algorithm, collective) over the rank counts and message sizes. */
static int sweep(const char *name, enum zn_coll coll)
{
    struct cfg c = { .algo = zn_algo_find(name), .coll = coll };
    struct sim_stats st = { 0 };
    long runs = 0;
    clock_t t0 = clock();
    if (!c.algo) {
        fprintf(stderr, "  algorithm %s is not registered\n", name);
        return -1;
    }
    for (size_t ni = 0; ni < sizeof(NS) / sizeof(NS[0]); ni++) {
        int n = c.n = NS[ni];
        size_t counts[] = { 1, 2, (size_t)n - 1, (size_t)n, (size_t)n + 1, 7 * (size_t)n + 3, BIG };
        for (int ci = 0; ci < 7; ci++) {
            c.count = counts[ci];
            int dup = c.count == 0;
            for (int k = 0; k < ci; k++) dup |= counts[k] == c.count;
            if (dup) continue;
            int nvar = reduces(coll) ? NTYPES * 4 : NTYPES * 2;
            for (int v = 0; v < nvar; v++) {
                /* A few variants of the big count (two where a buffer holds n blocks). */
                const struct zn_coll_facts *f = zn_coll_facts(coll);
                int nb = zn_coll_extent_per_rank(f->send) || zn_coll_extent_per_rank(f->recv);
                if (c.count == BIG && v % ((reduces(coll) ? 7 : 5) * (nb ? 2 : 1))) continue;
                uint32_t h = mix((uint32_t)v, (uint32_t)ci, (uint32_t)n * 31u + (uint32_t)coll);
                c.dtype = TYPES[v % NTYPES];
                c.op = reduces(coll) ? OPS[v / NTYPES] : ZN_RED_SUM;
                c.in_place = reduces(coll) ? (int)(h & 1) : v / NTYPES;
                c.null_bufs = (int)(h >> 1) & 1;
                c.order = (int)((h >> 2) % 3);
                c.chunk = c.count == BIG ? CHUNKS[1 + (h >> 4) % 2] : CHUNKS[(h >> 4) % 3];
                int roots[3] = { 0, n - 1, n / 2 };
                c.root = rooted(coll) ? roots[(v + ci) % 3] : 0;
                runs++;
                if (run_cfg(&c, &st)) return -1;
            }
        }
    }
    fprintf(stderr,
            "  %s %s: %ld runs, %ld rounds, %ld messages, at most %ld steps a round, %.2f s\n",
            name, zn_coll_name(coll), runs, st.rounds, st.msgs, st.max_steps,
            (double)(clock() - t0) / CLOCKS_PER_SEC);
    return 0;
}

ZT_TEST(ring_allreduce)
{
    ZT_OK(sweep("ring", ZN_COLL_ALLREDUCE));
}
ZT_TEST(ring_allgather)
{
    ZT_OK(sweep("ring", ZN_COLL_ALLGATHER));
}
ZT_TEST(ring_reducescatter)
{
    ZT_OK(sweep("ring", ZN_COLL_REDUCESCATTER));
}
ZT_TEST(ring_broadcast)
{
    ZT_OK(sweep("ring", ZN_COLL_BROADCAST));
}
ZT_TEST(ring_reduce)
{
    ZT_OK(sweep("ring", ZN_COLL_REDUCE));
}
ZT_TEST(rd_allreduce)
{
    ZT_OK(sweep("rd", ZN_COLL_ALLREDUCE));
}
ZT_TEST(tree_broadcast)
{
    ZT_OK(sweep("tree", ZN_COLL_BROADCAST));
}
ZT_TEST(tree_reduce)
{
    ZT_OK(sweep("tree", ZN_COLL_REDUCE));
}
ZT_TEST(pairwise_alltoall)
{
    ZT_OK(sweep("pairwise", ZN_COLL_ALLTOALL));
}
ZT_TEST(pairwise_gather)
{
    ZT_OK(sweep("pairwise", ZN_COLL_GATHER));
}
ZT_TEST(pairwise_scatter)
{
    ZT_OK(sweep("pairwise", ZN_COLL_SCATTER));
}

/* Random floats: every rank's allreduce output is bit-identical (ring and rd). */
ZT_TEST(allreduce_bit_identical)
{
    static const char *algos[] = { "ring", "rd" };
    static const ncclDataType_t types[] = { ncclFloat32, ncclFloat16, ncclBfloat16 };
    static const int ns[] = { 2, 3, 5, 7, 8, 16, 17 };
    static const size_t counts[] = { 1, 5, 1000, BIG };
    struct sim_stats st = { 0 };
    for (int ai = 0; ai < 2; ai++)
        for (int ni = 0; ni < 7; ni++)
            for (int ci = 0; ci < 4; ci++)
                for (int ti = 0; ti < 3; ti++) {
                    struct cfg c = { .algo = zn_algo_find(algos[ai]),
                                     .coll = ZN_COLL_ALLREDUCE,
                                     .n = ns[ni],
                                     .count = counts[ci],
                                     .dtype = types[ti],
                                     .op = ZN_RED_SUM,
                                     .random = 1,
                                     .in_place = (ci + ti) & 1,
                                     .order = (ni + ci) % 3,
                                     .chunk = CHUNKS[1 + (ni + ti) % 2] };
                    ZT_ASSERT(c.algo);
                    ZT_OK(run_cfg(&c, &st));
                }
}

/* Each algorithm supports exactly the collectives it implements, on any communicator. */
ZT_TEST(supports)
{
    static const struct {
        const char *name;
        unsigned colls;
    } want[] = {
        { "ring", 1u << ZN_COLL_ALLREDUCE | 1u << ZN_COLL_BROADCAST | 1u << ZN_COLL_REDUCE |
                      1u << ZN_COLL_ALLGATHER | 1u << ZN_COLL_REDUCESCATTER },
        { "rd", 1u << ZN_COLL_ALLREDUCE },
        { "tree", 1u << ZN_COLL_BROADCAST | 1u << ZN_COLL_REDUCE },
        { "pairwise", 1u << ZN_COLL_ALLTOALL | 1u << ZN_COLL_GATHER | 1u << ZN_COLL_SCATTER },
    };
    int ring[3] = { 0, 2, 1 };
    struct zn_algo_ctx ctx = {
        .rank = 1, .nranks = 3, .nhosts = 2, .ring = ring, .ring_pos = 2, .chunk_size = 65536
    };
    for (int i = 0; i < 4; i++) {
        const struct zn_algo *a = zn_algo_find(want[i].name);
        ZT_ASSERT(a);
        ZT_ASSERT(a->name && a->doc && a->supports && a->cost && a->scratch && a->start && a->next);
        for (int c = 0; c < ZN_NCOLLS; c++) {
            struct zn_coll_args args = {
                .coll = (enum zn_coll)c, .count = 1000, .dtype = ncclFloat32, .esize = 4
            };
            ZT_EQ_INT(a->supports(&ctx, &args), (want[i].colls >> c) & 1);
        }
    }
}

static double cost_of(const char *name, const struct zn_algo_ctx *ctx, enum zn_coll coll,
                      size_t count)
{
    struct zn_coll_args a = { .coll = coll,
                              .count = count,
                              .dtype = ncclFloat32,
                              .esize = 4,
                              .sendbuf = "",
                              .recvbuf = NULL };
    return zn_algo_find(name)->cost(ctx, &a);
}

/* The cost model keeps the latency algorithms on small messages and ring on large ones. */
ZT_TEST(cost_model)
{
    int ring[16];
    for (int i = 0; i < 16; i++) ring[i] = i;
    static const int ns[] = { 2, 3, 8, 16 };
    for (int hi = 1; hi <= 2; hi++)
        for (int ni = 0; ni < 4; ni++) {
            struct zn_algo_ctx ctx = { .rank = 0,
                                       .nranks = ns[ni],
                                       .nhosts = hi,
                                       .ring = ring,
                                       .chunk_size = 128 << 10,
                                       .shm_transport = 1 };
            size_t small = 2, big = 16u << 20; /* floats: 8 bytes and 64 MiB */
            ZT_ASSERT(cost_of("rd", &ctx, ZN_COLL_ALLREDUCE, small) <
                      cost_of("ring", &ctx, ZN_COLL_ALLREDUCE, small));
            ZT_ASSERT(cost_of("ring", &ctx, ZN_COLL_ALLREDUCE, big) <
                      cost_of("rd", &ctx, ZN_COLL_ALLREDUCE, big));
            if (ns[ni] > 3) { /* up to 3 ranks the chain is no deeper than the tree */
                ZT_ASSERT(cost_of("tree", &ctx, ZN_COLL_BROADCAST, small) <
                          cost_of("ring", &ctx, ZN_COLL_BROADCAST, small));
                ZT_ASSERT(cost_of("tree", &ctx, ZN_COLL_REDUCE, small) <
                          cost_of("ring", &ctx, ZN_COLL_REDUCE, small));
            }
            if (ns[ni] > 2) { /* with 2 ranks the chain is the tree, only less pipelined */
                ZT_ASSERT(cost_of("ring", &ctx, ZN_COLL_BROADCAST, big) <
                          cost_of("tree", &ctx, ZN_COLL_BROADCAST, big));
                ZT_ASSERT(cost_of("ring", &ctx, ZN_COLL_REDUCE, big) <
                          cost_of("tree", &ctx, ZN_COLL_REDUCE, big));
            }
            /* Without an arena only the point-to-point algorithms apply. */
            struct zn_coll_args a = { .coll = ZN_COLL_ALLREDUCE,
                                      .count = small,
                                      .dtype = ncclFloat32,
                                      .esize = 4,
                                      .sendbuf = "",
                                      .recvbuf = NULL };
            const struct zn_algo *sel = zn_algo_select(&ctx, &a, NULL);
            ZT_ASSERT(sel);
            ZT_EQ_STR(sel->name, "rd");
            a.count = big;
            sel = zn_algo_select(&ctx, &a, NULL);
            ZT_ASSERT(sel);
            ZT_EQ_STR(sel->name, "ring");
        }
}

ZT_MAIN(ZT_CASE(supports), ZT_CASE(cost_model), ZT_CASE(ring_allreduce), ZT_CASE(ring_allgather),
        ZT_CASE(ring_reducescatter), ZT_CASE(ring_broadcast), ZT_CASE(ring_reduce),
        ZT_CASE(rd_allreduce), ZT_CASE(tree_broadcast), ZT_CASE(tree_reduce),
        ZT_CASE(pairwise_alltoall), ZT_CASE(pairwise_gather), ZT_CASE(pairwise_scatter),
        ZT_CASE(allreduce_bit_identical))
