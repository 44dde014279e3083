-- tests/gpu/row_stream.lua: a measurement for hwdocs/hopper.md. How fast warps
-- read 32768 rows of 3584 bytes (the w13 rows of 8 DeepSeek-V3 experts in
-- NVFP4, 117 MB) when each 16-byte-per-lane load instruction covers 512 / RUN
-- rows x RUN contiguous bytes (kernels/cuda/row_stream.cu), at 16 and 32 warps
-- an SM; 4 loads in flight a warp in every variant. CUDA graph replay, L2
-- flushed before each run; against the copy bandwidth `kwb doctor` stored.
--   kwb tests/gpu/row_stream.lua
local cuda = kwb.cuda
local dev = assert(cuda.device(0))
local bw = assert((cuda.ceilings() or {}).copy_bytes_per_s, "run `kwb doctor` first")
local src = assert(kwb.files.read_file("kernels/cuda/row_stream.cu"))
local rowbytes, rows = 3584, 32768
local w = assert(cuda.buffer("u8", rowbytes * rows)):poison()
local out = assert(cuda.buffer("u32", 1))
print(string.format("# %s, %d SMs; copy bandwidth %.2f TB/s (kwb doctor)", cuda.device_kind(dev), dev.sms, bw / 1e12))
for _, run in ipairs { 64, 128, 256, 512 } do
  local mod = assert(cuda.compile { source = src, name = "row_stream.cu", defines = { RUN = run, R = 4 * 512 // run } })
  local k = assert(mod:kernel("row_stream", "void row_stream(const unsigned char *w, int rowbytes, int rows, unsigned *out)"))
  for _, wps in ipairs { 16, 32 } do
    local p = cuda.plan { { k, grid = dev.sms * wps // 8, block = 256, args = { w, rowbytes, rows, out } } }
    local st = assert(cuda.time(p))
    print(string.format("figure row_stream run=%d bytes, %d warps/SM: %.1f us, %.2f TB/s, %.0f%% of copy",
                        run, wps, st.median * 1e6, rowbytes * rows / st.median / 1e12, 100 * rowbytes * rows / st.median / bw))
  end
end
