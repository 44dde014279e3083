-- tests/lua/test_sandbox.lua: a host candidate's own process (core/sandbox.c):
-- what it may do, what it may not, and what the judge's clock sees.
local t = require "t"
local core = require "kwb.core"
local host = require "kwb.host"

local proto = "void add(int n, const float *a, float *c)"

local function sandbox(file)
  local mod = assert(host.compile { file = "tests/sandbox/" .. file, flags = { "-O1" }, no_load = true })
  return mod:sandbox(proto)
end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local a, c = core.buffer("f32", 1000), core.buffer("f32", 1000)
a:fill_uniform(1, 0, 1)

t.test("sandbox_runs_the_kernel_on_the_judges_buffers", function()
  local sb = assert(sandbox "add.c")
  c:poison()
  local r = assert(sb:call(1, 1000, a, c))
  local function f32(x) return (string.unpack("f", string.pack("f", x))) end
  t.eq(c[1], f32(a[1] + 1))
  t.eq(c[1000], f32(a[1000] + 1))
  t.truthy(r.cpu > 0 and r.cpu < 0.01, "cpu " .. r.cpu)
  t.eq(r.between, 0, "asleep between calls")
  sb:close()
end)

t.test("sandbox_process_has_an_empty_environment_and_no_privileges", function()
  local sb = assert(sandbox "add.c")
  local pid = sb:pid()
  t.truthy(pid > 0)
  t.eq(read("/proc/" .. pid .. "/environ"), "")
  local status = assert(read("/proc/" .. pid .. "/status"))
  t.truthy(status:find("\nSeccomp:\t2\n", 1, true), "under a seccomp filter")
  t.truthy(status:find("\nNoNewPrivs:\t1\n", 1, true))
  if core.uid() == 0 then t.truthy(status:find("\nUid:\t65534\t65534\t65534\t65534\n", 1, true), status) end
  sb:close()
  t.eq(read("/proc/" .. pid .. "/status"), nil, "gone once closed")
end)

-- The judge's other buffers (its expected outputs among them) are not in the
-- sandbox: it maps the ones it is passed, and only those.
t.test("sandbox_maps_only_the_buffers_it_is_passed", function()
  local others = {}
  for i = 1, 5 do others[i] = core.buffer("f32", 100) end
  local sb = assert(sandbox "add.c")
  assert(sb:call(1, 1000, a, c))
  local maps = assert(read("/proc/" .. sb:pid() .. "/maps"))
  local shared = 0
  for line in maps:gmatch("[^\n]+") do
    if line:find("/memfd:kwb-buffer", 1, true) then shared = shared + 1 end
  end
  t.eq(shared, 2, "a and c")
  sb:close()
end)

-- A call's buffers are mapped in the sandbox while it runs; those of earlier
-- calls it does not use are gone by then: a candidate reaches the buffers of
-- the calls at hand and no other (a shape's bench, not another shape's).
t.test("sandbox_unmaps_the_buffers_earlier_calls_used", function()
  local function mapped(sb)
    local maps, n = assert(read("/proc/" .. sb:pid() .. "/maps")), 0
    for line in maps:gmatch("[^\n]+") do
      if line:find("/memfd:kwb-buffer", 1, true) then n = n + 1 end
    end
    return n
  end
  local a2, c2 = core.buffer("f32", 1000), core.buffer("f32", 1000)
  a2:fill(3)
  local sb = assert(sandbox "add.c")
  assert(sb:call(1, 1000, a, c))
  t.eq(mapped(sb), 2, "a and c")
  assert(sb:calls(1, { { 1000, a, c }, { 1000, a2, c2 } }))
  t.eq(mapped(sb), 4, "a batch of two calls: both benches")
  c2:poison()
  assert(sb:call(1, 1000, a2, c2))
  t.eq(mapped(sb), 2, "a2 and c2 alone: a and c unmapped")
  t.eq(c2[1000], 4, "and the call ran on a2 and c2")
  assert(sb:call(1, 1000, a2, a2))
  t.eq(mapped(sb), 1, "a2 passed twice: mapped once")
  t.eq(a2[1], 4)
  sb:close()
end)

t.test("sandbox_refuses_a_signal_to_the_judge_and_names_the_call", function()
  local sb = assert(sandbox "kill_parent.c")
  local me = tonumber(read("/proc/self/stat"):match("^(%d+)"))
  local r, why, info = sb:call(1, me, a, c)
  t.eq(r, nil)
  t.eq(info.code, "forbidden")
  t.eq(why, "system call kill (number 62), which the sandbox does not allow")
end)

t.test("sandbox_refuses_opening_a_file", function()
  local _, why, info = assert(sandbox "open_maps.c"):call(1, 10, a, c)
  t.eq(info.code, "forbidden")
  t.eq(why, "system call openat (number 257), which the sandbox does not allow")
end)

t.test("sandbox_refuses_a_thread", function()
  local _, why, info = assert(sandbox "thread.c"):call(1, 10, a, c)
  t.eq(info.code, "forbidden")
  t.eq(why, "system call rt_sigaction (number 13), which the sandbox does not allow", "pthread_create's first")
end)

t.test("sandbox_refuses_a_constructor_that_forks", function()
  local sb, why, info = sandbox "constructor.c"
  t.eq(sb, nil)
  t.eq(info.code, "forbidden")
  t.eq(why, "while its module loaded, the candidate made a system call clone (number 56), which the sandbox does not "
            .. "allow")
end)

t.test("sandbox_crash_names_the_signal", function()
  local _, why, info = assert(sandbox "segv.c"):call(1, 10, a, c)
  t.eq(info.code, "crashed")
  t.eq(why, "died of SIGSEGV (Segmentation fault)")
end)

t.test("sandbox_past_its_limit_is_killed", function()
  local t0 = core.now()
  local _, why, info = assert(sandbox "spin.c"):call(0.2, 10, a, c)
  t.eq(info.code, "timeout")
  t.eq(why, "past its limit of 0.2 s")
  t.truthy(core.now() - t0 < 2, "killed soon after")
end)

t.test("sandbox_time_is_its_own_processor_time", function()
  local sb = assert(sandbox "burn.c")
  local r = assert(sb:call(1, 10, a, c))
  t.truthy(r.cpu >= 0.02 and r.cpu < 0.04, "20 ms of work measured as " .. r.cpu)
  sb:close()
end)

-- The judge ends a call's time when the sandbox sleeps again, not when a
-- "done" arrives: one the kernel sends itself before working saves it nothing.
t.test("sandbox_answering_early_does_not_shorten_the_time", function()
  local sb = assert(sandbox "early_done.c")
  for i = 1, 3 do
    local r = assert(sb:call(1, 0, nil, nil))
    t.truthy(r.cpu >= 0.02, string.format("call %d: 20 ms of work measured as %.4f s", i, r.cpu))
    t.truthy(r.between < 1e-3, "no work between calls")
  end
  sb:close()
end)

-- Past the process's file size limit a buffer is private memory (no memfd
-- can be that large): it still works here, and a sandbox refuses it by name.
t.test("sandbox_buffer_past_the_file_size_limit_is_private_and_refused", function()
  local mod = assert(host.compile { file = "tests/sandbox/add.c", no_load = true })
  local script = string.format([[
local core = require "kwb.core"
local big = core.buffer("f32", 1 << 20)
big:fill(2)
local c = core.buffer("f32", 4)
local sb = assert(core.host_sandbox(%q, "add", "void", { "i32", "ptr", "ptr" }))
local r, why, info = sb:call(1, 4, big, c)
print(big[1 << 20], info and info.code, why)]], mod.path)
  local p = io.popen("ulimit -f 1024 && ./kwb -e '" .. script:gsub("'", "'\\''") .. "' 2>&1")
  local out = p:read("a")
  p:close()
  t.eq(out, "2.0\tcrashed\ta buffer of 4194304 bytes is not in shared memory (it passes this process's file size "
            .. "limit), so no sandbox can be given it\n")
end)

t.test("sandbox_a_missing_function_is_no_symbol", function()
  local mod = assert(host.compile { file = "tests/sandbox/add.c", no_load = true })
  local sb, why, info = mod:sandbox "void mul(int n, const float *a, float *c)"
  t.eq(sb, nil)
  t.eq(info.code, "no-symbol")
  t.eq(why, "no function mul in the module")
end)

t.test("sandbox_module_built_for_a_sandbox_does_not_load_here", function()
  local mod = assert(host.compile { file = "tests/sandbox/add.c", no_load = true })
  local fn, why = mod:fn(proto)
  t.eq(fn, nil)
  t.truthy(why:find("was built to run in a sandbox, not here", 1, true), why)
end)

-- No candidate code runs before the strict filter: a module's constructors
-- run in the sandbox under it, so the judge's /proc entries are out of
-- reach from a constructor as from the kernel (and the sandbox runs as
-- another uid, kwb_sandbox_start).
local me = tonumber(read("/proc/self/stat"):match("^(%d+)"))
for _, what in ipairs { "cmdline", "mem" } do
  t.test("sandbox_constructor_cannot_open_the_judges_proc_" .. what, function()
    local mod = assert(host.compile { file = "tests/sandbox/judge_proc.c", no_load = true,
                                      defines = { IN_CTOR = 1, JUDGE = me, WHAT = what } })
    local sb, why, info = mod:sandbox(proto)
    t.eq(sb, nil)
    t.eq(info.code, "forbidden")
    t.eq(why, "while its module loaded, the candidate made a system call openat (number 257), which the sandbox "
              .. "does not allow")
  end)
  t.test("sandbox_kernel_cannot_open_the_judges_proc_" .. what, function()
    local mod = assert(host.compile { file = "tests/sandbox/judge_proc.c", no_load = true, defines = { WHAT = what } })
    local _, why, info = assert(mod:sandbox(proto)):call(1, me, a, c)
    t.eq(info.code, "forbidden")
    t.eq(why, "system call openat (number 257), which the sandbox does not allow")
  end)
end

t.test("sandbox_uid_differs_from_the_judges", function()
  local sb = assert(sandbox "add.c")
  local status = assert(read("/proc/" .. sb:pid() .. "/status"))
  local judge = assert(read("/proc/self/status")):match("\nUid:\t(%d+)")
  t.truthy(status:match("\nUid:\t(%d+)") ~= judge, status)
  sb:close()
end)

-- A constructor that spins is stopped at the limit given (the recipe's
-- timeout), not a minute later.
t.test("sandbox_constructor_past_its_limit_is_timeout", function()
  local mod = assert(host.compile { source = "__attribute__((constructor)) static void s(void) { for (volatile int x = 0;; x++) {} }\n"
                                              .. "void add(int n, const float *a, float *c) { (void)n; (void)a; (void)c; }\n",
                                    name = "ctor_spin.c", no_load = true })
  local t0 = core.now()
  local sb, why, info = mod:sandbox(proto, { timeout = 0.3 })
  t.eq(sb, nil)
  t.eq(info.code, "timeout")
  t.eq(why, "while its module loaded, its initialisers ran past the timeout (the timeout is 0.3 s of CPU time); its "
            .. "sandbox was killed")
  t.truthy(core.now() - t0 < 10, "stopped soon after")
end)

-- A module's initialisers still run, before the first call.
t.test("sandbox_runs_a_constructor_before_the_first_call", function()
  local mod = assert(host.compile { source = "static float one;\n__attribute__((constructor)) static void s(void) { one = 1; }\n"
                                              .. "void add(int n, const float *a, float *c) { for (int i = 0; i < n; i++) c[i] = a[i] + one; }\n",
                                    name = "ctor_one.c", no_load = true })
  local sb = assert(mod:sandbox(proto))
  c:poison()
  assert(sb:call(1, 1000, a, c))
  t.eq(c[7], (string.unpack("f", string.pack("f", a[7] + 1))))
  sb:close()
end)

-- The initialisers run on the calls' own thread (the sandbox has one), under
-- the calls' filter: a constructor that notes its thread finds the kernel on
-- the same one, and one that makes a call only the loading filter allows
-- (a read) is stopped at it.
t.test("sandbox_runs_the_initialisers_on_the_calls_thread_under_their_filter", function()
  local mod = assert(host.compile { source = "#define _GNU_SOURCE\n#include <unistd.h>\nstatic pid_t at;\n"
                                              .. "__attribute__((constructor)) static void s(void) { at = gettid(); }\n"
                                              .. "void add(int n, const float *a, float *c) { float d = gettid() == at ? 1 : 2;\n"
                                              .. "  for (int i = 0; i < n; i++) c[i] = a[i] + d; }\n",
                                    name = "ctor_tid.c", no_load = true })
  local sb = assert(mod:sandbox(proto))
  c:poison()
  assert(sb:call(1, 1000, a, c))
  t.eq(c[3], (string.unpack("f", string.pack("f", a[3] + 1))), "the same thread")
  sb:close()
  mod = assert(host.compile { source = "#include <unistd.h>\n__attribute__((constructor)) static void s(void) { char b; "
                                       .. "(void)read(0, &b, 1); }\nvoid add(int n, const float *a, float *c) { }\n",
                              name = "ctor_read.c", no_load = true })
  local sb2, why, info = mod:sandbox(proto)
  t.eq(sb2, nil)
  t.eq(why, "while its module loaded, the candidate made a system call read (number 0), which the sandbox does not allow")
  t.eq(info.code, "forbidden")
end)

-- A mapping moved or doubled by mremap would keep a buffer's pages after the
-- judge unmaps it: mremap may resize in place only (anything else is ENOMEM,
-- so realloc copies instead).
t.test("sandbox_mremap_cannot_keep_an_alias_of_a_buffer", function()
  local mod = assert(host.compile { source = "#define _GNU_SOURCE\n#include <stdint.h>\n#include <sys/mman.h>\n#include <stdlib.h>\n"
                                              .. "void add(int n, const float *a, float *c) {\n"
                                              .. "  void *page = (void *)((uintptr_t)a & ~(uintptr_t)4095);\n"
                                              .. "  void *alias = mremap(page, 0, 4096, MREMAP_MAYMOVE);\n"
                                              .. "  char *big = malloc(1 << 20), *bigger = realloc(big, 4 << 20);\n"
                                              .. "  float d = (alias == MAP_FAILED) + (bigger != 0);\n"
                                              .. "  for (int i = 0; i < n; i++) c[i] = a[i] + d; }\n",
                                    name = "mremap_alias.c", no_load = true })
  local sb = assert(mod:sandbox(proto))
  c:poison()
  assert(sb:call(1, 1000, a, c))
  t.eq(c[5], (string.unpack("f", string.pack("f", a[5] + 2))), "no alias made; realloc went on")
  sb:close()
end)

-- kwb is linked with full RELRO: its global offset table is read-only once it
-- runs, so no code in a sandbox can send kwb's own calls elsewhere through it.
t.test("kwb_is_linked_with_its_got_read_only", function()
  local p = assert(io.popen("readelf -d kwb 2>&1"))
  local d = p:read("a")
  p:close()
  t.truthy(d:find("BIND_NOW", 1, true) or d:find("Flags: NOW", 1, true), d:sub(1, 300))
  p = assert(io.popen("readelf -lW kwb 2>&1"))
  t.truthy(p:read("a"):find("GNU_RELRO", 1, true), "a GNU_RELRO segment")
  p:close()
end)

-- An indirect function's resolver would run while the module loads: refused.
t.test("sandbox_refuses_a_module_with_an_ifunc", function()
  local mod = assert(host.compile { source = "static void add_impl(int n, const float *a, float *c) { for (int i = 0; i < n; i++) c[i] = a[i] + 1; }\n"
                                              .. "static void *pick(void) { return (void *)add_impl; }\n"
                                              .. "void add(int n, const float *a, float *c) __attribute__((ifunc(\"pick\")));\n",
                                    name = "ifunc.c", no_load = true })
  local sb, why, info = mod:sandbox(proto)
  t.eq(sb, nil)
  t.eq(info.code, "forbidden")
  t.eq(why, "the module has an indirect function (ifunc), whose resolver the dynamic loader would run before the "
            .. "sandbox's system call filter")
end)

-- Text from the sandbox never becomes a reason: a failure record is a code
-- the judge says in its own words, taken only where the sandbox's own code
-- sends one (a kernel's forgery is ignored).
t.test("sandbox_failure_record_forged_by_a_kernel_is_ignored", function()
  local sb = assert(sandbox "forge.c")
  c:poison()
  local r, why = sb:call(1, 1000, a, c)
  t.truthy(r, why)
  t.eq(c[1000], (string.unpack("f", string.pack("f", a[1000] + 1))))
  sb:close()
end)

-- Its stdout and stderr: /dev/null unless asked for (a worker's, which its
-- pool captures as the result's output).
t.test("sandbox_output_goes_nowhere_unless_asked_for", function()
  local mod = assert(host.compile { file = "tests/sandbox/say.c", no_load = true })
  local script = [[
local core = require "kwb.core"
local a, c = core.buffer("f32", 4), core.buffer("f32", 4)
for _, keep in ipairs { false, true } do
  local sb = assert(core.host_sandbox(%q, "add", "void", { "i32", "ptr", "ptr" }, { output = keep }))
  assert(sb:call(1, 4, a, c))
  sb:close()
  io.stdout:write(keep and "kept\n" or "quiet\n")
  io.stdout:flush()
end]]
  local p = io.popen("./kwb -e '" .. script:format(mod.path):gsub("'", "'\\''") .. "' 2>&1")
  local out = p:read("a")
  p:close()
  t.eq(out, "quiet\nsandbox-says-out\nsandbox-says-err\nkept\n")
end)

t.done()
