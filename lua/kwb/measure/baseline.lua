-- kwb/measure/baseline.lua: the recipe's `baseline`: what a user would otherwise run
-- for the problem (a library's kernel, a plain implementation), timed by kwb
-- in the same run, on the same device and with the same timer as the
-- candidates, so a speed-up can be read against it as well as against the
-- start kernel. It is never a candidate: never the best, never raced
-- against, never exported, never recorded as a result, no outcome in the
-- funnel. Checked once per run, right after the start kernel, and timed in
-- the same run in turns beside its first candidates (see run).
--
--   baseline = "cublas"                                  -- a name the problem's `baselines` gives
--   baseline = { file = "../kernels/host/matmul_ref.c", fn = "matmul_ref", defines = {...} }
--
-- Two kinds of baseline:
--   a source (file = | source =, defines =, fn =, name =): built and checked
--     like the start kernel (kwb.measure: every shape verified twice and on
--     the unannounced shapes) right after it, then timed in turns (A B C A B
--     C ..., kwb.measure.rounds) beside the run's first candidate that
--     reaches its timing, and the start kernel where the run times that
--     again too (kwb.loop.start); where no candidate does, timed alone at
--     the run's end (fully, unraced, fresh inputs each run); fn is its entry
--     point (default the problem's);
--   a plan (a problem's baselines entry with `plan = function(h) -> maker`):
--     trusted library code that kwb drives itself (nvfp4_moe's "cublas").
--     maker:plan(b) gives the plan of bench b for the inputs in it now
--     (drawn once: the run's second-round inputs), maker:close() frees what
--     it holds. Each shape's plan runs once, its outputs are checked against
--     the reference at the problem's tolerance, then it is timed with the
--     backend's plain timer (kwb.cuda.time: graph replay, cold L2, outputs
--     poisoned before each run).
-- A baseline that fails (does not build, is wrong, crashes, cannot get its
-- memory) is an error of the recipe: said once, the run goes on without it.
local M = {}

local source_fields = { "file", "source", "defines", "fn", "name" }

-- check(checker, value, problem, backend) -> the recipe's baseline:
-- { label =, name = (a problem's), spec = (a source: candidate fields), fn =,
-- plan = (a problem's plan) }; a mistake raises through the checker naming
-- the field, the value and the names the problem knows.
function M.check(c, v, p)
  if type(v) == "string" then
    local known = {}
    for k in pairs(p.baselines or {}) do known[#known + 1] = k end
    table.sort(known)
    local bl = (p.baselines or {})[v]
    if not bl then
      c:fail("baseline", string.format("no baseline %q in problem %s (%s)", v, p.name,
             #known > 0 and ("known: " .. table.concat(known, ", ")) or "it has none: give { file =, fn = }"), false)
    end
    if bl.plan then return { label = v, name = v, plan = bl.plan, description = bl.description } end
    return { label = v, name = v, spec = { source = bl.source, file = bl.file, defines = bl.defines,
             name = bl.file and bl.file:match("[^/]+$") or (v .. ".baseline"), resolved = true },
             fn = bl.fn, description = bl.description }
  end
  if type(v) ~= "table" then c:fail("baseline", "a name of the problem's baselines or { file = | source =, defines =, fn = }", v) end
  local set = {}
  for _, k in ipairs(source_fields) do set[k] = true end
  for k in pairs(v) do
    if not set[k] then c:unknown(k, source_fields, "baseline.") end
  end
  if v.fn ~= nil and (type(v.fn) ~= "string" or not v.fn:match("^[%a_][%w_]*$")) then
    c:fail("baseline.fn", "a C identifier (the baseline's entry point)", v.fn)
  end
  local spec = c:candidate_spec("baseline", { file = v.file, source = v.source, defines = v.defines, name = v.name })
  spec.name = spec.name or (v.file and v.file:match("[^/]+$")) or "baseline"
  return { label = spec.name, spec = spec, fn = v.fn }
end

-- ---- in the worker (or a session's own harness) ---------------------------

-- A shape's figures as a run keeps them.
local function figures(st)
  return { median = st.median, min = st.min, p10 = st.p10, p90 = st.p90, ci_lo = st.ci_lo, ci_hi = st.ci_hi,
           n = st.n, spread = st.spread, capped = st.capped }
end

-- The outputs of the problem in bench b.
local function outputs(h, b)
  local outs = {}
  for _, a in ipairs(h.problem.buffers) do
    if a.role == "out" then outs[#outs + 1] = b.bufs[a.name] end
  end
  return outs
end

-- A plan baseline at every timed shape: nil, or the reason it failed.
local function measure_plan(h, bl, out)
  local inputs = require "kwb.measure.inputs"
  local maker, why = bl.plan(h)
  if not maker then return why end
  local _ <close> = setmetatable({}, { __close = function() maker:close() end })   -- (its memory freed, whatever happens)
  for _, sh in ipairs(h.recipe.shapes) do
    local b = h:bench(sh)
    inputs.prepare(h, b, h:base_seed(), 2, true)   -- the run's inputs, drawn once; the reference's outputs for them
    local p, perr = maker:plan(b)
    if not p then return string.format("at %s: %s", sh.key, tostring(perr)) end
    local outs = outputs(h, b)
    p:poison_before(outs)
    local ok, err = p:run()
    if not ok then return string.format("its run failed at %s: %s", sh.key, tostring(err)) end
    b.scratch = nil
    local wrong, reason = h:check(b, "the baseline's run")
    inputs.settle(h, b)
    if wrong then return "it is wrong: " .. reason end
    for _, e in pairs(b.errors or {}) do out.check[sh.key] = { rel_l2 = e.rel_l2, max_abs = e.max_abs } end
    local topts = {}
    for k, x in pairs(h.timing) do if k ~= "verify_runs" then topts[k] = x end end
    local st, terr = require("kwb.cuda").time(p, topts)
    if not st then return string.format("its timing failed at %s: %s", sh.key, tostring(terr)) end
    out.shapes[sh.key] = figures(st)
    p = nil
    collectgarbage()   -- (the plan's scratch freed before the next shape's)
  end
end

-- measure(h, args) -> { shapes = { [key] = figures }, check = { [key] = { rel_l2, max_abs } }
-- (a plan's), error = reason, seconds = }. args: { name = (a problem's
-- baseline), cand = (a source's candidate, with fn), seed, req = a request
-- (kwb.measure.request: never raced, the run's minutes its limit),
-- checks_only = true (a source built and checked, not timed: no shapes) }.
function M.measure(h, args)
  local core = require "kwb.core"
  local t0 = core.now()
  h:take(args.req)
  local out = { shapes = {}, check = {} }
  if args.cand then
    local res = require("kwb.measure").blank(args.cand, math.tointeger(tonumber(args.seed)))
    h:measure(args.cand, res, { start = true, checks_only = args.checks_only })
    if res.outcome then
      out.error = string.format("%s: %s", res.outcome, res.reason or "?")
      out.shapes = {}
    else
      for key, st in pairs(res.shapes) do out.shapes[key] = figures(st) end
    end
  else
    local bl = (h.problem.baselines or {})[args.name]
    if not bl or not bl.plan then error("problem " .. h.problem.name .. " has no baseline plan " .. tostring(args.name), 0) end
    local channel = require "kwb.base.channel"
    channel.limit(nil, "waiting for the device")
    local locked = channel.serving() and core.worker_lock(true)
    local _ <close> = setmetatable({}, { __close = function() if locked then core.worker_lock(false) end end })
    channel.limit(require("kwb.measure").harness_limit, "the baseline " .. args.name)
    out.error = measure_plan(h, bl, out)
    if out.error then out.shapes = {} end
  end
  out.seconds = core.now() - t0
  return out
end

-- ---- in the main process ----------------------------------------------------

-- for_worker(s, cand, tag) -> a source baseline as a worker builds it: its
-- candidate's fields (a session's candidate of its spec), its entry point
-- and a seed of its own (tag: what it is measured for).
function M.for_worker(s, cand, tag)
  return { source = cand.source, name = cand.name, defines = cand.defines, define_list = cand.define_list,
           params = cand.params, id = cand.id, short = cand.short, fn = s.recipe.baseline.fn,
           seed = tostring(require("kwb.base.rng").seed_of(s.run_seed or s.recipe.seed or 0, cand.id, tag)) }
end

-- measured(s, args) -> measure(h, args)'s answer, from a worker where the
-- session has a pool (its own device lock, the run's minutes as its
-- deadline), else from the session's harness; a failure of its task is its error.
local function measured(s, args)
  local pool = s:workers()
  if pool then
    args.recipe = require("kwb.base.files").resolve(s.recipe.returned_by)
    local answer = pool:wait(pool:submit("kwb.worker.task.baseline", { args },
                                         { limit = require("kwb.measure").build_limit, what = "the baseline's build" }))
    return answer.ok and answer.value or { error = string.format("%s: %s", answer.code, tostring(answer.reason)) }
  end
  local ok, r = pcall(M.measure, s.harness, args)
  return ok and r or { error = tostring(r) }
end

-- timed(out, shapes [, check]): a baseline's figures at every shape into the
-- run's record of it (out: run's), its medians beside them.
function M.timed(out, shapes, check)
  out.median, out.shapes, out.check, out.due = {}, shapes, check, nil
  for key, st in pairs(shapes) do out.median[key] = st.median end
end

-- run(session [, alone]) -> the run's baseline, or nil where the recipe has
-- none: { name = label, description =, id = (a source's), seconds = (its
-- build and checks, or its whole measurement), error = reason; median = {
-- [key] = s }, shapes = { [key] = figures }, check =, once timed; due =
-- true while a source waits to be timed; beside = the candidate it was
-- timed in turns beside, with_start = whether the start kernel took those
-- turns too (kwb.loop.start) }. A source is built and checked here (unless
-- alone: then checked and timed here, as the start kernel is); a plan is
-- measured here, checked and timed (kwb drives it with its own timer: it
-- takes no turns). A failure of the baseline's (or of its task) is its
-- error, never the run's nor a candidate's.
function M.run(s, alone)
  local bl = s.recipe.baseline
  if not bl then return nil end
  local core = require "kwb.core"
  local run_seed = s.run_seed or s.recipe.seed or 0
  local args = { name = bl.name,
                 req = require("kwb.measure").request(s.recipe, { run_seed = run_seed, race = false, ends_at = s.ends_at }) }
  local out = { name = bl.label, description = bl.description }
  if bl.spec then
    local cand = s:candidate(bl.spec, "baseline")
    out.id = cand.id
    if cand.too_big then out.error = cand.too_big; return out end   -- (kwb.loop.candidate: never sent)
    args.cand = M.for_worker(s, cand, "baseline")
    args.seed, args.checks_only = args.cand.seed, not alone
  end
  local t0 = core.now()
  local got = measured(s, args)
  out.seconds = core.now() - t0
  if got.error then out.error = got.error; return out end
  if args.checks_only then out.due = true; return out end
  M.timed(out, got.shapes, next(got.check or {}) and got.check or nil)
  return out
end

-- alone(s, out): a source baseline still due at the run's end (no candidate
-- reached its timing) measured alone, checked and timed: its figures into
-- the run's record of it (out), or its error; its seconds added.
function M.alone(s, out)
  local got = M.run(s, true)
  out.seconds = (out.seconds or 0) + (got.seconds or 0)
  out.due = nil
  if got.error then out.error = got.error else M.timed(out, got.shapes) end
end

-- vs(baseline, key, median) -> baseline median / median at shape key, or nil.
function M.vs(bl, key, median)
  local b = bl and bl.median and bl.median[key]
  if not b or not median or median <= 0 then return nil end
  return b / median
end

return M
