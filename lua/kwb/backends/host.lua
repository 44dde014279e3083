-- kwb/backends/host.lua: the host backend as the loop sees it. The loop is
-- backend-neutral; a backend adapter gives it buffers, comparison, the
-- device kind, the ceilings for the physical floor, and builds a candidate
-- through every rule view the backend has.
--
--   adapter.build(cand, recipe, prototype, res) -> kernel | nil (res filled in)
--   adapter.reference(problem, dir)             -> callable reference
--   adapter.buffer(dtype, n), adapter.compare(out, ref, tol), adapter.time(k, args, opts)
local core = require "kwb.core"
local host = require "kwb.host"
local rules = require "kwb.rules"
local ceilings = require "kwb.ceilings"

local B = { name = "host" }

B.buffer = host.buffer
B.compare = host.compare
B.define_list = host.define_list

function B.device() return require("kwb.store").device() end

-- The clock of the timeout: processor time, so a loaded machine that
-- preempts kwb does not turn a quick candidate into a timeout (kwb runs
-- candidates on its one thread).
B.clock = os.clock

-- call(kernel, bench, args) -> true: one call with the bench's arguments.
-- Host kernels run in this process: a fault here is not survivable yet.
function B.call(kernel, b, args)
  kernel(table.unpack(args, 1, b.n))
  return true
end

-- time(kernel, bench, opts) -> stats (seconds per call)
function B.time(kernel, b, opts) return host.time(kernel, b.args, opts) end

-- The measured ceilings of the host (once per process), combined with the
-- recipe's: the larger of each wins.
function B.ceilings(given)
  return ceilings.combine(ceilings.host(), given)
end

-- The problem's trusted reference as a callable taking the kernel's arguments.
function B.reference(problem, dir)
  local r = problem.reference
  local src = r.source
  if not src then
    local file = r.file
    if dir and file:sub(1, 1) ~= "/" then file = dir .. "/" .. file end
    local err
    src, err = host.read_file(file)
    if not src then error("the reference of " .. problem.name .. ": cannot read " .. tostring(err), 0) end
  end
  local mod, msg, info = host.compile { source = src, name = problem.name .. "_ref.c", flags = r.flags or { "-O2" } }
  if not mod then error("the reference of " .. problem.name .. " does not compile: " .. msg .. "\n" .. (info and info.log or ""), 0) end
  return assert(mod:fn(problem:prototype(r.fn)))
end

-- Rules over the source, the preprocessed source (cc -E) and the built
-- shared object's symbols (nm); the compiler between them.
function B.build(cand, recipe, prototype, res)
  local rs = recipe.rules
  local t0 = core.now()
  local hit = rs:check_source(cand.source)
  if hit then rules.forbid(res, hit); return nil end
  local pp, msg, info = rules.preprocess(cand.source, { cc = recipe.cc, flags = recipe.flags, defines = cand.define_list })
  if not pp then
    res.outcome, res.reason, res.log = "compile-error", msg, info.log
    return nil
  end
  hit = rs:check_preprocessed(pp)
  if hit then rules.forbid(res, hit); return nil end
  local mod
  mod, msg, info = host.compile { source = cand.source, name = cand.name, defines = cand.defines,
                                  flags = recipe.flags, cc = recipe.cc }
  res.seconds.build = core.now() - t0
  if not mod then
    local log = info and info.log or ""
    local first = log:match("[^\n]*error:[^\n]*")
    res.outcome, res.reason, res.log = "compile-error", first and (msg .. ": " .. first) or msg, log
    return nil
  end
  local syms, err = rules.symbols(mod.path)
  if not syms then error(err, 0) end
  hit = rs:check_symbols(syms, pp)
  if hit then rules.forbid(res, hit); return nil end
  local fn, fmsg = mod:fn(prototype)
  if not fn then
    res.outcome, res.reason = "compile-error", fmsg .. " (candidates export " .. prototype .. ")"
    return nil
  end
  return fn
end

return B
