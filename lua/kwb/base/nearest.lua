-- kwb/base/nearest.lua: the known name nearest to a mistyped one, for errors that
-- say "did you mean ...?" (recipe fields, rule names).
local M = {}

local function levenshtein(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = { [0] = i }
    for j = 1, #b do
      local cost = a:sub(i, i) == b:sub(j, j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev = cur
  end
  return prev[#b]
end

-- nearest(word, names) -> the name nearest to word if it is near enough to
-- be a typo, else nil.
function M.nearest(word, names)
  local best, bd = nil, math.huge
  for _, n in ipairs(names) do
    local d = levenshtein(word:lower(), n:lower())
    if d < bd then best, bd = n, d end
  end
  if best and bd <= math.max(2, #word // 3) then return best end
  return nil
end

return setmetatable(M, { __call = function(_, word, names) return M.nearest(word, names) end })
