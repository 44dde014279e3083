-- tests/lua/test_prompt.lua: what the model is shown (kwb.strategies.prompt):
-- only its backend's rules, the parent as it was built (its #defines'
-- values), the last attempts as a table with the slower ones, the near
-- misses, a request for edits where the parent is long; and `kwb prompt`,
-- which prints the prompt the next run sends first, exactly, and sends
-- nothing (the scripted server, build/httpd, sees no request from it).
local t = require "t"
local cjson = require "cjson"
local httpd = require "httpd"
local prompt = require "kwb.strategies.prompt"

local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local matmul = require "kwb.problems.matmul"

local function host_recipe(extra)
  local spec = { name = "prompted", problem = matmul {}, shapes = { n = { 16, 32 } },
                 start = { file = "../../kernels/host/matmul_naive.c" }, flags = { "-O1" }, verify_shapes = false,
                 budget = { candidates = 3, minutes = 1, timeout = 5 },
                 timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.05 } }
  for k, v in pairs(extra or {}) do spec[k] = v end
  return kwb.recipe(spec)
end

-- The rule names and never-lines of a recipe's system message.
local function rules_of(recipe)
  local convo = prompt.compose(prompt.gather { recipe = recipe }, { mode = "source" })
  local names, never = {}, {}
  for line in convo.system:gmatch("[^\n]+") do
    local name = line:match("^%- ([%w-]+): ")
    if name then names[#names + 1] = name end
    if line:match("^%- Never ") then never[#never + 1] = line end
  end
  return table.concat(names, " "), never, convo.system
end

t.test("prompt_a_host_recipes_rules_leave_out_the_cuda_only_ones", function()
  local names, never, system = rules_of(host_recipe())
  t.eq(names, "other-streams sync timer printf sleep global-state exit escape allow-list")
  t.eq(#never, 4)
  t.eq(system:find("CUDA", 1, true), nil, "no CUDA in a host prompt's rules: " .. system)
  t.eq(system:find("PTX", 1, true), nil)
end)

t.test("prompt_a_cuda_recipes_rules_keep_the_cuda_ones_and_leave_out_the_host_allow_list", function()
  local names, never = rules_of(require("kwb.load").load("recipes/gpu_vecadd.lua"))
  t.eq(names, "other-streams sync timer printf sleep l2-persistence global-state exit escape ptx-allow-list")
  t.eq(#never, 5)
  t.eq(never[4], "- Never drop or bypass the launch path the harness uses (CUDA graphs, streams): the time measured "
                 .. "is the time a user gets.")
end)

-- ---- the parent as built -----------------------------------------------------

local template = "#ifndef BK\n#define BK 16 /* rows a tile */\n#endif\n  #  ifndef UNROLL\n  # define UNROLL\n  #  endif\n"
  .. "int tile(void) { return BK * 100 + BJ * 10 + UNROLL; }\n"

t.test("prompt_with_params_puts_the_values_built_with_into_the_defines", function()
  t.eq(prompt.with_params(template, { BK = 32, BJ = 4, UNROLL = true, OFF = false }),
       "#ifndef BJ\n#define BJ 4\n#endif\n"
       .. "#ifndef BK\n#define BK 32 /* rows a tile */\n#endif\n  #  ifndef UNROLL\n  # define UNROLL 1\n  #  endif\n"
       .. "int tile(void) { return BK * 100 + BJ * 10 + UNROLL; }\n")
  t.eq(prompt.with_params(template, {}), template, "no defines: the text as it is")
  -- the text shown builds to the kernel measured: compiled without defines,
  -- it is what the template is with them
  local defines = { BK = 32, BJ = 4, UNROLL = 7 }
  local built = assert(kwb.host.compile { source = template, name = "tile_t.c", defines = defines })
  local shown = assert(kwb.host.compile { source = prompt.with_params(template, defines), name = "tile_s.c" })
  t.eq(built:fn("int tile(void)")(), 3247)
  t.eq(shown:fn("int tile(void)")(), 3247)
end)

-- A cache of one candidate: the template point the parent is.
local function one_candidate(source, params)
  return { get = function() return { source = source, params = params } end, profiles = function() return {} end }
end

t.test("prompt_the_best_of_a_template_is_shown_with_its_values_not_the_defaults", function()
  local best = { id = string.rep("b", 64), short = "bbbbbbbb", outcome = "accepted", score = 1.5, params = { BK = 32, BJ = 4 },
                 shapes = { ["n=16"] = { median = 1e-6, speedup = 1.5 }, ["n=32"] = { median = 8e-6, speedup = 1.5 } } }
  local parts = prompt.parts(prompt.gather { recipe = host_recipe(), best = best,
                                             cache = one_candidate(template, { BK = 32, BJ = 4 }) }, "source")
  t.eq(parts.best:match("^[^\n]*"), "The current best (bbbbbbbb, 1.50x the start kernel's speed, geometric mean over "
                                    .. "shapes, BJ=4 BK=32):")
  t.truthy(parts.best:find("```c\n#ifndef BJ\n#define BJ 4\n#endif\n#ifndef BK\n#define BK 32 /* rows a tile */\n#endif\n", 1, true),
           parts.best)
  t.eq(parts.best:find("#define BK 16", 1, true), nil, "not the template's default")
end)

-- ---- what was tried ----------------------------------------------------------

local function shapes(a, b) return { ["n=16"] = a, ["n=32"] = b } end
local start = { id = string.rep("a", 64), short = "aaaaaaaa", outcome = "start", score = 1,
                shapes = shapes({ median = 1e-6, speedup = 1 }, { median = 8e-6, speedup = 1 }) }

t.test("prompt_the_last_attempts_are_a_table_with_the_slower_ones", function()
  -- (the parent, a start kernel with defines: an attempt's what is the parameters it changed)
  local parent = { id = start.id, short = start.short, outcome = "start", score = 1, shapes = start.shapes,
                   params = { BK = 16, BJ = 4 } }
  local slower = { id = string.rep("b", 64), short = "bbbbbbbb", outcome = "slower", score = 0.9, params = { BK = 8, BJ = 4 },
                   shapes = shapes({ median = 1.05e-6, speedup = 0.95 }, { median = 9.4e-6, speedup = 0.853, partial = true }) }
  local broke = { id = string.rep("c", 64), short = "cccccccc", outcome = "compile-error", shapes = {},
                  reason = "error: expected ';'\nand more", rationale = "Unroll | by four.\nMore prose." }
  local again = { short = "dddddddd", outcome = "repeat", reason = "the same kernel as bbbbbbbb, evaluated before (slower)" }
  local info = prompt.gather { recipe = host_recipe(), best = parent, start = parent, prior = { parent, slower },
                               results = { broke }, feedback = { broke, again } }
  t.eq(prompt.parts(info, "source").attempts,
       "The last attempts (newest first; score: the geometric mean over shapes of the speed-up over the start kernel, "
       .. "each shape's after it; *: raced, its timing stopped early once it was clearly slower than the best there):\n"
       .. "| attempt | what | outcome | score | n=16 | n=32 | reason |\n"
       .. "|---|---|---|---|---|---|---|\n"
       .. "| dddddddd | - | repeat | - | - | - | the same kernel as bbbbbbbb, evaluated before (slower) |\n"
       .. "| cccccccc | Unroll \\| by four. | compile-error | - | - | - | error: expected ';' |\n"
       .. "| bbbbbbbb | BK=8 | slower | 0.90x | 0.95x | 0.85x* |  |")
end)

t.test("prompt_near_misses_are_close_to_the_parent_or_faster_at_a_shape", function()
  local best = { id = string.rep("e", 64), short = "eeeeeeee", outcome = "accepted", score = 1.2, seq = 9,
                 shapes = shapes({ median = 1e-6, speedup = 1.5 }, { median = 8e-6, speedup = 1.0 }) }
  local function res(c, score, outcome, a, b, seq)
    return { id = string.rep(c, 64), short = string.rep(c, 8), outcome = outcome, score = score, name = c .. ".c",
             shapes = shapes(a, b), seq = seq }
  end
  local close = res("1", 1.15, "slower", { median = 1.04e-6, speedup = 1.44 }, { median = 8.3e-6, speedup = 0.96 }, 3)
  local there = res("2", 0.9, "slower", { median = 2e-6, speedup = 0.75 }, { median = 6e-6, speedup = 1.33 }, 4)
  local far = res("3", 0.7, "slower", { median = 2e-6, speedup = 0.75 }, { median = 9e-6, speedup = 0.89 }, 5)
  local raced = res("4", 0.8, "slower", { median = 2e-6, speedup = 0.75 }, { median = 5e-6, speedup = 1.6, partial = true }, 6)
  local older = res("5", 1.19, "accepted", { median = 1.01e-6, speedup = 1.49 }, { median = 8.1e-6, speedup = 0.99 }, 2)
  local info = prompt.gather { recipe = host_recipe(), best = best, start = start,
                               prior = { start, older, close, there, far, raced, best } }
  t.eq(prompt.parts(info, "source").near,
       "Near misses (other verified kernels within 5% of the parent's score, or faster than it at some shape; "
       .. "speed-ups over the start kernel):\n"
       .. "- 55555555 (5.c): accepted, 1.19x (the parent 1.20x)\n"
       .. "- 11111111 (1.c): slower, 1.15x (the parent 1.20x)\n"
       .. "- 22222222 (2.c): slower, 0.90x (the parent 1.20x); faster than the parent at n=32 (1.33x against the "
       .. "parent's 1.00x)")
end)

t.test("prompt_a_slower_candidate_is_in_the_attempts_of_the_next_prompt_of_a_run", function()
  local slow = "void matmul(int n, const float *a, const float *b, float *c) {\n"
    .. "    for (int r = 0; r < 6; r++)\n"
    .. "        for (int j = 0; j < n; j++)\n            for (int i = 0; i < n; i++) {\n"
    .. "                float acc = 0;\n"
    .. "                for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];\n"
    .. "                c[i * n + j] = acc;\n            }\n}\n"
  local path = dir .. "/slower_replay.json"
  local f = assert(io.open(path, "w"))
  f:write(cjson.encode { replies = { { text = "Six passes, column by column.\n\n```c\n" .. slow .. "```\n" },
                                     { text = "No code." }, { text = "No code either." } } })
  f:close()
  local seen = {}
  local r = host_recipe { strategy = "llm", model = { provider = "replay", file = path },
                          prompt = function(parts) seen[#seen + 1] = parts.attempts or ""; return "go" end }
  local _, run = r:run { mode = "quiet", store = require("kwb.loop.store").open(dir .. "/slower.db"), certify = 0 }
  local c1 = run.results[1]
  t.eq(c1.outcome, "slower", "six passes of the start kernel's work")
  t.eq(seen[1], "", "nothing tried before the first prompt")
  local cells = {}
  for _, key in ipairs { "n=16", "n=32" } do
    local x = c1.shapes[key]
    cells[#cells + 1] = string.format("%.2fx%s", x.speedup, x.partial and "*" or "")
  end
  local row = string.format("| %s | Six passes, column by column. | slower | %.2fx | %s |  |", c1.short, c1.score,
                            table.concat(cells, " | "))
  t.truthy(seen[3]:find("\n" .. row, 1, true), "the third prompt (the first built once it was judged) has its row "
           .. row .. ":\n" .. seen[3])
end)

-- ---- how to answer -----------------------------------------------------------

t.test("prompt_asks_for_edits_where_the_parent_is_longer_than_model_diff_bytes", function()
  local long = "/* " .. string.rep("x", 9000) .. " */\n"
  local r = host_recipe()
  local function format(mode)
    return prompt.parts(prompt.gather { recipe = r, best = { id = start.id, short = start.short, outcome = "start" },
                                        parent_source = long }, mode).format
  end
  t.eq(format("source"), "Answer with a short explanation of the change, then the change. Give the change as edits of "
       .. "the parent above (it is 9007 bytes: do not write it out again), each one a block\n\n<<<<<<< SEARCH\nexact "
       .. "lines of the parent\n=======\nthe lines that replace them\n>>>>>>> REPLACE\n\nThe edits are applied in "
       .. "order; each SEARCH must be whole lines copied exactly from the parent and must match it once (add a line "
       .. "or two where it would match twice). A unified diff of the parent (--- a/, +++ b/, @@ hunks) is read the "
       .. "same way. The whole kernel file in one ```c block is still accepted. The kernel must compile on its own "
       .. "and export the function above.")
  t.truthy(format("template"):find("after the edits give a ```lua block that returns their values", 1, true))
  t.eq(format("agent"):match("^[^.]*"), "Use the tools to compile and evaluate drafts on one shape; when you have a "
       .. "kernel you trust, answer with a short explanation and the whole file in one ```c block", "the tools take files")
  r.model = { diff_bytes = 10000 }
  t.eq(format("source"), "Answer with a short explanation of the change, then the whole kernel file in one ```c block "
       .. "(it must compile on its own and export the function above).", "under model.diff_bytes: the whole file")
  t.raises(function() host_recipe { model = { provider = "openai", model = "m", diff_bytes = 0 } } end,
           "recipe field 'model.diff_bytes': expected a positive integer, got number 0")
  local cli = require "kwb.cli"
  t.eq(cli.with_model({ provider = "openai", model = "m", diff_bytes = 512 }, { provider = "anthropic", model = "c" }).diff_bytes,
       512, "--model keeps the recipe's diff_bytes, a setting of the prompt")
end)

-- ---- kwb prompt --------------------------------------------------------------------

local function sh(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  local ok, _, code = p:close()
  return out, ok and 0 or code
end

t.test("kwb_prompt_prints_what_the_next_run_sends_first_and_sends_nothing", function()
  local cache = dir .. "/kwb_prompt.db"
  local empty = dir .. "/no_replies.json"
  local f = assert(io.open(empty, "w"))
  f:write('{"replies": []}')
  f:close()
  local srv = httpd.start(httpd.entry(200, httpd.openai("No code this time.", { 10, 2 })))
  local env = string.format("KWB_TEST_MODEL_URL=%s/v1 KWB_TEST_MODEL_KEY=k ./kwb --cache %s", srv.url, cache)
  -- a run that measures the start kernel and asks nothing (its replay has no reply)
  local out, rc = sh(env .. " tests/recipes/prompt_host.lua --quiet --certify 0 --model replay:" .. empty)
  t.eq(rc, 0, out)
  local json, jrc = sh(env .. " prompt tests/recipes/prompt_host.lua --json")
  t.eq(jrc, 0, json)
  local plain = sh(env .. " prompt tests/recipes/prompt_host.lua")
  t.eq(#srv:requests(), 0, "kwb prompt sent nothing")
  -- the next run's first request is what kwb prompt printed
  out, rc = sh(env .. " tests/recipes/prompt_host.lua --quiet --certify 0")
  local reqs = srv:requests()
  srv:stop()
  t.eq(rc, 0, out)
  t.eq(#reqs, 1, "the run asked once")
  local system, user = reqs[1].body.messages[1].content, reqs[1].body.messages[2].content
  local j = cjson.decode(json)
  t.eq(j.system, system, "the system message sent")
  t.eq(j.user, user, "the user message sent")
  local bytes = #system + #user
  local header = string.format("kwb prompt prompt_host: %d bytes (system %d, user %d), about %d tokens (estimated as "
                               .. "bytes / 4); not sent", bytes, #system, #user, bytes // 4)
  t.eq(plain:match("^[^\n]*"), header)
  t.eq(j.bytes, bytes)
  t.eq(j.tokens_estimated, bytes // 4)
  t.eq(j.estimate, "bytes / 4")
  t.eq(j.sent, false)
  t.eq(j.mode, "source")
  t.truthy(plain:find("\n--- system ---\n" .. system .. "\n--- user ---\n" .. user .. "\n", 1, true), plain)
  t.truthy(user:find("The current best is the start kernel:", 1, true), user)
end)

t.test("kwb_prompt_parent_shows_another_verified_result_and_refuses_others", function()
  local cache = dir .. "/kwb_prompt.db"   -- (the test above's: the start kernel and one no-code reply)
  local c = assert(require("kwb.cache").open(cache))
  local ids = {}
  for _, row in ipairs(c:list("matmul")) do ids[row.outcome] = row.id end
  c:close()
  t.truthy(ids.start and ids["no-code"], "the start kernel and the reply are in the cache")
  local out, rc = sh("./kwb --cache " .. cache .. " prompt tests/recipes/prompt_host.lua --parent " .. ids["no-code"]:sub(1, 10))
  t.eq(rc, 1)
  t.eq(out, "kwb prompt: candidate " .. ids["no-code"]:sub(1, 8) .. " is no-code: a parent is a verified result "
            .. "(accepted, slower or the start kernel)\n")
  out, rc = sh("./kwb --cache " .. cache .. " prompt tests/recipes/prompt_host.lua --parent " .. ids.start:sub(1, 8))
  t.eq(rc, 0, out)
  t.truthy(out:find("\nmode source (strategy llm), parent " .. ids.start:sub(1, 8) .. " (the best), device ", 1, true), out)
  out, rc = sh("./kwb --cache " .. cache .. " prompt recipes/host_matmul.lua")
  t.eq(rc, 1)
  t.eq(out, "kwb prompt: recipe host_matmul's strategy asks no model, so its runs send no prompt: name one with "
            .. "--strategy llm, llm+tune or agent\n")
  out, rc = sh("./kwb prompt")
  t.eq(rc, 2)
  t.eq(out, "kwb prompt: it takes one RECIPE.lua\nusage: kwb prompt RECIPE.lua [--parent ID] [--strategy S] "
            .. "[--device KIND] [--json]\n")
end)

t.done()
