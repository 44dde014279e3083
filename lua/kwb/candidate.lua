-- kwb/candidate.lua: the first stage of the loop. A strategy's proposal (a
-- parameter table for the recipe's template, or a source or file) becomes a
-- candidate: its source, defines, name, origin and its id, computed here
-- once; every later stage and the cache use that id.
--
--   local c = candidate.make(session, { BM = 32, BN = 64 }, "anneal")
--   c.id, c.short, c.source, c.defines, c.define_list, c.params, c.origin
local cache = require "kwb.cache"
local host = require "kwb.host"

local M = {}

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

local function from_source(from, prop, origin)
  local src = prop.source
  if not src then
    local file, err = prop.file, nil
    if type(file) ~= "string" then error("a candidate's 'file' must be a path", 3) end
    -- paths in proposals, as in recipes, are relative to the recipe's file
    if file:sub(1, 1) ~= "/" and from.recipe.dir and not prop.resolved then file = from.recipe.dir .. "/" .. file end
    src, err = host.read_file(file)
    if not src then error("cannot read candidate " .. prop.file .. ": " .. tostring(err), 3) end
  end
  local c = { source = src, name = prop.name or (prop.file and prop.file:match("[^/]+$")) or "candidate.c",
              defines = prop.defines or {}, params = prop.params or prop.defines, origin = prop.origin or origin,
              parent = prop.parent, rationale = prop.rationale }
  -- what a model's reply adds: which model, its transcript and cost, and
  -- no_code (why the reply holds no kernel: the candidate is the reply's text)
  for _, k in ipairs { "model", "transcript", "cost", "no_code", "note" } do c[k] = prop[k] end
  return c
end

local function from_params(from, prop, origin)
  if not from.template_source then
    error("a parameter proposal needs the recipe's 'template' (this recipe has none)", 3)
  end
  local params = {}
  for k, v in pairs(prop) do params[k] = v end
  return { source = from.template_source, name = from.recipe.template:match("[^/]+$"), defines = params,
           params = params, origin = origin }
end

-- make(from, proposal [, origin]) -> candidate. `from` holds the recipe,
-- its template's source (template_source) and a table `ids` where the ids of
-- template points are remembered (strategies ask for the same points again).
function M.make(from, prop, origin)
  if type(prop) ~= "table" then error("a proposal must be a table (parameters or a candidate)", 2) end
  local c = (prop.source or prop.file) and from_source(from, prop, origin) or from_params(from, prop, origin)
  c.define_list = host.define_list(c.defines)
  local recipe = from.recipe
  local memo
  if not (prop.source or prop.file) then   -- a template point: same source, other defines
    from.ids[c.source] = from.ids[c.source] or {}
    memo = from.ids[c.source]
  end
  local key = memo and cache.json(c.defines)
  c.id = memo and memo[key]
  if not c.id then
    c.id = cache.candidate_id(recipe.problem:key(), c.source, c.defines, recipe.flags)
    if memo then memo[key] = c.id end
  end
  c.short = c.id:sub(1, 8)
  return c
end

return M
