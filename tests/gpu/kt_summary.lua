-- tests/gpu/kt_summary.lua FILE.jsonl: one line from a run's JSON summary (for
-- tests/gpu/kt_compare): candidates, seconds in the loop and a second, where
-- the seconds went, the candidates built ahead, the best score.
local cjson = require "cjson"
local path = arg[1]
if not path then print("usage: kwb tests/gpu/kt_summary.lua FILE.jsonl") os.exit(2) end
local last
for l in io.lines(path) do
  local ok, e = pcall(cjson.decode, l)
  if ok and type(e) == "table" and e.event == "summary" then last = e end
end
if not last then print("no summary in " .. path) os.exit(1) end
local st = last.stages or {}
print(string.format("%d candidates, %.2f s in the loop (%.2f a second); build %.2f s, verify %.2f s, time %.2f s, "
  .. "sanitizer %.2f s, start kernel %.2f s, ceilings %.2f s, the rest %.2f s; built ahead %d; best %.2fx",
  last.candidates, last.seconds, last.per_second, st.build or 0, st.verify or 0, st.time or 0, st.sanitize or 0,
  st.start or 0, st.ceilings or 0, st.rest or 0, last.prebuilt or 0, last.best.score))
-- where the candidates' time went, summed over the run's candidate events:
-- the verify stage's unannounced share, the timing's calls and reference,
-- the samples, and each compute-sanitizer tool's runs with the job's split
local sum, samples, n, runs, tools, split = {}, 0, 0, 0, {}, {}
for l in io.lines(path) do
  local ok, e = pcall(cjson.decode, l)
  if ok and type(e) == "table" and e.event == "candidate" then
    n = n + 1
    for k, x in pairs(e.stages or {}) do if type(x) == "number" then sum[k] = (sum[k] or 0) + x end end
    for _, x in pairs(type(e.samples) == "table" and e.samples or {}) do samples = samples + x end
    if type(e.sanitizer) == "table" then
      runs = runs + 1
      for tool, x in pairs(e.sanitizer.seconds or {}) do tools[tool] = (tools[tool] or 0) + x end
      for tool, text in pairs(type(e.sanitizer.stages) == "table" and e.sanitizer.stages or {}) do
        split[tool] = split[tool] or {}
        for k, x in tostring(text):gmatch("(%a+)=([%d.]+)") do split[tool][k] = (split[tool][k] or 0) + tonumber(x) end
      end
    end
  end
end
local function s(k) return sum[k] or 0 end
print(string.format("  candidates: verify %.2f s (unannounced %.2f), time %.2f s (calls %.2f, reference %.2f), "
  .. "%d samples", s("verify"), s("unannounced"), s("time"), s("calls"), s("reference"), samples))
local names = {}
for tool in pairs(tools) do names[#names + 1] = tool end
table.sort(names)
for _, tool in ipairs(names) do
  local parts, inside = {}, 0
  for _, k in ipairs { "load", "build", "bench", "inputs", "call" } do
    local x = split[tool] and split[tool][k] or 0
    inside = inside + x
    parts[#parts + 1] = string.format("%s %.2f", k, x)
  end
  print(string.format("  sanitizer %s: %d runs, %.2f s (in the job: %s; outside it %.2f)", tool, runs, tools[tool],
                      table.concat(parts, ", "), tools[tool] - inside))
end
