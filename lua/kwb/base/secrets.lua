-- kwb/base/secrets.lua: the secret values this process knows (a queue's password,
-- a fleet's key, a worker's key, a model's API key), and their scrub from
-- text. Whoever reads a secret registers it here; text that is stored or
-- sent on (the cache's rows and blobs, --json lines, results that come from
-- workers, a fleet's results) passes through scrub, so that a secret a
-- candidate got hold of never reaches the cache, a bundle, a prompt or a log.
local cjson = require "cjson"

local M = {}

-- What a secret becomes.
M.mask = "[secret]"

-- Shorter values are not scrubbed: they would mangle ordinary text, and are
-- no secret anyway.
M.min_length = 6

local known = {}   -- value -> the forms it is scrubbed in (patterns)

local function pattern(s) return (s:gsub("%W", "%%%0")) end

-- add(value): a secret to scrub from now on (nil, short or repeated values
-- are ignored).
function M.add(value)
  if type(value) ~= "string" or #value < M.min_length or known[value] then return end
  local forms, seen = {}, {}
  -- literal; as JSON writes it inside a string; percent-encoded (a URL)
  local url = value:gsub("[^%w%-_.~]", function(c) return string.format("%%%02X", c:byte()) end)
  for _, f in ipairs { value, cjson.encode(value):sub(2, -2), url } do
    if not seen[f] then seen[f] = true; forms[#forms + 1] = pattern(f) end
  end
  known[value] = forms
end

-- any() -> whether a secret is known.
function M.any() return next(known) ~= nil end

-- scrub(text) -> text with every known secret replaced by M.mask; anything
-- not a string as it is.
function M.scrub(text)
  if type(text) ~= "string" or not next(known) then return text end
  for _, forms in pairs(known) do
    for _, p in ipairs(forms) do text = text:gsub(p, M.mask) end
  end
  return text
end

-- scrub_all(v) -> v with every string in it (keys too) scrubbed; a table
-- that held none comes back as it is.
function M.scrub_all(v, seen)
  if not next(known) then return v end
  if type(v) == "string" then return M.scrub(v) end
  if type(v) ~= "table" then return v end
  seen = seen or {}
  if seen[v] then return v end
  seen[v] = true
  local changes = {}
  for k, x in pairs(v) do
    local k2, x2 = M.scrub_all(k, seen), M.scrub_all(x, seen)
    if k2 ~= k or x2 ~= x then changes[#changes + 1] = { k, k2, x2 } end
  end
  for _, c in ipairs(changes) do
    v[c[1]] = nil
    v[c[2]] = c[3]
  end
  return v
end

-- read_file(path, what) -> the secret in a file (its first line, without
-- the line end) | nil, message naming the file.
function M.read_file(path, what)
  local f, err = io.open(path, "rb")
  if not f then return nil, string.format("%s: cannot read %s", what, tostring(err)) end
  local text = f:read("a") or ""
  f:close()
  local value = text:match("^([^\r\n]*)")
  if value == "" then return nil, string.format("%s: the file %s is empty", what, path) end
  return value
end

return M
