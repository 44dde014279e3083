-- tests/recipes/torch/hostile_weights.lua: the weights kwb hands a module's
-- candidates, changed by a candidate: its second weight (the bias) where no
-- call's check sees it (hostile/spoil_bias_spin.c), its first where one does
-- (hostile/spoil_weight.c); the honest candidates after each are judged on the
-- module's own weights (tests/lua/test_torch_hostile.lua).
return kwb.recipe {
  name     = "torch_hostile_weights",
  problem  = require("kwb.problems.torch") { file = "../../torch/layernorm.py", entry = "layernorm" },
  shapes   = { { rows = 10 }, { rows = 33 } },
  start    = "layernorm_start.c",
  strategy = {
    name = "list",
    propose = function(self)
      self.i = (self.i or 0) + 1
      return ({ { file = "hostile/spoil_bias_spin.c" }, { file = "hostile/honest_a.c" },
                { file = "hostile/spoil_weight.c" }, { file = "hostile/honest_b.c" } })[self.i]
    end,
  },
  budget   = { candidates = 4, minutes = 2, timeout = 1 },
  timing   = { warmup = 0.002, min_samples = 5, cap = 0.05, target = 0.05 },
  seed     = 9,
}
