-- tests/recipes/sabotage.lua: two saboteurs (tests/candidates/sabotage_*.c)
-- that flip redzone bytes of the other buffers they can reach while timed at
-- their last shape, each followed by honest candidates:
-- tests/lua/test_sabotage.lua pins that each saboteur is wrong and the honest
-- ones are judged as in a clean run.
local matmul = require "kwb.problems.matmul"

local order = { "sabotage_remember.c", 2, 3, "sabotage_probe.c", 5, 6 }
-- An honest candidate: k blocked by its number (each one other code, none the
-- start kernel's, which would make it a duplicate, never run); every c[i][j]
-- still sums over k in order, as the reference does.
local honest = [[
void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n * n; i++) c[i] = 0;
    for (int kk = 0; kk < n; kk += BLOCK)
        for (int i = 0; i < n; i++)
            for (int k = kk; k < kk + BLOCK && k < n; k++)
                for (int j = 0; j < n; j++) c[i * n + j] += a[i * n + k] * b[k * n + j];
}
]]

return kwb.recipe {
  name     = "sabotage_matmul",
  problem  = matmul {},
  shapes   = { n = { 48, 16 } },   -- the last shape small: its timed calls go in batches
  verify_shapes = false,
  start    = "../../kernels/host/matmul_naive.c",
  strategy = {
    name = "sabotage",
    propose = function(self)
      self.i = (self.i or 0) + 1
      local o = order[self.i]
      if type(o) == "string" then return { file = "../candidates/" .. o } end
      if o then return { source = "#define BLOCK " .. o .. "\n" .. honest, name = "honest" .. o .. ".c" } end
    end,
  },
  flags    = { "-O2" },
  forbid   = { "default", "-global-state" },   -- (the saboteurs keep a count of their calls)
  allow    = { "madvise" },
  budget   = { candidates = 10, minutes = 2, timeout = 0.5 },
  timing   = { warmup = 0.002, min_samples = 3, cap = 0.02, target = 0.05 },
  seed     = 5,
}
