-- kwb/strategies/space.lua: what the strategies share about a parameter
-- space: points as index vectors, their parameter tables, enumeration.
local site = require "kwb.base.site"
local describe, field_line, is_array, raise, bounded =
  site.describe, site.field_line, site.is_array, site.raise, site.bounded
local M = {}

-- params(space, idx) -> { NAME = value, ... } for an index vector.
function M.params(space, idx)
  local p = {}
  for i, d in ipairs(space.dims) do p[d.name] = d.values[idx[i]] end
  return p
end

-- The index vector of params (nil if a value is not in the space).
function M.index(space, params)
  local idx = {}
  for i, d in ipairs(space.dims) do
    for j, v in ipairs(d.values) do
      if v == params[d.name] then idx[i] = j end
    end
    if not idx[i] then return nil end
  end
  return idx
end

function M.size(space)
  local n = 1
  for _, d in ipairs(space.dims) do n = n * #d.values end
  return n
end

-- The i-th point (1-based) of the product, last dimension fastest.
function M.nth(space, i)
  local idx, r = {}, i - 1
  for k = #space.dims, 1, -1 do
    local n = #space.dims[k].values
    idx[k] = r % n + 1
    r = r // n
  end
  return idx
end

-- A uniformly random index vector.
function M.random(space, rand)
  local idx = {}
  for i, d in ipairs(space.dims) do idx[i] = rand(#d.values) end
  return idx
end

-- Is the point allowed and not yet known to the cache?
function M.fresh(run, params)
  return run:valid(params) and not run:known(params)
end

-- The first allowed point the cache does not know, in grid order (nil when
-- none is left): the fallback when random draws keep hitting known points.
function M.first_fresh(run, space)
  for i = 1, M.size(space) do
    local idx = M.nth(space, i)
    local p = M.params(space, idx)
    if M.fresh(run, p) then return idx, p end
  end
  return nil
end

function M.need_space(run, name)
  if not run.space then error("the " .. name .. " strategy needs the recipe's 'space' (and 'template')", 0) end
  return run.space
end

-- check(checker, v) -> { dims = { { name =, values = } } (by name), restrict =, start = }:
-- a space as a recipe's `space` field or a reply's space block declares it,
-- checked (kwb.recipe's Checker.space; kwb.strategies.reply): parameter
-- names that are C identifiers, each a non-empty list of finite numbers,
-- strings or booleans; `start` a point of the lists; `restrict` a function
-- answering true or false (under the instruction bound of kwb/base/site.lua)
-- that admits some point, up to 100000 looked at. Errors go through the
-- checker's fail and unknown (kwb.base.site's Checker).
function M.check(self, v)
  if type(v) ~= "table" then self:fail("space", "a table of parameter names to value lists", v) end
  local dims = {}
  for k, list in pairs(v) do
    if k == "restrict" then
      if type(list) ~= "function" then self:fail("space.restrict", "a function(params) -> boolean", list) end
    elseif k == "start" then
      if type(list) ~= "table" then self:fail("space.start", "a point of the space: { NAME = value, ... }", list) end
    else
      if type(k) ~= "string" or not k:match("^[%a_][%w_]*$") then self:fail("space", "parameter names that are C identifiers", k) end
      if not is_array(list) or #list == 0 then self:fail("space." .. k, "a non-empty list of values", list) end
      for i, x in ipairs(list) do
        local t = type(x)
        if (t ~= "number" and t ~= "string" and t ~= "boolean") or (t == "number" and not (math.abs(x) < math.huge)) then
          self:fail("space." .. k .. "[" .. i .. "]", "a finite number, a string or a boolean", x)
        end
      end
      dims[#dims + 1] = { name = k, values = list }
    end
  end
  if #dims == 0 then self:fail("space", "at least one parameter", v) end
  table.sort(dims, function(a, b) return a.name < b.name end)
  -- start: where a search begins when the cache knows no better point (anneal)
  if v.start then
    local names = {}
    for _, d in ipairs(dims) do
      names[#names + 1] = d.name
      local x, found = v.start[d.name], false
      for _, y in ipairs(d.values) do found = found or y == x end
      if x == nil then self:fail("space.start." .. d.name, "a value (start names every parameter)", x) end
      if not found then self:fail("space.start." .. d.name, "one of the values space." .. d.name .. " lists", x) end
    end
    for k in pairs(v.start) do
      if v[k] == nil or k == "restrict" or k == "start" then self:unknown(k, names, "space.start.") end
    end
  end
  local restrict = v.restrict
  if restrict then   -- true or false, nothing else; and not false everywhere
    local site = self.site
    restrict = function(p)
      local ok = bounded(site, "space.restrict", v.restrict, p)
      if type(ok) ~= "boolean" then
        raise(site, field_line(site, "space.restrict"), string.format("recipe field 'space.restrict': returned %s "
              .. "for a point, not true or false", describe(ok)))
      end
      return ok
    end
    if v.start and not restrict(v.start) then self:fail("space.start", "is a point space.restrict excludes", false) end
    local sp, any = { dims = dims }, false
    local n = M.size(sp)
    local step = math.max(1, n // 100000)   -- at most 100000 points looked at
    for i = 1, n, step do
      if restrict(M.params(sp, M.nth(sp, i))) then any = true; break end
    end
    if not any then self:fail("space.restrict", string.format("excludes every point of the space (%d looked at)",
                                                                (n - 1) // step + 1), false) end
  end
  return { dims = dims, restrict = restrict, start = v.start }
end

return M
