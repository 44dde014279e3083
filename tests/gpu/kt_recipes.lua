-- tests/gpu/kt_recipes.lua: recipes/kt_vecadd.lua and recipes/kt_matmul.lua (Kernel
-- Tuner's example spaces) end to end on the GPU, as a user runs them: every
-- setting built, verified and timed (the matmul space's four settings over the
-- static shared-memory limit end as compile errors), a summary, and each run's
-- seconds in the loop printed as a figure. The start is one of the settings
-- (judged before the loop), so the candidates are the others. Not in tests/gpu/run's default list:
--   tests/gpu/run kt_recipes
local t = require "t"
local cjson = require "cjson"

local json_run = require "json_run"

local function recipe_run(path) return json_run(string.format("./kwb %s --json --seed 1 2>&1", path)) end

for _, rc in ipairs { { "recipes/kt_vecadd.lua", 15, 0 }, { "recipes/kt_matmul.lua", 40, 4 } } do
  local path, n, errors = rc[1], rc[2], rc[3]
  local name = path:match("([%w_]+)%.lua$")
  local ok, events, raw = recipe_run(path)
  local outcomes, last = {}, events[#events] or {}
  for _, ev in ipairs(events) do
    if ev.event == "candidate" then outcomes[ev.outcome] = (outcomes[ev.outcome] or 0) + 1 end
  end
  t.test("gpu_" .. name .. "_evaluates_its_whole_space", function()
    t.eq(ok, true, "exit status: " .. table.concat(raw, "\n", math.max(1, #raw - 5)))
    t.eq(last.event, "summary")
    t.eq((outcomes.accepted or 0) + (outcomes.slower or 0), n - 1 - errors, "verified: " .. cjson.encode(outcomes))
    t.eq(outcomes["compile-error"] or 0, errors)
  end)
  print(string.format("figure %s: %d candidates, %s, summary %s", name, n, cjson.encode(outcomes), cjson.encode(last)))
end

t.done()
