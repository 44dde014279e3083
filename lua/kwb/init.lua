-- kwb: the API that scripts and the REPL see as the global `kwb`.
-- Modules not loaded here load on first use: kwb.figures is require "kwb.figures".
local core = require "kwb.core"

local kwb = {
  version = core.version,
  cache_path = core.cache_path,
  host = require "kwb.host",
  pretty = require("kwb.pretty").format,
  sha256 = core.sha256,
  now = core.now,
  stats = core.stats,
  -- kwb.idea "try a 2-D register tile": an idea for the model's next prompt
  idea = function(text) require("kwb.strategies.prompt").idea(text) end,
}

local lazy = {}
for _, name in ipairs(core.bundled()) do
  local short = name:match("^kwb%.([%w_]+)$")
  if short then lazy[short] = name end
end
lazy.files = "kwb.base.files"   -- (kwb.files: the file helpers scripts use)

-- The names kwb answers to, loaded or not (the REPL completes them).
function kwb.names()
  local names = {}
  for k in pairs(kwb) do names[k] = true end
  for k in pairs(lazy) do names[k] = true end
  return names
end

return setmetatable(kwb, {
  __index = function(t, k)
    local name = lazy[k]
    if not name then return nil end
    local mod = require(name)
    rawset(t, k, mod)
    return mod
  end,
})
