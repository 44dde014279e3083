-- tests/lua/test_population.lua: the population a model-driven run draws its
-- parents from (kwb.strategies.population) and the bandit among several
-- models (kwb.model.bandit, kwb.model.several). The archive's cells and a
-- seeded sequence of parents and inspirations, islands exchanging their
-- best at the set interval, the bandit's arms on scripted rewards; then runs
-- with a scripted model (the `command` provider running
-- tests/lua/population_model.lua, tests/recipes/population_host.lua): the
-- parent and inspirations in the request's text, a repeat and a duplicate of
-- members named in the next prompt, two models with the bandit's choices,
-- each candidate naming its model, and the summary's models line.
local t = require "t"
local cjson = require "cjson"
local population = require "kwb.strategies.population"
local bandit = require "kwb.model.bandit"

local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")

-- ---- the archive ------------------------------------------------------------

local shapes = { { key = "n=64" }, { key = "n=96" }, { key = "n=128" } }
local start_medians = { 10, 20, 40 }

-- res(name, medians [, outcome]) -> a verified result; its score the
-- geometric mean of its speed-ups over the start kernel's medians
local function res(name, medians, outcome)
  local r = { id = name .. string.rep("0", 64 - #name), short = name, outcome = outcome or "accepted", shapes = {} }
  local logsum = 0
  for i, sh in ipairs(shapes) do
    r.shapes[sh.key] = { median = medians[i] }
    logsum = logsum + math.log(start_medians[i] / medians[i])
  end
  r.score = outcome == "start" and 1 or math.exp(logsum / #shapes)
  return r
end

local S = res("5a", start_medians, "start")
local A = res("aa", { 4, 15, 30 })        -- wins n=64
local B = res("bb", { 8, 10, 25 })        -- wins n=96 (profiled: memory-bound)
local C = res("cc", { 6, 14, 20 })        -- wins n=128 (5 KiB of source)
local D = res("dd", { 4.1, 10.4, 39 })    -- wins n=64 and n=96 (within 5%)
local E = res("ee", { 4.15, 16, 31 })     -- wins n=64: A's cell, slower than A
local small = { bytes = 500 }

local function filled(opts, seed)
  local p = population.new(opts, seed, shapes)
  for k = 1, 2 do p:add(S, k, small) end
  p:add(A, 1, small); p:add(B, 1, { bytes = 700, class = "memory" }); p:add(C, 1, { bytes = 5000 })
  p:add(D, 2, small); p:add(E, 2, small); p:add(A, 2, small)
  return p
end

local function cells_text(p, k)
  local out = {}
  for _, c in ipairs(p:cells(k)) do out[#out + 1] = c.key .. "=" .. c.elite.short end
  return table.concat(out, " ")
end

t.test("population_cells_key_wins_class_and_size_one_elite_each", function()
  local p = filled({ islands = 2 }, 7)
  -- (wins: bit 1 n=64, bit 2 n=96, bit 4 n=128; fastest over both islands: 4, 10, 20)
  t.eq(cells_text(p, 1), "0/unprofiled/0=5a 1/unprofiled/0=aa 2/memory/0=bb 4/unprofiled/2=cc")
  t.eq(cells_text(p, 2), "0/unprofiled/0=5a 1/unprofiled/0=aa 3/unprofiled/0=dd", "ee loses its cell to aa")
  t.eq(p:describe(p:member(D.id)), "wins n=64, n=96 · unprofiled · under 1 KiB")
  t.eq(p:describe(p:member(C.id)), "wins n=128 · unprofiled · under 16 KiB")
  t.eq(p:best(1).short, "cc", "the highest score")
  t.eq(p:best(2).short, "dd")
  t.eq(population.size_bucket(1023), 0); t.eq(population.size_bucket(1024), 1); t.eq(population.size_bucket(16384), 3)
  t.eq(p:add(res("ff", { 50, 50, 50 }, "wrong"), 1, small), nil, "a wrong result is no member")
end)

-- draws(p, n) -> "1:cc[aa,5a] 2:..." for the next n requests (island:parent[inspirations])
local function draws(p, n)
  local out = {}
  for _ = 1, n do
    local d = p:sample()
    local ins = {}
    for i, m in ipairs(d.inspirations) do ins[i] = m.short end
    out[#out + 1] = string.format("%d:%s[%s]", d.island, d.parent.short, table.concat(ins, ","))
  end
  return table.concat(out, " ")
end

t.test("population_sampling_is_the_same_sequence_for_a_seed", function()
  local seq = draws(filled({ islands = 2, exchange = 100 }, 7), 8)
  -- (request 1 on island 1, its best cc as the parent, two other elites; request 3 a drawn cell's
  -- elite, aa, so island 1's best cc is its first inspiration)
  t.eq(seq, "1:cc[aa,5a] 2:dd[aa,5a] 1:aa[cc,bb] 2:dd[aa,5a] 1:aa[cc,bb] 2:dd[5a,aa] 1:cc[aa,bb] 2:dd[aa,5a]", "seed 7")
  t.eq(draws(filled({ islands = 2, exchange = 100 }, 7), 8), seq, "the same seed again")
  t.truthy(draws(filled({ islands = 2, exchange = 100 }, 8), 8) ~= seq, "another seed, other draws")
  -- best = 1: the island's best every time, its inspirations the best is not among
  t.eq(draws(filled({ islands = 2, exchange = 100, best = 1, inspirations = 1 }, 7), 2), "1:cc[aa] 2:dd[aa]")
end)

t.test("population_islands_exchange_their_best_every_m_requests", function()
  local p = filled({ islands = 2, exchange = 3, best = 1, inspirations = 0 }, 7)
  t.eq(draws(p, 2), "1:cc[] 2:dd[]")
  t.eq(#p.exchanges, 0, "no exchange before the third request")
  t.eq(draws(p, 1), "1:cc[]")
  t.eq(#p.exchanges, 1)
  local moves = {}
  for _, m in ipairs(p.exchanges[1].moves) do moves[#moves + 1] = string.format("%d>%d %s", m.from, m.to, m.id:sub(1, 2)) end
  t.eq(table.concat(moves, " "), "1>2 cc 2>1 dd", "each island's best to the next, taken before any moves")
  t.eq(p.exchanges[1].request, 3)
  t.eq(draws(p, 3), "2:dd[] 1:dd[] 2:dd[]", "island 1's best is dd now, from island 2 (1.69x against cc's 1.68x)")
  t.eq(#p.exchanges, 2, "again at the sixth")
  t.eq(#p.exchanges[2].moves, 0, "each holds the other's best already")
  t.eq(table.concat(p:summary().cells, ","), "5,4")
end)

t.test("population_option_is_checked_naming_the_field", function()
  t.eq(population.check(false), nil)
  t.eq(population.check { islands = 3, exchange = 4, best = 0.25, inspirations = 1, margin = 0.1 }, nil)
  t.eq(select(2, population.check { islands = 0 }), "a whole number of islands, 1 or more")
  t.eq(population.check { best = 2 }, ".best")
  t.eq(select(2, population.check { island = 2 }),
       "no such field (a population has islands, exchange, best, inspirations, margin)")
  t.eq(select(2, population.check "two"), "false, true or a table of islands, exchange, best, inspirations, margin")
end)

-- ---- the recipe's fields ------------------------------------------------------

local function recipe(model, strategy)
  return kwb.recipe { name = "fields", problem = require("kwb.problems.matmul") {}, shapes = { n = { 16 } },
                      start = "../../kernels/host/matmul_naive.c", model = model, strategy = strategy or "llm" }
end
local sh = { provider = "command", command = { "sh" } }

t.test("recipe_takes_a_list_of_models_and_the_population_option_checked", function()
  local r = recipe({ sh, { provider = "command", command = { "cat" } }, profile = false, lessons_every = 0 },
                   { "llm+tune", population = { islands = 3 } })
  t.eq(#r.model, 2)
  t.eq(require("kwb.model").name(r.model), "command:sh, command:cat")
  t.eq(r.strategy.options.population.islands, 3)
  t.raises(function() recipe({ sh, { provider = "command", command = { "cat" }, profile = true } }) end,
           "recipe field 'model[2].profile': set on the list of models, not on one of them (profile is the prompt's "
           .. "or the ledger's, the same for all)")
  t.raises(function() recipe({ sh, { provider = "nope" } }) end, "recipe field 'model[2].provider': expected one of")
  t.raises(function() recipe({ sh, sh, price = { input = 1 } }) end,
           "recipe field 'model.price': a setting of each model (on the list only: context_bytes, profile, diff_bytes, "
           .. "lessons_every, lessons_bytes)")
  t.raises(function() recipe(sh, { "llm", population = { islands = 0 } }) end,
           "recipe field 'strategy.population.islands': expected a whole number of islands, 1 or more, got number 0")
  t.raises(function() recipe(sh, { "llm", population = { island = 2 } }) end,
           "recipe field 'strategy.population.island': no such field (a population has islands, exchange, best, "
           .. "inspirations, margin)")
  t.raises(function() recipe(sh, { "agent", population = false }) end, "unknown recipe field 'strategy.population'")
end)

-- ---- the bandit -----------------------------------------------------------------

-- The arms' scripted rewards: arm 1 costs 1 an answer and every second one of
-- its requests is accepted; arm 2 costs 4 and every one is (1/2 against 1/4
-- accepted per unit of cost).
local function scripted(seed, n)
  local b = bandit.new(2, seed)
  local seen, cost = { 0, 0 }, { 1, 4 }
  for _ = 1, n do
    local i = b:choose()
    seen[i] = seen[i] + 1
    b:answered(i, cost[i])
    if i == 2 or seen[i] % 2 == 0 then b:accepted(i) end
  end
  return table.concat(b.choices, ""), b
end

t.test("bandit_chooses_the_arms_in_a_fixed_sequence_for_a_seed_and_rewards", function()
  local seq, b = scripted(3, 24)
  t.eq(seq, "122211111112111111111111", "seed 3: each arm once, then mostly arm 1")
  t.eq(scripted(3, 24), seq, "the same again")
  t.eq(b.arms[1].requests .. " " .. b.arms[2].requests, "20 4", "the cheaper acceptances win most requests")
  t.eq(b.arms[1].accepted .. " " .. b.arms[2].accepted, "10 4")
  t.near(b:rate(1), 11 / 22, 1e-12, "arm 1's rate: (1 + 10) / (2 + 20) accepted over a cost of 1 an answer")
  t.near(b:rate(2), 5 / 6 / 4, 1e-12, "arm 2's rate: (1 + 4) / (2 + 4) over 4")
  -- an arm never chosen goes first, in the list's order
  local fresh = bandit.new(3, 3)
  t.eq(fresh:choose() .. fresh:choose() .. fresh:choose(), "123")
end)

-- ---- runs with a scripted model ---------------------------------------------

-- run(env) -> events, the plain output, the prompts (texts, in order) and their arms
local function run(name, env, mode)
  local dir = tmp .. "/" .. name
  os.execute("rm -rf '" .. dir .. "' && mkdir -p '" .. dir .. "/p'")
  local p = assert(io.popen(string.format("KWB_TEST_POP_DIR=%s/p KWB_CACHE=%s/kwb.db %s ./kwb "
                                          .. "tests/recipes/population_host.lua %s 2>&1", dir, dir, env or "", mode)))
  local out = p:read("a")
  p:close()
  local events = {}
  for line in out:gmatch("[^\n]+") do
    local ok, e = pcall(cjson.decode, line)
    if ok and type(e) == "table" then events[#events + 1] = e end
  end
  local prompts, arms = {}, {}
  for i = 1, 100 do
    local f = io.open(string.format("%s/p/prompt-%d.txt", dir, i), "r")
    if not f then break end
    prompts[i] = f:read("a")
    f:close()
    f = assert(io.open(string.format("%s/p/arm-%d.txt", dir, i), "r"))
    arms[i] = f:read("a")
    f:close()
  end
  return events, out, prompts, arms
end

local function of(events, kind)
  local out = {}
  for _, e in ipairs(events) do
    if e.event == kind then out[#out + 1] = e end
  end
  return out
end

-- The kernels of the one-island run, by short id: the start kernel's, then the model's in order.
local events, out, prompts = run("one_island", "KWB_TEST_ISLANDS=1", "--json")
local cands = of(events, "candidate")
local names = {}
local start = of(events, "start-kernel")[1] or {}
if start.id then names[start.id:sub(1, 8)] = "start" end
for i, c in ipairs(cands) do
  names[c.id:sub(1, 8)] = ({ "jki", "ikj", "kji", "ikj'", "none" })[i]
end

-- shown(prompt) -> "parent[inspiration,...]" by name
local function shown(text)
  local parent = text:find("The current best is the start kernel:", 1, true) and "start"
                 or text:match("The current best %((%x+),") or text:match("The parent to change %((%x+),")
  parent = names[parent] or parent
  local ins = {}
  local part = text:match("Other kernels of the population[^\n]*\n(.-)\n\nRecent failures")
               or text:match("Other kernels of the population[^\n]*\n(.*)") or ""
  for short in part:gmatch("\n(%x%x%x%x%x%x%x%x) %(") do ins[#ins + 1] = names[short] or short end
  return string.format("%s[%s]", tostring(parent), table.concat(ins, ","))
end

t.test("population_run_draws_parents_and_inspirations_into_the_prompt", function()
  local got = {}
  for i, c in ipairs(cands) do got[i] = c.outcome end
  -- (the second "nothing" is the first's text again: a repeat, not evaluated)
  t.eq(table.concat(got, " "), "slower accepted slower duplicate no-code", "output:\n" .. out:sub(1, 3000))
  local seq = {}
  for i = 1, 6 do seq[i] = shown(prompts[i] or "") end
  -- (prompts 1 and 2 go before any result; the third sees jki's, cells: jki's (no shape won) and the
  -- start kernel's (both); from the fourth ikj holds both shapes and the start kernel leads the rest)
  t.eq(table.concat(seq, " "), "start[] start[] start[jki] start[ikj] ikj[start] ikj[start]", "seed 5")
  t.truthy(prompts[4]:find("Other kernels of the population, each the fastest of its kind", 1, true), "the part's head")
  local sm = of(events, "summary")[1] or {}
  t.eq(sm.population and sm.population.islands, 1)
  t.eq(sm.population and string.format("%d %d", sm.population.cells[1], sm.population.members[1]), "2 4",
       "ikj's cell and the start kernel's; the start kernel, jki, ikj and kji")
end)

t.test("kwb_prompt_shows_the_population_draw_the_next_run_sends_first", function()
  -- (the one-island run's cache: the start kernel, jki, ikj and kji; every draw a cell's elite)
  local dir = tmp .. "/one_island"
  local env = string.format("KWB_TEST_ISLANDS=1 KWB_TEST_BEST=0 KWB_TEST_POP_DIR=%s/again KWB_CACHE=%s/kwb.db", dir, dir)
  local p = assert(io.popen(env .. " ./kwb prompt tests/recipes/population_host.lua --json 2>&1"))
  local got = p:read("a")
  p:close()
  local ok, j = pcall(cjson.decode, got)
  t.truthy(ok and type(j) == "table", got)
  os.execute("mkdir -p '" .. dir .. "/again'")
  p = assert(io.popen(env .. " ./kwb tests/recipes/population_host.lua --quiet --budget 1 2>&1"))
  local out = p:read("a")
  p:close()
  local f = io.open(dir .. "/again/prompt-1.txt", "r")
  local sent = f and f:read("a") or ""
  if f then f:close() end
  t.eq(shown(j.user), "start[ikj]", "kwb prompt's draw: the start kernel's cell, ikj (the best) beside it")
  t.eq(shown(sent), shown(j.user), "the run's first request drew the same:\n" .. out)
  -- (the parent's part, its source and table, alike; the floors are not compared: kwb prompt measures the
  -- ceilings now, where the run takes those an earlier run kept)
  local part = function(text) return text:match("\nThe parent to change.-\n\nOther kernels of the population") end
  t.truthy(part(j.user), j.user)
  t.eq(part(sent), part(j.user), "the parent's part")
  t.eq(j.parent_is_best, false)
end)

t.test("population_false_shows_the_best_as_every_parent_and_no_inspirations", function()
  local ev, _, texts = run("no_population", "KWB_TEST_POPULATION=off", "--json")
  local c = of(ev, "candidate")
  t.eq(c[2] and c[2].id:sub(1, 8), cands[2] and cands[2].id:sub(1, 8), "the same replies")
  local seq = {}
  for i = 1, 6 do seq[i] = shown(texts[i] or "") end
  t.eq(table.concat(seq, " "), "start[] start[] start[] ikj[] ikj[] ikj[]",
       "the best as it stood when each went (prompt n + 2 sees result n)")
  t.eq(of(ev, "summary")[1].population, nil)
end)

t.test("population_run_names_a_repeat_and_a_duplicate_of_a_member_in_the_next_prompt", function()
  local ikj = cands[2] and cands[2].id:sub(1, 8) or "?"
  -- reply 4 repeats ikj (its id: known, not evaluated); prompt 5 was built as it came, prompt 6 names it
  t.eq(prompts[5]:find("repeat: the same kernel as " .. ikj, 1, true), nil, "not known when prompt 5 went")
  t.truthy(prompts[6]:find(": repeat: the same kernel as " .. ikj .. ", evaluated before (accepted)", 1, true),
           "prompt 6 names the repeated member:\n" .. prompts[6]:sub(-1500))
  -- reply 5 builds to ikj's code: a duplicate, named in prompt 7
  local dup = cands[4] and cands[4].id:sub(1, 8) or "?"
  t.truthy(prompts[7]:find("- " .. dup .. " (llm.c): duplicate: your kernel is the same compiled code as " .. ikj
                           .. ", measured before (accepted, ", 1, true), "prompt 7 names the duplicated member:\n"
                           .. prompts[7]:sub(-1500))
end)

t.test("several_models_a_bandit_chooses_and_the_summary_says", function()
  local ev, text, _, arms = run("two_models", "KWB_TEST_MODELS=2 KWB_TEST_ISLANDS=1", "--json")
  local sm = of(ev, "summary")[1] or {}
  local ms = t.truthy(sm.models, "the summary's models; output:\n" .. text:sub(1, 3000))
  t.eq(ms.unit, "cost", "both are priced")
  t.eq(string.format("%d%d", ms.choices[1], ms.choices[2]), "12", "each model once first, in the list's order")
  t.eq(arms[1] .. " " .. arms[2], "idle kernels")
  local prog = "command:" .. kwb.files.resolve("kwb")
  t.eq(ms.models[1].name, prog, "idle")
  t.eq(ms.models[2].name, prog .. "#2", "kernels: the same program, its place in the list")
  t.eq(sm.model.name, prog .. ", " .. prog .. "#2")
  t.eq(ms.models[1].requests + ms.models[2].requests, #ms.choices)
  t.eq(#ms.choices, #arms, "each request a choice, each choice a request")
  t.eq(ms.models[1].accepted, 0, "idle never has a kernel")
  t.eq(ms.models[2].accepted, 1, "ikj")
  for _, c in ipairs(of(ev, "candidate")) do
    t.truthy(c.model == prog or c.model == prog .. "#2", "each candidate names its model: " .. tostring(c.model))
    if c.outcome ~= "no-code" then t.eq(c.model, prog .. "#2", c.id) end
  end
  -- the same run printed: its models line
  local _, plain = run("two_models_plain", "KWB_TEST_MODELS=2 KWB_TEST_ISLANDS=1", "--plain")
  local line = plain:match("\n(models %(Thompson[^\n]*)")
  t.truthy(line, "the models line:\n" .. plain)
  local p = prog:gsub("%p", "%%%0")
  t.truthy(line:match("^models %(Thompson sampling on accepted per unit of cost%): " .. p .. " %d+ requests, 0 accepted, "
                      .. "[%d.]+, rate [%d.e+-]+ per unit · " .. p .. "#2 %d+ requests, 1 accepted, [%d.]+, rate [%d.e+-]+ "
                      .. "per unit$"), line)
end)

t.done()
