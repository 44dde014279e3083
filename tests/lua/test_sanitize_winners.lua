-- tests/lua/test_sanitize_winners.lua: under sanitize = "best", a kernel
-- kwb names as a best or a shape's winner (kwb export's per-shape choice,
-- cache:best with sanitized = true, kwb report's pick, the summary's winners)
-- has passed compute-sanitizer here: a result the tools cleared is stored
-- `sanitized`, readers take no other, and at the run's end each shape's
-- winner that never was sanitized is (kwb.loop.sanitizer's sanitize_winners); one
-- found unsafe gives way to the next fastest there. Results are judged from planted
-- medians, and the tools are stood in for (they need the GPU).
local t = require "t"
local core = require "kwb.core"

require "fake_cuda" ()
local vecadd = require "fake_vecadd"
local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local body = vecadd.vec .. "  for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n}\n"

local r = kwb.recipe { name = "winners", backend = "cuda", problem = vecadd.problem, shapes = { n = { 1000, 2000 } },
                       verify_shapes = false, start = { source = body, defines = { BLOCK = 32 } }, sanitize = "best",
                       launch = function(shape, p) return { grid = { (shape.n + p.BLOCK - 1) // p.BLOCK },
                                                            block = { p.BLOCK } } end }

-- Medians (ms) at n = 1000 and 2000. A: the best (geomean 0.87 against the
-- start's 1.41); S and S2: slower overall, but S wins n = 2000 and S2 is
-- next there (1.45 against A's 1.5).
local medians = { start = { 1.0, 2.0 }, A = { 0.5, 1.5 }, S = { 0.8, 1.4 }, S2 = { 0.9, 1.45 } }
local order = { "A", "S", "S2" }

-- run(path, unsafe [, defer]) -> session, results by name, names sanitized
-- in order (the stand-in finds the names in `unsafe` unsafe).
local function run(path, unsafe, defer)
  for _, f in ipairs { path, path .. "-wal", path .. "-shm" } do os.remove(f) end
  local s = require("kwb.loop.session").new(r, { store = require("kwb.loop.store").open(path) })
  s.run_record = s.store:begin_run { recipe = "winners", source = "-- a test's", settings = {} }
  local sanitized, by, names = {}, {}, {}
  s.sanitize = function(_, cand, res)
    local name = names[cand.id]
    sanitized[#sanitized + 1] = name
    res.seconds.sanitize, res.sanitized = 0.25, true   -- (as Session:sanitize marks a clean one)
    if unsafe[name] then res.outcome, res.reason, res.sanitized = "unsafe", "compute-sanitizer memcheck at n=1000: planted", nil end
  end
  for i, name in ipairs { "start", table.unpack(order) } do
    local cand = name == "start" and s:candidate(r.start, "start")
                 or s:candidate({ source = body:gsub("b%[i%];", "b[i] + 0 * " .. name:byte(-1) .. ";"),
                                  params = { BLOCK = 32 }, name = name .. ".cu" }, "grid")
    names[cand.id] = name
    local shapes = {}
    for j, n in ipairs { 1000, 2000 } do
      local m = medians[name][j] * 1e-3
      shapes["n=" .. n] = { median = m, ci_lo = m * 0.999, ci_hi = m * 1.001, n = 20, partial = false }
    end
    local res = { id = cand.id, short = cand.short, origin = "grid", seq = i, seed = 1, seconds = {}, shapes = shapes,
                  name = cand.name }
    by[name] = s:complete { cand = cand, res = res, opts = { start = name == "start" }, t0 = core.now() }
    if name == "start" then s.start, s.best = by.start, by.start; if defer then s:put_off() end end
  end
  return s, by, sanitized
end

local function ids(list, by)
  local out = {}
  for i, c in ipairs(list) do
    for name, res in pairs(by) do if res.id == c.res.id then out[i] = name .. ":" .. c.was .. ">" .. c.res.outcome end end
  end
  return table.concat(out, " ")
end

t.test("sanitize_winners_a_slower_shape_winner_is_sanitized_at_the_end", function()
  local s, by, sanitized = run(dir .. "/w1.db", {})
  t.eq(by.A.outcome, "accepted")
  t.eq(by.S.outcome, "slower")
  t.eq(table.concat(sanitized, " "), "A", "the best at once")
  t.eq(s.store:known(s.ctx, by.S.id).sanitized, nil, "S stored without the mark")
  t.eq(s.store:known(s.ctx, by.A.id).sanitized, true, "A with it")
  -- until then no reader takes S at n=2000, though it is the fastest there
  t.eq(require("kwb.insight.export").plan(r, s.store:results(s.ctx))[2].kernel.id, by.A.id)
  t.eq(s.store.cache:best(s.ctx.problem, { shape = "n=2000", sanitized = true })[1].candidate, by.A.id)
  t.eq(s.standings.winners["n=2000"].id, by.A.id, "nor the summary's winners")
  local row = s.store.cache:best(s.ctx.problem, { shape = "n=2000" })[1]
  t.eq(row.candidate, by.S.id, "cache:best without sanitized = true: the fastest")
  t.eq(row.sanitized, nil, "saying it was not sanitized")
  local changed = s:sanitize_winners { [by.S.id] = by.S }
  t.eq(#changed, 0, "clean: no outcome changed")
  t.eq(table.concat(sanitized, " "), "A S", "S, n=2000's winner, sanitized; A wins n=1000 and had it")
  t.eq(by.S.sanitized, true)
  t.eq(s.store:known(s.ctx, by.S.id).sanitized, true)
  t.eq(s.store:known(s.ctx, by.S2.id).sanitized, nil, "S2 wins nowhere: not sanitized")
  t.eq(require("kwb.insight.export").plan(r, s.store:results(s.ctx))[2].kernel.id, by.S.id)
  t.eq(s.store.cache:best(s.ctx.problem, { shape = "n=2000", sanitized = true })[1].candidate, by.S.id)
  t.eq(s.standings.winners["n=2000"].id, by.S.id, "the summary's winner, noted again")
  t.eq(#s:sanitize_winners {}, 0)
  t.eq(table.concat(sanitized, " "), "A S", "once")
end)

t.test("sanitize_winners_an_unsafe_winner_gives_way_to_the_next", function()
  local s, by, sanitized = run(dir .. "/w2.db", { S = true })
  local changed = s:sanitize_winners { [by.S.id] = by.S, [by.S2.id] = by.S2 }
  t.eq(table.concat(sanitized, " "), "A S S2", "S unsafe, then S2, the next at n=2000")
  t.eq(ids(changed, by), "S:slower>unsafe", "revised, with what it was")
  t.eq(changed[1].mine, true)
  t.eq(by.S.reason, "compute-sanitizer memcheck at n=1000: planted")
  t.eq(s.store:known(s.ctx, by.S.id).outcome, "unsafe")
  t.eq(s.store:known(s.ctx, by.S2.id).sanitized, true)
  t.eq(require("kwb.insight.export").plan(r, s.store:results(s.ctx))[2].kernel.id, by.S2.id)
  t.eq(s.standings.winners["n=2000"].id, by.S2.id, "the per-shape winners noted again")
end)

-- An earlier run's winner never sanitized is sanitized by a later run's end;
-- it is not in the later run's funnel (mine = false).
t.test("sanitize_winners_an_earlier_runs_winner_is_sanitized_later", function()
  local s, by = run(dir .. "/w3.db", { S = true })
  local later = require("kwb.loop.session").new(r, { store = s.store })
  later:ensure_start()
  local asked = {}
  later.sanitize = function(_, cand, res)
    asked[#asked + 1] = cand.id
    res.seconds.sanitize, res.sanitized = 0.25, true
    if cand.id == by.S.id then res.outcome, res.reason, res.sanitized = "unsafe", "planted", nil end
  end
  local changed = later:sanitize_winners {}
  t.eq(#asked, 2)
  t.eq(asked[1], by.S.id)
  t.eq(asked[2], by.S2.id)
  t.eq(#changed, 1)
  t.eq(changed[1].mine, false)
  t.eq(later.store:known(later.ctx, by.S.id).outcome, "unsafe")
end)

-- Put off (a grid or list): the best settles first, then the winners.
t.test("sanitize_winners_after_a_put_off_best", function()
  local s, by, sanitized = run(dir .. "/w4.db", {}, true)
  t.eq(by.A.sanitize_due, true)
  t.eq(#s.putoff:settle(), 0)
  t.eq(#s:sanitize_winners { [by.S.id] = by.S }, 0)
  t.eq(table.concat(sanitized, " "), "A S")
end)

-- An error in the tools' run (a worker lost twice): the winner stays
-- without the mark, so no reader takes it.
t.test("sanitize_winners_an_error_leaves_the_winner_unmarked", function()
  local s, by = run(dir .. "/w5.db", {})
  s.sanitize = function() error("planted: the worker was lost twice", 0) end
  local ok, err = pcall(s.sanitize_winners, s, {})
  t.eq(ok, false)
  t.eq(err, "planted: the worker was lost twice")
  t.eq(s.store:known(s.ctx, by.S.id).sanitized, nil)
  t.eq(require("kwb.insight.export").plan(r, s.store:results(s.ctx))[2].kernel.id, by.A.id)
end)

-- A recipe that does not sanitize has no pass at its end.
t.test("sanitize_winners_only_under_best", function()
  local ra = kwb.recipe { name = "winners_all", backend = "cuda", problem = vecadd.problem, shapes = { n = { 1000 } },
                          verify_shapes = false, start = { source = body, defines = { BLOCK = 32 } }, sanitize = false,
                          launch = r.launch }
  local s = require("kwb.loop.session").new(ra, { store = require("kwb.loop.store").open(dir .. "/w6.db") })
  t.eq(s:sanitizing(), false)
  t.eq(#s:sanitize_winners {}, 0)
end)

-- Through a run: its end takes the winners' pass with this run's results
-- by id, and a change it returns is counted in the funnel and reported.
t.test("sanitize_winners_a_run_ends_with_the_pass", function()
  local props = {}
  for i, b in ipairs { 64, 128 } do
    props[i] = { source = body:gsub("b%[i%];", "b[i] + 0 * " .. (30 + i) .. ";"), params = { BLOCK = b } }
  end
  local rl = kwb.recipe { name = "winners_run", backend = "cuda", problem = vecadd.problem, shapes = { n = { 1000 } },
                          verify_shapes = false, sanitize = "best", launch = r.launch,
                          start = { source = body, defines = { BLOCK = 32 } }, strategy = require("kwb.strategies.list")(props),
                          timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 } }
  local s = require("kwb.loop.session").new(rl, { store = require("kwb.loop.store").open(dir .. "/w7.db") })
  rl._session = s
  s.sanitize = function(_, _, res) res.seconds.sanitize, res.sanitized = 0.25, true end
  local seen
  s.sanitize_winners = function(_, by_id, report)
    seen = by_id
    local first = next(by_id) and by_id[next(by_id)]
    local was = first.outcome
    first.outcome, first.reason = "unsafe", "planted"
    report { res = first, was = was, mine = true }
    return { { res = first, was = was, mine = true } }
  end
  local ok, sm, run = pcall(rl.run, rl, { mode = "quiet", seed = 3 })
  t.truthy(ok, tostring(sm))
  local n = 0
  for id, res in pairs(seen) do n = n + 1; t.eq(res.id, id) end
  t.eq(n, #run.results, "every result of the run, by id")
  t.eq(sm.funnel.unsafe, 1, "the change counted")
  t.eq(sm.funnel.accepted + sm.funnel.slower + sm.funnel.unsafe, 2)
end)

-- ---- what a hostile review found (each fixed; each test fails without the fix) ----

local P = require "sanitize_play"
local make_recipe, fresh_store, session_of, play = P.make_recipe, P.fresh_store, P.session_of, P.play
local START, A, S, S2 = P.START, P.A, P.S, P.S2

-- A result stored without the mark (from before it existed, a recipe that
-- did not sanitize sharing the context, a bundle) is no winner until the
-- run's end sanitizes it; nor the best a later run takes, until cleared.
t.test("sanitize_winners_a_result_without_the_mark_is_sanitized_before_it_is_named", function()
  local store = fresh_store(dir .. "/h2.db")
  local repl = make_recipe { sanitize = "omit" }
  local s0 = session_of(repl, store)
  t.eq(s0:sanitizing(), false, "the REPL's recipe does not sanitize")
  local by = play(s0, { START, A, S })
  t.eq(by.A.sanitized, nil, "no mark")
  t.eq(require("kwb.insight.export").plan(r, store:results(s0.ctx))[1].kernel, nil, "the 'best' recipe's export: not A yet")
  local s = session_of(r, store)
  s.sanitized, s.was_sanitized = {}, {}
  play(s, { S2 })   -- (its stand-in for the tools; ensure_start below clears A, the best of earlier runs)
  s.start, s.best = nil, nil
  s:ensure_start()
  t.eq(s.best.id, by.A.id, "A, sanitized now, is the best")
  t.eq(table.concat(s.sanitized, " "), "A")
  s:sanitize_winners {}
  t.eq(table.concat(s.sanitized, " "), "A S", "then S, n=2000's winner")
  local plan = require("kwb.insight.export").plan(r, s.store:results(s.ctx))
  t.eq(plan[1].kernel.id, by.A.id)
  t.eq(plan[2].kernel.id, by.S.id)
end)

-- A revision keeps what it does not judge: the bundle a result came in, why
-- it was measured again, the shapes it was verified on. (A result a bundle
-- brought is a winner, sanitized and revised, only under a recipe that
-- trusts imports: kwb.loop.store's known.)
t.test("sanitize_winners_a_revision_keeps_the_rest_of_the_verdict", function()
  local r = make_recipe { trust_imported = true }
  local s = session_of(r, fresh_store(dir .. "/h3.db"))
  local by = play(s, { START, A, S })
  local cache = s.store.cache
  for _, row in ipairs(cache:results(by.S.id)) do
    local v = row.verify
    v.imported, v.again, v.verified_on = "peer.kwbundle", "the worker died of SIGKILL", { "n=500" }
    cache:revise_result { candidate = by.S.id, device = row.device, shape = row.shape, outcome = row.outcome, verify = v }
  end
  local wide = {}
  for k, v in pairs(s.ctx) do wide[k] = v end
  wide.verified_on = { "n=500" }
  local later = session_of(r, s.store)
  later:ensure_start()
  later.sanitize = function(_, _, res) res.seconds.sanitize, res.sanitized = 0.25, true end
  later:sanitize_winners {}
  t.eq(s.store:known(s.ctx, by.S.id).sanitized, true, "S sanitized")
  local row = cache:best(s.ctx.problem, { shape = "n=2000", sanitized = true })[1]
  t.eq(row.candidate, by.S.id)
  t.eq(row.imported, "peer.kwbundle")
  t.eq(cache:results(by.S.id)[1].verify.again, "the worker died of SIGKILL")
  t.truthy(s.store:known(wide, by.S.id), "still known where n=500 is verified")
end)

-- A best put off and superseded, the winner at n=2000, is sanitized there
-- (no outcome changes): the summary's winners are noted again all the same.
t.test("sanitize_winners_the_summarys_winners_after_a_clean_pass", function()
  local s = session_of(r, fresh_store(dir .. "/h4.db"))
  local by = play(s, { START, { "A", { 0.5, 1.0 } }, { "S", { 0.9, 1.2 } }, { "B", { 0.3, 1.3 } } }, { defer = true })
  t.eq(#s.putoff:settle(), 0)
  t.eq(s.best.id, by.B.id)
  t.eq(#s:sanitize_winners { [by.A.id] = by.A, [by.S.id] = by.S, [by.B.id] = by.B }, 0)
  t.eq(table.concat(s.sanitized, " "), "B A", "B settled, A as n=2000's winner")
  t.eq(s.standings.winners["n=2000"].id, by.A.id, "A, not S (never sanitized)")
end)

-- An error part-way (the tools' worker lost twice) after a winner was found
-- unsafe: that change has been reported (the run's funnel counts it).
t.test("sanitize_winners_an_error_part_way_reports_what_changed", function()
  local s = session_of(r, fresh_store(dir .. "/h5.db"))
  local by = play(s, { START, A, S, S2 })
  s.sanitize = function(_, cand, res)
    if cand.id == by.S2.id then error("planted: the worker was lost twice", 0) end
    res.seconds.sanitize, res.outcome, res.reason = 0.25, "unsafe", "planted"
  end
  local seen = {}
  local ok, err = pcall(s.sanitize_winners, s, { [by.S.id] = by.S, [by.S2.id] = by.S2 },
                        function(c) seen[#seen + 1] = c.res.short .. ":" .. c.was .. ">" .. c.res.outcome end)
  t.eq(ok, false)
  t.eq(err, "planted: the worker was lost twice")
  t.eq(table.concat(seen, " "), by.S.short .. ":slower>unsafe")
  t.eq(s.store:known(s.ctx, by.S.id).outcome, "unsafe")
end)

-- Another process's newer verdict stands: the pass reads each winner again
-- before sanitizing it, and a revision is refused where the stored outcome
-- or marks are no longer those it read.
t.test("sanitize_winners_another_processs_newer_verdict_stands", function()
  local store = fresh_store(dir .. "/h6.db")
  local s = session_of(r, store)
  local by = play(s, { START, { "A", { 0.5, 1.5 } }, { "S2", { 0.45, 2.5 } }, S })
  local other = session_of(r, require("kwb.loop.store").open(dir .. "/h6.db"))
  other:ensure_start()
  other.sanitize = function(_, cand, res)
    res.seconds.sanitize, res.sanitized = 0.25, true
    if cand.id == by.S.id then res.outcome, res.reason, res.sanitized = "unsafe", "compute-sanitizer racecheck: planted", nil end
  end
  local once, again = false, {}
  s.sanitize = function(_, cand, res)
    if not once then   -- while this one sanitizes n=1000's winner (S2), the other's run ends
      once = true
      other:sanitize_winners {}
      t.eq(store:known(s.ctx, by.S.id).outcome, "unsafe", "the other found S unsafe")
    end
    again[cand.id] = true
    res.seconds.sanitize, res.sanitized = 0.25, true
  end
  s:sanitize_winners {}
  t.eq(again[by.S.id], nil, "S not sanitized again from the old list")
  t.eq(store:known(s.ctx, by.S.id).outcome, "unsafe", "the newer verdict stands")
  -- and a revision from a stale read is refused
  local stale = { outcome = "slower", sanitized = nil }
  local res = { id = by.S.id, seq = store:known(s.ctx, by.S.id).seq, outcome = "slower", sanitized = true }
  t.eq(store:revise(s.ctx, by.S.cand, res, { id = store:known(s.ctx, by.S.id).run }, stale), false)
  t.eq(store:known(s.ctx, by.S.id).outcome, "unsafe")
end)

-- Under "all" too, a winner stored without the mark (an earlier "best"
-- run's slower result) is sanitized at the end, not lost.
t.test("sanitize_winners_under_all_too", function()
  local store = fresh_store(dir .. "/h7.db")
  local s0 = session_of(r, store)
  local by = play(s0, { START, A, S })
  local ra = make_recipe { sanitize = "all" }
  local s = session_of(ra, store)
  s:ensure_start()
  s.sanitize = function(_, _, res) res.seconds.sanitize, res.sanitized = 0.25, true end
  t.truthy(s:known(by.S.cand), "known: not evaluated again")
  s:sanitize_winners {}
  t.eq(require("kwb.insight.export").plan(ra, store:results(s.ctx))[2].kernel.id, by.S.id)
end)

-- kwb export's fallback is its recipe's own start kernel, not another
-- recipe's start sharing the context.
t.test("sanitize_winners_export_falls_back_to_its_own_start", function()
  local store = fresh_store(dir .. "/h8.db")
  local s = session_of(r, store)
  local by = play(s, { START, S })
  local r2 = make_recipe { name = "winners_other", start = { source = body:gsub("b%[i%];", "b[i] + 0 * 77;"),
                                                             defines = { BLOCK = 64 } } }
  local by2 = play(session_of(r2, store), { { "start", { 0.95, 1.9 } } })
  t.truthy(by2.start.id ~= by.start.id)
  local plan = require("kwb.insight.export").plan(r, store:results(s.ctx))
  t.eq(plan[1].start.id, by.start.id)
end)

-- A bundle's word that compute-sanitizer cleared a result is not taken.
t.test("sanitize_winners_a_bundles_mark_is_not_taken", function()
  local s = session_of(r, fresh_store(dir .. "/h9.db"))
  local by = play(s, { START, A, S })
  s:sanitize_winners {}
  t.eq(s.store:known(s.ctx, by.S.id).sanitized, true)
  local file = dir .. "/h9.kwbundle"
  os.remove(file)
  assert(s.store.cache:export(file, {}))
  local other = fresh_store(dir .. "/h9b.db")
  assert(other.cache:import(file))
  t.eq(other:known(s.ctx, by.S.id), nil, "no measurement here (the recipe does not trust imports)")
  local trusting = {}   -- (one that does takes the result, but not the mark)
  for k, v in pairs(s.ctx) do trusting[k] = v end
  trusting.trust_imported = true
  t.eq(other:known(trusting, by.S.id).sanitized, nil)
  t.eq(other:known(trusting, by.S.id).outcome, "slower")
end)

-- The summary's sanitizer seconds are every tool run of the run (the
-- session's count since the run began: an earlier run's winner, a best
-- cleared at the start), each counted once.
t.test("sanitize_winners_the_summary_counts_every_sanitizer_run_once", function()
  local s = session_of(r, fresh_store(dir .. "/h10.db"))
  local by = play(s, { START, A, S })
  s.sanitize_s = 3.0
  local run = { session = s, recipe = r, started = core.now() - 10, record = { short = "x" }, results = { by.A, by.S },
                funnel = require("kwb.base.outcomes").counts(), evaluated = 2, skipped = 0, repeats = 0, partial = 0,
                timing_s = 0, strategy_name = "grid", sanitize_base = 1.0, start_s = 0.5 }
  t.eq(by.A.seconds.sanitize, 0.25, "A's own seconds (within the 3.0)")
  local st = require("kwb.loop.summary").summary(run).stages
  t.eq(st.sanitize, 2.0)
  t.eq(st.start, 0.5)
end)

t.done()
