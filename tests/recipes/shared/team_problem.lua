-- tests/recipes/shared/team_problem.lua: a team's shared problem file, which
-- the recipes beside it require by name (tests/lua/test_shared_recipe.lua):
-- y = 2 * x over n floats, its reference in C.
local problem = require "kwb.problem"

return function()
  return problem.define {
    name = "team_twice",
    description = "y = 2 * x, n f32",
    vars = { "n" },
    fn = "twice",
    args = {
      { "n", "i32", value = "n" },
      { "x", "f32", shape = "n", role = "in", init = { "normal", 0, 1 } },
      { "y", "f32", shape = "n", role = "out" },
    },
    reference = { source = "void twice_ref(int n, const float *x, float *y) { for (int i = 0; i < n; i++) y[i] = 2 * x[i]; }\n",
                  fn = "twice_ref" },
    tolerance = { atol = 1e-6, rtol = 1e-6 },
    bytes = "2 * n * 4",
    flops = "n",
  }
end
