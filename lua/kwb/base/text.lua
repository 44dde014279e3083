-- kwb/base/text.lua: text as kwb writes it for others to parse: valid UTF-8.
-- A model's reply, a compiler's message or a candidate's output may hold any
-- bytes; JSON (RFC 8259) is UTF-8, and cjson passes bytes at or above 0x80
-- through as they are, so a stray byte would make a whole line unreadable
-- to a strict parser.
--
--   text.valid(s)        -- s with each byte that is not part of a well-formed
--                        -- UTF-8 character replaced by U+FFFD
--   text.cut(s, n)       -- the first n bytes of s, back to a whole character
--   text.clean(v)        -- a copy of v with every string (keys too) valid
--   text.json(v)         -- cjson's encoding of text.clean(v)
--
-- Well-formed is Lua's strict decoding (utf8.len without `lax`): no overlong
-- forms, no surrogates (U+D800..U+DFFF), nothing past U+10FFFF. Valid text
-- is kept byte for byte, NUL and other control characters included (JSON
-- escapes them: \u0000), so it decodes to exactly what it was; an invalid
-- byte decodes as U+FFFD, one per byte.
local cjson = require "cjson"

local M = {}

M.replacement = "\u{FFFD}"

function M.valid(s)
  if utf8.len(s) then return s end
  local out, i = {}, 1
  while true do
    local ok, bad = utf8.len(s, i)
    if ok then break end
    out[#out + 1] = s:sub(i, bad - 1)
    out[#out + 1] = M.replacement
    i = bad + 1
  end
  out[#out + 1] = s:sub(i)
  return table.concat(out)
end

function M.cut(s, n)
  if #s <= n then return s end
  local i = n + 1   -- the first byte left out: back while it continues a character
  while i > 1 and s:byte(i) >= 0x80 and s:byte(i) < 0xC0 do i = i - 1 end
  return s:sub(1, i - 1)
end

function M.clean(v, seen)
  if type(v) == "string" then return M.valid(v) end
  if type(v) ~= "table" or v == cjson.null then return v end
  seen = seen or {}
  if seen[v] then return seen[v] end   -- (cjson refuses cycles itself; shared parts stay shared)
  local out = {}
  seen[v] = out
  for k, x in pairs(v) do out[M.clean(k, seen)] = M.clean(x, seen) end
  return out
end

function M.json(v) return cjson.encode(M.clean(v)) end

-- params_text { BN = 64, BM = 32 } -> "BM=32 BN=64"
function M.params_text(p)
  if not p then return "" end
  local keys = {}
  for k in pairs(p) do keys[#keys + 1] = k end
  table.sort(keys)
  local out = {}
  for i, k in ipairs(keys) do out[i] = k .. "=" .. tostring(p[k]) end
  return table.concat(out, " ")
end

-- code(src) -> src with what cannot change what it compiles to taken out:
-- CRLF and CR line endings as LF, spaces and tabs at the ends of lines, blank
-- lines at the start and the end; one newline at the end. A candidate's id
-- is taken over this text, which is also what is built and kept, so the
-- same kernel with another editor's line endings or one more blank line is
-- the same candidate. (A C++ raw string literal's trailing spaces would be
-- lost: no kernel kwb has met holds one.)
function M.code(src)
  src = src:gsub("\r\n?", "\n"):gsub("[ \t]+\n", "\n"):gsub("[ \t]+$", "")
  src = src:gsub("^\n+", ""):gsub("\n+$", "")
  return src == "" and src or src .. "\n"
end

return M
