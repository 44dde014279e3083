-- kwb/strategies/list.lua: a strategy that proposes a fixed list, in order,
-- then nothing: replaying chosen configurations or candidate files.
--
--   local list = require "kwb.strategies.list"
--   strategy = list({ { BM = 64, BN = 64 }, { file = "../kernels/x.cu" } } [, "name"])
--
-- Each run starts again from the first proposal (the loop gives every run its
-- own instance of the strategy table).
return function(proposals, name)
  if type(proposals) ~= "table" then
    error("kwb.strategies.list: expected a list of proposals, got " .. type(proposals), 2)
  end
  return {
    name = name,
    ahead = true,   -- a fixed order: the run may build the next ones early
    propose = function(self)
      self.i = (self.i or 0) + 1
      return proposals[self.i]
    end,
  }
end
