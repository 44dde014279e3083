-- tests/recipes/constructors.lua: host candidates whose constructors snoop,
-- forge the sandbox's records, serve its protocol themselves or spin, and
-- honest controls (one with a constructor); no rules, so each reaches its
-- sandbox. tests/lua/test_constructors.lua pins each outcome.
local matmul = require "kwb.problems.matmul"

local files = { "ctor_forge.c", "ctor_serve.c", "ctor_spin.c", "honest_libm.c", "honest_ctor.c" }

return kwb.recipe {
  name     = "constructors_matmul",
  problem  = matmul {},
  shapes   = { n = { 32 } },
  start    = "../../kernels/host/matmul_naive.c",
  strategy = {
    name = "constructors",
    propose = function(self)
      self.i = (self.i or 0) + 1
      return files[self.i] and { file = "../candidates/" .. files[self.i] }
    end,
  },
  forbid   = {},
  flags    = { "-O1" },
  budget   = { candidates = 10, minutes = 2, timeout = 2 },
  timing   = { warmup = 0.002, min_samples = 3, cap = 0.02, target = 0.05 },
  race     = false,
  seed     = 7,
}
