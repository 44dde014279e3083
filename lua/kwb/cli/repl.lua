-- kwb/cli/repl.lua: the Lua half of the REPL: banner, printing results, Tab completion.
local pretty = require "kwb.pretty"

local M = {}

-- banner(cache): the REPL's first line; the REPL starts here, so this is
-- where its global help (kwb.cli.show) is set.
function M.banner(cache)
  if rawget(_G, "help") == nil then rawset(_G, "help", require "kwb.cli.show") end
  return string.format("kwb %s · %s · cache %s", kwb and kwb.version or "?", _VERSION, cache)
end

-- show(...): the values of a bare expression, tab-separated, or a line
-- apart where one of them takes several lines (a run's summary and the
-- run); one of kwb's functions prints as its signature (help(f) says
-- more), not as function: 0x...
function M.show(...)
  local out, lines = {}, false
  for i = 1, select("#", ...) do
    local v = (select(i, ...))
    local sig = type(v) == "function" and require("kwb.cli.show").signature(v)
    out[i] = sig and ("function " .. sig) or pretty.format(v)
    lines = lines or out[i]:find("\n", 1, true) ~= nil
  end
  print(table.concat(out, lines and "\n" or "\t"))
end

local keywords = {
  "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
  "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
}

-- The names a value offers after '.' or ':': its keys, the keys of its
-- __index table, and for kwb the modules that load on first use.
local function names_of(v)
  local names = {}
  if type(v) == "table" then
    for k in pairs(v) do names[k] = true end
    if v == rawget(_G, "kwb") and v.names then
      for k in pairs(v.names()) do names[k] = true end
    end
  end
  local mt = getmetatable(v)
  if type(mt) == "table" then
    local idx = rawget(mt, "__index")
    if type(idx) == "table" then for k in pairs(idx) do names[k] = true end end
    if type(rawget(mt, "methods")) == "table" then for k in pairs(mt.methods) do names[k] = true end end
  end
  return names
end

-- complete("kwb.ho") -> { "kwb.host" }: candidates for the word before the cursor.
function M.complete(word)
  local path, sep, prefix = word:match("^(.-)([%.:])([%w_]*)$")
  local names, base = {}, ""
  if path then
    local v = _G
    for part in path:gmatch("[^%.:]+") do
      if type(v) ~= "table" and type(v) ~= "userdata" then return {} end
      local ok, nv = pcall(function() return v[part] end)
      if not ok or nv == nil then return {} end
      v = nv
    end
    names = names_of(v)
    base = path .. sep
  else
    prefix = word
    names = names_of(_G)
    for _, k in ipairs(keywords) do names[k] = true end
  end
  local out = {}
  for k in pairs(names) do
    if type(k) == "string" and k:match("^[%a_][%w_]*$") and k:sub(1, #prefix) == prefix then
      out[#out + 1] = base .. k
    end
  end
  table.sort(out)
  return out
end

return M
