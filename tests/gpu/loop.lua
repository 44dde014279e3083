-- tests/gpu/loop.lua: the research loop on the GPU (run by tests/gpu/run):
-- hostile CUDA candidates with their exact outcomes, then the shipped GPU
-- recipes (vector add, tiled SGEMM) end to end, their figures on stdout.
--   ./kwb tests/gpu/loop.lua [vecadd-budget] [matmul-budget]
local t = require "t"
local store = require "kwb.loop.store"
local cjson = require "cjson"

local words = { ... }
local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")

local hostile = {
  -- file, outcome, rule, a piece of the reason
  { "partial.cu", "wrong", nil, "1 element never written" },
  { "stale.cu", "forbidden", "global-state", "saved at line 11" },
  { "mutate.cu", "wrong", nil, "input a changed by the candidate" },
  { "small_only.cu", "wrong", nil, "output c at n=16777216" },
  { "precision.cu", "wrong", nil, "output c at n=65536" },
  { "clock.cu", "forbidden", "timer", "clock64 at line 4" },
  { "clock_macro.cu", "forbidden", "timer", "clock64 at line 6 (a candidate that reads a clock can tell when it is being timed; found in the PTX)" },
  { "printf_macro.cu", "forbidden", "printf", "vprintf at line 5" },
  { "early_return.cu", nil, nil, nil },   -- outputs are poisoned before every timed run
  { "trap.cu", "forbidden", "exit", "trap; at line 4" },
  { "sleep.cu", "forbidden", "sleep", "__nanosleep at line 4" },
  { "stream.cu", "forbidden", "other-streams", "cudaStreamCreate at line 6" },
  { "good_stride.cu", nil, nil, nil },
}

local r = kwb.recipe {
  name = "gpu_hostile", backend = "cuda", problem = "vecadd", shapes = { n = { 1 << 16, 1 << 24 } },
  start = "../candidates/cuda/good.cu",
  launch = function(shape) return { grid = { (shape.n + 255) // 256 }, block = { 256 } } end,
  strategy = { propose = function(self)
    self.i = (self.i or 0) + 1
    return hostile[self.i] and { file = "../candidates/cuda/" .. hostile[self.i][1] }
  end },
  timing = { warmup = 0.005, min_samples = 5, cap = 0.1, target = 0.02 },
}
local _, run = r:run { mode = "plain", store = store.open(dir .. "/hostile.db") }
local by_name = {}
for _, res in ipairs(run.results) do by_name[res.name] = res end

for _, h in ipairs(hostile) do
  local file, outcome, rule, reason = h[1], h[2], h[3], h[4]
  t.test("gpu_hostile_" .. file:gsub("%.cu$", "") .. "_is_" .. (outcome or "verified"), function()
    local res = t.truthy(by_name[file], file)
    if outcome then
      t.eq(res.outcome, outcome, file)
      t.eq(res.rule, rule, file .. " rule")
      t.truthy(res.reason:find(reason, 1, true), res.reason)
    else
      t.truthy(res.outcome == "slower" or res.outcome == "accepted", file .. ": " .. res.outcome .. " " .. tostring(res.reason))
    end
  end)
end

-- The shipped recipes, as a user runs them, with their summaries kept.
local function recipe_run(path, budget)
  return require "json_run" (string.format("./kwb %s --json --budget %d --seed 1 2>&1", path, budget))
end

for _, rc in ipairs { { "recipes/gpu_vecadd.lua", tonumber(words[1]) or 72 },
                      { "recipes/gpu_matmul.lua", tonumber(words[2]) or 60 } } do
  local path, budget = rc[1], rc[2]
  local ok, events, raw = recipe_run(path, budget)
  local last = events[#events] or {}
  t.test("gpu_recipe_" .. path:match("([%w_]+)%.lua$") .. "_ends_with_a_summary_and_beats_its_start", function()
    t.eq(ok, true, "exit status: " .. table.concat(raw, "\n", math.max(1, #raw - 5)))
    t.eq(last.event, "summary")
    t.truthy(last.best.score > 1, "best " .. tostring(last.best.score))
  end)
  print("summary " .. path .. " " .. cjson.encode(last))
  for _, ev in ipairs(events) do
    if ev.event == "candidate" and ev.outcome ~= "slower" and ev.outcome ~= "accepted" then
      print("not verified: " .. cjson.encode(ev))
    end
  end
end

t.done()
