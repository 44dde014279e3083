-- tests/lua/test_sanitize_winners.lua: under sanitize = "best", a kernel
-- kwb names as a shape's winner (kwb export's per-shape choice, cache:best)
-- has passed compute-sanitizer: a slower result is stored `unsanitized`,
-- skipped by those readers, and at the run's end each shape's winner that
-- never was sanitized is (kwb.deferred's sanitize_winners); one found unsafe
-- gives way to the next fastest there. Results are judged from planted
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
  local s = require("kwb.session").new(r, { store = require("kwb.store").open(path) })
  s.run_record = s.store:begin_run { recipe = "winners", source = "-- a test's", settings = {} }
  local sanitized, by, names = {}, {}, {}
  s.sanitize = function(_, cand, res)
    local name = names[cand.id]
    sanitized[#sanitized + 1] = name
    res.seconds.sanitize, res.unsanitized = 0.25, nil
    if unsafe[name] then res.outcome, res.reason = "unsafe", "compute-sanitizer memcheck at n=1000: planted" end
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
    if name == "start" then s.start, s.best = by.start, by.start; if defer then s:defer_sanitizer() end end
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
  t.eq(s.store:known(s.ctx, by.S.id).unsanitized, true, "S stored unsanitized")
  -- until then no reader takes S at n=2000, though it is the fastest there
  t.eq(require("kwb.export").plan(r, s.store:results(s.ctx))[2].kernel.id, by.A.id)
  t.eq(s.store.cache:best(s.ctx.problem, { shape = "n=2000" })[1].candidate, by.A.id)
  local changed = s:sanitize_winners { [by.S.id] = by.S }
  t.eq(#changed, 0, "clean: no outcome changed")
  t.eq(table.concat(sanitized, " "), "A S", "S, n=2000's winner, sanitized; A wins n=1000 and had it")
  t.eq(by.S.unsanitized, nil)
  t.eq(s.store:known(s.ctx, by.S.id).unsanitized, nil)
  t.eq(s.store:known(s.ctx, by.S2.id).unsanitized, true, "S2 wins nowhere: not sanitized")
  t.eq(require("kwb.export").plan(r, s.store:results(s.ctx))[2].kernel.id, by.S.id)
  t.eq(s.store.cache:best(s.ctx.problem, { shape = "n=2000" })[1].candidate, by.S.id)
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
  t.eq(s.store:known(s.ctx, by.S2.id).unsanitized, nil)
  t.eq(require("kwb.export").plan(r, s.store:results(s.ctx))[2].kernel.id, by.S2.id)
  t.eq(s.shape_best["n=2000"].id, by.S2.id, "the per-shape winners noted again")
end)

-- An earlier run's unsanitized winner is sanitized by a later run's end;
-- it is not in the later run's funnel (mine = false).
t.test("sanitize_winners_an_earlier_runs_winner_is_sanitized_later", function()
  local s, by = run(dir .. "/w3.db", { S = true })
  local later = require("kwb.session").new(r, { store = s.store })
  later:ensure_start()
  local asked = {}
  later.sanitize = function(_, cand, res)
    asked[#asked + 1] = cand.id
    res.seconds.sanitize, res.unsanitized = 0.25, nil
    if cand.id == by.S.id then res.outcome, res.reason = "unsafe", "planted" end
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
  t.eq(#s:settle(), 0)
  t.eq(#s:sanitize_winners { [by.S.id] = by.S }, 0)
  t.eq(table.concat(sanitized, " "), "A S")
end)

-- An error in the tools' run (a worker lost twice): the winner stays
-- unsanitized, so no reader takes it.
t.test("sanitize_winners_an_error_leaves_the_winner_unsanitized", function()
  local s, by = run(dir .. "/w5.db", {})
  s.sanitize = function() error("planted: the worker was lost twice", 0) end
  local ok, err = pcall(s.sanitize_winners, s, {})
  t.eq(ok, false)
  t.eq(err, "planted: the worker was lost twice")
  t.eq(s.store:known(s.ctx, by.S.id).unsanitized, true)
  t.eq(require("kwb.export").plan(r, s.store:results(s.ctx))[2].kernel.id, by.A.id)
end)

-- A recipe that sanitizes every verified result ("all") or none leaves
-- nothing unsanitized for the end.
t.test("sanitize_winners_only_under_best", function()
  local ra = kwb.recipe { name = "winners_all", backend = "cuda", problem = vecadd.problem, shapes = { n = { 1000 } },
                          verify_shapes = false, start = { source = body, defines = { BLOCK = 32 } }, sanitize = false,
                          launch = r.launch }
  local s = require("kwb.session").new(ra, { store = require("kwb.store").open(dir .. "/w6.db") })
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
  local s = require("kwb.session").new(rl, { store = require("kwb.store").open(dir .. "/w7.db") })
  rl._session = s
  s.sanitize = function(_, _, res) res.seconds.sanitize, res.unsanitized = 0.25, nil end
  local seen
  s.sanitize_winners = function(_, by_id)
    seen = by_id
    local first = next(by_id) and by_id[next(by_id)]
    local was = first.outcome
    first.outcome, first.reason = "unsafe", "planted"
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

t.done()
