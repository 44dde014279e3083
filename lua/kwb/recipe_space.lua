-- kwb/recipe_space.lua: the recipe's `space` field checked (kwb.recipe's
-- Checker.space; a reply's space block is checked by it too, kwb.reply):
-- parameter names that are C identifiers, each a non-empty list of finite
-- numbers, strings or booleans; `start` a point of the lists; `restrict` a
-- function answering true or false (under the instruction bound of
-- kwb/recipe_site.lua) that admits some point, up to 100000 looked at.
-- -> { dims = { { name =, values = } } (by name), restrict =, start = }
local rsite = require "kwb.recipe_site"
local describe, field_line, is_array, raise, bounded =
  rsite.describe, rsite.field_line, rsite.is_array, rsite.raise, rsite.bounded

return function(self, v)
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
    local space = require "kwb.strategies.space"
    local sp, any = { dims = dims }, false
    local n = space.size(sp)
    local step = math.max(1, n // 100000)   -- at most 100000 points looked at
    for i = 1, n, step do
      if restrict(space.params(sp, space.nth(sp, i))) then any = true; break end
    end
    if not any then self:fail("space.restrict", string.format("excludes every point of the space (%d looked at)",
                                                                (n - 1) // step + 1), false) end
  end
  return { dims = dims, restrict = restrict, start = v.start }
end
