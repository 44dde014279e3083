-- kwb/loop/judge.lua: the verdict on a measured result, in the main process. Every
-- timed shape gets its physical floor (a median under it is "impossible"),
-- its bandwidth, rate and speedup over the start kernel; the recipe's score
-- (the geometric mean of the speedups by default) and accept rule (1% over
-- the best by default) then make it "accepted" or "slower"; the start kernel
-- itself ends in "start". The default rule also wants the gain beyond the
-- noise of both measurements (honest()).
local ceilings = require "kwb.measure.ceilings"
local figures = require "kwb.figures"

local M = {}

local function geomean(xs)
  local s, n = 0, 0
  for _, x in ipairs(xs) do s, n = s + math.log(x), n + 1 end
  return n > 0 and math.exp(s / n) or 0
end

-- The candidate as the score and accept functions see it: c.score,
-- c.shapes["n=64"].speedup (and .median, .partial, ...), c.shape_list
-- (recipe order), c.params, c.id.
function M.view(recipe, res)
  local list = {}
  for i, sh in ipairs(recipe.shapes) do list[i] = res.shapes[sh.key] end
  return { id = res.id, short = res.short, score = res.score, shapes = res.shapes, shape_list = list,
           params = res.params, outcome = res.outcome, origin = res.origin }
end

-- Floors and rates of every shape; "impossible" at the first median under its floor.
local function floors(recipe, c, res, start)
  local p = recipe.problem
  for _, sh in ipairs(recipe.shapes) do
    local r = res.shapes[sh.key]
    local bytes, flops = p:bytes_of(sh.shape), p:flops_of(sh.shape)
    local floor = ceilings.floor(c, bytes, flops)
    r.floor, r.floor_frac = floor, floor > 0 and floor / r.median or nil
    r.gbs = bytes and bytes / r.median / 1e9 or nil
    r.gflops = flops and flops / r.median / 1e9 or nil
    r.speedup = start and start.shapes[sh.key].median / r.median or 1
    if r.median < floor then
      res.outcome = "impossible"
      res.reason = string.format("median %s at %s is under the physical floor %s (%.3g GB/s, %.3g GFLOP/s at most)",
                                 figures.time(r.median), sh.key, figures.time(floor), c.bandwidth / 1e9, c.flops / 1e9)
      return
    end
  end
end

-- The score's bounds from each shape's confidence interval of its median
-- (kwb_stats' ci_lo, ci_hi): the geometric mean of the start kernel's median
-- over the slow end (lo) and over the fast end (hi) of the interval. A shape
-- without one (an old result) counts at its median.
local function score_bounds(recipe, res, start)
  local lo, hi = {}, {}
  for i, sh in ipairs(recipe.shapes) do
    local r, s = res.shapes[sh.key], start and start.shapes[sh.key]
    local base = s and s.median or r.median
    lo[i] = base / (r.ci_hi or r.median)
    hi[i] = base / (r.ci_lo or r.median)
  end
  return geomean(lo), geomean(hi)
end
M.score_bounds = score_bounds

-- The default accept rule: 1% over the best's score, and beyond the noise of
-- both measurements: the candidate's score at the slow end of its intervals
-- over the best's at the fast end of its own. -> ok, why (when the score
-- alone would have passed but the noise does not let it).
local function honest(recipe, res, best, start)
  local need = (best and best.score or 1) * 1.01
  if res.score <= need then return false end
  local lo = score_bounds(recipe, res, start)
  local best_hi = best and select(2, score_bounds(recipe, best, start)) or 1
  res.score_lo = lo
  if lo > best_hi then return true end
  return false, string.format("%.2fx is within the noise: at the slow end of its 95%% intervals it is %.2fx, the "
                              .. "best at the fast end of its own %.2fx", res.score, lo, best_hi)
end

-- rescore(recipe, res, start) -> a copy of a judged result with its
-- speedups and score taken against other figures of the start kernel (a
-- run's own: kwb.loop.start's take); its outcome as it was.
function M.rescore(recipe, res, start)
  local out = {}
  for k, v in pairs(res) do out[k] = v end
  out.shapes = {}
  local sp = {}
  for i, sh in ipairs(recipe.shapes) do
    local r = {}
    for k, v in pairs(res.shapes[sh.key] or {}) do r[k] = v end
    if r.median then r.speedup = start.shapes[sh.key].median / r.median end
    out.shapes[sh.key] = r
    sp[i] = r.speedup or 1
  end
  out.score = recipe.score and recipe:call("score", M.view(recipe, out)) or geomean(sp)
  return out
end

-- judge(recipe, res, { ceilings =, start =, best =, is_start = }) -> res: a
-- measured result judged (one that already has an outcome is left as it is).
function M.judge(recipe, res, j)
  if res.outcome then return res end
  floors(recipe, j.ceilings, res, j.start)
  if res.outcome then return res end
  local sp = {}
  for i, sh in ipairs(recipe.shapes) do sp[i] = res.shapes[sh.key].speedup end
  local view = M.view(recipe, res)
  res.score = recipe.score and recipe:call("score", view) or geomean(sp)
  if type(res.score) ~= "number" or res.score ~= res.score or math.abs(res.score) == math.huge then
    recipe:fail("score", string.format("the score of %s is %s, not a finite number", res.short, tostring(res.score)))
  end
  view.score = res.score
  if j.is_start then
    res.outcome = "start"
  else
    local best = j.best and M.view(recipe, j.best) or nil
    local ok
    if recipe.accept then
      ok = recipe:call("accept", view, best)
      if type(ok) ~= "boolean" then
        recipe:fail("accept", string.format("accept(candidate, best) returned %s for %s, not true or false",
                                            type(ok) == "string" and string.format("%q", ok) or tostring(ok), res.short))
      end
    else
      local why
      ok, why = honest(recipe, res, j.best, j.start)
      res.reason = why
    end
    res.outcome = ok and "accepted" or "slower"
  end
  return res
end

return M
