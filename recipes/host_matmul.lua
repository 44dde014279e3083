-- recipes/host_matmul.lua: the fastest verified C matmul on this CPU, from
-- the naive triple loop to a cache-blocked, unrolled kernel. Runs anywhere a
-- C compiler does (CI included): kwb recipes/host_matmul.lua [--json] [--budget N]
local matmul = require "kwb.problems.matmul"

return kwb.recipe {
  name     = "host_matmul",
  problem  = matmul {},
  shapes   = { n = { 64, 128, 200 } },     -- 200: tiles that do not divide n
  start    = "../kernels/host/matmul_naive.c",
  baseline = { file = "../kernels/host/matmul_ref.c", fn = "matmul_ref" },   -- timed beside the pick, never a candidate
  template = "../kernels/host/matmul_tiled.c",
  space    = {
    BM = { 4, 8, 16, 32, 64 }, BN = { 32, 64, 128, 256 }, BK = { 8, 16, 32, 64, 128 },
    UNROLL = { 1, 2, 4, 8 },
    restrict = function(p) return p.UNROLL <= p.BK end,
  },
  strategy = "anneal",
  flags    = { "-O3", "-march=native" },
  forbid   = { "default" },
  budget   = { candidates = 30, minutes = 3, timeout = 5 },
  timing   = { warmup = 0.005, min_samples = 5, cap = 0.1, target = 0.01 },
  race     = 0.10,
}
