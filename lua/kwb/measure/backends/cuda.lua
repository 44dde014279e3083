-- kwb/measure/backends/cuda.lua: the CUDA adapter (the contract: kwb/measure/backends/init.lua).
-- Candidates are device-only sources built with NVRTC; the
-- launch plan (grid, block, shared memory) comes from the recipe's `launch`
-- or the problem's, as a function of the shape and the candidate's
-- parameters. Rules look at the source and at the PTX, where no macro can
-- hide a clock read, a printf, a trap or a device global.
local core = require "kwb.core"
local ceilings = require "kwb.measure.ceilings"

local B = { name = "cuda", error_line = "[^\n]*error[^\n]*" }

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

function B.buffer(dtype, n) return assert(api().buffer(dtype, n)) end

-- free_bytes() -> the device memory free now, in bytes (nil where unknown).
function B.free_bytes() return (api().mem_info()) end

-- Device buffers lie between guard bands (kwb.cuda.buffer), checked after
-- every call, all of a bench's in one launch; after a timed run the same
-- launch counts the outputs' elements still poison (`outs`).
B.redzones = true
function B.guard_bands(bufs, outs) return api().redzones(bufs, outs) end

-- The reference's outputs are never on the device while a candidate runs
-- there (its code could read them through pointer arithmetic): held on the
-- host, the device copy poisoned, and put back only to be compared with a
-- candidate's output after the call has returned.
local held = setmetatable({}, { __mode = "k" })   -- buffer -> its expected values
local own = setmetatable({}, { __mode = "k" })    -- buffer -> the host copy it reuses
local pageable = setmetatable({}, { __mode = "k" })   -- copies in pageable memory (kwb.host buffers)

-- Page-locked memory is in the device's address space (unified addressing):
-- where the device cannot reach pageable memory, the expected values are
-- held there instead, out of a kernel's reach (a kwb.host buffer); where it can,
-- nothing in this process is, and page-locked copies are the faster.
local pageable_safe
local function out_of_reach()
  if pageable_safe == nil then
    local d = api().device(0)
    pageable_safe = not (d and d.pageable_access)
  end
  return pageable_safe
end

-- hold(buf [, copy [, keep]]) -> copy: the expected values buf holds (or the
-- copy of an earlier round's, given) held on the host, buf poisoned. keep:
-- a copy of its own (kept for later rounds), else the buffer's reused one.
--
-- A kept copy (a pool set's, a draw-once round's) whose values compare equal
-- to themselves exactly (no NaN or Inf) also keeps their keyed digest: where
-- the tolerance is exact (atol = rtol = 0), an output whose digest matches is
-- right without the values being put back (an output of hundreds of MB is
-- then a read on the device, not a copy from pageable memory); any other is
-- compared in full, for the message.
local exact = setmetatable({}, { __mode = "k" })   -- kept copy -> { digest =, d = its comparison with itself }
local key = require("kwb.base.rng").secret

function B.hold(buf, copy, keep)
  if not copy then
    local e
    if keep then
      local d = assert(api().compare(buf, buf, { atol = 0, rtol = 0 }))
      if d.ok and d.nan == 0 and d.inf == 0 and (d.ref_nonfinite or 0) == 0 then e = { digest = buf:digest(key()), d = d } end
    end
    if out_of_reach() then
      copy = not keep and own[buf] or require("kwb.host").buffer("u8", buf.bytes)
      assert(buf:download(copy))
      pageable[copy] = true
      if not keep then own[buf] = copy end
    else
      copy = assert(buf:save(not keep and own[buf] or nil))
      if not keep then own[buf] = copy end
    end
    assert(buf:poison())
    exact[copy] = e
  end
  held[buf] = copy
  return copy
end

-- release(buf): buf's values are its own again (a reference computed after
-- the candidate's call, compared where it is): no held copy is put back.
function B.release(buf) held[buf] = nil end

function B.compare(out, ref, tol)
  local copy = held[ref]
  if not copy then return assert(api().compare(out, ref, tol)) end
  local e = exact[copy]
  if e and tol.atol == 0 and tol.rtol == 0 and out:digest(key()) == e.digest then
    local d = {}
    for k, v in pairs(e.d) do d[k] = v end
    return d
  end
  if pageable[copy] then assert(ref:upload(copy)) else assert(ref:load(copy)) end
  local d = assert(api().compare(out, ref, tol))
  assert(ref:poison())
  return d
end

function B.device() return api().device_kind() end

-- The ceilings `kwb doctor` stored for this device kind, else measured now
-- (copy bandwidth, FMA and bf16 tensor rates). The flop ceiling is the larger
-- of the FMA and tensor rates: a candidate may use either. work (kwb.measure.ceilings.
-- work: the timed shapes' bytes and flops): where no shape's flops at the FMA
-- rate outlast its bytes at the copy rate, the tensor rate (cuBLAS loaded and
-- timed) would change no floor and is not measured.
function B.ceilings(given, work)
  local c = api().ceilings()
  if not c then
    c = { copy_bytes_per_s = (api().copy_bandwidth()), fma_flops_per_s = assert(core.cuda_measure_fma()) }
    -- (a recipe's own ceilings may lower a bytes floor below what was measured: then always)
    if (given and next(given)) or ceilings.flops_can_bind(c.copy_bytes_per_s, c.fma_flops_per_s, work) then
      c.bf16_flops_per_s = (core.cuda_measure_bf16(4096))
    end
  end
  local flops = math.max(c.fma_flops_per_s or 0, c.bf16_flops_per_s or 0)
  return ceilings.combine({ bandwidth = 1.2 * c.copy_bytes_per_s, flops = 1.2 * flops,
                            measured_bandwidth = c.copy_bytes_per_s, measured_flops = flops }, given)
end

-- A built candidate (or reference): its module, the launch function and
-- the candidate's parameters; plans are made per shape on first use.
local function launcher(mod, launch, params, single)
  return { module = mod, kernel = single, launch = launch, params = params or {}, plans = {}, kernels = {} }
end

local ctype = require("kwb.problem").scalar_ctype

-- The problem's arguments by name: { dtype, kind, index }.
local function arg_table(problem)
  if problem._arg_by_name then return problem._arg_by_name end
  local t = {}
  for i, a in ipairs(problem.args) do t[a.name] = { dtype = a.dtype, kind = a.kind, index = i } end
  problem._arg_by_name = t
  return t
end

-- A launch plan: { grid =, block =, smem = } (one kernel, the problem's
-- prototype) or { steps = { { "kernel", grid =, block =, smem =, args = { names } } ... },
-- scratch = { name = { dtype, n } } }; an argument is a name, a literal
-- { dtype, value }, or { tensor_map = name, dims =, box =, ... } (a TMA
-- descriptor over that buffer, kwb.cuda.tensor_map's spec; the kernel takes
-- a CUtensorMap). Returns it checked, or raises naming what is wrong.
local function read_plan(l, where)
  if type(l) ~= "table" then error("the launch plan must return a table (at " .. where .. ")", 0) end
  if l.steps == nil then
    if not l.grid or not l.block then
      error("the launch plan must return { grid =, block = [, smem =] } or { steps = {...} } (at " .. where .. ")", 0)
    end
    return l
  end
  if type(l.steps) ~= "table" or #l.steps == 0 then error("launch plan 'steps' must be a non-empty list (at " .. where .. ")", 0) end
  for i, st in ipairs(l.steps) do
    if type(st) ~= "table" or type(st[1]) ~= "string" or not st.grid or not st.block or type(st.args) ~= "table" then
      error(string.format("launch step %d must be { \"kernel\", grid =, block =, smem =, args = { names } } (at %s)", i, where), 0)
    end
  end
  for name, sc in pairs(l.scratch or {}) do
    if type(sc) ~= "table" or type(sc[1]) ~= "string" or math.type(sc[2]) ~= "integer" or sc[2] < 1 then
      error(string.format("scratch '%s' must be { dtype, n } with n a positive integer (at %s)", tostring(name), where), 0)
    end
  end
  return l
end

-- The C prototype of one step from its argument names.
local function step_prototype(problem, st, scratch, where)
  local args, parts = arg_table(problem), {}
  for i, a in ipairs(st.args) do
    local dtype, ptr
    if type(a) == "table" and a.tensor_map then
      if not args[a.tensor_map] and not scratch[a.tensor_map] then
        error(string.format("step %s argument %d: tensor_map '%s' is neither a buffer of %s nor a scratch buffer (at %s)",
                            st[1], i, tostring(a.tensor_map), problem.name, where), 0)
      end
      dtype = "tmap"
    elseif type(a) == "table" then
      dtype = a[1]
      if not ctype[dtype] then error(string.format("step %s argument %d: a literal needs a scalar dtype, got %s (at %s)", st[1], i, tostring(dtype), where), 0) end
    elseif args[a] then dtype, ptr = args[a].dtype, args[a].kind == "buffer"
    elseif scratch[a] then dtype, ptr = scratch[a][1], true
    else
      error(string.format("step %s argument %d: '%s' is neither an argument of %s nor a scratch buffer (at %s)",
                          st[1], i, tostring(a), problem.name, where), 0)
    end
    parts[i] = ptr and "void *a" .. i or dtype == "tmap" and "CUtensorMap a" .. i or (ctype[dtype] .. " a" .. i)
  end
  return string.format("void %s(%s)", st[1], table.concat(parts, ", "))
end

-- The kernels a multi-step plan names, looked up once; nil, message when the
-- module lacks one.
local function step_kernel(fn, problem, st, scratch, where)
  local proto = step_prototype(problem, st, scratch, where)
  local k = fn.kernels[proto]
  if k then return k end
  local kmsg
  k, kmsg = fn.module:kernel(st[1], proto)
  if not k then return nil, string.format("no kernel %s in the candidate (%s)", st[1], tostring(kmsg)) end
  fn.kernels[proto] = k
  return k
end

-- The plan of one shape: the launch plan's steps with the bench's buffers, and
-- the scratch buffers (kept, and poisoned before every call and timed run).
local function plan_for(fn, b, args, problem)
  local key = b.key .. (args == b.refargs and "#ref" or "")
  local p = fn.plans[key]
  if p then return p end
  local l = read_plan(fn.launch(b.shape, fn.params), b.key)
  if not l.steps then
    p = api().plan { { fn.kernel, grid = l.grid, block = l.block, smem = l.smem, args = { table.unpack(args, 1, b.n) } } }
    p.scratch = {}
  else
    local byname = arg_table(problem)
    local scratch = {}
    for name, sc in pairs(l.scratch or {}) do scratch[name] = api().buffer(sc[1], sc[2]) end
    p = api().plan()
    p.scratch, p.scratch_by_name = {}, scratch
    for _, buf in pairs(scratch) do p.scratch[#p.scratch + 1] = buf end
    for _, st in ipairs(l.steps) do
      local k, msg = step_kernel(fn, problem, st, l.scratch or {}, b.key)
      if not k then return nil, msg end
      local vals = {}
      for i, a in ipairs(st.args) do
        if type(a) == "table" and a.tensor_map then   -- a TMA descriptor over one of the plan's buffers
          local spec = {}
          for k, v in pairs(a) do if k ~= "tensor_map" then spec[k] = v end end
          spec[1] = byname[a.tensor_map] and args[byname[a.tensor_map].index] or scratch[a.tensor_map]
          local ok, tm, tmsg = pcall(api().tensor_map, spec)
          if not ok or not tm then
            return nil, string.format("step %s argument %d (tensor_map %s): %s", st[1], i, a.tensor_map, tostring(ok and tmsg or tm))
          end
          vals[i] = tm
        elseif type(a) == "table" then vals[i] = a[2]
        elseif byname[a] then vals[i] = args[byname[a].index]
        else vals[i] = scratch[a] end
      end
      local ok, err = pcall(p.add, p, { k, grid = st.grid, block = st.block, smem = st.smem, cluster = st.cluster, args = vals })
      if not ok then return nil, string.format("step %s: %s", st[1], tostring(err)) end
    end
  end
  p.named = {}   -- the scratch buffers by name, checked for writes outside them (kwb.measure.verify)
  for name, buf in pairs(p.scratch_by_name or {}) do p.named[#p.named + 1] = { name = "scratch " .. name, buf = buf } end
  table.sort(p.named, function(x, y) return x.name < y.name end)
  fn.plans[key] = p
  return p
end

-- The problem's trusted reference on the device: reference.cuda = { source = | file =, fn =, launch = }.
function B.reference(problem, _, arch)
  local r = problem.reference.cuda
  if not r then error("problem " .. problem.name .. " has no CUDA reference (reference.cuda)", 0) end
  local mod, msg, info = api().compile { source = r.source, file = r.file, name = problem.name .. "_ref.cu", arch = arch }
  if not mod then error("the CUDA reference of " .. problem.name .. " does not compile: " .. msg .. "\n" .. (info and info.log or ""), 0) end
  local single = mod:kernel(r.fn, problem:prototype(r.fn))
  local fn = launcher(mod, r.launch or problem.launch, {}, single)
  fn.problem, fn.reference = problem, true
  return fn
end

-- No view before compiling: the rules read the PTX NVRTC makes.
function B.view() return {} end
function B.check_view() return nil end

function B.compile(cand, recipe)
  return nvrtc().compile { source = cand.source, name = cand.name, defines = cand.defines,
                           flags = recipe.flags, arch = recipe.arch }
end

-- The compiles of candidates about to be measured, in the background (kwb.cuda.prebuild),
-- with compile's own spec, so a worker's compile of one finds it in the build directory.
-- The recipe's rules over the source come first, as in a build: a candidate they forbid
-- is not compiled here (the worker's build reports it).
function B.prebuild(cands, recipe)
  local specs = {}
  for _, cand in ipairs(cands) do
    if cand.source and not recipe.rules:check_source(cand.source) then
      specs[#specs + 1] = { source = cand.source, name = cand.name, defines = cand.defines, flags = recipe.flags,
                            arch = recipe.arch }
    end
  end
  return nvrtc().prebuild(specs)
end

-- prebuild_wait(limit) -> true once no build ahead is running, false after limit seconds.
function B.prebuild_wait(limit)
  local cuda, core = nvrtc(), require "kwb.core"
  local t0 = core.now()
  while cuda.prebuilds_running() > 0 do
    if core.now() - t0 >= limit then return false end
    core.sleep(0.01)
  end
  return true
end

function B.check_built(rs, mod, cand)
  return rs:check_ptx(mod:ptx(), cand.source, cand.name)
end

-- The cubin's code (core.code_digest: its sections without names or line
-- tables) with the candidate's parameters, which the launch plan reads: the
-- same cubin launched otherwise is not the same code. nil where the module
-- has no cubin it can read.
function B.code_digest(mod, cand)
  local image = mod.cubin and mod:cubin()
  local digest = image and image ~= "" and core.code_digest(image)
  if not digest then return nil end
  return core.sha256(digest .. "\nparameters " .. require("kwb.base.text").params_text(cand.params))
end

-- The launcher of a built candidate: every kernel any shape's plan names
-- must exist (steps), or the problem's entry point.
-- A planted candidate of kwb's own (kwb.measure.plants: cand.plant == "own")
-- is launched by the plants' plan instead.
function B.entry(mod, cand, recipe, prototype)
  local launch = recipe.launch or recipe.problem.launch
  if cand.plant == "own" then launch = require("kwb.measure.plants").launch(recipe.problem) end
  if not launch then error("recipe " .. recipe.name .. ": the cuda backend needs a launch plan (recipe or problem 'launch')", 0) end
  local fn = launcher(mod, launch, cand.params)
  fn.problem = recipe.problem
  local multi = false
  for _, sh in ipairs(recipe.shapes) do
    local l = read_plan(launch(sh.shape, fn.params), sh.key)
    if l.steps then
      multi = true
      for _, st in ipairs(l.steps) do
        local k, kmsg = step_kernel(fn, recipe.problem, st, l.scratch or {}, sh.key)
        if not k then return nil, kmsg end
      end
    end
  end
  if not multi then
    local fname = prototype:match("([%w_]+)%s*%(")
    local k, kmsg = mod:kernel(fname, prototype)
    if not k then return nil, tostring(kmsg) .. " (candidates export " .. prototype .. ")" end
    fn.kernel = k
  end
  return fn
end

-- The clock of the timeout: wall time (the GPU's work is not this process's).
B.clock = core.now

-- call(fn, bench, args) -> true | nil, message (a launch that fails). The
-- bench's `scratch` names the plan's scratch buffers (kwb.measure.verify checks their
-- guard bands); the reference's scratch is poisoned after its call, so no
-- intermediate of the expected outputs stays on the device either.
function B.call(fn, b, args)
  local p, msg = plan_for(fn, b, args, fn.problem)
  if not p then return nil, msg end
  for _, buf in ipairs(p.scratch) do buf:poison() end
  b.scratch = not fn.reference and p.named or nil
  local ok, err = p:run()
  if fn.reference then for _, buf in ipairs(p.scratch) do buf:poison() end end
  if not ok then return nil, err end   -- (crashed: the message names the step and the CUDA error)
  return true
end

-- Every timed run of a candidate gets fresh inputs and poisoned outputs, and
-- its outputs and guard bands are checked after it (kwb.measure.timed): one graph
-- replay a sample, through timed_call.
B.fresh_timing = true
-- Of the timed runs only the one after the last sample is verified against
-- the reference by default: a reference on the GPU can take as long as the
-- slowest candidate (a recipe's timing.verify_runs adds drawn ones).
B.verify_runs = 0
-- ... and that one on a set of a pool (kwb.measure.inputs.sets): the reference runs
-- once per set and run, its outputs held on the host, where one of its own
-- for every timing cost a 4096^3 SGEMM's checks 35 ms a timing.
B.pooled_checks = true

-- timed_call(fn, bench, args) -> true, seconds | nil, message: one replay of
-- the shape's plan as a CUDA graph, cold: its scratch poisoned and the L2
-- flush buffer written and read before the timed region.
function B.timed_call(fn, b, args)
  local p, msg = plan_for(fn, b, args, fn.problem)
  if not p then return nil, msg end
  if p.poisoned ~= "scratch" then
    p:poison_before(p.scratch)
    p.poisoned = "scratch"
  end
  b.scratch = p.named
  local s, err = p:replay(true)
  if not s then return nil, err end
  return true, s
end

-- time(fn, bench, opts, outs) -> stats (cold L2, graph replay) | nil, message:
-- the C timing loop, for the reference and the tools that time a plan
-- outside the judge. The output buffers `outs` are poisoned before every
-- timed run.
function B.time(fn, b, opts, outs)
  local p, msg = plan_for(fn, b, b.args, fn.problem)
  if not p then return nil, msg end
  if outs and p.poisoned ~= "outputs" then
    local all = { table.unpack(outs) }
    for _, buf in ipairs(p.scratch) do all[#all + 1] = buf end
    p:poison_before(all)
    p.poisoned = "outputs"
  end
  return api().time(p, opts)
end

return B
