-- tests/lua/test_modules.lua: the shape of lua/kwb. Every module's requires,
-- lazy ones inside functions included, form no cycle; no file is over 500
-- lines; every module the binary bundles is a file of the tree.
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
-- names, and every module under a literal prefix (require("kwb.backends." .. name)).
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
  local fake = { ["kwb.a"] = true, ["kwb.b"] = true, ["kwb.backends.x"] = true, ["kwb.backends.y"] = true }
  local got = requires('local a = require "kwb.a"\nlocal function f() return require("kwb.b").g end\n'
                       .. 'local ad = require("kwb.backends." .. name)\n', fake)
  t.truthy(got["kwb.a"] and got["kwb.b"] and got["kwb.backends.x"] and got["kwb.backends.y"], "all four")
  t.eq(find_cycle { a = { "b" }, b = { "c" }, c = { "a" } } ~= nil, true, "a planted cycle is found")
  t.eq(table.concat(find_cycle { a = { "b" }, b = { "c" }, c = { "b" } }, " > "), "b > c > b")
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
    for _, d in ipairs(deps) do t.truthy(d ~= "kwb.measure_task", m .. " requires kwb.measure_task") end
  end
end)

t.test("modules_bundled_are_the_tree_s_modules", function()
  local bundled = {}
  for _, name in ipairs(require("kwb.core").bundled()) do bundled[name] = true end
  for m in pairs(modules) do
    -- (kwb.ffi is LuaJIT's, installed beside libkwb.so, never bundled)
    if m == "kwb.ffi" then t.eq(bundled[m], nil, "kwb.ffi is not bundled")
    else t.truthy(bundled[m], m .. " is bundled") end
  end
  for m in pairs(bundled) do t.truthy(modules[m], m .. " is a file of lua/kwb") end
end)

t.done()
