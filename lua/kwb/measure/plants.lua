-- kwb/measure/plants.lua: planted candidates, the judge's self-test. From a
-- problem's signature (its arguments: inputs and outputs, their types and
-- sizes) and the recipe's start kernel, kernels that must never pass the
-- judge, in the problem's language: C for the host, CUDA for the GPU (one
-- text for both: what differs is behind __CUDACC__, so the CUDA stand-in of
-- the tests, which compiles C, runs the same plants).
--
--   writes nothing        returns at once: every output left as it was (poison)
--   writes zeros          every element of every output 0
--   writes a constant     every element 1 (1.0 for floating-point outputs)
--   copies an input       each output a copy of an input of its type and size
--   writes NaN            every element of every output NaN
--   mutates an input      the start kernel's outputs, then one bit of an input flipped
--   correct once, then returns early
--                         the start kernel on its first call, nothing after (a
--                         static counter under an assembler name, which no rule
--                         reads: the verification must find it, not the
--                         global-state rule; on the GPU a device global counted
--                         once a launch by its last block)
--
-- derive(recipe, start) -> plants, skipped: plants = { { name =, source =,
-- defines =, own_plan = bool } ... }; skipped = { { name =, why = } ... },
-- the plants the problem gives no way to write. A plant with own_plan is one
-- kernel with the problem's prototype (its outputs written in a grid-stride
-- loop on the GPU), launched by launch(problem) below; the others wrap the
-- start kernel (with its defines) and are launched by the recipe's plan.
local M = {}

M.names = { "writes nothing", "writes zeros", "writes a constant", "copies an input", "writes NaN",
            "mutates an input", "correct once, then returns early" }

-- Each dtype as the C type of its bits, and its 0, 1 and NaN as bit patterns.
local bits = { f32 = "unsigned int", f64 = "unsigned long long", f16 = "unsigned short", bf16 = "unsigned short",
               i8 = "unsigned char", u8 = "unsigned char", i32 = "unsigned int", u32 = "unsigned int",
               i64 = "unsigned long long", u64 = "unsigned long long" }
local one = { f32 = "0x3f800000u", f64 = "0x3ff0000000000000ull", f16 = "0x3c00u", bf16 = "0x3f80u" }
local nan = { f32 = "0x7fc00000u", f64 = "0x7ff8000000000000ull", f16 = "0x7e00u", bf16 = "0x7fc0u" }
-- The C types of arguments, spelled without <stdint.h> (NVRTC has none).
local ctype = { f32 = "float", f64 = "double", f16 = "unsigned short", bf16 = "unsigned short", i8 = "signed char",
                u8 = "unsigned char", i32 = "int", u32 = "unsigned int", i64 = "long long",
                u64 = "unsigned long long" }

local prelude = [[
#ifdef __CUDACC__
#define KWB_ENTRY extern "C" __global__
#define KWB_EACH(i, n) for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); \
                            i += (long long)gridDim.x * blockDim.x)
#define KWB_FIRST_THREAD (blockIdx.x + blockIdx.y + blockIdx.z + threadIdx.x + threadIdx.y + threadIdx.z == 0)
#else
#define KWB_ENTRY
#define KWB_EACH(i, n) for (long long i = 0; i < (n); i++)
#define KWB_FIRST_THREAD 1
#endif
]]

-- The problem's prototype as a plant writes it, and the call of it by name.
local function signature(problem)
  local params, names = {}, {}
  for i, a in ipairs(problem.args) do
    if a.kind == "scalar" then params[i] = ctype[a.dtype] .. " " .. a.name
    else params[i] = (a.role == "in" and "const " or "") .. ctype[a.dtype] .. " *" .. a.name end
    names[i] = a.name
  end
  return string.format("KWB_ENTRY void %s(%s)", problem.fn, table.concat(params, ", ")), table.concat(names, ", ")
end

-- A buffer's element count as a C expression over the scalar arguments (or
-- a fixed count), or nil where its size is not an integer expression of
-- variables that are arguments themselves (a function, `/`, `^`, a variable no scalar carries).
local function c_size(problem, a)
  local e = a.expr
  if e == nil then   -- (a fixed count, shape = 1: a size that reads no variable)
    local ok, n = pcall(a.size, setmetatable({}, { __index = function() error("reads a variable") end }))
    return ok and math.type(n) == "integer" and "(" .. n .. "LL)" or nil
  end
  if type(e) ~= "string" or e:find("[^%w_%s%+%-%*/%(%)]") or e:gsub("//", ""):find("/") then return nil end
  local scalar = {}
  for _, s in ipairs(problem.args) do
    if s.kind == "scalar" and s.expr and s.expr:match("^[%a_][%w_]*$") then scalar[s.expr] = s.name end
  end
  local ok = true
  local c = e:gsub("//", "/"):gsub("[%a_][%w_]*", function(id)
    if not scalar[id] then ok = false; return id end
    return "(long long)" .. scalar[id]
  end)
  return ok and "(" .. c .. ")" or nil
end

-- The buffers the judge compares (outputs and inout), each with its C size.
local function outputs(problem)
  local list = {}
  for _, a in ipairs(problem.buffers) do
    if a.role ~= "in" then list[#list + 1] = { arg = a, size = c_size(problem, a) } end
  end
  return list
end

-- A kernel of kwb's own: each output's elements set by `each(o)` (a C
-- statement over element i), or nothing.
local function own(problem, name, each)
  local lines = { "/* kwb's judge self-test: planted candidate '" .. name .. "' */", prelude }
  local sig = signature(problem)
  lines[#lines + 1] = sig .. " {"
  for _, o in ipairs(each and outputs(problem) or {}) do
    lines[#lines + 1] = string.format("    KWB_EACH(i, %s) %s", o.size, each(o))
  end
  lines[#lines + 1] = "}"
  return table.concat(lines, "\n") .. "\n"
end

local function fill(value)
  return function(o)
    local t = bits[o.arg.dtype]
    return string.format("((%s *)%s)[i] = (%s)%s;", t, o.arg.name, t, value(o.arg.dtype))
  end
end

-- The same size at every shape the judge checks (timed and unannounced).
local function same_size(recipe, a, b)
  for _, list in ipairs { recipe.shapes, recipe.verify_shapes or {} } do
    for _, sh in ipairs(list) do
      local ok, x = pcall(a.size, sh.shape)
      local ok2, y = pcall(b.size, sh.shape)
      if not (ok and ok2) or x ~= y then return false end
    end
  end
  return true
end

-- The start kernel renamed kwb_plant_start, callable from a plant's entry
-- (on the GPU its kernels made device functions).
local function wrapped_start(problem, start, name)
  return table.concat({
    "/* kwb's judge self-test: planted candidate '" .. name .. "' around the start kernel */", prelude,
    "#ifdef __CUDACC__", "#undef __global__", "#define __global__ __device__", "#undef __launch_bounds__",
    "#define __launch_bounds__(...)", "#endif",
    "#define " .. problem.fn .. " kwb_plant_start", start.source, "#undef " .. problem.fn,
    "#ifdef __CUDACC__", "#undef __global__", "#define __global__ __attribute__((global))", "#endif", "" }, "\n")
end

-- Does the recipe launch the start kernel as one kernel (the problem's
-- prototype) at every shape? Always on the host.
local function single_kernel(recipe, start)
  if recipe.backend ~= "cuda" then return true end
  local launch = recipe.launch or recipe.problem.launch
  if not launch then return false end
  for _, sh in ipairs(recipe.shapes) do
    local ok, l = pcall(launch, sh.shape, start.params or start.defines or {})
    if not ok or type(l) ~= "table" or l.steps ~= nil then return false end
  end
  return true
end

function M.derive(recipe, start)
  local problem = recipe.problem
  local plants, skipped = {}, {}
  local function add(name, source, why, wraps)
    if why then skipped[#skipped + 1] = { name = name, why = why }; return end
    plants[#plants + 1] = { name = name, source = source, defines = wraps and start.defines or {}, own_plan = not wraps }
  end
  local outs = outputs(problem)
  local unsized
  for _, o in ipairs(outs) do
    if not o.size then unsized = string.format("output %s's size is not an integer expression of the scalar arguments",
                                               o.arg.name) end
  end
  add("writes nothing", own(problem, "writes nothing"))
  add("writes zeros", not unsized and own(problem, "writes zeros", fill(function() return "0" end)), unsized)
  add("writes a constant", not unsized and own(problem, "writes a constant", fill(function(d) return one[d] or "1" end)),
      unsized)
  -- copies an input: each output from an input of its type and size at every shape
  local from, why = {}, unsized
  for _, o in ipairs(outs) do
    for _, a in ipairs(problem.buffers) do
      if not from[o.arg.name] and a.role == "in" and a.dtype == o.arg.dtype and same_size(recipe, a, o.arg) then
        from[o.arg.name] = a
      end
    end
    if not from[o.arg.name] then why = why or string.format("no input has output %s's type and size", o.arg.name) end
  end
  add("copies an input", not why and own(problem, "copies an input", function(o)
    local t = bits[o.arg.dtype]
    return string.format("((%s *)%s)[i] = ((const %s *)%s)[i];", t, o.arg.name, t, from[o.arg.name].name)
  end), why)
  why = unsized
  for _, o in ipairs(outs) do
    if not nan[o.arg.dtype] then why = why or string.format("output %s (%s) holds no NaN", o.arg.name, o.arg.dtype) end
  end
  add("writes NaN", not why and own(problem, "writes NaN", fill(function(d) return nan[d] end)), why)
  -- the two that must be right (apart from their cheat) wrap the start kernel
  local sig, call = signature(problem)
  why = not single_kernel(recipe, start) and "the start kernel is a plan of several kernels" or nil
  local input
  for _, a in ipairs(problem.buffers) do
    if a.role == "in" and not input then input = a end
  end
  local head = not why and wrapped_start(problem, start, "mutates an input")
  add("mutates an input", head and input and (head .. sig .. " {\n    kwb_plant_start(" .. call .. ");\n"
      .. "    if (KWB_FIRST_THREAD) ((unsigned char *)" .. input.name .. ")[0] ^= 1;\n}\n"),
      why or not input and "the problem has no input", true)
  head = not why and wrapped_start(problem, start, M.names[7])
  add(M.names[7], head and (head .. table.concat({
    "#ifdef __CUDACC__",
    "__device__ unsigned kwb_calls, kwb_blocks;",
    sig .. " {",
    "    if (*(volatile unsigned *)&kwb_calls > 0) return;",
    "    kwb_plant_start(" .. call .. ");",
    "    __syncthreads();",
    "    if (threadIdx.x + threadIdx.y + threadIdx.z == 0) {   /* the launch's last block counts the call */",
    "        __threadfence();",
    "        if (atomicAdd(&kwb_blocks, 1u) == gridDim.x * gridDim.y * gridDim.z - 1) {",
    "            kwb_blocks = 0;",
    "            atomicAdd(&kwb_calls, 1u);",
    "        }",
    "    }",
    "}",
    "#else",
    "/* named by an assembler name (a string), which the rules do not read: the",
    "   counter reaches the verification, which must find it, rather than a rule */",
    "static int kwb_calls __asm__(\"kwb_plant_calls\");",
    sig .. " {",
    "    if (kwb_calls++ > 0) return;",
    "    kwb_plant_start(" .. call .. ");",
    "}",
    "#endif", "" }, "\n")), why, true)
  return plants, skipped
end

-- launch(problem) -> the launch plan of the plants of kwb's own (one kernel,
-- grid-stride loops): 256 threads a block, a block per 256 elements of the
-- largest output, at most 4096 blocks.
function M.launch(problem)
  return function(shape)
    local n = 1
    for _, a in ipairs(problem.buffers) do
      if a.role ~= "in" then n = math.max(n, a.size(shape)) end
    end
    return { grid = { math.max(1, math.min(4096, (n + 255) // 256)) }, block = { 256 } }
  end
end

return M
