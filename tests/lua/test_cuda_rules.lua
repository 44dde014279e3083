-- tests/lua/test_cuda_rules.lua: the rules over a CUDA module's PTX. The PTX
-- parsing runs everywhere; where NVRTC is installed (no GPU needed) the
-- hostile CUDA candidates are also built and judged as the loop judges them.
local t = require "t"
local rules = require "kwb.measure.rules"

local default = rules.set { "default" }

local ptx = table.concat({
  ".version 8.0",
  ".target sm_90",
  ".visible .global .align 4 .b8 saved[4096];",
  ".extern .func (.param .b32 func_retval0) vprintf",
  ".visible .entry k()",
  "{",
  "\t.loc\t1 7 3",
  "\tmov.u64 \t%rd1, %globaltimer;",
  "\tld.global.f32 \t%f1, [%rd2];",
  "\tret;",
  "}",
  ".file\t1 \"/some/dir/cand.cu\"",
}, "\n")

t.test("cuda_rules_ptx_lines_come_from_loc_directives", function()
  local hit = rules.set { "timer" }:check_ptx(ptx, "", "cand.cu")
  t.eq(hit.message, "rule 'timer': %globaltimer at line 7 (a candidate that reads a clock can tell when it is being timed; found in the PTX)")
end)

-- Device state kept across launches is a .global variable the module
-- writes: directly, through a register computed from its address, or by
-- handing that address on. One it only reads (a __device__ const table) is
-- not state.
local function body(decl, ...)
  return table.concat({ ".version 8.0", ".target sm_90", decl, ".visible .entry k()", "{",
                        "\t.reg .b64 \t%rd<9>;", "\t.reg .f32 \t%f<4>;", "\t.loc\t1 5 3", ... }, "\n")
    .. "\n\tret;\n}\n.file\t1 \"cand.cu\""
end
t.test("cuda_rules_ptx_global_variables_it_writes_are_state", function()
  local gs = rules.set { "global-state" }
  local src = "// x\n\n__device__ float saved[1024];\n"
  local direct = body(".visible .global .align 4 .b8 saved[4096];", "\tst.global.f32 \t[saved], %f1;")
  local hit = gs:check_ptx(direct, src, "cand.cu")
  t.eq(hit.word, "saved"); t.eq(hit.line, 5, "the store's line")
  t.eq(hit.message, "rule 'global-state': saved at line 5 (state kept across calls (mutable globals, static locals) "
                    .. "can replay old results; found in the PTX (a .global variable it writes, PTX line 9))")
  local derived = body(".global .align 4 .b8 saved[4096];", "\tmov.u64 \t%rd1, saved;", "\tadd.s64 \t%rd2, %rd1, 8;",
                       "\tcvta.global.u64 \t%rd3, %rd2;", "\tatom.add.f32 \t%f2, [%rd3], %f1;")
  t.eq(gs:check_ptx(derived, src, "cand.cu").word, "saved", "an atomic through a derived pointer")
  local escapes = body(".global .align 4 .b8 saved[4096];", "\tmov.u64 \t%rd1, saved;", "\tst.global.u64 \t[%rd5], %rd1;")
  t.eq(gs:check_ptx(escapes, src, "cand.cu").word, "saved", "its address stored away")
  local reads = body(".global .align 4 .b8 table[16] = {0, 0, 128, 63};", "\tmov.u64 \t%rd5, table;",
                     "\tadd.s64 \t%rd6, %rd5, %rd4;", "\tld.global.nc.f32 \t%f1, [%rd6];",
                     "\tst.global.f32 \t[%rd8], %f1;")
  t.eq(gs:check_ptx(reads, src, "cand.cu"), nil, "a table only read, its values stored elsewhere")
  t.eq(gs:check_ptx("\tld.global.f32 %f1, [%rd2];\n", "", "cand.cu"), nil, "global loads are not variables")
end)

-- The allow-lists of the PTX: special registers and instructions.
t.test("cuda_rules_ptx_allow_lists_name_the_register_or_instruction_and_both_lines", function()
  local pl = rules.set { "ptx-allow-list" }
  local ok = body("", "\tmov.u32 \t%r1, %tid.x;", "\tmov.u32 \t%r2, %ctaid.y;", "\tmov.u32 \t%r3, %laneid;",
                  "\tmov.u32 \t%r4, %nctaid.x;", "\tmov.u32 \t%r5, %dynamic_smem_size;")
  t.eq(pl:check_ptx(ok:gsub("%.reg %.f32 \t%%f<4>;", ".reg .b32 \t%%r<9>;"), "", "cand.cu"), nil)
  for reg, want in pairs { ["%clock64"] = "%clock64", ["%globaltimer_lo"] = "%globaltimer_lo", ["%smid"] = "%smid",
                           ["%envreg3"] = "%envreg3", ["%pm0"] = "%pm0" } do
    local hit = pl:check_ptx(body("", "\tmov.u64 \t%rd1, " .. reg .. ";"), "", "cand.cu")
    t.eq(hit and hit.word, want, reg)
    t.eq(hit.line, 5)
    t.truthy(hit.message:find("found in the PTX, line 9)", 1, true), hit.message)
  end
  for _, ins in ipairs { "trap", "brkpt", "nanosleep.u32 \t100", "pmevent \t1" } do
    local hit = pl:check_ptx(body("", "\t" .. ins .. ";"), "", "cand.cu")
    t.eq(hit and hit.word, ins:match("^[%w.]+"), ins)
  end
end)

t.test("cuda_rules_ptx_printf_is_the_vprintf_call", function()
  local hit = rules.set { "printf" }:check_ptx(ptx, "", "cand.cu")
  t.eq(hit.word, "vprintf"); t.eq(hit.line, nil, "only a declaration: no source line")
end)

local cuda_ok, cuda = pcall(require, "kwb.cuda")
local have_nvrtc = cuda_ok and cuda.nvrtc_version() ~= nil

if have_nvrtc then
  local B = require "kwb.measure.backends.cuda"
  local build = require("kwb.measure.backends").build
  local r = kwb.recipe { name = "cuda_rules", backend = "cuda", problem = "vecadd", shapes = { n = { 16 } },
    arch = "sm_90", start = "../candidates/cuda/good.cu",
    launch = function() return { grid = { 1 }, block = { 256 } } end }
  local function judge(file)
    local src = assert(io.open("tests/candidates/cuda/" .. file)):read("a")
    local res = { seconds = {} }
    local k = build(B, { source = src, name = file, defines = {}, define_list = {}, params = {} }, r,
                      r.problem:prototype(), res)
    return k and "built" or res.outcome, res
  end
  for _, c in ipairs {
    { "stale.cu", "global-state", 11, "PTX (a .global variable it writes, PTX line " },
    { "clock.cu", "timer", 4, "source" },
    { "clock_macro.cu", "timer", 6, "PTX" },
    { "printf_macro.cu", "printf", 5, "PTX" },
    { "trap.cu", "exit", 4, "source" },
    { "sleep.cu", "sleep", 4, "source" },
    { "stream.cu", "other-streams", 6, "source" },
    { "heap.cu", "ptx-allow-list", 7, "PTX, line " },
  } do
    t.test("cuda_rules_nvrtc_" .. c[1]:gsub("%.cu$", "") .. "_is_forbidden_by_" .. c[2], function()
      local outcome, res = judge(c[1])
      t.eq(outcome, "forbidden", c[1] .. ": " .. tostring(res.reason))
      t.eq(res.rule, c[2]); t.eq(res.line, c[3])
      local tail = c[4]:sub(-1) == " " and "" or ")"
      t.truthy(res.reason:find("found in the " .. c[4] .. tail, 1, true), res.reason)
    end)
  end
  for _, file in ipairs { "const_table.cu", "libm_table.cu" } do
    t.test("cuda_rules_nvrtc_read_only_device_data_is_not_state_" .. file:gsub("%.cu$", ""), function()
      local outcome, res = judge(file)
      -- past every rule: built where a driver is, else stopped at loading it
      t.truthy(outcome == "built" or (outcome == "compile-error" and res.reason:find("^no CUDA driver")),
               outcome .. ": " .. tostring(res.reason))
    end)
  end
  t.test("cuda_rules_nvrtc_a_timer_split_across_literals_is_found_in_the_ptx", function()
    local outcome, res = judge("timer_split.cu")
    t.eq(outcome, "forbidden", tostring(res.reason))
    t.eq(res.rule, "timer"); t.eq(res.line, 7)
    t.truthy(res.reason:find("%globaltimer at line 7", 1, true), res.reason)
  end)
  t.test("cuda_rules_nvrtc_a_broken_candidate_is_a_compile_error", function()
    local res = { seconds = {} }
    local k = build(B, { source = "extern \"C\" __global__ void vecadd(int n) { n = }\n", name = "broken.cu",
                        defines = {}, define_list = {}, params = {} }, r, r.problem:prototype(), res)
    t.eq(k, nil)
    t.eq(res.outcome, "compile-error")
    t.truthy(res.log:find("error", 1, true), res.log)
  end)
end

t.done()
