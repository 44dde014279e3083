-- kwb/strategies/lessons.lua: the lessons ledger. After every `every`
-- evaluated candidates of a run whose strategy asks a model (model.lessons_every,
-- 8 by default; 0: never), a summarising request to the recipe's model turns
-- the evidence since the last kept summary (each candidate's outcome, score
-- and per-shape speed-ups, what it tried, why it failed, its profile where
-- one was made) into at most `most` short lessons, each with technique tags
-- and the candidates that show it. They are kept in the cache per problem and
-- device kind (kwb.cache.lessons), shown by `kwb lessons RECIPE`, carried in
-- bundles, and put into later prompts (the `lessons` part of
-- kwb.strategies.prompt), the most relevant first within `bytes` bytes.
--
-- The request (its purpose "lessons": a replayed transcript answers it only
-- with a reply marked so, kwb.model.providers.replay) asks for one ```lessons
-- block of lines `- [tag, tag] lesson (ids: 1a2b3c4d, ...)`, or `- none`.
-- The reply is read strictly: a reply whose block is missing, or any of whose
-- lines is not of that form, keeps nothing, and the run's events say why
-- (kwb.loop.progress's lessons); the evidence stays for the next summary.
--
--   lessons.after(run)                        -- kwb.loop.run, after each counted result
--   lessons.request(info) -> convo            -- info: problem, recipe, device, best, evidence, profiles, kept
--   lessons.parse(text, evidence) -> { { text =, tags =, ids = } } | nil, why
--   lessons.relevant(cache, recipe, device [, bytes [, own_only]]) -> rows, most relevant first, within bytes
--   lessons.part(rows, problem) -> the prompt's text, or nil
local ids = require "kwb.base.ids"
local ktext = require "kwb.base.text"
local reply = require "kwb.strategies.reply"
local ledger = require "kwb.cache.lessons"

local M = {}

-- Evaluated candidates between summaries (model.lessons_every); 0: none.
M.every = 8
-- Bytes of lesson lines a prompt holds at most (model.lessons_bytes).
M.bytes = 3000
-- Lessons one summary may give; evidence lines one request shows at most (the newest).
M.most, M.evidence = 6, 32

-- ---- the request ------------------------------------------------------------

local function one_line(s, n)
  s = ktext.valid(tostring(s or "")):gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
  if #s > n then s = ktext.cut(s, n) .. " ..." end
  return s
end

-- What a candidate tried: its parameters, else the first line of its
-- rationale, else its file's name.
local function tried(res)
  if res.params and next(res.params) then return ktext.params_text(res.params) end
  local first = res.rationale and res.rationale:match("[^\n]*%S[^\n]*")
  return first and one_line(first, 160) or res.name or "-"
end

-- evidence_line(res, recipe, profile) -> "- 1a2b3c4d accepted 2.31x (n=64 2.10x, n=96 2.52x): what it tried"
function M.evidence_line(res, recipe, profile)
  local head = string.format("- %s %s", ids.short(res.id), res.outcome)
  if res.score then head = head .. string.format(" %.2fx", res.score) end
  local per = {}
  for _, sh in ipairs(recipe.shapes) do
    local r = res.shapes and res.shapes[sh.key]
    if r and r.speedup then
      per[#per + 1] = string.format("%s %.2fx%s", sh.key, r.speedup, r.partial and " (raced out)" or "")
    end
  end
  if #per > 0 then head = head .. " (" .. table.concat(per, ", ") .. ")" end
  local line = head .. ": " .. tried(res)
  if res.reason then line = line .. "; " .. one_line(res.reason, 240) end
  if profile then
    line = line .. string.format("; profile at %s: %s-bound%s", profile.shape or "?", profile.class or "?",
                                 profile.why and (", " .. one_line(profile.why, 160)) or "")
  end
  return line
end

-- The lesson as a prompt shows it: "- [tag, tag] text (ids: 1a2b3c4d, ...)",
-- naming its problem where that is not `problem`.
function M.line(row, problem)
  local shorts = {}
  for i, id in ipairs(row.ids) do shorts[i] = ids.short(id) end
  return string.format("- [%s] %s (ids: %s%s)", table.concat(row.tags, ", "), row.text, table.concat(shorts, ", "),
                       problem and row.problem ~= problem and ("; problem " .. row.problem) or "")
end

M.system = "You keep kwb's lessons ledger. kwb compiles, verifies and times the kernels a model proposes and keeps "
  .. "the fastest correct one. From the evidence of the latest candidates, write short lessons that a later attempt "
  .. "at this problem, or at another problem on the same device, can act on: what made kernels faster or slower, by "
  .. "how much and at which shapes, and what made them fail. Each lesson names the candidates that show it."

M.format = "Answer with one ```lessons block of at most %d lines, each of the form\n"
  .. "- [tag, tag] the lesson in one sentence (ids: 1a2b3c4d, 5e6f7a8b)\n"
  .. "where the tags are one to four technique words in lowercase (letters, digits and '-': loop-order, tiling, "
  .. "vectorize, unroll, memory-bound, ...) and the ids are those of the candidates above that show the lesson. "
  .. "Where the evidence teaches nothing new, the block is the one line `- none`."

-- request(info) -> convo: info = { problem = the recipe's problem, recipe =,
-- device =, best = the run's best (a result), evidence = { results... },
-- profiles = { [id] = profile data }, kept = { lesson rows of this problem } }
function M.request(info)
  local p, r = info.problem, info.recipe
  local lines = { string.format("Problem %s: %s. Kernels in %s on %s.", p:key(), p.description or p.name,
                                r.backend == "cuda" and "CUDA" or "C", info.device) }
  local b = info.best
  lines[#lines + 1] = (not b or b.outcome == "start") and "The best so far is the start kernel."
    or string.format("The best so far: %s at %.2fx the start kernel's speed (geometric mean over shapes).",
                     ids.short(b.id), b.score or 1)
  lines[#lines + 1] = "\nEvidence: the candidates evaluated since the last summary, oldest first (outcome, score and "
    .. "per-shape speed-up over the start kernel, what it tried; why it failed; its profile where one was made):"
  for _, res in ipairs(info.evidence) do
    lines[#lines + 1] = M.evidence_line(res, r, info.profiles and info.profiles[res.id])
  end
  if info.kept and #info.kept > 0 then
    lines[#lines + 1] = "\nLessons already kept for this problem on this device (do not repeat them):"
    for _, row in ipairs(info.kept) do lines[#lines + 1] = M.line(row) end
  end
  lines[#lines + 1] = "\n" .. string.format(M.format, M.most)
  return { system = M.system, messages = { { role = "user", content = table.concat(lines, "\n") } } }
end

-- ---- the reply ------------------------------------------------------------

local function split(list)
  local out = {}
  for w in (list .. ","):gmatch("([^,]*),") do out[#out + 1] = w:match("^%s*(.-)%s*$") end
  return out
end

-- The evidence's candidate a written id names: the one whose id it begins
-- (at least 8 hex digits, and one candidate only).
local function named(word, evidence)
  if not word:match("^%x+$") or #word < ids.digits or #word > 64 then return nil end
  local found
  for _, res in ipairs(evidence) do
    if res.id:sub(1, #word) == word:lower() then
      if found and found ~= res.id then return nil end
      found = res.id
    end
  end
  return found
end

-- parse_line(line, evidence) -> { text =, tags =, ids = } | nil, why
local function parse_line(line, evidence)
  local tags, text, list = line:match("^%- %[([^%]]*)%] (.-) %(ids: ([^()]*)%)$")
  if not tags then return nil, "it is not `- [tags] lesson (ids: ...)`" end
  local l = { text = text:match("^%s*(.-)%s*$"), tags = split(tags), ids = {} }
  local seen = {}
  for _, w in ipairs(split(list)) do
    local id = named(w, evidence)
    if not id then
      return nil, w == "" and "it names no candidate" or string.format("it names %s, not a candidate of the evidence", w)
    end
    if not seen[id] then l.ids[#l.ids + 1], seen[id] = id, true end
  end
  local why = ledger.why(l.text, l.tags, l.ids)
  if why then return nil, why end
  return l
end

-- parse(text, evidence) -> lessons | nil, why: the reply's ```lessons block
-- read strictly; evidence, the results the request showed (their ids).
function M.parse(text, evidence)
  local blocks = {}
  for _, b in ipairs(reply.parse(text).blocks) do
    if b.lang == "lessons" then blocks[#blocks + 1] = b end
  end
  if #blocks == 0 then return nil, "the reply has no ```lessons block" end
  if #blocks > 1 then return nil, string.format("the reply has %d ```lessons blocks, not one", #blocks) end
  if not blocks[1].closed then return nil, "its ```lessons block is not closed (the reply was cut off?)" end
  local lines = {}
  for line in blocks[1].code:gmatch("[^\n]+") do
    if line:match("%S") then lines[#lines + 1] = line:match("^%s*(.-)%s*$") end
  end
  if #lines == 1 and lines[1] == "- none" then return {} end
  if #lines == 0 then return nil, "its ```lessons block is empty (`- none` says the evidence teaches nothing new)" end
  if #lines > M.most then
    return nil, string.format("its ```lessons block has %d lines, more than %d", #lines, M.most)
  end
  local out = {}
  for i, line in ipairs(lines) do
    local l, why = parse_line(line, evidence)
    if not l then return nil, string.format("line %d of its ```lessons block: %s: %s", i, why, one_line(line, 120)) end
    out[i] = l
  end
  return out
end

-- ---- which lessons a prompt shows ------------------------------------------

local function newest_first(a, b)
  if a.created ~= b.created then return a.created > b.created end
  if (a.run or "") ~= (b.run or "") then return (a.run or "") < (b.run or "") end
  if a.pos ~= b.pos then return a.pos < b.pos end
  return a.id < b.id
end

-- relevant(cache, recipe, device [, bytes [, own_only]]) -> the lessons kept on
-- the device kind that a prompt of recipe shows, most relevant first: its
-- problem's own, newest first; then other problems' that share a tag with
-- the recipe's `tags` or with its problem's own lessons, the most shared tags
-- first, then newest; as many as fit in bytes (their lines and newlines).
function M.relevant(cache, recipe, device, bytes, own_only)
  local key = recipe.problem:key()
  local own, others, want = {}, {}, {}
  for _, t in ipairs(recipe.tags or {}) do want[t] = true end
  local rows = cache:lessons { device = device }
  for _, r in ipairs(rows) do
    if r.problem == key then
      own[#own + 1] = r
      for _, t in ipairs(r.tags) do want[t] = true end
    end
  end
  table.sort(own, newest_first)
  if not own_only then
    for _, r in ipairs(rows) do
      local shared = 0
      for _, t in ipairs(r.tags) do if want[t] then shared = shared + 1 end end
      if r.problem ~= key and shared > 0 then
        r.shared = shared
        others[#others + 1] = r
      end
    end
    table.sort(others, function(a, b)
      if a.shared ~= b.shared then return a.shared > b.shared end
      return newest_first(a, b)
    end)
  end
  local out, left = {}, bytes or M.bytes
  for _, list in ipairs { own, others } do
    for _, r in ipairs(list) do
      local n = #M.line(r, key) + 1
      if n <= left then
        out[#out + 1] = r
        left = left - n
      end
    end
  end
  return out
end

-- part(rows, problem) -> the prompt's `lessons` part, or nil where there is none
function M.part(rows, problem)
  if not rows or #rows == 0 then return nil end
  local lines = { "Lessons from earlier evaluations on this device (the most relevant first; the ids are the "
                  .. "candidates that showed each):" }
  for _, r in ipairs(rows) do lines[#lines + 1] = M.line(r, problem) end
  return table.concat(lines, "\n")
end

-- settings(recipe) -> every, bytes: the recipe's model's, else the defaults
function M.settings(recipe)
  local m = recipe.model or {}
  return m.lessons_every or M.every, m.lessons_bytes or M.bytes
end

-- ---- a summary in a run -----------------------------------------------------

-- summarise(run, evidence) -> { kept = n, ids =, evidence = n, transcript = } or
-- { error = why, evidence = n, transcript = }
local function summarise(run, evidence)
  local s, r = run.session, run.recipe
  local cache, device = s.store.cache, s.ctx.device
  local _, bytes = M.settings(r)
  local profiles = {}
  for _, res in ipairs(evidence) do
    for _, row in ipairs(cache:profiles(res.id) or {}) do
      if row.device == device then profiles[res.id] = profiles[res.id] or row.data end
    end
  end
  local convo = M.request { problem = r.problem, recipe = r, device = device, best = s.best, evidence = evidence,
                            profiles = profiles, kept = M.relevant(cache, r, device, bytes, true) }
  run.model:settle()   -- (the proposals asked before it are answered first: the order of requests is the run's)
  local got = run.model:wait(run.model:ask(convo, "lessons"))
  local out = { evidence = #evidence, transcript = got.transcript }
  if got.code == "exhausted" then   -- (a replayed transcript with no summary's reply here: no one was asked)
    out.error, out.done = got.error .. "; no more summaries in this run", true
    return out
  end
  if got.error then
    out.error = "the summary request failed: " .. got.error
    return out
  end
  local lessons, why = M.parse(got.text, evidence)
  if not lessons then
    out.error = why
    return out
  end
  out.ids = cache:put_lessons { problem = r.problem:key(), device = device, run = run.record.id,
                                transcript = got.transcript, lessons = lessons }
  out.kept = #lessons
  return out
end

-- after(run): the ledger's turn after a counted result: a summary once `every`
-- candidates were evaluated since the last one was asked, of the results since
-- the last one kept (the newest M.evidence of them), unless the run's cost
-- budget is spent; what came of it goes to the run's events. A replayed
-- transcript that has no summary's reply for it ends the run's summaries.
function M.after(run)
  if not run.model then return end   -- (a run whose strategy asks no model)
  local every = M.settings(run.recipe)
  if every == 0 then return end
  local st = run.lessons or { next_at = every, from = 0 }
  run.lessons = st
  if st.done or run.evaluated < st.next_at or run:spent() then return end
  st.next_at = run.evaluated + every
  local evidence = {}
  for i = math.max(st.from + 1, #run.results - M.evidence + 1), #run.results do
    evidence[#evidence + 1] = run.results[i]
  end
  local got = summarise(run, evidence)
  if got.kept then st.from = #run.results end
  st.done = got.done
  run.progress:lessons(run, got)
end

return M
