-- kwb/verify.lua: was a call right? Its inputs unchanged (checksums) and
-- every output within the problem's tolerance of the reference's, every
-- element written; the first failure as one sentence naming the output, the
-- shape, the run and the first bad element.
local M = {}

local function count(n, word) return string.format("%d %s%s", n, word, n == 1 and "" or "s") end

local function describe(d, name, key, when)
  local what
  if d.poison > 0 then what = count(d.poison, "element") .. " never written"
  elseif d.nan > 0 or d.inf > 0 then what = string.format("%d NaN and %d Inf", d.nan, d.inf)
  elseif d.rel_l2_limit and d.bad == 0 then
    what = string.format("relative L2 error %.3g over the limit %.3g (max abs error %.3g)", d.rel_l2, d.rel_l2_limit, d.max_abs)
    return string.format("output %s at %s (%s): %s", name, key, when, what)
  else what = string.format("%s off (max abs error %.3g)", count(d.bad, "element"), d.max_abs) end
  return string.format("output %s at %s (%s): %s, first %s[%d]", name, key, when, what, name, d.first_bad)
end

-- check(problem, backend, b, when [, skip_inout]) -> nil, or "wrong", reason.
-- Records each output's error in b.errors.
function M.check(problem, backend, b, when, skip_inout)
  for _, a in ipairs(problem.buffers) do
    if a.role == "in" and assert(b.bufs[a.name]:checksum()) ~= b.sums[a.name] then
      return "wrong", string.format("input %s changed by the candidate at %s (%s)", a.name, b.key, when)
    end
  end
  for _, a in ipairs(problem.buffers) do
    if a.role == "out" or (a.role == "inout" and not skip_inout) then
      local tol = problem.tolerance
      local d
      if tol.rel_l2 then   -- the whole output's error, not each element's
        d = backend.compare(b.bufs[a.name], b.refs[a.name], { atol = math.huge, rtol = 0 })
        d.ok = d.ok and d.rel_l2 <= tol.rel_l2
        d.rel_l2_limit = tol.rel_l2
      else
        d = backend.compare(b.bufs[a.name], b.refs[a.name], tol)
      end
      if not d.ok then return "wrong", describe(d, a.name, b.key, when) end
      b.errors = b.errors or {}
      b.errors[a.name] = { max_abs = d.max_abs, rel_l2 = d.rel_l2 }
    end
  end
  return nil
end

return M
