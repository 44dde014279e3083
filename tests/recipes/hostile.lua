-- tests/recipes/hostile.lua: hostile host candidates, each trying to game
-- the measurement another way; tests/lua/test_hostile.lua pins each outcome.
local matmul = require "kwb.problems.matmul"

local hostile = {
  "hostile_partial.c", "hostile_stale.c", "hostile_mutate.c", "hostile_small_only.c",
  "hostile_precision.c", "hostile_clock.c", "hostile_rdtsc.c", "hostile_thread.c",
  "hostile_early_return.c", "hostile_calls.c", "hostile_dlsym.c", "hostile_spin.c",
  "hostile_overrun.c", "hostile_underrun.c", "hostile_far.c", "hostile_shapes.c",
  "hostile_env.c", "hostile_maps.c", "hostile_fork.c", "hostile_neighbour.c", "honest_libm.c",
}

return kwb.recipe {
  name     = "hostile_matmul",
  problem  = matmul {},
  shapes   = { n = { 32, 96 } },
  start    = "../../kernels/host/matmul_naive.c",
  strategy = {
    name = "hostile",
    propose = function(self)
      self.i = (self.i or 0) + 1
      return hostile[self.i] and { file = "../candidates/" .. hostile[self.i] }
    end,
  },
  flags    = { "-O2" },
  budget   = { candidates = 50, minutes = 2, timeout = 0.02 },
  timing   = { warmup = 0.002, min_samples = 3, cap = 0.02, target = 0.05 },
  seed     = 11,
}
