-- tests/lua/test_modules.lua: the shape of lua/kwb. Its folders are layers,
-- and a module requires only modules of its own layer or of layers below
-- (lazy requires inside functions counted); the requires form no cycle; no
-- file is over 500 lines; every module the binary bundles is a file of the
-- tree.
local t = require "t"

local function files()
  local p = assert(io.popen("find lua/kwb -name '*.lua' | LC_ALL=C sort"))
  local out = {}
  for path in p:lines() do out[#out + 1] = path end
  p:close()
  return out
end

local function module_name(path)
  return (path:gsub("^lua/", ""):gsub("%.lua$", ""):gsub("/init$", ""):gsub("/", "."))
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- requires(text, modules) -> the kwb modules a source requires: literal
-- names, and every module under a literal prefix (require("kwb.measure.backends." .. name)).
local function requires(text, modules)
  local out = {}
  for name in text:gmatch("require%s*%(?%s*[\"']([%w_%.]+)[\"']") do out[name] = true end
  for prefix in text:gmatch("require%s*%(%s*[\"']([%w_%.]+%.)[\"']%s*%.%.") do
    for m in pairs(modules) do
      if m:sub(1, #prefix) == prefix then out[m] = true end
    end
  end
  return out
end

local graph, modules = {}, {}
for _, path in ipairs(files()) do modules[module_name(path)] = path end
for m, path in pairs(modules) do
  graph[m] = {}
  for dep in pairs(requires(read(path), modules)) do
    if modules[dep] and dep ~= m then graph[m][#graph[m] + 1] = dep end
  end
  table.sort(graph[m])
end

-- The first cycle found (a list of modules, first = last), or nil.
local function find_cycle(g)
  local state, stack = {}, {}
  local function visit(m)
    state[m] = "open"
    stack[#stack + 1] = m
    for _, d in ipairs(g[m] or {}) do
      if state[d] == "open" then
        local cyc, on = {}, false
        for _, x in ipairs(stack) do
          if x == d then on = true end
          if on then cyc[#cyc + 1] = x end
        end
        cyc[#cyc + 1] = d
        return cyc
      elseif not state[d] then
        local c = visit(d)
        if c then return c end
      end
    end
    stack[#stack] = nil
    state[m] = "done"
    return nil
  end
  local names = {}
  for m in pairs(g) do names[#names + 1] = m end
  table.sort(names)
  for _, m in ipairs(names) do
    if not state[m] then
      local c = visit(m)
      if c then return c end
    end
  end
  return nil
end

t.test("modules_walk_finds_the_requires_of_every_kind", function()
  local fake = { ["kwb.a"] = true, ["kwb.b"] = true, ["kwb.measure.backends.x"] = true, ["kwb.measure.backends.y"] = true }
  local got = requires('local a = require "kwb.a"\nlocal function f() return require("kwb.b").g end\n'
                       .. 'local ad = require("kwb.measure.backends." .. name)\n', fake)
  t.truthy(got["kwb.a"] and got["kwb.b"] and got["kwb.measure.backends.x"] and got["kwb.measure.backends.y"], "all four")
  t.eq(find_cycle { a = { "b" }, b = { "c" }, c = { "a" } } ~= nil, true, "a planted cycle is found")
  t.eq(table.concat(find_cycle { a = { "b" }, b = { "c" }, c = { "b" } }, " > "), "b > c > b")
end)

-- The layers, lowest first: each a list of folders (every module under
-- lua/kwb/NAME/) and single top-level modules (the public API's files).
-- A module may require its own layer's modules and any below it.
local LAYERS = {
  { "base" },                                                       -- no kwb module but kwb.core
  { "kwb.host", "kwb.cuda", "kwb.problem", "kwb.figures", "kwb.pretty" },   -- the public API's primitives
  { "problems" },
  { "measure" },                -- rules, build, inputs, verify, timing; the backends
  { "cache" },
  { "checks" },                 -- the sanitizer and profiles
  { "model" },                  -- the model and its providers
  { "strategies" },             -- proposing: strategies, prompt and reply
  { "help" },                   -- the commands' and fields' text
  { "runners" },                -- worker pools and the fleet's queue
  { "loop" },                   -- run, session, judge, store, the put-off sanitizer
  { "insight" },                -- the report and export
  { "recipe", "kwb.load", "kwb" },   -- the public API: recipes and the global kwb
  { "worker" },                 -- `kwb worker`: the process candidates run in
  { "cli" },                    -- one module a command
}

-- layer_of(module) -> its layer's index and name | nil
local function layer_of(m, layers)
  local folder = m:match("^kwb%.([%w_]+)%.") or m:match("^kwb%.([%w_]+)$")
  for i, layer in ipairs(layers) do
    for _, name in ipairs(layer) do
      if name == m then return i, name end
      if not name:find("%.") and name ~= "kwb" and folder == name
         and (m:find("^kwb%." .. name .. "%.") or modules[m] and modules[m]:find("/init%.lua$")) then
        return i, name
      end
    end
  end
end

-- upward(graph, layers) -> "a > b (layer x requires layer y)" for each require
-- that goes up, and the modules that are in no layer
local function upward(g, layers)
  local out = {}
  for m, deps in pairs(g) do
    local lm, nm = layer_of(m, layers)
    if not lm then out[#out + 1] = m .. " is in no layer"
    else
      for _, d in ipairs(deps) do
        local ld, nd = layer_of(d, layers)
        if ld and ld > lm then out[#out + 1] = string.format("%s > %s (%s requires %s, a layer above)", m, d, nm, nd) end
      end
    end
  end
  table.sort(out)
  return out
end

t.test("modules_each_module_is_in_a_layer_and_requires_none_above_it", function()
  t.eq(table.concat(upward(graph, LAYERS), "\n"), "", "upward requires")
end)

t.test("modules_a_planted_upward_require_is_found", function()
  -- the graph as it is, with one lazy require from the measure layer up to the loop
  local planted = {}
  for m, deps in pairs(graph) do planted[m] = deps end
  local src = read(modules["kwb.measure.verify"]) .. '\nlocal function f() return require("kwb.loop.store") end\n'
  local deps = {}
  for d in pairs(requires(src, modules)) do if modules[d] and d ~= "kwb.measure.verify" then deps[#deps + 1] = d end end
  table.sort(deps)
  planted["kwb.measure.verify"] = deps
  t.eq(table.concat(upward(planted, LAYERS), "\n"),
       "kwb.measure.verify > kwb.loop.store (measure requires loop, a layer above)")
  -- and a module of a folder no layer names
  planted["kwb.stray"] = {}
  t.eq(upward(planted, LAYERS)[2], "kwb.stray is in no layer")
end)

t.test("modules_no_lua_module_requires_one_that_requires_it_back", function()
  local cyc = find_cycle(graph)
  t.eq(cyc and table.concat(cyc, " > ") or nil, nil, "a require cycle")
end)

t.test("modules_no_file_in_lua_kwb_is_over_500_lines", function()
  local over = {}
  for _, path in ipairs(files()) do
    local n = select(2, read(path):gsub("\n", ""))
    if n > 500 then over[#over + 1] = path .. " (" .. n .. ")" end
  end
  t.eq(table.concat(over, ", "), "", "files over 500 lines")
end)

t.test("modules_the_loop_reaches_no_worker_task", function()
  -- what runs in a worker is required by nothing: the pool names it
  for m, deps in pairs(graph) do
    for _, d in ipairs(deps) do t.truthy(d ~= "kwb.worker.task", m .. " requires kwb.worker.task") end
  end
end)

-- "May this result be named a best or a shape's winner?" is answered in one
-- place, kwb.base.outcomes.may_be_best: its test of the sanitizer's mark
-- (sanitized == true) is written nowhere else, and every module that names a
-- best or a winner asks it.
t.test("modules_the_rule_of_what_may_be_named_a_best_is_written_once", function()
  local where = {}
  for _, path in ipairs(files()) do
    local text = read(path)
    if text:find("sanitized == true", 1, true) then where[#where + 1] = path end
    t.eq(text:find("function M.cleared", 1, true), nil, path .. " defines a rule of its own")
  end
  t.eq(table.concat(where, " "), "lua/kwb/base/outcomes.lua")
  for _, m in ipairs { "kwb.cache", "kwb.loop.session", "kwb.loop.sanitizer", "kwb.insight.export", "kwb.insight.report" } do
    t.truthy(read(modules[m]):find("outcomes.may_be_best(", 1, true), m .. " asks outcomes.may_be_best")
  end
end)

t.test("modules_bundled_are_the_tree_s_modules", function()
  local bundled = {}
  for _, name in ipairs(require("kwb.core").bundled()) do bundled[name] = true end
  for m in pairs(modules) do
    t.truthy(bundled[m], m .. " is bundled")
  end
  for m in pairs(bundled) do t.truthy(modules[m], m .. " is a file of lua/kwb") end
end)

t.done()
