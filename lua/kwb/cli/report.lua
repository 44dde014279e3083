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
  -- (certified: the pick and its score are the latest run's final round's, kwb.insight.report's certified)
  local sc, c = res.score, res.cert
  local certified = c and { run = c.run, rounds = c.rounds, interval = sc and { sc.lo, sc.hi } or nil } or nil
  local score = sc and sc.median or c and res.best == res.start and 1 or res.best.score
  if opts.json then
    print(require("cjson").encode { markdown = dir .. "/report.md", html = dir .. "/report.html", candidates = #res.conv,
                                    best = res.best.id, best_score = score, certified = certified })
    return 0
  end
  print(string.format("wrote %s/report.md and %s/report.html: %d candidates, best %s at %.2fx%s", dir, dir, #res.conv,
                      res.best.short, score or 1, not c and ""
                      or string.format(" (certified: %d rounds in turns%s)", c.rounds,
                                       sc and string.format(", 95%% interval %.2f-%.2f", sc.lo, sc.hi) or "")))
  return 0
end

return M
