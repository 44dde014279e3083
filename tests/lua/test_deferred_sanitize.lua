-- tests/lua/test_deferred_sanitize.lua: compute-sanitizer put off to a run's
-- end where the strategy reads no results (kwb.loop.session's put_off, a PutOff's
-- settle): the best alone is sanitized; a best found unsafe there leaves the
-- outcomes, the best and the cache as sanitizing each new best at once
-- would have. Results are judged from planted medians (no timing), and the
-- tools are stood in for (they need the GPU: tests/gpu/integrity.lua).
local t = require "t"
local core = require "kwb.core"

require "fake_cuda" ()   -- (the sanitizer is the CUDA backend's: its stand-in for kwb.cuda)
local vecadd = require "fake_vecadd"
local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local body = vecadd.vec .. "  for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n}\n"

local r = kwb.recipe { name = "deferred", backend = "cuda", problem = vecadd.problem, shapes = { n = { 1000 } },
                       verify_shapes = false, start = { source = body, defines = { BLOCK = 32 } }, sanitize = "best",
                       launch = function(shape, p) return { grid = { (shape.n + p.BLOCK - 1) // p.BLOCK },
                                                            block = { p.BLOCK } } end }
-- (a recipe made in code is sanitized only where it asks: sanitize = "best", not the default)

-- The start (1 ms) and four candidates, in order: A 0.8 ms (a new best), U
-- 0.5 ms (a new best: planted unsafe), C 0.7 ms (slower than U, faster than
-- A), D 0.75 ms (slower than C).
local medians = { start = 1e-3, A = 0.8e-3, U = 0.5e-3, C = 0.7e-3, D = 0.75e-3 }
local order = { "A", "U", "C", "D" }

-- run(path, defer [, unsafe [, raced]]) -> session, results by name, the
-- names sanitized in order. unsafe: the names the stand-in finds unsafe
-- (default U); raced: the names whose shape was raced out (partial).
local function run(path, defer, unsafe, raced)
  unsafe, raced = unsafe or { U = true }, raced or {}
  for _, f in ipairs { path, path .. "-wal", path .. "-shm" } do os.remove(f) end
  local s = require("kwb.loop.session").new(r, { store = require("kwb.loop.store").open(path) })
  s.run_record = s.store:begin_run { recipe = "deferred", source = "-- a test's", settings = {} }
  local sanitized, by, seq = {}, {}, 0
  s.sanitize = function(_, cand, res)
    sanitized[#sanitized + 1] = cand.note
    res.seconds.sanitize, res.sanitized = 0.25, true   -- (as Session:sanitize marks a clean one)
    if unsafe[cand.note] then
      res.outcome, res.reason, res.sanitized = "unsafe", "compute-sanitizer memcheck at n=1000: planted", nil
    end
  end
  local function complete(name, opts)
    -- (a source of its own each: ids come from the code, not from comments)
    local cand = name == "start" and s:candidate(r.start, "start")
                 or s:candidate({ source = body:gsub("b%[i%];", "b[i] + 0 * " .. name:byte() .. ";"),
                                  params = { BLOCK = 32 } }, "grid")
    cand.note = name
    local m = medians[name]
    seq = seq + 1
    local res = { id = cand.id, short = cand.short, origin = "grid", seq = seq, seed = 1, seconds = {},
                  shapes = { ["n=1000"] = { median = m, ci_lo = m * 0.999, ci_hi = m * 1.001, n = raced[name] and 5 or 20,
                                            partial = raced[name] or false } } }
    by[name] = s:complete { cand = cand, res = res, opts = opts or {}, t0 = core.now() }
    return by[name]
  end
  s.start = complete("start", { start = true })
  s.best = s.start
  if defer then s:put_off() end
  for _, name in ipairs(order) do complete(name) end
  return s, by, sanitized
end

local function outcomes(by)
  local out = {}
  for i, name in ipairs(order) do out[i] = name .. "=" .. by[name].outcome end
  return table.concat(out, " ")
end

t.test("deferred_sanitize_only_the_best_at_the_end_and_judged_as_if_at_once", function()
  local eager, e_by, e_sanitized = run(dir .. "/eager.db", false)
  t.eq(table.concat(e_sanitized, " "), "A U C", "at once: every new best")
  t.eq(outcomes(e_by), "A=accepted U=unsafe C=accepted D=slower")
  t.eq(eager.best, e_by.C)

  local s, by, sanitized = run(dir .. "/deferred.db", true)
  t.eq(table.concat(sanitized, " "), "", "put off: nothing sanitized during the run")
  t.eq(outcomes(by), "A=accepted U=accepted C=slower D=slower", "judged against U, the best for now")
  t.eq(by.U.sanitize_due, true)
  local p = s.putoff
  local changed = p:settle()
  t.eq(table.concat(sanitized, " "), "U C", "at the end: U, found unsafe, then the best without it")
  t.eq(outcomes(by), outcomes(e_by), "the outcomes sanitizing at once gave")
  t.eq(s.best, by.C)
  local seen = {}
  for i, c in ipairs(changed) do seen[i] = c.res.short == by.U.short and "U:" .. c.was or c.res.short == by.C.short
                                                and "C:" .. c.was or "?" end
  t.eq(table.concat(seen, " "), "U:accepted C:slower", "the revised results, with what they were")
  t.eq(s.putoff, nil, "settled once")
  t.eq(#p:settle(), 0)
  -- the cache: outcomes revised, one measurement each still; A, a best never sanitized, is never taken as one
  local ctx = s.ctx
  t.eq(s.store:known(ctx, by.U.id).outcome, "unsafe")
  t.eq(s.store:known(ctx, by.C.id).outcome, "accepted")
  t.eq(s.store:known(ctx, by.C.id).sanitize_due, nil, "C had it")
  t.eq(s.store:known(ctx, by.C.id).sanitized, true)
  -- A never did: superseded, it is no longer due (known, not evaluated again) and has no mark (named nowhere)
  t.eq(s.store:known(ctx, by.A.id).sanitize_due, nil)
  t.eq(s.store:known(ctx, by.A.id).sanitized, nil, "A never did")
  t.eq(#s.store.cache:measurements(by.C.id), 1, "revised, not measured again")
  t.eq(s.store.cache:get(by.U.id).outcome, "unsafe")
  -- a later session over the same cache takes C as its best, not A (due) or U (unsafe)
  local later = require("kwb.loop.session").new(r, { store = require("kwb.loop.store").open(dir .. "/deferred.db") })
  later:ensure_start()
  t.eq(later.best.id, by.C.id)
end)

t.test("deferred_sanitize_a_clean_best_is_sanitized_once", function()
  medians.U = 0.9e-3   -- U now slower than A: A stays the best, and is clean
  local s, by, sanitized = run(dir .. "/clean.db", true)
  t.eq(outcomes(by), "A=accepted U=slower C=accepted D=slower")
  local changed = s.putoff:settle()
  t.eq(#changed, 0)
  t.eq(table.concat(sanitized, " "), "C", "the final best alone")
  t.eq(by.C.seconds.sanitize, 0.25)
  t.eq(s.store:known(s.ctx, by.C.id).sanitize_due, nil)
  t.eq(s.store:known(s.ctx, by.A.id).sanitize_due, nil, "superseded: no longer due")
  t.eq(s.store:known(s.ctx, by.A.id).sanitized, nil, "nor sanitized")
end)

-- Two bests in a row unsafe (U, then C, slower than U but faster than A):
-- each changed result is returned once, with the outcome it had, and the
-- outcomes are those of sanitizing at once.
t.test("deferred_sanitize_two_unsafe_bests_in_a_row", function()
  medians.U = 0.5e-3
  local _, e_by, e_sanitized = run(dir .. "/eager2.db", false, { U = true, C = true })
  t.eq(outcomes(e_by), "A=accepted U=unsafe C=unsafe D=accepted")
  t.eq(table.concat(e_sanitized, " "), "A U C D")
  local s, by, sanitized = run(dir .. "/deferred2.db", true, { U = true, C = true })
  local changed = s.putoff:settle()
  t.eq(outcomes(by), outcomes(e_by))
  t.eq(table.concat(sanitized, " "), "U C D", "each best in turn, down to a clean one")
  local seen = {}
  for i, c in ipairs(changed) do
    for name, res in pairs(by) do if res == c.res then seen[i] = name .. ":" .. c.was .. ">" .. res.outcome end end
  end
  t.eq(table.concat(seen, " "), "U:accepted>unsafe C:slower>unsafe D:slower>accepted", "once each, from what it was")
  t.eq(s.best, by.D)
end)

-- A result whose shape was raced out (against the unsafe best's time) is not
-- made the best on that first look when the best is found unsafe.
t.test("deferred_sanitize_a_raced_result_is_not_made_the_best", function()
  medians.U = 0.5e-3
  local s, by = run(dir .. "/raced.db", true, nil, { C = true })
  s.putoff:settle()
  t.eq(outcomes(by), "A=accepted U=unsafe C=slower D=accepted", "C raced: slower; D, timed in full, the best")
  t.eq(by.C.reason, "a shape's timing was raced out: a first look does not make the best")
  t.eq(s.best, by.D)
end)

-- A result recorded since (another process's evaluation of the candidate,
-- its run of its own, even at the same seq) is not overwritten by the settling.
t.test("deferred_sanitize_a_newer_result_stands", function()
  medians.U = 0.5e-3
  local s, by = run(dir .. "/newer.db", true)
  local newer = { id = by.C.id, short = by.C.short, origin = "try", seq = by.C.seq, seed = 2, seconds = {},
                  outcome = "wrong", reason = "planted: a later evaluation", shapes = {} }
  local other = s.store:begin_run { recipe = "deferred", source = "-- another process", settings = {} }
  s.store:record(s.ctx, { id = by.C.id, source = "x", defines = {}, origin = "try" }, newer, other)
  s.putoff:settle()
  t.eq(by.C.outcome, "accepted", "judged again here")
  t.eq(s.store:known(s.ctx, by.C.id).outcome, "wrong", "the cache keeps the newer result")
  t.eq(s.store.cache:get(by.C.id).outcome, "wrong")
end)

-- An error while settling (after U was found unsafe, before the best was
-- judged again): the session's best is the one before the run, not U; and
-- kwb report's pick, its table and its lineage, kwb export's kernels and
-- cache:best are never a best still due.
t.test("deferred_sanitize_an_error_while_settling_leaves_the_best_before_the_run", function()
  medians.U = 0.5e-3
  local s, by = run(dir .. "/settle_error.db", true)
  local revise = s.store.revise
  s.store.revise = function() error("interrupted!", 0) end
  local p = s.putoff
  t.eq(pcall(p.settle, p), false)
  s.store.revise = revise
  t.eq(by.U.outcome, "unsafe")
  p:abandon()
  t.eq(s.best, s.start, "not U")
  -- nor the time later candidates race against (C's, not U's or A's, due too), nor a shape's
  -- winner: the start's (C and D, slower, were never sanitized)
  t.eq(s.standings.best_time["n=1000"], medians.C)
  t.eq(s.standings.winners["n=1000"].id, s.start.id)
  local later = require("kwb.loop.session").new(r, { store = s.store })
  later:ensure_start()
  t.eq(later.best.id, s.start.id)
  t.eq(later.standings.best_time["n=1000"], medians.C, "a later session's race bar is not U's either")
  t.eq(later:known({ id = by.U.id }), nil, "U, still due, is evaluated again when proposed again")
  t.eq(later:known({ id = by.C.id }).outcome, "slower")
  local d = require("kwb.insight.report").data(r, s.store:results(s.ctx))
  t.eq(d.best.id, s.start.id, "U (still accepted and due in the cache) is not the report's pick")
  t.eq(d.shapes[1].median, medians.start, "the table is the pick's")
  t.eq(d.lineage[1].id, s.start.id)
  -- nor kwb export's kernel at the shape, nor cache:best's (both would take U, the fastest, else);
  -- nor C or D, slower and never sanitized (the run's end never came): the start kernel
  local choice = require("kwb.insight.export").plan(r, s.store:results(s.ctx))[1]
  t.eq(choice.kernel, nil, "the start kernel: A is due, U unsafe, C and D unsanitized")
  local rows = s.store.cache:best(s.ctx.problem, { shape = "n=1000", sanitized = true })
  t.eq(rows[1].candidate, s.start.id)
  rows = s.store.cache:best(s.ctx.problem, { shape = "n=1000" })
  t.eq(rows[1].candidate, by.C.id, "asked for any verified result: C, said not sanitized (U due is never listed)")
  t.eq(rows[1].sanitized, nil)
end)

-- A run that ends in an error before settling (an interrupt): its best,
-- never sanitized, is not the session's; the next run settles its own.
t.test("deferred_sanitize_an_interrupted_run_leaves_no_unsanitized_best", function()
  local props = {}
  for i, b in ipairs { 64, 128 } do
    props[i] = { source = body:gsub("b%[i%];", "b[i] + 0 * " .. (10 + i) .. ";"), params = { BLOCK = b } }
  end
  local stop = true
  local strat = { name = "stops", ahead = true, i = 0 }
  function strat:propose()
    self.i = self.i + 1
    if self.i == 2 and stop then error("interrupted!", 0) end
    return props[self.i]
  end
  local ri = kwb.recipe { name = "deferred_int", backend = "cuda", problem = vecadd.problem, shapes = { n = { 1000 } },
                          verify_shapes = false, sanitize = "best", launch = r.launch, strategy = strat,
                          start = { source = vecadd.vec .. "  for (int k = 0; k < 300; k++)\n"
                                             .. "    for (int i = 0; i < n; i++) c[i] = a[i] + b[i] + 0 * k;\n}\n",
                                    defines = { BLOCK = 32 } },
                          timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 } }
  local s = require("kwb.loop.session").new(ri, { store = require("kwb.loop.store").open(dir .. "/int.db") })
  ri._session = s
  local asked = 0
  local real = package.loaded["kwb.checks.sanitize"]
  package.loaded["kwb.checks.sanitize"] = { check = function() asked = asked + 1; return {} end }
  local ok, err = pcall(ri.run, ri, { mode = "quiet", seed = 3 })
  t.eq(ok, false)
  t.eq(err, "interrupted!")
  t.eq(asked, 0, "nothing sanitized")
  t.eq(s.best, s.start, "the first candidate, a new best never sanitized, is not the session's best")
  t.eq(s.putoff, nil)
  stop, strat.i = false, 1
  local ok2, sm = pcall(ri.run, ri, { mode = "quiet", seed = 4 })
  package.loaded["kwb.checks.sanitize"] = real
  t.truthy(ok2, tostring(sm))
  t.eq(asked, sm.best.id == s.start.id and 0 or 1, "the second run sanitizes its own best once")
end)

-- Through a run: a list (a strategy that reads no results) has the tools
-- once, at the end, on the best; the stand-in finds its first check unsafe,
-- so the run's best is another, the funnel counts the unsafe one, and each
-- tool's finding reaches the result as at once.
t.test("deferred_sanitize_a_run_of_a_list_sanitizes_at_its_end", function()
  local props = {}
  for i, b in ipairs { 64, 128, 256 } do
    props[i] = { source = body:gsub("b%[i%];", "b[i] + 0 * " .. i .. ";"), params = { BLOCK = b } }
  end
  local rl = kwb.recipe { name = "deferred_run", backend = "cuda", problem = vecadd.problem, shapes = { n = { 1000 } },
                          verify_shapes = false, sanitize = "best", launch = r.launch,
                          -- (a start 300 times slower: every candidate a new best but for the noise)
                          start = { source = vecadd.vec .. "  for (int k = 0; k < 300; k++)\n"
                                             .. "    for (int i = 0; i < n; i++) c[i] = a[i] + b[i] + 0 * k;\n}\n",
                                    defines = { BLOCK = 32 } }, strategy = require("kwb.strategies.list")(props),
                          timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 } }
  rl._session = require("kwb.loop.session").new(rl, { store = require("kwb.loop.store").open(dir .. "/run.db") })
  local asked = {}
  local real = package.loaded["kwb.checks.sanitize"]
  package.loaded["kwb.checks.sanitize"] = { check = function(_, args)
    asked[#asked + 1] = args.cand.id
    if #asked == 1 then return { tool = "memcheck", shape = "n=1000", report = "Invalid __global__ read (planted)" } end
    return {}
  end }
  local ok, sm, run = pcall(rl.run, rl, { mode = "quiet", seed = 3 })
  package.loaded["kwb.checks.sanitize"] = real
  t.truthy(ok, tostring(sm))
  t.eq(sm.candidates, 3)
  t.truthy(#asked >= 1, "the tools ran")
  local unsafe = 0
  for _, res in ipairs(run.results) do
    if res.outcome == "unsafe" then
      unsafe = unsafe + 1
      t.eq(res.id, asked[1], "the first sanitized is the unsafe one")
      t.eq(res.reason, "compute-sanitizer memcheck at n=1000: Invalid __global__ read (planted)")
    end
  end
  t.eq(unsafe, 1)
  t.eq(sm.funnel.unsafe, 1, "the funnel counts it")
  t.truthy(sm.best.id ~= asked[1], "the run's best is another")
  -- the best is sanitized (unless it is the start kernel); then, at most, the shape's winner
  -- when a slower result's median is the least there (kwb.loop.sanitizer's sanitize_winners)
  local best_at
  for i, id in ipairs(asked) do if id == sm.best.id then best_at = i end end
  t.truthy(sm.best.id == run.session.start.id or best_at, "the best was sanitized")
  t.truthy(#asked <= (best_at or 1) + 1, "at most the shape's winner after it: " .. #asked)
  t.eq(run.session.putoff, nil)
end)

-- A candidate evaluated again (a best still due, try, --retime) keeps one
-- stored result but took a number more: a new session numbers past the
-- largest stored, not the count of results, so no two evaluations share one.
t.test("deferred_sanitize_a_session_numbers_past_every_stored_evaluation", function()
  local path = dir .. "/seq.db"
  for _, f in ipairs { path, path .. "-wal", path .. "-shm" } do os.remove(f) end
  local s = require("kwb.loop.session").new(r, { store = require("kwb.loop.store").open(path) })
  t.eq(s.seq, 0)
  for i, seq in ipairs { 1, 5 } do
    local cand = s:candidate({ source = body:gsub("b%[i%];", "b[i] + 0 * " .. (20 + i) .. ";"), params = { BLOCK = 32 } },
                             "grid")
    s.store:record(s.ctx, cand, { id = cand.id, seq = seq, seed = 1, outcome = "wrong", reason = "planted",
                                  seconds = {}, shapes = {} })
  end
  local again = require("kwb.loop.session").new(r, { store = s.store })
  t.eq(#again.store:results(again.ctx), 2)
  t.eq(again.seq, 5, "past the largest stored (2 results, numbered 1 and 5)")
end)

-- The tools' worker lost (killed from outside, the device lost) or the
-- task's own error is not the candidate's doing (INTEGRITY.md property 9):
-- a lost worker is asked once more; a second loss, an error, or a tool's run
-- killed from outside twice stops the run, the result's outcome untouched.
t.test("deferred_sanitize_a_lost_sanitizer_worker_is_never_the_candidates_outcome", function()
  local path = dir .. "/lost.db"
  for _, f in ipairs { path, path .. "-wal", path .. "-shm" } do os.remove(f) end
  local s = require("kwb.loop.session").new(r, { store = require("kwb.loop.store").open(path) })
  local answers, asked = {}, 0
  s.pool = { remote = true, submit = function(_, fn) return fn end,
             wait = function(_, fn)
               t.eq(fn, "kwb.worker.task.sanitize")
               asked = asked + 1
               return table.remove(answers, 1)
             end }
  local cand = s:candidate({ source = body, params = { BLOCK = 32 } }, "grid")
  local killed = { ok = false, code = "crashed", signal = "SIGKILL", reason = "the worker died of SIGKILL" }
  local function try(...)
    answers, asked = { ... }, 0
    local res = { id = cand.id, short = cand.short, outcome = "accepted", seconds = {}, shapes = {} }
    local ok, err = pcall(s.sanitize, s, cand, res)
    return res, ok, err
  end
  local res, ok = try(killed, { ok = true, value = { seconds = { memcheck = 0.5 } } })
  t.truthy(ok)
  t.eq(asked, 2, "asked once more")
  t.eq(res.outcome, "accepted", "clean the second time")
  t.eq(res.seconds.sanitize_memcheck, 0.5)
  t.eq(s.sanitize_s, res.seconds.sanitize, "the session's count for the summary")
  local err
  res, ok, err = try(killed, killed)
  t.eq(ok, false)
  t.eq(err, "compute-sanitizer on candidate " .. cand.short .. " did not finish in its worker (the worker died of "
       .. "SIGKILL): not the candidate's doing, so the run stops without an outcome for it")
  t.eq(res.outcome, "accepted", "not unsafe")
  res, ok, err = try({ ok = false, code = "error", reason = "compute-sanitizer is not installed" })
  t.eq(ok, false)
  t.eq(asked, 1, "an error is not asked again")
  t.eq(err, "compute-sanitizer on candidate " .. cand.short .. " did not finish in its worker (compute-sanitizer is "
       .. "not installed): not the candidate's doing, so the run stops without an outcome for it")
  t.eq(res.outcome, "accepted")
  res, ok, err = try({ ok = true, value = { outside = "compute-sanitizer's memcheck run at n=1000 was killed from "
                                                      .. "outside (SIGKILL) twice" } })
  t.eq(ok, false)
  t.eq(err, "compute-sanitizer's memcheck run at n=1000 was killed from outside (SIGKILL) twice; candidate " .. cand.short)
  t.eq(res.outcome, "accepted")
  -- a tool's run that could not run (kwb.checks.sanitize's harness) likewise
  res, ok, err = try({ ok = true, value = { harness = "compute-sanitizer's initcheck run at n=1000 could not run "
                                                      .. "(CUDA_ERROR_OUT_OF_MEMORY)" } })
  t.eq(ok, false)
  t.eq(err, "compute-sanitizer's initcheck run at n=1000 could not run (CUDA_ERROR_OUT_OF_MEMORY); candidate " .. cand.short)
  t.eq(res.outcome, "accepted", "not unsafe")
  -- a finding is still the candidate's
  res, ok = try({ ok = true, value = { tool = "memcheck", shape = "n=1000", report = "Invalid __global__ read" } })
  t.truthy(ok)
  t.eq(res.outcome, "unsafe")
  t.eq(res.reason, "compute-sanitizer memcheck at n=1000: Invalid __global__ read")
end)

t.done()
