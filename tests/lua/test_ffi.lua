-- tests/lua/test_ffi.lua: LuaJIT (Debian's luajit) drives libkwb.so through
-- luajit/kwb/ffi.lua (tests/luajit/ffi_run.lua) and gets the Lua 5.4 API's
-- figures for the same inputs; each reads the blob the other wrote.
local t = require "t"
local core = require "kwb.core"
local host = require "kwb.host"

local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$") .. "/ffi"
os.execute("rm -rf '" .. dir .. "'")
assert(core.mkdirs(dir))
local cache = assert(kwb.cache.open(dir .. "/ffi.db"))
local id = cache:put_blob("written by the Lua 5.4 API")
cache:close()

local r = assert(core.exec({ "env", "LUA_PATH=luajit/?.lua", "KWB_CDEF=build/kwb_cdef.h", "KWB_LIB=./libkwb.so",
                             "luajit", "tests/luajit/ffi_run.lua", dir .. "/ffi.db", id, dir .. "/build" },
                           { timeout = 120 }))
local got = {}
for k, v in r.out:gmatch("(%S+) ([^\n]*)\n") do got[k] = v end

t.test("ffi_luajit_runs_the_core", function()
  t.eq(r.status, 0, r.err)
  t.eq(got.version, core.version)
end)

t.test("ffi_figures_equal_the_lua_apis", function()
  local a = kwb.host.buffer("f32", 1000); a:fill_uniform(1, -1, 1)
  local b = kwb.host.buffer("f32", 1000); b:fill_uniform(2, -1, 1)
  local c = kwb.host.buffer("f32", 1000)
  local m = assert(host.compile { source = "void vecadd(int n, const float *a, const float *b, float *c) {\n"
                                  .. "    for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n}\n",
                                  name = "vecadd.c", flags = { "-O2" } })
  local f = assert(m:fn("void vecadd(int n, const float *a, const float *b, float *c)"))
  f(1000, a, b, c)
  t.eq(got.a, a:checksum(), "the same inputs")
  t.eq(got.c, c:checksum(), "the same output")
  t.eq(got.c7, string.format("%.9g", c[7]))
  t.eq(got.bad, "0 max_abs 0", "verified against its reference")
  t.eq(got.timed, "true", "timed")
end)

t.test("ffi_reads_and_writes_the_cache", function()
  t.eq(got.blob, "written by the Lua 5.4 API")
  local c = assert(kwb.cache.open(dir .. "/ffi.db"))
  t.eq(c:get_blob(got.put), "written through the FFI")
  c:close()
end)

t.done()
