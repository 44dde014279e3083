-- tests/recipes/elsewhere.lua: a pick that does not win every shape. The
-- start does the naive matmul 10 times at both shapes; "large" once at n=96
-- (geomean about 3.2x: accepted), then "small" once at n=48 but 40 times at
-- n=96 (about 1.6x: slower), though tenfold faster than the pick at n=48.
-- tests/lua/test_loop.lua pins the summary's `elsewhere`.
local matmul = require "kwb.problems.matmul"

return kwb.recipe {
  name     = "elsewhere_matmul",
  problem  = matmul {},
  shapes   = { n = { 48, 96 } },
  start    = { file = "../candidates/shape_reps.c", defines = { SMALL_REPS = 10, LARGE_REPS = 10 } },
  template = "../candidates/shape_reps.c",
  strategy = require("kwb.strategies.list")({ { SMALL_REPS = 10, LARGE_REPS = 1 },
                                              { SMALL_REPS = 1, LARGE_REPS = 40 } }, "elsewhere"),
  flags    = { "-O1" },
  budget   = { candidates = 10, minutes = 2, timeout = 5 },
  timing   = { warmup = 0.002, min_samples = 3, cap = 0.05, target = 0.05 },
  seed     = 11,
}
