-- The host backend through its Lua API: compile, call, buffers, compare, time.
local t = require "t"
local host = kwb.host

local add_src = "int add(int a, int b) { return a + b; }\n"

t.test("compile_and_call_returns_the_c_result", function()
  local mod = t.truthy(host.compile(add_src))
  local add = t.truthy(mod:fn "int add(int a, int b)")
  t.eq(add(40, 2), 42)
  t.eq(add(-5, 2), -3)
end)

t.test("compile_is_cached_by_content", function()
  local src = "int seven(void) { return 7; }\n"
  local a = t.truthy(host.compile(src))
  local b = t.truthy(host.compile(src))
  t.eq(b.hash, a.hash)
  t.eq(b.cached, true)
  local c = t.truthy(host.compile { source = src, flags = { "-O1" } })
  t.truthy(c.hash ~= a.hash, "a flag changes the hash")
  local d = t.truthy(host.compile { source = src, defines = { UNUSED = 1 } })
  t.truthy(d.hash ~= a.hash and d.hash ~= c.hash, "a define changes the hash")
end)

t.test("defines_reach_the_source", function()
  local src = "int n(void) { return N * (FLAG + 1); }\n"
  local mod = t.truthy(host.compile { source = src, defines = { N = 21, FLAG = true } })
  t.eq(mod:fn "int n(void)" (), 42)
  t.eq(table.concat(host.define_list { N = 21, FLAG = true, OFF = false }, " "), "FLAG N=21")
end)

t.test("compile_error_returns_nil_message_and_log", function()
  local mod, msg, info = host.compile { source = "int f(void) {\n  return nope;\n}\n", name = "bad.c" }
  t.eq(mod, nil)
  t.eq(info.code, "compile-error")
  t.truthy(msg:find("failed to compile bad.c", 1, true), msg)
  t.truthy(info.log:find("bad.c:2", 1, true), info.log)
  t.truthy(info.log:find("nope", 1, true), info.log)
end)

t.test("missing_function_returns_no_symbol", function()
  local mod = t.truthy(host.compile(add_src))
  local f, msg, info = mod:fn "int sub(int a, int b)"
  t.eq(f, nil)
  t.eq(info.code, "no-symbol")
  t.truthy(msg:find("no function sub", 1, true), msg)
end)

t.test("compile_from_file_names_the_file", function()
  local mod, msg, info = host.compile { file = "tests/lua/no_such_kernel.c" }
  t.eq(mod, nil)
  t.eq(info.code, "no-file")
  t.truthy(msg:find("no_such_kernel.c", 1, true), msg)
  t.raises(function() host.compile { source = add_src, defiens = {} } end, "unknown compile option 'defiens'")
end)

t.test("signatures_parse_from_c_prototypes", function()
  local ret, args, name = host.parse_signature "void f(int n, const float *restrict x, size_t m, double a)"
  t.eq(ret, "void"); t.eq(name, "f")
  t.eq(table.concat(args, ","), "i32,ptr,u64,f64")
  ret, args, name = host.parse_signature "float *(unsigned int, long long)"
  t.eq(ret, "ptr"); t.eq(name, nil)
  t.eq(table.concat(args, ","), "u32,i64")
  ret, args = host.parse_signature "int g(void)"
  t.eq(ret, "i32"); t.eq(#args, 0)
  t.raises(function() host.parse_signature "void f(quux q)" end, "unknown C type 'quux q' in argument 1")
  t.raises(function() host.parse_signature "not a prototype" end, "cannot read the C prototype")
end)

t.test("calls_check_argument_count_and_types", function()
  local add = host.compile(add_src):fn "int add(int a, int b)"
  t.raises(function() add(1) end, "kernel takes 2 arguments, got 1")
  t.raises(function() add(1, 2.5) end, "number has no integer representation")
end)

t.test("buffers_hold_typed_elements", function()
  local b = host.buffer("bf16", 3)
  t.eq(b.dtype, "bf16"); t.eq(b.n, 3); t.eq(#b, 3); t.eq(b.bytes, 6)
  b[1] = 1 / 3
  t.eq(b[1], 0.333984375)          -- nearest bf16
  local h = host.buffer("f16", 1)
  h[1] = 1 / 3
  t.eq(h[1], 0.333251953125)       -- nearest f16
  local i = host.buffer("i64", 1)
  i[1] = (1 << 53) + 1
  t.eq(i[1], (1 << 53) + 1)        -- exact, not through a double
  local u = host.buffer("u8", 2):set { 300, -4 }
  t.eq(u[1], 255); t.eq(u[2], 0)   -- saturated
  t.raises(function() return b[4] end, "index 4 out of range 1..3")
  t.raises(function() host.buffer("f8", 1) end, "unknown dtype 'f8'")
end)

t.test("seeded_fills_repeat_and_differ_by_seed", function()
  local a = host.buffer("f32", 4096):fill_uniform(11, -2, 2)
  local b = host.buffer("f32", 4096):fill_uniform(11, -2, 2)
  local c = host.buffer("f32", 4096):fill_uniform(12, -2, 2)
  t.eq(a:checksum(), b:checksum())
  t.truthy(a:checksum() ~= c:checksum())
  t.eq(#a:checksum(), 64)
  t.eq(host.buffer("u8", 0):checksum(), kwb.sha256(""))
end)

t.test("kernels_write_buffers_and_compare_finds_poison", function()
  local mod = host.compile [[
    void saxpy_half(int n, float a, const float *x, float *y) {
      for (int i = 0; i < n / 2; i++) y[i] = a * x[i] + y[i];
    }]]
  local f = mod:fn "void saxpy_half(int n, float a, const float *x, float *y)"
  local x = host.buffer("f32", 8):set { 1, 2, 3, 4, 5, 6, 7, 8 }
  local y = host.buffer("f32", 8):poison()
  for i = 1, 4 do y[i] = 1 end
  f(8, 2, x, y)
  t.eq(table.concat(y:totable(1, 4), " "), "3.0 5.0 7.0 9.0")
  local want = host.buffer("f32", 8):set { 3, 5, 7, 9, 11, 13, 15, 17 }
  local d = host.compare(y, want, { rtol = 1e-6 })
  t.eq(d.poison, 4); t.eq(d.bad, 4); t.eq(d.first_bad, 5); t.eq(d.ok, false)
  t.eq(y:is_poison(5), true); t.eq(y:is_poison(4), false)
  local same = host.compare(want:clone(), want)
  t.eq(same.ok, true); t.eq(same.max_abs, 0.0); t.eq(same.rel_l2, 0.0)
end)

t.test("timing_reports_the_stop_rule_fields", function()
  local mod = host.compile [[
    void spin(int n, float *out) { float s = 0; for (int i = 0; i < n; i++) s = s * 0.5f + 1.0f; out[0] = s; }]]
  local spin = mod:fn "void spin(int n, float *out)"
  local out = host.buffer("f32", 1)
  local st = host.time(spin, { 20000, out }, { cap = 0.2, min_samples = 10, max_samples = 50 })
  t.truthy(st.n >= 10 and st.n <= 50, "n = " .. st.n)
  t.truthy(st.min <= st.p10 and st.p10 <= st.median and st.median <= st.p90 and st.p90 <= st.max)
  t.truthy(st.median > 1e-6 and st.median < 0.1, "median " .. st.median)
  t.eq(type(st.capped), "boolean")
  t.eq(out[1], 2.0)
  t.raises(function() host.time(spin, { 1, out }, { cpa = 1 }) end, "unknown timing option 'cpa'")
end)

t.test("stats_of_known_samples", function()
  local st = kwb.stats { 5, 1, 4, 2, 3 }
  t.eq(st.median, 3.0); t.eq(st.min, 1.0); t.eq(st.max, 5.0); t.eq(st.mean, 3.0)
  t.near(st.p10, 1.4, 1e-12)
  t.near(st.spread, math.sqrt(2.5) / 3, 1e-12)
end)

-- The preprocessed view is made by the build's own command: -fPIC takes
-- __PIE__ away and -O2 defines __OPTIMIZE__, whatever the recipe's flags.
t.test("host_preprocess_runs_the_build_s_own_command", function()
  local src = "#ifndef __PIE__\nint pie_off;\n#endif\n#ifdef __OPTIMIZE__\nint optimised;\n#endif\n"
              .. "#ifdef WIDTH\nint width = WIDTH;\n#endif\nint f(void) { return 0; }\n"
  local text = assert(kwb.host.preprocess { source = src, name = "view.c", flags = {}, defines = { WIDTH = 8 } })
  t.truthy(text:find("int pie_off;", 1, true), "-fPIC: __PIE__ is not defined")
  t.truthy(text:find("int optimised;", 1, true), "-O2: __OPTIMIZE__ is defined")
  t.truthy(text:find("int width = 8;", 1, true), "the defines")
  t.truthy(text:find('# 1 "view.c"', 1, true), "line markers name the candidate's file")
  local m = assert(kwb.host.compile { source = src, name = "view.c", flags = {}, defines = { WIDTH = 8 } })
  local syms = assert(kwb.host.symbols(m.path))
  local data = {}
  for _, name in ipairs(syms.data) do data[name] = true end
  t.truthy(data.pie_off and data.optimised and data.width, "the built object has all three")
  local bad, msg, info = kwb.host.preprocess { source = "#error planted\n", name = "bad.c" }
  t.eq(bad, nil)
  t.eq(info.code, "compile-error")
  t.eq(msg, "the preprocessor failed (exit status 1)")
  t.truthy(info.log:find("bad.c:1:2: error: #error planted", 1, true), info.log)
  local none, nmsg, ninfo = kwb.host.symbols("/nonexistent/x.so")
  t.eq(none, nil); t.eq(ninfo.code, "no-symbols")
  t.truthy(nmsg:find("nm failed on /nonexistent/x.so", 1, true), nmsg)
end)

t.test("host_os_helpers_answer_plainly", function()
  local core = require "kwb.core"
  local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$") .. "/os/a/b"
  t.eq(core.mkdirs(dir), true)
  t.eq(core.executable("/bin/sh"), true)
  t.eq(core.executable(dir), false, "a directory is not an executable file")
  local plain = dir .. "/plain.txt"
  assert(io.open(plain, "w")):close()
  t.eq(core.executable(plain), false, "a file without execute bits")
  local ok, msg, info = core.mkdirs("/proc/kwb-no/x")
  t.eq(ok, nil); t.eq(info.code, "no-dir")
  t.truthy(msg:find("cannot create /proc/kwb-no/x", 1, true), msg)
  t.eq(core.isatty(99), false)
  t.truthy(#core.machine() > 0, "uname -m")
end)

-- The fresh inputs of timed runs (kwb.measure.timed) come from this fill: the
-- normal distribution (Marsaglia and Tsang's ziggurat over xorshift64*),
-- fixed by its seed. One million draws: each moment and tail within five
-- standard errors of the normal's.
t.test("fill_normal_stream_draws_the_normal_distribution", function()
  local core = require "kwb.core"
  local n = 1 << 20
  local b = core.buffer("f64", n):fill_normal_stream(7, 0, 1)
  local s, s2, s4, below1, past3 = 0, 0, 0, 0, 0
  for i = 1, n do
    local v = b[i]
    s, s2, s4 = s + v, s2 + v * v, s4 + v ^ 4
    if v < 1 then below1 = below1 + 1 end
    if math.abs(v) > 3 then past3 = past3 + 1 end
  end
  local mean, var = s / n, s2 / n - (s / n) ^ 2
  t.near(mean, 0, 5 / math.sqrt(n), "mean")
  t.near(var, 1, 5 * math.sqrt(2 / n), "variance")
  t.near(s4 / n, 3, 5 * math.sqrt(96 / n), "fourth moment")
  t.near(below1 / n, 0.841345, 5 * math.sqrt(0.841345 * 0.158655 / n), "P(x < 1)")
  t.near(past3 / n, 0.0026998, 5 * math.sqrt(0.0027 / n), "P(|x| > 3)")
  local f = core.buffer("f32", 8):fill_normal_stream(7, 10, 2)
  local again = core.buffer("f32", 8):fill_normal_stream(7, 10, 2)
  local other = core.buffer("f32", 8):fill_normal_stream(8, 10, 2)
  t.eq(f[3], again[3], "a seed gives the same values")
  t.truthy(f[3] ~= other[3], "another seed others")
  t.eq(f[1], (string.unpack("f", string.pack("f", 10 + 2 * b[1]))), "mean and stdev scale the same draws")
end)

t.done()
