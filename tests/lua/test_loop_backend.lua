-- tests/lua/test_loop_backend.lua: the loop's CUDA adapter (kwb.measure.backends.cuda)
-- driven through a stand-in for kwb.cuda that runs C on the host: launch
-- plans from the recipe per shape and parameters, the device reference, the
-- PTX rule view, timing and a failing launch, all without a GPU. (The real
-- thing runs in tests/gpu/loop.lua.)
local t = require "t"

local fake = require "fake_cuda" ()
local launches, poisoned = fake.launches, fake.poisoned

local vecadd = require "fake_vecadd"
local vec, problem = vecadd.vec, vecadd.problem

local proposals = {
  { BLOCK = 128 },
  { source = "#define SAY vpri##ntf\nint SAY(const char *f, void *a);\n" .. vec
                 .. "  for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n  SAY(0, 0);\n}\n"
                 .. "int SAY(const char *f, void *a) { (void)f; (void)a; return 0; }\n", params = { BLOCK = 64 } },
  { BLOCK = 2048 },
}

local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local r = kwb.recipe {
  name = "fake_cuda", backend = "cuda", problem = problem, shapes = { n = { 1000, 3000 } },
  start = { source = vec .. "  for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n}\n", defines = { BLOCK = 32 } },
  template = "../../kernels/host/matmul_naive.c",   -- replaced below: any file will do for the schema
  launch = function(shape, p) return { grid = { (shape.n + p.BLOCK - 1) // p.BLOCK }, block = { p.BLOCK } } end,
  strategy = require("kwb.strategies.list")(proposals),
  timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 },
  sanitize = false,   -- (compute-sanitizer needs the GPU: test_loop_steps stands one in)
}
local sm, run
t.test("loop_backend_cuda_runs_the_loop_through_the_adapter", function()
  local s = r:session { store = require("kwb.loop.store").open(dir .. "/fake_cuda.db") }
  s.template_source = vec .. "  for (int i = 0; i < n; i++) c[i] = a[i] + b[i] + 0 * BLOCK;\n}\n"
  sm, run = r:run { mode = "quiet" }
  t.eq(sm.candidates, 3)
  t.eq(run.results[1].outcome == "accepted" or run.results[1].outcome == "slower", true, run.results[1].outcome)
  t.eq(run.results[2].outcome, "forbidden")
  t.eq(run.results[2].rule, "printf")
  t.truthy(run.results[2].reason:find("vprintf at the module (.-found in the PTX)"), run.results[2].reason)
  t.eq(run.results[3].outcome, "crashed")
  t.eq(run.results[3].reason, "the call failed at n=1000: too many threads per block (2048)")
end)

t.test("loop_backend_cuda_launch_plans_follow_shape_and_parameters", function()
  local seen = {}
  for _, l in ipairs(launches) do seen[l.kernel .. " " .. l.grid .. "x" .. l.block] = true end
  t.truthy(seen["vecadd_ref 1000x1"], "the reference's own plan")
  t.truthy(seen["vecadd 32x32"], "the start kernel: BLOCK = 32 at n = 1000")
  t.truthy(seen["vecadd 94x32"], "the start kernel at n = 3000")
  t.truthy(seen["vecadd 8x128"], "the first proposal: BLOCK = 128")
  t.truthy(seen["vecadd 1x2048"], "the launch that fails")
end)

t.test("loop_backend_cuda_timed_runs_get_fresh_inputs_and_poisoned_outputs", function()
  t.truthy(#fake.replays > 10, "timed runs replay the plan")
  local last, fresh, same, plans = {}, 0, 0, 0
  for _, rp in ipairs(fake.replays) do
    local c = rp.plan.steps[1].args[4]
    t.eq(rp.poison[4], c.n, "every element of c poison as a timed run begins")
    local prev = last[rp.plan]
    if prev then
      if prev == rp.sums[2] then same = same + 1 else fresh = fresh + 1 end
    else
      plans = plans + 1
    end
    last[rp.plan] = rp.sums[2]
  end
  t.eq(same, 0, "no timed run meets the inputs of the one before it")
  -- (a plan for each of the 2 candidates at the 2 shapes, and where the final round or the start
  -- kernel's turns timed a kernel on a bench of its own, one for each of those: how many depends on
  -- which comparisons the round decided in time)
  t.truthy(plans >= 4, "at least 4 plans: " .. plans)
  t.truthy(fresh > 10, "timed runs after their plan's first, each on new inputs: " .. fresh)
  t.eq(#poisoned, 0, "a plan of one kernel has no scratch to poison in its graph")
end)

t.test("loop_backend_cuda_a_timed_run_is_checked_in_one_look", function()
  -- the warm-up and timed runs not verified against the reference: guard
  -- bands and unwritten outputs in one call; the verified run of a timing
  -- (at least 2 kernels timed at 2 shapes) is checked in full
  t.eq(fake.unchecked, 0, "every timed run checked before the next")
  t.eq(fake.looks + fake.full, #fake.replays, "one look or one full check after each")
  t.truthy(fake.full >= 4 and fake.looks > fake.full, string.format("%d full, %d looks", fake.full, fake.looks))
  local verify = require "kwb.measure.verify"
  local a, b, c = fake.buffer("f32", 8), fake.buffer("f32", 8), fake.buffer("f32", 8)
  a:fill(1); b:fill(2); c:poison()
  for i = 1, 5 do c[i] = 3 end
  local looks = fake.looks
  local out, why = verify.check(problem, require "kwb.measure.backends.cuda", { key = "n=8", bufs = { a = a, b = b, c = c } },
                                "timed run 3", false, true)
  t.eq(out, "wrong")
  t.eq(why, "output c at n=8 (timed run 3): 3 elements never written, first c[6]")
  t.eq(fake.looks, looks + 1, "from the same look as the guard bands")
  c[6], c[7], c[8] = 3, 3, 3
  t.eq(verify.check(problem, require "kwb.measure.backends.cuda", { key = "n=8", bufs = { a = a, b = b, c = c } },
                    "timed run 4", false, true), nil, "every element written")
end)

t.test("loop_backend_cuda_verified_timed_runs_meet_each_pool_set_at_most_once", function()
  local inputs, timed = require "kwb.measure.inputs", require "kwb.measure.timed"
  local h = require("kwb.measure").harness(r)
  local fn = assert(h:build(r:session():candidate(r.start), { seconds = {} }))
  local b = h:bench(r.shapes[1])   -- n = 1000: 4000 bytes of expected output a set
  t.eq(inputs.sets(h, b), 8)
  t.eq(inputs.sets(h, b, 3), 3, "as many as one evaluation verifies at a shape: a first look, a timing, a noisy one's second")
  inputs.pool_bytes = 8000
  t.eq(inputs.sets(h, b), 2, "as many sets as the bytes allow")
  local refs = fake.runs.vecadd_ref or 0
  local opts = { warmup = 0, warmup_min = 1, min_samples = 3, max_samples = 3, cap = 1, target = 1 }
  for i = 1, 3 do
    t.truthy(timed.shape(h, fn, b, opts, 77), "timing " .. i)
    t.eq(b.pools, math.min(i, 2), "pool sets met after timing " .. i)
  end
  t.eq((fake.runs.vecadd_ref or 0) - refs, 3, "the reference ran for each set once, then for the run of its own")
  local kept = 0
  for _ in pairs(h.pools[b.key]) do kept = kept + 1 end
  t.eq(kept, 2)
  t.truthy(timed.shape(h, fn, b, opts, 79))   -- (its own-inputs run is at the other shape)
  t.eq(b.pools, 1, "another candidate (seed) meets them afresh")
  t.eq((fake.runs.vecadd_ref or 0) - refs, 3, "and their expected outputs are kept")
  inputs.pool_bytes = 2 << 30
end)

-- A candidate that changes an input in the verified run that first meets a
-- set is wrong, and the set's expected outputs, computed before it ran, stay
-- right for the candidates after it.
t.test("loop_backend_cuda_a_pool_sets_expected_outputs_come_before_any_candidate", function()
  local timed = require "kwb.measure.timed"
  local h = require("kwb.measure").harness(r)
  local s = r:session()
  local spoil = assert(h:build(s:candidate({ source = vec .. "  for (int i = 0; i < n; i++) { c[i] = 0; ((float *)b)[i] = 0; }\n}\n",
                                            name = "spoil", defines = { BLOCK = 32 }, params = { BLOCK = 32 } }), { seconds = {} }))
  local honest = assert(h:build(s:candidate(r.start), { seconds = {} }))
  local b = h:bench(r.shapes[1])
  local opts = { warmup = 0, warmup_min = 1, min_samples = 3, max_samples = 3, cap = 1, target = 1 }
  local st, why, out = timed.shape(h, spoil, b, opts, 77)   -- meets set (77 % 3) + 1 = 3 first
  t.eq(st, nil)
  t.eq(out, "wrong")
  t.eq(why, "input b changed by the candidate at n=1000 (a run after the timed runs)")
  t.truthy(h.pools[b.key][3], "set 3's expected outputs kept")
  t.truthy(timed.shape(h, honest, b, opts, 80), "an honest kernel meeting set 3 next is right")   -- (80 % 3) + 1 = 3
end)

-- Pool sets recur across candidates: one verified run of each candidate, at
-- a shape drawn from its seed, is on inputs of its own (seed 78 draws n=1000,
-- seed 79 n=3000), with the reference run for them.
t.test("loop_backend_cuda_one_verified_run_a_candidate_is_on_inputs_of_its_own", function()
  local timed = require "kwb.measure.timed"
  local h = require("kwb.measure").harness(r)
  local fn = assert(h:build(r:session():candidate(r.start), { seconds = {} }))
  local opts = { warmup = 0, warmup_min = 1, min_samples = 3, max_samples = 3, cap = 1, target = 1 }
  local b1, b2 = h:bench(r.shapes[1]), h:bench(r.shapes[2])
  local refs = fake.runs.vecadd_ref or 0
  t.truthy(timed.shape(h, fn, b1, opts, 78))
  t.eq(b1.pools, 0, "seed 78's first verified run at n=1000: no pool set")
  t.eq((fake.runs.vecadd_ref or 0) - refs, 1, "the reference ran for its own inputs")
  t.eq(h.pools, nil, "nothing kept")
  t.truthy(timed.shape(h, fn, b1, opts, 78))
  t.eq(b1.pools, 1, "its next one takes a set")
  t.truthy(timed.shape(h, fn, b2, opts, 78))
  t.eq(b2.pools, 1, "at n=3000 its first takes a set")
  t.truthy(timed.shape(h, fn, b1, opts, 79))
  t.eq(b1.pools, 1, "seed 79 (drawn n=3000) takes a set at n=1000 at once")
end)

-- A round's reference, after the shape's first, runs after the candidate's
-- call, once its inputs are found as drawn: no expected value is on the
-- device while candidate code runs, none is held or put back, and the
-- outputs are poisoned once compared. A candidate that changed an input is
-- wrong before the reference runs.
t.test("loop_backend_cuda_a_rounds_reference_runs_after_the_call_and_is_held_nowhere", function()
  local B = require "kwb.measure.backends.cuda"
  local h = require("kwb.measure").harness(r)
  local s = r:session()
  local fn = assert(h:build(s:candidate(r.start), { seconds = {} }))
  local spoil = assert(h:build(s:candidate({ source = vec .. "  for (int i = 0; i < n; i++) { c[i] = a[i] + b[i]; ((float *)a)[0] = 7; }\n}\n",
                                            name = "spoil", defines = { BLOCK = 32 }, params = { BLOCK = 32 } }), { seconds = {} }))
  local b = h:bench(r.shapes[1])
  local holds, hold = 0, B.hold
  B.hold = function(...) holds = holds + 1; return hold(...) end
  local function order(f)
    local from = #launches + 1
    local out, why = f()
    local names = {}
    for i = from, #launches do names[#names + 1] = launches[i].kernel end
    return table.concat(names, " "), out, why
  end
  local first, out1 = order(function() return h:round(fn, b, 5, 1, 5) end)
  local held_first = holds
  local second, out2, why2 = order(function() return h:round(fn, b, 5, 2, 5) end)
  local held_second = holds - held_first
  local spoiled, out3, why3 = order(function() return h:round(spoil, b, 6, 2, 5) end)
  B.hold = hold
  t.eq(out1, nil)
  t.eq(first, "vecadd_ref vecadd", "the shape's first round: the reference first (the degenerate-problem check reads it)")
  t.eq(held_first, 1, "its expected outputs held off the device meanwhile")
  t.eq(out2, nil, why2)
  t.eq(second, "vecadd vecadd_ref", "then the candidate first, the reference after it")
  t.eq(held_second, 0, "nothing held")
  t.eq(select(1, b.refs.c:poisoned()), 1000, "the expected outputs poisoned once compared")
  t.eq(out3, "wrong")
  t.eq(why3, "input a changed by the candidate at n=1000 (the second run, other inputs in the same buffers)")
  t.eq(spoiled, "vecadd", "the reference never ran on inputs a candidate changed")
end)

-- An inout buffer's reference starts from a copy of its initial values in
-- the harness, which a candidate could reach during its call: for a verified
-- run on inputs of its own, the reference runs before the call, not after.
t.test("loop_backend_cuda_an_inout_runs_reference_comes_before_the_call", function()
  local inc = "void inc(int n, const float *a, float *y) {\n  for (int i = 0; i < n; i++) y[i] += a[i];\n}\n"
  local p = kwb.problem.define {
    name = "inc_fake", vars = { "n" }, fn = "inc",
    args = { { "n", "i32", value = "n" }, { "a", "f32", shape = "n", role = "in" },
             { "y", "f32", shape = "n", role = "inout" } },
    reference = { cuda = { source = inc:gsub("void inc", "void inc_ref"), fn = "inc_ref",
                           launch = function(shape) return { grid = { shape.n }, block = { 1 } } end } },
    tolerance = { atol = 0, rtol = 0 },
  }
  local ri = kwb.recipe { name = "inc_fake", backend = "cuda", problem = p, shapes = { n = { 1000 } },
                          start = { source = inc, defines = { BLOCK = 32 } },
                          launch = function(shape, q) return { grid = { (shape.n + q.BLOCK - 1) // q.BLOCK }, block = { q.BLOCK } } end,
                          sanitize = false }
  local h = require("kwb.measure").harness(ri)
  local fn = assert(h:build(ri:session():candidate(ri.start), { seconds = {} }))
  local b = h:bench(ri.shapes[1])
  local from = #launches + 1
  local opts = { warmup = 0, warmup_min = 1, min_samples = 3, max_samples = 3, cap = 1, target = 1 }
  t.truthy(require("kwb.measure.timed").shape(h, fn, b, opts, 78))
  t.eq(b.pools, 0, "one verified run, on inputs of its own")
  local names = {}
  for i = from, #launches do names[#names + 1] = launches[i].kernel end
  local seq = table.concat(names, " ")
  t.eq(select(2, seq:gsub("inc_ref", "")), 1, "the reference ran once: " .. seq)
  t.truthy(seq:match("inc_ref inc$"), "the reference, then the verified call: " .. seq)
end)

-- Where the device cannot reach pageable memory (the stand-in says so), the
-- expected values are held in it, not in page-locked memory a kernel could read.
t.test("loop_backend_cuda_expected_values_are_held_out_of_the_devices_reach", function()
  local B = require "kwb.measure.backends.cuda"
  local ref, out = fake.buffer("f32", 4), fake.buffer("f32", 4)
  for i = 1, 4 do ref[i], out[i] = i, i end
  local kept = B.hold(ref, nil, true)
  for i = 1, 4 do ref[i] = i end
  local copy = B.hold(ref)
  t.eq(tostring(copy):match("^kwb.buffer") ~= nil, true, "pageable: a kwb.host buffer, not page-locked: " .. tostring(copy))
  t.eq(copy.bytes, 16)
  t.truthy(kept ~= copy, "a kept one is a copy of its own")
  for i = 1, 4 do ref[i] = i end
  t.eq(B.hold(ref), copy, "the buffer's own reused")
  t.eq(select(1, ref:poisoned()), 4, "the device copy poisoned")
  t.eq(B.compare(out, ref, { atol = 0, rtol = 0 }).ok, true, "put back for the comparison")
  t.eq(select(1, ref:poisoned()), 4, "and poisoned again")
end)

-- A kept copy under an exact tolerance: an output whose digest matches is
-- right without the values put back (the device copy stays poisoned); one
-- element off is compared in full and named; a loose tolerance always is.
t.test("loop_backend_cuda_an_exact_output_matches_a_kept_copy_by_its_digest", function()
  local B = require "kwb.measure.backends.cuda"
  local n = 1000
  local ref, out = fake.buffer("f32", n), fake.buffer("f32", n)
  for i = 1, n do ref[i], out[i] = i * 0.5, i * 0.5 end
  local kept = B.hold(ref, nil, true)
  B.hold(ref, kept)   -- (put in place for a run, as a pool set is)
  local exact = { atol = 0, rtol = 0 }
  local compare, compares = fake.compare, 0
  fake.compare = function(...) compares = compares + 1; return compare(...) end
  local d = B.compare(out, ref, exact)
  fake.compare = compare
  t.eq(d.ok, true)
  t.eq(d.max_abs, 0)
  t.eq(d.n, n)
  t.eq(compares, 0, "matched by the digest: the values neither put back nor compared")
  t.eq(select(1, ref:poisoned()), n)
  out[700] = 350.25
  d = B.compare(out, ref, exact)
  t.eq(d.ok, false)
  t.eq(d.bad, 1)
  t.eq(d.first_bad, 700, "compared in full, the element named")
  t.eq(select(1, ref:poisoned()), n, "and poisoned again")
  out[700] = 350
  d = B.compare(out, ref, { atol = 1e-3, rtol = 0 })
  t.eq(d.ok, true)
  t.eq(d.max_abs, 0)
  local nan = fake.buffer("f32", 4)
  for i = 1, 4 do nan[i] = 0 / 0 end
  local same = fake.buffer("f32", 4)
  same:copy(nan)
  local kept_nan = B.hold(nan, nil, true)
  B.hold(nan, kept_nan)
  t.eq(B.compare(same, nan, exact).nan, 4, "values with NaN are compared in full, as they always were")
end)

t.test("loop_backend_cuda_timing_splits_into_the_calls_and_the_checks_around_them", function()
  local sec = run.results[1].seconds
  t.eq(type(sec.calls), "number", "the timed calls' wall time is kept")
  t.truthy(sec.calls > 0 and sec.calls < sec.time,
           string.format("the calls (%.4f s) are part of the timing (%.4f s), the checks the rest", sec.calls, sec.time))
  t.eq(run.results[3].seconds.calls, nil, "a candidate that crashed in verification was never timed")
end)

-- The unannounced shapes take the run's inputs (the same for every
-- candidate), so their reference runs once a run and is held off the device,
-- while every candidate is still called there; at the timed shapes each
-- candidate's first round is on inputs of its own, the reference run for
-- each, and its second on the run's, whose reference runs once a run.
t.test("loop_backend_cuda_an_unannounced_shapes_reference_runs_once_a_run", function()
  local h = require("kwb.measure").harness(r)
  local s = r:session()
  local unannounced = {}
  for _, sh in ipairs(r.verify_shapes) do unannounced[sh.shape.n] = sh.key end
  t.eq(#r.verify_shapes, 4, "n=255, n=257 (one off the small base), n=3001 and one drawn")
  local digests, refs, timed_refs = {}, {}, {}
  -- (the timings drawn out: their checks' references depend on how many samples the clock allows)
  h.time_shape = function() return { median = 1e-3, min = 1e-3, p10 = 1e-3, p90 = 1e-3, spread = 0, n = 5 } end
  for _, seed in ipairs { 5, 6 } do
    local from = #launches + 1
    local res = h:measure(s:candidate(r.start), { seconds = {}, shapes = {}, seed = seed })
    t.eq(res.outcome, nil, tostring(res.reason))
    digests[seed] = h:bench(r.verify_shapes[1]).bufs.a:checksum()
    timed_refs[seed] = 0
    for i = from, #launches do
      local l = launches[i]
      if l.kernel == "vecadd_ref" and unannounced[l.grid] then refs[l.grid] = (refs[l.grid] or 0) + 1
      elseif l.kernel == "vecadd_ref" then timed_refs[seed] = timed_refs[seed] + 1 end
    end
  end
  for n, key in pairs(unannounced) do
    t.eq(refs[n], 1, "the reference at " .. key .. " ran once for both candidates")
  end
  t.eq(digests[5], digests[6], "both candidates met the same inputs at " .. r.verify_shapes[1].key)
  t.eq(timed_refs[5], 2 * #r.shapes, "the first candidate: both rounds' references at each timed shape")
  t.eq(timed_refs[6], #r.shapes, "the second: its first rounds' alone (the second rounds' were held)")
end)

-- Without stored ceilings the backend measures them; the tensor rate (cuBLAS
-- loaded and timed) only where some shape's flops could bind its floor.
t.test("loop_backend_cuda_the_tensor_rate_is_measured_only_where_flops_can_bind", function()
  local B, core = require "kwb.measure.backends.cuda", require "kwb.core"
  local cuda = package.loaded["kwb.cuda"]
  local saved = { cuda.ceilings, cuda.copy_bandwidth, core.cuda_measure_fma, core.cuda_measure_bf16 }
  local bf16 = 0
  cuda.ceilings = function() return nil end
  cuda.copy_bandwidth = function() return 1e12 end
  core.cuda_measure_fma = function() return 1e13 end
  core.cuda_measure_bf16 = function() bf16 = bf16 + 1; return 1e15 end
  local ok, err = pcall(function()
    local vec = B.ceilings(nil, { { bytes = 12e7, flops = 1e7 } })   -- vector add, n = 10^7
    t.eq(bf16, 0, "vector add: its flops at the FMA rate (1 us) never outlast its bytes (120 us)")
    t.eq(vec.flops, 1.2e13, "the FMA rate")
    local floor = require("kwb.measure.ceilings").floor
    t.eq(floor(vec, 12e7, 1e7), floor({ bandwidth = 1.2e12, flops = 1.2e15 }, 12e7, 1e7), "the same floor as with it")
    local mm = B.ceilings(nil, { { bytes = 2e8, flops = 2 * 4096 ^ 3 } })
    t.eq(bf16, 1, "SGEMM at 4096^3: its flops bind")
    t.eq(mm.flops, 1.2e15)
    B.ceilings({ bandwidth = 5e12 }, { { bytes = 12e7, flops = 1e7 } })
    t.eq(bf16, 2, "a recipe's own ceilings: always")
    B.ceilings(nil, nil)
    t.eq(bf16, 3, "the shapes' work unknown: always")
  end)
  cuda.ceilings, cuda.copy_bandwidth, core.cuda_measure_fma, core.cuda_measure_bf16 = table.unpack(saved)
  if not ok then error(err, 0) end
end)

-- A candidate on the device reaches every buffer of the context (pointer
-- arithmetic): one that, timed at its last shape, writes one guard-band
-- byte of every other buffer it was given is found by the look after its
-- last call at the benches another shape used, `wrong`, and the candidates
-- after it meet clean guard bands.
t.test("loop_backend_cuda_guard_bands_of_other_benches_are_looked_at_after_the_last_call", function()
  local saboteur = "static unsigned char *seen[64];\nstatic int nseen, done[64], at_last;\n" .. vec
                   .. "  for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n"
                   .. "  unsigned char *args[3] = { (unsigned char *)a, (unsigned char *)b, (unsigned char *)c };\n"
                   .. "  for (int j = 0; j < 3; j++) {\n    int k = 0;\n"
                   .. "    while (k < nseen && seen[k] != args[j]) k++;\n"
                   .. "    if (k == nseen && nseen < 64) seen[nseen++] = args[j];\n  }\n"
                   .. "  if (n != 3000 || ++at_last <= 2) return;\n"
                   .. "  for (int k = 0; k < nseen; k++)\n"
                   .. "    if (!done[k] && seen[k] != args[0] && seen[k] != args[1] && seen[k] != args[2]) {\n"
                   .. "      seen[k][-1] ^= 0xFF;\n      done[k] = 1;\n    }\n}\n"
  local honest = vec .. "  for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n}\n"
  local rs = kwb.recipe {
    name = "fake_cuda_sabotage", backend = "cuda", problem = problem, shapes = { n = { 1000, 3000 } },
    verify_shapes = false, start = { source = honest, defines = { BLOCK = 32 } },
    template = "../../kernels/host/matmul_naive.c",
    launch = function(shape, p) return { grid = { (shape.n + p.BLOCK - 1) // p.BLOCK }, block = { p.BLOCK } } end,
    forbid = { "default", "-global-state" },
    strategy = require("kwb.strategies.list")({ { source = saboteur, params = { BLOCK = 32 } },
                                                 { source = "/* 2 */\n" .. honest, params = { BLOCK = 32 } },
                                                 { source = "/* 3 */\n" .. honest, params = { BLOCK = 32 } } }),
    timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 },
    sanitize = false,
  }
  local _, srun = rs:run { mode = "quiet", store = require("kwb.loop.store").open(dir .. "/fake_sabotage.db") }
  t.eq(#srun.results, 3)
  t.eq(srun.results[1].outcome, "wrong")
  t.eq(srun.results[1].reason, "the candidate wrote outside input a at n=1000 (found after its last call): byte "
                               .. "offsets -1 to -1 of a buffer of 4000 bytes")
  for i = 2, 3 do
    local res = srun.results[i]
    t.truthy(res.outcome == "accepted" or res.outcome == "slower", tostring(res.outcome) .. ": " .. tostring(res.reason))
  end
end)

t.test("loop_backend_cuda_results_are_keyed_by_the_device_kind", function()
  local st = require("kwb.loop.store").open(dir .. "/fake_cuda.db")
  local rows = st.cache:results(run.results[1].id)
  t.eq(#rows, 2)
  t.eq(rows[1].device, "fake-gpu sm_00")
end)

t.done()
