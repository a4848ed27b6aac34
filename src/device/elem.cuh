/*
 * Element types and reductions on the GPU, with the semantics that src/exec/reduce.h writes down
 * for the host kernels: integers wrap, floating types reduce in float (double for double), NaN
 * results are canonical, max/min propagate NaN and order -0 below +0, narrow types round to
 * nearest even (fp8 saturating). The narrow types use the host's own conversions
 * (abi/codec.h), which were written to match CUDA's (tests/unit/codec_gpu_test.cu compares them
 * for every input on a GPU).
 */
#ifndef ZN_DEVICE_ELEM_CUH
#define ZN_DEVICE_ELEM_CUH

#include "abi/codec.h"

#include <stdint.h>

namespace zn
{

enum { RED_SUM = 0, RED_PROD = 1, RED_MAX = 2, RED_MIN = 3 };

/* Storage wrappers that give each 1- and 2-byte floating type its own C++ type. */
struct half_t {
    uint16_t v;
};
struct bf16_t {
    uint16_t v;
};
struct e4m3_t {
    uint8_t v;
};
struct e5m2_t {
    uint8_t v;
};

/* L1-bypassing load: arena slots are written by peers over NVLink, and L1 is not coherent
 * with those writes. */
template <typename T> __device__ __forceinline__ T ldcg(const T *p)
{
    if constexpr (sizeof(T) == 1) {
        unsigned char x = __ldcg((const unsigned char *)p);
        return *(T *)&x;
    } else if constexpr (sizeof(T) == 2) {
        unsigned short x = __ldcg((const unsigned short *)p);
        return *(T *)&x;
    } else if constexpr (sizeof(T) == 4) {
        unsigned int x = __ldcg((const unsigned int *)p);
        return *(T *)&x;
    } else {
        unsigned long long x = __ldcg((const unsigned long long *)p);
        return *(T *)&x;
    }
}

__device__ __forceinline__ float canon(float x)
{
    return x != x ? __int_as_float(0x7fffffff) : x;
}
__device__ __forceinline__ double canon(double x)
{
    return x != x ? __longlong_as_double(0x7fffffffffffffffll) : x;
}

template <typename F> __device__ __forceinline__ F fred(F a, F b, int op)
{
    switch (op) {
    case RED_SUM: return canon(a + b);
    case RED_PROD: return canon(a * b);
    case RED_MAX:
        if (a != a || b != b) return canon(a != a ? a : b);
        if (a == b) return signbit(a) ? b : a;
        return a > b ? a : b;
    default:
        if (a != a || b != b) return canon(a != a ? a : b);
        if (a == b) return signbit(a) ? a : b;
        return a < b ? a : b;
    }
}

template <typename T> struct Ops; /* red(a, b, op), mul(a, scalar), div_int(a, n) */

template <typename T, typename U> struct IntOps {
    static __device__ __forceinline__ T red(T a, T b, int op)
    {
        switch (op) {
        case RED_SUM: return (T)((U)a + (U)b);
        case RED_PROD: return (T)((U)a * (U)b);
        case RED_MAX: return a > b ? a : b;
        default: return a < b ? a : b;
        }
    }
    static __device__ __forceinline__ T mul(T a, T s)
    {
        return (T)((U)a * (U)s);
    }
    static __device__ __forceinline__ T div_int(T a, int n)
    {
        /* C division truncates toward zero, as the host's zn_divide_int. */
        if constexpr (sizeof(T) == 1)
            return (T)((int)a / n);
        else
            return (T)(a / (T)n);
    }
};

template <> struct Ops<int8_t> : IntOps<int8_t, uint8_t> {
};
template <> struct Ops<uint8_t> : IntOps<uint8_t, uint8_t> {
};
template <> struct Ops<int32_t> : IntOps<int32_t, uint32_t> {
};
template <> struct Ops<uint32_t> : IntOps<uint32_t, uint32_t> {
};
template <> struct Ops<int64_t> : IntOps<int64_t, uint64_t> {
};
template <> struct Ops<uint64_t> : IntOps<uint64_t, uint64_t> {
};

template <> struct Ops<float> {
    static __device__ __forceinline__ float red(float a, float b, int op)
    {
        return fred(a, b, op);
    }
    static __device__ __forceinline__ float mul(float a, float s)
    {
        return canon(a * s);
    }
    static __device__ __forceinline__ float div_int(float a, int n)
    {
        return a;
    }
};

template <> struct Ops<double> {
    static __device__ __forceinline__ double red(double a, double b, int op)
    {
        return fred(a, b, op);
    }
    static __device__ __forceinline__ double mul(double a, double s)
    {
        return canon(a * s);
    }
    static __device__ __forceinline__ double div_int(double a, int n)
    {
        return a;
    }
};

/* Narrow floating types: decode to float, compute, encode, with the host's conversions
 * (abi/codec.h), so the kernels and the host reduction give the same bits. */
struct HalfT {
    static __device__ __forceinline__ float dec(half_t x)
    {
        return codec_half_dec(x.v);
    }
    static __device__ __forceinline__ half_t enc(float f)
    {
        return half_t{ codec_half_enc(f) };
    }
};
struct Bf16T {
    static __device__ __forceinline__ float dec(bf16_t x)
    {
        return codec_bf16_dec(x.v);
    }
    static __device__ __forceinline__ bf16_t enc(float f)
    {
        return bf16_t{ codec_bf16_enc(f) };
    }
};
template <int FMT> struct Fp8T {
    static __device__ __forceinline__ float dec(uint8_t x)
    {
        return FMT ? codec_e5m2_dec(x) : codec_e4m3_dec(x);
    }
    static __device__ __forceinline__ uint8_t enc(float f)
    {
        return FMT ? codec_e5m2_enc(f) : codec_e4m3_enc(f);
    }
};

template <> struct Ops<half_t> {
    static __device__ __forceinline__ half_t red(half_t a, half_t b, int op)
    {
        return HalfT::enc(fred(HalfT::dec(a), HalfT::dec(b), op));
    }
    static __device__ __forceinline__ half_t mul(half_t a, half_t s)
    {
        return HalfT::enc(canon(HalfT::dec(a) * HalfT::dec(s)));
    }
    static __device__ __forceinline__ half_t div_int(half_t a, int n)
    {
        return a;
    }
};
template <> struct Ops<bf16_t> {
    static __device__ __forceinline__ bf16_t red(bf16_t a, bf16_t b, int op)
    {
        return Bf16T::enc(fred(Bf16T::dec(a), Bf16T::dec(b), op));
    }
    static __device__ __forceinline__ bf16_t mul(bf16_t a, bf16_t s)
    {
        return Bf16T::enc(canon(Bf16T::dec(a) * Bf16T::dec(s)));
    }
    static __device__ __forceinline__ bf16_t div_int(bf16_t a, int n)
    {
        return a;
    }
};
template <> struct Ops<e4m3_t> {
    static __device__ __forceinline__ e4m3_t red(e4m3_t a, e4m3_t b, int op)
    {
        return e4m3_t{ Fp8T<0>::enc(fred(Fp8T<0>::dec(a.v), Fp8T<0>::dec(b.v), op)) };
    }
    static __device__ __forceinline__ e4m3_t mul(e4m3_t a, e4m3_t s)
    {
        return e4m3_t{ Fp8T<0>::enc(canon(Fp8T<0>::dec(a.v) * Fp8T<0>::dec(s.v))) };
    }
    static __device__ __forceinline__ e4m3_t div_int(e4m3_t a, int n)
    {
        return a;
    }
};
template <> struct Ops<e5m2_t> {
    static __device__ __forceinline__ e5m2_t red(e5m2_t a, e5m2_t b, int op)
    {
        return e5m2_t{ Fp8T<1>::enc(fred(Fp8T<1>::dec(a.v), Fp8T<1>::dec(b.v), op)) };
    }
    static __device__ __forceinline__ e5m2_t mul(e5m2_t a, e5m2_t s)
    {
        return e5m2_t{ Fp8T<1>::enc(canon(Fp8T<1>::dec(a.v) * Fp8T<1>::dec(s.v))) };
    }
    static __device__ __forceinline__ e5m2_t div_int(e5m2_t a, int n)
    {
        return a;
    }
};

} // namespace zn

#endif
