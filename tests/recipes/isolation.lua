-- tests/recipes/isolation.lua: candidates that crash, hang, exhaust memory,
-- flood their output, fork without end, or snoop and try to escape; no rules,
-- so each reaches its worker. tests/lua/test_workers.lua pins each outcome.
local matmul = require "kwb.problems.matmul"

local files = { "iso_segv.c", "iso_fpe.c", "iso_spin.c", "iso_alloc.c", "iso_output.c", "iso_fork.c", "iso_snoop.c" }

return kwb.recipe {
  name     = "isolation_matmul",
  problem  = matmul {},
  shapes   = { n = { 32 } },
  start    = "../../kernels/host/matmul_naive.c",
  strategy = {
    name = "isolation",
    propose = function(self)
      self.i = (self.i or 0) + 1
      return files[self.i] and { file = "../candidates/" .. files[self.i] }
    end,
  },
  forbid   = {},
  flags    = { "-O1" },
  budget   = { candidates = 20, minutes = 2, timeout = 2 },
  timing   = { warmup = 0.002, min_samples = 3, cap = 0.02, target = 0.05 },
  race     = false,
  seed     = 5,
}
