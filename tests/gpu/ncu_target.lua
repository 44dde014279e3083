-- tests/gpu/ncu_target.lua: the kernels ncu times for the comparison with
-- kwb's own timing (tests/gpu/run): plain launches, nothing else on the GPU.
local cuda = kwb.cuda
local mod = assert(cuda.compile { file = "kernels/cuda/copy.cu" })
local axpb = assert(mod:kernel("axpb", "void axpb(const float *x, float *y, float a, float b, int n)"))
local copy4 = assert(mod:kernel "copy4")
local dev = assert(cuda.device(0))
local n = 16 << 20
local a = assert(cuda.buffer("f32", n):fill_uniform(4))
local b = assert(cuda.buffer("f32", n):poison())
local p = cuda.plan { { axpb, grid = n // 256, block = 256, args = { a, b, 2.0, 1.0, n } } }
local n4 = (1 << 30) // 16
local x = assert(cuda.buffer("f32", 4 * n4):fill_uniform(9))
local y = assert(cuda.buffer("f32", 4 * n4):poison())
local q = cuda.plan { { copy4, grid = dev.sms * 16, block = 512, args = { x, y, n4 } } }
for _ = 1, 5 do assert(p:run()) end
for _ = 1, 5 do assert(q:run()) end
