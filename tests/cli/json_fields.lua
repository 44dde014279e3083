-- tests/cli/json_fields.lua FIELD...: each JSON line on stdin as the values of
-- the named fields (a.b for a nested one, #a for a list's length), tab-separated,
-- so a transcript pins --json output whatever order the encoder wrote its keys in.
local cjson = require "cjson"
for l in io.lines() do
  local t, out = cjson.decode(l), {}
  for i, f in ipairs { ... } do
    local len = f:sub(1, 1) == "#"
    local v = t
    for part in f:gsub("^#", ""):gmatch("[^.]+") do v = type(v) == "table" and v[tonumber(part) or part] or nil end
    if len then v = type(v) == "table" and #v or nil end
    if math.type(v) == "float" and v == math.floor(v) and math.abs(v) < 2 ^ 53 then v = math.tointeger(v) end
    out[i] = v == nil and "-" or type(v) == "table" and cjson.encode(v) or tostring(v)
  end
  print(table.concat(out, "\t"))
end
