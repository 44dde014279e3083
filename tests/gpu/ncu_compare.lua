-- tests/gpu/ncu_compare.lua NCU.csv FIGURES.json: kwb's medians next to ncu's
-- gpu__time_duration (median over the profiled launches) for the same kernels.
local t = require "t"
local csv, figs = arg[1], arg[2]
local f = assert(io.open(figs)); local fig = require("cjson").decode(f:read("a")); f:close()
local times = { axpb = {}, copy4 = {} }
local scale = { ns = 1e-3, nsecond = 1e-3, us = 1, usecond = 1, ms = 1e3, msecond = 1e3, s = 1e6, second = 1e6 }
for line in io.lines(csv) do
  local fields = {}
  for v in line:gmatch('"([^"]*)"') do fields[#fields + 1] = v end
  local name = line:match('"(axpb)"') or line:match('"(copy4)[^"]*"')
  if name and #fields >= 3 and fields[#fields - 2] == "gpu__time_duration.sum" then
    local unit, value = fields[#fields - 1], tonumber((fields[#fields]:gsub(",", "")))
    times[name][#times[name] + 1] = value * assert(scale[unit], "unit " .. unit)
  end
end
local function median(v) table.sort(v); return v[(#v + 1) // 2] end
-- Event timing carries about a microsecond of its own (event nodes or event
-- records around the kernel): for the 50 us axpb that is up to ~3%, so its
-- check allows 3% or 2 us, whichever is larger; the 540 us copy gets 3%.
for name, key in pairs { axpb = "axpb_64MiB_median_us", copy4 = "copy_kernel_median_us" } do
  t.test("kwb_time_within_3pct_" .. (name == "axpb" and "or_2us_" or "") .. "of_ncu_" .. name, function()
    t.truthy(#times[name] > 0, "ncu measured " .. name)
    local ncu, mine = median(times[name]), tonumber(fig[key])
    local diff = (mine - ncu) / ncu
    print(string.format("figure ncu_vs_kwb_%s = ncu %.3f us, kwb %.3f us, %+.2f%%", name, ncu, mine, 100 * diff))
    local plain = tonumber(fig[key:gsub("_median_us", "_nograph_median_us")])
    if plain then
      print(string.format("figure ncu_vs_kwb_%s_plain_launches = kwb %.3f us, %+.2f%%", name, plain, 100 * (plain - ncu) / ncu))
    end
    local allowed = name == "axpb" and math.max(0.03 * ncu, 2.0) or 0.03 * ncu
    t.truthy(math.abs(mine - ncu) <= allowed, string.format("%s: kwb %.3f us vs ncu %.3f us", name, mine, ncu))
  end)
end
t.done()
