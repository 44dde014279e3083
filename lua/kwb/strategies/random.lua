-- kwb/strategies/random.lua: points drawn uniformly without replacement from
-- the allowed part of the space, skipping what the cache already knows.
local space = require "kwb.strategies.space"

local S = { name = "random" }

-- Spaces up to this size are enumerated and shuffled; larger ones sampled.
S.enumerate_limit = 200000

function S:init(run)
  self.space = space.need_space(run, "random")
  local n = space.size(self.space)
  if n <= S.enumerate_limit then
    local order = {}
    for i = 1, n do order[i] = i end
    for i = n, 2, -1 do   -- Fisher-Yates
      local j = run.random(i)
      order[i], order[j] = order[j], order[i]
    end
    self.order, self.next = order, 1
  end
  self.seen = {}
end

function S:propose(run)
  if self.order then
    while self.next <= #self.order do
      local p = space.params(self.space, space.nth(self.space, self.order[self.next]))
      self.next = self.next + 1
      if space.fresh(run, p) then return p end
    end
    return nil
  end
  for _ = 1, 10000 do
    local idx = space.random(self.space, run.random)
    local key = table.concat(idx, ",")
    if not self.seen[key] then
      self.seen[key] = true
      local p = space.params(self.space, idx)
      if space.fresh(run, p) then return p end
    end
  end
  return nil
end

return S
