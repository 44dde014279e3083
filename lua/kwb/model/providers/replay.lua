-- kwb/model/providers/replay.lua: replies read from a transcript file, in order, in
-- place of a model: deterministic demos and tests.
--
--   model = { provider = "replay", file = "transcripts/host_matmul.json" }
--
-- The file: { "replies": [ { "text": "...", "tool_calls": [ { "id":, "name":,
-- "arguments": {} } ], "usage": { "input": 1200, "output": 300 } }, ... ] }
-- (without "usage" the token counts are estimated from the texts' lengths).
local cjson = require "cjson"
local command = require "kwb.model.providers.command"
local wire = require "kwb.model.providers.wire"

local M = { name = "replay", tools = true }

-- load(path) -> replies | raises naming the file and what is wrong
function M.load(path)
  local f, err = io.open(path, "r")
  if not f then error("replay transcript: cannot read " .. tostring(err), 0) end
  local text = f:read("a")
  f:close()
  local ok, j = pcall(cjson.decode, text)
  if not ok then error(string.format("replay transcript %s: not JSON: %s", path, tostring(j)), 0) end
  if type(j) ~= "table" or type(j.replies) ~= "table" then
    error(string.format("replay transcript %s: expected an object with a 'replies' list", path), 0)
  end
  for i, r in ipairs(j.replies) do
    if type(r) ~= "table" or (type(r.text) ~= "string" and type(r.tool_calls) ~= "table") then
      error(string.format("replay transcript %s: replies[%d] needs 'text' or 'tool_calls'", path, i), 0)
    end
  end
  return j.replies
end

-- call(spec, convo, state) -> reply | nil, why: the next recorded reply.
function M.call(spec, convo, state)
  state.replies = state.replies or M.load(spec.file)
  state.next = (state.next or 0) + 1
  local r = state.replies[state.next]
  local prompt = command.text(convo)
  if not r then
    return nil, string.format("the transcript %s has no reply left (%d replayed)", spec.file, #state.replies), prompt, true
  end
  local u = type(r.usage) == "table" and r.usage
  -- a transcript without counts: the texts' lengths stand in (4 bytes a token)
  u = u or { input = #prompt // 4, output = #(r.text or "") // 4, estimated = true }
  local calls = {}
  for i, c in ipairs(type(r.tool_calls) == "table" and r.tool_calls or {}) do
    calls[i] = { id = c.id or ("call_" .. i), name = c.name, arguments = type(c.arguments) == "table" and c.arguments or {} }
  end
  return { text = r.text or "", tool_calls = calls, usage = { input = wire.count(u.input), output = wire.count(u.output),
                                                   estimated = u.estimated },
           raw = cjson.encode(r) }, nil, prompt
end

return M
