// ref.cu: the trusted reference of the NVFP4 routed-experts MoE layer on the GPU.
// Simple on purpose: one warp per output element, fp32 accumulation, every
// weight dequantised on its own as value = e2m1(code) * e4m3(scale) * s2. The
// warp's lanes take the row's 16-element scale blocks in turn (lane, lane + 32,
// ...) so that a warp reads 256 consecutive bytes of a row at a time, and
// their sums meet in a warp shuffle. The layouts, the w13 row order and the
// layer's definition are those of nvfp4_ref.c (the float64 CPU reference this
// file is checked against):
//   x    bf16 [T, H]            ids  int32 [T, K]        tw  f32 [T, K]
//   w13  uint8 [E, 2I, H/2], scales e4m3 [E, 2I, H/16] (linear), s2 f32 [E]
//        rows 0..I-1 gate (w1), rows I..2I-1 up (w3)
//   w2   uint8 [E, H, I/2],  scales e4m3 [E, H, I/16] (linear),  s2 f32 [E]
//   h    bf16 [T*K, I]          scratch: silu(gate) * up, rounded to bf16
//   out  bf16 [T, H]            sum over k of tw * (W2 h), rounded to bf16
// H and I are multiples of 16. An expert id outside 0..E-1 makes NaN.
//
// Device code only, for NVRTC; no headers (bf16 is carried as unsigned short).
// Launch plan (in order, on one stream), block 256 (8 warps), no shared memory:
//   nvfp4_moe_ref_up    grid (ceil(I / 8), T*K)
//   nvfp4_moe_ref_down  grid (ceil(H / 8), T)
// Compile check (no GPU needed): nvcc -arch=sm_90 -cubin -o /tmp/ref.cubin kernels/nvfp4_moe/ref.cu

__device__ __forceinline__ float ref_bf16_to_f32(unsigned short h) {
    return __uint_as_float((unsigned)h << 16);
}

// Round to nearest even; NaN stays a (quiet) NaN.
__device__ __forceinline__ unsigned short ref_f32_to_bf16(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}

// float8_e4m3fn: bias 7, subnormals, 0x7f / 0xff NaN.
__device__ __forceinline__ float ref_e4m3_to_f32(unsigned c) {
    unsigned e = (c >> 3) & 15u, m = c & 7u;
    float v;
    if ((c & 0x7fu) == 0x7fu) v = __uint_as_float(0x7fc00000u);
    else if (e == 0) v = (float)m * 0.001953125f;                       // m * 2^-9
    else v = __uint_as_float(((e + 120u) << 23) | (m << 20));           // 1.m * 2^(e-7)
    return (c & 0x80u) ? -v : v;
}

__device__ __forceinline__ float ref_e2m1_to_f32(unsigned c) {
    const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    float v = mag[c & 7u];
    return (c & 8u) ? -v : v;
}

// Element (r, c) of expert e's NVFP4 matrix [rows, cols].
__device__ __forceinline__ float ref_weight(const unsigned char *q, const unsigned char *sf,
                                            const float *s2, int e, int rows, int cols,
                                            int r, int c) {
    long long row = (long long)e * rows + r;
    unsigned byte = q[row * (cols / 2) + c / 2];
    unsigned code = (c & 1) ? byte >> 4 : byte & 15u;
    return ref_e2m1_to_f32(code) * ref_e4m3_to_f32(sf[row * (cols / 16) + c / 16]) * s2[e];
}

__device__ __forceinline__ float ref_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// One warp per (token t, slot j, intermediate index i): h[t*K + j][i].
extern "C" __global__ void nvfp4_moe_ref_up(int T, int H, int I, int E, int K,
                                            const unsigned short *x, const int *ids,
                                            const unsigned char *w13q, const unsigned char *w13sf,
                                            const float *w13s2, unsigned short *h) {
    int lane = threadIdx.x % 32;
    int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    long long tj = blockIdx.y;                   // t * K + j
    if (i >= I || tj >= (long long)T * K) return;   // the whole warp
    long long t = tj / K;
    int e = ids[tj];
    bool valid = e >= 0 && e < E;
    float gate = 0.0f, up = 0.0f;
    for (int b = lane; valid && b < H / 16; b += 32)
        for (int c = 16 * b; c < 16 * b + 16; c++) {
            float xv = ref_bf16_to_f32(x[t * H + c]);
            gate += xv * ref_weight(w13q, w13sf, w13s2, e, 2 * I, H, i, c);
            up += xv * ref_weight(w13q, w13sf, w13s2, e, 2 * I, H, I + i, c);
        }
    gate = ref_warp_sum(gate);
    up = ref_warp_sum(up);
    if (lane == 0) {
        float silu = gate / (1.0f + expf(-gate));
        h[tj * I + i] = valid ? ref_f32_to_bf16(silu * up) : (unsigned short)0x7fc0;
    }
}

// One warp per (token t, hidden index n): out[t][n].
extern "C" __global__ void nvfp4_moe_ref_down(int T, int H, int I, int E, int K,
                                              const int *ids, const float *tw,
                                              const unsigned short *h,
                                              const unsigned char *w2q, const unsigned char *w2sf,
                                              const float *w2s2, unsigned short *out) {
    int lane = threadIdx.x % 32;
    int n = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    long long t = blockIdx.y;
    if (n >= H || t >= T) return;                // the whole warp
    float acc = 0.0f;
    bool valid = true;
    for (int j = 0; j < K; j++) {
        long long tj = t * K + j;
        int e = ids[tj];
        if (e < 0 || e >= E) {
            valid = false;
            break;
        }
        float d = 0.0f;
        for (int b = lane; b < I / 16; b += 32)
            for (int i = 16 * b; i < 16 * b + 16; i++)
                d += ref_bf16_to_f32(h[tj * I + i]) * ref_weight(w2q, w2sf, w2s2, e, H, I, n, i);
        acc += tw[tj] * d;
    }
    acc = ref_warp_sum(acc);
    if (lane == 0) out[t * H + n] = valid ? ref_f32_to_bf16(acc) : (unsigned short)0x7fc0;
}
