-- kwb/cli/fleet.lua: `kwb fleet URL [--json] [--queue-password-file F]`, what a
-- queue's fleet is doing (kwb.runners.queue.fleet): its live workers, per device kind
-- the tasks waiting and in flight, and the tasks finished in the last minute.
-- `kwb fleet --worker-key NAME [--fleet-key-file F]`: the key of the worker
-- called NAME, derived from the fleet's key (kwb.runners.queue.worker_key), as
-- NAME:KEY for that worker's $KWB_WORKER_KEY or --worker-key-file.
local queue = require "kwb.runners.queue"

local M = {}

local function usage(msg)
  io.stderr:write("kwb fleet: ", msg, "\ntry 'kwb fleet --help'\n")
  return 2
end

function M.main(...)
  local pos, o = require("kwb.base.args").parse({ ... }, { help = "flag", json = "flag", ["queue-password-file"] = "value",
                                                         ["fleet-key-file"] = "value", ["worker-key"] = "value" },
    { aliases = { h = "help" }, known = { "--json", "--queue-password-file", "--worker-key", "--fleet-key-file" } })
  if not pos then return usage(o) end
  if o.help then
    io.write(require("kwb.help").command_help("fleet"))
    return 0
  end
  if #pos > 1 then return usage("one queue URL at a time") end
  local url, json, password_file, key_file, worker_name = pos[1], o.json, o.queue_password_file, o.fleet_key_file,
                                                          o.worker_key
  if worker_name then
    if url then return usage("--worker-key NAME needs no queue URL") end
    if not worker_name:match("^[%w_.%-]+$") or #worker_name > 64 then
      return usage(string.format("--worker-key '%s': a worker's name is letters, digits, '_', '.' or '-' (64 at most)",
                                 worker_name))
    end
    local key, why = queue.fleet_key(key_file)
    if not key then return usage(why) end
    print(worker_name .. ":" .. queue.worker_key(key, worker_name))
    return 0
  end
  if key_file then return usage("--fleet-key-file goes with --worker-key NAME") end
  if not url then return usage("which queue? kwb fleet redis://[USER@]HOST:PORT/NAME (the password in "
                               .. "$KWB_QUEUE_PASSWORD or --queue-password-file FILE)") end
  local q, perr = queue.parse(url, { password_file = password_file })
  if not q then return usage(perr) end
  local ok, f = pcall(function()
    local link = queue.connect(q)
    local f = queue.fleet(link, q)
    link:close()
    return f
  end)
  if not ok then
    io.stderr:write("kwb fleet: ", tostring(f), "\n")
    return 1
  end
  if json then
    print(require("cjson").encode { queue = q.url, workers = f.workers, kinds = f.kinds, done_last_minute = f.done_minute })
    return 0
  end
  print(string.format("queue %s: %d worker%s, %d task%s finished in the last minute", q.url, #f.workers,
                      #f.workers == 1 and "" or "s", f.done_minute, f.done_minute == 1 and "" or "s"))
  if #f.workers > 0 then
    print(string.format("  %-28s %-6s %-6s %6s %5s  %s", "worker", "backend", "state", "done", "beat", "device"))
    for _, w in ipairs(f.workers) do
      print(string.format("  %-28s %-7s %-6s %6d %4ss  %s", w.id, w.backend, (w.busy or "") ~= "" and "busy" or "idle",
                          w.done, w.age and string.format("%d", w.age) or "?", w.kind))
    end
  end
  for _, k in ipairs(f.kinds) do
    print(string.format("  %s %s: %d worker%s, %d waiting, %d in flight", k.backend, k.kind, k.workers,
                        k.workers == 1 and "" or "s", k.waiting, k.in_flight))
  end
  return 0
end

return M
