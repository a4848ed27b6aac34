/*
 * The narrow-type conversions of abi/codec.h, run on the GPU, against CUDA's own conversions
 * (which the kernels used before they shared the host's code): every float for the four
 * encoders, every code for the four decoders. Decoding may differ only in a NaN's payload or
 * sign (every reduction canonicalizes NaN results, so that never reaches a result); anything
 * else is a failure. Exits 77 without a GPU.
 */
#include "abi/codec.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdio.h>

__device__ uint16_t cuda_half_enc(float f)
{
    __half_raw r = __half_raw(__float2half_rn(f));
    return f != f ? 0x7fff : r.x;
}

__device__ uint16_t cuda_bf16_enc(float f)
{
    __nv_bfloat16_raw r = __nv_bfloat16_raw(__float2bfloat16_rn(f));
    return f != f ? 0x7fff : r.x;
}

__device__ uint8_t cuda_fp8_enc(float f, __nv_fp8_interpretation_t k)
{
    return f != f ? 0x7f : (uint8_t)__nv_cvt_float_to_fp8(f, __NV_SATFINITE, k);
}

__device__ float cuda_fp8_dec(uint8_t x, __nv_fp8_interpretation_t k)
{
    __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)x, k);
    return __half2float(__half(h));
}

/* bad[0..3]: encoder mismatches (half, bf16, e4m3, e5m2); first[]: the first input of each. */
__global__ void encoders(uint64_t base, unsigned long long *bad, unsigned *first)
{
    uint64_t i = base + blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    float f = __uint_as_float((uint32_t)i);
    bool miss[4] = { codec_half_enc(f) != cuda_half_enc(f), codec_bf16_enc(f) != cuda_bf16_enc(f),
                     codec_e4m3_enc(f) != cuda_fp8_enc(f, __NV_E4M3),
                     codec_e5m2_enc(f) != cuda_fp8_enc(f, __NV_E5M2) };
    for (int k = 0; k < 4; k++)
        if (miss[k] && atomicAdd(&bad[k], 1ull) == 0) first[k] = (uint32_t)i;
}

__device__ bool same_value(float a, float b)
{
    if (a != a || b != b) return a != a && b != b;
    return __float_as_uint(a) == __float_as_uint(b);
}

__global__ void decoders(unsigned long long *bad)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 65536) return;
    __half_raw h;
    h.x = (uint16_t)i;
    if (!same_value(codec_half_dec((uint16_t)i), __half2float(__half(h)))) atomicAdd(&bad[4], 1ull);
    if (!same_value(codec_bf16_dec((uint16_t)i), __uint_as_float(i << 16)))
        atomicAdd(&bad[5], 1ull);
    if (i >= 256) return;
    if (!same_value(codec_e4m3_dec((uint8_t)i), cuda_fp8_dec((uint8_t)i, __NV_E4M3)))
        atomicAdd(&bad[6], 1ull);
    if (!same_value(codec_e5m2_dec((uint8_t)i), cuda_fp8_dec((uint8_t)i, __NV_E5M2)))
        atomicAdd(&bad[7], 1ull);
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("no GPU: skipped\n");
        return 77;
    }
    unsigned long long *bad;
    unsigned *first;
    if (cudaMallocManaged(&bad, 8 * sizeof(*bad)) != cudaSuccess ||
        cudaMallocManaged(&first, 4 * sizeof(*first)) != cudaSuccess) {
        printf("cudaMallocManaged failed\n");
        return 1;
    }
    for (int k = 0; k < 8; k++) bad[k] = 0;
    const uint64_t step = (uint64_t)1 << 30;
    for (uint64_t base = 0; base < ((uint64_t)1 << 32); base += step)
        encoders<<<(unsigned)(step / 256), 256>>>(base, bad, first);
    decoders<<<256, 256>>>(bad);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        printf("kernel failed: %s\n", cudaGetErrorString(e));
        return 1;
    }
    static const char *names[8] = { "half enc", "bf16 enc", "e4m3 enc", "e5m2 enc",
                                    "half dec", "bf16 dec", "e4m3 dec", "e5m2 dec" };
    int failed = 0;
    for (int k = 0; k < 8; k++) {
        printf("%-9s %llu mismatches", names[k], bad[k]);
        if (k < 4 && bad[k]) printf(" (first input bits 0x%08x)", first[k]);
        printf("\n");
        failed |= bad[k] != 0;
    }
    return failed;
}
