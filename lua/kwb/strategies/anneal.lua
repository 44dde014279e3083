-- kwb/strategies/anneal.lua: local search with simulated annealing. From the
-- current point, step to a neighbour (one parameter moved one place in its
-- list); move there if it scores better, or with probability
-- exp((score - current) / (current * T)) if worse; T cools geometrically.
-- Bad outcomes (wrong, forbidden, ...) score 0. Neighbours the cache knows
-- are not proposed; when all are known, restart at a fresh random point. It
-- begins at the best point the cache knows, else at the recipe's space.start,
-- else at a random point.
local space = require "kwb.strategies.space"

local S = { name = "anneal", t0 = 0.3, cooling = 0.92, t_min = 0.01 }

function S:init(run)
  self.space = space.need_space(run, "anneal")
  self.temp = S.t0
  -- start from the best point the cache knows, if it is in the space
  local best = run.best
  self.cur = best and best.params and space.index(self.space, best.params)
  self.cur_score = best and best.score or 1
end

local function neighbours(sp, idx)
  local out = {}
  for i, d in ipairs(sp.dims) do
    for _, step in ipairs { -1, 1 } do
      local j = idx[i] + step
      if j >= 1 and j <= #d.values then
        local n = table.move(idx, 1, #idx, 1, {})
        n[i] = j
        out[#out + 1] = n
      end
    end
  end
  return out
end

local function random_fresh(self, run)
  for _ = 1, 2000 do
    local idx = space.random(self.space, run.random)
    local p = space.params(self.space, idx)
    if space.fresh(run, p) then return idx, p end
  end
  return space.first_fresh(run, self.space)
end

function S:propose(run)
  if not self.cur and self.space.start and not self.tried_start then
    self.tried_start = true
    local idx = space.index(self.space, self.space.start)
    if idx and space.fresh(run, space.params(self.space, idx)) then
      self.pending = idx
      return space.params(self.space, idx)
    end
  end
  if not self.cur then
    local idx, p = random_fresh(self, run)
    if not idx then return nil end
    self.pending = idx
    return p
  end
  local ns = neighbours(self.space, self.cur)
  for i = #ns, 2, -1 do
    local j = run.random(i)
    ns[i], ns[j] = ns[j], ns[i]
  end
  for _, n in ipairs(ns) do
    local p = space.params(self.space, n)
    if space.fresh(run, p) then
      self.pending = n
      return p, { parent = run.id and run:id(space.params(self.space, self.cur)) or nil }
    end
  end
  local idx, p = random_fresh(self, run)   -- a local optimum, fully explored: restart
  if not idx then return nil end
  self.pending = idx
  self.restart = true
  return p
end

function S:observe(run, res)
  local idx = self.pending
  self.pending = nil
  if not idx then return end
  local score = res.score or 0
  if not self.cur or self.restart then
    self.restart = nil
    if score > 0 then self.cur, self.cur_score = idx, score end
  elseif score >= self.cur_score then
    self.cur, self.cur_score = idx, score
  elseif score > 0 then
    local p = math.exp((score - self.cur_score) / (self.cur_score * self.temp))
    if run.random() < p then self.cur, self.cur_score = idx, score end
  end
  self.temp = math.max(S.t_min, self.temp * S.cooling)
end

return S
