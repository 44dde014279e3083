-- kwb/loop/result.lua: the one record of a candidate's evaluation. It is
-- made here when a session submits the candidate, and filled in three parts:
--
--   the candidate's    id, short, origin, params, parent, rationale, name, model,
--                      transcript, cost, note; seq (the evaluation's number under
--                      its context) and seed (its inputs')
--   measured           outcome, reason, rule, line, log, signal, shapes, seconds:
--                      what a harness writes (kwb.measure.measured_fields), in
--                      this process or in a worker, whose answer crosses back as
--                      that one table (take)
--   judged             score, speedups, outcome and reason where the judge decides
--                      them (kwb.loop.judge); sanitize_due and sanitized, the
--                      compute-sanitizer's marks (kwb.loop.sanitizer), and
--                      whether it may be named a best (kwb.base.outcomes.may_be_best);
--                      or, for a duplicate, duplicate_of and the score it takes (duplicate)
--
-- kwb.loop.store records it and reads it back in the same shape.
local measure = require "kwb.measure"

local M = {}

-- new(cand, seq, seed) -> a fresh record for the candidate's evaluation
function M.new(cand, seq, seed)
  local res = measure.blank(cand, seed)
  res.origin, res.params, res.parent, res.rationale, res.name = cand.origin, cand.params, cand.parent,
                                                                cand.rationale, cand.name
  res.model, res.transcript, res.cost, res.note, res.seq = cand.model, cand.transcript, cand.cost, cand.note, seq
  return res
end

-- take(res, answer) -> res: a pool's answer folded in: the measured part,
-- or `crashed` / `timeout` with the signal and what the candidate was doing.
-- A failure of kwb's own code in the worker raises here, as it would have
-- in-process.
function M.take(res, answer)
  res.output, res.output_bytes = answer.output ~= "" and answer.output or nil, answer.output_bytes
  if answer.ok then
    local v = answer.value
    for _, k in ipairs(measure.measured_fields) do
      if k ~= "shapes" and k ~= "seconds" then res[k] = v[k] end
    end
    res.shapes = v.shapes or {}
    for k, x in pairs(v.seconds or {}) do res.seconds[k] = x end
    return res
  end
  if answer.code == "crashed" then
    res.outcome, res.reason, res.signal = "crashed", answer.reason, answer.signal
  elseif answer.code == "timeout" then
    res.outcome, res.reason = "timeout", answer.reason
  elseif answer.code == "too-large" then   -- its task, too large to send (kwb.base.channel.frame): no worker saw it
    res.outcome, res.reason = "compile-error", answer.reason
  else
    error(string.format("evaluating %s: %s", res.short or "?", tostring(answer.reason)), 0)
  end
  res.shapes = {}
  return res
end

-- duplicate(res, of) -> res: a candidate whose built code is that of `of`,
-- a result measured before (the build found its code's digest among those
-- measured: kwb.measure.backends), named and its score taken; it has no
-- times of its own (res.shapes stays empty), is never named a best
-- (kwb.base.outcomes.may_be_best) and uses no budget slot (kwb.loop.run).
-- The reason is what a model reads of it (kwb.strategies.prompt).
function M.duplicate(res, of)
  local what = of.score and string.format("%s, %.2fx", of.outcome, of.score)
               or of.reason and string.format("%s: %s", of.outcome, of.reason) or of.outcome
  res.duplicate_of, res.score, res.shapes = of.id, of.score, {}
  res.reason = string.format("the same compiled code as %s, measured before (%s)", of.short, what)
  return res
end

return M
