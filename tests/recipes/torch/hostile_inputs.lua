-- tests/recipes/torch/hostile_inputs.lua: a module whose example inputs are
-- randn * 10 (tests/torch/hostile/wide_sin.py) and a kernel right only on a
-- standard normal's range (tests/lua/test_torch_hostile.lua).
return kwb.recipe {
  name     = "torch_hostile_inputs",
  problem  = require("kwb.problems.torch") { file = "../../torch/hostile/wide_sin.py", entry = "wide_sin" },
  shapes   = { { batch_size = 4, dim = 32 }, { batch_size = 8, dim = 64 } },
  start    = "hostile/sin_start.c",
  strategy = { name = "list", propose = function(self)
    self.i = (self.i or 0) + 1
    return ({ { file = "hostile/sin_taylor.c" } })[self.i]
  end },
  budget   = { candidates = 1, minutes = 2, timeout = 5 },
  timing   = { warmup = 0.002, min_samples = 5, cap = 0.05, target = 0.05 },
  seed     = 3,
}
