-- tests/lua/test_judge_review.lua: what a hostile review of the reference
-- computed after the candidate's call (5bc549a) found, each a test that
-- failed before its fix: inputs rewritten to keep an unkeyed checksum, a
-- timed run's own reference run on inputs a candidate changed, a round's
-- reference under the candidate's deadline, kept expected outputs of an
-- earlier run.
local t = require "t"
local core = require "kwb.core"

local fake = require "fake_cuda" ()
local launches = fake.launches

-- On the device dbuf:checksum() (kwb_cuda_buffer_checksum) is an unkeyed
-- sum of mix(word ^ (index*g + K0)) with public constants, which a kernel
-- can keep while rewriting the words. The stand-in's host buffers use
-- SHA-256 instead: give them the device's checksum (kwb_cuda_checksum_host
-- computes exactly what the device kernel does), so a judge that relied on
-- it would be seen here as on a GPU.
local methods = getmetatable(fake.buffer("u8", 1)).methods
methods.checksum = function(b) return core.cuda_checksum_host(b:raw()) end

local vecadd = require "fake_vecadd"
local vec, problem = vecadd.vec, vecadd.problem
local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local r = kwb.recipe {
  name = "vecadd_review", backend = "cuda", problem = problem, shapes = { n = { 1000, 3000 } },
  start = { source = vec .. "  for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n}\n", defines = { BLOCK = 32 } },
  launch = function(shape, p) return { grid = { (shape.n + p.BLOCK - 1) // p.BLOCK }, block = { p.BLOCK } } end,
  timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 },
  sanitize = false,
}
local s = r:session { store = require("kwb.loop.store").open(dir .. "/review.db") }
local function build(h, source, name)
  return assert(h:build(s:candidate({ source = source, name = name, defines = { BLOCK = 32 }, params = { BLOCK = 32 } }),
                        { seconds = {} }))
end
local opts = { warmup = 0, warmup_min = 1, min_samples = 3, max_samples = 3, cap = 1, target = 1 }

-- A kernel that computes nothing: it zeroes almost all of a and
-- b, fixes one word of each so the unkeyed device checksum is unchanged
-- (mix is a bijection: invert it), and writes c = a' + b' (zeros but for two
-- elements). The reference runs after the call: the inputs' digests
-- are keyed with a secret (kwb.measure.inputs), so the rewrite is seen first.
local forge = [[
typedef unsigned long long u64;
static u64 mix(u64 z) { z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull; z = (z ^ (z >> 27)) * 0x94d049bb133111ebull; return z ^ (z >> 31); }
static u64 inv(u64 a) { u64 x = a; for (int i = 0; i < 6; i++) x *= 2 - a * x; return x; }
static u64 unshift(u64 z, int s) { u64 x = z; for (int i = 0; i <= 64 / s; i++) x = z ^ (x >> s); return x; }
static u64 unmix(u64 z) {
  z = unshift(z, 31); z *= inv(0x94d049bb133111ebull); z = unshift(z, 27); z *= inv(0xbf58476d1ce4e5b9ull);
  return unshift(z, 30);
}
static int tame(float f) { return f == f && f < 1e30f && f > -1e30f; }
static void forge(float *p, int n) {   /* n even */
  const u64 K = 0xd1b54a32d192ed03ull, g = 0x9e3779b97f4a7c15ull;
  u64 *w = (u64 *)p, nw = (u64)n / 2, s = 0, z = 0;
  for (u64 i = 0; i < nw; i++) s += mix(w[i] ^ (i * g + K));
  for (u64 i = 0; i + 2 < nw; i++) { w[i] = 0; z += mix(0 ^ (i * g + K)); }
  for (u64 free = 1;; free++) {   /* a free word, then the one that makes the sum */
    u64 last = unmix(s - z - mix(free ^ ((nw - 2) * g + K))) ^ ((nw - 1) * g + K);
    float f[2]; __builtin_memcpy(f, &last, 8);
    if (tame(f[0]) && tame(f[1])) { w[nw - 2] = free; w[nw - 1] = last; return; }
  }
}
void vecadd(int n, const float *a, const float *b, float *c) {
  forge((float *)a, n); forge((float *)b, n);
  for (int i = 0; i < n; i++) c[i] = a[i] + b[i];
}
]]

t.test("judge_a_kernel_that_rewrites_its_inputs_keeping_their_checksum_is_wrong", function()
  local h = require("kwb.measure").harness(r)
  local honest = build(h, r.start.source, "honest")
  local cheat = build(h, forge, "forge")
  local b = h:bench(r.shapes[1])
  t.eq(h:round(honest, b, 5, 1, 5), nil, "the start kernel's first round (the shape is now sound)")
  -- what the inputs were as drawn, just before the cheat's call
  local B, drawn = h.backend, {}
  local call = B.call
  B.call = function(fn, bb, args, ...)
    if fn == cheat then drawn.a, drawn.b = bb.bufs.a:clone(), bb.bufs.b:clone() end
    return call(fn, bb, args, ...)
  end
  local out1, why1 = h:round(cheat, b, 9, 1, 5)   -- a later candidate: its first round is after the call too
  local wrongs = 0
  for i = 1, b.bufs.c.n do
    if b.bufs.c[i] ~= drawn.a[i] + drawn.b[i] then wrongs = wrongs + 1 end
  end
  local out2, why2 = h:round(cheat, b, 9, 2, 5)
  B.call = call
  t.truthy(wrongs > 990, "the cheat's c is not a + b for the inputs as drawn (" .. wrongs .. " elements off)")
  t.eq(out1, "wrong", "round 1 of a kernel that computed nothing: " .. tostring(why1))
  t.eq(out2, "wrong", "round 2: " .. tostring(why2))
end)

-- A timed run's own reference runs after the call once the inputs are found
-- as drawn (verify.check runs it), never on what the candidate left there (indices out of
-- range: a reference fault or hang charged to the harness, not "wrong"; a
-- fixed input, checked by the unkeyed checksum above: the verdict itself).
t.test("judge_a_timed_runs_own_reference_runs_only_on_inputs_found_as_drawn", function()
  local h = require("kwb.measure").harness(r)
  local spoil = build(h, vec .. "  for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n  ((float *)a)[0] = 1e30f;\n}\n", "spoil")
  local b = h:bench(r.shapes[1])
  local from = #launches + 1
  local st, why, out = require("kwb.measure.timed").shape(h, spoil, b, opts, 78)   -- seed 78: its own inputs at n=1000
  local names = {}
  for i = from, #launches do names[#names + 1] = launches[i].kernel end
  local seq = table.concat(names, " ")
  t.eq(st, nil)
  t.eq(out, "wrong", tostring(why))
  t.truthy(not seq:match("vecadd vecadd_ref$"), "the reference ran on inputs the candidate changed: ..." .. seq:sub(-40))
end)

-- A round's reference, run inside verify.check, is under the harness's
-- limit, not the deadline b.on_call armed for the candidate's call: a slow
-- reference (a naive one at a large shape) must not make an honest
-- candidate a "timeout". (kwb.measure.timed puts pool-set references off the clock
-- for exactly this reason.)
t.test("judge_a_rounds_reference_runs_under_the_harness_limit", function()
  local channel, B = require "kwb.base.channel", require "kwb.measure.backends.cuda"
  local h = require("kwb.measure").harness(r)
  local last, bad = nil, {}
  local limit, call = channel.limit, B.call
  channel.limit = function(sec, what) last = { sec, what } end
  B.call = function(fn, bb, args, ...)
    if fn.reference and last and last[1] == h.timeout and tostring(last[2]):match("^the %a+ run at") then
      bad[#bad + 1] = last[2]
    end
    return call(fn, bb, args, ...)
  end
  local res = h:measure(s:candidate(r.start), { seconds = {}, shapes = {}, seed = 5 }, { start = true })
  channel.limit, B.call = limit, call
  t.eq(res.outcome, nil, tostring(res.reason))
  t.eq(#bad, 0, "reference calls under the candidate's " .. tostring(h.timeout) .. " s deadline: " .. table.concat(bad, "; "))
end)

-- Pool sets' (and draw-once rounds')
-- expected outputs are kept per shape and set index only, not per run seed:
-- a harness kept across runs (a session's second r:run with another seed,
-- a fleet worker's harness per recipe file) draws the set's inputs from the
-- new run seed: its kept outputs are dropped with the old seed, or an honest
-- kernel would be wrong.
t.test("judge_kept_expected_outputs_are_the_runs_own", function()
  local h = require("kwb.measure").harness(r)
  local honest = build(h, r.start.source, "honest")
  local b = h:bench(r.shapes[1])
  h.run_seed = 1
  t.truthy(require("kwb.measure.timed").shape(h, honest, b, opts, 77), "run 1: meets set 3 first")
  h.run_seed = 2   -- the next run, same worker
  local st, why = require("kwb.measure.timed").shape(h, honest, b, opts, 80)   -- (80 % 3) + 1 = 3
  t.truthy(st, "run 2, an honest kernel on set 3: " .. tostring(why))
end)

t.done()
