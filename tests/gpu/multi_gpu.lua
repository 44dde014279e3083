-- tests/gpu/multi_gpu.lua: evaluation throughput with one worker and with one
-- worker per GPU on a machine with two or more GPUs: the same fixed list of
-- candidates (tests/gpu/matmul_fixed.lua), each run in its own kwb process on
-- a fresh kwb cache and an empty driver compute cache. Checks that every
-- worker sees only its own GPU, and that both runs record the same candidates
-- with the same outcomes and times within 5%; prints candidates per minute.
--
--   ./kwb tests/gpu/multi_gpu.lua [GPUS]     (GPUS: default every visible GPU, at least 2)
local t = require "t"
local core = require "kwb.core"
local run_json = require("run_json")   -- (the run's summary from its JSON events)
local cuda = kwb.cuda

local recipe = "tests/gpu/matmul_fixed.lua"
local ngpu = assert(cuda.device_count())
local want = math.tointeger(tonumber((...) or ngpu)) or ngpu
if ngpu < 2 or want < 2 then
  print(string.format("FAIL multi_gpu: needs 2 GPUs, this machine shows %d", ngpu))
  os.exit(1)
end

t.test("multi_gpu_each_worker_sees_only_its_own_gpu", function()
  local pool = require("kwb.runners.workers").pool { backend = "cuda", devices = want }
  local seen = {}
  for i = 1, want do
    local r = pool:call("kwb.cuda.device_count", {})
    t.truthy(r.ok, r.reason)
    t.eq(r.value, 1, "worker " .. i .. " sees one device")
  end
  -- one call per worker, all at once, so each slot answers once
  local tasks = {}
  for i = 1, want do tasks[i] = pool:submit("kwb.cuda.device", { 0 }) end
  for i = 1, want do
    local r = pool:wait(tasks[i])
    t.truthy(r.ok, r.reason)
    seen[r.value.pci_bus_id] = true
  end
  local n = 0
  for _ in pairs(seen) do n = n + 1 end
  t.eq(n, want, "distinct PCI bus ids among the workers")
  pool:close()
end)

-- One run: returns { per_min =, candidates =, results = { [id] = { outcome, medians by shape } } }.
local function run(workers)
  local dir = assert(core.tempfile())
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir .. "/nvcache"))
  local cmd = string.format("CUDA_CACHE_PATH=%s/nvcache ./kwb --cache %s/kwb.db %s --json --workers %d 2>&1",
                            dir, dir, recipe, workers)
  local summary, wall = run_json.summary(cmd)
  local c = assert(kwb.cache.open(dir .. "/kwb.db"))
  local results = {}
  for _, cand in ipairs(c:list()) do
    local r = { outcome = cand.outcome, median = {} }
    for _, row in ipairs(c:results(cand.id)) do r.median[row.shape] = row.median end
    results[cand.id] = r
  end
  c:close()
  os.execute("rm -rf " .. dir)
  local per_min = summary.candidates / summary.seconds * 60
  print(string.format("workers %d: %d candidates, %.1f s in the loop, %.1f s wall, %.1f candidates/min",
                      workers, summary.candidates, summary.seconds, wall, per_min))
  return { per_min = per_min, candidates = summary.candidates, results = results }
end

local one, many
t.test("multi_gpu_runs_with_one_worker_and_one_per_gpu", function()
  one = run(1)
  many = run(want)
  t.eq(one.candidates, 32)
  t.eq(many.candidates, 32)
end)

t.test("multi_gpu_both_runs_record_the_same_candidates_outcomes_and_times", function()
  local n, worst = 0, 0
  for id, a in pairs(one.results) do
    local b = many.results[id]
    t.truthy(b, "candidate " .. id:sub(1, 12) .. " in both runs")
    t.eq(b.outcome, a.outcome, "outcome of " .. id:sub(1, 12))
    for shape, m in pairs(a.median) do
      if m and b.median[shape] then
        worst = math.max(worst, math.abs(b.median[shape] / m - 1))
        n = n + 1
      end
    end
  end
  for id in pairs(many.results) do t.truthy(one.results[id], "candidate " .. id:sub(1, 12) .. " in both runs") end
  print(string.format("figure multi_gpu_worst_time_difference = %.2f%% over %d timed shapes", 100 * worst, n))
  t.truthy(worst <= 0.05, string.format("times within 5%% (worst %.2f%%)", 100 * worst))
end)

t.test("multi_gpu_throughput", function()
  local ratio = many.per_min / one.per_min
  print(string.format("figure multi_gpu_candidates_per_min = 1 GPU %.1f, %d GPUs %.1f, %.2fx",
                      one.per_min, want, many.per_min, ratio))
  t.truthy(ratio > 1, "more GPUs evaluate more candidates a minute")
end)

t.done()
