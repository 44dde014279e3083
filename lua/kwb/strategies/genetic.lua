-- kwb/strategies/genetic.lua: a steady-state genetic search. The population
-- is the best-scoring points seen (cache included); a child takes each
-- parameter from one of two tournament-chosen parents, then each parameter
-- mutates with probability 1/#dims. Until the population has two members,
-- and whenever breeding finds only known points, it proposes random points.
local space = require "kwb.strategies.space"

local S = { name = "genetic", population = 8, tournament = 2 }

function S:init(run)
  self.space = space.need_space(run, "genetic")
  self.pop = {}
  for _, r in ipairs(run:history()) do self:add(r) end
end

function S:add(res)
  if not res.score or not res.params then return end
  local idx = space.index(self.space, res.params)
  if not idx then return end
  local pop = self.pop
  pop[#pop + 1] = { idx = idx, score = res.score }
  table.sort(pop, function(a, b) return a.score > b.score end)
  while #pop > S.population do table.remove(pop) end
end

local function pick(self, run)
  local best
  for _ = 1, S.tournament do
    local c = self.pop[run.random(#self.pop)]
    if not best or c.score > best.score then best = c end
  end
  return best
end

function S:propose(run)
  local dims = #self.space.dims
  if #self.pop >= 2 then
    for _ = 1, 200 do
      local a, b = pick(self, run), pick(self, run)
      local child = {}
      for i = 1, dims do
        child[i] = (run.random() < 0.5 and a or b).idx[i]
        if run.random() < 1 / dims then child[i] = run.random(#self.space.dims[i].values) end
      end
      local p = space.params(self.space, child)
      if space.fresh(run, p) then
        local better = a.score >= b.score and a or b
        return p, { parent = run.id and run:id(space.params(self.space, better.idx)) or nil }
      end
    end
  end
  for _ = 1, 2000 do
    local p = space.params(self.space, space.random(self.space, run.random))
    if space.fresh(run, p) then return p end
  end
  local _, p = space.first_fresh(run, self.space)
  return p
end

function S:observe(run, res)
  self:add(res)
end

return S
