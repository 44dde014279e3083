-- tests/cli/cache_params.lua PATH: two candidates of one template, the same
-- source with other parameters, for cache.t's `cache diff` of parameters.
local path = assert(arg[1], "usage: cache_params.lua PATH")
local c = assert(kwb.cache.open(path))
local src = "void scale(int n, float *x) { for (int i = 0; i < n; i += STEP) x[i] *= 2.0f; }\n"
for i, p in ipairs { { STEP = 1, BLOCK = 64 }, { STEP = 4, BLOCK = 64, SPLIT = 2 } } do
  local id = c:put_candidate { problem = "scale", source = src, params = p, origin = { strategy = "grid" },
                               created = 1796205600 }
  print(id)
  -- a shape of two variables, as the loop keys it (the problem's order)
  c:add_result { candidate = id, device = "host:Test CPU:2", shape = "rows=64,cols=100", outcome = "accepted",
                 timing = { median = 1e-6 * i, n = 10 }, created = 1796205700 }
end
