-- kwb/insight/plots.lua: the report's plots (kwb.insight.report) as inline
-- SVG, nothing fetched: a step line with ticked axes, and bars with a ticked
-- value axis, drawn against the largest bar or a whole (a share's 100%).
local M = {}

-- esc(s) -> s with &, <, > and " as HTML entities
function M.esc(s) return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"):gsub('"', "&quot;")) end
local esc = M.esc

local W, H, PAD = 560, 240, 44

-- ticks(top) -> tick values 0, step, 2 step, ... up to top: step 1, 2 or 5
-- times a power of ten, about five of them
function M.ticks(top)
  if not (top > 0) then return { 0 } end
  local raw = top / 5
  local mag = 10 ^ math.floor(math.log(raw, 10))
  local step = mag
  for _, m in ipairs { 1, 2, 5, 10 } do
    if m * mag >= raw then step = m * mag; break end
  end
  local out = {}
  for i = 0, math.floor(top / step + 1e-9) do out[#out + 1] = i * step end
  return out
end

-- The marks and labels of an axis's ticks (class="tick"): along x under the
-- plot (x(v) its position) or along y left of it (y(v)), labelled by fmt.
local function tick_marks(values, fmt, x, y)
  local parts = {}
  for _, v in ipairs(values) do
    if x then
      parts[#parts + 1] = string.format('<g class="tick"><line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#444"/>'
        .. '<text x="%.1f" y="%d" font-size="10" text-anchor="middle">%s</text></g>', x(v), H - PAD, x(v), H - PAD + 4,
        x(v), H - PAD + 15, esc(string.format(fmt, v)))
    else
      parts[#parts + 1] = string.format('<g class="tick"><line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#444"/>'
        .. '<text x="%d" y="%.1f" font-size="10" text-anchor="end">%s</text></g>', PAD - 4, y(v), PAD, y(v), PAD - 6,
        y(v) + 3, esc(string.format(fmt, v)))
    end
  end
  return table.concat(parts)
end

-- A step line of points { x, y } with axes, their ticks and their ranges.
function M.line_svg(id, title, xlabel, ylabel, pts)
  local xs, ys = { 0 }, { 1 }
  for _, p in ipairs(pts) do xs[#xs + 1], ys[#ys + 1] = p[1], p[2] end
  local x1, y1 = math.max(table.unpack(xs)), math.max(table.unpack(ys)) * 1.1
  if x1 <= 0 then x1 = 1 end
  local function X(v) return PAD + (W - 2 * PAD) * v / x1 end
  local function Y(v) return H - PAD - (H - 2 * PAD) * v / y1 end
  local path = { string.format("M%.1f %.1f", X(0), Y(1)) }
  local last = 1
  for _, p in ipairs(pts) do
    path[#path + 1] = string.format("L%.1f %.1f L%.1f %.1f", X(p[1]), Y(last), X(p[1]), Y(p[2]))
    last = p[2]
  end
  return table.concat {
    string.format('<svg id="%s" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img">', id, W, H),
    string.format('<title>%s</title>', esc(title)),
    string.format('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"/>', PAD, H - PAD, W - PAD, H - PAD),
    string.format('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"/>', PAD, PAD, PAD, H - PAD),
    string.format('<path d="%s" fill="none" stroke="#1f6feb" stroke-width="2"/>', table.concat(path, " ")),
    tick_marks(M.ticks(x1), "%g", X, nil), tick_marks(M.ticks(y1), "%gx", nil, Y),
    string.format('<text x="%d" y="%d" font-size="12" text-anchor="middle">%s (0 to %.3g)</text>', W // 2, H - 2,
                  esc(xlabel), x1),
    string.format('<text x="10" y="%d" font-size="12">%s (up to %.3gx)</text>', PAD - 16, esc(ylabel), y1 / 1.1),
    "</svg>",
  }
end

-- A tick's label format from a bar's ("%d", "%.2fx", "%.0f%%"): the same
-- unit, as few digits as the value needs ("%g", "%gx", "%g%%").
local function tick_format(fmt)
  return (fmt:gsub("%%%.?%d*[df]", "%%g"))
end

-- Bars of { label, value } (value nil: no bar), with each value written
-- above and the value axis ticked; top: the axis's end (default the largest
-- value), so a share is drawn against its whole (the floor's %: 100).
function M.bars_svg(id, title, items, fmt, top)
  if not top then
    top = 0
    for _, it in ipairs(items) do top = math.max(top, it[2] or 0) end
    if top <= 0 then top = 1 end
  end
  local n = math.max(#items, 1)
  local bw = (W - 2 * PAD) / n
  local parts = {
    string.format('<svg id="%s" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img">', id, W, H),
    string.format('<title>%s</title>', esc(title)),
    string.format('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"/>', PAD, H - PAD, W - PAD, H - PAD),
    string.format('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"/>', PAD, PAD, PAD, H - PAD),
    tick_marks(M.ticks(top), tick_format(fmt), nil, function(v) return H - PAD - (H - 2 * PAD) * v / top end),
  }
  for i, it in ipairs(items) do
    local x = PAD + (i - 1) * bw
    local v = math.min(it[2] or 0, top)
    local h = (H - 2 * PAD) * v / top
    parts[#parts + 1] = string.format('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#2da44e"/>', x + bw * 0.15,
                                      H - PAD - h, bw * 0.7, h)
    parts[#parts + 1] = string.format('<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%s</text>', x + bw / 2,
                                      H - PAD - h - 4, it[2] and esc(string.format(fmt, it[2])) or "-")
    parts[#parts + 1] = string.format('<text x="%.1f" y="%d" font-size="10" text-anchor="middle">%s</text>', x + bw / 2,
                                      H - PAD + 14, esc(it[1]))
  end
  parts[#parts + 1] = "</svg>"
  return table.concat(parts)
end

return M
