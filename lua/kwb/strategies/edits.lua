-- kwb/strategies/edits.lua: a reply that gives its kernel as edits of the
-- parent the prompt showed, not as a whole file. Two forms are read:
--
--   SEARCH/REPLACE blocks (the evolution frameworks' form), one or more:
--     <<<<<<< SEARCH
--     exact lines of the parent
--     =======
--     the lines that replace them
--     >>>>>>> REPLACE
--   a unified diff: hunks `@@ -a,b +c,d @@` of context (" "), removed ("-")
--   and added ("+") lines, after optional `--- a/...` / `+++ b/...` headers;
--   each hunk is one edit: its context and removed lines are what it
--   searches, its context and added lines what replaces them. The hunks'
--   line numbers are not used: an edit is found by its text.
--
-- Each edit is applied in order to the text the edits before it left (the
-- parent for the first). Its search is whole lines and must occur there
-- exactly once: no occurrence, or several, refuses the reply, naming the
-- edit (its number and its search's first line). Trailing spaces and tabs
-- of a search's lines are dropped (a kernel's text never ends its lines
-- with them: kwb.base.text.code), carriage returns too; nothing else is
-- loosened.
--
--   local list, why = edits.find(text)     -- nil: no edits; nil, why: edits that cannot be read
--   local src, why = edits.apply(parent, list)
local ktext = require "kwb.base.text"

local M = {}

local function lines_of(text)
  local out = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do out[#out + 1] = line end
  if out[#out] == "" then out[#out] = nil end   -- (the text's own last newline)
  return out
end

-- A run of lines as text: each ended by a newline (as the parent's are).
local function joined(lines)
  if #lines == 0 then return "" end
  return table.concat(lines, "\n") .. "\n"
end

local function search_text(lines)
  local out = {}
  for i, l in ipairs(lines) do out[i] = (l:gsub("[ \t]+$", "")) end
  return joined(out)
end

-- ---- SEARCH/REPLACE blocks ------------------------------------------------

local function marker(line, what)
  return line:match("^%s*" .. what .. "%s*$") ~= nil
end
local SEARCH, MID, REPLACE = "<<<<<<<+ SEARCH", "=======+", ">>>>>>>+ REPLACE"

-- The lines from j up to the marker `want` (none of the other two before
-- it): those lines and the marker's index, or nil where it never comes.
local function upto(lines, j, want, other1, other2)
  local got = {}
  while j <= #lines and not marker(lines[j], want) do
    if marker(lines[j], other1) or marker(lines[j], other2) then return nil end
    got[#got + 1] = lines[j]
    j = j + 1
  end
  if j > #lines then return nil end
  return got, j
end

local function search_replace(lines)
  local out, i = {}, 1
  while i <= #lines do
    if marker(lines[i], SEARCH) then
      local n = #out + 1
      local search, j = upto(lines, i + 1, MID, SEARCH, REPLACE)
      if not search then
        return nil, string.format("edit %d has no ======= line after its SEARCH (the reply was cut off?)", n)
      end
      local replace
      replace, j = upto(lines, j + 1, REPLACE, SEARCH, MID)
      if not replace then
        return nil, string.format("edit %d has no >>>>>>> REPLACE line (the reply was cut off?)", n)
      end
      out[n] = { search = search, replace = replace }
      i = j + 1
    else
      i = i + 1
    end
  end
  return out
end

-- ---- unified diffs -----------------------------------------------------------

local function hunk_start(line) return line:match("^@@ %-%d+[,%d]* %+%d+[,%d]* @@") ~= nil end
local function header(lines, i)
  return lines[i]:match("^%-%-%- ") and lines[i + 1] and lines[i + 1]:match("^%+%+%+ ")
end

local function unified(lines)
  local out, i = {}, 1
  while i <= #lines do
    if hunk_start(lines[i]) then
      local search, replace = {}, {}
      local j = i + 1
      while j <= #lines and not hunk_start(lines[j]) and not header(lines, j) do
        local l, c = lines[j], lines[j]:sub(1, 1)
        if l == "" or c == " " then   -- (a blank context line, its space dropped by the writer)
          search[#search + 1], replace[#replace + 1] = l:sub(2), l:sub(2)
        elseif c == "-" then search[#search + 1] = l:sub(2)
        elseif c == "+" then replace[#replace + 1] = l:sub(2)
        elseif c ~= "\\" then break end   -- ("\ No newline at end of file"); anything else ends the hunk
        j = j + 1
      end
      -- blank lines that ended the hunk's run belong to the prose after it
      while j > i + 1 and lines[j - 1] == "" do
        table.remove(search); table.remove(replace)
        j = j - 1
      end
      out[#out + 1] = { search = search, replace = replace }
      i = j
    else
      i = i + 1
    end
  end
  return out
end

-- find(text) -> { { search = lines, replace = lines }, ..., form = } | nil
-- (no edits) | nil, why (edits that cannot be read: a block cut off).
-- A reply with SEARCH/REPLACE blocks is read as those; else its unified
-- diff's hunks, where it has any.
function M.find(text)
  local lines = lines_of((text or ""):gsub("\r\n?", "\n"))
  local list, why = search_replace(lines)
  if not list then return nil, why end
  if #list > 0 then list.form = "SEARCH/REPLACE"; return list end
  list = unified(lines)
  if #list > 0 then list.form = "unified diff"; return list end
  return nil
end

-- The first line of a search that says something, quoted.
local function first_line(search)
  for _, l in ipairs(search) do
    if l:match("%S") then return string.format("%q", ktext.cut((l:gsub("^%s+", "")), 80)) end
  end
  return "(blank lines only)"
end

-- The 1-based positions where needle starts a line of text.
local function occurrences(text, needle)
  local at, from = {}, 1
  while true do
    local s = text:find(needle, from, true)
    if not s then return at end
    if s == 1 or text:sub(s - 1, s - 1) == "\n" then at[#at + 1] = s end
    from = s + 1
  end
end

local function line_number(text, pos)
  return select(2, text:sub(1, pos - 1):gsub("\n", "")) + 1
end

-- Where a search that matches nothing goes wrong: the place of its first
-- line that agrees with most of its lines, and the first line that differs
-- there ("" where its first line is nowhere).
local function near(text, search)
  local lines, want = lines_of(text), lines_of(search)
  local best, agree = nil, 0
  for i, l in ipairs(lines) do
    if l == want[1] then
      local k = 1
      while k < #want and lines[i + k] == want[k + 1] do k = k + 1 end
      if k > agree then best, agree = i, k end
    end
  end
  if not best then return "" end
  return string.format("; its line 1 is the parent's line %d, but its line %d differs from the parent's line %d",
                       best, agree + 1, best + agree)
end

-- apply(parent, list) -> the edited source | nil, why: each edit in order
-- on the text the ones before it left; why names the first that fails.
function M.apply(parent, list)
  local text, n = parent, #list
  for i, e in ipairs(list) do
    local search, replace = search_text(e.search), joined(e.replace)
    local what = string.format("edit %d of %d (its search begins %s)", i, n, first_line(e.search))
    -- (the lines an edit's message counts are those of the text the edits before it left)
    local after = i > 1 and string.format(" (lines counted after edit%s %s)", i > 2 and "s 1 to" or "", i - 1) or ""
    if search == "" then return nil, string.format("%s searches for nothing: give the parent's lines it replaces", what) end
    local at = occurrences(text, search)
    if #at == 0 then
      local where = near(text, search)
      return nil, string.format("%s matches nothing in the parent%s", what, where ~= "" and (where .. after) or "")
    elseif #at > 1 then
      local where = {}
      for k, p in ipairs(at) do where[k] = tostring(line_number(text, p)) end
      return nil, string.format("%s matches the parent %d times (at lines %s%s): give more lines, so that it "
                                .. "matches once", what, #at, table.concat(where, ", "), after)
    end
    text = text:sub(1, at[1] - 1) .. replace .. text:sub(at[1] + #search)
  end
  return text
end

return M
