-- tests/lua/test_report.lua: kwb report over a host run (tests/recipes/planted.lua):
-- report.md's figures are the run's; report.html is one file with every plot,
-- which headless Chromium loads with no console message, every plot in its
-- DOM, and a screenshot taken (left beside the report as report.png).
local t = require "t"
local store = require "kwb.loop.store"
local core = require "kwb.core"
local rr = require "kwb.insight.report"

local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$") .. "/report"
os.execute("rm -rf '" .. dir .. "'")
assert(core.mkdirs(dir))
local st = store.open(dir .. "/planted.db")
local recipe = kwb.load "tests/recipes/planted.lua"

t.test("report_needs_a_start_kernel_in_the_cache", function()
  t.raises(function() rr.write(recipe, dir, { store = st }) end,
           "recipe planted_matmul: the cache holds no start kernel's result on this device (run the recipe first)")
end)

-- (no final round: the report reads the stored medians, as for a run from before
-- there were certificates; a certified run's report is the last test's)
local sm, run = recipe:run { mode = "quiet", store = st, certify = 0 }
local d = rr.write(recipe, dir, { store = st })

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

t.test("report_md_has_the_runs_funnel_best_and_shapes", function()
  local md = read(dir .. "/report.md")
  for _, o in ipairs { "accepted", "slower", "wrong", "compile-error", "forbidden" } do
    t.truthy(md:find(string.format("| %s | %d |", o, sm.funnel[o]), 1, true), o .. " " .. sm.funnel[o])
  end
  t.eq(sm.funnel.forbidden, 2)
  t.eq(d.best.id, run.session.best.id, "the run's best")
  t.truthy(md:find(string.format("the best is %s at %.2fx", d.best.short, d.best.score), 1, true))
  t.truthy(md:find(string.format("| 6 | %.3fx |", d.best.score), 1, true), "the accepted sixth candidate lifts the best")
  t.truthy(md:find(string.format("| 5 | 1.000x |"), 1, true), "before it, the start kernel's 1.0")
  local row = d.shapes[2]
  t.eq(row.key, "n=96")
  t.near(row.speedup, run.session.start.shapes["n=96"].median / run.session.best.shapes["n=96"].median, 1e-9)
  t.truthy(md:find("| n=96 |", 1, true))
  t.truthy(md:find(d.best.short .. " (accepted, ", 1, true), "the lineage")
end)

t.test("report_shows_the_bests_bottleneck_where_it_was_profiled", function()
  t.eq(read(dir .. "/report.md"):find("bottleneck", 1, true), nil, "no profile, no bottleneck section")
  local p = require("kwb.checks.profile").summarise({ kernels = { { name = "matmul", seconds = 3e-6, dram = 20, sm = 75 } } }, 4e-6)
  st.cache:add_profile { candidate = d.best.id, device = d.device, shape = "n=96", class = p.class, data = p }
  local sub = dir .. "/profiled"
  rr.write(recipe, sub, { store = st })
  t.truthy(read(sub .. "/report.md"):find("## The best's bottleneck (kwb profile)\n\n- At n=96: compute-bound (the SM at "
                                          .. "75% of peak (memory 20%)); 1 kernel, busy 3.0 us of the plan's 4.0 us.", 1, true))
  t.truthy(read(sub .. "/report.html"):find("<h2>The best's bottleneck</h2><ul><li>At n=96: compute-bound", 1, true))
end)

t.test("report_html_is_one_file_with_every_plot", function()
  local html = read(dir .. "/report.html")
  for _, id in ipairs(rr.plots) do
    t.truthy(html:find('<svg id="' .. id .. '"', 1, true), id)
  end
  t.eq(html:find("<script", 1, true), nil, "no script")
  t.eq(html:find("http", 1, true) and html:match("https?://[^\"]*") ~= "http://www.w3.org/2000/svg", false,
       "nothing fetched (the only address is the SVG namespace)")
  -- every plot's value axis is ticked; the floor's share is drawn against 100%,
  -- not against its largest bar (1% looked full)
  for _, id in ipairs(rr.plots) do
    local svg = html:match('<svg id="' .. id:gsub("%-", "%%-") .. '".-</svg>')
    t.truthy(svg:find('<g class="tick">', 1, true), id .. " has ticks")
  end
  local floor = html:match('<svg id="floor".-</svg>')
  t.truthy(floor:find(">100%</text>", 1, true), "the floor's axis ends at 100%")
  local h = tonumber(floor:match('<rect x="[%d.]+" y="[%d.]+" width="[%d.]+" height="([%d.]+)"'))
  local pct = tonumber(floor:match('font%-size="11" text%-anchor="middle">(%d+)%%</text>'))
  t.truthy(h and pct and math.abs(h - 152 * pct / 100) < 1, string.format("a %s%% bar is %s of 152 high", pct, h))
end)

t.test("report_html_renders_in_headless_chromium", function()
  local chrome = require("kwb.base.files").which("chromium-headless-shell") or require("kwb.base.files").which("chromium")
  t.truthy(chrome, "chromium-headless-shell (Debian's package) is installed")
  local url = "file://" .. (dir:sub(1, 1) == "/" and dir or core.cwd() .. "/" .. dir) .. "/report.html"
  local base = { chrome, "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0" }
  local shot = { table.unpack(base) }
  for _, a in ipairs { "--window-size=1200,1400", "--screenshot=" .. dir .. "/report.png", url } do shot[#shot + 1] = a end
  local r = assert(core.exec(shot, { timeout = 120 }))
  t.eq(r.status, 0, r.err)
  t.eq(r.err:find("CONSOLE", 1, true), nil, "no console message: " .. r.err)
  local png = read(dir .. "/report.png")
  t.eq(png:sub(1, 8), "\137PNG\r\n\26\n", "a PNG")
  t.truthy(#png > 20000, "a page with plots on it: " .. #png .. " bytes")
  local dom = { table.unpack(base) }
  dom[#dom + 1] = "--dump-dom"
  dom[#dom + 1] = url
  local r2 = assert(core.exec(dom, { timeout = 120 }))
  t.eq(r2.status, 0, r2.err)
  for _, id in ipairs(rr.plots) do
    local svg = r2.out:match('<svg id="' .. id:gsub("%-", "%%-") .. '".-</svg>')
    t.truthy(svg and (svg:find("<rect", 1, true) or svg:find("<path", 1, true)), id .. " drawn")
  end
end)

t.test("report_cli_answers_json", function()
  local r = assert(core.exec({ "./kwb", "--cache", dir .. "/planted.db", "report", "tests/recipes/planted.lua", "--json",
                               dir .. "/cli" }, { timeout = 120 }))
  t.eq(r.status, 0, r.err)
  local j = require("cjson").decode(r.out)
  t.eq(j.best, run.session.best.id)
  t.eq(j.markdown, dir .. "/cli/report.md")
  t.eq(j.candidates, #d.conv)
  t.truthy(io.open(j.html), j.html)
end)

-- The run's rows as kwb cache check reads them: all sound (the checks an
-- import applies take every outcome an honest run stores).
t.test("report_an_honest_runs_rows_all_make_sense", function()
  local r = st.cache:check()
  local got = {}
  for i, e in ipairs(r.unsound) do got[i] = e.what .. ": " .. e.message end
  t.eq(table.concat(got, "\n"), "", "unsound rows")
  t.truthy(r.rows > 10, "rows checked: " .. r.rows)
end)

local function kind(path)
  local p = io.popen("stat -c %F '" .. path .. "' 2>&1")
  local out = p:read("a")
  p:close()
  return (out:gsub("\n$", ""))
end

-- Output paths: no parents made; a file there must be a regular one.
t.test("report_makes_no_parent_directories", function()
  t.raises(function() rr.write(recipe, dir .. "/no/such", { store = st }) end,
           "cannot write into the directory " .. dir .. "/no/such: the directory " .. dir .. "/no does not exist "
           .. "(kwb makes the directory named, not its parents)")
  t.truthy(kind(dir .. "/no"):match("No such file"), "nothing made")
  local r = assert(core.exec({ "./kwb", "--cache", dir .. "/planted.db", "report", "tests/recipes/planted.lua",
                               dir .. "/no/such" }, { timeout = 120 }))
  t.eq(r.status, 1)
  t.eq(r.err, "kwb report: cannot write into the directory " .. dir .. "/no/such: the directory " .. dir .. "/no does "
       .. "not exist (kwb makes the directory named, not its parents)\n")
end)

t.test("report_refuses_a_device_where_a_file_goes", function()
  local d = dir .. "/dev"
  assert(core.mkdirs(d))
  os.execute(string.format("ln -sf /dev/full '%s/report.md'", d))
  t.raises(function() rr.write(recipe, d, { store = st }) end,
           "cannot write the file " .. d .. "/report.md: it is a character device, not a regular file")
  t.eq(kind("/dev/full"), "character special file", "the device is as it was")
  t.eq(io.open(d .. "/report.html"), nil, "nothing written before the refusal")
  t.raises(function() rr.write(recipe, "/dev/full", { store = st }) end,
           "cannot write into the directory /dev/full: it is a character device, not a directory")
end)

-- A run with a final round: the report's pick, its speed-ups with their
-- intervals, each shape's winner and "faster elsewhere" are the round's
-- (its certificate's), and it says so; kwb report's line and JSON too. The
-- report of the run without one (above) has none of it.
t.test("report_of_a_certified_run_takes_its_figures_from_the_certificate", function()
  local certify = require "kwb.loop.certify"
  local before = read(dir .. "/report.md")
  t.eq(before:find("Certified:", 1, true), nil, "no round, no certificate")
  t.eq(before:find("winner", 1, true), nil, "nor winners")
  t.truthy(before:find("| shape | start | best | speedup | % of the floor |\n", 1, true), before)
  local again = kwb.load "tests/recipes/planted.lua"
  local sm2, run2 = again:run { mode = "quiet", store = st }
  local c = sm2.certificate
  t.truthy(c, "the second run certifies the cached best")
  local sub = dir .. "/certified"
  local cd = rr.write(recipe, sub, { store = st })
  local md = read(sub .. "/report.md")
  local start = certify.role(c, "start")
  local sc = certify.find(c, "score", c.pick, start)
  t.eq(cd.cert.run, run2.record.id, "the latest run's certificate")
  t.eq(cd.best.id, c.pick)
  t.truthy(md:find(string.format("; the best is %s at %.2fx the start kernel (the geometric mean over 2 shapes, 95%% "
                                 .. "interval %.2f-%.2f).\n", cd.best.short, sc.median, sc.lo, sc.hi), 1, true), md)
  t.truthy(md:find(string.format("\nCertified: %d rounds in turns (run %s's final round, 2 kernels, ", c.rounds,
                                 run2.record.short), 1, true), md)
  t.truthy(md:find("| shape | start | best | speedup | 95% interval | % of the floor |\n", 1, true), md)
  local pe, se = certify.entry(c, c.pick), certify.entry(c, start)
  for _, key in ipairs { "n=48", "n=96" } do
    local r = certify.find(c, "speedup", c.pick, start, key)
    local row = string.format("| %s | %s | %s | %.2fx | %.2f-%.2f | %.0f%% |\n", key, require("kwb.figures").time(se.median[key]),
                              require("kwb.figures").time(pe.median[key]), r.median, r.lo, r.hi,
                              100 * cd.best.shapes[key].floor_frac)
    t.truthy(md:find(row, 1, true), row .. md)
  end
  t.truthy(md:find("\n## Each shape's winner (the final round)\n\n| shape | winner | what | its time | the pick's | gain "
                   .. "| 95% interval |\n", 1, true), md)
  t.truthy(md:find(string.format("\n| n=96 | %s | the pick | %s | %s | - | - |\n", pe.short,
                                 require("kwb.figures").time(pe.median["n=96"]),
                                 require("kwb.figures").time(pe.median["n=96"])), 1, true), md)
  t.truthy(md:find("\nFaster elsewhere: nowhere; no kernel beats the pick by more than 2% at any shape.\n", 1, true), md)
  local html = read(sub .. "/report.html")
  t.truthy(html:find(string.format("<p>Certified: %d rounds in turns (run %s's final round", c.rounds, run2.record.short),
                     1, true), "the page says so")
  t.truthy(html:find("<h2>Each shape's winner (the final round)</h2><table>", 1, true), "and shows the winners")
  local r = assert(core.exec({ "./kwb", "--cache", dir .. "/planted.db", "report", "tests/recipes/planted.lua",
                               dir .. "/certified_cli" }, { timeout = 120 }))
  t.eq(r.status, 0, r.err)
  t.eq(r.out, string.format("wrote %s/report.md and %s/report.html: 6 candidates, best %s at %.2fx (certified: %d rounds "
                            .. "in turns, 95%% interval %.2f-%.2f)\n", dir .. "/certified_cli", dir .. "/certified_cli",
                            pe.short, sc.median, c.rounds, sc.lo, sc.hi))
  local rj = assert(core.exec({ "./kwb", "--cache", dir .. "/planted.db", "report", "tests/recipes/planted.lua", "--json",
                                dir .. "/certified_cli" }, { timeout = 120 }))
  local j = require("cjson").decode(rj.out)
  t.eq(j.certified.run, run2.record.id)
  t.eq(j.certified.rounds, c.rounds)
  t.near(j.best_score, sc.median, 1e-9)
  t.near(j.certified.interval[1], sc.lo, 1e-9)
end)

t.done()
