-- tests/lua/test_certify.lua: numbers that hold. Every run times its start
-- kernel again (in turns beside its first timed candidate) and takes every
-- speed-up against those figures; a final round times the leading kernels
-- in turns and names the pick from it; its certificate is kept with the run,
-- shown, carried in bundles and repeated by kwb verify-pick.
local t = require "t"
local core = require "kwb.core"
local cjson = require "cjson"
local store = require "kwb.loop.store"

local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")

local function fresh(name)
  local path = tmp .. "/certify_" .. name .. ".db"
  for _, suffix in ipairs { "", "-wal", "-shm" } do os.remove(path .. suffix) end
  return path
end

local function kwb_(...)
  local r = assert(core.exec({ "./kwb", ... }, { timeout = 300 }))
  return r.status, (r.out or "") .. (r.err or "")
end

local function last_json(out)
  local last
  for l in out:gmatch("[^\n]+") do last = l end
  return cjson.decode(last)
end

-- ---- the start kernel's figures are the run's own ---------------------------------

t.test("certify_every_run_times_its_start_again_beside_its_first_timed_candidate", function()
  local path = fresh("start")
  local st = store.open(path)
  local r = kwb.load "tests/recipes/planted.lua"
  local first, run1 = r:run { mode = "quiet", store = st, candidates = 5, certify = 0 }
  t.eq(first.start.this_run, true, "a fresh cache: measured in the run")
  -- the second run: the five are known, the sixth (the tiled kernel) is timed beside the start kernel
  local r2 = kwb.load "tests/recipes/planted.lua"
  local sm, run = r2:run { mode = "quiet", store = store.open(path), certify = 0 }
  t.eq(sm.candidates, 1, "the one left")
  t.eq(sm.known, 5)
  t.eq(sm.start.run, run.record.id, "the start kernel's figures are this run's")
  t.eq(sm.start.this_run, true)
  local res = run.results[1]
  t.eq(res.outcome, "accepted")
  local start = r2:session().start
  t.eq(start.beside, res.id, "timed in turns beside the first timed candidate")
  for _, sh in ipairs(r2.shapes) do
    t.eq(sm.start.median[sh.key], start.shapes[sh.key].median, "the summary's start figures at " .. sh.key)
    t.eq(res.shapes[sh.key].speedup, start.shapes[sh.key].median / res.shapes[sh.key].median,
         "the speed-up against this run's figures at " .. sh.key)
    t.eq(start.shapes[sh.key].turns, true, "figures from turns at " .. sh.key)
  end
  -- the earlier run's figures stay as history
  local ms = store.open(path).cache:measurements(start.id)
  local runs = {}
  for _, m in ipairs(ms) do runs[m.run] = (runs[m.run] or 0) + 1 end
  t.eq(#ms, 4, "two shapes measured in each of two runs")
  t.eq(runs[run1.record.id], 2, "the first run's rows")
  t.eq(runs[run.record.id], 2, "this run's rows")
  local stored = store.open(path):known(r2:session().ctx, start.id)
  t.eq(stored.outcome, "start")
  t.eq(stored.run, run.record.id, "the latest row is this run's")
end)

t.test("certify_a_run_that_times_no_candidate_times_its_start_alone", function()
  local path = fresh("alone")
  local r = kwb.load "tests/recipes/planted.lua"
  r:run { mode = "quiet", store = store.open(path), certify = 0 }
  local r2 = kwb.load "tests/recipes/planted.lua"
  local sm, run = r2:run { mode = "quiet", store = store.open(path), certify = 0 }
  t.eq(sm.candidates, 0)
  t.eq(sm.known, 6)
  t.eq(sm.start.run, run.record.id, "timed again at the run's end")
  t.eq(r2:session().start.beside, nil, "alone")
end)

-- The recipe's baseline (a source: tests/recipes/baseline.lua) is checked at
-- a run's start and timed in the same run in turns: beside the first timed
-- candidate (a fresh cache: the start kernel measured already), beside it
-- and the start kernel where both are due (the same rounds: the same count
-- of turns), and beside the start kernel's own timing again where no
-- candidate is timed; each run's figures kept with its record.
t.test("certify_the_baseline_is_timed_in_turns_beside_the_first_timed_candidate_and_the_start", function()
  local path = fresh("baseline")
  local function run_of(o)
    local r = kwb.load "tests/recipes/baseline.lua"
    o.mode, o.store, o.certify = "quiet", store.open(path), 0
    local sm, run = r:run(o)
    return sm, run, r:session()
  end
  local function in_turns(bl, with, what)
    for _, key in ipairs { "n=48", "n=96" } do
      t.eq(bl.shapes[key].turns, true, what .. ": figures from turns at " .. key)
      if with then t.eq(bl.shapes[key].n, with.shapes[key].n, what .. ": as many turns as the start kernel at " .. key) end
    end
  end
  -- a fresh cache: the start kernel measured at the run's start; the baseline beside the first candidate
  local sm1, run1 = run_of { candidates = 1 }
  local first = run1.results[1]
  t.eq(first.outcome, "accepted")
  t.eq(run1.baseline.beside, first.id, "beside the first timed candidate")
  t.eq(run1.baseline.with_start, false, "the start kernel was measured at the run's start")
  t.eq(run1.baseline.due, nil)
  in_turns(run1.baseline, nil, "the first run")
  t.eq(sm1.baseline.median["n=96"], run1.baseline.shapes["n=96"].median, "the summary's medians are those")
  -- the start kernel known: it and the baseline both go along with the one candidate left
  local sm2, run2, s2 = run_of {}
  local res = run2.results[1]
  t.eq(sm2.candidates, 1)
  t.eq(res.outcome, "slower")
  t.eq(s2.start.beside, res.id, "the start kernel beside it")
  t.eq(run2.baseline.beside, res.id, "the baseline beside it")
  t.eq(run2.baseline.with_start, true, "in the same turns as the start kernel")
  in_turns(run2.baseline, s2.start, "the second run")
  local kept = store.open(path):baseline(kwb.load "tests/recipes/baseline.lua", s2.ctx.device)
  t.eq(kept.run, run2.record.id, "kept with the run's record")
  t.eq(kept.beside, res.id)
  t.eq(kept.shapes["n=48"].median, sm2.baseline.median["n=48"])
  -- nothing left to time: the baseline in turns beside the start kernel's own timing again
  local sm3, run3, s3 = run_of {}
  t.eq(sm3.candidates, 0)
  t.eq(s3.start.run, run3.record.id, "the start kernel timed again in this run")
  t.eq(run3.baseline.beside, s3.start.id, "the baseline beside it")
  t.eq(run3.baseline.with_start, true)
  in_turns(run3.baseline, s3.start, "the third run")
  -- a run cut short after the baseline's checks measured nothing of it: kwb report takes the latest timed
  local st = store.open(path)
  local cut = st:begin_run { recipe = "tests/recipes/baseline.lua", settings = { device = s3.ctx.device } }
  st.cache:amend_run(cut.id, { baseline = { recipe = "baseline_matmul", problem = "matmul", name = "shape_reps.c",
                                            due = true } })
  t.eq(st:baseline(kwb.load "tests/recipes/baseline.lua", s3.ctx.device).run, run3.record.id)
end)

-- ---- the final round ------------------------------------------------------------------

-- The elsewhere recipe (tests/recipes/elsewhere.lua) built here, so that its
-- session measures in this process, whose host timer the test can fake.
local function elsewhere_recipe()
  return kwb.recipe {
    name = "elsewhere_here", problem = require("kwb.problems.matmul") {}, shapes = { n = { 48, 96 } },
    start = { file = "../candidates/shape_reps.c", defines = { SMALL_REPS = 10, LARGE_REPS = 10 } },
    template = "../candidates/shape_reps.c",
    strategy = require("kwb.strategies.list")({ { SMALL_REPS = 10, LARGE_REPS = 1 },
                                                { SMALL_REPS = 1, LARGE_REPS = 40 } }, "elsewhere"),
    flags = { "-O1" }, budget = { candidates = 10, minutes = 2, timeout = 5 },
    timing = { warmup = 0.002, min_samples = 3, cap = 0.05, target = 0.05 }, seed = 11,
  }
end

local cert_path = fresh("cert")
local r = elsewhere_recipe()
local sm, run = r:run { mode = "quiet", store = store.open(cert_path), certify = 1 }

t.test("certify_the_certificate_names_its_kernels_shapes_ratios_device_and_commit", function()
  local cert = sm.certificate
  t.truthy(cert, "a certificate")
  local s = r:session()
  local large, small = run.results[1], run.results[2]
  t.eq(large.outcome, "accepted")
  t.eq(small.outcome, "slower")
  t.eq(cert.run, run.record.id)
  t.eq(cert.device, s.ctx.device)
  t.eq(cert.commit, core.commit)
  t.eq(cert.kwb, core.version)
  t.eq(cert.problem, "matmul")
  t.eq(table.concat(cert.shapes, " "), "n=48 n=96")
  t.eq(#cert.entries, 3, "the start kernel, the run's best, the winner at n=48")
  t.eq(cert.entries[1].id, s.start.id); t.eq(cert.entries[1].role, "start")
  t.eq(cert.entries[2].id, large.id); t.eq(cert.entries[2].role, "candidate")
  t.eq(cert.entries[3].id, small.id); t.eq(cert.entries[3].role, "candidate")
  t.eq(cert.best, large.id, "the run's own best")
  t.eq(cert.pick, large.id, "the round names it too")
  t.eq(cert.winners["n=48"], small.id)
  t.eq(cert.winners["n=96"], large.id)
  t.truthy(cert.rounds >= require("kwb.measure.rounds").min_rounds, "rounds " .. cert.rounds)
  -- speedups and scores of both candidates, gains of both others over the pick at both shapes
  local kinds = {}
  for _, x in ipairs(cert.ratios) do
    kinds[x.kind] = (kinds[x.kind] or 0) + 1
    t.truthy(x.lo <= x.median and x.median <= x.hi, x.kind .. " inside its interval")
    t.eq(x.n, cert.rounds, "every ratio over every round")
  end
  t.eq(#cert.ratios, 10)
  t.eq(kinds.speedup, 4); t.eq(kinds.score, 2); t.eq(kinds.gain, 4)
  local certify = require "kwb.loop.certify"
  local g = certify.find(cert, "gain", small.id, large.id, "n=48")
  t.truthy(g.lo > 1, "the small kernel is faster at n=48, beyond the noise")
  -- the summary's pick, speedups and faster-elsewhere are the round's
  local sc = certify.find(cert, "score", large.id, s.start.id)
  t.eq(sm.best.score, sc.median)
  t.eq(sm.best.score_interval[1], sc.lo)
  t.eq(sm.best.speedup["n=96"], certify.find(cert, "speedup", large.id, s.start.id, "n=96").median)
  t.eq(#sm.elsewhere, 1)
  t.eq(sm.elsewhere[1].id, small.id)
  t.eq(sm.elsewhere[1].gain.median, g.median)
  -- kept with the run
  local kept = store.open(cert_path).cache:certificate(run.record.id)
  t.eq(kept.pick, cert.pick)
  t.eq(#kept.ratios, 10)
  t.eq(kept.ratios[1].median, cert.ratios[1].median)
end)

t.test("certify_cache_show_run_shows_the_certificate", function()
  local id = run.record.id:sub(1, 10)
  local status, out = kwb_("--cache", cert_path, "cache", "show", id)
  t.eq(status, 0, out)
  t.truthy(out:find("^run          " .. run.record.id .. "\n"), out)
  t.truthy(out:find("\npick         " .. sm.best.short .. "\n", 1, true), out)
  t.truthy(out:find("\nkwb          " .. core.version .. " %(commit " .. core.commit:gsub("%-", "%%-") .. "%)\n"), out)
  t.truthy(out:find("\n  gain +" .. run.results[2].short .. " +" .. sm.best.short .. " +n=48 +[%d.]+x +[%d.]+%-[%d.]+ "), out)
  local st2, js = kwb_("--cache", cert_path, "cache", "show", id, "--json")
  t.eq(st2, 0, js)
  local j = cjson.decode(js)
  t.eq(j.run, run.record.id)
  t.eq(j.certificate.pick, sm.best.id)
  t.eq(#j.certificate.ratios, 10)
end)

-- A kernel that is neither the run's best nor a shape's winner still enters
-- the round where its score is among the next best (certify.top): here the
-- second-best kernel, slower than the best at both shapes.
t.test("certify_the_next_best_scores_enter_the_round", function()
  local rr = kwb.recipe {
    name = "next_best_here", problem = require("kwb.problems.matmul") {}, shapes = { n = { 48, 96 } },
    start = { file = "../candidates/shape_reps.c", defines = { SMALL_REPS = 10, LARGE_REPS = 10 } },
    template = "../candidates/shape_reps.c",
    strategy = require("kwb.strategies.list")({ { SMALL_REPS = 2, LARGE_REPS = 2 },
                                                { SMALL_REPS = 4, LARGE_REPS = 4 } }, "next"),
    flags = { "-O1" }, budget = { candidates = 10, minutes = 2, timeout = 5 },
    timing = { warmup = 0.002, min_samples = 3, cap = 0.05, target = 0.05 }, seed = 11,
  }
  local sm3, run3 = rr:run { mode = "quiet", store = store.open(fresh("next")), certify = 0.5 }
  local fast, second = run3.results[1], run3.results[2]
  t.eq(fast.outcome, "accepted")
  t.eq(second.outcome, "slower")
  local cert = sm3.certificate
  t.eq(#cert.entries, 3, "the start kernel, the best, and the next best score")
  t.eq(cert.entries[3].id, second.id)
  t.eq(cert.entries[3].role, "candidate")
  t.eq(cert.winners["n=48"], fast.id)
  t.eq(cert.winners["n=96"], fast.id, "a winner nowhere")
  t.eq(cert.pick, fast.id)
  local sc = require("kwb.loop.certify").find(cert, "score", second.id, cert.entries[1].id)
  t.truthy(sc and sc.lo > 1, "its score measured in the round")
end)

-- A kernel that wins the run but is slower in the final round is not the
-- pick: the host's timer is faked, for the run's best alone, during the round.
t.test("certify_a_kernel_that_loses_the_final_round_is_not_the_pick", function()
  local rr = elsewhere_recipe()
  local rounds = require "kwb.measure.rounds"
  local host = require "kwb.measure.backends.host"
  local real_time, real_call, real_calls = rounds.time, host.call, host.calls
  rounds.time = function(h, kernels, o)
    local slow = kernels[2].fn   -- (the run's own best: the certificate's second kernel)
    host.call = function(k, ...)
      local r = table.pack(real_call(k, ...))
      if k == slow and r[1] then r[2] = r[2] * 30 end
      return table.unpack(r, 1, r.n)
    end
    host.calls = function(k, ...)
      local r = table.pack(real_calls(k, ...))
      if k == slow and r[1] then r[2] = r[2] * 30 end
      return table.unpack(r, 1, r.n)
    end
    local ok, got, why, out, i = pcall(real_time, h, kernels, o)
    host.call, host.calls = real_call, real_calls
    if not ok then error(got, 0) end
    return got, why, out, i
  end
  local ok, sm2, run2 = pcall(rr.run, rr, { mode = "quiet", store = store.open(fresh("loses")), certify = 0.5 })
  rounds.time = real_time
  assert(ok, sm2)
  local large, small = run2.results[1], run2.results[2]
  t.eq(large.outcome, "accepted", "the run's best")
  t.eq(sm2.certificate.best, large.id)
  t.eq(sm2.certificate.pick, small.id, "thirty times slower in the round, the other kernel is the pick")
  t.eq(sm2.best.id, small.id)
  t.eq(sm2.run_best.id, large.id, "the summary says which kernel the run had")
  t.eq(sm2.certificate.winners["n=96"], rr:session().start.id, "the start kernel's ten passes beat thirty there")
end)

-- ---- verify-pick -------------------------------------------------------------------

local cli_db = fresh("cli")
local st0, out0 = kwb_("--cache", cli_db, "tests/recipes/elsewhere.lua", "--json", "--certify", "0.5")
assert(st0 == 0, out0)
local cli_sm = last_json(out0)

t.test("certify_verify_pick_exits_1_where_a_ratio_disagrees", function()
  local c = store.open(cli_db).cache
  local cert = assert(c:certificate(cli_sm.certificate.run))
  local planted
  for _, x in ipairs(cert.ratios) do
    if x.kind == "speedup" and x.id == cli_sm.best.id and x.shape == "n=96" then
      x.median, x.lo, x.hi = 100, 99, 101   -- a speed-up this machine does not give
      planted = x
    end
  end
  t.truthy(planted, "the pick's speed-up at n=96")
  c:put_certificate(cert.run, cert)
  local status, out = kwb_("--cache", cli_db, "verify-pick", cert.run:sub(1, 8), "--seconds", "0.5")
  t.eq(status, 1, out)
  t.truthy(out:find("\nDISAGREES speedup of " .. cli_sm.best.short .. " over the start kernel at n=96: certified "
                    .. "100%.000x %[99%.000, 101%.000%], now [%d.]+x %[[%d.]+, [%d.]+%]\n"), out)
  t.truthy(out:find("\n%d+ of 10 ratios agree[^\n]*: the pick does not hold here\n$"), out)
end)

-- A ratio measured again agrees only where its interval overlaps the
-- certified one and is narrow enough to tell: a wide one overlaps anything.
t.test("certify_compare_a_wide_interval_is_too_wide_to_tell_not_an_agreement", function()
  local certify = require "kwb.loop.certify"
  local function r(median, lo, hi) return { kind = "speedup", id = "k", over = "s", shape = "n=8", median = median,
                                            lo = lo, hi = hi } end
  local cert = { target = 0.01, ratios = { r(1.50, 1.48, 1.52) } }
  local function verdict(median, lo, hi)
    local out, all = certify.compare(cert, { ratios = { r(median, lo, hi) } })
    t.eq(out[1].agree, all)
    return out[1].verdict
  end
  t.eq(verdict(1.51, 1.49, 1.53), "agrees", "as narrow, overlapping")
  t.eq(verdict(1.51, 1.475, 1.545), "agrees", "under twice the certified width (0.04 -> 0.08 wide at most)")
  t.eq(verdict(1.51, 1.40, 1.62), "inconclusive", "0.22 wide overlaps 1.50 and confirms nothing")
  t.eq(verdict(1.30, 1.20, 1.40), "disagrees", "apart, however wide")
  t.eq(verdict(1.60, 1.55, 1.65), "disagrees")
  -- a certified interval narrower than the round's target: the target sets the width a repeat may have
  cert.ratios[1] = r(1.50, 1.499, 1.501)
  t.eq(verdict(1.50, 1.475, 1.525), "agrees", "0.05 wide: under 2 x (2 x 1% x 1.50)")
  t.eq(verdict(1.50, 1.43, 1.57), "inconclusive")
  local out, all = certify.compare(cert, { ratios = {} })
  t.eq(out[1].verdict, "inconclusive", "not measured again")
  t.eq(all, false)
end)

t.test("certify_verify_pick_refuses_another_device_kind", function()
  local c = store.open(cli_db).cache
  local cert = assert(c:certificate(cli_sm.certificate.run))
  local here = cert.device
  cert.device = "host:Some Other CPU:64"
  c:put_certificate(cert.run, cert)
  local status, out = kwb_("--cache", cli_db, "verify-pick", cert.run:sub(1, 8))
  t.eq(status, 1, out)
  t.eq(out, string.format("kwb verify-pick: the certificate was measured on host:Some Other CPU:64; this machine is "
                          .. "%s: verify it on one of that kind\n", here))
  local st3, out3 = kwb_("--cache", cli_db, "verify-pick", "ffffffff")
  t.eq(st3, 1, out3)
  t.eq(out3, "kwb verify-pick: no run ffffffff in the cache\n")
end)

-- ---- bundles and older caches ----------------------------------------------------------

t.test("certify_a_bundle_carries_the_certificate", function()
  local bundle = tmp .. "/certify.kwb"
  local status, out = kwb_("--cache", cert_path, "cache", "export", bundle, "--id", sm.best.id:sub(1, 12), "--json")
  t.eq(status, 0, out)
  t.eq(cjson.decode(out).certificates, 1)
  local other = fresh("imported")
  local st2, out2 = kwb_("--cache", other, "cache", "import", bundle, "--json")
  t.eq(st2, 0, out2)
  t.eq(cjson.decode(out2).certificates, 1)
  local got = store.open(other).cache:certificate(run.record.id)
  t.eq(got.pick, sm.certificate.pick)
  t.eq(got.imported, "certify.kwb", "where it came from")
  t.eq(#got.ratios, #sm.certificate.ratios)
end)

t.test("certify_an_older_cache_opens_and_keeps_its_rows", function()
  local path = fresh("v3")
  local c = assert(require("kwb.cache").open(path))
  c:begin_run { recipe = "x.lua", source = "return 1", settings = {} }
  -- a cache of schema 4: no certificate table (nor the lessons ledger's)
  c:exec("DROP TABLE certificate")
  c:exec("DROP TABLE lesson")
  c:exec("PRAGMA user_version = 4")
  c:close()
  local again = assert(require("kwb.cache").open(path))
  t.eq(#again:runs(), 1, "its run kept")
  local id = again:runs()[1].id
  t.eq(again:certificate(id), nil, "none yet")
  again:put_certificate(id, { pick = "p", ratios = {}, created = 1 })
  t.eq(again:certificate(id).pick, "p", "migrated: certificates kept")
  t.eq(again:exec("PRAGMA user_version")[1].user_version, core.cache_schema_version)
end)

t.done()
