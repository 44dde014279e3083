-- kwb/measure/verify.lua: was a call right? Its inputs unchanged (checksums) and
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

-- The buffers a call received, named: the problem's and the plan's scratch
-- (b.scratch, the CUDA backend's), and which wrote outside: nil, or the
-- entry and the first and last byte offsets. With outputs `outs` given and a
-- backend that looks at them in the same pass (the CUDA backend's one launch
-- after a timed run), also { [j] = { count, first } } for each output with
-- elements still poison.
local function outside(problem, backend, b, outs)
  local list = {}
  for _, a in ipairs(problem.buffers) do
    list[#list + 1] = { name = (a.role == "in" and "input " or "output ") .. a.name, buf = b.bufs[a.name] }
  end
  for _, sc in ipairs(b.scratch or {}) do list[#list + 1] = sc end
  if backend.guard_bands then   -- all in one look
    local bufs = {}
    for i, e in ipairs(list) do bufs[i] = e.buf end
    local hits, unwritten = backend.guard_bands(bufs, outs)
    for i, e in ipairs(list) do
      if hits[i] then return e, hits[i][1], hits[i][2] end
    end
    return nil, nil, nil, unwritten
  end
  for _, e in ipairs(list) do
    local first, last = e.buf:redzone()
    if first then return e, first, last end
  end
end

local function unwritten_output(name, n, first, key, when)
  return "wrong", describe({ poison = n, nan = 0, inf = 0, bad = n, first_bad = first }, name, key, when)
end

-- check(problem, backend, b, when [, skip_inout [, zones_only]]) -> nil, or
-- "wrong", reason. Records each output's error in b.errors. zones_only: the
-- redzones and that every output was written (a timed run not verified
-- against the reference, whose inputs the next run draws afresh; a fixed
-- input changed is found at the next verified run, as it stays changed).
function M.check(problem, backend, b, when, skip_inout, zones_only)
  local outs, names
  if zones_only then
    outs, names = {}, {}
    for _, a in ipairs(problem.buffers) do
      if a.role == "out" then outs[#outs + 1], names[#outs + 1] = b.bufs[a.name], a.name end
    end
  end
  -- a write just outside any buffer (host buffers lie between redzones,
  -- device buffers between guard bands)
  local unwritten
  if backend.redzones then
    local e, first, last
    e, first, last, unwritten = outside(problem, backend, b, outs)
    if e then
      return "wrong", string.format("the candidate wrote outside %s at %s (%s): byte offsets %d to %d of a "
                                    .. "buffer of %d bytes", e.name, b.key, when, first, last, e.buf.bytes)
    end
  end
  if zones_only then   -- every output written all the same (none left as poisoned)
    for j, buf in ipairs(outs) do
      if unwritten then
        local u = unwritten[j]
        if u then return unwritten_output(names[j], u[1], u[2], b.key, when) end
      else
        local n, first = buf:poisoned()
        if n > 0 then return unwritten_output(names[j], n, first, b.key, when) end
      end
    end
    return nil
  end
  for _, a in ipairs(problem.buffers) do
    local buf = b.bufs[a.name]
    local key = a.fixed and b.fixed_key or b.sum_key   -- (secret keys: kwb.measure.inputs)
    if a.role == "in" and (key and buf:digest(key) or assert(buf:checksum())) ~= b.sums[a.name] then
      -- a fixed input (weights, filled once) is filled again before its next
      -- use (kwb.measure.inputs), so the candidates after this one meet it as it was
      if a.fixed then b.fixed_spoiled = true end
      return "wrong", string.format("input %s changed by the candidate at %s (%s)", a.name, b.key, when)
    end
  end
  if b.expect_later then   -- (the round's reference, now that its inputs are found as drawn: kwb.measure.inputs)
    local f = b.expect_later
    b.expect_later = nil
    f()
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

-- sweep(h, when [, who]) -> nil, or "wrong", reason: every buffer the harness keeps
-- across candidates (kwb.measure.inputs.kept) looked at in one pass: each one's
-- redzones or guard bands, and each fixed input against its digest from
-- when it was filled. Whatever is found is put right (the zones restored, a
-- changed fixed input filled again before its next use), so the next
-- candidate meets clean benches; the first finding is the reason, naming
-- the buffer and the shape (and `who`, "the candidate" unless given). Run before a candidate's first call and after
-- its last (kwb.measure): the calls' own checks look only at the benches
-- they used, and stop at the first damage.
function M.sweep(h, when, who)
  local backend, list = h.backend, require("kwb.measure.inputs").kept(h)
  if #list == 0 then return nil end
  local hits = {}
  if backend.guard_bands then   -- all in one look
    local bufs = {}
    for i, e in ipairs(list) do bufs[i] = e.buf end
    hits = backend.guard_bands(bufs)
  elseif backend.redzones then
    for i, e in ipairs(list) do
      local first, last = e.buf:redzone()
      if first then hits[i] = { first, last } end
    end
  end
  local why
  for i, e in ipairs(list) do
    local hit = hits[i]
    if hit and not why then
      why = string.format("%s wrote outside %s at %s (%s): byte offsets %d to %d of a buffer of %d bytes",
                          who or "the candidate", e.name, e.key, when, hit[1], hit[2], e.buf.bytes)
    end
    local sum = e.fixed and h.fixed_sum and h.fixed_sum[e.fixed]
    if sum and e.buf:digest(h.fixed_key) ~= sum then
      require("kwb.measure.inputs").refill_fixed(h)
      why = why or string.format("%s changed by %s (%s)", e.name, who or "the candidate", when)
    end
  end
  if why then return "wrong", why end
  return nil
end

-- The constant nearest to passing an element-wise tolerance everywhere:
-- element r passes c where |c - r| <= atol + rtol |r|, an interval whose
-- ends rise with r (rtol < 1), so the intervals of the least element (rmin)
-- and the largest (rmax) bound them all: the middle of [rmax's low end,
-- rmin's high end] passes every element where any constant does. rmin and
-- rmax from compare's largest difference against +-max|r|; nil where rtol
-- >= 1 (0 passes then) or the reference has no finite element; and the
-- interval's ends.
local function middle(backend, probe, ref, tol)
  local huge = { atol = math.huge, rtol = 0 }
  local d = backend.compare(probe, ref, huge)   -- (probe: zeros)
  local m = d.max_abs
  if (tol.rtol or 0) >= 1 or d.ref_nonfinite >= d.n or m ~= m or m == math.huge then return nil end
  probe:fill(m)
  local rmin = m - backend.compare(probe, ref, huge).max_abs
  probe:fill(-m)
  local rmax = backend.compare(probe, ref, huge).max_abs - m
  local atol, rtol = tol.atol or 0, tol.rtol or 0
  local lo, hi = rmax - atol - rtol * math.abs(rmax), rmin + atol + rtol * math.abs(rmin)
  return (lo + hi) / 2, lo, hi
end

-- degenerate(problem, backend, b [, only]) -> nil, or why the shape's
-- outputs cannot tell a kernel that computes nothing from one that computes:
-- an output of zeros, of the reference's mean (the constant nearest in
-- rel_l2), or of the constant nearest to every element's interval (middle)
-- passes the tolerance; and the findings ({ name =, v = [, lo =, hi =] }
-- each, every output's first) for another draw to test again. only: the
-- findings of earlier draws, each tested again on this one (a middle: the
-- middle of its interval and this draw's, the constants that passed every
-- draw so far, where they meet).
function M.degenerate(problem, backend, b, only)
  local found = {}
  local tol = problem.tolerance
  for _, a in ipairs(problem.buffers) do
    if a.role == "out" or a.role == "inout" then
      local ref = b.refs[a.name]
      local probe = backend.buffer(ref.dtype, ref.n)
      local consts = {}
      if only then
        for _, f in ipairs(only) do
          if f.name == a.name and f.lo then
            probe:fill(0)
            local _, lo, hi = middle(backend, probe, ref, tol)
            if lo then
              lo, hi = math.max(lo, f.lo), math.min(hi, f.hi)
              consts[1] = { v = (lo + hi) / 2, lo = lo, hi = hi }
            end
          elseif f.name == a.name then consts[1] = { v = f.v } end
        end
      else
        probe:fill(0)
        consts = { { v = 0 }, { v = backend.compare(probe, ref, { atol = math.huge, rtol = 0 }).ref_mean } }
        if not tol.rel_l2 then
          probe:fill(0)
          local v, lo, hi = middle(backend, probe, ref, tol)
          if v then consts[3] = { v = v, lo = lo, hi = hi } end
        end
      end
      for _, c in ipairs(consts) do
        probe:fill(c.v)
        local d = tol.rel_l2 and backend.compare(probe, ref, { atol = math.huge, rtol = 0 })
                  or backend.compare(probe, ref, tol)
        if d.ok and (not tol.rel_l2 or d.rel_l2 <= tol.rel_l2) then
          found[#found + 1] = { name = a.name, v = c.v, lo = c.lo, hi = c.hi }
          break
        end
      end
    end
  end
  local f = found[1]
  if not f then return nil end
  return string.format("at shape %s every element of output %s set to %.6g passes the tolerance: a kernel that "
                       .. "computes nothing would be judged right (choose shapes, inputs or a tolerance under which "
                       .. "the reference's output is not a constant)", b.key, f.name, f.v), found
end

return M
