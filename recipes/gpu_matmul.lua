-- recipes/gpu_matmul.lua: a shared-memory tiled SGEMM tuned on this GPU, in
-- the style of the classic auto-tuner matmul example: block tile BM x BN,
-- K slice BK, per-thread micro-tile TM x TN. Start: one thread per element of
-- C, straight from global memory.
--   kwb recipes/gpu_matmul.lua [--json] [--budget N] [--strategy anneal]
local sgemm = require "kwb.problems.sgemm"

local PAD = 4   -- the template's default padding of its shared tiles

return kwb.recipe {
  name     = "gpu_matmul",
  backend  = "cuda",
  problem  = sgemm { fn = "sgemm_tiled" },
  shapes   = { { M = 512, N = 512, K = 512 }, { M = 1024, N = 1024, K = 1024 }, { M = 4096, N = 4096, K = 4096 } },
  start    = { file = "../kernels/cuda/sgemm_naive.cu", defines = { TILE = 16 } },
  template = "../kernels/cuda/matmul_tiled.cu",
  space    = {
    BM = { 32, 64, 128, 256 }, BN = { 32, 64, 128, 256 }, BK = { 8, 16, 32 }, TM = { 2, 4, 8 }, TN = { 2, 4, 8 },
    restrict = function(p)
      local threads = (p.BM // p.TM) * (p.BN // p.TN)
      local smem = 4 * p.BK * (p.BM + p.BN + 2 * PAD)
      return threads >= 64 and threads <= 1024 and smem <= 48 * 1024
    end,
  },
  launch   = function(shape, p)
    if p.TILE then   -- the start kernel
      return { grid = { (shape.N + p.TILE - 1) // p.TILE, (shape.M + p.TILE - 1) // p.TILE }, block = { p.TILE, p.TILE } }
    end
    return { grid = { (shape.N + p.BN - 1) // p.BN, (shape.M + p.BM - 1) // p.BM },
             block = { (p.BM // p.TM) * (p.BN // p.TN) } }
  end,
  strategy = "anneal",
  budget   = { candidates = 60, minutes = 6, timeout = 5 },
  timing   = { warmup = 0.01, min_samples = 5, cap = 0.2, target = 0.01 },
}
