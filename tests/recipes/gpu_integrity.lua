-- tests/recipes/gpu_integrity.lua: the GPU judge's hostile candidates and
-- honest controls in one run, every verified one through compute-sanitizer
-- (sanitize = "all"); tests/gpu/integrity.lua pins each outcome. n = 2^20
-- is where the stash and the scan find mapped memory past the output;
-- n = 1000003 has a tail, and is where the sanitizers run (the smaller).
local files = {
  "scan_expected.cu", "write_past.cu", "write_before.cu", "stash_replay.cu", "timer_split.cu",
  "read_slack.cu", "smem_race.cu",
  "smem_barrier.cu", "constant_table.cu", "float4_tail.cu", "good_stride.cu",
}

return kwb.recipe {
  name     = "gpu_integrity",
  backend  = "cuda",
  problem  = "vecadd",
  shapes   = { n = { 1 << 20, 1000003 } },
  verify_shapes = false,
  start    = "../candidates/cuda/good.cu",
  launch   = function(shape) return { grid = { (shape.n + 255) // 256 }, block = { 256 } } end,
  strategy = {
    name = "gpu_integrity",
    propose = function(self)
      self.i = (self.i or 0) + 1
      return files[self.i] and { file = "../candidates/cuda/" .. files[self.i] }
    end,
  },
  sanitize = "all",
  budget   = { candidates = #files, minutes = 10, timeout = 5 },
  timing   = { warmup = 0.005, min_samples = 5, cap = 0.1, target = 0.02 },
}
