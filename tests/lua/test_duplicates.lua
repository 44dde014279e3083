-- tests/lua/test_duplicates.lua: a candidate whose built code is code measured
-- before for its context (the same problem, shapes, flags, device kind and
-- toolchain) is `duplicate` of it: it takes that result's score, is never
-- verified or timed, uses no budget slot, is never named a best, and a
-- model's next prompt names the kernel it repeated. Other code (one constant
-- changed) is measured as ever. On the host (in this process, and through a
-- worker) and on the CUDA adapter with the stand-in of fake_cuda.lua.
local t = require "t"
local cjson = require "cjson"
local outcomes = require "kwb.base.outcomes"

local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

-- (the same three kernels as tests/recipes/duplicates.lua's)

-- ikj matmul; the same with a comment, renamed locals and blank lines; and
-- with one constant changed (the sums start at 1: other code, and wrong)
local ikj = "void matmul(int n, const float *a, const float *b, float *c) {\n"
  .. "    for (int i = 0; i < n; i++) {\n        for (int j = 0; j < n; j++) c[i * n + j] = 0;\n"
  .. "        for (int k = 0; k < n; k++) for (int j = 0; j < n; j++) c[i * n + j] += a[i * n + k] * b[k * n + j];\n"
  .. "    }\n}\n"
local ikj_renamed = "/* the ikj order: b's rows are read in order */\n"
  .. "void matmul(int n, const float *a, const float *b, float *c) {\n"
  .. "    for (int row = 0; row < n; row++) {\n\n        for (int col = 0; col < n; col++) c[row * n + col] = 0;\n"
  .. "        for (int x = 0; x < n; x++) for (int col = 0; col < n; col++) c[row * n + col] += a[row * n + x] * b[x * n + col];\n"
  .. "    }   // each row of c once\n}\n"
local ikj_one = ikj:gsub("c%[i %* n %+ j%] = 0;", "c[i * n + j] = 1;")

local function matmul_recipe(extra)
  local spec = { name = "dupes", problem = require("kwb.problems.matmul") {}, shapes = { n = { 16, 24 } },
                 start = { file = "../../kernels/host/matmul_naive.c" }, flags = { "-O1" },
                 budget = { candidates = 2, minutes = 1, timeout = 5 },
                 timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.05 } }
  for k, v in pairs(extra) do spec[k] = v end
  return kwb.recipe(spec)
end

-- ---- a model's replies, measured in this process ----------------------------

t.test("a_models_kernel_with_only_comments_and_names_changed_is_duplicate_and_its_next_prompt_names_the_original", function()
  local replies = {}
  for i, src in ipairs { ikj, ikj_renamed, ikj_one, ikj } do replies[i] = { text = "```c\n" .. src .. "```" } end
  local file = write(dir .. "/replies.json", cjson.encode { replies = replies })
  local prompts = {}
  local r = matmul_recipe { strategy = "llm", model = { provider = "replay", file = file },
                            prompt = function(parts) prompts[#prompts + 1] = parts.failures or ""; return "go" end }
  local store = require("kwb.loop.store").open(dir .. "/model.db")
  local sm, run = r:run { mode = "quiet", store = store }
  local first, dup, other = run.results[1], run.results[2], run.results[3]
  t.eq(#run.results, 3, "three kernels judged")
  t.truthy(outcomes.verified[first.outcome], "the first is measured: " .. first.outcome)
  t.eq(dup.outcome, "duplicate")
  t.eq(dup.duplicate_of, first.id)
  t.eq(dup.reason, string.format("the same compiled code as %s, measured before (%s, %.2fx)", first.short,
                                 first.outcome, first.score))
  t.eq(dup.score, first.score, "it takes the first's score")
  t.eq(next(dup.shapes), nil, "no times of its own")
  t.eq(dup.seconds.verify, nil, "never verified")
  t.eq(dup.seconds.time, nil, "never timed")
  t.eq(outcomes.may_be_best(dup, false), false, "never named a best")
  t.eq(other.outcome, "wrong", "one constant changed is other code, measured (and wrong)")
  t.eq(other.duplicate_of, nil)
  -- the budget of 2 spent on the first and the third; the duplicate took no slot
  t.eq(sm.candidates, 2)
  t.eq(sm.duplicates, 1)
  t.eq(sm.funnel.duplicate, 1)
  t.eq(sm.model.requests, 3, "a fourth reply was never asked for")
  -- the prompt built after the duplicate was judged names the kernel it repeated
  -- (each request goes out while the reply before it is judged: the third prompt is the second's)
  t.eq(prompts[3], string.format("Recent failures (newest first):\n- %s (llm.c): duplicate: your kernel is the same "
                                 .. "compiled code as %s, measured before (%s, %.2fx)", dup.short, first.short,
                                 first.outcome, first.score), "the third prompt's failures")
  -- the record: the duplicate's build has the first's code; a later run finds the duplicate known
  local s = r:session()
  local known = s.store:known(s.ctx, dup.id)
  t.eq(known.outcome, "duplicate")
  t.eq(known.duplicate_of, first.id)
  t.eq(known.reason, dup.reason, "what a model is told of it comes from the record")
  local codes = s.store:codes(s.ctx)
  t.eq(#codes[first.id], 64)
  t.eq(codes[dup.id], codes[first.id])
  t.truthy(codes[other.id] ~= codes[first.id], "other code, another digest")
end)

-- ---- through a worker, as a recipe file runs ---------------------------------

t.test("a_recipe_files_run_finds_the_duplicate_in_its_worker_and_measures_other_code", function()
  local r = kwb.load "tests/recipes/duplicates.lua"
  local sm, run = r:run { mode = "quiet", store = require("kwb.loop.store").open(dir .. "/file.db") }
  t.eq(run.workers, 1, "measured in a worker")
  t.eq(#run.results, 3)
  local first, dup, other = run.results[1], run.results[2], run.results[3]
  t.truthy(outcomes.verified[first.outcome], first.outcome)
  t.eq(dup.outcome, "duplicate")
  t.eq(dup.reason, string.format("the same compiled code as %s, measured before (%s, %.2fx)", first.short,
                                 first.outcome, first.score))
  t.eq(dup.seconds.time, nil, "never timed")
  t.eq(other.outcome, "wrong")
  t.eq(sm.candidates, 2, "the duplicate used no budget slot")
  t.eq(sm.funnel.duplicate, 1)
  t.truthy(sm.best.id ~= dup.id, "never the pick")
  -- kwb cache show names the kernel it repeats, from its record
  local p = io.popen("./kwb --cache " .. dir .. "/file.db cache show " .. dup.short .. " 2>&1")
  local shown = p:read("a")
  p:close()
  t.eq(shown:match("\nduplicate  [^\n]*"), "\nduplicate  of " .. first.short .. ": " .. dup.reason)
end)

t.test("a_duplicate_of_a_failure_takes_its_outcome_and_reason_and_try_measures_it_anyway", function()
  local r = matmul_recipe { strategy = require("kwb.strategies.list")({ { source = ikj_one },
                                                                         { source = "// again\n" .. ikj_one } }) }
  local store = require("kwb.loop.store").open(dir .. "/failure.db")
  local _, run = r:run { mode = "quiet", store = store }
  local wrong, dup = run.results[1], run.results[2]
  t.eq(wrong.outcome, "wrong")
  t.eq(dup.outcome, "duplicate")
  t.eq(dup.score, nil)
  t.eq(dup.reason, string.format("the same compiled code as %s, measured before (wrong: %s)", wrong.short, wrong.reason))
  -- a measurement asked for by name (kwb try, --retime) is made whatever code it builds to
  local again = r:try { source = "// again\n" .. ikj_one }
  t.eq(again.outcome, "wrong")
  t.eq(again.reason, wrong.reason)
end)

t.test("a_duplicate_whose_original_left_the_cache_meanwhile_is_measured_after_all", function()
  local r = matmul_recipe { name = "dupes_gone" }
  local s = r:session { store = require("kwb.loop.store").open(dir .. "/gone.db") }
  s:ensure_start()
  local first = s:evaluate(s:candidate({ source = ikj }, "test"))
  t.truthy(outcomes.verified[first.outcome], first.outcome)
  require("kwb.loop.codes").ids(s)   -- (the session knows the first's code) ...
  s.store.cache:exec("DELETE FROM result WHERE candidate = ?1", first.id)   -- ... another process removes its result
  local again = s:evaluate(s:candidate({ source = ikj_renamed }, "test"))
  t.truthy(outcomes.verified[again.outcome], "measured: " .. again.outcome)
  t.eq(again.duplicate_of, nil)
  t.eq(again.seq, first.seq + 2, "its first request came back duplicate (a number spent), the second measured it")
  t.eq(require("kwb.loop.codes").ids(s)[s.store:codes(s.ctx)[again.id]], again.id, "now the code's first measured result")
end)

-- ---- the cache: builds keep their code; an older cache opens as it was ----

t.test("a_cache_of_schema_3_opens_with_its_builds_and_no_codes_and_takes_new_ones", function()
  local cache = require "kwb.cache"
  local path = dir .. "/schema3.db"
  local c = assert(cache.open(path))
  local id = c:put_candidate { problem = "p", source = "int f(void) { return 1; }" }
  -- (the schema as version 3 left it: no code column, no index on it, no certificate or lesson table)
  c:exec("DROP TABLE certificate")
  c:exec("DROP TABLE lesson")
  c:exec("DROP INDEX build_code")
  c:exec("ALTER TABLE build DROP COLUMN code")
  c:exec("INSERT INTO build(id, candidate, arch, toolchain, ok, log, binary, resources, created) "
         .. "VALUES (?1, ?2, 'host:x', 'cc', 1, NULL, NULL, '{}', 1)", cache.build_id(id, "host:x", "cc"), id)
  c:exec("PRAGMA user_version = 3")
  c:close()
  c = assert(cache.open(path))
  t.eq(c:exec("PRAGMA user_version")[1].user_version, require("kwb.core").cache_schema_version, "migrated")
  local builds = c:builds(id)
  t.eq(#builds, 1, "the old build is kept")
  t.eq(c:exec("SELECT code FROM build")[1].code, nil, "with no code: never taken as measured code")
  t.eq(next(c:codes("host:x", "cc")), nil)
  local code = ("ab"):rep(32)
  c:add_build { candidate = id, arch = "host:y", toolchain = "cc", log = "", code = code }
  t.eq(c:codes("host:y", "cc")[id], code)
  t.raises(function() c:add_build { candidate = id, arch = "host:y", toolchain = "cc", code = "xyz" } end,
           "build.code must be 64 hex digits, got xyz")
  c:close()
end)

-- ---- the CUDA adapter: a cubin's code with the launch plan's parameters ------

t.test("cuda_a_duplicate_needs_the_same_cubin_and_the_same_launch_parameters", function()
  local fake = require "fake_cuda" ()
  fake.cubins = true
  local vecadd = require "fake_vecadd"
  local body = "  for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n}\n"
  local r = kwb.recipe {
    name = "fake_cuda_dupes", backend = "cuda", problem = vecadd.problem, shapes = { n = { 1000, 3000 } },
    start = { source = vecadd.vec .. "  for (int i = n - 1; i >= 0; i--) c[i] = a[i] + b[i];\n}\n", defines = { BLOCK = 32 } },
    launch = function(shape, p) return { grid = { (shape.n + p.BLOCK - 1) // p.BLOCK }, block = { p.BLOCK } } end,
    strategy = require("kwb.strategies.list")({
      { source = vecadd.vec .. body, params = { BLOCK = 64 } },
      { source = "/* the same */\n" .. vecadd.vec .. body, params = { BLOCK = 64 } },   -- duplicate
      { source = "/* launched otherwise */\n" .. vecadd.vec .. body, params = { BLOCK = 128 } },   -- measured
    }),
    timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 },
    sanitize = false,
  }
  local sm, run = r:run { mode = "quiet", store = require("kwb.loop.store").open(dir .. "/fake_cuda.db") }
  local first, dup, other = run.results[1], run.results[2], run.results[3]
  t.truthy(outcomes.verified[first.outcome], first.outcome)
  t.eq(dup.outcome, "duplicate")
  t.eq(dup.duplicate_of, first.id)
  t.truthy(outcomes.verified[other.outcome], "the same cubin launched with BLOCK = 128 is measured: " .. other.outcome)
  t.eq(sm.candidates, 2)
  local blocks = {}
  for _, l in ipairs(fake.launches) do blocks[l.block] = (blocks[l.block] or 0) + 1 end
  t.truthy(blocks[128] and blocks[128] > 0, "BLOCK = 128 ran")
  package.loaded["kwb.cuda"] = nil
end)

t.done()
