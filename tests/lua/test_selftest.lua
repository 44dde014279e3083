-- tests/lua/test_selftest.lua: the judge's self-test (kwb.loop.selftest, the
-- plants of kwb.measure.plants): every shipped recipe's judge rejects every
-- plant that applies to its problem, a recipe whose tolerance admits a
-- constant stops before anything is measured with the plant named, a plant
-- that does not apply is left out of the count, and the verdict is kept.
local t = require "t"
local core = require "kwb.core"
local plants = require "kwb.measure.plants"
local selftest = require "kwb.loop.selftest"
local store = require "kwb.loop.store"

local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local function fresh_store(name)
  os.remove(tmp .. "/" .. name .. ".db")
  return store.open(tmp .. "/" .. name .. ".db")
end

local function outcomes(v)
  local out = {}
  for i, p in ipairs(v.plants) do out[i] = p.name .. ": " .. p.outcome end
  return table.concat(out, "; ")
end

local seven_host = "writes nothing: wrong; writes zeros: wrong; writes a constant: wrong; copies an input: wrong; "
                   .. "writes NaN: wrong; mutates an input: wrong; correct once, then returns early: wrong"

t.test("selftest_host_recipes_reject_all_seven_plants", function()
  for _, file in ipairs { "recipes/host_matmul.lua", "recipes/host_matmul_llm.lua" } do
    local r = kwb.load(file)
    local s = r:session { store = fresh_store("host") }
    local v = selftest.run(s)
    t.eq(selftest.line(v), "judge: 7 of 7 planted candidates rejected", file)
    t.eq(outcomes(v), seven_host, file)
    local why = {}
    for _, p in ipairs(v.plants) do why[p.name] = p.reason end
    t.eq(why["writes nothing"], "output c at n=64 (the first run): 4096 elements never written, first c[1]")
    t.eq(why["writes NaN"], "output c at n=64 (the first run): 4096 NaN and 0 Inf, first c[1]")
    t.eq(why["mutates an input"], "input a changed by the candidate at n=64 (the first run)")
    -- (its counter under an assembler name, which no rule reads: found by the verification, not the
    -- global-state rule, so the self-test proves the second run finds kept state)
    t.eq(why["correct once, then returns early"], "output c at n=64 (the second run, other inputs in the same "
                                                  .. "buffers): 4096 elements never written, first c[1]")
    s:close_workers()
  end
end)

-- Without the global-state rule the counter builds: right on its first call,
-- it is found by the second, other inputs in the same buffers.
t.test("selftest_counter_plant_is_wrong_on_its_second_call_where_the_rules_allow_it", function()
  local r = kwb.recipe { name = "stateful", problem = require("kwb.problems.matmul") {}, shapes = { n = { 48 } },
                         start = "../../kernels/host/matmul_naive.c", forbid = { "default", "-global-state" },
                         verify_shapes = false, budget = { candidates = 1, minutes = 1, timeout = 5 } }
  local v = selftest.run(r:session { store = fresh_store("stateful") })
  t.eq(selftest.line(v), "judge: 7 of 7 planted candidates rejected")
  t.eq(v.plants[7].outcome, "wrong")
  t.eq(v.plants[7].reason, "output c at n=48 (the second run, other inputs in the same buffers): 2304 elements never "
                           .. "written, first c[1]")
end)

t.test("selftest_a_tolerance_that_admits_a_constant_stops_the_run_naming_the_plant", function()
  local db = tmp .. "/loose_constant.db"
  os.remove(db)
  local r = assert(core.exec({ "./kwb", "--cache", db, "tests/recipes/loose_constant.lua", "--quiet" }, { timeout = 60 }))
  t.eq(r.status, 1, r.err)
  t.truthy(r.err:find("kwb: loose_constant: judge self-test: plant 'writes a constant' was accepted by problem "
                         .. "near_one (tolerance atol = 0.2, rtol = 0): recipe loose_constant: at shape n=1000 every "
                         .. "element of output c set to 1.0", 1, true), r.err)
  -- nothing measured: no candidate, not even the start kernel
  local c = require("kwb.cache").open(db)
  t.eq(#c:list(), 0)
  c:close()
end)

-- A plant the problem gives no way to write is left out of the count.
t.test("selftest_counts_only_the_plants_that_apply", function()
  local rowsum = kwb.problem.define {
    name = "rowsum", vars = { "n" }, fn = "rowsum",
    args = { { "n", "i32", value = "n" }, { "a", "f32", shape = "n*n", role = "in" },
             { "c", "f32", shape = "n", role = "out" } },
    reference = { source = "void rowsum_ref(int n, const float *a, float *c) { for (int i = 0; i < n; i++) "
                           .. "{ double s = 0; for (int j = 0; j < n; j++) s += a[i * n + j]; c[i] = (float)s; } }",
                  fn = "rowsum_ref" },
    tolerance = { atol = 1e-3, rtol = 1e-4 },
  }
  local r = kwb.recipe { name = "rowsum", problem = rowsum, shapes = { n = { 40 } }, verify_shapes = false,
                         start = { source = "void rowsum(int n, const float *a, float *c) { for (int i = 0; i < n; "
                                            .. "i++) { double s = 0; for (int j = 0; j < n; j++) s += a[i * n + j]; "
                                            .. "c[i] = (float)s; } }\n", name = "rowsum.c" },
                         budget = { candidates = 1, minutes = 1, timeout = 5 } }
  local v = selftest.run(r:session { store = fresh_store("rowsum") })
  t.eq(selftest.line(v), "judge: 6 of 6 planted candidates rejected")
  t.eq(#v.skipped, 1)
  t.eq(v.skipped[1].name .. ": " .. v.skipped[1].why, "copies an input: no input has output c's type and size")
end)

-- The verdict goes with the run's record; a run under the same key takes it
-- from there, one under another tolerance pays for its own.
t.test("selftest_verdict_is_kept_per_problem_settings_and_build", function()
  local st = fresh_store("kept")
  local r = kwb.load "tests/recipes/planted.lua"
  local sm1 = r:run { mode = "quiet", store = st, candidates = 1 }
  t.eq(sm1.judge.line, "judge: 7 of 7 planted candidates rejected")
  local sm2 = r:run { mode = "quiet", store = st, candidates = 1 }
  t.eq(sm2.judge.line, "judge: 7 of 7 planted candidates rejected (self-test of run " .. sm1.run .. ", this build)")
  local tight = kwb.recipe { name = "planted_tight", problem = require("kwb.problems.matmul") { tolerance = { atol = 1e-4, rtol = 1e-4 } },
                             shapes = { n = { 48, 96 } }, start = "../../kernels/host/matmul_naive.c",
                             flags = { "-O3" }, budget = { candidates = 1, minutes = 1, timeout = 5 } }
  local v = selftest.run(tight:session { store = st })
  t.eq(selftest.line(v), "judge: 7 of 7 planted candidates rejected")
end)

-- The GPU recipes' plants, built by NVRTC where it is present: each passes
-- the recipe's rules but the counter (a device global it writes). An SGEMM's
-- C has A's size only where M = N = K, which the unannounced shapes are not;
-- a start kernel that is a plan of several kernels cannot be wrapped.
local cuda = require "kwb.cuda"
t.test("selftest_gpu_recipes_plants_build_and_pass_the_rules_but_the_counter", function()
  local want = {
    { "recipes/gpu_vecadd.lua", 7, "" }, { "recipes/kt_vecadd.lua", 7, "" },
    { "recipes/gpu_matmul.lua", 6, "copies an input: no input has output C's type and size" },
    { "recipes/kt_matmul.lua", 6, "copies an input: no input has output C's type and size" },
    { "recipes/nvfp4_moe.lua", 5, "mutates an input: the start kernel is a plan of several kernels; "
                                  .. "correct once, then returns early: the start kernel is a plan of several kernels" },
  }
  for _, w in ipairs(want) do
    local file, n = w[1], w[2]
    local r = kwb.load(file)
    local start = { source = assert(kwb.files.read_file(r.start.file)), defines = r.start.defines or {} }
    start.params = start.defines
    local list, skipped = plants.derive(r, start)
    t.eq(#list, n, file)
    local why = {}
    for i, s in ipairs(skipped) do why[i] = s.name .. ": " .. s.why end
    t.eq(table.concat(why, "; "), w[3], file)
    if cuda.nvrtc_version() then
      local specs = {}
      for i, p in ipairs(list) do specs[i] = { source = p.source, name = "plant.cu", defines = p.defines,
                                               flags = r.flags, arch = r.arch or "sm_90" } end
      for i, m in ipairs(cuda.compile_all(specs)) do
        t.truthy(m.resources, file .. " " .. list[i].name .. ": " .. tostring(m.error))
        local hit = m.resources and r.rules:check_ptx(m:ptx(), list[i].source, "plant.cu")
        t.eq(hit and hit.rule, list[i].name == plants.names[7] and "global-state" or nil, file .. " " .. list[i].name)
      end
    end
  end
end)

-- The GPU path through the stand-in (C on the host): the plants of kwb's
-- own launched by their own plan, the two around the start kernel by the
-- recipe's, each judged as a candidate is.
t.test("selftest_gpu_path_through_the_stand_in_rejects_all_seven", function()
  local real = package.loaded["kwb.cuda"]
  local fake = require("fake_cuda")()
  local _ <close> = setmetatable({}, { __close = function() package.loaded["kwb.cuda"] = real end })
  local vecadd = require "fake_vecadd"
  local r = kwb.recipe {
    name = "fake_plants", backend = "cuda", problem = vecadd.problem, shapes = { n = { 1000 } }, verify_shapes = false,
    start = { source = vecadd.vec .. "  for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n}\n", defines = { BLOCK = 32 } },
    launch = function(shape, p) return { grid = { (shape.n + p.BLOCK - 1) // p.BLOCK }, block = { p.BLOCK } } end,
    forbid = { "default", "-global-state" },   -- (the stand-in's PTX is C: its counter is a static, no device global)
    sanitize = false,
  }
  local v = selftest.run(r:session { store = fresh_store("fake_plants") })
  t.eq(selftest.line(v), "judge: 7 of 7 planted candidates rejected")
  t.eq(outcomes(v), seven_host:gsub("forbidden$", "wrong"))
  local seen = {}
  for _, l in ipairs(fake.launches) do seen[l.kernel .. " " .. l.grid .. "x" .. l.block] = true end
  t.truthy(seen["vecadd 4x256"], "a plant of kwb's own: its own plan")
  t.truthy(seen["vecadd 32x32"], "a plant around the start kernel: the recipe's plan")
end)

t.done()
