// baseline.cu: a straightforward W4A16 NVFP4 MoE layer (routed experts) for Hopper,
// the starting point the tuned kernels must beat. Same inputs, outputs and
// layouts as ref.cu and nvfp4_ref.c (w13 rows: gate 0..I-1, then up I..2I-1;
// scales e4m3 in the linear [rows, cols/16] layout; one s2 per expert).
//
// GEMV style, one warp per output row, for every (token, slot) pair; no token
// sorting. Each lane takes 8 consecutive elements at a time (4 bytes of codes,
// one block scale, 16 bytes of bf16 activations), decodes the codes through a
// 16-entry table in shared memory, multiplies in fp32 and accumulates in fp32;
// the block scale is applied once per 8 elements and s2 once per row. Warp
// shuffles reduce the lanes. The weighted sum over the k slots happens inside
// the down kernel (each warp loops over the slots), so the result is
// deterministic and needs no atomics or zeroed accumulator.
//
// Requirements: H % 16 == 0, I % 16 == 0; x, h, out 16-byte aligned; blockDim 256.
// An expert id outside 0..E-1 makes NaN.
//
// Device code only, for NVRTC; no system headers. Launch plan (in order, one stream):
//   nvfp4_moe_base_up    grid (ceil(I / 8), T*K), block 256, no dynamic shared memory
//                        writes h bf16 [T*K, I] (scratch)
//   nvfp4_moe_base_down  grid (ceil(H / 8), T),   block 256, no dynamic shared memory
//                        writes out bf16 [T, H]
// Compile check (no GPU needed): nvcc -arch=sm_90 -Ikernels -cubin -o /tmp/base.cubin kernels/nvfp4_moe/baseline.cu

#define BASE_WARPS 8

__device__ __forceinline__ float base_bf16_lo(unsigned v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float base_bf16_hi(unsigned v) { return __uint_as_float(v & 0xffff0000u); }

#include "nvfp4_moe/decode.cuh"   // bf16 and e4m3 (ref.cu's)

__device__ __forceinline__ void base_fill_lut(float *lut) {
    const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    if (threadIdx.x < 16) lut[threadIdx.x] = (threadIdx.x & 8u) ? -mag[threadIdx.x & 7u] : mag[threadIdx.x & 7u];
    __syncthreads();
}

// Sum over 8 elements: codes (8 nibbles, element 0 in the low nibble) times
// activations (8 bf16 in a uint4, element 0 in the low half of .x).
__device__ __forceinline__ float base_dot8(const float *lut, unsigned codes, uint4 a) {
    float s = lut[codes & 15u] * base_bf16_lo(a.x);
    s += lut[(codes >> 4) & 15u] * base_bf16_hi(a.x);
    s += lut[(codes >> 8) & 15u] * base_bf16_lo(a.y);
    s += lut[(codes >> 12) & 15u] * base_bf16_hi(a.y);
    s += lut[(codes >> 16) & 15u] * base_bf16_lo(a.z);
    s += lut[(codes >> 20) & 15u] * base_bf16_hi(a.z);
    s += lut[(codes >> 24) & 15u] * base_bf16_lo(a.w);
    s += lut[codes >> 28] * base_bf16_hi(a.w);
    return s;
}

__device__ __forceinline__ float base_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Row r of expert e's matrix [rows, cols] dotted with the bf16 vector a[cols],
// block scales applied, s2 not; this lane's share (elements lane*8 + 256*n).
__device__ __forceinline__ float base_row_dot(const float *lut, const unsigned char *q,
                                              const unsigned char *sf, long long row,
                                              int cols, const unsigned short *a, int lane) {
    const unsigned *qr = (const unsigned *)(q + row * (cols / 2));
    const unsigned char *sr = sf + row * (cols / 16);
    const uint4 *av = (const uint4 *)a;
    float acc = 0.0f;
    for (int c = lane * 8; c < cols; c += 256)
        acc += base_dot8(lut, qr[c / 8], av[c / 8]) * nvfp4_e4m3_to_f32(sr[c / 16]);
    return acc;
}

extern "C" __global__ void __launch_bounds__(256)
nvfp4_moe_base_up(int T, int H, int I, int E, int K, const unsigned short *x, const int *ids,
                  const unsigned char *w13q, const unsigned char *w13sf, const float *w13s2,
                  unsigned short *h) {
    __shared__ float lut[16];
    base_fill_lut(lut);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int i = blockIdx.x * BASE_WARPS + warp;
    long long tj = blockIdx.y;                    // t * K + j
    if (i >= I || tj >= (long long)T * K) return;
    int e = ids[tj];
    if (e < 0 || e >= E) {
        if (lane == 0) h[tj * I + i] = 0x7fc0;
        return;
    }
    const unsigned short *xt = x + (tj / K) * H;
    long long base = (long long)e * 2 * I;
    float gate = base_warp_sum(base_row_dot(lut, w13q, w13sf, base + i, H, xt, lane));
    float up = base_warp_sum(base_row_dot(lut, w13q, w13sf, base + I + i, H, xt, lane));
    if (lane == 0) {
        float s2 = w13s2[e];
        gate *= s2;
        up *= s2;
        h[tj * I + i] = nvfp4_f32_to_bf16(gate / (1.0f + __expf(-gate)) * up);
    }
}

extern "C" __global__ void __launch_bounds__(256)
nvfp4_moe_base_down(int T, int H, int I, int E, int K, const int *ids, const float *tw,
                    const unsigned short *h, const unsigned char *w2q,
                    const unsigned char *w2sf, const float *w2s2, unsigned short *out) {
    __shared__ float lut[16];
    base_fill_lut(lut);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int n = blockIdx.x * BASE_WARPS + warp;
    int t = blockIdx.y;
    if (n >= H || t >= T) return;
    float acc = 0.0f;
    for (int j = 0; j < K; j++) {
        long long tj = (long long)t * K + j;
        int e = ids[tj];
        if (e < 0 || e >= E) {
            acc = __uint_as_float(0x7fc00000u);
            break;
        }
        float d = base_row_dot(lut, w2q, w2sf, (long long)e * H + n, I, h + tj * I, lane);
        acc += tw[tj] * w2s2[e] * d;
    }
    acc = base_warp_sum(acc);
    if (lane == 0) out[(long long)t * H + n] = nvfp4_f32_to_bf16(acc);
}
