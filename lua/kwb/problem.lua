-- kwb/problem.lua: problem specs: what a kernel computes, independent of how.
--
--   problem.define {
--     name = "matmul", vars = { "n" },
--     fn = "matmul",                    -- the entry point every candidate exports
--     args = {
--       { "n", "i32", value = "n" },                                   -- a scalar
--       { "a", "f32", shape = "n*n", role = "in", init = { "normal", 0, 1 } },
--       { "c", "f32", shape = "n*n", role = "out" },
--     },
--     reference = { source = "...", fn = "matmul_ref" },   -- or { file = }, or a Lua function
--     tolerance = { atol = 1e-3, rtol = 1e-4 },
--     bytes = function(s) return 12 * s.n^2 end, flops = function(s) return 2 * s.n^3 end,
--     launch = function(shape, params) return { grid = {...}, block = {...} } end,  -- GPU only
--   }
--
-- A GPU layer of several kernels returns launch steps instead of one grid:
--   launch = function(shape, params) return {
--     steps = { { "up", grid = {...}, block = 256, smem = 0, args = { "T", "x", "h", ... } }, ... },
--     scratch = { h = { "bf16", T * K * I } },       -- poisoned before every call
--   } end
-- Each step names a kernel the candidate exports and its arguments: names of
-- the problem's arguments or of scratch buffers, or { dtype, value } literals.
--
-- More argument fields: fixed = true (an input filled once per session from
-- the run's seed and shared by every shape where it has the same size: model
-- weights); init = function(buf, seed, shape, bufs) may fill siblings through
-- bufs (by name), and init = false marks an input a sibling's init fills
-- (the sibling comes first in args). A variable given as { "skew", min = 0 }
-- may be 0 (a switch, like the routing generator).
-- draw = "run": inputs come from the run's seed and the round, not from the
-- candidate's, so the reference runs once per shape and round (an expensive
-- reference); draw = "candidate" (the default) draws new inputs per candidate.
-- vary = { "T" }: the variables an unannounced verification shape may change
-- (kwb.measure.unannounced; default: every variable that may not be 0).
-- tolerance = { rel_l2 = 5e-3 }: the relative L2 error of the whole output
-- instead of elementwise atol/rtol (NaN, Inf and unwritten elements still fail).
--
-- Shape expressions ("n*n", "M*K") are Lua expressions over the shape variables
-- (math functions allowed), or functions of the shape table.
local M = {}

local Problem = {}
Problem.__index = Problem
M.Problem = Problem

local roles = { ["in"] = true, out = true, inout = true }
-- The C types of scalar arguments (also the CUDA backend's step prototypes).
local scalar_ctype = { i32 = "int", u32 = "unsigned", i64 = "int64_t", u64 = "uint64_t",
                       f32 = "float", f64 = "double" }
M.scalar_ctype = scalar_ctype
local buffer_ctype = { f32 = "float", f64 = "double", f16 = "uint16_t", bf16 = "uint16_t",
                       i8 = "int8_t", i32 = "int32_t", i64 = "int64_t", u8 = "uint8_t",
                       u32 = "uint32_t", u64 = "uint64_t" }
local generators = { normal = true, uniform = true, value = true }

-- A mistake in a spec is raised as an object that prints as its one sentence,
-- "file:line: problem x: ..." (the line of the define call), without a
-- traceback into kwb's own files. level: as error()'s.
local DefineError = { __tostring = function(e) return e.message end }
M.DefineError = DefineError

local function fail(where, msg, level)
  local info = debug.getinfo(level or 3, "Sl")
  local at = info and info.currentline > 0 and string.format("%s:%d: ", info.short_src, info.currentline) or ""
  error(setmetatable({ code = "bad-problem", message = string.format("%sproblem %s: %s", at, where, msg) }, DefineError), 0)
end

-- An expression over the shape variables -> function(shape) -> number.
local function compile_expr(expr, vars, where)
  if type(expr) == "function" then return expr end
  if math.type(expr) == "integer" then return function() return expr end end
  if type(expr) ~= "string" then fail(where, "expected an expression string, a function or an integer, got " .. type(expr), 4) end
  local env = setmetatable({}, { __index = function(_, k)
    error(string.format("unknown shape variable '%s' in %s '%s'", k, where, expr), 0)
  end })
  local chunk, err = load("return " .. expr, "=" .. where, "t", env)
  if not chunk then fail(where, string.format("cannot read the expression '%s': %s", expr, err), 4) end
  return function(shape)
    for k in pairs(env) do env[k] = nil end
    for k, v in pairs(math) do rawset(env, k, v) end
    for _, v in ipairs(vars) do rawset(env, v, shape[v]) end
    return chunk()
  end
end

-- baselines = { name = { source = | file = (absolute), fn =, defines =, description = }
-- or { plan = function(harness) -> maker | nil, why, description = } }: what a
-- recipe's `baseline = "name"` may name (kwb.measure.baseline).
local function check_baselines(name, bls)
  if bls == nil then return nil end
  if type(bls) ~= "table" then fail(name, "'baselines' must be a table of name = { ... }") end
  for k, b in pairs(bls) do
    local where = string.format("baselines.%s", tostring(k))
    if type(k) ~= "string" or not k:match("^[%w_%-]+$") then fail(name, "baseline names are words, got " .. tostring(k)) end
    if type(b) ~= "table" then fail(name, where .. " must be a table") end
    local kinds = (b.plan ~= nil and 1 or 0) + ((b.source ~= nil or b.file ~= nil) and 1 or 0)
    if kinds ~= 1 or (b.plan ~= nil and type(b.plan) ~= "function") then
      fail(name, where .. " needs either plan = function(harness) or source = | file =")
    end
    for f in pairs(b) do
      if not ({ plan = 1, source = 1, file = 1, fn = 1, defines = 1, description = 1 })[f] then
        fail(name, string.format("%s: unknown field '%s' (known: plan, source, file, fn, defines, description)", where, tostring(f)))
      end
    end
  end
  return bls
end

-- define(spec) -> problem object; raises on a malformed spec.
function M.define(spec)
  if type(spec) ~= "table" then error("problem.define expects a table", 2) end
  local known = { name = 1, vars = 1, args = 1, fn = 1, reference = 1, tolerance = 1,
                  bytes = 1, flops = 1, launch = 1, options = 1, description = 1, draw = 1, vary = 1, baselines = 1 }
  for k in pairs(spec) do
    if not known[k] then fail("'" .. tostring(spec.name) .. "'", "unknown field '" .. tostring(k) .. "'") end
  end
  local name = spec.name
  if type(name) ~= "string" or not name:match("^[%w_%-]+$") then fail("name", "expected a word like 'matmul'") end
  local p = setmetatable({ name = name, description = spec.description, options = spec.options or {} }, Problem)
  if type(spec.vars) ~= "table" or #spec.vars == 0 then fail(name, "'vars' must list the shape variables") end
  p.vars = {}
  p.var_min = {}
  for i, v in ipairs(spec.vars) do
    local min = 1
    if type(v) == "table" then   -- { "skew", min = 0 }: a variable that may be 0 (a switch)
      min = v.min
      if min ~= 0 and min ~= 1 then fail(name, "vars[" .. i .. "].min must be 0 or 1") end
      v = v[1]
    end
    if type(v) ~= "string" or not v:match("^[%a_][%w_]*$") then fail(name, "vars[" .. i .. "] must be an identifier") end
    p.vars[i], p.var_min[v] = v, min
  end
  -- vary: the variables an unannounced shape may change (kwb.measure.unannounced)
  if spec.vary ~= nil then
    if type(spec.vary) ~= "table" then fail(name, "'vary' must list shape variables") end
    for i, v in ipairs(spec.vary) do
      if p.var_min[v] == nil then fail(name, "vary[" .. i .. "] is not a shape variable: " .. tostring(v)) end
    end
    p.vary = spec.vary
  end
  p.fn = spec.fn or name
  if type(p.fn) ~= "string" or not p.fn:match("^[%a_][%w_]*$") then fail(name, "'fn' must be a C identifier") end
  if type(spec.args) ~= "table" or #spec.args == 0 then fail(name, "'args' must list the kernel's arguments") end
  p.args, p.buffers = {}, {}
  for i, a in ipairs(spec.args) do
    local where = string.format("%s args[%d]", name, i)
    if type(a) ~= "table" then fail(where, "expected a table") end
    local arg = { name = a.name or a[1], dtype = a.dtype or a[2], role = a.role, index = i }
    if type(arg.name) ~= "string" or not arg.name:match("^[%a_][%w_]*$") then fail(where, "needs a name") end
    where = string.format("%s argument '%s'", name, arg.name)
    if a.shape ~= nil then
      if not buffer_ctype[arg.dtype] then fail(where, "dtype must be one of f32, f64, f16, bf16, i8, i32, i64, u8, u32, u64, got " .. tostring(arg.dtype)) end
      arg.kind = "buffer"
      arg.size = compile_expr(a.shape, p.vars, where .. " shape")
      arg.expr = type(a.shape) == "string" and a.shape or nil
      arg.role = arg.role or "in"
      if not roles[arg.role] then fail(where, "role must be 'in', 'out' or 'inout', got " .. tostring(arg.role)) end
      if a.fixed ~= nil and (a.fixed ~= true or arg.role ~= "in") then
        fail(where, "fixed = true is for inputs (role 'in') only")
      end
      arg.fixed = a.fixed == true
      local init = a.init
      if init == nil then init = { "normal", 0, 1 } end
      if init == false then
        if arg.role ~= "in" then fail(where, "init = false (filled by a sibling's init) is for inputs (role 'in') only") end
      elseif type(init) == "table" and not generators[init[1]] then
        fail(where, "init must be { 'normal', mean, std }, { 'uniform', lo, hi }, { 'value', v } or a function(buffer, seed, shape)")
      elseif type(init) ~= "table" and type(init) ~= "function" then
        fail(where, "init must be a table or a function")
      end
      arg.init = init
      p.buffers[#p.buffers + 1] = arg
    else
      if not scalar_ctype[arg.dtype] then fail(where, "a scalar needs a dtype among i32, u32, i64, u64, f32, f64, got " .. tostring(arg.dtype)) end
      if a.value == nil then fail(where, "a scalar needs 'value' (an expression of the shape) or 'shape' to be a buffer") end
      arg.kind = "scalar"
      arg.value = compile_expr(a.value, p.vars, where .. " value")
      arg.expr = type(a.value) == "string" and a.value or nil
    end
    p.args[i] = arg
  end
  local ref = spec.reference
  if type(ref) == "function" then p.reference = { lua = ref }
  elseif type(ref) == "table" and (ref.source or ref.file or ref.cuda) then
    p.reference = { source = ref.source, file = ref.file, fn = ref.fn or (p.fn .. "_ref"), flags = ref.flags }
    if ref.cuda ~= nil then
      local c = ref.cuda
      if type(c) ~= "table" or (type(c.source) ~= "string" and type(c.file) ~= "string") then
        fail(name, "'reference.cuda' must be { source = | file =, fn =, launch = }")
      end
      if c.launch ~= nil and type(c.launch) ~= "function" then fail(name, "'reference.cuda.launch' must be a function(shape)") end
      p.reference.cuda = { source = c.source, file = c.file, fn = c.fn or (p.fn .. "_ref"), launch = c.launch }
    end
  else fail(name, "'reference' must be a Lua function or { source = | file =, fn =, cuda = }") end
  local tol = spec.tolerance or {}
  if type(tol) ~= "table" then fail(name, "'tolerance' must be { atol =, rtol = }") end
  for k, v in pairs(tol) do
    if not (k == "atol" or k == "rtol" or k == "rel_l2") or type(v) ~= "number" or v < 0 then
      fail(name, string.format("tolerance.%s: expected atol, rtol or rel_l2 as a number >= 0", tostring(k)))
    end
  end
  if tol.rel_l2 and (tol.atol or tol.rtol) then fail(name, "tolerance: rel_l2 replaces atol and rtol; give one or the other") end
  p.tolerance = { atol = tol.atol or 0, rtol = tol.rtol or 0, rel_l2 = tol.rel_l2 }
  p.draw = spec.draw or "candidate"
  if p.draw ~= "candidate" and p.draw ~= "run" then fail(name, "'draw' must be 'candidate' or 'run', got " .. tostring(p.draw)) end
  for _, f in ipairs { "bytes", "flops" } do
    if spec[f] ~= nil then p[f] = compile_expr(spec[f], p.vars, name .. " " .. f) end
  end
  if spec.launch ~= nil and type(spec.launch) ~= "function" then fail(name, "'launch' must be a function(shape, params)") end
  p.launch = spec.launch
  p.baselines = check_baselines(name, spec.baselines)
  return p
end

-- The C prototype candidates must export, e.g.
-- "void matmul(int n, const float *a, const float *b, float *c)".
function Problem:prototype(fname)
  local parts = {}
  for i, a in ipairs(self.args) do
    if a.kind == "scalar" then parts[i] = scalar_ctype[a.dtype] .. " " .. a.name
    else parts[i] = (a.role == "in" and "const " or "") .. buffer_ctype[a.dtype] .. " *" .. a.name end
  end
  return string.format("void %s(%s)", fname or self.fn, table.concat(parts, ", "))
end

-- A stable text naming the problem and its options (part of every result key).
function Problem:key()
  local opts = {}
  for k, v in pairs(self.options) do opts[#opts + 1] = k .. "=" .. tostring(v) end
  table.sort(opts)
  if #opts == 0 then return self.name end
  return self.name .. "{" .. table.concat(opts, ",") .. "}"
end

-- The most elements one buffer may have (2^53, the integers a double holds
-- exactly, far past any machine's memory): a size past it has overflowed.
M.max_elements = 1 << 53

-- The ranges of the integer scalar types (u64: what a Lua integer holds).
local int_range = { i32 = { -(1 << 31), (1 << 31) - 1 }, u32 = { 0, (1 << 32) - 1 },
                    i64 = { math.mininteger, math.maxinteger }, u64 = { 0, math.maxinteger } }

-- Every argument's size or value at a shape, checked before anything is
-- allocated: a buffer's size a whole number >= 1 and at most max_elements, a
-- scalar of an integer type in its type's range. The expression is evaluated
-- a second time on the shape's values as floats, which do not wrap around:
-- where the two disagree, the integer arithmetic overflowed.
local function check_args(p, shape)
  local fshape = {}
  for k, x in pairs(shape) do fshape[k] = x + 0.0 end
  for _, a in ipairs(p.args) do
    local fn = a.kind == "buffer" and a.size or a.value
    local ok, v = pcall(fn, shape)
    local src = a.expr and (" (" .. a.expr .. ")") or ""
    if not ok then return nil, string.format("argument '%s': %s", a.name, tostring(v)) end
    local fok, f = pcall(fn, fshape)
    local exact = fok and type(f) == "number" and f == f and f or nil
    local n = math.tointeger(v)
    if a.kind == "buffer" then
      if exact and exact > M.max_elements then
        return nil, string.format("argument '%s' would have %.4g elements%s, more than a buffer can hold (2^53)",
                                  a.name, exact, src)
      end
      if exact and n and math.abs(exact - n) > 1e-9 * math.abs(exact) then
        return nil, string.format("argument '%s' has size%s %.0f, past 64-bit integers (computed, wrapped around: %d)",
                                  a.name, src, exact, n)
      end
      if not n or n < 1 then
        return nil, string.format("argument '%s' has size %s%s, not a whole number of elements >= 1", a.name,
                                  type(v) == "string" and string.format("%q", v) or tostring(v), src)
      end
    elseif int_range[a.dtype] then
      local r = int_range[a.dtype]
      if not n or n < r[1] or n > r[2] or (exact and math.abs(exact - n) > 1e-9 * math.abs(exact)) then
        return nil, string.format("argument '%s' (%s) is %s%s, not an integer in %s's range %d..%d", a.name, a.dtype,
                                  exact and n == nil and string.format("%.17g", exact) or tostring(v), src, a.dtype,
                                  r[1], r[2])
      end
    elseif type(v) ~= "number" then
      return nil, string.format("argument '%s' (%s) is %s%s, not a number", a.name, a.dtype, tostring(v), src)
    end
  end
  return true
end

-- Check a shape table: every variable a positive integer, and every
-- argument's size and value sound at it (check_args).
function Problem:check_shape(shape)
  for k in pairs(shape) do
    local ok = false
    for _, v in ipairs(self.vars) do ok = ok or v == k end
    if not ok then return nil, string.format("'%s' is not a shape variable of %s (it has: %s)", tostring(k), self.name, table.concat(self.vars, ", ")) end
  end
  for _, v in ipairs(self.vars) do
    if math.type(shape[v]) ~= "integer" or shape[v] < self.var_min[v] then
      return nil, string.format("shape variable '%s' must be %s integer, got %s", v,
                                self.var_min[v] == 0 and "a non-negative" or "a positive", tostring(shape[v]))
    end
  end
  local ok, why = check_args(self, shape)
  if not ok then return nil, string.format("at %s: %s", self:shape_key(shape), why) end
  return true
end

-- "n=64" or "M=128,N=64": shapes as stable keys, in the order of vars.
function Problem:shape_key(shape)
  local parts = {}
  for i, v in ipairs(self.vars) do parts[i] = v .. "=" .. tostring(shape[v]) end
  return table.concat(parts, ",")
end

function Problem:bytes_of(shape) return self.bytes and self.bytes(shape) or nil end
function Problem:flops_of(shape) return self.flops and self.flops(shape) or nil end

function Problem:__tostring()
  return string.format("kwb.problem %s (%s)", self:key(), table.concat(self.vars, ", "))
end

-- Problems named by a string come from kwb.problems.<name>.
function M.get(name)
  local ok, mod = pcall(require, "kwb.problems." .. name)
  if not ok and not tostring(mod):find("module 'kwb.problems." .. name .. "' not found", 1, true) then
    return nil, string.format("problem '%s' fails to load: %s", name, tostring(mod))
  end
  if not ok then return nil, string.format("no problem named '%s' (no module kwb.problems.%s)", name, name) end
  if getmetatable(mod) == Problem then return mod end
  if type(mod) == "function" or (type(mod) == "table" and getmetatable(mod) and getmetatable(mod).__call) then
    return mod {}
  end
  return nil, string.format("kwb.problems.%s returns neither a problem nor a problem constructor", name)
end

function M.is_problem(v) return getmetatable(v) == Problem end

-- shape_set(key) -> a shape key's variables as a set: "rows=64,cols=100" and
-- "cols=100,rows=64" give one string (a key without names, "1000", stands
-- for itself).
function M.shape_set(key)
  local t = {}
  for part in key:gmatch("[^,]+") do
    local k, v = part:match("^%s*([%w_]+)%s*=%s*(.-)%s*$")
    if not k then return key end
    t[#t + 1] = k .. "=" .. v
  end
  table.sort(t)
  return table.concat(t, ",")
end

return M
