-- kwb/summary.lua: what a run found, as one plain table (the JSON summary
-- event): the funnel, the pick and its speedup per shape, the start kernel's
-- times, and the shapes where another verified kernel beats the pick.
local core = require "kwb.core"

local M = {}

-- A shape is "faster elsewhere" when another verified result's median there
-- beats the pick's by more than this fraction (the pick wins on the score, a
-- mean over shapes; a layer may still dispatch per shape).
M.elsewhere_margin = 0.02

local function elsewhere(s, shapes, best, best_times)
  local out = {}
  for _, sh in ipairs(shapes) do
    local w, mine = s.shape_best[sh.key], best_times[sh.key]
    if w and mine and w.id ~= best.id and w.median * (1 + M.elsewhere_margin) < mine then
      out[#out + 1] = { shape = sh.key, id = w.id, short = w.short, median = w.median, pick = mine,
                        name = w.name, params = w.params, origin = w.origin, start = w.start }
    end
  end
  return out
end

-- summary(run) -> { event = "summary", funnel =, best =, start =, elsewhere =, ... }
function M.summary(run)
  local s = run.session
  local elapsed = core.now() - run.started
  local best = s.best
  local speedup, start_times, best_times = {}, {}, {}
  for _, sh in ipairs(run.recipe.shapes) do
    local r = best.shapes[sh.key]
    speedup[sh.key] = r and r.speedup or nil
    start_times[sh.key] = s.start.shapes[sh.key].median
    best_times[sh.key] = r and r.median or nil
  end
  local faster = elsewhere(s, run.recipe.shapes, best, best_times)
  return {
    event = "summary", recipe = run.recipe.name, run = run.record.short, strategy = run.strategy_name,
    seed = run.seed, funnel = run.funnel, candidates = run.evaluated, known = run.skipped,
    partial_shapes = run.partial, timing_seconds = run.timing_s,
    exhausted = run.exhausted or false, seconds = elapsed,
    per_second = elapsed > 0 and run.evaluated / elapsed or 0,
    best = { id = best.id, short = best.short, score = best.score, speedup = speedup, params = best.params,
             origin = best.origin, start = best.outcome == "start" },
    start = { id = s.start.id, median = start_times },
    best_median = best_times,
    -- absent when the pick is the fastest at every shape (an empty table would be a JSON object)
    elsewhere = #faster > 0 and faster or nil, shape_count = #run.recipe.shapes,
  }
end

return M
