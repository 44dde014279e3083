-- kwb/cache/base.lua: what the candidate cache's files share: the Cache
-- class (kwb.cache, kwb.cache.maint and kwb.cache.bundle each add its
-- methods), canonical JSON, decoding, argument checks and content ids.
local core = require "kwb.core"
local cjson = require "cjson"
local outcomes = require "kwb.base.outcomes"

local M = {}

-- ---- canonical JSON ---------------------------------------------------------

-- Sorted keys, integers without a fraction, floats to 17 digits: one text per
-- value, so hashes of it are stable. Tables with keys 1..n are arrays; an
-- empty table is an object unless as_array.
local function canon(v, as_array)
  local t = type(v)
  if t == "string" then return cjson.encode(v)
  elseif t == "boolean" then return tostring(v)
  elseif t == "nil" then return "null"
  elseif t == "number" then
    if math.type(v) == "integer" then return string.format("%d", v) end
    if v ~= v or v == math.huge or v == -math.huge then
      error("cannot store the number " .. tostring(v) .. " as JSON", 0)
    end
    if v == math.floor(v) and math.abs(v) < 2^53 then return string.format("%d", v) end
    return string.format("%.17g", v)
  elseif t == "table" then
    local n = #v
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    if (n > 0 and #keys == n) or (#keys == 0 and as_array) then
      local out = {}
      for i = 1, n do out[i] = canon(v[i]) end
      return "[" .. table.concat(out, ",") .. "]"
    end
    for _, k in ipairs(keys) do
      if type(k) ~= "string" then
        error("cannot store a table with a " .. type(k) .. " key as JSON", 0)
      end
    end
    table.sort(keys)
    local out = {}
    for i, k in ipairs(keys) do out[i] = cjson.encode(k) .. ":" .. canon(v[k]) end
    return "{" .. table.concat(out, ",") .. "}"
  end
  error("cannot store a " .. t .. " as JSON", 0)
end

-- The expected-failure convention: nil, message, {code = code}.
local function fail(code, msg)
  return nil, msg, { code = code }
end

function M.outcome_known(o) return outcomes.known(o) end

-- JSON numbers come back from cjson as floats; whole ones become integers
-- again (the canonical text does not tell 2 from 2.0), and JSON null becomes nil.
local function normalize(v)
  if type(v) == "number" then return math.tointeger(v) or v end
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do
    if x ~= cjson.null then out[k] = normalize(x) end
  end
  return out
end

local function decode(s, default)
  if s == nil then return default end
  local ok, v = pcall(cjson.decode, s)
  if not ok then return default end
  return normalize(v)
end

-- ---- identity ---------------------------------------------------------------

-- The id of a candidate: SHA-256 over everything that determines it (the
-- source through its hash, which is also the id of its blob).
local function candidate_id_of_blob(problem, source_blob, params, flags)
  return core.sha256("kwb-candidate-1\n" .. canon { problem = problem, source = source_blob,
                                                     params = params or {} }
                     .. "\n" .. canon(flags or {}, true))
end

function M.candidate_id(problem, source, params, flags)
  return candidate_id_of_blob(problem, core.sha256(source), params, flags)
end

function M.build_id(candidate, arch, toolchain)
  return core.sha256("kwb-build-1\n" .. canon { candidate = candidate, arch = arch, toolchain = toolchain })
end

-- ---- the cache object -------------------------------------------------------

local Cache = {}
Cache.__index = Cache
M.Cache = Cache

local function check_string(v, what)
  if type(v) ~= "string" or v == "" then
    error(string.format("%s must be a non-empty string (got %s)", what, tostring(v)), 3)
  end
  return v
end

local function check_table(v, what)
  if v == nil then return {} end
  if type(v) ~= "table" then error(string.format("%s must be a table (got %s)", what, type(v)), 3) end
  return v
end

local function check_outcome(o)
  if not outcomes.known(o) then
    error(string.format("unknown outcome '%s' (known: %s)", tostring(o), table.concat(outcomes.all, ", ")), 3)
  end
  return o
end

-- ---- where a result was measured -------------------------------------------

-- imported_from(v) -> the bundle a result's verdict (its verify) or a run's
-- settings came in (kwb.cache.bundle's import marks both), or nil: measured
-- here.
function M.imported_from(v)
  return type(v) == "table" and type(v.imported) == "string" and v.imported or nil
end

-- as_measured(v, trust) -> may the loop take this result (its verdict) or
-- run (its settings) as a measurement of this machine's: measured here, or
-- imported where trust (a recipe's trust_imported) says so. The one rule for
-- every reader that races, accepts, names a best or ships a kernel
-- (kwb.loop.store's known and baseline, kwb cache best).
function M.as_measured(v, trust)
  return trust == true or M.imported_from(v) == nil
end

-- ancestry(db, id, seen, out) -> out: id and its ancestors, as far as the
-- cache knows them and not already in seen, appended to out.
function M.ancestry(db, id, seen, out)
  while id and not seen[id] do
    seen[id] = true
    out[#out + 1] = id
    local r = db:exec("SELECT parent FROM candidate WHERE id = ?1", id)[1]
    id = r and r.parent
  end
  return out
end

M.canon, M.fail, M.decode = canon, fail, decode
M.candidate_id_of_blob = candidate_id_of_blob
M.check_string, M.check_table, M.check_outcome = check_string, check_table, check_outcome

return M
