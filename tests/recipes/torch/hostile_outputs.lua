-- tests/recipes/torch/hostile_outputs.lua: a module with two outputs of
-- different scales (tests/torch/hostile/two_scales.py) and a kernel whose
-- second is a few percent off (tests/lua/test_torch_hostile.lua).
return kwb.recipe {
  name     = "torch_hostile_two",
  problem  = require("kwb.problems.torch") { file = "../../torch/hostile/two_scales.py", entry = "two_scales" },
  shapes   = { { batch_size = 3, dim = 50 }, { batch_size = 6, dim = 100 } },
  start    = "hostile/two_start.c",
  strategy = { name = "list", propose = function(self)
    self.i = (self.i or 0) + 1
    return ({ { file = "hostile/two_coarse.c" } })[self.i]
  end },
  budget   = { candidates = 1, minutes = 2, timeout = 5 },
  timing   = { warmup = 0.002, min_samples = 5, cap = 0.05, target = 0.05 },
  seed     = 3,
}
