-- kwb/timed.lua: the timed runs of a sandboxed kernel (the host backend's
-- candidates), one call at a time. Before every run the inputs are drawn
-- afresh and the outputs poisoned, outside the timed region, so no run can
-- reuse an earlier one's work; after every run the buffers' redzones are
-- checked; `verify_runs` runs at places drawn when the warm-up ends (the
-- kernel cannot see which), those the samples ended before run after them,
-- and one run more, are verified against the reference for their own inputs. A run's time is the sandbox's
-- CPU time for that call, its waking and answering included (docs/perf.md
-- gives that cost: what it adds to every kernel's time, never takes away).
local core = require "kwb.core"
local inputs = require "kwb.inputs"
local rng = require "kwb.rng"
local verify = require "kwb.verify"

local M = {}

-- Timed runs verified against the reference, besides the one after the last.
M.verify_runs = 4

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
  end
  return string.format("its sandbox %s during %s at %s", tostring(why), what, key)
end

-- shape(h, kernel, b, t, seed) -> stats | nil, message, outcome ("wrong",
-- "crashed", "forbidden", "timeout"). t: the recipe's timing (warmup,
-- warmup_min, min_samples, max_samples, cap, target, verify_runs); seed: the
-- candidate's.
function M.shape(h, kernel, b, t, seed)
  local backend = h.backend
  local runs = 0
  local function run(check, what)
    runs = runs + 1
    inputs.fresh(h, b, seed, "timed " .. runs)
    local ok, secs, outcome = backend.call(kernel, b, b.args, h.timeout)
    if not ok then return nil, M.failure(secs, outcome, what, b.key, h.timeout), outcome or "crashed" end
    if h.timeout and secs > h.timeout then
      return nil, string.format("one call took %.2f s at %s (the timeout is %g s)", secs, b.key, h.timeout), "timeout"
    end
    if check then inputs.expect(h, b) end
    local out, why = verify.check(h.problem, backend, b, what, false, not check)
    if out then return nil, why, out end
    return secs
  end
  local warm_s, warm_min = t.warmup or 0.05, t.warmup_min or 3
  local t0 = core.now()
  local warm = 0
  while warm < warm_min or core.now() - t0 < warm_s do
    local s, why, out = run(false, "a warm-up run")
    if not s then return nil, why, out end
    warm = warm + 1
    if warm >= 100000 then break end
  end
  local min_n, max_n, cap, target = t.min_samples or 10, t.max_samples or 10000, t.cap or 1, t.target or 0.005
  -- where the verified runs fall: among as many samples as the cap will
  -- likely allow at the warm-up's pace
  local pace = (core.now() - t0) / math.max(warm, 1)
  local expect_n = math.max(min_n, math.min(max_n, math.floor(cap / math.max(pace, 1e-9))))
  local draw = rng.new(rng.seed_of(seed, b.key, "which timed runs are verified"))
  local checked = {}
  for _ = 1, math.min(t.verify_runs or M.verify_runs, expect_n) do checked[draw(expect_n)] = true end
  local samples, capped, verified = {}, false, 0
  local start, next_check = core.now(), min_n
  while true do
    local n = #samples + 1
    if checked[n] then verified = verified + 1 end
    local s, why, out = run(checked[n], "timed run " .. n)
    if not s then return nil, why, out end
    samples[n] = s
    if n >= max_n then capped = true; break end
    if n >= min_n and core.now() - start >= cap then capped = true; break end
    if n >= next_check then
      if core.stats(samples, target).converged then break end
      next_check = n + math.max(n // 10, 1)
    end
  end
  -- the verified runs the samples ended before, and the one after them: the
  -- kernel cannot tell these from the timed runs either
  for _ = verified, math.min(t.verify_runs or M.verify_runs, expect_n) do
    local last, why, out = run(true, "a run after the timed runs")
    if not last then return nil, why, out end
  end
  local st = core.stats(samples, target)
  st.capped, st.warmup, st.batch, st.converged = capped, warm, 1, nil
  return st
end

return M
