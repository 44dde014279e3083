-- tests/gpu/cost_summary.lua: one line of tests/gpu/integrity_cost from a
-- run's JSON events: candidates, outcomes, seconds in the loop, wall seconds,
-- the median candidate's seconds with its sanitizer run's aside (and the
-- harness's own work in its time: the pool sets' references, computed once a
-- run), and the seconds the sanitizer runs took.
--   ./kwb tests/gpu/cost_summary.lua BIN RECIPE EXIT T0 T1 EVENTS.jsonl
local cjson = require "cjson"
local bin, recipe, rc, t0, t1, file = ...
local sum, san, outs, each = nil, 0, {}, {}
local st = { build = 0, verify = 0, time = 0, calls = 0, reference = 0, unannounced = 0, timed_calls = 0 }   -- stage sums; timed_calls: time where calls is known
for l in io.lines(file) do
  local ok, e = pcall(cjson.decode, l)
  if ok and e.event == "summary" then sum = e end
  if ok and e.event == "candidate" then
    outs[e.outcome] = (outs[e.outcome] or 0) + 1
    local g = type(e.stages) == "table" and e.stages or {}
    local s = type(g.sanitize) == "number" and g.sanitize or 0
    san = san + s
    each[#each + 1] = (e.seconds or 0) - s - (type(g.reference) == "number" and g.reference or 0)
    for _, k in ipairs { "build", "verify", "time", "calls", "reference", "unannounced" } do
      if type(g[k]) == "number" then st[k] = st[k] + g[k] end
    end
    if type(g.calls) == "number" and type(g.time) == "number" then st.timed_calls = st.timed_calls + g.time end
  end
end
table.sort(each)
local median = #each == 0 and -1 or (each[(#each + 1) // 2] + each[#each // 2 + 1]) / 2
local o = {}
for k, v in pairs(outs) do o[#o + 1] = k .. " " .. v end
table.sort(o)
print(string.format("%-14s %-22s exit %s  %2d candidates  %7.2f s in the loop  %7.2f s wall  median %6.3f s a candidate"
                    .. " (sanitizer, pool references aside)  sanitizer %6.2f s  (%s)",
                    bin, recipe, rc, #each, sum and sum.seconds or -1, tonumber(t1) - tonumber(t0), median, san,
                    table.concat(o, ", ")))
-- where the candidates' time went (the events of builds that give stages)
if st.build + st.verify + st.time > 0 then
  print(string.format("  stages, summed: build %.2f s, verify %.2f s%s, time %.2f s%s", st.build, st.verify,
                      st.unannounced > 0 and string.format(" (of which the unannounced shapes %.2f s)", st.unannounced) or "",
                      st.time,
                      st.timed_calls > 0 and string.format(" (of which the calls %.2f s, the references of pool sets %.2f s, "
                                                           .. "the checks around them %.2f s)", st.calls, st.reference,
                                                           st.timed_calls - st.calls - st.reference) or ""))
end
