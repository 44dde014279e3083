-- kwb/backends/host.lua: the host adapter (the contract: kwb/backend.lua).
-- Candidates are C sources compiled with the system compiler into shared
-- objects and called through libffi. The rules see the source, the
-- preprocessed source and the built object's symbols, the two views made
-- with exactly the build's own compiler command (kwb.host).
local cache = require "kwb.cache"
local ceilings = require "kwb.ceilings"
local host = require "kwb.host"
local rules = require "kwb.rules"

local B = { name = "host", error_line = "[^\n]*error:[^\n]*" }

B.buffer = host.buffer
-- host buffers lie between redzones: a write just outside one is found (kwb.verify)
B.redzones = true
B.compare = host.compare

function B.device() return cache.host_kind() end

-- The clock of the timeout: processor time, so a loaded machine that
-- preempts kwb does not turn a quick candidate into a timeout.
B.clock = os.clock

-- call(kernel, bench, args) -> true: one call with the bench's arguments, in
-- this process (a worker's: a fault there costs only the worker).
function B.call(kernel, b, args)
  kernel(table.unpack(args, 1, b.n))
  return true
end

-- time(kernel, bench, opts, outs) -> stats (seconds per call); the host's
-- timed runs are checked afterwards as they are (outs is not poisoned).
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

local function build_spec(cand, recipe)
  return { source = cand.source, name = cand.name, defines = cand.defines, flags = recipe.flags, cc = recipe.cc }
end

-- The preprocessed source, from the build's own command.
function B.view(cand, recipe)
  return rules.preprocess(cand.source, { name = cand.name, defines = cand.defines, flags = recipe.flags, cc = recipe.cc })
end

function B.check_view(rs, pp) return rs:check_preprocessed(pp) end

function B.compile(cand, recipe) return host.compile(build_spec(cand, recipe)) end

-- The shared object's undefined symbols (what it calls) and writable data.
function B.check_built(rs, mod, _, pp)
  local syms, err = rules.symbols(mod.path)
  if not syms then error(err, 0) end
  return rs:check_symbols(syms, pp)
end

function B.entry(mod, _, _, prototype)
  local fn, fmsg = mod:fn(prototype)
  if not fn then return nil, fmsg .. " (candidates export " .. prototype .. ")" end
  return fn
end

return B
