-- kwb/base/channel.lua: a worker's side of its channel to the pool: the JSON
-- codec and its frames, serving one request, and the notices a step sends
-- while it runs. `kwb worker` (kwb.worker) reads the requests and calls
-- serve; the pool (kwb.runners.workers) encodes with the same codec.
--
--   request  { id = 7, fn = "kwb.worker.task.measure", args = { ... } }
--   notice   { id = 7, event = "limit", seconds = 2.5, what = "the first run at n=64" }
--   reply    { id = 7, ok = true, result = ..., cpu = seconds, retire = false } | { id = 7, ok = false, error = "..." }
--
-- `fn` names a function as module.field ("kwb.worker.task.measure"); its
-- arguments and result are plain data (JSON). A function may call
-- channel.limit(seconds, what) to tell the pool how long its next step
-- may take; past that the pool kills the worker and records a timeout.
local core = require "kwb.core"

local M = {}

local json = require("cjson").new()
json.encode_invalid_numbers(true)
json.encode_sparse_array(true)
json.encode_number_precision(14)
M.json = json

-- JSON numbers come back as floats; integral ones below 2^53 become integers
-- again, so line numbers and counts print as they were.
local function integers(v)
  if type(v) == "number" then
    if math.type(v) == "float" and v == math.floor(v) and math.abs(v) < 2 ^ 53 then return math.tointeger(v) end
    return v
  end
  if type(v) ~= "table" then return v end
  for k, x in pairs(v) do
    if x == json.null then v[k] = nil else v[k] = integers(x) end
  end
  return v
end

function M.decode(text)
  return integers(json.decode(text))
end

function M.encode(v) return json.encode(v) end

-- The largest frame the protocol carries (core/worker.c), in bytes of JSON.
M.max_frame = core.worker_max_frame

-- frame(v) -> v's JSON | nil, why, its size: a message sized on its encoded
-- length before it is sent (JSON may write a byte as two, \/, or six,
-- \u0001), so nothing too large ever reaches the channel: the C side would
-- refuse it, and a worker would be taken for dead.
function M.frame(v)
  local text = json.encode(v)
  if #text <= M.max_frame then return text end
  return nil, string.format("its task is %d bytes as sent (JSON), over the %d a worker's frame holds", #text,
                            M.max_frame), #text
end

local current   -- the id of the request being served, nil between requests

-- limit(seconds, what): the next step may take this long (nil: no limit).
-- A no-op outside a worker, so the same code runs in-process.
function M.limit(seconds, what)
  if not current then return end
  core.worker_reply(json.encode { id = current, event = "limit", seconds = seconds or -1, what = what })
end

-- Inside a worker, serving a request?
function M.serving() return current ~= nil end

local retiring = false

-- retire(): this worker's process is spoiled (a CUDA context after an illegal
-- address): it answers the current request, then exits; the pool starts a
-- fresh one for the next task.
function M.retire()
  if current then retiring = true end
end

-- The function a request names: the longest loadable module prefix, then fields.
function M.resolve(name)
  if type(name) ~= "string" or not name:match("^[%w_]+[%w_%.]*$") then
    error(string.format("a request names a function as module.field, got %s", tostring(name)), 0)
  end
  local parts = {}
  for p in name:gmatch("[^%.]+") do parts[#parts + 1] = p end
  for cut = #parts - 1, 1, -1 do
    local ok, mod = pcall(require, table.concat(parts, ".", 1, cut))
    if ok and type(mod) == "table" then
      local v = mod
      for i = cut + 1, #parts do
        v = type(v) == "table" and v[parts[i]] or nil
      end
      if type(v) == "function" then return v end
      break
    end
  end
  error(string.format("no function %s for a worker to run", name), 0)
end

-- Serve one decoded request; returns the reply table.
function M.serve(req)
  if type(req) ~= "table" or req.id == nil then return { ok = false, error = "a request needs an id" } end
  current = req.id
  local ok, result = xpcall(function()
    local fn = M.resolve(req.fn)
    return fn(table.unpack(req.args or {}, 1, req.nargs or #(req.args or {})))
  end, debug.traceback)
  current = nil
  io.stdout:flush()
  io.stderr:flush()
  core.worker_reap()   -- what the candidate forked and left behind
  if ok then return { id = req.id, ok = true, result = result, cpu = os.clock(), retire = retiring } end
  return { id = req.id, ok = false, error = tostring(result), cpu = os.clock(), retire = retiring }
end

-- retiring(): the current worker asked to end after this reply
function M.retiring() return retiring end

return M
