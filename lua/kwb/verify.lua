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

-- check(problem, backend, b, when [, skip_inout [, zones_only]]) -> nil, or
-- "wrong", reason. Records each output's error in b.errors. zones_only: the
-- redzones, the fixed inputs and that every output was written (a timed
-- run not verified against the reference).
function M.check(problem, backend, b, when, skip_inout, zones_only)
  -- a write just outside any buffer (host buffers lie between redzones)
  for _, a in ipairs(problem.buffers) do
    local buf = b.bufs[a.name]
    local first, last
    if backend.redzones then first, last = buf:redzone() end
    if first then
      return "wrong", string.format("the candidate wrote outside %s %s at %s (%s): byte offsets %d to %d of a "
                                    .. "buffer of %d bytes", a.role == "in" and "input" or "output", a.name, b.key,
                                    when, first, last, buf.bytes)
    end
  end
  for _, a in ipairs(problem.buffers) do
    local buf = b.bufs[a.name]
    if a.role == "in" and (a.fixed or not zones_only)
       and (b.sum_key and buf:digest(b.sum_key) or assert(buf:checksum())) ~= b.sums[a.name] then
      return "wrong", string.format("input %s changed by the candidate at %s (%s)", a.name, b.key, when)
    end
  end
  if zones_only then   -- every output written all the same (none left as poisoned)
    for _, a in ipairs(problem.buffers) do
      if a.role == "out" then
        local n, first = b.bufs[a.name]:poisoned()
        if n > 0 then
          return "wrong", describe({ poison = n, nan = 0, inf = 0, bad = n, first_bad = first }, a.name, b.key, when)
        end
      end
    end
    return nil
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

-- degenerate(problem, backend, b) -> nil, or why the shape's outputs cannot
-- tell a kernel that computes nothing from one that computes: an output of
-- zeros, or of the reference's mean (host buffers), passes the tolerance.
function M.degenerate(problem, backend, b)
  for _, a in ipairs(problem.buffers) do
    if a.role == "out" or a.role == "inout" then
      local ref = b.refs[a.name]
      local consts = { 0 }
      if backend.redzones and ref.n > 0 then   -- host buffers: the mean as well
        local sum = 0
        for i = 1, ref.n do sum = sum + ref[i] end
        consts[2] = sum / ref.n
      end
      local probe = backend.buffer(ref.dtype, ref.n)
      for _, v in ipairs(consts) do
        probe:fill(v)
        local tol = problem.tolerance
        local d = tol.rel_l2 and backend.compare(probe, ref, { atol = math.huge, rtol = 0 })
                  or backend.compare(probe, ref, tol)
        local pass = d.ok and (not tol.rel_l2 or d.rel_l2 <= tol.rel_l2)
        if pass then
          return string.format("at shape %s every element of output %s set to %.6g passes the tolerance: a kernel "
                               .. "that computes nothing would be judged right (choose shapes, inputs or a tolerance "
                               .. "under which the reference's output is not a constant)", b.key, a.name, v)
        end
      end
    end
  end
  return nil
end

return M
