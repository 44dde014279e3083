-- kwb/worker/init.lua: `kwb worker`, the process candidates run in. It is
-- started by a pool (kwb.runners.workers), never by hand: it reads requests
-- on fd 3, serves them one at a time (kwb.base.channel) and answers each on
-- the same channel.
local core = require "kwb.core"
local channel = require "kwb.base.channel"

local M = {}

function M.main(...)
  if ... == "--help" or ... == "-h" then
    io.write(require("kwb.help").command_help("worker"))
    return 0
  end
  if select("#", ...) > 0 then
    io.stderr:write("kwb: 'kwb worker' takes no arguments here (a pool starts it; kwb.worker.queue takes --queue)\n")
    return 2
  end
  while true do
    local text, err = core.worker_recv()
    if not text then
      if err then
        io.stderr:write("kwb worker: ", err, " (kwb worker is started by a pool, with its channel on fd 3)\n")
        return 1
      end
      return 0   -- the pool closed the channel
    end
    local ok, req = pcall(channel.decode, text)
    local reply = ok and channel.serve(req) or { ok = false, error = "a request that is not JSON: " .. tostring(req) }
    local enc_ok, out = pcall(channel.encode, reply)
    if not enc_ok then
      out = channel.encode { id = reply.id, ok = false, error = "the result cannot be sent: " .. tostring(out) }
    elseif #out > channel.max_frame then   -- said in a frame that fits, the worker still serving
      out = channel.encode { id = reply.id, ok = false, cpu = reply.cpu, retire = reply.retire,
                          error = string.format("the result is %d bytes as JSON, over the %d a worker's frame holds",
                                                #out, channel.max_frame) }
    end
    local sent, msg = core.worker_reply(out)
    if not sent then
      io.stderr:write("kwb worker: ", msg, "\n")
      return 1
    end
    if channel.retiring() then return 0 end
  end
end

return M
