-- kwb/loop.lua: the research loop for scripts, one require away. A candidate
-- travels through these stages, each a module of its own:
--
--   strategy (kwb.strategy)  proposes    -> candidate (kwb.candidate): source, defines, id
--   session  (kwb.session)   submits it  -> a worker runs measure (kwb.measure_task, kwb.measure):
--            rules and build (kwb.backend, kwb.rules), inputs (kwb.inputs), verify (kwb.verify), time
--   session  completes it    -> judge (kwb.judge): floor, score, accept -> store (kwb.store)
--   run      (kwb.run)       counts it, reports it (kwb.progress), shows the strategy; summary (kwb.summary)
--
-- Every candidate ends in one outcome of kwb.outcomes, and every outcome is
-- recorded.
local candidate = require "kwb.candidate"
local outcomes = require "kwb.outcomes"
local rng = require "kwb.rng"
local run = require "kwb.run"
local session = require "kwb.session"

return {
  run = run.run,                  -- run(recipe, opts) -> summary, run
  try = run.try,                  -- try(recipe, proposal) -> result
  session = session.new,          -- session(recipe [, { store = }]) -> session
  outcomes = outcomes.funnel,
  params_text = candidate.params_text,
  rng = rng.new,
}
