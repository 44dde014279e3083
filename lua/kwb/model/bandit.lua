-- kwb/model/bandit.lua: which of several models answers the next request,
-- chosen by Thompson sampling on accepted proposals per unit of cost.
--
-- Each arm (model) keeps its requests (chosen), its answers (replies or
-- failures that came back), the requests whose proposal was accepted and the
-- cost its answers took. An arm never chosen is chosen first, in the list's
-- order. After that each choice draws, for every arm, a rate of acceptance
-- from its posterior, Beta(1 + accepted, 1 + answers - accepted), divides it
-- by the arm's mean cost per answer, and takes the largest (the earliest arm
-- on a tie). An arm chosen but not yet answered costs the mean of the arms
-- that have answers (1 where none has). A request whose candidate is still
-- being evaluated counts as not accepted until it is.
--
-- The draws come from a generator of the seed alone (kwb.base.rng): the same
-- seed and the same rewards give the same choices.
--
--   local b = bandit.new(n, seed)
--   local i = b:choose()              -- an arm, counted as a request
--   b:answered(i, cost)               -- its reply (or failure) came back, costing cost
--   b:accepted(i)                     -- a proposal of one of its requests was accepted
--   b:rate(i)                         -- the posterior's mean acceptance over the mean cost per answer
local rng = require "kwb.base.rng"

local M = {}

local Bandit = {}
Bandit.__index = Bandit

function M.new(n, seed)
  local b = setmetatable({ arms = {}, rand = rng.new(rng.seed_of(seed, "models")), choices = {} }, Bandit)
  for i = 1, n do b.arms[i] = { requests = 0, answers = 0, accepted = 0, cost = 0 } end
  return b
end

-- gamma(k) -> a draw of Gamma(k, 1) for a whole k (the sum of k exponentials)
local function gamma(rand, k)
  local x = 0
  for _ = 1, k do x = x - math.log(1 - rand()) end
  return x
end

-- beta(a, b) -> a draw of Beta(a, b) for whole a, b
local function beta(rand, a, b)
  local x, y = gamma(rand, a), gamma(rand, b)
  return x / (x + y)
end

-- The mean cost per answer of arm i; unanswered: the mean of the answered arms' (1 where none).
function Bandit:mean_cost(i)
  local a = self.arms[i]
  if a.answers > 0 then return a.cost / a.answers end
  local sum, n = 0, 0
  for _, x in ipairs(self.arms) do
    if x.answers > 0 then sum, n = sum + x.cost / x.answers, n + 1 end
  end
  return n > 0 and sum / n or 1
end

function Bandit:choose()
  local pick
  for i, a in ipairs(self.arms) do
    if a.requests == 0 then pick = i; break end
  end
  if not pick then
    local top
    for i, a in ipairs(self.arms) do
      local theta = beta(self.rand, 1 + a.accepted, 1 + a.answers - a.accepted)
      local score = theta / math.max(self:mean_cost(i), 1e-12)
      if not top or score > top then pick, top = i, score end
    end
  end
  self.arms[pick].requests = self.arms[pick].requests + 1
  self.choices[#self.choices + 1] = pick
  return pick
end

function Bandit:answered(i, cost)
  local a = self.arms[i]
  a.answers, a.cost = a.answers + 1, a.cost + (cost or 0)
end

function Bandit:accepted(i)
  local a = self.arms[i]
  a.accepted = math.min(a.accepted + 1, a.answers)
end

function Bandit:rate(i)
  local a = self.arms[i]
  return (1 + a.accepted) / (2 + a.answers) / math.max(self:mean_cost(i), 1e-12)
end

return M
