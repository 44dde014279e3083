-- tests/lua/test_baseline.lua: the recipe's `baseline` on the host: checked
-- when the recipe loads (exact errors), measured once a run after the start
-- kernel, shown beside the speed-ups in the summary (text and JSON) and in
-- kwb report, and never a candidate (never the best, never a shape's
-- winner, never in the cache's results or the funnel); a wrong baseline is
-- reported and the run goes on without it.
local t = require "t"
local cjson = require "cjson"
local store = require "kwb.loop.store"
local matmul = require "kwb.problems.matmul"

local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")

local function fresh_db(name)
  local path = tmp .. "/" .. name .. ".db"
  for _, suffix in ipairs { "", "-wal", "-shm" } do os.remove(path .. suffix) end
  return path
end

local function keys(tab)
  local out = {}
  for k in pairs(tab or {}) do out[#out + 1] = k end
  table.sort(out)
  return table.concat(out, ",")
end

local function recipe_error(fields)
  local spec = { name = "bad_baseline", problem = matmul {}, shapes = { n = { 8 } },
                 start = "../../kernels/host/matmul_naive.c" }
  for k, v in pairs(fields) do spec[k] = v end
  local ok, err = pcall(kwb.recipe, spec)
  t.eq(ok, false, "the recipe is refused")
  return tostring(err)
end

t.test("baseline_bad_values_are_recipe_errors_naming_field_value_and_known_names", function()
  local e = recipe_error { baseline = "nope" }
  t.truthy(e:find("recipe field 'baseline': no baseline \"nope\" in problem matmul (known: rows)", 1, true), e)
  e = recipe_error { problem = require("kwb.problems.vecadd") {}, shapes = { n = { 8 } }, baseline = "cublas" }
  t.truthy(e:find("recipe field 'baseline': no baseline \"cublas\" in problem vecadd (it has none: give "
                  .. "{ file =, fn = })", 1, true), e)
  e = recipe_error { baseline = 3 }
  t.truthy(e:find("recipe field 'baseline': expected a name of the problem's baselines or { file = | source =, "
                  .. "defines =, fn = }, got number 3", 1, true), e)
  e = recipe_error { baseline = { file = "../../kernels/host/matmul_ref.c", fnn = "matmul_ref" } }
  t.truthy(e:find("unknown recipe field 'baseline.fnn' (did you mean 'baseline.fn'?)", 1, true), e)
  e = recipe_error { baseline = { file = "../../kernels/host/no_such.c" } }
  t.truthy(e:find("recipe field 'baseline.file': no file ", 1, true), e)
  e = recipe_error { baseline = { file = "../../kernels/host/matmul_ref.c", fn = "2x" } }
  t.truthy(e:find("recipe field 'baseline.fn': expected a C identifier (the baseline's entry point), got \"2x\"", 1, true), e)
end)

t.test("baseline_names_resolve_to_the_problem_s_entry", function()
  local r = kwb.recipe { name = "named", problem = matmul {}, shapes = { n = { 8 } },
                         start = "../../kernels/host/matmul_naive.c", baseline = "rows" }
  t.eq(r.baseline.name, "rows")
  t.eq(r.baseline.label, "rows")
  t.eq(r.baseline.fn, "matmul_rows")
  t.truthy(r.baseline.spec.source:find("void matmul_rows(int n", 1, true), "the problem's source")
  t.truthy(r.baseline.spec.source:find("if (!acc) return;", 1, true), "no abort")
  local f = kwb.recipe { name = "filed", problem = matmul {}, shapes = { n = { 8 } },
                         start = "../../kernels/host/matmul_naive.c",
                         baseline = { file = "../../kernels/host/matmul_ref.c", fn = "matmul_ref" } }
  t.eq(f.baseline.label, "matmul_ref.c")
  t.eq(f.baseline.name, nil, "not a problem's")
  t.truthy(f.baseline.spec.file:find("/kernels/host/matmul_ref.c$"), f.baseline.spec.file)
  t.eq(kwb.recipe { name = "none", problem = matmul {}, shapes = { n = { 8 } },
                    start = "../../kernels/host/matmul_naive.c" }.baseline, nil, "no baseline: none")
end)

-- One run of tests/recipes/baseline.lua (in workers: the file returns it).
local db = fresh_db("baseline")
local st = store.open(db)
local r = kwb.load "tests/recipes/baseline.lua"
local sm, run = r:run { mode = "quiet", store = st }

t.test("baseline_summary_has_its_medians_and_each_shape_s_ratio", function()
  t.eq(keys(sm.baseline), "id,median,name,seconds", "the summary's baseline fields")
  t.eq(sm.baseline.name, "shape_reps.c")
  t.eq(keys(sm.baseline.median), "n=48,n=96")
  t.eq(keys(sm.best.vs_baseline), "n=48,n=96")
  -- (the baseline took its turns in the final round: the pick's ratio to it is the round's, in turns)
  local certify = require "kwb.loop.certify"
  local c = sm.certificate
  local bid = certify.role(c, "baseline")
  t.eq(bid, sm.baseline.id, "the baseline took turns in the round")
  for _, k in ipairs { "n=48", "n=96" } do
    t.eq(sm.best.vs_baseline[k], certify.find(c, "vs_baseline", c.pick, bid, k).median, "vs baseline: the round's at " .. k)
    t.eq(sm.best.baseline_median[k], certify.entry(c, bid).median[k], "the baseline's median in the round at " .. k)
  end
  -- the baseline does the work once at both shapes, the pick 10 times at n=48 and once at n=96
  t.truthy(sm.best.vs_baseline["n=48"] < 0.4, "a tenfold gap in work at n=48: " .. sm.best.vs_baseline["n=48"])
  t.truthy(sm.best.vs_baseline["n=96"] > 0.5 and sm.best.vs_baseline["n=96"] < 2,
           "the same work at n=96: " .. sm.best.vs_baseline["n=96"])
  t.eq(#sm.elsewhere, 1)
  local e = sm.elsewhere[1]
  t.eq(e.shape, "n=48")
  t.eq(e.baseline, certify.entry(c, bid).median["n=48"])
  t.eq(e.vs_baseline, e.baseline / e.median, "the winner's ratio, the round's medians")
  t.truthy(sm.stages.baseline > 0 and sm.stages.baseline < sm.stages.start, "its seconds counted within the start's")
end)

t.test("baseline_is_never_a_candidate_best_winner_or_result", function()
  local id = sm.baseline.id
  t.truthy(id ~= sm.best.id, "not the pick")
  for key, w in pairs(r:session().standings.winners) do t.truthy(w.id ~= id, "not the winner at " .. key) end
  t.eq(sm.candidates, 2, "the two proposals only")
  local n = 0
  for _, c in pairs(sm.funnel) do n = n + c end
  t.eq(n, 2, "the funnel counts the two proposals")
  for _, res in ipairs(run.results) do t.truthy(res.id ~= id, "not a result of the run") end
  for _, res in ipairs(st:results(r:session().ctx)) do t.truthy(res.id ~= id, "not in the cache's results") end
  t.eq(require("kwb.cache").open(db):get(id), nil, "no candidate row")
  -- kwb export picks among candidates: the baseline is nowhere in its plan
  local plan = require("kwb.insight.export").plan(r, st:results(r:session().ctx))
  t.eq(#plan, 2, "a choice per shape")
  for _, c in ipairs(plan) do t.truthy(c.kernel and c.kernel.id ~= id, "a candidate exported at " .. c.key) end
end)

t.test("baseline_is_kept_with_the_run_and_kwb_report_shows_it", function()
  local b = st:baseline(r, r:session().ctx.device)
  t.eq(b.name, "shape_reps.c")
  t.eq(b.run, run.record.id)
  t.eq(b.shapes["n=96"].median, sm.baseline.median["n=96"])
  local dir = tmp .. "/baseline_report"
  local d = require("kwb.insight.report").write(r, dir, { store = st })
  t.eq(d.baseline.name, "shape_reps.c")
  local f = assert(io.open(dir .. "/report.md"))
  local md = f:read("a")
  f:close()
  -- (the run's final round timed the baseline in turns with the pick: the
  -- report's "vs baseline" is that round's ratio, with its interval)
  local certify, time = require "kwb.loop.certify", require("kwb.figures").time
  local c = sm.certificate
  local bl = certify.role(c, "baseline")
  t.eq(bl, sm.baseline.id, "the round timed the baseline")
  t.truthy(md:find("| shape | start | best | speedup | 95% interval | % of the floor | baseline | vs baseline |\n", 1,
                   true), md)
  local v = certify.find(c, "vs_baseline", c.pick, bl, "n=96")
  local cell = string.format("| %s | %.2fx (%.2f-%.2f) |\n", time(certify.entry(c, bl).median["n=96"]), v.median, v.lo, v.hi)
  t.truthy(md:find("\n| n=96 | ", 1, true) and md:find(cell, 1, true), cell .. md)
  t.truthy(md:find("Baseline shape_reps.c: timed in the final round in turns with the pick; \"vs baseline\" is its time "
                   .. "over the pick's there, with its 95% interval.", 1, true), md)
  -- the winner at n=48 and faster elsewhere, from the round
  local w = c.winners["n=48"]
  local g = certify.find(c, "gain", w, c.pick, "n=48")
  t.truthy(md:find(string.format("\n| n=48 | %s | LARGE_REPS=40 SMALL_REPS=1 | %s | %s | %.2fx | %.2f-%.2f |\n",
                                 w:sub(1, 8), time(certify.entry(c, w).median["n=48"]),
                                 time(certify.entry(c, c.pick).median["n=48"]), g.median, g.lo, g.hi), 1, true), md)
  t.truthy(md:find(string.format("\nFaster elsewhere: at 1 of 2 shapes another kernel beats the pick by more than 2%%: "
                                 .. "%s at n=48, %.2fx (%.2f-%.2f).\n", w:sub(1, 8), g.median, g.lo, g.hi), 1, true), md)
end)

t.test("baseline_cli_text_and_json_summaries_show_vs_baseline", function()
  local path = fresh_db("baseline_cli")
  local function cli(flag)
    local p = io.popen("./kwb --cache " .. path .. " tests/recipes/baseline.lua " .. flag .. " 2>&1")
    local text = p:read("a")
    t.eq(p:close(), true, text)
    return text
  end
  local text = cli("--plain")
  -- (checked after the start kernel, timed in turns beside the first candidate, which is then reported)
  t.truthy(text:find("\nbaseline shape_reps.c: 2 shapes verified %([%d.]+ s%); to be timed in turns beside the run's "
                     .. "first timed candidate\nbaseline shape_reps.c: timed in turns beside (%x+)\n%[ 1/10%] %1 accepted "),
           text)
  -- (the pick's table and faster-elsewhere's from the final round, each ratio with its 95% interval)
  t.truthy(text:find("\nshape +start +pick +speedup +95%% interval +baseline +vs baseline +%% floor\n"), text)
  t.truthy(text:find("\nn=96 +[%d.]+ [mu]?s +[%d.]+ [mu]?s +[%d.]+x +[%d.]+%-[%d.]+ +[%d.]+ [mu]?s +[%d.]+x +"), text)
  t.truthy(text:find("\nshape +pick +there +gain +95%% interval +vs baseline +kernel +what\n"), text)
  t.truthy(text:find(" · start kernel [%d.]+ s %(baseline [%d.]+ s%) · "), text)
  local events, last = {}, nil
  for line in cli("--json"):gmatch("[^\n]+") do
    local ev = cjson.decode(line)
    events[#events + 1] = ev
    last = ev
  end
  t.eq(last.event, "summary")
  t.eq(keys(last.baseline), "id,median,name,seconds")
  t.eq(keys(last.best.vs_baseline), "n=48,n=96")
  -- (JSON keeps 14 digits)
  local certify = require "kwb.loop.certify"
  local c, bid = last.certificate, last.baseline.id
  t.near(last.best.vs_baseline["n=96"], certify.find(c, "vs_baseline", c.pick, bid, "n=96").median, 1e-9)
  t.near(last.elsewhere[1].vs_baseline, certify.entry(c, bid).median["n=48"] / last.elsewhere[1].median, 1e-9)
  for _, ev in ipairs(events) do
    if ev.event == "candidate" then t.truthy(ev.id ~= last.baseline.id, "no candidate event for it") end
  end
end)

t.test("baseline_that_is_wrong_is_reported_not_used", function()
  local wr = kwb.load "tests/recipes/baseline_wrong.lua"
  local wsm, wrun = wr:run { mode = "quiet", store = store.open(fresh_db("baseline_wrong")) }
  t.eq(keys(wsm.baseline), "error,id,name,seconds", "an error and no medians")
  t.eq(wsm.baseline.name, "copy_a.c")
  t.truthy(wsm.baseline.error:find("^wrong: output c at n=48 %(the first run%): %d+ elements off"), wsm.baseline.error)
  t.eq(wsm.best.vs_baseline, nil, "no column")
  t.eq(wsm.candidates, 1, "the run went on")
  t.truthy(wrun.results[1].outcome == "accepted" or wrun.results[1].outcome == "slower", "verified and timed")
  local p = io.popen("./kwb --cache " .. fresh_db("baseline_wrong_cli") .. " tests/recipes/baseline_wrong.lua --plain 2>&1")
  local text = p:read("a")
  t.eq(p:close(), true, text)
  t.truthy(text:find("\nbaseline copy_a.c: not measured, an error of the recipe: wrong: output c at n=48 (the first run): ",
                     1, true), text)
  t.truthy(not text:find("vs baseline", 1, true), "no column in the table")
end)

t.test("baseline_named_by_the_problem_measured_in_this_process", function()
  -- built in a script, not returned by a file: measured by the session's own harness
  local rr = kwb.recipe { name = "named_rows", problem = matmul {}, shapes = { n = { 32 } },
                          start = "../../kernels/host/matmul_naive.c", baseline = "rows",
                          template = "../../kernels/host/matmul_tiled.c",
                          strategy = require("kwb.strategies.list")({ { BM = 8, BN = 32, BK = 8, UNROLL = 1 } }, "one"),
                          timing = { warmup = 0.002, min_samples = 3, cap = 0.05, target = 0.05 }, seed = 3 }
  local nsm = rr:run { mode = "quiet", store = store.open(fresh_db("baseline_rows")) }
  t.eq(nsm.baseline.error, nil, "measured")
  t.eq(nsm.baseline.name, "rows")
  t.eq(nsm.baseline.description, "i-k-j loop over a row of double sums, as the reference")
  t.eq(keys(nsm.baseline.median), "n=32")
  t.truthy(nsm.baseline.median["n=32"] > 0, "timed")
end)

t.test("baseline_host_matmul_llm_shows_the_column_on_a_cpu_machine", function()
  local p = io.popen("KWB_MODEL= ./kwb --cache " .. fresh_db("baseline_llm")
                     .. " recipes/host_matmul_llm.lua --plain --budget 2 2>&1")
  local text = p:read("a")
  t.eq(p:close(), true, text)
  t.truthy(text:find("\nbaseline matmul_ref.c: 3 shapes verified %([%d.]+ s%); to be timed in turns beside the run's "
                     .. "first timed candidate\nbaseline matmul_ref.c: timed in turns beside (%x+)\n%[1/2%] %1 "), text)
  t.truthy(text:find("\nshape +start +pick +speedup +95%% interval +baseline +vs baseline +"), text)
end)

-- The nvfp4_moe baseline "cublas" sorts the routing on the host (its GPU run:
-- tests/gpu/baseline): each expert's slots in order, rows in expert order.
t.test("baseline_cublas_routing_lists_each_expert_s_slots_in_order", function()
  local route = require("kwb.problems.nvfp4.cublas").route
  -- T = 3 tokens, K = 2, E = 4: slots 0..5 go to experts 2 0 | 2 3 | 0 2
  local rt = assert(route({ 2, 0, 2, 3, 0, 2 }, 3, 4, 2))
  t.eq(table.concat({ rt.count[0], rt.count[1], rt.count[2], rt.count[3] }, " "), "2 0 3 1", "counts")
  t.eq(table.concat({ rt.off[0], rt.off[1], rt.off[2], rt.off[3] }, " "), "0 2 2 5", "offsets")
  t.eq(table.concat(rt.order, " "), "0 2 0 1 2 1", "the token of each row: expert 0's slots 1, 4; 2's 0, 2, 5; 3's 3")
  t.eq(table.concat(rt.slot, " "), "2 0 3 5 1 4", "the row of each slot")
  local none, why = route({ 0, 4 }, 1, 4, 2)
  t.eq(none, nil)
  t.eq(why, "slot 1 routes to expert 4, outside 0..3")
  t.eq(kwb.load("recipes/nvfp4_moe.lua").baseline.name, "cublas", "the NVFP4 recipe's baseline")
end)

t.done()
