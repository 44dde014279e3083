-- kwb/problems/sgemm.lua: C = alpha * A * B + beta * C for row-major f32
-- matrices (A: M x K, B: K x N, C: M x N), the classic SGEMM signature:
--
--   void sgemm(int M, int N, int K, float alpha, const float *A, const float *B,
--              float beta, float *C)
--
-- The loop calls it with alpha = 1 and beta = 0, so C is a pure output and is
-- poisoned before every run. opts.fn names the entry point candidates export
-- (default "sgemm"); opts.tolerance overrides { atol = 2e-2, rtol = 1e-3 },
-- which admits fp32 accumulation in any order up to K = 8192 and rejects
-- inputs dropped to half or bfloat16 precision.
local problem = require "kwb.problem"

local reference = [[
void sgemm_ref(int M, int N, int K, float alpha, const float *A, const float *B, float beta, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int k = 0; k < K; k++) acc += (double)A[(long)i * K + k] * B[(long)k * N + j];
            C[(long)i * N + j] = (float)(alpha * acc + (beta != 0 ? beta * C[(long)i * N + j] : 0));
        }
}
]]

-- Accumulated in double, each element's products in k order (one FMA each,
-- as the one-thread-per-element kernel this replaced: the same bits, tested
-- in tests/gpu/cuda.lua), from A and B converted to double once per element
-- of a tile in shared memory rather than once per product: a block of 16 x 16
-- threads computes a 64 x 64 tile of C, thread (tx, ty) the 4 x 4 elements at
-- rows ty + 16 r and columns tx + 16 c, stepping through K 16 at a time.
-- Past the edges the tiles hold zeros (an FMA of zeros leaves the sum as it
-- was). Simple, trusted, and about the FP64 rate rather than the conversion
-- rate: the reference runs for every candidate's own inputs.
local cuda_reference = [[
#define RT 64
#define RK 16
extern "C" __global__ void __launch_bounds__(256) sgemm_ref(int M, int N, int K, float alpha, const float *A,
                                                            const float *B, float beta, float *C) {
    __shared__ double As[RT][RK + 1], Bs[RK][RT];
    int tx = threadIdx.x, ty = threadIdx.y, i0 = blockIdx.y * RT, j0 = blockIdx.x * RT;
    double acc[4][4] = {};
    for (int k0 = 0; k0 < K; k0 += RK) {
        for (int r = 0; r < 4; r++) {
            int i = i0 + ty + 16 * r, k = k0 + tx;
            As[ty + 16 * r][tx] = i < M && k < K ? (double)A[(long long)i * K + k] : 0.0;
            int kb = k0 + ty, j = j0 + tx + 16 * r;
            Bs[ty][tx + 16 * r] = kb < K && j < N ? (double)B[(long long)kb * N + j] : 0.0;
        }
        __syncthreads();
        for (int kk = 0; kk < RK; kk++) {
            double a[4], b[4];
            for (int r = 0; r < 4; r++) a[r] = As[ty + 16 * r][kk];
            for (int c = 0; c < 4; c++) b[c] = Bs[kk][tx + 16 * c];
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 4; c++) acc[r][c] = fma(a[r], b[c], acc[r][c]);
        }
        __syncthreads();
    }
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) {
            int i = i0 + ty + 16 * r, j = j0 + tx + 16 * c;
            if (i >= M || j >= N) continue;
            float *out = &C[(long long)i * N + j];
            *out = (float)(alpha * acc[r][c] + (beta != 0.0f ? (double)beta * *out : 0.0));
        }
}
]]
-- the reference's grid: 64 x 64 tiles of C, 16 x 16 threads each
local function grid64(shape)
  return { grid = { (shape.N + 63) // 64, (shape.M + 63) // 64 }, block = { 16, 16 } }
end

local function grid16(shape)
  return { grid = { (shape.N + 15) // 16, (shape.M + 15) // 16 }, block = { 16, 16 } }
end

return function(opts)
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "fn" and k ~= "tolerance" then error("sgemm: unknown option '" .. tostring(k) .. "' (known: fn, tolerance)", 2) end
  end
  return problem.define {
    name = "sgemm",
    description = "C = alpha A B + beta C, row-major f32 (alpha = 1, beta = 0)",
    vars = { "M", "N", "K" },
    fn = opts.fn or "sgemm",
    args = {
      { "M", "i32", value = "M" }, { "N", "i32", value = "N" }, { "K", "i32", value = "K" },
      { "alpha", "f32", value = 1 },
      { "A", "f32", shape = "M*K", role = "in", init = { "normal", 0, 1 } },
      { "B", "f32", shape = "K*N", role = "in", init = { "normal", 0, 1 } },
      { "beta", "f32", value = 0 },
      { "C", "f32", shape = "M*N", role = "out" },
    },
    reference = { source = reference, fn = "sgemm_ref",
                  cuda = { source = cuda_reference, fn = "sgemm_ref", launch = grid64 } },
    tolerance = opts.tolerance or { atol = 2e-2, rtol = 1e-3 },
    bytes = "4 * (M * K + K * N + M * N)",
    flops = "2 * M * N * K",
    launch = grid16,
  }
end
