-- kwb/figures.lua: figures as text: times with units, aligned tables.
local M = {}

-- time(0.000412) -> "412.0 us"
function M.time(s)
  if s == nil then return "-" end
  if s >= 1 then return string.format("%.3f s", s) end
  if s >= 1e-3 then return string.format("%.3f ms", s * 1e3) end
  if s >= 1e-6 then return string.format("%.1f us", s * 1e6) end
  return string.format("%.0f ns", s * 1e9)
end

-- table(columns, rows): columns = { {"T", align = "right"}, ... } or plain
-- names; rows are arrays of values (strings or numbers). Returns the lines.
function M.table(columns, rows)
  local heads, right = {}, {}
  for i, c in ipairs(columns) do
    if type(c) == "table" then heads[i], right[i] = c[1], c.align ~= "left"
    else heads[i], right[i] = c, i > 1 end
  end
  local width = {}
  for i, h in ipairs(heads) do width[i] = #h end
  local cells = {}
  for r, row in ipairs(rows) do
    cells[r] = {}
    for i = 1, #heads do
      local s = row[i] == nil and "-" or tostring(row[i])
      cells[r][i] = s
      if utf8.len(s) and utf8.len(s) > width[i] then width[i] = utf8.len(s) end
    end
  end
  local function line(vals)
    local out = {}
    for i, v in ipairs(vals) do
      local pad = string.rep(" ", width[i] - (utf8.len(v) or #v))
      out[i] = right[i] and pad .. v or v .. pad
    end
    return (table.concat(out, "  "):gsub("%s+$", ""))
  end
  local lines = { line(heads) }
  for _, c in ipairs(cells) do lines[#lines + 1] = line(c) end
  return lines
end

function M.print_table(columns, rows)
  for _, l in ipairs(M.table(columns, rows)) do print(l) end
end

return M
