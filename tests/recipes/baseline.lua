-- tests/recipes/baseline.lua: tests/recipes/elsewhere.lua with a baseline
-- that is the fastest kernel of all (the naive matmul once at both shapes,
-- where the start does it 10 times): were it a candidate it would be the
-- best and each shape's winner. tests/lua/test_baseline.lua pins that it is
-- neither, and the summary's "vs baseline" figures.
local matmul = require "kwb.problems.matmul"

return kwb.recipe {
  name     = "baseline_matmul",
  problem  = matmul {},
  shapes   = { n = { 48, 96 } },
  start    = { file = "../candidates/shape_reps.c", defines = { SMALL_REPS = 10, LARGE_REPS = 10 } },
  baseline = { file = "../candidates/shape_reps.c", defines = { SMALL_REPS = 1, LARGE_REPS = 1 } },
  template = "../candidates/shape_reps.c",
  strategy = require("kwb.strategies.list")({ { SMALL_REPS = 10, LARGE_REPS = 1 },
                                              { SMALL_REPS = 1, LARGE_REPS = 40 } }, "elsewhere"),
  flags    = { "-O1" },
  budget   = { candidates = 10, minutes = 2, timeout = 5 },
  timing   = { warmup = 0.002, min_samples = 3, cap = 0.05, target = 0.05 },
  seed     = 11,
}
