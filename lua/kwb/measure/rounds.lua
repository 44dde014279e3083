-- kwb/measure/rounds.lua: kernels timed in turns, A B C A B C ..., at each
-- shape, so that whatever the machine does meanwhile (another job's load, the
-- clock's frequency, the caches) weighs on all of them alike. A turn is a
-- short timing of one kernel (a warm-up call, `samples` timed runs on fresh
-- inputs drawn for that turn alone, each of them verified, kwb.measure.timed;
-- on a backend that verifies none of its timed runs, only one run after
-- them; on a backend that times otherwise, one verified call on fresh
-- inputs, its timer, and its outputs checked); the turn's time is the
-- median of its runs. A comparison of two kernels at a shape is the ratio of
-- their times turn by turn, round by round: its median and the 95%
-- confidence interval of that median (kwb_stats, core.stats, as every
-- other interval of kwb's). It is decided once the interval lies on one side
-- of 1, or within the target of its median (the two are equal to within
-- it), after at least min_rounds rounds; a precise comparison (a speed-up
-- over the start kernel, the figure a run reports) only the latter.
--
-- The final round of a run (kwb.loop.certify) and the start kernel timed
-- beside a run's first candidate (kwb.measure) are measured so.
local channel = require "kwb.base.channel"
local core = require "kwb.core"
local inputs = require "kwb.measure.inputs"
local timed = require "kwb.measure.timed"
local verify = require "kwb.measure.verify"

local M = {}

-- No comparison is decided before this many rounds (a 95% interval of the
-- median of fewer is the whole range of them).
M.min_rounds = 6
-- The most rounds, whatever the bound in seconds.
M.max_rounds = 200
-- Timed runs in a turn.
M.samples = 3

-- ratio(a, b [, target [, precise]]) -> { median =, lo =, hi =, n =,
-- decided = } | nil: a[i] / b[i] round by round (a kernel's times over
-- another's: above 1, b is the faster), the median and its 95% interval;
-- decided as above.
function M.ratio(a, b, target, precise)
  local r = {}
  for i = 1, math.min(#a, #b) do r[i] = a[i] / b[i] end
  if #r == 0 then return nil end
  local st = core.stats(r, target or 0.01)
  local decided = #r >= M.min_rounds and (st.converged or not precise and (st.ci_lo > 1 or st.ci_hi < 1))
  return { median = st.median, lo = st.ci_lo, hi = st.ci_hi, n = #r, decided = decided and true or false }
end

-- figures(times [, target]) -> a shape's figures from a kernel's turn times
-- (each a turn's median): what a result keeps of a timed shape.
function M.figures(times, target)
  local st = core.stats(times, target or 0.01)
  return { median = st.median, min = st.min, p10 = st.p10, p90 = st.p90, spread = st.spread, n = st.n,
           ci_lo = st.ci_lo, ci_hi = st.ci_hi, capped = false, partial = false, turns = true }
end

-- all_decided(times, keys, target [, precise]) -> whether every pair of
-- kernels is decided at every shape; the pairs with kernel `precise` (the
-- start kernel's index) precisely.
function M.all_decided(times, keys, target, precise)
  for i = 1, #times do
    for j = i + 1, #times do
      for _, key in ipairs(keys) do
        local r = M.ratio(times[i][key], times[j][key], target, i == precise or j == precise)
        if not (r and r.decided) then return false end
      end
    end
  end
  return true
end

-- A kernel's own bench at a shape: its inputs, outputs and pool sets'
-- count apart from the other kernels' (named as the shape in every message,
-- kept by the harness like a batch's copies, kwb.measure.timed).
local function bench_of(h, k, sh, i)
  k.benches = k.benches or {}
  local b = k.benches[sh.key]
  if b then return b end
  b = inputs.bench(h, { shape = sh.shape, key = string.format("%s @%d", sh.key, i) })
  b.key = sh.key
  k.benches[sh.key] = b
  return b
end

-- A turn's limit in the worker: its calls (a warm-up, the timed runs, two
-- verified), each a batch at most, each within the call's timeout.
local function turn_limit(h)
  return (M.samples + 3) * timed.batch_max * (h.timeout or 10) + 10
end

-- turn(h, k, b, round) -> seconds | nil, why, outcome
local function turn(h, k, b, round)
  local t = h.timing or {}
  h.seed = k.seed
  if h.backend.fresh_timing then
    -- (every timed run verified: a turn is short and alike for every kernel,
    -- so a place drawn for its verified run is one a kernel that keeps state
    -- learns in its first turn, from the reference's pause after it, and
    -- idles elsewhere in the turns after; where the backend verifies none of
    -- its timed runs, only the one after them)
    local none = h.backend.verify_runs == 0
    local short = setmetatable({ warmup = 0, warmup_min = 1, min_samples = M.samples, max_samples = M.samples,
                                 cap = math.huge, verify_runs = none and 0 or M.samples, verify_all = not none,
                                 round = round },
                               { __index = t })
    local st, why, out = timed.shape(h, k.fn, b, short, k.seed)
    if not st then return nil, why, out end
    return st.median
  end
  local out, why = h:round(k.fn, b, k.seed + round, 1, h.timeout, " of a turn")
  if out then return nil, why, out end
  local outs = {}
  for _, a in ipairs(h.problem.buffers) do
    if a.role == "out" then outs[#outs + 1] = b.bufs[a.name] end
  end
  local st, terr = h.backend.time(k.fn, b, { warmup = 0, warmup_min = 1, min_samples = M.samples,
                                             max_samples = M.samples, cap = math.huge }, outs)
  if not st then return nil, string.format("its timing failed at %s: %s", b.key, tostring(terr)), "crashed" end
  out, why = h:check(b, "after a turn's timed runs", true)
  if out then return nil, why, out end
  return st.median
end

-- time(h, kernels, o) -> { rounds =, times = { [i] = { [shape] = { turn
-- times } } }, bound = "decided" | "seconds" | "rounds", seconds = } | nil,
-- why, outcome, i (the kernel that failed). kernels: { { fn =, seed = } };
-- o: { seconds = bound, max_rounds =, target =, precise = (a kernel's index:
-- all_decided's), shapes = (default the recipe's), done = function(times, n)
-- -> true once decided (default: every pair at every shape, all_decided) }.
function M.time(h, kernels, o)
  local shapes = o.shapes or h.recipe.shapes
  local keys, times = {}, {}
  for i, sh in ipairs(shapes) do keys[i] = sh.key end
  for i in ipairs(kernels) do
    times[i] = {}
    for _, key in ipairs(keys) do times[i][key] = {} end
  end
  local done = o.done or function(tm) return M.all_decided(tm, keys, o.target, o.precise) end
  local t0, n, bound = core.now(), 0, nil
  while true do
    n = n + 1
    for _, sh in ipairs(shapes) do
      for i, k in ipairs(kernels) do
        -- (a phase: the harness's own work inside it, a pool set's reference, gives its limit back after)
        h:phase(turn_limit(h), string.format("timing turn %d of kernel %d at %s", n, i, sh.key))
        local s, why, out = turn(h, k, bench_of(h, k, sh, i), n)
        if not s then return nil, why, out, i end
        times[i][sh.key][n] = s
      end
    end
    -- (the bound in seconds only after min_rounds: fewer make no interval)
    if n >= M.min_rounds and done(times, n) then bound = "decided"; break end
    if n >= M.min_rounds and core.now() - t0 >= (o.seconds or 3) then bound = "seconds"; break end
    if n >= (o.max_rounds or M.max_rounds) then bound = "rounds"; break end
  end
  return { rounds = n, times = times, bound = bound, seconds = core.now() - t0 }
end

-- measure(h, cands, o) -> kwb.measure.rounds.time's answer, or { error =,
-- which = i, outcome =, reason = } (kernel i's failure in a turn: its
-- outcome and reason as an evaluation records them): each candidate ({ source, name, defines, define_list, params,
-- id, short, fn = its entry point where not the problem's, seed =
-- "decimal" }) built, then all of them timed in rounds with the device to
-- themselves (the device lock) and the harness's buffers swept before and
-- after, as a measurement has them (kwb.measure). In a worker, or a
-- session's own harness.
function M.measure(h, cands, o)
  local kernels = {}
  local function close()
    for _, k in ipairs(kernels) do
      local mt = getmetatable(k.fn)
      if type(mt) == "table" and mt.__close then mt.__close(k.fn) end
    end
  end
  local _c <close> = setmetatable({}, { __close = close })
  for i, c in ipairs(cands) do
    channel.limit(h.build_limit, "building " .. (c.short or c.name or "a kernel"))
    local res = { seconds = {}, shapes = {} }
    local fn = h:build(c, res)
    if not fn then
      return { error = string.format("%s: %s", res.outcome or "compile-error", res.reason or "?"), which = i }
    end
    kernels[i] = { fn = fn, seed = math.tointeger(tonumber(c.seed)) or 0 }
  end
  channel.limit(nil, "waiting for the device")
  local locked = channel.serving() and core.worker_lock(true)
  local _ <close> = setmetatable({}, { __close = function() if locked then core.worker_lock(false) end end })
  channel.limit(h.harness_limit, "checking the harness's buffers before the rounds")
  verify.sweep(h, "found before the rounds", "an earlier task")
  local got, why, out, i = M.time(h, kernels, o)
  if not got then
    return { error = string.format("%s: %s", out or "crashed", why or "?"), which = i, outcome = out or "crashed",
             reason = why }
  end
  channel.limit(h.harness_limit, "checking the harness's buffers after the rounds")
  local bad, swept = verify.sweep(h, "found after the rounds", "a kernel of the rounds")
  if bad then return { error = string.format("%s: %s", bad, swept) } end
  return got
end

return M
