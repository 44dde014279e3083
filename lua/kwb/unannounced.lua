-- kwb/unannounced.lua: the shapes every candidate is verified on (twice, as
-- the timed ones) but never timed, and which no prompt, strategy or report
-- lists: a kernel special-cased to the benchmark's shapes is `wrong` there,
-- naming the shape. A recipe's `verify_shapes` gives them (a list of shape
-- tables, or false for none); by default they are derived from the timed
-- shapes: from the first, each variable one less and one more; one shape
-- with every variable odd and past the largest timed value; one with every
-- variable drawn from the timed range (a draw fixed by the problem and the
-- shapes, so a result stays comparable from run to run). Where the first is
-- large (M.large) and two or more variables vary, each variable one off is
-- taken from that shape halved (M.halved: 4096^3 gives 511 x 512 x 512, ...),
-- and at full size every variable one less (4095^3) and the odd one (4097^3):
-- two calls at full size for a candidate instead of seven, and still a ragged
-- edge in each variable alone, and in all of them at full size. The variables
-- are the problem's `vary` (default: every variable that may not be 0), and a
-- shape the problem refuses is left out.
local rng = require "kwb.rng"

local M = {}

-- A shape past either of these is large: a call there is long (a 4096^3
-- SGEMM takes milliseconds) and, under compute-sanitizer's racecheck,
-- longer than a run may wait (kwb.sanitize).
M.max_flops = 1 << 30
M.max_bytes = 64 << 20

-- large(problem, shape) -> are its flops or bytes past the limits?
function M.large(p, s)
  local f, b = p:flops_of(s), p:bytes_of(s)
  return (f ~= nil and f > M.max_flops) or (b ~= nil and b > M.max_bytes)
end

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

-- halved(problem, shape) -> a copy of shape with its varied variables halved
-- (rounded up, never under their minimum) until it is not large, or as far
-- as they go.
function M.halved(p, shape)
  local vary, s = M.vary(p), {}
  for k, v in pairs(shape) do s[k] = v end
  while M.large(p, s) do
    local changed = false
    for _, v in ipairs(vary) do
      local half = (s[v] + 1) // 2
      if half < s[v] and half >= math.max(1, p.var_min[v]) then s[v], changed = half, true end
    end
    if not changed then break end
  end
  return s
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
  local function from(shape, changes)
    local s = {}
    for k, x in pairs(shape) do s[k] = x end
    for k, x in pairs(changes) do s[k] = x end
    return s
  end
  local function from_base(changes) return from(base, changes) end
  local out, one_off = {}, base
  if #vary > 1 and M.large(p, base) then one_off = M.halved(p, base) end
  for _, v in ipairs(vary) do
    out[#out + 1] = from(one_off, { [v] = one_off[v] - 1 })
    out[#out + 1] = from(one_off, { [v] = one_off[v] + 1 })
  end
  if one_off ~= base then
    local less = {}
    for _, v in ipairs(vary) do less[v] = base[v] - 1 end
    out[#out + 1] = from_base(less)
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
