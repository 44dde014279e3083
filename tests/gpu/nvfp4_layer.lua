-- tests/gpu/nvfp4_layer.lua: the NVFP4 MoE kernels of recipes/nvfp4_moe.lua
-- against the float64 CPU reference (kernels/nvfp4_moe/nvfp4_ref.c) on small
-- shapes, through the CUDA backend's own plans (the recipe's launch steps):
-- the trusted reference ref.cu, the baseline, and the w4a16 template under
-- several settings. Run by tests/gpu/run with the carried ./kwb.
local t = require "t"
local cuda = kwb.cuda
local B = require "kwb.measure.backends.cuda"
local backend = require "kwb.measure.backends"

local ref = assert(require("kwb.problems.nvfp4.ref").load())
local recipe = kwb.load("recipes/nvfp4_moe.lua")
local problem = recipe.problem

-- The layer's inputs on the GPU from a CPU problem, in the problem's argument order.
local function bench(p, skew)
  local s = { T = p.T, H = p.H, I = p.I, E = p.E, K = p.k, skew = skew }
  local dev = {
    x = cuda.from_host(p.x), ids = cuda.from_host(p.ids), tw = cuda.from_host(p.tw),
    w13q = cuda.from_host(p.w13.q), w13sf = cuda.from_host(p.w13.sf), w13s2 = cuda.from_host(p.w13.s2),
    w2q = cuda.from_host(p.w2.q), w2sf = cuda.from_host(p.w2.sf), w2s2 = cuda.from_host(p.w2.s2),
    out = assert(cuda.buffer("bf16", p.T * p.H)),
  }
  -- the fragment-major copies (WL = 1), packed on the GPU as the problem packs them
  local w13 = assert(require("kwb.problems.nvfp4.gpu").pack { q = dev.w13q, sf = dev.w13sf, s2 = dev.w13s2, batch = p.E, rows = 2 * p.I, cols = p.H })
  local w2 = assert(require("kwb.problems.nvfp4.gpu").pack { q = dev.w2q, sf = dev.w2sf, s2 = dev.w2s2, batch = p.E, rows = p.H, cols = p.I })
  dev.w13pq, dev.w13psf, dev.w2pq, dev.w2psf = w13.q, w13.sf, w2.q, w2.sf
  -- the rg codes (LW = 2)
  dev.w13rq = assert(require("kwb.problems.nvfp4.gpu").pack_rg { q = dev.w13q, sf = dev.w13sf, s2 = dev.w13s2, batch = p.E, rows = 2 * p.I, cols = p.H })
  dev.w2rq = assert(require("kwb.problems.nvfp4.gpu").pack_rg { q = dev.w2q, sf = dev.w2sf, s2 = dev.w2s2, batch = p.E, rows = p.H, cols = p.I })
  local args = {}
  for i, a in ipairs(problem.args) do
    args[i] = a.kind == "scalar" and math.tointeger(a.value(s)) or dev[a.name]
  end
  return { key = problem:shape_key(s), shape = s, args = args, n = #args, out = dev.out }
end

-- Relative L2 error and max abs error of a bf16 device output against float64.
local function error_of(out, out64)
  local h = cuda.to_host(out)
  local d2, r2, mabs, bad = 0, 0, 0, 0
  for i = 1, h.n do
    local o, r = h[i], out64[i]
    if o ~= o or o == math.huge or o == -math.huge then bad = bad + 1
    else
      local e = math.abs(o - r)
      d2, r2, mabs = d2 + e * e, r2 + r * r, math.max(mabs, e)
    end
  end
  return math.sqrt(d2 / r2), mabs, bad
end

local function build(cand)
  local res = { seconds = {} }
  local fn = backend.build(B, cand, recipe, problem:prototype(), res)
  if not fn then error("build failed: " .. tostring(res.outcome) .. ": " .. tostring(res.reason) .. "\n" .. tostring(res.log)) end
  return fn
end

local function candidate(file, defines)
  local src = assert(kwb.files.read_file(file))
  return { source = src, name = file:match("[^/]+$"), defines = defines, params = defines }
end

local shapes = {
  { T = 1, H = 256, I = 128, E = 8, k = 2, routing = "uniform" },
  { T = 5, H = 256, I = 128, E = 8, k = 4, routing = "skewed" },
  { T = 33, H = 384, I = 256, E = 8, k = 2, routing = "uniform" },
  { T = 70, H = 256, I = 128, E = 16, k = 4, routing = "skewed" },
  -- up to 300 tokens an expert: several 64- and 128-token tiles of the wgmma kernels
  { T = 300, H = 384, I = 256, E = 8, k = 2, routing = "skewed" },
  { T = 300, H = 512, I = 256, E = 8, k = 2, routing = "uniform" },
  -- the register-A kernels (LW = 2) need H and I multiples of 256: about 150 tokens an expert
  { T = 300, H = 256, I = 256, E = 4, k = 2, routing = "skewed" },
}
local problems = {}
for i, s in ipairs(shapes) do
  s.seed = 40 + i
  local p = ref.problem(s)
  local _, out64 = ref.layer(p)
  problems[i] = { p = p, out64 = out64, skew = s.routing == "skewed" and 1 or 0 }
end

local function check_all(name, fn)
  for _, pr in ipairs(problems) do
    local b = bench(pr.p, pr.skew)
    b.out:poison()
    local ok, err = B.call(fn, b, b.args)
    t.truthy(ok, name .. " runs at " .. b.key .. ": " .. tostring(err))
    local rel, mabs, bad = error_of(b.out, pr.out64)
    print(string.format("%s at %s: rel L2 %.3g, max abs %.3g, non-finite %d", name, b.key, rel, mabs, bad))
    t.eq(bad, 0, name .. " non-finite outputs at " .. b.key)
    t.truthy(rel <= 5e-3, string.format("%s rel L2 %.3g <= 5e-3 at %s", name, rel, b.key))
  end
end

t.test("nvfp4_ref_kernel_matches_the_float64_reference", function()
  local fn = B.reference(problem, nil, nil)
  check_all("ref.cu", fn)
end)

t.test("nvfp4_baseline_matches_the_float64_reference", function()
  check_all("baseline", build(candidate("kernels/nvfp4_moe/baseline.cu", { BASELINE = 1 })))
end)

local settings = {
  -- T = 33 and 70 take the large-batch kernels (8 or more tokens per expert), T = 1 and 5 the small
  { NT = 1, UP_RW = 1, UP_KW = 4, DN_RW = 1, DN_KW = 4, PF = 1, L_NT = 4, L_UP_RW = 2, L_DN_RW = 2, L_KW = 1, SWITCH = 4 },
  { NT = 2, UP_RW = 2, UP_KW = 2, DN_RW = 4, DN_KW = 1, PF = 2, L_NT = 8, L_UP_RW = 1, L_DN_RW = 4, L_KW = 2, SWITCH = 8 },
  -- every shape on the small-batch kernels
  { NT = 1, UP_RW = 1, UP_KW = 1, DN_RW = 2, DN_KW = 8, PF = 2, L_NT = 2, L_UP_RW = 4, L_DN_RW = 1, L_KW = 2, SWITCH = 32 },
  -- the cp.async ring (WS = 2): split-K warps with no chunk, two n8 tiles, a deep ring
  { NT = 1, UP_RW = 1, UP_KW = 4, DN_RW = 1, DN_KW = 4, PF = 1, L_NT = 2, L_UP_RW = 2, L_DN_RW = 2, L_KW = 1, SWITCH = 4,
    WS = 2, WS_S = 3 },
  { NT = 2, UP_RW = 2, UP_KW = 1, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 2, L_KW = 2, SWITCH = 8,
    WS = 2, WS_S = 4, L2PF = 128 },
  -- the fragment-major weights (WL = 1): into registers with both prefetch depths, and through the ring
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 2, L_UP_RW = 4, L_DN_RW = 2, L_KW = 1, SWITCH = 4,
    MINB = 4, L_MINB = 4, L2PF = 128, WL = 1 },
  { NT = 2, UP_RW = 1, UP_KW = 4, DN_RW = 4, DN_KW = 1, PF = 2, L_NT = 4, L_UP_RW = 2, L_DN_RW = 1, L_KW = 2, SWITCH = 8,
    WL = 1 },
  { NT = 1, UP_RW = 1, UP_KW = 4, DN_RW = 1, DN_KW = 4, PF = 1, L_NT = 2, L_UP_RW = 2, L_DN_RW = 2, L_KW = 1, SWITCH = 4,
    WS = 2, WS_S = 3, WL = 1 },
  -- the wgmma kernels (LW = 1): from 4 tokens an expert (T = 33, 70, 300), tiles of 64 and of 128
  -- tokens; from 16 (T = 70, 300; T = 33 on the mma.sync large-batch kernels), two blocks an SM
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 1, L_KW = 1, SWITCH = 2,
    LW = 1, WG_SWITCH = 4, L_WG = 1 },
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 1, L_KW = 1, SWITCH = 2,
    LW = 1, WG_SWITCH = 4, L_WG = 2, WL = 1 },
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 2, L_DN_RW = 2, L_KW = 1, SWITCH = 4,
    LW = 1, WG_SWITCH = 16, L_WG = 2 },
  -- the register-A wgmma kernels (LW = 2; the last two shapes, H and I multiples of 256, the
  -- others on mma.sync): every tile width, one and two warpgroups a block, both prefetches
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 1, L_KW = 1, SWITCH = 2,
    LW = 2, WG_SWITCH = 4, RG_N = 32, RG_WG = 1, RG_S = 4, RG_PF = 2 },
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 1, L_KW = 1, SWITCH = 2,
    LW = 2, WG_SWITCH = 4, RG_N = 64, RG_WG = 2, RG_S = 3, RG_PF = 1, RG_ORD = 0 },
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 1, L_KW = 1, SWITCH = 2,
    LW = 2, WG_SWITCH = 4, RG_N = 128, RG_WG = 1, RG_S = 3, RG_PF = 2 },
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 1, L_KW = 1, SWITCH = 4,
    LW = 2, WG_SWITCH = 16, RG_N = 128, RG_WG = 2, RG_S = 4, RG_PF = 2 },
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 1, L_KW = 1, SWITCH = 2,
    LW = 2, WG_SWITCH = 4, RG_N = 64, RG_WG = 1, RG_OCC = 3, RG_PF = 1 },
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 1, L_KW = 1, SWITCH = 2,
    LW = 2, WG_SWITCH = 4, RG_N = 64, RG_WG = 2, RG_OCC = 1, RG_PF = 1, RG_M = 2 },
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 1, L_KW = 1, SWITCH = 2,
    LW = 2, WG_SWITCH = 4, RG_N = 32, RG_WG = 1, RG_OCC = 2, RG_PF = 1, RG_M = 2, RG_ORD = 1 },
  -- the warp-specialised kernels (LW = 3; the last two shapes): tiles of 128 tokens (the m64n32,
  -- n64 and n128 instances as a tile's tokens need), tiles of 64 in a deeper ring, the other
  -- order, the shallowest ring
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 1, L_KW = 1, SWITCH = 2,
    LW = 3, WG_SWITCH = 4, SP_N = 128 },
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 1, L_KW = 1, SWITCH = 2,
    LW = 3, WG_SWITCH = 4, SP_N = 64, SP_S = 6, SP_LAG = 3, SP_ORD = 0 },
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 1, L_KW = 1, SWITCH = 2,
    LW = 3, WG_SWITCH = 4, SP_N = 128, SP_S = 3, SP_LAG = 1 },
  -- the codes by TMA
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 1, L_KW = 1, SWITCH = 2,
    LW = 3, WG_SWITCH = 4, SP_N = 128, SP_TMA = 1 },
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 1, L_KW = 1, SWITCH = 2,
    LW = 3, WG_SWITCH = 4, SP_N = 64, SP_S = 6, SP_LAG = 2, SP_TMA = 1 },
  -- the register split at which ptxas keeps the consumers' wgmma asynchronous at 64 tokens a tile
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 1, L_KW = 1, SWITCH = 2,
    LW = 3, WG_SWITCH = 4, SP_N = 64, SP_LAG = 2, SP_TMA = 1, SP_PREG = 40, SP_CREG = 232 },
  -- one A set a consumer (each group waits for the MMAs before it)
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 1, L_KW = 1, SWITCH = 2,
    LW = 3, WG_SWITCH = 4, SP_N = 64, SP_AS = 1, SP_TMA = 1, SP_PREG = 40, SP_CREG = 232 },
  -- one 64-row group a consumer (blocks of 128 rows): 128-token tiles with asynchronous MMAs
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 1, L_KW = 1, SWITCH = 2,
    LW = 3, WG_SWITCH = 4, SP_N = 128, SP_M = 1 },
  { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1, L_DN_RW = 1, L_KW = 1, SWITCH = 2,
    LW = 3, WG_SWITCH = 4, SP_N = 128, SP_M = 1, SP_TMA = 1, SP_ORD = 0 },
}
-- kwb tests/gpu/nvfp4_layer.lua [TEXT]: only the template settings whose text contains TEXT
-- (e.g. "LW=3"); the reference and the baseline always
local only = arg and arg[1]
for _, p in ipairs(settings) do
  if only and not require("kwb.loop").params_text(p):find(only, 1, true) then goto next end
  t.test("nvfp4_w4a16_matches_the_float64_reference " .. require("kwb.loop").params_text(p), function()
    check_all("w4a16 " .. require("kwb.loop").params_text(p), build(candidate("kernels/nvfp4_moe/w4a16.cu", p)))
  end)
  ::next::
end

t.done()
