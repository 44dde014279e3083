-- kwb/loop/start.lua: the start kernel's figures, and the recipe's
-- baseline's, are the run's own. A run whose start kernel the cache knew has
-- it due (Session.start_due), and a run whose recipe's baseline is a source
-- checked at its start has that due (Session.baseline_due:
-- kwb.measure.baseline): the first candidate submitted takes them along as
-- its companions, all of them timed in turns at each shape in the worker
-- (kwb.measure's time_beside); the figures come back with the candidate's
-- result and become the session's start, and the run's baseline, before
-- the candidate is judged. Where no candidate reaches its timing, the start
-- kernel is timed again at the loop's end (the baseline in turns beside it
-- where both are due), and a baseline still due is timed alone after it.
-- Functions of a session (kwb.loop.session).
local baseline = require "kwb.measure.baseline"
local judge = require "kwb.loop.judge"
local result = require "kwb.loop.result"
local rng = require "kwb.base.rng"

local M = {}

-- companions(s, cand, opts) -> the kernels to time in turns beside the
-- candidate, as a worker's task carries them (each its role, its fields
-- and a seed of its own), and the session's note of them (pending's), or
-- nil: while they are due, for a candidate that will be measured (not one
-- with no code or over the size limit, not a plant): the start kernel
-- (not beside itself), and the recipe's baseline (beside the start kernel's
-- own timing again too).
function M.companions(s, cand, opts)
  if opts.plant or cand.no_code or cand.too_big then return nil end
  local list, kept = {}, {}
  if s.start_due and not opts.start then
    local sc = s:candidate(s.recipe.start, "start")
    if sc.id ~= cand.id then
      local c = require("kwb.loop.candidate").for_worker(sc)
      c.role, c.seed = "start", tostring(rng.seed_of(s.run_seed or s.recipe.seed or 0, sc.id, "beside", s.seq))
      list[#list + 1], kept[#kept + 1] = c, { role = "start", cand = sc }
    end
  end
  if s.baseline_due then
    local c = baseline.for_worker(s, s:candidate(s.recipe.baseline.spec, "baseline"), "beside")
    c.role = "baseline"
    list[#list + 1], kept[#kept + 1] = c, { role = "baseline" }
  end
  if #list == 0 then return nil end
  return list, kept
end

-- now(s, sres): new figures of the start kernel (judged "start") become the
-- session's start, its best's score taken against them (kwb.loop.judge.rescore).
local function now(s, sres)
  local was = s.start
  s.start = sres
  if s.best == was then s.best = sres
  elseif s.best then s.best = judge.rescore(s.recipe, s.best, sres) end
  s.start_due = false
  s.start_again = sres
  s:note_times(sres)
end

-- whole(s, comp) -> whether a companion came back with figures at every shape
local function whole(s, comp)
  if not comp or comp.error then return false end
  for _, sh in ipairs(s.recipe.shapes) do
    if not comp.shapes[sh.key] then return false end
  end
  return true
end

-- take_start(s, pending, comp): the start kernel's figures timed beside the
-- candidate, where it has them at every shape: judged as the start,
-- recorded with the run (the cache keeps the earlier runs' as history), the
-- session's start from now. Where the candidate failed before its timing,
-- the start kernel stays due, for the next candidate; where the start
-- kernel's own timing failed, its earlier figures stand (s.start_error).
local function take_start(s, pending, sc, comp)
  if comp and comp.error then s.start_error = comp.error end
  if not whole(s, comp) then return end
  s.seq = s.seq + 1
  local sres = result.new(sc, s.seq, rng.seed_of(s.run_seed or s.recipe.seed or 0, sc.id, s.seq))
  sres.shapes, sres.beside = comp.shapes, pending.cand.id
  judge.judge(s.recipe, sres, { ceilings = s:ceilings(), is_start = true })
  if sres.outcome ~= "start" then   -- (under the floor now: the earlier figures stand, and it is said)
    s.start_error = string.format("%s: %s", sres.outcome, sres.reason or "?")
    return
  end
  sres.sanitized = s.start.sanitized
  s.store:record(s.ctx, sc, sres, s.run_record)
  sres.run = s.run_record and s.run_record.id
  now(s, sres)
end

-- take_baseline(s, pending, comp, with_start): the baseline's figures timed
-- beside the candidate (and the start kernel, with_start), where it has
-- them at every shape, into the run's record of it (s.run_baseline), noted
-- for the run to report (s.baseline_again); a failure of its turns is its
-- error, an error of the recipe, and the run goes on without it; where the
-- candidate failed before its timing, it stays due.
local function take_baseline(s, pending, comp, with_start)
  local bl = s.run_baseline
  if comp and comp.error then
    bl.error, bl.due = "timing it in turns failed: " .. comp.error, nil
    s.baseline_due, s.baseline_again = false, bl
    return
  end
  if not whole(s, comp) then return end
  baseline.timed(bl, comp.shapes)
  bl.beside, bl.with_start = pending.cand.id, with_start
  s.baseline_due, s.baseline_again = false, bl
end

-- take(s, pending): the companions' figures (the result's `companions`,
-- taken off it), each by its role; the baseline's taken in turns with the
-- start kernel too where that was the candidate (its own timing again) or
-- a companion timed at every shape.
function M.take(s, pending)
  local got = pending.res.companions or {}
  pending.res.companions = nil
  local with_start = pending.opts.start == true
  for i, kept in ipairs(pending.companions) do
    if kept.role == "start" then with_start = with_start or whole(s, got[i]) end
  end
  for i, kept in ipairs(pending.companions) do
    if kept.role == "start" then take_start(s, pending, kept.cand, got[i])
    else take_baseline(s, pending, got[i], with_start) end
  end
end

-- retime(s): the start kernel timed again (alone, or in turns with the
-- recipe's baseline where that is due too), where it is still due at a
-- run's end, so that every run has its own figures; a failure leaves the
-- earlier ones and is said (s.start_error).
function M.retime(s)
  if not s.start_due then return end
  local res = s:complete(s:submit(s:candidate(s.recipe.start, "start"), { start = true }))
  if res.outcome ~= "start" then
    s.start_error = string.format("%s: %s", res.outcome, res.reason or "?")
    return
  end
  now(s, res)
end

-- baseline_alone(s): the recipe's baseline, still due at a run's end (no
-- candidate reached its timing, and the start kernel's own timing again did
-- not take it along), checked and timed alone (kwb.measure.baseline.alone).
function M.baseline_alone(s)
  if not s.baseline_due then return end
  baseline.alone(s, s.run_baseline)
  s.baseline_due, s.baseline_again = false, s.run_baseline
end

return M
