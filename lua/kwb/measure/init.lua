-- kwb/measure/init.lua: build, verify and time one candidate; the stage that runs
-- candidate code. A harness holds what the measurements of one recipe share:
-- its backend adapter, the reference, each shape's buffers. It runs in a
-- worker process (kwb.worker.task) or, for a recipe no file returns, in the
-- main process; either way a session gets back the measured part of a
-- result and judges it (kwb.loop.judge).
--
--   build    the backend's rule views and compiler (kwb.measure.backends)
--   verify   every shape twice: fresh inputs, poisoned outputs, input
--            checksums, the second run with other inputs in the same buffers
--   time     every shape, raced against the best time known there; the
--            timed runs' outputs are checked too
local core = require "kwb.core"
local backend = require "kwb.measure.backends"
local inputs = require "kwb.measure.inputs"
local timed = require "kwb.measure.timed"
local verify = require "kwb.measure.verify"
local channel = require "kwb.base.channel"

local M = {}

-- A fully timed shape whose samples spread more than this is timed again;
-- still over it, it is `noisy`. The spread here is the robust one, p10 to p90
-- over 2.563 medians (the standard deviation over the mean for normal
-- samples), so a few preempted runs do not make a steady shape noisy.
M.noisy_spread = 0.10

local function robust_spread(st)
  return st.median > 0 and (st.p90 - st.p10) / (2.563 * st.median) or 0
end
M.robust_spread = robust_spread

-- How long a build (rules, preprocessor, compiler) may take in a worker.
M.build_limit = 120
-- How long the harness's own work between two candidate calls may take.
M.harness_limit = 600

local Harness = {}
Harness.__index = Harness

-- harness(recipe) -> a harness for the recipe's problem on its backend.
function M.harness(recipe)
  -- (its limits too, for the measure stage's other modules: kwb.measure.rounds)
  return setmetatable({ recipe = recipe, problem = recipe.problem, backend = backend.load(recipe.backend),
                        build_limit = M.build_limit, harness_limit = M.harness_limit,
                        benches = {}, fixed = {}, fixed_done = {}, best_time = {},
                        timing = recipe.timing, race = recipe.race, timeout = recipe.budget.timeout }, Harness)
end

-- ---- a measurement's request and its result --------------------------------

-- request(recipe [, o]) -> what besides the candidate decides how it is
-- measured, as plain data (it crosses to a worker as it is): { timing, race,
-- timeout, best_time = { [shape] = seconds } (racing reads them), run_seed =
-- "decimal", start = bool, time_left = seconds to the run's end, codes = {
-- digests } }. The start kernel's and a baseline's checks count against the
-- run's minutes: time_left is a duration, since a worker's clock may be
-- another host's. codes: the digests of code measured already (a candidate
-- that builds to one of them is "duplicate", not measured again).
-- o: { run_seed =, best_time =, start =, ends_at = (this process's
-- monotonic time), race = false (a baseline: never raced), codes =, plant = true (a
-- planted candidate of the judge's self-test, kwb.loop.selftest: the check
-- that the problem itself tells computing from not computing is left to the
-- candidates after it, so the plant's own verdict is what it gets) }.
function M.request(recipe, o)
  o = o or {}
  local best = {}
  for k, v in pairs(o.best_time or {}) do best[k] = v end
  local race = recipe.race
  if o.race == false then race = false end
  return { timing = recipe.timing, race = race, timeout = recipe.budget.timeout, best_time = best,
           run_seed = tostring(o.run_seed or recipe.seed or 0), start = o.start or false,
           time_left = o.ends_at and math.max(0, o.ends_at - core.now()) or nil, codes = o.codes,
           plant = o.plant or nil }
end

-- take(req): the harness's settings for its next measurements, from a
-- request (kwb.loop.session's in-process measurements, a worker's tasks and
-- the baseline all set them here).
function Harness:take(req)
  self.timing = req.timing or self.recipe.timing
  self.race = req.race
  self.timeout = req.timeout or self.recipe.budget.timeout
  self.best_time = req.best_time or {}
  self.run_seed = math.tointeger(tonumber(req.run_seed))
  self.ends_at = req.time_left and core.now() + req.time_left or nil
  self.codes = nil
  for _, c in ipairs(req.codes or {}) do
    self.codes = self.codes or {}
    self.codes[c] = true
  end
  self.planting = req.plant or nil
end

-- What a harness writes into a result (the measured part); the rest of the
-- record, the verdict and the sanitizer's marks, is the loop's (kwb.loop.result).
-- (code: the build's digest, kwb.measure.backends' build; degenerate: a plant's,
-- kwb.measure.verify.degenerate's finding, kwb.loop.selftest)
M.measured_fields = { "outcome", "reason", "rule", "line", "log", "signal", "shapes", "seconds", "code", "companions",
                      "degenerate" }

-- blank(cand, seed) -> a result for a harness to fill
function M.blank(cand, seed)
  return { id = cand.id, short = cand.short, seed = seed, seconds = {}, shapes = {} }
end

-- measured(res) -> its measured part as plain data (what a worker answers)
function M.measured(res)
  local out = {}
  for _, k in ipairs(M.measured_fields) do out[k] = res[k] end
  return out
end

-- The seed of the inputs that do not come from a candidate's own seed: fixed
-- inputs, and every input of a problem with draw = "run".
function Harness:base_seed()
  return self.run_seed or self.recipe.seed or 0
end

-- The problem's trusted reference: a Lua function or the backend's kernel.
function Harness:reference()
  if self.ref then return self.ref end
  local r = self.problem.reference
  if r.lua then self.ref = { lua = r.lua }
  else self.ref = { fn = self.backend.reference(self.problem, self.recipe.dir, self.recipe.arch) } end
  return self.ref
end

function Harness:bench(sh) return inputs.bench(self, sh) end

-- Build a candidate through the backend (its rules, compiler and views).
-- Returns the callable kernel, or nil with the result filled in; given codes
-- (a set of digests), one whose built code is among them is "duplicate".
function Harness:build(cand, res, codes)
  -- (cand.fn: a baseline's own entry point, kwb.measure.baseline)
  return backend.build(self.backend, cand, self.recipe, self.problem:prototype(cand.fn), res, codes)
end

-- Inputs unchanged and outputs right? nil, or "wrong", reason.
function Harness:check(b, when, skip_inout)
  return verify.check(self.problem, self.backend, b, when, skip_inout)
end

-- constant_output(b, seed, round, per_run) -> nil, or why a constant output
-- passes at this shape (kwb.measure.verify.degenerate) on this round's draw
-- and on each of M.other_draws fresh draws: an output of one element (a
-- loss) equals a constant on any one draw, and only a constant that passes
-- fresh draws as well makes the problem one a kernel computing nothing
-- passes. (Three: a loss whose spread across draws is a few times its
-- tolerance lands inside it on one draw in ten or so; on three, one in a
-- thousand.) This round's inputs are drawn again before it returns.
M.other_draws = 3
function Harness:constant_output(b, seed, round, per_run)
  local why, found = verify.degenerate(self.problem, self.backend, b)
  if not why then return nil end
  for i = 1, M.other_draws do
    inputs.prepare(self, b, seed, "the degenerate check's draw " .. i, false)
    why, found = verify.degenerate(self.problem, self.backend, b, found)
    if not why then break end
  end
  inputs.prepare(self, b, seed, round, per_run)
  return why
end

-- round(fn, b, seed, round, timeout [, note [, per_run]]) -> nil, or outcome,
-- reason: one call of the candidate on fresh inputs (the run's, the same for
-- every candidate, where per_run), checked.
function Harness:round(fn, b, seed, round, timeout, note, per_run)
  inputs.prepare(self, b, seed, round, per_run)
  if not b.sound then   -- once per shape: a problem a constant output passes is an error of the recipe
    local why = self:constant_output(b, seed, round, per_run)
    why = why and string.format("recipe %s: %s", self.recipe.name, why)
    -- (a plant's measurement goes on, the finding in its result: the self-test says it, kwb.loop.selftest)
    if why and self.planting then self.degenerate = self.degenerate or why
    elseif why then error(why, 0) end
    b.sound = not self.planting
  end
  if b.on_call then b.on_call() end   -- a worker arms the candidate's timeout here
  local clock = self.backend.clock
  local t0 = clock()
  local ok, secs, outcome = self.backend.call(fn, b, b.args, timeout)
  local dt = type(secs) == "number" and secs or clock() - t0
  if not ok then
    if not outcome then return "crashed", string.format("the call failed at %s: %s", b.key, tostring(secs)) end
    local what = (round == 1 and "the first run" or "the second run") .. (note or "")
    return outcome, timed.failure(secs, outcome, what, b.key, timeout)
  end
  if timeout and dt > timeout then
    return "timeout", string.format("one call took %.2f s at %s (the timeout is %g s)", dt, b.key, timeout)
  end
  local out, why = self:check(b, (round == 1 and "the first run" or "the second run, other inputs in the same buffers") .. (note or ""))
  inputs.settle(self, b)
  return out, why
end

-- Time one shape: raced against the best time known there unless full. The
-- "out" buffers go to the backend, which may poison them before every timed
-- run (the CUDA backend does), so an early-returning kernel shows as wrong.
function Harness:time_shape(fn, b, full)
  local t = self.timing
  local outs = {}
  for _, a in ipairs(self.problem.buffers) do
    if a.role == "out" then outs[#outs + 1] = b.bufs[a.name] end
  end
  local best = self.best_time[b.key]
  local time = self.backend.time
  if self.backend.fresh_timing then   -- one call at a time, fresh inputs each (kwb.measure.timed)
    time = function(k, bench, opts) return timed.shape(self, k, bench, opts, self.seed or 0) end
  end
  if self.race and not full and best then
    -- a raced first look never makes a winner (one that passes it is timed in
    -- full), so of its runs only the last is verified (kwb.measure.timed)
    local few = { warmup = t.warmup, warmup_min = t.warmup_min, min_samples = t.min_samples,
                  max_samples = t.min_samples, cap = t.cap, min_sample = t.min_sample, verify_runs = 0 }
    local st, err, out = time(fn, b, few, outs)
    if not st then return nil, err, out end
    if st.min > best * (1 + self.race) then
      st.partial = true
      return st
    end
    -- a first look that passes is timed in full: a timing of its own, under the phase's limit from now
    if self.phase_limit then channel.limit(self.phase_limit[1], self.phase_limit[2]) end
    if self.backend.fresh_timing then   -- and on, while its median's interval says it is that much slower
      local raced = setmetatable({ race_above = best * (1 + self.race) }, { __index = t })
      return time(fn, b, raced, outs)
    end
  end
  return time(fn, b, t, outs)
end

-- The timed phase of one shape may take its warm-up, its cap and a few calls
-- of the slowest the verification saw, plus a second.
local function timing_limit(t, call_s)
  local calls = (t.warmup_min or 3) + (t.min_samples or 5) + 2
  return (t.warmup or 0.05) + (t.cap or 1) + calls * math.max(call_s or 0, 1e-3) * 2 + 1
end

-- phase(seconds, what): the candidate's step now under way and its limit
-- (the worker's limit), kept so that off_the_clock can give it back.
function Harness:phase(seconds, what)
  self.phase_limit = { seconds, what }
  channel.limit(seconds, what)
end

-- off_the_clock(what, fn, ...): the harness's own work inside a candidate's
-- phase (a pool set's reference outputs, computed the first time a candidate
-- meets the set and kept): under the harness's limit, not the candidate's,
-- then the phase's limit again, from now.
function Harness:off_the_clock(what, fn, ...)
  channel.limit(M.harness_limit, what)
  local t0 = core.now()
  fn(...)
  self.reference_s = (self.reference_s or 0) + (core.now() - t0)   -- (res.seconds.reference)
  if self.phase_limit then channel.limit(self.phase_limit[1], self.phase_limit[2]) end
end

-- The start kernel's checks count against the run's budget.minutes
-- (h.ends_at, on the machine's monotonic clock): past it, the next shape is
-- not begun.
local function past_end(h, sh)
  if h.ends_at and core.now() > h.ends_at then
    return "timeout", string.format("the run's budget.minutes ran out before %s (%d timed and %d unannounced shapes "
                                    .. "to check): give fewer or smaller shapes, or more minutes", sh.key,
                                    #h.recipe.shapes, #(h.recipe.verify_shapes or {}))
  end
end

-- Verify every shape, twice, on fresh inputs, then the unannounced shapes
-- (kwb.measure.unannounced) once each: nil, or outcome, reason; and the longest call
-- seen per timed shape. (The first round, on the candidate's own inputs,
-- finds a kernel right only on inputs met before; the second, on the run's
-- inputs for the shape (the same for every candidate: their reference runs
-- once a run and is held where no candidate reaches it), other inputs in the
-- same buffers, finds state kept from the first. At the unannounced shapes,
-- never timed, kept state wins nothing, and the question is only whether
-- the kernel is right at a shape it was not told of: one call on the run's
-- inputs answers it. Timed runs are checked on inputs of their own too:
-- kwb.measure.timed.)
local function verify_all(h, fn, res)
  local call_s = {}
  local function verify(sh, note)
    local b = h:bench(sh)
    for round = 1, note and 1 or 2 do
      local what = string.format("%s at %s", round == 1 and "the first run" or "the second run", sh.key)
      channel.limit(M.harness_limit, "the harness's inputs for " .. what)
      b.on_call = function() h:phase(h.timeout, what) end   -- (off_the_clock gives it back after a reference)
      local t0 = core.now()
      local out, why = h:round(fn, b, res.seed, round, h.timeout, note, note ~= nil or round == 2)
      if not note then call_s[sh.key] = math.max(call_s[sh.key] or 0, core.now() - t0) end
      b.on_call = nil
      if out then return out, why end
    end
  end
  for _, sh in ipairs(h.recipe.shapes) do
    local out, why = past_end(h, sh)
    if not out then out, why = verify(sh) end
    if out then return out, why, call_s end
  end
  -- (the unannounced shapes are the checks' own work: their time kept apart, res.seconds.unannounced)
  local tu, out, why = core.now(), nil, nil
  for _, sh in ipairs(h.recipe.verify_shapes or {}) do
    out, why = past_end(h, sh)
    if not out then out, why = verify(sh, "; a shape verified but not timed") end
    if out then break end
  end
  if #(h.recipe.verify_shapes or {}) > 0 then res.seconds.unannounced = core.now() - tu end
  return out, why, call_s
end

-- A shape timed in turns with the companions (the start kernel and the
-- recipe's baseline while a run has them due: kwb.loop.start), A B C A B C
-- ... (kwb.measure.rounds), until each one's turn times meet the stop rule
-- (their median's interval within the target) or the cap for all of them:
-- each one's figures from its turn times (comp.shapes). A companion that
-- fails is set aside (comp.error) and the others are timed again without
-- it. -> the candidate's figures | nil, why, outcome (the candidate's
-- failure) | nil (no companion left: the candidate is timed alone).
local function time_beside(h, fn, res, comps, sh)
  local rounds = require "kwb.measure.rounds"
  local t = h.timing
  local target = t.target or 0.01
  while true do
    local live, kernels = {}, { { fn = fn, seed = res.seed } }
    for _, c in ipairs(comps) do
      if c.fn and not c.error then
        live[#live + 1] = c
        kernels[#kernels + 1] = { fn = c.fn, seed = c.seed }
      end
    end
    if #live == 0 then return nil end
    local function settled(times)
      for i = 1, #kernels do
        if not core.stats(times[i][sh.key], target).converged then return false end
      end
      return true
    end
    local got, why, out, which = rounds.time(h, kernels, { shapes = { sh }, seconds = #kernels * (t.cap or 1),
                                                           target = target, done = settled,
                                                           max_rounds = math.max(t.max_samples or 0, rounds.min_rounds) })
    h.seed = res.seed
    if got then
      for i, c in ipairs(live) do c.shapes[sh.key] = rounds.figures(got.times[i + 1][sh.key], target) end
      return rounds.figures(got.times[1][sh.key], target)
    end
    if which == 1 then return nil, why, out end
    live[which - 1].error = string.format("%s: %s", out or "crashed", why or "?")
  end
end

-- The candidate's calls: verify every shape, then (unless opts.checks_only:
-- a baseline's checks, kwb.measure.baseline) time every shape, in turns with
-- opts.companions where they are given (the start kernel and the recipe's
-- baseline timed again beside a run's first timed candidate; their figures,
-- or why not, are res.companions); its sandbox (where it has one) ends
-- here, with its last call.
function Harness:evaluate(fn, res, opts)
  local mt = getmetatable(fn)   -- a sandbox ends with the measurement
  local _k <close> = type(mt) == "table" and mt.__close and fn or nil
  local tv = core.now()
  local out, why, call_s = verify_all(self, fn, res)
  res.seconds.verify = core.now() - tv
  if out then
    res.outcome, res.reason = out, why
    if out == "crashed" then res.signal = (why or ""):match("died of (SIG%u+)") end
    return res
  end
  if opts.checks_only then return res end
  local tt = core.now()
  self.calls_s = 0   -- (kwb.measure.timed adds its calls' wall time: res.seconds.calls)
  self.reference_s = 0   -- (and off_the_clock the harness's own work: res.seconds.reference)
  for _, sh in ipairs(self.recipe.shapes) do
    out, why = past_end(self, sh)
    if out then res.outcome, res.reason = out, why; break end
    local b = self:bench(sh)
    self:phase(timing_limit(self.timing, call_s[sh.key]), "timing at " .. sh.key)
    local st, terr, tout
    if opts.companions then st, terr, tout = time_beside(self, fn, res, opts.companions, sh) end
    if not st and not tout then st, terr, tout = self:time_shape(fn, b, opts.start) end
    if st and not st.partial and robust_spread(st) > M.noisy_spread then   -- timed again; still noisy, it says so
      local again
      self:phase(timing_limit(self.timing, call_s[sh.key]), "timing again at " .. sh.key)
      again, terr, tout = self:time_shape(fn, b, true)
      if again and robust_spread(again) < robust_spread(st) then st = again end
      if not again then st = nil end
      if st then st.noisy = robust_spread(st) > M.noisy_spread end
    end
    if not st and tout then res.outcome, res.reason = tout, terr; break end
    if not st then res.outcome, res.reason = "crashed", string.format("timing failed at %s: %s", sh.key, tostring(terr)); break end
    -- (kwb.measure.timed has checked its own runs: each on inputs of its own)
    if not self.backend.fresh_timing then
      channel.limit(M.harness_limit, "checking the timed outputs at " .. sh.key)
      out, why = self:check(b, "after the timed runs", true)
      if out then res.outcome, res.reason = out, why; break end
    end
    res.shapes[sh.key] = { median = st.median, min = st.min, p10 = st.p10, p90 = st.p90, spread = st.spread, n = st.n,
                           ci_lo = st.ci_lo, ci_hi = st.ci_hi, capped = st.capped, partial = st.partial or false,
                           noisy = st.noisy or nil, turns = st.turns }
    for _, e in pairs(b.errors or {}) do   -- the error of the timed runs' output (one output: its own)
      res.shapes[sh.key].max_abs, res.shapes[sh.key].rel_l2 = e.max_abs, e.rel_l2
    end
  end
  res.seconds.time = core.now() - tt
  if self.backend.fresh_timing then res.seconds.calls = self.calls_s end
  if self.reference_s > 0 then res.seconds.reference = self.reference_s end
  if res.outcome == "crashed" then res.signal = res.signal or (res.reason or ""):match("died of (SIG%u+)") end
  return res
end

-- measure(cand, res [, { start = true, full = true, companions = { kernels
-- to time in turns beside it: { role =, seed =, and a candidate's fields } },
-- checks_only = true }]) -> res: build, verify every shape,
-- time every shape (the start kernel fully, unraced); res.outcome is set for
-- a candidate that fails here or builds to code the request names as
-- measured (duplicate: never run), res.shapes holds the raw timings.
-- What the harness keeps across candidates (kwb.measure.verify.sweep) is looked at
-- before the candidate's first call and after its last: damage found before
-- is not this candidate's (a task that ended in an error left it, or
-- something outside the candidates' calls), and is put right (h.repaired
-- says what it was); damage found after is its own, `wrong` where nothing
-- else failed it first. So a worker's benches, which outlive its tasks, are
-- clean when each candidate meets them.
function Harness:measure(cand, res, opts)
  opts = opts or {}
  channel.limit(M.build_limit, "the build")
  local fn = self:build(cand, res, not opts.start and self.codes or nil)
  if not fn then return res end
  -- the kernels to be timed beside it (kwb.loop.start: the start kernel, the
  -- recipe's baseline): built now, their figures res.companions
  local comps
  if opts.companions then
    comps = {}
    for i, c in ipairs(opts.companions) do
      local cres = { seconds = {}, shapes = {} }
      local cfn = self:build(c, cres)
      comps[i] = { role = c.role, seed = math.tointeger(tonumber(c.seed)) or 0, shapes = {}, fn = cfn,
                   error = not cfn and string.format("%s: %s", cres.outcome or "compile-error", cres.reason or "?") or nil }
    end
    opts = setmetatable({ companions = comps }, { __index = opts })
  end
  local _kc <close> = comps and setmetatable({}, { __close = function()   -- (their sandboxes end with the measurement)
    for _, c in ipairs(comps) do
      local mt = getmetatable(c.fn)
      if type(mt) == "table" and mt.__close then mt.__close(c.fn) end
    end
  end }) or nil
  self.seed = res.seed
  -- the candidate runs on the device only while no other worker does: the
  -- next candidates build meanwhile, and no run disturbs another's timing
  channel.limit(nil, "waiting for the device")
  local locked = channel.serving() and core.worker_lock(true)
  local _ <close> = setmetatable({}, { __close = function() if locked then core.worker_lock(false) end end })
  channel.limit(M.harness_limit, "checking the harness's buffers before the candidate")
  local _, before = verify.sweep(self, "found before the next candidate's first call", "an earlier task")
  if before then self.repaired = before end
  self:evaluate(fn, res, opts)
  res.degenerate, self.degenerate = self.degenerate, nil
  channel.limit(M.harness_limit, "checking the harness's buffers after the candidate")
  local out, why = verify.sweep(self, "found after its last call")
  if out and not res.outcome then res.outcome, res.reason = out, why end
  if comps then
    res.companions = {}
    for i, c in ipairs(comps) do res.companions[i] = { role = c.role, shapes = c.shapes, error = c.error } end
  end
  return res
end

return M
