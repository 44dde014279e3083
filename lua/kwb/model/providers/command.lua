-- kwb/model/providers/command.lua: an external agent program as the model: the
-- prompt goes to its stdin, or into a file where an argument says
-- {prompt_file}; its stdout is the reply. So `claude -p`, `codex exec` or
-- `llm` can drive kwb:
--
--   model = { provider = "command", command = { "claude", "-p" }, timeout = 600 }
local core = require "kwb.core"

local M = { name = "command", tools = false }

-- The conversation as one text: what an agent program reads.
function M.text(convo)
  local parts = {}
  if convo.system then parts[1] = convo.system end
  for _, m in ipairs(convo.messages) do
    if #convo.messages > 1 or m.role ~= "user" then parts[#parts + 1] = "## " .. m.role end
    parts[#parts + 1] = m.content or ""
  end
  return table.concat(parts, "\n\n")
end

-- call(spec, convo) -> reply | nil, why: runs the program to the end.
function M.call(spec, convo)
  local prompt = M.text(convo)
  local file = core.tempfile("kwb-prompt")
  local f = assert(io.open(file, "w"))
  f:write(prompt)
  f:close()
  local argv, in_file = {}, false
  for i, a in ipairs(spec.command) do
    argv[i] = a:gsub("{prompt_file}", function() in_file = true; return file end)
  end
  local r, msg = core.exec(argv, { input = not in_file and file or nil, timeout = spec.timeout or 600 })
  os.remove(file)
  if not r then return nil, msg, prompt end
  if r.timed_out then
    return nil, string.format("%s ran past its timeout (%g s) and was killed", spec.command[1], spec.timeout or 600), prompt
  end
  if r.status ~= 0 then
    local tail = r.err:sub(-400):gsub("%s+$", "")
    return nil, string.format("%s exited with status %d%s", spec.command[1], r.status,
                              tail ~= "" and (": " .. tail) or ""), prompt
  end
  -- an agent program reports no token counts: the text's length stands in (4 bytes a token)
  return { text = r.out, tool_calls = {}, usage = { input = #prompt // 4, output = #r.out // 4, estimated = true } },
         nil, prompt
end

return M
