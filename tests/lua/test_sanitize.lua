-- tests/lua/test_sanitize.lua: what of kwb.sanitize needs no GPU: the first
-- report read from compute-sanitizer's own output (tests/sanitize/, kept from
-- a run on the H200), the shape the tools run on, the kernels they look at.
-- (tests/gpu/integrity.lua runs the tools.)
local t = require "t"
local sanitize = require "kwb.sanitize"
local host = require "kwb.host"

t.test("sanitize_first_report_is_the_first_error_up_to_six_lines", function()
  local text = assert(host.read_file("tests/sanitize/memcheck_api_error.txt"))
  t.eq(sanitize.first_report(text), 'Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to "invalid argument" on CUDA API '
       .. "call to cuFuncGetParamInfo. | Saved host backtrace up to driver entry point at error | Host Frame: "
       .. "kwb_cuda_fn_get in cuda_run.c:145 [0x223df] in kwb | Host Frame: l_fn in lua_cuda.c:267 [0x2ce90] in kwb | "
       .. "Host Frame: luaD_precall [0x4709d] in kwb | Host Frame: luaV_execute [0x54c26] in kwb")
  t.eq(sanitize.first_report("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"), "", "a clean run")
end)

local vec = kwb.problem.define {
  name = "vec_s", vars = { "n" }, fn = "vecadd",
  args = { { "n", "i32", value = "n" }, { "a", "f32", shape = "n", role = "in" }, { "b", "f32", shape = "n", role = "in" },
           { "c", "f32", shape = "n", role = "out" } },
  reference = { cuda = { source = "", fn = "ref" } },
  tolerance = { atol = 0, rtol = 0 },
}

t.test("sanitize_runs_on_the_timed_shape_with_the_smallest_buffers", function()
  local r = kwb.recipe { name = "s", backend = "cuda", problem = vec, shapes = { n = { 4096, 1000003, 65536 } },
                         start = "../../kernels/cuda/vecadd.cu", verify_shapes = false,
                         launch = function(s) return { grid = (s.n + 255) // 256, block = 256 } end }
  t.eq(sanitize.shape(r).key, "n=4096")
  t.eq(table.concat(sanitize.kernels(r, { params = {} }, r.shapes[1]), " "), "vecadd", "the problem's entry point")
  local steps = kwb.recipe { name = "s2", backend = "cuda", problem = vec, shapes = { n = { 64 } },
                             start = "../../kernels/cuda/vecadd.cu", verify_shapes = false,
                             launch = function(_, p) return { steps = {
                               { "first_" .. (p.V or 0), grid = 1, block = 1, args = { "n", "a", "c" } },
                               { "second", grid = 1, block = 1, args = { "n", "b", "c" } } } } end }
  t.eq(table.concat(sanitize.kernels(steps, { params = { V = 3 } }, steps.shapes[1]), " "), "first_3 second",
       "each step's kernel, from the candidate's parameters")
end)

t.test("sanitize_needs_the_recipe_file_and_the_tool", function()
  local r = kwb.recipe { name = "s3", backend = "cuda", problem = vec, shapes = { n = { 64 } },
                         start = "../../kernels/cuda/vecadd.cu", verify_shapes = false, sanitize = "all",
                         launch = function() return { grid = 1, block = 64 } end }
  t.raises(function() sanitize.check(r, { cand = {}, seed = "1" }) end,
           "recipe s3: the sanitizers run the recipe from its file, and this one has none (give it a file, or set sanitize = false)")
end)

t.done()
