-- tests/gpu/cost_compare.lua: what the judge's checks cost each candidate,
-- from two runs of one recipe (tests/gpu/integrity_cost: the build before
-- the checks, then this one, grid strategy, same seed). Candidates are paired
-- by id; for each pair the seconds of the run before and of this one with its
-- sanitizer run and the pool sets' references (computed once a run) aside, then the median of the ratios and the ratio of the sums
-- (the checks' cost: ratio - 1), and that ratio again with the references
-- spread over the candidates. Outcomes that differ are named.
--   ./kwb tests/gpu/cost_compare.lua BEFORE.jsonl AFTER.jsonl
local cjson = require "cjson"
local before_file, after_file = ...
local function read(file)
  local c, order = {}, {}
  local f = io.open(file)
  if not f then return nil end
  for l in f:lines() do
    local ok, e = pcall(cjson.decode, l)
    if ok and type(e) == "table" and e.event == "candidate" and e.id and not c[e.id] then
      local g = type(e.stages) == "table" and e.stages or {}
      local san = type(g.sanitize) == "number" and g.sanitize or 0
      local ref = type(g.reference) == "number" and g.reference or 0   -- (a pool set's reference: once a run)
      c[e.id] = { seconds = (e.seconds or 0) - san - ref, outcome = e.outcome, sanitize = san, reference = ref }
      order[#order + 1] = e.id
    end
  end
  f:close()
  return c, order
end
local before = read(before_file)
local after, order = read(after_file)
if not before or not after then
  print(string.format("cost_compare: %s: no such file", before and after_file or before_file))
  return
end
local ratios, sb, sa, sr, n, differ = {}, 0, 0, 0, 0, {}
for _, id in ipairs(order) do
  local b, a = before[id], after[id]
  if b and b.seconds > 0 then
    n = n + 1
    ratios[#ratios + 1] = a.seconds / b.seconds
    sb, sa, sr = sb + b.seconds, sa + a.seconds, sr + a.reference
    if a.outcome ~= b.outcome then differ[#differ + 1] = string.format("%s %s->%s", id:sub(1, 8), b.outcome, a.outcome) end
  end
end
table.sort(ratios)
local name = after_file:match("([^/]+)%.jsonl$") or after_file
if n == 0 then
  print(string.format("%s: no candidate in both runs", name))
  return
end
local median = (ratios[(n + 1) // 2] + ratios[n // 2 + 1]) / 2
print(string.format("%s: %d candidates in both; a candidate %.3f s before, %.3f s now (sums), ratio %.3f; "
                    .. "median ratio %.3f (%.3f to %.3f); with the pool references spread over these candidates "
                    .. "%.3f s, ratio %.3f%s", name, n, sb / n, sa / n, sa / sb, median, ratios[1], ratios[n],
                    (sa + sr) / n, (sa + sr) / sb,
                    #differ > 0 and "; outcomes differ: " .. table.concat(differ, ", ") or ""))
