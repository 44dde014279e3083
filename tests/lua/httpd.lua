-- tests/lua/httpd.lua: the scripted HTTP server (build/httpd, tests/httpd.c)
-- from a Lua test: start it with a script, read what it was sent, stop it.
--
--   local srv = httpd.start [[
--   === 200
--   Content-Type: application/json
--
--   {"choices": [...]}
--   ]]
--   srv.url                 -- "http://127.0.0.1:PORT"
--   srv:requests()          -- { { n =, method =, path =, headers =, body = (decoded JSON or text) }, ... }
--   srv:stop()
local cjson = require "cjson"
local core = require "kwb.core"

local M = {}

local Server = {}
Server.__index = Server

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

function M.start(script)
  local dir = assert(core.tempfile("-httpd"))
  os.remove(dir)
  assert(core.mkdirs(dir))
  local s = setmetatable({ dir = dir, log = dir .. "/log", portfile = dir .. "/port" }, Server)
  write(dir .. "/script", script)
  -- the server runs until its stdin (this pipe) closes
  s.pipe = assert(io.popen(string.format("exec build/httpd '%s/script' '%s' '%s'", dir, s.log, s.portfile), "w"))
  local t0 = core.now()
  while core.now() - t0 < 10 do
    local f = io.open(s.portfile, "r")
    if f then
      s.port = tonumber(f:read("l"))
      f:close()
      if s.port then break end
    end
  end
  assert(s.port, "build/httpd did not start (make unit builds it)")
  s.url = "http://127.0.0.1:" .. s.port
  return s
end

-- Every request the server logged, oldest first; bodies that are JSON decoded.
function Server:requests()
  local out = {}
  local f = io.open(self.log, "r")
  if not f then return out end
  for line in f:lines() do
    local r = cjson.decode(line)
    local ok, body = pcall(cjson.decode, r.body)
    r.raw = r.body
    if ok then r.body = body end
    out[#out + 1] = r
  end
  f:close()
  table.sort(out, function(a, b) return a.n < b.n end)
  return out
end

-- The whole log as text (for "is the key anywhere in it" checks).
function Server:log_text()
  local f = io.open(self.log, "r")
  if not f then return "" end
  local text = f:read("a")
  f:close()
  return text
end

function Server:stop()
  if self.pipe then self.pipe:close() end
  self.pipe = nil
  os.execute(string.format("rm -rf '%s'", self.dir))
end

-- JSON bodies for scripts: an OpenAI chat completion, an Anthropic message.
function M.openai(text, usage, tool_calls)
  local msg = { role = "assistant", content = text }
  if tool_calls then
    msg.tool_calls = {}
    for i, c in ipairs(tool_calls) do
      msg.tool_calls[i] = { id = c.id, type = "function", ["function"] = { name = c.name, arguments = cjson.encode(c.arguments) } }
    end
  end
  return cjson.encode { id = "chatcmpl-test", object = "chat.completion",
                        choices = { { index = 0, message = msg, finish_reason = tool_calls and "tool_calls" or "stop" } },
                        usage = usage and { prompt_tokens = usage[1], completion_tokens = usage[2] } or nil }
end

function M.anthropic(text, usage, tool_calls)
  local content = { { type = "text", text = text } }
  for _, c in ipairs(tool_calls or {}) do content[#content + 1] = { type = "tool_use", id = c.id, name = c.name, input = c.arguments } end
  return cjson.encode { id = "msg_test", type = "message", role = "assistant", content = content,
                        stop_reason = tool_calls and "tool_use" or "end_turn",
                        usage = usage and { input_tokens = usage[1], output_tokens = usage[2] } or nil }
end

-- One script entry: status, headers (a list of "Name: value"), body.
function M.entry(status, body, headers, words)
  local lines = { "=== " .. status .. (words and (" " .. words) or "") }
  for _, h in ipairs(headers or { "Content-Type: application/json" }) do lines[#lines + 1] = h end
  lines[#lines + 1] = ""
  lines[#lines + 1] = body or ""
  return table.concat(lines, "\n") .. "\n"
end

return M
