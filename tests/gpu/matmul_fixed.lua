-- tests/gpu/matmul_fixed.lua: recipes/gpu_matmul.lua's problem, template and
-- launch plan with a fixed list of 32 candidates proposed in order and no
-- racing (every shape fully timed), so that two runs evaluate the same
-- candidates. Used by tests/gpu/multi_gpu.lua (throughput with 1 and 2 GPUs).
local sgemm = require "kwb.problems.sgemm"

local list = {}
for _, bm in ipairs { 64, 128 } do
  for _, bn in ipairs { 64, 128 } do
    for _, bk in ipairs { 8, 16 } do
      for _, t in ipairs { { 4, 4 }, { 8, 4 }, { 4, 8 }, { 8, 8 } } do
        list[#list + 1] = { BM = bm, BN = bn, BK = bk, TM = t[1], TN = t[2] }
      end
    end
  end
end

return kwb.recipe {
  name     = "gpu_matmul_fixed",
  backend  = "cuda",
  problem  = sgemm { fn = "sgemm_tiled" },
  shapes   = { { M = 1024, N = 1024, K = 1024 }, { M = 4096, N = 4096, K = 4096 } },
  start    = { file = "../../kernels/cuda/sgemm_naive.cu", defines = { TILE = 16 } },
  template = "../../kernels/cuda/matmul_tiled.cu",
  launch   = function(shape, p)
    if p.TILE then
      return { grid = { (shape.N + p.TILE - 1) // p.TILE, (shape.M + p.TILE - 1) // p.TILE }, block = { p.TILE, p.TILE } }
    end
    return { grid = { (shape.N + p.BN - 1) // p.BN, (shape.M + p.BM - 1) // p.BM },
             block = { (p.BM // p.TM) * (p.BN // p.TN) } }
  end,
  strategy = require("kwb.strategies.list")(list, "fixed"),
  budget   = { candidates = #list, minutes = 10, timeout = 5 },
  timing   = { warmup = 0.01, min_samples = 5, cap = 0.2, target = 0.01 },
  race     = false,
  seed     = 1,
}
