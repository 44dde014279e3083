-- tests/lua/test_sanitize.lua: what of kwb.checks.sanitize needs no GPU: the first
-- report read from compute-sanitizer's own output (tests/sanitize/, kept from
-- a run on the H200), the shape the tools run on, the kernels they look at.
-- (tests/gpu/integrity.lua runs the tools.)
local t = require "t"
local sanitize = require "kwb.checks.sanitize"
local files = require "kwb.base.files"
local host = require "kwb.host"

t.test("sanitize_first_report_is_the_first_error_up_to_six_lines", function()
  local text = assert(files.read_file("tests/sanitize/memcheck_api_error.txt"))
  t.eq(sanitize.first_report(text), 'Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to "invalid argument" on CUDA API '
       .. "call to cuFuncGetParamInfo. | Saved host backtrace up to driver entry point at error | Host Frame: "
       .. "kwb_cuda_fn_get in cuda_run.c:145 [0x223df] in kwb | Host Frame: l_fn in lua_cuda.c:267 [0x2ce90] in kwb | "
       .. "Host Frame: luaD_precall [0x4709d] in kwb | Host Frame: luaV_execute [0x54c26] in kwb")
  t.eq(sanitize.first_report("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"), "", "a clean run")
end)

t.test("sanitize_first_report_of_the_h200_findings", function()
  -- both kept from tests/gpu/integrity.lua on the H200 (docs/gpu-runs/2026-12-04-gpu-integrity-8.log)
  local race = assert(files.read_file("tests/sanitize/racecheck_smem_race.txt"))
  t.eq(sanitize.first_report(race), "Error: Race reported between Write access at vecadd+0x140 in smem_race.cu:8 | "
       .. "and Read access at vecadd+0x190 in smem_race.cu:9 [4000012 hazards]", "racecheck, analysis mode")
  t.eq(sanitize.stages(race), "load=0.003 build=0.602 bench=0.002 inputs=0.001 call=4.748", "the job's own split")
  local slack = assert(files.read_file("tests/sanitize/memcheck_read_slack.txt"))
  t.eq(sanitize.first_report(slack), "Invalid __global__ read of size 4 bytes | at vecadd+0xe0 in read_slack.cu:7 | "
       .. "by thread (0,0,0) in block (0,0,0) | Access to 0x7fb6879d390c is out of bounds | and is 3,853 bytes after "
       .. "the nearest allocation at 0x7fb687600000 of size 4,008,448 bytes | Saved host backtrace up to driver entry "
       .. "point at kernel launch time", "memcheck: six lines at most")
  t.eq(sanitize.stages(slack), nil, "a job that failed under the tool reports no split")
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

-- memcheck and initcheck run at the smallest timed shape; racecheck there
-- too unless its work is too much (racecheck on a 4096^3 SGEMM watches
-- billions of shared-memory accesses): then at that shape scaled down, its
-- varied variables halved to the limits and each one more, a shape every
-- candidate is verified on like an unannounced one (a kernel that does
-- nothing there is wrong, not clean). Shapes within the limits, and shapes
-- whose variables cannot shrink, are racecheck's as they are.
t.test("sanitize_racecheck_at_a_scaled_shape_that_is_verified", function()
  local mm = kwb.load("recipes/kt_matmul.lua")
  t.eq(sanitize.shape(mm).key, "M=4096,N=4096,K=4096", "memcheck and initcheck: the timed shape")
  local sh = sanitize.race_shape(mm)
  t.eq(sh.key, "M=513,N=513,K=513", "racecheck: 2 * 4096^3 flops halved to 2 * 512^3, then a ragged edge")
  t.truthy(mm.problem:flops_of(sh.shape) <= sanitize.max_flops)
  local keys = {}
  for _, v in ipairs(mm.verify_shapes) do keys[#keys + 1] = v.key end
  t.eq(keys[#keys], "M=513,N=513,K=513", "verified: " .. table.concat(keys, " "))
  local va = kwb.load("recipes/kt_vecadd.lua")
  t.eq(sanitize.race_shape(va).key, "n=5000001", "12 * 10^7 bytes halved under 64 MiB")
  t.eq(va.verify_shapes[#va.verify_shapes].key, "n=5000001")
  local gm = kwb.load("recipes/gpu_matmul.lua")
  t.eq(sanitize.race_shape(gm).key, "M=512,N=512,K=512", "within the limits: as timed")
  local n = 0
  for _, v in ipairs(gm.verify_shapes) do if v.key == "M=512,N=512,K=512" then n = n + 1 end end
  t.eq(n, 0, "a timed shape is not verified again")
  local moe = kwb.load("recipes/nvfp4_moe.lua")
  t.eq(sanitize.race_shape(moe).key, moe.shapes[1].key, "T = 1 (the only varied variable) cannot shrink: as timed")
  local path = sanitize.job(mm, { recipe = "x.lua", cand = {}, seed = "1" }, sh)
  local spec = require("kwb.base.channel").decode(assert(kwb.files.read_file(path)))
  os.remove(path)
  t.eq(spec.shape, "M=513,N=513,K=513")
  t.eq(mm.problem:shape_key(spec.vars), spec.shape, "the job carries the shape's variables")
end)

t.test("sanitize_needs_the_recipe_file_and_the_tool", function()
  local r = kwb.recipe { name = "s3", backend = "cuda", problem = vec, shapes = { n = { 64 } },
                         start = "../../kernels/cuda/vecadd.cu", verify_shapes = false, sanitize = "all",
                         launch = function() return { grid = 1, block = 64 } end }
  t.raises(function() sanitize.check(r, { cand = {}, seed = "1" }) end,
           "recipe s3: the sanitizers run the recipe from its file, and this one has none (give it a file, or set sanitize = false)")
end)

-- check() with a stand-in for compute-sanitizer (a shell script): what each
-- way a tool's run can end makes of the candidate
local dir = os.tmpname()
os.remove(dir)
assert(require("kwb.core").mkdirs(dir))
local function tool(name, body)
  local path = dir .. "/" .. name
  local f = assert(io.open(path, "w"))
  f:write("#!/bin/sh\n", body, "\n")
  f:close()
  os.execute("chmod +x " .. path)
  return path
end
local recipe_file = dir .. "/s4.lua"
do
  local f = assert(io.open(recipe_file, "w"))
  f:write("return 1\n")
  f:close()
end
local r4 = kwb.recipe { name = "s4", backend = "cuda", problem = vec, shapes = { n = { 64, 32 } },
                        start = "../../kernels/cuda/vecadd.cu", verify_shapes = false, sanitize = "best",
                        launch = function() return { grid = 1, block = 64 } end }
local args4 = { recipe = recipe_file, cand = { source = "", name = "x.cu" }, seed = "1" }

local function with_tool(path, limit, fn)
  local path0, limit0 = sanitize.path, sanitize.limit
  sanitize.path, sanitize.limit = function() return path end, limit or limit0
  local ok, err = pcall(fn)
  sanitize.path, sanitize.limit = path0, limit0
  if not ok then error(err, 0) end
end

t.test("sanitize_a_clean_run_of_every_tool_is_no_finding", function()
  with_tool(tool("clean", "exit 0"), nil, function()
    local f = sanitize.check(r4, args4)
    t.eq(f.tool, nil)
    for _, name in ipairs(sanitize.tools) do t.truthy(f.seconds[name] >= 0, name .. " timed") end
  end)
end)

-- The three tools run at once: each stand-in waits (5 s at most) until all
-- three have started, and fails if they did not.
t.test("sanitize_the_tools_run_at_once", function()
  local started = dir .. "/started"
  with_tool(tool("together", string.format([[
echo "$*" >> %s
i=0
while [ "$(wc -l < %s)" -lt 3 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
[ "$(wc -l < %s)" -ge 3 ] || { echo "alone" >&2; exit 5; }]], started, started, started)), nil, function()
    local f = sanitize.check(r4, args4)
    t.eq(f.tool, nil, tostring(f.report))
    for _, name in ipairs(sanitize.tools) do t.truthy(f.seconds[name] >= 0, name .. " timed") end
  end)
end)

-- racecheck finds hazards in shared memory alone: a module whose PTX names
-- no shared state space and whose launch asks for no dynamic shared memory
-- is checked by memcheck and initcheck; any .shared token (a variable, an
-- access, an address conversion), dynamic shared memory, or no PTX at all
-- brings racecheck back.
t.test("sanitize_racecheck_only_where_there_is_shared_memory", function()
  local plain = ".visible .entry vecadd(\n.param .u32 n)\n{\nld.global.f32 %f1, [%rd1];\nst.global.f32 [%rd2], %f1;\n}\n"
  local list, skipped = sanitize.tools_for(plain, false)
  t.eq(table.concat(list, " "), "memcheck initcheck")
  t.eq(skipped.racecheck, "no shared memory: none in the PTX, none asked for at launch")
  for _, ptx in ipairs { plain .. ".shared .align 4 .b8 tile[1024];\n", plain .. "ld.shared.f32 %f2, [%r1];\n",
                         plain .. "cvta.shared.u64 %rd3, %rd4;\n", plain .. ".extern .shared .align 16 .b8 smem[];\n" } do
    t.eq(table.concat((sanitize.tools_for(ptx, false)), " "), "memcheck racecheck initcheck", ptx:match("[^\n]*\n$"))
  end
  t.eq(table.concat((sanitize.tools_for(plain, true)), " "), "memcheck racecheck initcheck", "dynamic shared memory")
  t.eq(table.concat((sanitize.tools_for(nil, false)), " "), "memcheck racecheck initcheck", "no PTX")
  local ran = dir .. "/ran"
  with_tool(tool("record", "echo \"$2\" >> " .. ran), nil, function()
    local f = sanitize.check(r4, args4, { ptx = plain })
    t.eq(f.tool, nil)
    t.eq(f.seconds.racecheck, nil, "racecheck did not run")
    t.eq(f.skipped.racecheck, "no shared memory: none in the PTX, none asked for at launch")
  end)
  local lines = {}
  for l in io.lines(ran) do lines[#lines + 1] = l end
  table.sort(lines)
  t.eq(table.concat(lines, " "), "initcheck memcheck")
  local smem = kwb.recipe { name = "s5", backend = "cuda", problem = vec, shapes = { n = { 64 } },
                            start = "../../kernels/cuda/vecadd.cu", verify_shapes = false,
                            launch = function(_, p) return { grid = 1, block = 64, smem = p.S or 0 } end }
  t.eq(sanitize.dynamic_smem(smem, { params = { S = 256 } }, smem.shapes[1]), true)
  t.eq(sanitize.dynamic_smem(smem, { params = {} }, smem.shapes[1]), false)
end)

-- core.exec_all: each program's status, output, seconds and timeout apart;
-- one that cannot be started fails the call, naming it (the others ran).
t.test("sanitize_exec_all_reports_each_program", function()
  local core = require "kwb.core"
  local rs = assert(core.exec_all({ { "sh", "-c", "echo one" }, { "sh", "-c", "echo two >&2; exit 3" },
                                    { "sleep", "5" } }, { timeout = 1 }))
  t.eq(#rs, 3)
  t.eq(rs[1].status, 0)
  t.eq(rs[1].out, "one\n")
  t.eq(rs[2].status, 3)
  t.eq(rs[2].err, "two\n")
  t.eq(rs[3].timed_out, true)
  t.truthy(rs[3].seconds >= 1 and rs[3].seconds < 4, "killed at its timeout: " .. rs[3].seconds)
  local none, msg = core.exec_all({ { "true" }, { "/nonexistent/kwb-tool" } })
  t.eq(none, nil)
  t.eq(msg, "cannot run /nonexistent/kwb-tool: No such file or directory")
end)

t.test("sanitize_a_report_is_the_tool_and_its_first_lines", function()
  -- racecheck's own words on tests/candidates/cuda/smem_race.cu (docs/gpu-runs/2026-12-04-racecheck-probe.log)
  with_tool(tool("race", [[
case "$*" in *racecheck*) ;; *) exit 0 ;; esac
echo '========= COMPUTE-SANITIZER'
echo '========= Error: Race reported between Write access at vecadd+0x140 in smem_race.cu:8'
echo '=========     and Read access at vecadd+0x190 in smem_race.cu:9 [4000012 hazards]'
echo '========= '
exit 86]]), nil, function()
    local f = sanitize.check(r4, args4)
    t.eq(f.tool, "racecheck")
    t.eq(f.shape, "n=32", "the shape with the smallest buffers")
    t.eq(f.report, "Error: Race reported between Write access at vecadd+0x140 in smem_race.cu:8 | and Read access at "
         .. "vecadd+0x190 in smem_race.cu:9 [4000012 hazards]")
    t.truthy(f.seconds.initcheck >= 0, "initcheck ran beside it")
  end)
  -- two tools find something: the report is the first's in the tools' order
  with_tool(tool("both", [[
case "$*" in *initcheck*) exit 0 ;; esac
echo "========= Error: found by $2"
exit 86]]), nil, function()
    local f = sanitize.check(r4, args4)
    t.eq(f.tool, "memcheck")
    t.eq(f.report, "Error: found by memcheck")
  end)
end)

-- Each tool's run reads its own job: racecheck's at the scaled shape, the
-- others' at the timed one (a stand-in reports the shape its job names).
t.test("sanitize_each_tool_runs_the_job_of_its_shape", function()
  local big = kwb.problem.define {
    name = "vec_big", vars = { "n" }, fn = "vecadd", bytes = "12 * n",
    args = { { "n", "i32", value = "n" }, { "a", "f32", shape = "n", role = "in" }, { "b", "f32", shape = "n", role = "in" },
             { "c", "f32", shape = "n", role = "out" } },
    reference = { cuda = { source = "", fn = "ref" } },
    tolerance = { atol = 0, rtol = 0 },
  }
  local rb = kwb.recipe { name = "s6", backend = "cuda", problem = big, shapes = { n = { 1 << 25 } },
                          start = "../../kernels/cuda/vecadd.cu", verify_shapes = false, sanitize = "best",
                          launch = function(s) return { grid = (s.n + 255) // 256, block = 256 } end }
  t.eq(sanitize.race_shape(rb).key, "n=4194305")
  t.eq(rb.verify_shapes[1].key, "n=4194305", "verified although verify_shapes = false")
  local script = [[
job=$(printf '%s' "$*" | sed 's/.*sanitize_job("\([^"]*\)").*/\1/')
echo "========= Error: $2 ran the job at $(grep -o '"shape":"[^"]*"' "$job")"
exit 86]]
  for _, name in ipairs { "racecheck", "memcheck" } do
    with_tool(tool(name .. "_at", "case \"$*\" in *" .. name .. "*) ;; *) exit 0 ;; esac\n" .. script), nil, function()
      local f = sanitize.check(rb, args4, { ptx = ".shared" })
      local key = name == "racecheck" and "n=4194305" or "n=33554432"
      t.eq(f.tool, name)
      t.eq(f.shape, key)
      t.eq(f.report, string.format('Error: %s ran the job at "shape":"%s"', name, key))
    end)
  end
end)

t.test("sanitize_a_run_past_the_limit_or_a_failed_call_is_a_finding", function()
  with_tool(tool("slow", "exec sleep 30"), 1, function()
    local t0 = require("kwb.core").now()
    local f = sanitize.check(r4, args4)
    t.eq(f.tool, "memcheck")
    t.eq(f.report, "ran past 1 s (a candidate the tool cannot finish checking is not made the best)")
    t.truthy(require("kwb.core").now() - t0 < 10, "killed at the limit")
  end)
  -- the job raising (status 1: the candidate's call failed under the tool)
  with_tool(tool("fails", "echo 'the call failed at n=32: CUDA_ERROR_ILLEGAL_ADDRESS' >&2; exit 1"), nil, function()
    local f = sanitize.check(r4, args4)
    t.eq(f.tool, "memcheck")
    t.eq(f.report, "the run failed (exit 1): the call failed at n=32: CUDA_ERROR_ILLEGAL_ADDRESS")
  end)
end)

-- A tool's run that could not run (its job's buffers not allocated, the
-- device lost: kwb.worker.task.sanitize_job's status 87 and its line, or
-- the tool saying it ran out of memory) is the harness's, never the
-- candidate's (INTEGRITY.md property 9): that tool runs again alone, after
-- the others; where the caller can free its own device memory, once more
-- after that; a last such end is `harness`, and no finding.
local oom = "echo 'kwb-sanitize-harness nvfp4_moe: cannot allocate argument w13q (3758096384 x u8) at T=1: cannot "
            .. "allocate 3758096384 bytes on the device: CUDA_ERROR_OUT_OF_MEMORY' >&2; exit 87"
t.test("sanitize_a_run_that_could_not_allocate_runs_again_alone_and_is_never_a_finding", function()
  local log, count = dir .. "/oom-log", dir .. "/oom-count"
  io.open(count, "w"):close()
  -- each run logs its start and end; the first run of each tool fails to allocate
  with_tool(tool("oom_once", string.format([[
echo "start $2" >> %s
n=$(grep -c "^$2$" %s)
echo "$2" >> %s
if [ "$n" -lt 1 ]; then sleep 0.3; echo "end $2" >> %s; %s; fi
sleep 0.3
echo "end $2" >> %s]], log, count, count, log, oom, log)), nil, function()
    local released = 0
    local f = sanitize.check(r4, args4, { release = function() released = released + 1 end })
    t.eq(f.tool, nil, tostring(f.report))
    t.eq(f.harness, nil)
    t.eq(released, 0, "the second runs found their memory: nothing freed")
  end)
  local lines = {}
  for l in io.lines(log) do lines[#lines + 1] = l end
  -- the first three at once, then each alone, one after another
  t.eq(table.concat(lines, ",", 7), "start memcheck,end memcheck,start racecheck,end racecheck,start initcheck,end initcheck")
  local first = {}
  for i = 1, 3 do first[i] = lines[i] end
  table.sort(first)
  t.eq(table.concat(first, ","), "start initcheck,start memcheck,start racecheck", "at once")
  -- never able to run: the caller's memory freed once, and then the harness's failure, not the candidate's
  with_tool(tool("oom_always", "case \"$*\" in *initcheck*) " .. oom .. " ;; esac"), nil, function()
    local released = 0
    local f = sanitize.check(r4, args4, { release = function() released = released + 1 end })
    t.eq(f.tool, nil)
    t.eq(released, 1)
    t.eq(f.harness, "compute-sanitizer's initcheck run at n=32 could not run (nvfp4_moe: cannot allocate argument w13q "
         .. "(3758096384 x u8) at T=1: cannot allocate 3758096384 bytes on the device: CUDA_ERROR_OUT_OF_MEMORY): not "
         .. "the candidate's doing, so not its outcome")
  end)
  -- the tool itself out of memory, no finding reported
  with_tool(tool("tool_oom", "case \"$*\" in *racecheck*) echo '========= Error: out of memory'; exit 1 ;; esac"), nil,
            function()
    local f = sanitize.check(r4, args4, { ptx = ".shared" })
    t.eq(f.tool, nil)
    t.eq(f.harness, "compute-sanitizer's racecheck run at n=32 could not run (Error: out of memory): not the "
         .. "candidate's doing, so not its outcome")
  end)
  -- the job's word counts only with the job's status, and the status only with the word: either alone is a
  -- failed run, the candidate's (a module's host code that prints the line and exits otherwise gains nothing)
  with_tool(tool("word_alone", "echo 'kwb-sanitize-harness no memory, honest' >&2; exit 1"), nil, function()
    local f = sanitize.check(r4, args4)
    t.eq(f.tool, "memcheck")
    t.eq(f.report, "the run failed (exit 1): kwb-sanitize-harness no memory, honest")
  end)
  with_tool(tool("status_alone", "exit 87"), nil, function()
    local f = sanitize.check(r4, args4)
    t.eq(f.tool, "memcheck")
    t.eq(f.report, "the run failed (exit 87): ")
  end)
  -- a finding beside a run that could not run stands
  with_tool(tool("oom_and_found", "case \"$*\" in *initcheck*) " .. oom .. " ;; *memcheck*) echo '========= Error: "
                 .. "found'; exit 86 ;; esac"), nil, function()
    local f = sanitize.check(r4, args4)
    t.eq(f.tool, "memcheck")
    t.eq(f.report, "Error: found")
  end)
end)

-- The real job (kwb.worker.task.sanitize_job), under a stand-in tool that
-- runs it as it is given, on a recipe whose buffers cannot be allocated (a
-- host vecadd at n = 2^45: 128 TiB a buffer; its n an i64, which holds
-- 2^45 as the i32 of kwb.problems.vecadd does not): the job says why with
-- its status and line, and the check calls it the harness's, not a finding.
t.test("sanitize_a_job_whose_buffers_cannot_be_allocated_is_the_harness_not_the_candidate", function()
  local core = require "kwb.core"
  local file = dir .. "/huge.lua"
  local f = assert(io.open(file, "w"))
  f:write([[
local vecadd = kwb.problem.define { name = "vecadd", vars = { "n" }, reference = function() end, bytes = "12 * n",
  args = { { "n", "i64", value = "n" }, { "a", "f32", shape = "n" }, { "b", "f32", shape = "n" },
           { "c", "f32", shape = "n", role = "out" } } }
return kwb.recipe { name = "huge", problem = vecadd, shapes = { n = { 1 << 45 } },
                    verify_shapes = false, start = "]] .. files.resolve("kernels/host") .. [[/matmul_naive.c" }
]])
  f:close()
  local huge = kwb.load(file)
  local src = "void vecadd(int n, const float *a, const float *b, float *c) { for (int i = 0; i < n; i++) c[i] = a[i] + b[i]; }\n"
  local runs = dir .. "/huge-runs"
  with_tool(tool("passthrough", string.format([[
echo "$2" >> %s
while [ "$1" != "%s" ]; do shift; done
exec "$@"]], runs, core.self_exe())), nil, function()
    local released = 0
    local fd = sanitize.check(huge, { recipe = file, cand = { source = src, name = "v.c" }, seed = "1" },
                              { release = function() released = released + 1 end })
    t.eq(fd.tool, nil, tostring(fd.report))
    t.eq(fd.harness, "compute-sanitizer's memcheck run at n=35184372088832 could not run (vecadd: cannot allocate "
         .. "argument a (35184372088832 x f32) at n=35184372088832: out of memory allocating 140737488355328 bytes): "
         .. "not the candidate's doing, so not its outcome")
    t.eq(released, 1)
  end)
  local n = {}
  for l in io.lines(runs) do n[l] = (n[l] or 0) + 1 end
  t.eq(n.memcheck, 3, "at once, alone, and alone after the release")
  t.eq(n.initcheck, 3)
  t.eq(n.racecheck, 1, "racecheck's job, at the shape scaled down for it (" .. sanitize.race_shape(huge).key
       .. "), allocated and ran clean")
end)

-- The tools go as many at once as the device's free memory holds: a job's
-- buffers (every buffer of the problem at the shape, the outputs twice)
-- and as much again for the tool.
t.test("sanitize_tools_run_as_many_at_once_as_the_memory_holds", function()
  t.eq(sanitize.bench_bytes(r4, { shape = { n = 32 } }), 32 * 4 * 4, "a, b and c, and the reference's c")
  t.eq(sanitize.at_once(512, 1024 * 3, 3), 3)
  t.eq(sanitize.at_once(512, 1024 * 3 - 1, 3), 2)
  t.eq(sanitize.at_once(512, 100, 3), 1, "one at least")
  t.eq(sanitize.at_once(512, nil, 3), 3, "unknown: all")
  local moe = kwb.load("recipes/nvfp4_moe.lua")
  t.eq(sanitize.bench_bytes(moe, sanitize.shape(moe)), 18320764992,
       "nvfp4_moe at T = 1: its three weight layouts (17.06 GiB) and the activations")
  t.eq(sanitize.at_once(18320764992, 58 << 30, 3), 1, "an 80 GB card beside a worker's 20 GB: one at a time")
  local log = dir .. "/width-log"
  with_tool(tool("width", string.format([[
echo "start $2" >> %s
sleep 0.2
echo "end $2" >> %s]], log, log)), nil, function()
    local f = sanitize.check(r4, args4, { free = 2 * 256 })
    t.eq(f.tool, nil)
  end)
  local lines = {}
  for l in io.lines(log) do lines[#lines + 1] = l end
  t.eq(table.concat(lines, ","), "start memcheck,end memcheck,start racecheck,end racecheck,start initcheck,end initcheck",
       "one at a time")
end)

-- A tool's run killed from outside (SIGKILL, kwb's own kills being
-- timeouts) is not the candidate's doing (INTEGRITY.md property 9): that
-- tool runs once more, and a second such end is `outside`, no finding.
t.test("sanitize_a_tool_killed_from_outside_runs_again_and_is_never_a_finding", function()
  local count = dir .. "/killed-count"
  -- memcheck's first run is killed; every other run is clean
  with_tool(tool("killed_once", string.format([[
case "$*" in *memcheck*) ;; *) exit 0 ;; esac
echo x >> %s
[ "$(wc -l < %s)" -ge 2 ] || kill -KILL $$]], count, count)), nil, function()
    local f = sanitize.check(r4, args4)
    t.eq(f.tool, nil, tostring(f.report))
    t.eq(f.outside, nil)
  end)
  local n = 0
  for _ in io.lines(count) do n = n + 1 end
  t.eq(n, 2, "memcheck ran twice")
  -- initcheck killed every time: outside, not unsafe (the run stops
  -- without an outcome for it) ...
  with_tool(tool("killed_always", [[
case "$*" in *initcheck*) kill -KILL $$ ;; esac]]), nil, function()
    local f = sanitize.check(r4, args4)
    t.eq(f.tool, nil)
    t.eq(f.outside, "compute-sanitizer's initcheck run at n=32 was killed from outside (SIGKILL) twice: not the "
         .. "candidate's doing, so not its outcome")
  end)
  -- ... unless another tool found something: that finding stands
  with_tool(tool("killed_and_found", [[
case "$*" in *initcheck*) kill -KILL $$ ;; *memcheck*) echo "========= Error: found"; exit 86 ;; esac]]), nil, function()
    local f = sanitize.check(r4, args4)
    t.eq(f.tool, "memcheck")
    t.eq(f.report, "Error: found")
    t.eq(f.outside, nil)
  end)
  -- a run that kills itself with another signal is still a finding
  with_tool(tool("segv", "kill -SEGV $$"), nil, function()
    local f = sanitize.check(r4, args4)
    t.eq(f.tool, "memcheck")
    t.eq(f.report, "the run failed (exit 139): ")
  end)
end)

t.done()
