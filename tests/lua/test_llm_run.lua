-- tests/lua/test_llm_run.lua: the research loop with a model: a host recipe
-- (tests/recipes/llm_host.lua) run by the CLI against the scripted server
-- (build/httpd) speaking the OpenAI API. Each scripted reply becomes a
-- candidate with its outcome, parent and cost; retries and tokens are
-- counted; the prompts carry the best, the failures, the ideas and the most
-- relevant context; the key reaches no record, event or worker.
local t = require "t"
local cjson = require "cjson"
local core = require "kwb.core"
local httpd = require "httpd"

local canary = "sk-canary-run-51d0e2"
local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")

local ikj = [[
void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++) {
        float *restrict ci = c + i * n;
        for (int j = 0; j < n; j++) ci[j] = 0.0f;
        for (int k = 0; k < n; k++) {
            const float aik = a[i * n + k];
            const float *restrict bk = b + k * n;
            for (int j = 0; j < n; j++) ci[j] += aik * bk[j];
        }
    }
}
]]
-- (the inner loop unrolled by two: other code, not only other text, which would be a duplicate of ikj)
local ikj_unrolled = ikj:gsub("for %(int j = 0; j < n; j%+%+%) ci%[j%] %+= aik %* bk%[j%];",
                              "int j = 0;\n            for (; j + 1 < n; j += 2) { ci[j] += aik * bk[j]; "
                              .. "ci[j + 1] += aik * bk[j + 1]; }\n            for (; j < n; j++) ci[j] += aik * bk[j];")
assert(ikj_unrolled ~= ikj)
local cached = [[
static float last[96 * 96];
static int last_n;
void matmul(int n, const float *a, const float *b, float *c) {
    if (last_n == n) { for (int i = 0; i < n * n; i++) c[i] = last[i]; return; }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
    for (int i = 0; i < n * n; i++) last[i] = c[i];
    last_n = n;
}
]]
local template = [[
#ifndef BK
#define BK 16
#endif
void matmul(int n, const float *a, const float *b, float *c) {
    for (int x = 0; x < n * n; x++) c[x] = 0.0f;
    for (int kk = 0; kk < n; kk += BK)
        for (int i = 0; i < n; i++)
            for (int k = kk; k < kk + BK && k < n; k++)
                for (int j = 0; j < n; j++) c[i * n + j] += a[i * n + k] * b[k * n + j];
}
]]
local broken = "void matmul(int n, const float *a, const float *b, float *c) { return n +; }\n"

local function block(code, lang) return "```" .. (lang or "c") .. "\n" .. code .. "```\n" end

local J, O = httpd.entry, httpd.openai

-- env: more variables ("NAME=value ...", these win); args: more run options.
local function run_recipe(srv, strategy, budget, env, args)
  local cache = tmp .. "/llm_" .. strategy .. ".db"
  for _, s in ipairs { "", "-wal", "-shm" } do os.remove(cache .. s) end
  local p = assert(io.popen(string.format("KWB_TEST_MODEL_URL=%s/v1 KWB_TEST_MODEL_KEY=%s KWB_TEST_STRATEGY=%s "
                                          .. "KWB_TEST_BUDGET=%d KWB_CACHE=%s %s ./kwb tests/recipes/llm_host.lua --json %s 2>&1",
                                          srv.url, canary, strategy, budget, cache, env or "", args or "")))
  local out = p:read("a")
  p:close()
  local events = {}
  for line in out:gmatch("[^\n]+") do
    local ok, e = pcall(cjson.decode, line)
    if ok and type(e) == "table" then events[#events + 1] = e end
  end
  return events, out, cache
end

local function by_event(events, name)
  local out = {}
  for _, e in ipairs(events) do
    if e.event == name then out[#out + 1] = e end
  end
  return out
end

-- ---- llm+tune: six replies, two retried requests ------------------------

local script = table.concat {
  J(429, '{"error": {"message": "rate limited"}}', { "Retry-After: 1" }),
  J(200, O("The inner loop should be contiguous:\n\n" .. block(ikj), { 1000, 200 })),
  J(500, '{"error": {"message": "overloaded"}}'),
  J(200, O("I would first like to see the compiler's vectorisation report.", { 1100, 20 })),
  J(200, O("A sketch, then the kernel.\n\n" .. block("/* sketch */\n") .. "\n" .. block(ikj_unrolled), { 1200, 300 })),
  J(200, O("Remember the last output:\n\n" .. block(cached), { 1300, 100 })),
  J(200, O("Blocking k, BK for the tuner:\n\n" .. block(template) .. block("return { BK = { 8, 16, 32, 64 } }\n", "lua"),
           { 1400, 400 })),
  J(200, O("Try this:\n\n" .. block(broken), { 1500, 50 })),
}

local srv = httpd.start(script)
local events, out, cache_path = run_recipe(srv, "tune", 8)
local requests = srv:requests()
srv:stop()
local cands = by_event(events, "candidate")
local sm = by_event(events, "summary")[1] or {}
local start = by_event(events, "start-kernel")[1] or {}

t.test("llm_run_each_reply_is_a_candidate_with_its_outcome", function()
  t.truthy(sm.model, "a summary with the model's part; output:\n" .. out:sub(1, 3000))
  local got = {}
  for i, c in ipairs(cands) do got[i] = c.outcome end
  t.eq(#cands, 8, "candidates")
  t.eq(got[1], "accepted", "the contiguous kernel")
  t.eq(got[2], "no-code", "the reply without code")
  t.truthy(got[3] == "slower" or got[3] == "accepted", "the second of two blocks is the kernel: " .. tostring(got[3]))
  t.eq(got[4], "forbidden", "the cached output")
  for i = 5, 7 do t.truthy(got[i] == "slower" or got[i] == "accepted", "sweep point " .. i .. ": " .. tostring(got[i])) end
  t.eq(got[8], "compile-error", "the broken kernel")
  t.eq(cands[4].rule, "global-state")
  t.eq(cands[2].reason, "the reply has no ```c code block")
end)

t.test("llm_run_sweeps_the_declared_space", function()
  local seen = {}
  for i = 5, 7 do seen[#seen + 1] = cands[i].params and cands[i].params.BK end
  table.sort(seen)
  t.eq(#seen, 3, "three points of BK")
  for _, v in ipairs(seen) do t.truthy(v == 8 or v == 16 or v == 32 or v == 64, "BK " .. tostring(v)) end
end)

t.test("llm_run_summary_counts_requests_retries_tokens_and_cost", function()
  local m = sm.model
  t.eq(m.requests, 6, "requests that got a reply")
  t.eq(m.retries, 2, "the 429 and the 500")
  t.eq(m.failures, 0)
  t.eq(m.input, 1000 + 1100 + 1200 + 1300 + 1400 + 1500, "tokens in")
  t.eq(m.output, 200 + 20 + 300 + 100 + 400 + 50, "tokens out")
  t.near(m.cost, (7500 * 1 + 1070 * 2) / 1e6, 1e-12, "cost")
  t.eq(m.name, "openai:test-model")
  t.eq(#requests, 8, "HTTP requests the server saw")
end)

t.test("llm_run_proposals_name_their_parent_and_cost", function()
  local p = sm.proposals
  t.eq(#p, 8)
  t.eq(p[1].parent, start.id, "the first prompt showed the start kernel")
  t.eq(p[2].parent, start.id, "the second was sent while the first was evaluated")
  t.eq(p[3].parent, cands[1].id, "the third saw the first accepted")
  t.near(p[1].cost, (1000 + 400) / 1e6, 1e-12, "the first reply's cost")
  t.near(p[5].cost, (1400 + 800) / 1e6, 1e-12, "a sweep's first point carries the reply's cost")
  t.eq(p[6].cost, 0)
  local total = 0
  for _, x in ipairs(p) do total = total + x.cost end
  t.near(total, sm.model.cost, 1e-12, "the proposals' costs add up to the run's")
end)

t.test("llm_run_prompts_hold_the_best_the_failures_the_ideas_and_the_relevant_context", function()
  local first, fourth = requests[2].body, requests[6].body   -- 1: the 429, 3: the 500
  t.eq(first.model, "test-model")
  local user1 = first.messages[2].content
  t.truthy(user1:find("The current best is the start kernel", 1, true), "the best")
  t.truthy(user1:find("Reorder the loops so the inner one is contiguous.", 1, true), "the idea")
  t.truthy(user1:find("## Matmul on the host", 1, true), "the relevant section")
  t.truthy(not user1:find("Warp shuffles", 1, true), "the irrelevant section left out (context_bytes 200)")
  t.truthy(user1:find("| n=96 |", 1, true), "the shape table")
  t.truthy(user1:find("Every candidate exports `void matmul(int n, const float *a, const float *b, float *c)`", 1, true),
           "the prototype")
  t.truthy(first.messages[1].content:find("- global-state: state kept across calls", 1, true), "the rules")
  local user4 = fourth.messages[2].content
  t.truthy(user4:find("The current best (" .. cands[1].id:sub(1, 8), 1, true), "the new best")
  t.truthy(user4:find("no-code: the reply has no ```c code block", 1, true), "the failure")
end)

t.test("llm_run_keeps_the_key_out_of_records_events_and_workers", function()
  t.truthy(not out:find(canary, 1, true), "no key in the output")
  local sent = 0
  for _, r in ipairs(requests) do
    if r.headers.authorization == "Bearer " .. canary then sent = sent + 1 end
    t.truthy(not r.raw:find(canary, 1, true), "no key in a body sent")
  end
  t.eq(sent, 8, "the key went in every request's header")
  local f = assert(io.open(cache_path, "rb"))
  local raw = f:read("a")
  f:close()
  t.truthy(not raw:find(canary, 1, true), "no key in the cache file")
  local cache = assert(require("kwb.cache").open(cache_path))
  local trs = cache:transcripts()
  t.eq(#trs, 6, "one transcript per answered request")
  for _, row in ipairs(trs) do
    local tr = assert(cache:transcript(row.id))
    t.truthy(not tr.request:find(canary, 1, true) and not (tr.reply or ""):find(canary, 1, true), "no key in " .. row.id)
  end
  local env = require("kwb.runners.workers").environment()
  for _, kv in ipairs(env) do t.truthy(not kv:find(canary, 1, true), "worker environment: " .. kv) end
  cache:close()
end)

t.test("llm_run_candidates_name_their_transcript_and_rationale", function()
  local cache = assert(require("kwb.cache").open(cache_path))
  local c = assert(cache:get(cands[1].id))
  t.eq(c.rationale, "The inner loop should be contiguous:")
  t.eq(c.model, "openai:test-model")
  local tr = assert(cache:transcript(c.transcript))
  t.eq(tr.tokens_in, 1000)
  t.truthy(tr.request:find("The current best is the start kernel", 1, true), "the prompt that produced it")
  local nc = assert(cache:get(cands[2].id))
  t.eq(nc.source, "I would first like to see the compiler's vectorisation report.", "a no-code candidate keeps the reply")
  cache:close()
end)

t.test("llm_run_record_keeps_the_usage_and_the_cli_shows_prompt_and_transcripts", function()
  local cache = assert(require("kwb.cache").open(cache_path))
  local runs = cache:runs()
  local u = runs[#runs].usage
  t.eq(u.requests, 6)
  t.eq(u.retries, 2)
  t.eq(u.input, 7500)
  t.eq(u.model, "openai:test-model")
  cache:close()
  local p = assert(io.popen("./kwb --cache " .. cache_path .. " cache show " .. cands[1].id:sub(1, 10)))
  local shown = p:read("a")
  p:close()
  t.truthy(shown:find("rationale  The inner loop should be contiguous:", 1, true), shown)
  t.truthy(shown:find("transcript %x+: openai:test%-model, 1000 tokens in, 200 out, cost 0%.0014"), shown)
  t.truthy(shown:find("\nprompt\n  ", 1, true) and shown:find("The current best is the start kernel", 1, true), shown)
  p = assert(io.popen("./kwb --cache " .. cache_path .. " cache transcripts"))
  local listed = p:read("a")
  p:close()
  local n = 0
  for _ in listed:gmatch("openai:test%-model  template") do n = n + 1 end
  t.eq(n, 6, "six requests for a template (llm+tune):\n" .. listed)
  t.truthy(listed:find("\n1 +%x+ +%x+ +openai:test%-model +template +1000 +200 +0%.0014 +2 +[%d.]+ s +ok\n"), listed)
end)

-- ---- agent: tool calls ----------------------------------------------------

local tools_script = table.concat {
  J(200, O("Let me measure the contiguous version first.", { 100, 10 },
           { { id = "call_1", name = "evaluate", arguments = { source = ikj, shape = "n=64" } },
             { id = "call_1b", name = "evaluate", arguments = { source = ikj_unrolled } } })),
  J(200, O("And check this one builds.", { 200, 10 }, { { id = "call_2", name = "compile", arguments = { source = broken } } })),
  J(200, O("The measured kernel is the answer:\n\n" .. block(ikj_unrolled), { 300, 50 })),
}

local srv2 = httpd.start(tools_script)
local events2, out2 = run_recipe(srv2, "agent", 2)
local reqs2 = srv2:requests()
srv2:stop()
local cands2 = by_event(events2, "candidate")

t.test("agent_run_tool_calls_evaluate_and_compile_then_answer", function()
  t.eq(#cands2, 2, "the evaluated draft and the answer; output:\n" .. out2:sub(1, 2000))
  t.eq(cands2[1].origin, "agent")
  t.eq(cands2[1].outcome, "accepted", "the draft")
  t.truthy(cands2[2].outcome == "slower" or cands2[2].outcome == "accepted", cands2[2].outcome)
  t.eq(#reqs2, 3)
  local second = reqs2[2].body.messages
  local tool = second[#second - 1]
  t.eq(tool.role, "tool")
  t.eq(tool.tool_call_id, "call_1")
  t.truthy(tool.content:find(": accepted", 1, true), tool.content)
  t.truthy(tool.content:find("n=64: ", 1, true) and not tool.content:find("n=96: ", 1, true), "the shape asked for")
  t.eq(second[#second].content, "error: the run's candidate budget is spent; give your answer",
       "the budget's last candidate is kept for the answer")
  t.eq(second[#second - 2].tool_calls[1]["function"].name, "evaluate", "the assistant's calls go back")
  local third = reqs2[3].body.messages
  t.truthy(third[#third].content:find("^compile%-error: "), third[#third].content)
  t.eq(reqs2[1].body.tools[1]["function"].name, "compile", "the tools offered")
  local sm2 = by_event(events2, "summary")[1]
  t.eq(sm2.model.requests, 3)
  t.eq(sm2.model.input, 600)
end)

t.test("agent_run_last_turn_keeps_the_anthropic_tools_with_tool_choice_none", function()
  local A = httpd.anthropic
  local srv4 = httpd.start(table.concat {
    J(200, A("The best first.", { 10, 1 }, { { id = "tu_1", name = "best", arguments = { detail = "" } } })),
    J(200, A("Again.", { 10, 1 }, { { id = "tu_2", name = "best", arguments = { detail = "" } } })),
    J(200, A("Does it build?", { 10, 1 }, { { id = "tu_3", name = "compile", arguments = { source = ikj } } })),
    J(200, A("The answer:\n\n" .. block(ikj), { 10, 1 })),
  })
  local events4, out4 = run_recipe(srv4, "agent", 1, "KWB_TEST_MODEL_PROVIDER=anthropic KWB_TEST_MODEL_URL=" .. srv4.url)
  local reqs = srv4:requests()
  srv4:stop()
  t.eq(#reqs, 4, "three turns of tool calls and the answer's; output:\n" .. out4:sub(1, 2000))
  local function names(body)
    local out = {}
    for i, tool in ipairs(body.tools or {}) do out[i] = tool.name end
    return table.concat(out, " ")
  end
  for i = 1, 3 do
    t.eq(names(reqs[i].body), "compile evaluate best read_context", "the tools of turn " .. i)
    t.eq(reqs[i].body.tool_choice, nil, "turn " .. i .. " lets the model choose")
  end
  local last = reqs[4].body
  local uses = 0
  for _, m in ipairs(last.messages) do
    for _, b in ipairs(type(m.content) == "table" and m.content or {}) do
      if b.type == "tool_use" then uses = uses + 1 end
    end
  end
  t.eq(uses, 3, "the last request's history holds the three tool_use blocks")
  t.eq(names(last), "compile evaluate best read_context", "the last request still defines the tools")
  t.eq(last.tool_choice and last.tool_choice.type, "none", "and asks for no call")
  local c = by_event(events4, "candidate")
  t.eq(#c, 1, "the answer is the candidate")
  t.eq(c[1].outcome, "accepted")
end)

t.test("llm_run_cost_counts_a_timed_out_request_as_estimated", function()
  -- the first try outlives the model's timeout (0.5 s) and is served anyway;
  -- the retry answers: the run's cost is the reply's and the lost try's estimate
  -- (its body's bytes / 4 in, 8192 out: no max_tokens asked), over budget.cost
  local reply = O("The inner loop should be contiguous:\n\n" .. block(ikj), { 1000, 200 })
  local srv5 = httpd.start(J(200, reply, nil, "delay=2") .. J(200, reply))
  local events5, out5 = run_recipe(srv5, "tune", 8, "KWB_TEST_MODEL_TIMEOUT=0.5 KWB_TEST_COST=0.01")
  local reqs = srv5:requests()
  srv5:stop()
  local sm5 = by_event(events5, "summary")[1] or {}
  t.truthy(sm5.model, "a summary with the model's part; output:\n" .. out5:sub(1, 2000))
  t.eq(#reqs, 2, "the lost try and the retry")
  t.eq(reqs[1].raw, reqs[2].raw, "the same request")
  local est = #reqs[1].raw // 4
  t.eq(sm5.model.input, 1000 + est)
  t.eq(sm5.model.output, 200 + 8192)
  t.eq(sm5.model.cost, ((1000 + est) * 1 + (200 + 8192) * 2) / 1e6, "the run's cost")
  t.eq(sm5.model.estimated, true)
  t.eq(sm5.model.unseen, 1)
  t.eq(sm5.model.requests, 1)
  t.eq(sm5.stopped, "the cost budget (0.01) is spent", "the estimate spent the budget")
  t.eq(#by_event(events5, "candidate"), 1, "the reply paid for is still evaluated")
end)

t.test("a_run_whose_model_keeps_failing_stops_and_exits_1", function()
  local bad = J(400, '{"error": {"message": "no such model"}}')
  local srv3 = httpd.start(bad .. bad .. bad)
  local cache = tmp .. "/llm_fail.db"
  local rc = os.execute(string.format("KWB_TEST_MODEL_URL=%s/v1 KWB_TEST_MODEL_KEY=%s KWB_CACHE=%s ./kwb "
                                      .. "tests/recipes/llm_host.lua --quiet >%s/fail.out 2>&1", srv3.url, canary, cache, tmp))
  srv3:stop()
  t.eq(rc, nil, "a failed run's exit status is not 0")
  local f = assert(io.open(tmp .. "/fail.out"))
  local text = f:read("a")
  f:close()
  t.truthy(text:find("stopped: the model failed 3 times in a row: openai:test-model: HTTP 400: no such model", 1, true), text)
end)

-- ---- --model PROVIDER:NAME ---------------------------------------------------

t.test("run_option_model_parses_provider_and_name", function()
  local cli = require "kwb.cli"
  local function model(v)
    local opts, err = cli.parse_run_options("--model", v)
    if not opts then return err end
    local keys = {}
    for k, x in pairs(opts.model) do keys[#keys + 1] = k .. "=" .. (type(x) == "table" and table.concat(x, " ") or x) end
    table.sort(keys)
    return table.concat(keys, " ")
  end
  t.eq(model("openai:gpt-5"), "model=gpt-5 provider=openai")
  t.eq(model("anthropic:claude-sonnet-4-5"), "model=claude-sonnet-4-5 provider=anthropic")
  t.eq(model("openai:openai/o3:beta"), "model=openai/o3:beta provider=openai", "the name is what follows the first ':'")
  t.eq(model("replay:recipes/transcripts/host_matmul_llm.json"),
       "file=recipes/transcripts/host_matmul_llm.json provider=replay")
  t.eq(model("command:sh -c cat"), "command=sh -c cat provider=command")
  t.eq(model("gpt-5"), "'--model' needs PROVIDER:NAME (providers: openai, anthropic, command, replay), got 'gpt-5'")
  t.eq(model("gemini:pro"), "'--model gemini:pro': unknown provider 'gemini' (known: openai, anthropic, command, replay)")
  t.eq(model("openai:"), "'--model openai:': openai:, then a model name")
  t.eq(model("replay: "), "'--model replay: ': replay:, then a transcript file")
  t.eq(model("command:no-such-program-kwb"), "'--model command:no-such-program-kwb': no-such-program-kwb is not a program on PATH")
  t.eq(select(2, cli.parse_run_options("--model")), "'--model' needs PROVIDER:NAME, got nothing")
  local was = { provider = "openai", model = "m", base_url = "http://127.0.0.1:9/v1", key_env = "K", price = { input = 1 },
                temperature = 0.5, max_tokens = 9, timeout = 3, fallback = { provider = "openai", model = "f" },
                context_bytes = 200, profile = true }
  local now = cli.with_model(was, { provider = "anthropic", model = "claude-sonnet-4-5" })
  local keys = {}
  for k in pairs(now) do keys[#keys + 1] = k end
  table.sort(keys)
  t.eq(table.concat(keys, " "), "context_bytes model profile provider", "the recipe's prompt settings alone stay")
end)

t.test("run_option_model_replaces_the_recipes_model_for_the_run", function()
  local file = tmp .. "/model_replay.json"
  local f = assert(io.open(file, "w"))
  f:write(cjson.encode { replies = { { text = "Contiguous:\n\n" .. block(ikj), usage = { input = 40, output = 4 } } } })
  f:close()
  -- the recipe's model is the scripted server, which has nothing to say: the run never asks it
  local srv6 = httpd.start("")
  local events6, out6 = run_recipe(srv6, "tune", 1, nil, "--model replay:" .. file)
  local reqs = srv6:requests()
  srv6:stop()
  local sm6 = by_event(events6, "summary")[1] or {}
  t.truthy(sm6.model, "a summary with the model's part; output:\n" .. out6:sub(1, 2000))
  t.eq(sm6.model.name, "replay:" .. file, "the summary names the option's model")
  t.eq(sm6.model.requests, 1)
  t.eq(sm6.model.input, 40)
  t.eq(sm6.proposals[1].model, "replay:" .. file, "its proposal names it")
  t.eq(#reqs, 0, "the recipe's model was not asked")
  -- openai:NAME goes to OpenAI with its own key variable, not the recipe's server or key_env
  local srv7 = httpd.start("")
  local events7, out7 = run_recipe(srv7, "tune", 1, "OPENAI_API_KEY=", "--model openai:gpt-5")
  local reqs7 = srv7:requests()
  srv7:stop()
  local sm7 = by_event(events7, "summary")[1] or {}
  t.truthy(sm7.model, "output:\n" .. out7:sub(1, 2000))
  t.eq(sm7.model.name, "openai:gpt-5")
  t.eq(sm7.stopped, "the model failed 3 times in a row: openai:gpt-5: the variable OPENAI_API_KEY (model.key_env) is not set")
  t.eq(#reqs7, 0, "nothing went to the recipe's server")
end)

-- ---- the CPU demo: the hand-written transcript, replayed ---------------------

t.test("demo_replays_its_transcript_when_no_model_is_configured", function()
  local cache = tmp .. "/demo.db"
  local p = assert(io.popen("env -u KWB_MODEL KWB_CACHE=" .. cache .. " ./kwb demo --plain 2>&1"))
  local text = p:read("a")
  p:close()
  t.truthy(text:find("kwb demo: no model is configured (KWB_MODEL is not set), so the model's replies are replayed from "
                     .. "recipes/transcripts/host_matmul_llm.json, written by hand", 1, true), text:sub(1, 600))
  local outcomes = {}
  for o in text:gmatch("%[%s*%d+/12%] %x+ (%S+)") do outcomes[#outcomes + 1] = o end
  t.eq(#outcomes, 10, "five replies, one of them swept over six points:\n" .. text:sub(1, 3000))
  t.eq(outcomes[1], "accepted", "i-k-j")
  t.eq(outcomes[2], "forbidden", "the cached product")
  t.eq(outcomes[3], "no-code", "the question")
  t.eq(outcomes[4], "wrong", "the strips that miss the tail")
  t.truthy(text:find("stopped: the transcript recipes/transcripts/host_matmul_llm.json has no reply left (5 replayed)", 1, true))
end)

-- The GPU demo says the same of its own transcript (the flagship, recipes/nvfp4_moe.lua).
t.test("demo_names_the_flagships_transcript_too", function()
  local demo = require "kwb.cli.demo"
  local saved = os.getenv("KWB_MODEL")
  t.eq(saved, nil, "the tests run with KWB_MODEL unset")
  t.eq(demo.model_line(demo.gpu_recipe), "kwb demo: no model is configured (KWB_MODEL is not set), so the model's "
       .. "replies are replayed from recipes/transcripts/nvfp4_moe.json, written by hand; README: \"Pointing a recipe "
       .. "at a model\"")
  t.eq(demo.model_line(demo.gpu_recipe, "--json", "--model", "anthropic:claude-sonnet-4-5"),
       "kwb demo: the model is anthropic:claude-sonnet-4-5 (--model)")
  t.eq(require("kwb.load").load(demo.gpu_recipe).model.file:match("recipes/transcripts/.*$"), demo.transcripts[demo.gpu_recipe])
end)

t.done()
