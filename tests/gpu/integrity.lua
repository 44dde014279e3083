-- tests/gpu/integrity.lua: what the GPU judge guarantees (run by
-- tests/gpu/run): the hostile candidates of tests/recipes/gpu_integrity.lua
-- with their exact outcomes and the honest controls accepted and clean under
-- compute-sanitizer; expected outputs never on the device while a candidate
-- runs; a problem a constant output passes refused; the figures of the
-- checks on stdout.
local t = require "t"
local store = require "kwb.loop.store"
local inputs = require "kwb.measure.inputs"
local measure = require "kwb.measure"

local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")

local expect = {
  -- file, outcome, rule, a piece of the reason
  { "scan_expected.cu", "wrong", nil, "output c at n=1048576 (the first run): 1048576 elements never written" },
  { "write_past.cu", "wrong", nil, "the candidate wrote outside output c at n=1048576 (the first run): byte offsets "
                                   .. "4194304 to 4194307 of a buffer of 4194304 bytes" },
  { "write_before.cu", "wrong", nil, "the candidate wrote outside output c at n=1048576 (the first run): byte offsets "
                                     .. "-4 to -1 of a buffer of 4194304 bytes" },
  { "stash_replay.cu", "wrong", nil, "output c at n=1048576 (a run after the timed runs): 262144 elements off" },
  { "timer_split.cu", "forbidden", "timer", "%globaltimer at line 7" },
  { "read_slack.cu", "unsafe", nil, "compute-sanitizer memcheck at n=1000003: " },
  { "smem_race.cu", "unsafe", nil, "compute-sanitizer racecheck at n=1000003: " },
  { "smem_barrier.cu" }, { "constant_table.cu" }, { "float4_tail.cu" }, { "good_stride.cu" },
}

local recipe = kwb.load "tests/recipes/gpu_integrity.lua"
local t0 = require("kwb.core").now()
local _, run = recipe:run { mode = "plain", store = store.open(dir .. "/integrity.db") }
print(string.format("# the run: %d candidates in %.1f s", #run.results, require("kwb.core").now() - t0))
local by_name = {}
for _, res in ipairs(run.results) do
  by_name[res.name] = res
  local s = res.seconds or {}
  print(string.format("# %-18s %-9s build %.3f  verify %.3f  time %.3f  sanitize %s  total %.3f s", res.name,
                      res.outcome, s.build or 0, s.verify or 0, s.time or 0,
                      s.sanitize and string.format("%.2f", s.sanitize) or "-", s.total or 0))
  if s.sanitize then
    print(string.format("#   sanitizers: memcheck %s  racecheck %s  initcheck %s", s.sanitize_memcheck or "-",
                        s.sanitize_racecheck or "-", s.sanitize_initcheck or "-"))
    for tool, split in pairs(res.sanitize_stages or {}) do print(string.format("#   %s inside: %s", tool, split)) end
  end
  if res.reason then print("#   " .. res.reason) end
  -- the tools' own words, for tests/lua/test_sanitize.lua's parser fixtures
  if res.outcome == "unsafe" and os.getenv("OUT") then
    local f = assert(io.open(os.getenv("OUT") .. "/sanitizer-" .. res.name:gsub("%.cu$", "") .. ".txt", "w"))
    f:write(res.sanitizer_log or "")
    f:close()
  end
end

for _, e in ipairs(expect) do
  local file, outcome, rule, reason = e[1], e[2], e[3], e[4]
  t.test("gpu_integrity_" .. file:gsub("%.cu$", "") .. "_is_" .. (outcome or "accepted_and_clean"), function()
    local res = t.truthy(by_name[file], file)
    if outcome then
      t.eq(res.outcome, outcome, file .. " (" .. tostring(res.reason) .. ")")
      t.eq(res.rule, rule, file .. " rule")
      t.truthy(res.reason:find(reason, 1, true), res.reason)
    else
      t.truthy(res.outcome == "slower" or res.outcome == "accepted", file .. ": " .. res.outcome .. " " .. tostring(res.reason))
      t.truthy(res.seconds.sanitize and res.seconds.sanitize > 0, file .. " went through the sanitizers")
    end
  end)
end

t.test("gpu_integrity_expected_outputs_are_never_on_the_device", function()
  local h = measure.harness(recipe)
  local sh = recipe.shapes[1]
  local b = h:bench(sh)
  inputs.prepare(h, b, 7, 1)
  local n = b.refs.c.n
  t.eq((b.refs.c:poisoned()), n, "the device copy of the expected c is poison once the reference has run")
  -- and the comparison still sees them: the reference's own output, computed again into c
  assert(h.backend.call(h:reference().fn, b, { b.args[1], b.bufs.a, b.bufs.b, b.bufs.c }))
  t.eq(h:check(b, "a check"), nil, "c computed by the reference matches what was held")
  t.eq((b.refs.c:poisoned()), n, "poison again after the comparison")
  b.bufs.c:poison()
  local out, why = h:check(b, "a check")
  t.eq(out, "wrong")
  t.truthy(why:find("1048576 elements never written", 1, true), why)
end)

t.test("gpu_integrity_guard_bands_name_the_buffer_and_the_offsets", function()
  local buf = assert(kwb.cuda.buffer("f32", 1000))
  t.eq(buf:redzone(), nil, "intact when made")
  local raw = buf:raw()
  t.eq(#raw, 4000)
  -- a launch that writes 8 bytes past the end and 4 before: a copy kernel's view of the buffer
  local mod = assert(kwb.cuda.compile { source = [[
extern "C" __global__ void poke(float *p, int n) { p[n] = 1.0f; p[n + 1] = 2.0f; p[-1] = 3.0f; }
]], name = "poke.cu" })
  local k = assert(mod:kernel("poke", "void poke(float *p, int n)"))
  assert(kwb.cuda.plan { { k, grid = 1, block = 1, args = { buf, 1000 } } }:run())
  local hits = kwb.cuda.redzones { buf }
  t.eq(hits[1] and table.concat(hits[1], " "), "-4 4007", "first and last byte offsets written outside")
  t.eq(kwb.cuda.redzones({ buf })[1], nil, "filled again after the check")
end)

t.test("gpu_integrity_one_look_after_a_timed_run_counts_unwritten_outputs", function()
  local a, c = assert(kwb.cuda.buffer("f32", 1000)), assert(kwb.cuda.buffer("bf16", 3000))
  assert(c:poison())
  local mod = assert(kwb.cuda.compile { source = [[
extern "C" __global__ void part(unsigned short *c, int n) { for (int i = 0; i < n; i++) c[i] = 0; }
extern "C" __global__ void past(float *p, int n) { p[n + 3] = 1.0f; }
]], name = "part.cu" })
  local part = assert(mod:kernel("part", "void part(unsigned short *c, int n)"))
  assert(kwb.cuda.plan { { part, grid = 1, block = 1, args = { c, 2990 } } }:run())
  local hits, unwritten = kwb.cuda.redzones({ a, c }, { c })
  t.eq(next(hits), nil, "no guard band touched")
  t.eq(unwritten[1] and table.concat(unwritten[1], " "), "10 2991", "count and first (1-based), as dbuf:poisoned")
  t.eq(select(1, c:poisoned()), 10)
  local past = assert(mod:kernel("past", "void past(float *p, int n)"))
  assert(kwb.cuda.plan { { past, grid = 1, block = 1, args = { a, 1000 } } }:run())
  assert(kwb.cuda.plan { { part, grid = 1, block = 1, args = { c, 3000 } } }:run())
  hits, unwritten = kwb.cuda.redzones({ a, c }, { c })
  t.eq(hits[1] and table.concat(hits[1], " "), "4012 4015", "the write past a, in the same launch")
  t.eq(next(unwritten), nil, "c all written")
end)

t.test("gpu_integrity_queued_fills_and_poison_land_before_an_upload", function()
  -- fills and poison are queued on the harness stream without a wait; a copy
  -- from the host (not on that stream) waits for them, or they would land
  -- on top of it
  local big = assert(kwb.cuda.buffer("f32", 1 << 24))
  local bytes = string.rep("\0\0\128\63", 1 << 24)   -- 1.0f
  for _ = 1, 3 do
    assert(big:fill_normal(7, 0, 1))
    assert(big:poison())
    assert(big:set_raw(bytes))
    t.eq(select(1, big:poisoned()), 0)
    t.eq(big:checksum(), kwb.cuda.checksum_host(bytes))
  end
end)

local function const_problem(value)
  return kwb.problem.define {
    name = "const_out", vars = { "n" }, fn = "vecadd",
    args = { { "n", "i32", value = "n" }, { "a", "f32", shape = "n", role = "in", init = { "uniform", -1, 1 } },
             { "b", "f32", shape = "n", role = "in", init = { "uniform", -1, 1 } }, { "c", "f32", shape = "n", role = "out" } },
    reference = { cuda = { source = string.format([[
extern "C" __global__ void ref(int n, const float *a, const float *b, float *c) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] * 0.0f + %.1ff;
}]], value), fn = "ref" } },
    tolerance = { atol = 0, rtol = 0 },
    launch = function(shape) return { grid = { (shape.n + 255) // 256 }, block = { 256 } } end,
  }
end

for _, v in ipairs { 0, 1 } do
  t.test("gpu_integrity_a_problem_a_constant_output_passes_is_refused_" .. v, function()
    local r = kwb.recipe { name = "const_out", backend = "cuda", problem = const_problem(v), shapes = { n = { 4096 } },
                           start = "../candidates/cuda/good.cu", verify_shapes = false, sanitize = false }
    t.raises(function() r:run { mode = "quiet", store = store.open(dir .. "/const" .. v .. ".db") } end,
             string.format("at shape n=4096 every element of output c set to %d passes the tolerance", v))
  end)
end

t.done()
