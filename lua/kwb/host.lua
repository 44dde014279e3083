-- kwb/host.lua: the host backend: C kernels compiled with the system compiler
-- and run on the CPU. The CUDA backend mirrors these names.
--
--   local mod = assert(kwb.host.compile { file = "kernels/host/matmul.c", defines = { BM = 32 } })
--   local mm  = mod:fn "void matmul(int n, const float *a, const float *b, float *c)"
--   local a   = kwb.host.buffer("f32", n * n):fill_normal(1)
--   mm(n, a, b, c)
--   kwb.host.compare(c, ref, { rtol = 1e-4 })
--   kwb.host.time(mm, { n, a, b, c })
local core = require "kwb.core"
local files = require "kwb.base.files"

local M = {}

-- kind([cpuinfo]) -> "host:MODEL:CORES": the kind of the host backend's device: CPU model and core count, so results
-- from one machine type stay valid on another of the same type.
function M.kind(cpuinfo)
  if not cpuinfo then
    local f = io.open("/proc/cpuinfo")
    cpuinfo = f and f:read("a") or ""
    if f then f:close() end
  end
  local model = cpuinfo:match("model name%s*:%s*([^\n]+)") or cpuinfo:match("Model%s*:%s*([^\n]+)")
  local n = 0
  for _ in cpuinfo:gmatch("processor%s*:") do n = n + 1 end
  model = model or core.machine()
  model = model:gsub("%s+", " "):gsub("%s$", "")
  return string.format("host:%s:%d", model, n)
end

-- ---- C prototypes ------------------------------------------------------

local scalar_types = {
  void = "void",
  int = "i32", ["signed int"] = "i32", int32_t = "i32", i32 = "i32",
  unsigned = "u32", ["unsigned int"] = "u32", uint32_t = "u32", u32 = "u32",
  long = "i64", ["long int"] = "i64", ["long long"] = "i64", int64_t = "i64", ptrdiff_t = "i64",
  i64 = "i64", ["unsigned long"] = "u64", ["unsigned long long"] = "u64", uint64_t = "u64",
  size_t = "u64", u64 = "u64",
  float = "f32", f32 = "f32", double = "f64", f64 = "f64", ptr = "ptr",
  CUtensorMap = "tmap", tmap = "tmap",   -- (a CUDA kernel's TMA descriptor, kwb.cuda.tensor_map)
}

local qualifiers = { const = true, volatile = true, restrict = true, __restrict = true,
                     __restrict__ = true, struct = true, __grid_constant__ = true }

-- "const float *restrict x" -> "ptr"; "int n" -> "i32"; also accepts bare types.
local function param_type(text, what, sig)
  if text:find("[%*%[]") then return "ptr" end
  local words = {}
  for w in text:gmatch("[%w_]+") do
    if not qualifiers[w] then words[#words + 1] = w end
  end
  for drop = 0, 1 do   -- with the parameter's name, then without it
    local t = scalar_types[table.concat(words, " ", 1, #words - drop)]
    if t then return t end
  end
  error(string.format("unknown C type '%s' in %s of '%s'", text, what, sig), 3)
end

-- parse_signature "void f(int n, float *x)" -> "void", { "i32", "ptr" }, "f"
function M.parse_signature(sig)
  local head, params = sig:match("^%s*(.-)%s*%((.*)%)%s*;?%s*$")
  if not head then error(string.format("cannot read the C prototype '%s'", sig), 2) end
  local name
  if not head:find("%*%s*$") then
    local rest, last = head:match("^(.-)%s*([%a_][%w_]*)$")
    if rest and rest ~= "" then head, name = rest, last end
  end
  local ret = head == "" and "void" or param_type(head, "the return type", sig)
  local args = {}
  if not params:match("^%s*void%s*$") and not params:match("^%s*$") then
    for p in (params .. ","):gmatch("([^,]*),") do
      args[#args + 1] = param_type(p, "argument " .. (#args + 1), sig)
      if args[#args] == "void" then
        error(string.format("argument %d of '%s' is void", #args, sig), 2)
      end
    end
  end
  return ret, args, name
end

-- ---- compile -----------------------------------------------------------

-- Defines as sorted "NAME=VALUE" strings, so equal settings hash equally.
local function define_list(defines)
  local out = {}
  for k, v in pairs(defines or {}) do
    if math.type(k) == "integer" then out[#out + 1] = tostring(v)
    elseif v == true then out[#out + 1] = k
    elseif v ~= false then out[#out + 1] = k .. "=" .. tostring(v) end
  end
  table.sort(out)
  return out
end
M.define_list = define_list

-- Build products live next to the cache: <cache dir>/build/host.
function M.build_dir()
  local path = core.cache_path or "cache/kwb.db"
  return (path:match("^(.*)/[^/]*$") or ".") .. "/build/host"
end

-- read_spec(spec, known, level) -> source, name | nil, message, { code = "no-file" }:
-- a compile spec (a source string, or a table with the fields `known` lists
-- and `source` or `file`) checked, and its file read. Misuse raises at `level`.
function M.read_spec(spec, known, level)
  if type(spec) == "string" then return spec, nil end
  if type(spec) ~= "table" then error("compile expects a source string or a table", level) end
  local set = {}
  for _, k in ipairs(known) do set[k] = true end
  for k in pairs(spec) do
    if not set[k] then
      error(string.format("unknown compile option '%s' (known: %s)", tostring(k), table.concat(known, ", ")), level)
    end
  end
  local source, name = spec.source, spec.name
  if spec.file then
    local err
    source, err = files.read_file(spec.file)
    if not source then return nil, "cannot read " .. err, { code = "no-file" } end
    name = name or spec.file
  end
  if type(source) ~= "string" then error("compile needs 'source' or 'file'", level) end
  return source, name
end

local Module = {}
Module.__index = Module

-- spec: a source string, or { source = | file =, name, defines, flags, cc,
-- no_load } (no_load: built only, never loaded into this process: what a
-- sandbox runs, kwb.host.sandbox).
-- Returns a module, or nil, message, { code = "compile-error", log = ... }.
function M.compile(spec)
  local source, name, failed = M.read_spec(spec, { "source", "file", "name", "defines", "flags", "cc", "no_load" }, 3)
  if not source then return nil, name, failed end
  if type(spec) == "string" then spec = { source = spec } end
  local ud, msg, info = core.host_compile(source, name or "kernel.c", spec.cc, spec.flags,
                                          define_list(spec.defines), M.build_dir(), spec.no_load)
  if not ud then return nil, msg, info end
  return setmetatable({ ud = ud, hash = ud.hash, path = ud.path, log = ud.log,
                        cached = ud.cached, name = name or "kernel.c" }, Module)
end

-- preprocess(spec) -> the preprocessed text | nil, message, { code =
-- "compile-error", log = }: spec as for compile; the build's own command
-- with -E, so the text is what compile compiles (its line markers name
-- spec.name for the source's own lines).
function M.preprocess(spec)
  local source, name, failed = M.read_spec(spec, { "source", "file", "name", "defines", "flags", "cc" }, 3)
  if not source then return nil, name, failed end
  if type(spec) == "string" then spec = { source = spec } end
  return core.host_preprocess(source, name or "kernel.c", spec.cc, spec.flags, define_list(spec.defines), M.build_dir())
end

-- symbols(path) -> { undefined = { names }, data = { names } } | nil,
-- message, info: what a built object calls and the writable data it defines.
function M.symbols(path)
  return core.host_symbols(path)
end

local function no_tensor_maps(args, sig)
  for i, a in ipairs(args) do
    if a == "tmap" then
      error(string.format("argument %d of '%s' is a CUtensorMap, a CUDA kernel's parameter (kwb.cuda.tensor_map); "
                          .. "host functions take none", i, sig), 3)
    end
  end
end

-- mod:fn "void f(int n, float *x)"  or  mod:fn("f", "void(int, float*)")
-- Returns a callable kernel (kernel(args...), kernel:time(opts, args...)),
-- or nil, message, { code = "no-symbol" }.
function Module:fn(name, sig)
  local ret, args, pname
  local proto = sig or name
  if sig then ret, args = M.parse_signature(sig)
  else ret, args, pname = M.parse_signature(name); name = pname end
  if not name then error("the prototype needs a function name", 2) end
  no_tensor_maps(args, proto)
  return core.host_fn(self.ud, name, ret, args)
end

-- mod:sandbox("void f(int n, float *x)" [, { timeout =, output = }]) -> the
-- function in a process of its own (core/sandbox.c): sb:call(limit_s,
-- args...) -> { cpu =, wall =, between = } | nil, why, { code = "crashed" |
-- "forbidden" | "timeout" }; sb:close(). Or nil, message, { code =
-- "no-symbol" | "sandbox-failed", or "forbidden" | "timeout" | "crashed" for
-- what its module did while it loaded (its initialisers run in the sandbox,
-- `timeout` CPU seconds at most, default 60) }. output: true to give it this
-- process's stdout and stderr, else they go to /dev/null.
function Module:sandbox(proto, opts)
  local ret, args, name = M.parse_signature(proto)
  if not name then error("the prototype needs a function name", 2) end
  no_tensor_maps(args, proto)
  return core.host_sandbox(self.path, name, ret, args, opts)
end

function Module:__tostring()
  return string.format("kwb.host.module %s (%s)", self.name, self.hash:sub(1, 12))
end

-- ---- buffers, verification, timing -------------------------------------

M.buffer = core.buffer

-- compare(out, ref [, { atol =, rtol = }]): max_abs, max_rel, rel_l2, nan,
-- inf, poison, bad, first_bad, worst; ok when every element is within
-- atol + rtol * |ref| and nothing is NaN, Inf or poison.
function M.compare(out, ref, tol)
  tol = tol or {}
  local d = core.compare(out, ref, tol.atol or 0, tol.rtol or 0)
  d.ok = d.bad == 0 and d.ref_nonfinite == 0
  return d
end

-- time(kernel, { args... } [, opts]) -> median, min, p10, p90, spread, n,
-- capped, ... (seconds per call). opts: warmup, warmup_min, min_samples,
-- max_samples, cap, target, min_sample.
function M.time(kernel, args, opts)
  return kernel:time(opts, table.unpack(args, 1, args.n or #args))
end

return M
