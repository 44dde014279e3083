-- tests/gpu/sanitize_probe.lua: where compute-sanitizer's time goes on one
-- candidate of recipes/gpu_vecadd.lua (BLOCK 32, VEC 4), run from this
-- process rather than from a worker: the job without a tool, a CUDA program
-- that does next to nothing under each tool, and each tool on the job as
-- kwb.checks.sanitize runs it (with the job's own split: load, build, bench,
-- inputs, call); figures on stdout. Every run is cut at 150 s.
--   ./kwb tests/gpu/sanitize_probe.lua
local t = require "t"
local core = require "kwb.core"
local sanitize = require "kwb.checks.sanitize"
local files = require "kwb.base.files"
local host = require "kwb.host"

local limit = 150
local file = core.cwd() .. "/recipes/gpu_vecadd.lua"
local recipe = kwb.load(file)
local defines = { BLOCK = 32, VEC = 4, ITEMS = 1 }
local cand = { source = assert(files.read_file("kernels/cuda/vecadd.cu")), name = "vecadd.cu", defines = defines,
               params = defines }
local args = { recipe = file, cand = cand, seed = "1" }
local tool_path = assert(sanitize.path(), "compute-sanitizer is not installed")
local job, sh = sanitize.job(recipe, args)
local kernels = sanitize.kernels(recipe, cand, sh)

local function timed(name, argv)
  local t0 = core.now()
  local r, msg = core.exec(argv, { timeout = limit, cap = 1 << 20 })
  local s = core.now() - t0
  local how = not r and ("did not start: " .. tostring(msg)) or r.timed_out and ("ran past " .. limit .. " s")
              or ("exit " .. r.status)
  print(string.format("figure sanitize_probe_%s = %.2f s (%s) %s", name, s, how, r and sanitize.stages(r.err) or ""))
  if r and r.status ~= 0 and r.status ~= sanitize.found then
    print("#   " .. ((r.err ~= "" and r.err or r.out):gsub("%s+$", ""):sub(-400):gsub("\n", "\n#   ")))
  end
  return r, s
end

local exe = assert(core.self_exe())
-- a CUDA context, one small buffer filled on the device, nothing more
local tiny = { exe, "-e", "local c = require 'kwb.cuda'; local b = assert(c.buffer('f32', 1024)); b:fill_uniform(1, -1, 1)" }
timed("tiny_alone", tiny)
timed("job_alone", sanitize.argv(nil, nil, nil, job))
for _, tool in ipairs(sanitize.tools) do
  local a = { tool_path, "--tool", tool, "--report-api-errors", "no" }
  for _, x in ipairs(tiny) do a[#a + 1] = x end
  timed("tiny_" .. tool, a)
end
local runs = {}
for _, tool in ipairs(sanitize.tools) do runs[tool] = timed(tool, sanitize.argv(tool_path, tool, kernels, job)) end
-- memcheck on every kernel, and initcheck on the candidate's alone, for the difference
local all = sanitize.argv(tool_path, "initcheck", nil, job)
all[3] = "memcheck"
timed("memcheck_every_kernel", all)
os.remove(job)

t.test("gpu_sanitize_a_right_vector_add_is_clean", function()
  for _, tool in ipairs(sanitize.tools) do
    local r = t.truthy(runs[tool], tool .. " ran")
    t.eq(r.status, 0, tool .. ": " .. sanitize.first_report(r.out .. "\n" .. r.err))
  end
end)
t.done()
