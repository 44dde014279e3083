-- tests/gpu/tma.lua: TMA tensor maps on the GPU (run by tests/gpu/run):
-- kwb.cuda.tensor_map over a device buffer, passed as a kernel's
-- `const __grid_constant__ CUtensorMap`, a 2D tile copied global -> shared by
-- cp.async.bulk.tensor with an mbarrier, every element checked (the tiles
-- past the tensor's edge zero-filled by the copy); then the same kernel as a
-- recipe's start kernel whose launch plan builds the map over the bench's
-- input, verified and timed by the loop.
local t = require "t"
local store = require "kwb.loop.store"

local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")

-- out[r][c] = 2 * in[r][c], one 32 x 32 f32 tile a block through shared memory
local source = [[
struct alignas(64) CUtensorMap { unsigned long long opaque[16]; };
__device__ unsigned smem_addr(const void *p) {
  unsigned long long g = (unsigned long long)p;
  unsigned s;
  asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(s) : "l"(g));
  return s;
}
extern "C" __global__ void tma_twice(const __grid_constant__ CUtensorMap tm, float *out, int cols, int rows) {
  __shared__ alignas(128) float tile[32][32];
  __shared__ alignas(8) unsigned long long bar;
  int bx = blockIdx.x * 32, by = blockIdx.y * 32;
  unsigned b = smem_addr(&bar), s = smem_addr(tile);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(32 * 32 * 4) : "memory");
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(s), "l"((unsigned long long)&tm), "r"(bx), "r"(by), "r"(b) : "memory");
  }
  asm volatile("{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT_%=;\n}"
               :: "r"(b), "r"(0) : "memory");
  for (int i = threadIdx.x; i < 32 * 32; i += blockDim.x) {
    int r = i / 32, c = i % 32;
    if (by + r < rows && bx + c < cols) out[(by + r) * cols + bx + c] = 2.0f * tile[r][c];
  }
}
]]

local cols, rows = 72, 100   -- not multiples of the 32 x 32 box: the last tiles reach past the edge

t.test("tma_a_tensor_map_feeds_cp_async_bulk_tensor", function()
  local mod = assert(kwb.cuda.compile { source = source, name = "tma_twice.cu" })
  local k = assert(mod:kernel("tma_twice", "void tma_twice(const __grid_constant__ CUtensorMap tm, float *out, int cols, int rows)"))
  local a, out = assert(kwb.cuda.buffer("f32", cols * rows)), assert(kwb.cuda.buffer("f32", cols * rows))
  assert(a:fill_normal(5, 0, 1))
  assert(out:poison())
  local tm = assert(kwb.cuda.tensor_map { a, dims = { cols, rows }, box = { 32, 32 } })
  t.eq(tostring(tm), "kwb.cuda.tensor_map")
  assert(kwb.cuda.plan { { k, grid = { (cols + 31) // 32, (rows + 31) // 32 }, block = 128, args = { tm, out, cols, rows } } }:run())
  local want = assert(kwb.cuda.buffer("f32", cols * rows))
  local h = kwb.host.buffer("f32", cols * rows)
  a:download(h)
  for i = 1, cols * rows do h[i] = 2 * h[i] end
  want:upload(h)
  local d = kwb.cuda.compare(out, want, { atol = 0, rtol = 0 })
  t.eq(d.bad, 0, "every element twice its input")
  t.eq(d.poison, 0, "every element written")
  t.eq(next(kwb.cuda.redzones { a, out }), nil, "nothing written outside")
end)

t.test("tma_a_tensor_map_past_its_buffer_is_refused_before_the_driver", function()
  local a = assert(kwb.cuda.buffer("f32", 64 * 64))
  t.raises(function() kwb.cuda.tensor_map { a, dims = { 64, 65 }, box = { 32, 32 } } end,
           "tensor_map: the tensor (16640 bytes from offset 0) runs past its buffer of 16384 bytes")
end)

t.test("tma_a_launch_plan_builds_the_map_over_the_bench", function()
  local problem = kwb.problem.define {
    name = "twice_tma", vars = { "cols", "rows" }, fn = "tma_twice",
    args = { { "cols", "i32", value = "cols" }, { "rows", "i32", value = "rows" },
             { "a", "f32", shape = "cols*rows", role = "in", init = { "normal", 0, 1 } },
             { "out", "f32", shape = "cols*rows", role = "out" } },
    reference = { cuda = { source = [[
extern "C" __global__ void twice_ref(int cols, int rows, const float *a, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < cols * rows) out[i] = 2.0f * a[i];
}]], fn = "twice_ref", launch = function(s) return { grid = (s.cols * s.rows + 255) // 256, block = 256 } end } },
    tolerance = { atol = 0, rtol = 0 },
    bytes = "8 * cols * rows",
  }
  local r = kwb.recipe {
    name = "twice_tma", backend = "cuda", problem = problem, shapes = { { cols = 72, rows = 100 }, { cols = 4096, rows = 512 } },
    verify_shapes = false, sanitize = false,
    start = { source = source },
    launch = function(s) return { steps = { { "tma_twice", grid = { (s.cols + 31) // 32, (s.rows + 31) // 32 }, block = 128,
      args = { { tensor_map = "a", dims = { s.cols, s.rows }, box = { 32, 32 } }, "out", "cols", "rows" } } } } end,
    timing = { warmup = 0.005, min_samples = 5, cap = 0.05, target = 0.05 },
  }
  local s = r:session { store = store.open(dir .. "/tma.db") }
  local start = s:ensure_start()
  t.eq(start.outcome, "start")
  t.truthy(start.shapes["cols=4096,rows=512"].median > 0, "timed through the plan's tensor map")
  print(string.format("# the TMA copy at 4096 x 512: %.1f us", start.shapes["cols=4096,rows=512"].median * 1e6))
end)

t.done()
