-- tests/gpu/cuda.lua: the CUDA backend on a real GPU. Run by tests/gpu/run
-- (`make gpu-test`) with the carried ./kwb; prints "ok"/"FAIL" lines and the
-- figures docs/perf.md records. arg[1]: a file to write the figures to (JSON).
local t = require "t"
local cuda = kwb.cuda
local figures = {}

local function fig(k, v) figures[k] = v; print(string.format("figure %s = %s", k, tostring(v))) end

local dev = assert(cuda.device(0))
print(string.format("device: %s sm_%s, %d SMs, L2 %d bytes, driver API %s", dev.name,
  dev.cc:gsub("%.", ""), dev.sms, dev.l2_bytes, dev.cuda_driver_version))
fig("device_kind", cuda.device_kind(dev))

t.test("doctor_measures_and_stores_ceilings", function()
  t.eq(require("kwb.cli.doctor").main(), 0, "doctor exit status")
  local c = assert(cuda.ceilings())
  t.truthy(c.copy_bytes_per_s > 1e11, "copy ceiling above 100 GB/s")
  t.truthy(c.bf16_flops_per_s > 1e13, "bf16 ceiling above 10 TFLOP/s")
  fig("ceiling_copy_GBs", string.format("%.0f", c.copy_bytes_per_s / 1e9))
  fig("ceiling_bf16_TFLOPs", string.format("%.0f (%s)", c.bf16_flops_per_s / 1e12, c.bf16_via))
  fig("ceiling_fma_TFLOPs", string.format("%.1f", c.fma_flops_per_s / 1e12))
end)

local mod = assert(cuda.compile { file = "kernels/cuda/copy.cu" })
local copy4 = assert(mod:kernel "copy4")
local axpb = assert(mod:kernel("axpb", "void axpb(const float *x, float *y, float a, float b, int n)"))

t.test("resources_match_the_driver_attributes", function()
  t.eq(mod.arch, dev.arch, "arch from the device")
  local a = copy4.attributes
  t.eq(mod.resources.copy4.registers, a.registers, "registers")
  t.eq(mod.resources.copy4.static_smem, a.static_smem, "static smem")
  t.eq(copy4.nparams, 3, "parameters from cuFuncGetParamInfo")
  t.eq(copy4.params[3].size, 8, "long long parameter size")
end)

t.test("device_fills_match_host_fills_bit_for_bit", function()
  for _, dt in ipairs { "f32", "f64", "f16", "bf16", "i32", "u8" } do
    local n = 100003
    local d = assert(cuda.buffer(dt, n):fill_uniform(7, -3, 5))
    local h = kwb.host.buffer(dt, n):fill_uniform(7, -3, 5)
    t.eq(cuda.to_host(d):checksum(), h:checksum(), dt .. " uniform fill")
  end
  local d = assert(cuda.buffer("f32", 100000):fill_normal(3, 1, 2))
  local h = kwb.host.buffer("f32", 100000):fill_normal(3, 1, 2)
  local cmp = kwb.host.compare(cuda.to_host(d), h, { rtol = 1e-6, atol = 1e-6 })
  t.eq(cmp.bad, 0, "normal fill agrees to 1e-6")
  fig("normal_fill_max_abs_host_vs_device", cmp.max_abs)
end)

-- the timed runs' stream: the same distribution (mean and deviation of 2^22
-- draws within 5 standard errors), another stream than fill_normal's, and
-- faster (the figure beside it)
t.test("device_normal_stream_has_the_distribution_and_is_not_fill_normals", function()
  local n = 1 << 22
  local d = assert(cuda.buffer("f32", n))
  assert(d:fill_normal_stream(9, 1, 2))
  local h = cuda.to_host(d)
  local sum, sq = 0, 0
  for i = 1, n do local v = h[i]; sum = sum + v; sq = sq + v * v end
  local mean = sum / n
  local sd = math.sqrt(sq / n - mean * mean)
  t.truthy(math.abs(mean - 1) < 5 * 2 / math.sqrt(n), "mean " .. mean)
  t.truthy(math.abs(sd - 2) < 5 * 2 / math.sqrt(2 * n), "deviation " .. sd)
  local other = cuda.to_host(assert(cuda.buffer("f32", n)):fill_normal(9, 1, 2))
  t.truthy(kwb.host.compare(h, other, { atol = 1e-3, rtol = 0 }).bad > n // 2, "another stream")
  local big = assert(cuda.buffer("f32", 1 << 27))
  local core = require "kwb.core"
  local function rate(f)
    assert(f(big, 1)); assert(big:checksum())   -- (waits)
    local t0 = core.now()
    for s = 2, 6 do assert(f(big, s)) end
    assert(big:checksum())
    return 5 * big.bytes / (core.now() - t0)
  end
  local fast, slow = rate(big.fill_normal_stream), rate(big.fill_normal)
  fig("fill_normal_stream_gb_s", fast / 1e9)
  fig("fill_normal_gb_s", slow / 1e9)
  print(string.format("# normal fills of 512 MiB: the stream %.0f GB/s, fill_normal %.0f GB/s", fast / 1e9, slow / 1e9))
end)

t.test("poison_then_compare_counts_unwritten_elements", function()
  local n = 1 << 20
  local x = assert(cuda.buffer("f32", n):fill_uniform(11))
  local y = assert(cuda.buffer("f32", n):poison())
  local hx = cuda.to_host(x)
  local ref = kwb.host.buffer("f32", n)
  for i = 1, n do ref[i] = 2 * hx[i] + 1 end
  local dref = assert(cuda.from_host(ref))
  local d = assert(cuda.compare(y, dref))
  t.eq(d.poison, n, "all poisoned before the run")
  t.eq(d.first_bad, 1, "first bad element")
  -- a launch that covers only half the output leaves half the poison
  assert(cuda.plan { { axpb, grid = n // 512, block = 256, args = { x, y, 2.0, 1.0, n // 2 } } }:run())
  d = assert(cuda.compare(y, dref, { rtol = 1e-6 }))
  t.eq(d.poison, n // 2, "half still poisoned")
  t.eq(d.first_bad, n // 2 + 1, "first unwritten element")
  local before = cuda.checksums { x }
  assert(cuda.plan { { axpb, grid = n // 256, block = 256, args = { x, y, 2.0, 1.0, n } } }:run())
  d = assert(cuda.compare(y, dref, { rtol = 1e-6 }))
  t.truthy(d.ok, "full launch matches the reference")
  t.eq(d.poison, 0, "no poison left")
  t.eq(cuda.checksums({ x })[1], before[1], "input unchanged")
  t.eq(x:checksum(), cuda.checksum_host(x:raw()), "device checksum equals host checksum")
  -- a wrong value is counted
  ref[5] = ref[5] + 1
  d = assert(cuda.compare(y, assert(cuda.from_host(ref)), { rtol = 1e-6 }))
  t.eq(d.bad, 1, "one wrong element")
  t.eq(d.first_bad, 5, "its index")
end)

t.test("fp8_and_fp4_buffers_fill_and_compare", function()
  local a = assert(cuda.buffer("e4m3", 1000):fill_uniform(1, -2, 2))
  t.eq(a.bytes, 1000, "e4m3 bytes")
  local b = assert(cuda.buffer("e2m1", 1001):fill_uniform(1, -6, 6))
  t.eq(b.bytes, 501, "e2m1 packs two a byte")
  local f = assert(cuda.buffer("f32", 1000):fill_uniform(1, -2, 2))
  local d = assert(cuda.compare(a, f))
  t.truthy(d.max_abs > 0 and d.max_abs <= 0.125, "e4m3 rounding error within half an ulp at 2 (got " .. d.max_abs .. ")")
  local one = assert(cuda.buffer("e4m3", 4):fill(1.0))
  t.eq(one:raw(), "\x38\x38\x38\x38", "1.0 in e4m3 is 0x38")
  local fp4 = assert(cuda.buffer("e2m1", 4):fill(-3.0))
  t.eq(fp4:raw(), "\xdd\xdd", "-3 in e2m1 is 0xd, packed")
end)

t.test("dynamic_shared_memory_above_48k", function()
  local m = assert(cuda.compile { file = "kernels/cuda/gpu_tests.cu" })
  local k = assert(m:kernel "smem_reverse")
  local words, blocks = 100 * 256, 64      -- 100 KiB a block
  local x = assert(cuda.buffer("f32", words * blocks):fill_uniform(5))
  local y = assert(cuda.buffer("f32", words * blocks):poison())
  assert(cuda.plan { { k, grid = blocks, block = 256, smem = words * 4, args = { x, y, words } } }:run())
  local hx, hy = cuda.to_host(x), cuda.to_host(y)
  t.eq(hy[1], hx[words], "reversed within the block")
  t.eq(hy[words * blocks], hx[words * (blocks - 1) + 1], "last block")
end)

t.test("cluster_launch_gives_cluster_ranks", function()
  local m = assert(cuda.compile { file = "kernels/cuda/gpu_tests.cu" })
  local k = assert(m:kernel "cluster_rank")
  local out = assert(cuda.buffer("i32", 8):poison())
  assert(cuda.plan { { k, grid = 8, block = 32, cluster = { 4 }, args = { out } } }:run())
  t.eq(table.concat(cuda.to_host(out):totable(), ","), "0,1,2,3,0,1,2,3", "ranks")
end)

t.test("nvcc_module_launcher_runs_and_times_on_the_harness_stream", function()
  local m, msg, info = cuda.compile { file = "kernels/cuda/axpb_module.cu", nvcc = true }
  if not m then error(msg .. "\n" .. (info and info.log or "")) end
  local l = assert(m:launcher("axpb_launch", "int f(const float *x, float *y, float a, float b, int n)"))
  local n = 1 << 20
  local x = assert(cuda.buffer("f32", n):fill_uniform(2))
  local y = assert(cuda.buffer("f32", n):poison())
  local ref = assert(cuda.buffer("f32", n):poison())
  local p = cuda.plan { { l, args = { x, y, 3.0, -1.0, n } } }
  assert(p:run())
  assert(cuda.plan { { axpb, grid = n // 256, block = 256, args = { x, ref, 3.0, -1.0, n } } }:run())
  local d = assert(cuda.compare(y, ref))
  t.truthy(d.ok, "nvcc module equals the NVRTC kernel")
  local st = assert(cuda.time(p, { cap = 0.3 }))
  t.truthy(st.median > 0 and st.graph, "launcher timed in a graph")
end)

-- sgemm's CUDA reference (64 x 64 tiles in shared memory as double) gives
-- the bits of the kernel it replaced (a thread per element, each product
-- converted and summed in k order), at odd shapes and across tile edges; and
-- the time of each at 4096^3, the reference's cost in every candidate's checks
t.test("sgemm_reference_tiles_give_the_one_thread_per_element_bits", function()
  local proto = "void sgemm_ref(int M, int N, int K, float alpha, const float *A, const float *B, float beta, float *C)"
  local p = require("kwb.problems.sgemm")()
  local tiled_mod = assert(cuda.compile { source = p.reference.cuda.source, name = "sgemm_ref.cu" })
  local tiled = assert(tiled_mod:kernel("sgemm_ref", proto))
  local plain_mod = assert(cuda.compile { name = "sgemm_ref_plain.cu", source = [[
extern "C" __global__ void sgemm_ref(int M, int N, int K, float alpha, const float *A, const float *B,
                                     float beta, float *C) {
    int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M || j >= N) return;
    double acc = 0;
    for (int k = 0; k < K; k++) acc += (double)A[(long long)i * K + k] * (double)B[(long long)k * N + j];
    C[(long long)i * N + j] = (float)(alpha * acc);
}]] })
  local plain = assert(plain_mod:kernel("sgemm_ref", proto))
  local function plans(M, N, K)
    local A = assert(cuda.buffer("f32", M * K):fill_normal(M + 1, 0, 1))
    local B = assert(cuda.buffer("f32", K * N):fill_normal(N + 2, 0, 1))
    local C1, C2 = assert(cuda.buffer("f32", M * N):poison()), assert(cuda.buffer("f32", M * N):poison())
    local l = p.reference.cuda.launch { M = M, N = N, K = K }
    return cuda.plan { { tiled, grid = l.grid, block = l.block, args = { M, N, K, 1.0, A, B, 0.0, C1 } } },
           cuda.plan { { plain, grid = { (N + 15) // 16, (M + 15) // 16 }, block = { 16, 16 },
                         args = { M, N, K, 1.0, A, B, 0.0, C2 } } }, C1, C2
  end
  for _, s in ipairs { { 1, 1, 1 }, { 67, 45, 131 }, { 64, 64, 16 }, { 130, 200, 97 }, { 257, 129, 1000 } } do
    local pt, pp, C1, C2 = plans(s[1], s[2], s[3])
    assert(pt:run()); assert(pp:run())
    local d = assert(cuda.compare(C1, C2, { atol = 0, rtol = 0 }))
    t.eq(d.bad + d.poison, 0, string.format("M=%d N=%d K=%d: every element the same", s[1], s[2], s[3]))
  end
  local pt, pp = plans(4096, 4096, 4096)
  fig("sgemm_ref_4096_tiled_ms", string.format("%.2f", assert(cuda.time(pt, { cap = 0.5 })).median * 1e3))
  fig("sgemm_ref_4096_plain_ms", string.format("%.2f", assert(cuda.time(pp, { cap = 0.5 })).median * 1e3))
end)

-- the copy kernel as a candidate, against the doctor's cuMemcpyDtoD
local n4 = (1 << 30) // 16                       -- 1 GiB in, 1 GiB out
local x = assert(cuda.buffer("f32", 4 * n4):fill_uniform(9))
local y = assert(cuda.buffer("f32", 4 * n4):poison())
local copy_plan = cuda.plan { { copy4, grid = dev.sms * 16, block = 512, args = { x, y, n4 } } }

t.test("copy_candidate_reaches_the_copy_ceiling", function()
  assert(copy_plan:run())
  t.truthy(assert(cuda.compare(y, x)).ok, "copy is exact")
  local st = assert(cuda.time(copy_plan))
  local r = cuda.roofline(st, { bytes = 2 * 16 * n4 })
  fig("copy_kernel_median_ms", string.format("%.4f", st.median * 1e3))
  fig("copy_kernel_GBs", string.format("%.0f", r.gbs))
  fig("copy_kernel_pct_of_memcpy", string.format("%.1f", r.pct_bw))
  fig("copy_kernel_spread", string.format("%.4f", st.spread))
  fig("copy_kernel_n", st.n)
  if st.clocks then
    fig("copy_kernel_clocks", string.format("SM %d->%d MHz (max %d), %d->%d C, throttled %s",
      st.clocks.sm_mhz_before, st.clocks.sm_mhz_after, st.clocks.sm_mhz_max, st.clocks.temp_before,
      st.clocks.temp_after, tostring(st.clocks.throttled)))
  end
  t.truthy(r.pct_bw >= 90, string.format("copy kernel at %.1f%% of cuMemcpyDtoD", r.pct_bw))
end)

t.test("five_measurements_reproduce_within_one_percent", function()
  local med = {}
  for i = 1, 5 do med[i] = assert(cuda.time(copy_plan)).median end
  local lo, hi, sum = math.huge, 0, 0
  for _, m in ipairs(med) do lo = math.min(lo, m); hi = math.max(hi, m); sum = sum + m end
  local rep = (hi - lo) / (sum / 5)
  local parts = {}
  for i, m in ipairs(med) do parts[i] = string.format("%.4f", m * 1e3) end
  fig("repro_medians_ms", table.concat(parts, " "))
  fig("repro_pct", string.format("%.3f", 100 * rep))
  t.truthy(rep <= 0.01, string.format("reproducibility %.3f%%", 100 * rep))
end)

t.test("hot_and_plain_launch_timing", function()
  local hot = assert(cuda.time(copy_plan, { hot = true }))
  local plain = assert(cuda.time(copy_plan, { graph = false }))
  fig("copy_kernel_hot_ms", string.format("%.4f", hot.median * 1e3))
  fig("copy_kernel_nograph_ms", string.format("%.4f", plain.median * 1e3))
  t.truthy(hot.cold == false and plain.graph == false, "options reach the timer")
end)

-- a small kernel for the ncu comparison: 64 MiB axpb (L2-cold, like ncu's
-- default cache control)
t.test("time_for_the_ncu_comparison", function()
  local n = 16 << 20
  local a = assert(cuda.buffer("f32", n):fill_uniform(4))
  local b = assert(cuda.buffer("f32", n):poison())
  local p = cuda.plan { { axpb, grid = n // 256, block = 256, args = { a, b, 2.0, 1.0, n } } }
  local st = assert(cuda.time(p))
  fig("axpb_64MiB_median_us", string.format("%.3f", st.median * 1e6))
  fig("axpb_64MiB_nograph_median_us", string.format("%.3f", assert(cuda.time(p, { graph = false })).median * 1e6))
  fig("axpb_64MiB_hot_median_us", string.format("%.3f", assert(cuda.time(p, { hot = true })).median * 1e6))
  fig("copy_kernel_median_us", string.format("%.3f", assert(cuda.time(copy_plan)).median * 1e6))
end)

t.test("parallel_nvrtc_compiles_scale", function()
  local src = io.open("kernels/cuda/copy.cu"):read("a")
  local function specs(tag)
    local s = {}
    -- each variant's PTX differs, so the driver's compute cache cannot answer
    local extra = '\nextern "C" __global__ void variant(float *p) { p[threadIdx.x] = VARIANT * p[0]; }\n'
    for i = 1, 16 do s[i] = { source = src .. extra, defines = { VARIANT = tag * 100 + i } } end
    return s
  end
  local t0 = kwb.now()
  for _, r in ipairs(cuda.compile_all(specs(1), 1)) do assert(r.hash, r.error) end
  local t1 = kwb.now()
  for _, r in ipairs(cuda.compile_all(specs(2), 16)) do assert(r.hash, r.error) end
  local t2 = kwb.now()
  fig("compile16_1thread_ms", string.format("%.0f", (t1 - t0) * 1e3))
  fig("compile16_16threads_ms", string.format("%.0f", (t2 - t1) * 1e3))
  local again = cuda.compile_all(specs(2), 16)
  t.truthy(again[1].cached, "second build of the same spec comes from the build cache")
end)

t.test("own_wmma_kernel_measures_the_bf16_rate", function()
  local rate, via = assert(require("kwb.core").cuda_measure_bf16(4096, true))
  t.eq(via, "kwb-wmma", "the fallback path")
  fig("wmma_bf16_TFLOPs", string.format("%.0f", rate / 1e12))
  t.truthy(rate > 5e13, string.format("WMMA rate %.0f TFLOP/s", rate / 1e12))
end)

t.test("a_plan_of_two_kernels_runs_and_times_as_one_unit", function()
  local n = 1 << 22
  local a = assert(cuda.buffer("f32", n):fill_uniform(21))
  local b = assert(cuda.buffer("f32", n):poison())
  local c = assert(cuda.buffer("f32", n):poison())
  local p = cuda.plan {
    { axpb, grid = n // 256, block = 256, args = { a, b, 2.0, 1.0, n } },
    { copy4, grid = dev.sms * 4, block = 256, args = { b, c, n // 4 } },
  }
  assert(p:run())
  local ref = assert(cuda.buffer("f32", n):poison())
  assert(cuda.plan { { axpb, grid = n // 256, block = 256, args = { a, ref, 2.0, 1.0, n } } }:run())
  t.truthy(assert(cuda.compare(c, ref)).ok, "second kernel saw the first one's output")
  local both = assert(p:time())
  local one = assert(cuda.time(cuda.plan { { axpb, grid = n // 256, block = 256, args = { a, b, 2.0, 1.0, n } } }))
  fig("two_step_plan_us", string.format("%.2f (axpb alone %.2f)", both.median * 1e6, one.median * 1e6))
  t.truthy(both.median > one.median, "the plan's time covers both steps")
end)

t.test("outputs_poisoned_before_every_timed_run", function()
  -- count(c): 1 where c held the poison (NaN), else c + 1: counts the runs
  -- since the output was last poisoned.
  local m = assert(cuda.compile { source = [[
    extern "C" __global__ void count(float *c, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) c[i] = c[i] != c[i] ? 1.0f : c[i] + 1.0f;
    }]], name = "count.cu" })
  local k = assert(m:kernel("count", "void count(float *c, int n)"))
  local n = 1 << 20
  local function timed_counts(poison)
    local c = assert(cuda.buffer("f32", n):poison())
    local p = cuda.plan { { k, grid = n // 256, block = 256, args = { c, n } } }
    if poison then p:poison_before { c } end
    local st = assert(p:time { cap = 0.05, min_samples = 5 })
    local h = cuda.to_host(c)
    return h[1], h[n], st
  end
  local first, last, st = timed_counts(true)
  t.eq(first, 1.0, "every timed run starts from poison (graph replay)")
  t.eq(last, 1.0, "... to the last element")
  t.truthy(st.n >= 5, "samples")
  local kept = timed_counts(false)
  t.truthy(kept > 5, "without poison_before the output carries over between runs: " .. kept)
  local c = assert(cuda.buffer("f32", n):poison())
  local p = cuda.plan { { k, grid = n // 256, block = 256, args = { c, n } } }:poison_before { c }
  assert(p:time { cap = 0.05, min_samples = 5, graph = false })
  t.eq(cuda.to_host(c)[n], 1.0, "plain launches too")
end)

t.test("plan_misuse_raises", function()
  t.raises(function() cuda.plan { { copy4, grid = 1, block = 32, args = { x, y } } } end, "kernel takes 3 arguments, got 2")
  t.raises(function() cuda.plan { { axpb, grid = 1, block = 32, args = { x, y, 1.0, 2.0, "n" } } } end, "argument 5 must be an integer")
  t.raises(function() cuda.plan { { copy4, grid = 0, block = 32, args = { x, y, 1 } } } end, "grid must be >= 1")
end)

-- last: a fault leaves the context unusable, as it would a worker's
t.test("faulting_kernel_reports_launch_failed", function()
  local m = assert(cuda.compile { file = "kernels/cuda/gpu_tests.cu" })
  local k = assert(m:kernel "fault")
  local ok, msg, info = cuda.plan { { k, grid = 1, block = 32, args = { n = 1 } } }:run()   -- a null pointer
  t.eq(ok, nil, "run result")
  t.eq(info.code, "launch-failed", "code")
  t.truthy(msg:find("CUDA_ERROR_ILLEGAL_ADDRESS", 1, true), "message: " .. msg)
  print("fault message: " .. msg)
end)

if arg and arg[1] then
  local f = assert(io.open(arg[1], "w"))
  f:write(require("cjson").encode(figures), "\n")
  f:close()
end
t.done()
