-- kwb/loop/sanitizer.lua: compute-sanitizer put off to a run's end, as methods of
-- a session (kwb.loop.session takes them in). A run whose strategy reads no
-- results (grid, list: no outcome steers what it proposes) with sanitize =
-- "best" has its best alone sanitized when the loop is done, instead of each
-- new best as it comes; the outcomes, the best and the cache end as
-- sanitizing at once would have left them (tests/lua/test_deferred_sanitize.lua).
-- At every run's end under "best", each shape's winner is sanitized where it
-- never was (sanitize_winners; tests/lua/test_sanitize_winners.lua).
local judge = require "kwb.loop.judge"
local outcomes = require "kwb.base.outcomes"

local M = {}

-- defer_sanitizer(): compute-sanitizer ("best") put off to the run's end
-- (settle) for a strategy that reads no results (grid, list), so the best
-- alone has it. A new best is recorded with sanitize_due meanwhile.
function M:defer_sanitizer()
  self.deferred = { base = self.best, list = {}, by_id = {} }
end

-- settle([report]) -> { { res =, was = outcome }, ... }: the put-off
-- sanitizer run on the best. A finding makes it unsafe, and the results put
-- off with it are judged again in their order against the bests they would
-- have met had the finding come at once; the new best is sanitized in turn,
-- and so on. Results whose outcome changed are revised in the cache and
-- returned, each once, with the outcome it had; report(change) has each
-- too, also those made before an error stops the settling (then raised).
-- A result with a shape raced out (against the unsafe best's time, maybe)
-- is not made the best on that first look: it stays slower.
function M:settle(on_change)
  local d = self.deferred
  if not d then return {} end
  local first, order = {}, {}   -- result -> its outcome before settling; the results in the order they changed
  local function changed(r, was) if first[r] == nil then first[r], order[#order + 1] = was, r end end
  local ok, err = pcall(self.settle_best, self, d, changed)
  local out = {}
  for _, r in ipairs(order) do
    if r.outcome ~= first[r] then out[#out + 1] = { res = r, was = first[r] } end
  end
  for _, c in ipairs(on_change and out or {}) do on_change(c) end
  if not ok then error(err, 0) end
  -- (bests put off and superseded: without the mark no reader names them, so they need not stay due)
  for _, it in ipairs(d.list) do
    local r = it.res
    if r.sanitize_due and r ~= self.best then
      r.sanitize_due = nil
      self.store:revise(self.ctx, it.cand, r, self.run_record)
    end
  end
  self.deferred = nil
  self:renote()
  return out
end

-- settle_best(d, changed): settle's loop (changed(res, was) on each change).
function M:settle_best(d, changed)
  while self.best and self.best.sanitize_due do
    local b = self.best
    local item = d.by_id[b.id]
    if not item then self.best = d.base; break end   -- (not this run's: not the best unsanitized)
    -- (found unsafe meanwhile by another recipe's evaluation at a shape both
    -- time, kwb.loop.store's known: that finding stands, the tools need not run)
    local now = self.store:known(self.ctx, b.id)
    if now and now.outcome == "unsafe" then b.outcome, b.reason, b.sanitized = "unsafe", now.reason, nil
    else self:sanitize(item.cand, b) end
    b.sanitize_due = nil
    self.store:revise(self.ctx, item.cand, b, self.run_record)
    if b.outcome ~= "unsafe" then break end
    changed(b, "accepted")
    local best = d.base
    for _, it in ipairs(d.list) do
      local r, was = it.res, it.res.outcome
      if was == "accepted" or was == "slower" then
        r.outcome, r.reason, r.score_lo = nil, nil, nil
        judge.judge(self.recipe, r, { ceilings = self:ceilings(), start = self.start, best = best })
        local raced = false
        for _, sh in pairs(r.shapes) do raced = raced or sh.partial == true end
        if r.outcome == "accepted" and raced and was == "slower" then
          r.outcome, r.reason = "slower", "a shape's timing was raced out: a first look does not make the best"
        end
        if r.outcome == "accepted" then
          best = r
          if not r.sanitized then r.sanitize_due = true end
        end
        if r.outcome ~= was then changed(r, was); self.store:revise(self.ctx, it.cand, r, self.run_record) end
      end
    end
    self.best = best
  end
end

-- abandon_deferred(): after a run that ended in an error before settling
-- was done, its best is not the session's: the one before the run is.
function M:abandon_deferred()
  local d = self.deferred
  self.deferred = nil
  local b = self.best   -- (kept only where settling got as far as a clean best)
  if d and b and not (b == d.base or b.outcome == "accepted" and outcomes.may_be_best(b, true)) then
    self.best = d.base
  end
  if d then self:renote() end
end

-- clear(stored [, mine]) -> the result as it stands, and the change ({ res
-- =, was =, mine = }) where its outcome changed: a stored result the tools
-- never cleared (kwb.base.outcomes.may_be_best) sanitized here and revised in the
-- cache: clean, marked `sanitized`; unsafe, so. It is read again first: a
-- result evaluated or revised since (another process's) stands as it is.
-- mine: the run's own copy of it, kept in step.
function M:clear(stored, mine)
  local now = self.store:known(self.ctx, stored.id)
  if not now or now.seq ~= stored.seq or now.outcome ~= stored.outcome or outcomes.may_be_best(now, true) then return now end
  local got = assert(self.store.cache:get(now.id))
  local cand = self:candidate({ source = got.source, defines = got.params, params = got.params, name = now.name }, now.origin)
  if cand.id ~= now.id then error(string.format("candidate %s does not build under this recipe's flags again", now.short), 0) end
  local r = mine or now
  local was, read = r.outcome, { outcome = now.outcome, sanitized = now.sanitized, sanitize_due = now.sanitize_due }
  self:sanitize(cand, r)
  r.sanitize_due = nil
  self.store:revise(self.ctx, cand, r, { id = now.run }, read)
  return r, r.outcome ~= was and { res = r, was = was, mine = mine ~= nil } or nil
end

-- clear_best(results): the session's best from earlier runs' results: the
-- accepted one of highest score that the tools cleared where the recipe
-- sanitizes; one never sanitized (from before the mark, a recipe that did
-- not sanitize, a bundle) is sanitized now, and one found unsafe gives way.
-- (A best still due its put-off run is left out: kwb.loop.session's known.)
function M:clear_best(results)
  local san = self:sanitizing()
  local order = {}
  for _, r in ipairs(results) do
    if r.outcome == "accepted" and not r.sanitize_due and r.score and r.score > self.best.score then order[#order + 1] = r end
  end
  table.sort(order, function(a, b) return a.score > b.score end)
  local any, changes = false, {}
  for _, r in ipairs(order) do
    local now, change = r, nil
    if not outcomes.may_be_best(r, san) then now, change = self:clear(r); any = true end
    if change then changes[#changes + 1] = change end
    if now and now.outcome == "accepted" and outcomes.may_be_best(now, san) then self.best = now; break end
  end
  if any then self:renote() end
  return changes
end

-- sanitize_winners(by_id [, report]) -> { { res =, was =, mine = }, ... }:
-- where the recipe sanitizes, each timed shape's winner as kwb export picks
-- it (the fastest verified result there, fully timed, over every run under
-- this context; the start kernel only where it is this recipe's own)
-- cleared by the tools where it never was (a slower result, a best put off
-- and superseded, one from before the mark): clean, marked; unsafe, the
-- next fastest there in turn. by_id maps this run's results (kept in step,
-- counted in its funnel: mine); report(change) has each change as it comes.
function M:sanitize_winners(by_id, on_change)
  if not self:sanitizing() then return {} end
  local out, results, any, tried = {}, self.store:results(self.ctx), false, {}
  local function winner(r)
    return r.outcome == "accepted" or r.outcome == "slower" or r.outcome == "start" and r.id == (self.start or {}).id
  end
  for _, sh in ipairs(self.recipe.shapes) do
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
      if not tried[id] then now, change = self:clear(results[at], by_id[id]) end
      any, tried[id] = true, true
      -- (the result as it now stands, in the list the next pick is taken from; one the
      -- tools ran on that is still not cleared, a revision another process refused, is no winner)
      results[at] = now or { outcome = "gone", shapes = {} }
      if change then
        out[#out + 1] = change
        if on_change then on_change(change) end
      end
    end
  end
  if any then self:renote() end
  return out
end

-- renote(): the per-shape best times (racing) and winners again from the
-- cache, without an unsafe result or a best still due its sanitizer run.
function M:renote()
  self.best_time, self.shape_best = {}, {}
  self:note_times(self.start)
  for _, r in ipairs(self.store:results(self.ctx)) do self:note_times(r) end
end

return M
