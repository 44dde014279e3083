-- kwb/backends/cuda.lua: the CUDA backend as the loop sees it (the host
-- adapter's names). Candidates are device-only sources built with NVRTC; the
-- launch plan (grid, block, shared memory) comes from the recipe's `launch`
-- or the problem's, as a function of the shape and the candidate's
-- parameters. Rules look at the source and at the PTX, where no macro can
-- hide a clock read, a printf, a trap or a device global.
local core = require "kwb.core"
local host = require "kwb.host"
local rules = require "kwb.rules"
local ceilings = require "kwb.ceilings"

local B = { name = "cuda" }

-- kwb.cuda for builds (NVRTC works without a GPU) ...
local function nvrtc() return require "kwb.cuda" end

-- ... and for everything that runs (buffers, launches, timing, the device kind).
local checked
local function api()
  local cuda = require "kwb.cuda"
  if not checked then
    local n, err = cuda.device_count()
    if not n then error("the cuda backend needs a GPU: " .. tostring(err), 0) end
    if n == 0 then error("the cuda backend needs a GPU: the driver sees none", 0) end
    checked = true
  end
  return cuda
end

B.define_list = host.define_list

function B.buffer(dtype, n) return assert(api().buffer(dtype, n)) end

function B.compare(out, ref, tol) return assert(api().compare(out, ref, tol)) end

function B.device() return api().device_kind() end

-- The ceilings `kwb doctor` stored for this device kind, else measured now
-- (copy bandwidth, FMA and bf16 tensor rates). The flop ceiling is the larger
-- of the FMA and tensor rates: a candidate may use either.
function B.ceilings(given)
  local c = api().ceilings()
  if not c then
    c = { copy_bytes_per_s = 2 * (1 << 28) / assert(core.cuda_measure_copy(1 << 28, 10)),
          fma_flops_per_s = assert(core.cuda_measure_fma()),
          bf16_flops_per_s = (core.cuda_measure_bf16(4096)) }
  end
  local flops = math.max(c.fma_flops_per_s or 0, c.bf16_flops_per_s or 0)
  return ceilings.combine({ bandwidth = 1.2 * c.copy_bytes_per_s, flops = 1.2 * flops,
                            measured_bandwidth = c.copy_bytes_per_s, measured_flops = flops }, given)
end

local function launcher(kernel, launch, params)
  return { kernel = kernel, launch = launch, params = params or {}, plans = {} }
end

-- The problem's trusted reference on the device: reference.cuda = { source =, fn =, launch = }.
function B.reference(problem, _, arch)
  local r = problem.reference.cuda
  if not r then error("problem " .. problem.name .. " has no CUDA reference (reference.cuda)", 0) end
  local mod, msg, info = api().compile { source = r.source, name = problem.name .. "_ref.cu", arch = arch }
  if not mod then error("the CUDA reference of " .. problem.name .. " does not compile: " .. msg .. "\n" .. (info and info.log or ""), 0) end
  local k = assert(mod:kernel(r.fn, problem:prototype(r.fn)))
  return launcher(k, r.launch or problem.launch, {})
end

function B.build(cand, recipe, prototype, res)
  local rs = recipe.rules
  local t0 = core.now()
  local hit = rs:check_source(cand.source)
  if hit then rules.forbid(res, hit); return nil end
  local mod, msg, info = nvrtc().compile { source = cand.source, name = cand.name, defines = cand.defines,
                                           flags = recipe.flags, arch = recipe.arch }
  res.seconds.build = core.now() - t0
  if not mod then
    local log = info and info.log or ""
    local first = log:match("[^\n]*error[^\n]*")
    res.outcome, res.reason, res.log = "compile-error", first and (msg .. ": " .. first) or msg, log
    return nil
  end
  hit = rs:check_ptx(mod:ptx(), cand.source, cand.name)
  if hit then rules.forbid(res, hit); return nil end
  local fname = prototype:match("([%w_]+)%s*%(")
  local k, kmsg = mod:kernel(fname, prototype)
  if not k then
    res.outcome, res.reason = "compile-error", tostring(kmsg) .. " (candidates export " .. prototype .. ")"
    return nil
  end
  local launch = recipe.launch or recipe.problem.launch
  if not launch then error("recipe " .. recipe.name .. ": the cuda backend needs a launch plan (recipe or problem 'launch')", 0) end
  return launcher(k, launch, cand.params)
end

local function plan_for(fn, b, args)
  local key = b.key .. (args == b.refargs and "#ref" or "")
  local p = fn.plans[key]
  if p then return p end
  local l = fn.launch(b.shape, fn.params)
  if type(l) ~= "table" or not l.grid or not l.block then
    error("the launch plan must return { grid =, block = [, smem =] } (at " .. b.key .. ")", 0)
  end
  p = api().plan { { fn.kernel, grid = l.grid, block = l.block, smem = l.smem, args = { table.unpack(args, 1, b.n) } } }
  fn.plans[key] = p
  return p
end

-- The clock of the timeout: wall time (the GPU's work is not this process's).
B.clock = core.now

-- call(fn, bench, args) -> true | nil, message (a launch that fails)
function B.call(fn, b, args)
  return plan_for(fn, b, args):run()
end

-- time(fn, bench, opts, outs) -> stats (cold L2, graph replay) | nil, message.
-- The output buffers `outs` are poisoned before every timed run, so the
-- outputs checked after timing are those of the timed runs themselves.
function B.time(fn, b, opts, outs)
  local p = plan_for(fn, b, b.args)
  if outs and not p.poisoned then
    p:poison_before(outs)
    p.poisoned = true
  end
  return api().time(p, opts)
end

return B
