-- tests/recipes/baseline_wrong.lua: a baseline that copies A into C instead
-- of multiplying: an error of the recipe, reported, and the run goes on
-- without it (tests/lua/test_baseline.lua).
local matmul = require "kwb.problems.matmul"

return kwb.recipe {
  name     = "baseline_wrong_matmul",
  problem  = matmul {},
  shapes   = { n = { 48 } },
  start    = "../../kernels/host/matmul_naive.c",
  baseline = { source = "void matmul(int n, const float *a, const float *b, float *c) {\n"
                        .. "    for (int i = 0; i < n * n; i++) c[i] = a[i];\n}\n", name = "copy_a.c" },
  template = "../candidates/shape_reps.c",
  -- (two passes at n = 48: with one pass at each shape it builds to the start kernel's code, a duplicate)
  strategy = require("kwb.strategies.list")({ { SMALL_REPS = 2, LARGE_REPS = 1 } }, "one"),
  flags    = { "-O1" },
  budget   = { candidates = 10, minutes = 2, timeout = 5 },
  timing   = { warmup = 0.002, min_samples = 3, cap = 0.05, target = 0.05 },
  seed     = 11,
}
