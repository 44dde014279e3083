-- tests/lua/test_imported.lua: a result a bundle brought is no measurement
-- of this machine's. A consistent forged bundle (one candidate's times
-- divided by 3, its score tripled, every hash recomputed) imports, and then:
-- the next run measures its start kernel here, races and judges later honest
-- candidates against real times only, names no unmeasured import its best,
-- measures the forged candidate afresh where it is proposed again; kwb
-- export ships none and kwb cache best shows it on a line of its own, marked
-- with its bundle. A recipe with trust_imported = true takes imports as
-- measurements (the forgery then wins: what trusting means).
local t = require "t"
local core = require "kwb.core"
local cache_mod = require "kwb.cache"
local store = require "kwb.loop.store"
local export = require "kwb.insight.export"
local matmul = require "kwb.problems.matmul"

local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$") .. "/imported"
os.execute("rm -rf '" .. dir .. "'")
assert(core.mkdirs(dir))

local T1 = { BM = 32, BN = 64, BK = 32, UNROLL = 4 }   -- the candidate the bundle forges
local T2 = { BM = 32, BN = 32, BK = 32, UNROLL = 4 }   -- an honest one of about its speed

local function recipe(list, extra)
  local spec = { name = "imported_matmul", problem = matmul {}, shapes = { n = { 64, 128 } },
                 start = "../../kernels/host/matmul_naive.c", template = "../../kernels/host/matmul_tiled.c",
                 strategy = require("kwb.strategies.list")(list, "list"), flags = { "-O3" },
                 budget = { candidates = 10, minutes = 2, timeout = 2 },
                 timing = { warmup = 0.002, min_samples = 5, cap = 0.03, target = 0.05 }, seed = 5 }
  for k, v in pairs(extra or {}) do spec[k] = v end
  return kwb.recipe(spec)
end

local function fresh_store(name)
  return store.open(dir .. "/" .. name .. ".db")
end

-- A run in cache A: the start kernel and T1, both measured there.
local a = fresh_store("a")
local ra = recipe { T1 }
local _, run_a = ra:run { mode = "quiet", store = a }
local t1 = run_a.results[1]
t.test("imported_the_honest_run_accepts_t1", function()
  t.eq(t1.outcome, "accepted")
end)

-- The forgery: A's bundle with T1's times divided by 3 and its score tripled,
-- written again by kwb's own writer (every entry's hash and the file's right).
local forged = dir .. "/forged.kwb"
local function forge()
  local plain = dir .. "/plain.kwb"
  assert(a.cache:export(plain, {}))
  local b = assert(core.cache_bundle_open(plain))
  local records, blobs = {}, b:blobs()
  local manifest = b:manifest()
  for i, rec in ipairs(b:records()) do
    local row = require("cjson").decode(rec.json)
    if rec.table == "result" and row.candidate == t1.id then
      local timing, verify = require("cjson").decode(row.timing), require("cjson").decode(row.verify)
      for _, k in ipairs { "median", "min", "p10", "p90", "ci_lo", "ci_hi", "mean", "max" } do
        if timing[k] then timing[k] = timing[k] / 3 end
      end
      for _, k in ipairs { "gbs", "gflops", "speedup" } do
        if timing[k] then timing[k] = timing[k] * 3 end
      end
      if timing.floor_frac then timing.floor_frac = timing.floor_frac * 3 end
      verify.score = verify.score * 3
      row.timing, row.verify, row.median = cache_mod.json(timing), cache_mod.json(verify), timing.median
    end
    records[i] = { table = rec.table, json = cache_mod.json(row) }
  end
  b:close()
  assert(a.cache.db:export(forged, manifest, records, blobs))
end
forge()

local median = {}   -- T1's forged medians by shape
for _, r in ipairs(a.cache:results(t1.id)) do median[r.shape] = r.timing.median / 3 end

t.test("imported_the_forged_bundle_imports", function()
  local b = fresh_store("b")
  local n = assert(b.cache:import(forged))
  t.eq(n.results, 4, "the start kernel's and T1's results at two shapes")
  local row = b.cache:results(t1.id)[1]
  t.eq(row.timing.median, median[row.shape], "T1's forged time")
  t.eq(row.verify.imported, "forged.kwb")
end)

-- Cache B imports the forgery, then runs T2: judged against the start
-- kernel measured here, not raced out against the forged times.
local b = fresh_store("b")
local rb = recipe { T2, T1 }
local sm_b, run_b = rb:run { mode = "quiet", store = b }
local s = run_b.session
local t2, t1b = run_b.results[1], run_b.results[2]

t.test("imported_the_next_run_measures_its_start_kernel_here", function()
  t.eq(sm_b.known, 0, "nothing taken from the cache")
  t.eq(b:known(s.ctx, s.start.id).imported, nil, "the start kernel's result is this machine's now")
end)

t.test("imported_a_later_honest_candidate_is_judged_against_real_times", function()
  t.eq(t2.outcome, "accepted")
  t.eq(s.best.id, t1b.outcome == "accepted" and t1b.id or t2.id, "the best is one measured here")
  for _, sh in ipairs(rb.shapes) do
    local real = math.min(s.start.shapes[sh.key].median, t2.shapes[sh.key].median, t1b.shapes[sh.key].median)
    t.eq(s.standings.best_time[sh.key], real, "the race bar at " .. sh.key .. " is a time measured here")
  end
end)

t.test("imported_the_forged_candidate_proposed_again_is_measured_here", function()
  t.truthy(t1b.seconds.time, "timed in this run")
  t.truthy(t1b.outcome == "accepted" or t1b.outcome == "slower", t1b.outcome)
  for _, r in ipairs(b.cache:results(t1.id)) do
    t.eq(r.verify.imported, nil, "the bundle's row replaced by this machine's at " .. r.shape)
    t.truthy(r.timing.median > 2 * median[r.shape], string.format("a real time at %s: %g, the forged %g", r.shape,
                                                                   r.timing.median, median[r.shape]))
  end
end)

-- A cache that imported the forgery and measured nothing of T1: kwb export
-- ships T2 (measured here), never the forged T1; cache best lists T1 apart,
-- marked with its bundle.
t.test("imported_export_and_cache_best_do_not_take_an_unmeasured_import", function()
  local c = fresh_store("c")
  assert(c.cache:import(forged))
  local rc = recipe { T2 }
  local _, run_c = rc:run { mode = "quiet", store = c }
  local t2c = run_c.results[1]
  t.eq(t2c.outcome, "accepted")
  local device = run_c.session.ctx.device
  local plan = export.plan(rc, c:results(c:recipe_context(rc, device)))
  t.eq(plan[2].key, "n=128")
  t.eq(plan[2].kernel.id, t2c.id, "T2, measured here, at n=128")
  for _, ch in ipairs(plan) do
    t.truthy(not ch.kernel or ch.kernel.id ~= t1.id, "never the forged T1, at " .. ch.key)
    t.truthy(ch.start.id == run_c.session.start.id, "the start kernel measured here")
  end
  local _, away = export.export(rc, dir .. "/dispatch", { store = c, device = device })
  t.eq(away, 1, "T1 left out (the start kernel was measured here since)")
  local rows = c.cache:best(rc.problem:key(), { shape = "n=128", device = device })
  t.eq(#rows, 2)
  t.eq(rows[1].candidate, t1.id, "the forged T1 first: faster on paper")
  t.eq(rows[1].imported, "forged.kwb")
  t.eq(rows[1].median, median["n=128"])
  t.eq(rows[2].candidate, t2c.id, "the best measured here")
  t.eq(rows[2].imported, nil)
  local out = io.popen("./kwb --cache '" .. dir .. "/c.db' cache best " .. rc.problem:key() .. " --shape n=128 2>&1"):read("a")
  t.truthy(out:find(t1.id:sub(1, 8) .. "  .-accepted  bundle forged%.kwb\n"), out)
  t.truthy(out:find(t2c.id:sub(1, 8) .. "  .-accepted  here\n"), out)
end)

-- kwb profile finds a candidate's recipe from the run that made it; a run a
-- bundle brought names another machine's file, and kwb never loads it.
t.test("imported_a_bundles_run_names_no_recipe_to_load", function()
  local c = fresh_store("c")
  t.eq(select(2, require("kwb.cli.profile").recipe_of(c.cache, t1.id)),
       "candidate " .. t1.id:sub(1, 8) .. " came in bundle forged.kwb, whose run names a recipe file of another "
       .. "machine's: name it with --recipe FILE")
  local runs = c:runs()
  t.eq(runs[1].settings.imported, "forged.kwb", "the imported run is marked")
end)

-- kwb report's baseline is the latest run's that measured one: never a run
-- a bundle brought, unless the recipe trusts imports.
t.test("imported_a_bundles_run_gives_no_baseline", function()
  local c = fresh_store("c")
  local rc = recipe { T2 }
  local device = kwb.host.kind()
  local bundled = c:runs()[1]
  c.cache:amend_run(bundled.id, { device = device, baseline = { recipe = rc.name, problem = rc.problem:key(),
                                                                 name = "forged", seconds = {} } })
  t.eq(c:baseline(rc, device), nil)
  t.eq(c:baseline(recipe({ T2 }, { trust_imported = true }), device).name, "forged")
end)

-- trust_imported = true: the recipe takes the bundle's results as measured
-- (the forgery's times then set the bar T2 is judged against).
t.test("imported_a_recipe_that_trusts_imports_takes_them", function()
  local d = fresh_store("d")
  assert(d.cache:import(forged))
  local rd = recipe({ T2 }, { trust_imported = true })
  local sm, run_d = rd:run { mode = "quiet", store = d }
  t.eq(sm.known, 0)
  -- (every run times its start kernel again: the run's own figures, not the bundle's)
  t.eq(run_d.session.start.run, run_d.record.id, "the start kernel timed again in this run")
  t.eq(run_d.session.best.id, t1.id, "the imported T1 is the best")
  t.eq(run_d.results[1].outcome, "slower", "T2 against T1's forged times")
  t.eq(run_d.session.standings.best_time["n=128"], median["n=128"])
  t.raises(function() recipe({ T2 }, { trust_imported = "yes" }) end,
           "recipe field 'trust_imported': expected true or false, got \"yes\"")
end)

t.done()
