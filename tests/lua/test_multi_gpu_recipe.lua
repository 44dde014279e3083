-- tests/lua/test_multi_gpu_recipe.lua: the fixed candidate list that
-- tests/gpu/multi_gpu.lua runs on 1 and 2 GPUs, without a GPU: the recipe
-- loads, proposes its 32 parameter sets in order and then stops, every one
-- inside the template's limits, and the script reads without error.
local t = require "t"

local r = kwb.load("tests/gpu/matmul_fixed.lua")

t.test("multi_gpu_recipe_proposes_a_fixed_list_of_32", function()
  t.eq(r.budget.candidates, 32)
  t.eq(r.race, false, "every shape fully timed in both runs")
  local st, seen = {}, {}
  for i = 1, 32 do
    local p = r.strategy.table.propose(st)
    t.truthy(p, "proposal " .. i)
    local key = string.format("%d/%d/%d/%d/%d", p.BM, p.BN, p.BK, p.TM, p.TN)
    t.eq(seen[key], nil, "distinct: " .. key)
    seen[key] = true
    local threads = (p.BM // p.TM) * (p.BN // p.TN)
    t.truthy(threads >= 64 and threads <= 1024, key .. " has " .. threads .. " threads")
    t.truthy(4 * p.BK * (p.BM + p.BN + 8) <= 48 * 1024, key .. " fits 48 KiB of shared memory")
  end
  t.eq(r.strategy.table.propose(st), nil, "then nothing")
end)

t.test("multi_gpu_script_compiles", function()
  t.truthy(loadfile("tests/gpu/multi_gpu.lua"))
end)

t.done()
