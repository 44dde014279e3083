# The CUDA backend where there is no CUDA at all (as on CI): doctor still
# reports, every device call fails with one sentence and a code, never a crash.
# KWB_CUDA_DRIVER and KWB_NVRTC name missing libraries, so this holds on GPU
# machines too; tests/lua/test_cuda.lua pins the plain no-driver sentence.
$ env PATH=/usr/bin:/bin CUDA_HOME=/nonexistent KWB_NVRTC=/nonexistent/libnvrtc.so KWB_CUDA_DRIVER=/nonexistent/libcuda.so.1 ./kwb doctor
kwb doctor
  kwb                    0.1.0
  CUDA_HOME              /nonexistent
  NVRTC                  no NVRTC: KWB_NVRTC names /nonexistent/libnvrtc.so, which cannot be loaded
  nvcc                   not found
  ncu                    not found
  driver                 no CUDA driver: KWB_CUDA_DRIVER names /nonexistent/libcuda.so.1, which cannot be loaded
  GPU work               not possible here; NVRTC compiles do not work either
# --json: the same findings, one object
$ env PATH=/usr/bin:/bin CUDA_HOME=/nonexistent KWB_NVRTC=/nonexistent/libnvrtc.so KWB_CUDA_DRIVER=/nonexistent/libcuda.so.1 ./kwb doctor --json | ./kwb -e 'local t = require("cjson").decode(io.read("a")); local ks = {}; for k in pairs(t) do ks[#ks + 1] = k end; table.sort(ks); for _, k in ipairs(ks) do print(k, t[k]) end'
cuda_home	/nonexistent
driver	no CUDA driver: KWB_CUDA_DRIVER names /nonexistent/libcuda.so.1, which cannot be loaded
gpu_work	not possible here; NVRTC compiles do not work either
kwb	0.1.0
ncu	not found
nvcc	not found
nvrtc	no NVRTC: KWB_NVRTC names /nonexistent/libnvrtc.so, which cannot be loaded
$ ./kwb doctor --frobnicate
kwb doctor: unknown option '--frobnicate' (known: --no-measure, --own-gemm, --json)
[exit 2]
$ KWB_NVRTC=/nonexistent/libnvrtc.so ./kwb -e 'local m, msg, info = kwb.cuda.compile { source = "x", arch = "sm_90" }; print(m, msg, info.code)'
nil	no NVRTC: KWB_NVRTC names /nonexistent/libnvrtc.so, which cannot be loaded	no-nvrtc
$ KWB_CUDA_DRIVER=/nonexistent/libcuda.so.1 ./kwb -e 'local ok, msg, info = kwb.cuda.device_count(); print(ok, msg, info.code)'
nil	no CUDA driver: KWB_CUDA_DRIVER names /nonexistent/libcuda.so.1, which cannot be loaded	no-driver
$ KWB_CUDA_DRIVER=/nonexistent/libcuda.so.1 ./kwb -e 'local b, msg, info = kwb.cuda.buffer("f32", 16); print(b, msg, info.code)'
nil	no CUDA driver: KWB_CUDA_DRIVER names /nonexistent/libcuda.so.1, which cannot be loaded	no-driver
$ KWB_CUDA_DRIVER=/nonexistent/libcuda.so.1 ./kwb -e 'local c, msg, info = kwb.cuda.ceilings(); print(c, msg, info.code)'
nil	no CUDA driver: KWB_CUDA_DRIVER names /nonexistent/libcuda.so.1, which cannot be loaded	no-driver
$ ./kwb -e 'print(select(2, pcall(kwb.cuda.buffer, "f33", 16)))'
unknown dtype 'f33' (known: f32, f64, f16, bf16, i8, i32, i64, u8, u32, u64, e4m3, e2m1)
