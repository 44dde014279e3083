-- kwb/strategies/reply.lua: what a model's reply proposes. The reply is Markdown: its
-- fenced code blocks (``` or ~~~, with a language word) are found with LPeg;
-- the last closed block in the backend's language is the kernel, a ```lua
-- block returning a table is a parameter space for it (checked as a recipe's
-- `space` is), and the prose around them is the rationale.
--
--   local p = reply.parse(text)           -- { blocks = { { lang =, code =, closed = } }, prose = }
--   local prop = reply.proposal(text, recipe)
--   -- { source =, space =, rationale =, blocks = n } or { no_code = why, rationale = }
local core = require "kwb.core"
local edits = require "kwb.strategies.edits"
local lpeg = require "lpeg"
local ktext = require "kwb.base.text"
local site = require "kwb.base.site"
local space = require "kwb.strategies.space"

local P, S, C, Cb, Cg, Cmt, Ct, Cc = lpeg.P, lpeg.S, lpeg.C, lpeg.Cb, lpeg.Cg, lpeg.Cmt, lpeg.Ct, lpeg.Cc

local M = {}

-- ---- the grammar ----------------------------------------------------------

local nl = P "\n"
local rest = (1 - nl) ^ 0
local blank = S " \t" ^ 0
local indent = P " " ^ -3
local fence_chars = P "`" ^ 3 + P "~" ^ 3
-- a closing fence: the opening one's character, at least as long
local close = indent * Cmt(C(fence_chars) * Cb("fence"), function(_, _, f, open)
  return f:sub(1, 1) == open:sub(1, 1) and #f >= #open
end) * blank * (nl + -1)
local body_line = -close * rest * nl
local block = Ct(indent * Cg(C(fence_chars), "fence") * blank
                 * Cg(C((1 - S " \t\n`{") ^ 0), "lang") * rest * nl
                 * Cg(C(body_line ^ 0 * (-close * (1 - nl) ^ 1) ^ -1), "code")
                 * Cg(close * Cc(true) + Cc(false), "closed"))
local prose = C(rest * nl + (1 - nl) ^ 1)
local doc = Ct((block + prose) ^ 0) * -1

local aliases = { ["c++"] = "cpp", cc = "cpp", cxx = "cpp", cu = "cuda", h = "c" }

-- parse(text) -> { blocks = { { lang =, code =, closed = } }, prose = text outside blocks }
function M.parse(text)
  local parts = lpeg.match(doc, text or "")
  local blocks, prose = {}, {}
  for _, part in ipairs(parts or {}) do
    if type(part) == "table" then
      local lang = part.lang:lower()
      blocks[#blocks + 1] = { lang = aliases[lang] or lang, code = part.code, closed = part.closed }
    else
      prose[#prose + 1] = part
    end
  end
  return { blocks = blocks, prose = (table.concat(prose):gsub("^%s+", ""):gsub("%s+$", "")) }
end

-- ---- what it proposes ----------------------------------------------------

-- The languages a backend's kernels are written in, the first the one asked for.
M.languages = { host = { "c" }, cuda = { "cuda", "cpp", "c" } }

-- Model-written Lua (a space block, its restrict function) runs with no
-- globals, no string methods, at most `steps` VM instructions a call and
-- `memory` more KiB of heap: it may describe a space, not do work. The heap
-- is capped for every allocation (kwb.core's heap_resume), so no one
-- instruction passes it either (a concatenation of a hundred long strings
-- is one instruction). All the calls of one space's restrict share
-- `restrict_steps`; once they are spent it excludes every point.
M.steps, M.memory, M.restrict_steps = 20000, 65536, 2000000

local too_much = "the lua block uses too much memory"

local function confined(fn, limit, ...)
  local smeta = getmetatable("")
  local index = smeta.__index
  local base, steps = collectgarbage("count"), 0
  local co = coroutine.create(fn)
  debug.sethook(co, function()
    steps = steps + 1
    if steps > limit then error("the lua block runs too long (a space is a table of lists)", 0) end
    if collectgarbage("count") - base > M.memory then error(too_much, 0) end
  end, "", 1)
  smeta.__index = nil
  local res = table.pack(core.heap_resume(core.heap() + M.memory * 1024, co, ...))
  smeta.__index = index
  -- the cap refused an allocation: Lua's own words for it, said as the block's limit
  if res[1] == false and res[2] == "not enough memory" then res[2] = too_much end
  res.steps = steps
  return res
end

-- space(code) -> a checked space | nil, why: the block's table checked like a
-- recipe's space, its restrict function confined like the block.
function M.space(code)
  local chunk, err = load(code, "=the reply's lua block", "t", {})
  if not chunk then return nil, "its lua block does not load: " .. err end
  local r = confined(chunk, M.steps)
  local ok, t = r[1], r[2]
  if not ok then return nil, "its lua block fails: " .. tostring(t) end
  if type(t) ~= "table" then return nil, "its lua block returns " .. type(t) .. ", not a space table" end
  local restrict = t.restrict
  if type(restrict) == "function" then
    local left = M.restrict_steps
    t.restrict = function(p)
      if left <= 0 then return false end
      local copy = {}
      for k, v in pairs(p) do copy[k] = v end
      local res = confined(restrict, math.min(M.steps, left), copy)
      left = left - res.steps
      return res[1] and res[2] and true or false   -- a restrict that fails excludes the point
    end
  end
  local checker = setmetatable({ site = { file = "the reply's space", line = 1 }, dir = "." }, site.Checker)
  local good, sp = pcall(space.check, checker, t)
  if not good then return nil, (tostring(sp):gsub("^the reply's space:1: recipe field ", "its space: ")) end
  return sp
end

-- The prose as kept: valid UTF-8 (kwb.base.text: each stray byte U+FFFD), no
-- control characters (none reaches a terminal from a model's prose), at
-- most 2000 bytes, cut at a whole character.
local function rationale(p)
  local r = ktext.valid(p.prose):gsub("[%c]", function(c) return (c == "\n" or c == "\t") and c or "" end)
  if #r > 2000 then r = ktext.cut(r, 2000) .. " ..." end
  return r ~= "" and r or nil
end

-- The kernel a reply's edits make of the parent, into prop: its source and
-- a note, or no_code naming the edit that does not apply.
local function edited(prop, found, parent, others, lang)
  local n = #found
  if not parent or not parent.source then
    prop.no_code = string.format("the reply gives %d edit%s (%s), but its prompt showed no parent to apply them to",
                                 n, n == 1 and "" or "s", found.form)
    return prop
  end
  local src, why = edits.apply(parent.source, found)
  if not src then
    prop.no_code = why
    return prop
  end
  prop.source, prop.edits = src, n
  prop.note = string.format("the parent %s with %d %s edit%s applied", parent.short, n, found.form,
                            n == 1 and "" or "s")
  if others > 0 then
    prop.note = prop.note .. string.format("; the reply's other ```%s block%s, not an edit, left out", lang,
                                           others == 1 and "" or "s")
  end
  return prop
end

-- Does a code block hold edits (their markers, or a unified diff's hunk)?
local function holds_edits(code)
  return code:find("<<<<<<<+ SEARCH") ~= nil or code:find("@@ %-%d") ~= nil
end

-- proposal(text, recipe [, parent]) -> a proposal for kwb.loop.candidate, or { no_code = why }
function M.proposal(text, recipe, parent)
  local p = M.parse(text)
  local langs = M.languages[recipe.backend] or { "c" }
  local pick, cut, n = nil, false, 0
  local space_code
  local plain = 0   -- closed kernel blocks that are not edits
  for _, b in ipairs(p.blocks) do
    local mine = b.lang == "" and #p.blocks == 1
    for _, l in ipairs(langs) do mine = mine or b.lang == l end
    if mine then
      if b.closed then pick, n = b, n + 1 else cut = true end
      if b.closed and not holds_edits(b.code) then plain = plain + 1 end
    end
    if b.lang == "lua" and b.closed then space_code = b.code end
  end
  local found, broken = edits.find(text)
  -- (SEARCH/REPLACE blocks outside a fence are no part of the rationale)
  if found or broken then
    p.prose = p.prose:gsub("<<<<<<<+ SEARCH\n.-\n>>>>>>>+ REPLACE[^\n]*", ""):gsub("^%s+", ""):gsub("%s+$", "")
  end
  local r = rationale(p)
  local prop
  if broken then return { no_code = broken, rationale = r } end
  if found then
    prop = edited({ rationale = r }, found, parent, plain, langs[1])
    if prop.no_code then return prop end
  elseif not pick then
    local why = cut and string.format("its only ```%s block is not closed (the reply was cut off?)", langs[1])
                or string.format("the reply has no ```%s code block", langs[1])
    return { no_code = why, rationale = r }
  else
    prop = { source = pick.code, rationale = r, blocks = n }
    if n > 1 then prop.note = string.format("%d ```%s blocks: the last one is the kernel", n, langs[1]) end
  end
  local limit = recipe.budget and recipe.budget.source_bytes
  if space_code and limit and #space_code > limit then   -- (bounded as a source is, before it runs: kwb.loop.candidate)
    return { no_code = string.format("the reply declares a space, but its lua block is %d bytes, over the recipe's "
                                     .. "limit of %d bytes (budget.source_bytes)", #space_code, limit), rationale = r }
  end
  if space_code then
    local sp, why = M.space(space_code)
    if not sp then return { no_code = "the reply declares a space, but " .. why, rationale = r } end
    prop.space = sp
  end
  return prop
end

return M
