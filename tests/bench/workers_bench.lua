-- tests/bench/workers_bench.lua: candidates per minute of the research loop
-- with 1 and with 2 workers on a compile-heavy host recipe
-- (tests/bench/compile_heavy.lua: the same fixed list of 32 candidates), each
-- run in its own kwb process on a fresh cache (the workers' build directories
-- are fresh too: they live in each worker's scratch directory).
--
--   ./kwb tests/bench/workers_bench.lua [REPEATS]      (make bench-workers)
local run_json = dofile("tests/lua/run_json.lua")   -- (the run's summary from its JSON events)

local repeats = math.tointeger(tonumber((...) or "3")) or 3
local recipe = "tests/bench/compile_heavy.lua"

local function run(workers, i)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir))
  local cmd = string.format("./kwb --cache %s/kwb.db %s --json --workers %d 2>&1", dir, recipe, workers)
  local summary, wall = run_json.summary(cmd)
  os.execute("rm -rf " .. dir)
  local per_min = summary.candidates / summary.seconds * 60
  print(string.format("run %d  workers %d  %2d candidates  %6.2f s in the loop  %6.2f s wall  %6.1f candidates/min",
                      i, workers, summary.candidates, summary.seconds, wall, per_min))
  return per_min
end

local rates = { [1] = {}, [2] = {} }
for i = 1, repeats do
  for _, w in ipairs { 1, 2 } do
    table.insert(rates[w], run(w, i))
  end
end
local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) // 2] or (xs[n // 2] + xs[n // 2 + 1]) / 2
end
local m1, m2 = median(rates[1]), median(rates[2])
print(string.format("median: 1 worker %.1f candidates/min, 2 workers %.1f candidates/min: %.2fx", m1, m2, m2 / m1))
