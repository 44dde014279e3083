-- tests/gpu/flagship_pair.lua A.jsonl B.jsonl: two flagship runs from fresh
-- caches (tests/gpu/flagship_pair): each pick's certified score over its
-- run's own start kernel, with its 95% interval, and whether the two agree
-- within 1% (the GPU figure of "numbers that hold"), and the per-shape
-- speed-ups side by side.
local t = require "t"
local cjson = require "cjson"

local function summary_of(file)
  local sm
  for line in io.lines(file) do
    local ok, e = pcall(cjson.decode, line)
    if ok and type(e) == "table" and e.event == "summary" then sm = e end
  end
  return assert(sm, file .. ": no summary event")
end

local a, b = summary_of(arg[1]), summary_of(arg[2])

t.test("flagship_pair_certified_scores_agree_within_1_percent", function()
  for i, sm in ipairs { a, b } do
    local iv = sm.best.score_interval or {}
    print(string.format("# run %s: pick %s, certified %.4fx (95%% %.4f-%.4f), %s rounds", i == 1 and "A" or "B",
                        tostring(sm.best.short), sm.best.score or 0, iv[1] or 0, iv[2] or 0,
                        sm.certificate and string.format("%d", sm.certificate.rounds) or "no"))
  end
  t.truthy(a.certificate and b.certificate, "both runs certified their picks")
  local keys = {}
  for k in pairs(a.best.speedup or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    print(string.format("#   %-22s A %.4fx  B %s", k, a.best.speedup[k],
                        b.best.speedup[k] and string.format("%.4fx", b.best.speedup[k]) or "-"))
  end
  local diff = math.abs(a.best.score - b.best.score) / math.min(a.best.score, b.best.score)
  print(string.format("# the certified scores differ by %.2f%%", 100 * diff))
  t.truthy(diff <= 0.01, string.format("within 1%%: %.2f%%", 100 * diff))
end)

t.done()
