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
local ids = require "kwb.base.ids"
local core = require "kwb.core"
local candidate = require "kwb.loop.candidate"
local judge = require "kwb.loop.judge"
local measure = require "kwb.measure"
local result = require "kwb.loop.result"
local rng = require "kwb.base.rng"
local sanitizer = require "kwb.loop.sanitizer"
local outcomes = require "kwb.base.outcomes"
local store = require "kwb.loop.store"

local M = {}

local Session = {}
Session.__index = Session

local function absolute(path)
  local abs = require("kwb.base.files").resolve(path)
  if abs:sub(1, 1) ~= "/" then error("cannot make " .. path .. " absolute: no working directory", 0) end
  return abs
end

-- new(recipe [, { store =, queue = URL, device = KIND, queue_password_file =,
-- fleet_key_file = }]) -> the loop's state for one recipe; with a queue, its
-- candidates are measured by the fleet's workers of the recipe's backend
-- (kwb.runners.queue), on their device kind.
function M.new(recipe, opts)
  opts = opts or {}
  local h = measure.harness(recipe)
  local s = setmetatable({ recipe = recipe, problem = recipe.problem, harness = h, backend = h.backend,
                           best_time = {}, shape_best = {}, ids = {} }, Session)
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
  s.template_source = recipe.template and assert(require("kwb.base.files").read_file(recipe.template))
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

function Session:ceilings()
  if not self._ceilings and self:fleet() then   -- the fleet's device, measured by one of its workers
    self._ceilings = self.pool:ceilings(absolute(self.recipe.returned_by))
  elseif not self._ceilings then
    local lock <close> = self.pool and self.pool:device_lock() or nil   -- no worker times meanwhile
    local t0 = core.now()
    self._ceilings = self.backend.ceilings(self.recipe.ceilings, require("kwb.measure.ceilings").work(self.recipe))
    self.ceilings_s = (self.ceilings_s or 0) + (core.now() - t0)   -- (a run's summary: stages.ceilings)
  end
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
  local file = absolute(self.recipe.returned_by)
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

-- What of a candidate a worker's task needs (plain data).
local function for_worker(cand)
  return { source = cand.source, name = cand.name, defines = cand.defines, define_list = cand.define_list,
           params = cand.params, id = cand.id, short = cand.short }
end

-- submit(cand [, { start = true }]) -> pending: the candidate handed to a
-- worker, or measured here when the session has no pool.
function Session:submit(cand, opts)
  opts = opts or {}
  local recipe = self.recipe
  self.seq = self.seq + 1
  local res = result.new(cand, self.seq, rng.seed_of(self.run_seed or recipe.seed or 0, cand.id, self.seq))
  local pending = { cand = cand, res = res, opts = opts, t0 = core.now() }
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
  local function request()
    return measure.request(recipe, { run_seed = self.run_seed, best_time = self.best_time, start = opts.start,
                                     ends_at = opts.start and self.ends_at or nil })
  end
  local pool = self:workers()
  if not pool then
    self.harness:take(request())
    self.harness:measure(cand, res, opts)
    return pending
  end
  local args = { { recipe = absolute(recipe.returned_by), cand = for_worker(cand), seed = tostring(res.seed) } }
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
    recipe = absolute(self.recipe.returned_by),
    cand = for_worker(cand),
  } }, { limit = measure.build_limit, what = "building a draft" }))
  if answer.ok then return answer.value end
  local outcome = ({ timeout = "timeout", ["too-large"] = "compile-error" })[answer.code] or "crashed"
  return { outcome = outcome, reason = answer.reason }
end

-- Remember the per-shape best times of a verified, possible result (racing
-- reads them), and which result holds each: the shape's winner, from fully
-- timed shapes only (a raced shape's few samples stand for no median) and,
-- where the recipe sanitizes, results the tools cleared (kwb.base.outcomes.may_be_best).
function Session:note_times(res)
  if res.outcome ~= "accepted" and res.outcome ~= "slower" and res.outcome ~= "start" then return end
  if due_elsewhere(self, res) then return end
  -- (a start kernel only where it is this recipe's own: another's was never sanitized)
  local cleared = outcomes.may_be_best(res, self:sanitizing())
                  and not (res.outcome == "start" and self.start and res.id ~= self.start.id)
  for key, r in pairs(res.shapes) do
    if r.median and (not self.best_time[key] or r.median < self.best_time[key]) then self.best_time[key] = r.median end
    local w = self.shape_best[key]
    if cleared and r.median and not r.partial and (not w or r.median < w.median) then
      self.shape_best[key] = { id = res.id, short = res.short, median = r.median, name = res.name,
                               params = res.params, origin = res.origin, start = res.outcome == "start" }
    end
  end
end

-- complete(pending) -> result: its measurement (from the worker), judged,
-- recorded in the cache and noted (per-shape bests, the best).
function Session:complete(pending)
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
  local start = pending.opts.start
  -- a candidate measured again (try, --retime) that is the best is judged against the start kernel
  local best = self.best
  if best and best.id == res.id then best = self.start end
  judge.judge(self.recipe, res, { ceilings = not res.outcome and self:ceilings() or nil, start = self.start,
                                  best = best, is_start = start })
  local san = self:sanitizing()
  local p = self.putoff
  -- (the same code cleared by the tools here before: measured again by try or --retime, the mark stays)
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
  self.best_time, self.shape_best = {}, {}
  self:note_times(self.start)
  for _, r in ipairs(self.store:results(self.ctx)) do self:note_times(r) end
end

-- sanitizing() -> the recipe's sanitize: "best", "all" or false (kwb.loop.store.sanitizing).
function Session:sanitizing() return store.sanitizing(self.recipe) end

-- sanitize(cand, res): compute-sanitizer on the candidate (kwb.checks.sanitize), in
-- a worker when the session has a pool; a finding makes it "unsafe".
function Session:sanitize(cand, res)
  local t0 = core.now()
  local file = self.recipe.returned_by
  local args = { recipe = file and absolute(file), cand = for_worker(cand), seed = tostring(res.seed) }
  local finding
  local pool = self:workers()
  if pool then
    if not pool.remote and not require("kwb.checks.sanitize").path() then   -- (a fleet's worker says so itself)
      error("compute-sanitizer is not installed (looked in CUDA_HOME/bin and on PATH); a recipe runs without it "
            .. "with sanitize = false", 0)
    end
    local function ask()
      return pool:wait(pool:submit("kwb.worker.task.sanitize", { args },
                                   { limit = measure.build_limit, what = "compute-sanitizer's start" }))
    end
    -- the candidate's code runs in the tools' own processes, never in this
    -- worker: the worker lost (killed from outside, the device lost) is not
    -- its doing, so once more; a second loss, or the task's own error, stops
    -- the run and is never the candidate's outcome (INTEGRITY.md property 9)
    local answer = ask()
    if not answer.ok and answer.code == "crashed" then answer = ask() end
    if not answer.ok then
      error(string.format("compute-sanitizer on candidate %s did not finish in its worker (%s): not the candidate's "
                          .. "doing, so the run stops without an outcome for it", res.short or res.id,
                          tostring(answer.reason)), 0)
    end
    finding = answer.value
  else
    finding = require("kwb.checks.sanitize").check(self.recipe, args)
  end
  -- (a tool's run killed from outside twice, or one that could not run: the run stops without an outcome for it)
  local not_its = finding.outside or finding.harness
  if not_its then error(not_its .. "; candidate " .. tostring(res.short or res.id), 0) end
  res.seconds.sanitize = core.now() - t0
  self.sanitize_s = (self.sanitize_s or 0) + res.seconds.sanitize   -- (a run's summary: stages.sanitize)
  for tool, x in pairs(finding.seconds or {}) do res.seconds["sanitize_" .. tool] = x end
  res.sanitize_stages = finding.stages   -- (each tool's run split by the job: load, build, bench, inputs, call)
  res.sanitize_skipped = finding.skipped   -- (a tool left out, and why: kwb.checks.sanitize.tools_for)
  res.sanitized = not finding.tool or nil
  if finding.tool then
    res.outcome = "unsafe"
    res.reason = string.format("compute-sanitizer %s at %s: %s", finding.tool, finding.shape, finding.report)
    res.sanitizer_log = finding.log   -- (the tool's output, for the caller: the reason keeps its first report)
  end
end

-- profile(id [, shape [, csv]]) -> the profile (kwb.checks.profile.summarise),
-- stored in the cache: ncu on a cached candidate of this recipe's problem at
-- a timed shape (default: the one where its median is longest), in a worker
-- when the session has a pool; ncu's output written to the file csv. Raises
-- naming what is wrong.
function Session:profile(prefix, key, csv)
  local recipe, cache = self.recipe, self.store.cache
  if recipe.backend ~= "cuda" then error("recipe " .. recipe.name .. ": a profile is ncu's, for the cuda backend", 0) end
  if csv then   -- (where ncu's output goes, before ncu runs: a regular file in a directory that exists)
    local fine, why = core.output_file(csv)
    if not fine then error(why, 0) end
  end
  local got, msg = cache:get(prefix)
  if not got then error(msg, 0) end
  if got.problem ~= recipe.problem:key() then
    error(string.format("candidate %s is of problem %s, not this recipe's %s", ids.short(got.id), got.problem,
                        recipe.problem:key()), 0)
  end
  local medians = {}
  for _, r in ipairs(cache:results(got.id) or {}) do   -- (times measured here: kwb.loop.store's known)
    if r.device == self.ctx.device and require("kwb.cache").as_measured(r.verify, self.ctx.trust_imported) then
      medians[r.shape] = r.timing.median
    end
  end
  if key then   -- (the variables in any order)
    local shape_set = require("kwb.problem").shape_set
    local want, known = shape_set(key), false
    for _, sh in ipairs(recipe.shapes) do
      if shape_set(sh.key) == want then key, known = sh.key, true end
    end
    if not known then
      local keys = {}
      for i, sh in ipairs(recipe.shapes) do keys[i] = sh.key end
      error(string.format("recipe %s has no timed shape %s (its shapes: %s)", recipe.name, key, table.concat(keys, ", ")), 0)
    end
  else
    for _, sh in ipairs(recipe.shapes) do
      if medians[sh.key] and (not key or medians[sh.key] > medians[key]) then key = sh.key end
    end
    key = key or recipe.shapes[#recipe.shapes].key
  end
  local cand = self:candidate({ source = got.source, defines = got.params, params = got.params, name = "profiled " .. ids.short(got.id) })
  if cand.id ~= got.id then
    error(string.format("candidate %s was built with other flags than this recipe's (here it is %s)", ids.short(got.id),
                        ids.short(cand.id)), 0)
  end
  local file = recipe.returned_by
  if not file then error("recipe " .. recipe.name .. ": a profile runs the recipe from its file, and this one has none", 0) end
  local args = { recipe = absolute(file), cand = for_worker(cand), seed = "1", shape = key }
  local answer
  local pool = self:workers()
  if pool then
    local a = pool:wait(pool:submit("kwb.worker.task.profile", { args },
                                    { limit = measure.build_limit, what = "ncu's start" }))
    if not a.ok then error("ncu did not finish in the worker: " .. tostring(a.reason), 0) end
    answer = a.value
  else
    answer = require("kwb.checks.profile").task(self.harness, args)
  end
  if csv then   -- ncu's own output, as it came
    local f, ferr = io.open(csv, "w")
    if not f then error("cannot write " .. csv .. ": " .. tostring(ferr), 0) end
    f:write(answer.log or "")
    f:close()
  end
  if not answer.parsed then
    error(tostring(answer.reason) .. (answer.log and ("\n" .. answer.log:sub(-2000)) or ""), 0)
  end
  for _, k in ipairs(answer.parsed.kernels) do   -- spills as the build reports them
    local r = (answer.resources or {})[k.name]
    if r then k.spills = (r.spill_stores or 0) + (r.spill_loads or 0) end
  end
  local p = require("kwb.checks.profile").summarise(answer.parsed, medians[key])
  p.shape, p.device, p.candidate = key, self.ctx.device, got.id
  cache:add_profile { candidate = got.id, device = self.ctx.device, shape = key, class = p.class, data = p }
  return p
end

-- evaluate(cand [, { start = true }]) -> the recorded result.
function Session:evaluate(cand, opts)
  return self:complete(self:submit(cand, opts))
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
