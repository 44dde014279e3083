-- tests/lua/test_nvfp4_gpu.lua: kwb.problems.nvfp4.gpu and kernels/nvfp4_moe/gen.cu without
-- a GPU. gen.cu compiles with NVRTC (where libnvrtc is present); its kernels,
-- compiled as C++ with a few definitions standing in for CUDA's, run on the CPU
-- under the module's own launch plans (a stand-in for kwb.cuda whose buffers are
-- host buffers), and must equal the CPU reference of kwb.problems.nvfp4.ref bit for bit.
-- (On the CPU the generator's log and cos are the C library's, as the
-- reference's are; tests/gpu/nvfp4.lua checks CUDA's on the GPU.)
local t = require "t"
local host = kwb.host
local cuda = kwb.cuda

local ref = assert(require("kwb.problems.nvfp4.ref").load())

t.test("nvfp4_gpu_is_bundled", function()
  local names = {}
  for _, n in ipairs(require("kwb.core").bundled()) do names[n] = true end
  t.truthy(names["kwb.problems.nvfp4.gpu"], "kwb.problems.nvfp4.gpu is bundled")
  t.eq(require("kwb.problems.nvfp4.gpu").default_path, "kernels/nvfp4_moe/gen.cu")
end)

local kernels = { "nvfp4_gen_bf16", "nvfp4_gen_amax", "nvfp4_bf16_amax", "nvfp4_s2", "nvfp4_gen_quantize",
                  "nvfp4_bf16_quantize", "nvfp4_pack", "nvfp4_pack_rg", "nvfp4_gen_routing" }

if cuda.nvrtc_version() then
  t.test("gen_cu_compiles_with_nvrtc_without_spills", function()
    local m, msg, info = cuda.compile { file = "kernels/nvfp4_moe/gen.cu", arch = "sm_90", flags = { "--fmad=false" } }
    if not m then error(msg .. "\n" .. tostring(info and info.log)) end
    for _, k in ipairs(kernels) do
      local r = t.truthy(m.resources[k], "resources of " .. k)
      t.eq(r.spill_stores, 0, k .. " spill stores")
      t.truthy(r.max_threads >= 256, k .. " runs 256 threads a block (" .. r.max_threads .. ")")
    end
  end)
end

if not cuda.device_count() then
  t.test("nvfp4_gpu_without_a_driver_fails_plainly", function()
    local w, msg, info = require("kwb.problems.nvfp4.gpu").weights(1, 1, 16, 16)
    t.eq(w, nil, "no tensor")
    t.truthy(type(msg) == "string" and #msg > 0, "a message")
    t.truthy(info.code == "no-arch" or info.code == "no-driver" or info.code == "no-nvrtc", "code " .. tostring(info.code))
  end)
end

-- ---- gen.cu on the CPU -------------------------------------------------------

local emu_prelude = [[
#include <math.h>
#include <stdint.h>
#include <string.h>
struct emu_dim3 { unsigned x, y, z; };
struct uint4 { unsigned x, y, z, w; };
static emu_dim3 blockIdx, threadIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline long long __double_as_longlong(double d) { long long u; memcpy(&u, &d, 8); return u; }
static inline double __longlong_as_double(long long u) { double d; memcpy(&d, &u, 8); return d; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline unsigned atomicMax(unsigned *p, unsigned v) { unsigned o = *p; if (v > o) *p = v; return o; }
static inline unsigned atomicOr(unsigned *p, unsigned v) { unsigned o = *p; *p = o | v; return o; }
#line 1 "kernels/nvfp4_moe/gen.cu"
]]

-- One launcher a kernel: emu_<kernel>(grid, block, the kernel's arguments).
local emu_protos = {
  nvfp4_gen_bf16 = "uint64_t seed, double std, double rate, double scale, int64_t first, int64_t n, uint16_t *out",
  nvfp4_gen_amax = "uint64_t seed, double std, double rate, double scale, int64_t batch, int64_t per16, int32_t iters, uint32_t *amax, uint32_t *bad",
  nvfp4_bf16_amax = "const uint16_t *w, int64_t batch, int64_t per16, int32_t iters, uint32_t *amax, uint32_t *bad",
  nvfp4_s2 = "int64_t batch, const uint32_t *amax, float *s2",
  nvfp4_gen_quantize = "uint64_t seed, double std, double rate, double scale, int64_t batch, int64_t per16, int32_t iters, const uint32_t *amax, const float *s2, uint8_t *q, uint8_t *sf",
  nvfp4_bf16_quantize = "const uint16_t *w, int64_t batch, int64_t per16, int32_t iters, const uint32_t *amax, const float *s2, uint8_t *q, uint8_t *sf",
  nvfp4_pack = "int64_t slabs, int32_t cols, const uint8_t *q, const uint8_t *sf, uint8_t *qp, uint8_t *sfp",
  nvfp4_pack_rg = "int64_t blocks, const uint8_t *q, uint8_t *qr",
  nvfp4_gen_routing = "uint64_t seed, int32_t T, int32_t E, int32_t K, int32_t skewed, int32_t *ids, float *tw",
}

local function emu_source()
  local f = assert(io.open("kernels/nvfp4_moe/gen.cu", "rb"))
  local parts = { emu_prelude, f:read("a"), [[
template <class F> static void emu_launch(unsigned grid, unsigned block, F body) {
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    for (unsigned b = 0; b < grid; b++)
        for (unsigned t = 0; t < block; t++) {
            blockIdx = {b, 0, 0};
            threadIdx = {t, 0, 0};
            body();
        }
}
]] }
  f:close()
  parts[#parts + 1] = [[
extern "C" unsigned emu_bf16_from_f64(double x) { return gen_bf16_from_f64(x); }
extern "C" unsigned emu_e4m3_from_f64(double x) { return gen_e4m3_from_f64(x); }
extern "C" double emu_e4m3_to_f64(unsigned c) { return gen_e4m3_to_f64(c); }
extern "C" unsigned emu_e2m1_from_f32(float y) { return gen_e2m1_from_f32(y); }
]]
  for _, k in ipairs(kernels) do
    local names = {}
    for name in (emu_protos[k] .. ","):gmatch("([%w_]+)%s*,") do names[#names + 1] = name end
    parts[#parts + 1] = string.format(
      'extern "C" void emu_%s(unsigned emu_grid, unsigned emu_block, %s) {\n' ..
      '    emu_launch(emu_grid, emu_block, [=] { %s(%s); });\n}\n', k, emu_protos[k], k, table.concat(names, ", "))
  end
  return table.concat(parts)
end

-- A stand-in for kwb.cuda: device buffers are host buffers (poisoned when
-- made), compile builds gen.cu for the CPU, plans run the launchers in order
-- and check their grids as the driver would.
local fake = { launches = {} }
local Dbuf = {}
Dbuf.__index = function(self, k)
  if k == "device" then return "cuda" end
  if k == "dtype" or k == "n" or k == "bytes" then return self.h[k] end
  return Dbuf[k]
end
function Dbuf:zero() self.h:fill(0); return self end

function fake.buffer(dtype, n) return setmetatable({ h = host.buffer(dtype, n):poison() }, Dbuf) end
function fake.to_host(b) return b.h:clone() end

local emu_mod
local function emu_module()
  if not emu_mod then
    local m, msg, info = host.compile { source = emu_source(), name = "gen_cu_on_cpu.cc", cc = "c++",
                                        flags = { "-x", "c++", "-std=c++17", "-ffp-contract=off" } }
    if not m then error(msg .. "\n" .. (info.log or "")) end
    emu_mod = m
  end
  return emu_mod
end

function fake.compile(spec)
  t.eq(spec.file, require("kwb.core").cwd() .. "/kernels/nvfp4_moe/gen.cu", "compiled file (resolved where kwb started)")
  t.eq(table.concat(spec.flags or {}, " "), "--fmad=false", "compile flags")
  local emu_mod = emu_module()
  return {
    kernel = function(_, name, proto)
      local want = t.truthy(emu_protos[name], "a kernel of gen.cu named " .. tostring(name))
      local _, got_types = host.parse_signature(proto)
      local _, want_types = host.parse_signature("void f(" .. want .. ")")
      t.eq(table.concat(got_types, ","), table.concat(want_types, ","), name .. " argument types")
      local fn = assert(emu_mod:fn(string.format("void emu_%s(uint32_t grid, uint32_t block, %s)", name, want)))
      return { fn = fn, name = name }
    end,
  }
end

function fake.plan(steps)
  return {
    run = function()
      for _, s in ipairs(steps) do
        local grid, block = s.grid, s.block
        t.truthy(math.type(grid) == "integer" and grid >= 1 and grid <= 0x7fffffff, s[1].name .. " grid " .. tostring(grid))
        t.eq(block, 256, s[1].name .. " block")
        local args = {}
        for i, a in ipairs(s.args) do args[i] = getmetatable(a) == Dbuf and a.h or a end
        s[1].fn(grid, block, table.unpack(args, 1, #s.args))
        fake.launches[#fake.launches + 1] = s[1].name
      end
      return true
    end,
  }
end

t.test("gen_cu_scalar_conversions_equal_the_cpu_reference", function()
  local m = emu_module()
  local cpu = assert(host.compile { file = "kernels/nvfp4_moe/nvfp4_ref.c" })
  local pairs_ = {
    { "bf16", assert(m:fn "uint32_t emu_bf16_from_f64(double x)"), assert(cpu:fn "uint32_t nvfp4_bf16_from_f64(double x)") },
    { "e4m3", assert(m:fn "uint32_t emu_e4m3_from_f64(double x)"), assert(cpu:fn "uint32_t nvfp4_e4m3_from_f64(double x)") },
    { "e2m1", assert(m:fn "uint32_t emu_e2m1_from_f32(float y)"), assert(cpu:fn "uint32_t nvfp4_e2m1_from_f64(double y)") },
  }
  local e4m3_dec, e4m3_dec_cpu = assert(m:fn "double emu_e4m3_to_f64(uint32_t c)"), assert(cpu:fn "double nvfp4_e4m3_to_f64(uint32_t c)")
  local function f64(bits) return (string.unpack("<d", string.pack("<i8", bits))) end
  local function f32(v) return (string.unpack("<f", string.pack("<f", v))) end
  -- bf16: ties both ways, one rounding from double, the subnormal grid, overflow, specials
  local values = { 0.0, -0.0, 1 + 2 ^ -8, 1 + 3 * 2 ^ -8, 1 + 2 ^ -8 + 2 ^ -30, -(1 + 2 ^ -8 + 2 ^ -40),
                   1.5 * 2 ^ -133, 2.5 * 2 ^ -133, 2 ^ -134, 3 * 2 ^ -135, 2 ^ -126 - 2 ^ -140, 2 ^ -126 - 2 ^ -134,
                   2 ^ -1074, 2 ^ 128 - 2 ^ 119, 2 ^ 128 - 2 ^ 120, -3.4e38, 1 / 0, -1 / 0, 0 / 0, 0.02, -0.2 }
  math.randomseed(5)
  for _ = 1, 20000 do   -- random signs, exponents 2^-140 .. 2^129, mantissas
    local bits = (math.random(0, 1) << 63) | ((1023 + math.random(-140, 129)) << 52) | math.random(0, (1 << 52) - 1)
    values[#values + 1] = f64(bits)
  end
  local n = 0
  for _, v in ipairs(values) do
    t.eq(pairs_[1][2](v), pairs_[1][3](v), string.format("bf16 of %a", v))
    n = n + 1
  end
  -- e4m3: every code's value, the midpoints to its neighbours and just off them, the range ends
  local e4 = { 0.0, -0.0, 448, 449, 464, 1e9, 1 / 0, -1 / 0, 0 / 0, 2 ^ -10, 2 ^ -11, 3 * 2 ^ -11 }
  for c = 0, 0x7e do
    local v, w = e4m3_dec(c), e4m3_dec(c + 1)
    t.eq(v, e4m3_dec_cpu(c), "e4m3 value of code " .. c)
    local mid = (v + w) / 2
    for _, x in ipairs { v, mid, mid * (1 + 2 ^ -40), mid * (1 - 2 ^ -40), f32(mid), -mid } do e4[#e4 + 1] = x end
  end
  for _ = 1, 5000 do e4[#e4 + 1] = f32(math.random() * 2 ^ math.random(-12, 9)) end
  for _, v in ipairs(e4) do
    t.eq(pairs_[2][2](v), pairs_[2][3](v), string.format("e4m3 of %a", v))
    n = n + 1
  end
  -- e2m1 of floats: every multiple of 1/8 to +-8 (the ties among them), a float either side, specials
  local e2 = { 1 / 0, -1 / 0, 0 / 0, 1e30, -1e-30, -0.0 }
  for k = -64, 64 do
    local y = k / 8
    for _, x in ipairs { y, f32(y * (1 + 2 ^ -23)), f32(y * (1 - 2 ^ -23)) } do e2[#e2 + 1] = x end
  end
  for _, v in ipairs(e2) do
    t.eq(pairs_[3][2](v), pairs_[3][3](v), string.format("e2m1 of %a", v))
    n = n + 1
  end
  t.truthy(n > 25000, "values compared: " .. n)
end)

-- kwb.problems.nvfp4.gpu loaded afresh over the stand-in.
local real_cuda = package.loaded["kwb.cuda"]
package.loaded["kwb.cuda"], package.loaded["kwb.problems.nvfp4.gpu"] = fake, nil
local gpu = require "kwb.problems.nvfp4.gpu"
package.loaded["kwb.cuda"], package.loaded["kwb.problems.nvfp4.gpu"] = real_cuda, nil

local function same_tensor(got, want, what)
  t.eq(got.q.h:raw() == want.q:raw(), true, what .. ": q identical")
  t.eq(got.sf.h:raw() == want.sf:raw(), true, what .. ": sf identical")
  t.eq(got.s2.h:raw() == want.s2:raw(), true, what .. ": s2 identical")
end

t.test("gen_cu_weights_equal_the_cpu_generator_on_the_cpu", function()
  for _, c in ipairs { { 7, 100003 }, { -3, 4097, { std = 0.5, outlier_rate = 0.25, outlier_scale = -3 } } } do
    local seed, n, rule = table.unpack(c)
    local d = assert(gpu.bf16(seed, n, rule))
    local h = ref.weights(seed, n, rule)
    t.eq(d.h:checksum(), h:checksum(), string.format("seed %d, %d weights", seed, n))
  end
  t.eq(assert(gpu.bf16(1, 0)).n, 0, "no weights")
  local tail = assert(gpu.bf16(9, 1000, nil, 4000))
  local whole = ref.weights(9, 5000):raw()
  t.eq(tail.h:raw() == whole:sub(8001), true, "weights 4000..4999 from first = 4000")
end)

t.test("gen_cu_quantises_generated_weights_as_the_cpu_does", function()
  -- 3 x 256 x 512: a CUDA block of 256 x 16 blocks of 16 spans 4 rows' worth of one matrix
  local seed, B, R, C = 11, 3, 256, 512
  fake.launches = {}
  local g = assert(gpu.weights(seed, B, R, C))
  t.eq(table.concat(fake.launches, " "), "nvfp4_gen_amax nvfp4_s2 nvfp4_gen_quantize", "launch plan")
  same_tensor(g, ref.quantize(ref.weights(seed, B * R * C), B, R, C), "3 x 256 x 512")
  -- matrices much smaller than a CUDA block's span (per16 = 9), and one thread a block of 16
  local w = ref.weights(12, 37 * 3 * 48)
  same_tensor(assert(gpu.weights(12, 37, 3, 48)), ref.quantize(w, 37, 3, 48), "37 x 3 x 48")
  local iters = gpu.iters
  gpu.iters = 1
  local ok, err = pcall(function()
    same_tensor(assert(gpu.weights(12, 37, 3, 48)), ref.quantize(w, 37, 3, 48), "37 x 3 x 48, iters 1")
  end)
  gpu.iters = iters
  assert(ok, err)
  -- fill() into given buffers, with another rule
  local rule = { std = 1.5, outlier_rate = 0.01, outlier_scale = 100 }
  local t2 = { batch = 2, rows = 5, cols = 64, q = fake.buffer("u8", 320), sf = fake.buffer("u8", 40),
               s2 = fake.buffer("f32", 2) }
  t.eq(assert(gpu.fill(t2, 13, rule)), t2, "fill returns its tensor")
  same_tensor(t2, ref.quantize(ref.weights(13, 640, rule), 2, 5, 64), "fill 2 x 5 x 64")
end)

-- bf16 bits (little endian) as a host buffer
local function bf16_bits(list)
  local parts = {}
  for i, v in ipairs(list) do parts[i] = string.pack("<I2", v) end
  local b = host.buffer("bf16", #list)
  b:set_raw(table.concat(parts))
  return b
end

t.test("gen_cu_quantises_a_bf16_buffer_as_the_cpu_does", function()
  -- 2 matrices of 2 x 64. Matrix 0: an all-zero block, a block of negative
  -- zeros and ties, an outlier block, a block of 2^-30 next to the outlier
  -- (its scale underflows e4m3: codes 7 and 15), subnormal bf16s, a sign mix.
  -- Matrix 1: all zero (s2 = 1, scales 1.0).
  local bits = {}
  local function put(v) bits[#bits + 1] = v end
  for _ = 1, 16 do put(0x0000) end                                      -- zero block
  for i = 1, 16 do put(({ 0x8000, 0x3f40, 0xbf40, 0x3fe0, 0x4060, 0x3e80 })[(i - 1) % 6 + 1]) end
  for i = 1, 16 do put(i == 5 and 0x4480 or 0x3c23 + i) end            -- 1024 among small values
  for i = 1, 16 do put(i % 2 == 0 and 0x3080 or 0xb080) end             -- +-2^-30
  for i = 1, 16 do put(i) end                                           -- bf16 subnormals
  for i = 1, 16 do put((i % 3 == 0 and 0x8000 or 0) | (0x3f00 + 7 * i)) end
  for i = 1, 32 do put(i % 4 == 0 and 0x0000 or 0x3f80 + i) end
  for _ = 1, 128 do put(0x0000) end
  local hw = bf16_bits(bits)
  local w = fake.buffer("bf16", #bits)
  w.h:copy(hw)
  fake.launches = {}
  local g = assert(gpu.quantize(w, 2, 2, 64))
  t.eq(table.concat(fake.launches, " "), "nvfp4_bf16_amax nvfp4_s2 nvfp4_bf16_quantize", "launch plan")
  local want = ref.quantize(hw, 2, 2, 64)
  same_tensor(g, want, "crafted 2 x 2 x 64")
  t.eq(want.s2[2], 1.0, "an all-zero matrix has s2 = 1")
  t.eq(want.sf[1], 0x38, "an all-zero block has scale 1.0")
  t.eq(want.sf[4], 0, "the block of +-2^-30 next to 1024 has scale 0 (underflow)")
  t.eq(want.q[25], 0x7f, "so codes 15 (-2^-30 / 0) and 7 (2^-30 / 0) in its first byte")
  -- larger random buffers, rows not a multiple of anything in the launch plan
  local hr = host.buffer("bf16", 5 * 37 * 80):fill_normal(3, 0, 0.1)
  local dr = fake.buffer("bf16", hr.n)
  dr.h:copy(hr)
  same_tensor(assert(gpu.quantize(dr, 5, 37, 80)), ref.quantize(hr, 5, 37, 80), "5 x 37 x 80")
end)

t.test("gen_cu_quantize_with_no_rows_gives_s2_one", function()
  local g = assert(gpu.weights(1, 3, 0, 32))
  t.eq(table.concat(g.s2.h:totable(), ","), "1.0,1.0,1.0", "s2 of empty matrices")
  t.eq(g.q.n + g.sf.n, 0, "no codes, no scales")
end)

t.test("gen_cu_pack_puts_every_piece_where_the_layout_says", function()
  local misplaced = require "nvfp4_pack_check"
  -- 3 matrices of 48 x 384: 9 slabs of 16 rows, 3 chunks of 128 columns
  local B, R, C = 3, 48, 384
  local tq = assert(gpu.weights(17, B, R, C))
  local pk = assert(gpu.pack(tq))
  local q, sf, pq, psf = tq.q.h:raw(), tq.sf.h:raw(), pk.q.h:raw(), pk.sf.h:raw()
  local bad_q, bad_s = misplaced(q, sf, pq, psf, B * R, C)
  t.eq(bad_q, 0, "code pieces out of place")
  t.eq(bad_s, 0, "scale words out of place")
  t.truthy(pq ~= q and psf ~= sf, "a real permutation, not a copy")
  -- the check sees a swapped pair of pieces and a swapped pair of scale words
  t.eq(select(1, misplaced(q, sf, pq:sub(17, 32) .. pq:sub(1, 16) .. pq:sub(33), psf, B * R, C)), 2)
  t.eq(select(2, misplaced(q, sf, pq, psf:sub(5, 8) .. psf:sub(1, 4) .. psf:sub(9), B * R, C)), 2)
  -- into given buffers, and the shapes it refuses
  local into = { q = fake.buffer("u8", #q), sf = fake.buffer("u8", #sf) }
  t.eq(assert(gpu.pack(tq, into)), into)
  t.eq(into.q.h:raw() == pq, true, "packed into the given buffers")
  t.raises(function() gpu.pack(assert(gpu.weights(1, 1, 8, 128))) end,
           "nvfp4_gpu.pack: the fragment-major layout needs rows % 16 == 0 and cols % 128 == 0 (got 8 x 128)")
  t.raises(function() gpu.pack(assert(gpu.weights(1, 1, 16, 64))) end, "(got 16 x 64)")
  t.raises(function() gpu.pack(tq, { q = into.q, sf = fake.buffer("u8", 7) }) end,
           "nvfp4_gpu.pack: 'into.sf' must be a u8 device buffer of " .. #sf .. " elements (got u8[7])")
end)

-- The rg layout of the register-A wgmma kernels (w4a16.cu, LW = 2): byte
-- 16l + p of each row's 64-byte chunk is the linear byte 4p + l.
t.test("gen_cu_pack_rg_puts_every_byte_where_the_layout_says", function()
  local B, R, C = 2, 3, 384
  local tq = assert(gpu.weights(19, B, R, C))
  local qr = assert(gpu.pack_rg(tq))
  local q, r = tq.q.h:raw(), qr.h:raw()
  t.eq(#r, #q)
  local bad, moved = 0, 0
  for b = 0, #q // 64 - 1 do
    for l = 0, 3 do
      for p = 0, 15 do
        local want = q:byte(64 * b + 4 * p + l + 1)
        if r:byte(64 * b + 16 * l + p + 1) ~= want then bad = bad + 1 end
        if 16 * l + p ~= 4 * p + l then moved = moved + 1 end
      end
    end
  end
  t.eq(bad, 0, "bytes out of place")
  t.eq(moved, (#q // 64) * 60, "all but 4 bytes of a chunk move")
  t.truthy(r ~= q)
  local into = fake.buffer("u8", #q)
  t.eq(assert(gpu.pack_rg(tq, into)), into)
  t.eq(into.h:raw() == r, true, "packed into the given buffer")
  t.raises(function() gpu.pack_rg(assert(gpu.weights(1, 1, 16, 64))) end,
           "nvfp4_gpu.pack_rg: the rg layout needs cols % 128 == 0 (got 64)")
  t.raises(function() gpu.pack_rg(tq, fake.buffer("u8", 7)) end,
           "nvfp4_gpu.pack_rg: 'into' must be a u8 device buffer of " .. #q .. " elements (got u8[7])")
end)

-- The routing every timed run draws afresh, made by gen.cu's kernel (one
-- thread a token) equals nvfp4_ref.c's, ids and weights, bit for bit.
t.test("gen_cu_routing_equals_the_cpu_generator_on_the_cpu", function()
  for _, c in ipairs { { 1, 1, 256, 8 }, { 77, 700, 256, 8 }, { -5, 257, 256, 8 }, { 3, 300, 4, 4 },
                       { 9, 40, 1024, 32 }, { 11, 64, 33, 1 }, { 0x7FFFFFFFFFFF, 300, 160, 6 } } do
    local seed, T, E, K = c[1], c[2], c[3], c[4]
    for _, kind in ipairs { "uniform", "skewed" } do
      local ids, tw = ref.routing(seed, T, E, K, kind)
      local dids, dtw = fake.buffer("i32", T * K), fake.buffer("f32", T * K)
      t.eq(gpu.routing(dids, dtw, seed, T, E, K, kind), true)
      local what = string.format("seed %d, T %d, E %d, K %d, %s", seed, T, E, K, kind)
      t.eq(dids.h:raw() == ids:raw(), true, what .. ": ids")
      t.eq(dtw.h:raw() == tw:raw(), true, what .. ": weights")
    end
  end
  t.eq(fake.launches[#fake.launches], "nvfp4_gen_routing")
  local ids, tw = fake.buffer("i32", 16), fake.buffer("f32", 16)
  t.raises(function() gpu.routing(ids, tw, 1, 2, 4, 8, "uniform") end, "nvfp4_gpu.routing: K (8) must not exceed E (4)")
  t.raises(function() gpu.routing(ids, tw, 1, 2, 2048, 8, "uniform") end,
           "nvfp4_gpu.routing: the device's routing takes K <= 32 and E <= 1024 (got K = 8, E = 2048)")
  t.raises(function() gpu.routing(ids, tw, 1, 2, 256, 8, "zipf") end,
           "nvfp4_gpu.routing: kind must be 'uniform' or 'skewed' (got zipf)")
  t.raises(function() gpu.routing(ids, tw, 1, 3, 256, 8, "skewed") end,
           "nvfp4_gpu.routing: 'ids' must be a i32 device buffer of 24 elements (got i32[16])")
end)

t.test("nvfp4_gpu_rejects_nonfinite_weights", function()
  for _, v in ipairs { 0x7f80, 0xff80, 0x7fc1 } do
    local hw = host.buffer("bf16", 64):fill(0.5)
    local bits = hw:raw()
    hw:set_raw(bits:sub(1, 2 * 40) .. string.pack("<I2", v) .. bits:sub(2 * 41 + 1))
    local w = fake.buffer("bf16", 64)
    w.h:copy(hw)
    t.raises(function() gpu.quantize(w, 1, 2, 32) end, "nvfp4_gpu.quantize: a weight is NaN or infinite")
  end
  t.raises(function() gpu.weights(1, 1, 1, 16, { std = 1e300, outlier_rate = 0, outlier_scale = 1 }) end,
           "nvfp4_gpu.weights: a weight is NaN or infinite")
end)

t.test("nvfp4_gpu_rejects_wrong_arguments_by_name", function()
  t.raises(function() gpu.quantize(host.buffer("bf16", 32), 1, 1, 32) end,
           "nvfp4_gpu.quantize: 'w' must be a bf16 device buffer of 32 elements (got a host buffer)")
  t.raises(function() gpu.quantize(fake.buffer("f32", 32), 1, 1, 32) end,
           "nvfp4_gpu.quantize: 'w' must be a bf16 device buffer of 32 elements (got f32[32])")
  t.raises(function() gpu.weights(1, 2, 3, 24) end, "nvfp4_gpu.weights: 'cols' must be a multiple of 16 (got 24)")
  t.raises(function() gpu.weights(1, -1, 3, 16) end, "nvfp4_gpu.weights: 'batch' must be an integer >= 0 (got -1)")
  t.raises(function() gpu.bf16(1.5, 4) end, "nvfp4_gpu.bf16: 'seed' must be an integer")
  t.raises(function() gpu.bf16(1, 4, nil, -1) end, "nvfp4_gpu.bf16: 'first' must be an integer >= 0 (got -1)")
  t.raises(function() gpu.bf16(1, 4, { std = -1, outlier_rate = 0, outlier_scale = 1 }) end,
           "nvfp4_gpu.bf16: 'rule.std' must be a number >= 0 (got -1)")
  t.raises(function() gpu.bf16(1, 4, { std = 1, outlier_rate = 2, outlier_scale = 1 }) end,
           "nvfp4_gpu.bf16: 'rule.outlier_rate' must be a number in [0, 1] (got 2)")
  local tt = { batch = 2, rows = 4, cols = 32, q = fake.buffer("u8", 128), sf = fake.buffer("u8", 15),
               s2 = fake.buffer("f32", 2) }
  t.raises(function() gpu.fill(tt, 1) end, "nvfp4_gpu.fill: 't.sf' must be a u8 device buffer of 16 elements (got u8[15])")
  tt.sf = fake.buffer("u8", 16)
  tt.s2 = nil
  t.raises(function() gpu.fill(tt, 1) end, "nvfp4_gpu.fill: 't.s2' must be a f32 device buffer of 2 elements (got nil)")
  t.raises(function() gpu.fill(nil, 1) end, "nvfp4_gpu.fill: 't' must be a table")
end)

t.done()
