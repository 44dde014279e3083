-- kwb/measure/unannounced.lua: the shapes every candidate is verified on (twice, as
-- the timed ones) but never timed, and which no prompt, strategy or report
-- lists: a kernel special-cased to the benchmark's shapes is `wrong` there,
-- naming the shape. A recipe's `verify_shapes` gives them (a list of shape
-- tables, or false for none); by default they are derived from the timed
-- shapes: from the first, each variable one less and one more; one shape
-- with every variable odd and past the largest timed value; one with every
-- variable drawn from the timed range (a draw fixed by the problem and the
-- shapes, so a result stays comparable from run to run). The variables are
-- the problem's `vary` (default: every variable that may not be 0), and a
-- shape the problem refuses is left out.
local rng = require "kwb.base.rng"

local M = {}

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
  local base = shapes[1].shape
  local function from_base(changes)
    local s = {}
    for k, x in pairs(base) do s[k] = x end
    for k, x in pairs(changes) do s[k] = x end
    return s
  end
  local out = {}
  for _, v in ipairs(vary) do
    out[#out + 1] = from_base { [v] = base[v] - 1 }
    out[#out + 1] = from_base { [v] = base[v] + 1 }
  end
  local odd, drawn = {}, {}
  local keys = {}
  for i, sh in ipairs(shapes) do keys[i] = sh.key end
  local rand = rng.new(rng.seed_of("unannounced", p:key(), table.concat(keys, ";")))
  for _, v in ipairs(vary) do
    odd[v] = hi[v] % 2 == 1 and hi[v] + 2 or hi[v] + 1
    drawn[v] = rand(lo[v], hi[v])
  end
  out[#out + 1] = from_base(odd)
  out[#out + 1] = from_base(drawn)
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
