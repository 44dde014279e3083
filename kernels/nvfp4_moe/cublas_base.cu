// cublas_base.cu: the kernels around cuBLAS in the nvfp4_moe problem's
// baseline "cublas" (lua/kwb/nvfp4_cublas.lua): the same layer in bf16, as a
// user without an NVFP4 kernel would run it. Its plan:
//   nvfp4_bl_gather      xs[r] = x[order[r]]            (rows in expert order)
//   per active expert    cublasGemmEx hs[rows of e] = s2_13[e] * xs[rows of e] . W13[e]^T   (fp32 out)
//   nvfp4_bl_silu_mul    a[r][i] = bf16(silu(hs[r][i]) * hs[r][I + i])
//   per active expert    cublasGemmEx y[rows of e] = s2_2[e] * a[rows of e] . W2[e]^T        (fp32 out)
//   nvfp4_bl_combine     out[t] = bf16(sum over k, in order, of tw[t][k] * y[slot[t*K + k]])
// and, once before it is measured, nvfp4_bl_dequant: the bf16 weights
// e2m1(code) * e4m3(scale), exact in bf16 (at most 2 + 4 significant bits),
// the per-expert s2 applied as the gemm's alpha. The decode is ref.cu's.
// Device code only, for NVRTC; no system headers (bf16 carried as unsigned short).
// Compile check (no GPU needed): nvcc -arch=sm_90 -Ikernels -cubin -o /tmp/bl.cubin kernels/nvfp4_moe/cublas_base.cu

#include "nvfp4_moe/decode.cuh"   // bf16, e4m3 and e2m1 (ref.cu's)

// w[i] = e2m1(code i) * e4m3(scale i / 16) for the n elements of a matrix set
// stored [E, rows, cols] (cols a multiple of 16: element i's scale is i / 16;
// element i's code is the low nibble of byte i / 2 when i is even). Grid-stride.
extern "C" __global__ void nvfp4_bl_dequant(const unsigned char *q, const unsigned char *sf, unsigned short *w,
                                            long long n) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned code = (q[i >> 1] >> ((unsigned)(i & 1) * 4u)) & 15u;
        w[i] = nvfp4_f32_to_bf16(nvfp4_e2m1_to_f32(code) * nvfp4_e4m3_to_f32(sf[i >> 4]));
    }
}

// Grid (ceil(H / 256), rows), block 256: xs[r][j] = x[order[r]][j].
extern "C" __global__ void nvfp4_bl_gather(const unsigned short *x, const int *order, unsigned short *xs, int rows,
                                           int H) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y;
    if (j >= H || r >= rows) return;
    xs[(long long)r * H + j] = x[(long long)order[r] * H + j];
}

// Grid (ceil(I / 256), rows), block 256: a[r][i] = bf16(silu(gate) * up), gate
// hs[r][i], up hs[r][I + i] (w13's rows 0..I-1 gate, I..2I-1 up), silu as ref.cu.
extern "C" __global__ void nvfp4_bl_silu_mul(const float *hs, unsigned short *a, int rows, int I) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y;
    if (i >= I || r >= rows) return;
    float g = hs[(long long)r * 2 * I + i], u = hs[(long long)r * 2 * I + I + i];
    float silu = g / (1.0f + expf(-g));
    a[(long long)r * I + i] = nvfp4_f32_to_bf16(silu * u);
}

// Grid (ceil(H / 256), T), block 256: out[t][n] = bf16(sum over k, in order, of
// tw[t][k] * y[slot[t*K + k]][n]) (ref.cu's combine, with y in expert order).
extern "C" __global__ void nvfp4_bl_combine(const float *y, const int *slot, const float *tw, unsigned short *out,
                                            int T, int H, int K) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    long long t = blockIdx.y;
    if (n >= H || t >= T) return;
    float acc = 0.0f;
    for (int k = 0; k < K; k++) acc += tw[t * K + k] * y[(long long)slot[t * K + k] * H + n];
    out[t * H + n] = nvfp4_f32_to_bf16(acc);
}
