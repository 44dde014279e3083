-- tests/lua/test_agents.lua: HTTP with retries (kwb.base.http) and the model
-- providers (kwb.model, kwb/agents/) against the scripted server
-- build/httpd: what is sent, what is retried, what a reply becomes, usage,
-- cost, fallbacks, and that the key goes into the request's headers only.
local core = require "kwb.core"

local canary = "sk-canary-7f3a9c1e5b"
if os.getenv("KWB_TEST_MODEL_KEY") ~= canary then   -- run again with the key set
  local ok, how, code = os.execute("KWB_TEST_MODEL_KEY=" .. canary .. " KWB_LLM=" .. canary
                                   .. " ./kwb tests/lua/test_agents.lua")
  os.exit(ok and 0 or (how == "exit" and code or 1))
end

local t = require "t"
local agent = require "kwb.model"
local httpd = require "httpd"
local http = require "kwb.base.http"
local cjson = require "cjson"

local J = httpd.entry

local function with_server(script, fn)
  local srv = httpd.start(script)
  local ok, err = pcall(fn, srv)
  srv:stop()
  if not ok then error(err, 0) end
end

local function ask(a, text)
  return a:wait(a:ask({ system = "You write kernels.", messages = { { role = "user", content = text or "go" } } }))
end

-- ---- kwb.base.http --------------------------------------------------------------

t.test("http_posts_the_body_and_headers_it_is_given", function()
  with_server(J(200, '{"ok": true}'), function(srv)
    local c = http.client()
    local r = c:wait(c:post { url = srv.url .. "/v1/x", headers = { "Content-Type: application/json", "X-Test: 1" },
                              body = '{"a": 1}' })
    t.eq(r.status, 200, "status")
    t.eq(r.body, '{"ok": true}', "body")
    t.eq(r.attempts, 1, "attempts")
    t.eq(r.headers["content-type"], "application/json", "reply header")
    local req = srv:requests()[1]
    t.eq(req.method, "POST")
    t.eq(req.path, "/v1/x")
    t.eq(req.headers["x-test"], "1")
    t.eq(req.body.a, 1, "body sent")
    c:close()
  end)
end)

t.test("http_429_waits_for_retry_after_then_succeeds", function()
  with_server(J(429, '{"error": "slow down"}', { "Retry-After: 1" }) .. J(200, '{"ok": 2}'), function(srv)
    local c = http.client()
    local t0 = core.now()
    local r = c:wait(c:post { url = srv.url .. "/v1/x", body = "{}" })
    local dt = core.now() - t0
    t.eq(r.status, 200)
    t.eq(r.attempts, 2, "attempts")
    t.eq(r.retries, 1, "retries")
    t.truthy(dt >= 1.0 and dt < 4, "waited the Retry-After second: " .. dt)
    t.eq(#srv:requests(), 2, "requests the server saw")
  end)
end)

t.test("http_500_is_retried_with_backoff_and_400_is_final", function()
  with_server(J(500, "{}") .. J(503, "{}") .. J(200, '{"n": 3}') .. J(400, '{"error": "bad"}') .. J(200, "{}"),
    function(srv)
      local c = http.client { base_delay = 0.05 }
      local r = c:wait(c:post { url = srv.url .. "/a", body = "{}" })
      t.eq(r.status, 200, "third try")
      t.eq(r.attempts, 3, "attempts")
      r = c:wait(c:post { url = srv.url .. "/b", body = "{}" })
      t.eq(r.status, 400, "a 400 is not retried")
      t.eq(r.attempts, 1, "attempts of the 400")
    end)
end)

t.test("http_gives_up_after_its_retries", function()
  with_server(J(503, "{}") .. J(503, "{}") .. J(503, "{}") .. J(200, "{}"), function(srv)
    local c = http.client { base_delay = 0.01, retries = 2 }
    local r = c:wait(c:post { url = srv.url .. "/a", body = "{}" })
    t.eq(r.status, 503)
    t.eq(r.attempts, 3)
  end)
end)

t.test("http_a_reply_slower_than_the_timeout_is_retried", function()
  with_server(J(200, '{"late": 1}', nil, "delay=3") .. J(200, '{"on_time": 1}'), function(srv)
    local c = http.client { base_delay = 0.01 }
    local t0 = core.now()
    local r = c:wait(c:post { url = srv.url .. "/a", body = "{}", timeout = 0.5 })
    t.eq(r.status, 200)
    t.eq(r.body, '{"on_time": 1}', "the second reply")
    t.eq(r.attempts, 2)
    t.eq(r.unseen, 1, "one try went out and its reply never came")
    t.truthy(core.now() - t0 < 2.5, "did not wait for the slow reply")
  end)
end)

t.test("http_a_cut_transfer_is_retried", function()
  with_server(J(200, '{"choices": [1, 2, 3]}', nil, "drop=6") .. J(200, '{"whole": true}'), function(srv)
    local c = http.client { base_delay = 0.01 }
    local r = c:wait(c:post { url = srv.url .. "/a", body = "{}" })
    t.eq(r.body, '{"whole": true}')
    t.eq(r.attempts, 2)
  end)
end)

t.test("http_a_refused_connection_fails_with_code_connect", function()
  local c = http.client { retries = 1, base_delay = 0.01 }
  local r = c:wait(c:post { url = "http://127.0.0.1:1/none", body = "{}" })
  t.eq(r.code, "connect")
  t.eq(r.attempts, 2)
  t.eq(r.unseen, 0, "nothing went out")
end)

t.test("http_requests_are_in_flight_together", function()
  with_server(J(200, '{"a": 1}', nil, "delay=1") .. J(200, '{"b": 2}', nil, "delay=1"), function(srv)
    local c = http.client()
    local t0 = core.now()
    local x, y = c:post { url = srv.url .. "/x", body = "{}" }, c:post { url = srv.url .. "/y", body = "{}" }
    t.eq(c:pending(), 2, "both in flight")
    c:wait(x)
    c:wait(y)
    local dt = core.now() - t0
    t.truthy(dt < 1.8, "two 1 s replies took " .. dt .. " s together")
  end)
end)

t.test("http_retry_after_reads_seconds_and_dates", function()
  t.eq(http.retry_after("7"), 7)
  t.eq(http.retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412480 - 30), 30)
  t.eq(http.retry_after("soon"), nil)
end)

-- ---- providers ---------------------------------------------------------------

local function recorder()
  local recs = {}
  return recs, function(tr) recs[#recs + 1] = tr; return "tr" .. #recs end
end

t.test("openai_request_and_reply", function()
  with_server(J(200, httpd.openai("Here:\n```c\nint x;\n```", { 1200, 300 })), function(srv)
    local recs, record = recorder()
    local a = agent.new({ provider = "openai", model = "gpt-test", base_url = srv.url .. "/v1", key_env = "KWB_TEST_MODEL_KEY",
                          temperature = 0.2, max_tokens = 999, price = { input = 2, output = 8 } }, { record = record })
    local r = ask(a, "write it")
    t.eq(r.text, "Here:\n```c\nint x;\n```")
    t.eq(r.usage.input, 1200)
    t.eq(r.usage.output, 300)
    t.near(r.cost, (1200 * 2 + 300 * 8) / 1e6, 1e-12, "cost")
    t.eq(r.transcript, "tr1")
    local req = srv:requests()[1]
    t.eq(req.path, "/v1/chat/completions")
    t.eq(req.headers.authorization, "Bearer " .. canary, "the key goes in the header")
    t.eq(req.body.model, "gpt-test")
    t.eq(req.body.temperature, 0.2)
    t.eq(req.body.max_tokens, 999)
    t.eq(req.body.messages[1].role, "system")
    t.eq(req.body.messages[2].content, "write it")
    t.eq(a.usage.requests, 1)
    t.eq(a.usage.input, 1200)
    t.eq(#recs, 1)
    t.eq(recs[1].tokens_in, 1200)
    t.eq(recs[1].model, "openai:gpt-test")
    t.truthy(not recs[1].request:find(canary, 1, true), "no key in the recorded request")
    t.truthy(recs[1].request:find('"write it"', 1, true), "the recorded request is the body sent")
    t.truthy(not req.raw:find(canary, 1, true), "no key in the body sent")
  end)
end)

-- The body's fields by name, sorted: "max_tokens messages model temperature".
local function fields(body)
  local names = {}
  for k in pairs(body) do names[#names + 1] = k end
  table.sort(names)
  return table.concat(names, " ")
end

t.test("openai_reasoning_models_send_max_completion_tokens_and_no_temperature", function()
  with_server(J(200, httpd.openai("a", { 1, 1 })) .. J(200, httpd.openai("b", { 1, 1 })), function(srv)
    for _, name in ipairs { "gpt-5", "gpt-4.1" } do
      local a = agent.new { provider = "openai", model = name, base_url = srv.url .. "/v1", temperature = 0.2,
                            max_tokens = 999 }
      t.eq(ask(a).text, name == "gpt-5" and "a" or "b", name)
    end
    local reqs = srv:requests()
    t.eq(fields(reqs[1].body), "max_completion_tokens messages model", "gpt-5's fields")
    t.eq(reqs[1].body.max_completion_tokens, 999, "gpt-5's max_completion_tokens")
    t.eq(fields(reqs[2].body), "max_tokens messages model temperature", "gpt-4.1's fields")
    t.eq(reqs[2].body.max_tokens, 999, "gpt-4.1's max_tokens")
    t.eq(reqs[2].body.temperature, 0.2, "gpt-4.1's temperature")
  end)
  local openai = require "kwb.model.providers.openai"
  local said = {}
  for _, name in ipairs { "o1", "o1-mini", "o3", "o3-mini", "o4-mini", "gpt-5", "gpt-5-mini", "openai/o3", "gpt-4.1",
                          "gpt-4o", "omni", "qwen2.5-coder", "claude-sonnet-4-5" } do
    if openai.reasoning(name) then said[#said + 1] = name end
  end
  t.eq(table.concat(said, " "), "o1 o1-mini o3 o3-mini o4-mini gpt-5 gpt-5-mini openai/o3", "the reasoning models")
end)

t.test("anthropic_request_and_reply", function()
  with_server(J(200, httpd.anthropic("A plan, no code yet.", { 50, 7 })), function(srv)
    local a = agent.new { provider = "anthropic", model = "claude-test", base_url = srv.url, key_env = "KWB_TEST_MODEL_KEY" }
    local r = ask(a)
    t.eq(r.text, "A plan, no code yet.")
    t.eq(r.usage.input, 50)
    t.eq(r.usage.output, 7)
    t.eq(r.cost, 0, "no price: no cost")
    local req = srv:requests()[1]
    t.eq(req.path, "/v1/messages")
    t.eq(req.headers["x-api-key"], canary)
    t.eq(req.headers["anthropic-version"], "2023-06-01")
    t.eq(req.body.system, "You write kernels.")
    t.eq(req.body.max_tokens, 8192, "the default max_tokens")
    t.eq(req.body.messages[1].role, "user")
  end)
end)

t.test("tool_calls_parse_in_both_apis", function()
  local calls = { { id = "c1", name = "evaluate", arguments = { source = "int x;", shape = "n=64" } } }
  with_server(J(200, httpd.openai("", { 1, 1 }, calls)) .. J(200, httpd.anthropic("thinking", { 1, 1 }, calls)),
    function(srv)
      local tools = { { name = "evaluate", description = "d", parameters = { type = "object", properties = { source = { type = "string" } } } } }
      for _, spec in ipairs { { provider = "openai", model = "m", base_url = srv.url .. "/v1" },
                              { provider = "anthropic", model = "m", base_url = srv.url, key_env = "KWB_TEST_MODEL_KEY" } } do
        local a = agent.new(spec)
        local r = a:wait(a:ask { messages = { { role = "user", content = "go" } }, tools = tools })
        t.eq(#r.tool_calls, 1, spec.provider)
        t.eq(r.tool_calls[1].name, "evaluate")
        t.eq(r.tool_calls[1].id, "c1")
        t.eq(r.tool_calls[1].arguments.shape, "n=64")
      end
      local reqs = srv:requests()
      t.eq(reqs[1].body.tools[1]["function"].name, "evaluate", "openai tools")
      t.eq(reqs[2].body.tools[1].input_schema.type, "object", "anthropic tools")
    end)
end)

t.test("tool_choice_none_keeps_the_tools_in_both_apis", function()
  with_server(J(200, httpd.openai("done", { 1, 1 })) .. J(200, httpd.anthropic("done", { 1, 1 })), function(srv)
    local tools = { { name = "best", description = "d", parameters = { type = "object", properties = {} } } }
    local convo = { messages = { { role = "user", content = "go" },
                                 { role = "assistant", content = "", tool_calls = { { id = "c1", name = "best", arguments = {} } } },
                                 { role = "tool", tool_call_id = "c1", content = "no best yet" } },
                    tools = tools, tool_choice = "none" }
    for _, spec in ipairs { { provider = "openai", model = "m", base_url = srv.url .. "/v1" },
                            { provider = "anthropic", model = "m", base_url = srv.url, key_env = "KWB_TEST_MODEL_KEY" } } do
      local a = agent.new(spec)
      t.eq(a:wait(a:ask(convo)).text, "done", spec.provider)
    end
    local reqs = srv:requests()
    t.eq(reqs[1].body.tools[1]["function"].name, "best", "openai: the tools stay")
    t.eq(reqs[1].body.tool_choice, "none", "openai: no call asked for")
    t.eq(reqs[2].body.tools[1].name, "best", "anthropic: the tools stay")
    t.eq(reqs[2].body.tool_choice.type, "none", "anthropic: no call asked for")
    t.eq(reqs[2].body.messages[2].content[1].type, "tool_use", "anthropic: beside the history's tool_use block")
  end)
end)

t.test("a_truncated_json_reply_falls_back_to_the_next_model", function()
  with_server(J(200, '{"choices": [{"message": {"content": "he') .. J(200, httpd.openai("from the fallback", { 3, 4 })),
    function(srv)
      local recs, record = recorder()
      local a = agent.new({ provider = "openai", model = "first", base_url = srv.url .. "/v1",
                            fallback = { provider = "openai", model = "second", base_url = srv.url .. "/v1" } },
                          { record = record })
      local r = ask(a)
      t.eq(r.text, "from the fallback")
      t.eq(r.model, "openai:second")
      t.eq(#recs, 2, "both requests recorded")
      t.truthy(recs[1].error:find("the reply is not JSON", 1, true), recs[1].error)
      t.eq(a.usage.requests, 2)
      t.eq(a.usage.failures, 1)
      t.eq(srv:requests()[2].body.model, "second")
    end)
end)

t.test("an_http_error_names_the_status_and_the_apis_message", function()
  with_server(J(401, '{"error": {"message": "invalid key"}}'), function(srv)
    local a = agent.new { provider = "openai", model = "m", base_url = srv.url .. "/v1" }
    local r = ask(a)
    t.eq(r.error, "openai:m: HTTP 401: invalid key")
    t.eq(r.code, "http-401")
  end)
end)

t.test("an_http_error_without_the_apis_error_names_the_url_and_the_body", function()
  local html = "<!DOCTYPE html>\n<html>\n  <head><title>404 Not Found</title></head>\n  <body>\n"
               .. string.rep("<p>nothing here</p>\n", 20) .. "</body>\n</html>\n"
  local key_page = string.rep("x", 290) .. canary .. " end"   -- 314 bytes, 299 once the key is replaced
  with_server(J(404, html, { "Content-Type: text/html" }) .. J(410, "", { "Content-Type: text/plain" })
              .. J(404, '{"detail": "Not Found"}') .. J(403, key_page, { "Content-Type: text/plain" }),
    function(srv)
      local a = agent.new { provider = "openai", model = "m", base_url = srv.url .. "/v1" }
      local url = srv.url .. "/v1/chat/completions"
      local r = ask(a)
      -- the first 300 bytes, white space runs as one space
      t.eq(r.error, "openai:m: HTTP 404 from " .. url .. ": <!DOCTYPE html> <html> <head><title>404 Not Found</title>"
                    .. "</head> <body> " .. string.rep("<p>nothing here</p> ", 11) .. "<p>n...")
      t.eq(r.code, "http-404")
      a = agent.new { provider = "openai", model = "m", base_url = srv.url .. "/v1", fallback = {
                      provider = "anthropic", model = "n", base_url = srv.url, key_env = "KWB_TEST_MODEL_KEY" } }
      t.eq(ask(a).error, "openai:m: HTTP 410 from " .. url .. " (an empty body); anthropic:n: HTTP 404 from " .. srv.url
                         .. '/v1/messages: {"detail": "Not Found"}', "an empty body, a JSON body without error")
      a = agent.new { provider = "openai", model = "m", base_url = srv.url .. "/v1", key_env = "KWB_TEST_MODEL_KEY" }
      t.eq(ask(a).error, "openai:m: HTTP 403 from " .. url .. ": " .. string.rep("x", 290) .. "[key] end",
           "the key is replaced before the body is cut")
    end)
  t.eq(agent.excerpt("ab\xc3\xa9c", 3), "ab...", "a character cut in two is left out")
  t.eq(agent.excerpt("ab\xc3\xa9c", 4), "ab\xc3\xa9...", "a whole one stays")
end)

t.test("hostile_replies_fail_the_request_without_raising", function()
  local calls = '{"choices": [{"message": {"content": "", "tool_calls": [{"id": "c1", "type": "function", '
                .. '"function": {"name": "evaluate", "arguments": "{\\"source\\": 1e999}"}}]}}], '
                .. '"usage": {"prompt_tokens": -5, "completion_tokens": 1e999}}'
  with_server(J(400, '{"error": {"message": null}}') .. J(200, calls) .. J(200, '{"choices": [], "usage": '
              .. '{"prompt_tokens": 70, "completion_tokens": 3}}') .. J(200, '{"usage": {"prompt_tokens": NaN}}'),
    function(srv)
      local a = agent.new { provider = "openai", model = "m", base_url = srv.url .. "/v1", price = { input = 1, output = 1 } }
      t.eq(ask(a).error, "openai:m: HTTP 400", "a null error message")
      local r = ask(a)
      t.eq(r.tool_calls[1].raw_arguments, '{"source": 1e999}', "arguments kept as written")
      t.eq(r.usage.input, 0, "a negative count counts nothing")
      t.eq(r.usage.output, 0, "an infinite count counts nothing")
      -- the conversation goes on with those arguments: it still encodes
      local convo = { messages = { { role = "user", content = "go" },
                                   { role = "assistant", content = "", tool_calls = r.tool_calls },
                                   { role = "tool", tool_call_id = "c1", content = "error" } } }
      t.eq(a:wait(a:ask(convo)).error, "openai:m: the reply has no choices[1].message", "the third reply")
      t.eq(a.usage.input, 70, "a reply that does not parse was still paid for")
      t.eq(ask(a).error, "openai:m: the reply has no choices[1].message", "a NaN count")
      t.eq(a.usage.input, 70, "NaN counts nothing")
      t.eq(a.usage.requests, 4)
    end)
end)

t.test("a_request_whose_usage_never_came_counts_as_estimated", function()
  local price = { input = 2, output = 8 }
  local function cost(i, o) return (price.input * i + price.output * o) / 1e6 end
  -- timed out on our side while the server worked on: the body's bytes / 4 in, max_tokens out
  with_server(J(200, httpd.openai("late", { 5, 5 }), nil, "delay=3"), function(srv)
    local a = agent.new({ provider = "openai", model = "m", base_url = srv.url .. "/v1", timeout = 0.5, max_tokens = 1000,
                          price = price }, { http = { retries = 0 } })
    local r = ask(a, "slow")
    t.eq(r.code, "timeout")
    local est = #srv:requests()[1].raw // 4
    t.eq(est, 31, "the body's bytes / 4")
    t.eq(a.usage.input, est, "input estimated")
    t.eq(a.usage.output, 1000, "output: the max_tokens asked for")
    t.eq(a.usage.cost, cost(est, 1000), "cost")
    t.eq(r.cost, cost(est, 1000), "the failed request's cost")
    t.eq(a.usage.estimated, true)
    t.eq(a.usage.unseen, 1)
    t.eq(r.estimated.requests, 1)
  end)
  -- the same, tried again: the answer's counts and the lost try's estimate
  with_server(J(200, httpd.openai("late", { 5, 5 }), nil, "delay=3") .. J(200, httpd.openai("on time", { 100, 10 })),
    function(srv)
      local a = agent.new({ provider = "openai", model = "m", base_url = srv.url .. "/v1", timeout = 0.5, max_tokens = 1000,
                            price = price }, { http = { base_delay = 0.01 } })
      local r = ask(a, "slow")
      t.eq(r.text, "on time")
      t.eq(r.attempts, 2)
      t.eq(r.usage.input, 100, "the reply's own counts")
      t.eq(a.usage.input, 31 + 100)
      t.eq(a.usage.output, 1000 + 10)
      t.eq(r.cost, cost(31 + 100, 1000 + 10), "the reply's cost")
      t.eq(a.usage.cost, r.cost)
      t.eq(r.estimated.input, 31)
    end)
  -- a reply without usage: the provider's max_tokens (anthropic 8192) out
  with_server(J(200, httpd.anthropic("no usage")), function(srv)
    local a = agent.new { provider = "anthropic", model = "m", base_url = srv.url, key_env = "KWB_TEST_MODEL_KEY",
                          price = price }
    t.eq(ask(a, "x").text, "no usage")
    local est = #srv:requests()[1].raw // 4
    t.eq(a.usage.input, est)
    t.eq(a.usage.output, 8192)
    t.eq(a.usage.cost, cost(est, 8192))
    t.eq(a.usage.unseen, 1)
  end)
  -- nothing went out: nothing counted
  local a = agent.new({ provider = "openai", model = "m", base_url = "http://127.0.0.1:1/v1", price = price },
                      { http = { retries = 0 } })
  t.eq(ask(a).code, "connect")
  t.eq(a.usage.input, 0)
  t.eq(a.usage.cost, 0)
  t.eq(a.usage.unseen, nil)
end)

t.test("the_key_is_scrubbed_from_errors_and_replies_in_any_spelling", function()
  local escaped = canary:gsub("s", "\\u0073")
  with_server(J(401, '{"error": {"message": "Incorrect API key provided: ' .. canary .. '"}}')
              .. J(200, '{"choices": [{"message": {"content": "key ' .. canary .. ' and ' .. escaped .. '"}}]}'),
    function(srv)
      local recs, record = recorder()
      local spec = { provider = "openai", model = "m", base_url = srv.url .. "/v1", key_env = "KWB_TEST_MODEL_KEY" }
      local a = agent.new(spec, { record = record })
      local r = ask(a)
      t.eq(r.error, "openai:m: HTTP 401: Incorrect API key provided: [key]")
      t.eq(recs[1].error, "HTTP 401: Incorrect API key provided: [key]")
      r = ask(a)
      t.eq(r.text, "key [key] and [key]", "the reply's text")
      for i, tr in ipairs(recs) do
        t.truthy(not tr.reply:find(canary, 1, true) and not tr.reply:find(escaped, 1, true), "transcript " .. i)
        local ok, j = pcall(cjson.decode, tr.reply)
        t.truthy(not (ok and cjson.encode(j):find(canary, 1, true)), "decoded transcript " .. i)
      end
    end)
end)

t.test("workers_get_no_variable_named_by_key_env_nor_one_holding_its_value", function()
  local workers = require "kwb.runners.workers"
  local function holds(env)
    for _, kv in ipairs(env) do
      if kv:find(canary, 1, true) then return kv:match("^[^=]*") end
    end
    return nil
  end
  t.eq(holds(workers.environment()), "KWB_LLM", "an innocent name passes the allow-list")
  t.eq(holds(workers.environment(nil, { "KWB_TEST_MODEL_KEY" })), nil, "the same value under another name")
  t.eq(holds(workers.environment(nil, agent.key_names { provider = "openai", model = "m", key_env = "KWB_LLM" })), nil)
  local pool = workers.pool { n = 1, deny = agent.key_names { provider = "openai", model = "m", key_env = "KWB_TEST_MODEL_KEY" } }
  local r = pool:wait(pool:submit("kwb.core.environ", {}))
  pool:close()
  t.truthy(r.ok, tostring(r.reason))
  t.eq(holds(r.value), nil, "a real worker's environment")
end)

t.test("a_missing_key_is_an_error_and_nothing_is_sent", function()
  local a = agent.new { provider = "openai", model = "m", key_env = "KWB_TEST_NO_SUCH_KEY" }
  local r = ask(a)
  t.eq(r.error, "openai:m: the variable KWB_TEST_NO_SUCH_KEY (model.key_env) is not set")
  t.eq(r.code, "no-key")
end)

t.test("command_agent_reads_stdin_or_a_prompt_file", function()
  local a = agent.new { provider = "command", command = { "sh", "-c", "tr a-z A-Z" } }
  local r = ask(a, "make it fast")
  t.eq(r.text, "YOU WRITE KERNELS.\n\nMAKE IT FAST", "the prompt went to stdin")
  a = agent.new { provider = "command", command = { "sh", "-c", 'cat "$1"', "sh", "{prompt_file}" } }
  t.eq(ask(a, "x").text, "You write kernels.\n\nx", "the prompt in a file")
  a = agent.new { provider = "command", command = { "sleep", "5" }, timeout = 0.3 }
  local t0 = core.now()
  r = ask(a)
  t.eq(r.error, "command:sleep: sleep ran past its timeout (0.3 s) and was killed")
  t.truthy(core.now() - t0 < 2, "killed on time")
  a = agent.new { provider = "command", command = { "sh", "-c", "echo broken >&2; exit 3" } }
  t.eq(ask(a).error, "command:sh: sh exited with status 3: broken")
end)

t.test("replay_agent_answers_in_order_then_is_exhausted", function()
  local file = os.tmpname()
  local f = assert(io.open(file, "w"))
  f:write('{"replies": [{"text": "one", "usage": {"input": 10, "output": 2}}, {"text": "two"}]}')
  f:close()
  local recs, record = recorder()
  local a = agent.new({ provider = "replay", file = file }, { record = record })
  t.eq(ask(a).text, "one")
  t.eq(ask(a).text, "two")
  local r = ask(a)
  t.eq(r.code, "exhausted")
  t.eq(#recs, 2, "an exhausted transcript records nothing")
  t.eq(a.usage.input, 10 + #"You write kernels.\n\ngo" // 4, "counts, the second estimated")
  t.eq(a.usage.estimated, true)
  os.remove(file)
end)

t.done()
