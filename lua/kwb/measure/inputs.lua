-- kwb/measure/inputs.lua: the buffers of one shape and the inputs of one run. For
-- every shape a harness keeps a bench: the candidate's buffers, the
-- reference's outputs and the copies inout buffers start from. Before each
-- call the inputs are drawn afresh (a seed per shape, round and buffer), the
-- reference computes the expected outputs from them, the inputs are
-- digested and the outputs poisoned. Fixed inputs (model weights) are one
-- buffer per name and size, shared by the shapes and filled once.
local rng = require "kwb.base.rng"

local M = {}

-- A shape whose buffers cannot be made is raised as an object that prints
-- as its one sentence: the machine's limit or the problem's, not a fault in
-- kwb's code, so no traceback follows it (from a worker either).
local Failure = { __tostring = function(e) return e.message end }
local function fail(fmt, ...)
  error(setmetatable({ message = string.format(fmt, ...) }, Failure), 0)
end

-- A buffer of the problem's argument a, or an error naming it, its size and the shape.
local function buffer(h, a, n, key, what)
  local buf, msg = h.backend.buffer(a.dtype, n)
  if not buf then
    fail("%s: cannot allocate %s%s (%d x %s) at %s: %s", h.problem.name, what or "argument ", a.name, n, a.dtype, key,
         tostring(msg))
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
      if not n or n < 1 then fail("%s: argument %s has size %s at %s", p.name, a.name, tostring(a.size(sh.shape)), sh.key) end
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

-- release(h): every device buffer the harness holds freed (its benches
-- and their copies, the fixed inputs, the reference with its plans' scratch)
-- and what it kept for the run forgotten: the next bench is made and filled
-- afresh. A worker frees its share of the card so for compute-sanitizer's
-- runs (kwb.worker.task.sanitize).
function M.release(h)
  local function free(buf) if buf and buf.free then buf:free() end end
  for _, b in pairs(h.benches) do
    for _, c in ipairs(b.copies or { b }) do
      for name, buf in pairs(c.bufs) do if not (c.fixed and c.fixed[name]) then free(buf) end end
      for _, buf in pairs(c.refs) do free(buf) end
      for _, buf in pairs(c.init) do free(buf) end
    end
  end
  for _, buf in pairs(h.fixed) do free(buf) end
  h.benches, h.fixed, h.ref, h.kept_for, h.pools, h.fixed_done, h.fixed_sum = {}, {}, nil, nil, nil, {}, {}
  collectgarbage()
end

-- kept(h) -> what the harness keeps across candidates within a candidate's
-- reach, each { name =, key =, buf = }: every bench's buffers (and its batch
-- copies'), the reference's and the inout buffers' initial copies (on the
-- device, where the backend's buffers are), and the fixed inputs once each.
-- The expected outputs kept for later rounds and pool sets are not among
-- them: they are held where no candidate's code runs (kwb.measure.backends).
function M.kept(h)
  local list, keys = {}, {}
  for key in pairs(h.benches) do keys[#keys + 1] = key end
  table.sort(keys)   -- (the first damage named is the same on every run)
  for _, key in ipairs(keys) do
    local b = h.benches[key]
    for _, c in ipairs(b.copies or { b }) do
      for _, a in ipairs(h.problem.buffers) do
        if not (c.fixed and c.fixed[a.name]) then
          list[#list + 1] = { name = (a.role == "in" and "input " or "output ") .. a.name, key = key, buf = c.bufs[a.name] }
        end
        if c.refs[a.name] then
          list[#list + 1] = { name = "the reference's copy of " .. a.name, key = key, buf = c.refs[a.name] }
        end
        if c.init[a.name] then
          list[#list + 1] = { name = "the initial copy of " .. a.name, key = key, buf = c.init[a.name] }
        end
      end
    end
  end
  local fks = {}
  for fk in pairs(h.fixed) do fks[#fks + 1] = fk end
  table.sort(fks)
  for _, fk in ipairs(fks) do
    list[#list + 1] = { name = "input " .. fk:match("^[^:]+"), key = "every shape", buf = h.fixed[fk], fixed = fk }
  end
  return list
end

-- refill_fixed(h): the fixed inputs filled again, from their seeds, and
-- digested afresh before their next use (one a candidate changed): all of
-- them, as after a change found by a call's check (fixed_spoiled), since
-- one whose init is false is filled only by a sibling's init (a module's
-- weights: kwb.problems.torch), which refilling it alone would never run.
function M.refill_fixed(h)
  h.fixed_done, h.fixed_sum = {}, {}
end

local function fill(buf, init, seed, shape, bufs, stream)
  if type(init) == "function" then return init(buf, seed, shape, bufs) end
  local kind = init[1]
  if kind == "normal" and stream then buf:fill_normal_stream(seed, init[2] or 0, init[3] or 1)
  elseif kind == "normal" then buf:fill_normal(seed, init[2] or 0, init[3] or 1)
  elseif kind == "uniform" then buf:fill_uniform(seed, init[2] or 0, init[3] or 1)
  else buf:fill(init[2] or 0) end
end

-- The process's secret (rng.secret) mixed into every key the inputs'
-- digests take: the digest (kwb_buffer_digest) of a known key could be kept
-- by a candidate that rewrites its inputs, and a reference computed after
-- the call would then run on what it wrote.
local function keyed(x) return (x ~ rng.secret()) & 0x7FFFFFFFFFFFFFFF end

-- What a harness keeps for a run (the rounds' and pool sets' expected
-- outputs, the fixed inputs and their digests) is the run's: dropped when
-- the run's seed changes (a session's next run, a worker's next recipe run).
local function same_run(h)
  local s = h:base_seed()
  if h.kept_for ~= s then
    h.pools, h.fixed_done, h.fixed_sum = nil, {}, {}
    for _, b in pairs(h.benches) do b.kept = nil end
    h.kept_for = s
  end
end

-- Fixed inputs not filled yet by this harness: filled now, once, and
-- digested under a secret key (h.fixed_sum, b.fixed_key: every verified
-- run's check compares with it); again after a candidate was found to have
-- changed one.
local function fill_fixed(h, b)
  same_run(h)
  if not b.fixed then return end
  for _, other in pairs(h.benches) do   -- one a candidate changed (kwb.measure.verify): all filled again, from the same seeds
    if other.fixed_spoiled then h.fixed_done, h.fixed_sum, other.fixed_spoiled = {}, {}, nil end
  end
  for _, a in ipairs(h.problem.buffers) do
    local fk = b.fixed[a.name]
    if fk and a.init ~= false and not h.fixed_done[fk] then
      fill(b.bufs[a.name], a.init, rng.seed_of(h:base_seed(), "fixed", a.name), b.shape, b.bufs)
      h.fixed_done[fk] = true
    end
  end
  h.fixed_sum = h.fixed_sum or {}
  h.fixed_key = h.fixed_key or keyed(rng.seed_of("fixed inputs"))
  b.fixed_key = h.fixed_key
  for name, fk in pairs(b.fixed) do
    if not h.fixed_sum[fk] then h.fixed_sum[fk] = b.bufs[name]:digest(h.fixed_key) end
  end
end

-- The reference's outputs, kept: where no candidate can reach them
-- (backend.hold: the CUDA backend holds them on the host, the device copies
-- poisoned until a comparison), else copies.
local function keep_refs(h, b, keep)
  local saved = {}
  for name, buf in pairs(b.refs) do
    if h.backend.hold then saved[name] = h.backend.hold(buf, nil, keep)
    else
      local copy = h.backend.buffer(buf.dtype, buf.n)
      copy:copy(buf)
      saved[name] = copy
    end
  end
  return saved
end

local function restore_refs(h, b, saved)
  for name, s in pairs(saved) do
    if h.backend.hold then h.backend.hold(b.refs[name], s) else b.refs[name]:copy(s) end
  end
end

-- inout(h): has the problem an inout buffer?
function M.inout(h)
  if h.has_inout == nil then
    h.has_inout = false
    for _, a in ipairs(h.problem.buffers) do
      if a.role == "inout" then h.has_inout = true end
    end
  end
  return h.has_inout
end

-- Where the backend holds expected outputs off the device (backend.hold), a
-- run whose reference is computed for it alone (not a round's or a pool
-- set's, kept for other candidates) has it computed after the candidate's
-- call instead (kwb.measure.verify runs it once the inputs are found as drawn):
-- nothing is held or put back, and the outputs are poisoned once compared
-- (settle). Not where the problem has an inout buffer: its reference starts
-- from a copy (b.init) the candidate could reach during its call.
local function after_call(h)
  return h.backend.hold ~= nil and h.backend.release ~= nil and not M.inout(h)
end

-- The reference's outputs for the inputs in b.refs (kept per round when the
-- problem draws its inputs once per run, per set for `pool`). now: computed
-- after the candidate's call (after_call), left on the device for the
-- comparison.
local function expected(h, b, round, draw_run, pool, now)
  local p = h.problem
  local kept
  if pool then kept = h.pools and h.pools[b.key] and h.pools[b.key][pool]
  else kept = draw_run and b.kept and b.kept[round] end
  if kept then return restore_refs(h, b, kept) end
  if now then
    for _, buf in pairs(b.refs) do h.backend.release(buf) end
    b.refs_here = true
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
  if pool then
    h.pools = h.pools or {}
    h.pools[b.key] = h.pools[b.key] or {}
    h.pools[b.key][pool] = keep_refs(h, b, true)
  elseif draw_run then
    b.kept = b.kept or {}
    b.kept[round] = keep_refs(h, b, true)
  elseif h.backend.hold and not now then
    keep_refs(h, b)
  end
end

-- clear_refs(h, b): the reference's outputs poisoned, its inout buffers
-- from their initial values, before it runs.
local function clear_refs(h, b)
  for _, a in ipairs(h.problem.buffers) do
    if a.role == "out" then b.refs[a.name]:poison()
    elseif a.role == "inout" then b.refs[a.name]:copy(b.init[a.name]) end
  end
end

-- settle(h, b): after a run's comparison, the expected outputs computed
-- after the call (after_call) poisoned, so none stays on the device into
-- the next call.
function M.settle(h, b)
  if not b.refs_here then return end
  b.refs_here = nil
  for _, a in ipairs(h.problem.buffers) do
    if a.role == "out" then assert(b.refs[a.name]:poison()) end
  end
end

-- Sets of inputs the verified timed runs take theirs from where the problem
-- draws once per run or the backend pools its checks (a reference too slow
-- to run for every candidate): drawn like any timed run's, from the run's
-- seed, their expected outputs computed once; a candidate meets each at most
-- once (past the last, its verified runs draw their own and the reference
-- runs for them).
M.pool_sets = 8
-- At most this many bytes of a shape's expected outputs are kept for its
-- sets (held on the host by the CUDA backend): fewer sets where they are large.
M.pool_bytes = 2 << 30

-- sets(h, b [, need]) -> how many pool sets shape b keeps: M.pool_sets, or
-- `need` where fewer will do (the most verified runs one evaluation of a
-- candidate has at a shape: each set's reference runs once a run, seconds at
-- an NVFP4 layer's T = 4096), fewer still where their expected outputs would
-- pass M.pool_bytes (0: none).
function M.sets(h, b, need)
  local bytes = 0
  for _, a in ipairs(h.problem.buffers) do
    if a.role ~= "in" then bytes = bytes + b.refs[a.name].bytes end
  end
  return math.min(M.pool_sets, need or M.pool_sets, M.pool_bytes // math.max(bytes, 1))
end

-- fresh(h, b, seed, tag [, pool [, checked]]): the inputs of one timed run
-- (kwb.measure.timed), drawn from the candidate's seed, the shape and the run's tag
-- whatever the problem's draw (normal ones from a faster stream of the same
-- distribution), or those of pool set `pool` (M.pool_sets); outputs
-- poisoned; the inputs digested (a keyed hash, kwb_buffer_digest), for a run
-- to be checked against the reference (`checked`) to be compared after it.
-- The expected outputs are not computed (expect() does that, after the call,
-- for the runs checked).
function M.fresh(h, b, seed, tag, pool, checked)
  local p = h.problem
  fill_fixed(h, b)
  b.sums, b.expect_later = checked and {} or nil, nil
  -- one hash for the run, then each buffer's seed and the digest's key by
  -- a multiply (the fills mix their seed again): this runs before every call
  local base = pool and rng.seed_of(h:base_seed(), b.key, "verified timed run", pool) or rng.seed_of(seed, b.key, tag)
  for i, a in ipairs(p.buffers) do
    if a.role ~= "out" and not a.fixed and a.init ~= false then
      fill(b.bufs[a.name], a.init, (base + i * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFF, b.shape, b.bufs, true)
    end
  end
  b.sum_key = checked and keyed(base * 0x2545F4914F6CDD1D) or nil   -- the keyed digest: fast, and the key stays here
  for _, a in ipairs(p.buffers) do
    if a.role == "inout" then b.init[a.name]:copy(b.bufs[a.name]) end
    if a.role == "in" and checked then   -- (fixed inputs: their digest from when they were filled)
      b.sums[a.name] = a.fixed and h.fixed_sum[b.fixed[a.name]] or b.bufs[a.name]:digest(b.sum_key)
    elseif a.role == "in" and not a.fixed then
      -- a run not checked digests its inputs all the same, unread (on the
      -- host computed and dropped, on the device queued and never waited
      -- for): the judge's work before every call is alike, so neither the
      -- caches the candidate meets, nor its clock, nor the device tell a
      -- checked run from another
      b.bufs[a.name]:digest(base, false)
    end
    if a.role == "out" then b.bufs[a.name]:poison() end
  end
end

-- off_the_clock(h, what, fn, ...): the harness's own work, under its own
-- limit where the harness has one (kwb.measure), else simply run.
function M.off_the_clock(h, what, fn, ...)
  if h.off_the_clock then return h:off_the_clock(what, fn, ...) end
  return fn(...)
end

-- pooled(h, b, pool): are pool set `pool`'s expected outputs at b's shape kept?
function M.pooled(h, b, pool)
  return (h.pools and h.pools[b.key] and h.pools[b.key][pool]) ~= nil
end

-- expect(h, b [, pool]): the reference's outputs for the inputs fresh() drew
-- (the inputs as they were: a candidate that changed one is wrong for that);
-- for a pool set, computed once and kept.
function M.expect(h, b, pool, later)
  local function run()
    clear_refs(h, b)
    -- (a run on inputs of its own: its reference runs after its call, held
    -- nowhere where after_call allows)
    expected(h, b, nil, false, pool, not pool and after_call(h))
  end
  -- later: after the call, once kwb.measure.verify has found the inputs as drawn
  -- (not on inputs a candidate rewrote), under the harness's limit
  if later then b.expect_later = function() M.off_the_clock(h, "the reference at " .. b.key, run) end
  else run() end
end

-- prepare(h, b, seed, round [, per_run]): fresh inputs for round `round`
-- (from the candidate's seed, or the run's where the problem draws once per
-- run or `per_run` asks it: an unannounced shape's, kwb.measure), the
-- reference's outputs for them (computed once a run where the inputs are the
-- run's, and held), the inputs' digests, poisoned outputs.
function M.prepare(h, b, seed, round, per_run)
  local p = h.problem
  local draw_run = p.draw == "run" or per_run == true
  if draw_run then seed = h:base_seed() end
  fill_fixed(h, b)
  for _, a in ipairs(p.buffers) do
    if a.role ~= "out" and not a.fixed and a.init ~= false then   -- init = false: a sibling's init fills it
      fill(b.bufs[a.name], a.init, rng.seed_of(seed, b.key, round, a.name), b.shape, b.bufs)
    end
    if a.role == "inout" then b.init[a.name]:copy(b.bufs[a.name]) end
  end
  clear_refs(h, b)
  -- a round's own reference after the call where after_call allows (not the
  -- shape's first, whose outputs the degenerate-problem check reads first)
  -- (under the harness's limit, not the candidate's call's: off_the_clock)
  if not draw_run and b.sound and after_call(h) then
    b.expect_later = function() M.off_the_clock(h, "the reference at " .. b.key, expected, h, b, round, false, nil, true) end
  else
    b.expect_later = nil
    expected(h, b, round, draw_run)
  end
  -- the inputs' digests under a secret key (fixed ones: from when they were filled)
  b.sums, b.sum_key = {}, keyed(rng.seed_of(seed, b.key, round, "the inputs' digests"))
  for _, a in ipairs(p.buffers) do
    if a.role == "in" then b.sums[a.name] = a.fixed and h.fixed_sum[b.fixed[a.name]] or b.bufs[a.name]:digest(b.sum_key) end
    if a.role == "out" then b.bufs[a.name]:poison()
    elseif a.role == "inout" then b.bufs[a.name]:copy(b.init[a.name]) end
  end
end

return M
