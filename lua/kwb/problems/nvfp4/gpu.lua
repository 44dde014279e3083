-- kwb/problems/nvfp4/gpu.lua: NVFP4 weights generated and quantised on the GPU
-- (kernels/nvfp4_moe/gen.cu), for weight sets the CPU reference is too slow
-- for. The values are those of kwb.problems.nvfp4.ref: the same generator (element i of a
-- seed's stream) and the same quantiser, so q, sf and s2 equal the CPU's for
-- the same bf16 weights.
--
--   local gpu = kwb.problems.nvfp4.gpu
--   local w13 = assert(gpu.weights(seed, 256, 4096, 7168))   -- { q, sf, s2, batch, rows, cols }
--   local w   = assert(gpu.bf16(seed, 1 << 20))              -- the generated bf16 themselves
--   local t   = assert(gpu.quantize(w, 4, 512, 512))         -- quantise a bf16 device buffer
--   local p   = assert(gpu.pack(t))                          -- { q, sf }: the fragment-major copy
--   local qr  = assert(gpu.pack_rg(t))                       -- the codes in the rg layout
--   assert(gpu.routing(ids, tw, seed, T, E, K, "skewed"))    -- kwb.problems.nvfp4.ref's routing, into device buffers
--
-- A quantised tensor has the layout of kwb.problems.nvfp4.ref's: q = u8 [batch*rows*cols/2],
-- sf = u8 [batch*rows*cols/16] (linear scales), s2 = f32 [batch], all device
-- buffers. Misuse raises; a device or compiler failure returns nil, message,
-- info as kwb.cuda does.
local cuda = require "kwb.cuda"
local nvfp4 = require "kwb.problems.nvfp4.ref"

local M = {}

M.default_path = "kernels/nvfp4_moe/gen.cu"

-- 16-element blocks a thread takes in the amax and quantise passes.
M.iters = 16

local block = 256

local protos = {
  gen_bf16 = "void nvfp4_gen_bf16(uint64_t seed, double std, double rate, double scale, int64_t first, int64_t n, uint16_t *out)",
  gen_amax = "void nvfp4_gen_amax(uint64_t seed, double std, double rate, double scale, int64_t batch, int64_t per16, int iters, uint32_t *amax, uint32_t *bad)",
  bf16_amax = "void nvfp4_bf16_amax(const uint16_t *w, int64_t batch, int64_t per16, int iters, uint32_t *amax, uint32_t *bad)",
  s2 = "void nvfp4_s2(int64_t batch, const uint32_t *amax, float *s2)",
  gen_quantize = [[void nvfp4_gen_quantize(uint64_t seed, double std, double rate, double scale, int64_t batch,
    int64_t per16, int iters, const uint32_t *amax, const float *s2, uint8_t *q, uint8_t *sf)]],
  bf16_quantize = [[void nvfp4_bf16_quantize(const uint16_t *w, int64_t batch, int64_t per16, int iters,
    const uint32_t *amax, const float *s2, uint8_t *q, uint8_t *sf)]],
  pack = "void nvfp4_pack(int64_t slabs, int cols, const uint8_t *q, const uint8_t *sf, uint8_t *qp, uint8_t *sfp)",
  pack_rg = "void nvfp4_pack_rg(int64_t blocks, const uint8_t *q, uint8_t *qr)",
  routing = "void nvfp4_gen_routing(uint64_t seed, int T, int E, int K, int skewed, int32_t *ids, float *tw)",
}

-- ---- argument checks --------------------------------------------------------

local function check_int(fname, name, v, min)
  if math.type(v) ~= "integer" or v < min then
    error(string.format("nvfp4_gpu.%s: '%s' must be an integer >= %d (got %s)", fname, name, min, tostring(v)), 3)
  end
end

-- buf must be a device buffer of dtype with n elements.
local function check_dbuf(fname, name, buf, dtype, n)
  local ok, dev = pcall(function() return buf.device end)
  if not ok or dev ~= "cuda" then
    error(string.format("nvfp4_gpu.%s: '%s' must be a %s device buffer of %d elements (got %s)",
                        fname, name, dtype, n, ok and dev and ("a " .. tostring(dev) .. " buffer") or type(buf)), 3)
  end
  if buf.dtype ~= dtype or buf.n ~= n then
    error(string.format("nvfp4_gpu.%s: '%s' must be a %s device buffer of %d elements (got %s[%s])",
                        fname, name, dtype, n, tostring(buf.dtype), tostring(buf.n)), 3)
  end
end

local function check_shape(fname, batch, rows, cols)
  check_int(fname, "batch", batch, 0)
  check_int(fname, "rows", rows, 0)
  check_int(fname, "cols", cols, 0)
  if cols % 16 ~= 0 then
    error(string.format("nvfp4_gpu.%s: 'cols' must be a multiple of 16 (got %d)", fname, cols), 3)
  end
end

-- The rule's fields as the generator takes them (nvfp4_gen_weights's checks).
local function check_rule(fname, rule)
  rule = rule or nvfp4.weight_rule
  if type(rule) ~= "table" then
    error(string.format("nvfp4_gpu.%s: 'rule' must be a table { std, outlier_rate, outlier_scale } (got %s)",
                        fname, type(rule)), 3)
  end
  local std, rate, scale = rule.std, rule.outlier_rate, rule.outlier_scale
  if type(std) ~= "number" or not (std >= 0) then
    error(string.format("nvfp4_gpu.%s: 'rule.std' must be a number >= 0 (got %s)", fname, tostring(std)), 3)
  end
  if type(rate) ~= "number" or not (rate >= 0 and rate <= 1) then
    error(string.format("nvfp4_gpu.%s: 'rule.outlier_rate' must be a number in [0, 1] (got %s)", fname,
                        tostring(rate)), 3)
  end
  if type(scale) ~= "number" then
    error(string.format("nvfp4_gpu.%s: 'rule.outlier_scale' must be a number (got %s)", fname, tostring(scale)), 3)
  end
  return std + 0.0, rate + 0.0, scale + 0.0
end

-- ---- the module --------------------------------------------------------------

local loaded = {}

-- load([path]) -> the kernels of gen.cu, compiled once per path for the
-- current device, or nil, message, info (no-file, compile-error, no-driver, ...).
function M.load(path)
  path = require("kwb.base.files").resolve(path or M.default_path)
  if loaded[path] then return loaded[path] end
  local mod, msg, info = cuda.compile { file = path, flags = { "--fmad=false" } }
  if not mod then return nil, msg, info end
  local k = { path = path, module = mod }
  for name, proto in pairs(protos) do
    local fn, err, finfo = mod:kernel(proto:match("void%s+([%w_]+)"), proto)
    if not fn then return nil, path .. ": " .. err, finfo end
    k[name] = fn
  end
  loaded[path] = k
  return k
end

local function ceil_div(a, b) return (a + b - 1) // b end

-- Run the amax, s2 and quantise passes into t (checked) over a source: the
-- generator (seed and rule) or a bf16 device buffer w.
local function quantise(fname, k, t, src)
  local batch, per16 = t.batch, t.rows * t.cols // 16
  if batch == 0 then return t end
  local amax, msg, info = cuda.buffer("u32", batch)
  if not amax then return nil, msg, info end
  local bad
  bad, msg, info = cuda.buffer("u32", 1)
  if not bad then return nil, msg, info end
  local ok
  ok, msg, info = amax:zero()
  if ok then ok, msg, info = bad:zero() end
  if not ok then return nil, msg, info end
  local iters = M.iters
  local grid = ceil_div(batch * per16, block * iters)
  local steps = {}
  if per16 > 0 then
    if src.w then
      steps[1] = { k.bf16_amax, grid = grid, block = block, args = { src.w, batch, per16, iters, amax, bad } }
    else
      steps[1] = { k.gen_amax, grid = grid, block = block,
                   args = { src.seed, src.std, src.rate, src.scale, batch, per16, iters, amax, bad } }
    end
  end
  steps[#steps + 1] = { k.s2, grid = ceil_div(batch, block), block = block, args = { batch, amax, t.s2 } }
  if per16 > 0 then
    if src.w then
      steps[#steps + 1] = { k.bf16_quantize, grid = grid, block = block,
                            args = { src.w, batch, per16, iters, amax, t.s2, t.q, t.sf } }
    else
      steps[#steps + 1] = { k.gen_quantize, grid = grid, block = block,
                            args = { src.seed, src.std, src.rate, src.scale, batch, per16, iters, amax, t.s2, t.q, t.sf } }
    end
  end
  ok, msg, info = cuda.plan(steps):run()
  if not ok then return nil, msg, info end
  local flag
  flag, msg, info = cuda.to_host(bad)
  if not flag then return nil, msg, info end
  if flag[1] ~= 0 then error(string.format("nvfp4_gpu.%s: a weight is NaN or infinite", fname), 3) end
  return t
end

local function check_tensor(fname, t)
  if type(t) ~= "table" then
    error(string.format("nvfp4_gpu.%s: 't' must be a table { q, sf, s2, batch, rows, cols } (got %s)", fname, type(t)), 3)
  end
  check_int(fname, "t.batch", t.batch, 0)
  check_int(fname, "t.rows", t.rows, 0)
  check_int(fname, "t.cols", t.cols, 0)
  if t.cols % 16 ~= 0 then
    error(string.format("nvfp4_gpu.%s: 't.cols' must be a multiple of 16 (got %d)", fname, t.cols), 3)
  end
  local n = t.batch * t.rows * t.cols
  check_dbuf(fname, "t.q", t.q, "u8", n // 2)
  check_dbuf(fname, "t.sf", t.sf, "u8", n // 16)
  check_dbuf(fname, "t.s2", t.s2, "f32", t.batch)
end

-- t with new device buffers t[name] for each { name, dtype, n } of list.
local function with_buffers(t, list)
  for _, f in ipairs(list) do
    local b, msg, info = cuda.buffer(f[2], f[3])
    if not b then return nil, msg, info end
    t[f[1]] = b
  end
  return t
end

-- New device buffers for a tensor of batch x rows x cols.
local function new_tensor(batch, rows, cols)
  local n = batch * rows * cols
  return with_buffers({ batch = batch, rows = rows, cols = cols },
                      { { "q", "u8", n // 2 }, { "sf", "u8", n // 16 }, { "s2", "f32", batch } })
end

-- bf16(seed, n [, rule [, first]]) -> a bf16 device buffer holding weights
-- first .. first+n-1 (first defaults to 0) of seed's stream: kwb.problems.nvfp4.ref's
-- weights(seed, first + n, rule) from element first on.
function M.bf16(seed, n, rule, first)
  check_int("bf16", "seed", seed, math.mininteger)
  check_int("bf16", "n", n, 0)
  first = first or 0
  check_int("bf16", "first", first, 0)
  local std, rate, scale = check_rule("bf16", rule)
  local k, msg, info = M.load()
  if not k then return nil, msg, info end
  local out
  out, msg, info = cuda.buffer("bf16", n)
  if not out then return nil, msg, info end
  if n == 0 then return out end
  local grid = math.min(ceil_div(n, block), 1 << 20)
  local ok
  ok, msg, info = cuda.plan { { k.gen_bf16, grid = grid, block = block,
                                args = { seed, std, rate, scale, first, n, out } } }:run()
  if not ok then return nil, msg, info end
  return out
end

-- fill(t, seed [, rule]) -> t: the weights of seed's stream, as a batch of
-- t.rows x t.cols matrices, quantised into t.q, t.sf and t.s2.
function M.fill(t, seed, rule)
  check_tensor("fill", t)
  check_int("fill", "seed", seed, math.mininteger)
  local std, rate, scale = check_rule("fill", rule)
  local k, msg, info = M.load()
  if not k then return nil, msg, info end
  return quantise("fill", k, t, { seed = seed, std = std, rate = rate, scale = scale })
end

-- weights(seed, batch, rows, cols [, rule]) -> a new quantised tensor, filled.
function M.weights(seed, batch, rows, cols, rule)
  check_int("weights", "seed", seed, math.mininteger)
  check_shape("weights", batch, rows, cols)
  local std, rate, scale = check_rule("weights", rule)
  local k, msg, info = M.load()
  if not k then return nil, msg, info end
  local t
  t, msg, info = new_tensor(batch, rows, cols)
  if not t then return nil, msg, info end
  return quantise("weights", k, t, { seed = seed, std = std, rate = rate, scale = scale })
end

-- pack(t [, into]) -> { q, sf }: t's codes and scales in the fragment-major
-- layout (gen.cu's nvfp4_pack: permuted within each slab of 16 rows for the
-- loads of w4a16.cu's WL = 1), in new device buffers, or into the u8 device
-- buffers into.q and into.sf (t.q's and t.sf's sizes; returns into). Needs
-- t.rows % 16 == 0 and t.cols % 128 == 0.
function M.pack(t, into)
  check_tensor("pack", t)
  if t.rows % 16 ~= 0 or t.cols % 128 ~= 0 then
    error(string.format("nvfp4_gpu.pack: the fragment-major layout needs rows %% 16 == 0 and cols %% 128 == 0 (got %d x %d)",
                        t.rows, t.cols), 2)
  end
  local n = t.batch * t.rows * t.cols
  if into ~= nil then
    if type(into) ~= "table" then error("nvfp4_gpu.pack: 'into' must be a table { q, sf } (got " .. type(into) .. ")", 2) end
    check_dbuf("pack", "into.q", into.q, "u8", n // 2)
    check_dbuf("pack", "into.sf", into.sf, "u8", n // 16)
  end
  local k, msg, info = M.load()
  if not k then return nil, msg, info end
  local out = into
  if not out then
    out, msg, info = with_buffers({}, { { "q", "u8", n // 2 }, { "sf", "u8", n // 16 } })
    if not out then return nil, msg, info end
  end
  if n == 0 then return out end
  local slabs = t.batch * t.rows // 16
  local grid = math.min(ceil_div(slabs * (t.cols // 128) * 64, block), 1 << 20)
  local ok
  ok, msg, info = cuda.plan { { k.pack, grid = grid, block = block, args = { slabs, t.cols, t.q, t.sf, out.q, out.sf } } }:run()
  if not ok then return nil, msg, info end
  return out
end

-- pack_rg(t [, into]) -> a u8 device buffer: t's codes in the rg layout
-- (gen.cu's nvfp4_pack_rg: within each row's 64-byte chunk of 128 elements,
-- byte 16q + p is byte 4p + q, for the register-A wgmma kernels of w4a16.cu's
-- LW = 2; the block scales stay in t.sf), in a new buffer or into the u8
-- device buffer into (t.q's size; returns it). Needs t.cols % 128 == 0.
function M.pack_rg(t, into)
  check_tensor("pack_rg", t)
  if t.cols % 128 ~= 0 then
    error(string.format("nvfp4_gpu.pack_rg: the rg layout needs cols %% 128 == 0 (got %d)", t.cols), 2)
  end
  local n = t.batch * t.rows * t.cols
  if into ~= nil then check_dbuf("pack_rg", "into", into, "u8", n // 2) end
  local k, msg, info = M.load()
  if not k then return nil, msg, info end
  local out = into
  if not out then
    out, msg, info = cuda.buffer("u8", n // 2)
    if not out then return nil, msg, info end
  end
  if n == 0 then return out end
  local blocks = n // 128
  local ok
  ok, msg, info = cuda.plan { { k.pack_rg, grid = math.min(ceil_div(blocks * 16, block), 1 << 20), block = block,
                                args = { blocks, t.q, out } } }:run()
  if not ok then return nil, msg, info end
  return out
end

-- The most slots a token and experts the device's routing takes (gen.cu).
M.routing_max_k, M.routing_max_e = 32, 1024

-- routing(ids, tw, seed, T, E, K, kind) -> true: kwb.problems.nvfp4.ref's routing(seed, T,
-- E, K, kind) ("uniform" or "skewed") made on the device, bit for bit, into
-- the i32 device buffer ids and the f32 device buffer tw (T*K each), on the harness
-- stream, waited for. K up to routing_max_k, E up to routing_max_e.
function M.routing(ids, tw, seed, T, E, K, kind)
  check_int("routing", "seed", seed, math.mininteger)
  check_int("routing", "T", T, 0)
  check_int("routing", "E", E, 1)
  check_int("routing", "K", K, 1)
  if K > E then error(string.format("nvfp4_gpu.routing: K (%d) must not exceed E (%d)", K, E), 2) end
  if K > M.routing_max_k or E > M.routing_max_e then
    error(string.format("nvfp4_gpu.routing: the device's routing takes K <= %d and E <= %d (got K = %d, E = %d)",
                        M.routing_max_k, M.routing_max_e, K, E), 2)
  end
  if kind ~= "uniform" and kind ~= "skewed" then
    error(string.format("nvfp4_gpu.routing: kind must be 'uniform' or 'skewed' (got %s)", tostring(kind)), 2)
  end
  check_dbuf("routing", "ids", ids, "i32", T * K)
  check_dbuf("routing", "tw", tw, "f32", T * K)
  if T == 0 then return true end
  local k, msg, info = M.load()
  if not k then return nil, msg, info end
  return cuda.plan { { k.routing, grid = ceil_div(T, block), block = block,
                       args = { seed, T, E, K, kind == "skewed" and 1 or 0, ids, tw } } }:run()
end

-- quantize(w, batch, rows, cols) -> a new quantised tensor of the bf16 device
-- buffer w (batch x rows x cols), as kwb.problems.nvfp4.ref's quantize does it.
function M.quantize(w, batch, rows, cols)
  check_shape("quantize", batch, rows, cols)
  check_dbuf("quantize", "w", w, "bf16", batch * rows * cols)
  local k, msg, info = M.load()
  if not k then return nil, msg, info end
  local t
  t, msg, info = new_tensor(batch, rows, cols)
  if not t then return nil, msg, info end
  return quantise("quantize", k, t, { w = w })
end

return M
