-- kwb/strategies/llm_tune.lua: `llm+tune`: the model writes a template and
-- its parameter space, a tuner sweeps it inside a sub-budget, and the
-- sweep's best stands for the proposal (kwb/strategies/llm.lua, mode "template").
--
--   strategy = { "llm+tune", sweep = 12, tuner = "anneal" }
local llm = require "kwb.strategies.llm"

return setmetatable({ name = "llm+tune", mode = "template" }, { __index = llm })
