-- kwb/loop/summary.lua: what a run found, as one plain table (the JSON summary
-- event): the funnel, the pick and its speedup per shape, the start kernel's
-- times, and the shapes where another verified kernel beats the pick.
local core = require "kwb.core"
local outcomes = require "kwb.base.outcomes"
local text = require "kwb.base.text"

local M = {}

local vs = require("kwb.measure.baseline").vs

-- The shapes another result wins by a margin (kwb.loop.standings), each
-- with the baseline's time there.
local function elsewhere(s, shapes, best, best_times, bl)
  local out = s.standings:elsewhere(shapes, best, best_times)
  for _, e in ipairs(out) do
    e.baseline, e.vs_baseline = bl and bl.median and bl.median[e.shape], vs(bl, e.shape, e.median)
  end
  return out
end

-- The run's baseline as the summary gives it (absent without one): its name,
-- medians per shape, or the error that left the run without it.
local function baseline_part(bl)
  if not bl then return nil end
  return { name = bl.name, id = bl.id, description = bl.description, median = bl.median, check = bl.check,
           error = bl.error, seconds = bl.seconds }
end

-- The model's part: its usage, and every candidate a reply proposed with its
-- outcome, parent and cost (absent when no model took part).
local function model_part(run)
  local a = run.model
  if not a then return nil, nil end
  local spec = a.chain[1]
  local u = a.usage
  local estimated = false
  local props = {}
  for _, res in ipairs(run.results) do
    if res.model then
      props[#props + 1] = { id = res.id, short = res.short, outcome = res.outcome, score = res.score,
                            parent = res.parent, cost = res.cost, model = res.model,
                            what = res.params and next(res.params) and require("kwb.base.text").params_text(res.params)
                                   or (res.outcome ~= "accepted" and res.outcome ~= "slower" and res.reason)
                                   or res.rationale and res.rationale:match("^[^\n.]*") or res.note }
    end
  end
  estimated = u.estimated or false
  local priced = false   -- a fallback's price counts too
  for _, m in ipairs(a.chain) do priced = priced or m.price ~= nil end
  return { name = require("kwb.model").name(spec), requests = u.requests, retries = u.retries, failures = u.failures,
           input = u.input, output = u.output, cost = u.cost, priced = priced, estimated = estimated,
           unseen = u.unseen },
         props
end

-- summary(run) -> { event = "summary", funnel =, best =, start =, elsewhere =, ... }
-- Where the run's seconds went: the candidates' stages summed (build, verify,
-- time), compute-sanitizer's runs (`sanitize`: on new bests, the put-off best,
-- the shapes' winners and an earlier best at the start, whichever run's
-- result), the start kernel's judging (`start`: with the workers' start and
-- their reference builds when it is not known), the device's ceilings where
-- measured (`ceilings`), and the rest of the loop's wall time (references,
-- scheduling, the store, the reports); and the candidates built ahead
-- (kwb.loop.run's look_ahead).
local function stage_sums(run, elapsed)
  local sums, counted = { build = 0, verify = 0, time = 0 }, 0
  for _, res in ipairs(run.results) do
    for k in pairs(sums) do
      local v = res.seconds and res.seconds[k]
      if type(v) == "number" then sums[k] = sums[k] + v; counted = counted + v end
    end
  end
  local spent = run.session:stage_seconds()
  sums.sanitize = math.max(0, spent.sanitize - (run.sanitize_base or 0))
  counted = counted + sums.sanitize
  -- (the baseline's measurement, right after the start kernel, is part of `start`; `baseline` says how much)
  sums.baseline = run.baseline and run.baseline.seconds or nil
  sums.start = math.max(0, run.start_s or 0) + (sums.baseline or 0)
  sums.ceilings = math.max(0, spent.ceilings - (run.ceilings_base or 0))
  sums.rest = math.max(0, elapsed - counted - sums.start - sums.ceilings)
  return sums
end

-- funnel_text(funnel [, all]) -> "accepted 2 · slower 5 · ...": the outcomes in
-- their display order (kwb.base.outcomes.display); all: the quiet ones too
-- where they are 0 (no-code, unsafe only where some candidate ends so)
function M.funnel_text(f, all)
  local parts = {}
  for _, o in ipairs(outcomes.display) do
    if f[o] > 0 or (all and not outcomes.quiet[o]) then parts[#parts + 1] = o .. " " .. f[o] end
  end
  return table.concat(parts, " · ")
end

-- done_line(sm) -> "done: best ID, 6.92x geomean over the start kernel  PARAMS"
-- (or that nothing beat it): the pick, as a run's end prints it
function M.done_line(sm)
  local b = sm.best
  if b.start then
    return string.format("done: nothing beat the start kernel (%d candidates, %d known from the cache)", sm.candidates,
                         sm.known)
  end
  return string.format("done: best %s, %.2fx geomean over the start kernel%s", b.short, b.score,
                       b.params and next(b.params) and ("  " .. text.params_text(b.params)) or "")
end

-- funnel_line(sm) -> "funnel: 10 candidates · 3 bad (30%) · ... · 4.2 s, 2.38 candidates/s"
function M.funnel_line(sm)
  local bad = 0
  for o in pairs(outcomes.bad) do bad = bad + sm.funnel[o] end
  return string.format("funnel: %d candidates · %d bad (%.0f%%) · %s · %.1f s, %.2f candidates/s%s", sm.candidates, bad,
    sm.candidates > 0 and 100 * bad / sm.candidates or 0, M.funnel_text(sm.funnel, true), sm.seconds, sm.per_second,
    sm.known > 0 and string.format(" · %d known from the cache", sm.known) or "")
    .. ((sm.repeats or 0) > 0 and string.format(" (%d of them repeats of the model's)", sm.repeats) or "")
end

-- A summary prints (the REPL, print) as its two lines, its fields one index
-- away (sm.best, sm.elsewhere, sm.stages, ...); JSON encodes it as ever.
local Summary = {}
Summary.__index = Summary
Summary.__tostring = function(sm)
  return M.done_line(sm) .. "\n" .. M.funnel_line(sm)
    .. (sm.elsewhere and string.format("\n%d of %d shapes faster elsewhere (sm.elsewhere)", #sm.elsewhere, sm.shape_count)
        or "")
end
M.Summary = Summary

function M.summary(run)
  local s = run.session
  local elapsed = core.now() - run.started
  local best = s.best
  local speedup, start_times, best_times, floor, against = {}, {}, {}, {}, {}
  local bl = run.baseline
  for _, sh in ipairs(run.recipe.shapes) do
    local r = best.shapes[sh.key]
    speedup[sh.key] = r and r.speedup or nil
    start_times[sh.key] = s.start.shapes[sh.key].median
    best_times[sh.key] = r and r.median or nil
    floor[sh.key] = r and r.floor_frac or nil
    against[sh.key] = vs(bl, sh.key, r and r.median)
  end
  local faster = elsewhere(s, run.recipe.shapes, best, best_times, bl)
  local model, proposals = model_part(run)
  return setmetatable({
    event = "summary", recipe = run.recipe.name, run = run.record.short, strategy = run.strategy_name,
    seed = run.seed, funnel = run.funnel, candidates = run.evaluated, known = run.skipped, repeats = run.repeats,
    partial_shapes = run.partial, timing_seconds = run.timing_s, stages = stage_sums(run, elapsed),
    prebuilt = run.prebuilt,
    exhausted = run.exhausted or false, seconds = elapsed,
    per_second = elapsed > 0 and run.evaluated / elapsed or 0,
    best = { id = best.id, short = best.short, score = best.score, speedup = speedup, params = best.params,
             origin = best.origin, start = best.outcome == "start", floor = next(floor) and floor or nil,
             vs_baseline = next(against) and against or nil },
    baseline = baseline_part(bl),
    start = { id = s.start.id, median = start_times },
    best_median = best_times,
    -- absent when the pick is the fastest at every shape (an empty table would be a JSON object)
    elsewhere = #faster > 0 and faster or nil, shape_count = #run.recipe.shapes,
    model = model, proposals = proposals and #proposals > 0 and proposals or nil, stopped = run.stop_reason,
    stopped_by = run.stopped_by,
    judge = run.judge and { planted = run.judge.planted, rejected = run.judge.rejected, from = run.judge.from,
                            line = require("kwb.loop.selftest").line(run.judge) },
  }, Summary)
end

return M
