-- kwb/pretty.lua: values as readable text: nested tables with sorted keys,
-- cycles marked, long tables and strings elided, short tables on one line.
local M = {}

local defaults = { width = 78, items = 40, depth = 6, string = 200 }

local function is_ident(s)
  return type(s) == "string" and s:match("^[%a_][%w_]*$") ~= nil
end

local type_rank = { number = 1, string = 2, boolean = 3 }

local function key_less(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return (type_rank[ta] or 9) < (type_rank[tb] or 9) end
  if ta == "number" or ta == "string" then return a < b end
  return tostring(a) < tostring(b)
end

local function scalar(v, o)
  if type(v) == "string" then
    if #v > o.string then
      return string.format("%q", v:sub(1, o.string)):gsub("\\\n", "\\n") .. string.format("..(%d bytes)", #v)
    end
    return (string.format("%q", v):gsub("\\\n", "\\n"))
  end
  if v ~= v then return "nan" end   -- the C library may print "-nan"
  return tostring(v)
end

local render

local function key_text(k, o)
  if is_ident(k) then return k .. " = " end
  return "[" .. scalar(k, o) .. "] = "
end

-- Array part first (1..n without keys), then the other keys sorted.
local function entries(t)
  local n = 0
  while rawget(t, n + 1) ~= nil do n = n + 1 end
  local keys = {}
  for k in next, t do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, key_less)
  return n, keys
end

function render(v, o, indent, path)
  if type(v) ~= "table" then return scalar(v, o) end
  local mt = getmetatable(v)
  if type(mt) == "table" and rawget(mt, "__tostring") then return tostring(v) end
  if path[v] then return "<cycle>" end
  if indent / 2 >= o.depth then return "{...}" end
  path[v] = true
  local n, keys = entries(v)
  local parts, total, shown = {}, n + #keys, 0
  for i = 1, n do
    if shown >= o.items then break end
    parts[#parts + 1] = render(v[i], o, indent + 2, path)
    shown = shown + 1
  end
  for _, k in ipairs(keys) do
    if shown >= o.items then break end
    parts[#parts + 1] = key_text(k, o) .. render(rawget(v, k), o, indent + 2, path)
    shown = shown + 1
  end
  if total > shown then parts[#parts + 1] = string.format("... (%d more)", total - shown) end
  path[v] = nil
  if #parts == 0 then return "{}" end
  local one = "{ " .. table.concat(parts, ", ") .. " }"
  if #one + indent <= o.width and not one:find("\n") then return one end
  local pad = string.rep(" ", indent + 2)
  return "{\n" .. pad .. table.concat(parts, ",\n" .. pad) .. "\n" .. string.rep(" ", indent) .. "}"
end

-- format(v [, opts]): opts may set width, items, depth and string (limits).
function M.format(v, opts)
  local o = {}
  for k, d in pairs(defaults) do o[k] = opts and opts[k] or d end
  return render(v, o, 0, {})
end

return M
