-- kwb/model/providers/replay.lua: replies read from a transcript file, in order, in
-- place of a model: deterministic demos and tests.
--
--   model = { provider = "replay", file = "transcripts/host_matmul.json" }
--
-- The file: { "replies": [ { "text": "...", "tool_calls": [ { "id":, "name":,
-- "arguments": {} } ], "usage": { "input": 1200, "output": 300 } }, ... ] }
-- (without "usage" the token counts are estimated from the texts' lengths).
--
-- A reply marked "purpose": "lessons" answers a summary of the lessons
-- ledger (kwb.strategies.lessons) and nothing else: a summary's request takes
-- the next reply only where it is so marked, and otherwise gets none (the
-- transcript's next reply stays for the proposal it answers); a proposal's
-- request passes over such replies. So a transcript replays the same
-- proposals whether the run asks for summaries or not.
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
    if r.purpose ~= nil and r.purpose ~= "lessons" then
      error(string.format("replay transcript %s: replies[%d].purpose is %s; the one purpose a reply may name is "
                          .. "\"lessons\" (a summary's)", path, i, cjson.encode(r.purpose)), 0)
    end
  end
  return j.replies
end

-- call(spec, convo, state [, purpose]) -> reply | nil, why: the next recorded
-- reply for the request's purpose.
function M.call(spec, convo, state, purpose)
  state.replies = state.replies or M.load(spec.file)
  local summary = purpose == "lessons"
  local i = (state.next or 0) + 1
  while not summary and state.replies[i] and state.replies[i].purpose == "lessons" do i = i + 1 end
  local r = state.replies[i]
  local prompt = command.text(convo)
  if not r then
    if not summary then state.next = i end
    return nil, string.format("the transcript %s has no reply left (%d replayed)", spec.file, #state.replies), prompt, true
  end
  if summary and r.purpose ~= "lessons" then   -- (nothing replayed: the reply stays for its proposal)
    return nil, string.format("the transcript %s has no summary's reply here (its replies[%d] answers a proposal)",
                              spec.file, i), prompt, true
  end
  state.next = i
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
