-- recipes/kt_vecadd.lua: Kernel Tuner's vector_add example space, for
-- comparing evaluation throughput (docs/perf.md): c = a + b over 10^7 fp32
-- elements, one element a thread, BLOCK = 128 + 64 i threads a block for i in
-- 0..14: 15 settings (kernels/cuda/vecadd.cu with VEC = ITEMS = 1). The
-- start is the first of them, so all 15 are judged once: the start, then the
-- 14 others as candidates. Every one is verified and judged like any other.
--   kwb recipes/kt_vecadd.lua [--json]
local vecadd = require "kwb.problems.vecadd"

local blocks = {}
for i = 0, 14 do blocks[#blocks + 1] = 128 + 64 * i end

return kwb.recipe {
  name     = "kt_vecadd",
  backend  = "cuda",
  problem  = vecadd {},
  shapes   = { n = { 10000000 } },
  start    = { file = "../kernels/cuda/vecadd.cu", defines = { BLOCK = 128, VEC = 1, ITEMS = 1 } },
  template = "../kernels/cuda/vecadd.cu",
  space    = { BLOCK = blocks, VEC = { 1 }, ITEMS = { 1 } },
  launch   = function(shape, p)
    return { grid = { (shape.n + p.BLOCK - 1) // p.BLOCK }, block = { p.BLOCK } }
  end,
  strategy = "grid",
  budget   = { candidates = 15, minutes = 5, timeout = 5 },
  timing   = { warmup = 0.01, min_samples = 5, cap = 0.2, target = 0.01 },
}
