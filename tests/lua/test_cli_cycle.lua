-- tests/lua/test_cli_cycle.lua: no command leaves a cache a run cannot use.
-- After a host run (tests/recipes/planted.lua), every command of the CLI is
-- run on the start kernel's id, the best's id and an id the cache does not
-- know: the cache commands, --retime (try of a cached candidate), report,
-- export and profile (on the host: refused). Each answers as pinned below,
-- and a run of the recipe afterwards succeeds from the same start kernel,
-- with the cache sound. A start kernel's rows as an older build's --retime
-- left them (measured as a candidate, "slower") are measured again as the
-- start, and a cache check --repair after leaves it sound.
local t = require "t"
local core = require "kwb.core"

local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local db = tmp .. "/cycle.db"
os.remove(db)
local recipe = "tests/recipes/planted.lua"

local function kwb_(...)
  local r = assert(core.exec({ "./kwb", "--cache", db, ... }, { timeout = 120 }))
  return r.status, r.out, r.err
end

local function run_recipe()
  local status, out, err = kwb_(recipe, "--json")
  t.eq(status, 0, err)
  local sm = require("cjson").decode(out:match("([^\n]+)\n?$"))
  t.eq(sm.event, "summary")
  return sm
end

local first = run_recipe()
local start, best, unknown = first.start.id:sub(1, 8), first.best.id:sub(1, 8), "deadbeef"
local none = "no candidate deadbeef in the cache " .. db

t.test("cli_cycle_every_command_on_the_start_the_best_and_an_unknown_id", function()
  t.truthy(start ~= best, "the run found a best beside the start kernel")
  for _, id in ipairs { start, best, unknown } do
    local known = id ~= unknown
    local function answers(what, status, out, err, want_out)
      if known then
        t.eq(status, 0, what .. ": " .. err)
        if want_out then t.truthy(out:find(want_out, 1, true), what .. ": " .. out) end
      else
        t.eq(status, 1, what)
        t.truthy(err:find(none, 1, true), what .. ": " .. err)
      end
    end
    local s, o, e = kwb_("cache", "show", id)
    answers("cache show", s, o, e, "candidate  " .. id)
    s, o, e = kwb_("cache", "diff", start, id)
    answers("cache diff", s, o, e)
    s, o, e = kwb_("cache", "export", tmp .. "/cycle_" .. id .. ".kwb", "--id", id)
    answers("cache export", s, o, e, "wrote " .. tmp .. "/cycle_" .. id .. ".kwb: 1 candidate")
    if known then
      s, o, e = kwb_("cache", "import", tmp .. "/cycle_" .. id .. ".kwb")
      t.eq(s, 0, e)
      t.truthy(o:find("0 candidates, 0 builds, 0 results, 0 runs new", 1, true), o)
    end
    s, o, e = kwb_(recipe, "--retime", id, "--quiet")
    if known then
      t.eq(s, 0, e)
      t.truthy(o:find(id .. " try: " .. (id == start and "start" or "accepted"), 1, true), o)
    else
      t.eq(s, 1)
      t.eq(e, "kwb: planted_matmul: " .. none .. "\n")
    end
    s, o, e = kwb_("profile", id, "--recipe", recipe)
    t.eq(s, 1, "profile on the host")
    t.eq(e, "kwb profile: recipe planted_matmul: a profile is ncu's, for the cuda backend\n")
  end
  for _, args in ipairs { { "cache", "ls" }, { "cache", "ls", "matmul" }, { "cache", "best", "matmul" },
                          { "cache", "transcripts" }, { "cache", "stats" }, { "cache", "gc" },
                          { "report", recipe, tmp .. "/cycle_report" }, { "export", recipe, tmp .. "/cycle_export" } } do
    local s, _, e = kwb_(table.unpack(args))
    t.eq(s, 0, table.concat(args, " ") .. ": " .. e)
  end
  local s, o = kwb_("cache", "check")
  t.eq(s, 0, o)
  t.truthy(o:find(": all sound\n$"), o)
  local again = run_recipe()
  t.eq(again.start.id, first.start.id, "the same start kernel")
  t.eq(again.best.id, first.best.id, "the same pick")
end)

t.test("cli_cycle_a_start_kernel_retimed_by_an_older_build_is_measured_again_as_the_start", function()
  local c = require("kwb.cache").open(db)
  c:exec("UPDATE result SET outcome = 'slower', verify = json_set(verify, '$.outcome', 'slower') WHERE candidate = ?1",
         first.start.id)
  c:close()
  local sm = run_recipe()
  t.eq(sm.start.id, first.start.id)
  c = require("kwb.cache").open(db)
  local outs = {}
  for _, r in ipairs(c:results(first.start.id)) do outs[#outs + 1] = r.outcome end
  c:close()
  t.eq(table.concat(outs, " "), "start start")
  local s, o = kwb_("cache", "check", "--repair")
  t.eq(s, 0, o)
  t.truthy(o:find(": all sound\n$"), o)
end)

t.done()
