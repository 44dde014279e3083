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

-- The model's part: its usage, every candidate a reply proposed with its
-- outcome, parent and cost, and with several models (kwb.model.several) the
-- bandit's choices and each model's figures (absent when no model took part).
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
  return { name = a.names and table.concat(a.names, ", ") or require("kwb.model").name(spec), requests = u.requests, retries = u.retries, failures = u.failures,
           input = u.input, output = u.output, cost = u.cost, priced = priced, estimated = estimated,
           unseen = u.unseen },
         props, a.stats and a:stats() or nil
end

-- models_line(models) -> "models (Thompson sampling, accepted per second): openai:a 3 requests, 1 accepted,
-- 4.20 s, rate 0.133/s · ...": several models' figures (sm.models), as the summary prints them
function M.models_line(ms)
  local parts = {}
  for _, m in ipairs(ms.models) do
    parts[#parts + 1] = string.format(ms.unit == "cost" and "%s %d requests, %d accepted, %.4f, rate %.3g per unit"
                                      or "%s %d requests, %d accepted, %.2f s, rate %.3g/s", m.name, m.requests,
                                      m.accepted, m.cost, m.rate)
  end
  return string.format("models (Thompson sampling on accepted per %s): %s", ms.unit == "cost" and "unit of cost"
                       or "second", table.concat(parts, " · "))
end

-- summary(run) -> { event = "summary", funnel =, best =, start =, elsewhere =, ... }
-- Where the run's seconds went: the candidates' stages summed (build, verify,
-- time), compute-sanitizer's runs (`sanitize`: on new bests, the put-off best,
-- the shapes' winners and an earlier best at the start, whichever run's
-- result), the start kernel's judging (`start`: with the workers' start and
-- their reference builds when it is not known), the device's ceilings where
-- measured (`ceilings`), the final round (`certify`: its builds and
-- rounds, kwb.loop.certify), a PyTorch module's own baselines (`pytorch`:
-- kwb.loop.pytorch), and the rest of the loop's wall time (references,
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
  sums.certify = run.certify_s   -- (the final round: kwb.loop.certify)
  sums.pytorch = run.pytorch and run.pytorch.seconds or nil   -- (a module's own baselines: kwb.loop.pytorch)
  sums.rest = math.max(0, elapsed - counted - sums.start - sums.ceilings - (sums.certify or 0) - (sums.pytorch or 0))
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
    .. ((sm.duplicates or 0) > 0 and string.format(" · %d duplicate%s of measured code, outside the budget",
                                                   sm.duplicates, sm.duplicates == 1 and "" or "s") or "")
end

-- certified_lines(sm) -> what the final round certified (kwb.loop.certify),
-- as the summary prints it: the rounds, the pick's score and each shape's
-- speed-up, each with its 95% interval, and the run's own best where the
-- round named another pick; or why there was no round.
function M.certified_lines(sm)
  local c, b = sm.certificate, sm.best
  if not c then
    return sm.uncertified and sm.candidates + sm.known > 0 and { "not certified: " .. sm.uncertified } or {}
  end
  local out = {}
  if b.start then
    out[1] = string.format("certified: %d rounds in turns; no kernel beats the start kernel beyond the noise "
                           .. "(sm.certificate)", c.rounds)
  else
    out[1] = string.format("certified: %d rounds in turns; %.2fx over the start kernel, 95%% interval %.2f-%.2f "
                           .. "(sm.certificate)", c.rounds, b.score, b.score_interval[1], b.score_interval[2])
    local parts = {}
    for _, key in ipairs(c.shapes) do
      local iv = b.interval and b.interval[key]
      parts[#parts + 1] = string.format("%s %.2fx (%s)", key, b.speedup[key],
                                        iv and string.format("%.2f-%.2f", iv[1], iv[2]) or "-")
    end
    out[2] = "  " .. table.concat(parts, " · ")
  end
  if sm.run_best then
    out[#out + 1] = string.format("the run's best %s (%.2fx in the run) is not the pick", sm.run_best.short,
                                  sm.run_best.score or 0)
  end
  return out
end

-- A summary prints (the REPL, print) as the pick, what the final round
-- certified of it and the funnel; its fields are one index away
-- (sm.certificate, which prints as `kwb cache show RUN` shows it, sm.best,
-- sm.elsewhere, sm.stages, ...); JSON encodes it as ever.
local Summary = {}
Summary.__index = Summary
Summary.__tostring = function(sm)
  local lines = { M.done_line(sm) }
  for _, l in ipairs(M.certified_lines(sm)) do lines[#lines + 1] = l end
  lines[#lines + 1] = M.funnel_line(sm)
  if sm.elsewhere then
    lines[#lines + 1] = string.format("%d of %d shapes faster elsewhere (sm.elsewhere)", #sm.elsewhere, sm.shape_count)
  end
  return table.concat(lines, "\n")
end
M.Summary = Summary

-- The pick as the final round certified it (kwb.loop.certify): its score and
-- speedups are the round's medians, each with its interval, its times the
-- round's, its floor's share and names the session's record of it; the
-- shapes faster elsewhere are the round's winners'.
local function certified(run, cert, bl)
  local s = run.session
  local certify = require "kwb.loop.certify"
  local e = certify.entry(cert, cert.pick)
  local start_id = certify.role(cert, "start")
  local is_start = e.role == "start"
  local res = is_start and s.start or s:known({ id = cert.pick }) or {}
  local score = certify.find(cert, "score", cert.pick, start_id)
  -- (a source baseline took its turns in the round: its times and the pick's ratio to it are the round's)
  local bid = certify.role(cert, "baseline")
  local be = bid and certify.entry(cert, bid)
  local speedup, interval, floor, against = {}, {}, {}, {}
  for _, sh in ipairs(run.recipe.shapes) do
    local r = certify.find(cert, "speedup", cert.pick, start_id, sh.key)
    speedup[sh.key] = r and r.median or 1
    interval[sh.key] = r and { r.lo, r.hi } or nil
    local mine = res.shapes and res.shapes[sh.key]
    floor[sh.key] = mine and mine.floor_frac or nil
    local vb = bid and certify.find(cert, "vs_baseline", cert.pick, bid, sh.key)
    against[sh.key] = vb and vb.median or vs(bl, sh.key, e.median[sh.key])
  end
  local best = { id = e.id, short = e.short, score = score and score.median or 1,
                 score_interval = score and { score.lo, score.hi } or nil, speedup = speedup,
                 interval = next(interval) and interval or nil, params = e.params, origin = e.origin, start = is_start,
                 floor = next(floor) and floor or nil, vs_baseline = next(against) and against or nil,
                 baseline_median = be and be.median or nil, certified = true }
  local faster = certify.elsewhere(cert)
  for _, x in ipairs(faster) do
    if be then x.baseline, x.vs_baseline = be.median[x.shape], be.median[x.shape] / x.median
    else x.baseline, x.vs_baseline = bl and bl.median and bl.median[x.shape], vs(bl, x.shape, x.median) end
  end
  return best, e.median, faster
end

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
  local pick = { id = best.id, short = best.short, score = best.score, speedup = speedup, params = best.params,
                 origin = best.origin, start = best.outcome == "start", floor = next(floor) and floor or nil,
                 vs_baseline = next(against) and against or nil }
  local faster
  local cert = run.certificate
  if cert then pick, best_times, faster = certified(run, cert, bl)
  else faster = elsewhere(s, run.recipe.shapes, best, best_times, bl) end
  local model, proposals, models = model_part(run)
  return setmetatable({
    event = "summary", recipe = run.recipe.name, run = run.record.short, strategy = run.strategy_name,
    seed = run.seed, funnel = run.funnel, candidates = run.evaluated, known = run.skipped, repeats = run.repeats,
    duplicates = run.duplicates,
    partial_shapes = run.partial, timing_seconds = run.timing_s, stages = stage_sums(run, elapsed),
    -- the run whose measured ceilings this one took (kwb.loop.ceilings); absent where measured now
    ceilings_from = s.ceilings_from,
    prebuilt = run.prebuilt,
    exhausted = run.exhausted or false, seconds = elapsed,
    per_second = elapsed > 0 and run.evaluated / elapsed or 0,
    best = pick,
    -- the run's own best before the final round, where the round named another pick
    run_best = cert and cert.pick ~= best.id and { id = best.id, short = best.short, score = best.score } or nil,
    certificate = cert and setmetatable(cert, require("kwb.loop.certify").Certificate),
    uncertified = not cert and run.uncertified or nil,
    baseline = baseline_part(bl),
    pytorch = require("kwb.loop.pytorch").part(run.pytorch, best_times),
    -- the start kernel's figures every speed-up of the run is computed against, and the run that timed them
    start = { id = s.start.id, median = start_times, run = s.start.run, this_run = s.start.run == run.record.id,
              error = s.start_error },
    best_median = best_times,
    -- absent when the pick is the fastest at every shape (an empty table would be a JSON object)
    elsewhere = #faster > 0 and faster or nil, shape_count = #run.recipe.shapes,
    model = model, proposals = proposals and #proposals > 0 and proposals or nil, stopped = run.stop_reason,
    -- several models (kwb.model.several): the bandit's choices (arms, 1-based) and each model's figures
    models = models,
    -- the population (kwb.strategies.population): its islands' cells and members, its exchanges
    population = run.strategy and run.strategy.population and run.strategy.population:summary() or nil,
    stopped_by = run.stopped_by,
    judge = run.judge and { planted = run.judge.planted, rejected = run.judge.rejected, from = run.judge.from,
                            line = require("kwb.loop.selftest").line(run.judge) },
  }, Summary)
end

return M
