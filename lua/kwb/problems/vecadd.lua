-- kwb/problems/vecadd.lua: c = a + b over n f32 elements: the smallest
-- memory-bound problem, the first thing to tune on a new backend.
--
--   problem = require "kwb.problems.vecadd" {}
--
-- Candidates export  void vecadd(int n, const float *a, const float *b, float *c).
local problem = require "kwb.problem"

local reference = [[
void vecadd_ref(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++) c[i] = a[i] + b[i];
}
]]

local cuda_reference = [[
extern "C" __global__ void vecadd_ref(int n, const float *a, const float *b, float *c) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
]]

return function(opts)
  opts = opts or {}
  for k in pairs(opts) do error("vecadd: unknown option '" .. tostring(k) .. "' (it has none)", 2) end
  return problem.define {
    name = "vecadd",
    description = "c = a + b, n f32 elements",
    vars = { "n" },
    fn = "vecadd",
    args = {
      { "n", "i32", value = "n" },
      { "a", "f32", shape = "n", role = "in", init = { "uniform", -1, 1 } },
      { "b", "f32", shape = "n", role = "in", init = { "uniform", -1, 1 } },
      { "c", "f32", shape = "n", role = "out" },
    },
    reference = { source = reference, fn = "vecadd_ref",
                  cuda = { source = cuda_reference, fn = "vecadd_ref",
                           launch = function(shape) return { grid = { (shape.n + 255) // 256 }, block = { 256 } } end } },
    tolerance = { atol = 0, rtol = 0 },   -- one rounding, the same everywhere
    bytes = "12 * n",
    flops = "n",
    launch = function(shape) return { grid = { (shape.n + 255) // 256 }, block = { 256 } } end,
  }
end
