-- kwb/strategies/space.lua: what the strategies share about a parameter
-- space: points as index vectors, their parameter tables, enumeration.
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

return M
