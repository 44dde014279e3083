-- tests/lua/fake_vecadd.lua: c = a + b for the CUDA stand-in (fake_cuda.lua),
-- with an exact tolerance and a reference in C: the problem the tests of the
-- loop's CUDA adapter judge candidates on, and the start of a candidate's
-- source (`vec`, the kernel's signature and open brace).
local M = {}

M.vec = "void vecadd(int n, const float *a, const float *b, float *c) {\n"

M.problem = kwb.problem.define {
  name = "vecadd_fake", vars = { "n" }, fn = "vecadd",
  args = { { "n", "i32", value = "n" }, { "a", "f32", shape = "n", role = "in" },
           { "b", "f32", shape = "n", role = "in" }, { "c", "f32", shape = "n", role = "out" } },
  reference = { cuda = { source = "void vecadd_ref(int n, const float *a, const float *b, float *c) {\n"
                           .. "  for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n}\n", fn = "vecadd_ref",
                         launch = function(shape) return { grid = { shape.n }, block = { 1 } } end } },
  tolerance = { atol = 0, rtol = 0 },
  bytes = "12 * n",
}

return M
