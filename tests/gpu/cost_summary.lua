-- tests/gpu/cost_summary.lua: one line of tests/gpu/integrity_cost from a
-- run's JSON events: candidates, outcomes, seconds in the loop, wall seconds
-- and the seconds its sanitizer runs took.
--   ./kwb tests/gpu/cost_summary.lua BIN RECIPE EXIT T0 T1 EVENTS.jsonl
local cjson = require "cjson"
local bin, recipe, rc, t0, t1, file = ...
local sum, san, n, outs = nil, 0, 0, {}
for l in io.lines(file) do
  local ok, e = pcall(cjson.decode, l)
  if ok and e.event == "summary" then sum = e end
  if ok and e.event == "candidate" then
    n = n + 1
    outs[e.outcome] = (outs[e.outcome] or 0) + 1
    if type(e.stages) == "table" and type(e.stages.sanitize) == "number" then san = san + e.stages.sanitize end
  end
end
local o = {}
for k, v in pairs(outs) do o[#o + 1] = k .. " " .. v end
table.sort(o)
print(string.format("%-14s %-22s exit %s  %2d candidates  %7.2f s in the loop  %7.2f s wall  sanitizer %6.2f s  (%s)",
                    bin, recipe, rc, n, sum and sum.seconds or -1, tonumber(t1) - tonumber(t0), san, table.concat(o, ", ")))
