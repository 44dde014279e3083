-- recipes/gpu_vecadd.lua: the fastest verified vector add on this GPU, in the
-- style of the classic auto-tuner example: threads per block, elements per
-- access, accesses per thread. Start: one element per thread, 64 per block.
--   kwb recipes/gpu_vecadd.lua [--json] [--budget N] [--strategy grid]
local vecadd = require "kwb.problems.vecadd"

return kwb.recipe {
  name     = "gpu_vecadd",
  backend  = "cuda",
  problem  = vecadd {},
  shapes   = { n = { 1 << 20, 1 << 24, 1 << 27 } },
  start    = { file = "../kernels/cuda/vecadd.cu", defines = { BLOCK = 64, VEC = 1, ITEMS = 1 } },
  template = "../kernels/cuda/vecadd.cu",
  space    = {
    BLOCK = { 32, 64, 128, 256, 512, 1024 }, VEC = { 1, 2, 4 }, ITEMS = { 1, 2, 4, 8 },
  },
  launch   = function(shape, p)
    local per_block = p.BLOCK * p.VEC * p.ITEMS
    return { grid = { (shape.n + per_block - 1) // per_block }, block = { p.BLOCK } }
  end,
  strategy = "grid",
  budget   = { candidates = 72, minutes = 5, timeout = 5 },
  timing   = { warmup = 0.01, min_samples = 5, cap = 0.2, target = 0.01 },
}
