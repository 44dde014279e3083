-- tests/gpu/profile.lua RECIPE BUDGET OUTDIR: the recipe run (grid strategy,
-- seed 1), then kwb profile (Session:profile) of the start kernel where it is
-- slowest and at the first shape, and of the best where one beat the start;
-- ncu's output of each written to OUTDIR/profile-NAME-N.csv, and the run's
-- kwb report (report.md, report.html) to OUTDIR/report-NAME. Prints each
-- profile's table and an "ok"/"FAIL" line per profile: each kernel classed,
-- the plan classed, a duration for every kernel, the profile kept in the cache.
local file, budget, out = arg[1], math.tointeger(tonumber(arg[2])), arg[3] or "."
assert(file and budget, "usage: tests/gpu/profile.lua RECIPE BUDGET [OUTDIR]")
local profile = require "kwb.checks.profile"
local r = require("kwb.load").load(file)
r:run { candidates = budget, seed = 1, strategy = "grid", mode = "plain" }
local s = r:session()
local jobs = { { s.start.id, nil, "start" }, { s.start.id, r.shapes[1].key, "start at " .. r.shapes[1].key } }
if s.best and s.best.id ~= s.start.id then jobs[#jobs + 1] = { s.best.id, nil, "best" } end
local n, failed = 0, false
for _, j in ipairs(jobs) do
  n = n + 1
  local csv = string.format("%s/profile-%s-%d.csv", out, r.name, n)
  local ok, p = pcall(s.profile, s, j[1], j[2], csv)
  if not ok then
    print(string.format("FAIL %s %s: %s", r.name, j[3], tostring(p)))
    failed = true
  else
    for _, l in ipairs(profile.text(p, p.shape)) do print(l) end
    local good = p.class ~= nil and p.count > 0
    for _, k in ipairs(p.kernels) do good = good and k.class ~= nil and (k.seconds or 0) > 0 end
    local kept = s.store.cache:profiles(j[1])
    local stored = false
    for _, row in ipairs(kept or {}) do stored = stored or (row.shape == p.shape and row.class == p.class) end
    print(string.format("%s %s %s (%s): %s-bound, %d kernels, kept %s", good and stored and "ok" or "FAIL", r.name, j[3],
                        p.shape, p.class, p.count, tostring(stored)))
  end
end
-- the run's report, the best's bottleneck in it (kwb report)
local rdir = string.format("%s/report-%s", out, r.name)
local ok, err = pcall(require("kwb.insight.report").write, r, rdir, { store = s.store })
print(string.format("%s %s report in %s%s", ok and "ok" or "FAIL", r.name, rdir, ok and "" or (": " .. tostring(err))))
os.exit((failed or not ok) and 1 or 0)
