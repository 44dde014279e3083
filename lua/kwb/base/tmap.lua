-- kwb/base/tmap.lua: TMA tensor maps (cuTensorMapEncodeTiled) over device
-- buffers, for kernels that copy tiles with cp.async.bulk.tensor. The spec
-- is checked here against the driver's documented requirements
-- (hwdocs/hopper.md, "Tensor maps"), each mistake named by its field, and
-- against the buffer: a map never reaches past the buffer it describes.
--
--   local tm = kwb.cuda.tensor_map { buf, dims = { cols, rows }, box = { 64, 64 }, swizzle = "128B" }
--   plan:add { k, grid = ..., block = ..., args = { tm, out, n } }   -- a `const __grid_constant__ CUtensorMap` parameter
local M = {}

-- CUtensorMapDataType values by kwb dtype (bytes for the 8-bit and packed
-- ones: their dims count bytes), and the element size in bytes.
M.dtypes = {
  u8 = { 0, 1 }, u16 = { 1, 2 }, u32 = { 2, 4 }, i32 = { 3, 4 }, u64 = { 4, 8 }, i64 = { 5, 8 },
  f16 = { 6, 2 }, f32 = { 7, 4 }, f64 = { 8, 8 }, bf16 = { 9, 2 }, f32_ftz = { 10, 4 }, tf32 = { 11, 4 },
  tf32_ftz = { 12, 4 },
}
local float = { f16 = true, f32 = true, f64 = true, bf16 = true, f32_ftz = true, tf32 = true, tf32_ftz = true }
-- a buffer's dtype where the map's is not given
local of_buffer = { i8 = "u8", e4m3 = "u8", e2m1 = "u8", u8 = "u8", f16 = "f16", bf16 = "bf16", f32 = "f32",
                    f64 = "f64", i32 = "i32", u32 = "u32", i64 = "i64", u64 = "u64" }
local interleaves = { none = 0, ["16B"] = 1, ["32B"] = 2 }
local swizzles = { none = 0, ["32B"] = 1, ["64B"] = 2, ["128B"] = 3 }
local swizzle_bytes = { ["32B"] = 32, ["64B"] = 64, ["128B"] = 128 }
local l2s = { none = 0, ["64B"] = 1, ["128B"] = 2, ["256B"] = 3 }
local oobs = { zero = 0, nan = 1 }
local known = { [1] = true, dims = true, strides = true, box = true, element_strides = true, dtype = true, offset = true,
                swizzle = true, interleave = true, l2 = true, oob = true, address = true, bytes = true }

local function fail(field, msg, ...)
  error(string.format("tensor_map: '%s' " .. msg, field, ...), 0)
end

local function names(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = string.format("%q", k) end
  table.sort(out)
  return table.concat(out, ", ")
end

local function pick(spec, field, choices, default)
  local v = spec[field]
  if v == nil then return choices[default], default end
  if choices[v] == nil then fail(field, "must be one of %s (got %s)", names(choices), tostring(v)) end
  return choices[v], v
end

local function ints(spec, field, n, lo, hi, default)
  local v = spec[field]
  if v == nil and default then return default end
  if type(v) ~= "table" or #v ~= n then fail(field, "must be a list of %d integers (got %s)", n, tostring(v)) end
  for i, x in ipairs(v) do
    if math.type(x) ~= "integer" or x < lo or x > hi then
      fail(field, "[%d] must be an integer in %d..%.0f (got %s)", i, lo, hi, tostring(x))
    end
  end
  return v
end

-- args(spec) -> the driver's arguments: { dtype, rank, offset, dims, strides,
-- box, element_strides, interleave, swizzle, l2, oob } (enum values; dims
-- innermost first; strides in bytes, rank - 1 of them), the tensor's bytes
-- from its start to past its last element, and the element size. spec[1] is
-- a device buffer, or spec.address and spec.bytes stand for one (where no
-- device is: the CPU tests). Raises naming the field that is wrong.
function M.args(spec)
  if type(spec) ~= "table" then error("tensor_map: expected a table { buf, dims =, box =, ... }", 0) end
  for k in pairs(spec) do
    if not known[k] then error(string.format("tensor_map: unknown field '%s'", tostring(k)), 0) end
  end
  local buf = spec[1]
  local address, bytes = spec.address, spec.bytes
  if buf ~= nil then
    local ok, ptr, size = pcall(function() return buf.ptr, buf.bytes end)
    if not ok then error("tensor_map: the first entry must be a device buffer", 0) end
    address, bytes = ptr, size
  end
  if math.type(address) ~= "integer" or math.type(bytes) ~= "integer" then
    error("tensor_map: the first entry must be a device buffer", 0)
  end
  local dname = spec.dtype or (buf and of_buffer[buf.dtype])
  if not dname or not M.dtypes[dname] then
    fail("dtype", "must be one of %s (got %s)", names(M.dtypes), tostring(spec.dtype or (buf and buf.dtype)))
  end
  local dtype, elem = M.dtypes[dname][1], M.dtypes[dname][2]
  if type(spec.dims) ~= "table" or #spec.dims < 1 or #spec.dims > 5 then
    fail("dims", "must list 1 to 5 sizes, innermost first (got %s)", tostring(spec.dims and #spec.dims or spec.dims))
  end
  local rank = #spec.dims
  local interleave, iname = pick(spec, "interleave", interleaves, "none")
  local swizzle, sname = pick(spec, "swizzle", swizzles, "none")
  local l2 = pick(spec, "l2", l2s, "none")
  local oob, oname = pick(spec, "oob", oobs, "zero")
  if iname ~= "none" and rank < 3 then fail("interleave", "%s needs a rank of 3 or more (dims has %d)", iname, rank) end
  local dims = ints(spec, "dims", rank, 1, 2 ^ 32)
  local offset = spec.offset or 0
  if math.type(offset) ~= "integer" or offset < 0 then fail("offset", "must be an integer >= 0 (got %s)", tostring(offset)) end
  local align = iname == "32B" and 32 or 16
  if (address + offset) % align ~= 0 then
    fail("offset", "must leave the tensor's start %d-byte aligned (the address is %d past a multiple of %d)", align,
         (address + offset) % align, align)
  end
  -- strides: packed by default (each dimension right after the one before)
  local packed, run = {}, dims[1] * elem
  for i = 2, rank do
    packed[i - 1] = run
    run = run * dims[i]
  end
  local strides = ints(spec, "strides", rank - 1, 1, 2 ^ 40 - 1, spec.strides == nil and packed or nil)
  -- (sizes in floating point from here: dims up to 2^32 times strides up to
  -- 2^40 would wrap around in 64-bit integers)
  local prev = dims[1] * elem
  for i, st in ipairs(strides) do
    if st % align ~= 0 then fail("strides", "[%d] must be a multiple of %d bytes (got %d)", i, align, st) end
    if st < prev then
      fail("strides", "[%d] (%d bytes) must hold the dimension below it (%.0f bytes)", i, st, prev)
    end
    prev = st * (dims[i + 1] + 0.0)
  end
  local box = ints(spec, "box", rank, 1, 256)
  if iname == "none" and box[1] * elem % 16 ~= 0 then
    fail("box", "[1] times the element size (%d x %d bytes) must be a multiple of 16 bytes", box[1], elem)
  end
  if iname == "none" and sname ~= "none" and box[1] * elem > swizzle_bytes[sname] then
    fail("box", "[1] is %d bytes, more than the %s swizzle's span", box[1] * elem, sname)
  end
  if iname == "32B" and sname ~= "32B" then fail("swizzle", "must be \"32B\" with interleave \"32B\" (got %q)", sname) end
  local one = {}
  for i = 1, rank do one[i] = 1 end
  local estrides = ints(spec, "element_strides", rank, 1, 8, spec.element_strides == nil and one or nil)
  if oname == "nan" and not float[dname] then fail("oob", "\"nan\" needs a floating-point dtype (got %s)", dname) end
  -- the span from the tensor's start to past its last element lies in the buffer
  local span = dims[1] * elem + 0.0
  for i = 2, rank do span = span + (dims[i] - 1) * (strides[i - 1] + 0.0) end
  if offset + span > bytes then
    error(string.format("tensor_map: the tensor (%.0f bytes from offset %d) runs past its buffer of %d bytes", span,
                        offset, bytes), 0)
  end
  return { dtype = dtype, rank = rank, offset = offset, dims = dims, strides = strides, box = box,
           element_strides = estrides, interleave = interleave, swizzle = swizzle, l2 = l2, oob = oob }, span, elem
end

return M
