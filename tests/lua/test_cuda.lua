-- tests/lua/test_cuda.lua: the CUDA backend without a GPU: NVRTC compiles and
-- their resource reports (these need libnvrtc: where it is missing, the test
-- checks the no-NVRTC failure instead), the build cache, parallel builds,
-- roofline arithmetic, and every device call failing plainly without a driver.
local t = require "t"
local cuda = kwb.cuda
local core = require "kwb.core"

local nvrtc = cuda.nvrtc_version()
local driver = cuda.device_count()

if not nvrtc then
  t.test("compile_without_nvrtc_fails_with_code_no_nvrtc", function()
    local m, msg, info = cuda.compile { source = "x", arch = "sm_90" }
    t.eq(m, nil, "module")
    t.truthy(msg:find("^no NVRTC"), "message " .. msg)
    t.eq(info.code, "no-nvrtc", "code")
  end)
else
  local res_src = [[
extern "C" __global__ void smem_4k(float *x) {
    __shared__ float s[1024];
    s[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    x[threadIdx.x] = s[1023 - threadIdx.x];
}
extern "C" __global__ void local_array(float *x, int k) {
    float a[64];
    for (int i = 0; i < 64; i++) a[(i * k) & 63] = x[i * blockDim.x + threadIdx.x];
    x[threadIdx.x] = a[k & 63];
}
]]

  t.test("nvrtc_compile_reports_resources_per_kernel", function()
    local m = assert(cuda.compile { source = res_src, arch = "sm_90" })
    t.eq(m.arch, "sm_90", "arch")
    t.eq(m.resources.smem_4k.static_smem, 4096, "static shared memory of smem_4k")
    t.eq(m.resources.local_array.static_smem, 0, "local_array has no shared memory")
    t.eq(m.resources.local_array.stack, 256, "64 floats indexed at run time live on the stack")
    t.truthy(m.resources.smem_4k.registers > 0, "registers reported")
    t.eq(m.resources.smem_4k.spill_stores, 0, "no spills")
    t.eq(m:cubin():sub(1, 4), "\x7fELF", "the cubin is an ELF image")
    t.truthy(m:ptx():find(".entry smem_4k", 1, true), "PTX kept")
  end)

  t.test("register_cap_shows_spills_and_max_threads", function()
    local src = [[
extern "C" __global__ void heavy(float *x) {
    float a[32];
#pragma unroll
    for (int i = 0; i < 32; i++) a[i] = x[i * 1024 + threadIdx.x];
    float s = 0;
#pragma unroll
    for (int i = 0; i < 32; i++) for (int j = 0; j < 32; j++) s += a[i] * a[j] * (i + j);
    x[threadIdx.x] = s;
}
]]
    local m = assert(cuda.compile { source = src, arch = "sm_80", flags = { "--maxrregcount=32" } })
    local r = m.resources.heavy
    t.eq(r.registers, 32, "register cap honoured"); t.truthy(r.spill_stores > 0 and r.spill_loads > 0, "spills reported (" .. r.spill_stores .. ")")
    t.eq(r.max_threads, 1024, "32 registers allow 1024 threads")
    local m2 = assert(cuda.compile { source = res_src:gsub("1024%]", "1024]"), arch = "sm_90",
                                     flags = { "--maxrregcount=255" } })
    t.truthy(m2.resources.smem_4k.max_threads <= 1024, "max threads within a block's limit")
  end)

  t.test("compile_is_cached_by_content", function()
    local run = { TILE = 8, RUN = string.format("%d%d", os.time(), math.random(1 << 30)) }
    local a = assert(cuda.compile { source = res_src, arch = "sm_90", defines = run })
    local b = assert(cuda.compile { source = res_src, arch = "sm_90", defines = run })
    t.eq(b.cached, true, "second build comes from the cache")
    t.eq(b.hash, a.hash, "same hash")
    t.eq(b.resources.smem_4k.static_smem, 4096, "cached build keeps its resources")
    local c = assert(cuda.compile { source = res_src, arch = "sm_90", defines = { TILE = 16 } })
    local d = assert(cuda.compile { source = res_src, arch = "sm_80", defines = run })
    t.truthy(c.hash ~= a.hash, "defines change the hash")
    t.truthy(d.hash ~= a.hash, "arch changes the hash")
    t.eq(d.cached, false, "a new arch is built")
  end)

  t.test("compile_error_returns_code_and_log", function()
    local m, msg, info = cuda.compile { source = "extern \"C\" __global__ void k() { undeclared = 1; }", arch = "sm_90", name = "bad.cu" }
    t.eq(m, nil, "module")
    t.eq(info.code, "compile-error", "code")
    t.truthy(msg:find("^NVRTC rejected bad.cu: bad.cu%(1%): error"), "message " .. msg)
    t.truthy(info.log:find("undeclared", 1, true), "log names the identifier")
  end)

  t.test("compile_all_builds_in_parallel_and_keeps_failures_apart", function()
    local specs = {}
    for i = 1, 6 do specs[i] = { source = res_src .. "\n// variant " .. i, arch = "sm_90" } end
    specs[4] = { source = "this is not CUDA", arch = "sm_90" }
    local out = cuda.compile_all(specs, 3)
    t.eq(#out, 6, "one result per spec")
    for i = 1, 6 do
      if i == 4 then t.eq(out[i].code, "compile-error", "spec 4 fails")
      else t.eq(out[i].resources.smem_4k.static_smem, 4096, "spec " .. i .. " built") end
    end
  end)

  t.test("compile_all_takes_many_specs_with_option_lists", function()
    local specs = {}   -- each spec anchors its option lists on the Lua stack
    for i = 1, 96 do
      specs[i] = { source = "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] = V; }",
                   arch = "sm_90", defines = { V = i }, flags = { "-lineinfo" } }
    end
    -- in a fresh coroutine, whose Lua stack starts small
    local out = coroutine.wrap(function() return cuda.compile_all(specs, 2) end)()
    t.eq(#out, 96, "one result per spec")
    for i = 1, 96 do t.truthy(out[i].resources, "spec " .. i .. " built") end
  end)

  t.test("prebuild_returns_at_once_and_a_later_compile_finds_the_build", function()
    local core = require "kwb.core"
    local specs = {}
    for i = 1, 6 do
      specs[i] = { source = res_src .. "\n// prebuilt " .. i .. " " .. os.time(), arch = "sm_90", defines = { P = i } }
    end
    specs[6] = { source = "this is not CUDA either " .. os.time(), arch = "sm_90" }
    local t0 = core.now()
    t.eq(cuda.prebuild(specs, 2), true)
    local started = core.now() - t0
    -- the same builds, compiled here one after another, take far longer than starting them
    local waited = 0
    while cuda.prebuilds_running() > 0 and waited < 600 do os.execute("sleep 0.05"); waited = waited + 1 end
    t.eq(cuda.prebuilds_running(), 0, "the background job finished")
    for i = 1, 5 do
      local m = t.truthy(cuda.compile(specs[i]), "spec " .. i)
      t.eq(m.cached, true, "spec " .. i .. " was built in the background")
      t.eq(m.resources.smem_4k.static_smem, 4096)
    end
    local m, _, info = cuda.compile(specs[6])
    t.eq(m, nil)
    t.eq(info.code, "compile-error", "a failed background build is reported by the later compile")
    t.truthy(started < 0.05, string.format("prebuild returned in %.3f s", started))
    t.raises(function() cuda.prebuild { { source = "x", arch = "sm_1" } } end, "sm_1")
  end)

  t.test("builtin_device_kernels_compile_for_each_arch", function()
    for _, arch in ipairs { "sm_80", "sm_89", "sm_90", "sm_90a", "sm_100a" } do
      local m, msg = cuda.compile { source = core.cuda_builtin_source, arch = arch, flags = { "--fmad=false" } }
      t.truthy(m, arch .. ": " .. tostring(msg))
      t.truthy(m.resources.kwb_compare and m.resources.kwb_fill, arch .. " has the compare and fill kernels")
    end
    local home = core.cuda_home()
    local mma = io.open(home .. "/include/mma.h")
    if mma then   -- the WMMA probe needs the toolkit's headers
      mma:close()
      local m, msg = cuda.compile { source = core.cuda_wmma_source, arch = "sm_90" }
      t.truthy(m, "WMMA probe: " .. tostring(msg))
      t.truthy(m.resources.kwb_wmma_bf16.registers > 0, "WMMA probe registers")
    end
  end)

  t.test("an_edited_header_changes_the_key", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    local function header(k)
      local f = assert(io.open(dir .. "/scale.cuh", "w"))
      f:write("#define SCALE ", k, "\n")
      f:close()
    end
    local spec = { source = '#include "scale.cuh"\nextern "C" __global__ void s(float *x) { x[0] *= SCALE; }\n',
                   arch = "sm_90", include = { dir } }
    header(2)
    local a = assert(cuda.compile(spec))
    header(3)
    local b = assert(cuda.compile(spec))
    t.truthy(a.hash ~= b.hash, "header content is part of the key")
    t.eq(b.cached, false, "edited header rebuilds")
    header(2)
    local c = assert(cuda.compile(spec))
    t.eq(c.hash, a.hash, "same header, same key")
    t.eq(c.cached, true, "and a cache hit")
    os.execute("rm -rf " .. dir)
  end)

  t.test("nvcc_module_builds_in_compile_all_or_says_no_nvcc", function()
    local out = cuda.compile_all({ { file = "kernels/cuda/axpb_module.cu", arch = "sm_90", nvcc = true },
                                   { file = "kernels/cuda/copy.cu", arch = "sm_90" } }, 2)
    t.eq(out[2].kind, "nvrtc", "the NVRTC spec")
    if out[1].kind then   -- nvcc ran (from $CUDA_HOME/bin or PATH)
      t.eq(out[1].kind, "nvcc", "the nvcc spec")
      local found
      for name in pairs(out[1].resources) do found = found or name:find("axpb_kernel", 1, true) end
      t.truthy(found, "ptxas report of the module's kernel")
    else
      t.eq(out[1].code, "no-nvcc", "code without nvcc")
      t.truthy(out[1].error:find("^no nvcc: "), "message " .. out[1].error)
    end
  end)

  t.test("sample_kernels_compile", function()
    for _, f in ipairs { "kernels/cuda/copy.cu", "kernels/cuda/gpu_tests.cu" } do
      local m, msg = cuda.compile { file = f, arch = "sm_90" }
      t.truthy(m, f .. ": " .. tostring(msg))
    end
  end)
end

-- kwb's own kernels are files compiled into the binary: what NVRTC is given
-- (core.cuda_builtin_source and cuda_wmma_source are the strings
-- cuda_builtin.c compiles) is each file's bytes, and those bytes are the ones
-- the builds of them were keyed by when they were C string literals. An
-- intended change to a kernel changes its hash here; an editor's stray
-- newline or stripped space changes it too, and is caught.
t.test("builtin_sources_are_the_cu_files_bytes", function()
  for _, s in ipairs {
    { "cuda_builtin_source", "core/cuda/kwb_builtin.cu", "6bcefb993cff27d669faa3e43bdcc5ff7e31d9d30692046446b6e5df7e605b8f" },
    { "cuda_wmma_source", "core/cuda/kwb_wmma.cu", "84048583984cd79c3aa4a36816de8db47a8d15fa7e201974cfeffd8149377f97" },
  } do
    local f = assert(io.open(s[2], "rb"))
    local bytes = f:read("a")
    f:close()
    t.eq(core[s[1]] == bytes, true, s[1] .. " is " .. s[2] .. "'s bytes")
    t.eq(core.sha256(bytes), s[3], s[2])
  end
end)

t.test("compile_rejects_unknown_arch_and_options", function()
  t.raises(function() cuda.compile { source = "x", arch = "sm_9x" } end, "unknown CUDA arch 'sm_9x'")
  t.raises(function() cuda.compile { source = "x", archs = "sm_90" } end, "unknown compile option 'archs'")
end)

t.test("roofline_is_bytes_and_flops_over_time_against_ceilings", function()
  local r = cuda.roofline(0.001, { bytes = 2e9, flops = 5e11 },
                          { copy_bytes_per_s = 4e12, bf16_flops_per_s = 1e15 })
  t.near(r.gbs, 2000, 1e-9, "GB/s")
  t.near(r.pct_bw, 50, 1e-9, "% of copy")
  t.near(r.tflops, 500, 1e-9, "TFLOP/s")
  t.near(r.pct_flops, 50, 1e-9, "% of bf16")
  t.raises(function() cuda.roofline(0, { bytes = 1 }, {}) end, "positive time")
end)

t.test("copy_bandwidth_takes_the_stored_ceiling_first", function()
  local real = cuda.ceilings
  cuda.ceilings = function() return { copy_bytes_per_s = 4.2e12 } end
  local ok, bw, from = pcall(cuda.copy_bandwidth)
  cuda.ceilings = real
  t.truthy(ok, tostring(bw))
  t.eq(bw, 4.2e12)
  t.eq(from, "kwb doctor")
  if not driver then   -- nothing stored and nothing to measure on: the measurement's own error
    t.raises(function() cuda.copy_bandwidth() end, "no CUDA driver")
  end
end)

t.test("device_buffers_lie_between_guard_bands_of_at_least_4_KB", function()
  -- before the data, after it, and the allocation: the data stays 256-byte
  -- aligned and the band after it takes up the rounding
  local function layout(bytes) return table.concat({ cuda.guard_layout(bytes) }, " ") end
  t.eq(layout(4194304), "4096 4096 4202496", "4 MB: no rounding")
  t.eq(layout(4000012), "4096 4340 4008448", "1000003 floats: 244 bytes of rounding in the band")
  t.eq(layout(0), "4096 4096 8192", "an empty buffer still has its bands")
  t.eq(layout(1), "4096 4351 8448")
  t.raises(function() cuda.guard_layout(-1) end, "a buffer has 0 or more bytes (got -1)")
end)

t.test("host_checksum_is_content_sensitive", function()
  t.eq(cuda.checksum_host(""), "0000000000000000", "empty")
  t.eq(cuda.checksum_host("abcdefgh12"), cuda.checksum_host("abcdefgh12"), "deterministic")
  t.truthy(cuda.checksum_host("abcdefgh12") ~= cuda.checksum_host("abcdefgh13"), "tail byte counts")
  t.truthy(cuda.checksum_host("\0") ~= cuda.checksum_host("\0\0"), "length counts")
end)

t.test("device_kind_names_name_cc_sms_memory_driver", function()
  t.eq(cuda.device_kind { name = "NVIDIA H200", cc = "9.0", sms = 132, memory_bytes = 150083010560,
                          cuda_driver_version = "13.0" }, "NVIDIA H200 sm_90 132SM 140GiB cuda13", "kind")
end)

if not driver then
  t.test("every_device_call_fails_plainly_without_a_driver", function()
    local want = "no CUDA driver: libcuda.so.1 not found"
    for name, fn in pairs {
      device_count = cuda.device_count, device = cuda.device, clocks = cuda.clocks,
      buffer = function() return cuda.buffer("f32", 4) end,
      ceilings = function() return cuda.ceilings() end,
    } do
      local v, msg, info = fn()
      t.eq(v, nil, name)
      t.eq(msg, want, name .. " message")
      t.eq(info.code, "no-driver", name .. " code")
    end
    if nvrtc then
      local m = assert(cuda.compile { file = "kernels/cuda/copy.cu", arch = "sm_90" })
      local k, msg, info = m:kernel "copy4"
      t.eq(k, nil, "kernel")
      t.eq(msg, want, "kernel message")
      t.eq(info.code, "no-driver", "kernel code")
      local _, amsg, ainfo = cuda.compile { file = "kernels/cuda/copy.cu" }
      t.eq(ainfo.code, "no-arch", "no arch and no device")
      t.eq(amsg, "no arch given and no CUDA device to take it from (" .. want .. ")", "no-arch message")
    end
  end)
end

-- A gemm step's fields are checked before any device is needed: misuse raises,
-- naming the field (kwb_cuda_gemm_check pins the shapes: tests/unit/test_cuda.c).
t.test("gemm_step_misuse_raises_naming_the_field", function()
  local p = cuda.plan()
  local function add(g) return function() p:add { gemm = g } end end
  local ok = { m = 4, n = 2, k = 3, lda = 4, ldb = 3, ldc = 4, a = 1, b = 1, c = 1 }
  local function with(k, v)
    local g = {}
    for key, x in pairs(ok) do g[key] = x end
    g[k] = v
    return g
  end
  t.raises(add(with("m", 0)), "gemm field 'm' must be an integer >= 1 (got 0)")
  t.raises(add(with("ldc", nil)), "gemm field 'ldc' is required")
  t.raises(add(with("k", 2.5)), "gemm field 'k' must be an integer (got number)")
  t.raises(add(with("a_offset", -1)), "gemm field 'a_offset' must be an integer >= 0 (got -1)")
  t.raises(add(with("lda", 1 << 31)), "gemm field 'lda' must be at most 2147483647, cuBLAS's int (got 2147483648)")
  -- an offset past 2^31 elements is a field as good as any (the weights of
  -- 256 experts in one buffer): the next field checked is the buffer
  t.raises(add(with("a_offset", 255 * 2 * 2048 * 7168)), "gemm field 'a' must be a device buffer (got number)")
  t.raises(add(with("trans_a", "T")), "gemm field 'trans_a' must be true or false")
  t.raises(add(with("alpha", "1")), "gemm field 'alpha' must be a number")
  t.raises(add(with("lda_", 4)), "unknown gemm field 'lda_'")
  t.raises(add(ok), "gemm field 'a' must be a device buffer (got number)")
  t.raises(function() p:add { gemm = ok, grid = 1 } end, "a gemm step has only the field 'gemm' (got 'grid')")
  t.eq(#p.steps, 0, "nothing was added")
end)

t.done()
