-- recipes/nvfp4_moe.lua: the routed experts of a DeepSeek-V3 MoE layer with
-- NVFP4 weights on Hopper (weight-only: dequantised to bf16 in registers for
-- mma.sync or wgmma, or once a tile into shared memory for wgmma; fp32
-- accumulation). Built for sm_90a.
-- Every shape verified (relative L2 <= 5e-3 against
-- kernels/nvfp4_moe/ref.cu) and timed (CUDA graph, cold L2), for T from 1 to
-- 4096 tokens under uniform and skewed routing. The template
-- kernels/nvfp4_moe/w4a16.cu sorts tokens by expert and runs tiled MMA GEMMs,
-- picking its kernels by tokens an expert: mma.sync below WG_SWITCH, the
-- register-A wgmma kernels (LW = 2) from there. The start kernel is the
-- template at the best settings measured by hand (docs/perf.md); the model
-- (`llm+tune`) proposes template changes and the spaces a tuner sweeps. With
-- no model configured (KWB_MODEL, or --model PROVIDER:NAME) its replies are
-- replayed from transcripts/nvfp4_moe.json, written by hand
-- (tools/nvfp4_transcript.lua). kernels/nvfp4_moe/baseline.cu (a warp per
-- output row, no token sorting) stays as a plain kernel to compare with
-- (bench/nvfp4_moe.lua).
--   kwb recipes/nvfp4_moe.lua [--json] [--budget N] [--minutes M] [--strategy grid]
local moe = require "kwb.problems.nvfp4_moe"

local nsm
local function sms()
  nsm = nsm or assert(kwb.cuda.device(0)).sms
  return nsm
end

-- The baseline's plan (its header): a warp per row, one block per 8 rows.
local function baseline(s) return moe.warp_rows_launch(s, "nvfp4_moe_base_up", "nvfp4_moe_base_down") end

-- Shared memory of a GEMM kernel with WS (w4a16.cu's CpLayout and
-- ws_blocks): dynamic bytes, and blocks an SM holds. nr: row groups a warp
-- (2 for up: gate and up, 1 for down); nt: n8 token tiles. A stage holds the
-- codes, activations and scales of one chunk.
local function ws_smem(p, rw, kw, nr, nt)
  local warps = rw * kw
  local dyn = warps * p.WS_S * (nr * 1024 + nt * 2048 + nr * 128)
  local red = 4 * (kw > 1 and (kw - 1) * rw * 32 * nr * nt * 4 or 1)
  return dyn, math.min(233472 // (dyn + red + 1024), 2048 // (32 * warps))
end

-- The template's plan (w4a16.cu's header): align, up, down, combine. Two
-- instances of each GEMM: the small-batch one (NT, UP_*, DN_*) and the
-- large-batch one, taken from SWITCH tokens per expert on average, on
-- mma.sync (L_*); with LW = 1, from WG_SWITCH tokens per expert, wgmma kernels
-- (w4_up_wg, w4_down_wg: tiles of 64 * L_WG tokens, 128 weight rows, three
-- stages of shared memory); with LW = 2, from WG_SWITCH tokens per expert,
-- the register-A wgmma kernels (w4_up_rg, w4_down_rg: tiles of RG_N tokens,
-- 64 * RG_M weight rows a warpgroup, RG_WG warpgroups a block, RG_S stages of
-- activations), where H and I are multiples of 256. So one candidate picks
-- its kernels by shape.
-- The persistent kernels get as many blocks as the GPU holds at once (with
-- WS, as shared memory allows); tiles beyond the routing's real count are
-- skipped on the device.
local function w4a16(s, p)
  local large = s.T * s.K >= p.SWITCH * s.E
  -- (settings a table leaves out: the template's defaults, and WG_SWITCH 32)
  local l_wg, lw = p.L_WG or 2, p.LW or 0
  local wg = lw >= 1 and s.T * s.K >= (p.WG_SWITCH or 32) * s.E
  -- the register-A kernels take whole pairs of 128-element chunks and whole blocks of
  -- 64 * RG_WG * RG_M rows: elsewhere mma.sync
  local rg_n, rg_wg, rg_s, rg_m = p.RG_N or 64, p.RG_WG or 1, p.RG_S or 4, p.RG_M or 1
  local rg = wg and lw == 2 and s.H % 256 == 0 and s.I % 256 == 0 and s.I % (32 * rg_wg * rg_m) == 0
             and s.H % (64 * rg_wg * rg_m) == 0
  if lw == 2 and not rg then wg = false end
  -- the warp-specialised register-A kernels (LW = 3): whole 128-element chunks, blocks of
  -- 128 * SP_M rows of w2 and 64 * SP_M h columns of w13
  local sp = wg and lw == 3 and s.H % 256 == 0 and s.I % 256 == 0
  if lw == 3 and not sp then wg = false end
  local rg_occ = p.RG_OCC or (rg_wg == 2 and 1 or rg_n == 32 and 3 or 2)
  -- a second register-A instance, where a template has one (w4_up_rg2, w4_down_rg2: RG2_N
  -- tokens a tile, RG2_WG warpgroups, RG2_M row groups, RG2_OCC blocks an SM; RG_S, RG_PF
  -- and RG_ORD shared), from RG2_FROM tokens an expert (0 or none: never)
  local rg2 = ""
  if rg and (p.RG2_FROM or 0) > 0 and s.T * s.K >= p.RG2_FROM * s.E then
    local n2, wg2, m2 = p.RG2_N or rg_n, p.RG2_WG or rg_wg, p.RG2_M or 1
    if s.I % (32 * wg2 * m2) == 0 and s.H % (64 * wg2 * m2) == 0 then
      rg_n, rg_wg, rg_m, rg2 = n2, wg2, m2, "2"
      rg_occ = p.RG2_OCC or (rg_wg == 2 and 1 or rg_n == 32 and 3 or 2)
    end
  end
  local nt = large and p.L_NT or p.NT
  local sp_n = p.SP_N or 128
  local tt = sp and sp_n or rg and rg_n or wg and 64 * l_wg or 8 * nt
  local up_rw, dn_rw = large and p.L_UP_RW or p.UP_RW, large and p.L_DN_RW or p.DN_RW
  local up_kw, dn_kw = large and p.L_KW or p.UP_KW, large and p.L_KW or p.DN_KW
  local up_threads, dn_threads = 32 * up_rw * up_kw, 32 * dn_rw * dn_kw
  local up_smem, dn_smem, up_blocks, dn_blocks = 0, 0, 2048 // up_threads, 2048 // dn_threads
  if (p.WS or 0) ~= 0 then
    up_smem, up_blocks = ws_smem(p, up_rw, up_kw, 2, nt)
    dn_smem, dn_blocks = ws_smem(p, dn_rw, dn_kw, 1, nt)
  end
  local up_rows, dn_rows = 16 * up_rw, 16 * dn_rw
  local up, down, pk = "w4_up", "w4_down", (p.WL or 0) == 1 and "p" or ""
  local sp_m = p.SP_M or 2
  if sp then
    -- w4a16.cu's SP_SMEM (SP_S stages of SP_N tokens x 256 bytes, 128 * SP_M rows' codes and
    -- scales; the mbarriers, the token table, 1 KB to align): three warpgroups, one block an SM
    local sp_s = p.SP_S or (sp_n == 128 and 4 or 6)
    up_threads, dn_threads = 384, 384
    up_smem = sp_s * (sp_n * 256 + 128 * sp_m * 72) + 16 * sp_s + 4 * sp_n + 1024
    dn_smem = up_smem
    up_blocks, dn_blocks = 1, 1
    up_rows, dn_rows = 64 * sp_m, 128 * sp_m
    up, down, pk = "w4_up_sp", "w4_down_sp", "r"
  elseif rg then
    -- w4a16.cu's RG_SMEM (RG_S stages of RG_N tokens x 256 bytes, the token table, 1 KB to
    -- align) and RG_OCC
    -- (the blocks an SM is to hold, by launch bounds: default 3 of one warpgroup at 32 tokens,
    -- else 2; 1 of two), as shared memory allows
    up_threads = 128 * rg_wg
    dn_threads = up_threads
    up_smem = rg_s * 256 * rg_n + 4 * rg_n + 1024
    dn_smem = up_smem
    up_blocks = math.min(rg_occ, 233472 // (up_smem + 1024))
    dn_blocks = up_blocks
    up_rows, dn_rows = 32 * rg_wg * rg_m, 64 * rg_wg * rg_m
    up, down, pk = "w4_up_rg" .. rg2, "w4_down_rg" .. rg2, "r"   -- the codes in the rg layout, the linear scales
  elseif wg then
    -- w4a16.cu's WG_SMEM: three stages of activations (128 bytes a token) and dequantised
    -- weights (128 rows of 128 bytes), and 1 KB to align. Registers (about 150 a thread at
    -- L_WG = 2, 185 at 1) let an SM hold one block of 256 threads or two of 128.
    up_threads = 128 * l_wg
    dn_threads = up_threads
    up_smem = 3 * (128 * tt + 16384) + 1024
    dn_smem = up_smem
    up_blocks = l_wg == 1 and 2 or 1
    dn_blocks = up_blocks
    up_rows, dn_rows = 64, 128
    up, down, pk = "w4_up_wg", "w4_down_wg", ""   -- the wgmma kernels read the linear weights
  elseif large then
    up, down = "w4_up_l", "w4_down_l"
  end
  local psf = pk == "r" and "" or pk   -- the rg copy has no scales of its own
  local tiles = s.T * s.K // tt + s.E + 1
  local up_work = tiles * (s.I // up_rows)
  local dn_work = tiles * (s.H // dn_rows)
  local quads = s.T * s.H // 4
  local up_args = { "T", "H", "I", "E", "K", "x", "pairs", "tiles", "meta", "w13" .. pk .. "q", "w13" .. psf .. "sf",
                    "w13s2", "h" }
  local dn_args = { "T", "H", "I", "E", "K", "pairs", "tiles", "meta", "h", "w2" .. pk .. "q", "w2" .. psf .. "sf", "w2s2",
                    "y" }
  if sp and (p.SP_TMA or 0) == 1 then
    -- the rg codes by TMA: boxes of 64 bytes (a chunk) x 64 * SP_M rows of w13 (gate, then up)
    -- and 128 * SP_M of w2
    up_args[#up_args + 1] = { tensor_map = "w13rq", dims = { s.H // 2, s.E * 2 * s.I }, box = { 64, 64 * sp_m } }
    dn_args[#dn_args + 1] = { tensor_map = "w2rq", dims = { s.I // 2, s.E * s.H }, box = { 64, 128 * sp_m } }
  end
  return { steps = {
    { "w4_align", grid = 1, block = 1024, args = { "T", "K", "E", { "i32", tt }, "ids", "pairs", "tiles", "meta" } },
    { up, grid = math.min(up_work, sms() * up_blocks), block = up_threads, smem = up_smem, args = up_args },
    { down, grid = math.min(dn_work, sms() * dn_blocks), block = dn_threads, smem = dn_smem, args = dn_args },
    { "w4_combine", grid = math.min((quads + 255) // 256, sms() * 8), block = 256,
      args = { "T", "H", "K", "tw", "y", "out" } },
  }, scratch = { pairs = { "i32", s.T * s.K }, tiles = { "i32", 4 * tiles }, meta = { "i32", 4 },
                 h = { "bf16", s.T * s.K * s.I }, y = { "f32", s.T * s.K * s.H } } }
end

-- The best settings measured by hand (docs/perf.md): the mma.sync kernels of
-- the H200 table (2026-12-03) up to T = 256, and from 16 tokens an expert
-- (T >= 512) the register-A wgmma kernels at 128 tokens a tile, two
-- warpgroups a block (H100, 2026-12-06: 7.26 ms at T = 1024, 12.78 at 4096).
local best = { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 2, L_UP_RW = 4, L_DN_RW = 2, L_KW = 1,
               SWITCH = 8, L2PF = 128, MINB = 1, L_MINB = 4, WS = 0, WS_S = 2, WL = 1, LW = 2, WG_SWITCH = 16, L_WG = 2,
               RG_N = 128, RG_WG = 2, RG_S = 4, RG_PF = 2, RG_ORD = 0, RG_OCC = 1, RG_M = 1,
               SP_N = 128, SP_M = 2, SP_TMA = 0, SP_PREG = 72, SP_CREG = 216 }

return kwb.recipe {
  name     = "nvfp4_moe",
  backend  = "cuda",
  problem  = moe {},
  shapes   = { T = { 1, 4, 16, 64, 256, 1024, 4096 }, H = { 7168 }, I = { 2048 }, E = { 256 }, K = { 8 },
               skew = { 0, 1 } },
  start    = { file = "../kernels/nvfp4_moe/w4a16.cu", defines = best },
  baseline = "cublas",   -- the layer in bf16 through cuBLAS, timed beside the pick (kwb.problems.nvfp4.cublas)
  template = "../kernels/nvfp4_moe/w4a16.cu",
  space    = {
    NT = { 1, 2 }, UP_RW = { 1, 2, 4 }, UP_KW = { 1, 2, 4, 8 }, DN_RW = { 1, 2, 4 }, DN_KW = { 1, 2, 4, 8 },
    PF = { 1, 2 }, L_NT = { 2, 4, 8 }, L_UP_RW = { 1, 2, 4 }, L_DN_RW = { 1, 2, 4 }, L_KW = { 1, 2 },
    SWITCH = { 4, 8, 16, 32 }, L2PF = { 0, 128 }, MINB = { 1, 3, 4 }, L_MINB = { 1, 2, 4, 8 }, WS = { 0, 2 }, WS_S = { 2, 3, 4 },
    WL = { 0, 1 }, LW = { 0, 1, 2, 3 }, WG_SWITCH = { 16, 32, 64 }, L_WG = { 1, 2 },
    RG_N = { 32, 64, 128 }, RG_WG = { 1, 2 }, RG_S = { 3, 4 }, RG_PF = { 1, 2 }, RG_ORD = { 0, 1 }, RG_OCC = { 1, 2, 3 },
    RG_M = { 1, 2 },
    -- the warp-specialised kernels (LW = 3): tile, row groups a consumer, the codes by TMA, and
    -- the registers after setmaxnreg (72/216 or 40/232: 40/232 keeps the MMAs of 64-token tiles
    -- at two row groups asynchronous; H100, 2026-12-08: 4.05 ms at T = 1024 against 7.19 for LW = 2)
    SP_N = { 64, 128 }, SP_M = { 1, 2 }, SP_TMA = { 0, 1 }, SP_PREG = { 40, 72 }, SP_CREG = { 216, 232 },
    restrict = function(p)
      if not (p.UP_RW * p.UP_KW <= 16 and p.DN_RW * p.DN_KW <= 16 and p.L_UP_RW * p.L_KW <= 8
              and p.L_DN_RW * p.L_KW <= 8 and p.L_NT > p.NT) then return false end
      -- the wgmma kernels' settings only where they run (missing: the template's defaults), and
      -- above the mma.sync large-batch ones
      local lw = p.LW or 0
      if lw >= 1 then
        if (p.WG_SWITCH or 32) <= p.SWITCH then return false end
      elseif (p.WG_SWITCH or 32) ~= 32 then return false end
      if lw ~= 1 and (p.L_WG or 2) ~= 2 then return false end
      if lw ~= 2 and ((p.RG_N or 64) ~= 64 or (p.RG_WG or 1) ~= 1 or (p.RG_S or 4) ~= 4 or (p.RG_PF or 2) ~= 2
                      or (p.RG_ORD or 0) ~= 0 or (p.RG_OCC or 2) ~= 2 or (p.RG_M or 1) ~= 1) then
        return false
      end
      -- the LW = 3 settings likewise (missing: w4a16.cu's defaults), and its registers add up to
      -- 3 x 168 (the count at entry), as setmaxnreg requires
      local preg, creg = p.SP_PREG or 72, p.SP_CREG or 216
      if lw ~= 3 and ((p.SP_N or 128) ~= 128 or (p.SP_M or 2) ~= 2 or (p.SP_TMA or 0) ~= 0 or preg ~= 72) then
        return false
      end
      if preg + 2 * creg ~= 504 then return false end
      -- blocks an SM of the register-A kernels: two or three of one warpgroup (at most 168
      -- registers a thread at three), one of two (more spill)
      if lw == 2 and (p.RG_WG or 1) * (p.RG_OCC or 2) > 3 then return false end
      -- two row groups a warpgroup: codes one chunk ahead, and two warpgroups an SM (about 230
      -- registers a thread)
      if lw == 2 and (p.RG_M or 1) == 2 and ((p.RG_PF or 2) ~= 1 or (p.RG_WG or 1) * (p.RG_OCC or 2) > 2) then
        return false
      end
      if p.WS == 0 then
        -- the stage settings are unused without WS: one value; MINB (L_MINB) blocks may not
        -- squeeze a thread below 64 registers (the kernels spill there)
        return p.WS_S == 2 and p.MINB * 32 * math.max(p.UP_RW * p.UP_KW, p.DN_RW * p.DN_KW) <= 1024
               and p.L_MINB * 32 * math.max(p.L_UP_RW, p.L_DN_RW) * p.L_KW <= 1024
      end
      -- with WS, shared memory sets the blocks an SM holds
      if p.MINB ~= 1 or p.L_MINB ~= 1 then return false end
      -- every kernel's shared memory within the 227 KB a block may have
      for _, k in ipairs { { p.UP_RW, p.UP_KW, 2, p.NT }, { p.DN_RW, p.DN_KW, 1, p.NT },
                           { p.L_UP_RW, p.L_KW, 2, p.L_NT }, { p.L_DN_RW, p.L_KW, 1, p.L_NT } } do
        local _, blocks = ws_smem(p, k[1], k[2], k[3], k[4])
        if blocks < 1 then return false end
      end
      return true
    end,
    -- where the search begins when the cache knows no better point: the start kernel's settings
    start = best,
  },
  arch     = "sm_90a",   -- wgmma (LW = 1, 2, 3) exists only on the arch-specific target
  launch   = function(s, p)
    if p.BASELINE then return baseline(s) end
    return w4a16(s, p)
  end,
  -- the model proposes template changes and their spaces; the tuner sweeps each
  strategy = { "llm+tune", sweep = 8, tuner = "anneal" },
  budget   = { candidates = 200, minutes = 5, timeout = 10 },
  timing   = { warmup = 0.01, min_samples = 5, cap = 0.15, target = 0.02 },
  -- who proposes (KWB_MODEL, else the replies replayed from a transcript written by hand), and what it reads
  model    = kwb.model.from_env() or { provider = "replay", file = "transcripts/nvfp4_moe.json" },
  ideas    = { "Tokens an expert decide the kernel: mma.sync while few, wgmma with the weights in registers from 16.",
               "A layer may dispatch per T: a kernel that wins only at some T is still worth keeping." },
  context  = { "../hwdocs/hopper.md", "../modeldocs/nvfp4.md", "../modeldocs/deepseek_moe.md",
               "../kernels/nvfp4_moe/w4a16.cu" },
}
