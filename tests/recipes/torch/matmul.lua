-- tests/recipes/torch/matmul.lua: a problem from a PyTorch module
-- (tests/torch/matmul.py, KernelBench's format) judged by its reference
-- process: a plain start kernel, a blocked one and a wrong one (tests/lua/test_torch.lua).
return kwb.recipe {
  name     = "torch_matmul",
  problem  = require("kwb.problems.torch") { file = "../../torch/matmul.py", entry = "matmul" },
  shapes   = { { M = 48, K = 32, N = 40 }, { M = 96, K = 64, N = 80 } },
  start    = "matmul_start.c",
  strategy = {
    name = "one",
    propose = function(self)
      self.i = (self.i or 0) + 1
      return ({ { file = "matmul_blocked.c" }, { file = "matmul_wrong.c" } })[self.i]
    end,
  },
  budget   = { candidates = 2, minutes = 2, timeout = 5 },
  timing   = { warmup = 0.002, min_samples = 5, cap = 0.05, target = 0.05 },
  seed     = 5,
}
