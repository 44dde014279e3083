-- tests/lua/test_loop_steps.lua: layers of several kernels through the CUDA
-- adapter (kwb.measure.backends.cuda), run on the host through a stand-in for
-- kwb.cuda: launch steps with scratch buffers, scratch poisoned before every
-- call, fixed inputs filled once per session and shared by the shapes,
-- inputs drawn per run (draw = "run") so the reference runs once per shape
-- and round, and the relative-L2 tolerance. (tests/gpu/ runs the real thing.)
local t = require "t"

local fake = require "fake_cuda" ()
local runs, poisoned = fake.runs, fake.poisoned

-- The layer: tmp = 2 * a (first kernel), c = tmp + w[i % 64] (second).
-- w is a fixed input (64 values whatever the shape), filled with w2 (its
-- sibling, init = false) by one init.
local fills = 0
local function fill_w(buf, seed, _, bufs)
  fills = fills + 1
  buf:fill_uniform(seed, -1, 1)
  bufs.w2:copy(buf)
end
local problem = kwb.problem.define {
  name = "twostep", vars = { "n" }, fn = "twostep", draw = "run",
  args = { { "n", "i32", value = "n" },
           { "a", "f32", shape = "n", role = "in", init = function(buf, seed, _, bufs)
               buf:fill_uniform(seed, -1, 1)
               bufs.a2:fill_uniform(seed + 1, -1, 1)
             end },
           { "a2", "f32", shape = "n", init = false },   -- filled by a's init, every round
           { "w", "f32", shape = 64, fixed = true, init = fill_w },
           { "w2", "f32", shape = 64, fixed = true, init = false },
           { "c", "f32", shape = "n", role = "out" } },
  reference = { cuda = {
    source = "void ref_up(int n, const float *a, float *tmp) { for (int i = 0; i < n; i++) tmp[i] = 2 * a[i]; }\n"
          .. "void ref_down(int n, const float *tmp, const float *w, float *c) {\n"
          .. "  for (int i = 0; i < n; i++) c[i] = tmp[i] + w[i % 64]; }\n",
    launch = function(shape)
      return { steps = { { "ref_up", grid = 1, block = 1, args = { "n", "a", "tmp" } },
                         { "ref_down", grid = 1, block = 1, args = { "n", "tmp", "w", "c" } } },
               scratch = { tmp = { "f32", shape.n } } }
    end } },
  tolerance = { rel_l2 = 1e-4 },
  bytes = "8 * n",
}

local up = "void up(int n, const float *a, float *tmp) { for (int i = 0; i < n; i++) tmp[i] = 2 * a[i]; }\n"
local down = "void down(int n, const float *tmp, const float *w, float *c) {\n"
          .. "  for (int i = 0; i < n; i++) c[i] = tmp[i] + w[i % 64] * SCALE; }\n"
local proposals = {
  { source = up .. down, defines = { SCALE = "(1.0f)" }, name = "right.c" },
  -- the second kernel reads scratch the first never wrote: poison shows
  { source = "void up(int n, const float *a, float *tmp) { (void)n; (void)a; (void)tmp; }\n" .. down,
    defines = { SCALE = "1.0f" }, name = "lazy.c" },
  -- w scaled by 1.01: a relative L2 error of about 1e-2 over the limit
  { source = up .. down, defines = { SCALE = "1.01f" }, name = "off.c" },
  { source = up, defines = { SCALE = "1.0f" }, name = "nodown.c" },
}

local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local s
local r = kwb.recipe {
  name = "fake_steps", backend = "cuda", problem = problem, shapes = { n = { 100, 300 } },
  start = { source = up .. down, defines = { SCALE = "1.0f" } },
  launch = function(shape)
    return { steps = { { "up", grid = 1, block = 1, args = { "n", "a", "tmp" } },
                       { "down", grid = 1, block = 1, args = { "n", "tmp", "w2", "c" } } },
             scratch = { tmp = { "f32", shape.n } } }
  end,
  strategy = require("kwb.strategies.list")(proposals),
  timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 },
  sanitize = "all",
}
-- compute-sanitizer needs the GPU: a stand-in that finds a race in right.c
-- and nothing elsewhere, and records what it was asked to check
local sanitized = {}
package.loaded["kwb.checks.sanitize"] = { check = function(recipe, args)
  sanitized[#sanitized + 1] = args.cand.name
  t.eq(recipe, r)
  if args.cand.name == "right.c" then
    return { tool = "racecheck", shape = "n=100", report = "Error: Race reported between Write access at up+0x90" }
  end
  return {}
end }

local run
t.test("steps_layers_of_several_kernels_run_through_the_loop", function()
  s = r:session { store = require("kwb.loop.store").open(dir .. "/fake_steps.db") }
  local _
  _, run = r:run { mode = "quiet", seed = 7 }
  t.truthy(s, "session")
  t.eq(#run.results, 4)
  local o = {}
  for i, res in ipairs(run.results) do o[i] = res.outcome end
  -- the right layer, verified and timed, then sanitized (sanitize = "all"): unsafe
  t.eq(o[1], "unsafe", tostring(run.results[1].reason))
  t.eq(run.results[1].reason, "compute-sanitizer racecheck at n=100: Error: Race reported between Write access at up+0x90")
  t.eq(table.concat(sanitized, " "), "right.c", "only the verified candidate is sanitized")
  t.truthy(run.results[1].shapes["n=100"].median > 0, "its times are kept")
  t.eq(o[2], "wrong")
  -- poison in tmp comes out as NaN in c (a NaN payload plus w stays NaN)
  t.truthy(run.results[2].reason:find("^output c at n=100 %(the first run%): 100 NaN and 0 Inf"), run.results[2].reason)
  t.eq(o[3], "wrong")
  t.truthy(run.results[3].reason:find("^output c at n=100 %(the first run%): relative L2 error [%d.e-]+ over the limit 0.0001"),
           run.results[3].reason)
  t.eq(o[4], "compile-error")
  t.truthy(run.results[4].reason:find("^no kernel down in the candidate"), run.results[4].reason)
end)

t.test("steps_fixed_inputs_fill_once_and_the_reference_runs_once_per_shape_and_round", function()
  t.eq(fills, 1, "w (and w2 through it) filled once for both shapes and every candidate")
  t.eq(#r.verify_shapes, 4, "unannounced shapes: n=99, n=101, n=301 and one drawn")
  -- and once for each pool set a verified timed run took its inputs from
  local sets = 0
  for _, pool in pairs(s.harness.pools) do for _ in pairs(pool) do sets = sets + 1 end end
  t.truthy(sets >= 2, "at least one pool set at each timed shape")
  t.eq(runs.ref_up, 8 + sets, "2 timed shapes x 2 rounds + 4 unannounced shapes x 1, whatever the number of candidates")
  t.eq(runs.ref_down, 8 + sets)
end)

-- The unannounced shapes are the checks' own work: their share of a
-- candidate's verification is kept apart (what the checks cost is then read
-- from one run), for a candidate verified everywhere and one stopped at a
-- timed shape's first run, which never reached them.
t.test("steps_the_unannounced_shapes_time_is_kept_apart", function()
  local sec = run.results[1].seconds
  t.truthy(sec.unannounced and sec.unannounced > 0 and sec.unannounced < sec.verify,
           string.format("4 unannounced shapes (%s s) within the verification (%.4f s)", tostring(sec.unannounced), sec.verify))
  t.eq(run.results[2].outcome, "wrong")
  t.eq(run.results[2].seconds.unannounced, nil, "wrong at n=100: the unannounced shapes never ran")
end)

-- A pool set's reference outputs are computed the first time a candidate's
-- verified timed run meets the set, inside the candidate's timing: under the
-- harness's limit (on the GPU the reference at T = 4096 takes seconds; under
-- the timing's limit a worker was killed and the candidate called a
-- timeout), then the timing's limit again.
t.test("steps_a_pool_sets_reference_runs_under_the_harness_limit_not_the_timings", function()
  local channel = require "kwb.base.channel"
  local calls, limit0 = {}, channel.limit
  channel.limit = function(seconds, what) calls[#calls + 1] = { seconds, what } end
  local r2 = kwb.recipe {
    name = "fake_steps_pool", backend = "cuda", problem = problem, shapes = { n = { 100, 300 } },
    start = { source = up .. down, defines = { SCALE = "1.0f" } }, launch = r.launch,
    strategy = require("kwb.strategies.list")({ proposals[1] }), verify_shapes = false,
    timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 }, sanitize = false,
  }
  local s2 = r2:session { store = require("kwb.loop.store").open(dir .. "/fake_steps_pool.db") }
  local run2
  local ok, err = pcall(function() run2 = select(2, r2:run { mode = "quiet", seed = 7 }) end)
  channel.limit = limit0
  assert(ok, err)
  local sets, refs, rearmed = 0, 0, 0
  for key, pool in pairs(s2.harness.pools) do
    local n = 0
    for set in pairs(pool) do n = n + 1; t.truthy(set >= 1 and set <= 3, "a GPU shape keeps 3 sets: " .. set) end
    t.truthy(n >= 1, key .. ": the sets the start kernel and the candidate met")
    sets = sets + n
  end
  for i, c in ipairs(calls) do
    local set, key = c[2]:match("^the reference on pool set (%d+) at (n=%d+)$")
    if set then
      refs = refs + 1
      t.eq(c[1], require("kwb.measure").harness_limit, "the harness's limit")
      local phase
      for j = i - 1, 1, -1 do if calls[j][2]:match("^timing") then phase = calls[j]; break end end
      t.eq(phase[2]:match("at (n=%d+)$"), key, "met while timing that shape")
      t.eq(calls[i + 1][2], phase[2], "the timing's limit again")
      t.eq(calls[i + 1][1], phase[1])
      rearmed = rearmed + 1
    end
  end
  t.truthy(sets >= 2, "the start kernel and the candidate at two shapes: a set each at least")
  t.eq(refs, sets, "each set's reference once, off the candidate's clock")
  t.eq(rearmed, refs)
  -- and its time is the harness's, kept apart in the result (the timing's checks are the rest)
  -- (which measurement meets a set first depends on how often each was timed: the start's or the candidate's)
  local with = 0
  for _, res in ipairs { s2.start, run2.results[1] } do
    local sec = res.seconds
    if sec.reference then
      with = with + 1
      t.truthy(sec.reference > 0 and sec.reference < sec.time - sec.calls,
               string.format("the references (%s s) are a part of the timing (%.4f s) outside the calls (%.4f s)",
                             tostring(sec.reference), sec.time, sec.calls))
    end
  end
  t.truthy(with >= 1, "the references' time kept in the result of the measurement that met a set first")
end)

-- A candidate that writes into a fixed input (the weights, filled once a
-- session) is wrong, and the weights are filled again for the ones after it.
t.test("steps_a_changed_fixed_input_is_filled_again_for_the_next_candidate", function()
  local h = require("kwb.measure").harness(r)
  local spoil_down = "void down(int n, const float *tmp, const float *w, float *c) {\n"
                  .. "  for (int i = 0; i < n; i++) c[i] = tmp[i] + w[i % 64] * SCALE;\n  ((float *)w)[0] = 1e6f; }\n"
  local sess = r:session()
  local bad = assert(h:build(sess:candidate({ source = up .. spoil_down, defines = { SCALE = "1.0f" }, name = "spoil_w.c" }),
                             { seconds = {} }))
  local good = assert(h:build(sess:candidate({ source = up .. down, defines = { SCALE = "1.0f" }, name = "right_again.c" }),
                              { seconds = {} }))
  local b = h:bench(r.shapes[1])
  local out, why = h:round(bad, b, 5, 1)
  t.eq(out, "wrong")
  t.eq(why, "input w2 changed by the candidate at n=100 (the first run)")
  t.eq(h:round(good, b, 6, 1), nil, "the next candidate meets the weights as they were")
  t.eq(h:round(good, b, 6, 2), nil)
end)

t.test("steps_scratch_is_poisoned_before_timed_runs_with_the_outputs", function()
  for _, b in ipairs(poisoned) do
    t.eq(b.n == 100 or b.n == 300, true, "only scratch (tmp) goes to poison_before")
  end
  t.truthy(#fake.replays > 0)
  for _, rp in ipairs(fake.replays) do
    local steps = rp.plan.steps
    t.eq(rp.poison[3], steps[1].args[3].n, "tmp all poison as a timed run begins")
    t.eq(rp.poison[7], steps[2].args[4].n, "c all poison as a timed run begins")
    t.eq(rp.poison[6], 0, "w2, a fixed input, never poisoned")
  end
end)

t.test("steps_records_the_error_of_the_timed_output", function()
  local sh = run.results[1].shapes["n=100"]
  t.eq(sh.rel_l2, 0.0, "the right layer is exact here")
  t.eq(sh.max_abs, 0.0)
end)

t.test("steps_plan_mistakes_are_named", function()
  local cuda_b = require "kwb.measure.backends.cuda"
  local fn = { module = fake.compile { source = up .. down }, params = {}, plans = {}, kernels = {}, problem = problem,
               launch = function() return { steps = { { "up", grid = 1, block = 1, args = { "n", "nope", "tmp" } } },
                                            scratch = { tmp = { "f32", 4 } } } end }
  local b = { key = "n=4", shape = { n = 4 }, args = {}, n = 0 }
  t.raises(function() cuda_b.call(fn, b, b.args) end, "'nope' is neither an argument of twostep nor a scratch buffer")
  fn.plans, fn.launch = {}, function() return { steps = { { "up", grid = 1, block = 1, args = { "n", "a" } } },
                                                 scratch = { tmp = { "f32", 0 } } } end
  t.raises(function() cuda_b.call(fn, b, b.args) end, "scratch 'tmp' must be { dtype, n } with n a positive integer")
end)

t.test("steps_problem_fields_are_checked", function()
  local base = function(over)
    local s = { name = "p", vars = { "n" }, args = { { "x", "f32", shape = "n", role = "out" } },
                reference = function() end }
    for k, v in pairs(over) do s[k] = v end
    return s
  end
  t.raises(function() kwb.problem.define(base { draw = "round" }) end, "'draw' must be 'candidate' or 'run', got round")
  t.raises(function() kwb.problem.define(base { tolerance = { rel_l2 = 1e-3, atol = 1 } }) end,
           "rel_l2 replaces atol and rtol")
  t.raises(function() kwb.problem.define(base { tolerance = { l2 = 1 } }) end, "tolerance.l2: expected atol, rtol or rel_l2")
  t.raises(function() kwb.problem.define(base { args = { { "x", "f32", shape = "n", role = "out", fixed = true } } }) end,
           "fixed = true is for inputs")
  t.raises(function() kwb.problem.define(base { args = { { "x", "f32", shape = "n", role = "inout", init = false } } }) end,
           "init = false (filled by a sibling's init) is for inputs (role 'in') only")
  t.raises(function() kwb.problem.define(base { vars = { { "n", min = 2 } } }) end, "vars[1].min must be 0 or 1")
  local p = kwb.problem.define(base { vars = { "n", { "skew", min = 0 } } })
  t.eq(p:check_shape { n = 4, skew = 0 }, true)
  t.eq(select(2, p:check_shape { n = 0, skew = 0 }), "shape variable 'n' must be a positive integer, got 0")
  t.eq(select(2, p:check_shape { n = 1, skew = -1 }), "shape variable 'skew' must be a non-negative integer, got -1")
end)

t.done()
