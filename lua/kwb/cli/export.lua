-- kwb/cli/export.lua: `kwb export` (dispatch for a recipe's best kernels: kwb.insight.export).
local insight = require "kwb.insight.export"

local M = {}

local usage = "usage: " .. require("kwb.help").command("export").usage

function M.main(...)
  local pos, opts = require("kwb.base.args").parse({ ... }, { device = "value", fallback = "value", json = "flag", torch = "flag",
                                                         help = "flag" })
  if pos and (opts.help or pos[1] == "-h") then
    io.write(require("kwb.help").command_help("export"))
    return 0
  end
  if not pos or #pos ~= 2 then
    io.stderr:write("kwb export: ", pos and "it takes RECIPE.lua and DIR" or opts, "\n", usage, "\n")
    return 2
  end
  local file, dir = pos[1], pos[2]
  local ok, res, away = pcall(function()
    return insight.export(require("kwb.load").load(file), dir, opts)
  end)
  if not ok then
    io.stderr:write("kwb export: ", tostring(res), "\n")
    return 1
  end
  if opts.json then   -- dispatch.json's object, where it was written, and the imports left out
    res.dir, res.imports_left_out = dir, away
    print(require("cjson").encode(res))
    return 0
  end
  local chosen = 0
  for _, r in ipairs(res.shapes) do if not r.fallback then chosen = chosen + 1 end end
  print(string.format("wrote %s: %d shapes, %d with a kernel of their own, %d on the %s (dispatch.json, dispatch.h, "
                      .. "dispatch.c, %sMakefile, README.txt, dispatch_test.c, kernels/)", dir, #res.shapes, chosen,
                      #res.shapes - chosen, res.fallback == "start" and "start kernel" or ("fallback " .. res.fallback),
                      res.check and "reference.c, dispatch_check.c, " or ""))
  if res.check then
    print(string.format("make -C %s check: links %s with every kernel and checks each measured shape against the "
                        .. "problem's C reference%s", dir, res.dispatcher,
                        res.fallback ~= "start" and string.format(" (the fallback %s is yours: FALLBACK_OBJS=...)",
                                                                  res.fallback) or ""))
  elseif not res.torch then
    print("no check program: " .. res.no_check)
  end
  if res.torch then
    print(string.format("torch: %s registers %s (no compiler needed where it is imported); check it end to end: "
                        .. "python3 %s", res.torch.package, res.torch.op, res.torch.check))
  end
  if away > 0 then
    print(string.format("left out: %d result%s from bundles, never measured here (a run of the recipe measures "
                        .. "one it proposes; trust_imported = true takes them as they are)", away, away == 1 and "" or "s"))
  end
  return 0
end

return M
