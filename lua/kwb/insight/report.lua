-- kwb/insight/report.lua: `kwb report RECIPE [DIR]`: what the cache knows of a
-- recipe on one device kind, as report.md and one self-contained report.html
-- (inline SVG, no script, nothing fetched): the best score over candidates
-- and over time, the outcome funnel, the best's speedup over the start
-- kernel and its share of the physical floor at each shape, the best's
-- lineage, and the best's bottleneck where kwb profile looked at it. Where
-- the latest run has a certificate (its final round, kwb.loop.certify), the
-- pick, its speed-ups, each shape's winner and "faster elsewhere" are that
-- round's, each ratio with its 95% interval, and the report says so; a
-- cache with none reads the best's stored medians.
local ids = require "kwb.base.ids"
local outcomes = require "kwb.base.outcomes"
local figures = require "kwb.figures"
local store = require "kwb.loop.store"

local M = {}


-- The plots, in the order the page shows them (each an <svg id=...>).
M.plots = { "convergence-candidates", "convergence-time", "funnel", "speedup", "floor" }

-- lineage(d, r) -> r and its parents through the results, 50 at most
local function lineage(d, r)
  local out = {}
  while r and #out < 50 do
    out[#out + 1] = r
    r = r.parent and d.by_id[r.parent] or nil
  end
  return out
end

-- data(recipe, results) -> what both files show.
function M.data(recipe, results)
  local d = { recipe = recipe, results = results, funnel = outcomes.counts(), conv = {}, conv_time = {} }
  local own = require("kwb.insight.export").start_id(recipe)
  for _, r in ipairs(results) do
    if r.outcome == "start" then d.start = r.id == own and r or d.start
    elseif d.funnel[r.outcome] then d.funnel[r.outcome] = d.funnel[r.outcome] + 1 end
  end
  if not d.start then
    error(string.format("recipe %s: the cache holds no start kernel's result on this device (run the recipe first)",
                        recipe.name), 0)
  end
  -- (the curve follows every best the run judged; the pick is one that may be named a best:
  -- never one whose put-off run never came, and where the recipe sanitizes one sanitized here)
  local store = require "kwb.loop.store"
  local sanitizing = store.sanitizing(recipe)
  local best, pick, t0, n = d.start, d.start, d.start.created or 0, 0
  for _, r in ipairs(results) do
    if r.outcome ~= "start" then
      n = n + 1
      if r.outcome == "accepted" and r.score and r.score > (best.score or 1) then best = r end
      if r.outcome == "accepted" and outcomes.may_be_best(r, sanitizing) and r.score and r.score > (pick.score or 1) then pick = r end
      d.conv[#d.conv + 1] = { n, best.score or 1 }
      d.conv_time[#d.conv_time + 1] = { ((r.created or t0) - t0) / 60, best.score or 1 }
    end
  end
  d.best = pick
  d.shapes = {}
  for i, sh in ipairs(recipe.shapes) do
    local b, s = pick.shapes[sh.key] or {}, d.start.shapes[sh.key] or {}
    d.shapes[i] = { key = sh.key, median = b.median, start = s.median,
                    speedup = b.median and s.median and s.median / b.median, floor = b.floor_frac }
  end
  d.by_id = {}
  for _, r in ipairs(results) do d.by_id[r.id] = r end
  d.lineage = lineage(d, pick)
  return d
end

-- certified(d, cert): the pick, its speed-ups and each shape's winner from
-- a run's final round (the latest certificate: kwb.loop.store's
-- latest_certificate) in place of the stored medians: d.best the pick's
-- record (the start kernel's where the round named none faster), d.score its
-- score's ratio, each shape's start and pick the round's medians, its
-- speed-up the round's with its interval, "vs baseline" the round's where it
-- timed the baseline; d.winners each shape's winner and its gain over the
-- pick there, d.elsewhere those beyond the margin (kwb.loop.certify.elsewhere).
-- A pick the cache holds no result of under this context (another
-- recipe's flags) leaves d as it was.
function M.certified(d, cert)
  local certify = require "kwb.loop.certify"
  local start = certify.role(cert, "start")
  local pick = cert.pick == start and d.start or d.by_id[cert.pick]
  if not pick then return end
  d.cert, d.best = cert, pick
  d.score = certify.find(cert, "score", cert.pick, start)
  local e, s0, bl = certify.entry(cert, cert.pick), certify.entry(cert, start), certify.role(cert, "baseline")
  for _, row in ipairs(d.shapes) do
    local r = certify.find(cert, "speedup", cert.pick, start, row.key)
    local mine = pick.shapes[row.key] or {}
    row.start, row.median, row.floor = s0.median[row.key], e.median[row.key], mine.floor_frac
    row.speedup, row.interval = r and r.median or 1, r and { r.lo, r.hi } or nil
    row.vs_baseline = bl and certify.find(cert, "vs_baseline", cert.pick, bl, row.key) or nil
    row.baseline = bl and certify.entry(cert, bl).median[row.key] or nil
  end
  d.winners = {}
  for i, key in ipairs(cert.shapes) do
    local w = cert.winners[key]
    local we = certify.entry(cert, w)
    d.winners[i] = { key = key, id = w, short = we.short, role = we.role, name = we.name, params = we.params,
                     median = we.median[key], pick = e.median[key],
                     gain = w ~= cert.pick and certify.find(cert, "gain", w, cert.pick, key) or nil }
  end
  d.elsewhere = certify.elsewhere(cert)
  d.lineage = lineage(d, pick)
end

-- What the report says of the pick: its score over the start kernel (the
-- round's median and interval where certified, else the best's stored score).
local function pick_text(d)
  local n = #d.recipe.shapes
  if d.cert and d.best == d.start then
    return "the final round found no kernel faster than the start kernel beyond the noise"
  end
  if d.score then
    return string.format("the best is %s at %.2fx the start kernel (the geometric mean over %d shapes, 95%% interval "
                         .. "%.2f-%.2f)", d.best.short, d.score.median, n, d.score.lo, d.score.hi)
  end
  return string.format("the best is %s at %.2fx the start kernel (the geometric mean over %d shapes)", d.best.short,
                       d.best.score or 1, n)
end

-- One sentence on the final round the figures come from, or nil.
local function certified_line(d)
  local c = d.cert
  if not c then return nil end
  return string.format("Certified: %d rounds in turns (run %s's final round, %d kernels, %s): the pick, its speed-ups, "
                       .. "each shape's winner and \"faster elsewhere\" come from it, each ratio with its 95%% interval.",
                       c.rounds, ids.short(c.run) or "?", #c.entries,
                       c.bound == "decided" and "every comparison decided"
                       or "bound reached, not every comparison decided")
end

local plots = require "kwb.insight.plots"
local esc, line_svg, bars_svg = plots.esc, plots.line_svg, plots.bars_svg

local function funnel_items(d)
  local items = {}
  for _, o in ipairs(outcomes.display) do
    if not outcomes.quiet[o] or d.funnel[o] > 0 then items[#items + 1] = { o, d.funnel[o] } end
  end
  return items
end

-- The table's columns: shape, start, best, speedup, the floor %, and where
-- a run measured the recipe's baseline, its time and the best's "vs
-- baseline" (the baseline's median over the best's).
-- Did the final round time the baseline? (its id, or nil)
local function certify_baseline(d)
  return d.cert and require("kwb.loop.certify").role(d.cert, "baseline")
end

-- Certified, the speed-up's 95% interval follows it, and the baseline's
-- columns are the round's where it timed the baseline.
local function shape_head(d)
  local head = { "shape", "start", "best", "speedup", "% of the floor" }
  if d.cert then table.insert(head, 5, "95% interval") end
  if d.cert and certify_baseline(d) or d.baseline and d.baseline.shapes then
    head[#head + 1] = "baseline"
    head[#head + 1] = "vs baseline"
  end
  return head
end

local function interval(iv) return iv and string.format("%.2f-%.2f", iv[1], iv[2]) or "-" end

local function shape_rows(d)
  local rows = {}
  local bl = d.baseline and d.baseline.shapes
  local in_round = d.cert and certify_baseline(d)
  for i, s in ipairs(d.shapes) do
    rows[i] = { s.key, figures.time(s.start), figures.time(s.median), s.speedup and string.format("%.2fx", s.speedup) or "-",
                s.floor and string.format("%.0f%%", 100 * s.floor) or "-" }
    if d.cert then table.insert(rows[i], 5, interval(s.interval)) end
    if in_round then   -- (the round's: the baseline's median, and its time over the pick's in turns)
      local v = s.vs_baseline
      rows[i][#rows[i] + 1] = figures.time(s.baseline)
      rows[i][#rows[i] + 1] = v and string.format("%.2fx (%s)", v.median, interval { v.lo, v.hi }) or "-"
    elseif bl then
      local b = bl[s.key] and bl[s.key].median
      rows[i][#rows[i] + 1] = b and figures.time(b) or "-"
      rows[i][#rows[i] + 1] = b and s.median and string.format("%.2fx", b / s.median) or "-"
    end
  end
  return rows
end

-- Each shape's winner in the final round: its time, the pick's, and its
-- gain over the pick with its interval ("-" where the pick wins there).
local winner_head = { "shape", "winner", "what", "its time", "the pick's", "gain", "95% interval" }

local function winner_rows(d)
  local rows = {}
  for i, w in ipairs(d.winners or {}) do
    local what = w.role == "start" and "the start kernel" or w.id == d.cert.pick and "the pick"
                 or w.params and next(w.params) and require("kwb.base.text").params_text(w.params) or w.name or ""
    rows[i] = { w.key, w.short, what, figures.time(w.median), figures.time(w.pick),
                w.gain and string.format("%.2fx", w.gain.median) or "-", w.gain and interval { w.gain.lo, w.gain.hi } or "-" }
  end
  return rows
end

-- "faster elsewhere" from the round: where another kernel beats the pick by
-- more than the margin (kwb.loop.standings.elsewhere_margin).
local function elsewhere_line(d)
  local margin = 100 * require("kwb.loop.standings").elsewhere_margin
  local n = #(d.elsewhere or {})
  if n == 0 then
    return string.format("Faster elsewhere: nowhere; no kernel beats the pick by more than %.0f%% at any shape.", margin)
  end
  local parts = {}
  for i, e in ipairs(d.elsewhere) do
    parts[i] = string.format("%s at %s, %.2fx (%s)", e.short, e.shape, e.gain.median, interval { e.gain.lo, e.gain.hi })
  end
  return string.format("Faster elsewhere: at %d of %d shapes another kernel beats the pick by more than %.0f%%: %s.", n,
                       #d.shapes, margin, table.concat(parts, "; "))
end

-- One sentence on the baseline of the latest run that measured one.
local function baseline_line(d)
  local b = d.baseline
  if certify_baseline(d) then
    local e = require("kwb.loop.certify").entry(d.cert, certify_baseline(d))
    return string.format("Baseline %s: timed in the final round in turns with the pick; \"vs baseline\" is its time "
                         .. "over the pick's there, with its 95%% interval.", e.name or e.short)
  end
  if not b then return nil end
  if b.error then
    return string.format("Baseline %s: not measured in run %s (an error of the recipe: %s).", b.name,
                         ids.short(b.run), b.error)
  end
  return string.format("Baseline %s%s: measured in run %s, timed like the candidates; \"vs baseline\" is its median "
                       .. "over the best's.", b.name, b.description and (" (" .. b.description .. ")") or "",
                       ids.short(b.run))
end

-- The best's profiles (kwb profile), one sentence each: shape, class, why.
local function profile_lines(d)
  local out = {}
  for _, row in ipairs(d.profiles or {}) do
    local p = row.data
    out[#out + 1] = string.format("At %s: %s-bound (%s); %d kernel%s, busy %s of the plan's %s.", row.shape, row.class,
                                  p.why or "", p.count or 0, p.count == 1 and "" or "s", figures.time(p.busy),
                                  figures.time(p.plan_seconds))
  end
  return out
end

local function lineage_text(d)
  local out = {}
  for _, r in ipairs(d.lineage) do
    out[#out + 1] = string.format("%s (%s%s)", r.short, r.outcome, r.score and string.format(", %.2fx", r.score) or "")
  end
  return table.concat(out, " <- ")
end

function M.markdown(d)
  local r = d.recipe
  local L = {
    "# " .. r.name .. ": what the cache knows",
    "",
    string.format("Problem %s on %s. %d candidates after the start kernel %s; %s.", r.problem:key(), d.device, #d.conv,
                  d.start.short, pick_text(d)),
    "",
  }
  if certified_line(d) then
    L[#L + 1] = certified_line(d)
    L[#L + 1] = ""
  end
  for _, l in ipairs {
    "## Outcomes",
    "",
    "| outcome | candidates |",
    "|---|---:|",
  } do L[#L + 1] = l end
  for _, it in ipairs(funnel_items(d)) do L[#L + 1] = string.format("| %s | %d |", it[1], it[2]) end
  L[#L + 1] = ""
  L[#L + 1] = "## The best at each shape"
  L[#L + 1] = ""
  local head = shape_head(d)
  L[#L + 1] = "| " .. table.concat(head, " | ") .. " |"
  L[#L + 1] = "|---" .. string.rep("|---:", #head - 1) .. "|"
  for _, row in ipairs(shape_rows(d)) do L[#L + 1] = "| " .. table.concat(row, " | ") .. " |" end
  L[#L + 1] = ""
  if baseline_line(d) then
    L[#L + 1] = baseline_line(d)
    L[#L + 1] = ""
  end
  if d.winners then
    L[#L + 1] = "## Each shape's winner (the final round)"
    L[#L + 1] = ""
    L[#L + 1] = "| " .. table.concat(winner_head, " | ") .. " |"
    L[#L + 1] = "|---|---|---" .. string.rep("|---:", #winner_head - 3) .. "|"
    for _, row in ipairs(winner_rows(d)) do L[#L + 1] = "| " .. table.concat(row, " | ") .. " |" end
    L[#L + 1] = ""
    L[#L + 1] = elsewhere_line(d)
    L[#L + 1] = ""
  end
  L[#L + 1] = "## Convergence"
  L[#L + 1] = ""
  L[#L + 1] = "| candidate | best score so far |"
  L[#L + 1] = "|---:|---:|"
  for _, p in ipairs(d.conv) do L[#L + 1] = string.format("| %d | %.3fx |", p[1], p[2]) end
  L[#L + 1] = ""
  L[#L + 1] = "## Lineage of the best"
  L[#L + 1] = ""
  L[#L + 1] = lineage_text(d)
  L[#L + 1] = ""
  local prof = profile_lines(d)
  if #prof > 0 then
    L[#L + 1] = "## The best's bottleneck (kwb profile)"
    L[#L + 1] = ""
    for _, l in ipairs(prof) do L[#L + 1] = "- " .. l end
    L[#L + 1] = ""
  end
  L[#L + 1] = "The plots are in report.html."
  return table.concat(L, "\n") .. "\n"
end

function M.html(d)
  local r = d.recipe
  local speed, floor = {}, {}
  for i, s in ipairs(d.shapes) do
    speed[i] = { s.key, s.speedup }
    floor[i] = { s.key, s.floor and 100 * s.floor }
  end
  local rows, head = {}, {}
  for _, row in ipairs(shape_rows(d)) do
    local cells = {}
    for i = 1, #row do cells[i] = "<td>" .. esc(row[i]) .. "</td>" end
    rows[#rows + 1] = "<tr>" .. table.concat(cells) .. "</tr>"
  end
  for i, h in ipairs(shape_head(d)) do head[i] = "<th>" .. esc(h) .. "</th>" end
  local winners = ""
  if d.winners then
    local wh, wr = {}, {}
    for i, h in ipairs(winner_head) do wh[i] = "<th>" .. esc(h) .. "</th>" end
    for _, row in ipairs(winner_rows(d)) do
      local cells = {}
      for i = 1, #row do cells[i] = "<td>" .. esc(row[i]) .. "</td>" end
      wr[#wr + 1] = "<tr>" .. table.concat(cells) .. "</tr>"
    end
    winners = "<h2>Each shape's winner (the final round)</h2><table><tr>" .. table.concat(wh) .. "</tr>"
              .. table.concat(wr) .. "</table><p>" .. esc(elsewhere_line(d)) .. "</p>"
  end
  return table.concat({
    "<!DOCTYPE html>",
    '<html lang="en"><head><meta charset="utf-8"><title>' .. esc(r.name) .. ": kwb report</title>",
    "<style>body{font-family:sans-serif;max-width:1200px;margin:1em auto}section{display:inline-block;margin:8px}"
      .. "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}</style>",
    "</head><body>",
    "<h1>" .. esc(r.name) .. "</h1>",
    string.format("<p>Problem %s on %s. %d candidates after the start kernel %s; %s.</p>", esc(r.problem:key()),
                  esc(d.device), #d.conv, esc(d.start.short), esc(pick_text(d))),
    certified_line(d) and ("<p>" .. esc(certified_line(d)) .. "</p>") or "",
    "<section><h2>Best score over candidates</h2>"
      .. line_svg("convergence-candidates", "best score over candidates", "candidate", "best score", d.conv) .. "</section>",
    "<section><h2>Best score over time</h2>"
      .. line_svg("convergence-time", "best score over time", "minutes", "best score", d.conv_time) .. "</section>",
    "<section><h2>Outcomes</h2>" .. bars_svg("funnel", "candidates by outcome", funnel_items(d), "%d") .. "</section>",
    "<section><h2>Speedup over the start kernel</h2>"
      .. bars_svg("speedup", "the best's speedup at each shape", speed, "%.2fx") .. "</section>",
    "<section><h2>Share of the physical floor</h2>"
      .. bars_svg("floor", "the best's % of the floor at each shape", floor, "%.0f%%", 100) .. "</section>",
    "<h2>The best at each shape</h2><table><tr>" .. table.concat(head) .. "</tr>" .. table.concat(rows) .. "</table>",
    baseline_line(d) and ("<p>" .. esc(baseline_line(d)) .. "</p>") or "",
    winners,
    "<h2>Lineage of the best</h2><p>" .. esc(lineage_text(d)) .. "</p>",
    #profile_lines(d) > 0 and ("<h2>The best's bottleneck</h2><ul><li>" .. esc(table.concat(profile_lines(d), "\n"))
      :gsub("\n", "</li><li>") .. "</li></ul>") or "",
    "</body></html>",
  }, "\n") .. "\n"
end

-- write(recipe, dir, { device =, store = }) -> the data shown.
function M.write(recipe, dir, opts)
  opts = opts or {}
  local core = require "kwb.core"   -- (DIR made where its parent exists; no parents are made)
  local ok, msg = core.output_dir(dir)
  if not ok then error(msg, 0) end
  for _, name in ipairs { "report.md", "report.html" } do   -- (never a device or a FIFO)
    local fine, why = core.output_file(dir .. "/" .. name)
    if not fine then error(why, 0) end
  end
  local st = opts.store or store.open()
  local device = opts.device or require("kwb.measure.backends").load(recipe.backend).device()
  local d = M.data(recipe, st:results(st:recipe_context(recipe, device)))
  d.device = device
  d.baseline = st:baseline(recipe, device)   -- (the latest run's that measured one)
  local cert = st:latest_certificate(recipe, device, d.start.id)   -- (the latest run's final round, where it had one)
  if cert then M.certified(d, cert) end
  for _, row in ipairs(st.cache:profiles(d.best.id) or {}) do   -- the best's bottleneck, where it was profiled
    if row.device == device then d.profiles = d.profiles or {}; d.profiles[#d.profiles + 1] = row end
  end
  for name, text in pairs { ["report.md"] = M.markdown(d), ["report.html"] = M.html(d) } do
    local f, err = io.open(dir .. "/" .. name, "w")
    if not f then error("cannot write " .. dir .. "/" .. name .. ": " .. tostring(err), 0) end
    f:write(text)
    f:close()
  end
  return d
end

return M
