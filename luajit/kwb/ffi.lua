-- kwb/ffi.lua: kwb's core from LuaJIT, through its FFI and libkwb.so. Not a
-- module of kwb's own Lua (which is Lua 5.4, with the core built in): make
-- install puts it, with the declarations (kwb_cdef.h, made from core/kwb.h at
-- build time, never copied by hand), under PREFIX/share/lua/5.1/kwb/.
--
--   local kwb = require "kwb.ffi"            -- libkwb.so from KWB_LIB, else the loader's path
--   local a = kwb.buffer("f32", 1024):fill_uniform(1, -1, 1)
--   local m = kwb.compile { source = src, name = "k.c", flags = { "-O2" } }
--   local f = m:fn("void vecadd(int n, const float *a, const float *b, float *c)")
--   f:call(1024, a, b, c); local st = f:time({ 1024, a, b, c }, { cap_s = 0.1 })
--   local d = kwb.compare(c, ref, 0, 0)      -- { max_abs =, bad =, ... }
--   local cache = kwb.cache "cache/kwb.db"; cache:blob_get(id)
--
-- Every object the core owns is freed by the garbage collector (ffi.gc); a
-- failure raises a Lua error with the core's sentence (kwb_last_error).
local ffi = require "ffi"

local here = (debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./")
do
  local f = assert(io.open(os.getenv("KWB_CDEF") or (here .. "kwb_cdef.h"), "r"),
                   "kwb.ffi: kwb_cdef.h (made at build time from core/kwb.h) is not beside kwb/ffi.lua")
  ffi.cdef(f:read("*a"))
  f:close()
end
local C = ffi.load(os.getenv("KWB_LIB") or "kwb")

local M = { C = C, version = ffi.string(C.kwb_version()) }

local function fail(what)
  error(string.format("kwb.ffi: %s: %s", what, ffi.string(C.kwb_last_error())), 3)
end

local function check(rc, what)
  if rc ~= 0 then fail(what) end
end

-- ---- buffers -------------------------------------------------------------

local Buffer = {}
Buffer.__index = Buffer

-- buffer(dtype, n): a host buffer between redzones, as kwb.host.buffer.
function M.buffer(dtype, n)
  local t = C.kwb_dtype_from_name(dtype)
  if t < 0 then error("kwb.ffi: unknown dtype '" .. tostring(dtype) .. "'", 2) end
  local p = C.kwb_buffer_new(t, n)
  if p == nil then fail("buffer(" .. dtype .. ", " .. tostring(n) .. ")") end
  return setmetatable({ p = ffi.gc(p, C.kwb_buffer_free), dtype = dtype, n = n }, Buffer)
end

function Buffer:fill_uniform(seed, lo, hi)
  check(C.kwb_buffer_fill_uniform(self.p, seed, lo or -1, hi or 1), "fill_uniform")
  return self
end

function Buffer:fill_normal(seed, mean, sd)
  check(C.kwb_buffer_fill_normal(self.p, seed, mean or 0, sd or 1), "fill_normal")
  return self
end

-- get(i), set(i, v): element i, counted from 1 as in kwb's Lua API.
function Buffer:get(i) return tonumber(C.kwb_buffer_get(self.p, i - 1)) end
function Buffer:set(i, v) C.kwb_buffer_set(self.p, i - 1, v) end

-- checksum() -> the SHA-256 of its bytes, as kwb's buf:checksum().
function Buffer:checksum()
  local out = ffi.new("char[65]")
  check(C.kwb_buffer_checksum(self.p, out), "checksum")
  return ffi.string(out)
end

-- compare(out, ref, atol, rtol) -> { max_abs, max_rel, rel_l2, bad, poison, nan, inf, first_bad (1-based) }
function M.compare(out, ref, atol, rtol)
  local d = ffi.new("kwb_diff")
  check(C.kwb_compare(out.p, ref.p, atol or 0, rtol or 0, d), "compare")
  return { max_abs = d.max_abs, max_rel = d.max_rel, rel_l2 = d.rel_l2, n = tonumber(d.n), bad = tonumber(d.bad),
           poison = tonumber(d.poison), nan = tonumber(d.nan), inf = tonumber(d.inf),
           first_bad = d.first_bad >= 0 and tonumber(d.first_bad) + 1 or nil, ok = d.bad == 0 }
end

-- ---- host kernels --------------------------------------------------------

local Module, Fn = {}, {}
Module.__index, Fn.__index = Module, Fn

local function strings(list)
  if not list or #list == 0 then return nil end
  local arr = ffi.new("const char *[?]", #list + 1)
  local keep = {}
  for i, s in ipairs(list) do
    keep[i] = tostring(s)
    arr[i - 1] = keep[i]
  end
  return arr, keep
end

-- compile { source =, name =, flags = {}, defines = { "N=4" }, cc =, build_dir = } -> module
function M.compile(spec)
  local flags, kf = strings(spec.flags)
  local defs, kd = strings(spec.defines)
  local b = ffi.new("kwb_host_build", { source = spec.source, name = spec.name or "kernel.c", cc = spec.cc,
                                        flags = flags, defines = defs,
                                        build_dir = spec.build_dir or "cache/build/host" })
  local out, log = ffi.new("kwb_host_module *[1]"), ffi.new("char *[1]")
  local rc = C.kwb_host_compile(b, out, log)
  local _ = kf, kd   -- (the strings live until the call returns)
  if rc ~= 0 then
    local text = log[0] ~= nil and ffi.string(log[0]) or ""
    if log[0] ~= nil then C.kwb_free(log[0]) end
    error(string.format("kwb.ffi: compile %s: %s\n%s", spec.name or "kernel.c", ffi.string(C.kwb_last_error()), text), 2)
  end
  return setmetatable({ p = ffi.gc(out[0], C.kwb_host_module_free) }, Module)
end

local ctypes = { void = C.KWB_C_VOID, int = C.KWB_C_I32, int32_t = C.KWB_C_I32, unsigned = C.KWB_C_U32,
                 uint32_t = C.KWB_C_U32, long = C.KWB_C_I64, int64_t = C.KWB_C_I64, uint64_t = C.KWB_C_U64,
                 float = C.KWB_C_F32, double = C.KWB_C_F64 }

-- fn("void vecadd(int n, const float *a, ...)") -> the module's function of that prototype.
function Module:fn(proto)
  local ret, name, params = proto:match("^%s*([%w_]+)%s+([%w_]+)%s*%((.*)%)%s*$")
  if not ret then error("kwb.ffi: not a prototype: " .. proto, 2) end
  local types = {}
  for p in (params .. ","):gmatch("([^,]*),") do
    p = p:gsub("^%s+", ""):gsub("%s+$", "")
    if p ~= "" and p ~= "void" then
      if p:find("*", 1, true) then types[#types + 1] = C.KWB_C_PTR
      else
        local ty = p:gsub("const%s+", ""):match("^([%w_]+)")
        types[#types + 1] = ctypes[ty] or error("kwb.ffi: unsupported argument type in " .. proto, 2)
      end
    end
  end
  local arr = ffi.new("kwb_ctype[?]", math.max(#types, 1), types)
  local f = C.kwb_host_fn_new(self.p, name, ctypes[ret] or C.KWB_C_VOID, arr, #types)
  if f == nil then fail("fn " .. name) end
  return setmetatable({ p = ffi.gc(f, C.kwb_host_fn_free), types = types, module = self }, Fn)
end

local function values(fn, args)
  local v = ffi.new("kwb_value[?]", math.max(#fn.types, 1))
  for i, t in ipairs(fn.types) do
    local a = args[i]
    if t == C.KWB_C_PTR then v[i - 1].ptr = C.kwb_buffer_data(a.p)
    elseif t == C.KWB_C_F32 then v[i - 1].f32 = a
    elseif t == C.KWB_C_F64 then v[i - 1].f64 = a
    elseif t == C.KWB_C_I64 or t == C.KWB_C_U64 then v[i - 1].i64 = a
    else v[i - 1].i32 = a end
  end
  return v
end

function Fn:call(...)
  local ret = ffi.new("kwb_value[1]")
  check(C.kwb_host_fn_call(self.p, values(self, { ... }), ret), "call")
end

-- time(args, opts) -> stats (median, min, ..., n): kwb's timing loop, in
-- this process (no sandbox: that is the loop's judge, not this library's).
function Fn:time(args, opts)
  local o = ffi.new("kwb_time_opts")
  C.kwb_time_opts_default(o)
  for k, v in pairs(opts or {}) do o[k] = v end
  local st = ffi.new("kwb_stats")
  check(C.kwb_host_fn_time(self.p, values(self, args), o, st), "time")
  return { median = st.median, min = st.min, max = st.max, mean = st.mean, p10 = st.p10, p90 = st.p90,
           ci_lo = st.ci_lo, ci_hi = st.ci_hi, n = st.n, batch = st.batch }
end

-- ---- the candidate cache -------------------------------------------------

local Cache = {}
Cache.__index = Cache

function M.cache(path)
  local out = ffi.new("kwb_cache *[1]")
  check(C.kwb_cache_open(path, out), "cache " .. tostring(path))
  return setmetatable({ p = ffi.gc(out[0], C.kwb_cache_close), path = path }, Cache)
end

-- blob_put(data) -> its id; blob_get(id) -> the data.
function Cache:blob_put(data)
  local id = ffi.new("char[65]")
  check(C.kwb_cache_blob_put(self.p, data, #data, nil, id, nil), "blob_put")
  return ffi.string(id)
end

function Cache:blob_get(id)
  local data, len = ffi.new("char *[1]"), ffi.new("size_t[1]")
  check(C.kwb_cache_blob_get(self.p, id, data, len), "blob_get " .. id)
  local s = ffi.string(data[0], len[0])
  C.kwb_free(data[0])
  return s
end

return M
