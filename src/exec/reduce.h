/*
 * reduce.h -- host-memory reduction and element-type conversion kernels (exec layer).
 *
 * Every host collective combines buffers through these loops, and the CUDA kernels in
 * src/device/ must give the same bits for the same inputs, so the exact semantics are written
 * down here and the device functors follow them.
 *
 * Arithmetic, per element type:
 *  - Integers (int8 .. uint64): sum and prod wrap around modulo 2^bits (two's complement for the
 *    signed types); max and min compare by signed or unsigned value.
 *  - float, double: IEEE arithmetic in that type, round to nearest even.
 *  - half, bfloat16, fp8e4m3, fp8e5m2: both operands are decoded to float exactly, the operation
 *    is done in float and the result is encoded back with round-to-nearest-even. Because float
 *    carries more than twice the precision of these types, the result is the correctly rounded
 *    one, the same as native half/bf16 arithmetic on the GPU.
 *  - Encoding to half and bfloat16: overflow gives infinity; any NaN gives the canonical NaN
 *    0x7fff (sign dropped), as CUDA's __float2half_rn / __float2bfloat16_rn do.
 *  - Encoding to fp8 (e4m3 is OCP E4M3FN: bias 7, no infinity, NaN 0x7f/0xff, max 448; e5m2:
 *    bias 15, IEEE-like, max 57344): saturating, like CUDA's __NV_SATFINITE (the mode that the
 *    __nv_fp8_e4m3 / __nv_fp8_e5m2 constructors use): a finite value beyond the largest finite
 *    one and +-infinity become +-max finite (e4m3 0x7e/0xfe, e5m2 0x7b/0xfb); any NaN becomes
 *    0x7f (sign dropped) in both formats, as __nv_cvt_float_to_fp8 gives.
 *  - NaN: any NaN result of float or double arithmetic is the canonical NaN 0x7fffffff /
 *    0x7fffffffffffffff (all bits but the sign set; the float one is what NVIDIA GPUs produce),
 *    whatever the operands' payloads and signs, so results are bit-reproducible whatever the
 *    loop shape, block size or operand order. GPU kernels that must match the host bit for bit
 *    on NaN canonicalize the same way.
 *  - max / min on floating types propagate NaN: if either operand is NaN the result is the
 *    type's canonical NaN. -0 orders below +0, so max(+0, -0) = +0 and min(+0, -0) = -0 in
 *    either operand order: the result never depends on operand order. (fmaxf/fminf, which
 *    ignore NaN, were rejected: a NaN in one rank's data would silently vanish from the
 *    reduction.)
 *
 * Buffers: dst may be the same pointer as a source (exact aliasing); partial overlap is not
 * allowed. Counts are size_t and may exceed 2^31. An invalid type or op makes the call a no-op:
 * the api layer validates arguments before they reach this code.
 */
#ifndef ZN_EXEC_REDUCE_H
#define ZN_EXEC_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#include "util/redop.h"

/* Bytes per element; 0 if t is not a valid ncclDataType_t. */
size_t zn_dtype_size(ncclDataType_t t);
/* "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16",
 * "fp8e4m3", "fp8e5m2"; "invalid" otherwise. */
const char *zn_dtype_name(ncclDataType_t t);
/* 1 for half, float, double, bfloat16 and both fp8 types; 0 otherwise. */
int zn_dtype_is_float(ncclDataType_t t);

/* dst[i] = a[i] (op) b[i] for i in [0, count). */
void zn_reduce2(ncclDataType_t t, enum zn_red op, void *dst, const void *a, const void *b,
                size_t count);

/* dst[i] = ((srcs[0][i] op srcs[1][i]) op srcs[2][i]) ... op srcs[n-1][i], rounding to the
 * element type after each step: bit for bit the result of n-1 chained zn_reduce2 calls. dst may
 * alias any one source; sources may alias each other. n >= 1 (n == 1 copies srcs[0]). The chain
 * is applied block by block (a few KB at a time) so that the partial result stays in L1 instead
 * of making n-1 passes over memory. */
void zn_reduce_n(ncclDataType_t t, enum zn_red op, void *dst, const void *const *srcs, int n,
                 size_t count);

/* dst[i] = src[i] * scalar, where scalar points to one element of type t (PreMulSum's local
 * step). Same arithmetic as ZN_RED_PROD: wrapping for integers, via float for the narrow types. */
void zn_scale(ncclDataType_t t, void *dst, const void *src, const void *scalar, size_t count);

/* dst[i] = src[i] / n with C integer division (truncating toward zero, so -7 / 2 = -3): the
 * SumPostDiv step of ncclAvg on integers. Only the six integer types (a no-op for others);
 * n >= 1 (the rank count; n < 1 is a no-op). */
void zn_divide_int(ncclDataType_t t, void *dst, const void *src, int n, size_t count);

/* Store x converted to type t in *out, rounded to nearest even like a conversion from double
 * (narrow float types saturate or give infinity as described above). Integer types truncate
 * toward zero and saturate at the type's range; NaN gives 0. Used to build 1/nranks for ncclAvg
 * on floating types. */
void zn_dtype_from_double(ncclDataType_t t, double x, void *out);
/* Element i of buf, converted to double (exact for every type but int64/uint64 beyond 2^53). */
double zn_dtype_to_double(ncclDataType_t t, const void *buf, size_t i);

/* Scalar conversions. Decoding is exact; encoding is round-to-nearest-even with the overflow and
 * NaN rules above. */
float zn_half_to_float(uint16_t h);
uint16_t zn_float_to_half(float f);
float zn_bf16_to_float(uint16_t h);
uint16_t zn_float_to_bf16(float f);
float zn_e4m3_to_float(uint8_t v);
uint8_t zn_float_to_e4m3(float f);
float zn_e5m2_to_float(uint8_t v);
uint8_t zn_float_to_e5m2(float f);

#endif
