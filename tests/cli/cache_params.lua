-- tests/cli/cache_params.lua PATH: two candidates of one template, the same
-- source with other parameters, for cache.t's `cache diff` of parameters.
local path = assert(arg[1], "usage: cache_params.lua PATH")
local c = assert(kwb.cache.open(path))
local src = "void scale(int n, float *x) { for (int i = 0; i < n; i += STEP) x[i] *= 2.0f; }\n"
for _, p in ipairs { { STEP = 1, BLOCK = 64 }, { STEP = 4, BLOCK = 64, SPLIT = 2 } } do
  print((c:put_candidate { problem = "scale", source = src, params = p, origin = { strategy = "grid" },
                          created = 1796205600 }))
end
