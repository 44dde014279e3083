-- kwb/strategies/mix.lua: several strategies in turn, e.g. the model's
-- proposals between a tuner's: strategy = { "llm", "anneal" }. Each proposes
-- in its turn; one that has nothing left drops out; each sees the results
-- of its own proposals.
return function(members)
  return {
    name = "mix",
    init = function(self, run)
      self.members, self.turn, self.owner = {}, 0, {}
      for i, m in ipairs(members) do
        self.members[i] = m
        if m.inst.init then m.inst:init(run) end
      end
    end,
    propose = function(self, run)
      while #self.members > 0 do
        self.turn = self.turn % #self.members + 1
        local m = self.members[self.turn]
        local prop, meta = m.inst:propose(run)
        if prop ~= nil then
          self.owner[run:id(prop)] = m
          return prop, meta
        end
        table.remove(self.members, self.turn)
        self.turn = self.turn - 1
      end
      return nil
    end,
    observe = function(self, run, res, fresh)
      local m = self.owner[res.id]
      if m and m.inst.observe then m.inst:observe(run, res, fresh) end
    end,
  }
end
