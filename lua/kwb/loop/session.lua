-- kwb/loop/session.lua: what one recipe's evaluations share in the main process:
-- the cache (kwb.loop.store) and the context results are keyed by, the start
-- kernel's result, the best so far, the best time per shape (racing) and
-- which result holds it, the ceilings, and the pool of workers candidates
-- are measured in.
--
--   local s = session.new(recipe [, { store = }])
--   local c = s:candidate(proposal, origin)     -- kwb.loop.candidate
--   local p = s:submit(c)                       -- to a worker (or measured here)
--   local res = s:complete(p)                   -- judged, recorded, noted
--   s:evaluate(c)                               -- submit and complete
local core = require "kwb.core"
local files = require "kwb.base.files"
local candidate = require "kwb.loop.candidate"
local codes_of = require "kwb.loop.codes"
local judge = require "kwb.loop.judge"
local kept_ceilings = require "kwb.loop.ceilings"
local measure = require "kwb.measure"
local result = require "kwb.loop.result"
local rng = require "kwb.base.rng"
local sanitizer = require "kwb.loop.sanitizer"
local outcomes = require "kwb.base.outcomes"
local standings = require "kwb.loop.standings"
local start_figures = require "kwb.loop.start"
local store = require "kwb.loop.store"
local text = require "kwb.base.text"
local tools = require "kwb.loop.tools"

local M = {}

local Session = {}
Session.__index = Session

-- new(recipe [, { store =, queue = URL, device = KIND, queue_password_file =,
-- fleet_key_file = }]) -> the loop's state for one recipe; with a queue, its
-- candidates are measured by the fleet's workers of the recipe's backend
-- (kwb.runners.queue), on their device kind.
function M.new(recipe, opts)
  opts = opts or {}
  local h = measure.harness(recipe)
  local s = setmetatable({ recipe = recipe, problem = recipe.problem, harness = h, backend = h.backend,
                           standings = standings.new(), ids = {} }, Session)
  s.store = opts.store or store.open()
  -- a fleet on other hosts (kwb.runners.queue) measures on its device kind, else this machine's device
  local device
  if opts.queue then
    if not recipe.returned_by then error("a queue's workers load the recipe's file: run a recipe a file returns", 0) end
    s.fleet_opts = { url = opts.queue, backend = recipe.backend, device = opts.device,
                     password_file = opts.queue_password_file, fleet_key_file = opts.fleet_key_file }
    s.pool = require("kwb.runners.queue_pool").new(s.fleet_opts)
    device = s.pool.kind
  else
    device = s.backend.device()
  end
  -- the evaluation context: what besides the candidate decides a result
  s.ctx = s.store:recipe_context(recipe, device)
  s.template_source = recipe.template and text.code(assert(files.read_file(recipe.template)))
  -- (each evaluation numbered past every stored one: a count would repeat a number once a
  -- candidate was evaluated again, by try, --retime or a best still due)
  s.seq = 0
  for _, r in ipairs(s.store:results(s.ctx)) do s.seq = math.max(s.seq, r.seq or 0) end
  return s
end

-- candidate(proposal [, origin]) -> a candidate with its id (kwb.loop.candidate).
function Session:candidate(prop, origin)
  return candidate.make(self, prop, origin)
end

-- Is res a best still due its put-off sanitizer run (kwb.loop.sanitizer), outside
-- that run while it is unsettled? Then it counts nowhere: not known, not noted.
local function due_elsewhere(self, res)
  return res.sanitize_due and not (self.putoff and self.putoff:holds(res.id))
end
Session.due_elsewhere = due_elsewhere

-- The stored result of a candidate under this session's context, or nil
-- (also for a best still due its sanitizer run elsewhere: evaluated again).
function Session:known(cand)
  local res = self.store:known(self.ctx, cand.id)
  if res and due_elsewhere(self, res) then return nil end
  return res
end

-- The fleet's pool (kwb.runners.queue) when a queue's workers measure, else nil.
function Session:fleet()
  return self.pool and self.pool.remote and self.pool or nil
end

-- ceilings([fresh]) -> the device's ceilings: an earlier run's of this
-- device kind (kwb.loop.ceilings; ceilings_from names it), else measured
-- now and kept. fresh: measured now whatever is kept (ceilings_from cleared).
function Session:ceilings(fresh)
  if self._ceilings and not fresh then return self._ceilings end
  if not fresh then
    self._ceilings, self.ceilings_from = kept_ceilings.kept(self)
    if self._ceilings then return self._ceilings end
  end
  self.ceilings_from = nil
  local t0 = core.now()
  if self:fleet() then   -- the fleet's device, measured by one of its workers
    self._ceilings = self.pool:ceilings(files.absolute(self.recipe.returned_by))
  else
    local lock <close> = self.pool and self.pool:device_lock() or nil   -- no worker times meanwhile
    self._ceilings = self.backend.ceilings(self.recipe.ceilings, require("kwb.measure.ceilings").work(self.recipe))
    self.ceilings_s = (self.ceilings_s or 0) + (core.now() - t0)   -- (a run's summary: stages.ceilings)
  end
  kept_ceilings.keep(self, self._ceilings, core.now() - t0)
  return self._ceilings
end

-- ---- workers ------------------------------------------------------------

-- The pool this session's candidates run in, started on first use: a recipe
-- that a file returns is measured in workers (the file is what they load);
-- one built in a script or the REPL, in this process.
function Session:workers()
  if self.pool ~= nil then return self.pool or nil end
  if self.fleet_opts then   -- a fleet's session stays one (its results are keyed by the fleet's device)
    local p = require("kwb.runners.queue_pool").new(self.fleet_opts)
    if p.kind ~= self.ctx.device then
      p:close()
      error(string.format("the queue's workers are of %s now, not %s as when the session began", p.kind,
                          self.ctx.device), 0)
    end
    self.pool = p
    return p
  end
  if not self.recipe.returned_by then self.pool = false; return nil end
  local n, devices = self.n_workers, nil
  if self.recipe.backend == "cuda" then   -- one worker per GPU unless --workers says more
    devices = require("kwb.cuda").device_count()
    if not devices or devices < 1 then error("the cuda backend needs a GPU: the driver sees none", 0) end
    n = n or devices
  end
  self.pool = require("kwb.runners.workers").pool { backend = self.recipe.backend, n = n or 1, devices = devices,
                                            deny = self.recipe.model and require("kwb.model").key_names(self.recipe.model) }
  -- every worker loads the recipe and builds the reference now, side by side
  local file = files.absolute(self.recipe.returned_by)
  for _ = 1, self.pool.n do
    self.pool:submit("kwb.worker.task.prepare", { file }, { limit = measure.build_limit, what = "loading the recipe" })
  end
  return self.pool
end

function Session:close_workers()
  if self.pool then self.pool:close() end
  self.pool = nil
end

-- ---- evaluation ---------------------------------------------------------

-- submit(cand [, { start = true, full = true, plant = true }]) -> pending: the candidate
-- handed to a worker, or measured here when the session has no pool. While the
-- run's start kernel or its baseline is due (start_due, baseline_due), it goes
-- along as the candidate's companion, timed in turns beside it (complete takes
-- their figures: kwb.loop.start). A plant (the judge's self-test,
-- kwb.loop.selftest) takes no number of the context's (seq 0), no companion,
-- and is never taken as a duplicate.
function Session:submit(cand, opts)
  opts = opts or {}
  local recipe = self.recipe
  local seq = opts.plant and 0 or self.seq + 1
  self.seq = opts.plant and self.seq or seq
  local res = result.new(cand, seq, rng.seed_of(self.run_seed or recipe.seed or 0, cand.id, seq))
  local pending = { cand = cand, res = res, opts = opts, t0 = core.now() }
  local companions
  companions, pending.companions = start_figures.companions(self, cand, opts)
  if cand.no_code then   -- a model's reply with no kernel: nothing to build
    res.outcome, res.reason = "no-code", cand.no_code
    return pending
  end
  if cand.too_big then   -- over budget.source_bytes (kwb.loop.candidate): never built, never sent
    res.outcome, res.reason = "compile-error", cand.too_big
    return pending
  end
  -- the recipe's settings as they are now (the REPL may change them); the
  -- start kernel's checks count against the run's minutes
  -- (a candidate asked for by name, try or --retime, and the start kernel are measured whatever code they build to)
  local codes = not (opts.start or opts.full or opts.plant) and codes_of.measured(self, cand.id) or nil
  local function request()
    return measure.request(recipe, { run_seed = self.run_seed, best_time = self.standings.best_time, start = opts.start,
                                     ends_at = opts.start and self.ends_at or nil, race = not opts.full and nil,
                                     codes = codes, plant = opts.plant })
  end
  local pool = self:workers()
  if not pool then
    self.harness:take(request())
    self.harness:measure(cand, res, { start = opts.start, full = opts.full, companions = companions })
    return pending
  end
  local args = { { recipe = files.absolute(recipe.returned_by), cand = candidate.for_worker(cand), seed = tostring(res.seed),
                   companions = companions } }
  pending.send = function()
    -- (the request made again on each sending: the run's end as the seconds
    -- left then, not this host's monotonic time, which a fleet's worker would
    -- read on another clock: kwb.worker.task)
    args[1].req = request()
    return pool:submit("kwb.worker.task.measure", args, { limit = measure.build_limit, what = "the worker's start" })
  end
  pending.task = pending.send()
  return pending
end

-- prebuild(cands): the backend starts compiling candidates about to be
-- submitted, in the background (where its adapter can: cuda), so that their
-- builds are done when a worker gets them. A failure to start is no error:
-- the worker's own build then compiles and reports as always.
function Session:prebuild(cands)
  local b = self.backend
  if not b.prebuild or #cands == 0 then return false end
  return pcall(b.prebuild, cands, self.recipe) and true or false
end

-- prebuilds_settle(limit): waits up to limit seconds for the backend's builds
-- ahead to finish (the adapter's prebuild_wait); true when none is running.
function Session:prebuilds_settle(limit)
  local b = self.backend
  if not b.prebuild_wait then return true end
  return b.prebuild_wait(limit)
end

-- build(cand) -> { outcome =, reason =, log =, rule =, line = } (outcome nil:
-- it built): the rules and the compiler alone, in a worker when the session
-- has a pool (the agent strategy's compile tool).
function Session:build(cand)
  if cand.too_big then return { outcome = "compile-error", reason = cand.too_big } end
  local pool = self:workers()
  if not pool then
    local res = { seconds = {}, shapes = {} }
    self.harness:build(cand, res)
    return res
  end
  local answer = pool:wait(pool:submit("kwb.worker.task.build", { {
    recipe = files.absolute(self.recipe.returned_by),
    cand = candidate.for_worker(cand),
  } }, { limit = measure.build_limit, what = "building a draft" }))
  if answer.ok then return answer.value end
  local outcome = ({ timeout = "timeout", ["too-large"] = "compile-error" })[answer.code] or "crashed"
  return { outcome = outcome, reason = answer.reason }
end

-- note_times(res): a verified result into the standings (kwb.loop.standings):
-- its per-shape times for the race bars, and the shapes it wins where it may
-- be named a winner (kwb.base.outcomes.may_be_best; a start kernel only this
-- recipe's own). A best still due its put-off run elsewhere counts nowhere.
function Session:note_times(res)
  if res.outcome ~= "accepted" and res.outcome ~= "slower" and res.outcome ~= "start" then return end
  if due_elsewhere(self, res) then return end
  -- (a start kernel only where it is this recipe's own: another's was never sanitized)
  local named = outcomes.may_be_best(res, self:sanitizing())
                and not (res.outcome == "start" and self.start and res.id ~= self.start.id)
  self.standings:note(res, named)
end

-- collect(pending) -> result: its measurement (from the worker), not yet
-- judged or recorded (a plant's is only that: kwb.loop.selftest).
function Session:collect(pending)
  local res = pending.res
  if pending.task then
    local answer = self.pool:wait(pending.task)
    -- SIGKILL from outside (kwb's own kills are timeouts; the rules leave a
    -- candidate no way to send one): not the candidate's doing, so once more
    if not answer.ok and answer.code == "crashed" and answer.signal == "SIGKILL" then
      res.again = answer.reason
      answer = self.pool:wait(pending.send())
    end
    result.take(res, answer)
  end
  return res
end

-- complete(pending) -> result: its measurement (from the worker), judged,
-- recorded in the cache and noted (per-shape bests, the best).
function Session:complete(pending)
  local res = self:collect(pending)
  if pending.companions then start_figures.take(self, pending) end
  if res.outcome == "duplicate" then
    local of = codes_of.original(self, res)
    -- (its original gone since: measured after all, its digest no longer named)
    if not of then
      self.codes[res.code] = nil
      return self:complete(self:submit(pending.cand, pending.opts))
    end
    result.duplicate(res, of)
  end
  local start = pending.opts.start
  -- a candidate measured again (try, --retime) that is the best is judged against the start kernel
  local best = self.best
  if best and best.id == res.id then best = self.start end
  local measured = res.outcome == nil
  local j = { ceilings = measured and self:ceilings() or nil, start = self.start, best = best, is_start = start }
  judge.judge(self.recipe, res, j)
  -- (under the floor of ceilings an earlier run measured: they may have been
  -- measured low on a loaded machine; this run measures them again and
  -- judges the candidate by those before it calls it impossible)
  if measured and res.outcome == "impossible" and self.ceilings_from then
    res.outcome, res.reason = nil, nil
    j.ceilings = self:ceilings(true)
    judge.judge(self.recipe, res, j)
  end
  local san = self:sanitizing()
  local p = self.putoff
  -- (the same code sanitized here before: measured again by try or --retime, the mark stays)
  local prior = san and (res.outcome == "accepted" or res.outcome == "slower") and self.store:known(self.ctx, res.id)
  if prior and prior.outcome ~= "start" and outcomes.may_be_best(prior, true) then res.sanitized = true end
  if p and san == "best" and (res.outcome == "accepted" or res.outcome == "slower") then
    p:hold(pending.cand, res)   -- (put off to the run's end: its settle sanitizes the best, or judges these again)
  elseif res.sanitized then   -- (kept: nothing to run)
  elseif res.outcome == "accepted" and san or res.outcome == "slower" and san == "all" then
    self:sanitize(pending.cand, res)
  end
  res.seconds.total = core.now() - pending.t0
  self.store:record(self.ctx, pending.cand, res, self.run_record)
  codes_of.note(self, res)
  res.run = self.run_record and self.run_record.id   -- (as kwb.loop.store's known gives it)
  self:note_times(res)
  if res.outcome == "accepted" then
    self.best = res
    -- the model reads the best's profile (model.profile): ncu on it now; a
    -- profile that fails is said in the result, never the candidate's outcome
    local m = self.recipe.model
    if m and m.profile and self.recipe.backend == "cuda" then
      local ok, err = pcall(self.profile, self, res.id)
      if not ok then res.profile_error = tostring(err) end
    end
  end
  return res
end

-- retime_start(), time_baseline_alone(): the start kernel's figures, and
-- the baseline's, timed at a run's end where no candidate took them along
-- (kwb.loop.start)
function Session:retime_start() return start_figures.retime(self) end
function Session:time_baseline_alone() return start_figures.baseline_alone(self) end

-- take_start_again() -> the start kernel's result timed again in this run
-- since the last call (beside a candidate, retime_start), once, or nil;
-- take_baseline_again() -> the run's baseline, once timed or failed in
-- its turns since the last call (kwb.loop.start), or nil
function Session:take_start_again()
  local r = self.start_again
  self.start_again = nil
  return r
end
function Session:take_baseline_again()
  local b = self.baseline_again
  self.baseline_again = nil
  return b
end

-- put_off() -> a PutOff (kwb.loop.sanitizer): compute-sanitizer ("best")
-- put off to the run's end for a strategy that reads no results (grid,
-- list), so the best alone has it. The run that asks owns it: it settles it
-- at its end, or abandons it after an error.
function Session:put_off()
  self.putoff = sanitizer.put_off(self)
  return self.putoff
end

-- sanitize_winners(by_id [, on_change]) -> changes: each shape's winner
-- sanitized where it never was (kwb.loop.sanitizer's winners).
function Session:sanitize_winners(by_id, on_change)
  return sanitizer.winners(self, by_id, on_change)
end

-- recount(): the per-shape best times (racing) and winners again from the
-- cache, without an unsafe result or a best still due its sanitizer run.
function Session:recount()
  self.standings:reset()
  self:note_times(self.start)
  for _, r in ipairs(self.store:results(self.ctx)) do self:note_times(r) end
end

-- sanitizing() -> the recipe's sanitize: "best", "all" or false (kwb.loop.store.sanitizing).
function Session:sanitizing() return store.sanitizing(self.recipe) end

-- sanitize(cand, res): compute-sanitizer on the candidate (kwb.loop.tools),
-- in a worker when the session has a pool; a finding makes it "unsafe".
function Session:sanitize(cand, res) return tools.sanitize(self, cand, res) end

-- profile(id [, shape [, csv]]) -> ncu's profile of a cached candidate (kwb.loop.tools)
function Session:profile(prefix, key, csv) return tools.profile(self, prefix, key, csv) end

-- evaluate(cand [, { start = true }]) -> the recorded result.
-- The start kernel's own code (kwb try, --retime) is measured as the start
-- kernel again, judged "start", and becomes the session's start: judged as
-- a candidate against itself it would be stored "slower", and no later run
-- could take it as its start.
function Session:evaluate(cand, opts)
  local again = self.start and cand.id == self.start.id and not (opts and opts.start)
  if again then opts = { start = true } end
  local res = self:complete(self:submit(cand, opts))
  if again and res.outcome == "start" then
    if self.best == self.start then self.best = res end
    self.start = res
  end
  return res
end

-- ---- a run's calls (kwb.loop.run) ------------------------------------------

-- begin_run { seed =, workers =, settings =, recipe_file =, source = } ->
-- the run's record: its seed (the inputs' seeds derive from it), the number
-- of workers (a pool of another size closes), the record begun in the
-- cache, which the results it records name.
function Session:begin_run(o)
  if o.workers then
    self:close_workers()
    self.n_workers = o.workers
  end
  self.run_seed = o.seed
  local settings = o.settings
  settings.device, settings.shapes = self.ctx.device, self.ctx.shapes
  self.run_record = self.store:begin_run { recipe = o.recipe_file, source = o.source, settings = settings }
  return self.run_record
end

-- note_baseline(baseline): the run's baseline kept with its record (kwb report reads it)
function Session:note_baseline(bl)
  self.store:note_baseline(self.run_record, bl, self.recipe)
end

-- end_run(summary): the run's record closed with what it counted
function Session:end_run(sm)
  self.store:end_run(self.run_record, sm)
end

-- history() -> the stored results of this session's context, oldest first
function Session:history() return self.store:results(self.ctx) end

-- keep_transcript(t) -> id: a model's request and reply kept in the cache
-- with the run's record (kwb.loop.store's transcript)
function Session:keep_transcript(t) return self.store:transcript(t, self.run_record) end

-- builds_ahead() -> whether the backend can build candidates ahead (prebuild)
function Session:builds_ahead() return self.backend.prebuild ~= nil end

-- on_queue() -> whether this session's candidates are measured by a fleet
function Session:on_queue() return self.fleet_opts ~= nil end

-- on_idle(fn): fn() while the session waits on its workers (the model's requests move on)
function Session:on_idle(fn)
  if self.pool then self.pool.idle = fn end
end

-- stage_seconds() -> { ceilings =, sanitize = }: the seconds this session
-- spent measuring the device's ceilings and in compute-sanitizer so far
function Session:stage_seconds()
  return { ceilings = self.ceilings_s or 0, sanitize = self.sanitize_s or 0 }
end

-- take_start_changes() -> the earlier results whose outcomes finding the
-- session's best changed (kwb.loop.sanitizer's known_best), once
function Session:take_start_changes()
  local c = self.start_changes or {}
  self.start_changes = nil
  return c
end

-- within(ends_at, fn, ...) -> fn(...) with the run's end at ends_at for the
-- measurements it makes (the start kernel's checks and the baseline count
-- against the run's minutes), and no end after, whatever fn does
function Session:within(ends_at, fn, ...)
  self.ends_at = ends_at
  local _ <close> = setmetatable({}, { __close = function() self.ends_at = nil end })
  return fn(...)
end

-- The start kernel: known from the cache, or evaluated now. Raises when it
-- fails: every score is relative to it. Returns its result and `fresh`:
-- true when evaluated now, false when the cache knew it, nil when this
-- session had it already.
function Session:ensure_start()
  if self.start then return self.start, nil end
  local cand = self:candidate(self.recipe.start, "start")
  local res = self:known(cand)
  local fresh = false
  -- (a stored result of its code that is not "start": measured as a candidate
  -- by an older build's --retime; it is measured again as the start)
  if res and res.outcome ~= "start" then res = nil end
  if not res then
    res = self:evaluate(cand, { start = true })
    fresh = true
  end
  if res.outcome ~= "start" then
    error(string.format("the start kernel %s fails: %s: %s", cand.name, res.outcome, res.reason or "?"), 0)
  end
  self.start = res
  self.best = res
  -- what earlier runs found; the best of them one that may be named a best
  -- where the recipe sanitizes (kwb.loop.sanitizer's known_best)
  local results = self.store:results(self.ctx)
  for _, r in ipairs(results) do self:note_times(r) end
  self.start_changes = sanitizer.known_best(self, results)
  return res, fresh
end

return M
