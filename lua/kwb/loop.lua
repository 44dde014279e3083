-- kwb/loop.lua: the research loop of a recipe.
--
--   propose -> rules over the source -> preprocess + rules -> build -> rules
--   over the module's symbols -> verify every shape (fresh inputs, poisoned
--   outputs, input checksums, a second run with other inputs into the same
--   buffers) -> time every shape (raced) -> check the timed outputs and the
--   physical floor -> score -> accept rule -> record -> strategy observes.
--
-- Every candidate ends in exactly one outcome of M.outcomes, and every outcome
-- is recorded. A session holds what one recipe's runs share (the start
-- kernel's measurement, the reference, buffers, the store); a run is one pass
-- of the loop under a budget.
local core = require "kwb.core"
local ceilings = require "kwb.ceilings"
local progress = require "kwb.progress"
local worker = require "kwb.worker"
local host = require "kwb.host"

local M = {}

M.outcomes = { "forbidden", "compile-error", "wrong", "impossible", "crashed", "timeout", "slower", "accepted" }

local Session = {}
Session.__index = Session
M.Session = Session

-- ---- small helpers ------------------------------------------------------

-- A seed as a pure function of its parts (48 bits of their SHA-256).
local function seed_of(...)
  local parts = table.pack(...)
  for i = 1, parts.n do parts[i] = tostring(parts[i]) end
  return tonumber(core.sha256(table.concat(parts, ":", 1, parts.n)):sub(1, 12), 16)
end
M.seed_of = seed_of

local function geomean(xs)
  local s, n = 0, 0
  for _, x in ipairs(xs) do s, n = s + math.log(x), n + 1 end
  return n > 0 and math.exp(s / n) or 0
end

local function params_text(p)
  if not p then return "" end
  local keys = {}
  for k in pairs(p) do keys[#keys + 1] = k end
  table.sort(keys)
  local out = {}
  for i, k in ipairs(keys) do out[i] = k .. "=" .. tostring(p[k]) end
  return table.concat(out, " ")
end
M.params_text = params_text

-- ---- sessions -----------------------------------------------------------

-- session(recipe [, { store = }]) -> the loop's state for one recipe.
function M.session(recipe, opts)
  opts = opts or {}
  local ok, backend = pcall(require, "kwb.backends." .. recipe.backend)
  if not ok then
    error(string.format("recipe %s: the loop has no %s backend in this build", recipe.name, recipe.backend), 2)
  end
  local s = setmetatable({ recipe = recipe, problem = recipe.problem, backend = backend, benches = {}, best_time = {},
                           shape_best = {} }, Session)
  s.store = opts.store or require("kwb.store").open()
  local shape_keys = {}
  for i, sh in ipairs(recipe.shapes) do shape_keys[i] = sh.key end
  -- The evaluation context: what besides the candidate decides a result.
  s.ctx = s.store:context { problem = recipe.problem:key(), shapes = shape_keys, flags = recipe.flags,
                            device = backend.device(),
                            toolchain = recipe.cc or os.getenv("CC") or "cc" }
  s.template_source = recipe.template and assert(host.read_file(recipe.template))
  s.seq = #s.store:results(s.ctx)
  return s
end

-- candidate(proposal [, origin]) -> a candidate table with its id.
-- proposal: { source = | file =, defines =, params =, origin =, parent =,
-- rationale =, name = } or a parameter table for the recipe's template.
function Session:candidate(prop, origin)
  if type(prop) ~= "table" then error("a proposal must be a table (parameters or a candidate)", 2) end
  local c
  if prop.source or prop.file then
    local src = prop.source
    if not src then
      local file, err = prop.file, nil
      if type(file) ~= "string" then error("a candidate's 'file' must be a path", 2) end
      -- paths in proposals, as in recipes, are relative to the recipe's file
      if file:sub(1, 1) ~= "/" and self.recipe.dir and not prop.resolved then file = self.recipe.dir .. "/" .. file end
      src, err = host.read_file(file)
      if not src then error("cannot read candidate " .. prop.file .. ": " .. tostring(err), 2) end
    end
    c = { source = src, name = prop.name or (prop.file and prop.file:match("[^/]+$")) or "candidate.c",
          defines = prop.defines or {}, params = prop.params or prop.defines, origin = prop.origin or origin,
          parent = prop.parent, rationale = prop.rationale }
  else
    if not self.template_source then
      error("a parameter proposal needs the recipe's 'template' (this recipe has none)", 2)
    end
    local params = {}
    for k, v in pairs(prop) do params[k] = v end
    c = { source = self.template_source, name = self.recipe.template:match("[^/]+$"), defines = params,
          params = params, origin = origin }
  end
  c.define_list = self.backend.define_list(c.defines)
  c.id = require("kwb.store").candidate_id(self.problem:key(), c.source, c.defines, self.recipe.flags)
  c.short = c.id:sub(1, 8)
  return c
end

function Session:known(cand)
  return self.store:known(self.ctx, cand.id)
end

function Session:reference()
  if self.ref then return self.ref end
  local r = self.problem.reference
  if r.lua then self.ref = { lua = r.lua }
  else self.ref = { fn = self.backend.reference(self.problem, self.recipe.dir, self.recipe.arch) } end
  return self.ref
end

-- The buffers of one shape, kept across candidates (refilled for each).
function Session:bench(sh)
  local b = self.benches[sh.key]
  if b then return b end
  local p = self.problem
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
        self.fixed = self.fixed or {}
        buf = self.fixed[fk]
        if not buf then
          buf = self.backend.buffer(a.dtype, n)
          self.fixed[fk] = buf
        end
        b.fixed = b.fixed or {}
        b.fixed[a.name] = fk
      else
        buf = self.backend.buffer(a.dtype, n)
      end
      b.bufs[a.name], b.args[i], b.refargs[i] = buf, buf, buf
      if a.role ~= "in" then
        b.refs[a.name] = self.backend.buffer(a.dtype, n)
        b.refargs[i] = b.refs[a.name]
        if a.role == "inout" then b.init[a.name] = self.backend.buffer(a.dtype, n) end
      end
    end
  end
  b.n = #p.args
  self.benches[sh.key] = b
  return b
end

local function fill(buf, init, seed, shape, bufs)
  if type(init) == "function" then return init(buf, seed, shape, bufs) end
  local kind = init[1]
  if kind == "normal" then buf:fill_normal(seed, init[2] or 0, init[3] or 1)
  elseif kind == "uniform" then buf:fill_uniform(seed, init[2] or 0, init[3] or 1)
  else buf:fill(init[2] or 0) end
end

local function count(n, word) return string.format("%d %s%s", n, word, n == 1 and "" or "s") end

local function describe_diff(d, name, key, when)
  local what
  if d.poison > 0 then what = count(d.poison, "element") .. " never written"
  elseif d.nan > 0 or d.inf > 0 then what = string.format("%d NaN and %d Inf", d.nan, d.inf)
  elseif d.rel_l2_limit and d.bad == 0 then
    what = string.format("relative L2 error %.3g over the limit %.3g (max abs error %.3g)", d.rel_l2, d.rel_l2_limit, d.max_abs)
    return string.format("output %s at %s (%s): %s", name, key, when, what)
  else what = string.format("%s off (max abs error %.3g)", count(d.bad, "element"), d.max_abs) end
  return string.format("output %s at %s (%s): %s, first %s[%d]", name, key, when, what, name, d.first_bad)
end

-- Fresh inputs for round `round`, the reference's outputs for them, then the
-- candidate into poisoned outputs. Returns nil or outcome, reason.
-- The seed the inputs of a run derive from where they do not come from the
-- candidate's: fixed inputs, and every input of a problem with draw = "run".
function Session:run_base_seed()
  return self.run_seed or self.recipe.seed or 0
end

-- Fixed inputs not filled yet in this session: filled now, once.
function Session:fill_fixed(b)
  if not b.fixed then return end
  self.fixed_done = self.fixed_done or {}
  for _, a in ipairs(self.problem.buffers) do
    local fk = b.fixed[a.name]
    if fk and a.init ~= false and not self.fixed_done[fk] then
      fill(b.bufs[a.name], a.init, seed_of(self:run_base_seed(), "fixed", a.name), b.shape, b.bufs)
      self.fixed_done[fk] = true
    end
  end
end

function Session:round(fn, b, seed, round, timeout)
  local p = self.problem
  local draw_run = p.draw == "run"
  if draw_run then seed = self:run_base_seed() end
  self:fill_fixed(b)
  for _, a in ipairs(p.buffers) do
    if a.role ~= "out" and not a.fixed and a.init ~= false then   -- init = false: a sibling's init fills it
      fill(b.bufs[a.name], a.init, seed_of(seed, b.key, round, a.name), b.shape, b.bufs)
    end
    if a.role == "inout" then b.init[a.name]:copy(b.bufs[a.name]) end
  end
  local ref = self:reference()
  for _, a in ipairs(p.buffers) do
    if a.role == "out" then b.refs[a.name]:poison()
    elseif a.role == "inout" then b.refs[a.name]:copy(b.init[a.name]) end
  end
  -- inputs drawn per run: the reference's outputs of this round are known
  local kept = draw_run and b.kept and b.kept[round]
  if kept then
    for name, buf in pairs(kept) do b.refs[name]:copy(buf) end
  elseif ref.lua then
    local bufs = {}
    for _, a in ipairs(p.buffers) do bufs[a.name] = b.refs[a.name] or b.bufs[a.name] end
    ref.lua(bufs, b.shape)
  else
    local ok, err = self.backend.call(ref.fn, b, b.refargs)
    if not ok then error("the reference of " .. p.name .. " failed at " .. b.key .. ": " .. tostring(err), 0) end
  end
  if draw_run and not kept then
    b.kept = b.kept or {}
    b.kept[round] = {}
    for name, buf in pairs(b.refs) do
      local copy = self.backend.buffer(buf.dtype, buf.n)
      copy:copy(buf)
      b.kept[round][name] = copy
    end
  end
  b.sums = {}
  for _, a in ipairs(p.buffers) do
    if a.role == "in" then b.sums[a.name] = assert(b.bufs[a.name]:checksum()) end
    if a.role == "out" then b.bufs[a.name]:poison()
    elseif a.role == "inout" then b.bufs[a.name]:copy(b.init[a.name]) end
  end
  if b.on_call then b.on_call() end   -- a worker arms the candidate's timeout here
  local clock = self.backend.clock
  local t0 = clock()
  local ok, err = self.backend.call(fn, b, b.args)
  local dt = clock() - t0
  if not ok then return "crashed", string.format("the call failed at %s: %s", b.key, tostring(err)) end
  if timeout and dt > timeout then
    return "timeout", string.format("one call took %.2f s at %s (the timeout is %g s)", dt, b.key, timeout)
  end
  return self:check(b, round == 1 and "the first run" or "the second run, other inputs in the same buffers")
end

-- Inputs unchanged and outputs right? nil, or "wrong", reason.
function Session:check(b, when, skip_inout)
  for _, a in ipairs(self.problem.buffers) do
    if a.role == "in" and assert(b.bufs[a.name]:checksum()) ~= b.sums[a.name] then
      return "wrong", string.format("input %s changed by the candidate at %s (%s)", a.name, b.key, when)
    end
  end
  for _, a in ipairs(self.problem.buffers) do
    if a.role == "out" or (a.role == "inout" and not skip_inout) then
      local tol = self.problem.tolerance
      local d
      if tol.rel_l2 then   -- the whole output's error, not each element's
        d = self.backend.compare(b.bufs[a.name], b.refs[a.name], { atol = math.huge, rtol = 0 })
        d.ok = d.ok and d.rel_l2 <= tol.rel_l2
        d.rel_l2_limit = tol.rel_l2
      else
        d = self.backend.compare(b.bufs[a.name], b.refs[a.name], tol)
      end
      if not d.ok then return "wrong", describe_diff(d, a.name, b.key, when) end
      b.errors = b.errors or {}
      b.errors[a.name] = { max_abs = d.max_abs, rel_l2 = d.rel_l2 }
    end
  end
  return nil
end

function Session:ceilings()
  if not self._ceilings then
    local lock <close> = self.pool and self.pool:device_lock() or nil   -- no worker times meanwhile
    self._ceilings = self.backend.ceilings(self.recipe.ceilings)
  end
  return self._ceilings
end

-- Build a candidate through the backend (its rules, compiler and symbol
-- views). Returns the callable kernel, or nil with the result filled in.
function Session:build(cand, res)
  return self.backend.build(cand, self.recipe, self.problem:prototype(), res)
end

-- Time one shape: raced against the best time known there unless full. The
-- "out" buffers go to the backend, which may poison them before every timed
-- run (the CUDA backend does), so an early-returning kernel shows as wrong.
function Session:time_shape(fn, b, full)
  local t = self.recipe.timing
  local outs = {}
  for _, a in ipairs(self.problem.buffers) do
    if a.role == "out" then outs[#outs + 1] = b.bufs[a.name] end
  end
  local race = self.recipe.race
  local best = self.best_time[b.key]
  if race and not full and best then
    local few = { warmup = t.warmup, warmup_min = t.warmup_min, min_samples = t.min_samples,
                  max_samples = t.min_samples, cap = t.cap, min_sample = t.min_sample }
    local st, err = self.backend.time(fn, b, few, outs)
    if not st then return nil, err end
    if st.min > best * (1 + race) then
      st.partial = true
      return st
    end
  end
  return self.backend.time(fn, b, t, outs)
end

-- The timed phase of one shape may take its warm-up, its cap and a few calls
-- of the slowest the verification saw, plus a second.
local function timing_limit(t, call_s)
  local calls = (t.warmup_min or 3) + (t.min_samples or 5) + 2
  return (t.warmup or 0.05) + (t.cap or 1) + calls * math.max(call_s or 0, 1e-3) * 2 + 1
end

-- How long a build (rules, preprocessor, compiler) may take in a worker.
M.build_limit = 120
-- How long the harness's own work between two candidate calls may take.
M.harness_limit = 600

-- measure(cand, res [, { start = true }]): build, verify every shape, time
-- every shape; fills res.outcome for a candidate that fails there, and
-- res.shapes with the raw timings. Runs in a worker (kwb.evaluate.measure)
-- or, for a recipe no file returns, in this process.
function Session:measure(cand, res, opts)
  opts = opts or {}
  local recipe = self.recipe
  local timeout = self.timeout or recipe.budget.timeout
  local timing = self.timing or recipe.timing
  worker.deadline(M.build_limit, "the build")
  local fn = self:build(cand, res)
  if not fn then return res end
  -- the candidate runs on the device only while no other worker does: the
  -- next candidates build meanwhile, and no run disturbs another's timing
  worker.deadline(nil, "waiting for the device")
  local locked = worker.serving() and core.worker_lock(true)
  local _ <close> = setmetatable({}, { __close = function() if locked then core.worker_lock(false) end end })
  -- verify every shape, twice, on fresh inputs
  local tv = core.now()
  local seed = res.seed
  local call_s = {}
  for _, sh in ipairs(recipe.shapes) do
    local b = self:bench(sh)
    for round = 1, 2 do
      local what = string.format("%s at %s", round == 1 and "the first run" or "the second run", sh.key)
      worker.deadline(M.harness_limit, "the harness's inputs for " .. what)
      b.on_call = function() worker.deadline(timeout, what) end
      local t0 = core.now()
      local out, why = self:round(fn, b, seed, round, timeout)
      call_s[sh.key] = math.max(call_s[sh.key] or 0, core.now() - t0)
      b.on_call = nil
      if out then res.outcome, res.reason = out, why; break end
    end
    if res.outcome then break end
  end
  res.seconds.verify = core.now() - tv
  if res.outcome then return res end
  -- time every shape; the timed runs' outputs are checked too
  local tt = core.now()
  for _, sh in ipairs(recipe.shapes) do
    local b = self:bench(sh)
    worker.deadline(timing_limit(timing, call_s[sh.key]), "timing at " .. sh.key)
    local st, terr = self:time_shape(fn, b, opts.start)
    if not st then res.outcome, res.reason = "crashed", string.format("timing failed at %s: %s", sh.key, tostring(terr)); break end
    worker.deadline(M.harness_limit, "checking the timed outputs at " .. sh.key)
    local out, why = self:check(b, "after the timed runs", true)
    if out then res.outcome, res.reason = out, why; break end
    res.shapes[sh.key] = { median = st.median, min = st.min, p10 = st.p10, p90 = st.p90, spread = st.spread, n = st.n,
                           capped = st.capped, partial = st.partial or false }
    for _, e in pairs(b.errors or {}) do   -- the error of the timed runs' output (one output: its own)
      res.shapes[sh.key].max_abs, res.shapes[sh.key].rel_l2 = e.max_abs, e.rel_l2
    end
  end
  res.seconds.time = core.now() - tt
  return res
end

-- judge(res [, { start = true }]): the physical floor of every timed shape,
-- speedups, the score and the accept rule, for a measured result.
function Session:judge(res, opts)
  opts = opts or {}
  local recipe, p = self.recipe, self.problem
  if res.outcome then return res end
  local c = self:ceilings()
  for _, sh in ipairs(recipe.shapes) do
    local r = res.shapes[sh.key]
    local bytes, flops = p:bytes_of(sh.shape), p:flops_of(sh.shape)
    local floor = ceilings.floor(c, bytes, flops)
    r.floor, r.floor_frac = floor, floor > 0 and floor / r.median or nil
    r.gbs = bytes and bytes / r.median / 1e9 or nil
    r.gflops = flops and flops / r.median / 1e9 or nil
    if self.start then r.speedup = self.start.shapes[sh.key].median / r.median else r.speedup = 1 end
    if r.median < floor then
      res.outcome = "impossible"
      res.reason = string.format("median %s at %s is under the physical floor %s (%s)", require("kwb.report").time(r.median),
                                 sh.key, require("kwb.report").time(floor),
                                 string.format("%.3g GB/s, %.3g GFLOP/s at most", c.bandwidth / 1e9, c.flops / 1e9))
      return res
    end
  end
  local sp = {}
  for i, sh in ipairs(recipe.shapes) do sp[i] = res.shapes[sh.key].speedup end
  local view = self:view(res)
  res.score = recipe.score and recipe.score(view) or geomean(sp)
  if type(res.score) ~= "number" or res.score ~= res.score or math.abs(res.score) == math.huge then
    error(string.format("recipe %s: the score of %s is %s, not a finite number", recipe.name, res.short, tostring(res.score)), 0)
  end
  view.score = res.score
  if opts.start then
    res.outcome = "start"
  else
    local best = self.best and self:view(self.best) or nil
    local ok
    if recipe.accept then ok = recipe.accept(view, best)
    else ok = res.score > (best and best.score or 1) * 1.01 end
    res.outcome = ok and "accepted" or "slower"
  end
  return res
end

-- The pool this session's candidates run in, started on first use: a recipe
-- that a file returns is evaluated in workers (the file is what they load);
-- one built in a script or the REPL, in this process.
function Session:workers()
  if self.pool ~= nil then return self.pool or nil end
  if not self.recipe.returned_by then self.pool = false; return nil end
  local n, devices = self.n_workers, nil
  if self.recipe.backend == "cuda" then   -- one worker per GPU unless --workers says more
    devices = require("kwb.cuda").device_count()
    if not devices or devices < 1 then error("the cuda backend needs a GPU: the driver sees none", 0) end
    n = n or devices
  end
  self.pool = require("kwb.workers").pool { backend = self.recipe.backend, n = n or 1, devices = devices }
  -- every worker loads the recipe and builds the reference now, side by side
  local file = require("kwb.evaluate").absolute(self.recipe.returned_by)
  for _ = 1, self.pool.n do
    self.pool:submit("kwb.evaluate.prepare", { file }, { deadline = M.build_limit, what = "loading the recipe" })
  end
  return self.pool
end

function Session:close_workers()
  if self.pool then self.pool:close() end
  self.pool = nil
end

-- begin(cand [, { start = true }]) -> pending: the candidate handed to a
-- worker (or measured here); finish(pending) -> the judged result.
function Session:begin(cand, opts)
  opts = opts or {}
  local recipe = self.recipe
  self.seq = self.seq + 1
  local res = { id = cand.id, short = cand.short, origin = cand.origin, params = cand.params,
                parent = cand.parent, rationale = cand.rationale, name = cand.name, seq = self.seq, seconds = {}, shapes = {} }
  res.seed = seed_of(self.run_seed or recipe.seed or 0, cand.id, self.seq)
  local pending = { res = res, opts = opts, t0 = core.now() }
  local pool = self:workers()
  if not pool then
    self:measure(cand, res, opts)
    return pending
  end
  local best_time = {}
  for k, v in pairs(self.best_time) do best_time[k] = v end
  pending.task = pool:submit("kwb.evaluate.measure", { {
    recipe = require("kwb.evaluate").absolute(recipe.returned_by),
    cand = { source = cand.source, name = cand.name, defines = cand.defines, define_list = cand.define_list,
             params = cand.params, id = cand.id, short = cand.short },
    seed = tostring(res.seed), run_seed = tostring(self:run_base_seed()), best_time = best_time, start = opts.start or false,
    timing = recipe.timing, race = recipe.race, timeout = recipe.budget.timeout,
  } }, { deadline = M.build_limit, what = "the worker's start" })
  return pending
end

function Session:finish(pending)
  local res = pending.res
  if pending.task then require("kwb.evaluate").merge(res, self.pool:wait(pending.task)) end
  self:judge(res, pending.opts)
  res.seconds.total = core.now() - pending.t0
  return res
end

-- evaluate(cand [, { start = true }]) -> result (not yet recorded).
function Session:evaluate(cand, opts)
  return self:finish(self:begin(cand, opts))
end

-- The candidate as the score and accept functions see it: c.score,
-- c.shapes["n=64"].speedup (and .median, .partial, ...), c.shape_list
-- (recipe order), c.params, c.id.
function Session:view(res)
  local list = {}
  for i, sh in ipairs(self.recipe.shapes) do list[i] = res.shapes[sh.key] end
  return { id = res.id, short = res.short, score = res.score, shapes = res.shapes, shape_list = list,
           params = res.params, outcome = res.outcome, origin = res.origin }
end

-- Remember the per-shape best times of a verified, possible result (racing
-- reads them), and which result holds each: the shape's winner, from fully
-- timed shapes only (a raced shape's few samples stand for no median).
function Session:note_times(res)
  if res.outcome ~= "accepted" and res.outcome ~= "slower" and res.outcome ~= "start" then return end
  for key, r in pairs(res.shapes) do
    if r.median and (not self.best_time[key] or r.median < self.best_time[key]) then self.best_time[key] = r.median end
    local w = self.shape_best[key]
    if r.median and not r.partial and (not w or r.median < w.median) then
      self.shape_best[key] = { id = res.id, short = res.short, median = r.median, name = res.name,
                               params = res.params, origin = res.origin, start = res.outcome == "start" }
    end
  end
end

-- The start kernel: known from the cache, or evaluated now. Raises when it
-- fails: every score is relative to it.
function Session:ensure_start(report)
  if self.start then return self.start end
  local cand = self:candidate(self.recipe.start, "start")
  local res = self:known(cand)
  local fresh = false
  if not res then
    res = self:evaluate(cand, { start = true })
    self.store:record(self.ctx, cand, res, self.run_record)
    fresh = true
  end
  if res.outcome ~= "start" then
    error(string.format("the start kernel %s fails: %s: %s", cand.name, res.outcome, res.reason or "?"), 0)
  end
  self.start = res
  self.best = res
  -- what earlier runs found
  for _, r in ipairs(self.store:results(self.ctx)) do
    self:note_times(r)
    if r.outcome == "accepted" and r.score and r.score > self.best.score then self.best = r end
  end
  if report then report:start_kernel(self, res, fresh) end
  return res
end

-- settle(cand, pending) -> result: finish, judge and record a begun candidate.
function Session:settle(cand, pending)
  local res = self:finish(pending)
  self.store:record(self.ctx, cand, res, self.run_record)
  self:note_times(res)
  if res.outcome == "accepted" then self.best = res end
  return res
end

-- consider(cand) -> result, fresh: the stored result when the cache knows the
-- candidate, else evaluate and record it.
function Session:consider(cand)
  local known = self:known(cand)
  if known then return known, false end
  return self:settle(cand, self:begin(cand)), true
end

-- ---- runs ---------------------------------------------------------------

local Run = {}
Run.__index = Run
M.Run = Run

-- A private random number generator (xorshift64*), so strategies do not
-- disturb math.random and a seed reproduces a run's proposals.
local function rng(seed)
  local x = seed ~= 0 and seed or 0x9E3779B97F4A7C15
  return function(m, n)
    x = x ~ (x >> 12); x = x ~ (x << 25); x = x ~ (x >> 27)
    local r = (x * 0x2545F4914F6CDD1D) >> 11   -- 53 bits
    local f = r / 9007199254740992.0
    if not m then return f end
    if not n then m, n = 1, m end
    return m + math.floor(f * (n - m + 1))
  end
end
M.rng = rng

-- The candidate id of a parameter table or proposal (strategies name parents with it).
function Run:id(params_or_cand)
  return self.session:candidate(params_or_cand).id
end

function Run:known(params_or_cand)
  local ok, cand = pcall(self.session.candidate, self.session, params_or_cand)
  if not ok then return false end
  return self.session:known(cand) ~= nil
end

-- Does params satisfy the space's restriction?
function Run:valid(params)
  local sp = self.space
  if not sp then return true end
  return not sp.restrict or sp.restrict(params) and true or false
end

-- The stored results of this recipe's context, oldest first.
function Run:history() return self.session.store:results(self.session.ctx) end

-- A strategy spec (a builtin name, a .lua path, a table with propose, or a
-- recipe's checked strategy) -> a fresh instance and its name.
local function load_strategy(spec)
  local builtin = require("kwb.recipe").builtin_strategies
  if spec == nil then   -- no space and no strategy: the run measures the start kernel
    spec = { name = "none", table = { propose = function() return nil end } }
  end
  if type(spec) == "string" then
    local name = spec
    for _, n in ipairs(builtin) do
      if name == n then spec = { name = n, module = "kwb.strategies." .. n } end
    end
    if type(spec) == "string" then
      if name:match("%.lua$") then spec = { name = name:match("([^/]+)%.lua$"), file = name }
      else error(string.format("unknown strategy '%s' (known: %s, or a .lua file)", name, table.concat(builtin, ", ")), 0) end
    end
  elseif type(spec) == "table" and spec.propose then
    spec = { name = spec.name or "inline", table = spec }
  end
  local mod
  if spec.table then mod = spec.table
  elseif spec.module then mod = require(spec.module)
  else
    local chunk, err = loadfile(spec.file)
    if not chunk then error("strategy " .. spec.file .. ": " .. err, 0) end
    mod = chunk()
    if type(mod) ~= "table" or type(mod.propose) ~= "function" then
      error("strategy " .. spec.file .. " must return a table with propose(self, run)", 0)
    end
  end
  local inst = setmetatable({}, { __index = mod })
  return inst, spec.name or mod.name or "inline"
end

-- run(recipe, opts) -> summary. opts: candidates, minutes, timeout,
-- strategy, seed, json, mode ("tty" | "plain" | "json" | "quiet"), store.
function M.run(recipe, opts)
  opts = opts or {}
  local s = recipe:session(opts)
  if opts.workers then
    s:close_workers()
    s.n_workers = opts.workers
  end
  local seed = opts.seed or recipe.seed or os.time()
  s.run_seed = seed
  local budget = {
    candidates = opts.candidates or recipe.budget.candidates,
    minutes = opts.minutes or recipe.budget.minutes,
    timeout = recipe.budget.timeout,
  }
  local report = progress.new(opts.mode or (opts.json and "json") or progress.default_mode())
  local strategy, sname = load_strategy(opts.strategy or recipe.strategy)
  local run = setmetatable({ session = s, recipe = recipe, space = recipe.space, seed = seed,
                             random = rng(seed), budget = budget, strategy_name = sname,
                             funnel = {}, results = {}, evaluated = 0, partial = 0, timing_s = 0, skipped = 0, started = core.now() }, Run)
  for _, o in ipairs(M.outcomes) do run.funnel[o] = 0 end
  run.record = s.store:begin_run {
    recipe = recipe.file or recipe.name, source = not recipe.file and recipe.name or nil,
    settings = { strategy = sname, seed = seed, budget = budget, device = s.ctx.device, shapes = s.ctx.shapes },
  }
  s.run_record = run.record
  report:begin(run)
  s:ensure_start(report)
  run.best = s.best
  if strategy.init then strategy:init(run) end
  local misses = 0
  local deadline = run.started + budget.minutes * 60
  -- Candidates in flight, oldest first: with a pool of n workers, up to n are
  -- evaluated at once, and results are recorded and observed in the order
  -- they were proposed, so a proposal never depends on which worker was faster.
  run.workers = s:workers() and s.pool.n or 0
  local window = math.max(run.workers, 1)
  local flight, flying = {}, {}
  local stop = false
  local function land()
    local item = table.remove(flight, 1)
    flying[item.cand.id] = nil
    local res = s:settle(item.cand, item.pending)
    run.evaluated = run.evaluated + 1
    run.results[#run.results + 1] = res
    for _, r in pairs(res.shapes) do
      if r.partial then run.partial = run.partial + 1 end
    end
    run.timing_s = run.timing_s + (res.seconds.time or 0)
    run.funnel[res.outcome] = run.funnel[res.outcome] + 1
    misses = 0
    report:candidate(run, res)
    run.best = s.best
    if strategy.observe then strategy:observe(run, res, true) end
  end
  while true do
    while not stop and #flight < window do
      if run.evaluated + #flight >= budget.candidates or core.now() >= deadline then stop = true; break end
      local prop, meta = strategy:propose(run)
      if prop == nil then run.exhausted = true; stop = true; break end
      local cand = s:candidate(prop, sname)
      if meta then   -- a strategy may say where a proposal comes from and why
        cand.parent = meta.parent or cand.parent
        cand.rationale = meta.rationale or cand.rationale
      end
      while flying[cand.id] do land() end   -- proposed again while in flight: known once it lands
      local res = s:known(cand)
      if res then
        run.skipped = run.skipped + 1
        misses = misses + 1
        if misses >= 10000 then run.exhausted = true; stop = true; break end
        run.best = s.best
        if strategy.observe then strategy:observe(run, res, false) end
      else
        report:evaluating(run, cand)
        flight[#flight + 1] = { cand = cand, pending = s:begin(cand) }
        flying[cand.id] = true
      end
    end
    if #flight == 0 then break end
    land()
  end
  s:close_workers()
  local summary = M.summary(run)
  s.store:end_run(run.record, summary)
  report:summary(run, summary)
  return summary, run
end

-- The summary lists a shape "faster elsewhere" when another verified result's
-- median there beats the pick's by more than this fraction (the pick wins on
-- the score, a mean over shapes; a layer may still dispatch per shape).
M.elsewhere_margin = 0.02

function M.summary(run)
  local s = run.session
  local elapsed = core.now() - run.started
  local best = s.best
  local speedup, start_times, best_times = {}, {}, {}
  for _, sh in ipairs(run.recipe.shapes) do
    local r = best.shapes[sh.key]
    speedup[sh.key] = r and r.speedup or nil
    start_times[sh.key] = s.start.shapes[sh.key].median
    best_times[sh.key] = r and r.median or nil
  end
  -- shapes where another result beats the pick by more than M.elsewhere_margin
  local elsewhere = {}
  for _, sh in ipairs(run.recipe.shapes) do
    local w, mine = s.shape_best[sh.key], best_times[sh.key]
    if w and mine and w.id ~= best.id and w.median * (1 + M.elsewhere_margin) < mine then
      elsewhere[#elsewhere + 1] = { shape = sh.key, id = w.id, short = w.short, median = w.median, pick = mine,
                                    name = w.name, params = w.params, origin = w.origin, start = w.start }
    end
  end
  return {
    event = "summary", recipe = run.recipe.name, run = run.record.short, strategy = run.strategy_name,
    seed = run.seed, funnel = run.funnel, candidates = run.evaluated, known = run.skipped,
    partial_shapes = run.partial, timing_seconds = run.timing_s,
    exhausted = run.exhausted or false, seconds = elapsed,
    per_second = elapsed > 0 and run.evaluated / elapsed or 0,
    best = { id = best.id, short = best.short, score = best.score, speedup = speedup, params = best.params,
             origin = best.origin, start = best.outcome == "start" },
    start = { id = s.start.id, median = start_times },
    best_median = best_times,
    -- absent when the pick is the fastest at every shape (an empty table would be a JSON object)
    elsewhere = #elsewhere > 0 and elsewhere or nil, shape_count = #run.recipe.shapes,
  }
end

-- A result as the REPL shows it; its fields stay plain.
local Result = {}
Result.__index = Result
function Result:__tostring()
  return string.format("kwb.result %s %s%s", self.short, self.outcome,
    self.score and string.format(" %.2fx", self.score) or (self.reason and (": " .. self.reason) or ""))
end
M.Result = Result

-- try(recipe, proposal): evaluate one candidate now, print its table.
function M.try(recipe, prop)
  local s = recipe:session()
  local report = progress.new("plain")
  s:ensure_start()
  local cand = s:candidate(prop, "try")
  local res = s:evaluate(cand)
  s.store:record(s.ctx, cand, res, s.run_record)
  s:note_times(res)
  if res.outcome == "accepted" then s.best = res end
  report:table(s, res)
  return setmetatable(res, Result)
end

-- main(recipe, words...): `kwb recipes/x.lua --json --budget 50 --strategy random`.
M.options = {
  { "--json", "one JSON object per line on stdout, the last the summary" },
  { "--plain", "plain progress lines even on a terminal" },
  { "--quiet", "only the summary" },
  { "--budget N", "evaluate at most N candidates" },
  { "--minutes M", "stop after M minutes" },
  { "--strategy S", "grid, random, anneal, genetic or a .lua file" },
  { "--seed N", "the run's seed (inputs and proposals)" },
  { "--workers N", "evaluate in N worker processes (default: 1 on the host, one per GPU)" },
}

local function usage(msg)
  io.stderr:write("kwb: ", msg, "\ntry 'kwb --help'\n")
  return 2
end

function M.parse_options(...)
  local words, opts, i = table.pack(...), {}, 1
  local function value(name, conv, what)
    local v = words[i + 1]
    local x = v and conv(v)
    if not x then return nil, string.format("'%s' needs %s, got %s", name, what, v and ("'" .. v .. "'") or "nothing") end
    i = i + 1
    return x
  end
  local pos_int = function(v) local n = math.tointeger(tonumber(v)); return n and n > 0 and n or nil end
  local pos_num = function(v) local n = tonumber(v); return n and n > 0 and n or nil end
  while i <= words.n do
    local w, err = words[i], nil
    if w == "--json" then opts.mode = "json"
    elseif w == "--plain" then opts.mode = "plain"
    elseif w == "--quiet" then opts.mode = "quiet"
    elseif w == "--budget" then opts.candidates, err = value(w, pos_int, "a positive integer")
    elseif w == "--minutes" then opts.minutes, err = value(w, pos_num, "a positive number")
    elseif w == "--workers" then opts.workers, err = value(w, pos_int, "a positive integer")
    elseif w == "--seed" then opts.seed, err = value(w, function(v) return math.tointeger(tonumber(v)) end, "an integer")
    elseif w == "--strategy" then
      opts.strategy, err = value(w, function(v) return v end, "a strategy name")
      local known = opts.strategy and opts.strategy:match("%.lua$")
      for _, n in ipairs(require("kwb.recipe").builtin_strategies) do known = known or opts.strategy == n end
      if opts.strategy and not known then
        err = string.format("unknown strategy '%s' (known: %s, or a .lua file)", opts.strategy,
                            table.concat(require("kwb.recipe").builtin_strategies, ", "))
      end
    else err = string.format("unknown run option '%s'", w) end
    if err then return nil, err end
    i = i + 1
  end
  return opts
end

function M.main(recipe, ...)
  local opts, err = M.parse_options(...)
  if not opts then return usage(err) end
  local ok, e = pcall(M.run, recipe, opts)
  if not ok then
    io.stderr:write("kwb: ", recipe.name, ": ", tostring(e), "\n")
    return 1
  end
  return 0
end

return M
