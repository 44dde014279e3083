-- kwb/cli/prompt.lua: `kwb prompt RECIPE.lua [--parent ID] [--strategy S]
-- [--device KIND] [--json]`: the prompt the next run of a recipe would send
-- its model first, made by the loop's own functions (kwb.strategies.prompt's
-- gather and compose) from what the cache holds of the recipe on a device
-- kind: the start kernel, the best, the results before (the last attempts,
-- the near misses), the best's profile. Printed with its size; nothing is
-- sent, nothing measured but what a run measures before its first prompt
-- (the device's ceilings, for the floors), and only where the device kind is
-- this machine's. Where the strategy draws its parent from a population
-- (llm and llm+tune unless `population = false`: kwb.strategies.population),
-- the prompt shows the first request's draw, made with the recipe's seed.
local ids = require "kwb.base.ids"
local outcomes = require "kwb.base.outcomes"
local population = require "kwb.strategies.population"
local prompt = require "kwb.strategies.prompt"
local strategies = require "kwb.strategies"

local M = {}

-- The words of the token estimate, in the header and the JSON.
M.estimate = "bytes / 4"

-- mode_of(recipe, name) -> the prompt's mode ("source", "template" or
-- "agent") and the strategy's name: the given strategy's, else the first of
-- the recipe's that asks a model | nil, message.
local function mode_of(recipe, name)
  if name and not strategies.options[name] then
    return nil, string.format("'--strategy %s': a strategy that asks a model (llm, llm+tune or agent)", name)
  end
  name = name or (recipe.strategy and strategies.needs_model(recipe.strategy))
  if not name then
    return nil, string.format("recipe %s's strategy asks no model, so its runs send no prompt: name one with "
                              .. "--strategy llm, llm+tune or agent", recipe.name)
  end
  return require(strategies.module(name)).mode, name
end

-- The best a run would start from, read only: the start kernel's result,
-- or the highest score of an accepted result that may be named a best now
-- (kwb.base.outcomes.may_be_best; a run would first sanitize one that is
-- not yet, kwb.loop.sanitizer's known_best, which this does not).
local function best_of(start, results, sanitizing)
  local best = start
  for _, r in ipairs(results) do
    if r.outcome == "accepted" and r.score and (not best or not best.score or r.score > best.score)
       and outcomes.may_be_best(r, sanitizing) then
      best = r
    end
  end
  return best
end

-- material(recipe, { store =, device =, parent = }) -> the material of
-- prompt.gather, notes (what this prompt lacks that a run's would have).
function M.material(recipe, opts)
  local store = require("kwb.loop.store")
  local st = opts.store or store.open()
  local backend = require("kwb.measure.backends").load(recipe.backend)
  local here_ok, here = pcall(backend.device)
  if not here_ok and not opts.device then
    error(string.format("%s (a prompt shows the results of one device kind: name it with --device KIND)",
                        tostring(here)), 0)
  end
  local device = opts.device or here
  local ctx = st:recipe_context(recipe, device)
  local notes = {}
  local cand = require("kwb.loop.candidate").make({ recipe = recipe, ids = {} }, recipe.start, "start")
  local start = st:known(ctx, cand.id)
  if start and start.outcome ~= "start" then start = nil end
  local results = st:results(ctx)
  local best = best_of(start, results, store.sanitizing(recipe))
  local m = { recipe = recipe, cache = st.cache, device = device, start = start, best = best, prior = results,
              results = {}, feedback = {} }
  if not best then   -- the start kernel as the parent, unmeasured
    m.best, m.parent_source = { id = cand.id, short = cand.short, params = cand.params, outcome = "start" }, cand.source
    notes[#notes + 1] = string.format("the start kernel has no result on %s yet: a run measures it first, and its "
                                      .. "prompt shows the start kernel's times", device)
  end
  if opts.parent then
    local id, why = st.cache:resolve(opts.parent)
    if not id then error(why, 0) end
    local res = st:known(ctx, id)
    if not res then
      error(string.format("candidate %s has no result of recipe %s on %s", ids.short(id), recipe.name, device), 0)
    end
    if not outcomes.verified[res.outcome] then
      error(string.format("candidate %s is %s: a parent is a verified result (accepted, slower or the start kernel)",
                          res.short, res.outcome), 0)
    end
    m.parent = res
  end
  if here_ok and device == here then
    local ok, c = pcall(backend.ceilings, recipe.ceilings, require("kwb.measure.ceilings").work(recipe))
    m.ceilings = ok and c or nil
  end
  if not m.ceilings then
    notes[#notes + 1] = string.format("no ceilings of %s here: the physical floors are left out", device)
  end
  return m, notes
end

-- population_of(recipe, name) -> the population option of the recipe's
-- strategy of that name (its mix's member), or nil; false: none
local function population_of(spec, name)
  if not spec then return nil end
  for _, member in ipairs(spec.members or {}) do
    local o = population_of(member, name)
    if o ~= nil then return o end
  end
  if spec.name == name then return (spec.options or {}).population end
  return nil
end

-- The first request's draw of the run's population (kwb.strategies.llm) into
-- m: its parent and inspirations, with the recipe's seed (a note where it has none).
local function draw(recipe, sname, m, notes)
  local o = population_of(recipe.strategy, sname)
  if o == false or sname == "agent" or m.parent then return end
  local seed = recipe.seed or 0
  if not recipe.seed then
    notes[#notes + 1] = string.format("recipe %s sets no seed: a run's draws from its population come from its own "
                                      .. "(the clock's, or --seed), these from seed 0", recipe.name)
  end
  local results = { m.start }
  for _, r in ipairs(m.prior) do results[#results + 1] = r end
  results[#results + 1] = m.best
  local pop = population.seeded(o, seed, recipe, results, population.info_of(m.cache, m.device))
  local pick = pop:sample()
  if pick.parent then m.parent, m.inspirations = pick.parent.res, pop:shown(pick, m.cache, recipe) end
end

-- build(recipe, opts) -> convo, facts: the prompt and what the header says.
function M.build(recipe, opts)
  local mode, sname = mode_of(recipe, opts.strategy)
  if not mode then error(sname, 0) end
  local m, notes = M.material(recipe, opts)
  draw(recipe, sname, m, notes)
  local convo = prompt.compose(prompt.gather(m), { mode = mode })
  local bytes, tokens = prompt.size(convo)
  local parent = convo.parent
  return convo, { recipe = recipe.name, mode = mode, strategy = sname, device = m.device,
                  parent = parent and parent.id, parent_is_best = not m.parent or m.parent.id == m.best.id,
                  bytes = bytes, system_bytes = #convo.system, user_bytes = bytes - #convo.system,
                  tokens_estimated = tokens, notes = notes }
end

-- header(facts) -> the first line: the size
function M.header(f)
  return string.format("kwb prompt %s: %d bytes (system %d, user %d), about %d tokens (estimated as %s); not sent",
                       f.recipe, f.bytes, f.system_bytes, f.user_bytes, f.tokens_estimated, M.estimate)
end

function M.main(...)
  local help = require "kwb.help"
  local usage = "usage: " .. help.command("prompt").usage
  local pos, opts = require("kwb.base.args").parse({ ... }, { parent = "value", strategy = "value", device = "value",
                                                             json = "flag", help = "flag" })
  if pos and (opts.help or pos[1] == "-h") then
    io.write(help.command_help("prompt"))
    return 0
  end
  if not pos or #pos ~= 1 then
    io.stderr:write("kwb prompt: ", pos and "it takes one RECIPE.lua" or opts, "\n", usage, "\n")
    return 2
  end
  local ok, convo, f = pcall(function() return M.build(require("kwb.load").load(pos[1]), opts) end)
  if not ok then
    io.stderr:write("kwb prompt: ", tostring(convo), "\n")
    return 1
  end
  local user = convo.messages[1].content
  if opts.json then
    f.estimate, f.system, f.user, f.documents, f.sent = M.estimate, convo.system, user, convo.documents, false
    print(require("kwb.base.text").json(f))
    return 0
  end
  local lines = { M.header(f), string.format("mode %s (strategy %s), parent %s%s, device %s", f.mode, f.strategy,
                                             ids.short(f.parent) or "-", f.parent_is_best and " (the best)" or "",
                                             f.device) }
  for _, n in ipairs(f.notes) do lines[#lines + 1] = "note: " .. n end
  io.write(table.concat(lines, "\n"), "\n--- system ---\n", convo.system, "\n--- user ---\n", user, "\n")
  return 0
end

return M
