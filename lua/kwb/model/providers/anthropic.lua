-- kwb/model/providers/anthropic.lua: the Messages API (POST {base_url}/v1/messages,
-- anthropic-version 2023-06-01). kwb.model sends the request and reads the
-- reply through these functions.
local cjson = require "cjson"
local wire = require "kwb.model.providers.wire"

local M = { name = "anthropic", base_url = "https://api.anthropic.com", key_env = "ANTHROPIC_API_KEY",
            version = "2023-06-01", max_tokens = 8192 }

-- Conversation messages as content blocks: tool results go back in a user
-- turn, tool calls are the assistant's tool_use blocks.
local function messages(convo)
  local out = {}
  for _, m in ipairs(convo.messages) do
    if m.role == "tool" then
      local block = { type = "tool_result", tool_use_id = m.tool_call_id, content = m.content }
      local last = out[#out]
      if last and last.role == "user" and type(last.content) == "table" then last.content[#last.content + 1] = block
      else out[#out + 1] = { role = "user", content = { block } } end
    elseif m.role == "assistant" and m.tool_calls and #m.tool_calls > 0 then
      local blocks = {}
      if m.content and m.content ~= "" then blocks[1] = { type = "text", text = m.content } end
      for _, c in ipairs(m.tool_calls) do
        blocks[#blocks + 1] = { type = "tool_use", id = c.id, name = c.name, input = c.arguments or {} }
      end
      out[#out + 1] = { role = "assistant", content = blocks }
    else
      out[#out + 1] = { role = m.role, content = m.content }
    end
  end
  return out
end

function M.request(spec, convo, key)
  local body = { model = spec.model, max_tokens = spec.max_tokens or M.max_tokens, system = convo.system,
                 messages = messages(convo), temperature = spec.temperature }
  if convo.tools and #convo.tools > 0 then
    body.tools = {}
    for i, t in ipairs(convo.tools) do
      body.tools[i] = { name = t.name, description = t.description, input_schema = t.parameters }
    end
    if convo.tool_choice == "none" then body.tool_choice = { type = "none" } end
  end
  local headers = { "Content-Type: application/json", "anthropic-version: " .. M.version }
  if key then headers[#headers + 1] = "x-api-key: " .. key end
  return { url = (spec.base_url or M.base_url):gsub("/+$", "") .. "/v1/messages", headers = headers,
           body = cjson.encode(body) }
end

function M.parse(j)
  if type(j.content) ~= "table" then return nil, "the reply has no content blocks" end
  local texts, reply = {}, { tool_calls = {}, stop = j.stop_reason ~= cjson.null and j.stop_reason or nil }
  for _, b in ipairs(j.content) do
    if type(b) == "table" and b.type == "text" and type(b.text) == "string" then texts[#texts + 1] = b.text
    elseif type(b) == "table" and b.type == "tool_use" then
      if type(b.name) ~= "string" then return nil, "a tool_use block without a name" end
      reply.tool_calls[#reply.tool_calls + 1] = { id = type(b.id) == "string" and b.id or nil, name = b.name,
                                                  arguments = type(b.input) == "table" and b.input or {} }
    end
  end
  reply.text = table.concat(texts, "\n")
  reply.usage = M.usage(j)
  return reply
end

function M.usage(j) return wire.usage(j.usage, "input_tokens", "output_tokens") end

M.error_text = wire.error_text

return M
