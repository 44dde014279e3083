-- kwb/inputs.lua: the buffers of one shape and the inputs of one run. For
-- every shape a harness keeps a bench: the candidate's buffers, the
-- reference's outputs and the copies inout buffers start from. Before each
-- call the inputs are drawn afresh (a seed per shape, round and buffer), the
-- reference computes the expected outputs from them, the inputs are
-- checksummed and the outputs poisoned. Fixed inputs (model weights) are one
-- buffer per name and size, shared by the shapes and filled once.
local rng = require "kwb.rng"

local M = {}

-- A buffer of the problem's argument a, or an error naming it, its size and the shape.
local function buffer(h, a, n, key, what)
  local buf, msg = h.backend.buffer(a.dtype, n)
  if not buf then
    error(string.format("%s: cannot allocate %s%s (%d x %s) at %s: %s", h.problem.name, what or "argument ", a.name, n,
                        a.dtype, key, tostring(msg)), 0)
  end
  return buf
end

-- bench(h, sh) -> the buffers of shape sh, made on first use and kept across
-- candidates (refilled for each). h: a harness (problem, backend, benches, fixed).
function M.bench(h, sh)
  local b = h.benches[sh.key]
  if b then return b end
  local p = h.problem
  b = { shape = sh.shape, key = sh.key, bufs = {}, refs = {}, init = {}, args = {}, refargs = {} }
  for i, a in ipairs(p.args) do
    if a.kind == "scalar" then
      local v = a.value(sh.shape)
      if a.dtype:match("^[iu]") then v = math.tointeger(v) or error(string.format("%s: argument %s is not an integer at %s", p.name, a.name, sh.key)) end
      b.args[i], b.refargs[i] = v, v
    else
      local n = math.tointeger(a.size(sh.shape))
      if not n or n < 1 then error(string.format("%s: argument %s has size %s at %s", p.name, a.name, tostring(a.size(sh.shape)), sh.key)) end
      local buf
      if a.fixed then   -- one buffer per name and size, shared by the shapes
        local fk = string.format("%s:%s:%d", a.name, a.dtype, n)
        buf = h.fixed[fk]
        if not buf then
          buf = buffer(h, a, n, sh.key)
          h.fixed[fk] = buf
        end
        b.fixed = b.fixed or {}
        b.fixed[a.name] = fk
      else
        buf = buffer(h, a, n, sh.key)
      end
      b.bufs[a.name], b.args[i], b.refargs[i] = buf, buf, buf
      if a.role ~= "in" then
        b.refs[a.name] = buffer(h, a, n, sh.key, "the reference's copy of ")
        b.refargs[i] = b.refs[a.name]
        if a.role == "inout" then b.init[a.name] = buffer(h, a, n, sh.key, "the initial copy of ") end
      end
    end
  end
  b.n = #p.args
  h.benches[sh.key] = b
  return b
end

local function fill(buf, init, seed, shape, bufs, stream)
  if type(init) == "function" then return init(buf, seed, shape, bufs) end
  local kind = init[1]
  if kind == "normal" and stream then buf:fill_normal_stream(seed, init[2] or 0, init[3] or 1)
  elseif kind == "normal" then buf:fill_normal(seed, init[2] or 0, init[3] or 1)
  elseif kind == "uniform" then buf:fill_uniform(seed, init[2] or 0, init[3] or 1)
  else buf:fill(init[2] or 0) end
end

-- Fixed inputs not filled yet by this harness: filled now, once.
local function fill_fixed(h, b)
  if not b.fixed then return end
  for _, a in ipairs(h.problem.buffers) do
    local fk = b.fixed[a.name]
    if fk and a.init ~= false and not h.fixed_done[fk] then
      fill(b.bufs[a.name], a.init, rng.seed_of(h:base_seed(), "fixed", a.name), b.shape, b.bufs)
      h.fixed_done[fk] = true
    end
  end
end

-- The reference's outputs for the inputs in b.refs (kept per round when the
-- problem draws its inputs once per run).
local function expected(h, b, round, draw_run)
  local p = h.problem
  local kept = draw_run and b.kept and b.kept[round]
  if kept then
    for name, buf in pairs(kept) do b.refs[name]:copy(buf) end
    return
  end
  local ref = h:reference()
  if ref.lua then
    local bufs = {}
    for _, a in ipairs(p.buffers) do bufs[a.name] = b.refs[a.name] or b.bufs[a.name] end
    ref.lua(bufs, b.shape)
  else
    local ok, err = h.backend.call(ref.fn, b, b.refargs)
    if not ok then error("the reference of " .. p.name .. " failed at " .. b.key .. ": " .. tostring(err), 0) end
  end
  if draw_run then
    b.kept = b.kept or {}
    b.kept[round] = {}
    for name, buf in pairs(b.refs) do
      local copy = h.backend.buffer(buf.dtype, buf.n)
      copy:copy(buf)
      b.kept[round][name] = copy
    end
  end
end

-- fresh(h, b, seed, tag): the inputs of one timed run (kwb.timed), drawn
-- from the candidate's seed, the shape and the run's tag whatever the
-- problem's draw (normal ones from a faster stream of the same
-- distribution); digested (a keyed hash, kwb_buffer_digest); outputs poisoned. The expected outputs are
-- not computed (expect() does that, after the call, for the runs checked).
function M.fresh(h, b, seed, tag)
  local p = h.problem
  fill_fixed(h, b)
  b.sums = {}
  -- one hash for the run, then each buffer's seed and the digest's key by
  -- a multiply (the fills mix their seed again): this runs before every call
  local base = rng.seed_of(seed, b.key, tag)
  for i, a in ipairs(p.buffers) do
    if a.role ~= "out" and not a.fixed and a.init ~= false then
      fill(b.bufs[a.name], a.init, (base + i * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFF, b.shape, b.bufs, true)
    end
  end
  b.sum_key = (base * 0x2545F4914F6CDD1D) & 0x7FFFFFFFFFFFFFFF   -- the keyed digest: fast, and the key stays here
  for _, a in ipairs(p.buffers) do
    if a.role == "inout" then b.init[a.name]:copy(b.bufs[a.name]) end
    if a.role == "in" then b.sums[a.name] = b.bufs[a.name]:digest(b.sum_key) end
    if a.role == "out" then b.bufs[a.name]:poison() end
  end
end

-- expect(h, b): the reference's outputs for the inputs fresh() drew (the
-- inputs as they were: a candidate that changed one is wrong for that).
function M.expect(h, b)
  for _, a in ipairs(h.problem.buffers) do
    if a.role == "out" then b.refs[a.name]:poison()
    elseif a.role == "inout" then b.refs[a.name]:copy(b.init[a.name]) end
  end
  expected(h, b, nil, false)
end

-- prepare(h, b, seed, round): fresh inputs for round `round` (from the
-- candidate's seed, or the run's where the problem draws once per run), the
-- reference's outputs for them, the inputs' checksums, poisoned outputs.
function M.prepare(h, b, seed, round)
  local p = h.problem
  local draw_run = p.draw == "run"
  if draw_run then seed = h:base_seed() end
  fill_fixed(h, b)
  for _, a in ipairs(p.buffers) do
    if a.role ~= "out" and not a.fixed and a.init ~= false then   -- init = false: a sibling's init fills it
      fill(b.bufs[a.name], a.init, rng.seed_of(seed, b.key, round, a.name), b.shape, b.bufs)
    end
    if a.role == "inout" then b.init[a.name]:copy(b.bufs[a.name]) end
  end
  for _, a in ipairs(p.buffers) do
    if a.role == "out" then b.refs[a.name]:poison()
    elseif a.role == "inout" then b.refs[a.name]:copy(b.init[a.name]) end
  end
  expected(h, b, round, draw_run)
  b.sums, b.sum_key = {}, nil
  for _, a in ipairs(p.buffers) do
    if a.role == "in" then b.sums[a.name] = assert(b.bufs[a.name]:checksum()) end
    if a.role == "out" then b.bufs[a.name]:poison()
    elseif a.role == "inout" then b.bufs[a.name]:copy(b.init[a.name]) end
  end
end

return M
