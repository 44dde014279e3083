-- tests/bench/verify_stages.lua: a run's --json events on stdin -> a verified
-- candidate's mean seconds, its verification's, and the unannounced shapes'
-- share of it (stages.unannounced).
--   ./kwb recipes/host_matmul.lua --json --budget 30 --seed 1 --strategy grid | ./kwb tests/bench/verify_stages.lua
local cjson = require "cjson"
local n, sec, ver, un = 0, 0, 0, 0
for l in io.lines() do
  local ok, e = pcall(cjson.decode, l)
  if ok and e.event == "candidate" and e.stages and e.stages.verify then
    n = n + 1; sec = sec + e.seconds; ver = ver + e.stages.verify; un = un + (e.stages.unannounced or 0)
  end
end
print(string.format("%d verified candidates: %.4f s a candidate, verify %.4f s, of which unannounced %.4f s", n, sec / n, ver / n, un / n))
