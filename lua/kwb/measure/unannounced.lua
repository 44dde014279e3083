-- kwb/measure/unannounced.lua: the shapes every candidate is verified on (twice, as
-- the timed ones) but never timed, and which no prompt, strategy or report
-- lists: a kernel special-cased to the benchmark's shapes is `wrong` there,
-- naming the shape. A recipe's `verify_shapes` gives them (a list of shape
-- tables, or false for none); by default they are derived from the timed
-- shapes:
--   - around a small base (each varied variable at the smaller of its least
--     timed value and M.small, the others as in the first timed shape), each
--     varied variable one less and one more; where the problem refuses such a
--     shape (a size it needs a multiple of), that variable one off the first
--     timed shape instead, at full size;
--   - one shape with every varied variable odd and past the largest timed
--     value, at full size: a kernel right only at small sizes (a fallback
--     below some size, a fast path above it that drops the ragged edge) is
--     wrong there;
--   - one with every varied variable drawn from the timed range (a draw fixed
--     by the problem and the shapes, so a result stays comparable from run to
--     run).
-- The one-off shapes are small because they are verified for every
-- candidate: at full size (4096^3 for an SGEMM) six of them cost more than
-- timing the candidate. The variables are the problem's `vary` (default:
-- every variable that may not be 0), and a shape the problem refuses is left
-- out.
local rng = require "kwb.base.rng"

local M = {}

-- The small base's size. 256 = 2 x 128: for a kernel tiled by up to 128 in a
-- variable, both one-off sizes, 255 and 257, hold a whole tile and a partial
-- one (a base of 128 would give 127, a partial tile alone), and every other
-- variable at 256 holds more than one tile, so the tile loop, its edge
-- handling and the step between tiles all run.
M.small = 256

-- vary(problem) -> the variables a derived shape may change: the problem's
-- `vary`, else every variable that may not be 0.
function M.vary(p)
  if p.vary then return p.vary end
  local vary = {}
  for _, v in ipairs(p.vars) do
    if p.var_min[v] >= 1 then vary[#vary + 1] = v end
  end
  return vary
end

-- shape_from(base, changes) -> a copy of base with changes applied
local function shape_from(base, changes)
  local s = {}
  for k, x in pairs(base) do s[k] = x end
  for k, x in pairs(changes) do s[k] = x end
  return s
end

-- one_offs(p, vary, base, small) -> each varied variable one less and one more
-- than the small base; at full size (one off base) where the problem refuses
-- the small one.
local function one_offs(p, vary, base, small)
  local out = {}
  for _, v in ipairs(vary) do
    for _, d in ipairs { -1, 1 } do
      local s = shape_from(small, { [v] = small[v] + d })
      if not p:check_shape(s) then s = shape_from(base, { [v] = base[v] + d }) end
      out[#out + 1] = s
    end
  end
  return out
end

-- derive(problem, shapes) -> { { shape =, key = }, ... }
function M.derive(p, shapes)
  local vary = M.vary(p)
  if #vary == 0 or #shapes == 0 then return {} end
  local lo, hi = {}, {}
  for _, sh in ipairs(shapes) do
    for _, v in ipairs(vary) do
      local x = sh.shape[v]
      lo[v], hi[v] = math.min(lo[v] or x, x), math.max(hi[v] or x, x)
    end
  end
  local base, least = shapes[1].shape, {}
  for _, v in ipairs(vary) do least[v] = math.min(lo[v], M.small) end
  local out = one_offs(p, vary, base, shape_from(base, least))
  local odd, drawn = {}, {}
  local keys = {}
  for i, sh in ipairs(shapes) do keys[i] = sh.key end
  local rand = rng.new(rng.seed_of("unannounced", p:key(), table.concat(keys, ";")))
  for _, v in ipairs(vary) do
    odd[v] = hi[v] % 2 == 1 and hi[v] + 2 or hi[v] + 1
    drawn[v] = rand(lo[v], hi[v])
  end
  out[#out + 1] = shape_from(base, odd)
  out[#out + 1] = shape_from(base, drawn)
  local seen, list = {}, {}
  for _, sh in ipairs(shapes) do seen[sh.key] = true end
  for _, s in ipairs(out) do
    local key = p:shape_key(s)
    if not seen[key] and p:check_shape(s) then
      seen[key] = true
      list[#list + 1] = { shape = s, key = key }
    end
  end
  return list
end

-- keys(list) -> { "n=63", ... } (what a result records it was verified on)
function M.keys(list)
  local out = {}
  for i, sh in ipairs(list) do out[i] = sh.key end
  return out
end

return M
