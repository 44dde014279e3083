-- tests/gpu/baseline.lua: the cuBLAS gemm step of kwb.cuda plans against a
-- plain kernel, and the nvfp4_moe baseline "cublas" at T = 1, 64, 4096 with
-- its check against the reference and its times. Run by tests/gpu/baseline.
local t = require "t"
local cuda = kwb.cuda

local function fig(k, v) print(string.format("figure %s = %s", k, tostring(v))) end

-- y[m][n] = alpha * sum over k of x[m][k] * w[n][k] (row-major), fp32 sums in k order.
local plain_src = [[
extern "C" __global__ void plain_gemm(const unsigned short *x, const unsigned short *w, float *y,
                                      int M, int N, int K, float alpha) {
    int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y;
    if (n >= N || m >= M) return;
    float acc = 0.0f;
    for (int k = 0; k < K; k++)
        acc += __uint_as_float((unsigned)x[m * K + k] << 16) * __uint_as_float((unsigned)w[n * K + k] << 16);
    y[m * N + n] = alpha * acc;
}
]]

local plain = assert(cuda.compile { source = plain_src, name = "plain_gemm.cu" }):kernel "plain_gemm"

-- Rows [r0, r0 + M) of x [R, K] times expert e of w [E, N, K], transposed.
local function case(M, N, K, R, E, r0, e, out_dtype)
  local x = assert(cuda.buffer("bf16", R * K)):fill_uniform(1, -1, 1)
  local w = assert(cuda.buffer("bf16", E * N * K)):fill_uniform(2, -1, 1)
  local xe = assert(cuda.buffer("bf16", M * K))   -- the same rows and expert, alone, for the plain kernel
  local we = assert(cuda.buffer("bf16", N * K))
  assert(xe:upload(assert(x:raw()):sub(r0 * K * 2 + 1, (r0 + M) * K * 2)))
  assert(we:upload(assert(w:raw()):sub(e * N * K * 2 + 1, (e + 1) * N * K * 2)))
  local want = assert(cuda.buffer("f32", M * N)):poison()
  local pw = assert(cuda.plan { { plain, grid = { (N + 127) // 128, M }, block = 128, args = { xe, we, want, M, N, K, 0.75 } } })
  assert(pw:run())
  local got = assert(cuda.buffer(out_dtype, M * N)):poison()
  local p = assert(cuda.plan())
  assert(p:add { gemm = { trans_a = true, m = N, n = M, k = K, alpha = 0.75, a = w, a_offset = e * N * K, lda = K,
                          b = x, b_offset = r0 * K, ldb = K, c = got, ldc = N } })
  return p, got, want, x, w
end

for _, c in ipairs { { 37, 96, 64, "f32" }, { 5, 256, 128, "f32" }, { 64, 128, 256, "bf16" } } do
  local M, N, K, dt = c[1], c[2], c[3], c[4]
  t.test(string.format("gemm_step_equals_a_plain_kernel_M%d_N%d_K%d_%s", M, N, K, dt), function()
    local p, got, want = case(M, N, K, M + 9, 3, 7, 2, dt)
    local ok, err = p:run()
    t.truthy(ok, tostring(err))
    local cmp = got
    if dt == "bf16" then   -- the plain kernel's fp32 sums rounded as cuBLAS rounds its bf16 output
      local host = assert(cuda.to_host(got))
      local f = kwb.host.buffer("f32", M * N)
      for i = 1, M * N do f[i] = host[i] end
      cmp = assert(cuda.from_host(f))
    end
    local d = cuda.compare(cmp, want, { atol = 1e-3, rtol = dt == "bf16" and 8e-3 or 1e-4 })
    fig(string.format("gemm_%dx%dx%d_%s_max_abs", M, N, K, dt), d.max_abs)
    t.eq(d.poison, 0, "every element written")
    t.truthy(d.ok, string.format("within tolerance (max abs %.3g, %d bad)", d.max_abs, d.bad))
    -- the plan's graph captures the gemm: timed and replayed
    local st = assert(cuda.time(p, { cap = 0.05 }))
    fig(string.format("gemm_%dx%dx%d_%s_median_us", M, N, K, dt), st.median * 1e6)
    t.truthy(st.median > 0 and st.graph, "graph-timed")
    got:poison()
    t.truthy(p:replay() > 0, "replayed")
    t.eq(cuda.compare(got, got).poison, 0, "the replay wrote its output")
  end)
end

t.test("gemm_step_misuse_with_real_buffers_raises", function()
  local x = assert(cuda.buffer("bf16", 4 * 16))
  local w = assert(cuda.buffer("bf16", 8 * 16))
  local y = assert(cuda.buffer("f32", 4 * 8))
  local p = assert(cuda.plan())
  t.raises(function() p:add { gemm = { trans_a = true, m = 8, n = 4, k = 16, a = w, lda = 16, b = x, b_offset = 1,
                                       ldb = 16, c = y, ldc = 8 } } end,
           "gemm B: 64 elements from offset 1 pass the end of its buffer of 64")
  local i = assert(cuda.buffer("i32", 32))
  t.raises(function() p:add { gemm = { trans_a = true, m = 8, n = 4, k = 16, a = w, lda = 16, b = x, ldb = 16,
                                       c = i, ldc = 8 } } end, "gemm C must be bf16 or f32 (got i32)")
end)

-- The nvfp4_moe baseline at the recipe's model dimensions.
t.test("nvfp4_cublas_baseline_verifies_and_times_at_T_1_64_4096", function()
  local r = kwb.load "recipes/nvfp4_moe.lua"
  local p = r.problem
  r.shapes = {}
  for _, T in ipairs { 1, 64, 4096 } do
    local s = { T = T, H = 7168, I = 2048, E = 256, K = 8, skew = 0 }
    r.shapes[#r.shapes + 1] = { shape = s, key = p:shape_key(s) }
  end
  local h = require("kwb.measure").harness(r)
  local out = require("kwb.measure.baseline").measure(h, { name = "cublas", run_seed = "1", timing = r.timing, timeout = 10 })
  t.eq(out.error, nil, "measured")
  for _, sh in ipairs(r.shapes) do
    local st, ck = out.shapes[sh.key], out.check[sh.key]
    print(string.format("baseline cublas at T=%d: median %.3f ms (p10 %.3f, p90 %.3f, n %d), rel_l2 %.3g, max_abs %.3g",
                        sh.shape.T, st.median * 1e3, st.p10 * 1e3, st.p90 * 1e3, st.n, ck.rel_l2, ck.max_abs))
    fig("cublas_T" .. sh.shape.T .. "_ms", st.median * 1e3)
    t.truthy(ck.rel_l2 <= 5e-3, "within the problem's tolerance at " .. sh.key)
  end
  local free = cuda.device(0)
  fig("device_memory_gb", free and free.memory_bytes / 1e9)
end)

t.done()
