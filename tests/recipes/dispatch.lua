-- tests/recipes/dispatch.lua: a kernel that wins only at the large shape, for
-- tests/lua/test_export.lua: kwb export keeps the start kernel at the small one.
return kwb.recipe {
  name     = "dispatch",
  problem  = "vecadd",
  shapes   = { n = { 256, 1 << 20 } },
  verify_shapes = false,
  start    = "../candidates/dispatch_slow.c",
  strategy = {
    name = "dispatch",
    propose = function(self)
      self.i = (self.i or 0) + 1
      return self.i == 1 and { file = "../candidates/dispatch_fast.c" } or nil
    end,
  },
  budget   = { candidates = 1, minutes = 2, timeout = 2 },
  timing   = { warmup = 0.002, min_samples = 5, cap = 0.05, target = 0.05 },
  seed     = 3,
}
