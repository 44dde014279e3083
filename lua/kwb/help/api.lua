-- kwb/help/api.lua: kwb's Lua API, one entry a function (help(x) at the REPL, docs/kwb.1's API section).
-- Each entry: { name as written, signature, description }. "| nil, message, info" is the expected-failure
-- form: info.code names the failure. Receivers: buf (host buffer), dbuf (device buffer), mod (host module),
-- cmod (CUDA module), fn (host kernel), sb (sandbox), plan (launch plan), cache, recipe, problem.
return {
  -- ---- kwb ----------------------------------------------------------------
  { "kwb.load", 'kwb.load(path) -> recipe',
    "Runs the recipe file at path and returns the recipe it returns; `kwb.load \"recipes/x.lua\"` at the REPL. "
    .. "A recipe loaded from a file is measured in worker processes. Raises when path is not a string, the file "
    .. "does not load, or it returns something other than a recipe." },
  { "kwb.recipe", "kwb.recipe { name =, problem =, shapes =, start = [, ...] } -> recipe",
    "Checks a recipe's fields and returns a recipe object. Also: description, backend (\"host\" or \"cuda\"), "
    .. "template, space, strategy, model, prompt, context, ideas, forbid, allow, accept, score, budget, seed, flags, "
    .. "cc, timing, race, ceilings, launch, arch, verify_shapes, sanitize, dispatch. A wrong or unknown field "
    .. "raises an error that prints as \"file:line: recipe field ...\"; paths are relative to the recipe's file." },
  { "kwb.recipe.is_recipe", "kwb.recipe.is_recipe(v) -> boolean",
    "True when v is a recipe object made by kwb.recipe." },
  { "kwb.idea", 'kwb.idea(text)',
    "Queues a sentence for the model's next prompt, where it is listed with the recipe's ideas; the queue empties "
    .. "when a prompt is built. Returns nothing; raises when text is not a non-empty string." },
  { "kwb.pretty", "kwb.pretty(v [, opts]) -> text",
    "Formats a value as readable text: tables with sorted keys, cycles shown as <cycle>, values with a __tostring "
    .. "metatable through tostring. opts: width (78), items (40 per table), depth (6), string (200 bytes)." },
  { "kwb.sha256", "kwb.sha256(s) -> hex", "The SHA-256 of the string s, as 64 lowercase hex digits." },
  { "kwb.now", "kwb.now() -> seconds",
    "A monotonic clock in seconds (CLOCK_MONOTONIC); only differences between two readings mean something." },
  { "kwb.stats", "kwb.stats(samples [, rel]) -> stats",
    "Summary statistics of a list of times: median, min, max, mean, p10, p90, spread (stdev / mean), ci_lo and "
    .. "ci_hi (the median's 95% confidence interval), n, batch, warmup, capped, and converged: the interval lies "
    .. "within +-rel (default 0.005) of the median (false under 3 samples). Raises on an empty list or a non-number." },
  { "kwb.names", "kwb.names() -> set",
    "The names kwb answers to, as a table name -> true: its own keys and the bundled kwb.* modules that load on "
    .. "first use (the REPL completes them)." },
  { "kwb.version", "kwb.version -> string", "The kwb version string (a value, not a function)." },
  { "kwb.cache_path", "kwb.cache_path -> path",
    "The path of the cache file this process uses (a value): --cache, else KWB_CACHE, else "
    .. "$XDG_CACHE_HOME/kwb/kwb.db or ~/.cache/kwb/kwb.db. Build products go in build/ beside it." },

  -- ---- recipe objects -----------------------------------------------------
  { "recipe:try", "recipe:try(proposal) -> result",
    "Evaluates one candidate now, even when the cache knows it, prints its per-shape table and returns the "
    .. "result (id, short, outcome, reason, score, shapes). proposal: a parameter table for the template "
    .. "({ BM = 64 }) or { source = | file =, defines =, name = }. The start kernel is evaluated first if needed; "
    .. "raises when it fails." },
  { "recipe:profile", "recipe:profile(id [, shape]) -> profile",
    "Nsight Compute (ncu) on a cached CUDA candidate of the recipe's problem at one timed shape (default: where its "
    .. "median is longest), in a worker: per kernel its duration, DRAM, L2 and SM throughput and tensor-pipe use as "
    .. "% of peak, achieved occupancy, registers, spills, top stall reasons and a bottleneck class (memory, compute, "
    .. "latency); for the plan its kernel count, the time between kernels and a class (or launch overhead). Prints "
    .. "the table, keeps the profile in the cache (cache:profiles) and returns it (kernels, count, busy, gaps, "
    .. "plan_seconds, class, why, shape). Raises when ncu is missing or fails." },
  { "recipe:run", "recipe:run([opts]) -> summary, run",
    "Runs the loop under the budget and returns the summary table (funnel, best, speedups, ...) and the run. "
    .. "opts: candidates, minutes (default: the recipe's budget), strategy, seed (default: the recipe's, else "
    .. "os.time()), workers, mode (\"tty\", \"plain\", \"json\" or \"quiet\"), json = true. Raises when the start "
    .. "kernel fails." },
  { "recipe:session", "recipe:session([opts]) -> session",
    "The loop's state for this recipe (the cache, the start kernel's result, the best so far, the workers), made "
    .. "on the first call and kept, so try and run share it. opts.store (a kwb.loop.store) counts on the first call only." },
  { "recipe:call", "recipe:call(field, ...) -> what recipe[field](...) returns",
    "Calls the recipe's accept or score (the judge does) under an instruction bound (kwb.base.site.call_steps, 10^8 "
    .. "Lua instructions): one that runs past it, or fails, raises \"file:line: recipe field 'accept': ...\" at "
    .. "the field's line. space.restrict runs under the same bound." },
  { "recipe:fail", "recipe:fail(field, why)",
    "Raises \"file:line: recipe field 'field': why\" at the field's line: a mistake found while the recipe runs "
    .. "(an accept that returned no boolean, a score that is not finite)." },

  -- ---- kwb.host -----------------------------------------------------------
  { "kwb.host.compile", "kwb.host.compile(spec) -> mod | nil, message, info",
    "Builds C source into a shared object with the system compiler and loads it. spec: a source string, or "
    .. "{ source = | file =, name, defines, flags, cc, no_load }; cc defaults to $CC, else cc; no_load = true builds "
    .. "without loading (for mod:sandbox). mod has hash, path, log, cached, name. A failed build gives info.code "
    .. "\"compile-error\" with info.log; an unreadable file \"no-file\"; an unknown option raises." },
  { "kwb.host.preprocess", "kwb.host.preprocess(spec) -> text | nil, message, info",
    "The preprocessed text of a build (the same command as compile, with -E). spec as for compile, without no_load. "
    .. "Fails as compile does." },
  { "kwb.host.symbols", "kwb.host.symbols(path) -> { undefined =, data = } | nil, message, info",
    "The names a built object calls but does not define (undefined) and the writable data it defines (data), "
    .. "read with nm, without @version suffixes. info.code \"no-symbols\" when nm fails." },
  { "kwb.host.parse_signature", "kwb.host.parse_signature(prototype) -> ret, args, name",
    "Reads a C prototype such as \"void f(int n, float *x)\" into kwb types (\"void\", { \"i32\", \"ptr\" }, \"f\"); "
    .. "name is nil for a prototype without one. Raises on a type it does not know." },
  { "kwb.host.define_list", "kwb.host.define_list(defines) -> list",
    "Defines as sorted \"NAME=VALUE\" strings: true gives \"NAME\", false is left out, array items are kept as they "
    .. "are. Internal: equal settings hash equally." },
  { "kwb.host.build_dir", "kwb.host.build_dir() -> path",
    "Where host builds are kept: build/host in the cache file's directory." },
  { "kwb.files.which", "kwb.files.which(prog) -> path | nil",
    "The first executable named prog in a directory of $PATH; prog itself when it contains a '/' and is "
    .. "executable; nil otherwise." },
  { "kwb.files.resolve", "kwb.files.resolve(path) -> path",
    "A relative path made absolute against the directory kwb started in ($KWB_ORIGIN in a worker); an absolute "
    .. "path unchanged." },
  { "kwb.files.read_file", "kwb.files.read_file(path) -> contents | nil, message",
    "The file's bytes, or nil and io.open's message." },
  { "kwb.host.read_spec", "kwb.host.read_spec(spec, known, level) -> source, name | nil, message, info",
    "Internal: checks a compile spec against the option names in known and reads its file; what compile and "
    .. "kwb.cuda.compile share. A missing file gives info.code \"no-file\"; misuse raises at level." },
  { "kwb.host.buffer", "kwb.host.buffer(dtype, n) -> buf | nil, message, info",
    "A host buffer of n elements: f32, f64, f16, bf16, i8, i32, i64, u8, u32 or u64, between redzones. buf[i] "
    .. "reads and writes element i (1-based), #buf is n; fields dtype, n, bytes, device (\"host\"). Raises on an "
    .. "unknown dtype or n < 0; info.code \"out-of-memory\" when it cannot allocate." },
  { "kwb.host.compare", "kwb.host.compare(out, ref [, { atol =, rtol = }]) -> diff",
    "Compares two host buffers: max_abs, max_rel, rel_l2, n, nan, inf, poison, ref_nonfinite, ref_mean, bad "
    .. "(outside atol + rtol * |ref|; NaN, Inf and poison count), first_bad and worst (1-based, absent when none), "
    .. "and ok (no bad element and a finite reference). atol and rtol default to 0. Raises on unequal lengths." },
  { "kwb.host.time", "kwb.host.time(fn, args [, opts]) -> stats | nil, message, info",
    "Times a kernel from mod:fn called with the list args (args.n when it holds nils): kwb.stats's fields "
    .. "without converged, in seconds per call. opts: warmup (0.05 s), warmup_min (3 calls), min_samples (10), "
    .. "max_samples (10000), cap (1 s), target (0.005: stop when the median's 95% CI is within +-0.5%), "
    .. "min_sample (20e-6 s: calls are batched so one sample lasts this long). An unknown option raises." },
  { "mod:fn", 'mod:fn(prototype) or mod:fn(name, signature) -> fn | nil, message, info',
    "A callable kernel for the module's function: mod:fn \"void f(int n, float *x)\" or "
    .. "mod:fn(\"f\", \"void(int, float*)\"). fn(...) takes exactly the declared arguments (pointers: a host buffer, "
    .. "nil or a light userdata) and returns the C return value. info.code \"no-symbol\" when the module lacks it." },
  { "mod:sandbox", "mod:sandbox(prototype [, { timeout =, output = }]) -> sb | nil, message, info",
    "Runs the function in a process of its own; the buffers sb:call passes are shared with it. Its module's "
    .. "constructors run there under the sandbox's filter, timeout CPU seconds at most (default 60); output = true "
    .. "gives it this process's stdout and stderr (else /dev/null). info.code \"no-symbol\", \"forbidden\", "
    .. "\"timeout\" or \"crashed\" (what its constructors did) or \"sandbox-failed\"." },
  { "fn:time", "fn:time(opts, ...) -> stats | nil, message, info",
    "Times fn called with the arguments after opts (nil for the defaults); what kwb.host.time calls. info.code "
    .. "\"timing-failed\" on a failure." },
  { "sb:call", "sb:call(limit, ...) -> { cpu =, wall =, between = } | nil, message, info",
    "Calls the sandboxed function once with the arguments after limit (CPU seconds allowed): seconds of CPU and "
    .. "wall time. info.code \"crashed\", \"forbidden\" or \"timeout\", with info.wall. A sandbox failure raises." },
  { "sb:calls", "sb:calls(limit, { { ... }, ... }) -> { cpu =, wall =, between = } | nil, message, info",
    "As sb:call for 1 to 64 argument lists run back to back (n = the count of a list holding nils); cpu is the "
    .. "total." },
  { "sb:pid", "sb:pid() -> pid", "The sandbox process's id, or 0 once it is closed." },
  { "sb:close", "sb:close()", "Ends the sandbox process; a later call raises." },

  -- ---- host buffers -------------------------------------------------------
  { "buf:fill_uniform", "buf:fill_uniform(seed [, lo [, hi]]) -> buf",
    "Fills with values uniform in [lo, hi] (defaults -1, 1), element i a function of (seed, i); integer dtypes "
    .. "draw from the integers in [lo, hi]. Raises when lo > hi." },
  { "buf:fill_normal", "buf:fill_normal(seed [, mean [, std]]) -> buf",
    "Fills with normal values (defaults mean 0, std 1), element i a function of (seed, i), so a device buffer's "
    .. "fill with the same seed gives the same values. Raises when std < 0." },
  { "buf:fill_normal_stream", "buf:fill_normal_stream(seed [, mean [, std]]) -> buf",
    "The same distribution as fill_normal from one sequential stream: faster, other values." },
  { "buf:fill", "buf:fill(v) -> buf", "Sets every element to v." },
  { "buf:poison", "buf:poison() -> buf",
    "Sets every element to the dtype's poison pattern (a signalling NaN for floats, 0xA5 bytes for integers)." },
  { "buf:is_poison", "buf:is_poison(i) -> boolean", "True when element i (1-based) holds the poison pattern." },
  { "buf:poisoned", "buf:poisoned() -> count, first",
    "How many elements still hold the poison pattern, and the first of them (1-based), or nil." },
  { "buf:totable", "buf:totable([i [, j]]) -> list",
    "Elements i to j (default: all) as a Lua list; integers for integer dtypes. Raises outside 1..n." },
  { "buf:set", "buf:set(values [, offset]) -> buf",
    "Writes the list values from element offset (default 1) on. Raises when they do not fit." },
  { "buf:copy", "buf:copy(src) -> buf", "Copies src's elements into buf. Raises unless dtype and length are equal." },
  { "buf:clone", "buf:clone() -> buf", "A new host buffer with the same dtype, length and contents." },
  { "buf:checksum", "buf:checksum() -> hex", "The SHA-256 of the buffer's bytes, as 64 hex digits." },
  { "buf:digest", "buf:digest(key) -> integer",
    "A keyed 64-bit digest of the bytes: faster than checksum, and not reproducible without the key." },
  { "buf:redzone", "buf:redzone() -> nil | first, last",
    "nil when the bytes just outside the buffer are intact; else the first and last changed byte offsets from its "
    .. "start (negative: before it). The redzones are restored." },
  { "buf:raw", "buf:raw() -> bytes", "The buffer's bytes as a string." },
  { "buf:set_raw", "buf:set_raw(bytes) -> buf",
    "Replaces the buffer's bytes with the string. Raises unless its length is buf.bytes." },
  { "buf:free", "buf:free()", "Frees the memory now; later use of buf raises." },

  -- ---- kwb.cuda -----------------------------------------------------------
  { "kwb.cuda.device_count", "kwb.cuda.device_count() -> n | nil, message, info",
    "The number of CUDA devices. info.code \"no-driver\" (or \"no-device\") when the driver cannot tell." },
  { "kwb.cuda.device", "kwb.cuda.device([ordinal]) -> info | nil, message, info",
    "Device ordinal's properties (default 0): name, pci_bus_id, cc (\"9.0\"), arch (\"sm_90\"), sms, l2_bytes, "
    .. "memory_bytes, clock_khz, mem_clock_khz, bus_width, smem_optin, max_threads, cuda_driver_version, "
    .. "unified_addressing and pageable_access (booleans: what of the host's memory device code can reach)." },
  { "kwb.cuda.device_kind", "kwb.cuda.device_kind([device]) -> kind",
    "The text results and ceilings are keyed by: name, sm_XX, SM count, GiB of memory and the driver's major "
    .. "version. device: a kwb.cuda.device table; without one, device 0's, raising when there is none." },
  { "kwb.cuda.mem_info", "kwb.cuda.mem_info() -> free, total | nil, message, info",
    "The device's memory free now and in all, in bytes, as kwb's context sees it (cuMemGetInfo): how many "
    .. "compute-sanitizer runs fit at once. info.code \"no-driver\" (or \"no-device\") without one." },
  { "kwb.cuda.nvrtc_version", "kwb.cuda.nvrtc_version() -> version | nil, message, info",
    "NVRTC's version as \"major.minor\". info.code \"no-nvrtc\" when it cannot be loaded." },
  { "kwb.cuda.clocks", "kwb.cuda.clocks() -> { sm_mhz =, temp =, reasons = } | nil, message, info",
    "The SM clock in MHz, temperature in degrees C and NVML's throttle reason bits of the device kwb runs on. "
    .. "info.code \"no-nvml\" when NVML cannot tell." },
  { "kwb.cuda.build_dir", "kwb.cuda.build_dir() -> path",
    "Where CUDA builds are kept: build/cuda in the cache file's directory." },
  { "kwb.cuda.compile", "kwb.cuda.compile(spec) -> cmod | nil, message, info",
    "Builds CUDA source with NVRTC, or with nvcc into a shared object of host launchers when spec.nvcc = true. "
    .. "spec: a source string or { source = | file =, name, defines, flags, arch, include, lineinfo, nvcc }; arch "
    .. "defaults to device 0's, lineinfo to true; kwb.cuda.kernels_dir comes before the include list. cmod has "
    .. "hash, arch, log, path, cached, kind, resources (registers, spills, stack, static_smem, max_threads per "
    .. "kernel), name. info.code \"compile-error\" with info.log, \"no-nvrtc\", \"no-arch\", ...; an unknown option "
    .. "or arch raises." },
  { "kwb.cuda.compile_all", "kwb.cuda.compile_all(specs [, threads]) -> list",
    "Builds a list of specs on threads threads (default 8); each item is a cmod or { error =, code =, log = }. "
    .. "A spec whose file cannot be read raises." },
  { "kwb.cuda.prebuild", "kwb.cuda.prebuild(specs [, threads]) -> true | nil, message, info",
    "Starts the same builds as compile_all's in the background on threads threads (default 4) and returns at once; "
    .. "each lands in the build directory, where a later compile of the same spec (here or in a worker sharing the "
    .. "cache) finds it (cmod.cached). A failed build leaves nothing there: the later compile reports it. The run "
    .. "loop builds a grid strategy's next candidates this way while the current one is measured." },
  { "kwb.cuda.prebuilds_running", "kwb.cuda.prebuilds_running() -> n",
    "The background build jobs kwb.cuda.prebuild started that have not finished." },
  { "cmod:kernel", "cmod:kernel(name [, prototype]) -> kernel | nil, message, info",
    "A kernel of an NVRTC module for plans; the optional C prototype declares the argument types. kernel has name, "
    .. "module, resources, and reads attributes, params and nparams from the driver. info.code \"no-symbol\" when "
    .. "the module lacks it." },
  { "cmod:launcher", "cmod:launcher(name [, prototype]) -> kernel | nil, message, info",
    "The same function as cmod:kernel, named for an nvcc module's host launchers." },
  { "cmod:cubin", "cmod:cubin() -> bytes | nil", "The module's device image, or nil when it has none." },
  { "cmod:ptx", "cmod:ptx() -> text | nil", "The module's PTX, or nil when it has none." },
  { "kwb.cuda.buffer", "kwb.cuda.buffer(dtype, n) -> dbuf | nil, message, info",
    "A device buffer of n elements: the host dtypes, e4m3 and e2m1 (two to a byte), between guard bands (4 KB "
    .. "before, at least 4 KB after). Fields dtype, n, bytes, device (\"cuda\"), ptr; #dbuf is n. Raises on an "
    .. "unknown dtype or n < 0; fails with info.code \"alloc-failed\", \"no-driver\", ... Its methods give nil, "
    .. "message, info on a device failure, except redzone, which raises." },
  { "kwb.cuda.redzones", "kwb.cuda.redzones({ dbuf, ... } [, { out, ... }]) -> { [i] = { first, last } } [, { [j] = { count, first } }]",
    "Checks the guard bands of many buffers in one launch: an entry for each buffer written outside since its "
    .. "last check, byte offsets as dbuf:redzone gives. With outputs given, also the elements of each still "
    .. "holding the poison pattern (count and first index, as dbuf:poisoned gives), in the same launch and wait. "
    .. "Raises on a device failure." },
  { "kwb.cuda.tensor_map", "kwb.cuda.tensor_map { dbuf, dims =, box = [, strides =, element_strides =, dtype =, "
    .. "offset =, swizzle =, interleave =, l2 =, oob =] } -> tensor map | nil, message, info",
    "A TMA descriptor (cuTensorMapEncodeTiled, compute capability 9.0+) over a device buffer, for a kernel's "
    .. "`const __grid_constant__ CUtensorMap` parameter: pass it as a plan step's argument. dims innermost first "
    .. "(elements), strides in bytes for the outer dims (default packed), box the tile copied, swizzle \"none\" | "
    .. "\"32B\" | \"64B\" | \"128B\", interleave \"none\" | \"16B\" | \"32B\", l2 \"none\" | \"64B\" | \"128B\" "
    .. "| \"256B\", oob \"zero\" | \"nan\"; dtype defaults to the buffer's (bytes for 8-bit types). The driver's "
    .. "documented requirements are checked first, each mistake named by its field, and the map must lie inside "
    .. "the buffer. A launch plan step names one as { tensor_map = \"x\", dims =, box =, ... }." },
  { "kwb.cuda.tensor_map_args", "kwb.cuda.tensor_map_args(spec) -> args",
    "The arguments kwb.cuda.tensor_map would give the driver (enum values), checked; spec.address and spec.bytes "
    .. "may stand for the buffer, so it needs no device." },
  { "kwb.cuda.guard_layout", "kwb.cuda.guard_layout(bytes) -> before, after, allocation",
    "The guard bands' bytes around a device buffer of that size and the allocation's size; needs no device." },
  { "kwb.cuda.to_host", "kwb.cuda.to_host(dbuf) -> buf | nil, message, info",
    "A new host buffer with the device buffer's values (u8 bytes for e4m3 and e2m1)." },
  { "kwb.cuda.from_host", "kwb.cuda.from_host(buf) -> dbuf | nil, message, info",
    "A new device buffer holding a host buffer's values." },
  { "kwb.cuda.compare", "kwb.cuda.compare(out, ref [, { atol =, rtol = }]) -> diff | nil, message, info",
    "kwb.host.compare for device buffers, computed on the GPU; no worst field. Raises on unequal lengths." },
  { "kwb.cuda.checksums", "kwb.cuda.checksums({ dbuf, ... }) -> { hex, ... }",
    "dbuf:checksum of each buffer, taken before and after a candidate runs to see whether it wrote to its inputs. "
    .. "Raises on a device failure." },
  { "kwb.cuda.checksum_host", "kwb.cuda.checksum_host(bytes) -> hex",
    "dbuf:checksum's 64-bit checksum of a string, computed on the CPU: equal bytes give equal values." },
  { "kwb.cuda.plan", "kwb.cuda.plan([steps]) -> plan",
    "A launch plan: kernels run in order and timed as one unit. Each step is { kernel, grid =, block =, smem =, "
    .. "cluster =, args = } as plan:add takes it." },
  { "kwb.cuda.time", "kwb.cuda.time(plan [, opts]) -> stats | nil, message, info",
    "Runs the plan once, then times it: stats in seconds per run of the plan, with cold, graph and, where NVML "
    .. "reads them, clocks = { sm_mhz_before, sm_mhz_after, sm_mhz_max, temp_before, temp_after, reasons, "
    .. "throttled }. opts: kwb.host.time's options, hot = true (no L2 flush), graph = false (plain launches). "
    .. "info.code \"launch-failed\", ..." },
  { "kwb.cuda.ceilings_path", "kwb.cuda.ceilings_path(kind) -> path",
    "The file `kwb doctor` stores a device kind's ceilings in: ceilings/<kind>.json in the cache's directory." },
  { "kwb.cuda.ceilings", "kwb.cuda.ceilings([kind]) -> ceilings | nil, message, info",
    "The measured ceilings of a device kind (default: device 0's): copy_bytes_per_s, bf16_flops_per_s, "
    .. "fma_flops_per_s, ... info.code \"no-ceilings\" (run `kwb doctor`) or \"bad-ceilings\"." },
  { "kwb.cuda.copy_bandwidth", "kwb.cuda.copy_bandwidth() -> bytes_per_s, where",
    "The copy rate (read + write) `kwb doctor` stored, where = \"kwb doctor\"; else the fastest of 10 copies of "
    .. "256 MiB measured now, where = \"measured now\". Raises when the measurement fails." },
  { "kwb.cuda.roofline", "kwb.cuda.roofline(stats | seconds, { bytes =, flops =, tensor = } [, ceilings]) -> r",
    "r.gbs (GB/s) and r.tflops from the median time and the work; r.pct_bw and r.pct_flops where ceilings are "
    .. "known (default kwb.cuda.ceilings()). Flops compare with the bf16 peak, with the FMA peak when "
    .. "tensor = false. Raises unless the time is positive." },
  { "plan:add", "plan:add { kernel, grid =, block =, smem =, cluster =, args = } -> plan",
    "Appends a launch. grid, block and cluster: an integer or { x, y, z } (default 1, no cluster); smem: dynamic "
    .. "shared memory bytes (0); args: buffers (nil for NULL) and numbers, args.n when it holds nils. Types come "
    .. "from the kernel's prototype, else integers are i32 and numbers f32 (64-bit where the parameter is 8 bytes). "
    .. "Raises on a wrong field, count or type." },
  { "plan:run", "plan:run() -> true | nil, message, info",
    "Runs the plan once and waits. info.code \"launch-failed\", \"no-driver\", ..." },
  { "plan:poison_before", "plan:poison_before({ dbuf, ... }) -> plan",
    "These buffers (64 at most) are poisoned before every timed run, outside the timed region, so a kernel that "
    .. "skips its work leaves poison in its output." },
  { "plan:replay", "plan:replay([cold]) -> seconds | nil, message, info",
    "One timed run of the plan as a CUDA graph; cold unless cold == false (poison_before buffers poisoned and the "
    .. "L2 flushed first). The caller prepares inputs and checks outputs around it." },
  { "plan:time", "plan:time([opts]) -> stats | nil, message, info", "kwb.cuda.time(plan, opts)." },

  -- ---- device buffers -----------------------------------------------------
  { "dbuf:fill_uniform", "dbuf:fill_uniform(seed [, lo [, hi]]) -> dbuf",
    "buf:fill_uniform on the device (defaults -1, 1): the host's values for the same seed, bit for bit. Raises "
    .. "when lo > hi." },
  { "dbuf:fill_normal", "dbuf:fill_normal(seed [, mean [, std]]) -> dbuf",
    "buf:fill_normal on the device (defaults 0, 1): the host's values to the last bit of the device's libm." },
  { "dbuf:fill_normal_stream", "dbuf:fill_normal_stream(seed [, mean [, std]]) -> dbuf",
    "Normal values of another stream than dbuf:fill_normal's, the same distribution from one hash an element and "
    .. "single-precision math: as fast as the memory takes them (the timed runs' fresh inputs)." },
  { "dbuf:fill", "dbuf:fill(v) -> dbuf", "Sets every element to v." },
  { "dbuf:poison", "dbuf:poison() -> dbuf", "Sets every element to the dtype's poison pattern." },
  { "dbuf:zero", "dbuf:zero() -> dbuf", "Sets every byte to 0." },
  { "dbuf:upload", "dbuf:upload(buf | bytes) -> dbuf",
    "Copies a host buffer's or a string's bytes to the device. Raises unless the sizes are equal." },
  { "dbuf:set_raw", "dbuf:set_raw(bytes | buf) -> dbuf", "The same function as dbuf:upload." },
  { "dbuf:download", "dbuf:download(buf) -> buf",
    "Copies the bytes into the host buffer buf and returns it. Raises unless the sizes are equal." },
  { "dbuf:raw", "dbuf:raw() -> bytes", "The buffer's bytes, copied to the host, as a string." },
  { "dbuf:copy", "dbuf:copy(src) -> dbuf",
    "Copies the device buffer src into dbuf. Raises unless dtype and length are equal." },
  { "dbuf:checksum", "dbuf:checksum() -> hex",
    "A 64-bit checksum of the bytes computed on the device, as 16 hex digits (not SHA-256: see "
    .. "kwb.cuda.checksum_host)." },
  { "dbuf:digest", "dbuf:digest(key) -> integer", "A keyed 64-bit digest of the bytes; the key stays on the host." },
  { "dbuf:poisoned", "dbuf:poisoned() -> count, first",
    "How many elements still hold the poison pattern, and the first of them (1-based), or nil." },
  { "dbuf:redzone", "dbuf:redzone() -> nil | first, last",
    "nil when the guard bands are intact; else the first and last byte offsets written outside the buffer "
    .. "(negative: before it). The bands are filled again. Raises on a device failure." },
  { "dbuf:save", "dbuf:save([copy]) -> copy",
    "The buffer's bytes in page-locked host memory: a new copy, or into copy (from an earlier save) when given." },
  { "dbuf:load", "dbuf:load(copy) -> dbuf", "Writes the bytes of a dbuf:save copy back into the buffer." },
  { "dbuf:free", "dbuf:free()", "Frees the device memory now; later use of dbuf raises." },

  -- ---- kwb.cache ----------------------------------------------------------
  { "kwb.cache.open", "kwb.cache.open([path]) -> cache | nil, message, info",
    "Opens (or creates) the candidate cache at path, default kwb.cache_path. info.code \"not-a-cache\", "
    .. "\"schema-too-new\", \"io-error\", ... The cache closes with cache:close() or a <close> variable." },
  { "kwb.cache.json", "kwb.cache.json(v [, as_array]) -> text",
    "Canonical JSON: sorted keys, whole numbers without a fraction, other floats to 17 digits; an empty table is "
    .. "{} unless as_array. Raises on NaN, Inf, functions and tables with non-string keys." },
  { "kwb.cache.outcome_known", "kwb.cache.outcome_known(outcome) -> boolean",
    "True for an outcome a result may carry (the list kwb.cache.outcomes: the funnel and \"start\")." },
  { "kwb.cache.candidate_id", "kwb.cache.candidate_id(problem, source, params, flags) -> id",
    "A candidate's id: SHA-256 (64 hex digits) over the problem key, the source's hash, params and flags." },
  { "kwb.cache.build_id", "kwb.cache.build_id(candidate, arch, toolchain) -> id",
    "A build's id: SHA-256 over the candidate id, arch and toolchain." },
  { "kwb.host.kind", "kwb.host.kind([cpuinfo]) -> kind",
    "The host backend's device kind, \"host:<CPU model>:<processors>\", from /proc/cpuinfo or the text given." },
  { "kwb.cache.imported_from", "kwb.cache.imported_from(verify_or_settings) -> bundle | nil",
    "The bundle a result's verdict (its verify) or a run's settings came in; nil where it was measured here." },
  { "kwb.cache.as_measured", "kwb.cache.as_measured(verify_or_settings, trust) -> boolean",
    "Whether a result or run counts as a measurement of this machine's: measured here, or imported where trust "
    .. "(a recipe's trust_imported) is true. The loop's one rule for imports (kwb.loop.store's known)." },
  { "cache:put_candidate", "cache:put_candidate { problem =, source = [, ...] } -> id, new",
    "Stores a candidate unless its id is there; new is false when it was. Fields: params, flags, parent (an id or "
    .. "prefix), origin = { strategy, model }, rationale, outcome, run, created, id, transcript. Raises on a "
    .. "malformed field or an unknown parent." },
  { "cache:get", "cache:get(id) -> candidate | nil, message, info",
    "A candidate by id or prefix, with its source text, params and flags." },
  { "cache:resolve", "cache:resolve(prefix) -> id | nil, message, info",
    "The full candidate id of a prefix of 4 to 64 hex digits. info.code \"bad-id\", \"not-found\" or "
    .. "\"ambiguous\" (info.matches lists them)." },
  { "cache:set_outcome", "cache:set_outcome(id, outcome) -> true | nil, message, info",
    "Sets a candidate's outcome. Raises on an unknown outcome; fails as resolve does." },
  { "cache:list", "cache:list([problem]) -> candidates",
    "Every candidate (of problem, when given), oldest first, without source text." },
  { "cache:lineage", "cache:lineage(id) -> { id, parent, ... } | nil, message, info",
    "The candidate and its ancestors as far as the cache knows them." },
  { "cache:add_build", "cache:add_build { candidate =, arch =, toolchain = [, ...] } -> id",
    "Stores (or replaces) a build: ok (default true), log, binary, resources, created, code (the built code's "
    .. "digest, 64 hex digits). Raises on a malformed field or an unknown candidate." },
  { "cache:build", "cache:build(id, arch, toolchain) -> build | nil, message, info",
    "A stored build with its log and binary read back. info.code \"not-found\" when there is none." },
  { "cache:builds", "cache:builds(id) -> builds | nil, message, info",
    "A candidate's builds (id, arch, toolchain, ok, resources, created, code), by arch and toolchain." },
  { "cache:codes", "cache:codes(arch, toolchain) -> { [candidate id] = code digest }",
    "The built code's digest of every build on arch with toolchain that has one (builds of schema 4 on, made "
    .. "here: a bundle carries none); the loop knows a duplicate by it." },
  { "cache:add_result", "cache:add_result { candidate =, device =, shape =, outcome = [, ...] } -> true",
    "Stores a result (verify, timing, clocks, run, created): the latest per candidate, device kind and shape "
    .. "replaces the one before; every one is also kept as a measurement. Raises on a malformed field or an "
    .. "unknown candidate." },
  { "cache:revise_result", "cache:revise_result { candidate =, device =, shape =, outcome =, verify = } -> true",
    "Replaces a stored result's outcome and verdict (a result judged again), its timing and measurements as "
    .. "they were. Raises on a malformed field or an unknown candidate." },
  { "cache:results", "cache:results(id) -> results | nil, message, info",
    "A candidate's results, by device then shape, verify, timing and clocks decoded." },
  { "cache:measurements", "cache:measurements(id) -> rows | nil, message, info",
    "Every measurement of a candidate, oldest first." },
  { "cache:profiles", "cache:profiles(id) -> rows | nil, message, info",
    "A candidate's profiles (kwb profile), one per device kind and shape, the latest: candidate, device, shape, "
    .. "class, data (the profile), created." },
  { "cache:add_profile", "cache:add_profile { candidate =, device =, shape =, class =, data = } -> true",
    "Keeps a profile (replacing the one of that candidate, device kind and shape). Raises on a malformed field." },
  { "cache:best", "cache:best(problem [, { shape =, device =, sanitized = }]) -> rows",
    "The fastest verified result (accepted, slower or start) per device kind and shape measured here, and before "
    .. "it a faster one a bundle brought, where there is one: { device, shape, candidate, median, outcome, "
    .. "sanitized, imported (the bundle, or nil) }; sanitized = true counts an accepted or slower result only where "
    .. "it was sanitized here (compute-sanitizer found nothing)." },
  { "cache:begin_run", "cache:begin_run { recipe = [, source =, settings =, started =] } -> id",
    "Records the start of a run; source defaults to the recipe file's text. Raises when that file cannot be read." },
  { "cache:end_run", "cache:end_run(id, funnel [, ended [, usage]]) -> true",
    "Records a run's end time (default now), funnel (outcome -> count) and the model's usage. Raises for an "
    .. "unknown run." },
  { "cache:amend_run", "cache:amend_run(id, fields) -> true",
    "Merges fields into a run record's settings: a run's baseline, measured after the record began (kwb report reads it)." },
  { "cache:runs", "cache:runs() -> runs", "Every run record, oldest first, settings, funnel and usage decoded." },
  { "cache:find_run", "cache:find_run(prefix) -> run | nil, message, info",
    "The run record whose id starts with prefix (4 hex digits or more). info.code \"no-run\", \"ambiguous\" or \"bad-id\"." },
  { "cache:put_certificate", "cache:put_certificate(run, certificate) -> true",
    "Keeps a run's certificate, the record of its final round (kwb.loop.certify), replacing an earlier one." },
  { "cache:certificate", "cache:certificate(run) -> certificate | nil",
    "A run's certificate: its kernels, shapes, ratios with their 95% intervals, device and kwb's commit." },
  { "cache:put_lessons", "cache:put_lessons { problem =, device =, lessons = { { text =, tags =, ids = } } [, ...] } -> ids",
    "Keeps lessons of the lessons ledger for a problem (its key) on a device kind: each a sentence, one to four "
    .. "lowercase technique tags and the candidates that show it (ids or prefixes, each in the cache); run, "
    .. "transcript and created may be given. A lesson already kept stays as it was; all or nothing." },
  { "cache:lessons", "cache:lessons([{ problem =, device = }]) -> rows",
    "The lessons kept (of a problem, on a device kind, where given), oldest first: id, problem, device, pos, text, "
    .. "tags, ids, run, transcript, origin (the bundle it came in), created." },
  { "cache:put_transcript", "cache:put_transcript { provider =, model =, request = [, ...] } -> id",
    "Stores one model request and its reply: run, purpose, prompt_hash, reply, tokens_in, tokens_out, seconds, "
    .. "cost, attempts, error." },
  { "cache:transcript", "cache:transcript(id) -> row | nil, message",
    "A transcript with its request and reply text read back." },
  { "cache:transcripts", "cache:transcripts([run]) -> rows",
    "Every transcript (of run, when given) without bodies, oldest first." },
  { "cache:put_blob", "cache:put_blob(data [, base]) -> id, created",
    "Stores bytes content-addressed and compressed, as a delta against blob base when given." },
  { "cache:get_blob", "cache:get_blob(id) -> data | nil, message, info",
    "A blob's bytes. info.code \"corrupt-blob\" or \"not-found\", info.blob the id; a database error raises." },
  { "cache:exec", "cache:exec(sql, ...) -> rows",
    "Runs one SQL statement with its ? parameters; rows are tables keyed by column. SQL errors raise." },
  { "cache:transaction", "cache:transaction(fn, ...) -> ...",
    "Calls fn(...) inside one write transaction (joining an open one) and returns its results; an error rolls "
    .. "it back and is raised again." },
  { "cache:stats", "cache:stats() -> stats",
    "Counts and sizes: candidates, problems, builds, results, runs, blobs, full_blobs, delta_blobs, max_depth, "
    .. "mirrored_blobs, mirror_bytes, raw_bytes, stored_bytes, ratio, schema, file_bytes." },
  { "cache:gc", "cache:gc([{ vacuum = }]) -> { blobs =, bytes = }",
    "Removes blobs no record needs and stale mirrors, then compacts the file (vacuum = false skips that). "
    .. "Records are never removed." },
  { "cache:check", "cache:check([{ repair = }]) -> report",
    "Decodes every stored copy of every blob and checks every row for sense as import does: blobs, frames, ok, "
    .. "corrupt, unreadable, unmirrored, rows, unsound ({ table, what, message } each). repair = true rewrites a "
    .. "corrupt copy from a sound one and mirrors unmirrored bases." },
  { "cache:integrity", "cache:integrity() -> text", "SQLite's integrity check: \"ok\" or its list of problems." },
  { "cache:export", "cache:export(file [, filters]) -> counts | nil, message, info",
    "Writes a bundle (a regular file, or a new one in a directory that exists) of the matching candidates with "
    .. "their ancestors, builds, results and runs, and the lessons all of whose candidates are among them. filters: "
    .. "problem, ids, outcome, since, binaries (false leaves them out). counts: candidates, builds, results, runs "
    .. "(certificates and lessons where there are any)." },
  { "cache:import", "cache:import(file) -> counts | nil, message, info",
    "Checks a whole bundle (every hash, and every row for sense), then adds its rows in one transaction, or "
    .. "nothing; rows already present stay as they are. Its results, runs and lessons are marked with the bundle's name. "
    .. "counts are of new rows and blobs. info.code \"corrupt-bundle\", \"bundle-version\", ..." },
  { "cache:close", "cache:close()", "Closes the database; later use raises." },

  -- ---- kwb.problem --------------------------------------------------------
  { "kwb.problem.define", "kwb.problem.define { name =, vars =, args =, reference = [, ...] } -> problem",
    "A problem spec: what a kernel computes. Also fn, tolerance ({ atol, rtol } or { rel_l2 }), bytes, flops, "
    .. "launch, options, description, draw, vary. Raises on a malformed spec; the format is in kwb/problem.lua." },
  { "kwb.problem.get", "kwb.problem.get(name) -> problem | nil, message",
    "The problem the module kwb.problems.<name> returns; a constructor it returns is called with {}. No such "
    .. "module is \"no problem named ...\"; one that fails to load is \"problem NAME fails to load: why\"." },
  { "kwb.problem.is_problem", "kwb.problem.is_problem(v) -> boolean", "True when v is a problem object." },
  { "kwb.problem.shape_set", "kwb.problem.shape_set(key) -> string",
    "A shape key with its variables in one order: \"rows=64,cols=100\" and \"cols=100,rows=64\" give the same "
    .. "string (a key without names stands for itself)." },
  { "problem:prototype", "problem:prototype([fname]) -> text",
    "The C prototype candidates export (fname replaces the name), e.g. "
    .. "\"void matmul(int n, const float *a, const float *b, float *c)\"." },
  { "problem:key", "problem:key() -> text", "The name with its sorted options: part of every result key." },
  { "problem:check_shape", "problem:check_shape(shape) -> true | nil, message",
    "Checks that a shape gives every variable an integer (positive unless its min is 0) and nothing else, and "
    .. "that every argument is sound there before anything is allocated: a buffer's size a whole number of "
    .. "elements from 1 to 2^53 computed without overflow, an integer scalar within its type's range." },
  { "problem:shape_key", "problem:shape_key(shape) -> text", "The shape as \"M=128,N=64\", in the order of vars." },
  { "problem:bytes_of", "problem:bytes_of(shape) -> number | nil",
    "The bytes the problem moves at a shape; nil when it gives none." },
  { "problem:flops_of", "problem:flops_of(shape) -> number | nil",
    "The flops the problem does at a shape; nil when it gives none." },

  -- ---- kwb.figures ---------------------------------------------------------
  { "kwb.figures.time", "kwb.figures.time(seconds) -> text",
    "A time with a unit: \"1.250 s\", \"3.100 ms\", \"412.0 us\", \"80 ns\"; \"-\" for nil." },
  { "kwb.figures.table", "kwb.figures.table(columns, rows) -> lines",
    "An aligned text table. columns: names (the first left-aligned, the others right) or { name, align = "
    .. "\"left\" } tables (right-aligned otherwise); rows: lists of values, nil shown as \"-\"." },
  { "kwb.figures.print_table", "kwb.figures.print_table(columns, rows)", "Prints kwb.figures.table's lines." },
}
