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

-- One thread per element of C, accumulated in double: slow, simple, trusted.
local cuda_reference = [[
extern "C" __global__ void sgemm_ref(int M, int N, int K, float alpha, const float *A, const float *B,
                                     float beta, float *C) {
    int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M || j >= N) return;
    double acc = 0;
    for (int k = 0; k < K; k++) acc += (double)A[(long long)i * K + k] * (double)B[(long long)k * N + j];
    float *out = &C[(long long)i * N + j];
    *out = (float)(alpha * acc + (beta != 0.0f ? (double)beta * *out : 0.0));
}
]]

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
                  cuda = { source = cuda_reference, fn = "sgemm_ref", launch = grid16 } },
    tolerance = opts.tolerance or { atol = 2e-2, rtol = 1e-3 },
    bytes = "4 * (M * K + K * N + M * N)",
    flops = "2 * M * N * K",
    launch = grid16,
  }
end
