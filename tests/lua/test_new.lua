-- tests/lua/test_new.lua: kwb new problem: the folder it writes runs as
-- written (its problem module required from beside the recipe), every
-- candidate of the template verified; files already there are kept.
local t = require "t"
local core = require "kwb.core"
local new = require "kwb.cli.new"
local store = require "kwb.loop.store"

local dir = t.readable_dir("new")   -- (its recipes are read by the workers)
assert(core.mkdirs(dir))

t.test("new_problem_writes_a_folder_that_runs_as_written", function()
  local written = new.problem("saxpy", dir .. "/saxpy")
  t.eq(table.concat(written, " "), "saxpy_problem.lua saxpy.lua saxpy_start.c saxpy_unrolled.c")
  local recipe = kwb.load(dir .. "/saxpy/saxpy.lua")
  t.eq(recipe.problem.name, "saxpy")
  t.eq(recipe.problem:prototype(), "void saxpy(int n, float a, const float *x, const float *b, float *y)")
  local _, run = recipe:run { mode = "quiet", store = store.open(dir .. "/kwb.db") }
  t.eq(run.session.start.outcome, "start")
  t.eq(#run.results, 3, "U = 2, 4, 8")
  for _, r in ipairs(run.results) do
    t.truthy(r.outcome == "accepted" or r.outcome == "slower", r.name .. ": " .. tostring(r.outcome))
  end
end)

t.test("new_problem_keeps_files_already_there", function()
  t.raises(function() new.problem("saxpy", dir .. "/saxpy") end, dir .. "/saxpy/saxpy_problem.lua is there already")
  t.raises(function() new.problem("2x", dir .. "/x") end, "a problem's name is a C identifier, not '2x'")
end)

t.done()
