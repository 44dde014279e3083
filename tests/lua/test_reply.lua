-- tests/lua/test_reply.lua: what a model's reply proposes (kwb.strategies.reply), the
-- prompt's parts (kwb.strategies.prompt), and a replayed run's budget and prompt hooks.
local t = require "t"
local cjson = require "cjson"
local prompt = require "kwb.strategies.prompt"
local reply = require "kwb.strategies.reply"

local host = { backend = "host" }

t.test("reply_finds_fenced_blocks_by_language", function()
  local p = reply.parse("Intro.\n\n```c\nint a;\n```\n\n~~~lua\nreturn {}\n~~~\nOutro.")
  t.eq(#p.blocks, 2)
  t.eq(p.blocks[1].lang, "c")
  t.eq(p.blocks[1].code, "int a;\n")
  t.eq(p.blocks[2].lang, "lua")
  t.eq(p.blocks[2].code, "return {}\n")
  t.eq(p.prose, "Intro.\n\n\nOutro.")
end)

t.test("reply_a_longer_fence_holds_a_shorter_one", function()
  local p = reply.parse("````c\nint a;\n```\nstill code\n````\n")
  t.eq(#p.blocks, 1)
  t.eq(p.blocks[1].code, "int a;\n```\nstill code\n")
end)

t.test("reply_language_words_are_normalised", function()
  local p = reply.parse("```C++ title=x\na\n```\n```CU\nb\n```\n")
  t.eq(p.blocks[1].lang, "cpp")
  t.eq(p.blocks[2].lang, "cuda")
end)

t.test("reply_the_last_of_two_blocks_is_the_kernel", function()
  local prop = reply.proposal("Sketch:\n```c\nold\n```\nFinal:\n```c\nnew\n```\n", host)
  t.eq(prop.source, "new\n")
  t.eq(prop.note, "2 ```c blocks: the last one is the kernel")
  t.eq(prop.rationale, "Sketch:\nFinal:")
end)

t.test("reply_without_code_is_no_code", function()
  t.eq(reply.proposal("Only words.", host).no_code, "the reply has no ```c code block")
  t.eq(reply.proposal("```python\nprint(1)\n```", host).no_code, "the reply has no ```c code block")
  t.eq(reply.proposal("```c\nint cut_off", host).no_code,
       "its only ```c block is not closed (the reply was cut off?)")
  t.eq(reply.proposal("```\nint x;\n```", host).source, "int x;\n", "a lone unlabelled block counts")
end)

t.test("reply_a_space_block_is_checked_like_a_recipes", function()
  local prop = reply.proposal("```c\nk\n```\n```lua\nreturn { BM = { 16, 32 }, UNROLL = { 1, 4 } }\n```", host)
  t.eq(#prop.space.dims, 2)
  t.eq(prop.space.dims[1].name, "BM")
  t.eq(prop.space.dims[2].values[2], 4)
  t.eq(reply.proposal("```c\nk\n```\n```lua\nreturn { BM = 3 }\n```", host).no_code,
       "the reply declares a space, but its space: 'space.BM': expected a non-empty list of values, got number 3")
  t.eq(reply.proposal("```c\nk\n```\n```lua\nreturn os.exit(1)\n```", host).no_code,
       "the reply declares a space, but its lua block fails: the reply's lua block:1: attempt to index a nil value "
       .. "(global 'os')", "no globals in a space block")
  t.eq(reply.proposal("```c\nk\n```\n```lua\nwhile true do end\n```", host).no_code,
       "the reply declares a space, but its lua block fails: the lua block runs too long (a space is a table of lists)")
end)

t.test("reply_a_space_block_can_not_spend_memory_or_call_string_methods", function()
  t.eq(reply.space('local s = "x" for i = 1, 60 do s = s .. s end return {}'), nil)
  t.eq(select(2, reply.space('local s = "x" for i = 1, 60 do s = s .. s end return {}')),
       "its lua block fails: the lua block uses too much memory")
  t.eq(select(2, reply.space('return { BM = { ("x"):rep(9) } }')),
       "its lua block fails: the reply's lua block:1: attempt to index a string value (constant 'x')")
  t.eq(("kwb"):upper(), "KWB", "string methods are back afterwards")
end)

-- One instruction that allocates much: a hundred copies of a 32 MiB string
-- concatenated in one expression asks for 3.2 GB at once; the heap's cap
-- refuses it before it is taken, so this process never holds it.
local function peak_kib()
  local f = assert(io.open("/proc/self/status"))
  local hwm = f:read("a"):match("VmHWM:%s*(%d+) kB")
  f:close()
  return tonumber(hwm)
end

t.test("reply_a_space_blocks_concatenation_bomb_is_its_memory_limit_not_ours", function()
  local bomb = 'local s = "x" for i = 1, 25 do s = s .. s end return { BM = { #(' .. ("s.."):rep(99) .. 's) } }'
  t.eq(reply.proposal("```c\nk\n```\n```lua\n" .. bomb .. "\n```", host).no_code,
       "the reply declares a space, but its lua block fails: the lua block uses too much memory")
  local peak = peak_kib()
  t.truthy(peak < 500 * 1024, string.format("this process peaked at %d MiB", peak // 1024))
  local sp = assert(reply.space('local s = "x" for i = 1, 25 do s = s .. s end return { BM = { #s, 16 } }'))
  t.eq(sp.dims[1].values[1], 32 << 20, "a 32 MiB string fits the block's 64 MiB")
  local restrict = assert(reply.space("return { BM = { 1, 2 }, restrict = function(p) local s = 'xy' "
                                      .. "if p.BM == 2 then return true end for i = 1, 24 do s = s .. s end return #(" .. ("s.."):rep(99) .. "s) > 0 end }"))
  t.eq(restrict.restrict { BM = 1 }, false, "a restrict that asks too much excludes the point")
  t.eq(restrict.restrict { BM = 2 }, true)
  t.truthy(peak_kib() < 500 * 1024, "nor does its restrict")
  t.eq(select(2, require("kwb.core").heap()), nil, "the cap is lifted afterwards")
end)

t.test("reply_a_spaces_restrict_runs_confined_too", function()
  local sp = assert(reply.space("return { BM = { 1, 2 }, restrict = function(p) return p.BM > 1 end }"))
  t.eq(sp.restrict { BM = 1 }, false)
  t.eq(sp.restrict { BM = 2 }, true)
  local spin = assert(reply.space("return { BM = { 1, 2 }, restrict = function(p) if p.BM == 1 then while true do end end "
                                  .. "return true end }"))
  t.eq(spin.restrict { BM = 1 }, false, "a restrict that runs too long excludes the point")
  t.eq(spin.restrict { BM = 2 }, true)
  t.eq(select(2, reply.space("return { BM = { 1, 2 }, restrict = function(p) while true do end end }")),
       "its space: 'space.restrict': excludes every point of the space (2 looked at)")
end)

t.test("reply_rationale_drops_control_characters", function()
  t.eq(reply.proposal("Faster\27[2J now.\n```c\nk\n```", host).rationale, "Faster[2J now.")
end)

t.test("prompt_documents_rank_sections_by_the_terms_they_use", function()
  local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
  local a, b = dir .. "/a.md", dir .. "/b.md"
  local function write(p, s) local f = assert(io.open(p, "w")); f:write(s); f:close() end
  write(a, "# A\n\n## Tiles\ntiles for matmul kernels\n\n## Other\nnothing\n")
  write(b, "# B\n\n## More tiles\nmatmul tiles and shared memory\n")
  local text, used = prompt.documents({ a, b }, { matmul = true, shared = true, tiles = true }, 10000)
  t.eq(table.concat(used, "; "), "b.md: More tiles; a.md: Tiles; a.md: Other")
  t.truthy(text:find("^From [^\n]*b%.md:\n## More tiles"), text)
  local _, few = prompt.documents({ a, b }, { matmul = true, shared = true }, 120)
  t.eq(table.concat(few, "; "), "b.md: More tiles", "the budget keeps the most relevant")
end)

t.test("prompt_names_the_problems_prototype", function()
  local matmul = require "kwb.problems.matmul"
  t.eq(matmul {}:prototype(), "void matmul(int n, const float *a, const float *b, float *c)", "what the prompt says a candidate exports")
end)

-- ---- a replayed run in this process ---------------------------------------

local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local ikj = "void matmul(int n, const float *a, const float *b, float *c) {\n"
  .. "    for (int i = 0; i < n; i++) {\n        for (int j = 0; j < n; j++) c[i * n + j] = 0;\n"
  .. "        for (int k = 0; k < n; k++) for (int j = 0; j < n; j++) c[i * n + j] += a[i * n + k] * b[k * n + j];\n"
  .. "    }\n}\n"
local function transcript(replies)
  local path = dir .. "/replay_" .. #replies .. ".json"
  local f = assert(io.open(path, "w"))
  f:write(cjson.encode { replies = replies })
  f:close()
  return path
end

local function recipe(extra)
  local matmul = require "kwb.problems.matmul"
  local spec = { name = "replayed", problem = matmul {}, shapes = { n = { 16 } },
                 start = { file = "../../kernels/host/matmul_naive.c" }, strategy = "llm", flags = { "-O1" },
                 budget = { candidates = 5, minutes = 1, timeout = 5 },
                 timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.05 } }
  for k, v in pairs(extra) do spec[k] = v end
  return kwb.recipe(spec)
end

t.test("replayed_run_stops_at_the_cost_budget", function()
  local file = transcript { { text = "```c\n" .. ikj .. "```", usage = { input = 1000000, output = 0 } },
                            { text = "no code" }, { text = "no code either" } }
  local r = recipe { model = { provider = "replay", file = file, price = { input = 3, output = 0 } },
                     budget = { candidates = 5, minutes = 1, timeout = 5, cost = 2 } }
  local sm = r:run { mode = "quiet", store = require("kwb.loop.store").open(dir .. "/cost.db") }
  t.eq(sm.candidates, 1, "the first reply spent $3 of the $2")
  t.eq(sm.stopped, "the cost budget (2) is spent")
  t.eq(sm.model.cost, 3)
end)

t.test("replayed_run_uses_the_recipes_prompt_function_and_queued_ideas", function()
  local file = transcript { { text = "nothing" }, { text = "nothing again" } }
  local seen = {}
  local r = recipe { model = { provider = "replay", file = file }, budget = { candidates = 1, minutes = 1, timeout = 5 },
                     prompt = function(parts) seen[#seen + 1] = parts.ideas or ""; return "ONLY: " .. parts.format end }
  kwb.idea "try unrolling by four"
  local sm = r:run { mode = "quiet", store = require("kwb.loop.store").open(dir .. "/prompt.db") }
  t.eq(sm.funnel["no-code"], 1)
  t.eq(seen[1], "Ideas from the engineers, to try:\n- try unrolling by four")
  t.eq(#prompt.queued, 0, "a queued idea goes into one prompt")
  local cache = r:session().store.cache
  local tr = assert(cache:transcript(cache:transcripts()[1].id))
  t.truthy(tr.request:find("ONLY: Answer with a short explanation", 1, true), tr.request)
end)

t.test("replayed_run_counts_a_models_repeats_against_the_budget_and_tells_it", function()
  local same = { text = "```c\n" .. ikj .. "```" }
  local file = transcript { same, same, same, same, same, same }
  local prompts = {}
  local r = recipe { model = { provider = "replay", file = file }, budget = { candidates = 4, minutes = 1, timeout = 5 },
                     prompt = function(parts) prompts[#prompts + 1] = parts.failures or ""; return "go" end }
  local sm = r:run { mode = "quiet", store = require("kwb.loop.store").open(dir .. "/repeats.db") }
  t.eq(sm.candidates, 1, "one kernel evaluated")
  t.eq(sm.repeats, 3, "three repeats spent the rest of the budget")
  t.eq(sm.model.requests, 4, "four requests, not six")
  -- the fourth prompt was built once the second reply had been found a repeat
  -- (each request goes out while the reply before it is judged)
  t.truthy(prompts[4]:find("repeat: the same kernel as", 1, true), "the fourth prompt says: " .. prompts[4])
end)

t.test("a_failing_strategy_still_closes_the_runs_record", function()
  local r = recipe { strategy = { propose = function() error("strategy broke", 0) end } }
  local st = require("kwb.loop.store").open(dir .. "/broken.db")
  t.raises(function() r:run { mode = "quiet", store = st } end, "strategy broke")
  local runs = st:runs()
  t.truthy(runs[#runs].ended, "the record is closed")
  t.eq(runs[#runs].funnel.accepted, 0)
end)

t.test("a_spaces_restrict_calls_share_one_step_budget", function()
  local old = reply.restrict_steps
  reply.restrict_steps = 50000
  local sp = assert(reply.space("return { BM = { 1, 2 }, restrict = function(p) if p.BM == 1 then while true do end end "
                                .. "return true end }"))
  local core = require "kwb.core"
  local t0 = core.now()
  for _ = 1, 1000 do sp.restrict { BM = 1 } end
  reply.restrict_steps = old
  t.truthy(core.now() - t0 < 1, "1000 calls after the budget is spent cost nothing: " .. (core.now() - t0))
end)

t.test("recipe_model_fields_are_checked", function()
  t.raises(function() recipe { model = { provider = "opnai", model = "x" } } end,
           "recipe field 'model.provider': expected one of openai, anthropic, command, replay, got \"opnai\" (did you mean 'openai'?)")
  t.raises(function() recipe { model = { provider = "command" } } end,
           "recipe field 'model.command': expected the program and its arguments (required), got nothing")
  t.raises(function() recipe { model = { provider = "openai", model = "m", price = { inptu = 1 } } } end,
           "unknown recipe field 'model.price.inptu' (did you mean 'model.price.input'?)")
  t.raises(function() recipe { model = { provider = "openai", model = "m", fallback = { { provider = "anthropic" } } } } end,
           "recipe field 'model.fallback[1].model': expected a model name (required), got nothing")
  t.raises(function() recipe { model = { provider = "command", command = { "no-such-agent-program" } } } end,
           "recipe field 'model.command[1]': expected a program on PATH, got \"no-such-agent-program\"")
  t.raises(function() recipe { model = { provider = "openai", model = "m", base_url = "ftp://x/v1" } } end,
           "recipe field 'model.base_url': expected an http:// or https:// URL, got \"ftp://x/v1\"")
  local bad = dir .. "/not_json.json"
  local f = assert(io.open(bad, "w")); f:write("{ replies: "); f:close()
  t.raises(function() recipe { model = { provider = "replay", file = bad } } end,
           "recipe field 'model.file': replay transcript " .. bad .. ": not JSON")
  t.raises(function() recipe { strategy = "llm" } end,
           "recipe field 'model': expected a model (the llm strategy asks one for its proposals), got nothing")
  t.raises(function() recipe { model = { provider = "replay", file = "x.json" }, strategy = { "llm+tune", swep = 3 } } end,
           "unknown recipe field 'strategy.swep' (did you mean 'strategy.sweep'?)")
end)

t.done()
