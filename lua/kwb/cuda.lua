-- kwb/cuda.lua: the CUDA backend: NVRTC and nvcc builds, device buffers,
-- launch plans, timing with CUDA-graph replay, comparison on the GPU, roofline.
-- The names mirror kwb.host.
--
--   local mod = assert(kwb.cuda.compile { file = "kernels/cuda/copy.cu", defines = { VEC = 4 } })
--   local k   = assert(mod:kernel "copy")
--   local x   = kwb.cuda.buffer("f32", n):fill_uniform(1)
--   local y   = kwb.cuda.buffer("f32", n):poison()
--   local p   = kwb.cuda.plan { { k, grid = n // 256, block = 256, args = { x, y, n } } }
--   assert(p:run())
--   local st  = kwb.cuda.time(p)            -- cold L2, graph replay, the stop rule
--   print(kwb.cuda.roofline(st, { bytes = 8 * n }).pct_bw)
local core = require "kwb.core"
local files = require "kwb.base.files"
local host = require "kwb.host"

local M = {}

local function cache_dir()
  local path = core.cache_path or "cache/kwb.db"
  return path:match("^(.*)/[^/]*$") or "."
end

-- Build products live next to the cache: <cache dir>/build/cuda.
function M.build_dir() return cache_dir() .. "/build/cuda" end
core.cuda_set_build_dir(M.build_dir())

-- The directory of kwb's own CUDA headers (kernels/, relative to the tree).
M.kernels_dir = "kernels"

-- ---- devices ------------------------------------------------------------

-- device_count() -> n, or nil, message, { code = "no-driver" | ... }
M.device_count = core.cuda_device_count
-- device(ordinal) -> { name, cc, arch, sms, l2_bytes, memory_bytes, ... }
M.device = core.cuda_device_info
-- nvrtc_version() -> "13.0", or nil, message, { code = "no-nvrtc" }
M.nvrtc_version = core.cuda_nvrtc_version
M.clocks = core.cuda_clocks
-- mem_info() -> free, total: the device's memory in bytes, or nil, message, info
M.mem_info = core.cuda_mem_info

-- The kind of a device (what results and ceilings are keyed by): name, compute
-- capability, SM count, memory and driver major version.
function M.device_kind(d)
  d = d or assert(M.device(0))
  return string.format("%s sm_%s %dSM %dGiB cuda%s", d.name, d.cc:gsub("%.", ""), d.sms,
    (d.memory_bytes + (1 << 29)) >> 30, d.cuda_driver_version:match("^(%d+)"))
end

-- ---- compile ------------------------------------------------------------

local known = { "source", "file", "name", "defines", "flags", "arch", "include", "lineinfo", "nvcc" }

-- A compile spec as the C side takes it.
local function build_spec(spec, level)
  local source, name, info = host.read_spec(spec, known, level + 1)
  if not source then return nil, name, info end
  if type(spec) == "string" then spec = { source = spec } end
  if spec.arch ~= nil and not core.cuda_arch_valid(spec.arch) then
    error(string.format("unknown CUDA arch '%s' (expected sm_80, sm_89, sm_90, sm_90a, sm_100a, ...)", tostring(spec.arch)), level)
  end
  local include = { files.resolve(M.kernels_dir) }
  for _, d in ipairs(spec.include or {}) do include[#include + 1] = d end
  return {
    source = source, name = name or "kernel.cu", arch = spec.arch,
    defines = host.define_list(spec.defines), flags = spec.flags, include_dirs = include,
    build_dir = M.build_dir(), lineinfo = spec.lineinfo ~= false, nvcc = spec.nvcc and true or false,
  }
end

local Module = {}
Module.__index = Module

local function wrap(ud, name)
  return setmetatable({ ud = ud, hash = ud.hash, arch = ud.arch, log = ud.log, path = ud.path,
                        cached = ud.cached, kind = ud.kind, resources = ud.resources,
                        name = name }, Module)
end

-- compile{ source = | file =, name, defines, flags, arch, include, lineinfo, nvcc }
-- NVRTC for device-only sources (nvcc = true: nvcc to a shared object with
-- host launchers). Returns a module, or nil, message, { code, log }.
function M.compile(spec)
  local s, msg, info = build_spec(spec, 3)
  if not s then return nil, msg, info end
  local ud, m, i = core.cuda_compile(s)
  if not ud then return nil, m, i end
  return wrap(ud, s.name)
end

-- The C side's specs of a list of compile specs (a spec it cannot take raises
-- at the caller's caller, naming its place in the list).
local function build_specs(specs)
  local list = {}
  for i, spec in ipairs(specs) do
    local s, msg = build_spec(spec, 4)
    if not s then error(string.format("compile spec %d: %s", i, msg), 3) end
    list[i] = s
  end
  return list
end

-- compile_all({ spec, ... } [, threads]) -> { module | { error =, code =, log = }, ... }
-- builds on `threads` threads (default 8); specs with nvcc = true use nvcc.
function M.compile_all(specs, threads)
  local list = build_specs(specs)
  local out = core.cuda_compile_many(list, threads or 8)
  for i, r in ipairs(out) do
    if type(r) ~= "table" then out[i] = wrap(r, list[i].name) end
  end
  return out
end

-- prebuild({ spec, ... } [, threads]) -> true, or nil, message, info: the
-- same builds as compile_all's, started in the background on `threads`
-- threads (default 4); it returns at once. Each lands in the build directory,
-- where a later compile of the same spec (in this process or a worker sharing
-- the cache) finds it; a failure leaves nothing there, and the later compile
-- reports it. prebuilds_running() -> the background jobs not yet finished.
function M.prebuild(specs, threads)
  return core.cuda_prebuild(build_specs(specs), threads or 4)
end

function M.prebuilds_running() return core.cuda_prebuilds_running() end

function Module:cubin() return self.ud.cubin end
function Module:ptx() return self.ud.ptx end

-- mod:kernel "name" (NVRTC) or mod:launcher "name" (nvcc) -> a function for
-- plans, or nil, message, { code = "no-symbol" | "no-driver" | ... }.
-- An optional C prototype gives the argument types:
--   mod:kernel("scale", "void scale(float *x, float a, int n)")
function Module:kernel(name, sig)
  local fn, msg, info = core.cuda_fn(self.ud, name)
  if not fn then return nil, msg, info end
  local types
  if sig then
    local _, args = host.parse_signature(sig)
    types = args
  end
  return setmetatable({ fn = fn, name = name, types = types, module = self,
                        resources = self.resources[name] }, { __index = function(t, k)
    if k == "attributes" or k == "params" or k == "nparams" then return fn[k] end
  end })
end
Module.launcher = Module.kernel

function Module:__tostring()
  return string.format("kwb.cuda.module %s %s (%s)", self.name, self.arch, self.hash:sub(1, 12))
end

-- ---- buffers and verification ------------------------------------------

-- buffer(dtype, n): a device buffer (dtypes of kwb.host.buffer, and e4m3 and
-- packed e2m1). Methods: fill_uniform(seed, lo, hi), fill_normal(seed, mean,
-- std), fill(v), poison(), zero(), upload(host buffer | string),
-- download(host buffer), raw(), set_raw(string), copy(src), checksum(), digest(key),
-- poisoned() (count, first), redzone(); .dtype .n .bytes. Every buffer lies
-- between guard bands (4 KB before, at least 4 KB after) of bytes drawn for
-- it: redzone() gives the first and last byte offsets written outside it
-- since the last check (negative: before it), or nil.
M.buffer = core.cuda_buffer

-- redzones({ buf, ... } [, { out, ... }]) -> { [i] = { first, last } } for
-- each buffer written outside since its last check, and with outputs given,
-- { [j] = { count, first } } for each output with elements still poison: one
-- launch and one wait for all of them (the check after every timed run).
M.redzones = core.cuda_redzones

-- tensor_map { buf, dims =, box = [, strides =, element_strides =, dtype =,
-- offset =, swizzle =, interleave =, l2 =, oob =] } -> a TMA tensor map over
-- the buffer (kwb.base.tmap checks the spec; cuTensorMapEncodeTiled makes it),
-- for a kernel's `const __grid_constant__ CUtensorMap` parameter: a plan
-- step's argument like a buffer (it keeps its buffer alive). Raises on a bad
-- spec; nil, message, info when the driver refuses it.
function M.tensor_map(spec)
  local args = require("kwb.base.tmap").args(spec)
  if spec[1] == nil then error("tensor_map: the first entry must be a device buffer", 2) end
  return core.cuda_tensor_map(spec[1], args)
end

-- tensor_map_args(spec) -> the driver's arguments kwb.cuda.tensor_map would
-- pass (spec.address and spec.bytes may stand for the buffer: no device needed).
function M.tensor_map_args(spec) return (require("kwb.base.tmap").args(spec)) end

-- guard_layout(bytes) -> before, after, allocation: the guard bands' bytes
-- around a buffer of that size, and what it allocates.
M.guard_layout = core.cuda_guard_layout

-- to_host(dbuf) -> a host buffer with the same values (u8 bytes for e4m3, e2m1).
function M.to_host(b)
  local dt = (b.dtype == "e4m3" or b.dtype == "e2m1") and "u8" or b.dtype
  local h = host.buffer(dt, dt == "u8" and b.bytes or b.n)
  local ok, msg, info = b:download(h)
  if not ok then return nil, msg, info end
  return h
end

-- from_host(hbuf) -> a device buffer holding its values.
function M.from_host(h)
  local b, msg, info = M.buffer(h.dtype, h.n)
  if not b then return nil, msg, info end
  local ok, m2, i2 = b:upload(h)
  if not ok then return nil, m2, i2 end
  return b
end

-- compare(out, ref [, { atol, rtol }]) on the GPU: max_abs, max_rel, rel_l2,
-- nan, inf, poison, bad, first_bad, ok.
function M.compare(out, ref, tol)
  tol = tol or {}
  local d, msg, info = core.cuda_compare(out, ref, tol.atol or 0, tol.rtol or 0)
  if not d then return nil, msg, info end
  d.ok = d.bad == 0 and d.ref_nonfinite == 0
  return d
end

-- checksums({ buf, ... }) -> { hex, ... }: taken before and after a candidate
-- runs, they show whether it wrote to its inputs.
function M.checksums(bufs)
  local out = {}
  for i, b in ipairs(bufs) do out[i] = assert(b:checksum()) end
  return out
end
M.checksum_host = core.cuda_checksum_host

-- ---- plans and timing ---------------------------------------------------

local Plan = {}
Plan.__index = Plan

-- plan{ { kernel, grid =, block =, smem =, cluster =, args = {...} }, ... }:
-- kernels in order, run and timed as one unit on the harness's stream.
function M.plan(steps)
  local p = setmetatable({ ud = assert(core.cuda_plan()), steps = {} }, Plan)
  for _, s in ipairs(steps or {}) do
    local ok, msg, info = p:add(s)
    if not ok then return nil, msg, info end   -- (a gemm step without cuBLAS)
  end
  return p
end

-- A step may instead be one cuBLAS gemm on the plan's stream (captured in the
-- plan's graph, timed with the rest): { gemm = { m =, n =, k =, a = buf, lda =,
-- b = buf, ldb =, c = buf, ldc = [, trans_a =, trans_b =, alpha =, beta =,
-- a_offset =, b_offset =, c_offset =] } } in cuBLAS's column-major terms
-- (kwb.h, kwb_cuda_gemm): A and B bf16, f16 or f32, C of their type or f32,
-- fp32 compute. A wrong field raises; cuBLAS missing returns nil, message,
-- { code = "no-cublas" }.
function Plan:add(s)
  if s.gemm ~= nil then
    for key in pairs(s) do
      if key ~= "gemm" then error(string.format("a gemm step has only the field 'gemm' (got '%s')", tostring(key)), 2) end
    end
    if type(s.gemm) ~= "table" then error("a gemm step's 'gemm' must be a table", 2) end
    local ok, msg, info = self.ud:add_gemm(s.gemm)
    if not ok then return nil, msg, info end
    self.steps[#self.steps + 1] = s
    return self
  end
  local k = s[1] or s.kernel
  if type(k) ~= "table" or not k.fn then error("a plan step needs a kernel from mod:kernel()", 2) end
  for key in pairs(s) do
    if not ({ [1] = 1, kernel = 1, grid = 1, block = 1, smem = 1, cluster = 1, args = 1 })[key] then
      error(string.format("unknown plan step field '%s' (known: kernel, grid, block, smem, cluster, args)", key), 2)
    end
  end
  self.ud:add(k.fn, s.grid, s.block, s.smem or 0, s.cluster, s.args or {}, k.types)
  self.steps[#self.steps + 1] = s
  return self
end

-- run() -> true, or nil, message, { code = "launch-failed" | "no-driver" | ... }
function Plan:run() return self.ud:run() end

-- poison_before{ buf, ... }: these buffers are poisoned before every timed
-- run (outside the timed region), so a kernel that keeps an earlier run's
-- output and skips its work leaves poison behind in the timed runs' output.
function Plan:poison_before(bufs)
  self.ud:poison_before(bufs)
  return self
end

-- time(plan [, opts]) -> stats (seconds per run of the plan) with cold,
-- graph and clocks = { sm_mhz_before, sm_mhz_after, temp_before, temp_after,
-- throttled }. opts: the timing options of kwb.host.time, and hot = true
-- (no L2 flush), graph = false (plain launches).
-- replay([cold]) -> seconds | nil, message, info: one timed run of the plan
-- as a CUDA graph (cold unless cold == false: the poison_before buffers
-- poisoned and the L2 flush buffer written, then read, before the timed
-- region); the caller prepares inputs and checks outputs around it.
function Plan:replay(cold) return self.ud:replay(cold ~= false) end

function M.time(plan, opts)
  opts = opts or {}
  local topts = {}
  for k, v in pairs(opts) do
    if k ~= "hot" and k ~= "graph" then topts[k] = v end
  end
  return plan.ud:time(topts, not opts.hot, opts.graph ~= false)
end
function Plan:time(opts) return M.time(self, opts) end

-- ---- ceilings and roofline ----------------------------------------------

function M.ceilings_path(kind)
  return cache_dir() .. "/ceilings/" .. kind:gsub("[^%w%.%-]+", "_") .. ".json"
end

-- ceilings([kind]) -> { copy_bytes_per_s, bf16_flops_per_s, fma_flops_per_s, ... }
-- as `kwb doctor` stored them, or nil, message, { code = "no-ceilings" }.
function M.ceilings(kind)
  if not kind then
    local d, msg, info = M.device(0)
    if not d then return nil, msg, info end
    kind = M.device_kind(d)
  end
  local path = M.ceilings_path(kind)
  local f = io.open(path, "r")
  if not f then
    return nil, "no ceilings for " .. kind .. ": run `kwb doctor` first", { code = "no-ceilings" }
  end
  local text = f:read("a")
  f:close()
  local ok, t = pcall(require("cjson").decode, text)
  if not ok or type(t) ~= "table" then
    return nil, path .. " is not valid JSON", { code = "bad-ceilings" }
  end
  return t
end

-- copy_bandwidth() -> bytes/s (read + write), where: the copy rate `kwb
-- doctor` stored for this device, else one measured now (256 MiB, 10 runs).
function M.copy_bandwidth()
  local c = M.ceilings()
  if c and c.copy_bytes_per_s then return c.copy_bytes_per_s, "kwb doctor" end
  return 2 * (1 << 28) / assert(core.cuda_measure_copy(1 << 28, 10)), "measured now"
end

-- roofline(stats | seconds, { bytes =, flops = } [, ceilings]) -> { gbs,
-- tflops, pct_bw, pct_flops } (percentages only where ceilings are known).
function M.roofline(st, work, ceil)
  local t = type(st) == "table" and st.median or st
  if type(t) ~= "number" or t <= 0 then error("roofline needs a positive time", 2) end
  local r = {}
  if work.bytes then r.gbs = work.bytes / t / 1e9 end
  if work.flops then r.tflops = work.flops / t / 1e12 end
  ceil = ceil or M.ceilings()
  if ceil then
    if r.gbs and ceil.copy_bytes_per_s then r.pct_bw = 100 * r.gbs * 1e9 / ceil.copy_bytes_per_s end
    if r.tflops then
      local peak = work.tensor == false and ceil.fma_flops_per_s or ceil.bf16_flops_per_s
      if peak then r.pct_flops = 100 * r.tflops * 1e12 / peak end
    end
  end
  return r
end

return M
