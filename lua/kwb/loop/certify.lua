-- kwb/loop/certify.lua: a run's final round. Before a run names its pick and
-- each shape's winner, the leading kernels (the start kernel, the run's best,
-- each shape's winner, the next best scores, and the recipe's baseline where
-- it is a source) are
-- timed again in turns, A B C A B C ... at each shape (kwb.measure.rounds),
-- until every comparison's 95% interval is decided or the bound (seconds)
-- is reached. The pick, the winners and "faster elsewhere" come from that
-- round, each ratio with its interval, and its record, the certificate, is
-- kept with the run (kwb.loop.store) and repeated by `kwb verify-pick RUN`.
--
--   certificate = { run =, recipe =, problem =, device =, kwb =, commit =,
--     created =, rounds =, seconds =, bound = "decided" | "seconds" | "rounds",
--     target =, shapes = { key... }, pick = id, best = id (the run's own best
--     before the round), winners = { [shape] = id },
--     entries = { { id =, short =, role = "start" | "candidate" | "baseline",
--                   name =, params =, origin =, median = { [shape] = s } } },
--     ratios = { { kind = "speedup" | "score" | "gain" | "vs_baseline", id =,
--                  over = id, shape =, median =, lo =, hi =, n =, decided = } } }
--
-- A speedup is the start kernel's time over a candidate's at a shape; a
-- score, the recipe's score of those (by default their geometric mean), its
-- interval the score of the slow ends and of the fast ends; a gain, the
-- pick's time over another kernel's (above 1: that one is faster there);
-- vs_baseline, the baseline's time over the pick's.
local core = require "kwb.core"
local files = require "kwb.base.files"
local ids = require "kwb.base.ids"
local measure = require "kwb.measure"
local outcomes = require "kwb.base.outcomes"
local rng = require "kwb.base.rng"
local rounds = require "kwb.measure.rounds"
local standings = require "kwb.loop.standings"

local M = {}

-- The bound of the round in seconds, by backend, unless a run asks for
-- another (--certify S; 0: no final round). A recipe whose timing cap is
-- short has a shorter one: twice its cap for each kernel at each shape, at
-- least M.least. Either way the round makes kwb.measure.rounds.min_rounds rounds.
M.seconds = { host = 3, cuda = 20 }
M.least = 0.5

-- bound(run, n) -> the round's bound in seconds for n kernels
function M.bound(run, n)
  if run.certify_seconds then return run.certify_seconds end
  local r = run.session.recipe
  local cap = (r.timing or {}).cap or 1
  return math.min(M.seconds[r.backend] or M.seconds.host, math.max(M.least, 2 * cap * n * #r.shapes))
end

local function geomean(xs)
  local s, n = 0, 0
  for _, x in ipairs(xs) do s, n = s + math.log(x), n + 1 end
  return n > 0 and math.exp(s / n) or 0
end

-- ---- the kernels ------------------------------------------------------------

-- A kernel of the round as a worker builds it (kwb.measure.rounds.measure).
local function for_rounds(cand, seed, fn)
  return { source = cand.source, name = cand.name, defines = cand.defines, define_list = cand.define_list,
           params = cand.params, id = cand.id, short = cand.short, fn = fn, seed = tostring(seed) }
end

-- stored(s, id) -> the candidate of a cached id as this session makes it, or nil
local function stored(s, id)
  local got = s.store.cache:get(id)
  if not got then return nil end
  local ok, cand = pcall(s.candidate, s, { source = got.source, defines = got.params, params = got.params,
                                           name = got.id:sub(1, 8) }, "certify")
  if not ok or cand.id ~= got.id then return nil end
  return cand
end

-- entries(s, ids_in_order) -> the round's kernels: the start kernel first, then
-- each candidate id once (the run's best, each shape's winner), then the
-- recipe's baseline where it is a source; each { id, short, role, name,
-- params, origin, cand, fn }.
function M.entries(s, want)
  local list, seen = {}, {}
  local function add(role, cand, res, fn)
    if not cand or seen[cand.id] then return end
    seen[cand.id] = true
    list[#list + 1] = { id = cand.id, short = cand.short, role = role, cand = cand, fn = fn,
                        name = res and res.name or cand.name, params = res and res.params or cand.params,
                        origin = res and res.origin or cand.origin }
  end
  add("start", s:candidate(s.recipe.start, "start"), s.start)
  for _, id in ipairs(want) do
    if not seen[id] then add("candidate", stored(s, id), s.store:known(s.ctx, id)) end
  end
  local bl = s.recipe.baseline
  if bl and bl.spec then
    local ok, cand = pcall(s.candidate, s, bl.spec, "baseline")
    if ok and not cand.too_big then add("baseline", cand, { name = bl.label }, bl.fn) end
  end
  return list
end

-- Besides the best and the winners, the round takes the next M.top scores
-- known under the session's context (this run's and earlier runs'): kernels
-- within each other's noise in the run are told apart by the round, so two
-- runs that found the same kernels name the same pick.
M.top = 3

-- leading(s) -> the ids the round decides between: the session's best, then
-- each shape's winner (kwb.loop.standings), in the recipe's shape order, then
-- the next best scores (M.top) above 1 of the results that may be named a
-- best (kwb.base.outcomes.may_be_best), highest first.
function M.leading(s)
  local out, seen = {}, {}
  local function add(id) if id and not seen[id] then seen[id] = true; out[#out + 1] = id end end
  if s.best and s.best.outcome ~= "start" then add(s.best.id) end
  for _, sh in ipairs(s.recipe.shapes) do
    local w = s.standings.winners[sh.key]
    if w and not w.start then add(w.id) end
  end
  local ranked, san = {}, s:sanitizing()
  for _, r in ipairs(s.store:results(s.ctx)) do
    if (r.outcome == "accepted" or r.outcome == "slower") and type(r.score) == "number" and r.score > 1
       and not seen[r.id] and outcomes.may_be_best(r, san) then
      ranked[#ranked + 1] = r
    end
  end
  table.sort(ranked, function(a, b) if a.score ~= b.score then return a.score > b.score end return a.id < b.id end)
  for i = 1, math.min(M.top, #ranked) do add(ranked[i].id) end
  return out
end

-- time(s, list, o) -> kwb.measure.rounds' answer | { error = } : the kernels
-- timed in turns in a worker (the session's pool), else by the session's harness.
function M.time(s, list, o)
  local run_seed = s.run_seed or s.recipe.seed or 0
  local cands = {}
  for i, e in ipairs(list) do cands[i] = for_rounds(e.cand, rng.seed_of(run_seed, e.id, "the final round"), e.fn) end
  local req = measure.request(s.recipe, { run_seed = run_seed, race = false })
  local pool = s:workers()
  if pool then
    local answer = pool:wait(pool:submit("kwb.worker.task.rounds",
      { { recipe = files.absolute(s.recipe.returned_by), req = req, cands = cands, o = o } },
      { limit = measure.build_limit, what = "building the kernels of the final round" }))
    if not answer.ok then return { error = string.format("%s: %s", answer.code, tostring(answer.reason)) } end
    return answer.value
  end
  s.harness:take(req)
  local ok, got = pcall(rounds.measure, s.harness, cands, o)
  return ok and got or { error = tostring(got) }
end

-- ---- the certificate -----------------------------------------------------------

-- score(recipe, speedups) -> the recipe's score of per-shape speedups (its
-- score function's view has them as shapes[key].speedup), else their geomean
local function score(recipe, sp)
  if not recipe.score then
    local xs = {}
    for i, sh in ipairs(recipe.shapes) do xs[i] = sp[sh.key] end
    return geomean(xs)
  end
  local shapes, list = {}, {}
  for i, sh in ipairs(recipe.shapes) do
    shapes[sh.key] = { speedup = sp[sh.key] }
    list[i] = shapes[sh.key]
  end
  local v = recipe:call("score", { shapes = shapes, shape_list = list })
  return type(v) == "number" and v or 0
end

-- certificate(recipe, list, got, o) -> the certificate of a round (see the
-- top), from its turn times; o: { target =, best = (the run's own best id),
-- run =, device =, seconds = }.
function M.certificate(recipe, list, got, o)
  local target = o.target or 0.01
  local keys = {}
  for i, sh in ipairs(recipe.shapes) do keys[i] = sh.key end
  local cert = { run = o.run, recipe = recipe.file or recipe.name, problem = recipe.problem:key(), device = o.device,
                 kwb = core.version, commit = core.commit, created = os.time(), rounds = got.rounds,
                 seconds = got.seconds, bound = got.bound, limit = o.seconds, target = target, shapes = keys,
                 best = o.best, entries = {}, ratios = {}, winners = {} }
  local times, start, baseline = {}, nil, nil
  for i, e in ipairs(list) do
    times[e.id] = got.times[i]
    local median = {}
    for _, key in ipairs(keys) do median[key] = core.stats(got.times[i][key], target).median end
    cert.entries[i] = { id = e.id, short = e.short, role = e.role, name = e.name, params = e.params,
                        origin = e.origin, median = median }
    if e.role == "start" then start = e end
    if e.role == "baseline" then baseline = e end
  end
  local function add(kind, id, over, key, r)
    cert.ratios[#cert.ratios + 1] = { kind = kind, id = id, over = over, shape = key, median = r.median, lo = r.lo,
                                      hi = r.hi, n = r.n, decided = r.decided }
  end
  -- each candidate's speedups and score
  local scores = {}
  for _, e in ipairs(list) do
    if e.role == "candidate" then
      local mid, lo, hi, decided, n = {}, {}, {}, true, got.rounds
      for _, key in ipairs(keys) do
        local r = rounds.ratio(times[start.id][key], times[e.id][key], target, true)
        add("speedup", e.id, start.id, key, r)
        mid[key], lo[key], hi[key] = r.median, r.lo, r.hi
        decided = decided and r.decided
      end
      local sc = { median = score(recipe, mid), lo = score(recipe, lo), hi = score(recipe, hi), n = n,
                   decided = decided }
      scores[e.id] = sc
      add("score", e.id, start.id, nil, sc)
    end
  end
  -- the pick: of the candidates whose score's interval lies above the start
  -- kernel's 1, the highest score in the round (ties: the run's own best,
  -- then the order of the list); none: the start kernel. Its figure is the
  -- round's, where the kernels were timed alike: the run's own figures, by
  -- which they entered, decide nothing here.
  local pick = start.id
  for _, e in ipairs(list) do
    local sc = scores[e.id]
    if sc and sc.lo > 1 then
      local cur = scores[pick]
      if not cur or sc.median > cur.median or (sc.median == cur.median and e.id == o.best) then pick = e.id end
    end
  end
  cert.pick = pick
  -- each shape's winner: the kernel with the largest gain over the pick there
  for _, key in ipairs(keys) do
    local win, gain = pick, nil
    for _, e in ipairs(list) do
      if e.id ~= pick and e.role ~= "baseline" then
        local r = rounds.ratio(times[pick][key], times[e.id][key], target)
        add("gain", e.id, pick, key, r)
        if r.median > 1 and (not gain or r.median > gain.median) then win, gain = e.id, r end
      end
    end
    cert.winners[key] = win
  end
  if baseline then
    for _, key in ipairs(keys) do
      add("vs_baseline", pick, baseline.id, key, rounds.ratio(times[baseline.id][key], times[pick][key], target))
    end
  end
  return cert
end

-- find(cert, kind, id, over, shape) -> the certificate's ratio of that kind
function M.find(cert, kind, id, over, shape)
  for _, r in ipairs(cert.ratios or {}) do
    if r.kind == kind and r.id == id and r.over == over and r.shape == shape then return r end
  end
end

-- role(cert, role) -> the id of the certificate's kernel in that role ("start", "baseline"), or nil
function M.role(cert, role)
  for _, e in ipairs(cert.entries) do if e.role == role then return e.id end end
end

local function entry(cert, id)
  for _, e in ipairs(cert.entries) do if e.id == id then return e end end
end
M.entry = entry

-- elsewhere(cert) -> the shapes whose winner beats the pick there by more
-- than the margin (kwb.loop.standings.elsewhere_margin) and beyond the noise
-- (its gain's interval above 1), as the summary lists them, each with its
-- gain's interval.
function M.elsewhere(cert)
  local out = {}
  for _, key in ipairs(cert.shapes) do
    local w = cert.winners[key]
    local g = w ~= cert.pick and M.find(cert, "gain", w, cert.pick, key)
    if g and g.median > 1 + standings.elsewhere_margin and g.lo > 1 then
      local e, p = entry(cert, w), entry(cert, cert.pick)
      out[#out + 1] = { shape = key, id = w, short = e.short, median = e.median[key], pick = p.median[key],
                        gain = { median = g.median, lo = g.lo, hi = g.hi, n = g.n, decided = g.decided },
                        name = e.name, params = e.params, origin = e.origin, start = e.role == "start" }
    end
  end
  return out
end

-- A candidate's failure in a turn of the round that can only be its own
-- doing: wrong (a timed run of the round is verified like any other), a
-- forbidden call, past the timeout (its own processor time). Not a crash: a
-- sandbox killed from outside (the machine short of memory) dies so too, and
-- a round that fails so leaves the candidate's result as it was.
M.its_own = { wrong = true, forbidden = true, timeout = true }

-- found(run, e, outcome, why) -> whether the candidate's result was revised:
-- a candidate of the round that failed in it (M.its_own) has that outcome
-- from now, its stored result revised (in the run that recorded it, this run
-- or an earlier one), counted in this run's funnel where it is this run's
-- and never named a best (the session's best is found again without it); the
-- round is then timed again without it (run). A kernel right in its
-- evaluation and wrong in the round kept its state to tell them apart.
function M.found(run, e, outcome, why)
  local s = run.session
  local now = s.store:known(s.ctx, e.id)
  if not now or now.outcome == outcome then return false end
  local mine
  for _, r in ipairs(run.results) do if r.id == e.id and r.seq == now.seq then mine = r end end
  local r = mine or now
  local was = { outcome = now.outcome, sanitized = now.sanitized, sanitize_due = now.sanitize_due }
  local before = r.outcome
  r.outcome, r.reason, r.score = outcome, "in the final round: " .. tostring(why), nil
  if not s.store:revise(s.ctx, e.cand, r, { id = now.run }, was) then return false end
  if mine then
    run.funnel[before] = run.funnel[before] - 1
    run.funnel[outcome] = run.funnel[outcome] + 1
  end
  run.progress:revised(run, r, before)
  if s.best and s.best.id == e.id then
    s.best = s.start
    require("kwb.loop.sanitizer").known_best(s, s.store:results(s.ctx))
  end
  s:recount()
  return true
end

-- run(run) -> the certificate, or nil with why there was no round (nothing
-- but the start kernel to time, the bound 0, the round failed): the run's
-- final round, timed, its certificate kept with the run's record.
function M.run(run)
  local s = run.session
  if run.certify_seconds == 0 then return nil, "no final round (--certify 0)" end
  local t = s.recipe.timing or {}
  local list, limit, got
  while true do
    local want = M.leading(s)
    if #want == 0 then return nil, "nothing but the start kernel to time" end
    list = M.entries(s, want)
    limit = M.bound(run, #list)
    got = M.time(s, list, { seconds = limit, target = t.target or 0.01, precise = 1 })   -- (1: the start kernel)
    local e = got.error and got.which and list[got.which]
    if not (e and e.role == "candidate" and M.its_own[got.outcome] and M.found(run, e, got.outcome, got.reason)) then
      break
    end
  end
  if got.error then
    return nil, string.format("the final round failed%s: %s", got.which and list[got.which]
                              and (" on " .. list[got.which].short) or "", got.error)
  end
  local cert = M.certificate(s.recipe, list, got, { target = t.target or 0.01, best = s.best.id, run = run.record.id,
                                                    device = s.ctx.device, seconds = limit })
  s.store:certificate(run.record, cert)
  return cert
end

-- compare(old, new) -> { { ratio = old's, now = new's or nil, agree = bool,
-- verdict = "agrees" | "disagrees" | "inconclusive" } }, all: each ratio of a
-- certificate against the same ratio measured again. They agree where their
-- intervals overlap and the new one is precise enough to tell: at most twice
-- as wide as the certified one, or than the round's target (both ends of
-- it: 2 x target x the median) where the certified one is narrower. A wider
-- one overlaps almost anything and confirms nothing: inconclusive (not
-- agreeing), as is a ratio not measured again.
function M.compare(old, new)
  local out, all = {}, true
  local target = old.target or 0.01
  for _, r in ipairs(old.ratios) do
    local n = M.find(new, r.kind, r.id, r.over, r.shape)
    local verdict
    if not n then verdict = "inconclusive"
    elseif n.hi < r.lo or r.hi < n.lo then verdict = "disagrees"
    elseif n.hi - n.lo > 2 * math.max(r.hi - r.lo, 2 * target * r.median) then verdict = "inconclusive"
    else verdict = "agrees" end
    out[#out + 1] = { ratio = r, now = n, agree = verdict == "agrees", verdict = verdict }
    all = all and verdict == "agrees"
  end
  return out, all
end

-- ratio_name(cert, r) -> "speedup of d50b4c4a over the start at n=64"
function M.ratio_name(cert, r)
  local function who(id)
    local e = entry(cert, id)
    if not e then return ids.short(id) or "?" end
    return e.role == "start" and "the start kernel" or e.role == "baseline" and ("the baseline " .. (e.name or e.short))
           or e.short
  end
  local at = r.shape and (" at " .. r.shape) or ""
  if r.kind == "speedup" then return string.format("speedup of %s over the start kernel%s", who(r.id), at) end
  if r.kind == "score" then return string.format("score of %s", who(r.id)) end
  if r.kind == "gain" then return string.format("%s against the pick %s%s", who(r.id), who(r.over), at) end
  return string.format("the pick %s against %s%s", who(r.id), who(r.over), at)
end

-- What the ratios of a certificate are, in words (kwb cache show RUN).
M.ratio_words = "speedup: the start kernel's time over the kernel's; score: the recipe's score of those; gain: the "
  .. "pick's time over the kernel's; vs_baseline: the baseline's over the pick's"

-- interval(r) -> "2.31x [2.25, 2.36]"
function M.interval(r)
  return string.format("%.3fx [%.3f, %.3f]", r.median, r.lo, r.hi)
end


-- lines(cert) -> the certificate as text, as `kwb cache show RUN` prints it
-- and a certificate prints at the REPL (M.Certificate): how the round ended,
-- its device and kwb, the pick, each kernel's median per shape, and each
-- ratio with its 95% interval.
function M.lines(cert)
  local figures = require "kwb.figures"
  local function short(id) return ids.short(id) or "-" end
  local out = {
    string.format("certificate  %d kernels in turns, %d rounds, %.1f s: %s", #cert.entries, cert.rounds, cert.seconds,
                  cert.bound == "decided" and "every comparison decided" or string.format("bound reached (%s)", cert.bound)),
    string.format("device       %s", cert.device or "-"),
    string.format("kwb          %s (commit %s)%s", cert.kwb or "-", cert.commit or "unknown",
                  cert.imported and ("; brought by bundle " .. cert.imported) or ""),
    string.format("pick         %s%s", short(cert.pick), cert.best and cert.best ~= cert.pick
                  and string.format(" (the run's own best was %s)", short(cert.best)) or ""),
    "kernels",
  }
  local rows = {}
  for _, e in ipairs(cert.entries) do
    local times = {}
    for _, key in ipairs(cert.shapes) do times[#times + 1] = key .. " " .. figures.time(e.median[key]) end
    rows[#rows + 1] = { short(e.id), e.role, e.params and next(e.params) and require("kwb.base.text").params_text(e.params)
                        or e.name or "", table.concat(times, "  ") }
  end
  for _, l in ipairs(figures.table({ { "id", align = "left" }, { "role", align = "left" }, { "what", align = "left" },
                                    { "median per shape", align = "left" } }, rows)) do out[#out + 1] = "  " .. l end
  rows = {}
  for _, r in ipairs(cert.ratios) do
    rows[#rows + 1] = { r.kind, short(r.id), short(r.over), r.shape or "all", string.format("%.3fx", r.median),
                        string.format("%.3f-%.3f", r.lo, r.hi), tostring(r.n or "-"), r.decided and "yes" or "no" }
  end
  out[#out + 1] = "ratios (" .. M.ratio_words .. ")"
  for _, l in ipairs(figures.table({ { "kind", align = "left" }, { "kernel", align = "left" }, { "over", align = "left" },
                                    { "shape", align = "left" }, "median", "95% interval", "rounds",
                                    { "decided", align = "left" } }, rows)) do out[#out + 1] = "  " .. l end
  return out
end

-- A certificate a run returns (its summary's `certificate`) prints at the
-- REPL as its lines; its fields stay plain (JSON encodes it as ever).
M.Certificate = { __tostring = function(cert) return table.concat(M.lines(cert), "\n") end }

return M
