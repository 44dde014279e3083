-- kwb/loop/run.lua: one pass of the loop under a budget. The strategy proposes,
-- the session makes each proposal a candidate; one the cache knows is shown
-- to the strategy again without being evaluated, the others are submitted
-- (up to one per worker at once) and completed in the order they were
-- proposed, so a proposal never depends on which worker was faster. Every
-- result goes to the progress report, back to the strategy and, in a run
-- that asks a model, to the lessons ledger (kwb.strategies.lessons); the run ends
-- when the budget (candidates, minutes) is spent or the strategy has
-- nothing left, with a summary (kwb.loop.summary).
local core = require "kwb.core"
local lessons = require "kwb.strategies.lessons"
local outcomes = require "kwb.base.outcomes"
local progress = require "kwb.loop.progress"
local rng = require "kwb.base.rng"
local strategy = require "kwb.strategies"
local summary = require "kwb.loop.summary"

local M = {}

-- What a strategy sees of the run: run.space, run.random, run.best,
-- run.budget, run:id(p), run:known(p), run:valid(p), run:history().
local Run = {}
Run.__index = Run
-- A run prints (the REPL) as one line; its parts are fields: results,
-- funnel, best, record, session.
Run.__tostring = function(r)
  return string.format("kwb.run %s: %d candidates, %d results (run.results), best %s", r.recipe.name, r.evaluated,
                       #r.results, r.best and r.best.short or "-")
end

-- The candidate id of a parameter table or proposal (strategies name parents with it).
function Run:id(params_or_cand)
  return self.session:candidate(params_or_cand).id
end

function Run:known(params_or_cand)
  local ok, cand = pcall(self.session.candidate, self.session, params_or_cand)
  if not ok then return false end
  return self.session:known(cand) ~= nil
end

-- Does params satisfy the space's restriction?
function Run:valid(params)
  local sp = self.space
  if not sp then return true end
  return not sp.restrict or sp.restrict(params) and true or false
end

-- The stored results of this recipe's context, oldest first.
function Run:history() return self.session:history() end

-- ---- what model-driven strategies use ---------------------------------

-- The recipe's model (kwb.model), made on first use; its requests and
-- replies go into the cache as transcripts of this run.
function Run:open_model()
  if self.model then return self.model end
  if not self.recipe.model then
    error(string.format("the %s strategy needs the recipe's 'model' (recipe %s has none)", self.strategy_name,
                        self.recipe.name), 0)
  end
  local s = self.session
  self.model = require("kwb.model").new(self.recipe.model, { record = function(t) return s:keep_transcript(t) end,
                                                             seed = self.seed })
  return self.model
end

-- Has the run spent its cost budget (budget.cost, in the price's currency)?
function Run:spent()
  local cap = self.budget.cost
  if not cap or not self.model then return false end
  if self.model.usage.cost >= cap then
    self.stop_reason = self.stop_reason or string.format("the cost budget (%g) is spent", cap)
    return true
  end
  return false
end

-- Candidates the budget still allows besides those in flight.
function Run:budget_left()
  return self.budget.candidates - self.evaluated - self.repeats - (self.in_flight or 0)
end

-- evaluate_now(proposal) -> result: one candidate through the whole loop at
-- once (recorded, counted, reported): the agent strategy's evaluate tool.
function Run:evaluate_now(prop)
  local s = self.session
  local cand = s:candidate(prop, self.strategy_name)
  local res = s:known(cand)
  if res then return res end
  self.progress:evaluating(self, cand)
  res = s:complete(s:submit(cand))
  self:count(res, true)
  return res
end

-- compile(proposal) -> text: the build's verdict for a draft (no candidate).
function Run:compile(prop)
  local s = self.session
  local cand = s:candidate(prop, self.strategy_name)
  local r = s:build(cand)
  if not r.outcome then return "ok: it builds and passes the rules" end
  local log = r.log and r.log ~= "" and ("\n" .. r.log:sub(1, 4000)) or ""
  return string.format("%s: %s%s", r.outcome, r.reason or "", log)
end

-- A completed result into the run's counts, the report and the strategy. A
-- duplicate (code measured before, whose result it takes) uses no budget
-- slot: it counts in the funnel and run.duplicates, not run.evaluated.
function Run:count(res, by_tool)
  if res.outcome == outcomes.duplicate then self.duplicates = self.duplicates + 1
  else self.evaluated = self.evaluated + 1 end
  self.results[#self.results + 1] = res
  for _, r in pairs(res.shapes) do
    if r.partial then self.partial = self.partial + 1 end
  end
  self.timing_s = self.timing_s + (res.seconds.time or 0)
  self.funnel[res.outcome] = self.funnel[res.outcome] + 1
  self.feedback[#self.feedback + 1] = res
  if res.outcome ~= outcomes.duplicate then self.misses = 0 end
  self:report_again(res)   -- (the start kernel and the baseline timed in turns beside this candidate)
  self.progress:candidate(self, res)
  self.best = self.session.best
  if self.strategy.observe and not by_tool then self.strategy:observe(self, res, true) end
  lessons.after(self)   -- (every model.lessons_every evaluated candidates, a summary into the lessons ledger)
end

-- report_again([beside]): the start kernel's and the baseline's figures
-- timed again since the last call (kwb.loop.start), in turns beside a
-- candidate (beside) or at the loop's end, into the report; the baseline's
-- kept with the run's record (kwb report reads it).
function Run:report_again(beside)
  local s = self.session
  local again = s:take_start_again()
  if again then self.progress:start_again(self, again, beside) end
  local bl = s:take_baseline_again()
  if bl then
    self.progress:baseline_timed(self, bl)
    s:note_baseline(bl)
  end
end

-- The strategy's next proposal as a candidate, or nil when it has none.
function Run:propose_candidate()
  local prop, meta = self.strategy:propose(self)
  if prop == nil then return nil end
  local cand = self.session:candidate(prop, self.strategy_name)
  if meta then   -- a strategy may say where a proposal comes from and why
    cand.parent = meta.parent or cand.parent
    cand.rationale = meta.rationale or cand.rationale
  end
  return cand
end

-- The next proposal as a candidate, or nil when the budget or the strategy
-- is done: the first of those proposed ahead (look_ahead), else a new one.
function Run:next_candidate(in_flight)
  -- (the cost budget stops the asking, in the strategies: a reply paid for is still evaluated)
  if self.evaluated + self.repeats + in_flight >= self.budget.candidates or core.now() >= self.ends_at then return nil end
  self.in_flight = in_flight
  local cand
  if self.ahead and #self.ahead > 0 then cand = table.remove(self.ahead, 1)
  elseif not self.ahead_done then cand = self:propose_candidate() end
  if cand == nil then self.exhausted = true; return nil end
  return cand
end

-- Builds ahead: a strategy whose proposals do not depend on the results (its
-- `ahead` field: grid, list) is asked for up to AHEAD (opts.ahead) proposals beyond the
-- candidates in flight, within the budget, and the session starts their
-- builds in the background while the current candidate is measured. The
-- candidates, their order and their results stay those of a run without it.
M.AHEAD = 4
function Run:look_ahead(in_flight)
  local n = self.ahead_n or M.AHEAD
  if not (n > 0 and self.strategy.ahead and self.session:builds_ahead()) then return end
  self.ahead = self.ahead or {}
  local fresh = {}
  while not self.ahead_done and #self.ahead < n
        and self.evaluated + self.repeats + in_flight + #self.ahead < self.budget.candidates do
    local cand = self:propose_candidate()
    if cand == nil then self.ahead_done = true; break end
    self.ahead[#self.ahead + 1] = cand
    -- (one over budget.source_bytes is never built: kwb.loop.candidate)
    if not cand.prebuilt and not cand.too_big and not self.session:known(cand) then fresh[#fresh + 1] = cand end
  end
  if #fresh > 0 and self.session:prebuild(fresh) then
    for _, cand in ipairs(fresh) do cand.prebuilt = true end
    self.prebuilt = (self.prebuilt or 0) + #fresh
  end
end

-- The best's put-off sanitizer run (the run's PutOff settles), then the
-- shapes' winners sanitized where they never were (Session:sanitize_winners), and
-- the outcomes they changed into the counts and the report as they come
-- (M.run takes the session's best after).
function Run:settle()
  local s = self.session
  local function revised(c)
    if c.mine ~= false then   -- (this run's: counted in its funnel)
      self.funnel[c.was] = self.funnel[c.was] - 1
      self.funnel[c.res.outcome] = self.funnel[c.res.outcome] + 1
    end
    self.progress:revised(self, c.res, c.was)
  end
  if self.putoff then self.putoff:settle(revised) end
  local by_id = {}
  for _, r in ipairs(self.results) do by_id[r.id] = r end
  s:sanitize_winners(by_id, revised)
end

-- The scheduler: candidates in flight, oldest first; with a pool of n
-- workers up to n are measured at once.
function Run:loop()
  local s = self.session
  local width = math.max(self.workers, 1)
  -- while the start kernel or the baseline is due, one candidate at a time:
  -- each is judged against the figures taken beside the first one timed,
  -- and the baseline goes along with one of them (kwb.loop.start)
  local function window() return (s.start_due or s.baseline_due) and 1 or width end
  local flight, flying = {}, {}
  local function complete_oldest()
    local item = table.remove(flight, 1)
    flying[item.cand.id] = nil
    self:count(s:complete(item))
  end
  local stop = false
  while true do
    while not stop and #flight < window() do
      local cand = self:next_candidate(#flight)
      if not cand then stop = true; break end
      while flying[cand.id] do complete_oldest() end   -- proposed again while in flight: known once it lands
      local res = s:known(cand)
      if res and cand.model then
        -- a model that repeats a kernel spent a request on it: that counts
        -- against the budget, and its next prompt says so
        self.repeats = self.repeats + 1
        self.feedback[#self.feedback + 1] = { short = cand.short, outcome = "repeat", origin = cand.origin,
          reason = string.format("the same kernel as %s, evaluated before (%s)", res.short,
                                 res.duplicate_of and ("duplicate: " .. res.reason) or res.outcome) }
      end
      if res then
        self.skipped = self.skipped + 1
        self.misses = self.misses + 1
        if self.misses >= 10000 then self.exhausted = true; stop = true; break end
        self.best = s.best
        if self.strategy.observe then self.strategy:observe(self, res, false) end
      else
        self.progress:evaluating(self, cand)
        flight[#flight + 1] = s:submit(cand)
        flying[cand.id] = true
        self:look_ahead(#flight)
      end
    end
    if #flight == 0 then break end
    complete_oldest()
  end
  -- builds ahead that the budget's end or the run's end left unused finish before the run
  -- returns, so none is still compiling when the process ends
  if self.prebuilt then s:prebuilds_settle(30) end
  -- no candidate reached its timing: the start kernel timed again (the
  -- baseline in turns beside it where both are due), and a baseline still
  -- due alone, so that the run has its own figures
  if s.start_due then s:retime_start() end
  if s.baseline_due then s:time_baseline_alone() end
  self:report_again()
end

-- run(recipe, opts) -> summary, run. opts: candidates, minutes, strategy,
-- seed, workers, ahead (candidates built ahead, default M.AHEAD; 0: none),
-- certify (the final round's bound in seconds, default
-- kwb.loop.certify.seconds; 0: none), mode ("tty" | "plain" | "json" |
-- "quiet"), json, store.
-- profile(recipe, id [, shape]) -> the profile (Session:profile), its table printed.
function M.profile(recipe, id, key)
  local p = recipe:session():profile(id, key)
  for _, l in ipairs(require("kwb.checks.profile").text(p, p.shape)) do print(l) end
  return p
end

function M.run(recipe, opts)
  opts = opts or {}
  local s = recipe:session(opts)
  if opts.queue and not s:on_queue() then   -- (its results are keyed by this machine's device already)
    error("this recipe's session measures on this machine; load the recipe again (kwb.load) to run it on a queue", 0)
  end
  local seed = opts.seed or recipe.seed or os.time()
  local budget = {
    candidates = opts.candidates or recipe.budget.candidates,
    minutes = opts.minutes or recipe.budget.minutes,
    timeout = recipe.budget.timeout,
  }
  local strat, sname = strategy.load(opts.strategy or recipe.strategy)
  budget.cost = recipe.budget.cost
  local run = setmetatable({ session = s, recipe = recipe, space = recipe.space, seed = seed,
                             random = rng.new(seed), budget = budget, strategy = strat, strategy_name = sname,
                             funnel = outcomes.counts(), results = {}, feedback = {}, repeats = 0, duplicates = 0,
                             evaluated = 0, partial = 0, timing_s = 0,
                             skipped = 0, misses = 0, started = core.now(), ahead_n = opts.ahead,
                             certify_seconds = opts.certify,
                             progress = progress.new(opts.mode or (opts.json and "json") or progress.default_mode()) },
                           Run)
  run.ends_at = run.started + budget.minutes * 60
  run.record = s:begin_run { seed = seed, workers = opts.workers, recipe_file = recipe.file or recipe.name,
                             source = not recipe.file and recipe.name or nil,
                             settings = { strategy = sname, seed = seed, budget = budget } }
  run.progress:begin(run)
  -- the judge certifies itself before anything is spent (kwb.loop.selftest): raises when a plant passes
  run.judge = require("kwb.loop.selftest").run(s, run.record)
  -- (the summary's stages: the start kernel's seconds, its workers' start
  -- among them, apart from the ceilings measured and the sanitizer run
  -- meanwhile: an earlier best's, kwb.loop.sanitizer's known_best)
  local t_start, before = core.now(), s:stage_seconds()
  run.ceilings_base, run.sanitize_base = before.ceilings, before.sanitize
  local ok_start, start, fresh = pcall(s.within, s, run.ends_at, s.ensure_start, s)
  local after = s:stage_seconds()
  run.start_s = core.now() - t_start - (after.ceilings - before.ceilings) - (after.sanitize - before.sanitize)
  if not ok_start then error(start, 0) end
  if fresh ~= nil then run.progress:start_kernel(s, start, fresh) end
  -- the start kernel's figures are this run's: measured now, or timed again
  -- in turns beside the first candidate that reaches its timing (kwb.loop.session)
  s.start_due = start.run ~= run.record.id
  s.start_error = nil
  for _, c in ipairs(s:take_start_changes()) do run.progress:revised(run, c.res, c.was) end   -- (not this run's)
  -- the recipe's baseline, right after the start kernel: a source built and
  -- checked now, then timed in turns beside the run's first timed candidate
  -- (kwb.loop.start); a plan measured now; never a candidate; kept with the
  -- run's record for kwb report (kwb.measure.baseline)
  run.baseline = s:within(run.ends_at, require("kwb.measure.baseline").run, s)
  s.run_baseline, s.baseline_due, s.baseline_again = run.baseline, run.baseline and run.baseline.due or false, nil
  if run.baseline then
    run.progress:baseline(run, run.baseline)
    s:note_baseline(run.baseline)
  end
  run.best = s.best
  local pool = s:workers()
  run.workers = pool and pool.n or 0
  -- the model's requests move on while the workers measure
  s:on_idle(function() if run.model then run.model:poll(0) end end)
  -- a failure of the strategy or the loop still closes the run's record
  -- with what it counted (the model's usage too), then goes on up
  -- a strategy that reads no results has compute-sanitizer put off to the end (Session:put_off)
  if strat.ahead == true and recipe.sanitize == "best" then run.putoff = s:put_off() end
  local ok, err = pcall(function()
    if strat.init then strat:init(run) end
    run:loop()
    run:settle()
    -- the final round: the pick, the winners and "faster elsewhere" certified (kwb.loop.certify)
    local t_cert = core.now()
    run.certificate, run.uncertified = require("kwb.loop.certify").run(run)
    run.certify_s = core.now() - t_cert
    -- a PyTorch module's problem: the module itself timed beside the pick (kwb.loop.pytorch)
    run.pytorch = require("kwb.loop.pytorch").run(run)
  end)
  if run.putoff then run.putoff:abandon() end   -- (an error before the settling: the run's unsanitized best is not the session's)
  s.baseline_due = false   -- (the run's baseline goes along with this run's candidates only, even after an error)
  run.best = s.best
  s:close_workers()
  if run.model then run.model:close() end
  local sm = summary.summary(run)
  s:end_run(sm)
  if not ok then error(err, 0) end
  run.progress:summary(run, sm)
  return sm, run
end

-- A result as the REPL shows it; its fields stay plain.
local Result = {}
Result.__index = Result
function Result:__tostring()
  return string.format("kwb.result %s %s%s", self.short, self.outcome,
    self.score and string.format(" %.2fx", self.score) or (self.reason and (": " .. self.reason) or ""))
end

-- try(recipe, proposal) -> result: evaluate one candidate now (even if the
-- cache knows it), timed in full (never raced), print its per-shape table.
function M.try(recipe, prop)
  local s = recipe:session()
  s:ensure_start()
  local res = s:evaluate(s:candidate(prop, "try"), { full = true })   -- (never raced: a measurement asked for)
  progress.new("plain"):table(s, res)
  return setmetatable(res, Result)
end

return M
