/*
 * zinc-perf: element types, deterministic inputs, and the host-side check of results.
 *
 * Inputs are small integers chosen so that every result is exactly representable in every
 * type, whatever order the library reduces in: each partial sum or product is an integer
 * (or a power of two) that the type holds exactly. Results are then compared exactly, bit
 * for bit for integers and by value for floating types. The one exception is avg on
 * floating types: NCCL computes it as a PreMulSum by 1/nranks, and 1/nranks is not exact,
 * so it gets the standard bound for recursive summation instead.
 *
 * nccl-tests generates its inputs and expected values on the GPU; zinc-perf does it on the
 * host so that it works without a GPU and against any library.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "zinc-perf.h"

/* Columns: name, nccl type, size, kind, exponent bits, mantissa bits, exact, max_pow2.
 * exact is capped at 2^52 for 64-bit types because expected values are computed in double. */
const struct zp_type zp_types[] = {
    { "int8", ncclInt8, 1, ZP_SIGNED, 0, 0, 127, 6 },
    { "uint8", ncclUint8, 1, ZP_UNSIGNED, 0, 0, 255, 7 },
    { "int32", ncclInt32, 4, ZP_SIGNED, 0, 0, 2147483647.0, 30 },
    { "uint32", ncclUint32, 4, ZP_UNSIGNED, 0, 0, 4294967295.0, 31 },
    { "int64", ncclInt64, 8, ZP_SIGNED, 0, 0, 0x1p52, 62 },
    { "uint64", ncclUint64, 8, ZP_UNSIGNED, 0, 0, 0x1p52, 63 },
    { "half", ncclFloat16, 2, ZP_FLOAT, 5, 10, 2048, 15 },
    { "float", ncclFloat32, 4, ZP_FLOAT, 8, 23, 0x1p24, 127 },
    { "double", ncclFloat64, 8, ZP_FLOAT, 11, 52, 0x1p52, 1023 },
    { "bfloat16", ncclBfloat16, 2, ZP_FLOAT, 8, 7, 256, 127 },
    { "f8e4m3", ncclFloat8e4m3, 1, ZP_FLOAT, 4, 3, 16, 8 },
    { "f8e5m2", ncclFloat8e5m2, 1, ZP_FLOAT, 5, 2, 8, 15 },
};
const int zp_ntypes = sizeof(zp_types) / sizeof(zp_types[0]);

const char *const zp_op_names[] = { "sum", "prod", "max", "min", "avg", "mulsum", "none" };

int zp_type_find(const char *name)
{
    static const struct {
        const char *alias, *name;
    } aliases[] = {
        { "char", "int8" },      { "int", "int32" },      { "float16", "half" },
        { "float32", "float" },  { "float64", "double" }, { "bf16", "bfloat16" },
        { "fp8e4m3", "f8e4m3" }, { "fp8e5m2", "f8e5m2" },
    };
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (strcasecmp(name, aliases[i].alias) == 0) name = aliases[i].name;
    for (int i = 0; i < zp_ntypes; i++)
        if (strcasecmp(name, zp_types[i].name) == 0) return i;
    return -1;
}

int zp_op_find(const char *name)
{
    for (int i = 0; i < ZP_NUM_OPS; i++)
        if (strcasecmp(name, zp_op_names[i]) == 0) return i;
    return -1;
}

double zp_premul_scalar(int rank)
{
    return 1 + rank % 3;
}

/* ---------------------------------------------------------------------------------------
 * Small floating formats (half, bfloat16, fp8). One encoder for all of them, written with
 * frexp/ldexp rather than bit tricks so that it is obviously right for every format; speed
 * does not matter here. e4m3 is the "fn" variant NCCL uses: no infinities, the all-ones
 * exponent holds normal numbers up to 448, and only S.1111.111 is NaN.
 * --------------------------------------------------------------------------------------- */

static double mini_max(int ebits, int mbits, int fn)
{
    int bias = (1 << (ebits - 1)) - 1;
    if (fn) return ldexp(2 - ldexp(1, 1 - mbits), (1 << ebits) - 1 - bias);
    return ldexp(2 - ldexp(1, -mbits), (1 << ebits) - 2 - bias);
}

static uint32_t mini_encode(double v, int ebits, int mbits, int fn)
{
    int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias, e;
    uint32_t sign = signbit(v) ? 1u << (ebits + mbits) : 0;
    uint32_t ones = (1u << ebits) - 1;
    if (isnan(v)) return (ones << mbits) | ((1u << mbits) - 1);
    double a = fabs(v), max = mini_max(ebits, mbits, fn);
    if (isinf(a) && !fn) return sign | (ones << mbits);
    if (a == 0) return sign;
    frexp(a, &e);
    int q =
        e - 1 < emin ? emin - mbits : e - 1 - mbits; /* exponent of one unit in the last place */
    double r = ldexp(nearbyint(ldexp(a, -q)), q);    /* ties to even in the default mode */
    if (r > max) r = max; /* saturate: NCCL's fp8 conversions saturate too */
    frexp(r, &e);
    if (e - 1 < emin) return sign | (uint32_t)ldexp(r, mbits - emin);
    return sign | ((uint32_t)(e - 1 + bias) << mbits) |
           (uint32_t)(ldexp(r, 1 - e) * (1 << mbits) - (1 << mbits));
}

static double mini_decode(uint32_t bits, int ebits, int mbits, int fn)
{
    int bias = (1 << (ebits - 1)) - 1;
    uint32_t ones = (1u << ebits) - 1, mmask = (1u << mbits) - 1;
    uint32_t ef = (bits >> mbits) & ones, mf = bits & mmask;
    double s = (bits >> (ebits + mbits)) & 1 ? -1 : 1;
    if (ef == ones && (!fn || mf == mmask)) return fn || mf ? NAN : s * INFINITY;
    if (ef == 0) return s * ldexp(mf, 1 - bias - mbits);
    return s * ldexp(1 + ldexp(mf, -mbits), (int)ef - bias);
}

/* memcpy keeps element access free of alignment and aliasing assumptions about buffers. */
#define PUT(T, x)                     \
    do {                              \
        T x_ = (T)(x);                \
        memcpy(dst, &x_, sizeof(x_)); \
    } while (0)
#define GET(T, out)                   \
    do {                              \
        T x_;                         \
        memcpy(&x_, src, sizeof(x_)); \
        out = (double)x_;             \
    } while (0)

static void encode_slow(const struct zp_type *t, double v, void *dst)
{
    int fn = t->nccl == ncclFloat8e4m3;
    switch (t->nccl) {
    case ncclInt8: PUT(int8_t, v); break;
    case ncclUint8: PUT(uint8_t, v); break;
    case ncclInt32: PUT(int32_t, v); break;
    case ncclUint32: PUT(uint32_t, v); break;
    case ncclInt64: PUT(int64_t, v); break;
    case ncclUint64: PUT(uint64_t, v); break;
    case ncclFloat32: PUT(float, v); break;
    case ncclFloat64: PUT(double, v); break;
    case ncclFloat16:
    case ncclBfloat16: PUT(uint16_t, mini_encode(v, t->ebits, t->mbits, 0)); break;
    default: PUT(uint8_t, mini_encode(v, t->ebits, t->mbits, fn)); break;
    }
}

static double decode_slow(const struct zp_type *t, const void *src)
{
    int fn = t->nccl == ncclFloat8e4m3;
    double v, bits;
    switch (t->nccl) {
    case ncclInt8: GET(int8_t, v); return v;
    case ncclUint8: GET(uint8_t, v); return v;
    case ncclInt32: GET(int32_t, v); return v;
    case ncclUint32: GET(uint32_t, v); return v;
    case ncclInt64: GET(int64_t, v); return v;
    case ncclUint64: GET(uint64_t, v); return v;
    case ncclFloat32: GET(float, v); return v;
    case ncclFloat64: GET(double, v); return v;
    case ncclFloat16:
    case ncclBfloat16:
        GET(uint16_t, bits);
        return mini_decode((uint32_t)bits, t->ebits, t->mbits, 0);
    default: GET(uint8_t, bits); return mini_decode((uint32_t)bits, t->ebits, t->mbits, fn);
    }
}

/* Lookup tables for the 8- and 16-bit floating types, built on first use (the benchmark has
 * one thread): every filled and every checked element goes through these conversions, and
 * frexp/ldexp made the check take longer than the collectives. Inputs are integers within
 * [-SMALL, SMALL], which covers `exact` of every such type. */
#define SMALL 2048

struct small_tables {
    double dec[1 << 16];         /* by bit pattern */
    uint16_t enc[2 * SMALL + 1]; /* by integer value + SMALL */
};

static struct small_tables *small_tables(const struct zp_type *t)
{
    static struct small_tables *tabs[ncclNumTypes];
    struct small_tables *s = tabs[t->nccl];
    if (s || t->kind != ZP_FLOAT || t->size > 2) return s;
    if (!(s = malloc(sizeof(*s)))) return NULL; /* the slow path still works */
    for (uint32_t b = 0; b < (1u << (8 * t->size)); b++) {
        /* decode_slow reads t->size bytes, but gcc -O3 checks its 8-byte branches against
         * the buffer without knowing t (array-bounds, a false positive): give it 8. */
        uint8_t code[8] = { 0 };
        uint16_t b16 = (uint16_t)b;
        if (t->size == 1)
            code[0] = (uint8_t)b;
        else
            memcpy(code, &b16, sizeof(b16));
        s->dec[b] = decode_slow(t, code);
    }
    for (int v = -SMALL; v <= SMALL; v++) {
        /* encode_slow may store up to 8 bytes (its switch has a branch per type), so it gets
         * a buffer of the widest element; a 1- or 2-byte code lands at the start. */
        uint8_t code[8] = { 0 };
        uint16_t e;
        encode_slow(t, v, code);
        memcpy(&e, code, sizeof(e)); /* little-endian: a 1-byte element lands in the low byte */
        s->enc[v + SMALL] = e;
    }
    return tabs[t->nccl] = s;
}

void zp_encode(const struct zp_type *t, double v, void *dst)
{
    struct small_tables *s = small_tables(t);
    if (s && fabs(v) <= SMALL && v == (int)v) {
        uint16_t e = s->enc[(int)v + SMALL];
        memcpy(dst, &e, (size_t)t->size);
        return;
    }
    encode_slow(t, v, dst);
}

double zp_decode(const struct zp_type *t, const void *src)
{
    struct small_tables *s = small_tables(t);
    if (s) {
        uint16_t b = 0;
        memcpy(&b, src, (size_t)t->size);
        return s->dec[b];
    }
    return decode_slow(t, src);
}

/* ---------------------------------------------------------------------------------------
 * Inputs
 * --------------------------------------------------------------------------------------- */

enum {
    RULE_RANGE,  /* any value in [lo, lo + span): copies, min, max */
    RULE_SPARSE, /* sums: `contributors` ranks hold a value, the others 0 */
    RULE_PROD,   /* products: `contributors` ranks hold 1 or 2, the others 1 */
};

/*
 * Sums: with nranks ranks of values in [-vmax, vmax] (times a PreMulSum scalar up to 3), every
 * partial sum is an integer of magnitude <= nranks * vmax * 3, which must not exceed exact.
 * When even vmax = 1 is too much (fp8 with many ranks), only `contributors` ranks per element
 * hold a value and the rest hold 0; which ranks rotates with the element index so that every
 * rank's data is exercised. Products work the same way with factors of 2.
 * avg keeps inputs non-negative: NCCL truncates the integer average towards zero, and with
 * non-negative sums that is the same as the floor every implementation agrees on.
 */
void zp_pattern_init(struct zp_pattern *p, const struct zp_type *t, enum zp_op op, int nranks,
                     uint64_t seed)
{
    int sgn = t->kind != ZP_UNSIGNED;
    memset(p, 0, sizeof(*p));
    p->type = t;
    p->op = op;
    p->nranks = nranks;
    p->seed = seed;
    p->contributors = nranks;
    if (op == ZP_NOP || op == ZP_MIN || op == ZP_MAX) {
        p->rule = RULE_RANGE;
        p->lo = sgn ? -t->exact : 0;
        p->span = (uint64_t)((sgn ? 2 : 1) * t->exact) + 1;
    } else if (op == ZP_PROD) {
        p->rule = RULE_PROD;
        if (t->max_pow2 < nranks) p->contributors = t->max_pow2;
    } else {
        double smax = op == ZP_MULSUM ? 3 : 1;
        double vmax = floor(t->exact / (nranks * smax));
        if (vmax < 1) vmax = 1;
        double c = floor(t->exact / (smax * vmax));
        if (c < nranks) p->contributors = (int)c;
        int neg = sgn && op != ZP_AVG;
        p->rule = RULE_SPARSE;
        p->lo = neg ? -vmax : 0;
        p->span = (uint64_t)((neg ? 2 : 1) * vmax) + 1;
        /* Recursive summation of n terms, each already rounded once: (n + 1) units. */
        if (op == ZP_AVG && t->kind == ZP_FLOAT)
            p->rel_tol = (nranks + 1) * ldexp(1, -t->mbits - 1);
    }
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

double zp_input(const struct zp_pattern *p, int rank, size_t k)
{
    uint64_t h =
        mix64(p->seed + (uint64_t)rank * 0x9e3779b97f4a7c15ull + k * 0xd1b54a32d192ed03ull);
    if (p->rule != RULE_RANGE) {
        int member = (int)((k + (size_t)rank) % (size_t)p->nranks) < p->contributors;
        if (p->rule == RULE_PROD) return member ? 1 + (double)(h & 1) : 1;
        if (!member) return 0;
    }
    /* Multiply-shift maps the top 32 bits onto [0, span) without a 64-bit division, which
     * dominated the check; only the wide ranges of 32- and 64-bit types need the modulo. */
    if (p->span <= 1ull << 32) return p->lo + (double)(((h >> 32) * p->span) >> 32);
    return p->lo + (double)(h % p->span);
}

void zp_fill(const struct zp_pattern *p, int rank, void *dst, size_t n)
{
    char *d = dst;
    for (size_t k = 0; k < n; k++) zp_encode(p->type, zp_input(p, rank, k), d + k * p->type->size);
}

/* ---------------------------------------------------------------------------------------
 * Check
 * --------------------------------------------------------------------------------------- */

static double expect_reduce(const struct zp_pattern *p, size_t k)
{
    double acc = 0;
    for (int r = 0; r < p->nranks; r++) {
        double x = zp_input(p, r, k);
        switch (p->op) {
        case ZP_PROD: acc = r ? acc * x : x; break;
        case ZP_MAX: acc = r ? fmax(acc, x) : x; break;
        case ZP_MIN: acc = r ? fmin(acc, x) : x; break;
        case ZP_MULSUM: acc += x * zp_premul_scalar(r); break;
        default: acc += x; break;
        }
    }
    if (p->op == ZP_AVG) acc = p->type->kind == ZP_FLOAT ? acc / p->nranks : floor(acc / p->nranks);
    return acc;
}

static int matches(const struct zp_pattern *p, const void *got, double want)
{
    const struct zp_type *t = p->type;
    if (t->kind != ZP_FLOAT) {
        unsigned char w[8];
        zp_encode(t, want, w);
        return memcmp(w, got, (size_t)t->size) == 0;
    }
    /* Compared by value, so that +0 and -0 agree and NaN never matches. */
    double g = zp_decode(t, got);
    if (p->rel_tol == 0) return g == want;
    return fabs(g - want) <= p->rel_tol * fmax(fabs(want), 1.0 / p->nranks);
}

size_t zp_check(const struct zp_pattern *p, const struct zp_coll *c, int rank, int root,
                const struct zp_sizes *sz, int in_place, const void *out)
{
    const char *o = out;
    size_t wrong = 0, ts = (size_t)p->type->size;
    /* Offsets of this rank's input and output inside the receive buffer when in place. */
    size_t in_off = (size_t)rank * sz->send_ip, out_off = (size_t)rank * sz->recv_ip;
    for (size_t e = 0; e < sz->recvcount; e++) {
        int sr = rank;
        size_t si = e;
        double want = 0;
        switch (c->source(rank, p->nranks, root, sz->count, e, &sr, &si)) {
        case ZP_SRC_REDUCE: want = expect_reduce(p, si); break;
        case ZP_SRC_COPY: want = zp_input(p, sr, si); break;
        case ZP_SRC_KEEP:
            /* Untouched: zero, or this rank's own input where it sits in the buffer. */
            if (in_place && out_off + e >= in_off && out_off + e < in_off + sz->sendcount)
                want = zp_input(p, rank, out_off + e - in_off);
            break;
        }
        wrong += !matches(p, o + e * ts, want);
    }
    return wrong;
}
