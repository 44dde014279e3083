-- tests/lua/test_tmap.lua: TMA tensor maps without a GPU: the arguments
-- kwb.cuda.tensor_map hands cuTensorMapEncodeTiled (kwb.base.tmap.args), each of
-- the driver's documented requirements refused by name, a map kept inside
-- its buffer, the CUtensorMap parameter type in prototypes and launch plans.
-- (The GPU half, a TMA copy kernel, is tests/gpu/tma.lua.)
local t = require "t"
local cuda = require "kwb.cuda"

-- a stand-in for a device buffer: 256-byte aligned address, its size
local function buf(bytes) return { address = 0x7f0000000000, bytes = bytes } end
local function spec(over)
  local s = buf(4096 * 1024 * 2)
  s.dtype, s.dims, s.box, s.swizzle = "bf16", { 4096, 1024 }, { 64, 64 }, "128B"
  for k, v in pairs(over or {}) do s[k] = v end
  return s
end

t.test("tmap_args_are_the_drivers_for_a_bf16_tile", function()
  local a = cuda.tensor_map_args(spec())
  t.eq(a.dtype, 9, "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16")
  t.eq(a.rank, 2)
  t.eq(table.concat(a.dims, " "), "4096 1024", "innermost first")
  t.eq(table.concat(a.strides, " "), "8192", "packed rows by default, in bytes")
  t.eq(table.concat(a.box, " "), "64 64")
  t.eq(table.concat(a.element_strides, " "), "1 1")
  t.eq(a.swizzle, 3, "CU_TENSOR_MAP_SWIZZLE_128B")
  t.eq(a.interleave, 0)
  t.eq(a.l2, 0)
  t.eq(a.oob, 0)
  t.eq(a.offset, 0)
  local b = cuda.tensor_map_args(spec { dtype = "f32", dims = { 72, 100, 3 }, strides = { 288, 28800 }, box = { 32, 32, 1 },
                                        swizzle = nil, l2 = "256B", oob = "nan", offset = 4096, bytes = 4096 + 3 * 28800 })
  t.eq(b.dtype, 7)
  t.eq(table.concat(b.strides, " "), "288 28800")
  t.eq(b.l2, 3)
  t.eq(b.oob, 1)
  t.eq(b.offset, 4096)
end)

local refusals = {
  { { box = { 64, 64 }, swizzle = "64B" }, "tensor_map: 'box' [1] is 128 bytes, more than the 64B swizzle's span" },
  { { dtype = "f32", dims = { 10, 4 }, box = { 4, 4 }, swizzle = nil },
    "tensor_map: 'strides' [1] must be a multiple of 16 bytes (got 40)" },
  { { dtype = "f32", dims = { 64, 4 }, strides = { 128 }, box = { 4, 4 }, swizzle = nil },
    "tensor_map: 'strides' [1] (128 bytes) must hold the dimension below it (256 bytes)" },
  { { dtype = "f32", dims = { 64, 64 }, box = { 3, 4 }, swizzle = nil },
    "tensor_map: 'box' [1] times the element size (3 x 4 bytes) must be a multiple of 16 bytes" },
  { { box = { 64, 257 } }, "tensor_map: 'box' [2] must be an integer in 1..256 (got 257)" },
  { { element_strides = { 1, 9 } }, "tensor_map: 'element_strides' [2] must be an integer in 1..8 (got 9)" },
  { { swizzle = "256B" }, "tensor_map: 'swizzle' must be one of \"128B\", \"32B\", \"64B\", \"none\" (got 256B)" },
  { { interleave = "16B" }, "tensor_map: 'interleave' 16B needs a rank of 3 or more (dims has 2)" },
  { { dtype = "u8", dims = { 4096, 1024 }, box = { 64, 64 }, oob = "nan", swizzle = nil },
    "tensor_map: 'oob' \"nan\" needs a floating-point dtype (got u8)" },
  { { offset = 8 }, "tensor_map: 'offset' must leave the tensor's start 16-byte aligned (the address is 8 past a multiple of 16)" },
  { { bytes = 4096 * 1024 * 2 - 2 }, "tensor_map: the tensor (8388608 bytes from offset 0) runs past its buffer of 8388606 bytes" },
  { { dims = { 4096, 1024, 1, 1, 1, 1 } }, "tensor_map: 'dims' must list 1 to 5 sizes, innermost first (got 6)" },
  { { dtype = "e5m2" }, "tensor_map: 'dtype' must be one of" },
  { { shape = 1 }, "tensor_map: unknown field 'shape'" },
  -- 2^25 + 1 rows of 2^39 bytes: past 2^64, which 64-bit integers would wrap around to 16 bytes
  { { dtype = "f32", dims = { 4, (1 << 25) + 1 }, strides = { 1 << 39 }, box = { 4, 1 }, swizzle = nil, bytes = 16 },
    "tensor_map: the tensor (18446744073709551616 bytes from offset 0) runs past its buffer of 16 bytes" },
  { { 5 }, "tensor_map: the first entry must be a device buffer" },
}

t.test("tmap_each_documented_requirement_is_refused_by_name", function()
  for _, r in ipairs(refusals) do
    local ok, err = pcall(cuda.tensor_map_args, spec(r[1]))
    t.eq(ok, false, r[2])
    t.eq(tostring(err):sub(1, #r[2]), r[2])
  end
end)

t.test("tmap_a_cutensormap_parameter_is_a_prototype_type", function()
  local _, args = kwb.host.parse_signature("void k(const __grid_constant__ CUtensorMap tm, float *out, int n)")
  t.eq(table.concat(args, " "), "tmap ptr i32")
  local mod = assert(kwb.host.compile { source = "void k(int n) { (void)n; }\n", name = "k.c" })
  t.raises(function() mod:fn "void k(CUtensorMap tm)" end,
           "argument 1 of 'void k(CUtensorMap tm)' is a CUtensorMap, a CUDA kernel's parameter")
end)

t.test("tmap_a_launch_step_names_the_buffer_its_map_covers", function()
  local fake = require "fake_cuda" ()
  local b = require "kwb.measure.backends.cuda"
  local problem = kwb.problem.define {
    name = "copy_tma", vars = { "n" }, fn = "copy",
    args = { { "n", "i32", value = "n" }, { "a", "f32", shape = "n", role = "in" }, { "c", "f32", shape = "n", role = "out" } },
    reference = { cuda = { source = "void ref(int n, const float *a, float *c) {}\n", fn = "ref",
                           launch = function() return { grid = 1, block = 1 } end } },
    tolerance = { atol = 0, rtol = 0 },
  }
  local launch = function() return { steps = { { "copy", grid = 1, block = 32,
                                                 args = { { tensor_map = "x", dims = { 64 }, box = { 32 } }, "c" } } } } end
  local recipe = { launch = launch, problem = problem, shapes = { { key = "n=64", shape = { n = 64 } } } }
  local mod = fake.compile { source = "void copy(float *c) { (void)c; }\n", name = "copy.c" }
  t.raises(function() b.entry(mod, { params = {} }, recipe, problem:prototype()) end,
           "step copy argument 1: tensor_map 'x' is neither a buffer of copy_tma nor a scratch buffer (at n=64)")
  package.loaded["kwb.cuda"] = nil
end)

t.done()
