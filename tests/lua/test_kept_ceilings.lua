-- tests/lua/test_kept_ceilings.lua: the device's ceilings measured once per
-- device kind (kwb.loop.ceilings): a run keeps what it measured with its
-- record, a later run of the same recipe on the same kind and build takes
-- them from there instead of measuring, and says whose they are; another
-- recipe `ceilings`, a run a bundle brought and values that are no ceilings
-- are never taken.
local t = require "t"
local core = require "kwb.core"
local kept = require "kwb.loop.ceilings"
local store = require "kwb.loop.store"
local cjson = require "cjson"

local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local db = tmp .. "/ceilings.db"

-- one run of the host recipe in a process of its own (the host probe is
-- measured once per process): its summary event
local function run_once()
  local r = assert(core.exec({ "./kwb", "--cache", db, "recipes/host_matmul.lua", "--json", "--budget", "1",
                               "--strategy", "grid" }, { timeout = 120 }))
  t.eq(r.status, 0, r.err)
  local sm
  for line in r.out:gmatch("[^\n]+") do
    local ok, e = pcall(cjson.decode, line)
    if ok and type(e) == "table" and e.event == "summary" then sm = e end
  end
  return t.truthy(sm, "a summary event in: " .. r.out)
end

local first, second = run_once(), run_once()

t.test("kept_ceilings_the_first_run_measures_and_the_second_reads_them", function()
  t.truthy(first.stages.ceilings > 0, "the first run measured: " .. tostring(first.stages.ceilings))
  t.eq(first.ceilings_from, nil)
  t.eq(second.stages.ceilings, 0, "the second run measured nothing")
  t.eq(second.ceilings_from, first.run, "the second run's are the first's")
end)

t.test("kept_ceilings_a_session_reads_the_values_the_first_run_measured", function()
  local st = store.open(db)
  local rec
  for _, run in ipairs(st:runs()) do if run.id:sub(1, #first.run) == first.run then rec = run end end
  local v = t.truthy(rec and rec.settings.ceilings, "the first run's record keeps its ceilings").values
  t.truthy(v.bandwidth > 0 and v.flops > 0 and v.measured_bandwidth * 1.2 == v.bandwidth, cjson.encode(v))
  local s = kwb.load("recipes/host_matmul.lua"):session { store = st }
  local c = s:ceilings()
  t.eq(s.ceilings_from, first.run)
  t.eq(s.ceilings_s, nil, "nothing measured")
  for _, k in ipairs { "bandwidth", "flops", "measured_bandwidth", "measured_flops" } do t.eq(c[k], v[k], k) end
  for _, run in ipairs(st:runs()) do
    if run.id:sub(1, #second.run) == second.run then t.eq(run.settings.ceilings, nil, "the second run kept none") end
  end
  st.cache:close()
end)

t.test("kept_ceilings_another_recipe_ceilings_a_bundles_run_or_unsound_values_are_not_taken", function()
  local st = store.open(tmp .. "/ceilings_keys.db")
  local r = kwb.load("recipes/host_matmul.lua")
  local s = r:session { store = st }
  local c = { bandwidth = 3e11, flops = 4e11, measured_bandwidth = 2.5e11, measured_flops = 3.5e11 }
  s:begin_run { seed = 1, recipe_file = "recipes/host_matmul.lua", settings = { imported = "elsewhere.kwbundle" } }
  kept.keep(s, c, 0.25)
  t.eq(kept.kept(s), nil, "a run a bundle brought")
  local rec = s:begin_run { seed = 2, recipe_file = "recipes/host_matmul.lua", settings = {} }
  kept.keep(s, c, 0.25)
  local got, from = kept.kept(s)
  t.eq(from, rec.short)
  t.eq(got.bandwidth, 3e11)
  r.ceilings = { bandwidth = 1e13 }
  t.eq(kept.kept(s), nil, "another recipe ceilings")
  r.ceilings = nil
  local key
  for _, run in ipairs(st:runs()) do if run.id == rec.id then key = run.settings.ceilings.key end end
  st.cache:amend_run(rec.id, { ceilings = { key = key, values = { bandwidth = -1, flops = 4e11 }, seconds = 0.25 } })
  t.eq(kept.kept(s), nil, "a negative bandwidth")
  st.cache:amend_run(rec.id, { ceilings = { key = key, values = { bandwidth = 3e11 }, seconds = 0.25 } })
  t.eq(kept.kept(s), nil, "no flops")
  st.cache:close()
end)

-- Ceilings kept low (measured on a loaded machine, say) would make every
-- kernel impossible from then on: a kernel under their floor has them
-- measured again in its run and is judged by those.
t.test("kept_ceilings_a_kernel_under_the_floor_of_kept_ceilings_has_them_measured_again", function()
  local st = store.open(db)
  local rec
  for _, run in ipairs(st:runs()) do if run.id:sub(1, #first.run) == first.run then rec = run end end
  local c = rec.settings.ceilings
  c.values = { bandwidth = 1e3, flops = 1e3, measured_bandwidth = 1e3 / 1.2, measured_flops = 1e3 / 1.2 }
  st.cache:amend_run(rec.id, { ceilings = c })
  st.cache:close()
  local third = run_once()
  t.eq(third.funnel.impossible, 0, "nothing impossible")
  t.eq(third.ceilings_from, nil, "measured again in the run")
  t.truthy(third.stages.ceilings > 0, "measured: " .. tostring(third.stages.ceilings))
end)

t.done()
