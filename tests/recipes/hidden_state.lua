-- tests/recipes/hidden_state.lua: state kept across calls behind the
-- predefined macros the build's command sets (-fPIC removes __PIE__, -O2
-- defines __OPTIMIZE__), with no flags of the recipe's own; the rule views
-- must come from the build's own command to see it.
local matmul = require "kwb.problems.matmul"

local files = { "hostile_pie.c", "hostile_optimize.c" }

return kwb.recipe {
  name     = "hidden_state",
  problem  = matmul {},
  shapes   = { n = { 32 } },
  start    = "../../kernels/host/matmul_naive.c",
  strategy = require("kwb.strategies.list")({ { file = "../candidates/" .. files[1] },
                                               { file = "../candidates/" .. files[2] } }, "hidden"),
  flags    = {},
  budget   = { candidates = 10, minutes = 1, timeout = 1 },
  timing   = { warmup = 0.002, min_samples = 3, cap = 0.02, target = 0.05 },
  seed     = 5,
}
