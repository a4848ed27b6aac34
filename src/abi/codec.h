/*
 * Conversions between float and the narrow floating types (half, bfloat16, fp8 e4m3 and e5m2),
 * one implementation for the host reduction (exec/reduce.c) and the GPU kernels
 * (device/elem.cuh), so that both give the same bits by construction. The semantics are those
 * of exec/reduce.h: decoding is exact; encoding rounds to nearest even, half and bfloat16
 * overflow to infinity, fp8 saturates (CUDA's __NV_SATFINITE), and any NaN encodes to 0x7fff
 * (half, bfloat16) or 0x7f (fp8), as CUDA's conversions give.
 *
 * Written without table lookups or data-dependent loops so that GCC can if-convert and
 * vectorize the host loops that call them, and with signed 32-bit lanes where the values allow
 * it: SSE2 has signed compares and int -> float conversion, but no unsigned ones, and the
 * vectorizer gives up on loops that would need them emulated.
 */
#ifndef ZN_ABI_CODEC_H
#define ZN_ABI_CODEC_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define ZN_HD __host__ __device__
#else
#define ZN_HD
#endif

static inline ZN_HD uint32_t codec_f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline ZN_HD float codec_u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static inline ZN_HD float codec_half_dec(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    int32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
    int32_t normal = ((e + 112) << 23) | (m << 13);        /* rebias 15 -> 127 */
    int32_t special = 0x7f800000 | (m << 13);              /* inf, or NaN keeping its payload */
    int32_t sub = (int32_t)codec_f2u((float)m * 0x1p-24f); /* subnormal or zero, exact */
    int32_t r = e == 0 ? sub : (e == 31 ? special : normal);
    return codec_u2f((uint32_t)r | sign);
}

/* Round to nearest even. The subnormal range uses the hardware adder: adding 0.5f, whose ulp is
 * the half subnormal step 2^-24, rounds the value to that step, and the low mantissa bits of the
 * sum are then the half code (1024 = the smallest normal, which is also the right code). */
static inline ZN_HD uint16_t codec_half_enc(float f)
{
    uint32_t x = codec_f2u(f);
    int32_t sign = (int32_t)((x >> 16) & 0x8000u);
    int32_t u = (int32_t)(x & 0x7fffffffu);
    /* normal: rebias 127 -> 15, add half an ulp minus one, one more if the kept lsb is odd */
    int32_t normal = (int32_t)(((uint32_t)u + 0xc8000fffu + (((uint32_t)u >> 13) & 1u)) >> 13);
    int32_t sub = (int32_t)(codec_f2u(codec_u2f((uint32_t)u) + 0.5f) - 0x3f000000u);
    int32_t r = u < 0x38800000 ? sub : normal; /* below 2^-14 */
    r = u >= 0x477ff000 ? 0x7c00 : r;          /* >= 65520 rounds past 65504 */
    r |= sign;
    return (uint16_t)(u > 0x7f800000 ? 0x7fff : r);
}

static inline ZN_HD float codec_bf16_dec(uint16_t h)
{
    return codec_u2f((uint32_t)h << 16);
}

/* Infinity stays infinity, and the largest finite values round up into it by the carry. */
static inline ZN_HD uint16_t codec_bf16_enc(float f)
{
    uint32_t x = codec_f2u(f);
    uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    return (uint16_t)((int32_t)(x & 0x7fffffffu) > 0x7f800000 ? 0x7fffu : r);
}

static inline ZN_HD float codec_e4m3_dec(uint8_t v)
{
    uint32_t sign = (uint32_t)(v & 0x80u) << 24;
    int32_t e = (v >> 3) & 0xf, m = v & 0x7;
    int32_t normal = ((e + 120) << 23) | (m << 20); /* rebias 7 -> 127 */
    int32_t sub = (int32_t)codec_f2u((float)m * 0x1p-9f);
    int32_t r = e == 0 ? sub : normal;
    r = (v & 0x7f) == 0x7f ? 0x7fc00000 : r;
    return codec_u2f((uint32_t)r | sign);
}

/* e5m2 is the top byte of an IEEE half, so decoding goes through the half decoder. */
static inline ZN_HD float codec_e5m2_dec(uint8_t v)
{
    return codec_half_dec((uint16_t)(v << 8));
}

/* Saturating (__NV_SATFINITE): everything above 448 (including +-inf) becomes +-448; values in
 * (448, 464] would round to 448 anyway and larger ones would round to 480, which is not a
 * finite e4m3 value. The subnormal trick is the one of codec_half_enc with 2^14 (ulp 2^-9). */
static inline ZN_HD uint8_t codec_e4m3_enc(float f)
{
    uint32_t x = codec_f2u(f);
    int32_t sign = (int32_t)((x >> 24) & 0x80u);
    int32_t u = (int32_t)(x & 0x7fffffffu);
    int32_t normal = (int32_t)(((uint32_t)u + 0xc407ffffu + (((uint32_t)u >> 20) & 1u)) >> 20);
    int32_t sub = (int32_t)(codec_f2u(codec_u2f((uint32_t)u) + 0x1p14f) - 0x46800000u);
    int32_t r = u < 0x3c800000 ? sub : normal; /* below 2^-6 */
    r = u > 0x43e00000 ? 0x7e : r;             /* above 448 */
    r |= sign;
    return (uint8_t)(u > 0x7f800000 ? 0x7f : r);
}

static inline ZN_HD uint8_t codec_e5m2_enc(float f)
{
    uint32_t x = codec_f2u(f);
    int32_t sign = (int32_t)((x >> 24) & 0x80u);
    int32_t u = (int32_t)(x & 0x7fffffffu);
    int32_t normal = (int32_t)(((uint32_t)u + 0xc80fffffu + (((uint32_t)u >> 21) & 1u)) >> 21);
    int32_t sub = (int32_t)(codec_f2u(codec_u2f((uint32_t)u) + 128.0f) - 0x43000000u); /* 2^-16 */
    int32_t r = u < 0x38800000 ? sub : normal; /* below 2^-14 */
    r = u > 0x47600000 ? 0x7b : r;             /* above 57344 */
    r |= sign;
    return (uint8_t)(u > 0x7f800000 ? 0x7f : r);
}

#endif
