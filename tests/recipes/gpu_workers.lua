-- tests/recipes/gpu_workers.lua: an illegal-address kernel, an endless kernel,
-- then a good one, in one run; tests/gpu/workers.lua pins the three outcomes.
local files = { "illegal_address.cu", "spin.cu", "good.cu" }

return kwb.recipe {
  name     = "gpu_workers",
  backend  = "cuda",
  problem  = "vecadd",
  shapes   = { n = { 1 << 16 } },
  start    = "../candidates/cuda/good_stride.cu",
  launch   = function(shape) return { grid = { (shape.n + 255) // 256 }, block = { 256 } } end,
  strategy = {
    name = "gpu_workers",
    propose = function(self)
      self.i = (self.i or 0) + 1
      return files[self.i] and { file = "../candidates/cuda/" .. files[self.i] }
    end,
  },
  budget   = { candidates = 3, minutes = 5, timeout = 2 },
  timing   = { warmup = 0.005, min_samples = 5, cap = 0.1, target = 0.02 },
  race     = false,
}
