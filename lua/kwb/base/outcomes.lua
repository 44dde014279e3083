-- kwb/base/outcomes.lua: the one list of what an evaluation ends in.
--
-- A candidate of a run ends in exactly one outcome of the funnel, in the
-- order a candidate meets the stages that give them: the model's reply
-- (no-code: it held no usable kernel), the rules, the compiler, the built
-- code (duplicate: code measured before for this context, whose result it
-- takes), verification, the physical floor, the worker's death or overrun,
-- the sanitizers on a CUDA candidate about to become the best (unsafe), and the accept rule. The start kernel is judged like a candidate but ends
-- in "start" (verified and timed, the measure every score is relative to);
-- it is not part of any run's funnel.
local M = {}

M.funnel = { "no-code", "forbidden", "compile-error", "duplicate", "wrong", "impossible", "crashed", "timeout", "unsafe",
             "slower", "accepted" }

M.start = "start"

-- Every outcome a result may carry (the cache accepts exactly these).
M.all = { table.unpack(M.funnel) }
M.all[#M.all + 1] = M.start

-- The order progress lines and summaries print the funnel in: the results
-- that count first, then the failures from the most to the least telling.
M.display = { "accepted", "slower", "duplicate", "wrong", "unsafe", "compile-error", "forbidden", "impossible", "timeout",
              "crashed", "no-code" }

-- Shown only when some candidate ends in them (a tuner's run never ends in
-- no-code, a host run never in unsafe; most runs never repeat code).
M.quiet = { ["no-code"] = true, unsafe = true, duplicate = true }

-- Outcomes of a verified, timed kernel (its per-shape times mean something).
M.verified = { slower = true, accepted = true, start = true }

-- A duplicate is neither: no failure of its own, no times of its own (it
-- takes its original's score), no budget slot (kwb.loop.run), never a best.
M.duplicate = "duplicate"

-- The failures: a candidate that ends in one of these has no times.
M.bad = { ["no-code"] = true, forbidden = true, ["compile-error"] = true, wrong = true, impossible = true, crashed = true,
          timeout = true, unsafe = true }

local known = {}
for _, o in ipairs(M.all) do known[o] = true end

function M.known(o) return known[o] == true end

-- A fresh funnel: every outcome counted 0.
function M.counts()
  local t = {}
  for _, o in ipairs(M.funnel) do t[o] = 0 end
  return t
end

-- may_be_best(res, sanitizing) -> may this verified result (accepted,
-- slower or the start kernel; res carries outcome, sanitized, sanitize_due
-- and imported, the bundle it came in) be named a best or a shape's
-- winner, by a recipe that sanitizes (sanitizing: "best" or "all") or not?
-- The one rule, for the session, the store's readers, cache:best, kwb
-- export, kwb report and the put-off sanitizer:
-- - never a duplicate: its code is another result's, which may be named;
-- - never one still due its put-off compute-sanitizer run (sanitize_due);
-- - where the recipe sanitizes, an accepted or slower result only where the
--   tools ran on it here and found nothing (sanitized; a bundle's mark is
--   never taken), and a start kernel only where it was measured here.
function M.may_be_best(res, sanitizing)
  if res.outcome == M.duplicate or res.sanitize_due then return false end
  if not sanitizing then return true end
  if res.outcome == M.start then return not res.imported end
  return res.sanitized == true
end

return M
