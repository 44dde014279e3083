-- tests/recipes/killed.lua: a host matmul whose candidates take a while, for
-- tests/lua/test_workers.lua: a worker killed from outside mid-evaluation.
local matmul = require "kwb.problems.matmul"

return kwb.recipe {
  name     = "killed",
  problem  = matmul {},
  shapes   = { n = { 160 } },
  verify_shapes = false,
  start    = "../../kernels/host/matmul_naive.c",
  flags    = { "-O0" },
  budget   = { candidates = 1, minutes = 2, timeout = 10 },
  timing   = { warmup = 0.05, min_samples = 5, cap = 0.5, target = 0.01 },
}
