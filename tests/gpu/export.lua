-- tests/gpu/export.lua: kwb export's CUDA dispatcher on the GPU (run by
-- tests/gpu/run): a short run of recipes/gpu_vecadd.lua, its export, and the
-- check program built and run (`make -C DIR check`): every measured shape's
-- result from the embedded cubins, launched by the loader on its stream,
-- agrees with the C reference. Then the control: the first kernel's cubin in
-- dispatch.c replaced by one that writes zeros, and the check fails naming
-- the first shape (whose kernel it is).
--   ./kwb tests/gpu/export.lua [budget]
local t = require "t"

local words = { ... }
local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local cache = dir .. "/export.db"
local out_dir = dir .. "/export"

local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local ok, _, code = p:close()
  return out, ok and 0 or code
end

local run_out, run_code = sh(string.format("./kwb --cache '%s' recipes/gpu_vecadd.lua --plain --budget %d --seed 1",
                                           cache, tonumber(words[1]) or 12))
print(run_out:match("[^\n]*\n[^\n]*\n[^\n]*\n?$") or run_out)

t.test("gpu_export_writes_the_dispatcher_and_its_check", function()
  t.eq(run_code, 0, run_out)
  local out, code = sh(string.format("./kwb --cache '%s' export recipes/gpu_vecadd.lua '%s'", cache, out_dir))
  print(out)
  t.eq(code, 0, out)
end)

local function check_lines(out)
  local lines = {}
  for l in out:gmatch("[^\n]+") do if l:match("^n=%d+ kernel ") then lines[#lines + 1] = l end end
  return lines
end

t.test("gpu_export_check_agrees_with_the_reference_at_every_measured_shape", function()
  local out, code = sh(string.format("make -s --no-print-directory -C '%s' check", out_dir))
  print(out)
  t.eq(code, 0, out)
  local lines = check_lines(out)
  t.eq(#lines, 3, "a line per measured shape")
  for _, l in ipairs(lines) do t.truthy(l:match("^n=%d+ kernel %x+ ok c max_abs 0 max_rel 0$"), l) end
end)

t.test("gpu_export_check_fails_a_cubin_that_writes_zeros", function()
  local j = require("cjson").decode(io.open(out_dir .. "/dispatch.json"):read("a"))
  local zeros = assert(kwb.cuda.compile { source = [[
extern "C" __global__ void vecadd(int n, const float *a, const float *b, float *c) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = 0.0f;
}]], name = "zeros.cu", arch = j.arch })
  local image = zeros:cubin()
  local bytes = {}
  for i = 1, #image do bytes[i] = string.format("0x%02x", image:byte(i)) end
  local f = io.open(out_dir .. "/dispatch.c")
  local text = f:read("a")
  f:close()
  local n
  text, n = text:gsub("static const unsigned char cubin_0%[%d+%] = {\n.-\n};", function()
    return string.format("static const unsigned char cubin_0[%d] = {\n%s\n};", #image, table.concat(bytes, ","))
  end)
  t.eq(n, 1, "the first cubin replaced")
  f = io.open(out_dir .. "/dispatch.c", "w")
  f:write(text)
  f:close()
  local out, code = sh(string.format("make -s --no-print-directory -C '%s' dispatch_check && '%s/dispatch_check'",
                                     out_dir, out_dir))
  print(out)
  t.eq(code, 1, out)
  -- the first kernel is the first shape's
  local lines = check_lines(out)
  t.truthy(lines[1] and lines[1]:match("^n=1048576 kernel %x+ WRONG c: %d+ of 1048576 elements off "), lines[1])
end)

t.done()
