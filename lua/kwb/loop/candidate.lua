-- kwb/loop/candidate.lua: the first stage of the loop. A strategy's proposal (a
-- parameter table for the recipe's template, or a source or file) becomes a
-- candidate: its source, defines, name, origin and its id, computed here
-- once; every later stage and the cache use that id.
--
--   local c = candidate.make(session, { BM = 32, BN = 64 }, "anneal")
--   c.id, c.short, c.source, c.defines, c.define_list, c.params, c.origin
--   c.too_big   -- why it is never built: over the recipe's budget.source_bytes
--
-- Every candidate is bounded here, before anything is sent anywhere: its
-- source and its defines together (what a worker's task carries of it) may
-- be at most the recipe's budget.source_bytes. One over the limit keeps only
-- a stand-in source, a comment naming its size and SHA-256 (a file's: its
-- path and size, the file never read whole), and no defines: that is what
-- its id is computed from, what the cache keeps and all a worker could ever
-- see of it. The session records it as `compile-error` with c.too_big as the
-- reason, without building it.
local ids = require "kwb.base.ids"
local cache = require "kwb.cache"
local core = require "kwb.core"
local host = require "kwb.host"
local text = require "kwb.base.text"

local M = {}


-- A candidate's file, read up to `limit` bytes: its text, or nil and its
-- size when it is larger (a file over the limit is never read whole).
local function read_file(shown, file, limit)
  local f, err = io.open(file, "rb")
  if not f then error("cannot read candidate " .. shown .. ": " .. tostring(err), 4) end
  local size = f:seek("end")
  if size and size > limit then f:close(); return nil, size end
  if size then f:seek("set") end
  local s = f:read("a")
  f:close()
  if #s > limit then return nil, #s end   -- (one whose size it could not tell, read whole)
  return s
end

local function from_source(from, prop, origin)
  local src, file_size = prop.source, nil
  if not src then
    local file = prop.file
    if type(file) ~= "string" then error("a candidate's 'file' must be a path", 3) end
    -- paths in proposals, as in recipes, are relative to the recipe's file
    if file:sub(1, 1) ~= "/" and from.recipe.dir and not prop.resolved then file = from.recipe.dir .. "/" .. file end
    src, file_size = read_file(prop.file, file, from.recipe.budget.source_bytes)
  end
  if src and not prop.no_code then src = text.code(src) end   -- (a reply with no kernel is kept as it came)
  local c = { source = src, file_size = file_size,
              name = prop.name or (prop.file and prop.file:match("[^/]+$")) or "candidate.c",
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

-- bound(c, limit, file): c within the limit, or made its stand-in with c.too_big.
local function bound(c, limit, file)
  local src_n, def_n = c.file_size or #c.source, 0
  for _, d in ipairs(c.define_list) do def_n = def_n + #d end
  if src_n + def_n <= limit then return end
  local what
  if def_n == 0 then what = string.format("its source is %d bytes", src_n)
  else what = string.format("its source and defines are %d bytes (source %d, defines %d)", src_n + def_n, src_n, def_n) end
  c.too_big = string.format("%s, over the recipe's limit of %d bytes (budget.source_bytes)", what, limit)
  local digest = c.source and ("SHA-256 of its source " .. core.sha256(c.source)) or ("the file " .. file)
  if def_n > 0 then digest = digest .. ", of its defines " .. core.sha256(table.concat(c.define_list, "\n")) end
  c.source = string.format("/* kwb: not kept: %s; %s */\n", c.too_big, digest)
  c.defines, c.define_list, c.params, c.file_size = {}, {}, nil, nil
end

-- make(from, proposal [, origin]) -> candidate. `from` holds the recipe,
-- its template's source (template_source) and a table `ids` where the ids of
-- template points are remembered (strategies ask for the same points again).
function M.make(from, prop, origin)
  if type(prop) ~= "table" then error("a proposal must be a table (parameters or a candidate)", 2) end
  local c = (prop.source or prop.file) and from_source(from, prop, origin) or from_params(from, prop, origin)
  c.define_list = host.define_list(c.defines)
  local recipe = from.recipe
  bound(c, recipe.budget.source_bytes, prop.file)
  local memo
  if not (prop.source or prop.file) and not c.too_big then   -- a template point: same source, other defines
    from.ids[c.source] = from.ids[c.source] or {}
    memo = from.ids[c.source]
  end
  local key = memo and cache.json(c.defines)
  c.id = memo and memo[key]
  if not c.id then
    c.id = cache.candidate_id(recipe.problem:key(), c.source, c.defines, recipe.flags)
    if memo then memo[key] = c.id end
  end
  c.short = ids.short(c.id)
  return c
end

-- for_worker(cand) -> what of a candidate a worker's task needs (plain data)
function M.for_worker(cand)
  return { source = cand.source, name = cand.name, defines = cand.defines, define_list = cand.define_list,
           params = cand.params, id = cand.id, short = cand.short, plant = cand.plant }
end

return M
