-- kwb/deferred.lua: compute-sanitizer put off to a run's end, as methods of
-- a session (kwb.session takes them in). A run whose strategy reads no
-- results (grid, list: no outcome steers what it proposes) with sanitize =
-- "best" has its best alone sanitized when the loop is done, instead of each
-- new best as it comes; the outcomes, the best and the cache end as
-- sanitizing at once would have left them (tests/lua/test_deferred_sanitize.lua).
-- At every run's end under "best", each shape's winner is sanitized where it
-- never was (sanitize_winners; tests/lua/test_sanitize_winners.lua).
local judge = require "kwb.judge"

local M = {}

-- defer_sanitizer(): compute-sanitizer ("best") put off to the run's end
-- (settle) for a strategy that reads no results (grid, list), so the best
-- alone has it. A new best is recorded with sanitize_due meanwhile.
function M:defer_sanitizer()
  self.deferred = { base = self.best, list = {}, by_id = {} }
end

-- settle() -> { { res =, was = outcome }, ... }: the put-off sanitizer run
-- on the best. A finding makes it unsafe, and the results put off with it
-- are judged again in their order against the bests they would have met had
-- the finding come at once; the new best is sanitized in turn, and so on.
-- Results whose outcome changed are revised in the cache and returned, each
-- once, with the outcome it had. A result with a shape raced out (against
-- the unsafe best's time, maybe) is not made the best on that first look:
-- it stays slower.
function M:settle()
  local d = self.deferred
  if not d then return {} end
  local first, order = {}, {}   -- result -> its outcome before settling; the results in the order they changed
  local function changed(r, was) if first[r] == nil then first[r], order[#order + 1] = was, r end end
  while self.best and self.best.sanitize_due do
    local b = self.best
    local item = d.by_id[b.id]
    if not item then self.best = d.base; break end   -- (not this run's: not the best unsanitized)
    self:sanitize(item.cand, b)
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
          if not r.seconds.sanitize then r.sanitize_due = true end
        end
        if r.outcome ~= was then changed(r, was); self.store:revise(self.ctx, it.cand, r, self.run_record) end
      end
    end
    self.best = best
  end
  self.deferred = nil
  self:renote()
  local out = {}
  for _, r in ipairs(order) do
    if r.outcome ~= first[r] then out[#out + 1] = { res = r, was = first[r] } end
  end
  return out
end

-- abandon_deferred(): after a run that ended in an error before settling
-- was done, its best is not the session's: the one before the run is.
function M:abandon_deferred()
  local d = self.deferred
  self.deferred = nil
  local b = self.best   -- (kept only where settling got as far as a clean best)
  if d and b and not (b == d.base or b.outcome == "accepted" and b.seconds.sanitize and not b.sanitize_due) then
    self.best = d.base
  end
  if d then self:renote() end
end

-- sanitize_winners(by_id) -> { { res =, was = outcome }, ... }: each timed
-- shape's winner, as kwb export and cache:best pick it (the fastest verified
-- result there, fully timed, over every run under this context), sanitized
-- where it never was (a slower result under "best", a best put off and
-- superseded): clean, its mark cleared; unsafe, the next fastest in turn.
-- Each is revised in the cache; by_id maps this run's results (kept in step,
-- as settle's are). The start kernel (the recipe's own) stays as it is.
function M:sanitize_winners(by_id)
  if self:sanitizing() ~= "best" then return {} end
  local out, results = {}, self.store:results(self.ctx)
  local winner = { accepted = true, slower = true, start = true }
  for _, sh in ipairs(self.recipe.shapes) do
    while true do
      local pick
      for _, r in ipairs(results) do
        local t = r.shapes[sh.key]
        if winner[r.outcome] and t and t.median and not t.partial and (not pick or t.median < pick.shapes[sh.key].median) then
          pick = r
        end
      end
      if not pick or not (pick.unsanitized or pick.sanitize_due) then break end
      local got = assert(self.store.cache:get(pick.id))
      local cand = self:candidate({ source = got.source, defines = got.params, params = got.params, name = pick.name },
                                  pick.origin)
      if cand.id ~= pick.id then error(string.format("candidate %s does not build under this recipe's flags again", pick.short), 0) end
      local r = by_id[pick.id] or pick
      local was = r.outcome
      self:sanitize(cand, r)
      r.unsanitized, r.sanitize_due = nil, nil
      self.store:revise(self.ctx, cand, r, { id = pick.run })
      pick.outcome, pick.unsanitized, pick.sanitize_due = r.outcome, nil, nil
      if r.outcome ~= was then out[#out + 1] = { res = r, was = was, mine = by_id[pick.id] ~= nil } end
    end
  end
  if #out > 0 then self:renote() end
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
