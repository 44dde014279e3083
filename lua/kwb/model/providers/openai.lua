-- kwb/model/providers/openai.lua: the chat completions API (POST {base_url}/chat/completions),
-- which OpenAI serves and so do vLLM, llama.cpp's server, Ollama, OpenRouter
-- and LiteLLM under their own base_url. kwb.model sends the request and
-- reads the reply through these two functions.
local cjson = require "cjson"
local wire = require "kwb.model.providers.wire"

local M = { name = "openai", base_url = "https://api.openai.com/v1", key_env = "OPENAI_API_KEY" }

local function message(m)
  if m.role == "tool" then return { role = "tool", tool_call_id = m.tool_call_id, content = m.content } end
  local out = { role = m.role, content = m.content }
  if m.tool_calls and #m.tool_calls > 0 then
    out.tool_calls = {}
    for i, c in ipairs(m.tool_calls) do
      out.tool_calls[i] = { id = c.id, type = "function",
                            ["function"] = { name = c.name, arguments = c.raw_arguments or cjson.encode(c.arguments or {}) } }
    end
  end
  return out
end

-- Is the model one of OpenAI's reasoning models (o1, o3, o4-mini, ..., gpt-5*)?
-- They take max_completion_tokens for max_tokens, and no temperature but
-- the default. A "vendor/" prefix (OpenRouter's "openai/o3") is looked past.
function M.reasoning(name)
  local base = type(name) == "string" and name:match("[^/]*$") or ""
  return base:match("^o%d") ~= nil or base:match("^gpt%-5") ~= nil
end

-- request(spec, convo, key) -> { url =, headers =, body = }. convo: { system =,
-- messages = { { role =, content =, tool_calls =, tool_call_id = } }, tools =,
-- tool_choice = "none" (the tools defined, none to be called) }.
function M.request(spec, convo, key)
  local msgs = {}
  if convo.system then msgs[1] = { role = "system", content = convo.system } end
  for _, m in ipairs(convo.messages) do msgs[#msgs + 1] = message(m) end
  local body = { model = spec.model, messages = msgs }
  if M.reasoning(spec.model) then body.max_completion_tokens = spec.max_tokens
  else body.temperature, body.max_tokens = spec.temperature, spec.max_tokens end
  if convo.tools and #convo.tools > 0 then
    body.tools = {}
    for i, t in ipairs(convo.tools) do
      body.tools[i] = { type = "function", ["function"] = { name = t.name, description = t.description,
                                                           parameters = t.parameters } }
    end
    if convo.tool_choice == "none" then body.tool_choice = "none" end
  end
  local headers = { "Content-Type: application/json" }
  if key then headers[#headers + 1] = "Authorization: Bearer " .. key end
  return { url = (spec.base_url or M.base_url):gsub("/+$", "") .. "/chat/completions", headers = headers,
           body = cjson.encode(body) }
end

-- parse(decoded JSON) -> { text =, tool_calls =, usage = { input =, output = }, stop = } | nil, why
function M.parse(j)
  local choice = type(j.choices) == "table" and j.choices[1]
  local msg = type(choice) == "table" and choice.message
  if type(msg) ~= "table" then return nil, "the reply has no choices[1].message" end
  local reply = { text = type(msg.content) == "string" and msg.content or "", tool_calls = {},
                  stop = choice.finish_reason ~= cjson.null and choice.finish_reason or nil }
  if type(msg.tool_calls) == "table" then
    for _, c in ipairs(msg.tool_calls) do
      local f = type(c) == "table" and c["function"]
      if type(f) ~= "table" or type(f.name) ~= "string" then return nil, "a tool call without a function name" end
      local ok, args = pcall(cjson.decode, type(f.arguments) == "string" and f.arguments or "{}")
      -- the arguments go back in the conversation as the model wrote them
      reply.tool_calls[#reply.tool_calls + 1] = { id = type(c.id) == "string" and c.id or nil, name = f.name,
                                                  arguments = ok and type(args) == "table" and args or nil,
                                                  raw_arguments = type(f.arguments) == "string" and f.arguments or "{}" }
    end
  end
  reply.usage = M.usage(j)
  return reply
end

-- The token counts of a reply (also of one that does not parse: it was paid for).
function M.usage(j) return wire.usage(j.usage, "prompt_tokens", "completion_tokens") end

M.error_text = wire.error_text

return M
