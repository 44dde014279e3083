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
