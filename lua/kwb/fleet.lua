-- kwb/fleet.lua: `kwb fleet URL [--json]`, what a queue's fleet is doing
-- (kwb.queue.fleet): its live workers, per device kind the tasks waiting and
-- in flight, and the tasks finished in the last minute.
local queue = require "kwb.queue"

local M = {}

local function usage(msg)
  io.stderr:write("kwb fleet: ", msg, "\ntry 'kwb fleet --help'\n")
  return 2
end

function M.main(...)
  local url, json
  for _, a in ipairs { ... } do
    if a == "--help" or a == "-h" then
      io.write(require("kwb.help").command_help("fleet"))
      return 0
    elseif a == "--json" then json = true
    elseif a:sub(1, 2) == "--" then return usage(string.format("unknown option '%s' (known: --json)", a))
    elseif url then return usage("one queue URL at a time")
    else url = a end
  end
  if not url then return usage("which queue? kwb fleet redis://[USER]:PASSWORD@HOST:PORT/NAME") end
  local q, perr = queue.parse(url)
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
