-- tests/lua/run_json.lua: run a kwb command that prints JSON events (a
-- recipe run with --json) and take its summary, for the benches that compare
-- runs (tests/bench/workers_bench.lua, queue_bench.lua, tests/gpu/multi_gpu.lua).
--   local summary, wall = require("run_json").summary(cmd)   -- raises without a summary
local core = require "kwb.core"

local M = {}

function M.summary(cmd)
  local t0 = core.now()
  local p = assert(io.popen(cmd))
  local summary
  for line in p:lines() do
    if line:find('"event":"summary"', 1, true) then summary = require("cjson").decode(line) end
  end
  p:close()
  local wall = core.now() - t0
  if not summary then error("no summary from: " .. cmd) end
  return summary, wall
end

return M
