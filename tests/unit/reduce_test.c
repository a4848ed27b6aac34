/*
 * test_reduce: the host reduction kernels and the narrow floating-point conversions
 * (src/exec/reduce.c) against a reference written independently here: decoders built from
 * ldexp, an encoder that searches the sorted code space for the nearest value, and arithmetic
 * done in double.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* MAP_ANONYMOUS, MADV_HUGEPAGE */
#endif
#include "exec/reduce.h"
#include "zt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---------------------------------------------------------------------------------------------
 * Reference model of the narrow floating formats.
 * ------------------------------------------------------------------------------------------- */

struct fmt {
    int ebits, mbits, bias;
    int fn;           /* e4m3 "FN": no infinity, only S.1111.111 is NaN */
    unsigned maxcode; /* largest finite positive code */
    unsigned nan;     /* what any NaN encodes to */
    unsigned signbit;
    int saturate; /* overflow gives max finite instead of infinity */
};

static const struct fmt F_HALF = { 5, 10, 15, 0, 0x7bff, 0x7fff, 0x8000, 0 };
static const struct fmt F_BF16 = { 8, 7, 127, 0, 0x7f7f, 0x7fff, 0x8000, 0 };
static const struct fmt F_E4M3 = { 4, 3, 7, 1, 0x7e, 0x7f, 0x80, 1 };
static const struct fmt F_E5M2 = { 5, 2, 15, 0, 0x7b, 0x7f, 0x80, 1 };

static double ref_dec(const struct fmt *f, unsigned code)
{
    int neg = (code & f->signbit) != 0;
    unsigned mag = code & (f->signbit - 1);
    unsigned e = mag >> f->mbits, m = mag & ((1u << f->mbits) - 1);
    unsigned emax = (1u << f->ebits) - 1;
    double v;
    if (f->fn && mag == f->signbit - 1) return NAN;
    if (!f->fn && e == emax) {
        if (m) return NAN;
        v = INFINITY;
    } else if (e == 0) {
        v = ldexp((double)m, 1 - f->bias - f->mbits);
    } else {
        v = ldexp((double)((1u << f->mbits) | m), (int)e - f->bias - f->mbits);
    }
    return neg ? -v : v;
}

/* Round x to the nearest code, ties to the even code, by binary search over the positive codes
 * (whose values increase with the code). */
static unsigned ref_enc(const struct fmt *f, double x)
{
    if (isnan(x)) return f->nan;
    unsigned sign = signbit(x) ? f->signbit : 0;
    double a = fabs(x);
    unsigned lo = 0, hi = f->maxcode; /* invariant: dec(lo) <= a */
    while (lo < hi) {
        unsigned mid = (lo + hi + 1) / 2;
        if (ref_dec(f, mid) <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (lo == f->maxcode) {
        double top = ref_dec(f, lo), ulp = top - ref_dec(f, lo - 1);
        if (a == top || f->saturate) return sign | lo;
        return sign | (a >= top + ulp / 2 ? f->maxcode + 1 : lo); /* maxcode + 1 is infinity */
    }
    double d_lo = a - ref_dec(f, lo), d_hi = ref_dec(f, lo + 1) - a;
    if (d_lo < d_hi || (d_lo == d_hi && (lo & 1) == 0)) return sign | lo;
    return sign | (lo + 1);
}

static const struct fmt *fmt_of(ncclDataType_t t)
{
    switch (t) {
    case ncclFloat16: return &F_HALF;
    case ncclBfloat16: return &F_BF16;
    case ncclFloat8e4m3: return &F_E4M3;
    case ncclFloat8e5m2: return &F_E5M2;
    default: return NULL;
    }
}

static float lib_dec(ncclDataType_t t, unsigned code)
{
    switch (t) {
    case ncclFloat16: return zn_half_to_float((uint16_t)code);
    case ncclBfloat16: return zn_bf16_to_float((uint16_t)code);
    case ncclFloat8e4m3: return zn_e4m3_to_float((uint8_t)code);
    default: return zn_e5m2_to_float((uint8_t)code);
    }
}

static unsigned lib_enc(ncclDataType_t t, float f)
{
    switch (t) {
    case ncclFloat16: return zn_float_to_half(f);
    case ncclBfloat16: return zn_float_to_bf16(f);
    case ncclFloat8e4m3: return zn_float_to_e4m3(f);
    default: return zn_float_to_e5m2(f);
    }
}

static const ncclDataType_t NARROW[] = { ncclFloat16, ncclBfloat16, ncclFloat8e4m3,
                                         ncclFloat8e5m2 };

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* xorshift64*: deterministic test data. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

/* ---------------------------------------------------------------------------------------------
 * Type information and conversion tables.
 * ------------------------------------------------------------------------------------------- */

ZT_TEST(dtype_info)
{
    static const struct {
        ncclDataType_t t;
        size_t size;
        const char *name;
        int flt;
    } want[] = {
        { ncclInt8, 1, "int8", 0 },          { ncclUint8, 1, "uint8", 0 },
        { ncclInt32, 4, "int32", 0 },        { ncclUint32, 4, "uint32", 0 },
        { ncclInt64, 8, "int64", 0 },        { ncclUint64, 8, "uint64", 0 },
        { ncclFloat16, 2, "half", 1 },       { ncclFloat32, 4, "float", 1 },
        { ncclFloat64, 8, "double", 1 },     { ncclBfloat16, 2, "bfloat16", 1 },
        { ncclFloat8e4m3, 1, "fp8e4m3", 1 }, { ncclFloat8e5m2, 1, "fp8e5m2", 1 },
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        ZT_EQ_INT(zn_dtype_size(want[i].t), want[i].size);
        ZT_EQ_STR(zn_dtype_name(want[i].t), want[i].name);
        ZT_EQ_INT(zn_dtype_is_float(want[i].t), want[i].flt);
    }
    ZT_EQ_INT(zn_dtype_size(ncclNumTypes), 0);
    ZT_EQ_INT(zn_dtype_size((ncclDataType_t)-1), 0);
    ZT_EQ_STR(zn_dtype_name(ncclNumTypes), "invalid");
    ZT_EQ_INT(zn_dtype_is_float((ncclDataType_t)99), 0);
}

ZT_TEST(half_table)
{
    ZT_EQ_INT(zn_float_to_half(1.0f), 0x3c00);
    ZT_EQ_INT(zn_float_to_half(-2.0f), 0xc000);
    ZT_EQ_INT(zn_float_to_half(65504.0f), 0x7bff);
    ZT_EQ_INT(zn_float_to_half(65519.0f), 0x7bff);
    ZT_EQ_INT(zn_float_to_half(65520.0f), 0x7c00); /* tie with the next binade rounds to inf */
    ZT_EQ_INT(zn_float_to_half(1e9f), 0x7c00);
    ZT_EQ_INT(zn_float_to_half(INFINITY), 0x7c00);
    ZT_EQ_INT(zn_float_to_half(-INFINITY), 0xfc00);
    ZT_EQ_INT(zn_float_to_half(NAN), 0x7fff);
    ZT_EQ_INT(zn_float_to_half(-NAN), 0x7fff);
    ZT_EQ_INT(zn_float_to_half(0x1p-24f), 0x0001);
    ZT_EQ_INT(zn_float_to_half(0x1p-25f), 0x0000);     /* tie rounds to even (zero) */
    ZT_EQ_INT(zn_float_to_half(0x1.8p-24f), 0x0002);   /* tie rounds to even (2) */
    ZT_EQ_INT(zn_float_to_half(-0x1p-26f), 0x8000);    /* underflow keeps the sign */
    ZT_EQ_INT(zn_float_to_half(0x1p-14f), 0x0400);     /* smallest normal */
    ZT_EQ_INT(zn_float_to_half(0x1.ffcp-15f), 0x0400); /* largest subnormal + half step */
    ZT_EQ_INT(zn_float_to_half(2049.0f), 0x6800);      /* 2048: tie to even */
    ZT_EQ_INT(zn_float_to_half(2051.0f), 0x6802);      /* 2052: tie to even */
    ZT_EQ_INT(zn_float_to_half(2050.0f), 0x6801);
    ZT_EQ_INT(zn_float_to_half(-0.0f), 0x8000);
    ZT_ASSERT(zn_half_to_float(0x3c00) == 1.0f);
    ZT_ASSERT(zn_half_to_float(0x7bff) == 65504.0f);
    ZT_ASSERT(zn_half_to_float(0x0001) == 0x1p-24f);
    ZT_ASSERT(zn_half_to_float(0x03ff) == 0x1.ff8p-15f);
    ZT_ASSERT(zn_half_to_float(0x7c00) == INFINITY);
    ZT_ASSERT(zn_half_to_float(0xfc00) == -INFINITY);
    ZT_ASSERT(isnan(zn_half_to_float(0x7e00)) && isnan(zn_half_to_float(0xfc01)));
    ZT_EQ_INT(fbits(zn_half_to_float(0x8000)), 0x80000000u);
}

ZT_TEST(bf16_table)
{
    ZT_EQ_INT(zn_float_to_bf16(1.0f), 0x3f80);
    ZT_EQ_INT(zn_float_to_bf16(bitsf(0x3f808000u)), 0x3f80); /* tie, even stays */
    ZT_EQ_INT(zn_float_to_bf16(bitsf(0x3f818000u)), 0x3f82); /* tie, odd rounds up */
    ZT_EQ_INT(zn_float_to_bf16(bitsf(0x3f808001u)), 0x3f81);
    ZT_EQ_INT(zn_float_to_bf16(bitsf(0x7f7fffffu)), 0x7f80); /* FLT_MAX rounds to inf */
    ZT_EQ_INT(zn_float_to_bf16(-INFINITY), 0xff80);
    ZT_EQ_INT(zn_float_to_bf16(NAN), 0x7fff);
    ZT_EQ_INT(zn_float_to_bf16(bitsf(0x7f800001u)), 0x7fff); /* a NaN whose top bits look inf */
    ZT_EQ_INT(zn_float_to_bf16(bitsf(0x00000001u)), 0x0000);
    ZT_EQ_INT(zn_float_to_bf16(bitsf(0x00018000u)), 0x0002);
    ZT_ASSERT(zn_bf16_to_float(0x3f80) == 1.0f);
    ZT_ASSERT(zn_bf16_to_float(0xc040) == -3.0f);
    ZT_ASSERT(zn_bf16_to_float(0x0001) == 0x1p-133f);
}

ZT_TEST(e4m3_table)
{
    ZT_EQ_INT(zn_float_to_e4m3(448.0f), 0x7e);
    ZT_EQ_INT(zn_float_to_e4m3(1.0f), 0x38);
    ZT_EQ_INT(zn_float_to_e4m3(-1.0f), 0xb8);
    ZT_EQ_INT(zn_float_to_e4m3(0x1p-9f), 0x01);
    ZT_EQ_INT(zn_float_to_e4m3(0x1p-10f), 0x00); /* tie to even */
    ZT_EQ_INT(zn_float_to_e4m3(0x1.8p-9f), 0x02);
    ZT_EQ_INT(zn_float_to_e4m3(0x1p-6f), 0x08);
    ZT_EQ_INT(zn_float_to_e4m3(500.0f), 0x7e);
    ZT_EQ_INT(zn_float_to_e4m3(464.0f), 0x7e);
    ZT_EQ_INT(zn_float_to_e4m3(-1e30f), 0xfe);
    ZT_EQ_INT(zn_float_to_e4m3(INFINITY), 0x7e);
    ZT_EQ_INT(zn_float_to_e4m3(-INFINITY), 0xfe);
    ZT_EQ_INT(zn_float_to_e4m3(NAN), 0x7f);
    ZT_EQ_INT(zn_float_to_e4m3(-NAN), 0x7f);
    ZT_EQ_INT(zn_float_to_e4m3(17.0f), 0x58); /* 16 and 18 are neighbours: tie to 16 (even) */
    ZT_EQ_INT(zn_float_to_e4m3(19.0f), 0x5a); /* tie between 18 (odd) and 20 (even) */
    ZT_ASSERT(zn_e4m3_to_float(0x7e) == 448.0f);
    ZT_ASSERT(zn_e4m3_to_float(0x01) == 0x1p-9f);
    ZT_ASSERT(zn_e4m3_to_float(0x38) == 1.0f);
    ZT_ASSERT(zn_e4m3_to_float(0x78) == 256.0f); /* exponent 15 is finite in E4M3FN */
    ZT_ASSERT(isnan(zn_e4m3_to_float(0x7f)) && isnan(zn_e4m3_to_float(0xff)));
}

ZT_TEST(e5m2_table)
{
    ZT_EQ_INT(zn_float_to_e5m2(57344.0f), 0x7b);
    ZT_EQ_INT(zn_float_to_e5m2(1.0f), 0x3c);
    ZT_EQ_INT(zn_float_to_e5m2(0x1p-16f), 0x01);
    ZT_EQ_INT(zn_float_to_e5m2(0x1p-17f), 0x00);
    ZT_EQ_INT(zn_float_to_e5m2(61440.0f), 0x7b); /* would round to inf; saturates */
    ZT_EQ_INT(zn_float_to_e5m2(1e20f), 0x7b);
    ZT_EQ_INT(zn_float_to_e5m2(INFINITY), 0x7b);
    ZT_EQ_INT(zn_float_to_e5m2(-INFINITY), 0xfb);
    ZT_EQ_INT(zn_float_to_e5m2(NAN), 0x7f);
    ZT_ASSERT(zn_e5m2_to_float(0x7b) == 57344.0f);
    ZT_ASSERT(zn_e5m2_to_float(0x3c) == 1.0f);
    ZT_ASSERT(zn_e5m2_to_float(0x01) == 0x1p-16f);
    ZT_ASSERT(zn_e5m2_to_float(0x7c) == INFINITY && zn_e5m2_to_float(0xfc) == -INFINITY);
    ZT_ASSERT(isnan(zn_e5m2_to_float(0x7d)) && isnan(zn_e5m2_to_float(0xff)));
}

/* Every code: the decoder agrees with the reference, and encoding a decoded non-NaN value gives
 * the same code back (but e5m2's infinities, which saturate); NaN codes encode to the canonical
 * NaN. */
ZT_TEST(exhaustive_roundtrip)
{
    for (size_t k = 0; k < 4; k++) {
        ncclDataType_t t = NARROW[k];
        const struct fmt *f = fmt_of(t);
        unsigned ncodes = f->signbit << 1;
        for (unsigned c = 0; c < ncodes; c++) {
            float v = lib_dec(t, c);
            double r = ref_dec(f, c);
            if (isnan(r)) {
                if (!isnan(v)) ZT_FAIL("%s code 0x%x: want NaN", zn_dtype_name(t), c);
                ZT_EQ_INT(lib_enc(t, v), f->nan);
                continue;
            }
            if ((double)v != r || !signbit(v) != !signbit(r))
                ZT_FAIL("%s code 0x%x decodes to %a, want %a", zn_dtype_name(t), c, v, r);
            /* Infinity saturates in the fp8 formats. */
            unsigned back = isinf(r) && f->saturate ? (c & f->signbit) | f->maxcode : c;
            if (lib_enc(t, v) != back)
                ZT_FAIL("%s code 0x%x: encode(decode) = 0x%x", zn_dtype_name(t), c, lib_enc(t, v));
        }
    }
}

/* Rounding boundaries: for every pair of adjacent codes, the midpoint and the floats just
 * either side of it, plus random float bit patterns, against the search-based reference. */
ZT_TEST(encode_vs_reference)
{
    for (size_t k = 0; k < 4; k++) {
        ncclDataType_t t = NARROW[k];
        const struct fmt *f = fmt_of(t);
        for (unsigned c = 0; c <= f->maxcode; c++) {
            double lo = ref_dec(f, c);
            double hi = c < f->maxcode ? ref_dec(f, c + 1) : 2 * lo;
            float mid = (float)((lo + hi) / 2); /* exact: a few bits more than the format */
            float probes[] = { mid, nextafterf(mid, 0), nextafterf(mid, INFINITY), (float)lo };
            for (size_t p = 0; p < 4; p++) {
                for (int s = 0; s < 2; s++) {
                    float x = s ? -probes[p] : probes[p];
                    unsigned want = ref_enc(f, x), got = lib_enc(t, x);
                    if (want != got)
                        ZT_FAIL("%s encode(%a) = 0x%x, want 0x%x", zn_dtype_name(t), x, got, want);
                }
            }
        }
        for (int i = 0; i < 200000; i++) {
            float x = bitsf((uint32_t)rnd());
            unsigned want = ref_enc(f, x), got = lib_enc(t, x);
            if (want != got)
                ZT_FAIL("%s encode(%a) = 0x%x, want 0x%x", zn_dtype_name(t), x, got, want);
        }
    }
}

/* The compiler's own _Float16 conversions are a third, independent opinion on half. */
ZT_TEST(half_vs_compiler_float16)
{
#ifdef __FLT16_MAX__
    for (uint32_t c = 0; c < 0x10000; c++) {
        _Float16 h;
        uint16_t hc = (uint16_t)c;
        memcpy(&h, &hc, sizeof(h));
        float v = (float)h;
        if (isnan(v)) continue;
        ZT_EQ_INT(fbits(zn_half_to_float(hc)), fbits(v));
    }
    for (int i = 0; i < 1000000; i++) {
        float x = bitsf((uint32_t)rnd());
        if (isnan(x)) continue;
        _Float16 h = (_Float16)x;
        uint16_t hc;
        memcpy(&hc, &h, sizeof(hc));
        if (zn_float_to_half(x) != hc)
            ZT_FAIL("half(%a) = 0x%x, want 0x%x", x, zn_float_to_half(x), hc);
    }
#else
    fprintf(stderr, "  skipped: the compiler has no _Float16\n");
#endif
}

/* ---------------------------------------------------------------------------------------------
 * Reference arithmetic and element access.
 * ------------------------------------------------------------------------------------------- */

static const ncclDataType_t ALL_TYPES[] = { ncclInt8,     ncclUint8,      ncclInt32,
                                            ncclUint32,   ncclInt64,      ncclUint64,
                                            ncclFloat16,  ncclFloat32,    ncclFloat64,
                                            ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2 };
#define NTYPES ((int)(sizeof(ALL_TYPES) / sizeof(ALL_TYPES[0])))
static const char *const OP_NAME[] = { "sum", "prod", "max", "min" };

static uint64_t get_bits(ncclDataType_t t, const void *buf, size_t i)
{
    uint64_t v = 0;
    size_t sz = zn_dtype_size(t);
    memcpy(&v, (const char *)buf + i * sz, sz); /* little-endian hosts only */
    return v;
}

static void put_bits(ncclDataType_t t, void *buf, size_t i, uint64_t v)
{
    size_t sz = zn_dtype_size(t);
    memcpy((char *)buf + i * sz, &v, sz);
}

static int is_signed_int(ncclDataType_t t)
{
    return t == ncclInt8 || t == ncclInt32 || t == ncclInt64;
}

static double value_of(ncclDataType_t t, uint64_t bits)
{
    if (t == ncclFloat32) return bitsf((uint32_t)bits);
    if (t == ncclFloat64) {
        double d;
        memcpy(&d, &bits, sizeof(d));
        return d;
    }
    return ref_dec(fmt_of(t), (unsigned)bits);
}

/* Element bits of v; a NaN is the canonical one that reduce.h promises for float and double. */
static uint64_t bits_of(ncclDataType_t t, double v)
{
    if (t == ncclFloat32) return isnan(v) ? 0x7fffffffu : fbits((float)v);
    if (t == ncclFloat64) {
        if (isnan(v)) return 0x7fffffffffffffffull;
        uint64_t b;
        memcpy(&b, &v, sizeof(b));
        return b;
    }
    return ref_enc(fmt_of(t), v);
}

/* In double, every sum and product of two narrow-type or float values is either exact or
 * rounded with enough extra precision (53 >= 2p + 2) that rounding again to the element type
 * gives the correctly rounded result. */
static double ref_fop(int op, double x, double y)
{
    if (op == ZN_RED_SUM) return x + y;
    if (op == ZN_RED_PROD) return x * y;
    if (isnan(x) || isnan(y)) return NAN;
    if (x == 0 && y == 0) { /* -0 orders below +0 */
        int xneg = signbit(x) != 0, yneg = signbit(y) != 0;
        if (op == ZN_RED_MAX) return (xneg && yneg) ? -0.0 : 0.0;
        return (xneg || yneg) ? -0.0 : 0.0;
    }
    if (op == ZN_RED_MAX) return x < y ? y : x;
    return x < y ? x : y;
}

static uint64_t ref_apply(ncclDataType_t t, int op, uint64_t a, uint64_t b)
{
    if (!zn_dtype_is_float(t)) {
        int bits = (int)zn_dtype_size(t) * 8;
        uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
        if (op == ZN_RED_SUM) return (a + b) & mask;
        if (op == ZN_RED_PROD) return (a * b) & mask;
        int a_less;
        if (is_signed_int(t)) {
            int64_t sa = (int64_t)(a << (64 - bits)) >> (64 - bits);
            int64_t sb = (int64_t)(b << (64 - bits)) >> (64 - bits);
            a_less = sa < sb;
        } else {
            a_less = a < b;
        }
        return (op == ZN_RED_MAX) == a_less ? b : a;
    }
    return bits_of(t, ref_fop(op, value_of(t, a), value_of(t, b)));
}

/* Test data: all bit patterns for the narrow types and integers, a mix of small integers,
 * moderate values and raw bit patterns (infinities, NaN, subnormals) for float and double. */
static uint64_t random_elem(ncclDataType_t t)
{
    uint64_t r = rnd();
    int kind = (int)(r >> 60);
    if (t == ncclFloat32 || t == ncclFloat64) {
        double v;
        if (kind < 4)
            v = (double)((int)(r % 17) - 8);
        else if (kind < 12)
            v = ((double)(r % 2000001) - 1000000.0) / 997.0;
        else if (kind == 12)
            v = (r & 1) ? -0.0 : 0.0;
        else
            return t == ncclFloat32 ? (uint32_t)rnd() : rnd();
        return bits_of(t, v);
    }
    return r & (zn_dtype_size(t) == 8 ? ~0ull : (1ull << (8 * zn_dtype_size(t))) - 1);
}

static void *random_buf(ncclDataType_t t, size_t count)
{
    void *p = malloc(count * zn_dtype_size(t) + 64);
    for (size_t i = 0; i < count; i++) put_bits(t, p, i, random_elem(t));
    return p;
}

/* ---------------------------------------------------------------------------------------------
 * Reductions.
 * ------------------------------------------------------------------------------------------- */

enum alias { OUT_OF_PLACE, DST_IS_A, DST_IS_B, ALL_SAME };

/* Runs one zn_reduce2 call with the given aliasing and checks every element and that nothing
 * past count was written. Returns 0 or prints the first mismatch and returns 1. */
static int check_reduce2(ncclDataType_t t, int op, size_t count, enum alias al)
{
    size_t sz = zn_dtype_size(t);
    void *a = random_buf(t, count + 8), *b = random_buf(t, count + 8);
    void *a0 = malloc((count + 8) * sz + 64), *b0 = malloc((count + 8) * sz + 64);
    void *out = malloc((count + 8) * sz + 64);
    memset(out, 0xa5, (count + 8) * sz);
    if (al == ALL_SAME) memcpy(b, a, (count + 8) * sz);
    memcpy(a0, a, (count + 8) * sz);
    memcpy(b0, b, (count + 8) * sz);
    void *dst = al == DST_IS_A || al == ALL_SAME ? a : al == DST_IS_B ? b : out;
    const void *src_b = al == ALL_SAME ? a : b;
    void *guard = malloc(8 * sz);
    memcpy(guard, (char *)dst + count * sz, 8 * sz);
    zn_reduce2(t, (enum zn_red)op, dst, a, src_b, count);
    int bad = 0;
    for (size_t i = 0; i < count && !bad; i++) {
        uint64_t want = ref_apply(t, op, get_bits(t, a0, i), get_bits(t, b0, i));
        uint64_t got = get_bits(t, dst, i);
        if (got != want) {
            fprintf(stderr,
                    "  %s %s count %zu alias %d: [%zu] 0x%llx op 0x%llx = 0x%llx, want 0x%llx\n",
                    zn_dtype_name(t), OP_NAME[op], count, (int)al, i,
                    (unsigned long long)get_bits(t, a0, i), (unsigned long long)get_bits(t, b0, i),
                    (unsigned long long)got, (unsigned long long)want);
            bad = 1;
        }
    }
    if (!bad && memcmp(guard, (char *)dst + count * sz, 8 * sz) != 0) {
        fprintf(stderr, "  %s %s count %zu: wrote past the end\n", zn_dtype_name(t), OP_NAME[op],
                count);
        bad = 1;
    }
    free(a), free(b), free(a0), free(b0), free(out), free(guard);
    return bad;
}

ZT_TEST(reduce2_all_types_ops)
{
    static const size_t counts[] = { 0, 1, 7, 1000, 4099 };
    int bad = 0;
    for (int ti = 0; ti < NTYPES; ti++)
        for (int op = 0; op < ZN_RED_COUNT; op++)
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
                for (int al = OUT_OF_PLACE; al <= ALL_SAME; al++)
                    bad += check_reduce2(ALL_TYPES[ti], op, counts[c], (enum alias)al);
    ZT_EQ_INT(bad, 0);
}

/* The recursive-doubling allreduce (src/algo/rd.c) relies on a op b and b op a giving the same
 * bits, NaN results included, so that both partners of an exchange end with identical vectors. */
ZT_TEST(reduce2_commutative_bits)
{
    const size_t count = 3001;
    for (int ti = 0; ti < NTYPES; ti++) {
        ncclDataType_t t = ALL_TYPES[ti];
        size_t sz = zn_dtype_size(t);
        void *a = random_buf(t, count), *b = random_buf(t, count);
        void *ab = malloc(count * sz), *ba = malloc(count * sz);
        int bad_op = -1;
        for (int op = 0; op < ZN_RED_COUNT && bad_op < 0; op++) {
            zn_reduce2(t, (enum zn_red)op, ab, a, b, count);
            zn_reduce2(t, (enum zn_red)op, ba, b, a, count);
            if (memcmp(ab, ba, count * sz) != 0) bad_op = op;
        }
        free(a), free(b), free(ab), free(ba);
        if (bad_op >= 0) ZT_FAIL("%s %s is not commutative", zn_dtype_name(t), OP_NAME[bad_op]);
    }
}

/* Values the random data rarely hits: wrap-around, NaN, signed zeros, saturation. */
ZT_TEST(reduce2_special_values)
{
    int8_t i8a[] = { 127, -128, -1, 100 }, i8b[] = { 1, -1, -1, 3 }, i8d[4];
    zn_reduce2(ncclInt8, ZN_RED_SUM, i8d, i8a, i8b, 4);
    ZT_EQ_INT(i8d[0], -128);
    ZT_EQ_INT(i8d[1], 127);
    ZT_EQ_INT(i8d[2], -2);
    zn_reduce2(ncclInt8, ZN_RED_PROD, i8d, i8a, i8b, 4);
    ZT_EQ_INT(i8d[1], -128); /* -128 * -1 wraps */
    ZT_EQ_INT(i8d[3], 44);   /* 300 mod 256 */
    zn_reduce2(ncclInt8, ZN_RED_MAX, i8d, i8a, i8b, 4);
    ZT_EQ_INT(i8d[1], -1);

    uint32_t u32a[] = { 0xffffffffu, 0x80000000u }, u32b[] = { 2, 2 }, u32d[2];
    zn_reduce2(ncclUint32, ZN_RED_SUM, u32d, u32a, u32b, 2);
    ZT_EQ_INT(u32d[0], 1);
    zn_reduce2(ncclUint32, ZN_RED_PROD, u32d, u32a, u32b, 2);
    ZT_EQ_INT(u32d[1], 0);
    zn_reduce2(ncclUint32, ZN_RED_MIN, u32d, u32a, u32b, 2);
    ZT_EQ_INT(u32d[0], 2); /* unsigned comparison */

    int64_t i64a[] = { INT64_MAX, INT64_MIN }, i64b[] = { 1, 5 }, i64d[2];
    zn_reduce2(ncclInt64, ZN_RED_SUM, i64d, i64a, i64b, 2);
    ZT_ASSERT(i64d[0] == INT64_MIN);
    zn_reduce2(ncclInt64, ZN_RED_MIN, i64d, i64a, i64b, 2);
    ZT_ASSERT(i64d[0] == 1 && i64d[1] == INT64_MIN);

    /* NaN propagates through max/min in either order; -0 < +0 in either order. */
    float fa[] = { NAN, 1.0f, 0.0f, -0.0f, -INFINITY }, fb[] = { 1.0f, NAN, -0.0f, 0.0f, 3.0f };
    float fd[5];
    for (int op = ZN_RED_MAX; op <= ZN_RED_MIN; op++) {
        zn_reduce2(ncclFloat32, (enum zn_red)op, fd, fa, fb, 5);
        ZT_EQ_INT(fbits(fd[0]), 0x7fffffff); /* canonical NaN */
        ZT_EQ_INT(fbits(fd[1]), 0x7fffffff);
        ZT_ASSERT(fd[2] == 0 && fd[3] == 0 && fd[2] == fd[3]);
        ZT_EQ_INT(signbit(fd[2]) != 0, op == ZN_RED_MIN);
        ZT_EQ_INT(signbit(fd[3]) != 0, op == ZN_RED_MIN);
        ZT_ASSERT(fd[4] == (op == ZN_RED_MAX ? 3.0f : -INFINITY));
    }
    /* Any NaN result is the canonical NaN, whatever the operands' payloads and signs. */
    float na[] = { bitsf(0xffc00001u), bitsf(0x7f800001u), INFINITY },
          nb[] = { bitsf(0x7fc12345u), 1.0f, -INFINITY };
    for (int op = 0; op < ZN_RED_COUNT; op++) {
        zn_reduce2(ncclFloat32, (enum zn_red)op, fd, na, nb, 3);
        ZT_EQ_INT(fbits(fd[0]), 0x7fffffff);
        ZT_EQ_INT(fbits(fd[1]), 0x7fffffff);
        zn_reduce2(ncclFloat32, (enum zn_red)op, fd, nb, na, 3);
        ZT_EQ_INT(fbits(fd[0]), 0x7fffffff);
    }
    zn_reduce2(ncclFloat32, ZN_RED_SUM, fd, na, nb, 3);
    ZT_EQ_INT(fbits(fd[2]), 0x7fffffff); /* inf - inf */
    double da[] = { 1.0, -0.0 }, db[] = { NAN, 0.0 }, dd[2];
    zn_reduce2(ncclFloat64, ZN_RED_MIN, dd, da, db, 2);
    uint64_t dbits;
    memcpy(&dbits, &dd[0], sizeof(dbits));
    ZT_ASSERT(dbits == 0x7fffffffffffffffull);
    ZT_ASSERT(dd[1] == 0 && signbit(dd[1]));
    zn_reduce2(ncclFloat64, ZN_RED_MAX, dd, db, da, 2);
    ZT_ASSERT(isnan(dd[0]) && dd[1] == 0 && !signbit(dd[1]));

    /* half: NaN gives the canonical NaN; overflow gives inf. fp8: overflow saturates. */
    uint16_t ha[] = { 0x7e00, 0x7bff, 0x8000 }, hb[] = { 0x3c00, 0x7bff, 0x0000 }, hd[3];
    zn_reduce2(ncclFloat16, ZN_RED_MAX, hd, ha, hb, 3);
    ZT_EQ_INT(hd[0], 0x7fff);
    ZT_EQ_INT(hd[2], 0x0000);
    zn_reduce2(ncclFloat16, ZN_RED_SUM, hd, ha, hb, 3);
    ZT_EQ_INT(hd[1], 0x7c00);
    uint8_t ea[] = { 0x7e, 0xfe, 0x7f }, eb[] = { 0x7e, 0xfe, 0x38 }, ed[3];
    zn_reduce2(ncclFloat8e4m3, ZN_RED_SUM, ed, ea, eb, 3);
    ZT_EQ_INT(ed[0], 0x7e);
    ZT_EQ_INT(ed[1], 0xfe);
    ZT_EQ_INT(ed[2], 0x7f);
    uint8_t fa8[] = { 0x7b, 0x7c }, fb8[] = { 0x7b, 0x3c }, fd8[2];
    zn_reduce2(ncclFloat8e5m2, ZN_RED_SUM, fd8, fa8, fb8, 2);
    ZT_EQ_INT(fd8[0], 0x7b);
    ZT_EQ_INT(fd8[1], 0x7b); /* inf + 1 = inf, which saturates */
}

/* zn_reduce_n against n-1 chained zn_reduce2 calls, bit for bit, with dst separate and
 * aliasing the first, a middle and the last source; counts span several blocks. */
ZT_TEST(reduce_n_equals_chain)
{
    static const int ns[] = { 1, 2, 3, 5, 8 };
    static const size_t counts[] = { 0, 1, 7, 4099, 20000 };
    for (int ti = 0; ti < NTYPES; ti++) {
        ncclDataType_t t = ALL_TYPES[ti];
        size_t sz = zn_dtype_size(t);
        for (int op = 0; op < ZN_RED_COUNT; op++)
            for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++)
                for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
                    for (int al = -1; al < 3; al++) {
                        int n = ns[ni];
                        size_t count = counts[ci], bytes = count * sz + 64;
                        void *srcs[8];
                        for (int k = 0; k < n; k++) srcs[k] = random_buf(t, count);
                        void *want = malloc(bytes), *out = malloc(bytes);
                        memcpy(want, srcs[0], count * sz);
                        for (int k = 1; k < n; k++)
                            zn_reduce2(t, (enum zn_red)op, want, want, srcs[k], count);
                        int di = al == 0 ? 0 : al == 1 ? n / 2 : al == 2 ? n - 1 : -1;
                        void *dst = di >= 0 ? srcs[di] : out;
                        zn_reduce_n(t, (enum zn_red)op, dst, (const void *const *)srcs, n, count);
                        int ok = memcmp(dst, want, count * sz) == 0;
                        for (int k = 0; k < n; k++) free(srcs[k]);
                        free(want), free(out);
                        if (!ok)
                            ZT_FAIL("%s %s n=%d count=%zu dst=src[%d]", zn_dtype_name(t),
                                    OP_NAME[op], n, count, di);
                    }
    }
}

/* Repeated sources (the same buffer passed twice) are allowed. */
ZT_TEST(reduce_n_repeated_source)
{
    float a[5000], d[5000], want[5000];
    for (int i = 0; i < 5000; i++) a[i] = (float)i * 0.25f - 100.0f;
    const void *srcs[4] = { a, a, a, a };
    zn_reduce_n(ncclFloat32, ZN_RED_SUM, d, srcs, 4, 5000);
    for (int i = 0; i < 5000; i++) want[i] = ((a[i] + a[i]) + a[i]) + a[i];
    ZT_ASSERT(memcmp(d, want, sizeof(d)) == 0);
}

ZT_TEST(scale_all_types)
{
    const size_t count = 1031;
    for (int ti = 0; ti < NTYPES; ti++) {
        ncclDataType_t t = ALL_TYPES[ti];
        size_t sz = zn_dtype_size(t);
        for (int rep = 0; rep < 8; rep++) {
            void *src = random_buf(t, count), *dst = malloc(count * sz + 64);
            uint64_t scalar = random_elem(t);
            if (rep == 0 && zn_dtype_is_float(t)) zn_dtype_from_double(t, 1.0 / 3.0, &scalar);
            zn_scale(t, dst, src, &scalar, count);
            int bad = -1;
            for (size_t i = 0; i < count && bad < 0; i++) {
                uint64_t want = ref_apply(t, ZN_RED_PROD, get_bits(t, src, i), scalar);
                if (get_bits(t, dst, i) != want) bad = (int)i;
            }
            zn_scale(t, src, src, &scalar, count); /* in place gives the same */
            int inplace_ok = memcmp(src, dst, count * sz) == 0;
            free(src), free(dst);
            if (bad >= 0) ZT_FAIL("%s scale: element %d", zn_dtype_name(t), bad);
            if (!inplace_ok) ZT_FAIL("%s scale in place differs", zn_dtype_name(t));
        }
    }
}

ZT_TEST(divide_int)
{
    int8_t i8[] = { -7, 7, -128, 127, -1 }, i8d[5];
    zn_divide_int(ncclInt8, i8d, i8, 2, 5);
    ZT_EQ_INT(i8d[0], -3);
    ZT_EQ_INT(i8d[1], 3);
    ZT_EQ_INT(i8d[2], -64);
    ZT_EQ_INT(i8d[3], 63);
    ZT_EQ_INT(i8d[4], 0);
    zn_divide_int(ncclInt8, i8d, i8, 200, 5); /* divisor beyond the type's range */
    ZT_EQ_INT(i8d[2], 0);
    uint8_t u8[] = { 255, 10 }, u8d[2];
    zn_divide_int(ncclUint8, u8d, u8, 300, 2);
    ZT_EQ_INT(u8d[0], 0);
    zn_divide_int(ncclUint8, u8d, u8, 3, 2);
    ZT_EQ_INT(u8d[0], 85);
    ZT_EQ_INT(u8d[1], 3);
    int32_t i32[] = { -10, INT32_MIN, 11 };
    zn_divide_int(ncclInt32, i32, i32, 4, 3); /* in place */
    ZT_EQ_INT(i32[0], -2);
    ZT_EQ_INT(i32[1], INT32_MIN / 4);
    ZT_EQ_INT(i32[2], 2);
    uint32_t u32[] = { 0xffffffffu };
    zn_divide_int(ncclUint32, u32, u32, 2, 1);
    ZT_EQ_INT(u32[0], 0x7fffffff);
    int64_t i64[] = { -9000000000000000001ll, INT64_MIN };
    zn_divide_int(ncclInt64, i64, i64, 8, 2);
    ZT_ASSERT(i64[0] == -1125000000000000000ll && i64[1] == INT64_MIN / 8);
    uint64_t u64[] = { UINT64_MAX };
    zn_divide_int(ncclUint64, u64, u64, 3, 1);
    ZT_ASSERT(u64[0] == UINT64_MAX / 3);
    /* Large count through the same path. */
    int32_t big[3001], bigd[3001];
    for (int i = 0; i < 3001; i++) big[i] = (i - 1500) * 7;
    zn_divide_int(ncclInt32, bigd, big, 5, 3001);
    for (int i = 0; i < 3001; i++) ZT_EQ_INT(bigd[i], big[i] / 5);
}

ZT_TEST(from_to_double)
{
    int8_t i8;
    zn_dtype_from_double(ncclInt8, -2.9, &i8);
    ZT_EQ_INT(i8, -2);
    zn_dtype_from_double(ncclInt8, 1000.0, &i8);
    ZT_EQ_INT(i8, 127);
    zn_dtype_from_double(ncclInt8, -1e9, &i8);
    ZT_EQ_INT(i8, -128);
    uint8_t u8;
    zn_dtype_from_double(ncclUint8, -5.0, &u8);
    ZT_EQ_INT(u8, 0);
    zn_dtype_from_double(ncclUint8, 255.9, &u8);
    ZT_EQ_INT(u8, 255);
    int32_t i32;
    zn_dtype_from_double(ncclInt32, NAN, &i32);
    ZT_EQ_INT(i32, 0);
    zn_dtype_from_double(ncclInt32, 3e9, &i32);
    ZT_EQ_INT(i32, INT32_MAX);
    uint32_t u32;
    zn_dtype_from_double(ncclUint32, 4294967295.0, &u32);
    ZT_EQ_INT(u32, 0xffffffffu);
    int64_t i64;
    zn_dtype_from_double(ncclInt64, 1e300, &i64);
    ZT_ASSERT(i64 == INT64_MAX);
    zn_dtype_from_double(ncclInt64, -0x1p63, &i64);
    ZT_ASSERT(i64 == INT64_MIN);
    uint64_t u64;
    zn_dtype_from_double(ncclUint64, 0x1p64, &u64);
    ZT_ASSERT(u64 == UINT64_MAX);
    zn_dtype_from_double(ncclUint64, 12345.0, &u64);
    ZT_ASSERT(u64 == 12345);
    float f;
    zn_dtype_from_double(ncclFloat32, 1.0 / 3.0, &f);
    ZT_ASSERT(f == (float)(1.0 / 3.0));
    double d;
    zn_dtype_from_double(ncclFloat64, 1.0 / 3.0, &d);
    ZT_ASSERT(d == 1.0 / 3.0);

    /* Rounding straight from double, not through float: 65519.9999999 is below the half
     * overflow threshold 65520 but rounds to 65520.0f, a tie that would go to infinity. */
    uint16_t h;
    zn_dtype_from_double(ncclFloat16, 65519.9999999, &h);
    ZT_EQ_INT(h, 0x7bff);
    zn_dtype_from_double(ncclFloat16, 2049.0000000001, &h);
    ZT_EQ_INT(h, 0x6801);
    uint8_t e;
    zn_dtype_from_double(ncclFloat8e4m3, 1e100, &e);
    ZT_EQ_INT(e, 0x7e);
    zn_dtype_from_double(ncclFloat8e5m2, -1e100, &e);
    ZT_EQ_INT(e, 0xfb);

    /* Random doubles near every rounding boundary of the narrow types. */
    for (size_t k = 0; k < 4; k++) {
        ncclDataType_t t = NARROW[k];
        const struct fmt *fm = fmt_of(t);
        for (int i = 0; i < 100000; i++) {
            unsigned c = (unsigned)(rnd() % fm->maxcode);
            double mid = (ref_dec(fm, c) + ref_dec(fm, c + 1)) / 2;
            double x = mid * (1 + ldexp((double)((int)(rnd() % 201) - 100), -45));
            if (rnd() & 1) x = -x;
            uint64_t got = 0;
            zn_dtype_from_double(t, x, &got);
            if (got != ref_enc(fm, x))
                ZT_FAIL("%s from_double(%a) = 0x%llx, want 0x%x", zn_dtype_name(t), x,
                        (unsigned long long)got, ref_enc(fm, x));
        }
    }

    /* to_double reads each type. */
    for (int ti = 0; ti < NTYPES; ti++) {
        ncclDataType_t t = ALL_TYPES[ti];
        uint64_t buf[2] = { 0, 0 };
        zn_dtype_from_double(t, 5.0, (char *)buf + zn_dtype_size(t));
        ZT_ASSERT(zn_dtype_to_double(t, buf, 1) == 5.0);
        zn_dtype_from_double(t, -2.0, buf);
        ZT_ASSERT(zn_dtype_to_double(t, buf, 0) ==
                  (is_signed_int(t) || zn_dtype_is_float(t) ? -2.0 : 0.0));
    }
}

/* Counts beyond 2^31 must not be truncated anywhere: one 2 GB uint8 buffer that is both sources
 * and the destination. Huge pages (where the kernel grants them) keep page-fault time low. */
ZT_TEST(count_above_2g)
{
    const size_t n = (1ull << 31) + 5, two_g = 1ull << 31;
    const size_t len = (n + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    uint8_t *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED) {
        fprintf(stderr, "  skipped: cannot map %zu bytes\n", len);
        return;
    }
#ifdef MADV_HUGEPAGE
    madvise(a, len, MADV_HUGEPAGE);
#endif
    memset(a, 1, n);
    a[two_g - 1] = 100;
    a[two_g] = 7;
    a[n - 1] = 250;
    zn_reduce2(ncclUint8, ZN_RED_SUM, a, a, a, n);
    int before = a[two_g - 1], at2g = a[two_g], last = a[n - 1];
    a[two_g - 1] = a[two_g] = a[n - 1] = 2;
    static uint8_t twos[1 << 16];
    memset(twos, 2, sizeof(twos));
    size_t bad_chunks = 0;
    for (size_t off = 0; off < n; off += sizeof(twos)) {
        size_t len_c = n - off < sizeof(twos) ? n - off : sizeof(twos);
        bad_chunks += memcmp(a + off, twos, len_c) != 0;
    }
    munmap(a, len);
    ZT_EQ_INT(before, 200);
    ZT_EQ_INT(at2g, 14);
    ZT_EQ_INT(last, 244); /* 500 wraps */
    ZT_EQ_INT(bad_chunks, 0);
}

ZT_MAIN(ZT_CASE(dtype_info), ZT_CASE(half_table), ZT_CASE(bf16_table), ZT_CASE(e4m3_table),
        ZT_CASE(e5m2_table), ZT_CASE(exhaustive_roundtrip), ZT_CASE(encode_vs_reference),
        ZT_CASE(half_vs_compiler_float16), ZT_CASE(reduce2_all_types_ops),
        ZT_CASE(reduce2_commutative_bits), ZT_CASE(reduce2_special_values),
        ZT_CASE(reduce_n_equals_chain), ZT_CASE(reduce_n_repeated_source), ZT_CASE(scale_all_types),
        ZT_CASE(divide_int), ZT_CASE(from_to_double), ZT_CASE(count_above_2g))
