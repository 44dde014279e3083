-- tests/recipes/shared/team.lua: a recipe that requires a module beside it
-- (team_problem.lua), as a team shares a problem file between its recipes;
-- loaded from another folder by kwb.load, and measured in a worker, which
-- loads it again (tests/lua/test_shared_recipe.lua).
local team_problem = require "team_problem"

local unrolled = "void twice(int n, const float *x, float *y) {\n"
  .. "    int i = 0;\n    for (; i + 4 <= n; i += 4) { y[i] = 2 * x[i]; y[i + 1] = 2 * x[i + 1]; y[i + 2] = 2 * x[i + 2]; "
  .. "y[i + 3] = 2 * x[i + 3]; }\n    for (; i < n; i++) y[i] = 2 * x[i];\n}\n"

return kwb.recipe {
  name     = "team_twice",
  problem  = team_problem(),
  shapes   = { n = { 4096, 65536 } },
  start    = "team_start.c",
  strategy = require("kwb.strategies.list")({ { source = unrolled, name = "unrolled.c" } }, "team"),
  flags    = { "-O1" },
  budget   = { candidates = 1, minutes = 1, timeout = 5 },
  timing   = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.05 },
  seed     = 5,
}
