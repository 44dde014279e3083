-- kwb/strategies/init.lua: where proposals come from. A strategy is a table with
-- propose(self, run) -> proposal [, { parent =, rationale = }] (nil: nothing
-- left) and, optionally, init(self, run) and observe(self, run, result,
-- fresh), and `ahead = true` when its proposals never depend on results (the
-- run may then ask early and build them ahead: kwb.loop.run's look_ahead); the
-- builtin ones live in kwb/strategies/, others are .lua files or tables in a
-- recipe. Every run gets a fresh instance.
local M = {}

M.builtin = { "grid", "random", "anneal", "genetic", "llm", "llm+tune", "agent" }

-- The module of a builtin name ("llm+tune" lives in llm_tune.lua).
function M.module(name)
  return "kwb.strategies." .. name:gsub("%+", "_")
end

-- Options a builtin strategy takes in the table form { "llm+tune", sweep = 8 }
-- (population: kwb.strategies.population's option, false for the best as every parent).
M.options = { llm = { population = "population" },
              ["llm+tune"] = { sweep = "integer", tuner = "strategy", population = "population" },
              agent = { turns = "integer" } }

-- The first strategy in spec (a checked one, a mix's members too) that asks
-- a model for proposals, or nil.
function M.needs_model(spec)
  if spec.members then
    for _, m in ipairs(spec.members) do
      if M.needs_model(m) then return M.needs_model(m) end
    end
    return nil
  end
  return spec.module and M.options[spec.name] and spec.name or nil
end

function M.option_names(name)
  local names = {}
  for n in pairs(M.options[name] or {}) do names[#names + 1] = n end
  table.sort(names)
  return names
end

-- Is name a builtin strategy or a .lua file?
function M.known(name)
  if type(name) ~= "string" then return false end
  if name:match("%.lua$") then return true end
  for _, n in ipairs(M.builtin) do
    if name == n then return true end
  end
  return false
end

function M.unknown_message(name)
  return string.format("unknown strategy '%s' (known: %s, or a .lua file)", tostring(name), table.concat(M.builtin, ", "))
end

-- load(spec) -> a fresh instance and its name. spec: a builtin name, a .lua
-- path, a table with propose, a recipe's checked strategy ({ name, module |
-- file | table, options } or { name = "mix", members = { checked, ... } }),
-- or nil (a run that measures the start kernel only).
function M.load(spec)
  if type(spec) == "table" and spec.members then
    local members = {}
    for i, m in ipairs(spec.members) do
      local inst, name = M.load(m)
      members[i] = { inst = inst, name = name }
    end
    local names = {}
    for i, m in ipairs(members) do names[i] = m.name end
    return setmetatable({}, { __index = require("kwb.strategies.mix")(members) }), "mix(" .. table.concat(names, ", ") .. ")"
  end
  if spec == nil then
    spec = { name = "none", table = { propose = function() return nil end } }
  end
  if type(spec) == "string" then
    local name = spec
    for _, n in ipairs(M.builtin) do
      if name == n then spec = { name = n, module = M.module(n) } end
    end
    if type(spec) == "string" then
      if name:match("%.lua$") then spec = { name = name:match("([^/]+)%.lua$"), file = name }
      else error(M.unknown_message(name), 0) end
    end
  elseif type(spec) == "table" and spec.propose then
    spec = { name = spec.name or "inline", table = spec }
  end
  local mod
  if spec.table then mod = spec.table
  elseif spec.module then mod = require(spec.module)
  else
    local chunk, err = loadfile(spec.file)
    if not chunk then error("strategy " .. spec.file .. ": " .. err, 0) end
    mod = chunk()
    if type(mod) ~= "table" or type(mod.propose) ~= "function" then
      error("strategy " .. spec.file .. " must return a table with propose(self, run)", 0)
    end
  end
  local inst = setmetatable({ options = spec.options }, { __index = mod })
  return inst, spec.name or mod.name or "inline"
end

return M
