-- tests/lua/test_shared_recipe.lua: a recipe that requires a module beside it
-- (tests/recipes/shared/: team.lua and its team_problem.lua) works wherever it
-- is loaded: by kwb.load from another folder (here tests/lua/'s script), and
-- in the worker that measures its candidates, which loads the file again.
local t = require "t"
local store = require "kwb.loop.store"

local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")

t.test("shared_a_recipe_requiring_a_module_beside_it_loads_by_kwb_load", function()
  local r = kwb.load "tests/recipes/shared/team.lua"
  t.eq(r.problem:key(), "team_twice")
  t.eq(r.returned_by, "tests/recipes/shared/team.lua", "a file a worker can load again")
end)

t.test("shared_its_candidates_are_measured_in_a_worker_that_loads_it_again", function()
  local r = kwb.load "tests/recipes/shared/team.lua"
  local path = tmp .. "/shared.db"
  local sm, run = r:run { mode = "quiet", store = store.open(path) }
  t.eq(#run.results, 1)
  local res = run.results[1]
  t.truthy(res.outcome == "accepted" or res.outcome == "slower", res.outcome .. ": " .. tostring(res.reason))
  t.eq(res.name, "unrolled.c")
  t.truthy(r:session().pool ~= nil or sm.funnel[res.outcome] == 1, "measured by the run")
end)

-- from the command line (which has the recipe's folder on its own search path) the worker,
-- another process, must find the module as well
t.test("shared_from_the_command_line_its_worker_finds_the_module_too", function()
  local core = require "kwb.core"
  local r = assert(core.exec({ "./kwb", "--cache", tmp .. "/shared_cli.db", "tests/recipes/shared/team.lua", "--json" },
                             { timeout = 120 }))
  t.eq(r.status, 0, (r.out or "") .. (r.err or ""))
  local outcome
  for l in r.out:gmatch("[^\n]+") do
    local e = require("cjson").decode(l)
    if e.event == "candidate" then outcome = e.outcome end
  end
  t.truthy(outcome == "accepted" or outcome == "slower", tostring(outcome) .. "\n" .. r.err)
end)

t.done()
