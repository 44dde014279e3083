-- kwb/worker/task.lua: the measure stage as a worker's tasks. A session's
-- pool sends "kwb.worker.task.prepare" and "kwb.worker.task.measure" by
-- name; the worker loads the recipe file once, keeps its harness (buffers,
-- reference) for the candidates that follow, and answers with plain data.
-- Nothing in the main process requires this module.
local core = require "kwb.core"
local measure = require "kwb.measure"
local channel = require "kwb.base.channel"

local M = {}

local harnesses = {}   -- recipe file -> its harness in this worker

local function harness(file)
  local h = harnesses[file]
  if h then return h end
  local f = io.open(file, "rb")
  if not f then
    error(string.format("the worker cannot read the recipe %s (it runs as uid %s; the file and its directories "
                        .. "must be readable by it)", file, tostring(core.uid())), 0)
  end
  f:close()
  h = measure.harness(require("kwb.load").load(file))
  harnesses[file] = h
  return h
end

-- prepare(file): load the recipe and build its reference ahead of the first
-- candidate, so every worker of a fresh pool gets ready at once.
function M.prepare(file)
  local h = harness(file)
  channel.limit(measure.build_limit, "building the reference")
  h:reference()
  return true
end

-- measure(args) -> the measured part of a result (kwb.measure.measured).
-- args = { recipe = absolute file, cand = { source, name, defines,
-- define_list, params (the launch plan reads them), id, short }, seed =
-- "decimal", req = kwb.measure.request's table, companions = the kernels to
-- time in turns beside it (the start kernel, the recipe's baseline: each its
-- role, candidate fields and seed, kwb.loop.start), or nil }.
function M.measure(args)
  local h = harness(args.recipe)
  h:take(args.req)
  local res = measure.blank(args.cand, math.tointeger(tonumber(args.seed)))
  h:measure(args.cand, res, { start = args.req.start, companions = args.companions })
  -- a failed call or timing (a CUDA error) may leave the process spoiled
  if res.outcome == "crashed" then channel.retire() end
  return measure.measured(res)
end

-- baseline(args) -> the recipe's baseline measured (kwb.measure.baseline.measure).
function M.baseline(args)
  local res = require("kwb.measure.baseline").measure(harness(args.recipe), args)
  -- a crashed source baseline, or a plan baseline that failed (its launch or timing may leave the device
  -- context spoiled), retires the worker as a crashed candidate does
  if (res.error or ""):match("^crashed") or (res.error and args.name) then channel.retire() end
  return res
end

-- rounds(args) -> the kernels timed in turns (kwb.measure.rounds.measure).
-- args = { recipe =, req = a request (never raced), cands = { { source,
-- name, defines, define_list, params, id, short, fn, seed } }, o = { seconds =,
-- target =, max_rounds = } }.
function M.rounds(args)
  local h = harness(args.recipe)
  h:take(args.req)
  local got = require("kwb.measure.rounds").measure(h, args.cands, args.o)
  if (got.error or ""):match("^crashed") then channel.retire() end
  return got
end

-- sanitize(args) -> {} or the first finding (kwb.checks.sanitize.check), with the
-- device to itself as a measurement has it.
function M.sanitize(args)
  local sanitize = require "kwb.checks.sanitize"
  channel.limit(nil, "waiting for the device")
  local locked = channel.serving() and core.worker_lock(true)
  local _ <close> = setmetatable({}, { __close = function() if locked then core.worker_lock(false) end end })
    -- (each tool's run once, and again alone: a run killed from outside, or one that could not run, twice more at most)
  channel.limit(3 * #sanitize.tools * (sanitize.limit + 10) + measure.build_limit, "compute-sanitizer")
  local h = harness(args.recipe)
  -- the tools share the card with this worker's buffers: as many at once as
  -- its free memory holds, and this worker's own freed for a run that could not get its share
  local free = h.backend.free_bytes and h.backend.free_bytes()
  return sanitize.check(h.recipe, args, { free = free, release = function() require("kwb.measure.inputs").release(h) end })
end

-- profile(args) -> kwb.checks.profile.task's answer: ncu on the candidate at
-- args.shape, with the device to itself as a measurement has it.
function M.profile(args)
  local profile = require "kwb.checks.profile"
  channel.limit(nil, "waiting for the device")
  local locked = channel.serving() and core.worker_lock(true)
  local _ <close> = setmetatable({}, { __close = function() if locked then core.worker_lock(false) end end })
  channel.limit(profile.limit + 10, "ncu")
  return profile.task(harness(args.recipe), args)
end

-- sanitize_job(path): what each tool of kwb.checks.sanitize runs, in a fresh kwb:
-- the candidate built and called once at the job's shape, on fresh inputs.
-- A failure that is not the candidate's (the recipe or the candidate's build
-- not loading here, buffers that cannot be allocated, the device lost, an
-- allocation failing inside the call) exits with kwb.checks.sanitize.harness and
-- a line "kwb-sanitize-harness <why>" on stderr; the candidate's call
-- failing otherwise (its launch or a kernel fault) raises: status 1.
function M.sanitize_job(path)
  local sanitize = require "kwb.checks.sanitize"
  local t0 = core.now()
  local stages, last = {}, t0
  local function stage(name)
    local t = core.now()
    stages[#stages + 1] = string.format("%s=%.3f", name, t - last)
    last = t
  end
  local function harness_failed(why)
    io.stderr:write("kwb-sanitize-harness ", (tostring(why):gsub("\n", " ")), "\n")
    io.stderr:flush()
    os.exit(sanitize.harness, true)
  end
  local fn, h, b, sh
  local ok, err = pcall(function()
    local f = assert(io.open(path, "r"))
    local spec = channel.decode(f:read("a"))
    f:close()
    h = harness(spec.recipe)
    stage("load")
    local res = { seconds = {}, shapes = {} }
    fn = h:build(spec.cand, res)
    if not fn then error("the candidate does not build here: " .. tostring(res.outcome) .. ": " .. tostring(res.reason), 0) end
    stage("build")
    -- a timed shape, or one kwb.checks.sanitize scaled down from one
    for _, s in ipairs(h.recipe.shapes) do if s.key == spec.shape then sh = s end end
    if not sh and type(spec.vars) == "table" and assert(h.problem:check_shape(spec.vars)) then
      sh = { shape = spec.vars, key = h.problem:shape_key(spec.vars) }
      assert(sh.key == spec.shape, spec.shape)
    end
    b = h:bench(assert(sh, spec.shape))
    stage("bench")
    require("kwb.measure.inputs").fresh(h, b, math.tointeger(tonumber(spec.seed)) or 0, "sanitize")
    stage("inputs")
  end)
  if not ok then harness_failed(err) end
  local called, cerr = h.backend.call(fn, b, b.args)
  if not called then
    -- (memory the call could not get, or a device gone, is the harness's: the tool's own allocations share the card)
    if sanitize.not_the_candidates(cerr) then harness_failed("the call at " .. sh.key .. ": " .. tostring(cerr)) end
    error("the call failed at " .. sh.key .. ": " .. tostring(cerr), 0)
  end
  stage("call")
  -- where the tool's run spent its time inside kwb (kwb.checks.sanitize keeps it)
  io.stderr:write("kwb-sanitize-stages ", table.concat(stages, " "), "\n")
end

-- device(backend) -> this worker's device kind for the backend (what a
-- queue worker announces; results are keyed by it).
function M.device(args)
  return require("kwb.measure.backends").load(args.backend).device()
end

-- ceilings(args) -> the ceilings of this worker's device for the recipe
-- (args.recipe), measured with the device to itself: a loop whose workers
-- are on other hosts has none of its own to measure.
function M.ceilings(args)
  local h = harness(args.recipe)
  channel.limit(nil, "waiting for the device")
  local locked = channel.serving() and core.worker_lock(true)
  local _ <close> = setmetatable({}, { __close = function() if locked then core.worker_lock(false) end end })
  channel.limit(600, "measuring the device's ceilings")
  return h.backend.ceilings(h.recipe.ceilings, require("kwb.measure.ceilings").work(h.recipe))
end

-- build(args) -> the build's verdict alone (the agent strategy's compile
-- tool): nil outcome when it built. args = { recipe =, cand = }.
function M.build(args)
  local h = harness(args.recipe)
  local res = { seconds = {}, shapes = {} }
  channel.limit(measure.build_limit, "building a draft")
  h:build(args.cand, res)
  return { outcome = res.outcome, reason = res.reason, rule = res.rule, line = res.line, log = res.log }
end

return M
