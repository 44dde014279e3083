-- kwb/loop/start.lua: the start kernel's figures are the run's own. A run
-- whose start kernel the cache knew has it due (Session.start_due): the first
-- candidate submitted takes it along as its companion, the two timed in
-- turns at each shape in the worker (kwb.measure's time_beside); the figures
-- come back with the candidate's result and become the session's start
-- before the candidate is judged. Where no candidate reaches its timing, the
-- start kernel is timed again alone at the loop's end. Functions of a
-- session (kwb.loop.session).
local judge = require "kwb.loop.judge"
local result = require "kwb.loop.result"
local rng = require "kwb.base.rng"

local M = {}

-- companion(s, cand, opts) -> the start kernel as a worker's task carries it
-- (its fields and a seed of its own), and its candidate | nil: while the
-- start is due, for a candidate that will be measured (not the start
-- itself, not one with no code or over the size limit).
function M.companion(s, cand, opts)
  if not s.start_due or opts.start or cand.no_code or cand.too_big then return nil end
  local sc = s:candidate(s.recipe.start, "start")
  if sc.id == cand.id then return nil end
  local c = require("kwb.loop.candidate").for_worker(sc)
  c.seed = tostring(rng.seed_of(s.run_seed or s.recipe.seed or 0, sc.id, "beside", s.seq))
  return c, sc
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

-- take(s, pending): the companion's figures (the result's `companion`, taken
-- off it), where it has them at every shape: judged as the start, recorded
-- with the run (the cache keeps the earlier runs' as history), the
-- session's start from now. Where the candidate failed before its timing,
-- the start kernel stays due, for the next candidate; where the start
-- kernel's own timing failed, its earlier figures stand (s.start_error).
function M.take(s, pending)
  local comp = pending.res.companion
  pending.res.companion = nil
  if not comp or comp.error then
    if comp and comp.error then s.start_error = comp.error end
    return
  end
  for _, sh in ipairs(s.recipe.shapes) do
    if not comp.shapes[sh.key] then return end
  end
  local sc = pending.companion
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

-- retime(s): the start kernel timed again alone, where it is still due at a
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

return M
