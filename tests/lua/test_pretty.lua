local t = require "t"

t.test("pretty_sorts_keys_and_keeps_array_order", function()
  t.eq(kwb.pretty { 3, 1, b = 2, a = "x", [10] = true }, '{ 3, 1, [10] = true, a = "x", b = 2 }')
end)

t.test("pretty_marks_cycles", function()
  local a = { name = "a" }
  a.self = a
  t.eq(kwb.pretty(a), '{ name = "a", self = <cycle> }')
end)

t.test("pretty_elides_long_tables", function()
  local big = {}
  for i = 1, 100 do big[i] = i end
  local s = kwb.pretty(big)
  t.truthy(s:find("... (60 more)", 1, true), s)
end)

t.test("pretty_breaks_wide_tables_into_lines", function()
  local s = kwb.pretty { alpha = string.rep("a", 40), beta = string.rep("b", 40), nested = { x = 1 } }
  t.eq(s, '{\n  alpha = "' .. string.rep("a", 40) .. '",\n  beta = "' .. string.rep("b", 40)
    .. '",\n  nested = { x = 1 }\n}')
end)

t.test("pretty_prints_floats_and_nan", function()
  t.eq(kwb.pretty { 1.0, 0.5, 0 / 0, math.huge }, "{ 1.0, 0.5, nan, inf }")
end)

t.done()
