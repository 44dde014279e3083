-- tests/lua/test_constructors.lua: host candidates whose module constructors
-- attack the judge (tests/recipes/constructors.lua), run as `kwb RECIPE
-- --json` in its workers: each outcome exact, and the text a constructor
-- forged found nowhere: not in the reasons, the JSON output or the cache.
local t = require "t"
local cjson = require "cjson"

local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local db = dir .. "/constructors.db"
local p = io.popen(string.format("./kwb --cache %s tests/recipes/constructors.lua --json 2>%s/constructors.err", db, dir))
local json = p:read("a")
p:close()
local by = {}
for line in json:gmatch("[^\n]+") do
  local e = cjson.decode(line)
  if e.event == "candidate" then by[#by + 1] = e end
end

local function slurp(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end

t.test("constructors_every_candidate_is_judged", function()
  t.eq(#by, 5)
end)

t.test("constructor_reading_the_judges_cmdline_and_forging_a_failure_is_forbidden_at_openat", function()
  t.eq(by[1].outcome, "forbidden")
  t.eq(by[1].reason, "while its module loaded, the candidate made a system call openat (number 257), which the "
                     .. "sandbox does not allow")
end)

t.test("constructor_forged_text_is_nowhere", function()
  local mark = "FORGED-BY-CTOR"
  t.eq(json:find(mark, 1, true), nil, "the JSON output")
  for _, suffix in ipairs { "", "-wal" } do
    t.eq(slurp(db .. suffix):find(mark, 1, true), nil, "the cache" .. suffix)
  end
  t.eq(slurp(dir .. "/constructors.err"):find(mark, 1, true), nil, "the run's stderr")
end)

t.test("constructor_serving_the_protocol_itself_and_reading_the_judge_is_forbidden_at_openat", function()
  t.eq(by[2].outcome, "forbidden")
  t.eq(by[2].reason, "while its module loaded, the candidate made a system call openat (number 257), which the "
                     .. "sandbox does not allow")
end)

t.test("constructor_that_spins_is_timeout_at_the_recipes_limit", function()
  t.eq(by[3].outcome, "timeout")
  t.eq(by[3].reason, "while its module loaded, its initialisers ran past the timeout (the timeout is 2 s of CPU "
                     .. "time); its sandbox was killed")
  t.truthy(by[3].seconds < 30, string.format("%.1f s", by[3].seconds))
end)

t.test("constructor_honest_controls_are_verified", function()
  for i = 4, 5 do
    t.truthy(by[i].outcome == "accepted" or by[i].outcome == "slower", by[i].outcome .. ": " .. tostring(by[i].reason))
  end
end)

t.done()
