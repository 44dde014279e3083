-- tests/recipes/torch/hostile_tolerance.lua: a kernel that leaves half of
-- exp(3x) uncomputed (tests/torch/hostile/exp_tail.py), under the tolerance
-- kwb derives from the module's example output (tests/lua/test_torch_hostile.lua).
return kwb.recipe {
  name     = "torch_hostile_exp",
  problem  = require("kwb.problems.torch") { file = "../../torch/hostile/exp_tail.py", entry = "exp_tail" },
  shapes   = { { batch_size = 4, dim = 32 }, { batch_size = 8, dim = 64 } },
  start    = "hostile/exp_start.c",
  strategy = { name = "list", propose = function(self)
    self.i = (self.i or 0) + 1
    return ({ { file = "hostile/exp_skip.c" } })[self.i]
  end },
  budget   = { candidates = 1, minutes = 2, timeout = 5 },
  timing   = { warmup = 0.002, min_samples = 5, cap = 0.05, target = 0.05 },
  seed     = 3,
}
