-- tests/lua/test_cuda_rules.lua: the rules over a CUDA module's PTX. The PTX
-- parsing runs everywhere; where NVRTC is installed (no GPU needed) the
-- hostile CUDA candidates are also built and judged as the loop judges them.
local t = require "t"
local rules = require "kwb.rules"

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

t.test("cuda_rules_ptx_global_variables_are_state", function()
  local hit = rules.set { "global-state" }:check_ptx(ptx, "// x\n\n__device__ float saved[1024];\n", "cand.cu")
  t.eq(hit.word, "saved"); t.eq(hit.line, 3)
  t.eq(rules.set { "global-state" }:check_ptx("\tld.global.f32 %f1, [%rd2];\n", "", "cand.cu"), nil,
       "global loads are not variables")
end)

t.test("cuda_rules_ptx_printf_is_the_vprintf_call", function()
  local hit = rules.set { "printf" }:check_ptx(ptx, "", "cand.cu")
  t.eq(hit.word, "vprintf"); t.eq(hit.line, nil, "only a declaration: no source line")
end)

local cuda_ok, cuda = pcall(require, "kwb.cuda")
local have_nvrtc = cuda_ok and cuda.nvrtc_version() ~= nil

if have_nvrtc then
  local B = require "kwb.backends.cuda"
  local build = require("kwb.backend").build
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
    { "stale.cu", "global-state", 3, "PTX (a .global variable)" },
    { "clock.cu", "timer", 4, "source" },
    { "clock_macro.cu", "timer", 6, "PTX" },
    { "printf_macro.cu", "printf", 5, "PTX" },
    { "trap.cu", "exit", 4, "source" },
    { "sleep.cu", "sleep", 4, "source" },
    { "stream.cu", "other-streams", 6, "source" },
  } do
    t.test("cuda_rules_nvrtc_" .. c[1]:gsub("%.cu$", "") .. "_is_forbidden_by_" .. c[2], function()
      local outcome, res = judge(c[1])
      t.eq(outcome, "forbidden", c[1] .. ": " .. tostring(res.reason))
      t.eq(res.rule, c[2]); t.eq(res.line, c[3])
      t.truthy(res.reason:find("found in the " .. c[4] .. ")", 1, true), res.reason)
    end)
  end
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
