-- tests/gpu/nvfp4_sanitize.lua [N]: compute-sanitizer (memcheck, racecheck,
-- initcheck, as kwb.checks.sanitize runs them in a run of recipes/nvfp4_moe.lua) on
-- the space's start setting and the first N (default 2) of a sample of
-- others the recipe's restrictions allow, at the smallest T (T = 1, where a
-- run sanitizes) and the largest (T = 4096, skewed; racecheck at the shape
-- kwb.checks.sanitize scales down from it), from this process on an idle card:
-- every one clean, none unable to run. Each check's seconds on stdout.
local t = require "t"
local core = require "kwb.core"
local sanitize = require "kwb.checks.sanitize"
local files = require "kwb.base.files"
local host = require "kwb.host"

local file = core.cwd() .. "/recipes/nvfp4_moe.lua"
local recipe = kwb.load(file)
local source = assert(files.read_file("kernels/nvfp4_moe/w4a16.cu"))
local n = tonumber(arg[1]) or 2

local function with(over)
  local p = {}
  for k, v in pairs(recipe.space.start) do p[k] = v end
  for k, v in pairs(over) do p[k] = v end
  assert(recipe.space.restrict(p), "a sample point the recipe's restrictions refuse")
  return p
end
local points = { { "start", with {} } }
local sample = {
  { "mma.sync at every T (LW = 0)", with { LW = 0, WG_SWITCH = 32, RG_N = 64, RG_WG = 1, RG_OCC = 2 } },
  { "RG_N = 32, RG_M = 2", with { RG_N = 32, RG_WG = 1, RG_M = 2, RG_PF = 1, RG_OCC = 2 } },
  { "SWITCH = 4, L_DN_RW = 1, L_MINB = 8", with { SWITCH = 4, L_DN_RW = 1, L_MINB = 8 } },
  { "UP_KW = 4, DN_KW = 4, PF = 2", with { UP_KW = 4, DN_KW = 4, PF = 2 } },
}
for i = 1, math.min(n, #sample) do points[#points + 1] = sample[i] end

local largest = recipe.shapes[#recipe.shapes]
local at_large = setmetatable({ shapes = { largest } }, { __index = recipe })
local free = assert(kwb.cuda.mem_info())
print(string.format("# %.1f GiB free; a job's buffers at T = 1: %.1f GiB", free / 2^30,
                    sanitize.bench_bytes(recipe, sanitize.shape(recipe)) / 2^30))

for _, pt in ipairs(points) do
  for _, r in ipairs { recipe, at_large } do
    local key = sanitize.shape(r).key
    t.test(string.format("nvfp4_sanitize %s at %s", pt[1], key), function()
      local cand = { source = source, name = "w4a16.cu", defines = pt[2], params = pt[2] }
      local t0 = core.now()
      local f = sanitize.check(r, { recipe = file, cand = cand, seed = "1" }, { free = (kwb.cuda.mem_info()) })
      local secs = {}
      for tool, s in pairs(f.seconds or {}) do secs[#secs + 1] = string.format("%s %.1f s", tool, s) end
      table.sort(secs)
      print(string.format("figure nvfp4_sanitize %s at %s: %.1f s (%s)", pt[1], key, core.now() - t0,
                          table.concat(secs, ", ")))
      t.eq(f.harness, nil)
      t.eq(f.outside, nil)
      t.eq(f.tool and (f.tool .. " at " .. f.shape .. ": " .. f.report), nil)
    end)
  end
end

t.done()
