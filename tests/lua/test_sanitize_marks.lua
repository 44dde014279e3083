-- tests/lua/test_sanitize_marks.lua: where a recipe sanitizes, what kwb
-- names has passed compute-sanitizer here, at no needless cost: never
-- another recipe's start kernel, never a result a row says is unsafe, a best
-- found unsafe at a run's start reported, a mark kept when the same code is
-- measured again, a superseded put-off best known (not evaluated again).
-- Planted medians through Session:complete; the tools stood in for.
local t = require "t"

local P = require "sanitize_play"
local dir, body = P.dir, P.body
local make_recipe, fresh_store, session_of, play, clean = P.make_recipe, P.fresh_store, P.session_of, P.play, P.clean
local r = make_recipe()
local START, A, S = P.START, P.A, P.S

-- 1: another recipe's start kernel sharing the context (or this recipe's
-- start from before its file was edited) is never sanitized; kwb export
-- refuses it (start_id), sanitize_winners skips it, but the summary's
-- per-shape winners (note_times) and kwb report's pick/baseline take it.
t.test("sanitize_marks_summary_winner_is_never_another_recipes_start", function()
  local store = fresh_store(dir .. "/r1.db")
  local by = play(session_of(r, store), { START, A, S })
  local r2 = make_recipe { name = "winners_other", start = { source = body:gsub("b%[i%];", "b[i] + 0 * 77;"),
                                                             defines = { BLOCK = 64 } } }
  local by2 = play(session_of(r2, store), { { "start", { 0.95, 1.3 } } })   -- fastest at n=2000
  local later = session_of(r, store)
  later:ensure_start()
  clean(later)
  later:sanitize_winners {}
  local plan = require("kwb.insight.export").plan(r, store:results(later.ctx))
  t.eq(plan[2].kernel and plan[2].kernel.id or plan[2].start.id, by.S.id, "export names S at n=2000")
  t.truthy(later.standings.winners["n=2000"].id ~= by2.start.id,
           "the summary's winner at n=2000 is " .. later.standings.winners["n=2000"].short .. ", the other recipe's start kernel")
end)

t.test("sanitize_marks_report_pick_is_never_another_recipes_start", function()
  local store = fresh_store(dir .. "/r2.db")
  local s = session_of(r, store)
  local by = play(s, { START, { "S", { 0.9, 2.6 } } })   -- no accepted result: the pick is the start kernel
  t.eq(by.S.outcome, "slower")
  local r2 = make_recipe { name = "winners_other", start = { source = body:gsub("b%[i%];", "b[i] + 0 * 77;"),
                                                             defines = { BLOCK = 64 } } }
  local by2 = play(session_of(r2, store), { { "start", { 0.95, 1.3 } } })
  local d = require("kwb.insight.report").data(r, store:results(s.ctx))
  t.eq(d.start.id, by.start.id, "the report's start kernel (the speedups' baseline) is this recipe's own")
  t.eq(d.best.id, by.start.id, "the report's pick is not " .. by2.start.short .. ", the other recipe's start")
end)

-- 2: Store:known takes the verdict of the context's first shape alone.
-- A candidate cleared by this recipe at n=1000,2000 and found unsafe by a
-- recipe over n=2000,4000 (the same candidate id: problem, source, defines,
-- flags) has an `unsafe` row at n=2000; this recipe still reads it as a
-- cleared `slower` result and kwb export dispatches it at n=2000.
t.test("sanitize_marks_a_row_found_unsafe_is_never_named", function()
  local store = fresh_store(dir .. "/r3.db")
  local s = session_of(r, store)
  local by = play(s, { START, A, S })
  clean(s)
  s:sanitize_winners {}
  t.eq(store:known(s.ctx, by.S.id).sanitized, true, "S cleared by this recipe (memcheck at n=1000)")
  local r3 = make_recipe { name = "winners_big", shapes = { n = { 2000, 4000 } } }
  local s3 = session_of(r3, store)
  local by3 = play(s3, { { "start", { 2.0, 4.0 } }, { "S", { 1.4, 2.8 } } }, { unsafe = { S = true } })
  t.eq(by3.S.id, by.S.id, "the same candidate")
  t.eq(by3.S.outcome, "unsafe", "found unsafe by the tools at n=2000 (r3's smallest shape)")
  local row
  for _, x in ipairs(store.cache:results(by.S.id)) do if x.shape == "n=2000" then row = x end end
  t.eq(row.outcome, "unsafe", "the cache's row at n=2000 says so")
  local plan = require("kwb.insight.export").plan(r, store:results(s.ctx))
  t.truthy(not (plan[2].kernel and plan[2].kernel.id == by.S.id),
           "kwb export dispatches S at n=2000 though compute-sanitizer found it unsafe there")
end)

-- 3: an earlier run's best found unsafe at a run's start (known_best,
-- in ensure_start) is revised in the cache, but the change never reaches
-- the run's report (no `revised` event), unlike the same change found at
-- the run's end (sanitize_winners reports those that are not the run's).
t.test("sanitize_marks_a_best_found_unsafe_at_the_start_is_reported", function()
  local store = fresh_store(dir .. "/r4.db")
  local repl = make_recipe { name = "winners_run", sanitize = "omit" }
  local s0 = session_of(repl, store)
  t.eq(s0:sanitizing(), false, "a recipe made in code, sanitize left out")
  local by = play(s0, { START, { "A", { 0.2, 0.4 } } })
  t.eq(by.A.outcome, "accepted")
  local props = { { source = body:gsub("b%[i%];", "b[i] + 0 * 91;"), params = { BLOCK = 64 } } }
  local rl = make_recipe { name = "winners_run", strategy = require("kwb.strategies.list")(props),
                           timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 } }
  local s = session_of(rl, store)
  rl._session = s
  local unsafe = {}
  s.sanitize = function(_, cand, res)
    res.seconds.sanitize, res.sanitized = 0.25, true
    if cand.id == by.A.id then res.outcome, res.reason, res.sanitized = "unsafe", "planted", nil; unsafe[#unsafe + 1] = cand.id end
  end
  local progress = require "kwb.loop.progress"
  local new, revised = progress.new, {}
  progress.new = function(...)
    local rep = new(...)
    local orig = rep.revised
    rep.revised = function(self, run, res, was) revised[#revised + 1] = res.id; return orig(self, run, res, was) end
    return rep
  end
  local ok, sm = pcall(rl.run, rl, { mode = "quiet", seed = 3 })
  progress.new = new
  t.truthy(ok, tostring(sm))
  t.eq(#unsafe, 1, "A sanitized at the run's start and found unsafe")
  t.eq(store:known(s.ctx, by.A.id).outcome, "unsafe", "revised in the cache")
  t.eq(#revised, 1, "the revision reported (a `revised` event)")
end)

-- 4 (cost): `kwb try` / `kwb RECIPE --retime ID` of a result the tools
-- cleared records the new measurement without the mark: kwb export stops
-- naming it at once, and the next run's end runs the tools on the same code
-- (same candidate id, same machine) again.
t.test("sanitize_marks_a_retimed_winner_keeps_its_mark", function()
  local store = fresh_store(dir .. "/r5.db")
  local s = session_of(r, store)
  local by = play(s, { START, A, S })
  s:sanitize_winners {}
  t.eq(store:known(s.ctx, by.S.id).sanitized, true)
  local before = require("kwb.insight.export").plan(r, store:results(s.ctx))[2].kernel.id
  t.eq(before, by.S.id)
  play(s, { S })   -- measured again (try, --retime): same code, slower again
  local n0 = #s.sanitized
  local after = require("kwb.insight.export").plan(r, store:results(s.ctx))[2].kernel.id
  local later = session_of(r, store)
  later:ensure_start()
  local again = 0
  later.sanitize = function(_, _, res) again = again + 1; res.seconds.sanitize, res.sanitized = 0.25, true end
  later:sanitize_winners {}
  t.eq(n0, 2, "A at once, S at the end")
  local bad = {}
  if after ~= by.S.id then bad[#bad + 1] = "after a retime kwb export names " .. after:sub(1, 8) .. " at n=2000, not S" end
  if again ~= 0 then bad[#bad + 1] = "the next run's end ran the tools on S again (" .. again .. ")" end
  if #bad > 0 then error(table.concat(bad, "; ")) end
end)

-- 5 (cost, older than this change, and avoidable now): a best put off
-- (grid, list) and superseded keeps `sanitize_due` and is evaluated again in
-- full by the next run that proposes it, though without the mark no reader
-- would name it anyway.
t.test("sanitize_marks_a_superseded_put_off_best_is_not_evaluated_again", function()
  local store = fresh_store(dir .. "/r6.db")
  local s = session_of(r, store)
  s.run_record = store:begin_run { recipe = "winners", source = "-- a test's", settings = {} }
  local by = play(s, { START }, {})
  s:put_off()
  local by2 = play(s, { { "A", { 0.5, 1.5 } }, { "B", { 0.3, 1.0 } } })
  t.eq(by2.A.outcome, "accepted"); t.eq(by2.B.outcome, "accepted")
  t.eq(#s.putoff:settle(), 0)
  t.eq(#s:sanitize_winners {}, 0)
  local later = session_of(r, store)
  later:ensure_start()
  t.truthy(later:known(by2.A.cand), "A (superseded; won no shape) is known to the next run, not evaluated again")
end)

-- a retimed result that keeps its mark is not held; when the put-off best
-- that beat it is found unsafe, settle re-judges the held results from the
-- best before the run alone and forgets it: a worse result becomes the best and is called accepted.
t.test("sanitize_marks_a_kept_mark_is_judged_again_by_settle", function()
  local store = fresh_store(dir .. "/m31.db")
  local s = session_of(r, store)
  local by = play(s, { START, A, S })
  clean(s)
  s:sanitize_winners {}
  t.eq(store:known(s.ctx, by.S.id).sanitized, true, "S (slower, winner at n=2000) cleared")
  local s2 = session_of(r, store)
  s2:ensure_start()
  t.eq(s2.best.id, by.A.id)
  s2:put_off()   -- a grid/list run, --retime
  local by2 = play(s2, { { "S", { 0.4, 1.2 } }, { "B", { 0.2, 0.5 } }, { "C", { 0.45, 1.3 } } }, { unsafe = { B = true } })
  t.eq(by2.S.outcome, "accepted"); t.eq(by2.S.sanitized, true, "S keeps its mark")
  t.eq(by2.B.outcome, "accepted"); t.eq(by2.C.outcome, "slower")
  s2.putoff:settle()
  t.eq(by2.B.outcome, "unsafe")
  local bad = {}
  if s2.best.id ~= by2.S.id then bad[#bad+1] = "session best after settle is " .. tostring(s2.best.name) .. " (score " .. tostring(s2.best.score) .. "), not S (score " .. tostring(by2.S.score) .. ")" end
  if by2.C.outcome ~= "slower" then bad[#bad+1] = "C (score " .. tostring(by2.C.score) .. ") re-judged " .. by2.C.outcome .. " though S beats it" end
  if #bad > 0 then error(table.concat(bad, "; ")) end
end)

-- settle's new superseded-best revise passes no `was`; another
-- context's `unsafe` row at a shared shape written meanwhile is overwritten
-- with "accepted": a result Store:known read as unsafe reads accepted after.
t.test("sanitize_marks_settling_keeps_another_recipes_unsafe_row", function()
  local store = fresh_store(dir .. "/m32.db")
  local s = session_of(r, store)
  play(s, { START })
  s:put_off()
  local by = play(s, { { "A", { 0.5, 1.5 } }, { "B", { 0.3, 1.0 } } })
  t.eq(by.A.sanitize_due, true)
  -- meanwhile another recipe over n=2000,4000 finds A unsafe
  local r3 = make_recipe { name = "winners_big", shapes = { n = { 2000, 4000 } } }
  local by3 = play(session_of(r3, store), { { "start", { 2.0, 4.0 } }, { "A", { 1.4, 2.8 } } }, { unsafe = { A = true } })
  t.eq(by3.A.id, by.A.id)
  t.eq(store:known(s.ctx, by.A.id).outcome, "unsafe", "before settle: r reads A unsafe (row n=2000)")
  clean(s)
  s.putoff:settle()
  local row
  for _, x in ipairs(store.cache:results(by.A.id)) do if x.shape == "n=2000" then row = x end end
  local bad = {}
  if store:known(s.ctx, by.A.id).outcome ~= "unsafe" then bad[#bad+1] = "after settle r reads A " .. store:known(s.ctx, by.A.id).outcome end
  if row.outcome ~= "unsafe" then bad[#bad+1] = "the n=2000 row (r3's finding) now says " .. row.outcome end
  if #bad > 0 then error(table.concat(bad, "; ")) end
end)

-- the put-off best another context found unsafe
-- at a shared shape (read `unsafe` by Store:known) is still sanitized at n=1000
-- and revised without `was`; its clean verdict overwrites the unsafe row and
-- kwb export dispatches it at n=2000 (the rev2 hole #2, by another path).
t.test("sanitize_marks_a_put_off_best_found_unsafe_elsewhere_stays_unsafe", function()
  local store = fresh_store(dir .. "/m33.db")
  local s = session_of(r, store)
  play(s, { START })
  s:put_off()
  local by = play(s, { { "B", { 0.3, 1.0 } } })
  local r3 = make_recipe { name = "winners_big", shapes = { n = { 2000, 4000 } } }
  play(session_of(r3, store), { { "start", { 2.0, 4.0 } }, { "B", { 1.0, 2.8 } } }, { unsafe = { B = true } })
  t.eq(store:known(s.ctx, by.B.id).outcome, "unsafe", "before settle: r reads B unsafe")
  clean(s)
  s.putoff:settle()
  local plan = require("kwb.insight.export").plan(r, store:results(s.ctx))
  t.truthy(not (plan[2].kernel and plan[2].kernel.id == by.B.id),
           "kwb export dispatches B at n=2000 though r3's tools found it unsafe there (outcome now " .. store:known(s.ctx, by.B.id).outcome .. ")")
end)

t.done()
