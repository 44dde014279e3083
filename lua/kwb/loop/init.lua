-- kwb/loop/init.lua: the research loop for scripts, one require away. A candidate
-- travels through these stages, each a module of its own:
--
--   strategy (kwb.strategies)  proposes    -> candidate (kwb.loop.candidate): source, defines, id
--   session  (kwb.loop.session)   submits it  -> a worker runs measure (kwb.worker.task, kwb.measure):
--            rules and build (kwb.measure.backends, kwb.measure.rules), inputs (kwb.measure.inputs), verify (kwb.measure.verify), time
--   session  completes it    -> judge (kwb.loop.judge): floor, score, accept -> store (kwb.loop.store)
--   run      (kwb.loop.run)       counts it, reports it (kwb.loop.progress), shows the strategy; summary (kwb.loop.summary)
--
-- Every candidate ends in one outcome of kwb.base.outcomes, and every outcome is
-- recorded.
local outcomes = require "kwb.base.outcomes"
local rng = require "kwb.base.rng"
local run = require "kwb.loop.run"
local session = require "kwb.loop.session"

return {
  run = run.run,                  -- run(recipe, opts) -> summary, run
  try = run.try,                  -- try(recipe, proposal) -> result
  session = session.new,          -- session(recipe [, { store = }]) -> session
  outcomes = outcomes.funnel,
  params_text = require("kwb.base.text").params_text,
  rng = rng.new,
}
