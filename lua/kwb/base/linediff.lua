-- kwb/base/linediff.lua: line diffs of two texts in unified form, from a longest
-- common subsequence (common head and tail lines are set aside first, so the
-- table stays small for the usual few-line edits between candidates).
--
--   kwb.base.linediff.unified(a, b, { from = "a", to = "b", context = 3 }) -> text ("" if equal)
local M = {}

local function lines(s)
  local t = {}
  if s == "" then return t end
  for l in (s .. "\n"):gmatch("(.-)\r?\n") do t[#t + 1] = l end
  if s:sub(-1) == "\n" then t[#t] = nil end   -- the text's final newline ends a line
  return t
end
M.lines = lines

-- ops(a, b) -> { {op = " " | "-" | "+", text, a = line in a, b = line in b}, ... }
function M.ops(a, b)
  local n, m = #a, #b
  local lo = 1
  while lo <= n and lo <= m and a[lo] == b[lo] do lo = lo + 1 end
  local hi_a, hi_b = n, m
  while hi_a >= lo and hi_b >= lo and a[hi_a] == b[hi_b] do hi_a, hi_b = hi_a - 1, hi_b - 1 end
  -- L[i][j]: LCS length of a[i..hi_a] and b[j..hi_b], in one flat array
  local w = hi_b - lo + 2
  local L = {}
  local function at(i, j) return L[(i - lo) * w + (j - lo) + 1] or 0 end
  for i = hi_a, lo, -1 do
    for j = hi_b, lo, -1 do
      local v
      if a[i] == b[j] then v = at(i + 1, j + 1) + 1
      else
        local x, y = at(i + 1, j), at(i, j + 1)
        v = x >= y and x or y
      end
      L[(i - lo) * w + (j - lo) + 1] = v
    end
  end
  local out = {}
  for k = 1, lo - 1 do out[#out + 1] = { op = " ", text = a[k], a = k, b = k } end
  local i, j = lo, lo
  while i <= hi_a or j <= hi_b do
    if i <= hi_a and j <= hi_b and a[i] == b[j] then
      out[#out + 1] = { op = " ", text = a[i], a = i, b = j }
      i, j = i + 1, j + 1
    elseif j <= hi_b and (i > hi_a or at(i, j + 1) > at(i + 1, j)) then
      out[#out + 1] = { op = "+", text = b[j], a = i, b = j }
      j = j + 1
    else
      out[#out + 1] = { op = "-", text = a[i], a = i, b = j }
      i = i + 1
    end
  end
  for k = 1, n - hi_a do
    out[#out + 1] = { op = " ", text = a[hi_a + k], a = hi_a + k, b = hi_b + k }
  end
  return out
end

-- unified(a, b, opts) -> the diff of texts a and b, "" when they are equal
function M.unified(a, b, opts)
  opts = opts or {}
  local ctx = opts.context or 3
  local ops = M.ops(lines(a), lines(b))
  local out = {}
  local k = 1
  while k <= #ops do
    if ops[k].op == " " then k = k + 1
    else
      -- a hunk: from ctx lines before this change to ctx lines after the last
      -- change that is within 2 * ctx unchanged lines of the previous one
      local first = math.max(1, k - ctx)
      local last, gap = k, 0
      local q = k + 1
      while q <= #ops do
        if ops[q].op ~= " " then last, gap = q, 0
        else
          gap = gap + 1
          if gap > 2 * ctx then break end
        end
        q = q + 1
      end
      local stop = math.min(#ops, last + ctx)
      local a0, b0, na, nb = nil, nil, 0, 0
      for p = first, stop do
        local o = ops[p]
        if o.op ~= "+" then na = na + 1; a0 = a0 or o.a end
        if o.op ~= "-" then nb = nb + 1; b0 = b0 or o.b end
      end
      a0 = a0 and a0 or ops[first].a - 1
      b0 = b0 and b0 or ops[first].b - 1
      if #out == 0 then
        out[1] = "--- " .. (opts.from or "a")
        out[2] = "+++ " .. (opts.to or "b")
      end
      local function range(s, c) return c == 1 and tostring(s) or string.format("%d,%d", s, c) end
      out[#out + 1] = string.format("@@ -%s +%s @@", range(a0, na), range(b0, nb))
      for p = first, stop do out[#out + 1] = ops[p].op .. ops[p].text end
      k = stop + 1
    end
  end
  return #out > 0 and table.concat(out, "\n") .. "\n" or ""
end

return M
