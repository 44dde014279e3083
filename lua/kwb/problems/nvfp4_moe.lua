-- kwb/problems/nvfp4_moe.lua: the routed experts of one MoE layer with NVFP4
-- weights (modeldocs/nvfp4.md, modeldocs/deepseek_moe.md).
--
--   local moe = require "kwb.problems.nvfp4_moe"
--   problem = moe {}
--
-- Shape: T tokens, hidden H, expert intermediate I, E experts, top-K, and
-- skew (0: uniform routing, 1: skewed, expert popularity ~ 1/rank). Inputs:
-- x bf16 [T, H] normal(0, 1); ids int32 [T, K] and tw f32 [T, K] from the
-- routing generator (kernels/nvfp4_moe/nvfp4_ref.c); w13 [E, 2I, H] and
-- w2 [E, H, I] in NVFP4 (codes, e4m3 scales in the linear layout, one f32 s2
-- per expert), quantised by the reference quantiser from bf16 weights drawn
-- normal(0, 0.02) with rare outliers, generated on the GPU once per session
-- (fixed inputs, shared by every shape); w13pq/w13psf and w2pq/w2psf hold the
-- same codes and scales in the fragment-major layout (gen.cu's nvfp4_pack,
-- permuted within each slab of 16 rows), and w13rq and w2rq the codes in the
-- rg layout (gen.cu's nvfp4_pack_rg, bytes reordered within each row's 64-byte
-- chunk), made once with them: weight formats chosen at load time, as
-- Marlin-style kernels do. Output bf16 [T, H]:
--   out[t] = sum_k tw[t,k] * W2[e] (bf16(silu(W1[e] x[t]) * (W3[e] x[t]))),  e = ids[t,k]
-- Any token sorting a layer needs is inside it (timed); the router is not.
--
-- Verified against kernels/nvfp4_moe/ref.cu (a thread per output row and
-- 16 token slots of one expert, fp32 accumulation; itself checked against the float64 CPU reference in
-- tests/gpu/nvfp4.lua) with a relative L2 error of at most 5e-3. The inputs
-- are drawn per run and round (draw = "run"): the reference runs once per shape
-- and round and every candidate is checked against the kept outputs.
local files = require "kwb.base.files"
local problem = require "kwb.problem"
local nvfp4 = require "kwb.problems.nvfp4.ref"

local M = {}

M.ref_file = "kernels/nvfp4_moe/ref.cu"

local cpu_ref
local function ref()
  if not cpu_ref then cpu_ref = assert(nvfp4.load()) end
  return cpu_ref
end

-- The two matrix sets, by name prefix: rows and columns of one expert's matrix.
local dims = {
  w13 = function(s) return 2 * s.I, s.H end,
  w2 = function(s) return s.H, s.I end,
}

-- A matrix set's codes, scales and s2 (kwb.problems.nvfp4.gpu's tensor) from bufs.
local function tensor(bufs, prefix, s)
  local rows, cols = dims[prefix](s)
  return { q = bufs[prefix .. "q"], sf = bufs[prefix .. "sf"], s2 = bufs[prefix .. "s2"],
           batch = s.E, rows = rows, cols = cols }
end

-- Weights: one init fills codes, scales and s2 of a matrix set on the GPU.
local function weights(prefix)
  return function(_, seed, s, bufs)
    assert(require("kwb.problems.nvfp4.gpu").fill(tensor(bufs, prefix, s), seed))
  end
end

-- The fragment-major copy (gen.cu's nvfp4_pack) of a matrix set its own init
-- filled before: codes into pq, scales into psf through bufs.
local function packed(prefix)
  return function(buf, _, s, bufs)
    assert(require("kwb.problems.nvfp4.gpu").pack(tensor(bufs, prefix, s), { q = buf, sf = bufs[prefix .. "psf"] }))
  end
end

-- The rg copy of a matrix set's codes (gen.cu's nvfp4_pack_rg), from the codes
-- its own init filled before.
local function packed_rg(prefix)
  return function(buf, _, s, bufs)
    assert(require("kwb.problems.nvfp4.gpu").pack_rg(tensor(bufs, prefix, s), buf))
  end
end

-- Routing: ids, and tw through bufs. On the device its generator's copy
-- (kwb.problems.nvfp4.gpu.routing, bit for bit the CPU's: every timed run draws it
-- afresh, and the CPU's takes 11 ms at T = 4096 under skewed routing), else
-- the CPU's, uploaded.
local function routing(buf, seed, s, bufs)
  local kind = s.skew == 1 and "skewed" or "uniform"
  local gpu = require "kwb.problems.nvfp4.gpu"
  if buf.device == "cuda" and s.K <= gpu.routing_max_k and s.E <= gpu.routing_max_e then
    assert(gpu.routing(buf, bufs.tw, seed, s.T, s.E, s.K, kind))
    return
  end
  local ids, tw = ref().routing(seed, s.T, s.E, s.K, kind)
  assert(buf:upload(ids))
  assert(bufs.tw:upload(tw))
end

-- Bytes a layer must move at least: x, out, and the weights of K experts (every
-- token reaches K distinct experts). A lower bound: the loop's physical floor
-- must never flag a real kernel; bench/nvfp4_moe.lua counts the experts each
-- routing actually reaches for the byte floor it reports.
function M.min_bytes(s)
  return 4 * s.T * s.H + s.K * nvfp4.expert_bytes(s.H, s.I)
end

function M.flops(s) return 6 * s.T * s.K * s.H * s.I end

-- The plan of a warp-per-row kernel pair (baseline.cu's):
-- up over (8 rows of I, token slot), down over (8 rows of H, token), block 256.
function M.warp_rows_launch(s, up, down)
  return { steps = {
    { up, grid = { (s.I + 7) // 8, s.T * s.K }, block = 256,
      args = { "T", "H", "I", "E", "K", "x", "ids", "w13q", "w13sf", "w13s2", "h" } },
    { down, grid = { (s.H + 7) // 8, s.T }, block = 256,
      args = { "T", "H", "I", "E", "K", "ids", "tw", "h", "w2q", "w2sf", "w2s2", "out" } },
  }, scratch = { h = { "bf16", s.T * s.K * s.I } } }
end

-- The reference's launch plan (ref.cu's header): the token slots listed per
-- expert, then up and down over (128 rows, expert, S parts of its slots), then
-- the weighted sum over each token's slots.
M.ref_tt = 16   -- ref.cu's REF_TT: the token slots one thread carries
function M.ref_launch(s)
  local TK = s.T * s.K
  local S = math.max(1, math.min(64, (TK + M.ref_tt - 1) // M.ref_tt))
  local function blocks(n) return (n + 127) // 128 end
  return { steps = {
    { "nvfp4_moe_ref_route", grid = blocks(s.E), block = 128, args = { "T", "E", "K", "ids", "count", "list" } },
    { "nvfp4_moe_ref_up", grid = { blocks(s.I), s.E, S }, block = 128,
      args = { "T", "H", "I", "E", "K", "x", "count", "list", "w13q", "w13sf", "w13s2", "h" } },
    { "nvfp4_moe_ref_down", grid = { blocks(s.H), s.E, S }, block = 128,
      args = { "T", "H", "I", "E", "K", "count", "list", "h", "w2q", "w2sf", "w2s2", "y" } },
    { "nvfp4_moe_ref_combine", grid = { blocks(s.H), s.T }, block = 128,
      args = { "T", "H", "E", "K", "ids", "tw", "y", "out" } },
  }, scratch = { count = { "i32", s.E }, list = { "i32", s.E * TK }, h = { "bf16", TK * s.I }, y = { "f32", TK * s.H } } }
end

setmetatable(M, { __call = function(_, opts)
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "tolerance" then error("nvfp4_moe: unknown option '" .. tostring(k) .. "' (known: tolerance)", 2) end
  end
  local host = require "kwb.host"
  local ref_source = assert(files.read_file(files.resolve(M.ref_file)))
  return problem.define {
    name = "nvfp4_moe",
    description = "routed experts of an MoE layer, NVFP4 weights (W4A16), bf16 activations",
    vars = { "T", "H", "I", "E", "K", { "skew", min = 0 } },
    vary = { "T" },   -- the model's dimensions are fixed; the token count is what a layer meets
    fn = "nvfp4_moe",
    draw = "run",
    args = {
      { "T", "i32", value = "T" }, { "H", "i32", value = "H" }, { "I", "i32", value = "I" },
      { "E", "i32", value = "E" }, { "K", "i32", value = "K" },
      { "x", "bf16", shape = "T*H", init = { "normal", 0, 1 } },
      { "ids", "i32", shape = "T*K", init = routing },
      { "tw", "f32", shape = "T*K", init = false },
      { "w13q", "u8", shape = "E*2*I*H//2", fixed = true,
        init = weights "w13" },
      { "w13sf", "u8", shape = "E*2*I*H//16", fixed = true, init = false },
      { "w13s2", "f32", shape = "E", fixed = true, init = false },
      { "w2q", "u8", shape = "E*H*I//2", fixed = true,
        init = weights "w2" },
      { "w2sf", "u8", shape = "E*H*I//16", fixed = true, init = false },
      { "w2s2", "f32", shape = "E", fixed = true, init = false },
      -- the same weights in the fragment-major layout (modeldocs/nvfp4.md), for kernels that read it
      { "w13pq", "u8", shape = "E*2*I*H//2", fixed = true,
        init = packed "w13" },
      { "w13psf", "u8", shape = "E*2*I*H//16", fixed = true, init = false },
      { "w2pq", "u8", shape = "E*H*I//2", fixed = true,
        init = packed "w2" },
      { "w2psf", "u8", shape = "E*H*I//16", fixed = true, init = false },
      -- the codes in the rg layout (gen.cu's nvfp4_pack_rg), for the register-A wgmma kernels
      { "w13rq", "u8", shape = "E*2*I*H//2", fixed = true, init = packed_rg "w13" },
      { "w2rq", "u8", shape = "E*H*I//2", fixed = true, init = packed_rg "w2" },
      { "out", "bf16", shape = "T*H", role = "out" },
    },
    reference = { cuda = { source = ref_source, fn = "nvfp4_moe_ref_up", launch = M.ref_launch } },
    -- a recipe's `baseline = "cublas"`: the same layer in bf16 through cuBLAS (kwb.problems.nvfp4.cublas)
    baselines = { cublas = { plan = function(h) return require("kwb.problems.nvfp4.cublas").open(h) end,
                             description = "bf16 weights dequantised once, a cublasGemmEx per active expert" } },
    tolerance = opts.tolerance or { rel_l2 = 5e-3 },
    bytes = M.min_bytes,
    flops = M.flops,
  }
end })

return M
