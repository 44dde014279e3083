-- tests/lua/test_profile.lua: kwb profile without a GPU. The parser on ncu's
-- raw pages as ncu wrote them on an H100 (tests/fixtures/ncu/, from
-- tests/gpu/profile), the bottleneck rules, and Session:profile end to end
-- through the CUDA adapter's stand-in (fake_cuda) with an ncu that prints a
-- stored page: the shape it picks, what it keeps in the cache, its errors.
local t = require "t"
local profile = require "kwb.checks.profile"
local files = require "kwb.base.files"
local host = require "kwb.host"

local function read(path) return assert(files.read_file(path)) end

-- ---- the rules ---------------------------------------------------------------

t.test("profile_a_kernel_is_bound_by_the_side_nearest_its_peak", function()
  t.eq(profile.classify { dram = 85, l2 = 40, sm = 20 }, "memory")
  t.eq(select(2, profile.classify { dram = 85, l2 = 40, sm = 20 }), "DRAM at 85% of peak (SM 20%)")
  t.eq(select(2, profile.classify { dram = 9, l2 = 23, l1 = 97, memory = 97, sm = 65 }),
       "L1/shared memory at 97% of peak (SM 65%)")
  t.eq(select(2, profile.classify { dram = 30, sm = 72 }), "the SM at 72% of peak (memory 30%)")
  t.eq(select(2, profile.classify { dram = 10, sm = 20, tensor = 64 }), "the tensor pipes at 64% of peak (memory 10%)")
  t.eq(profile.classify { dram = 61, sm = 61 }, "memory", "a tie goes to memory")
  local c, why = profile.classify { dram = 30, l2 = 45, sm = 40, stalls = { { "long_scoreboard", 4.5 } } }
  t.eq(c, "latency")
  t.eq(why, "memory 45% and compute 40% of peak, stalled most on long_scoreboard")
end)

t.test("profile_a_plan_idle_between_its_kernels_is_bound_by_launch_overhead", function()
  local k = { { name = "a", seconds = 2e-6, dram = 10, sm = 5 }, { name = "b", seconds = 3e-6, dram = 80, sm = 5 } }
  local p = profile.summarise({ kernels = k }, 20e-6)
  t.eq(p.class, "launch overhead")
  t.eq(p.why, "its 2 kernels are busy 25% of the plan's 20.0 us")
  t.near(p.gaps, 15e-6, 1e-12)
  t.eq(k[2].class, "memory", "each kernel keeps its own class")
  p = profile.summarise({ kernels = k }, 6e-6)
  t.eq(p.class, "memory", "the class holding most of the kernels' time")
  t.eq(p.why, "60% of the kernels' time in memory-bound kernels")
  t.eq(profile.summarise({ kernels = { { name = "a", seconds = 1e-6, sm = 90 } } }).class, "compute",
       "without the plan's time, no launch-overhead verdict")
  t.eq(profile.summarise({ kernels = { { name = "a", sm = 90 }, { name = "b", seconds = 1e-6, dram = 70 } } }, 20e-6).class,
       "memory", "nor where a kernel's time is missing")
end)

-- ---- ncu's raw pages ------------------------------------------------------------

-- tests/gpu/profile gpu_matmul:4 on an H100 (2026-12-06): the start kernel
-- (one thread per element of C, 16x16 blocks) and the best of four at
-- M = N = K = 4096
t.test("profile_parses_ncus_raw_page_as_ncu_wrote_it", function()
  local p = assert(profile.parse(read("tests/fixtures/ncu/gpu_matmul-start.csv")))
  t.eq(#p.kernels, 1)
  local k = p.kernels[1]
  t.eq(k.name, "sgemm_tiled")
  t.near(k.seconds, 25391200e-9, 1e-12, "25,391,200 ns")
  t.eq(k.dram, 8.81)
  t.eq(k.l2, 22.65)
  t.eq(k.l1, 97.32)
  t.eq(k.memory, 97.13)
  t.eq(k.sm, 64.74)
  t.eq(k.tensor, 0)
  t.eq(k.occupancy, 99.27)
  t.eq(k.occupancy_max, 100)
  t.eq(k.registers, 32)
  t.eq(k.block, 256)
  t.eq(k.grid, 65536, "65,536 blocks")
  t.eq(#k.stalls, 3)
  t.eq(k.stalls[1][1], "long_scoreboard")
  t.eq(k.stalls[1][2], 24.6)
  local s = profile.summarise(p, 25.390e-3)
  t.eq(s.class, "memory")
  t.eq(s.why, "L1/shared memory at 97% of peak (SM 65%)", "the shared-memory traffic of a naive tiled kernel binds it")
  t.eq(s.gaps, 0, "ncu's kernel time is the plan's (never below 0)")
  local b = assert(profile.parse(read("tests/fixtures/ncu/gpu_matmul-best.csv"))).kernels[1]
  t.eq(b.registers, 56)
  t.eq(b.block, 64)
  t.eq(b.occupancy, 53.68)
  t.eq(b.tensor, 1.2)
  t.eq(profile.classify(b), "memory")
  t.eq(select(2, profile.classify(b)), "L1/shared memory at 82% of peak (SM 77%)")
end)

t.test("profile_a_page_without_kernels_or_a_header_is_an_error", function()
  t.eq(select(2, profile.parse("==PROF== Disconnected\n")), "no raw page in ncu's output (no CSV header starting \"ID\")")
  local head = read("tests/fixtures/ncu/gpu_matmul-start.csv"):match('[^\n]*"ID","Process ID"[^\n]*\n[^\n]*\n')
  t.eq(select(2, profile.parse(head)), "ncu profiled no kernel (none of the candidate's kernels ran under it)")
end)

-- ---- Session:profile, through the CUDA adapter's stand-in ------------------

local fake = require "fake_cuda" ()
local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end
local recipe_file = write(dir .. "/profiled.lua", [[
local vec = "void matmul(int n, const float *a, const float *b, float *c) {\n"
  .. "  for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n}\n"
return kwb.recipe {
  name = "profiled", backend = "cuda",
  problem = kwb.problem.define {
    name = "vecadd_profiled", vars = { "n" }, fn = "matmul",
    args = { { "n", "i32", value = "n" }, { "a", "f32", shape = "n", role = "in" },
             { "b", "f32", shape = "n", role = "in" }, { "c", "f32", shape = "n", role = "out" } },
    reference = { cuda = { source = vec:gsub("matmul", "ref"), fn = "ref",
                           launch = function() return { grid = 1, block = 1 } end } },
    tolerance = { atol = 0, rtol = 0 }, bytes = "12 * n",
  },
  shapes = { n = { 1000, 300000 } }, verify_shapes = false,
  start = { source = vec },
  launch = function() return { grid = 1, block = 1 } end,
  timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 },
  sanitize = false,
}
]])
-- an ncu that prints a stored page whatever it is asked, and one that fails
local page = "tests/fixtures/ncu/gpu_matmul-start.csv"
local ncu_ok = write(dir .. "/ncu-ok", "#!/bin/sh\necho \"$@\" > " .. dir .. "/ncu-args\ncat " .. files.resolve(page) .. "\n")
local ncu_bad = write(dir .. "/ncu-bad", "#!/bin/sh\necho '==ERROR== the profiler could not start' >&2\nexit 9\n")
os.execute("chmod +x " .. ncu_ok .. " " .. ncu_bad)

local r = require("kwb.load").load(recipe_file)
local s = r:session { store = require("kwb.loop.store").open(dir .. "/profiled.db") }
s.pool = false   -- measured and profiled in this process, where the stand-in is (a worker would load kwb.cuda)
local start = s:ensure_start()

t.test("profile_session_runs_ncu_on_the_slowest_shape_and_keeps_the_verdict", function()
  profile.command = ncu_ok
  local p = s:profile(start.id:sub(1, 8))
  t.eq(p.shape, "n=300000", "the shape where the candidate's median is longest")
  t.eq(p.candidate, start.id)
  t.eq(p.device, "fake-gpu sm_00")
  t.eq(p.count, 1)
  t.eq(p.kernels[1].name, "sgemm_tiled")
  t.eq(p.plan_seconds, start.shapes["n=300000"].median, "the plan's time is kwb's own median there")
  local want = profile.summarise(assert(profile.parse(read(page))), p.plan_seconds)
  t.eq(p.class, want.class)
  local rows = s.store.cache:profiles(start.id)
  t.eq(#rows, 1)
  t.eq(rows[1].shape, "n=300000")
  t.eq(rows[1].class, p.class)
  t.eq(rows[1].data.kernels[1].name, "sgemm_tiled")
  local args = read(dir .. "/ncu-args")
  t.truthy(args:find("--clock-control none --csv --page raw --print-units base", 1, true), args)
  t.truthy(args:find("--kernel-name regex:^(matmul)$", 1, true), args)
  t.truthy(args:find("sanitize_job", 1, true), "ncu runs the sanitizers' job: " .. args)
  p = s:profile(start.id, "n=1000")
  t.eq(p.shape, "n=1000")
  t.eq(#s.store.cache:profiles(start.id), 2, "one profile per shape")
end)

t.test("profile_the_bests_profile_goes_into_the_models_prompt", function()
  local prompt = require "kwb.strategies.prompt"
  s.best = start
  local convo = prompt.build { session = s, recipe = r, results = {} }
  local part = convo.parts.profile
  t.eq(part:match("^[^\n]*"), "Profile of the current best at n=300000 (Nsight Compute): memory-bound, L1/shared memory "
                             .. "at 97% of peak (SM 65%).", "the profile of the shape where the best's plan is slowest")
  t.truthy(part:find("\n- sgemm_tiled: 25.391 ms, DRAM 9%, L2 23%, L1/shared 97%, SM 65%, tensor pipes 0%, occupancy 99%, "
                     .. "32 registers; memory-bound; top stalls (warps per issued instruction): long_scoreboard 24.6, ", 1, true),
           part)
  local user = convo.messages[1].content
  t.truthy(user:find(part, 1, true) and user:find(part, 1, true) > user:find("The current best is the start kernel", 1, true),
           "in the user message, after the best")
  s.best = nil
  t.eq(prompt.build({ session = s, recipe = r, results = {} }).parts.profile, nil, "no best, no profile")
end)

t.test("profile_model_profile_is_a_boolean", function()
  t.raises(function()
    kwb.recipe { name = "p", problem = r.problem, shapes = { n = { 8 } }, start = { source = "x" }, backend = "cuda",
                 launch = r.launch, model = { provider = "replay", file = "recipes/transcripts/host_matmul_llm.json",
                                              profile = "yes" } }
  end, "model.profile")
end)

t.test("profile_session_errors_name_what_is_wrong", function()
  profile.command = ncu_ok
  t.raises(function() s:profile(start.id, "n=7") end, "recipe profiled has no timed shape n=7 (its shapes: n=1000, n=300000)")
  t.raises(function() s:profile("ffffffff") end, "ffffffff")
  profile.command = ncu_bad
  t.raises(function() s:profile(start.id) end, "ncu failed at n=300000 (exit 9): ==ERROR== the profiler could not start")
  profile.command = dir .. "/no-such-ncu"
  t.raises(function() s:profile(start.id) end, "ncu at n=300000 did not start")
  -- --csv FILE: a regular file in a directory that exists, checked before ncu runs
  profile.command = ncu_ok
  t.raises(function() s:profile(start.id, nil, "/dev/full") end,
           "cannot write the file /dev/full: it is a character device, not a regular file")
  t.raises(function() s:profile(start.id, nil, dir .. "/no/such.csv") end,
           "cannot write the file " .. dir .. "/no/such.csv: the directory " .. dir .. "/no does not exist "
           .. "(kwb makes no directories for a file)")
  profile.command = nil
end)

-- model.profile: the loop profiles each new best, for the model's next prompt
t.test("profile_model_profile_profiles_each_new_best", function()
  local fast = "void matmul(int n, const float *a, const float *b, float *c) {\n"
               .. "  for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n}\n"
  local slow = "void matmul(int n, const float *a, const float *b, float *c) {\n"   -- the same, 30 times over
               .. "  volatile float *vc = c;\n"
               .. "  for (int r = 0; r < 30; r++) for (int i = 0; i < n; i++) vc[i] = a[i] + b[i];\n}\n"
  local file = write(dir .. "/profiled_loop.lua", read(recipe_file)
    :gsub('name = "profiled"', 'name = "profiled_loop"')
    :gsub("start = { source = vec },", function()
      return string.format("start = { source = %q },\n  model = { provider = \"replay\", file = %q, profile = true },",
                           slow, files.resolve("recipes/transcripts/host_matmul_llm.json"))
    end))
  local r2 = require("kwb.load").load(file)
  t.eq(r2.model.profile, true)
  local s2 = r2:session { store = require("kwb.loop.store").open(dir .. "/profiled_loop.db") }
  s2.pool = false
  s2:ensure_start()
  profile.command = ncu_ok
  local res = s2:evaluate(s2:candidate({ source = fast, name = "fast" }, "test"))
  profile.command = nil
  t.eq(res.outcome, "accepted", tostring(res.reason))
  t.eq(res.profile_error, nil)
  local rows = s2.store.cache:profiles(res.id)
  t.eq(#rows, 1, "the new best profiled once")
  t.eq(rows[1].shape, "n=300000")
  profile.command = dir .. "/no-such-ncu"
  s2.best = s2.start
  local again = s2:evaluate(s2:candidate({ source = fast .. "\n", name = "fast again" }, "test"))
  profile.command = nil
  t.eq(again.outcome, "accepted", tostring(again.reason))
  t.truthy(again.profile_error and again.profile_error:find("ncu at n=300000 did not start", 1, true),
           "a failed profile is said, and the candidate stays accepted: " .. tostring(again.profile_error))
end)

t.done()
