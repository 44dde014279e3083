-- tests/lua/test_backend.lua: the backend contract (kwb/measure/backends/init.lua): every
-- adapter gives every function the loop calls, a missing one is named when
-- the adapter is loaded, and the shared build takes its steps in order.
local t = require "t"
local backend = require "kwb.measure.backends"

t.test("backend_every_adapter_meets_the_contract", function()
  for _, name in ipairs { "host", "cuda" } do
    local a = backend.load(name)
    t.eq(a.name, name)
    for _, f in ipairs(backend.functions) do t.eq(type(a[f]), "function", name .. "." .. f) end
  end
end)

t.test("backend_a_missing_function_is_named", function()
  local partial = {}
  for k, v in pairs(require "kwb.measure.backends.host") do partial[k] = v end
  partial.time = nil
  t.raises(function() backend.check(partial, "host") end, "backend host: the adapter has no function time")
  t.raises(function() backend.load("tpu") end, "the loop has no tpu backend in this build")
end)

-- A fake adapter that records the build's steps and stops where told.
local function fake(stop)
  local steps = {}
  local a = { name = "fake", error_line = "[^\n]*error:[^\n]*" }
  for _, f in ipairs(backend.functions) do a[f] = function() error("not a build step: " .. f) end end
  function a.view() steps[#steps + 1] = "view"; if stop == "view" then return nil, "no view", { log = "v" } end return {} end
  function a.check_view() steps[#steps + 1] = "check_view"; return stop == "check_view" and { rule = "r", message = "m" } or nil end
  function a.compile() steps[#steps + 1] = "compile"
    if stop == "compile" then return nil, "cc failed", { log = "x.c:1:2: error: nope\nmore" } end
    return {}
  end
  function a.check_built() steps[#steps + 1] = "check_built"; return stop == "check_built" and { rule = "s", message = "m2" } or nil end
  function a.entry() steps[#steps + 1] = "entry"; if stop == "entry" then return nil, "no entry" end return "kernel" end
  return backend.check(a, "fake"), steps
end

t.test("backend_build_takes_its_steps_in_order_and_names_the_outcome", function()
  local recipe = { rules = require("kwb.measure.rules").set { "default" } }
  local cand = { source = "void f(void) {}\n" }
  local cases = {
    { nil, "kernel", nil, "view check_view compile check_built entry" },
    { "view", nil, "compile-error", "view" },
    { "check_view", nil, "forbidden", "view check_view" },
    { "compile", nil, "compile-error", "view check_view compile" },
    { "check_built", nil, "forbidden", "view check_view compile check_built" },
    { "entry", nil, "compile-error", "view check_view compile check_built entry" },
  }
  for _, c in ipairs(cases) do
    local a, steps = fake(c[1])
    local res = { seconds = {} }
    local k = backend.build(a, cand, recipe, "void f(void)", res)
    t.eq(k, c[2], "kernel when stopping at " .. tostring(c[1]))
    t.eq(res.outcome, c[3], "outcome when stopping at " .. tostring(c[1]))
    t.eq(table.concat(steps, " "), c[4], "steps when stopping at " .. tostring(c[1]))
  end
  local a = fake("compile")
  local res = { seconds = {} }
  backend.build(a, cand, recipe, "void f(void)", res)
  t.eq(res.reason, "cc failed: x.c:1:2: error: nope", "the compile log's first error line")
  t.eq(type(res.seconds.build), "number", "the build's time")
  local hit = { seconds = {} }
  backend.build(fake(nil), { source = "int f(void) { return clock_gettime(0, 0); }\n" }, recipe, "int f(void)", hit)
  t.eq(hit.outcome, "forbidden"); t.eq(hit.rule, "timer")
end)

t.done()
