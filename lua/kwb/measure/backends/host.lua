-- kwb/measure/backends/host.lua: the host adapter (the contract: kwb/measure/backends/init.lua).
-- Candidates are C sources compiled with the system compiler into shared
-- objects and called through libffi. The rules see the source, the
-- preprocessed source and the built object's symbols, the two views made
-- with exactly the build's own compiler command (kwb.host).
local ceilings = require "kwb.measure.ceilings"
local core = require "kwb.core"
local files = require "kwb.base.files"
local host = require "kwb.host"
local rules = require "kwb.measure.rules"
local channel = require "kwb.base.channel"

local B = { name = "host", error_line = "[^\n]*error:[^\n]*" }

B.buffer = host.buffer
-- host buffers lie between redzones: a write just outside one is found (kwb.measure.verify)
B.redzones = true
B.compare = host.compare

function B.device() return host.kind() end

-- The clock of the timeout: processor time, so a loaded machine that
-- preempts kwb does not turn a quick candidate into a timeout (a sandbox's
-- own CPU clock for candidates; this process's for the reference).
B.clock = os.clock

-- A candidate's kernel: its module's function in a sandbox of its own
-- (core/sandbox.c). Nothing of the judge's is in that process: it gets the
-- buffers it is passed, mapped from their shared memory, and its time is the
-- sandbox's CPU clock read by this process while it sleeps between calls.
local Sandboxed = {}
Sandboxed.__index = Sandboxed
B.Sandboxed = Sandboxed

function Sandboxed:close()
  if self.sb then self.sb:close(); self.sb = nil end
end
Sandboxed.__close = Sandboxed.close

-- call(kernel, bench, args [, limit]) -> true, seconds | nil, message,
-- outcome ("crashed", "forbidden", "timeout"): one call with the bench's
-- arguments; seconds: the candidate's CPU time (a sandbox's) or this
-- process's (the reference).
-- A sandbox that used its processor while it should have slept between
-- calls (it cannot for want of any way to wake: a sign of a broken channel)
-- is wrong rather than trusted.
local function ran_between(r)
  if r.between > 1e-4 then
    return string.format("its process ran %.3g s between two calls, while it had nothing to do", r.between)
  end
end

function B.call(kernel, b, args, limit)
  if getmetatable(kernel) == Sandboxed then
    local r, why, info = kernel.sb:call(limit or 3600, table.unpack(args, 1, b.n))
    if not r then return nil, why, info.code end
    local between = ran_between(r)
    if between then return nil, between, "wrong" end
    return true, r.cpu, r
  end
  local t0 = os.clock()
  kernel(table.unpack(args, 1, b.n))
  return true, os.clock() - t0
end

-- calls(kernel, sets, limit) -> true, seconds | nil, message, outcome: one
-- call on each bench of sets (their args), queued at once and run back to
-- back by the kernel's sandbox; seconds: their total CPU time.
function B.calls(kernel, sets, limit)
  local list = {}
  for j, s in ipairs(sets) do list[j] = s.args end
  local r, why, info = kernel.sb:calls(limit or 3600, list)
  if not r then return nil, why, info.code end
  local between = ran_between(r)
  if between then return nil, between, "wrong" end
  return true, r.cpu, r
end

-- Every timed run of a sandboxed kernel gets fresh inputs and poisoned
-- outputs, one call at a time (kwb.measure.timed), which time() cannot give.
B.fresh_timing = true

-- time(kernel, bench, opts, outs) -> stats: the reference's, in this process.
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
    src, err = files.read_file(file)
    if not src then error("the reference of " .. problem.name .. ": cannot read " .. tostring(err), 0) end
  end
  local mod, msg, info = host.compile { source = src, name = problem.name .. "_ref.c", flags = r.flags or { "-O2" } }
  if not mod then error("the reference of " .. problem.name .. " does not compile: " .. msg .. "\n" .. (info and info.log or ""), 0) end
  return assert(mod:fn(problem:prototype(r.fn)))
end

local function build_spec(cand, recipe)
  return { source = cand.source, name = cand.name, defines = cand.defines, flags = recipe.flags, cc = recipe.cc }
end

-- The preprocessed source, from the build's own command.
function B.view(cand, recipe)
  return rules.preprocess(cand.source, { name = cand.name, defines = cand.defines, flags = recipe.flags, cc = recipe.cc })
end

function B.check_view(rs, pp) return rs:check_preprocessed(pp) end

-- Built, never loaded here: the sandbox loads it (its constructors run there).
function B.compile(cand, recipe)
  local spec = build_spec(cand, recipe)
  spec.no_load = true
  return host.compile(spec)
end

-- The shared object's undefined symbols (what it calls) and writable data.
function B.check_built(rs, mod, _, pp)
  local syms, err = rules.symbols(mod.path)
  if not syms then error(err, 0) end
  return rs:check_symbols(syms, pp)
end

-- The shared object's code (core.code_digest: its loaded sections), or nil
-- where it cannot be read.
function B.code_digest(mod)
  local image = files.read_file(mod.path)
  return image and (core.code_digest(image)) or nil
end

-- The sandbox's start: its module's initialisers run there, on the recipe's
-- timeout; what they do wrong is the candidate's outcome (forbidden, timeout,
-- crashed). Its stdout and stderr are a worker's captured output (the
-- result's `output`, never a reason, a log or a prompt); in the main
-- process, /dev/null.
local candidate_doing = { forbidden = true, timeout = true, crashed = true }

function B.entry(mod, _, recipe, prototype)
  local ret, args, name = host.parse_signature(prototype)
  local sb, msg, info = core.host_sandbox(mod.path, name, ret, args,
                                          { timeout = recipe.budget.timeout, output = channel.serving() })
  if not sb and candidate_doing[info.code] then return nil, msg, info.code end
  if not sb then return nil, msg .. " (candidates export " .. prototype .. ")" end
  return setmetatable({ sb = sb }, Sandboxed)
end

return B
