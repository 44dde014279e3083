-- tests/recipes/export_lua_ref.lua: a vector add whose reference is a Lua
-- function, for tests/lua/test_export.lua: kwb export writes the dispatcher
-- but no check program, and says why.
return kwb.recipe {
  name     = "export_lua_ref",
  problem  = kwb.problem.define {
    name = "luavec", vars = { "n" }, fn = "vecadd",
    args = {
      { "n", "i32", value = "n" },
      { "a", "f32", shape = "n", role = "in", init = { "uniform", -1, 1 } },
      { "b", "f32", shape = "n", role = "in", init = { "uniform", -1, 1 } },
      { "c", "f32", shape = "n", role = "out" },
    },
    reference = function(bufs, shape)
      for i = 1, shape.n do bufs.c[i] = bufs.a[i] + bufs.b[i] end
    end,
    tolerance = { atol = 0, rtol = 0 },
  },
  shapes   = { n = { 256 } },
  verify_shapes = false,
  start    = "../candidates/dispatch_slow.c",
  strategy = { name = "none", propose = function() return nil end },
  budget   = { candidates = 1, minutes = 1, timeout = 2 },
  timing   = { warmup = 0.002, min_samples = 5, cap = 0.05, target = 0.05 },
  seed     = 3,
}
