-- kwb/loop/standings.lua: where a session's results stand, shape by shape:
-- the best time (the bar a later candidate is raced against) and the winner
-- (the fastest fully timed result there that may be named one:
-- kwb.base.outcomes.may_be_best, as the session asks it); and, against a
-- run's pick, the shapes some other result wins by a margin ("faster
-- elsewhere", what kwb export dispatches to). The session's best overall is
-- the session's own (kwb.loop.session: best); its summary reads these.
local M = {}

-- A shape is "faster elsewhere" when another verified result's median there
-- beats the pick's by more than this fraction (the pick wins on the score, a
-- mean over shapes; a layer may still dispatch per shape).
M.elsewhere_margin = 0.02

local Standings = {}
Standings.__index = Standings

function M.new()
  return setmetatable({ best_time = {}, winners = {} }, Standings)
end

-- reset(): nothing noted (kwb.loop.session's recount notes every result again)
function Standings:reset()
  self.best_time, self.winners = {}, {}
end

-- note(res, named): a verified result's times: each shape's best time, and,
-- where named (it may be named a winner), the shapes it wins, from fully
-- timed shapes only (a raced shape's few samples stand for no median).
function Standings:note(res, named)
  for key, r in pairs(res.shapes) do
    if r.median and (not self.best_time[key] or r.median < self.best_time[key]) then self.best_time[key] = r.median end
    local w = self.winners[key]
    if named and r.median and not r.partial and (not w or r.median < w.median) then
      self.winners[key] = { id = res.id, short = res.short, median = r.median, name = res.name,
                            params = res.params, origin = res.origin, start = res.outcome == "start" }
    end
  end
end

-- elsewhere(shapes, pick, pick_times) -> { { shape =, id =, short =, median =,
-- pick = (the pick's median there), name =, params =, origin =, start = }, ... }:
-- the shapes whose winner is not the pick and beats it by the margin.
function Standings:elsewhere(shapes, pick, pick_times)
  local out = {}
  for _, sh in ipairs(shapes) do
    local w, mine = self.winners[sh.key], pick_times[sh.key]
    if w and mine and w.id ~= pick.id and w.median * (1 + M.elsewhere_margin) < mine then
      out[#out + 1] = { shape = sh.key, id = w.id, short = w.short, median = w.median, pick = mine,
                        name = w.name, params = w.params, origin = w.origin, start = w.start }
    end
  end
  return out
end

return M
