-- kwb/measure/timed.lua: the timed runs of a sandboxed kernel (the host backend's
-- candidates). Before every run the inputs are drawn afresh and the outputs
-- poisoned, outside the timed region, so no run can reuse an earlier one's
-- work; after every run the buffers' redzones are checked, and that every
-- output element was written. Calls shorter than `M.window` go in batches,
-- each call of a batch on a bench of its own (its own inputs and outputs),
-- queued at once: a sample is their mean.
-- `verify_runs` samples at places drawn when the warm-up ends (the kernel
-- cannot see which), those the samples ended before run after them, and one
-- more, are verified against the reference for their own inputs, every call
-- of them. A call's time is the sandbox's CPU time for it, its waking and
-- answering included (docs/perf.md gives that cost: what it adds to every
-- kernel's time, never takes away).
local core = require "kwb.core"
local inputs = require "kwb.measure.inputs"
local rng = require "kwb.base.rng"
local verify = require "kwb.measure.verify"

local M = {}

-- Samples verified against the reference, besides the one after the last.
M.verify_runs = 4
-- A sample lasts at least this long where a batch of calls can make it so:
-- at most batch_max calls, their benches at most batch_bytes in all.
M.window = 2e-4
M.batch_max = 16
M.batch_bytes = 64 << 20

-- failure(why, outcome, what, key, timeout) -> the reason of a call that
-- did not return: "its sandbox died of SIGSEGV (Segmentation fault) during
-- the first run at n=64", or ran past the timeout, or made a system call
-- the sandbox does not allow.
function M.failure(why, outcome, what, key, timeout)
  if outcome == "timeout" then
    return string.format("one call ran past the timeout during %s at %s (the timeout is %g s of CPU time); its sandbox "
                         .. "was killed", what, key, timeout or 0)
  elseif outcome == "forbidden" then
    return string.format("during %s at %s the candidate made a %s", what, key, tostring(why))
  elseif outcome == "wrong" then
    return string.format("during %s at %s %s", what, key, tostring(why))
  elseif not outcome then   -- a launch that failed (the CUDA backend)
    return string.format("the call failed during %s at %s: %s", what, key, tostring(why))
  end
  return string.format("its sandbox %s during %s at %s", tostring(why), what, key)
end

-- The benches of a batch of k: b itself and copies with buffers of their
-- own (kept in the harness like b), named as b in every message.
local function benches(h, b, k)
  b.copies = b.copies or { b }
  for j = #b.copies + 1, k do
    local c = inputs.bench(h, { shape = b.shape, key = b.key .. " #" .. j })
    c.key = b.key
    b.copies[j] = c
  end
  return b.copies
end

local function bench_bytes(h, b)
  local n = 0
  for _, a in ipairs(h.problem.buffers) do
    if not a.fixed then n = n + b.bufs[a.name].bytes * (a.role == "in" and 1 or 2) end
  end
  return n
end

-- shape(h, kernel, b, t, seed) -> stats | nil, message, outcome ("wrong",
-- "crashed", "forbidden", "timeout"). t: the recipe's timing (warmup,
-- warmup_min, min_samples, max_samples, cap, target, verify_runs, and
-- race_above: a time its median is raced against, round: the turn of an
-- interleaved measurement, kwb.measure.rounds, whose inputs are drawn apart
-- from every other turn's, and verify_all: every timed run verified, none
-- after them); seed: the candidate's.
function M.shape(h, kernel, b, t, seed)
  local backend = h.backend
  local call = backend.timed_call or backend.call
  local runs, k = 0, 1
  -- a problem that draws its inputs once per run, or a backend that pools its
  -- checks, verifies timed runs on sets of a pool (kwb.measure.inputs), a different
  -- one for each verified run of the candidate at this shape (b.pools: how
  -- many it has had), then on inputs of their own once it has met them all
  -- (as many sets as one evaluation verifies runs at a shape: a first look,
  -- a full timing and a noisy one's second, each its verified samples and one)
  -- (fixed when the candidate first meets the shape, for the recipe's
  -- verify_runs: a first look verifies fewer, and a set count that changed
  -- between timings would hand the candidate a set twice)
  local verify_runs = t.verify_runs or backend.verify_runs or M.verify_runs
  if b.pools_seed ~= seed then
    local vr = h.timing and h.timing.verify_runs or backend.verify_runs or M.verify_runs
    b.pools_seed, b.pools = seed, 0
    b.pool_sets = (h.problem.draw == "run" or backend.pooled_checks) and inputs.sets(h, b, 3 * (math.max(vr, verify_runs) + 1)) or 0
    -- pool sets recur across candidates: where only the backend pools (the
    -- reference could run every time), one verified run of each candidate,
    -- at a shape drawn from its seed, is on inputs of its own, so a kernel
    -- right only on inputs it has met before is found (kwb.measure.verify)
    local shapes = h.recipe and h.recipe.shapes or {}
    b.own_first = backend.pooled_checks and h.problem.draw ~= "run" and #shapes > 0
                  and shapes[rng.seed_of(seed, "the verified run on inputs of its own") % #shapes + 1].key == b.key
  end
  local sets = b.pool_sets
  local function run(check, what)
    runs = runs + 1
    local set = benches(h, b, k)
    local pool, before = {}, {}
    for j = 1, k do
      if check and b.own_first then b.own_first = false   -- (its own inputs, the reference run for them)
      elseif check and b.pools < sets then
        pool[j] = (seed + b.pools) % sets + 1
        b.pools = b.pools + 1
      end
      inputs.fresh(h, set[j], seed, string.format("timed %s%d %d", t.round and ("round " .. t.round .. " ") or "", runs, j),
                   pool[j], check)
      if check and not pool[j] and inputs.inout(h) then
        -- its own inputs and an inout buffer, whose reference starts from the
        -- copy fresh() made: before the call (after it, the candidate could
        -- have changed that copy), held off the device where the backend holds
        inputs.expect(h, set[j])
        before[j] = true
      end
      if pool[j] and not inputs.pooled(h, set[j], pool[j]) then
        -- a set met for the first time: its expected outputs from its inputs as
        -- drawn, before any candidate code has run on them (held off the device),
        -- the harness's time rather than the candidate's
        local what = string.format("the reference on pool set %d at %s", pool[j], b.key)
        if h.off_the_clock then h:off_the_clock(what, inputs.expect, h, set[j], pool[j])
        else inputs.expect(h, set[j], pool[j]) end
      end
    end
    local ok, secs, outcome
    local c0 = core.now()
    if k == 1 then ok, secs, outcome = call(kernel, b, b.args, h.timeout)
    else ok, secs, outcome = backend.calls(kernel, { table.unpack(set, 1, k) }, h.timeout) end
    h.calls_s = (h.calls_s or 0) + (core.now() - c0)   -- the calls' wall time: the rest of a timing is its checks
    if not ok then return nil, M.failure(secs, outcome, what, b.key, h.timeout), outcome or "crashed" end
    local per = secs / k
    if h.timeout and per > h.timeout then
      return nil, string.format("one call took %.2f s at %s (the timeout is %g s)", per, b.key, h.timeout), "timeout"
    end
    for j = 1, k do
      -- (a pool set's: kept, put back; one of its own: after the input checks)
      if check and not before[j] then inputs.expect(h, set[j], pool[j], not pool[j]) end
      local out, why = verify.check(h.problem, backend, set[j], what, false, not check)
      inputs.settle(h, set[j])
      if out then return nil, why, out end
    end
    return per
  end
  local warm_s, warm_min = t.warmup or 0.05, t.warmup_min or 3
  local t0 = core.now()
  local warm, quickest = 0, math.huge
  while warm < warm_min or core.now() - t0 < warm_s do
    local s, why, out = run(false, "a warm-up run")
    if not s then return nil, why, out end
    warm, quickest = warm + 1, math.min(quickest, s)
    if warm >= 100000 then break end
  end
  if backend.calls then   -- short calls in batches, as many as make a window
    k = math.ceil(M.window / math.max(quickest, 1e-9))
    k = math.max(1, math.min(k, M.batch_max, M.batch_bytes // math.max(bench_bytes(h, b), 1)))
  end
  local min_n, max_n, cap, target = t.min_samples or 10, t.max_samples or 10000, t.cap or 1, t.target or 0.005
  -- where the verified samples fall: among as many as the cap will likely
  -- allow at the warm-up's pace
  local pace = (core.now() - t0) / math.max(warm, 1) * k
  local expect_n = math.max(min_n, math.min(max_n, math.floor(cap / math.max(pace, 1e-9))))
  local draw = rng.new(rng.seed_of(seed, b.key, "which timed runs are verified"))
  local checked = {}
  for _ = 1, math.min(verify_runs, expect_n) do checked[draw(expect_n)] = true end
  local all = t.verify_all
  local samples, capped, verified, partial = {}, false, 0, nil
  local start, next_check = core.now(), min_n
  while true do
    local n = #samples + 1
    if checked[n] then verified = verified + 1 end
    local s, why, out = run(all or checked[n], "timed run " .. n)
    if not s then return nil, why, out end
    samples[n] = s
    if n >= max_n then capped = true; break end
    if n >= min_n and core.now() - start >= cap then capped = true; break end
    if n >= next_check then
      local so_far = core.stats(samples, target)
      if so_far.converged then break end
      -- racing on: once even the low end of its median's 95% interval is
      -- past the bound, the shape stops, partial (as the first look does
      -- with its fastest sample, the low end at five samples)
      if t.race_above and so_far.ci_lo > t.race_above then partial = true; break end
      next_check = n + math.max(n // 10, 1)
    end
  end
  -- the verified samples the timing ended before, and one more: the kernel
  -- cannot tell these from the timed ones either (a timing raced out, which
  -- never makes a winner, only needs one verified run in all)
  local want = partial and 0 or math.min(verify_runs, expect_n)
  for _ = verified, all and -1 or want do
    local last, why, out = run(true, "a run after the timed runs")
    if not last then return nil, why, out end
  end
  local st = core.stats(samples, target)
  st.capped, st.warmup, st.batch, st.converged, st.partial = capped, warm, k, nil, partial
  return st
end

return M
