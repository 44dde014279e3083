-- kwb/evaluate.lua: one candidate's evaluation split across processes. The
-- loop's session (main process) hands a candidate to a worker with
-- Session:begin; the worker runs measure() here (build, verify, time: all the
-- candidate's code); the session merges the answer, or the worker's death or
-- overrun, into the result with merge() and judges it (floor, score, accept).
local core = require "kwb.core"
local worker_deadline = require("kwb.worker").deadline

local M = {}

function M.absolute(path)
  local abs = require("kwb.host").resolve(path)
  if abs:sub(1, 1) ~= "/" then error("cannot make " .. path .. " absolute: no working directory", 0) end
  return abs
end

local sessions = {}   -- recipe file -> the worker's bare session (kept: buffers, reference)

local function session(file)
  local s = sessions[file]
  if s then return s end
  local f = io.open(file, "rb")
  if not f then
    error(string.format("the worker cannot read the recipe %s (it runs as uid %s; the file and its directories "
                        .. "must be readable by it)", file, tostring(core.uid())), 0)
  end
  f:close()
  local recipe = require("kwb.load").load(file)
  local loop = require "kwb.loop"
  local backend = require("kwb.backends." .. recipe.backend)
  s = setmetatable({ recipe = recipe, problem = recipe.problem, backend = backend, benches = {}, best_time = {} },
                   loop.Session)
  sessions[file] = s
  return s
end

-- In a worker: load the recipe and build its reference ahead of the first
-- candidate, so every worker of a fresh pool gets ready at once.
function M.prepare(file)
  local s = session(file)
  worker_deadline(require("kwb.loop").build_limit, "building the reference")
  s:reference()
  return true
end

-- In a worker: measure one candidate. args = { recipe = absolute file, cand =
-- { source, name, defines, define_list, params (the launch plan reads them), id, short }, seed = "decimal",
-- best_time = { [shape] = seconds }, start = bool, timing =, race =, timeout = }.
-- Returns the measured part of the result.
function M.measure(args)
  local s = session(args.recipe)
  local r = s.recipe
  r.timing, r.race = args.timing or r.timing, args.race
  r.budget.timeout = args.timeout or r.budget.timeout
  s.best_time = args.best_time or {}
  s.run_seed = math.tointeger(tonumber(args.run_seed))
  local res = { id = args.cand.id, short = args.cand.short, seconds = {}, shapes = {},
                seed = math.tointeger(tonumber(args.seed)) }
  s:measure(args.cand, res, { start = args.start })
  -- a failed call or timing (a CUDA error) may leave the process spoiled
  if res.outcome == "crashed" then require("kwb.worker").retire() end
  return { outcome = res.outcome, reason = res.reason, rule = res.rule, line = res.line, log = res.log,
           shapes = res.shapes, seconds = res.seconds }
end

-- Fold a pool's answer into the result: the measured fields, or `crashed` /
-- `timeout` with the signal and what the candidate was doing. A failure of
-- kwb's own code in the worker raises here, as it would have in-process.
function M.merge(res, answer)
  res.output, res.output_bytes = answer.output ~= "" and answer.output or nil, answer.output_bytes
  if answer.ok then
    local v = answer.value
    for _, k in ipairs { "outcome", "reason", "rule", "line", "log" } do res[k] = v[k] end
    res.shapes = v.shapes or {}
    for k, x in pairs(v.seconds or {}) do res.seconds[k] = x end
    return res
  end
  if answer.code == "crashed" then
    res.outcome, res.reason, res.signal = "crashed", answer.reason, answer.signal
  elseif answer.code == "timeout" then
    res.outcome, res.reason = "timeout", answer.reason
  else
    error(string.format("evaluating %s: %s", res.short or "?", tostring(answer.reason)), 0)
  end
  res.shapes = {}
  return res
end

return M
