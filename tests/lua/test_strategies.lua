-- tests/lua/test_strategies.lua: the search strategies over a parameter
-- space, driven by a stand-in for a run (no compiler involved), and a
-- strategy given as a file.
local t = require "t"
local loop = require "kwb.loop"

local space = {
  dims = { { name = "A", values = { 1, 2, 3 } }, { name = "B", values = { 10, 20 } }, { name = "C", values = { 0, 1 } } },
  restrict = function(p) return not (p.A == 3 and p.B == 20) end,
}
local VALID = 10   -- 12 points, 2 of them restricted

local function key(p) return string.format("A%d B%d C%d", p.A, p.B, p.C) end

-- A run stand-in: what strategies may use (space, random, valid, known, best, history).
local function fake_run(known, history)
  return { space = space, random = loop.rng(1234), best = nil,
           valid = function(_, p) return space.restrict(p) end,
           known = function(_, p) return known[key(p)] ~= nil end,
           history = function() return history or {} end }
end

-- Drive a strategy to exhaustion; every proposal is "evaluated" (becomes known).
local function drive(name, known, score)
  local s = setmetatable({}, { __index = require("kwb.strategies." .. name) })
  local run = fake_run(known)
  if s.init then s:init(run) end
  local seen = {}
  for _ = 1, 100 do
    local p = s:propose(run)
    if not p then break end
    seen[#seen + 1] = key(p)
    known[key(p)] = true
    if s.observe then s:observe(run, { params = p, score = score and score(p) or 1, outcome = "slower" }, true) end
  end
  return seen
end

t.test("strategy_grid_walks_the_allowed_space_in_order", function()
  local seen = drive("grid", {})
  t.eq(#seen, VALID)
  t.eq(seen[1], "A1 B10 C0"); t.eq(seen[2], "A1 B10 C1"); t.eq(seen[3], "A1 B20 C0")
  t.eq(seen[VALID], "A3 B10 C1")
end)

t.test("strategy_grid_skips_what_the_cache_knows", function()
  local seen = drive("grid", { ["A1 B10 C0"] = true, ["A2 B20 C1"] = true })
  t.eq(#seen, VALID - 2)
  t.eq(seen[1], "A1 B10 C1")
end)

for _, name in ipairs { "random", "anneal", "genetic" } do
  t.test("strategy_" .. name .. "_proposes_every_allowed_point_once_then_stops", function()
    local known = { ["A2 B10 C0"] = true }
    local seen = drive(name, known, function(p) return p.A + p.B / 10 + p.C end)
    t.eq(#seen, VALID - 1)
    local once = {}
    for _, k in ipairs(seen) do
      t.eq(once[k], nil, k .. " proposed twice")
      once[k] = true
      t.truthy(k ~= "A3 B20 C0" and k ~= "A3 B20 C1", "restricted point " .. k)
      t.truthy(k ~= "A2 B10 C0", "known point " .. k)
    end
  end)
end

t.test("strategy_random_order_is_reproducible_from_the_seed", function()
  local a = drive("random", {})
  local b = drive("random", {})
  t.eq(table.concat(a, ","), table.concat(b, ","), "same seed, same order")
  t.truthy(table.concat(a, ",") ~= table.concat(drive("grid", {}), ","), "not grid order")
end)

t.test("strategy_anneal_climbs_from_the_best_known_point", function()
  local s = setmetatable({}, { __index = require "kwb.strategies.anneal" })
  local run = fake_run({})
  run.best = { params = { A = 1, B = 10, C = 0 }, score = 1 }
  s:init(run)
  local p = s:propose(run)
  local d = math.abs(p.A - 1) + math.abs(p.B - 10) / 10 + math.abs(p.C)
  t.eq(d, 1, "a neighbour differs in one parameter by one place")
end)

t.test("strategy_anneal_begins_at_the_spaces_start_when_the_cache_knows_no_better", function()
  local s = setmetatable({}, { __index = require "kwb.strategies.anneal" })
  local sp = setmetatable({ start = { A = 2, B = 20, C = 1 } }, { __index = space })
  local run = fake_run({})
  run.space = sp
  s:init(run)
  t.eq(key(s:propose(run)), "A2 B20 C1")
  s:observe(run, { score = 2 })
  local p = s:propose(run)
  local d = math.abs(p.A - 2) + math.abs(p.B - 20) / 10 + math.abs(p.C - 1)
  t.eq(d, 1, "then a neighbour of the start")
  -- a start the cache already knows is not proposed again
  local s2 = setmetatable({}, { __index = require "kwb.strategies.anneal" })
  local run2 = fake_run({ ["A2 B20 C1"] = true })
  run2.space = sp
  s2:init(run2)
  t.truthy(key(s2:propose(run2)) ~= "A2 B20 C1", "a fresh point instead")
end)

t.test("strategy_file_named_by_a_run_option", function()
  local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
  local path = dir .. "/one_point.lua"
  local f = assert(io.open(path, "w"))
  f:write("return { name = 'one', propose = function(self, run)\n",
          "  if self.done then return nil end\n  self.done = true\n",
          "  return { BM = 8, BN = 16, BK = 8 }\nend }\n")
  f:close()
  local r = kwb.recipe {
    name = "strategy_file", problem = "matmul", shapes = { n = { 16 } },
    start = "../../kernels/host/matmul_naive.c", template = "../../kernels/host/matmul_tiled.c",
    space = { BM = { 8 }, BN = { 16 }, BK = { 8 } }, flags = { "-O2" },
    timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 },
  }
  local sm, run = r:run { mode = "quiet", strategy = path, store = require("kwb.loop.store").open(dir .. "/strategy.db") }
  t.eq(sm.strategy, "one_point")
  t.eq(sm.candidates, 1)
  t.eq(run.results[1].params.BN, 16)
  t.raises(function() r:run { mode = "quiet", strategy = "simplex" } end,
           "unknown strategy 'simplex' (known: grid, random, anneal, genetic, llm, llm+tune, agent, or a .lua file)")
end)

t.test("strategies_list_proposes_its_list_in_order_then_nothing", function()
  local list = require "kwb.strategies.list"
  local st = list({ { A = 1 }, { file = "x.c" } }, "replay")
  t.eq(st.name, "replay")
  local inst = setmetatable({}, { __index = st })      -- as the loop makes one per run
  t.eq(inst:propose().A, 1)
  t.eq(inst:propose().file, "x.c")
  t.eq(inst:propose(), nil)
  t.eq(setmetatable({}, { __index = st }):propose().A, 1, "a new run starts from the first")
  t.raises(function() list("nope") end, "kwb.strategies.list: expected a list of proposals, got string")
end)

t.done()
