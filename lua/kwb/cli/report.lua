-- kwb/cli/report.lua: `kwb report` (a run's report: kwb.insight.report).
local insight = require "kwb.insight.report"

local M = {}

local usage = "usage: " .. require("kwb.help").command("report").usage

function M.main(...)
  local pos, opts = require("kwb.base.args").parse({ ... }, { device = "value", json = "flag", help = "flag" })
  if pos and (opts.help or pos[1] == "-h") then
    io.write(require("kwb.help").command_help("report"))
    return 0
  end
  if not pos or #pos < 1 or #pos > 2 then
    io.stderr:write("kwb report: ", pos and "it takes RECIPE.lua and at most one DIR" or opts, "\n", usage, "\n")
    return 2
  end
  local file, dir = pos[1], pos[2] or "."
  local ok, res = pcall(function() return insight.write(require("kwb.load").load(file), dir, opts) end)
  if not ok then
    io.stderr:write("kwb report: ", tostring(res), "\n")
    return 1
  end
  if opts.json then
    print(require("cjson").encode { markdown = dir .. "/report.md", html = dir .. "/report.html", candidates = #res.conv,
                                    best = res.best.id, best_score = res.best.score })
    return 0
  end
  print(string.format("wrote %s/report.md and %s/report.html: %d candidates, best %s at %.2fx", dir, dir, #res.conv,
                      res.best.short, res.best.score or 1))
  return 0
end

return M
