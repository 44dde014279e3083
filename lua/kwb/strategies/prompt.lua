-- kwb/strategies/prompt.lua: what the model is told. The prompt is built from parts,
-- each a text a recipe's `prompt` function may keep, reorder or replace:
--
--   role      who the model is and what it is asked for
--   rules     the recipe's forbidden actions and what never to do, in words
--   context   the recipe's context documents (hwdocs/, modeldocs/), the
--             sections most relevant to the problem first, within a size budget
--   problem   the signature, shapes, tolerance, bytes, flops and each shape's floor
--   best      the current best source with its per-shape table and % of floor
--   profile   the best's profile where kwb profile made one (model.profile:
--             the loop profiles each new best): its bottleneck and why
--   failures  the last failed candidates with their evidence, and the last
--             repeats and duplicates with the kernel each repeated
--   lessons   the lessons ledger's lessons on this device kind (kwb.strategies.lessons):
--             the problem's own, newest first, then other problems' that share a tag,
--             within model.lessons_bytes (3000 by default)
--   ideas     the humans' ideas (the recipe's `ideas`, kwb.idea "..." at the REPL)
--   format    how to answer (one code block; a template's space as a lua block)
--
--   local convo = prompt.build(run, { mode = "source" | "template" | "agent" })
--   -- { system =, messages = { { role = "user", content = } }, parts = }
--
-- recipe.prompt(parts, info) may return a string (the user message) or
-- { system =, user = }; info holds the raw material (recipe, best, failures, lessons).
local ktext = require "kwb.base.text"
local ceilings = require "kwb.measure.ceilings"
local figures = require "kwb.figures"
local lessons = require "kwb.strategies.lessons"

local M = {}

-- Bytes of context documents a prompt holds at most (model.context_bytes).
M.context_bytes = 24000
-- Failures shown, newest first.
M.failures = 4

-- Ideas queued at the REPL (kwb.idea "..."): they go into the next prompt.
M.queued = {}

function M.idea(text)
  if type(text) ~= "string" or text == "" then error("kwb.idea: expected a sentence", 2) end
  M.queued[#M.queued + 1] = text
end

-- ---- the problem ----------------------------------------------------------

local function tolerance_text(t)
  local parts = {}
  for _, k in ipairs { "atol", "rtol", "rel_l2" } do
    if t and t[k] then parts[#parts + 1] = string.format("%s %g", k, t[k]) end
  end
  return #parts > 0 and table.concat(parts, ", ") or "exact"
end

local function problem_part(info)
  local r, p, c = info.recipe, info.recipe.problem, info.ceilings
  local lines = { string.format("Problem %s: %s.", p.name, p.description or p.name),
                  string.format("Every candidate exports `%s`%s.", p:prototype(),
                                r.backend == "cuda" and " (CUDA kernels the recipe's launch plan calls)" or ""),
                  string.format("Outputs are compared with a trusted reference (tolerance: %s) on fresh random "
                                .. "inputs, twice per shape, every shape below.", tolerance_text(p.tolerance)),
                  string.format("Compiler flags: %s.", #r.flags > 0 and table.concat(r.flags, " ") or "none") }
  local rows = {}
  for _, sh in ipairs(r.shapes) do
    local bytes, flops = p:bytes_of(sh.shape), p:flops_of(sh.shape)
    local floor = c and ceilings.floor(c, bytes, flops)
    local st = info.start and info.start.shapes[sh.key]
    rows[#rows + 1] = string.format("| %s | %s | %s | %s | %s |", sh.key, bytes and string.format("%.3g", bytes) or "-",
      flops and string.format("%.3g", flops) or "-", floor and figures.time(floor) or "-",
      st and figures.time(st.median) or "-")
  end
  lines[#lines + 1] = "\n| shape | bytes | flops | physical floor | start kernel |\n|---|---|---|---|---|\n"
                      .. table.concat(rows, "\n")
  return table.concat(lines, "\n")
end

-- ---- rules ------------------------------------------------------------------

M.never = {
  "Never special-case the benchmark's shapes or inputs: every shape must be computed in full, for any input.",
  "Never keep results or state across calls (no static or global buffers, caches, environment variables or files).",
  "Never touch the harness: no reading clocks, no threads or other streams, no synchronising, no looking "
    .. "symbols up at run time, no leaving the process.",
  "Never drop or bypass the launch path the harness uses (CUDA graphs, streams): the time measured is the time a user gets.",
  "Never lower the precision below what the tolerance allows.",
}

local function rules_part(info)
  local lines = { "Rules (a candidate that breaks one is rejected before it runs):" }
  for _, rule in ipairs(info.recipe.rules.rules) do
    lines[#lines + 1] = string.format("- %s: %s", rule.name, rule.why)
  end
  for _, n in ipairs(M.never) do lines[#lines + 1] = "- " .. n end
  return table.concat(lines, "\n")
end

-- ---- context documents -----------------------------------------------------

local stop = { the = true, ["and"] = true, ["for"] = true, with = true, that = true, this = true, from = true,
               are = true, per = true, row = true, major = true }

local function words(text, into)
  into = into or {}
  for w in text:lower():gmatch("[%a_][%w_]+") do
    if #w >= 3 and not stop[w] then into[w] = true end
  end
  return into
end

-- The sections of a Markdown file (split at headings).
local function sections(path, text)
  local out, cur = {}, nil
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^#+ ") or not cur then
      cur = { file = path, title = line:match("^#+ (.*)") or "", lines = {} }
      out[#out + 1] = cur
    end
    cur.lines[#cur.lines + 1] = line
  end
  for i, s in ipairs(out) do s.text, s.order = table.concat(s.lines, "\n"), i end
  return out
end

-- documents(paths, terms, budget) -> text, { "file: title", ... }: sections
-- ranked by how many of the terms they use (the earlier the better on a tie),
-- as many as fit in budget bytes.
function M.documents(paths, terms, budget)
  local all = {}
  for fi, path in ipairs(paths) do
    local f = io.open(path, "r")
    if f then
      local text = f:read("a")
      f:close()
      for _, s in ipairs(sections(path, text)) do
        local lower, score = s.text:lower(), 0
        for w in pairs(terms) do
          if lower:find(w, 1, true) then score = score + 1 end
        end
        s.score, s.fi = score, fi
        -- a heading with nothing under it is no content
        if s.text:gsub("^#+ [^\n]*", ""):match("%S") then all[#all + 1] = s end
      end
    end
  end
  table.sort(all, function(a, b)
    if a.score ~= b.score then return a.score > b.score end
    if a.fi ~= b.fi then return a.fi < b.fi end
    return a.order < b.order
  end)
  local out, used, left = {}, {}, budget
  for _, s in ipairs(all) do
    if #s.text + 64 <= left then
      out[#out + 1] = string.format("From %s:\n%s", s.file:match("[^/]+/[^/]+$") or s.file, s.text)
      used[#used + 1] = string.format("%s: %s", s.file:match("[^/]+$"), s.title)
      left = left - #s.text - 64
    end
  end
  return table.concat(out, "\n\n"), used
end

-- ---- results --------------------------------------------------------------

local function shape_table(recipe, res)
  local rows = { "| shape | time | speedup | % of floor |", "|---|---|---|---|" }
  for _, sh in ipairs(recipe.shapes) do
    local r = res.shapes[sh.key]
    if r then
      rows[#rows + 1] = string.format("| %s | %s | %.2fx | %s |", sh.key, figures.time(r.median), r.speedup or 1,
                                      r.floor_frac and string.format("%.0f%%", 100 * r.floor_frac) or "-")
    end
  end
  return table.concat(rows, "\n")
end

local function fence(recipe)
  return recipe.backend == "cuda" and "cuda" or "c"
end

local function best_part(info)
  local b = info.best
  if not b or not info.best_source then return nil end
  local head = b.outcome == "start" and "The current best is the start kernel:"
               or string.format("The current best (%s, %.2fx the start kernel's speed, geometric mean over shapes%s):",
                                b.short, b.score, b.params and (", " .. ktext.params_text(b.params)) or "")
  return string.format("%s\n\n```%s\n%s```\n\n%s", head, fence(info.recipe), info.best_source,
                       shape_table(info.recipe, b))
end

-- The best's profile (kwb profile), where the cache has one on this device
-- kind: per kernel its time, throughputs, occupancy and top stalls, and the
-- plan's bottleneck.
local function profile_part(info)
  local p = info.profile
  if not p then return nil end
  local lines = { string.format("Profile of the current best at %s (Nsight Compute): %s-bound, %s.", p.shape, p.class,
                                p.why or "") }
  local pct, stalls = require("kwb.checks.profile").pct, require("kwb.checks.profile").stalls
  for _, k in ipairs(p.kernels or {}) do
    local st = stalls(k)
    lines[#lines + 1] = string.format("- %s: %s, DRAM %s, L2 %s, L1/shared %s, SM %s, tensor pipes %s, occupancy %s, "
                                      .. "%s registers%s; %s-bound; top stalls (warps per issued instruction): %s",
                                      k.name, figures.time(k.seconds), pct(k.dram), pct(k.l2), pct(k.l1), pct(k.sm),
                                      pct(k.tensor), pct(k.occupancy), tostring(k.registers or "?"),
                                      (k.spills or 0) > 0 and string.format(", %d bytes spilled", k.spills) or "",
                                      k.class or "?", st ~= "" and st or "none")
  end
  if p.count and p.count > 1 and p.gaps then
    lines[#lines + 1] = string.format("The plan's %d kernels are busy %s of its %s.", p.count, figures.time(p.busy),
                                      figures.time(p.plan_seconds))
  end
  return table.concat(lines, "\n")
end

local function excerpt(text, n)
  if not text or text == "" then return nil end
  local lines = {}
  for l in text:gmatch("[^\n]+") do
    if #lines < n then lines[#lines + 1] = l end
  end
  return table.concat(lines, "\n")
end

local function failures_part(info)
  if #info.failures == 0 then return nil end
  local lines = { "Recent failures (newest first):" }
  for _, f in ipairs(info.failures) do
    local what = f.params and ktext.params_text(f.params) or f.name or f.short
    -- (a duplicate's reason names the kernel whose compiled code it is: kwb.loop.result.duplicate)
    local why = f.outcome == "duplicate" and f.reason and ("your kernel is " .. f.reason) or f.reason or ""
    lines[#lines + 1] = string.format("- %s (%s): %s: %s", f.short, what, f.outcome, why)
    local log = f.outcome == "compile-error" and excerpt(f.log, 8)
    if log then lines[#lines + 1] = "  compiler output:\n  ```\n  " .. log:gsub("\n", "\n  ") .. "\n  ```" end
  end
  return table.concat(lines, "\n")
end

local function ideas_part(info)
  if #info.ideas == 0 then return nil end
  local lines = { "Ideas from the engineers, to try:" }
  for _, i in ipairs(info.ideas) do lines[#lines + 1] = "- " .. i end
  return table.concat(lines, "\n")
end

local formats = {
  source = "Answer with a short explanation of the change, then the whole kernel file in one ```%s block "
           .. "(it must compile on its own and export the function above).",
  template = "Answer with a short explanation, then the whole kernel file in one ```%s block written as a "
             .. "template: its tunable choices (tile sizes, unrolling) are macros the tuner defines, and a "
             .. "```lua block that returns their values, e.g. `return { BM = { 16, 32, 64 }, UNROLL = { 1, 4 } }` "
             .. "(optionally `restrict = function(p) return ... end`). Guard each macro with #ifndef and a default.",
  agent = "Use the tools to compile and evaluate drafts on one shape; when you have a kernel you trust, answer "
          .. "with a short explanation and the whole file in one ```%s block.",
}

-- ---- the whole ----------------------------------------------------------------

-- info(run) -> the raw material of a prompt
function M.info(run)
  local s, r = run.session, run.recipe
  local best = s.best
  local info = { recipe = r, best = best, start = s.start, failures = {}, ideas = {} }
  local ok, c = pcall(s.ceilings, s)
  info.ceilings = ok and c or nil
  if best then
    local got = s.store.cache:get(best.id)
    info.best_source = got and got.source
    -- (kwb profile's, or the loop's for model.profile): the one of the shape
    -- where the best's plan takes longest, where most of its time goes
    for _, row in ipairs(s.store.cache:profiles(best.id) or {}) do
      if row.device == s.ctx.device and (not info.profile or (row.data.plan_seconds or 0) > (info.profile.plan_seconds or 0)) then
        info.profile = row.data
      end
    end
  end
  local feedback = run.feedback or run.results   -- results and a model's repeats, in order
  for i = #feedback, 1, -1 do
    local res = feedback[i]
    if #info.failures >= M.failures then break end
    if res.outcome ~= "accepted" and res.outcome ~= "slower" then info.failures[#info.failures + 1] = res end
  end
  info.lessons = lessons.relevant(s.store.cache, r, s.ctx.device, select(2, lessons.settings(r)))
  for _, i in ipairs(r.ideas) do info.ideas[#info.ideas + 1] = i end
  for _, i in ipairs(M.queued) do info.ideas[#info.ideas + 1] = i end
  return info
end

-- parts(info, mode) -> { role =, rules =, context =, problem =, best =, profile =, failures =, lessons =, ideas =,
-- format = }
function M.parts(info, mode)
  local r = info.recipe
  local terms = words(r.problem.name .. " " .. (r.problem.description or "") .. " " .. (r.description or "")
                      .. " " .. r.backend .. " " .. table.concat(info.ideas, " "))
  local docs, used = M.documents(r.context, terms, (r.model and r.model.context_bytes) or M.context_bytes)
  local parts = {
    role = string.format("You are a performance engineer writing %s kernels for kwb, a harness that compiles, "
                         .. "verifies and times every candidate you propose and keeps the fastest correct one.",
                         r.backend == "cuda" and "CUDA" or "C"),
    rules = rules_part(info),
    context = docs ~= "" and ("Reference material:\n\n" .. docs) or nil,
    problem = problem_part(info),
    best = best_part(info),
    profile = profile_part(info),
    failures = failures_part(info),
    lessons = lessons.part(info.lessons, r.problem:key()),
    ideas = ideas_part(info),
    format = string.format(formats[mode or "source"], fence(r)),
  }
  return parts, used
end

M.order = { "problem", "context", "best", "profile", "failures", "lessons", "ideas", "format" }

-- build(run, { mode = }) -> convo { system =, messages =, parts =, documents = }
function M.build(run, opts)
  opts = opts or {}
  local info = M.info(run)
  local parts, used = M.parts(info, opts.mode)
  M.queued = {}
  local system, user
  if run.recipe.prompt then
    local got = run.recipe.prompt(parts, info)
    if type(got) == "string" then user = got
    elseif type(got) == "table" then system, user = got.system, got.user end
    if type(user) ~= "string" then
      error(string.format("recipe %s: prompt(parts, info) must return the user message (a string) or "
                          .. "{ system =, user = }, got %s", run.recipe.name, type(got)), 0)
    end
  end
  if not user then
    local body = {}
    for _, k in ipairs(M.order) do
      if parts[k] then body[#body + 1] = parts[k] end
    end
    user = table.concat(body, "\n\n")
  end
  system = system or (parts.role .. "\n\n" .. parts.rules)
  return { system = system, messages = { { role = "user", content = user } }, parts = parts, documents = used }
end

return M
