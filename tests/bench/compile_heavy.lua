-- tests/bench/compile_heavy.lua: a host recipe whose candidates spend most of
-- their time compiling (the tiled matmul at -O3 with aggressive unrolling, one
-- small shape, short timings); the fixed list of 32 parameter sets below is
-- proposed in order. Used by tests/bench/workers_bench.lua.
local matmul = require "kwb.problems.matmul"

local list = {}
for _, bn in ipairs { 64, 128 } do
  for _, bm in ipairs { 8, 16, 32, 64 } do
    for _, unroll in ipairs { 1, 2, 4, 8 } do
      list[#list + 1] = { BM = bm, BN = bn, BK = 32, UNROLL = unroll }
    end
  end
end

return kwb.recipe {
  name     = "compile_heavy_matmul",
  problem  = matmul {},
  shapes   = { n = { 48 } },
  start    = "../../kernels/host/matmul_naive.c",
  template = "../../kernels/host/matmul_tiled.c",
  strategy = require("kwb.strategies.list")(list, "fixed"),
  flags    = { "-O3", "-march=native", "-funroll-all-loops" },
  budget   = { candidates = #list, minutes = 10, timeout = 5 },
  timing   = { warmup = 0.001, min_samples = 3, cap = 0.005, target = 0.05 },
  race     = false,
  seed     = 1,
}
