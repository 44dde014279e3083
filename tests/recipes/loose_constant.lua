-- tests/recipes/loose_constant.lua: c = a + b with a and b drawn near 0.5 and
-- a tolerance of 0.2: every element of c lies within 0.1 of 1, so a kernel
-- that writes 1 everywhere would be judged right. The judge's self-test
-- stops the run before anything is measured, naming that plant
-- (tests/lua/test_selftest.lua).
local add = "void add(int n, const float *a, const float *b, float *c) {\n"
            .. "    for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n}\n"

local near_one = kwb.problem.define {
  name = "near_one", vars = { "n" }, fn = "add",
  args = { { "n", "i32", value = "n" },
           { "a", "f32", shape = "n", role = "in", init = { "uniform", 0.45, 0.55 } },
           { "b", "f32", shape = "n", role = "in", init = { "uniform", 0.45, 0.55 } },
           { "c", "f32", shape = "n", role = "out" } },
  reference = { source = add:gsub("void add%(", "void add_ref("), fn = "add_ref" },
  tolerance = { atol = 0.2, rtol = 0 },
}

return kwb.recipe {
  name     = "loose_constant",
  problem  = near_one,
  shapes   = { n = { 1000 } },
  start    = { source = add, name = "add.c" },
  strategy = require("kwb.strategies.list")({ { source = add, name = "again.c" } }, "one"),
  budget   = { candidates = 2, minutes = 1, timeout = 5 },
  timing   = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 },
  verify_shapes = false,
  seed     = 5,
}
