-- tests/luajit/ffi_run.lua CACHE ID: run by tests/lua/test_ffi.lua under
-- LuaJIT with kwb/ffi.lua: compiles, calls, verifies and times a host vector
-- add, reads blob ID from the cache and writes one; prints what it found,
-- one "name value" line each, for the Lua 5.4 side to compare.
local kwb = require "kwb.ffi"
local cache_path, id = arg[1], arg[2]
local n = 1000
local src = "void vecadd(int n, const float *a, const float *b, float *c) {\n"
         .. "    for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n}\n"
local m = kwb.compile { source = src, name = "vecadd.c", flags = { "-O2" }, build_dir = arg[3] }
local f = m:fn("void vecadd(int n, const float *a, const float *b, float *c)")
local a = kwb.buffer("f32", n):fill_uniform(1, -1, 1)
local b = kwb.buffer("f32", n):fill_uniform(2, -1, 1)
local c, ref = kwb.buffer("f32", n), kwb.buffer("f32", n)
f:call(n, a, b, c)
for i = 1, n do ref:set(i, a:get(i) + b:get(i)) end
local d = kwb.compare(c, ref, 0, 0)
local st = f:time({ n, a, b, c }, { cap_s = 0.05, min_samples = 5 })
local cache = kwb.cache(cache_path)
print("version " .. kwb.version)
print("a " .. a:checksum())
print("c " .. c:checksum())
print("c7 " .. string.format("%.9g", c:get(7)))
print("bad " .. d.bad .. " max_abs " .. d.max_abs)
print("timed " .. tostring(st.median > 0 and st.n >= 5))
print("blob " .. cache:blob_get(id))
print("put " .. cache:blob_put("written through the FFI"))
