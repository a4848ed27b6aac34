/*
 * Element types for the collective tests, written independently of the library's own
 * conversion code so that they can serve as a reference: decoding is exact bit manipulation,
 * and encoding only has to handle values the tests choose to be exactly representable (found
 * by searching the code space, so no rounding logic is involved).
 */
#ifndef ZT_COLL_TYPES_H
#define ZT_COLL_TYPES_H

#include "nccl.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static const char *const tt_names[ncclNumTypes] = { "int8",   "uint8",    "int32",   "uint32",
                                                    "int64",  "uint64",   "half",    "float",
                                                    "double", "bfloat16", "fp8e4m3", "fp8e5m2" };
static const size_t tt_size[ncclNumTypes] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };

static inline int tt_is_float(ncclDataType_t t)
{
    return t >= ncclFloat16 && t != ncclInt64 && t != ncclUint64;
}
static inline int tt_is_signed(ncclDataType_t t)
{
    return t == ncclInt8 || t == ncclInt32 || t == ncclInt64 || tt_is_float(t);
}

/* Decode a minifloat with e exponent bits, m mantissa bits and the given bias; ieee says
 * whether the all-ones exponent means inf/NaN (e4m3 uses it for normal numbers except NaN). */
static inline double tt_minifloat(uint32_t v, int e, int m, int bias, int ieee)
{
    int sign = (v >> (e + m)) & 1;
    uint32_t ex = (v >> m) & ((1u << e) - 1), man = v & ((1u << m) - 1);
    double r;
    if (ex == (1u << e) - 1 && (ieee || man == (1u << m) - 1)) {
        r = (ieee && man == 0) ? INFINITY : NAN;
    } else if (ex == 0) {
        r = ldexp((double)man, 1 - bias - m);
    } else {
        r = ldexp((double)(man | (1u << m)), (int)ex - bias - m);
    }
    return sign ? -r : r;
}

static inline double tt_get(ncclDataType_t t, const void *buf, size_t i)
{
    const uint8_t *p = (const uint8_t *)buf + i * tt_size[t];
    switch (t) {
    case ncclInt8: return *(const int8_t *)p;
    case ncclUint8: return *p;
    case ncclInt32: {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    case ncclUint32: {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    case ncclInt64: {
        int64_t v;
        memcpy(&v, p, 8);
        return (double)v;
    }
    case ncclUint64: {
        uint64_t v;
        memcpy(&v, p, 8);
        return (double)v;
    }
    case ncclFloat16: {
        uint16_t v;
        memcpy(&v, p, 2);
        return tt_minifloat(v, 5, 10, 15, 1);
    }
    case ncclFloat32: {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    case ncclFloat64: {
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    case ncclBfloat16: {
        uint16_t v;
        memcpy(&v, p, 2);
        uint32_t f = (uint32_t)v << 16;
        float x;
        memcpy(&x, &f, 4);
        return x;
    }
    case ncclFloat8e4m3: return tt_minifloat(*p, 4, 3, 7, 0);
    case ncclFloat8e5m2: return tt_minifloat(*p, 5, 2, 15, 1);
    default: return NAN;
    }
}

/* Store x, which must be exactly representable in t (the tests make sure). Returns 0, or -1
 * if it is not representable. */
static inline int tt_set(ncclDataType_t t, void *buf, size_t i, double x)
{
    uint8_t *p = (uint8_t *)buf + i * tt_size[t];
    switch (t) {
    case ncclInt8: *(int8_t *)p = (int8_t)x; return 0;
    case ncclUint8: *p = (uint8_t)x; return 0;
    case ncclInt32: {
        int32_t v = (int32_t)x;
        memcpy(p, &v, 4);
        return 0;
    }
    case ncclUint32: {
        uint32_t v = (uint32_t)x;
        memcpy(p, &v, 4);
        return 0;
    }
    case ncclInt64: {
        int64_t v = (int64_t)x;
        memcpy(p, &v, 8);
        return 0;
    }
    case ncclUint64: {
        uint64_t v = (uint64_t)x;
        memcpy(p, &v, 8);
        return 0;
    }
    case ncclFloat32: {
        float v = (float)x;
        memcpy(p, &v, 4);
        return (double)v == x ? 0 : -1;
    }
    case ncclFloat64: memcpy(p, &x, 8); return 0;
    default: break;
    }
    /* Narrow floats: search the code space for the exact value (small tables, cached). */
    static double cache_x[ncclNumTypes][64];
    static uint32_t cache_c[ncclNumTypes][64];
    static int cache_n[ncclNumTypes];
    for (int k = 0; k < cache_n[t]; k++)
        if (cache_x[t][k] == x) {
            if (tt_size[t] == 2) {
                uint16_t c = (uint16_t)cache_c[t][k];
                memcpy(p, &c, 2);
            } else {
                *p = (uint8_t)cache_c[t][k];
            }
            return 0;
        }
    uint32_t ncodes = tt_size[t] == 2 ? 65536u : 256u;
    for (uint32_t c = 0; c < ncodes; c++) {
        /* Sized for the widest type, not for t: tt_get reads only tt_size[t] bytes, but once
         * it is inlined here gcc -O3 checks its 8-byte branches against this buffer without
         * knowing that t is a narrow float (array-bounds, a false positive). */
        uint8_t tmp[8] = { (uint8_t)c, (uint8_t)(c >> 8) };
        if (tt_get(t, tmp, 0) == x && !(x == 0 && c != 0)) {
            if (cache_n[t] < 64) {
                cache_x[t][cache_n[t]] = x;
                cache_c[t][cache_n[t]++] = c;
            }
            memcpy(p, tmp, tt_size[t]);
            return 0;
        }
    }
    return -1;
}

/* Relative precision of t (unit roundoff), for the tolerance of inexact operations (avg). */
static inline double tt_eps(ncclDataType_t t)
{
    switch (t) {
    case ncclFloat16: return ldexp(1, -11);
    case ncclFloat32: return ldexp(1, -24);
    case ncclFloat64: return ldexp(1, -53);
    case ncclBfloat16: return ldexp(1, -8);
    case ncclFloat8e4m3: return ldexp(1, -4);
    case ncclFloat8e5m2: return ldexp(1, -3);
    default: return 0;
    }
}

#endif
