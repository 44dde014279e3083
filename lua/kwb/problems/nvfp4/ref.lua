-- kwb/problems/nvfp4/ref.lua: the NVFP4 CPU reference (kernels/nvfp4_moe/nvfp4_ref.c) with
-- checked arguments. The C functions take bare pointers; these wrappers check
-- every buffer's dtype and length first, so a wrong size is an error naming the
-- argument instead of a write past a buffer.
--
--   local ref = kwb.problems.nvfp4.ref.load()                  -- or load("path/to/nvfp4_ref.c")
--   local p = ref.problem { T = 4, H = 256, I = 128, E = 8, k = 2, seed = 1, routing = "skewed" }
--   local out, out64 = ref.layer(p)               -- bf16 [T, H], f64 [T, H]
--
-- A quantised tensor is a table { q = u8 [batch*rows*cols/2], sf = u8 [batch*rows*cols/16]
-- (linear scales), s2 = f32 [batch], batch =, rows =, cols = }.
local files = require "kwb.base.files"
local host = require "kwb.host"

local M = {}

M.default_path = "kernels/nvfp4_moe/nvfp4_ref.c"

-- The recipe's weight rule: normal(0, 0.02), 1 in 1000 elements times 10.
M.weight_rule = { std = 0.02, outlier_rate = 1e-3, outlier_scale = 10 }

local errors = {
  [-1] = "a size is out of range (H, I and cols must be multiples of 16, k <= E)",
  [-2] = "a weight is NaN or infinite",
  [-3] = "out of memory",
  [-4] = "an expert id is outside 0..E-1",
}

local protos = {
  quantize = "int nvfp4_quantize(int batch, int rows, int cols, const uint16_t *w, uint8_t *q, uint8_t *sf, float *s2)",
  dequantize = "int nvfp4_dequantize(int batch, int rows, int cols, const uint8_t *q, const uint8_t *sf, const float *s2, double *out)",
  swizzle = "int nvfp4_sf_swizzle(int batch, int rows, int kcols, const uint8_t *lin, uint8_t *swz)",
  unswizzle = "int nvfp4_sf_unswizzle(int batch, int rows, int kcols, const uint8_t *swz, uint8_t *lin)",
  swizzled_size = "int64_t nvfp4_sf_swizzled_size(int rows, int kcols)",
  layer = [[int nvfp4_moe_ref(int T, int H, int I, int E, int K, const uint16_t *x, const int32_t *ids,
    const float *tw, const uint8_t *w13q, const uint8_t *w13sf, const float *w13s2, const uint8_t *w2q,
    const uint8_t *w2sf, const float *w2s2, uint16_t *out, double *out64)]],
  weights = "int nvfp4_gen_weights(uint64_t seed, int64_t n, double std, double outlier_rate, double outlier_scale, uint16_t *out)",
  routing = "int nvfp4_gen_routing(uint64_t seed, int T, int E, int K, int skewed, int32_t *ids, float *tw)",
}

-- check(fname, name, buf, dtype, n): buf must be a kwb buffer of dtype with n elements.
local function check(fname, name, buf, dtype, n)
  if type(buf) ~= "userdata" or not pcall(function() return buf.dtype end) then
    error(string.format("nvfp4.%s: '%s' must be a %s buffer of %d elements (got %s)",
                        fname, name, dtype, n, type(buf)), 3)
  end
  if buf.dtype ~= dtype or buf.n ~= n then
    error(string.format("nvfp4.%s: '%s' must be a %s buffer of %d elements (got %s[%s])",
                        fname, name, dtype, n, tostring(buf.dtype), tostring(buf.n)), 3)
  end
end

local function check_int(fname, name, v, min)
  if math.type(v) ~= "integer" or v < min then
    error(string.format("nvfp4.%s: '%s' must be an integer >= %d (got %s)", fname, name, min, tostring(v)), 3)
  end
end

local function check_tensor(fname, name, t, batch, rows, cols)
  if type(t) ~= "table" or t.batch ~= batch or t.rows ~= rows or t.cols ~= cols then
    error(string.format("nvfp4.%s: '%s' must be a quantised tensor of %d x %d x %d", fname, name,
                        batch, rows, cols), 3)
  end
  check(fname, name .. ".q", t.q, "u8", batch * rows * cols // 2)
  check(fname, name .. ".sf", t.sf, "u8", batch * rows * cols // 16)
  check(fname, name .. ".s2", t.s2, "f32", batch)
end

local function ok(fname, rc)
  if rc ~= 0 then error(string.format("nvfp4.%s: %s", fname, errors[rc] or ("error " .. rc)), 3) end
end

-- Bytes of one expert's weights in NVFP4: w13 [2I, H] and w2 [H, I] at 4 bits a
-- weight plus one e4m3 scale per 16, and the two float32 s2.
function M.expert_bytes(H, I)
  local n = 3 * H * I
  return n // 2 + n // 16 + 8
end

-- The number of distinct experts in an i32 buffer of expert ids: the experts
-- whose weights a layer must read.
function M.distinct_experts(ids)
  local seen, n = {}, 0
  for i = 1, ids.n do
    local e = ids[i]
    if not seen[e] then seen[e], n = true, n + 1 end
  end
  return n
end

-- load([path]) -> the reference's functions, or nil, message, info (compile-error, no-file).
function M.load(path)
  path = files.resolve(path or M.default_path)
  local mod, msg, info = host.compile { file = path }
  if not mod then return nil, msg, info end
  local c = {}
  for k, proto in pairs(protos) do
    local f, err, finfo = mod:fn(proto)
    if not f then return nil, path .. ": " .. err, finfo end
    c[k] = f
  end
  local R = { path = path, c = c }

  -- quantize(w bf16, batch, rows, cols) -> tensor
  function R.quantize(w, batch, rows, cols)
    check_int("quantize", "batch", batch, 0)
    check_int("quantize", "rows", rows, 0)
    check_int("quantize", "cols", cols, 0)
    if cols % 16 ~= 0 then error("nvfp4.quantize: 'cols' must be a multiple of 16 (got " .. cols .. ")", 2) end
    local n = batch * rows * cols
    check("quantize", "w", w, "bf16", n)
    local t = { q = host.buffer("u8", n // 2), sf = host.buffer("u8", n // 16), s2 = host.buffer("f32", batch),
                batch = batch, rows = rows, cols = cols }
    ok("quantize", c.quantize(batch, rows, cols, w, t.q, t.sf, t.s2))
    return t
  end

  -- dequantize(tensor) -> f64 buffer [batch*rows*cols]
  function R.dequantize(t)
    check_tensor("dequantize", "t", t, t.batch, t.rows, t.cols)
    local out = host.buffer("f64", t.batch * t.rows * t.cols)
    ok("dequantize", c.dequantize(t.batch, t.rows, t.cols, t.q, t.sf, t.s2, out))
    return out
  end

  -- swizzled_scales(tensor) -> u8 buffer [batch * swizzled size]: the 128x4 layout.
  function R.swizzled_scales(t)
    check_tensor("swizzled_scales", "t", t, t.batch, t.rows, t.cols)
    local per = c.swizzled_size(t.rows, t.cols // 16)
    local swz = host.buffer("u8", t.batch * per)
    ok("swizzled_scales", c.swizzle(t.batch, t.rows, t.cols // 16, t.sf, swz))
    return swz
  end

  -- weights(seed, n [, rule]) -> bf16 buffer; rule defaults to M.weight_rule.
  function R.weights(seed, n, rule)
    check_int("weights", "seed", seed, math.mininteger)
    check_int("weights", "n", n, 0)
    rule = rule or M.weight_rule
    local w = host.buffer("bf16", n)
    ok("weights", c.weights(seed, n, rule.std, rule.outlier_rate, rule.outlier_scale, w))
    return w
  end

  -- routing(seed, T, E, k, "uniform" | "skewed") -> ids i32 [T*k], tw f32 [T*k]
  function R.routing(seed, T, E, k, kind)
    check_int("routing", "T", T, 0)
    check_int("routing", "E", E, 1)
    check_int("routing", "k", k, 1)
    if k > E then error(string.format("nvfp4.routing: k (%d) must not exceed E (%d)", k, E), 2) end
    if kind ~= "uniform" and kind ~= "skewed" then
      error("nvfp4.routing: kind must be 'uniform' or 'skewed' (got " .. tostring(kind) .. ")", 2)
    end
    local ids, tw = host.buffer("i32", T * k), host.buffer("f32", T * k)
    ok("routing", c.routing(seed, T, E, k, kind == "skewed" and 1 or 0, ids, tw))
    return ids, tw
  end

  -- problem{T, H, I, E, k, seed, routing} -> every input of the layer, from one seed:
  -- x normal(0, 1) in bf16 (seed), routing (seed + 1), w13 (seed + 2), w2 (seed + 3).
  function R.problem(s)
    for _, f in ipairs { "T", "H", "I", "E", "k", "seed" } do
      check_int("problem", f, s[f], f == "T" and 0 or (f == "seed" and math.mininteger or 1))
    end
    if s.H % 16 ~= 0 or s.I % 16 ~= 0 then
      error(string.format("nvfp4.problem: H and I must be multiples of 16 (got %d, %d)", s.H, s.I), 2)
    end
    local p = { T = s.T, H = s.H, I = s.I, E = s.E, k = s.k, seed = s.seed, routing = s.routing or "uniform" }
    p.x = host.buffer("bf16", p.T * p.H):fill_normal(p.seed)
    p.ids, p.tw = R.routing(p.seed + 1, p.T, p.E, p.k, p.routing)
    p.w13 = R.quantize(R.weights(p.seed + 2, p.E * 2 * p.I * p.H), p.E, 2 * p.I, p.H)
    p.w2 = R.quantize(R.weights(p.seed + 3, p.E * p.H * p.I), p.E, p.H, p.I)
    return p
  end

  -- layer(p [, out, out64]) -> out bf16 [T*H], out64 f64 [T*H]: the float64 reference.
  function R.layer(p, out, out64)
    local T, H, I, E, k = p.T, p.H, p.I, p.E, p.k
    check("layer", "x", p.x, "bf16", T * H)
    check("layer", "ids", p.ids, "i32", T * k)
    check("layer", "tw", p.tw, "f32", T * k)
    check_tensor("layer", "w13", p.w13, E, 2 * I, H)
    check_tensor("layer", "w2", p.w2, E, H, I)
    out = out or host.buffer("bf16", T * H)
    out64 = out64 or host.buffer("f64", T * H)
    check("layer", "out", out, "bf16", T * H)
    check("layer", "out64", out64, "f64", T * H)
    ok("layer", c.layer(T, H, I, E, k, p.x, p.ids, p.tw, p.w13.q, p.w13.sf, p.w13.s2,
                        p.w2.q, p.w2.sf, p.w2.s2, out, out64))
    return out, out64
  end

  return R
end

return M
