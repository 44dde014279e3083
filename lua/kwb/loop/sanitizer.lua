-- kwb/loop/sanitizer.lua: compute-sanitizer's runs that a session decides on
-- beyond one candidate's own (kwb.loop.session's sanitize runs the tools on a
-- candidate). The words, one each:
--
--   put off    a run whose strategy reads no results (grid, list) under
--              sanitize = "best" has the tools put off to its end: the run
--              owns a PutOff (Session:put_off), which holds the results judged
--              meanwhile. A best among them is `due` (the stored mark
--              sanitize_due) until the PutOff settles: the tools on the best; a
--              finding makes it unsafe and the held results are judged again
--              against the bests they would have met, so the outcomes, the best
--              and the cache end as sanitizing at once would have left them
--              (tests/lua/test_deferred_sanitize.lua). A run that fails first
--              abandons it: the session's best is the one before the run.
--   sanitized  the stored mark: the tools ran on it here and found nothing.
--   may be named a best   kwb.base.outcomes.may_be_best, the one rule.
--   winners    at a run's end under "best" or "all", each shape's winner
--              sanitized where it never was (tests/lua/test_sanitize_winners.lua).
--   known best a session's best from earlier runs, sanitized before it is
--              named where it never was.
--
-- A stored result the tools change is revised in the cache (kwb.loop.store's
-- revise); the session's standings are then counted again (Session:recount).
local judge = require "kwb.loop.judge"
local outcomes = require "kwb.base.outcomes"

local M = {}

local PutOff = {}
PutOff.__index = PutOff

-- put_off(session) -> a PutOff: the tools put off to the run's end, the
-- session's best as it was kept to fall back on (Session:put_off makes it).
function M.put_off(session)
  return setmetatable({ s = session, base = session.best, list = {}, by_id = {} }, PutOff)
end

-- hold(cand, res): a verified result judged while the tools are put off,
-- kept for settle; an accepted one not sanitized here before is due.
function PutOff:hold(cand, res)
  self.list[#self.list + 1] = { cand = cand, res = res }
  self.by_id[res.id] = self.list[#self.list]
  res.sanitize_due = res.outcome == "accepted" and not res.sanitized or nil
end

-- holds(id) -> whether this PutOff holds the result of candidate id
function PutOff:holds(id) return self.by_id[id] ~= nil end

-- settle([on_change]) -> { { res =, was = outcome }, ... }: the put-off
-- tools run on the best. A finding makes it unsafe, and the results put
-- off with it are judged again in their order against the bests they would
-- have met had the finding come at once; the new best is sanitized in turn,
-- and so on. Results whose outcome changed are revised in the cache and
-- returned, each once, with the outcome it had; on_change(change) has each
-- too, also those made before an error stops the settling (then raised).
-- A result with a shape raced out (against the unsafe best's time, maybe)
-- is not made the best on that first look: it stays slower.
function PutOff:settle(on_change)
  local s = self.s
  if s.putoff ~= self then return {} end   -- (settled or abandoned already)
  local first, order = {}, {}   -- result -> its outcome before settling; the results in the order they changed
  local function changed(r, was) if first[r] == nil then first[r], order[#order + 1] = was, r end end
  local ok, err = pcall(self.settle_best, self, changed)
  local out = {}
  for _, r in ipairs(order) do
    if r.outcome ~= first[r] then out[#out + 1] = { res = r, was = first[r] } end
  end
  for _, c in ipairs(on_change and out or {}) do on_change(c) end
  if not ok then error(err, 0) end
  -- (bests put off and superseded: without the mark no reader names them, so they need not stay due)
  for _, it in ipairs(self.list) do
    local r = it.res
    if r.sanitize_due and r ~= s.best then
      r.sanitize_due = nil
      s.store:revise(s.ctx, it.cand, r, s.run_record)
    end
  end
  s.putoff = nil
  s:recount()
  return out
end

-- settle_best(changed): settle's loop (changed(res, was) on each change).
function PutOff:settle_best(changed)
  local s, d = self.s, self
  while s.best and s.best.sanitize_due do
    local b = s.best
    local item = d.by_id[b.id]
    if not item then s.best = d.base; break end   -- (not this run's: not the best unsanitized)
    -- (found unsafe meanwhile by another recipe's evaluation at a shape both
    -- time, kwb.loop.store's known: that finding stands, the tools need not run)
    local now = s.store:known(s.ctx, b.id)
    if now and now.outcome == "unsafe" then b.outcome, b.reason, b.sanitized = "unsafe", now.reason, nil
    else s:sanitize(item.cand, b) end
    b.sanitize_due = nil
    s.store:revise(s.ctx, item.cand, b, s.run_record)
    if b.outcome ~= "unsafe" then break end
    changed(b, "accepted")
    local best = d.base
    for _, it in ipairs(d.list) do
      local r, was = it.res, it.res.outcome
      if was == "accepted" or was == "slower" then
        r.outcome, r.reason, r.score_lo = nil, nil, nil
        judge.judge(s.recipe, r, { ceilings = s:ceilings(), start = s.start, best = best })
        local raced = false
        for _, sh in pairs(r.shapes) do raced = raced or sh.partial == true end
        if r.outcome == "accepted" and raced and was == "slower" then
          r.outcome, r.reason = "slower", "a shape's timing was raced out: a first look does not make the best"
        end
        if r.outcome == "accepted" then
          best = r
          if not r.sanitized then r.sanitize_due = true end
        end
        if r.outcome ~= was then changed(r, was); s.store:revise(s.ctx, it.cand, r, s.run_record) end
      end
    end
    s.best = best
  end
end

-- abandon(): after a run that ended in an error before settling was done,
-- its best is not the session's: the one before the run is. (Settled
-- already: nothing to do.)
function PutOff:abandon()
  local s = self.s
  if s.putoff ~= self then return end
  s.putoff = nil
  local b = s.best   -- (kept only where settling got as far as a clean best)
  if b and not (b == self.base or b.outcome == "accepted" and outcomes.may_be_best(b, true)) then
    s.best = self.base
  end
  s:recount()
end

-- sanitize_stored(s, stored [, mine]) -> the result as it stands, and the change ({ res
-- =, was =, mine = }) where its outcome changed: a stored result the tools
-- never sanitized (it may not be named a best: kwb.base.outcomes.may_be_best) sanitized here and revised in the
-- cache: clean, marked `sanitized`; unsafe, so. It is read again first: a
-- result evaluated or revised since (another process's) stands as it is.
-- mine: the run's own copy of it, kept in step.
local function sanitize_stored(s, stored, mine)
  local now = s.store:known(s.ctx, stored.id)
  if not now or now.seq ~= stored.seq or now.outcome ~= stored.outcome or outcomes.may_be_best(now, true) then return now end
  local got = assert(s.store.cache:get(now.id))
  local cand = s:candidate({ source = got.source, defines = got.params, params = got.params, name = now.name }, now.origin)
  if cand.id ~= now.id then error(string.format("candidate %s does not build under this recipe's flags again", now.short), 0) end
  local r = mine or now
  local was, read = r.outcome, { outcome = now.outcome, sanitized = now.sanitized, sanitize_due = now.sanitize_due }
  s:sanitize(cand, r)
  r.sanitize_due = nil
  s.store:revise(s.ctx, cand, r, { id = now.run }, read)
  return r, r.outcome ~= was and { res = r, was = was, mine = mine ~= nil } or nil
end

-- known_best(s, results) -> changes: the session's best from earlier runs' results: the
-- accepted one of highest score that may be named a best where the recipe
-- sanitizes; one never sanitized (from before the mark, a recipe that did
-- not sanitize, a bundle) is sanitized now, and one found unsafe gives way.
-- (A best still due its put-off run is left out: kwb.loop.session's known.)
function M.known_best(s, results)
  local san = s:sanitizing()
  local order = {}
  for _, r in ipairs(results) do
    if r.outcome == "accepted" and not r.sanitize_due and r.score and r.score > s.best.score then order[#order + 1] = r end
  end
  table.sort(order, function(a, b) return a.score > b.score end)
  local any, changes = false, {}
  for _, r in ipairs(order) do
    local now, change = r, nil
    if not outcomes.may_be_best(r, san) then now, change = sanitize_stored(s, r); any = true end
    if change then changes[#changes + 1] = change end
    if now and now.outcome == "accepted" and outcomes.may_be_best(now, san) then s.best = now; break end
  end
  if any then s:recount() end
  return changes
end

-- winners(s, by_id [, on_change]) -> { { res =, was =, mine = }, ... }:
-- where the recipe sanitizes, each timed shape's winner as kwb export picks
-- it (the fastest verified result there, fully timed, over every run under
-- this context; the start kernel only where it is this recipe's own)
-- sanitized where it never was (a slower result, a best put off
-- and superseded, one from before the mark): clean, marked; unsafe, the
-- next fastest there in turn. by_id maps this run's results (kept in step,
-- counted in its funnel: mine); on_change(change) has each change as it comes.
function M.winners(s, by_id, on_change)
  if not s:sanitizing() then return {} end
  local out, results, any, tried = {}, s.store:results(s.ctx), false, {}
  local function winner(r)
    return r.outcome == "accepted" or r.outcome == "slower" or r.outcome == "start" and r.id == (s.start or {}).id
  end
  for _, sh in ipairs(s.recipe.shapes) do
    while true do
      local at
      for i, r in ipairs(results) do
        local t = r.shapes[sh.key]
        if winner(r) and t and t.median and not t.partial and (not at or t.median < results[at].shapes[sh.key].median) then
          at = i
        end
      end
      if not at or outcomes.may_be_best(results[at], true) then break end
      local id = results[at].id
      local now, change
      if not tried[id] then now, change = sanitize_stored(s, results[at], by_id[id]) end
      any, tried[id] = true, true
      -- (the result as it now stands, in the list the next pick is taken from; one the
      -- tools ran on that still may not be named, a revision another process refused, is no winner)
      results[at] = now or { outcome = "gone", shapes = {} }
      if change then
        out[#out + 1] = change
        if on_change then on_change(change) end
      end
    end
  end
  if any then s:recount() end
  return out
end

return M
