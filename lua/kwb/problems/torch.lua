-- kwb/problems/torch.lua: a problem from a PyTorch module, in KernelBench's
-- format (class Model(nn.Module), get_inputs(), get_init_inputs()) or a plain
-- function of the file with get_inputs():
--
--   problem = require("kwb.problems.torch") { file = "model.py" }
--   problem = require("kwb.problems.torch") { file = "ops.py", fn = "scaled_gelu" }
--
-- Its reference is a process of its own (python/kwb_torch_ref.py, Python with
-- PyTorch) that the judge starts, owns and kills: it shares no address space
-- and no CUDA context with candidate code. kwb draws the inputs as for every
-- problem (its own seeded, secret streams) and hands them over through
-- shared memory; the process returns the expected outputs there. The
-- module's weights are drawn from the run's seed in that process (a weight
-- its initialisation leaves constant, zeros or ones, is drawn again around
-- that value) and are the candidate's fixed inputs. A reference process that
-- cannot start, dies, hangs or answers with the wrong shape or dtype is an
-- error of the problem, named as such: it stops the run and is never a
-- candidate's outcome.
--
-- The spec (what the process found by trying the module: the file's example
-- shapes, which dimensions may vary, a dimension tied to a weight staying
-- fixed) names the candidate's entry point's arguments, in this order: every
-- shape variable (int), every input (const T *), every weight (const T *),
-- every output (T *). Options:
--   file =       the Python file (relative paths from the recipe's folder)
--   fn =         a plain function of the file instead of class Model
--   name =       the problem's name (default: torch_<file's stem>)
--   entry =      the candidate's entry point (default: the name)
--   python =     the interpreter (default: $KWB_PYTHON, else the first of
--                python3 and /usr/bin/python3 that imports torch)
--   spec =       the spec as `kwb import` wrote it (default: probed now)
--   tolerance =  { atol =, rtol = } (default: M.tolerance(spec), by the
--                outputs' dtypes and the example outputs' scale)
--   timeout =    seconds the process may take for one answer (default 300)
--   device =     where the reference computes: "cpu" or "cuda" (default:
--                the recipe's backend's)
local core = require "kwb.core"
local problem = require "kwb.problem"

local M = {}

local ctype = { f32 = "float", f64 = "double", f16 = "uint16_t", bf16 = "uint16_t", i8 = "int8_t", u8 = "uint8_t",
                i32 = "int32_t", i64 = "int64_t" }
local size_of = { f32 = 4, f64 = 8, f16 = 2, bf16 = 2, i8 = 1, u8 = 1, i32 = 4, i64 = 8 }

-- Tolerances by dtype: relative, and absolute as that part of the example
-- output's scale (a constant output is then refused: kwb.measure.verify's
-- degenerate check, at load).
M.tolerances = { f64 = 1e-9, f32 = 1e-3, f16 = 1e-2, bf16 = 2e-2 }

-- tolerance(spec) -> { atol =, rtol = }: one for every output (the problem
-- has one), so as strict as the strictest needs: rtol the largest of the
-- floating outputs' dtypes' (what the least precise one can meet), atol that
-- part of the smallest of their scales (kwb_torch_ref.py's scale: the RMS,
-- or the median magnitude where smaller), so an output of small elements
-- beside one of large ones is held to its own scale, not the larger's.
-- (A spec written before `scale` has each output's RMS.)
function M.tolerance(spec)
  local rtol, least
  for _, o in ipairs(spec.outputs) do
    local rel = M.tolerances[o.dtype]
    if rel then
      rtol = math.max(rtol or 0, rel)
      local s = math.max(o.scale or o.rms or 0, 1e-30)
      least = math.min(least or s, s)
    end
  end
  if not rtol then return { atol = 0, rtol = 0 } end
  return { atol = rtol * least, rtol = rtol }
end

-- ---- the interpreter ------------------------------------------------------

local found = {}

local function imports_torch(py)
  local r = core.exec({ py, "-c", "import torch, sys; print(sys.executable, torch.__version__)" }, { timeout = 120 })
  if r and r.status == 0 then return r.out:gsub("%s+$", "") end
  local why = r and ((r.err:match("([^\n]+)\n?$")) or ("exit " .. r.status)) or "cannot run it"
  return nil, why
end

-- python(given) -> the interpreter to use, and what it said of itself:
-- the one named (given, else $KWB_PYTHON), else the first of python3 on the
-- PATH and /usr/bin/python3 that imports torch.
function M.python(given)
  local named = given or os.getenv("KWB_PYTHON")
  if named and named ~= "" then
    if found[named] then return named, found[named] end
    local about, why = imports_torch(named)
    if not about then
      error(string.format("the Python named (%s, by %s) cannot import torch: %s", named,
                          given and "python =" or "KWB_PYTHON", why), 0)
    end
    found[named] = about
    return named, about
  end
  local tried = {}
  for _, py in ipairs { "python3", "/usr/bin/python3" } do
    if found[py] then return py, found[py] end
    local about, why = imports_torch(py)
    if about then found[py] = about; return py, about end
    tried[#tried + 1] = py .. " (" .. why .. ")"
  end
  error("no Python that imports torch: tried " .. table.concat(tried, ", ")
        .. "; install PyTorch or name an interpreter with KWB_PYTHON or python =", 0)
end

-- ---- the reference process ------------------------------------------------

local Ref = {}
Ref.__index = Ref

local function problem_error(what, msg)
  error(string.format("problem %s: the reference process %s", what, msg), 0)
end

-- start(opts) -> a reference process with the module loaded (seed: its weights')
function M.start(opts)
  local py = M.python(opts.python)
  local ch, why = core.child({ py, "-c", core.python_source("kwb_torch_ref") }, { shm = opts.shm or (1 << 20) })
  if not ch then problem_error(opts.what, "cannot start: " .. tostring(why)) end
  local r = setmetatable({ ch = ch, python = py, what = opts.what, timeout = opts.timeout or 300, owner = core.pid() }, Ref)
  local hello = r:answer(opts.timeout or 300, "starting")
  r.torch, r.cuda = hello.torch, hello.cuda
  r:ask({ op = "load", file = opts.file, fn = opts.fn, seed = opts.seed or 0, device = opts.device or "cpu" })
  r.seed = opts.seed or 0
  return r
end

function Ref:close()
  if self.ch and self.owner == core.pid() then self.ch:close() end
  self.ch = nil
end

-- Closed, and raised as having died (how) while or before doing something,
-- with the last line it wrote to its stderr.
function Ref:died(how, when)
  local err = self.ch:stderr():gsub("%s+$", "")
  self:close()
  problem_error(self.what, string.format("died (%s) %s%s", how, when,
                                        err ~= "" and (": " .. (err:match("([^\n]+)$") or err)) or ""))
end

-- The next answer: a table with ok = true, or an error of the problem.
function Ref:answer(limit, doing)
  local line, why, how = self.ch:recv(limit)
  if not line and why == "timeout" then
    self:close()
    problem_error(self.what, string.format("gave no answer in %g s (%s); it was killed", limit, doing))
  end
  if not line then self:died(how, "while " .. doing) end
  local ok, ans = pcall(require("cjson").decode, line)
  if not ok or type(ans) ~= "table" then
    self:close()
    problem_error(self.what, "answered what is not JSON while " .. doing .. ": " .. line:sub(1, 200))
  end
  if not ans.ok then problem_error(self.what, "failed while " .. doing .. ": " .. tostring(ans.error)) end
  return ans
end

function Ref:ask(req, doing)
  if not self.ch then problem_error(self.what, "is closed") end
  local sent, _, how = self.ch:send(require("cjson").encode(req) .. "\n")
  doing = doing or (req.op == "call" and "computing the reference" or req.op)
  if not sent then self:died(how, "before " .. doing) end
  return self:answer(self.timeout, doing)
end

-- Room in the shared region for these many bytes (the process maps it again).
function Ref:room(bytes)
  if bytes > self.ch:size() then
    self.ch:grow(math.max(bytes, 2 * self.ch:size()))
    self:ask { op = "map" }
  end
end

-- ---- the problem ------------------------------------------------------------

-- A dims list as a shape expression ("M*K", "64*N"), and the tensor's
-- element count at a shape.
local function shape_expr(dims)
  if #dims == 0 then return 1 end
  local parts = {}
  for i, d in ipairs(dims) do parts[i] = math.type(d) == "integer" and tostring(d) or "(" .. d .. ")" end
  return table.concat(parts, "*")
end

local function count(dims, shape)
  local n = 1
  for _, d in ipairs(dims) do
    if math.type(d) == "integer" then n = n * d
    else for part in d:gmatch("[^*]+") do n = n * (tonumber(part) or shape[part]) end end
  end
  return n
end

local function stem(file) return (file:match("([^/]+)$") or file):gsub("%.py$", "") end

-- The spec checked, its whole numbers made integers (JSON's numbers come
-- back as floats).
local function check_spec(spec, file)
  for _, k in ipairs { "vars", "inputs", "weights", "outputs" } do
    if type(spec[k]) ~= "table" then error(string.format("%s: the spec has no '%s' list", file, k), 0) end
  end
  for _, v in ipairs(spec.vars) do v.value = math.tointeger(v.value) or v.value end
  for _, group in ipairs { spec.inputs, spec.weights, spec.outputs } do
    for _, e in ipairs(group) do
      for i, d in ipairs(e.dims) do e.dims[i] = math.tointeger(d) or d end
      if e.init then for i, x in ipairs(e.init) do e.init[i] = math.tointeger(x) or x end end
      if e.index then e.index = math.tointeger(e.index) end
    end
  end
  if #spec.outputs == 0 then error(file .. ": the module returns no tensor", 0) end
  for _, group in ipairs { spec.inputs, spec.weights, spec.outputs } do
    for _, e in ipairs(group) do
      if not ctype[e.dtype] then error(string.format("%s: %s has dtype %s", file, tostring(e.name), tostring(e.dtype)), 0) end
    end
  end
  return spec
end

-- probe(opts) -> the spec of the module (a process started for it and closed)
function M.probe(opts)
  local r = M.start(opts)
  local ok, ans = pcall(r.ask, r, { op = "probe" }, "trying the module's shapes")
  r:close()
  if not ok then error(ans, 0) end
  return check_spec(ans.spec, opts.file), r.python, r.torch
end

-- spec_json(spec) -> the spec as JSON, its lists as lists where they are
-- empty too (lua-cjson writes an empty table as {}; the spec's lists are
-- fixed by name, and no string of it can hold `"name":{}` unescaped)
function M.spec_json(spec)
  local text = require("cjson").encode(spec)
  for _, k in ipairs { "vars", "inputs", "consts", "weights", "outputs", "dims", "init" } do
    text = text:gsub('"' .. k .. '":{}', '"' .. k .. '":[]')
  end
  return text
end

-- The candidate's C prototype, as `kwb import` writes it into a recipe.
function M.prototype(spec, entry)
  local ps = {}
  for _, v in ipairs(spec.vars) do ps[#ps + 1] = "int " .. v.name end
  for _, e in ipairs(spec.inputs) do ps[#ps + 1] = "const " .. ctype[e.dtype] .. " *" .. e.name end
  for _, e in ipairs(spec.weights) do ps[#ps + 1] = "const " .. ctype[e.dtype] .. " *" .. e.name end
  for _, e in ipairs(spec.outputs) do ps[#ps + 1] = ctype[e.dtype] .. " *" .. e.name end
  return string.format("void %s(%s)", entry, table.concat(ps, ", "))
end

return setmetatable(M, { __call = function(_, opts)
  if type(opts) ~= "table" or type(opts.file) ~= "string" then
    error("kwb.problems.torch: give { file = \"model.py\" } (KernelBench's format), optionally fn =, name =, spec =", 2)
  end
  local known = { file = 1, fn = 1, name = 1, entry = 1, python = 1, spec = 1, tolerance = 1, timeout = 1, device = 1,
                  dir = 1, launch = 1 }
  for k in pairs(opts) do
    if not known[k] then error("kwb.problems.torch: unknown option '" .. tostring(k) .. "'", 2) end
  end
  local file = opts.file
  if file:sub(1, 1) ~= "/" then
    local loading = require("kwb.base.site").loading
    local from = opts.dir or (loading[#loading] and loading[#loading]:match("^(.*)/[^/]*$"))
    if from then file = from .. "/" .. file end
  end
  local text = require("kwb.base.files").read_file(file)
  if not text then error("kwb.problems.torch: cannot read " .. file, 2) end
  local name = opts.name or ("torch_" .. stem(file):gsub("[^%w_]", "_"))
  local what = name .. " (" .. file .. ")"
  local spec = opts.spec
  if not spec then spec = M.probe { file = file, fn = opts.fn, python = opts.python, what = what, timeout = opts.timeout } end
  check_spec(spec, file)
  local entry = opts.entry or name

  -- One reference process per kwb process (a worker starts its own), with
  -- the module's weights drawn from `seed`.
  -- (a process that failed once is the problem's error for the rest of this
  -- process's life: said again at once, never started again per candidate)
  local ref, broken
  local function process(seed, device)
    if broken then error(broken, 0) end
    device = opts.device or device or "cpu"
    if ref and ref.ch and ref.owner == core.pid() and (seed == nil or ref.seed == seed) and ref.device == device then
      return ref
    end
    local keep = ref and ref.seed
    if ref then ref:close() end
    ref = M.start { file = file, fn = opts.fn, python = opts.python, what = what, timeout = opts.timeout,
                    seed = seed or keep or 0, device = device }
    ref.device = device
    return ref
  end

  -- Buffers in and out of the shared region: a device buffer through a host
  -- copy (and the reference then computes on the GPU, in its own context).
  local host_mt = getmetatable(core.buffer("u8", 0))
  local function on_host(buf) return getmetatable(buf) == host_mt end
  local function put(r, off, buf, dtype, n)
    if on_host(buf) then r.ch:put(off, buf)
    else local h = core.buffer(dtype, n); buf:download(h); r.ch:put(off, h) end
  end
  local function get(r, off, buf, dtype, n)
    if on_host(buf) then r.ch:get(off, buf)
    else local h = core.buffer(dtype, n); r.ch:get(off, h); buf:upload(h) end
  end
  local function device_of(bufs)
    for _, b in pairs(bufs) do return on_host(b) and "cpu" or "cuda" end
  end

  local function dims_of(shape)
    local dims = {}
    for _, v in ipairs(spec.vars) do dims[v.name] = shape[v.name] end
    return dims
  end

  local function layout(shape)
    local at, off, list = {}, 0, {}
    for _, group in ipairs { spec.inputs, spec.weights, spec.outputs } do
      for _, e in ipairs(group) do
        local n = count(e.dims, shape)
        at[e.name] = off
        list[#list + 1] = { e = e, n = n, off = off }
        off = off + ((n * size_of[e.dtype] + 63) // 64) * 64
      end
    end
    return at, list, off
  end

  local p
  local function fails_for_good(fn)
    return function(...)
      local ok, err = pcall(fn, ...)
      if not ok then
        if tostring(err):find("the reference process", 1, true) then broken = broken or err end
        error(err, 0)
      end
    end
  end
  local reference, fill_weights
  reference = fails_for_good(function(bufs, shape)
    local r = process(nil, device_of(bufs))
    local at, list, bytes = layout(shape)
    r:room(bytes)
    local nin = #spec.inputs + #spec.weights
    for i, x in ipairs(list) do
      if i <= nin then put(r, x.off, bufs[x.e.name], x.e.dtype, x.n) end
    end
    r:ask({ op = "call", spec = spec, dims = dims_of(shape), at = at }, "computing the reference at " .. p:shape_key(shape))
    for i = nin + 1, #list do get(r, list[i].off, bufs[list[i].e.name], list[i].e.dtype, list[i].n) end
  end)

  -- The weights: the first one's init fills them all from the process's
  -- module, drawn from that seed.
  fill_weights = fails_for_good(function(_, seed, shape, bufs)
    local r = process(seed, device_of(bufs))
    local at, list, bytes = layout(shape)
    r:room(bytes)
    local pairs_ = {}
    for _, e in ipairs(spec.weights) do pairs_[#pairs_ + 1] = { e.name, at[e.name] } end
    r:ask({ op = "weights", at = pairs_ }, "handing over the module's weights")
    for i = #spec.inputs + 1, #spec.inputs + #spec.weights do   -- (the layout's weights, after the inputs)
      local x = list[i]
      get(r, x.off, bufs[x.e.name], x.e.dtype, x.n)
    end
  end)

  local vars, args = {}, {}
  for _, v in ipairs(spec.vars) do
    vars[#vars + 1] = v.name
    args[#args + 1] = { v.name, "i32", value = v.name }
  end
  for _, e in ipairs(spec.inputs) do
    args[#args + 1] = { e.name, e.dtype, shape = shape_expr(e.dims), role = "in", init = e.init or { "normal", 0, 1 } }
  end
  for i, e in ipairs(spec.weights) do
    args[#args + 1] = { e.name, e.dtype, shape = shape_expr(e.dims), role = "in", fixed = true,
                        init = i == 1 and fill_weights or false }
  end
  for _, e in ipairs(spec.outputs) do args[#args + 1] = { e.name, e.dtype, shape = shape_expr(e.dims), role = "out" } end
  local tol = opts.tolerance or M.tolerance(spec)
  p = problem.define {
    name = name,
    description = "the PyTorch module in " .. file .. (opts.fn and (", function " .. opts.fn) or ""),
    vars = vars,
    fn = entry,
    args = args,
    reference = reference,
    tolerance = tol,
    options = { module = core.sha256(text):sub(1, 12) },
    bytes = function(s)
      local n = 0
      for _, group in ipairs { spec.inputs, spec.weights, spec.outputs } do
        for _, e in ipairs(group) do n = n + size_of[e.dtype] * count(e.dims, s) end
      end
      return n
    end,
    launch = opts.launch or function(shape, params)
      local n = count(spec.outputs[1].dims, shape)
      local block = params and params.BLOCK or 256
      return { grid = { (n + block - 1) // block }, block = { block } }
    end,
  }
  -- time(shape, mode, device [, o]) -> samples (seconds) | nil, why it was
  -- skipped: the module itself, "eager", "graph" (a CUDA graph of it) or
  -- "compile" (torch.compile's), timed by its process (kwb_torch_ref.py's time)
  local function time(shape, mode, dev, o)
    o = o or {}
    local r = process(nil, dev)
    local ans = r:ask({ op = "time", spec = spec, dims = dims_of(shape), mode = mode, target = o.target or 0.2,
                        min_samples = o.min_samples or 10, max_samples = o.max_samples or 1000, seed = o.seed or 0,
                        package = o.package },
                      "timing PyTorch's " .. mode .. " at " .. p:shape_key(shape))
    if ans.skipped then return nil, ans.skipped end
    return ans.samples
  end
  p.torch = { file = file, fn = opts.fn, spec = spec, entry = entry, time = time,
              close = function() if ref then ref:close() end end }
  return p
end })
