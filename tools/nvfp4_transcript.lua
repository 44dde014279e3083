-- tools/nvfp4_transcript.lua: writes recipes/transcripts/nvfp4_moe.json, the
-- replies `kwb recipes/nvfp4_moe.lua` replays when no model is configured.
-- No model wrote them: the prose is written by hand from docs/perf.md's
-- measurements, and each reply's kernel is the template
-- (kernels/nvfp4_moe/w4a16.cu) as it stands when this runs (the first two
-- with a second register-A instance added to it), with the space the prose proposes (every parameter the recipe's launch plan reads: the
-- ones not swept keep the recipe's start values). One reply tries a hack and
-- one has no kernel, as replies of real models do.
--   ./kwb tools/nvfp4_transcript.lua     (from the top of the tree)
local cjson = require "cjson"

local template = assert(kwb.files.read_file("kernels/nvfp4_moe/w4a16.cu"))
local recipe = kwb.load("recipes/nvfp4_moe.lua")
local start = recipe.space.start

-- A ```lua space block: every start value as a one-value list, the swept
-- ones as given, and the restrict text (a function of p) as written.
local function space(swept, restrict)
  local names = {}
  for k in pairs(start) do names[#names + 1] = k end
  for k in pairs(swept) do if start[k] == nil then names[#names + 1] = k end end
  table.sort(names)
  local lines = { "return {" }
  for _, k in ipairs(names) do
    local vals = swept[k] or { start[k] }
    local parts = {}
    for i, v in ipairs(vals) do parts[i] = tostring(v) end
    lines[#lines + 1] = string.format("  %s = { %s },", k, table.concat(parts, ", "))
  end
  if restrict then lines[#lines + 1] = "  restrict = " .. restrict .. "," end
  lines[#lines + 1] = "}"
  return table.concat(lines, "\n")
end

local function reply(prose, code, lua)
  local t = prose .. "\n\n```cuda\n" .. code .. "```\n"
  if lua then t = t .. "\n```lua\n" .. lua .. "\n```\n" end
  return { text = t }
end

local replies = {}

-- the first reply's change: a second register-A instance, taken from RG2_FROM tokens an expert
local anchor = "extern \"C\" __global__ void __launch_bounds__(RG_THREADS, RG_OCC) w4_down_rg(DN_ARGS) "
               .. "{ rg_down<Rg>(RG_DN_CALL); }\n"
local two_tiles = template:gsub(anchor:gsub("%p", "%%%0"), function(line) return line .. [[

// A second instance for the largest token counts: from RG2_FROM tokens an
// expert the plan takes w4_up_rg2 and w4_down_rg2, with tiles of RG2_N tokens,
// RG2_WG warpgroups and RG2_M row groups (RG_S, RG_PF and RG_ORD shared).
#ifdef RG2_N
#ifndef RG2_WG
#define RG2_WG 2
#endif
#ifndef RG2_M
#define RG2_M 1
#endif
#ifndef RG2_OCC
#define RG2_OCC (RG2_WG == 2 ? 1 : RG2_N == 32 ? 3 : 2)
#endif
#if RG2_N != 32 && RG2_N != 64 && RG2_N != 128
#error "RG2_N must be 32, 64 or 128"
#endif
typedef RgCfg<RG2_N, RG2_WG, RG_S, RG_PF, RG2_M, RG_ORD> Rg2;
extern "C" __global__ void __launch_bounds__(128 * RG2_WG, RG2_OCC) w4_up_rg2(UP_ARGS) { rg_up<Rg2>(RG_UP_CALL); }
extern "C" __global__ void __launch_bounds__(128 * RG2_WG, RG2_OCC) w4_down_rg2(DN_ARGS) { rg_down<Rg2>(RG_DN_CALL); }
#endif
]] end, 1)
assert(two_tiles ~= template, "the template's w4_down_rg moved")

replies[#replies + 1] = reply([[
From T = 1024 the layer is compute-bound, and one register-A tile does not
fit both ends: an expert gets 32 tokens at T = 1024, where a 128-token tile of
two warpgroups is three-quarters empty, and 128 at T = 4096, where it is full.
The kernels already take their settings as a configuration (RgCfg), so the
module can hold a second instance: w4_up_rg2 and w4_down_rg2 for the largest
counts (RG2_*, from RG2_FROM tokens an expert), and w4_up_rg / w4_down_rg
below it with a smaller tile. Keep 128 tokens and two warpgroups from 64
tokens an expert (T = 2048 on), and sweep the smaller tile for T = 1024.]], two_tiles,
  space({ RG_N = { 32, 64 }, RG_WG = { 1, 2 }, RG_OCC = { 1, 2, 3 }, RG2_FROM = { 64 }, RG2_N = { 128 },
          RG2_WG = { 2 }, RG2_OCC = { 1 } },
  -- (three blocks an SM of 64-token tiles spill: three only at 32 tokens)
  "function(p) return p.RG_WG * p.RG_OCC <= 3 and (p.RG_OCC < 3 or p.RG_N == 32) end"))

-- the second reply builds on the first (as a model shown its results would):
-- its source, the smaller tile it found fastest at T = 1024 kept
local rg_kept = { RG_N = { 64 }, RG_WG = { 2 }, RG_OCC = { 1 }, RG2_FROM = { 64 }, RG2_N = { 128 }, RG2_WG = { 2 },
                  RG2_OCC = { 1 } }
local function with_kept(swept)
  for k, v in pairs(rg_kept) do swept[k] = v end
  return swept
end
replies[#replies + 1] = reply([[
The second tile pays where it should: on an H100, T = 1024 went from 7.26 to
5.96 ms with routing uniform and from 7.80 to 7.06 ms skewed at 64 tokens and
two warpgroups, and every other shape stayed within a percent or two, so the
whole is 1.02x and within the noise. Keep it (RG_N = 64, RG_WG = 2, RG_OCC = 1)
and add what the earlier T = 256 sweep found: one weight row a warp in the
large-batch down projection (L_DN_RW = 1) was 1.05x there with routing uniform
and 1.03x skewed. Those kernels take the layer from SWITCH tokens an expert on
average; try them from 4 as well as 8. Same module as before; four points.]],
  two_tiles, space(with_kept { SWITCH = { 4, 8 }, L_DN_RW = { 1, 2 } },
  "function(p) local rw = p.L_UP_RW > p.L_DN_RW and p.L_UP_RW or p.L_DN_RW return p.L_MINB * 32 * rw * p.L_KW <= 1024 end"))

-- the hack: the weights' dequantisation kept across calls in device memory
local hacked = template:gsub("\n(extern \"C\" __global__ void __launch_bounds__%(256%)\nw4_combine)",
  "\n// the last call's output, kept: a call that sees the same routing again copies it\n"
  .. "__device__ unsigned int kept_calls;\n\n%1", 1)
hacked = hacked:gsub("(\nw4_combine%b()%s*{)", "%1\n    if (threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(&kept_calls, 1u);", 1)
assert(hacked ~= template and hacked:find("atomicAdd(&kept_calls", 1, true), "the template's w4_combine moved")
replies[#replies + 1] = reply([[
The benchmark calls the layer many times with the same weights, so most of the
work repeats: counting the calls in a device variable lets the combine step
know when it has seen this routing before and reuse the last output.]], hacked)

replies[#replies + 1] = reply([[
At T <= 64 the small-batch kernels stream the weights of the experts the
routing reaches, so the question is how many loads each warp keeps in flight:
split the K dimension over more warps (UP_KW, DN_KW), or give a warp more rows,
and prefetch one or two chunks ahead (PF).]], template,
  space({ UP_RW = { 1, 2, 4 }, UP_KW = { 1, 2, 4 }, DN_RW = { 1, 2, 4 }, DN_KW = { 1, 2, 4 }, PF = { 1, 2 } },
        "function(p) local up, dn = p.UP_RW * p.UP_KW, p.DN_RW * p.DN_KW "
        .. "return up <= 16 and dn <= 16 and p.MINB * 32 * (up > dn and up or dn) <= 1024 end"))

replies[#replies + 1] = { text = [[
Before the next change I would like to see where the time goes at T = 1024:
an ncu profile of w4_up_rg (DRAM and issue-slot use, registers) would say
whether the activation copies or the dequantisation limit it.]] }

local out = {
  note = "Written by hand for the flagship demo and the tests (no model produced it): the prose from docs/perf.md's "
         .. "measurements, each kernel the template kernels/nvfp4_moe/w4a16.cu as tools/nvfp4_transcript.lua found it, "
         .. "one reply a hack and one with no kernel.",
  replies = replies,
}
local f = assert(io.open("recipes/transcripts/nvfp4_moe.json", "w"))
f:write(cjson.encode(out), "\n")
f:close()
print(string.format("wrote recipes/transcripts/nvfp4_moe.json: %d replies", #replies))
