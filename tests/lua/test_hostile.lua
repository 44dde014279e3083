-- tests/lua/test_hostile.lua: hostile host candidates, each trying to game
-- the measurement its own way, and the exact outcome kwb gives each.
local t = require "t"
local store = require "kwb.loop.store"

local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local function fresh_store(name)
  local path = tmp .. "/" .. name .. ".db"
  for _, suffix in ipairs { "", "-wal", "-shm" } do os.remove(path .. suffix) end
  return store.open(path)
end

local r = kwb.load "tests/recipes/hostile.lua"
local summary, run = r:run { mode = "quiet", store = fresh_store("hostile") }
local by_name = {}
for _, res in ipairs(run.results) do by_name[res.name] = res end

-- file -> outcome, rule (forbidden only), line, and a piece of the reason
local want = {
  { "hostile_partial.c", "wrong", nil, nil, "output c at n=32 (the first run): 32 elements never written, first c[993]" },
  { "hostile_stale.c", "forbidden", "global-state", 7, "saved at line 7" },
  { "hostile_mutate.c", "wrong", nil, nil, "input b changed by the candidate at n=32" },
  { "hostile_small_only.c", "wrong", nil, nil, "output c at n=96 (the first run): " },
  { "hostile_precision.c", "wrong", nil, nil, "output c at n=32 (the first run): " },
  { "hostile_clock.c", "forbidden", "timer", 6, "found in the module's undefined symbols" },
  { "hostile_rdtsc.c", "forbidden", "timer", 5, "rdtsc at line 5" },
  { "hostile_thread.c", "forbidden", "other-streams", 23, "pthread_create at line 23" },
  { "hostile_calls.c", "forbidden", "global-state", 4, "calls at line 4" },
  { "hostile_dlsym.c", "forbidden", "escape", 7, "dlsym at line 7" },
  { "hostile_spin.c", "timeout", nil, nil, "(the timeout is 0.02 s of CPU time); its sandbox was killed" },
  -- (the redzones hold drawn bytes: where one of them is the byte the
  -- candidate writes, 1 time in 256 a byte, the changed span is that much shorter)
  { "hostile_overrun.c", "wrong", nil, nil, pattern =
    "^the candidate wrote outside output c at n=32 %(the first run%): byte offsets 409[6-9] to 409[6-9] of a buffer of 4096 bytes$" },
  { "hostile_underrun.c", "wrong", nil, nil, pattern =
    "^the candidate wrote outside output c at n=32 %(the first run%): byte offsets %-6[0-4] to %-[1-4] of a buffer of 4096 bytes$" },
  { "hostile_far.c", "crashed", nil, nil, "SIGSEGV" },
  { "hostile_shapes.c", "wrong", nil, nil, "output c at n=31 (the first run; a shape verified but not timed): " },
  { "hostile_env.c", "forbidden", "allow-list", 8, "rule 'allow-list': getenv at line 8" },
  { "hostile_maps.c", "forbidden", "allow-list", 7, "rule 'allow-list': fopen at line 7" },
  { "hostile_fork.c", "forbidden", "allow-list", 3, "rule 'allow-list': _Fork at line 3" },
  { "hostile_neighbour.c", "crashed", nil, nil, "SIGSEGV" },
}

t.test("hostile_set_has_every_candidate_once", function()
  t.eq(#run.results, #want + 2, "the hostile ones, the early return and one honest control")
  t.eq(summary.funnel.accepted + summary.funnel.slower, 2, "none gets through but the control and the early return")
end)

t.test("hostile_control_using_malloc_memcpy_and_libm_is_verified", function()
  local res = t.truthy(by_name["honest_libm.c"], "honest_libm.c")
  t.truthy(res.outcome == "slower" or res.outcome == "accepted", tostring(res.outcome) .. ": " .. tostring(res.reason))
end)

for _, w in ipairs(want) do
  local file, outcome, rule, line, reason = table.unpack(w, 1, 5)
  t.test("hostile_" .. file:match("hostile_(.-)%.c") .. "_is_" .. outcome, function()
    local res = t.truthy(by_name[file], file)
    t.eq(res.outcome, outcome, file)
    t.eq(res.rule, rule, file .. " rule")
    t.eq(res.line, line, file .. " line")
    if w.pattern then t.truthy(res.reason:match(w.pattern), res.reason)
    else t.truthy(res.reason:find(reason, 1, true), res.reason) end
  end)
end

-- A kernel right while it is verified and idle once it is timed: the timed
-- runs it cannot tell from the verified ones catch it.
t.test("hostile_skipping_work_in_the_timed_runs_is_wrong", function()
  local loose = kwb.recipe {
    name = "hostile_skip", problem = require("kwb.problems.matmul") {}, shapes = { n = { 32 } }, verify_shapes = false,
    start = "../../kernels/host/matmul_naive.c", forbid = { "default", "-global-state" },
    strategy = { propose = function(self)
      if self.done then return nil end
      self.done = true
      return { file = "../candidates/hostile_timed_skip.c" }
    end },
    flags = { "-O2" }, timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 },
  }
  local _, lrun = loose:run { mode = "quiet", store = fresh_store("skip") }
  local res = lrun.results[1]
  t.eq(res.outcome, "wrong")
  t.truthy(res.reason:find("^output c at n=32 %(a warm%-up run%)") == nil, "warm-up runs are not verified")
  t.truthy(res.reason:find("^output c at n=32 %(timed run %d+%): %d+ elements off") or
           res.reason:find("^output c at n=32 %(a run after the timed runs%): %d+ elements off"), res.reason)
end)

t.test("hostile_stale_results_are_wrong_once_the_global_state_rule_is_dropped", function()
  local loose = kwb.recipe {
    name = "hostile_loose", problem = require("kwb.problems.matmul") {}, shapes = { n = { 32 } },
    start = "../../kernels/host/matmul_naive.c", forbid = { "default", "-global-state" },
    strategy = { propose = function(self)
      if self.done then return nil end
      self.done = true
      return { file = "../candidates/hostile_stale.c" }
    end },
    flags = { "-O2" }, timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 },
  }
  local _, lrun = loose:run { mode = "quiet", store = fresh_store("loose") }
  local res = lrun.results[1]
  t.eq(res.outcome, "wrong")
  t.truthy(res.reason:find("(the second run, other inputs in the same buffers)", 1, true), res.reason)
end)

-- Every timed run gets fresh inputs and a poisoned output, so the kernel that
-- returns at once when the output already holds numbers never finds it
-- holding any: it does its whole work in every run and is timed for it.
t.test("hostile_early_return_does_its_work_in_every_timed_run", function()
  local res = by_name["hostile_early_return.c"]
  local sh = res.shapes["n=32"]
  t.truthy(res.outcome == "slower" or res.outcome == "accepted", res.outcome .. ": " .. tostring(res.reason))
  t.truthy(sh.median > 20 * sh.floor, string.format("median %.3g s against the floor %.3g s", sh.median, sh.floor))
end)

-- State behind the macros the build's own command sets: the preprocessed
-- view comes from that command, so the rule sees the state.
t.test("hostile_state_behind_pie_and_optimize_macros_is_forbidden", function()
  local hidden = kwb.load "tests/recipes/hidden_state.lua"
  local _, hrun = hidden:run { mode = "quiet", store = fresh_store("hidden") }
  t.eq(#hrun.results, 2)
  local pie, opt = hrun.results[1], hrun.results[2]
  t.eq(pie.name, "hostile_pie.c")
  t.eq(pie.outcome, "forbidden", pie.reason)
  t.eq(pie.rule, "global-state"); t.eq(pie.line, 9)
  t.truthy(pie.reason:find("saved at line 9", 1, true), pie.reason)
  t.eq(opt.name, "hostile_optimize.c")
  t.eq(opt.outcome, "forbidden", opt.reason)
  t.eq(opt.rule, "global-state"); t.eq(opt.line, 7)
  t.truthy(opt.reason:find("calls at line 7", 1, true), opt.reason)
end)

-- A hostile run beside an honest one, each with its own cache: the honest
-- run's candidates all end verified.
t.test("hostile_run_beside_an_honest_run_leaves_it_unchanged", function()
  local hostile = io.popen(string.format("KWB_CACHE=%s/beside_hostile.db ./kwb tests/recipes/hostile.lua --quiet "
                                         .. ">/dev/null 2>&1; echo done", tmp))
  local honest = kwb.load "recipes/host_matmul.lua"
  local sm = honest:run { mode = "quiet", store = fresh_store("beside_honest"), strategy = "grid", candidates = 12, seed = 3 }
  hostile:read("a")
  hostile:close()
  t.eq(sm.candidates, 12)
  t.eq(sm.funnel.accepted + sm.funnel.slower, 12, "every honest candidate verified")
end)

-- The unannounced shapes: derived from the timed ones, the same on every
-- load, or the recipe's own, or none.
-- The judge's work before a timed run is the same whether the run will be
-- verified or not: the inputs are digested before every call (the candidate
-- shares the judge's processor, and a digest's traces in the caches, or in
-- a clock read at the call's start, would tell it which runs count).
t.test("hostile_timed_runs_digest_their_inputs_before_the_call_verified_or_not", function()
  local inputs = require "kwb.measure.inputs"
  local h = require("kwb.measure").harness(kwb.load "tests/recipes/hostile.lua")
  local b = h:bench(h.recipe.shapes[1])
  local methods = getmetatable(b.bufs.a).methods
  local digest, seen = methods.digest, {}
  methods.digest = function(buf, ...)
    for name, x in pairs(b.bufs) do if x == buf then seen[#seen + 1] = name end end
    return digest(buf, ...)
  end
  local ok, err = pcall(function()
    inputs.fresh(h, b, 7, "timed 1 1", nil, false)
    t.eq(table.concat(seen, " "), "a b", "a run not verified")
    seen = {}
    inputs.fresh(h, b, 7, "timed 2 1", nil, true)
    t.eq(table.concat(seen, " "), "a b", "a verified run")
  end)
  methods.digest = digest
  if not ok then error(err, 0) end
end)

t.test("hostile_unannounced_shapes_are_derived_given_or_none", function()
  local keys = {}
  for i, sh in ipairs(kwb.load("recipes/host_matmul.lua").verify_shapes) do keys[i] = sh.key end
  t.eq(table.concat(keys, " "), "n=63 n=65 n=201 n=148", "n = 64, 128, 200: one off the first each way, odd past the last, one drawn")
  local nv = {}
  for i, sh in ipairs(kwb.load("recipes/nvfp4_moe.lua").verify_shapes) do nv[i] = sh.shape.T end
  t.eq(table.concat(nv, " "), "2 4097 3648", "NVFP4 varies T only (its vary); T = 0 is no shape")
  -- a large shape's one-off shapes are small (each variable one off 256, the others at 256); the odd one
  -- stays at full size, past the largest
  local kt = {}
  for i, sh in ipairs(kwb.load("recipes/kt_matmul.lua").verify_shapes) do kt[i] = sh.key:gsub("[MNK]=", "") end
  t.eq(table.concat(kt, " "), "255,256,256 257,256,256 256,255,256 256,257,256 256,256,255 "
       .. "256,256,257 4097,4097,4097 513,513,513", "4096^3: one off in each around 256, odd at full size, racecheck's")
  local matmul = require "kwb.problems.matmul"
  local base = { name = "v", problem = matmul {}, shapes = { n = { 8 } }, start = "../../kernels/host/matmul_naive.c" }
  local function with(v) local s = {}; for k, x in pairs(base) do s[k] = x end; s.verify_shapes = v; return kwb.recipe(s) end
  t.eq(#with(false).verify_shapes, 0)
  t.eq(with({ { n = 5 }, { n = 7 } }).verify_shapes[2].key, "n=7")
  t.raises(function() with({ { n = 0 } }) end, "recipe field 'verify_shapes[1]': shape variable 'n' must be a positive integer")
end)

-- A kernel right at small sizes through a fallback and wrong past it where
-- the size is no multiple of its step: the one-off shapes are small (255 and
-- 257, the fallback's), so the odd shape past the largest timed size, kept
-- at full size, is the one that finds it.
t.test("hostile_right_only_below_a_size_is_wrong_at_the_odd_shape_past_the_largest", function()
  local r = kwb.recipe {
    name = "hostile_tail", problem = require("kwb.problems.vecadd") {}, shapes = { n = { 100000 } },
    start = { source = "void vecadd(int n, const float *a, const float *b, float *c) {\n"
                       .. "    for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n}\n" },
    strategy = require("kwb.strategies.list")({ { file = "../candidates/hostile_large_tail.c" } }),
    flags = { "-O2" }, budget = { candidates = 1, minutes = 1, timeout = 5 },
    timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 },
  }
  local keys = {}
  for i, sh in ipairs(r.verify_shapes) do keys[i] = sh.key end
  t.eq(table.concat(keys, " "), "n=255 n=257 n=100001", "one off 256 each way, odd past the largest (the draw is n=100000)")
  local _, trun = r:run { mode = "quiet", store = fresh_store("tail") }
  local res = trun.results[1]
  t.eq(res.name, "hostile_large_tail.c")
  t.eq(res.outcome, "wrong", tostring(res.reason))
  t.eq(res.reason, "output c at n=100001 (the first run; a shape verified but not timed): "
                   .. "1 element never written, first c[100001]")
end)

-- A recipe's allow adds names to the allow-list.
t.test("hostile_a_recipes_allow_adds_symbols", function()
  local matmul = require "kwb.problems.matmul"
  local r = kwb.recipe { name = "allowed", problem = matmul {}, shapes = { n = { 16 } }, verify_shapes = false,
                         start = "../../kernels/host/matmul_naive.c", allow = { "getenv", "setenv" },
                         strategy = require("kwb.strategies.list")({ { file = "../candidates/hostile_env.c" } }),
                         budget = { candidates = 1, minutes = 1, timeout = 5 } }
  local _, arun = r:run { mode = "quiet", store = fresh_store("allowed") }
  local o = arun.results[1].outcome
  t.truthy(o == "slower" or o == "accepted", "allowed, then judged on its results: " .. tostring(arun.results[1].reason))
end)

-- Functions a recipe gives answer true or false, and a restriction leaves
-- something to search.
t.test("hostile_restrict_and_accept_must_answer_true_or_false", function()
  local matmul = require "kwb.problems.matmul"
  local function mk(restrict, accept)
    return kwb.recipe { name = "rs", problem = matmul {}, shapes = { n = { 8 } }, start = "../../kernels/host/matmul_naive.c",
                        template = "../../kernels/host/matmul_tiled.c", accept = accept, verify_shapes = false,
                        space = { BM = { 4, 8 }, BN = { 32 }, BK = { 8 }, UNROLL = { 1 }, restrict = restrict },
                        budget = { candidates = 2, minutes = 1, timeout = 5 } }
  end
  t.raises(function() mk(function() return "yes" end) end,
           "recipe field 'space.restrict': returned \"yes\" for a point, not true or false")
  t.raises(function() mk(function() return false end) end,
           "recipe field 'space.restrict': excludes every point of the space (2 looked at)")
  local r = mk(function() return true end, function() return 1 end)
  t.raises(function() r:run { mode = "quiet", store = fresh_store("accept1") } end,
           "accept(candidate, best) returned 1 for ")
end)

-- A shape whose timing spreads too much is timed again, and said to be noisy
-- when it still does.
t.test("hostile_a_noisy_shape_is_timed_again_then_marked", function()
  local measure = require "kwb.measure"
  local matmul = require "kwb.problems.matmul"
  local r = kwb.recipe { name = "noisy", problem = matmul {}, shapes = { n = { 8 } }, verify_shapes = false,
                         start = "../../kernels/host/matmul_naive.c" }
  local function measured(spreads)
    local h = measure.harness(r)
    local real, calls = h.backend, 0
    h.backend = setmetatable({ fresh_timing = false, time = function()
      calls = calls + 1
      local w = 1.2815 * spreads[calls] * 1e-6   -- p10 and p90 of normal samples of that spread
      return { median = 1e-6, min = 1e-6, p10 = 1e-6 - w, p90 = 1e-6 + w, spread = spreads[calls], n = 5, ci_lo = 1e-6,
               ci_hi = 1e-6 }
    end }, { __index = real })
    local res = { seconds = {}, shapes = {}, seed = 1 }
    h:measure({ source = assert(kwb.files.read_file(r.start.file)), name = "k.c", defines = {}, define_list = {} }, res,
              { start = true })
    return res.shapes["n=8"], calls
  end
  local sh, calls = measured { 0.3, 0.2 }
  t.eq(calls, 2, "timed again")
  t.eq(sh.noisy, true)
  t.eq(sh.spread, 0.2, "the quieter of the two")
  sh, calls = measured { 0.3, 0.04 }
  t.eq(sh.noisy, nil, "quiet the second time")
  t.eq(sh.spread, 0.04)
  sh, calls = measured { 0.02 }
  t.eq(calls, 1, "a quiet shape is timed once")
  t.eq(sh.noisy, nil)
end)

-- Racing goes on through a full timing: once the low end of the median's
-- interval is past the bound, the shape stops, partial. The kernel here is
-- the reference itself with scripted times, 2 ms and 2.2 ms in turn.
t.test("hostile_racing_stops_a_timing_once_its_interval_is_past_the_bound", function()
  local measure = require "kwb.measure"
  local timed = require "kwb.measure.timed"
  local matmul = require "kwb.problems.matmul"
  local r = kwb.recipe { name = "racing", problem = matmul {}, shapes = { n = { 8 } }, verify_shapes = false,
                         start = "../../kernels/host/matmul_naive.c" }
  local h = measure.harness(r)
  local real, i = h.backend, 0
  h.backend = setmetatable({ calls = false, call = function(_, b, args)
    real.call(h:reference().fn, b, args)
    i = i + 1
    return true, i % 2 == 0 and 2.2e-3 or 2e-3
  end }, { __index = real })
  local b = h:bench(r.shapes[1])
  local opts = { warmup = 0, warmup_min = 1, min_samples = 5, max_samples = 40, cap = 100, target = 1e-9 }
  local st = assert(timed.shape(h, "kernel", b, opts, 1))
  t.eq(st.n, 40, "no racing: to the sample bound")
  t.eq(st.partial, nil)
  st = assert(timed.shape(h, "kernel", b, setmetatable({ race_above = 1.5e-3 }, { __index = opts }), 1))
  t.eq(st.n, 5, "raced out at the first look at its interval")
  t.eq(st.partial, true)
  st = assert(timed.shape(h, "kernel", b, setmetatable({ race_above = 2.1e-3 }, { __index = opts }), 1))
  t.eq(st.n, 40, "an interval reaching under the bound: timed in full")
  t.eq(st.partial, nil)
end)

-- A kernel that leaves some timed runs' outputs unwritten (as one that
-- swallowed the calls queued behind its own would) is wrong at the first of
-- them, verified or not: every timed run's outputs are checked for poison.
-- Scripted: the reference's answer on odd calls, nothing on even ones.
t.test("hostile_a_timed_run_left_unwritten_is_wrong", function()
  local measure = require "kwb.measure"
  local timed = require "kwb.measure.timed"
  local matmul = require "kwb.problems.matmul"
  local r = kwb.recipe { name = "unwritten", problem = matmul {}, shapes = { n = { 8 } }, verify_shapes = false,
                         start = "../../kernels/host/matmul_naive.c" }
  local h = measure.harness(r)
  local real, i = h.backend, 0
  h.backend = setmetatable({ calls = false, call = function(_, b, args)
    i = i + 1
    if i % 2 == 1 then real.call(h:reference().fn, b, args) end
    return true, 1e-3
  end }, { __index = real })
  local opts = { warmup = 0, warmup_min = 1, min_samples = 5, max_samples = 40, cap = 100, target = 1e-9 }
  local st, why, out = timed.shape(h, "kernel", h:bench(r.shapes[1]), opts, 1)
  t.eq(st, nil)
  t.eq(out, "wrong")
  t.eq(why, "output c at n=8 (timed run 1): 64 elements never written, first c[1]")
end)

-- A timing raced out half-way is a measurement like any other: the shape
-- is partial, and nothing checks its last run against another run's answer.
-- Scripted times: 2 and 2.2 ms in turn, 1 ms every seventh call, so the
-- first look's fastest sample is under the bound and the interval later is
-- not.
t.test("hostile_a_timing_raced_out_half_way_is_partial_not_wrong", function()
  local measure = require "kwb.measure"
  local matmul = require "kwb.problems.matmul"
  local r = kwb.recipe { name = "halfway", problem = matmul {}, shapes = { n = { 8 } }, verify_shapes = false,
                         start = "../../kernels/host/matmul_naive.c",
                         timing = { warmup = 0, warmup_min = 1, min_samples = 5, max_samples = 16, cap = 100,
                                    target = 1e-9 } }
  local h = measure.harness(r)
  local real, i = h.backend, 0
  h.backend = setmetatable({ calls = false, call = function(k, b, args, limit)
    if k == h:reference().fn then return real.call(k, b, args, limit) end
    real.call(h:reference().fn, b, args)
    i = i + 1
    return true, i % 7 == 0 and 1e-3 or i % 2 == 0 and 2.2e-3 or 2e-3
  end }, { __index = real })
  h.best_time = { ["n=8"] = 1.5e-3 / 1.1 }
  local res = { seconds = {}, shapes = {}, seed = 1 }
  h:measure({ source = assert(kwb.files.read_file(r.start.file)), name = "k.c", defines = {}, define_list = {} }, res)
  t.eq(res.outcome, nil, tostring(res.reason))
  local sh = res.shapes["n=8"]
  t.eq(sh.partial, true)
  t.truthy(sh.n > 5 and sh.n < 16, "raced out after the first look, before the bound: " .. sh.n)
end)

-- A candidate measured twice keeps both measurements.
t.test("hostile_a_second_measurement_does_not_erase_the_first", function()
  local matmul = require "kwb.problems.matmul"
  local st = fresh_store("twice")
  local r = kwb.recipe { name = "twice", problem = matmul {}, shapes = { n = { 8, 16 } }, verify_shapes = false,
                         start = "../../kernels/host/matmul_naive.c",
                         timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.05 } }
  r:session { store = st }
  local prop = { file = "../../kernels/host/matmul_tiled.c" }
  local first = r:try(prop)
  local second = r:try(prop)
  local ms = st.cache:measurements(first.id)
  t.eq(#ms, 4, "two shapes, twice")
  t.eq(ms[1].median, first.shapes["n=8"].median, "the first measurement is kept")
  t.eq(ms[3].median, second.shapes["n=8"].median)
  local latest
  for _, row in ipairs(st.cache:results(first.id)) do if row.shape == "n=8" then latest = row.median end end
  t.eq(latest, second.shapes["n=8"].median, "the result row holds the latest")
end)

t.test("hostile_retime_measures_a_cached_candidate_again_and_keeps_both", function()
  local db = tmp .. "/retime.db"
  local function sh(cmd)
    local p = io.popen("KWB_CACHE=" .. db .. " " .. cmd .. " 2>&1; echo \"[exit $?]\"")
    local out = p:read("a")
    p:close()
    return out
  end
  sh("./kwb recipes/host_matmul.lua --quiet --budget 2 --strategy grid --seed 1")
  local cache = assert(require("kwb.cache").open(db))
  local best = cache:best("matmul", { shape = "n=64" })[1].candidate
  local before = #cache:measurements(best)
  cache:close()
  local out = sh("./kwb recipes/host_matmul.lua --retime " .. best:sub(1, 12))
  t.truthy(out:find(best:sub(1, 8) .. " try: accepted", 1, true) or out:find(best:sub(1, 8) .. " try: slower", 1, true), out)
  t.truthy(out:find("[exit 0]", 1, true), out)
  cache = assert(require("kwb.cache").open(db))
  t.eq(#cache:measurements(best), before + 3, "three shapes measured again, the earlier ones kept")
  cache:close()
  t.truthy(sh("./kwb recipes/host_matmul.lua --retime ffff"):find("kwb: host_matmul: no candidate ffff in the cache", 1, true))
end)

-- Honest acceptance: faster beyond the noise of both measurements.
t.test("hostile_a_gain_inside_the_noise_is_not_accepted", function()
  local judge = require "kwb.loop.judge"
  local matmul = require "kwb.problems.matmul"
  local r = kwb.recipe { name = "noise", problem = matmul {}, shapes = { n = { 8 } }, start = "../../kernels/host/matmul_naive.c" }
  local c = { bandwidth = 1e15, flops = 1e18 }
  local start = { outcome = "start", score = 1, shapes = { ["n=8"] = { median = 1.0, ci_lo = 0.9, ci_hi = 1.1 } } }
  local function judged(median, lo, hi)
    local res = { short = "x", shapes = { ["n=8"] = { median = median, ci_lo = lo, ci_hi = hi } } }
    return judge.judge(r, res, { ceilings = c, start = start, best = start })
  end
  local noisy = judged(0.97, 0.9, 1.05)
  t.eq(noisy.outcome, "slower", "3% faster, inside both intervals")
  t.eq(noisy.reason, "1.03x is within the noise: at the slow end of its 95% intervals it is 0.95x, the best at the "
                     .. "fast end of its own 1.11x")
  local clear = judged(0.5, 0.49, 0.51)
  t.eq(clear.outcome, "accepted", "twice as fast, intervals apart")
  t.eq(clear.reason, nil)
  t.near(clear.score_lo, 1 / 0.51, 1e-12, "its pessimistic score")
  t.eq(judged(0.995, 0.99, 1.0).outcome, "slower", "under the 1% margin: slower, no noise to speak of")
end)

-- The start kernel's checks count against budget.minutes.
t.test("hostile_the_start_kernels_checks_stop_at_budget_minutes", function()
  local matmul = require "kwb.problems.matmul"
  local sizes = {}
  for i = 1, 400 do sizes[i] = 40 + i end
  local r = kwb.recipe { name = "many", problem = matmul {}, shapes = { n = sizes }, start = "../../kernels/host/matmul_naive.c",
                         verify_shapes = false, budget = { candidates = 1, minutes = 0.002, timeout = 5 } }
  local core = require "kwb.core"
  local t0 = core.now()
  t.raises(function() r:run { mode = "quiet", store = fresh_store("many") } end, "fails: timeout: the run's budget.minutes ran out before n=")
  t.truthy(core.now() - t0 < 5, "stopped near the budget: " .. (core.now() - t0))
end)

-- A recipe whose tolerance a constant output passes is refused before any
-- candidate: it could not tell a kernel that computes nothing from one that does.
t.test("hostile_a_problem_a_constant_output_passes_is_an_error_naming_the_shape", function()
  local matmul = require "kwb.problems.matmul"
  local loose = kwb.recipe { name = "loose", problem = matmul { tolerance = { atol = 1e6, rtol = 0 } },
                             shapes = { n = { 8, 16 } }, start = "../../kernels/host/matmul_naive.c",
                             budget = { candidates = 1, minutes = 1, timeout = 5 } }
  t.raises(function() loose:run { mode = "quiet", store = fresh_store("loose") } end,
           "recipe loose: at shape n=8 every element of output c set to 0 passes the tolerance")
  -- c = a + 100: zeros fail by 100, but the reference's mean is within 5 of every element
  local shift = kwb.problem.define {
    name = "shift", vars = { "n" }, fn = "shift",
    args = { { "n", "i32", value = "n" }, { "a", "f32", shape = "n", role = "in", init = { "normal", 0, 1 } },
             { "c", "f32", shape = "n", role = "out" } },
    reference = { source = "void shift_ref(int n, const float *a, float *c) { for (int i = 0; i < n; i++) c[i] = a[i] + 100; }",
                  fn = "shift_ref" },
    tolerance = { atol = 5, rtol = 0 },
  }
  local start = tmp .. "/shift.c"
  local f = assert(io.open(start, "w"))
  f:write("void shift(int n, const float *a, float *c) { for (int i = 0; i < n; i++) c[i] = a[i] + 100; }\n")
  f:close()
  local mean = kwb.recipe { name = "mean", problem = shift, shapes = { n = { 64 } }, start = start,
                            budget = { candidates = 1, minutes = 1, timeout = 5 } }
  local ok, err = pcall(mean.run, mean, { mode = "quiet", store = fresh_store("mean") })
  t.eq(ok, false, "zeros fail, the mean passes")
  t.truthy(tostring(err):find("recipe mean: at shape n=64 every element of output c set to %d+%.%d+ passes"), tostring(err))
  t.truthy(not tostring(err):find("set to 0 passes", 1, true), "the mean, not zeros")
end)

-- An output of one element (a sum, a loss) equals some constant on any one
-- draw; the problem is degenerate only where that constant passes another
-- draw of the inputs as well. A sum of its input runs, and its self-test
-- still rejects the plant that writes a constant.
t.test("hostile_a_one_element_output_is_tested_on_a_second_draw", function()
  local total = kwb.problem.define {
    name = "total", vars = { "n" }, fn = "total",
    args = { { "n", "i32", value = "n" }, { "a", "f32", shape = "n", role = "in", init = { "normal", 0, 1 } },
             { "s", "f32", shape = 1, role = "out" } },
    reference = { source = "void total_ref(int n, const float *a, float *s) { double t = 0; "
                           .. "for (int i = 0; i < n; i++) t += a[i]; s[0] = (float)t; }", fn = "total_ref" },
    tolerance = { atol = 1e-3, rtol = 1e-4 },
  }
  local start = tmp .. "/total.c"
  local f = assert(io.open(start, "w"))
  f:write("void total(int n, const float *a, float *s) { double t = 0; for (int i = 0; i < n; i++) t += a[i]; "
          .. "s[0] = (float)t; }\n")
  f:close()
  local r = kwb.recipe { name = "total", problem = total, shapes = { n = { 256, 1024 } }, start = start,
                         budget = { candidates = 1, minutes = 1, timeout = 5 } }
  local sm = r:run { mode = "quiet", store = fresh_store("total") }
  t.eq(sm.best.start, true, "the run ends with the start kernel as its pick")
  t.eq(sm.judge.line, "judge: 6 of 6 planted candidates rejected", "all but \"copies an input\" (none of one element)")
  -- the same output under a tolerance every sum of 256 normal draws passes is still refused
  total.tolerance = { atol = 1e4, rtol = 0 }
  local loose = kwb.recipe { name = "total_loose", problem = total, shapes = { n = { 256 } }, start = start,
                             budget = { candidates = 1, minutes = 1, timeout = 5 } }
  t.raises(function() loose:run { mode = "quiet", store = fresh_store("total_loose") } end,
           "recipe total_loose: at shape n=256 every element of output s set to 0 passes the tolerance")
end)

t.done()
