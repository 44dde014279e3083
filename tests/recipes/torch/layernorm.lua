-- tests/recipes/torch/layernorm.lua: a module with weights (tests/torch/layernorm.py):
-- the candidate reads the weights kwb handed over as fixed inputs.
return kwb.recipe {
  name     = "torch_layernorm",
  problem  = require("kwb.problems.torch") { file = "../../torch/layernorm.py", entry = "layernorm" },
  shapes   = { { rows = 10 }, { rows = 33 } },
  start    = "layernorm_start.c",
  strategy = { name = "none", propose = function() return nil end },
  budget   = { candidates = 1, minutes = 2, timeout = 5 },
  timing   = { warmup = 0.002, min_samples = 5, cap = 0.05, target = 0.05 },
  seed     = 9,
}
