-- kwb/model/init.lua: the model behind a recipe's `model` field, whichever
-- provider serves it (kwb/agents/: openai, anthropic, command, replay),
-- with its fallbacks, its usage and its transcript.
--
--   local a = agent.new(recipe.model, { record = function(t) ... end })
--   local t = a:ask { system = "...", messages = { { role = "user", content = "..." } }, tools = {...} }
--   a:poll(0)                  -- HTTP requests move on while workers evaluate
--   local reply = a:wait(t)    -- { text =, tool_calls =, usage =, cost =, seconds =, model =, transcript = }
--                              -- or { error =, code = } when every model of the chain failed
--   a.usage                    -- { requests =, retries =, failures =, input =, output =, cost =,
--                              --   estimated = (some token counts are estimates), unseen = (HTTP
--                              --   tries whose usage never came, counted as estimates) }
--
-- The API key is read from the variable `key_env` names when a request is
-- made and goes only into that request's headers: the transcript holds the
-- body sent and the body received, with any copy of the key replaced.
local cjson = require "cjson"
local core = require "kwb.core"
local http = require "kwb.base.http"

local M = {}

M.providers = { "openai", "anthropic", "command", "replay" }

local Agent = {}
Agent.__index = Agent

function M.provider(name)
  for _, p in ipairs(M.providers) do
    if p == name then return require("kwb.model.providers." .. p) end
  end
  return nil
end

-- The chain: the model, then its fallbacks in order.
local function chain(spec)
  local out = { spec }
  local fb = spec.fallback
  if fb and (fb.provider or fb.model) then fb = { fb } end
  for _, f in ipairs(fb or {}) do out[#out + 1] = f end
  return out
end

-- new(spec, { record = fn(transcript) -> id, http = client options, seed =, usage = }) -> agent;
-- spec a list of models: kwb.model.several's, a bandit choosing among them
-- (seed: its draws'); usage: a table the counts go into (several models share one)
function M.new(spec, opts)
  opts = opts or {}
  local several = require "kwb.model.several"
  if several.is_list(spec) then return several.new(spec, opts, M) end
  local a = setmetatable({ chain = chain(spec), record = opts.record, http_opts = opts.http, state = {},
                           usage = opts.usage or { requests = 0, retries = 0, failures = 0, input = 0, output = 0,
                                                   cost = 0 } },
                         Agent)
  for _, s in ipairs(a.chain) do
    if not M.provider(s.provider) then
      error(string.format("model.provider: unknown provider '%s' (known: %s)", tostring(s.provider),
                          table.concat(M.providers, ", ")), 0)
    end
  end
  return a
end

-- from_env() -> the model KWB_PROVIDER, KWB_MODEL, KWB_BASE_URL and
-- KWB_KEY_ENV describe, or nil when KWB_MODEL is not set.
function M.from_env()
  local model = os.getenv("KWB_MODEL")
  if not model or model == "" then return nil end
  local function var(name)
    local v = os.getenv(name)
    return v ~= "" and v or nil
  end
  return { provider = var("KWB_PROVIDER") or "openai", model = model, base_url = var("KWB_BASE_URL"),
           key_env = var("KWB_KEY_ENV") }
end

-- prompt_of(transcript) -> system, user: the texts a recorded request asked
-- with (the last user message of a conversation).
function M.prompt_of(tr)
  if tr.provider ~= "openai" and tr.provider ~= "anthropic" then return nil, tr.request end
  local ok, body = pcall(cjson.decode, tr.request)
  if not ok or type(body) ~= "table" or type(body.messages) ~= "table" then return nil, tr.request end
  local system, user = type(body.system) == "string" and body.system or nil, nil
  for _, m in ipairs(body.messages) do
    if m.role == "system" and type(m.content) == "string" then system = m.content end
    if m.role == "user" and type(m.content) == "string" then user = m.content end
  end
  return system, user
end

-- Does every model of the chain take tool calls?
function Agent:tools()
  for _, s in ipairs(self.chain) do
    if M.provider(s.provider).tools == false then return false, s.provider end
  end
  return true
end

-- name(spec) -> "provider:model" (the program, the transcript); a list's: its models' names
function M.name(spec)
  if require("kwb.model.several").is_list(spec) then
    local names = {}
    for i, s in ipairs(spec) do names[i] = M.name(s) end
    return table.concat(names, ", ")
  end
  return spec.provider .. ":" .. (spec.model or (spec.command and spec.command[1]) or spec.file or "?")
end

-- key_names(spec) -> the variables the chain's keys may come from (workers
-- get none of them, nor their values).
function M.key_names(spec)
  local names = { "OPENAI_API_KEY", "ANTHROPIC_API_KEY" }
  local arms = require("kwb.model.several").is_list(spec) and spec or { spec }
  for _, arm in ipairs(arms) do
    for _, s in ipairs(chain(arm)) do
      if s.key_env then names[#names + 1] = s.key_env end
    end
  end
  return names
end

-- The key for spec, read now; nil when the provider needs none.
local function key_of(spec, mod)
  local var = spec.key_env or (not spec.base_url and mod.key_env) or nil
  if not var then return nil end
  local v = os.getenv(var)
  if not v or v == "" then
    return nil, string.format("the variable %s (model.key_env) is not set", var)
  end
  require("kwb.base.secrets").add(v)   -- (scrubbed from whatever is stored or sent on: kwb.base.secrets)
  return v
end

-- Every copy of the key in text, literal or as JSON writes it, becomes [key].
local function scrub(text, key)
  if type(text) ~= "string" or not key then return text end
  for _, form in ipairs { key, cjson.encode(key):sub(2, -2) } do
    text = text:gsub(form:gsub("%W", "%%%0"), "[key]")
  end
  return text
end

-- The same through a decoded value (a reply's text, tool arguments).
local function scrub_all(v, key)
  if not key then return v end
  if type(v) == "string" then return scrub(v, key) end
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[scrub_all(k, key)] = scrub_all(x, key) end
  return out
end

-- A reply body as kept: scrubbed, and re-encoded from its scrubbed decoding
-- when the key is still in it in some other spelling (\u escapes).
local function keep_body(body, key)
  if type(body) ~= "string" or not key then return body end
  body = scrub(body, key)
  local ok, j = pcall(cjson.decode, body)
  if ok and type(j) == "table" then
    local again = cjson.encode(j)
    if again:find(key, 1, true) then
      local good, clean = pcall(cjson.encode, scrub_all(j, key))
      return good and clean or "[a reply that held the key, not kept]"
    end
  end
  return body
end

local function price(spec, u)
  local p = spec.price
  if not p then return 0 end
  return ((p.input or 0) * u.input + (p.output or 0) * u.output) / 1e6
end

-- Output tokens estimated for a request whose usage never came and that
-- asked for no max_tokens (the provider's own default where it has one).
M.unseen_output = 8192

-- The estimated counts of n HTTP tries of request body `body` on spec whose
-- usage never came (timed out or cut short after they went out, or a reply
-- without usage): input, the body's bytes / 4; output, the max_tokens asked for.
function M.estimate(spec, body, n)
  local mod = M.provider(spec.provider)
  return { input = n * (#body // 4), output = n * (spec.max_tokens or mod.max_tokens or M.unseen_output), requests = n }
end

-- A finished attempt into the usage, the transcript and the ticket. usage:
-- the counts of a reply that was paid for even though it failed; guess:
-- M.estimate's counts of tries whose usage never came, added to them.
function Agent:finish(t, reply, why, sent, received, code, usage, guess)
  local spec = self.chain[t.link]
  local u = self.usage
  local seconds = core.now() - t.started
  if code == "exhausted" then   -- a replayed transcript at its end: nothing was asked of anyone
    t.reply = { error = why, code = code, cost = 0, seconds = 0, model = M.name(spec) }
    return
  end
  why = scrub(why, t.key)
  local tr
  if code ~= "no-key" then   -- without its key nothing was sent: no request, no transcript
    u.requests = u.requests + 1
    tr = { provider = spec.provider, model = M.name(spec), prompt_hash = core.sha256(sent or ""),
           request = scrub(sent or "", t.key), reply = keep_body(received, t.key), seconds = seconds,
           attempts = t.attempts or 1, purpose = t.purpose }
    usage = reply and reply.usage or usage
    if guess then
      usage = { input = (usage and usage.input or 0) + guess.input, output = (usage and usage.output or 0) + guess.output,
                estimated = true }
      u.unseen = (u.unseen or 0) + guess.requests
    end
    if usage then
      local cost = price(spec, usage)
      u.estimated = u.estimated or usage.estimated
      u.input, u.output, u.cost = u.input + usage.input, u.output + usage.output, u.cost + cost
      tr.tokens_in, tr.tokens_out, tr.cost = usage.input, usage.output, cost
      t.cost = cost
      if reply then reply.cost, reply.estimated = cost, guess end
    end
    if not reply then tr.error = why end
    if self.record then tr.id = self.record(tr) end
  end
  if reply then
    reply.text, reply.tool_calls = scrub(reply.text, t.key), scrub_all(reply.tool_calls, t.key)
    reply.seconds, reply.model, reply.provider, reply.transcript = seconds, tr.model, spec.provider, tr.id
    reply.attempts = tr.attempts
    t.reply = reply
    return
  end
  u.failures = u.failures + 1
  t.errors[#t.errors + 1] = M.name(spec) .. ": " .. why
  if t.link < #self.chain then   -- the next model of the chain
    t.link = t.link + 1
    return self:start(t)
  end
  t.reply = { error = table.concat(t.errors, "; "), code = code or "model-failed", transcript = tr and tr.id,
              cost = t.cost or 0, estimated = guess, seconds = seconds, model = M.name(spec) }
end

function Agent:client()
  if not self.http then self.http = http.client(self.http_opts) end
  return self.http
end

-- Start the ticket's request on its current model. Nothing a reply holds
-- may raise here: a conversation that cannot be sent fails the request.
function Agent:start(t)
  local spec = self.chain[t.link]
  local mod = M.provider(spec.provider)
  t.started, t.key, t.attempts, t.cost = core.now(), nil, 1, nil
  if mod.call then   -- a program or a transcript: answered now
    local ok, reply, why, prompt, exhausted = pcall(mod.call, spec, t.convo, self.state, t.purpose)
    if not ok then reply, why = nil, tostring(reply) end
    return self:finish(t, reply, why, prompt, reply and (reply.raw or reply.text) or nil, exhausted and "exhausted" or nil)
  end
  local key, why = key_of(spec, mod)
  if why then return self:finish(t, nil, why, nil, nil, "no-key") end
  t.key = key
  local ok, req = pcall(mod.request, spec, t.convo, key)
  if not ok then return self:finish(t, nil, "cannot encode the conversation: " .. tostring(req), nil, nil, "bad-request") end
  t.req = req
  t.req.timeout = spec.timeout
  t.http = self:client():post(t.req)
  self.flying[#self.flying + 1] = t
end

-- Bytes of a body that is not the API's error an error message quotes.
M.error_bytes = 300

-- excerpt(text, n) -> its first n bytes (back to a whole UTF-8 character),
-- each run of white space as one space, "..." where it was cut.
function M.excerpt(text, n)
  text = text or ""
  local head = text:sub(1, n)
  if #text > n then
    local i = #head   -- a character cut in two is left out
    while i > 0 and head:byte(i) >= 0x80 and head:byte(i) < 0xC0 do i = i - 1 end
    if i > 0 and head:byte(i) >= 0xC0 then
      local len = head:byte(i) >= 0xF0 and 4 or head:byte(i) >= 0xE0 and 3 or 2
      if i + len - 1 > #head then head = head:sub(1, i - 1) end
    end
  end
  head = head:gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
  return #text > n and head .. "..." or head
end

-- An HTTP ticket whose request finished.
function Agent:landed(t)
  local r = t.http.result
  local mod = M.provider(self.chain[t.link].provider)
  t.attempts = r.attempts
  self.usage.retries = self.usage.retries + r.retries
  local why, reply, usage
  -- tries the server may have served whose usage never came (timed out or
  -- cut short after they went out, or a reply without usage) count as estimates
  local unseen = r.unseen or 0
  if r.code then why = string.format("%s (%s)", r.error, r.code)
  else
    local ok, j = pcall(cjson.decode, r.body)
    if ok and type(j) == "table" then usage = mod.usage(j) end
    if r.status == 200 and not (ok and type(j) == "table" and type(j.usage) == "table") then unseen = unseen + 1 end
    if r.status ~= 200 and ok and type(j) == "table" and j.error ~= nil then   -- the API's own error
      local text = mod.error_text(j)
      why = string.format("HTTP %d%s", r.status, text and (": " .. text) or "")
    elseif r.status ~= 200 then   -- a proxy's page, a wrong path: where it came from and how it begins
      local head = M.excerpt(scrub(r.body, t.key), M.error_bytes)
      why = string.format("HTTP %d from %s%s", r.status, t.req.url, head ~= "" and (": " .. head) or " (an empty body)")
    elseif not ok or type(j) ~= "table" then why = "the reply is not JSON: " .. tostring(j)
    else
      local good, rep, err = pcall(mod.parse, j)
      if good then reply, why = rep, err else why = "the reply cannot be read: " .. tostring(rep) end
    end
  end
  local guess = unseen > 0 and M.estimate(self.chain[t.link], t.req.body, unseen) or nil
  self:finish(t, reply, why, t.req.body, r.body, r.code or (r.status ~= 200 and "http-" .. r.status) or nil, usage, guess)
end

-- ask(convo [, purpose]) -> ticket
function Agent:ask(convo, purpose)
  self.flying = self.flying or {}
  local t = { convo = convo, link = 1, errors = {}, purpose = purpose }
  self:start(t)
  return t
end

-- poll(seconds): moves every request on, handling those that finished.
function Agent:poll(seconds)
  if not self.http or not self.flying or #self.flying == 0 then return end
  self.http:poll(seconds)
  for i = #self.flying, 1, -1 do
    local t = self.flying[i]
    if t.http.result then
      table.remove(self.flying, i)
      self:landed(t)
    end
  end
end

-- settle(): every request in flight answered (a request asked after it
-- reaches the server after them all: requests go in the order they were asked).
function Agent:settle()
  while self.flying and #self.flying > 0 do self:poll(1) end
end

-- wait(ticket) -> its reply
function Agent:wait(t)
  while not t.reply do self:poll(1) end
  return t.reply
end

function Agent:close()
  if self.http then self.http:close() end
end

return M
