-- tests/gpu/racecheck_probe.lua: how long compute-sanitizer racecheck takes
-- on tests/candidates/cuda/smem_race.cu (a race in every block) at the shape
-- kwb.checks.sanitize picks for tests/recipes/gpu_integrity.lua, and on its honest
-- twin smem_barrier.cu, with the report kinds and hazard caps the tool
-- offers; each run cut at 45 s, the time of each of its first lines kept:
-- does the first report come early (so a run can stop there) or only at
-- the end? Figures on stdout; the tool's --help in $OUT/compute-sanitizer-help.txt.
--   ./kwb tests/gpu/racecheck_probe.lua
local core = require "kwb.core"
local sanitize = require "kwb.checks.sanitize"
local files = require "kwb.base.files"
local host = require "kwb.host"

local limit = 45
local file = core.cwd() .. "/tests/recipes/gpu_integrity.lua"
local recipe = kwb.load(file)
local tool_path = assert(sanitize.path(), "compute-sanitizer is not installed")
if os.getenv("OUT") then
  os.execute(string.format("%q --help > %q 2>&1", tool_path, os.getenv("OUT") .. "/compute-sanitizer-help.txt"))
end

local function sh(argv)
  local q = {}
  for i, a in ipairs(argv) do q[i] = string.format("'%s'", (a:gsub("'", "'\\''"))) end
  return table.concat(q, " ")
end

local function probe(name, cand_file, extra, drop)
  local cand = { source = assert(files.read_file("tests/candidates/cuda/" .. cand_file)), name = cand_file }
  local job, shape = sanitize.job(recipe, { recipe = file, cand = cand, seed = "1" })
  local argv = sanitize.argv(tool_path, "racecheck", sanitize.kernels(recipe, cand, shape), job)
  local a = {}
  for _, x in ipairs(argv) do
    if drop and (x == drop[1] or x == drop[2]) then goto skip end
    a[#a + 1] = x
    if x == "racecheck" then for _, e in ipairs(extra or {}) do a[#a + 1] = e end end
    ::skip::
  end
  local t0 = core.now()
  local p = assert(io.popen(string.format("timeout %d %s 2>&1; echo \"exit=$?\"", limit, sh(a))))
  local lines, shown = {}, 0
  for l in p:lines() do
    local at = core.now() - t0
    if l:match("^exit=") or (l:match("^=========") and shown < 4) then
      print(string.format("#   %6.2f s  %s", at, l:sub(1, 160)))
      if not l:match("^exit=") then shown = shown + 1 end
    end
    lines[#lines + 1] = l
  end
  p:close()
  print(string.format("figure racecheck_probe_%s = %.2f s (%s at %s, %d lines)", name, core.now() - t0, cand_file,
                      shape.key, #lines))
  os.remove(job)
end

probe("race_hazard", "smem_race.cu")
probe("race_analysis", "smem_race.cu", nil, { "--racecheck-report", "hazard" })
probe("race_hazard_num1", "smem_race.cu", { "--racecheck-num-hazards", "1" })
probe("race_analysis_num1", "smem_race.cu", { "--racecheck-num-hazards", "1" }, { "--racecheck-report", "hazard" })
probe("barrier_hazard", "smem_barrier.cu")
probe("good_hazard", "good.cu")
