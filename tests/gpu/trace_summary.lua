-- tests/gpu/trace_summary.lua: a KWB_TRACE log (kwb.runners.workers) read back: each
-- step's seconds (to the next line of its task), the 15 longest, the seconds
-- per kind of step (its words with the shape and numbers taken out), and
-- each candidate event's stages from the run's JSON events.
--   ./kwb tests/gpu/trace_summary.lua TRACE.err [EVENTS.jsonl]
local file, events = ...
local last, steps = {}, {}
local function close(task, t)
  local l = last[task]
  if l then steps[#steps + 1] = { task = task, what = l.what, s = t - l.t } end
end
for line in io.lines(file) do
  local task, fn, t, what = line:match("^kwb trace: task (%d+) %(([^)]*)%) +([%d.]+) s: (.*)$")
  if task then
    t = tonumber(t)
    close(task, t)
    last[task] = { t = t, what = what .. "  [" .. fn:gsub("^kwb%.", "") .. " " .. task .. "]" }
    if what == "answered" or what:match("^%a+: ") then last[task] = nil end
  end
end
for task, l in pairs(last) do
  steps[#steps + 1] = { task = task, what = l.what .. " (unfinished: the last step seen)", s = -1 }
end
table.sort(steps, function(a, b) return a.s > b.s end)
print(string.format("%d steps; the longest:", #steps))
for i = 1, math.min(15, #steps) do print(string.format("  %9.3f s  %s", steps[i].s, steps[i].what)) end
for _, st in ipairs(steps) do
  if st.s < 0 then print("  still running at the end: " .. st.what) end
end
local kinds, order = {}, {}
for _, st in ipairs(steps) do
  local k = st.what:gsub("  %[.*%]$", ""):gsub(" at [%w=,_]+", " at SHAPE"):gsub("%(limit [^)]*%)", ""):gsub("%d+", "N")
  if not kinds[k] then kinds[k] = { n = 0, s = 0 }; order[#order + 1] = k end
  kinds[k].n, kinds[k].s = kinds[k].n + 1, kinds[k].s + math.max(st.s, 0)
end
table.sort(order, function(a, b) return kinds[a].s > kinds[b].s end)
print("seconds per kind of step:")
for i = 1, math.min(12, #order) do
  print(string.format("  %9.3f s  %4d x  %s", kinds[order[i]].s, kinds[order[i]].n, order[i]))
end
if events then
  local ok, cjson = pcall(require, "cjson")
  for l in io.lines(events) do
    local okd, e = pcall(cjson.decode, l)
    if ok and okd and (e.event == "candidate" or e.event == "start-kernel") then
      local g, parts = type(e.stages) == "table" and e.stages or {}, {}
      for _, k in ipairs { "build", "verify", "time", "calls", "reference", "sanitize" } do
        if type(g[k]) == "number" then parts[#parts + 1] = string.format("%s %.2f", k, g[k]) end
      end
      print(string.format("%s %s %s  %s s  %s", e.event, tostring(e.id):sub(1, 12), tostring(e.outcome or ""),
                          type(e.seconds) == "number" and string.format("%.2f", e.seconds) or "?", table.concat(parts, ", ")))
    end
  end
end
