-- tests/lua/test_certify_hostile.lua: kernels that aim at the parts of the
-- judge that certify a run's numbers (the final round, duplicates by built
-- code) and what stops each.
local t = require "t"
local store = require "kwb.loop.store"

local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")

local function fresh(name)
  local path = tmp .. "/certify_hostile_" .. name .. ".db"
  for _, suffix in ipairs { "", "-wal", "-shm" } do os.remove(path .. suffix) end
  return store.open(path)
end

-- ---- the final round's timed runs ---------------------------------------------

-- hostile_final_round.c is right in its evaluation and idle in the 2nd and
-- 3rd timed runs of each turn of the final round after its first. Seed 7
-- is one whose round, as it was, verified the 1st timed run of each of its
-- turns at both shapes (one place a kernel and shape, drawn once): nothing
-- saw the zeros, the round certified them as an 85x speed-up and named the
-- kernel the pick over an honest 5x one. Every timed run of a turn is
-- verified now; a candidate found wrong in the round is wrong from then on
-- (its stored result revised, never the pick), and the round goes on without it.
t.test("certify_hostile_a_kernel_idle_in_the_final_rounds_timed_runs_is_never_certified", function()
  -- (and an honest kernel, the ikj loop order, which the round certifies once the other is out)
  local ikj = "void matmul(int n, const float *restrict a, const float *restrict b, float *restrict c) {\n"
    .. "    for (int i = 0; i < n; i++) {\n        for (int j = 0; j < n; j++) c[i * n + j] = 0;\n"
    .. "        for (int k = 0; k < n; k++) for (int j = 0; j < n; j++) c[i * n + j] += a[i * n + k] * b[k * n + j];\n"
    .. "    }\n}\n"
  local r = kwb.recipe {
    name = "final_round_here", problem = require("kwb.problems.matmul") {}, shapes = { n = { 96, 112 } },
    verify_shapes = false, start = "../../kernels/host/matmul_naive.c", forbid = { "default", "-global-state" },
    strategy = require("kwb.strategies.list")({ { file = "../candidates/hostile_final_round.c" },
                                                { source = ikj, name = "ikj.c" } }, "final-round"),
    flags = { "-O3" }, budget = { candidates = 5, minutes = 2, timeout = 5 },
    timing = { warmup = 0.002, min_samples = 3, cap = 0.05, target = 0.05 }, seed = 7,
  }
  local sm, run = r:run { mode = "quiet", store = fresh("round"), certify = 2 }
  local res, honest = run.results[1], run.results[2]
  local cert = t.truthy(sm.certificate, "a certificate")
  -- whatever the kernel did, it is never the pick: the honest kernel is
  t.eq(cert.pick, honest.id)
  t.eq(r:session().best.id, honest.id)
  t.eq(honest.outcome, "accepted")
  -- (the kernel tells the round by the length of its first run of calls at a shape, which the
  -- evaluation's timing decides: on a machine where its guess misses it never idles, and is an
  -- honest, slower kernel)
  if res.outcome ~= "wrong" then
    t.eq(res.outcome, "slower", "never idle: an honest slower kernel")
    return
  end
  -- (its first turn at n=96 is right: it tells the round by that turn's length)
  t.eq(res.reason, "in the final round: output c at n=112 (timed run 2): 12542 elements off (max abs error 44.2), "
       .. "first c[1]")
  t.eq(res.score, nil)
  t.eq(sm.funnel.wrong, 1)
  t.eq(sm.funnel.accepted, 1)
  t.eq(#cert.entries, 2, "the round timed again without it: the start kernel and the honest one")
  t.eq(cert.entries[2].id, honest.id)
  local stored = r:session().store:known(r:session().ctx, res.id)
  t.eq(stored.outcome, "wrong", "revised in the cache")
  t.eq(stored.reason, res.reason)
end)

-- ---- duplicates by built code -------------------------------------------------

-- The same code with a flag the code reads, kept in an allocated section
-- named like the compiler's comment: loaded with the module, and once left
-- out of the code digest by its name (the recipe drops the global-state
-- rule, which reads the flag as writable data: a label the assembler
-- defines passes it, tests/lua/test_text_rules.lua). The kernel whose flag says "skip"
-- (it returns at once) was `duplicate` of the honest one, measured before:
-- never run, it took its score. Now a loaded section counts whatever its
-- name: other code, measured, and wrong.
t.test("certify_hostile_a_flag_in_a_section_named_like_a_comment_is_code", function()
  local body = "void matmul(int n, const float *a, const float *b, float *c) {\n"
    .. "    if (skip) return;\n"
    .. "    for (int i = 0; i < n; i++)\n"
    .. "        for (int j = 0; j < n; j++) {\n"
    .. "            float acc = 0;\n"
    .. "            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];\n"
    .. "            c[i * n + j] = acc;\n"
    .. "        }\n"
    .. "}\n"
  local function flagged(v)
    return string.format("__attribute__((section(\".comment.k\"))) const volatile int skip = %d;\n", v) .. body
  end
  local r = kwb.recipe {
    name = "flag_here", problem = require("kwb.problems.matmul") {}, shapes = { n = { 16, 24 } },
    start = "../../kernels/host/matmul_naive.c", forbid = { "default", "-global-state" },
    strategy = require("kwb.strategies.list")({ { source = flagged(0), name = "flag0.c" },
                                                { source = flagged(1), name = "flag1.c" } }, "flag"),
    flags = { "-O1" }, budget = { candidates = 5, minutes = 1, timeout = 5 },
    timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.05 }, seed = 7,
  }
  local sm, run = r:run { mode = "quiet", store = fresh("flag"), certify = 0 }
  local honest, skips = run.results[1], run.results[2]
  t.truthy(honest.outcome == "accepted" or honest.outcome == "slower", honest.outcome)
  t.eq(skips.outcome, "wrong")
  t.eq(skips.duplicate_of, nil)
  t.eq(skips.reason, "output c at n=16 (the first run): 256 elements never written, first c[1]")
  t.eq(sm.duplicates, 0)
end)

-- ---- a result judged under another tolerance ---------------------------------

-- A kernel off by 0.05 everywhere, right under a loose tolerance (a recipe's
-- matmul { tolerance = ... }), is accepted there. The problem's key is its
-- name either way: a recipe of the default tolerance with the same shapes and
-- flags knew that result as its own, never verified it, and named it its
-- best. A result records the tolerance it was judged under; one judged
-- under another is evaluated again.
t.test("certify_hostile_a_result_accepted_under_a_looser_tolerance_is_judged_again", function()
  local sloppy = "void matmul(int n, const float *a, const float *b, float *c) {\n"
    .. "    for (int i = 0; i < n; i++) {\n"
    .. "        for (int j = 0; j < n; j++) c[i * n + j] = 0.05f;\n"
    .. "        for (int k = 0; k < n; k++)\n"
    .. "            for (int j = 0; j < n; j++) c[i * n + j] += a[i * n + k] * b[k * n + j];\n"
    .. "    }\n"
    .. "}\n"
  local st = fresh("tolerance")
  local function recipe(tolerance)
    return kwb.recipe {
      name = "tolerance_here", problem = require("kwb.problems.matmul") { tolerance = tolerance },
      shapes = { n = { 32, 48 } }, start = "../../kernels/host/matmul_naive.c",
      strategy = require("kwb.strategies.list")({ { source = sloppy, name = "sloppy.c" } }, "sloppy"),
      flags = { "-O1" }, budget = { candidates = 5, minutes = 1, timeout = 5 },
      timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.05 }, seed = 7,
    }
  end
  local _, loose = recipe { atol = 0.5, rtol = 0 }:run { mode = "quiet", store = st, certify = 0 }
  t.eq(loose.results[1].outcome, "accepted", "right under atol = 0.5")
  local r = recipe(nil)
  local sm, run = r:run { mode = "quiet", store = st, certify = 0 }
  t.eq(sm.known, 0, "not known under the default tolerance")
  local res = run.results[1]
  t.eq(res.outcome, "wrong")
  t.eq(res.reason, "output c at n=32 (the first run): 1024 elements off (max abs error 0.05), first c[1]")
  t.eq(r:session().best.id, r:session().start.id)
end)

-- ---- a tolerance that admits a constant none of the probes tried ---------------

-- c = a^8 with a drawn uniform in [0, 1]: most of c lies near 0, its mean is
-- about 0.11 and its largest elements near 1. Under atol = 0.5 the constant
-- 0.5 (the middle of c's range) is within the tolerance everywhere; 0 and the
-- mean are not, and every plant is rejected (1 is off by 1 near 0, a copy of
-- a by 0.65 at a = 0.74). The recipe loaded, its self-test said "7 of 7",
-- and a kernel that writes 0.5 was accepted. The probes now take the constant
-- nearest to every element's interval (from the reference's least and
-- largest elements), and one constant must pass fresh draws as well: the
-- one named lies in every draw's interval.
t.test("certify_hostile_a_tolerance_that_admits_the_middle_of_the_range_is_refused", function()
  local pow8 = "void pow8(int n, const float *a, float *c) {\n"
    .. "    for (int i = 0; i < n; i++) { float x = a[i] * a[i]; x = x * x; c[i] = x * x; }\n}\n"
  local half = "void pow8(int n, const float *a, float *c) {\n    for (int i = 0; i < n; i++) c[i] = 0.5f;\n}\n"
  local p = kwb.problem.define {
    name = "pow8", vars = { "n" }, fn = "pow8",
    args = { { "n", "i32", value = "n" }, { "a", "f32", shape = "n", role = "in", init = { "uniform", 0, 1 } },
             { "c", "f32", shape = "n", role = "out" } },
    reference = { source = pow8:gsub("void pow8%(", "void pow8_ref("), fn = "pow8_ref" },
    tolerance = { atol = 0.5, rtol = 0 },
  }
  local r = kwb.recipe {
    name = "middle_constant", problem = p, shapes = { n = { 4096 } }, verify_shapes = false,
    start = { source = pow8, name = "pow8.c" },
    strategy = require("kwb.strategies.list")({ { source = half, name = "half.c" } }, "half"),
    budget = { candidates = 2, minutes = 1, timeout = 5 },
    timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 }, seed = 5,
  }
  local ok, err = pcall(r.run, r, { mode = "quiet", store = fresh("middle"), certify = 0 })
  t.eq(ok, false, "refused")
  t.eq(err, "recipe middle_constant: at shape n=4096 every element of output c set to 0.499705 passes the tolerance: "
       .. "a kernel that computes nothing would be judged right (choose shapes, inputs or a tolerance under which the "
       .. "reference's output is not a constant)")
end)

t.done()
