-- tests/lua/test_loop.lua: the research loop end to end on the host: the
-- funnel of planted candidates, resume from the cache, the REPL helpers and
-- the shipped host recipe through the command line.
local t = require "t"
local store = require "kwb.loop.store"
local cjson = require "cjson"

local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")

local function fresh_store(name)
  local path = tmp .. "/" .. name .. ".db"
  for _, suffix in ipairs { "", "-wal", "-shm" } do os.remove(path .. suffix) end
  return store.open(path), path
end

local planted_store, planted_path = fresh_store("planted")
local planted = kwb.load "tests/recipes/planted.lua"
local summary, run = planted:run { mode = "quiet", store = planted_store }

t.test("loop_planted_candidates_give_the_exact_funnel", function()
  local want = { forbidden = 2, ["compile-error"] = 1, wrong = 1, impossible = 0, crashed = 0,
                 timeout = 0, slower = 1, accepted = 1 }
  for k, v in pairs(want) do t.eq(summary.funnel[k], v, "funnel " .. k) end
  t.eq(summary.candidates, 6, "candidates")
  t.eq(summary.known, 0, "known")
  t.eq(summary.exhausted, true, "exhausted")
end)

t.test("loop_planted_outcomes_name_their_rule_line_and_shape", function()
  local r = run.results
  t.eq(r[1].name, "planted_forbidden.c")
  t.eq(r[1].rule, "timer"); t.eq(r[1].line, 7)
  t.truthy(r[1].reason:find("found in the source", 1, true), r[1].reason)
  t.eq(r[2].rule, "timer"); t.eq(r[2].line, 9)
  t.truthy(r[2].reason:find("clock_gettime at line 9", 1, true), r[2].reason)
  t.truthy(r[2].reason:find("preprocessed source", 1, true), r[2].reason)
  t.eq(r[3].outcome, "compile-error")
  t.truthy(r[3].reason:find("planted_syntax.c:4:%d+: error:"), r[3].reason)
  t.eq(r[4].outcome, "wrong")
  t.truthy(r[4].reason:find("^output c at n=48 %(the first run%): %d+ elements off"), r[4].reason)
  t.eq(r[5].outcome, "slower")
  t.truthy(r[5].score < 0.3, "ten times the work scores " .. r[5].score)
  t.eq(r[6].outcome, "accepted")
  t.truthy(r[6].score > 1.5, "the tiled kernel scores " .. r[6].score)
end)

t.test("loop_summary_names_the_best_and_its_speedup_per_shape", function()
  t.eq(summary.best.id, run.results[6].id)
  t.truthy(summary.best.speedup["n=48"] > 1, "n=48")
  t.truthy(summary.best.speedup["n=96"] > 1, "n=96")
  t.eq(summary.best.params.UNROLL, 4)
  t.eq(summary.elsewhere, nil, "the tiled pick is the fastest at both shapes")
  t.eq(summary.shape_count, 2)
end)

-- What `r:run {}` shows at the REPL: the summary as the pick, what the final
-- round certified of it (its score and each shape's speed-up, each with its
-- 95% interval, from the certificate) and the funnel; the certificate one
-- index away prints as `kwb cache show RUN` shows it; the run as one line;
-- their fields are there as ever (JSON too).
t.test("loop_a_run_prints_as_its_summary", function()
  local pretty = require "kwb.pretty"
  local certify = require "kwb.loop.certify"
  local text = pretty.format(summary)
  local lines = {}
  for l in text:gmatch("[^\n]+") do lines[#lines + 1] = l end
  t.eq(#lines, 4, text)
  t.truthy(lines[1]:find("^done: best %x+, %d+%.%d+x geomean over the start kernel  BK=32 BM=32 BN=64 UNROLL=4$"), lines[1])
  local c = summary.certificate
  local start = certify.role(c, "start")
  local sc = certify.find(c, "score", c.pick, start)
  t.eq(c.pick, run.results[6].id, "the round names the tiled kernel")
  t.eq(lines[2], string.format("certified: %d rounds in turns; %.2fx over the start kernel, 95%% interval %.2f-%.2f "
                               .. "(sm.certificate)", c.rounds, sc.median, sc.lo, sc.hi))
  local a, b = certify.find(c, "speedup", c.pick, start, "n=48"), certify.find(c, "speedup", c.pick, start, "n=96")
  t.eq(lines[3], string.format("  n=48 %.2fx (%.2f-%.2f) · n=96 %.2fx (%.2f-%.2f)", a.median, a.lo, a.hi, b.median,
                               b.lo, b.hi))
  t.truthy(lines[4]:find("^funnel: 6 candidates · 4 bad %(67%%%) · accepted 1 · slower 1 · wrong 1 · compile%-error 1 · "
                         .. "forbidden 2"), lines[4])
  -- the details one index away: the certificate as kwb cache show RUN prints it
  local cert = pretty.format(summary.certificate)
  t.eq(cert, table.concat(certify.lines(c), "\n"))
  t.truthy(cert:find(string.format("^certificate  2 kernels in turns, %d rounds, ", c.rounds)), cert)
  t.truthy(cert:find("\npick         " .. run.results[6].short .. "\n", 1, true), cert)
  t.truthy(cert:find(string.format("\n  score    %s  %s  all    %.3fx   %.3f%%-%.3f ", run.results[6].short, start:sub(1, 8),
                                    sc.median, sc.lo, sc.hi)), cert)
  t.truthy(pretty.format(run):find("^kwb%.run planted_matmul: 6 candidates, 6 results %(run%.results%), best %x+$"),
           pretty.format(run))
  -- the REPL shows r:run's two values a line apart where one takes several lines
  local shown, real_print = {}, print
  print = function(x) shown[#shown + 1] = x end
  local ok, err = pcall(require("kwb.cli.repl").show, summary, run)
  pcall(require("kwb.cli.repl").show, 1, "two")
  print = real_print
  assert(ok, err)
  t.eq(shown[1], text .. "\n" .. pretty.format(run))
  t.eq(shown[2], '1\t"two"', "one-line values stay tab-separated")
  local j = cjson.decode(cjson.encode(summary))
  t.eq(j.funnel.accepted, 1, "the fields, in JSON as ever")
  t.eq(j.certificate.pick, c.pick, "the certificate's too")
end)

-- The certified lines where the round named the start kernel (the run's
-- own best not the pick), and where there was no round.
t.test("loop_a_summary_says_what_the_round_certified_or_why_there_was_none", function()
  local summary_mod = require "kwb.loop.summary"
  local lines = summary_mod.certified_lines { certificate = { rounds = 7, shapes = { "n=48" } }, best = { start = true },
                                              run_best = { short = "abcd1234", score = 1.5 }, candidates = 2, known = 0 }
  t.eq(table.concat(lines, "\n"), "certified: 7 rounds in turns; no kernel beats the start kernel beyond the noise "
       .. "(sm.certificate)\nthe run's best abcd1234 (1.50x in the run) is not the pick")
  t.eq(table.concat(summary_mod.certified_lines { uncertified = "no final round (--certify 0)", best = {}, candidates = 1,
                                                  known = 0 }, "\n"), "not certified: no final round (--certify 0)")
  t.eq(#summary_mod.certified_lines { uncertified = "nothing but the start kernel to time", best = {}, candidates = 0,
                                      known = 0 }, 0, "a run that met no candidate says nothing of it")
end)

-- README's REPL example shows what a run prints there: each of its lines
-- is of a kind the planted run's printed value has (the same patterns), in
-- the same order.
t.test("loop_readme_shows_a_run_as_the_repl_prints_it", function()
  local kinds = {
    { "done", "^done: best %x+, [%d.]+x geomean over the start kernel  .+$" },
    { "certified", "^certified: %d+ rounds in turns; [%d.]+x over the start kernel, 95%% interval [%d.]+%-[%d.]+ "
                   .. "%(sm%.certificate%)$" },
    { "funnel", "^funnel: %d+ candidates · %d+ bad %(%d+%%%) · accepted %d+ · " },
    { "elsewhere", "^%d+ of %d+ shapes faster elsewhere %(sm%.elsewhere%)$" },
    { "run", "^kwb%.run [%w_]+: %d+ candidates, %d+ results %(run%.results%), best %x+$" },
  }
  local function kind(l)
    if l:sub(1, 2) == "  " then   -- each shape's speed-up and its interval
      for part in (l:sub(3) .. " · "):gmatch("(.-) · ") do
        if not part:match("^[%w=,]+ [%d.]+x %([%d.]+%-[%d.]+%)$") then return nil end
      end
      return "shapes"
    end
    for _, k in ipairs(kinds) do if l:find(k[2]) then return k[1] end end
  end
  local function kinds_of(text)
    local out = {}
    for l in text:gmatch("[^\n]+") do out[#out + 1] = kind(l) or ("? " .. l) end
    return table.concat(out, " | ")
  end
  local shown = require("kwb.pretty").format(summary) .. "\n" .. require("kwb.pretty").format(run)
  t.eq(kinds_of(shown), "done | certified | shapes | funnel | run", "the planted run as the REPL shows it")
  local f = assert(io.open("README.md", "rb"))
  local readme = f:read("a")
  f:close()
  local example = readme:match("\n    > r:run { candidates = 50, strategy = \"genetic\" }\n    %.%.%.\n(.-)\n    > ")
  t.truthy(example, "README's REPL example")
  t.eq(kinds_of((example:gsub("\n    ", "\n"):gsub("^    ", ""))), "done | certified | shapes | funnel | elsewhere | run",
       "README's example")
end)

t.test("loop_records_every_outcome_and_the_run", function()
  local again = store.open(planted_path)
  local st = again.cache:stats()
  t.eq(st.candidates, 7, "the start kernel and six candidates")
  t.eq(st.results, 14, "one row per candidate and shape")
  t.eq(st.builds, 5, "everything that reached the compiler (not the two forbidden)")
  t.eq(#again:results(planted:session().ctx), 7)
  local runs = again:runs()
  t.eq(#runs, 1)
  t.eq(runs[1].funnel.forbidden, 2)
  t.eq(runs[1].funnel.accepted, 1)
  local c = assert(again.cache:get(run.results[1].id))
  t.eq(c.outcome, "forbidden")
  t.eq(c.problem, "matmul")
  local b = assert(again.cache:build(run.results[3].id, again:context({}).device, "cc"))
  t.eq(b.ok, false)
  t.truthy(b.log:find("error:", 1, true), "the compile log is kept")
end)

t.test("loop_resume_evaluates_nothing_twice", function()
  local r2 = kwb.load "tests/recipes/planted.lua"   -- a new session on the same store
  local s2 = r2:run { mode = "quiet", store = store.open(planted_path) }
  t.eq(s2.candidates, 0, "evaluated")
  t.eq(s2.known, 6, "known from the cache")
  t.eq(s2.best.id, summary.best.id, "best")
  local st = store.open(planted_path).cache:stats()
  t.eq(st.candidates, 7, "no candidate added")
  t.eq(st.results, 14, "no result added")
  t.eq(st.runs, 2, "a second run record")
end)

t.test("loop_resume_continues_a_grid_where_it_stopped", function()
  local st, path = fresh_store("grid")
  local function recipe()
    return kwb.recipe {
      name = "grid_resume", problem = require("kwb.problems.matmul") {}, shapes = { n = { 24 } },
      start = "../../kernels/host/matmul_naive.c", template = "../../kernels/host/matmul_tiled.c",
      space = { BM = { 8, 16 }, BN = { 16, 32 }, BK = { 8 }, restrict = function(p) return p.BM < p.BN end },
      strategy = "grid", flags = { "-O2" },
      timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 },
    }
  end
  local a = recipe():run { mode = "quiet", store = st, candidates = 2 }
  t.eq(a.candidates, 2)
  local b = recipe():run { mode = "quiet", store = store.open(path), candidates = 10 }
  t.eq(b.candidates, 1, "the one point left (BM=16 BN=32)")
  t.eq(b.exhausted, true)
  local c = recipe():run { mode = "quiet", store = store.open(path) }
  t.eq(c.candidates, 0)
  local ids, n = {}, 0
  for _, r in ipairs(store.open(path):results(recipe():session({ store = store.open(path) }).ctx)) do
    t.eq(ids[r.id], nil, "recorded once: " .. r.id)
    ids[r.id] = true
    n = n + 1
  end
  t.eq(n, 4, "start + 3 grid points")
end)

t.test("loop_budget_minutes_ends_the_run", function()
  local r = kwb.load "tests/recipes/planted.lua"
  -- the start kernel's checks count against the minutes too: measure it first
  local sm2 = r:run { mode = "quiet", store = fresh_store("minutes"), candidates = 2 }
  t.eq(sm2.candidates, 2, "the candidates budget of a run")
  t.eq(sm2.funnel.forbidden, 2)
  local sm = r:run { mode = "quiet", minutes = 1e-6 }
  t.eq(sm.candidates, 0, "the time was up before the first proposal")
  t.eq(sm.exhausted, false)
end)

t.test("loop_try_evaluates_one_candidate_and_accept_can_change", function()
  local r = kwb.load "tests/recipes/planted.lua"
  r:session { store = fresh_store("try") }
  local out = {}
  local real_print = print
  print = function(...) out[#out + 1] = table.concat({ ... }, "\t") end
  local ok, res = pcall(r.try, r, { BM = 16, BN = 32, BK = 16, UNROLL = 2 })
  print = real_print
  assert(ok, res)
  t.eq(res.outcome, "accepted")
  t.truthy(out[1]:find("accepted · %d+%.%d+x geomean over the start kernel"), out[1])
  t.truthy(out[2]:find("^shape%s+start%s+this%s+speedup"), out[2])
  t.truthy(out[3]:find("^n=48 "), out[3])
  r.accept = function() return false end
  -- race bars no kernel can reach: a raced first look would stop at once
  for _, sh in ipairs(r.shapes) do r:session().standings.best_time[sh.key] = 1e-9 end
  print = function() end
  local ok2, res2 = pcall(r.try, r, { BM = 16, BN = 32, BK = 16, UNROLL = 4 })
  print = real_print
  assert(ok2, res2)
  t.eq(res2.outcome, "slower")
  for key, sh in pairs(res2.shapes) do t.eq(sh.partial, false, "timed in full at " .. key .. ", never raced") end
end)

-- The start kernel's own code measured again (kwb try, --retime) is the
-- start again, and a later session takes it; a cache an older build left
-- with the start's code stored "slower" has it measured again as the start.
t.test("loop_retiming_the_start_kernel_leaves_it_the_start", function()
  local st = fresh_store("retime_start")
  local r = kwb.load "tests/recipes/planted.lua"
  local s = r:session { store = st }
  local start = s:ensure_start()
  t.eq(start.outcome, "start")
  local again = s:evaluate(s:candidate(r.start, "try"))
  t.eq(again.id, start.id)
  t.eq(again.outcome, "start", "judged as the start, not against itself")
  t.eq(s.start, again, "the session's start is the new measurement")
  t.eq(st:known(s.ctx, start.id).outcome, "start", "stored as the start")
  local new_session = require("kwb.loop.session").new
  local later = new_session(r, { store = st })
  t.eq(later:ensure_start().outcome, "start", "a later session takes it")
  -- an older build's --retime: the start's code judged as a candidate against
  -- itself and stored so (slower, or accepted on a lucky timing)
  s:complete(s:submit(s:candidate(r.start, "try")))
  local stored = st:known(s.ctx, start.id).outcome
  t.truthy(stored == "slower" or stored == "accepted", "stored as a candidate: " .. stored)
  local repaired = new_session(r, { store = st })
  local got, fresh = repaired:ensure_start()
  t.eq(got.outcome, "start")
  t.eq(fresh, true, "measured again as the start")
  t.eq(st:known(s.ctx, start.id).outcome, "start")
end)

-- A candidate's id is taken over its code as it compiles: line endings,
-- trailing spaces and blank lines at the ends change nothing; a changed line does.
t.test("loop_the_same_kernel_with_other_whitespace_is_the_same_candidate", function()
  local r = kwb.load "tests/recipes/planted.lua"
  local s = require("kwb.loop.session").new(r, { store = fresh_store("identity") })
  local src = "void f(int n, float *x) {\n  for (int i = 0; i < n; i++) x[i] = 0;\n}\n"
  local id = s:candidate({ source = src }, "try").id
  local noisy = "\n\r\n" .. src:gsub("\n", "  \r\n") .. "\n\n\t\n"
  local c = s:candidate({ source = noisy }, "try")
  t.eq(c.id, id, "CRLF, trailing spaces, blank lines at both ends")
  t.eq(c.source, src, "the text built and kept")
  t.truthy(s:candidate({ source = src:gsub("= 0", "= 1") }, "try").id ~= id, "another line is another candidate")
  t.truthy(s:candidate({ source = src:gsub("  for", "\tfor") }, "try").id ~= id, "indentation is kept")
end)

t.test("loop_cli_json_ends_with_the_summary_of_host_matmul", function()
  local p = io.popen("./kwb recipes/host_matmul.lua --json --budget 3 --seed 5 2>&1")
  local events = {}
  for line in p:lines() do events[#events + 1] = cjson.decode(line) end
  t.eq(p:close(), true, "exit status")
  t.eq(events[1].event, "start")
  t.eq(events[2].event, "start-kernel")
  local last = events[#events]
  t.eq(last.event, "summary")
  t.eq(#events, 6, "start, start-kernel, three candidates, summary")
  local total = 0
  for _, v in pairs(last.funnel) do total = total + v end
  t.eq(total, 3, "the funnel counts every candidate")
  t.truthy(last.best.score > 1, "best speedup " .. tostring(last.best.score))
  t.truthy(last.best.speedup["n=200"] > 1, "n=200")
end)

-- A pick that does not win every shape: the summary says where another kernel does.
t.test("loop_summary_names_shapes_where_another_kernel_beats_the_pick", function()
  local r = kwb.load "tests/recipes/elsewhere.lua"
  local sm, er = r:run { mode = "quiet", store = fresh_store("elsewhere") }
  t.eq(er.results[1].outcome, "accepted")
  t.eq(er.results[2].outcome, "slower")
  t.eq(sm.best.id, er.results[1].id)
  t.eq(#sm.elsewhere, 1, "n=96 is the pick's; n=48 is the other's")
  local e = sm.elsewhere[1]
  t.eq(e.shape, "n=48")
  t.eq(e.id, er.results[2].id)
  t.eq(e.params.SMALL_REPS, 1)
  t.eq(e.pick, sm.best_median["n=48"])
  -- tenfold in work; a loaded machine measured 4.9x once (call overhead and
  -- noise weigh on the small one), so the margin asked is 2.5x, still far
  -- beyond the 2% that makes a shape `elsewhere`
  t.truthy(e.pick / e.median > 2.5, string.format("a tenfold gap in work measured as %.1fx", e.pick / e.median))
end)

t.test("loop_cli_prints_the_shapes_faster_elsewhere_also_from_the_cache", function()
  local db = tmp .. "/elsewhere_cli.db"
  for _, suffix in ipairs { "", "-wal", "-shm" } do os.remove(db .. suffix) end
  local function run(flag)
    local p = io.popen("./kwb --cache " .. db .. " tests/recipes/elsewhere.lua " .. flag .. " 2>&1")
    local text = p:read("a")
    t.eq(p:close(), true, text)
    return text
  end
  local text = run("--plain")
  t.truthy(text:find("\nfaster elsewhere: at 1 of 2 shapes another kernel beats the pick by more than 2%%, beyond the noise\n"), text)
  -- (the final round's gain, then its 95% interval: kwb.loop.certify)
  t.truthy(text:find("\nn=48 +[%d.]+ [mu]?s +[%d.]+ [mu]?s +[%d.]+x +[%d.]+%-[%d.]+ +%x+ +LARGE_REPS=40 SMALL_REPS=1\n"), text)
  t.truthy(text:find("\na layer dispatching per shape takes these there, the pick elsewhere: `kwb export RECIPE.lua DIR` "
                     .. "writes it\n", 1, true), text)
  -- a second run knows both candidates from the cache and says the same
  local last
  for line in run("--json"):gmatch("[^\n]+") do last = line end
  local sm = cjson.decode(last)
  t.eq(sm.known, 2)
  t.eq(#sm.elsewhere, 1)
  t.eq(sm.elsewhere[1].shape, "n=48")
  t.eq(sm.elsewhere[1].params.LARGE_REPS, 40)
end)

t.done()
