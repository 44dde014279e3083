// decode.cuh: the number formats of the NVFP4 layer on the device, for the
// kernels that decode them plainly (ref.cu, the trusted reference; baseline.cu;
// cublas_base.cu): bf16 carried as unsigned short, float8_e4m3fn block scales,
// e2m1 codes (modeldocs/nvfp4.md). Device code only, for NVRTC (kwb's include
// path is kernels/: #include "nvfp4_moe/decode.cuh").
#pragma once

__device__ __forceinline__ float nvfp4_bf16_to_f32(unsigned short h) {
    return __uint_as_float((unsigned)h << 16);
}

// Round to nearest even; NaN stays a (quiet) NaN.
__device__ __forceinline__ unsigned short nvfp4_f32_to_bf16(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}

// float8_e4m3fn: bias 7, subnormals, 0x7f / 0xff NaN.
__device__ __forceinline__ float nvfp4_e4m3_to_f32(unsigned c) {
    unsigned e = (c >> 3) & 15u, m = c & 7u;
    float v;
    if ((c & 0x7fu) == 0x7fu) v = __uint_as_float(0x7fc00000u);
    else if (e == 0) v = (float)m * 0.001953125f;                       // m * 2^-9
    else v = __uint_as_float(((e + 120u) << 23) | (m << 20));           // 1.m * 2^(e-7)
    return (c & 0x80u) ? -v : v;
}

// e2m1: codes 0-7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 the sign.
__device__ __forceinline__ float nvfp4_e2m1_to_f32(unsigned c) {
    const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    float v = mag[c & 7u];
    return (c & 8u) ? -v : v;
}
