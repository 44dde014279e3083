// ref.cu: the trusted reference of the NVFP4 routed-experts MoE layer on the GPU.
// Simple on purpose: every output is one thread's plain loop, fp32
// accumulation in column order, every weight dequantised as
// value = e2m1(code) * e4m3(scale) * s2; no shared memory, no barriers, no
// warp shuffles (so tests/lua/test_nvfp4_ref.lua runs these kernels on the CPU,
// thread after thread). What makes it fast enough to run every round at
// T = 4096 is only the grouping: the token slots are listed per expert first,
// and a thread takes one row of an expert's matrix for REF_TT of its token
// slots at a time, so a weight is dequantised once per REF_TT tokens instead of
// once per token. The layouts, the w13 row order and the layer's definition
// are those of nvfp4_ref.c (the float64 CPU reference this file is checked
// against):
//   x    bf16 [T, H]            ids  int32 [T, K]        tw  f32 [T, K]
//   w13  uint8 [E, 2I, H/2], scales e4m3 [E, 2I, H/16] (linear), s2 f32 [E]
//        rows 0..I-1 gate (w1), rows I..2I-1 up (w3)
//   w2   uint8 [E, H, I/2],  scales e4m3 [E, H, I/16] (linear),  s2 f32 [E]
//   out  bf16 [T, H]            sum over k of tw * (W2 h), rounded to bf16
// Scratch (nothing read before this plan writes it):
//   count int32 [E], list int32 [E, T*K]   expert e's token slots t*K + k, in order
//   h     bf16 [T*K, I]         silu(gate) * up, rounded to bf16
//   y     f32  [T*K, H]         W2 h of each token slot
// H and I are multiples of 16. A token with an expert id outside 0..E-1 gets
// NaN in every output element.
//
// Device code only, for NVRTC; no system headers (bf16 is carried as unsigned short).
// Launch plan (in order, on one stream), block 128, S = min(64, ceil(T*K / REF_TT)):
//   nvfp4_moe_ref_route    grid ceil(E / 128)
//   nvfp4_moe_ref_up       grid (ceil(I / 128), E, S)
//   nvfp4_moe_ref_down     grid (ceil(H / 128), E, S)
//   nvfp4_moe_ref_combine  grid (ceil(H / 128), T)
// Compile check (no GPU needed): nvcc -arch=sm_90 -Ikernels -cubin -o /tmp/ref.cubin kernels/nvfp4_moe/ref.cu

#define REF_TT 16   // token slots a thread carries: each weight it dequantises serves them all

#include "nvfp4_moe/decode.cuh"   // bf16, e4m3 and e2m1

// Columns c..c+7 (c a multiple of 8) of row `row` (counted over all experts) of
// an NVFP4 matrix set with `cols` columns, expert scale s2.
__device__ __forceinline__ void ref_weights8(const unsigned char *q, const unsigned char *sf, float s2,
                                             long long row, int cols, int c, float w[8]) {
    unsigned codes = *(const unsigned *)(q + row * (cols / 2) + c / 2);   // column c + j in nibble j
    float scale = nvfp4_e4m3_to_f32(sf[row * (cols / 16) + c / 16]);
    for (int j = 0; j < 8; j++) w[j] = nvfp4_e2m1_to_f32((codes >> (4 * j)) & 15u) * scale * s2;
}

// Elements c..c+7 (c a multiple of 8) of a bf16 row.
__device__ __forceinline__ void ref_bf16x8(const unsigned short *p, float v[8]) {
    uint4 u = *(const uint4 *)p;
    unsigned w[4] = {u.x, u.y, u.z, u.w};
    for (int j = 0; j < 4; j++) {
        v[2 * j] = __uint_as_float(w[j] << 16);
        v[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
    }
}

// One thread per expert e: its token slots, in increasing order, and their count.
extern "C" __global__ void nvfp4_moe_ref_route(int T, int E, int K, const int *ids, int *count, int *list) {
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= E) return;
    long long TK = (long long)T * K;
    int *mine = list + e * TK;
    int n = 0;
    for (long long tj = 0; tj < TK; tj++)
        if (ids[tj] == e) mine[n++] = (int)tj;
    count[e] = n;
}

// One thread per (expert e, intermediate index i, REF_TT of e's token slots at a
// time): h[t*K + k][i] for each of them.
extern "C" __global__ void nvfp4_moe_ref_up(int T, int H, int I, int E, int K,
                                            const unsigned short *x, const int *count, const int *list,
                                            const unsigned char *w13q, const unsigned char *w13sf,
                                            const float *w13s2, unsigned short *h) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int e = blockIdx.y;
    if (i >= I || e >= E) return;
    const int *mine = list + e * ((long long)T * K);
    int n = count[e];
    float s2 = w13s2[e];
    long long rg = (long long)e * 2 * I + i, ru = rg + I;   // its gate and up rows
    for (int c0 = blockIdx.z * REF_TT; c0 < n; c0 += gridDim.z * REF_TT) {
        long long xrow[REF_TT];
        float gate[REF_TT], up[REF_TT];
#pragma unroll
        for (int k = 0; k < REF_TT; k++) {   // past the last slot: token 0's row, not stored
            xrow[k] = c0 + k < n ? (long long)(mine[c0 + k] / K) * H : 0;
            gate[k] = 0.0f;
            up[k] = 0.0f;
        }
        for (int c = 0; c < H; c += 8) {
            float wg[8], wu[8];
            ref_weights8(w13q, w13sf, s2, rg, H, c, wg);
            ref_weights8(w13q, w13sf, s2, ru, H, c, wu);
#pragma unroll
            for (int k = 0; k < REF_TT; k++) {
                float xv[8];
                ref_bf16x8(x + xrow[k] + c, xv);
                for (int j = 0; j < 8; j++) {
                    gate[k] += xv[j] * wg[j];
                    up[k] += xv[j] * wu[j];
                }
            }
        }
#pragma unroll
        for (int k = 0; k < REF_TT; k++)
            if (c0 + k < n) {
                float silu = gate[k] / (1.0f + expf(-gate[k]));
                h[(long long)mine[c0 + k] * I + i] = nvfp4_f32_to_bf16(silu * up[k]);
            }
    }
}

// One thread per (expert e, hidden index n, REF_TT of e's token slots at a time):
// y[t*K + k][n] = W2[e] row n . h[t*K + k] for each of them.
extern "C" __global__ void nvfp4_moe_ref_down(int T, int H, int I, int E, int K,
                                              const int *count, const int *list, const unsigned short *h,
                                              const unsigned char *w2q, const unsigned char *w2sf,
                                              const float *w2s2, float *y) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    int e = blockIdx.y;
    if (n >= H || e >= E) return;
    const int *mine = list + e * ((long long)T * K);
    int slots = count[e];
    float s2 = w2s2[e];
    long long row = (long long)e * H + n;
    for (int c0 = blockIdx.z * REF_TT; c0 < slots; c0 += gridDim.z * REF_TT) {
        long long hrow[REF_TT];
        float acc[REF_TT];
#pragma unroll
        for (int k = 0; k < REF_TT; k++) {   // past the last slot: its first slot's row, not stored
            hrow[k] = (long long)mine[c0 + k < slots ? c0 + k : c0] * I;
            acc[k] = 0.0f;
        }
        for (int c = 0; c < I; c += 8) {
            float w[8];
            ref_weights8(w2q, w2sf, s2, row, I, c, w);
#pragma unroll
            for (int k = 0; k < REF_TT; k++) {
                float hv[8];
                ref_bf16x8(h + hrow[k] + c, hv);
                for (int j = 0; j < 8; j++) acc[k] += hv[j] * w[j];
            }
        }
#pragma unroll
        for (int k = 0; k < REF_TT; k++)
            if (c0 + k < slots) y[(long long)mine[c0 + k] * H + n] = acc[k];
    }
}

// One thread per (hidden index n, token t): out[t][n] = sum over k, in order, of
// tw[t][k] * y[t*K + k][n].
extern "C" __global__ void nvfp4_moe_ref_combine(int T, int H, int E, int K, const int *ids, const float *tw,
                                                 const float *y, unsigned short *out) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    long long t = blockIdx.y;
    if (n >= H || t >= T) return;
    float acc = 0.0f;
    bool valid = true;
    for (int k = 0; k < K; k++) {
        long long tj = t * K + k;
        int e = ids[tj];
        if (e < 0 || e >= E) {
            valid = false;
            break;
        }
        acc += tw[tj] * y[tj * H + n];
    }
    out[t * H + n] = valid ? nvfp4_f32_to_bf16(acc) : (unsigned short)0x7fc0;
}
