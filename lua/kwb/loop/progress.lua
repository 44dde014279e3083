-- kwb/loop/progress.lua: how a run reports itself.
--   tty    one live status line (candidates done, best speedup, funnel, time left)
--   plain  one line per candidate (logs, pipes)
--   json   one JSON object per line on stdout; the last is {"event":"summary", ...}
--   quiet  the summary only
local ids = require "kwb.base.ids"
local core = require "kwb.core"
local figures = require "kwb.figures"
local summary = require "kwb.loop.summary"
local text = require "kwb.base.text"

local M = {}

local Reporter = {}
Reporter.__index = Reporter

-- tty when stdout is a terminal, plain otherwise.
function M.default_mode()
  if core.isatty(1) then return "tty" end
  return "plain"
end

function M.new(mode)
  if not ({ tty = 1, plain = 1, json = 1, quiet = 1 })[mode] then error("progress mode must be tty, plain, json or quiet", 2) end
  return setmetatable({ mode = mode }, Reporter)
end

-- (valid UTF-8 whatever a reply or a reason holds: kwb.base.text; with no secret
-- this process knows: kwb.base.secrets)
local function emit(t)
  io.stdout:write(require("kwb.base.secrets").scrub(text.json(t)), "\n")
  io.stdout:flush()
end

local function clock(s)
  s = math.max(0, math.floor(s + 0.5))
  return string.format("%d:%02d", s // 60, s % 60)
end


local funnel_text = summary.funnel_text

local function out(self, line)
  if self.mode == "tty" and self.live then io.stdout:write("\r\27[K") ; self.live = false end
  print(line)
end

function Reporter:begin(run)
  local r = run.recipe
  local q = run.session:fleet()   -- (a fleet's workers measure: kwb.runners.queue)
  if self.mode == "json" then
    emit { event = "start", recipe = r.name, problem = r.problem:key(), run = run.record.short, seed = run.seed,
           strategy = run.strategy_name, budget = run.budget, device = run.session.ctx.device, cache = run.session.store.path,
           queue = q and q.q.url or nil, queue_workers = q and q.n or nil }
  elseif self.mode ~= "quiet" then
    out(self, string.format("kwb: recipe %s · %s · %d shapes on %s%s · strategy %s · budget %d candidates, %g min · seed %d · cache %s",
      r.name, r.problem:key(), #r.shapes, run.session.ctx.device,
      q and string.format(" (queue %s, %d worker%s)", q.q.url, q.n, q.n == 1 and "" or "s") or "",
      run.strategy_name, run.budget.candidates, run.budget.minutes, run.seed, run.session.store.path))
  end
end

function Reporter:start_kernel(s, res, fresh)
  local times = {}
  for _, sh in ipairs(s.recipe.shapes) do times[sh.key] = res.shapes[sh.key].median end
  if self.mode == "json" then
    emit { event = "start-kernel", id = res.id, median = times, cached = not fresh }
  elseif self.mode ~= "quiet" then
    local c = s:ceilings()
    out(self, string.format("start kernel %s: %d shapes verified%s · ceilings %.1f GB/s, %.1f GFLOP/s%s",
      res.short, #s.recipe.shapes, fresh and "" or " (from the cache)", c.bandwidth / 1e9, c.flops / 1e9,
      s.ceilings_from and string.format(" (measured in run %s)", s.ceilings_from) or ""))
  end
end

-- The start kernel timed again in this run (kwb.loop.session): in turns beside
-- a candidate (beside), or alone where none reached its timing.
function Reporter:start_again(run, res, beside)
  local s = run.session
  local times = {}
  for _, sh in ipairs(s.recipe.shapes) do times[sh.key] = res.shapes[sh.key].median end
  if self.mode == "json" then
    emit { event = "start-kernel", id = res.id, median = times, cached = false, again = true,
           beside = beside and beside.id or nil }
  elseif self.mode ~= "quiet" then
    out(self, string.format("start kernel %s: timed again in this run%s; every speed-up from here is against these "
                            .. "figures", res.short, beside and (", in turns beside " .. beside.short) or ""))
  end
end

-- The run's baseline once checked, or measured (a plan: kwb.measure.baseline),
-- or why the run goes on without it.
function Reporter:baseline(run, bl)
  -- (--json: the summary event carries it)
  if self.mode ~= "json" and self.mode ~= "quiet" then
    if bl.error then
      out(self, string.format("baseline %s: not measured, an error of the recipe: %s (the run goes on without it)",
                              bl.name, bl.error))
    elseif bl.due then
      out(self, string.format("baseline %s: %d shapes verified (%.1f s); to be timed in turns beside the run's first timed "
                              .. "candidate", bl.name, #run.recipe.shapes, bl.seconds or 0))
    else
      out(self, string.format("baseline %s: %d shapes verified and timed (%.1f s)", bl.name, #run.recipe.shapes,
                              bl.seconds or 0))
    end
  end
end

-- The run's baseline timed later in the run (kwb.loop.start): in turns beside
-- a candidate (and the start kernel), beside the start kernel's own timing
-- again, or alone at the loop's end; or why its timing failed.
function Reporter:baseline_timed(run, bl)
  if self.mode == "json" or self.mode == "quiet" then return end
  if bl.error then
    out(self, string.format("baseline %s: not timed, an error of the recipe: %s (the run goes on without it)", bl.name,
                            bl.error))
    return
  end
  local start = run.session.start
  local how = not bl.beside and "alone, no candidate having reached its timing"
              or start and bl.beside == start.id and "in turns beside the start kernel"
              or string.format("in turns beside %s%s", ids.short(bl.beside), bl.with_start and " and the start kernel" or "")
  out(self, string.format("baseline %s: timed %s", bl.name, how))
end

local function best_text(run)
  local b = run.session.best
  if b.outcome == "start" then return "best: the start kernel" end
  return string.format("best %.2fx (%s)", b.score, b.short)
end

function Reporter:candidate(run, res)
  local n, total = run.evaluated, run.budget.candidates
  if self.mode == "json" then
    local speedup, samples, tools = {}, {}, {}
    for k, r in pairs(res.shapes) do speedup[k], samples[k] = r.speedup, r.n end
    for k, x in pairs(res.seconds) do
      local tool = k:match("^sanitize_(%a+)$")
      if tool then tools[tool] = x end
    end
    emit { event = "candidate", n = n, id = res.id, outcome = res.outcome, score = res.score, duplicate_of = res.duplicate_of,
           reason = res.reason, rule = res.rule, line = res.line, params = res.params, origin = res.origin,
           model = res.model,
           speedup = next(speedup) and speedup or nil, samples = next(samples) and samples or nil,
           seconds = res.seconds.total,
           stages = { build = res.seconds.build, verify = res.seconds.verify, time = res.seconds.time,
                      calls = res.seconds.calls, reference = res.seconds.reference, sanitize = res.seconds.sanitize,
                      unannounced = res.seconds.unannounced },
           -- (each compute-sanitizer tool's run: its seconds, and where they went inside kwb)
           sanitizer = next(tools) and { seconds = tools, stages = res.sanitize_stages } or nil }
  elseif self.mode == "plain" then
    local what = res.duplicate_of and res.reason
                 or res.score and string.format("%.2fx%s", res.score, res.reason and " (within the noise)" or "")
                 or (res.reason or "")
    print(string.format("[%" .. #tostring(total) .. "d/%d] %s %-13s %s%s", n, total, res.short, res.outcome, what,
      res.params and ("  " .. text.params_text(res.params)) or ""))
  elseif self.mode == "tty" then
    local left = run.started + run.budget.minutes * 60 - core.now()
    io.stdout:write(string.format("\r\27[K[ %d/%d ]  %s  %s  %s left", n, total, best_text(run),
      funnel_text(run.funnel), clock(left)))
    io.stdout:flush()
    self.live = true
  end
end

-- A summary of the lessons ledger (kwb.strategies.lessons): the lessons it
-- kept, or why it kept none.
function Reporter:lessons(run, got)
  if self.mode == "json" then
    emit { event = "lessons", kept = got.kept or 0, evidence = got.evidence, ids = got.ids, error = got.error,
           transcript = got.transcript }
  elseif self.mode ~= "quiet" then
    local from = string.format("the last %d candidate%s", got.evidence, got.evidence == 1 and "" or "s")
    out(self, got.error and string.format("lessons: none kept from %s: %s", from, got.error)
              or got.kept == 0 and string.format("lessons: none new in %s, the model says", from)
              or string.format("lessons: %d kept from %s (kwb lessons %s)", got.kept, from,
                               run.recipe.file or run.recipe.name))
  end
end

-- A result judged again at the run's end (kwb.loop.sanitizer's settle: its best
-- found unsafe by the put-off sanitizer run; sanitize_winners: a shape's
-- winner found unsafe), with the outcome it had.
function Reporter:revised(run, res, was)
  if self.mode == "json" then
    emit { event = "revised", id = res.id, outcome = res.outcome, was = was, score = res.score, reason = res.reason }
  elseif self.mode == "plain" or self.mode == "tty" then
    out(self, string.format("revised: %s %s, was %s%s", res.short, res.outcome, was,
                            res.reason and (": " .. res.reason) or ""))
  end
end

-- Before a candidate is evaluated: the live line says which (terminal only).
function Reporter:evaluating(run, cand)
  if self.mode ~= "tty" then return end
  local left = run.started + run.budget.minutes * 60 - core.now()
  io.stdout:write(string.format("\r\27[K[ %d/%d ]  %s  %s  evaluating %s  %s left", run.evaluated, run.budget.candidates,
    best_text(run), funnel_text(run.funnel), cand.short, clock(left)))
  io.stdout:flush()
  self.live = true
end

-- The per-shape table of a result against the start kernel, and against
-- the run's baseline where it has one (bl: kwb.measure.baseline.run's).
function Reporter:table(s, res, bl)
  local rows, with = {}, bl and bl.median ~= nil
  for _, sh in ipairs(s.recipe.shapes) do
    local r, st = res.shapes[sh.key], s.start.shapes[sh.key]
    if r then
      local vs = with and require("kwb.measure.baseline").vs(bl, sh.key, r.median)
      rows[#rows + 1] = { sh.key, figures.time(st.median), figures.time(r.median),
        r.speedup and string.format("%.2fx", r.speedup) or "-",
        r.gbs and string.format("%.1f", r.gbs) or "-", r.gflops and string.format("%.1f", r.gflops) or "-",
        r.floor_frac and string.format("%.0f%%", 100 * r.floor_frac) or "-",
        string.format("%.1f%%", 100 * r.spread), r.partial and "partial" or r.noisy and "noisy" or "full" }
      if with then   -- beside the speed-up: the baseline's time and its median over this one's
        table.insert(rows[#rows], 5, bl.median[sh.key] and figures.time(bl.median[sh.key]) or "-")
        table.insert(rows[#rows], 6, vs and string.format("%.2fx", vs) or "-")
      end
    end
  end
  print(string.format("%s %s: %s%s%s", res.short, res.origin or "", res.outcome,
    res.score and string.format(" · %.2fx geomean over the start kernel", res.score) or "",
    res.reason and (" · " .. res.reason) or ""))
  if #rows > 0 then
    local head = { { "shape", align = "left" }, "start", "this", "speedup", "GB/s", "GFLOP/s", "% floor", "spread", "timed" }
    if with then table.insert(head, 5, "baseline"); table.insert(head, 6, "vs baseline") end
    figures.print_table(head, rows)
  end
end

-- The final round (kwb.loop.certify): how it ended, the pick's speedup per
-- shape with its 95% interval, and the run's own best where the round named
-- another pick.
function Reporter:certified(sm)
  local c = sm.certificate
  local b = sm.best
  local how = c.bound == "decided" and "every comparison decided"
              or string.format("bound reached (%s), not every comparison decided", c.bound == "seconds"
                               and string.format("%g s", c.limit or c.seconds) or "rounds")
  print(string.format("certified: %d kernels timed in turns, %d rounds, %.1f s: %s", #c.entries, c.rounds, c.seconds,
                      how))
  if sm.run_best then
    print(string.format("the run's best %s (%.2fx in the run) is not the pick: the final round names %s", sm.run_best.short,
                        sm.run_best.score or 0, b.start and "the start kernel" or b.short))
  end
  if b.start then return end
  local pick = require("kwb.loop.certify").entry(c, c.pick)
  local start = require("kwb.loop.certify").entry(c, require("kwb.loop.certify").role(c, "start"))
  local rows, with = {}, b.vs_baseline ~= nil and sm.baseline ~= nil
  for _, key in ipairs(c.shapes) do
    local iv = b.interval and b.interval[key]
    rows[#rows + 1] = { key, figures.time(start.median[key]), figures.time(pick.median[key]),
                        string.format("%.2fx", b.speedup[key]), iv and string.format("%.2f-%.2f", iv[1], iv[2]) or "-" }
    if with then   -- (the baseline's median in the round where it took turns there, else the run's)
      local bm = b.baseline_median and b.baseline_median[key] or sm.baseline.median and sm.baseline.median[key]
      rows[#rows][#rows[#rows] + 1] = bm and figures.time(bm) or "-"
      rows[#rows][#rows[#rows] + 1] = b.vs_baseline[key] and string.format("%.2fx", b.vs_baseline[key]) or "-"
    end
    if b.floor then   -- (the pick's share of the physical floor, from its record)
      rows[#rows][#rows[#rows] + 1] = b.floor[key] and string.format("%.0f%%", 100 * b.floor[key]) or "-"
    end
  end
  local head = { { "shape", align = "left" }, "start", "pick", "speedup", "95% interval" }
  if with then head[#head + 1] = "baseline"; head[#head + 1] = "vs baseline" end
  if b.floor then head[#head + 1] = "% floor" end
  print(string.format("%s: %.2fx geomean over the start kernel, 95%% interval %.2f-%.2f", b.short, b.score,
                      b.score_interval[1], b.score_interval[2]))
  figures.print_table(head, rows)
end

-- Shapes where another result beats the pick (summary.elsewhere).
function Reporter:elsewhere(sm)
  -- (certified: each gain's interval lies above 1 as well)
  print(string.format("faster elsewhere: at %d of %d shapes another kernel beats the pick by more than %.0f%%%s",
    #sm.elsewhere, sm.shape_count, 100 * require("kwb.loop.standings").elsewhere_margin,
    sm.certificate and ", beyond the noise" or ""))
  local rows, with = {}, sm.baseline and sm.baseline.median ~= nil
  for _, e in ipairs(sm.elsewhere) do
    local what = e.start and "the start kernel" or (e.params and text.params_text(e.params)) or e.name or ""
    local g = e.gain   -- (certified: the round's gain and its interval)
    rows[#rows + 1] = { e.shape, figures.time(e.pick), figures.time(e.median),
                        string.format("%.2fx", g and g.median or e.pick / e.median),
                        g and string.format("%.2f-%.2f", g.lo, g.hi) or "-", e.short, what }
    if with then table.insert(rows[#rows], 6, e.vs_baseline and string.format("%.2fx", e.vs_baseline) or "-") end
  end
  local head = { { "shape", align = "left" }, "pick", "there", "gain", "95% interval", { "kernel", align = "left" },
                 { "what", align = "left" } }
  if with then table.insert(head, 6, "vs baseline") end
  figures.print_table(head, rows)
  -- the layer's choice: these winners where they win, the pick elsewhere
  print("a layer dispatching per shape takes these there, the pick elsewhere: `kwb export RECIPE.lua DIR` writes it")
end

-- What the model did: its usage, and each candidate a reply proposed.
function Reporter:model(sm)
  local u = sm.model
  print(string.format("model %s: %d requests (%d retries, %d failed) · %d tokens in, %d out%s · %s", u.name, u.requests,
    u.retries, u.failures, u.input, u.output,
    u.unseen and string.format(" (estimated, with %d %s whose usage never came)", u.unseen,
                               u.unseen == 1 and "try" or "tries")
      or u.estimated and " (estimated)" or "",
    u.priced and string.format("$%.4f", u.cost) or "no price given"))
  if sm.models then print(summary.models_line(sm.models)) end
  if not sm.proposals then return end
  local rows = {}
  for _, p in ipairs(sm.proposals) do
    rows[#rows + 1] = { p.short, p.outcome, p.score and string.format("%.2fx", p.score) or "-",
                        ids.short(p.parent) or "-", u.priced and string.format("$%.4f", p.cost or 0) or "-",
                        p.what and #p.what > 72 and (p.what:sub(1, 69) .. "...") or p.what or "" }
  end
  figures.print_table({ { "proposal", align = "left" }, { "outcome", align = "left" }, "score",
                       { "parent", align = "left" }, "cost", { "what", align = "left" } }, rows)
end

-- The pick against the PyTorch module itself (summary.pytorch: kwb.loop.pytorch).
function Reporter:pytorch(run, sm)
  local pt = sm.pytorch
  print(string.format("vs PyTorch: the module timed by its process as kwb times kernels (%s)",
                      run.recipe.backend == "cuda" and "cold L2; graph and compile: CUDA graph replays"
                      or "one thread's CPU time a call"))
  local cols = { { "shape", align = "left" }, "pick" }
  for _, m in ipairs(pt.modes) do
    if not (pt.skipped and pt.skipped[m]) then cols[#cols + 1] = m; cols[#cols + 1] = "vs " .. m end
  end
  local rows = {}
  for _, sh in ipairs(run.recipe.shapes) do
    local e = pt.shapes[sh.key] or {}
    local row = { sh.key, e.pick and figures.time(e.pick) or "-" }
    for _, m in ipairs(pt.modes) do
      if not (pt.skipped and pt.skipped[m]) then
        row[#row + 1] = e[m] and figures.time(e[m]) or "-"
        row[#row + 1] = e["vs_" .. m] and string.format("%.2fx", e["vs_" .. m]) or "-"
      end
    end
    rows[#rows + 1] = row
  end
  figures.print_table(cols, rows)
  for _, m in ipairs(pt.modes) do
    if pt.skipped and pt.skipped[m] then print(string.format("  %s: not timed: %s", m, pt.skipped[m])) end
  end
end

function Reporter:summary(run, sm)
  if self.mode == "json" then emit(sm); return end
  if self.mode == "tty" and self.live then io.stdout:write("\n"); self.live = false end
  local s = run.session
  print(summary.done_line(sm))
  if self.mode ~= "quiet" and sm.certificate then self:certified(sm)
  elseif self.mode ~= "quiet" then self:table(s, s.best, run.baseline) end
  if self.mode ~= "quiet" and sm.start.run then   -- (which run's figures every speed-up is against)
    print(sm.start.this_run and string.format("start kernel: this run's figures (run %s)", ids.short(sm.start.run))
          or string.format("start kernel: the figures of an earlier run, %s%s", ids.short(sm.start.run),
                           sm.start.error and (": timing it again failed: " .. sm.start.error) or ""))
  end
  if self.mode ~= "quiet" and sm.uncertified and sm.candidates + sm.known > 0 then print("not certified: " .. sm.uncertified) end
  if self.mode ~= "quiet" and sm.elsewhere then self:elsewhere(sm) end
  if self.mode ~= "quiet" and sm.pytorch then self:pytorch(run, sm) end
  if self.mode ~= "quiet" and sm.model then self:model(sm) end
  if sm.stopped then print("stopped: " .. sm.stopped) end
  print(summary.funnel_line(sm))
  if sm.judge then print(sm.judge.line) end
  local st = sm.stages
  if st and sm.candidates > 0 then
    print(string.format("time: build %.1f s · verify %.1f s · timing %.1f s · sanitizer %.1f s · start kernel %.1f s"
      .. "%s · ceilings %.1f s%s%s · the rest %.1f s%s", st.build, st.verify, st.time, st.sanitize, st.start or 0,
      st.baseline and string.format(" (baseline %.1f s)", st.baseline) or "", st.ceilings or 0,
      sm.ceilings_from and string.format(" (run %s's)", sm.ceilings_from) or "",
      (st.certify and string.format(" · final round %.1f s", st.certify) or "")
        .. (st.pytorch and string.format(" · PyTorch %.1f s", st.pytorch) or ""), st.rest,
      (sm.prebuilt or 0) > 0 and string.format(" · %d built ahead", sm.prebuilt) or ""))
  end
end

return M
