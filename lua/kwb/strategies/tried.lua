-- kwb/strategies/tried.lua: what was tried, as a model's prompt shows it
-- (kwb.strategies.prompt's attempts and near parts): the last attempts as a
-- table (outcome, score and each shape's speed-up over the start kernel, or
-- the failure's one-line reason; slower ones too), and the near misses
-- (verified kernels close to the parent's score, or faster than it at some
-- shape). Each names what it tried: the parameters it changed, else the
-- first line of its rationale, else its file.
local ktext = require "kwb.base.text"
local outcomes = require "kwb.base.outcomes"

local M = {}

-- Attempts in the table, newest first.
M.attempts = 8
-- Near misses shown: verified kernels whose score is at least (1 - near)
-- the parent's, or which beat the parent at a shape by more than
-- shape_margin (kwb.loop.standings' elsewhere_margin, its "faster
-- elsewhere"); the best scores first.
M.near, M.near_misses, M.shape_margin = 0.05, 3, 0.02

-- The first line of a text, at most n bytes (cut at a whole character).
local function one_line(s, n)
  local l = s and s:match("^%s*([^\n]*)") or ""
  l = l:gsub("%s+$", "")
  if #l > n then l = ktext.cut(l, n) .. " ..." end
  return l
end

-- A table cell: one line, its bars escaped.
local function cell(s)
  return (tostring(s):gsub("%s*\n%s*", " "):gsub("|", "\\|"))
end

-- What an attempt tried, in a few words: its parameters that differ from
-- the parent's (all of them where the parent has none), else the first line
-- of its rationale, else its file's name.
local function what(res, rationale, base)
  local p = res.params
  if p and next(p) then
    local differ = {}
    for k, v in pairs(p) do
      if not base or base[k] ~= v then differ[k] = v end
    end
    if next(differ) then return one_line(ktext.params_text(differ), 80) end
  end
  if rationale and rationale:match("%S") then return one_line(rationale, 60) end
  return res.name or "-"
end

-- table(recipe, list) -> the attempts' table, or nil where there are none
function M.table(r, list)
  if #list == 0 then return nil end
  local head = { "attempt", "what", "outcome", "score" }
  for _, sh in ipairs(r.shapes) do head[#head + 1] = sh.key end
  head[#head + 1] = "reason"
  local rows = { "| " .. table.concat(head, " | ") .. " |", "|" .. string.rep("---|", #head) }
  local raced = false
  for _, a in ipairs(list) do
    local res = a.res
    local timed = outcomes.verified[res.outcome]
    local row = { res.short or "-", cell(a.what), res.outcome,
                  timed and res.score and string.format("%.2fx", res.score) or "-" }
    for _, sh in ipairs(r.shapes) do
      local x = timed and res.shapes and res.shapes[sh.key]
      row[#row + 1] = x and x.speedup and string.format("%.2fx%s", x.speedup, x.partial and "*" or "") or "-"
      raced = raced or (x and x.partial) or false
    end
    -- (a duplicate's reason names the kernel whose compiled code it is: kwb.loop.result.duplicate)
    local why = res.outcome == "duplicate" and res.reason and ("your kernel is " .. res.reason) or res.reason
    row[#row + 1] = cell(one_line(why, 160))
    rows[#rows + 1] = "| " .. table.concat(row, " | ") .. " |"
  end
  return string.format("The last attempts (newest first; score: the geometric mean over shapes of the speed-up over "
                       .. "the start kernel, each shape's after it%s):\n%s",
                       raced and "; *: raced, its timing stopped early once it was clearly slower than the best there"
                       or "", table.concat(rows, "\n"))
end

-- near_text(list, parent) -> the near misses as lines, or nil where there are none
function M.near_text(list, p)
  if #list == 0 then return nil end
  local lines = { string.format("Near misses (other verified kernels within %g%% of the parent's score, or faster than "
                                .. "it at some shape; speed-ups over the start kernel):", 100 * M.near) }
  for _, n in ipairs(list) do
    local at = {}
    for _, f in ipairs(n.faster) do
      at[#at + 1] = string.format("%s (%.2fx against the parent's %.2fx)", f.key, f.mine, f.parent)
    end
    lines[#lines + 1] = string.format("- %s (%s): %s, %.2fx (the parent %.2fx)%s", n.res.short, n.what,
                                      n.res.outcome, n.res.score, p.score,
                                      #at > 0 and ("; faster than the parent at " .. table.concat(at, ", ")) or "")
  end
  return table.concat(lines, "\n")
end

-- last(m, rationale_of, base) -> { { res =, what = }, ... }: the last attempts: the earlier ones (prior: results stored before, oldest
-- first, the start kernel's left out) then this run's feedback, newest first,
-- at most M.attempts; each with what it tried (against base, the parent's
-- parameters).
function M.last(m, rationale_of, base)
  local mine, all = {}, {}
  for _, res in ipairs(m.feedback or {}) do
    if res.id then mine[res.id] = true end
  end
  for _, res in ipairs(m.prior or {}) do
    if res.outcome ~= "start" and not mine[res.id] then all[#all + 1] = res end
  end
  for _, res in ipairs(m.feedback or {}) do all[#all + 1] = res end
  local out = {}
  for i = #all, math.max(1, #all - M.attempts + 1), -1 do
    out[#out + 1] = { res = all[i], what = what(all[i], rationale_of(all[i]), base) }
  end
  return out
end

-- misses(recipe, parent, m, rationale_of) -> { { res =, faster =, what = }, ... }:
-- the near misses (M.near, M.near_misses) among this run's results and the
-- earlier ones (a result of this run first: its outcome may have been revised).
function M.misses(recipe, p, m, rationale_of)
  if not (p and p.score and p.shapes) then return {} end
  local margin = M.shape_margin
  local out, seen = {}, {}
  local function consider(res)
    if not res.id or seen[res.id] or res.id == p.id then return end
    seen[res.id] = true
    if not (res.outcome == "accepted" or res.outcome == "slower") or not res.score then return end
    local faster = {}
    for _, sh in ipairs(recipe.shapes) do
      local mine, theirs = res.shapes[sh.key], p.shapes[sh.key]
      if mine and theirs and mine.median and theirs.median and not mine.partial
         and mine.median * (1 + margin) < theirs.median then
        faster[#faster + 1] = { key = sh.key, mine = mine.speedup or 1, parent = theirs.speedup or 1 }
      end
    end
    if res.score >= p.score * (1 - M.near) or #faster > 0 then out[#out + 1] = { res = res, faster = faster } end
  end
  for i = #(m.results or {}), 1, -1 do consider(m.results[i]) end
  for i = #(m.prior or {}), 1, -1 do consider(m.prior[i]) end
  table.sort(out, function(a, b)
    if a.res.score ~= b.res.score then return a.res.score > b.res.score end
    return (a.res.seq or 0) > (b.res.seq or 0)
  end)
  for i = #out, M.near_misses + 1, -1 do out[i] = nil end
  for _, n in ipairs(out) do n.what = what(n.res, rationale_of(n.res), p.params) end
  return out
end

-- gather(m) -> the raw material of a prompt, from m: { recipe =, cache =
-- (kwb.cache), device = (the kind results are keyed by), best =, start =,
-- parent = (a result; default the best), parent_source = (its source where
-- the cache has none: a start kernel not yet measured), ceilings =, prior =
-- (the results stored before this run, oldest first), results = (this run's),

return M
