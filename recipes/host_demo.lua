-- recipes/host_demo.lua: the CPU demo. Compiles a tiled C matmul and the naive
-- triple loop, verifies both against a double-accumulating reference on fresh
-- random inputs (outputs poisoned first, and checked again after timing),
-- times them, and prints a table.
local host, figures = kwb.host, kwb.figures
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local kernels = here .. "/../kernels/host/"

local sizes = { 64, 128, 256, 384 }
local timing = { cap = 0.5, min_samples = 5 }
local tol = { atol = 1e-3, rtol = 1e-4 }
local proto = "void %s(int n, const float *a, const float *b, float *c)"

local function build(file, name, defines)
  local mod = assert(host.compile { file = kernels .. file, defines = defines, flags = { "-O3" } })
  return assert(mod:fn(proto:format(name)))
end

local ref = build("matmul_ref.c", "matmul_ref")
local naive = build("matmul_naive.c", "matmul")
local tiled = build("matmul_tiled.c", "matmul", { BM = 64, BN = 256, BK = 64 })

-- Run kernel into a poisoned c, time it, and verify c before and after timing.
local function measure(kernel, n, a, b, c, want)
  c:poison()
  kernel(n, a, b, c)
  local d = host.compare(c, want, tol)
  local t = host.time(kernel, { n, a, b, c }, timing)
  local after = host.compare(c, want, tol)
  return t, d, d.ok and after.ok
end

local rows = {}
for i, n in ipairs(sizes) do
  local a = host.buffer("f32", n * n):fill_normal(1000 + i)
  local b = host.buffer("f32", n * n):fill_normal(2000 + i)
  local want, c = host.buffer("f32", n * n), host.buffer("f32", n * n)
  ref(n, a, b, want)
  local tn, _, ok_n = measure(naive, n, a, b, c, want)
  local tt, dt, ok_t = measure(tiled, n, a, b, c, want)
  rows[#rows + 1] = {
    n, figures.time(tn.median), figures.time(tt.median),
    string.format("%.2fx", tn.median / tt.median),
    string.format("%.2f", 2 * n ^ 3 / tt.median / 1e9),
    string.format("%.1e", dt.rel_l2),
    string.format("%.1f%%", 100 * tt.spread),
    (ok_n and ok_t) and "yes" or "NO",
  }
end

print("host matmul, f32, C = A*B (n x n); medians per call; verified against a float64-accumulating reference")
figures.print_table({ "n", "naive", "tiled", "speedup", "tiled GFLOP/s", "rel L2", "spread", "verified" }, rows)
