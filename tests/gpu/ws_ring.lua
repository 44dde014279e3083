-- tests/gpu/ws_ring.lua: the pipeline of a warp-specialised kernel, alone. One
-- producer warp a block (one lane) copies chunks of a buffer with
-- cp.async.bulk into a ring of S stages in shared memory, each stage's "full"
-- mbarrier completing on the bytes it receives; consumer warps wait on it,
-- read the stage (one 16-byte word a lane at a time, as the GEMM's consumers
-- read their codes) and arrive on the stage's "empty" mbarrier, which the
-- producer waits on before it fills the stage again. No block-wide barrier
-- after the start. Persistent: block b takes chunks b, b + grid, ...
--
-- A test first (every byte reaches a consumer exactly once: the consumers'
-- 32-bit word sum equals a plain kernel's), then, for each setting, the rate
-- at which the ring streams a buffer the size of the NVFP4 layer's weights,
-- against kwb.cuda.copy_bandwidth (read + write). What a consumer does per
-- word here is one add: the figures bound what the producer and the ring can
-- feed, not a GEMM.
--   kwb tests/gpu/ws_ring.lua [MiB]          (default 1024)
local t = require "t"
local cuda = kwb.cuda

local source = [[
typedef unsigned int u32;
typedef unsigned long long u64;
#ifndef S
#define S 4
#endif
#ifndef CHUNK
#define CHUNK 16384
#endif
#ifndef CW
#define CW 8
#endif
__device__ __forceinline__ u32 smem_addr(const void *p) {
  return (u32)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void bar_init(u32 b, u32 n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_expect(u32 b, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bar_arrive(u32 b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(b) : "memory");
}
__device__ __forceinline__ void bar_wait(u32 b, u32 parity) {
  asm volatile("{\n .reg .pred p;\n W_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W_%=;\n}"
               :: "r"(b), "r"(parity) : "memory");
}
__device__ __forceinline__ void bulk_load(u32 dst, const void *src, u32 bytes, u32 bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
__device__ __forceinline__ uint4 lds16(u32 a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
}

// sum += every 32-bit word of src (nchunks chunks of CHUNK bytes), through the ring.
extern "C" __global__ void __launch_bounds__(32 * (CW + 1)) ws_ring(const unsigned char *src, u64 nchunks, u32 *sum) {
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ __align__(8) u64 bars[2 * S];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const u32 base = smem_addr(ring), full = smem_addr(bars), empty = full + 8 * S;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; s++) {
      bar_init(full + 8 * s, 1);      // the producer's arrive, then the bytes
      bar_init(empty + 8 * s, CW);    // one arrive a consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == 0) {                    // the producer
    if (lane == 0) {
      u64 i = 0;
      for (u64 c = blockIdx.x; c < nchunks; c += gridDim.x, i++) {
        const u32 s = (u32)(i % S), round = (u32)(i / S);
        if (round > 0) bar_wait(empty + 8 * s, (round - 1) & 1);
        bar_expect(full + 8 * s, CHUNK);
        bulk_load(base + s * CHUNK, src + c * CHUNK, CHUNK, full + 8 * s);
      }
    }
    return;
  }
  const int ct = threadIdx.x - 32;    // consumer thread 0 .. 32 * CW - 1
  u32 acc = 0;
  u64 i = 0;
  for (u64 c = blockIdx.x; c < nchunks; c += gridDim.x, i++) {
    const u32 s = (u32)(i % S), round = (u32)(i / S);
    bar_wait(full + 8 * s, round & 1);
#pragma unroll 4
    for (int j = ct; j < CHUNK / 16; j += 32 * CW) {
      const uint4 v = lds16(base + s * CHUNK + 16 * j);
      acc += v.x + v.y + v.z + v.w;
    }
    __syncwarp();
    if (lane == 0) bar_arrive(empty + 8 * s);
  }
  atomicAdd(sum, acc);
}

// sum += every 32-bit word of n words: the plain reference.
extern "C" __global__ void plain_sum(const u32 *src, u64 n, u32 *sum) {
  u32 acc = 0;
  for (u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (u64)gridDim.x * blockDim.x) acc += src[k];
  atomicAdd(sum, acc);
}
]]

local dev = assert(cuda.device())
local function build(S, CHUNK, CW)
  local mod = assert(cuda.compile { source = source, name = "ws_ring.cu",
                                    defines = { "S=" .. S, "CHUNK=" .. CHUNK, "CW=" .. CW } })
  return assert(mod:kernel("ws_ring", "void ws_ring(const unsigned char *src, unsigned long long nchunks, unsigned *sum)")),
         assert(mod:kernel("plain_sum", "void plain_sum(const unsigned *src, unsigned long long n, unsigned *sum)"))
end

-- the ring's plan over buf (bytes), blocks a ring each: occ blocks an SM
local function ring_plan(k, buf, bytes, sum, S, CHUNK, CW, occ)
  return cuda.plan { { k, grid = dev.sms * occ, block = 32 * (CW + 1), smem = S * CHUNK,
                       args = { buf, bytes // CHUNK, sum } } }
end

local function sum_of(sum)
  local h = kwb.host.buffer("u32", 1)
  sum:download(h)
  return h[1]
end

t.test("ws_ring_every_byte_reaches_a_consumer_once", function()
  local bytes = 64 * 16384 + 3 * 16384   -- chunks that do not divide evenly among the blocks
  local buf = assert(cuda.buffer("f32", bytes // 4))   -- (its words' bit patterns are what is summed)
  assert(buf:fill_normal(7))
  for _, set in ipairs { { 2, 16384, 4, 1 }, { 4, 16384, 8, 1 }, { 3, 8192, 4, 2 } } do
    local S, CHUNK, CW, occ = table.unpack(set)
    local k, plain = build(S, CHUNK, CW)
    local want, got = assert(cuda.buffer("u32", 1)), assert(cuda.buffer("u32", 1))
    assert(want:zero()); assert(got:zero())
    assert(cuda.plan { { plain, grid = 64, block = 256, args = { buf, bytes // 4, want } } }:run())
    assert(ring_plan(k, buf, bytes, got, S, CHUNK, CW, occ):run())
    t.eq(sum_of(got), sum_of(want), string.format("S=%d CHUNK=%d CW=%d occ=%d", S, CHUNK, CW, occ))
  end
end)

t.test("ws_ring_streams_the_weights", function()
  local mib = math.tointeger(tonumber(arg and arg[1] or "")) or 1024
  local bytes = mib * 1024 * 1024
  local buf = assert(cuda.buffer("f32", bytes // 4))
  assert(buf:fill_normal(11))
  local bw = cuda.copy_bandwidth()
  print(string.format("# %s, %d SMs; %d MiB; copy bandwidth (read + write) %.2f TB/s", dev.name, dev.sms, mib, bw / 1e12))
  print("#  S  CHUNK  CW  occ   median ms   TB/s read   of copy")
  local timing = { warmup = 0.02, min_samples = 10, cap = 0.5, target = 0.01 }
  do   -- plain coalesced loads, 8 blocks of 256 an SM: the rate the ring is held against
    local _, plain = build(4, 16384, 8)
    local sum = assert(cuda.buffer("u32", 1))
    local st = assert(cuda.plan { { plain, grid = dev.sms * 8, block = 256, args = { buf, bytes // 4, sum } } }:time(timing))
    print(string.format("# plain loads          %9.3f   %9.2f   %6.1f%%", st.median * 1e3, bytes / st.median / 1e12,
                        100 * bytes / st.median / bw))
    print(string.format("figure plain_sum_TBps = %.3f", bytes / st.median / 1e12))
  end
  local best = 0
  for _, set in ipairs { { 2, 16384, 4, 1 }, { 4, 16384, 4, 1 }, { 4, 16384, 8, 1 }, { 8, 16384, 8, 1 },
                         { 4, 32768, 8, 1 }, { 6, 32768, 8, 1 }, { 4, 16384, 4, 2 }, { 3, 32768, 4, 2 } } do
    local S, CHUNK, CW, occ = table.unpack(set)
    if S * CHUNK <= dev.smem_optin then
      local k = build(S, CHUNK, CW)
      local sum = assert(cuda.buffer("u32", 1))
      local st = assert(ring_plan(k, buf, bytes, sum, S, CHUNK, CW, occ):time(timing))
      local rate = bytes / st.median
      best = math.max(best, rate)
      print(string.format("# %2d %6d %3d %4d  %9.3f   %9.2f   %6.1f%%", S, CHUNK, CW, occ, st.median * 1e3, rate / 1e12,
                          100 * rate / bw))
      print(string.format("figure ws_ring_S%d_C%d_W%d_O%d_TBps = %.3f", S, CHUNK, CW, occ, rate / 1e12))
    end
  end
  t.truthy(best > 0, "a setting ran")
end)

t.done()
