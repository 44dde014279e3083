-- kwb/strategies/grid.lua: every point of the space in order (the last
-- parameter, in name order, fastest), skipping what the restriction forbids
-- and what the cache already knows.
local space = require "kwb.strategies.space"

-- ahead: its proposals do not depend on the results, so the run may ask for
-- the next ones early and build them while the current one is measured.
local S = { name = "grid", ahead = true }

function S:init(run)
  self.space = space.need_space(run, "grid")
  self.next, self.size = 1, space.size(self.space)
end

function S:propose(run)
  while self.next <= self.size do
    local p = space.params(self.space, space.nth(self.space, self.next))
    self.next = self.next + 1
    if space.fresh(run, p) then return p end
  end
  return nil
end

return S
