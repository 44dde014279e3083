-- kwb/cli/lessons.lua: `kwb lessons` (the lessons ledger: kwb.strategies.lessons):
-- the lessons a recipe's prompt draws on, on one device kind, the most
-- relevant first, each as the prompt shows it, and which of them its byte
-- budget holds.
local lessons = require "kwb.strategies.lessons"

local M = {}

local usage = "usage: " .. require("kwb.help").command("lessons").usage

local function where(row)
  local from = row.origin and ("bundle " .. row.origin) or row.run and ("run " .. row.run:sub(1, 8)) or nil
  return from and ("  (" .. from .. ")") or ""
end

-- show(recipe, cache, device, json) -> 0: the lessons printed
function M.show(recipe, cache, device, json)
  local key = recipe.problem:key()
  local _, bytes = lessons.settings(recipe)
  local all = lessons.relevant(cache, recipe, device, math.huge)
  local held = {}
  for _, r in ipairs(lessons.relevant(cache, recipe, device, bytes)) do held[r.id] = true end
  if json then   -- (the list written out, so that none is [] and not {})
    local ktext, out = require "kwb.base.text", {}
    for i, r in ipairs(all) do
      out[i] = ktext.json { id = r.id, problem = r.problem, device = r.device, text = r.text, tags = r.tags,
                            ids = r.ids, run = r.run, origin = r.origin, created = r.created,
                            in_prompt = held[r.id] or false }
    end
    local head = ktext.json { problem = key, device = device, bytes = bytes }
    print(head:sub(1, -2) .. ',"lessons":[' .. table.concat(out, ",") .. "]}")
    return 0
  end
  if #all == 0 then
    print(string.format("no lessons for %s on %s yet (a run whose strategy asks a model keeps them: "
                        .. "model.lessons_every)", key, device))
    return 0
  end
  local own, n = 0, 0
  for _, r in ipairs(all) do
    if r.problem == key then own = own + 1 end
    if held[r.id] then n = n + 1 end
  end
  print(string.format("lessons for %s on %s: %d of its own, %d of other problems sharing a tag; the prompt holds %d "
                      .. "(model.lessons_bytes %d)", key, device, own, #all - own, n, bytes))
  for _, r in ipairs(all) do
    print(lessons.line(r, key) .. where(r) .. (held[r.id] and "" or "  [not in the prompt: over its bytes]"))
  end
  return 0
end

function M.main(...)
  local pos, opts = require("kwb.base.args").parse({ ... }, { device = "value", json = "flag", help = "flag" })
  if pos and (opts.help or pos[1] == "-h") then
    io.write(require("kwb.help").command_help("lessons"))
    return 0
  end
  if not pos or #pos ~= 1 then
    io.stderr:write("kwb lessons: ", pos and "it takes one RECIPE.lua" or opts, "\n", usage, "\n")
    return 2
  end
  local path = require("kwb.core").cache_path or "cache/kwb.db"
  local f = io.open(path, "rb")
  if not f then
    io.stderr:write(string.format("kwb lessons: no cache at %s (a run makes one; kwb --cache PATH names another)\n",
                                  path))
    return 1
  end
  f:close()
  local ok, res = pcall(function()
    local recipe = require("kwb.load").load(pos[1])
    local device = opts.device or require("kwb.measure.backends").load(recipe.backend).device()
    local cache = assert(require("kwb.cache").open(path))
    local status = M.show(recipe, cache, device, opts.json)
    cache:close()
    return status
  end)
  if not ok then
    io.stderr:write("kwb lessons: ", tostring(res), "\n")
    return 1
  end
  return res
end

return M
