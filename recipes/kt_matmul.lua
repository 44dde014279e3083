-- recipes/kt_matmul.lua: Kernel Tuner's matmul example space, for comparing
-- evaluation throughput (docs/perf.md): C = A * B, 4096 x 4096 fp32, a block
-- of BSX x BSY threads, each TSX x TSY elements of C (kernels/cuda/kt_matmul.cu,
-- kwb's own kernel of that shape and those parameters). BSX in {16, 32, 64},
-- BSY in {1, 2, 4, 8, 16, 32}, TSX and TSY in {1, 2, 4, 8}, BSX == BSY * TSY,
-- at most 1024 threads: 40 settings, of which the 4 with BSX = 64 and TSX >= 4
-- need more than the 48 KB of static shared memory a block may have and fail
-- to build. The start is one of the 40 (the kernel's own defaults), so the
-- grid finds it evaluated and all 40 are judged once: the start, then the 39
-- others as candidates. Every one is verified and judged like any other.
--   kwb recipes/kt_matmul.lua [--json]
local sgemm = require "kwb.problems.sgemm"

return kwb.recipe {
  name     = "kt_matmul",
  backend  = "cuda",
  problem  = sgemm { fn = "kt_matmul" },
  shapes   = { { M = 4096, N = 4096, K = 4096 } },
  start    = { file = "../kernels/cuda/kt_matmul.cu", defines = { BSX = 32, BSY = 8, TSX = 4, TSY = 4 } },
  template = "../kernels/cuda/kt_matmul.cu",
  space    = {
    BSX = { 16, 32, 64 }, BSY = { 1, 2, 4, 8, 16, 32 }, TSX = { 1, 2, 4, 8 }, TSY = { 1, 2, 4, 8 },
    restrict = function(p) return p.BSX == p.BSY * p.TSY and p.BSX * p.BSY <= 1024 end,
  },
  launch   = function(shape, p)
    return { grid = { (shape.N + p.BSX * p.TSX - 1) // (p.BSX * p.TSX), (shape.M + p.BSY * p.TSY - 1) // (p.BSY * p.TSY) },
             block = { p.BSX, p.BSY } }
  end,
  strategy = "grid",
  budget   = { candidates = 40, minutes = 10, timeout = 5 },
  timing   = { warmup = 0.01, min_samples = 5, cap = 0.2, target = 0.01 },
}
