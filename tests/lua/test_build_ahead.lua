-- tests/lua/test_build_ahead.lua: builds ahead (kwb.loop.run's look_ahead). A
-- strategy whose proposals never depend on results (grid) is asked early and
-- the backend starts the next candidates' builds while the current one is
-- measured. On the host recipe, with a recording prebuild put on the host
-- adapter: the same candidates, sequence numbers, input seeds and outcomes as
-- a run without it; every candidate after the first built ahead before it was
-- submitted; nothing proposed ahead beyond the budget.
local t = require "t"
local store = require "kwb.loop.store"
local backend = require "kwb.measure.backends"

local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local host = backend.load("host")

local function run(name, budget)
  os.remove(tmp .. "/" .. name .. ".db")
  local r = kwb.load("recipes/host_matmul.lua")   -- a recipe of its own: its session, its store
  local sm, rn = r:run { candidates = budget, seed = 1, strategy = "grid", mode = "quiet",
                        store = store.open(tmp .. "/" .. name .. ".db") }
  rn.sm = sm
  return rn
end

local function outcome_class(o) return (o == "accepted" or o == "slower") and "verified" or o end

local plain = run("ahead-plain", 10)
local calls, prebuilt, submitted_before = {}, {}, {}
host.prebuild = function(cands)
  local ids = {}
  for i, c in ipairs(cands) do
    ids[i] = c.id
    prebuilt[c.id] = #calls + 1
  end
  calls[#calls + 1] = ids
  return true
end
local ahead = run("ahead-built", 10)
host.prebuild = nil

t.test("build_ahead_keeps_the_grid_runs_candidates_and_outcomes", function()
  t.eq(#ahead.results, #plain.results)
  t.eq(#plain.results, 10, "the budget's 10 candidates (the start kernel is not among them)")
  for i, res in ipairs(plain.results) do
    local a = ahead.results[i]
    t.eq(a.id, res.id, "candidate " .. i)
    t.eq(a.seq, res.seq)
    t.eq(a.seed, res.seed)
    t.eq(outcome_class(a.outcome), outcome_class(res.outcome), res.short)
  end
end)

t.test("build_ahead_builds_every_candidate_after_the_first_before_it_is_measured", function()
  local n = 0
  for i, res in ipairs(ahead.results) do
    if i > 1 then   -- the first candidate is submitted before any look ahead
      n = n + 1
      t.truthy(prebuilt[res.id], res.short .. " was built ahead")
    end
    submitted_before[res.id] = i
  end
  t.eq(n, 9)
  local total = 0
  for _, ids in ipairs(calls) do
    total = total + #ids
    for _, id in ipairs(ids) do t.truthy(submitted_before[id], "a candidate built ahead was evaluated: " .. id) end
  end
  t.eq(total, 9, "nothing built ahead beyond the budget")
  t.eq(#calls[1], 4, "four candidates ahead of the one in flight")
  t.eq(ahead.prebuilt, 9)
end)

-- The summary says where the seconds went: the candidates' stages summed, the rest of the
-- loop's wall time, and how many candidates were built ahead.
t.test("summary_sums_the_candidates_stages_and_counts_the_builds_ahead", function()
  for _, rn in ipairs { plain, ahead } do
    local want = { build = 0, verify = 0, time = 0, sanitize = 0 }
    for _, res in ipairs(rn.results) do
      for k in pairs(want) do want[k] = want[k] + (res.seconds[k] or 0) end
    end
    local st = rn.sm.stages
    for k, v in pairs(want) do t.eq(st[k], v, k) end
    t.truthy(want.build > 0 and want.time > 0, "builds and timings were counted")
    t.truthy(st.rest >= 0 and st.rest <= rn.sm.seconds, "the rest within the run's seconds")
    t.truthy(st.start > 0, "the start kernel's judging counted apart")
    -- (and the final round's: kwb.loop.certify)
    local sum = st.build + st.verify + st.time + st.sanitize + st.start + st.ceilings + (st.certify or 0) + st.rest
    t.truthy(math.abs(sum - rn.sm.seconds) < 1e-6, string.format("the stages add up to the run's seconds (%.6f, %.6f)",
                                                                 sum, rn.sm.seconds))
  end
  t.eq(plain.sm.prebuilt, nil)
  t.eq(ahead.sm.prebuilt, 9)
end)

-- opts.ahead (--ahead N) sets how many: 2 builds two ahead, 0 none.
t.test("build_ahead_takes_its_depth_from_the_run_options", function()
  local seen = {}
  host.prebuild = function(cands) seen[#seen + 1] = #cands; return true end
  local function depth(n)
    seen = {}
    os.remove(tmp .. "/ahead-depth.db")
    local r = kwb.load("recipes/host_matmul.lua")
    local sm = r:run { candidates = 6, seed = 1, strategy = "grid", mode = "quiet", ahead = n,
                       store = store.open(tmp .. "/ahead-depth.db") }
    return seen, sm
  end
  local two, sm2 = depth(2)
  t.eq(two[1], 2)
  t.eq(sm2.prebuilt, 5)
  local none, sm0 = depth(0)
  t.eq(#none, 0)
  t.eq(sm0.prebuilt, nil)
  host.prebuild = nil
  local opts = assert(require("kwb.cli").parse_run_options("--ahead", "0", "--budget", "3"))
  t.eq(opts.ahead, 0)
  local _, err = require("kwb.cli").parse_run_options("--ahead", "-1")
  t.eq(err, "'--ahead' needs an integer >= 0, got '-1'")
end)

-- The cuda adapter's prebuild: the recipe's rules over the source first (a forbidden source
-- is not compiled), then NVRTC in the background with compile's own spec, so the same
-- candidate's compile finds it built. (NVRTC only; no GPU needed.)
if require("kwb.cuda").nvrtc_version() then
  t.test("cuda_prebuild_builds_what_the_rules_allow_for_the_compile_to_find", function()
    local cuda = require "kwb.cuda"
    local adapter = backend.load("cuda")
    local base = kwb.load("recipes/gpu_vecadd.lua")
    local recipe = setmetatable({ arch = "sm_90" }, { __index = base })
    local src = assert(kwb.files.read_file("kernels/cuda/vecadd.cu"))
    local stamp = "\n// built ahead " .. os.time() .. "\n"
    local ok_cand = { source = src .. stamp, name = "vecadd.cu", defines = { BLOCK = 96, VEC = 1, ITEMS = 1 } }
    local bad_cand = { source = src .. stamp .. "#define cudaStreamCreate 0\n", name = "vecadd.cu",
                       defines = { BLOCK = 96, VEC = 1, ITEMS = 1 } }
    t.truthy(recipe.rules:check_source(bad_cand.source), "the rules forbid the second")
    t.eq(adapter.prebuild({ ok_cand, bad_cand }, recipe), true)
    t.eq(adapter.prebuild_wait(60), true, "the builds ahead settle")
    t.eq(cuda.prebuilds_running(), 0)
    t.eq(assert(adapter.compile(ok_cand, recipe)).cached, true, "built ahead")
    t.eq(assert(adapter.compile(bad_cand, recipe)).cached, false, "not built ahead: the rules forbid it")
  end)

  -- A build ahead is judged as a fresh one: a candidate whose source passes the source rules
  -- but whose PTX reads a clock (a macro spells clock64) is built ahead, and the build's
  -- PTX rules still forbid the module the worker's compile finds cached.
  t.test("a_candidate_built_ahead_still_meets_the_ptx_rules", function()
    local adapter = backend.load("cuda")
    local base = kwb.load("recipes/gpu_vecadd.lua")
    local recipe = setmetatable({ arch = "sm_90" }, { __index = base })
    local src = assert(kwb.files.read_file("tests/candidates/cuda/clock_macro.cu"))
    local cand = { source = src .. "\n// built ahead " .. os.time() .. "\n", name = "clock_macro.cu", defines = {} }
    t.eq(recipe.rules:check_source(cand.source), nil, "the source rules let it through")
    t.eq(adapter.prebuild({ cand }, recipe), true)
    t.eq(adapter.prebuild_wait(60), true)
    local mod = assert(adapter.compile(cand, recipe))
    t.eq(mod.cached, true, "built ahead")
    local hit = t.truthy(adapter.check_built(recipe.rules, mod, cand), "the PTX rules forbid it")
    t.eq(hit.rule, "timer")
  end)
end

t.done()
