-- kwb/cli/show.lua: help(x) at the REPL (and kwb.cli.show.text(x) in
-- scripts), read from the one description (kwb/help/init.lua, kwb/help/api.lua):
--   help()                    what help knows
--   help(kwb.host.time)       a function of kwb's, by the value itself
--   help "kwb.host.time"      the same by name; help "time": every *.time
--   help(kwb.host)            a module's functions; help(buf): a buffer's methods
--   help "recipe"             the recipe fields and a recipe's methods
--   help "kwb export"         a command (help "run": the run options)
local help = require "kwb.help"
local api = require "kwb.help.api"

local M = {}

-- The groups (modules and receivers) in the order help_api lists them.
local groups, by_name, of_group = {}, {}, {}
for _, e in ipairs(api) do
  local g = e[1]:match("^(.*)[%.:][^%.:]+$") or e[1]
  if g == "kwb.recipe" then g = "kwb" end
  if not of_group[g] then of_group[g] = {}; groups[#groups + 1] = g end
  table.insert(of_group[g], e)
  by_name[e[1]] = e
end

-- The entry of each function value kwb's modules hold, made on first use
-- (it loads the modules the entries name).
local by_value
local function values()
  if by_value then return by_value end
  by_value = {}
  for _, e in ipairs(api) do
    if e[1]:match("^kwb%.") then
      local v = _G
      for part in e[1]:gmatch("[^%.]+") do
        local ok, nv = pcall(function() return v[part] end)
        v = ok and (type(nv) == "table" or type(nv) == "function") and nv or nil
        if not v then break end
      end
      if type(v) == "function" and not by_value[v] then by_value[v] = e end
    end
  end
  return by_value
end

-- signature(f) -> the signature of one of kwb's functions, or nil (the REPL
-- prints a known function as its signature).
function M.signature(f)
  local e = type(f) == "function" and values()[f]
  return e and e[2] or nil
end

local function entry_text(e)
  local out = { e[2] }
  for _, l in ipairs(help.wrap(e[3], 80, "  ")) do out[#out + 1] = l end
  return table.concat(out, "\n")
end

local function group_text(g, title)
  local out = { title or (g .. ":") }
  for _, e in ipairs(of_group[g]) do out[#out + 1] = "  " .. e[2] end
  out[#out + 1] = string.format("help \"%s\" for one of them", of_group[g][1][1])
  return table.concat(out, "\n")
end

local function fields_text()
  local out = { "recipe fields (kwb.recipe { ... }):" }
  for _, f in ipairs(help.recipe_fields) do
    local body = help.wrap(f[2], 80, string.rep(" ", 17))
    body[1] = string.format("  %-14s %s", f[1], body[1]:sub(18))
    for _, l in ipairs(body) do out[#out + 1] = l end
  end
  return table.concat(out, "\n")
end

local function run_text()
  local out = { "run options (kwb FILE.lua [run options]):" }
  for _, o in ipairs(help.run_options) do out[#out + 1] = string.format("  %-14s %s", o[1], o[2]) end
  return table.concat(out, "\n")
end

-- The receiver an object's methods are listed under: the one whose every
-- method the object has.
local function receiver(v)
  if require("kwb.recipe").is_recipe(v) then return "recipe" end
  if require("kwb.problem").is_problem(v) then return "problem" end
  local best, best_n
  for _, g in ipairs(groups) do
    if not g:match("^kwb") then
      local n, all = 0, true
      for _, e in ipairs(of_group[g]) do
        local m = e[1]:match(":(.*)$")
        local ok, x = pcall(function() return v[m] end)
        if ok and x ~= nil then n = n + 1 else all = false end
      end
      if all and (not best_n or n > best_n) then best, best_n = g, n end
    end
  end
  return best
end

local function overview()
  local gs = {}
  for _, g in ipairs(groups) do gs[#gs + 1] = g end
  local cmds = {}
  for _, c in ipairs(help.commands) do cmds[#cmds + 1] = c.name end
  return table.concat({
    "help(x): x a function of kwb's (help(kwb.host.time)), a module (help(kwb.cuda)), an object",
    "(help(buf)), or a name: help \"kwb.cache.open\", help \"time\" (every *.time), help \"recipe\" (its",
    "fields and methods), help \"run\" (the run options), help \"kwb export\" (a command).",
    "groups: " .. table.concat(gs, ", "),
    "commands: " .. table.concat(cmds, ", ") .. " (kwb NAME --help on the command line)",
  }, "\n")
end

-- text(x) -> the help for x, or nil, why
function M.text(x)
  if x == nil then return overview() end
  if type(x) == "function" then
    local e = values()[x]
    if e then return entry_text(e) end
    return nil, "no help for this function: it is not one of kwb's (help() lists what there is)"
  end
  if type(x) == "table" or type(x) == "userdata" then
    if x == rawget(_G, "kwb") then return group_text("kwb") end
    for _, g in ipairs(groups) do
      if g:match("^kwb%.") and rawget(kwb, g:sub(5)) == x then return group_text(g) end
    end
    local r = receiver(x)
    if r == "recipe" then return fields_text() .. "\n" .. group_text("recipe", "recipe methods:") end
    if r then return group_text(r, r .. " methods:") end
    return nil, "no help for this " .. type(x) .. " (help() lists what there is)"
  end
  if type(x) ~= "string" then return nil, "help takes a function, a module, an object or a name, not a " .. type(x) end
  local name = x:gsub("^%s+", ""):gsub("%s+$", "")
  if by_name[name] then return entry_text(by_name[name]) end
  if name == "recipe" or name == "fields" then
    return fields_text() .. "\n" .. group_text("recipe", "recipe methods:")
  end
  if name == "run" then return run_text() end
  local cmd = name:match("^kwb%s+(%S+)$") or (not of_group[name] and name)
  if cmd and help.command(cmd) then return (help.command_help(cmd):gsub("\n$", "")) end
  if of_group[name] then return group_text(name) end
  local found = {}
  for _, e in ipairs(api) do
    if e[1]:match("[%.:]" .. name:gsub("%p", "%%%0") .. "$") then found[#found + 1] = entry_text(e) end
  end
  if #found > 0 then return table.concat(found, "\n\n") end
  return nil, string.format("no help for '%s' (help() lists what there is)", name)
end

-- show(x): print the help for x (help(x) at the REPL)
function M.show(x)
  local text, why = M.text(x)
  print(text or why)
end

return setmetatable(M, { __call = function(_, x) return M.show(x) end })
