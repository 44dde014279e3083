-- kwb/model/providers/wire.lua: what the HTTP providers (openai, anthropic) share
-- about a reply they did not write: token counts that may be anything, and
-- error messages that may be missing or not text.
local M = {}

-- A token count from a reply: a whole number >= 0, else 0 (null, NaN,
-- infinities, negatives and strings count nothing).
function M.count(x)
  if math.type(x) == "integer" then return x >= 0 and x or 0 end
  if type(x) == "number" and x == x and x >= 0 and x < 2 ^ 53 then return math.floor(x) end
  return 0
end

-- The { input =, output = } of a usage table under the provider's names.
function M.usage(u, input, output)
  u = type(u) == "table" and u or {}
  return { input = M.count(u[input]), output = M.count(u[output]) }
end

-- The error message of an error body ({ "error": { "message": ... } } or
-- { "error": "..." }), when it is text.
function M.error_text(j)
  local e = type(j) == "table" and j.error
  if type(e) == "table" then e = e.message end
  return type(e) == "string" and e or nil
end

return M
