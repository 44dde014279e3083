-- tests/lua/json_run.lua: run a command that prints one JSON object a line
-- (`kwb RECIPE --json ...`) and read them all back, for the GPU tests
-- (tests/gpu/loop.lua, tests/gpu/kt_recipes.lua).
--
--   local ok, events, raw = require "json_run" ("./kwb recipes/x.lua --json 2>&1")
--
-- ok: its exit status as io.popen's close gives it; events: the lines that
-- decode to JSON objects; raw: every line.
local cjson = require "cjson"

return function(cmd)
  local p = io.popen(cmd)
  local events, raw = {}, {}
  for line in p:lines() do
    raw[#raw + 1] = line
    local ok, ev = pcall(cjson.decode, line)
    if ok and type(ev) == "table" then events[#events + 1] = ev end
  end
  return p:close(), events, raw
end
