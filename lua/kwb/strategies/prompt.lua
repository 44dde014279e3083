-- kwb/strategies/prompt.lua: what the model is told. The prompt is built from parts,
-- each a text a recipe's `prompt` function may keep, reorder or replace:
--
--   role      who the model is and what it is asked for
--   rules     the recipe's forbidden actions and what never to do, in words:
--             those of its backend only
--   context   the recipe's context documents (hwdocs/, modeldocs/), the
--             sections most relevant to the problem first, within a size budget
--   problem   the signature, shapes, tolerance, bytes, flops and each shape's floor
--   best      the parent (the current best unless another is asked for): its
--             source as it was built (its parameters' values in its
--             #defines) with its per-shape table and % of floor
--   profile   the parent's profile where kwb profile made one (model.profile:
--             the loop profiles each new best): its bottleneck and why
--   inspirations  other elites of the run's population: kwb.strategies.population's part
--   attempts  the last attempts as a table: outcome, score and each shape's
--             speed-up, or the failure's one-line reason (slower ones too)
--   near      the near misses: verified kernels within a few % of the
--             parent's score, or faster than it at some shape
--   failures  the last failed candidates with their evidence, and the last
--             repeats and duplicates with the kernel each repeated
--   lessons   the lessons ledger's lessons on this device kind (kwb.strategies.lessons):
--             the problem's own, newest first, then other problems' that share a tag,
--             within model.lessons_bytes (3000 by default)
--   ideas     the humans' ideas (the recipe's `ideas`, kwb.idea "..." at the REPL)
--   format    how to answer (one code block, or edits of a long parent; a
--             template's space as a lua block)
--
--   local convo = prompt.build(run, { mode = "source" | "template" | "agent", parent = result, inspirations = })
--   -- { system =, messages = { { role = "user", content = } }, parts =, parent =, parent_source = }
--
-- recipe.prompt(parts, info) may return a string (the user message) or
-- { system =, user = }; info holds the raw material (recipe, best, parent,
-- failures, attempts, near misses, lessons).
local ktext = require "kwb.base.text"
local ceilings = require "kwb.measure.ceilings"
local figures = require "kwb.figures"
local lessons = require "kwb.strategies.lessons"
local tried = require "kwb.strategies.tried"

local M = {}

-- Bytes of context documents a prompt holds at most (model.context_bytes).
M.context_bytes = 24000
-- Failures shown, newest first.
M.failures = 4
-- A parent of more bytes than this (model.diff_bytes) is to be changed by
-- edits (SEARCH/REPLACE blocks, or a unified diff), not written again whole.
M.diff_bytes = 8192

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

-- What never to do, each { text, backend = } (backend: the only one it is
-- about; none: every backend).
M.never = {
  { "Never special-case the benchmark's shapes or inputs: every shape must be computed in full, for any input." },
  { "Never keep results or state across calls (no static or global buffers, caches, environment variables or files)." },
  { "Never touch the harness: no reading clocks, no threads or other streams, no synchronising, no looking "
    .. "symbols up at run time, no leaving the process." },
  { "Never drop or bypass the launch path the harness uses (CUDA graphs, streams): the time measured is the time a "
    .. "user gets.", backend = "cuda" },
  { "Never lower the precision below what the tolerance allows." },
}

-- The recipe's rules and what never to do, those of its backend only (a
-- rule's backend: kwb.measure.rules' catalogue).
local function rules_part(info)
  local backend = info.recipe.backend
  local lines = { "Rules (a candidate that breaks one is rejected before it runs):" }
  for _, rule in ipairs(info.recipe.rules.rules) do
    if not rule.backend or rule.backend == backend then
      lines[#lines + 1] = string.format("- %s: %s", rule.name, rule.why)
    end
  end
  for _, n in ipairs(M.never) do
    if not n.backend or n.backend == backend then lines[#lines + 1] = "- " .. n[1] end
  end
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

-- ---- the parent -----------------------------------------------------------

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

-- The text a define gives its macro (-DNAME defines it as 1), or nil where
-- it defines none (false).
local function define_text(v)
  if v == true then return "1" end
  if v == false or v == nil then return nil end
  return tostring(v)
end

-- with_params(source, defines) -> the source as it was built with defines
-- (a template's point, a start kernel's settings): a guarded default (a
-- `#define NAME ...` line right after `#ifndef NAME`) takes the value it was
-- built with; a define with no such line comes first, guarded alike, as the
-- compiler's -D came before the file. Built without defines, the text is
-- the same kernel; shown to the model, its values are those measured.
function M.with_params(source, defines)
  if not source or not defines or next(defines) == nil then return source end
  local vals, names = {}, {}
  for k, v in pairs(defines) do
    local name, val = k, v
    if math.type(k) == "integer" then   -- (a define as the compiler's word: NAME or NAME=VALUE)
      name, val = tostring(v):match("^([%a_][%w_]*)=(.*)$")
      if not name then name, val = tostring(v), true end
    end
    local text = define_text(val)
    if text and type(name) == "string" then vals[name], names[#names + 1] = text, name end
  end
  table.sort(names)
  if source:sub(-1) ~= "\n" then source = source .. "\n" end
  local lines, set = {}, {}
  for line in source:gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  for i = 2, #lines do
    local head, name, rest = lines[i]:match("^(%s*#%s*define%s+)([%a_][%w_]*)(.*)$")
    if name and vals[name] and (rest == "" or rest:match("^%s"))
       and lines[i - 1]:match("^%s*#%s*ifndef%s+([%a_][%w_]*)%s*$") == name then
      -- (a comment after the default stays)
      local note = rest:match("^%s*[^/]*(%s//.*)$") or rest:match("^%s*[^/]*(%s/%*.*)$") or ""
      lines[i], set[name] = head .. name .. " " .. vals[name] .. note, true
    end
  end
  local top = {}
  for _, name in ipairs(names) do
    if not set[name] then top[#top + 1] = string.format("#ifndef %s\n#define %s %s\n#endif\n", name, name, vals[name]) end
  end
  return table.concat(top) .. table.concat(lines, "\n") .. "\n"
end

-- The parent: the current best unless another was asked for, its source as
-- built (M.with_params) and its table.
local function best_part(info)
  local b = info.parent
  if not b or not info.parent_source then return nil end
  local values = b.params and next(b.params) and ktext.params_text(b.params)
  local head
  if not info.parent_is_best then
    local best = info.best
    head = string.format("The parent to change (%s, %s, %.2fx the start kernel's speed, geometric mean over shapes%s; "
                         .. "the current best is %s at %.2fx):", b.short, b.outcome, b.score or 0,
                         values and (", " .. values) or "", best and best.short or "-", best and best.score or 0)
  elseif b.outcome == "start" or not b.score then
    head = "The current best is the start kernel" .. (values and string.format(", built with %s (the values its "
           .. "#defines hold below)", values) or "") .. ":"
  else
    head = string.format("The current best (%s, %.2fx the start kernel's speed, geometric mean over shapes%s):",
                         b.short, b.score, values and (", " .. values) or "")
  end
  local text = string.format("%s\n\n```%s\n%s```", head, fence(info.recipe), info.parent_source)
  if b.shapes then text = text .. "\n\n" .. shape_table(info.recipe, b) end
  return text
end

-- The parent's profile (kwb profile), where the cache has one on this device
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

-- ---- failures and ideas (the attempts and near misses: kwb.strategies.tried) ----

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
    local what_ = f.params and ktext.params_text(f.params) or f.name or f.short
    -- (a duplicate's reason names the kernel whose compiled code it is: kwb.loop.result.duplicate)
    local why = f.outcome == "duplicate" and f.reason and ("your kernel is " .. f.reason) or f.reason or ""
    lines[#lines + 1] = string.format("- %s (%s): %s: %s", f.short, what_, f.outcome, why)
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

-- ---- how to answer -------------------------------------------------------------

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

-- How to give edits (kwb.strategies.edits reads them): a parent over
-- model.diff_bytes is changed by edits, not written again whole.
local edit_text = "Give the change as edits of the parent above (it is %d bytes: do not write it out again), each "
  .. "one a block\n\n<<<<<<< SEARCH\nexact lines of the parent\n=======\nthe lines that replace them\n>>>>>>> REPLACE"
  .. "\n\nThe edits are applied in order; each SEARCH must be whole lines copied exactly from the parent and must "
  .. "match it once (add a line or two where it would match twice). A unified diff of the parent (--- a/, +++ b/, "
  .. "@@ hunks) is read the same way. The whole kernel file in one ```%s block is still accepted."
local edit_formats = {
  source = "Answer with a short explanation of the change, then the change. " .. edit_text
           .. " The kernel must compile on its own and export the function above.",
  template = "Answer with a short explanation, then the change. " .. edit_text .. " The kernel is a template: its "
             .. "tunable choices (tile sizes, unrolling) are macros the tuner defines, each guarded with #ifndef and a "
             .. "default; after the edits give a ```lua block that returns their values, e.g. `return { BM = { 16, "
             .. "32, 64 }, UNROLL = { 1, 4 } }` (optionally `restrict = function(p) return ... end`).",
}

-- The answer's form: edits where the parent is longer than model.diff_bytes
-- (the agent's tools take whole files), else the whole file.
local function format_part(info, mode)
  local r, src = info.recipe, info.parent_source
  local limit = r.model and r.model.diff_bytes or M.diff_bytes
  if edit_formats[mode] and src and #src > limit then return string.format(edit_formats[mode], #src, fence(r)) end
  return string.format(formats[mode], fence(r))
end

-- ---- the whole ----------------------------------------------------------------
-- feedback = (this run's results and repeats, in order) }.
function M.gather(m)
  local r, cache = m.recipe, m.cache
  local parent = m.parent or m.best
  local info = { recipe = r, best = m.best, start = m.start, ceilings = m.ceilings, failures = {}, ideas = {},
                 parent = parent, parent_is_best = not m.parent or not m.best or m.parent.id == m.best.id }
  local got = {}
  local function stored(id)
    if id and got[id] == nil then got[id] = cache and cache:get(id) or false end
    return id and got[id] or nil
  end
  local function rationale_of(res)
    if res.rationale ~= nil or not res.id then return res.rationale end
    local c = stored(res.id)
    return c and c.rationale
  end
  if m.best then info.best_source = (stored(m.best.id) or {}).source end
  if parent then
    local c = stored(parent.id)
    local source = c and c.source or m.parent_source
    -- (its defines as the cache keeps them: what it was built with)
    info.parent_source = M.with_params(source, c and c.params or parent.params)
    -- (kwb profile's, or the loop's for model.profile): the one of the shape
    -- where the parent's plan takes longest, where most of its time goes
    for _, row in ipairs(cache and parent.id and cache:profiles(parent.id) or {}) do
      if row.device == m.device and (not info.profile or (row.data.plan_seconds or 0) > (info.profile.plan_seconds or 0)) then
        info.profile = row.data
      end
    end
  end
  local feedback = m.feedback or {}
  for i = #feedback, 1, -1 do
    local res = feedback[i]
    if #info.failures >= M.failures then break end
    if res.outcome ~= "accepted" and res.outcome ~= "slower" then info.failures[#info.failures + 1] = res end
  end
  info.attempts = tried.last(m, rationale_of, parent and parent.params)
  info.near, info.inspirations = tried.misses(r, parent, m, rationale_of), m.inspirations
  info.lessons = cache and cache.lessons and lessons.relevant(cache, r, m.device, select(2, lessons.settings(r))) or {}
  for _, i in ipairs(r.ideas) do info.ideas[#info.ideas + 1] = i end
  for _, i in ipairs(M.queued) do info.ideas[#info.ideas + 1] = i end
  return info
end

-- info(run [, { parent =, inspirations = (population.shown's) }]) -> the raw material of a prompt in a run: the
-- session's best and start, its cache and device kind, the results stored
-- before the run's first prompt (read once), the run's results and feedback.
function M.info(run, opts)
  local s = run.session
  local ok, c = pcall(s.ceilings, s)
  if run.prompt_prior == nil then run.prompt_prior = s.history and s:history() or {} end
  return M.gather { recipe = run.recipe, cache = s.store.cache, device = s.ctx and s.ctx.device, best = s.best,
                    start = s.start, parent = opts and opts.parent, ceilings = ok and c or nil, prior = run.prompt_prior,
                    results = run.results, feedback = run.feedback or run.results, inspirations = opts and opts.inspirations }
end

-- parts(info, mode) -> { role =, rules =, context =, problem =, best =, profile =, inspirations =, attempts =,
-- near =, failures =, lessons =, ideas =, format = }
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
    profile = profile_part(info), inspirations = info.inspirations and info.inspirations.text,
    attempts = tried.table(r, info.attempts),
    near = tried.near_text(info.near, info.parent),
    failures = failures_part(info),
    lessons = lessons.part(info.lessons, r.problem:key()),
    ideas = ideas_part(info),
    format = format_part(info, mode or "source"),
  }
  return parts, used
end

M.order = { "problem", "context", "best", "profile", "inspirations", "attempts", "near", "failures", "lessons",
            "ideas", "format" }

-- compose(info, { mode = }) -> convo { system =, messages =, parts =, documents =, parent =,
-- parent_source = }: the messages of the parts (or of the recipe's prompt function).
function M.compose(info, opts)
  opts = opts or {}
  local recipe = info.recipe
  local parts, used = M.parts(info, opts.mode)
  local system, user
  if recipe.prompt then
    local got = recipe.prompt(parts, info)
    if type(got) == "string" then user = got
    elseif type(got) == "table" then system, user = got.system, got.user end
    if type(user) ~= "string" then
      error(string.format("recipe %s: prompt(parts, info) must return the user message (a string) or "
                          .. "{ system =, user = }, got %s", recipe.name, type(got)), 0)
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
  return { system = system, messages = { { role = "user", content = user } }, parts = parts, documents = used,
           parent = info.parent, parent_source = info.parent_source }
end

-- build(run, { mode =, parent = }) -> convo (compose's): the next prompt of a
-- run; the ideas queued at the REPL go into it, once.
function M.build(run, opts)
  opts = opts or {}
  local info = M.info(run, opts)
  M.queued = {}
  return M.compose(info, opts)
end

-- size(convo) -> bytes, tokens: the bytes of its system and user messages,
-- and an estimate of their tokens (bytes / 4, as the providers' own
-- estimates take them where no count comes back: kwb.model.providers).
function M.size(convo)
  local bytes = #(convo.system or "")
  for _, m in ipairs(convo.messages) do bytes = bytes + #(m.content or "") end
  return bytes, bytes // 4
end

return M
