-- kwb/model/several.lua: several models in one recipe, the `model` field's
-- list form:
--
--   model = { { provider = "openai", model = "a", price = { input = 1, output = 4 } },
--             { provider = "anthropic", model = "b", price = { input = 3, output = 15 } },
--             profile = true, lessons_every = 8 }     -- the prompt's and the ledger's settings, for all
--
-- Each element is a model as the single form takes it (its own fallbacks,
-- price, timeout); a model whose name (provider:model) an earlier one has
-- is called NAME#i (i its place in the list) in the replies and the summary. Each proposal's request goes to the model a bandit
-- (kwb.model.bandit, Thompson sampling, seeded from the run's seed) chooses
-- on accepted proposals per unit of cost; the cost is what the replies cost
-- (tokens × price) where every model has a price, else their wall seconds.
-- A lessons summary (purpose "lessons") goes to the first model and is no
-- choice; a request that names its arm (an agent's later turns) goes to that
-- model and adds its cost there. The models share one usage (the run's cost
-- budget counts them all) and one HTTP client.
--
--   local m = several.new(specs, { record =, http =, seed = }, model)   -- model: kwb.model
--   local t = m:ask(convo [, purpose [, arm]])   -- t.arm: the model chosen
--   m:wait(t), m:poll(s), m:settle(), m:close(), m:tools(), m.usage, m.chain
--   m:reward(t)                                 -- the request's proposal was accepted (once a request)
--   m:stats() -> { unit =, choices = { arm, ... }, models = { { name =, requests =, accepted =, cost =, rate = }, ... } }
local bandit = require "kwb.model.bandit"
local http = require "kwb.base.http"

local M = {}

local Several = {}
Several.__index = Several

-- Is spec the list form (several models)?
function M.is_list(spec)
  return type(spec) == "table" and spec.provider == nil and type(spec[1]) == "table"
end

function M.new(specs, opts, model)
  opts = opts or {}
  local usage = { requests = 0, retries = 0, failures = 0, input = 0, output = 0, cost = 0 }
  local m = setmetatable({ arms = {}, names = {}, first = {}, usage = usage, chain = {} }, Several)
  local priced = true
  for i, spec in ipairs(specs) do
    local a = model.new(spec, { record = opts.record, http = opts.http, usage = usage })
    -- (one HTTP client for all: waiting on one model's reply moves the others' requests on)
    a.client = function(self)
      if not m.http then m.http = http.client(opts.http) end
      self.http = m.http
      return m.http
    end
    -- (two models of one name, e.g. one model at two temperatures: the second is NAME#2)
    local name = model.name(spec)
    for _, n in ipairs(m.names) do
      if n == model.name(spec) then name = model.name(spec) .. "#" .. i end
    end
    m.arms[i], m.names[i], m.first[i] = a, name, model.name(spec)
    for _, link in ipairs(a.chain) do m.chain[#m.chain + 1] = link end
    priced = priced and spec.price ~= nil
  end
  m.unit = priced and "cost" or "seconds"
  m.bandit = bandit.new(#specs, opts.seed or 0)
  return m
end

function Several:ask(convo, purpose, arm)
  local chosen = false
  if not arm then
    if purpose == "lessons" then arm = 1 else arm, chosen = self.bandit:choose(), true end
  end
  local t = self.arms[arm]:ask(convo, purpose)
  return { inner = t, arm = arm, chosen = chosen, purpose = purpose }
end

function Several:wait(t)
  local r = self.arms[t.arm]:wait(t.inner)
  if r.model == self.first[t.arm] then r.model = self.names[t.arm] end   -- (not a fallback's reply: the model's own name)
  if not t.counted and t.purpose ~= "lessons" then
    t.counted = true
    local cost = self.unit == "cost" and (r.cost or 0) or (r.seconds or 0)
    if t.chosen then self.bandit:answered(t.arm, cost)
    else self.bandit.arms[t.arm].cost = self.bandit.arms[t.arm].cost + cost end
  end
  return r
end

function Several:reward(t)
  if not t or not t.chosen or t.rewarded then return end
  t.rewarded = true
  self.bandit:accepted(t.arm)
end

-- poll(seconds): the first model with requests in flight waits up to seconds
-- (the shared client moves every model's), the others take what landed.
function Several:poll(seconds)
  local waited = false
  for _, a in ipairs(self.arms) do
    local busy = a.flying and #a.flying > 0
    a:poll(busy and not waited and seconds or 0)
    waited = waited or busy
  end
end

function Several:settle()
  for _, a in ipairs(self.arms) do a:settle() end
end

function Several:tools()
  for _, a in ipairs(self.arms) do
    local ok, p = a:tools()
    if not ok then return false, p end
  end
  return true
end

function Several:close()
  if self.http then self.http:close() end
end

function Several:stats()
  local out = { unit = self.unit, choices = self.bandit.choices, models = {} }
  for i, a in ipairs(self.bandit.arms) do
    out.models[i] = { name = self.names[i], requests = a.requests, answers = a.answers, accepted = a.accepted,
                      cost = a.cost, rate = self.bandit:rate(i) }
  end
  return out
end

return M
