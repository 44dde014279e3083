-- kwb/strategies/llm.lua: the model proposes kernels. Each prompt
-- (kwb.strategies.prompt) shows a parent, the last failures and the ideas; each
-- reply (kwb.strategies.reply) becomes one candidate whose parent is the one the
-- prompt showed: accepted, it is the new best (keep); otherwise the best
-- stays (revert). A reply with no usable kernel is the outcome `no-code`. A
-- reply may give its kernel as edits of the parent the prompt showed (its
-- source as built, kwb.strategies.prompt's parent_source): the candidate is
-- the edited source, whole.
--
-- The parent: with options.population (on unless `population = false`), one
-- drawn from the run's population of verified kernels, with one or two
-- inspirations beside it (kwb.strategies.population: cells by behaviour,
-- islands); without it, the current best. Each result joins the island of
-- the request that proposed it. With several models (kwb.model's list form)
-- an accepted proposal is the reward of the model that made it.
--
-- The requests run ahead of the evaluations: while a worker evaluates one
-- candidate, the next request (one per worker) is already with the model, so
-- a prompt sees every result but those still being evaluated.
--
-- With mode "template" (the `llm+tune` strategy) the model writes a template
-- and its space (a ```lua block); a tuner (options.tuner, "random" by
-- default) sweeps it for options.sweep candidates (8 by default), and the
-- sweep's best stands for the proposal (the reply's cost is carried by the
-- sweep's first candidate). A reply with no space is a plain source.
local population = require "kwb.strategies.population"
local prompt = require "kwb.strategies.prompt"
local reply = require "kwb.strategies.reply"
local ids = require "kwb.base.ids"

local S = { name = "llm", mode = "source", sweep = 8, tuner = "random", failures_in_a_row = 3 }

function S:init(run)
  self.model = run:open_model()
  self.ahead = math.max(1, run.workers or 1)
  self.queue, self.asked, self.failed = {}, 0, 0
  local o = self.options or {}
  self.sweep, self.tuner = o.sweep or self.sweep, o.tuner or self.tuner
  self.from = {}   -- candidate id -> the request (queue item) that proposed it
  if o.population ~= false then self.population = population.for_run(run, o.population) end
  self:fill(run)
end

-- Keep `ahead` requests with the model, within the run's budgets; reserve:
-- candidates already promised (the proposal being returned, a sweep's points).
function S:fill(run, reserve)
  while #self.queue < self.ahead and not self.stopped and #self.queue < run:budget_left() - (reserve or 0)
        and not run:spent() do
    self.asked = self.asked + 1
    local pop = self.population
    local pick = pop and pop:sample()
    local convo = prompt.build(run, { mode = self.mode, parent = pick and pick.parent and pick.parent.res,
                                      inspirations = pick and pop:shown(pick, run.session.store.cache, run.recipe) })
    self.queue[#self.queue + 1] = { ticket = self.model:ask(convo, self.mode), parent = convo.parent,
                                    parent_source = convo.parent_source, island = pick and pick.island }
  end
end

-- proposal(run, reply, parent id, name [, parent_source]) -> the candidate a
-- reply proposes (no_code when it has none; space when it declares one), its
-- file called name.c (name.cu for CUDA); edits in the reply apply to
-- parent_source, the parent's text its prompt showed. The agent strategy's
-- answers too.
function S.proposal(run, r, parent, name, parent_source)
  local p = reply.proposal(r.text, run.recipe,
                           parent_source and { source = parent_source, short = ids.short(parent) })
  local base = { model = r.model, transcript = r.transcript, cost = r.cost, rationale = p.rationale,
                 parent = parent, note = p.note }
  if p.no_code then
    base.source, base.name, base.no_code = r.text, "reply.md", p.no_code
    return base
  end
  base.source, base.name, base.space = p.source, name .. (run.recipe.backend == "cuda" and ".cu" or ".c"), p.space
  return base
end

-- A failed request: true when the strategy stops here (a replayed transcript
-- at its end, or failures_in_a_row failures in a row), with the run's
-- stop_reason set; false when the next request may go.
function S:gives_up(run, r)
  self.failed = (self.failed or 0) + 1
  if r.code ~= "exhausted" and self.failed < self.failures_in_a_row then return false end
  self.stopped = true
  run.stop_reason = r.code == "exhausted" and r.error
                    or string.format("the model failed %d times in a row: %s", self.failed, r.error)
  run.stopped_by = r.code ~= "exhausted" and "model" or nil
  return true
end

-- A sweep of a proposed template: a tuner over its space, proposing points
-- as sources with defines.
local function sweep(self, run, base, item)
  local strategy = require "kwb.strategies"
  local tuner = strategy.load(self.tuner)
  local first = true
  local function as_prop(params)
    local p = {}
    for k, v in pairs(base) do p[k] = v end
    p.space, p.defines, p.params = nil, params, params
    return p
  end
  local ids = {}
  local function next_prop(params)   -- the reply's cost is carried by the sweep's first candidate
    local p = as_prop(params)
    if not first then p.cost = 0 end
    first = false
    local id = run:id(p)
    ids[id], self.from[id] = true, item
    return p
  end
  local view = setmetatable({ space = base.space, budget = { candidates = self.sweep } }, { __index = run })
  function view.known(_, params) return run:known(as_prop(params)) end
  function view.id(_, params) return run:id(as_prop(params)) end
  function view.valid(_, params) return not base.space.restrict or base.space.restrict(params) and true or false end
  tuner:init(view)
  return { tuner = tuner, view = view, left = self.sweep, as_prop = next_prop, ids = ids }
end

function S:propose(run)
  local sw = self.current
  if sw and sw.left > 0 then
    local params = sw.tuner:propose(sw.view)
    if params then
      sw.left = sw.left - 1
      return sw.as_prop(params)
    end
  end
  self.current = nil
  self:fill(run)
  local item = table.remove(self.queue, 1)
  if not item then return nil end
  local r = self.model:wait(item.ticket)
  if r.error then
    if self:gives_up(run, r) then return nil end
    return self:propose(run)
  end
  self.failed = 0
  local prop = S.proposal(run, r, item.parent and item.parent.id, "llm", item.parent_source)
  if prop.space and self.mode == "template" then
    self.current = sweep(self, run, prop, item)
    self:fill(run, self.sweep)   -- the next request runs while the sweep is evaluated
    return self:propose(run)
  end
  prop.space = nil
  self.from[run:id(prop)] = item
  self:fill(run, 1)   -- the next request runs while this candidate is evaluated
  return prop
end

function S:observe(run, res, fresh)
  local sw = self.current   -- the sweep's tuner sees the results of its own points only
  if sw and sw.tuner.observe and sw.ids[res.id] then sw.tuner:observe(sw.view, res, fresh) end
  local item = self.from and self.from[res.id]
  if self.population then self.population:note(res, item and item.island) end
  -- (several models: an accepted proposal rewards the model whose reply made it, once a request)
  if item and res.outcome == "accepted" and fresh and self.model.reward then self.model:reward(item.ticket) end
end

return S
