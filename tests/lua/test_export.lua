-- tests/lua/test_export.lua: kwb export from a host run (tests/recipes/dispatch.lua):
-- a kernel that beats the start kernel only at the large shape gets that
-- shape, the start kernel keeps the small one; the header compiles and its
-- test program picks the right kernel for measured shapes and those between,
-- by either rule; the kernels' files compile on their own, link into one
-- program (both define a function sum2) and agree with the reference in the
-- check program, which fails a tampered kernel naming its shape. The CUDA
-- export is built here (NVRTC needs no GPU) from results recorded as a run on
-- an H100 records them: its cubins are the code measured.
local t = require "t"
local store = require "kwb.loop.store"
local export = require "kwb.insight.export"
local core = require "kwb.core"

local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$") .. "/export"
os.execute("rm -rf '" .. dir .. "'")
assert(core.mkdirs(dir))
local st = store.open(dir .. "/dispatch.db")
local recipe = kwb.load "tests/recipes/dispatch.lua"

local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local ok, _, code = p:close()
  return out, ok and 0 or code
end

t.test("export_needs_a_start_kernel_in_the_cache", function()
  t.raises(function() export.export(recipe, dir .. "/none", { store = st }) end,
           "recipe dispatch: the cache holds no start kernel's result on this device (run the recipe first)")
end)

local _, run = recipe:run { mode = "quiet", store = st }
local fast = run.results[1]
local start = run.session.start

t.test("export_gives_each_shape_its_winner_and_keeps_the_start_kernel_elsewhere", function()
  t.eq(fast.name, "dispatch_fast.c")
  local out = export.export(recipe, dir .. "/near", { store = st })
  t.eq(out.shapes[1].key, "n=256")
  t.eq(out.shapes[1].kernel, start.short, "the start kernel stays at n=256: " .. tostring(out.shapes[1].median))
  t.eq(out.shapes[1].fallback, true)
  t.eq(out.shapes[2].kernel, fast.short, "the fast kernel at n=1048576")
  t.eq(out.shapes[2].fallback, false)
  t.truthy(out.shapes[2].speedup > 2, "its speedup there: " .. out.shapes[2].speedup)
  local f = assert(io.open(dir .. "/near/dispatch.json"))
  local j = require("cjson").decode(f:read("a"))
  f:close()
  t.eq(j.rule, "nearest")
  t.eq(j.kernels[fast.short].file, "kernels/" .. fast.short .. ".c")
  t.eq(j.kernels[start.short].start, true)
end)

local function picks(sub, args)
  local d = dir .. "/" .. sub
  local out, code = sh(string.format("cc -O2 -Wall -Werror -o '%s/t' '%s/dispatch_test.c' -lm && '%s/t' %s", d, d, d, args))
  t.eq(code, 0, out)
  return (out:gsub("\n$", ""):gsub("\n", " "))
end

t.test("export_header_picks_the_nearest_measured_shape", function()
  t.eq(picks("near", "256 1048576 1000 100000000 300"),
       table.concat({ start.short, fast.short, start.short, fast.short, start.short }, " "))
end)

t.test("export_header_picks_the_next_larger_measured_shape", function()
  recipe.dispatch = "larger"
  export.export(recipe, dir .. "/larger", { store = st })
  recipe.dispatch = "nearest"
  t.eq(picks("larger", "256 300 1048576 100000000 1"),
       table.concat({ start.short, fast.short, fast.short, fast.short, start.short }, " "),
       "past the largest: the largest")
end)

t.test("export_kernel_files_build_on_their_own", function()
  for _, id in ipairs { start.short, fast.short } do
    local out, code = sh(string.format("cc -O2 -c -o '%s/k.o' '%s/near/kernels/%s.c'", dir, dir, id))
    t.eq(code, 0, out)
  end
end)

t.test("export_with_a_named_fallback_leaves_the_start_kernel_out", function()
  local out = export.export(recipe, dir .. "/lib", { store = st, fallback = "library_vecadd" })
  t.eq(out.shapes[1].kernel, "library_vecadd")
  t.eq(out.shapes[2].kernel, fast.short)
  t.eq(picks("lib", "256 1048576"), "library_vecadd " .. fast.short)
  local f = io.open(dir .. "/lib/kernels/" .. start.short .. ".c")
  t.eq(f, nil, "no file for the start kernel")
end)

t.test("export_cli_takes_options_anywhere_and_answers_json", function()
  local device = require("kwb.measure.backends").load("host").device()
  local out, code = sh(string.format("./kwb export --json --cache '%s/dispatch.db' tests/recipes/dispatch.lua '%s/cli' "
                                     .. "--device='%s'", dir, dir, device))
  t.eq(code, 0, out)
  local j = require("cjson").decode(out)
  t.eq(j.dir, dir .. "/cli")
  t.eq(j.device, device)
  t.eq(j.shapes[2].kernel, fast.short)
  t.eq(j.shapes[1].fallback, true)
  local usage, ucode = sh("./kwb export tests/recipes/dispatch.lua")
  t.eq(ucode, 2)
  t.eq(usage:match("^[^\n]*"), "kwb export: it takes RECIPE.lua and DIR")
  local bad, bcode = sh("./kwb export tests/recipes/dispatch.lua d --devise x")
  t.eq(bcode, 2)
  t.eq(bad:match("^[^\n]*"), "kwb export: unknown option '--devise' (known: --device, --fallback, --help, --json, --torch)")
end)

-- What a path is (stat's words): where a refused write left it.
local function kind(path)
  local out = sh("stat -c %F '" .. path .. "'")
  return (out:gsub("\n$", ""))
end

-- Output paths: no parents made; a file there must be a regular one. The
-- checks come before anything is written (a device was once written "through").
t.test("export_makes_no_parent_directories", function()
  t.raises(function() export.export(recipe, dir .. "/no/such", { store = st }) end,
           "cannot write into the directory " .. dir .. "/no/such: the directory " .. dir .. "/no does not exist "
           .. "(kwb makes the directory named, not its parents)")
  t.eq(kind(dir .. "/no"):match("No such file") ~= nil, true, "nothing made")
  local out, code = sh(string.format("./kwb export --cache '%s/dispatch.db' tests/recipes/dispatch.lua '%s/no/such'", dir, dir))
  t.eq(code, 1)
  t.eq(out, "kwb export: cannot write into the directory " .. dir .. "/no/such: the directory " .. dir .. "/no does not "
       .. "exist (kwb makes the directory named, not its parents)\n")
end)

t.test("export_refuses_a_device_where_a_file_goes", function()
  t.raises(function() export.export(recipe, "/dev/full", { store = st }) end,
           "cannot write into the directory /dev/full: it is a character device, not a directory")
  local d = dir .. "/dev"
  assert(core.mkdirs(d))
  os.execute(string.format("ln -sf /dev/full '%s/dispatch.json' && mkfifo '%s/dispatch.h'", d, d))
  t.raises(function() export.export(recipe, d, { store = st }) end,
           "cannot write the file " .. d .. "/dispatch.json: it is a character device, not a regular file")
  os.remove(d .. "/dispatch.json")
  t.raises(function() export.export(recipe, d, { store = st }) end,
           "cannot write the file " .. d .. "/dispatch.h: it is a FIFO, not a regular file")
  t.eq(kind("/dev/full"), "character special file", "the device is as it was")
  t.eq(kind(d .. "/dispatch.h"), "fifo", "the FIFO too")
  t.eq(io.open(d .. "/kernels/" .. fast.short .. ".c"), nil, "nothing written before the refusal")
end)

-- ---- the C export: kernels that link, the dispatcher, the check program ----

local function write_file(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function make(d, args) return sh(string.format("make -s --no-print-directory -C '%s' %s", d, args or "")) end

t.test("export_kernels_link_into_one_program_with_only_their_entry_points_global", function()
  local d = dir .. "/near"
  -- the hazard: both kernels define sum2 (not static); built as they are, they collide
  local out, code = sh(string.format("cd '%s' && cc -c -o raw1.o kernels/%s.c && cc -c -o raw2.o kernels/%s.c "
                                     .. "&& ld -r -o raw.o raw1.o raw2.o", d, start.short, fast.short))
  t.eq(code, 1, out)
  t.truthy(out:find("multiple definition of `sum2'", 1, true), out)
  os.execute(string.format("rm -f '%s'/raw*.o", d))
  out, code = make(d)
  t.eq(code, 0, out)
  for _, k in ipairs { start, fast } do
    local syms = sh(string.format("nm -g --defined-only '%s/kernels/%s.o'", d, k.short))
    t.eq(syms:gsub("^%x+ ", ""), "T dispatch_" .. k.short .. "\n", "the one global symbol of " .. k.short)
  end
  -- a program of the user's calls the dispatcher at both shapes
  write_file(d .. "/app.c", [[
#include <stdio.h>
#include <stdlib.h>
#include "dispatch.h"
int main(void) {
    const int ns[2] = {256, 1 << 20};
    for (int k = 0; k < 2; k++) {
        int n = ns[k], bad = 0;
        float *a = malloc(4 * (size_t)n), *b = malloc(4 * (size_t)n), *c = malloc(4 * (size_t)n);
        for (int i = 0; i < n; i++) { a[i] = (float)i; b[i] = 2.0f * (float)i; }
        dispatch(n, n, a, b, c);
        for (int i = 0; i < n; i++) bad += c[i] != 3.0f * (float)i;
        printf("%d %s %d\n", n, kwb_dispatch_dispatch(n), bad);
        free(a); free(b); free(c);
    }
    return 0;
}
]])
  out, code = sh(string.format("cd '%s' && cc -std=c11 -Wall -Wextra -Werror -o app app.c libdispatch.a -lm && ./app", d))
  t.eq(code, 0, out)
  t.eq(out, string.format("256 %s 0\n1048576 %s 0\n", start.short, fast.short))
end)

t.test("export_check_program_agrees_with_the_reference_at_every_measured_shape", function()
  local out, code = make(dir .. "/near", "check")
  t.eq(code, 0, out)
  t.eq(out, string.format("n=256 kernel %s ok c max_abs 0 max_rel 0\nn=1048576 kernel %s ok c max_abs 0 max_rel 0\n",
                          start.short, fast.short))
  local j = require("cjson").decode(read_file(dir .. "/near/dispatch.json"))
  t.eq(j.check, "dispatch_check.c")
  t.eq(j.dispatcher, "dispatch")
  t.eq(j.kernels[fast.short].symbol, "dispatch_" .. fast.short)
end)

t.test("export_check_program_fails_naming_the_shape_of_a_tampered_kernel", function()
  local d = dir .. "/tampered"
  os.execute(string.format("rm -rf '%s' && cp -r '%s/near' '%s' && make -s -C '%s' clean", d, dir, d, d))
  -- the fast kernel's source replaced by one that writes zeros (its entry point renamed as before)
  write_file(string.format("%s/kernels/%s.c", d, fast.short), string.format("#define vecadd dispatch_%s\n"
    .. "void vecadd(int n, const float *a, const float *b, float *c) { (void)a; (void)b; for (int i = 0; i < n; i++) c[i] = 0; }\n",
    fast.short))
  local out, code = make(d, "dispatch_check")
  t.eq(code, 0, out)
  out, code = sh("'" .. d .. "/dispatch_check'")
  t.eq(code, 1, out)
  t.eq(out, string.format("n=256 kernel %s ok c max_abs 0 max_rel 0\n"
                          .. "n=1048576 kernel %s WRONG c: 1048576 of 1048576 elements off (first at 0: 0, expected "
                          .. "1.46612787) max_abs 2\n", start.short, fast.short))
  local _, mcode = make(d, "check")
  t.eq(mcode, 2, "make check fails")
end)

t.test("export_check_program_links_the_callers_fallback", function()
  local d = dir .. "/lib"
  write_file(dir .. "/library_vecadd.c",
             "void library_vecadd(int n, const float *a, const float *b, float *c) { for (int i = 0; i < n; i++) c[i] = a[i] + b[i]; }\n")
  local out, code = make(d, "check")
  t.eq(code, 2, "without the fallback's object")
  t.truthy(out:find("undefined reference to `library_vecadd'", 1, true), out)
  out, code = sh(string.format("cc -c -o '%s/library_vecadd.o' '%s/library_vecadd.c'", dir, dir))
  t.eq(code, 0, out)
  out, code = make(d, string.format("check FALLBACK_OBJS='%s/library_vecadd.o'", dir))
  t.eq(code, 0, out)
  t.eq(out, string.format("n=256 kernel library_vecadd ok c max_abs 0 max_rel 0\n"
                          .. "n=1048576 kernel %s ok c max_abs 0 max_rel 0\n", fast.short))
end)

t.test("export_refuses_a_fallback_that_is_no_c_identifier", function()
  t.raises(function() export.export(recipe, dir .. "/badname", { store = st, fallback = "library-vecadd" }) end,
           "--fallback: 'library-vecadd' is not a C identifier (the fallback is the caller's function of the problem's "
           .. "prototype, which the dispatcher calls by that name)")
  t.eq(kind(dir .. "/badname"):match("No such file") ~= nil, true, "nothing made")
end)

t.test("export_cli_says_how_to_check", function()
  local out, code = sh(string.format("./kwb export --cache '%s/dispatch.db' tests/recipes/dispatch.lua '%s/cli2'", dir, dir))
  t.eq(code, 0, out)
  t.eq(out, string.format("wrote %s/cli2: 2 shapes, 1 with a kernel of their own, 1 on the start kernel (dispatch.json, "
                          .. "dispatch.h, dispatch.c, reference.c, dispatch_check.c, Makefile, README.txt, "
                          .. "dispatch_test.c, kernels/)\nmake -C %s/cli2 check: links dispatch with every kernel and "
                          .. "checks each measured shape against the problem's C reference\n", dir, dir))
end)

t.test("export_of_a_lua_reference_writes_no_check_program_and_says_why", function()
  local lr = kwb.load "tests/recipes/export_lua_ref.lua"
  lr:run { mode = "quiet", store = st }
  local d = dir .. "/luaref"
  local out, code = sh(string.format("./kwb export --cache '%s/dispatch.db' tests/recipes/export_lua_ref.lua '%s'", dir, d))
  t.eq(code, 0, out)
  local why = "the reference of problem luavec is a Lua function, which a C program cannot call"
  t.eq(out, string.format("wrote %s: 1 shapes, 0 with a kernel of their own, 1 on the start kernel (dispatch.json, "
                          .. "dispatch.h, dispatch.c, Makefile, README.txt, dispatch_test.c, kernels/)\n"
                          .. "no check program: %s\n", d, why))
  t.eq(read_file(d .. "/dispatch_check.c"), nil, "no check program")
  t.eq(read_file(d .. "/reference.c"), nil, "no reference")
  t.eq(require("cjson").decode(read_file(d .. "/dispatch.json")).no_check, why)
  t.truthy(read_file(d .. "/README.txt"):find("No check program: " .. why, 1, true), "README.txt says so")
  local mout, mcode = make(d, "check")
  t.eq(mcode, 2)
  t.eq(mout:match("^[^\n]*"), "no check program: " .. why)
  local lout, lcode = make(d)
  t.eq(lcode, 0, lout)
end)

-- ---- CUDA: cubins built here with NVRTC, results recorded as an H100's run records them ----

local cuda_backend = require "kwb.measure.backends.cuda"
local candidate = require "kwb.loop.candidate"
local h100 = "NVIDIA H100 80GB HBM3 sm_90 132SM 80GiB cuda12"
local curecipe = kwb.recipe {
  name = "cuda_export", backend = "cuda", problem = "vecadd", shapes = { n = { 4096, 1 << 20 } },
  start = "../candidates/cuda/good.cu", sanitize = false, verify_shapes = false,
  launch = function(shape) return { grid = { (shape.n + 255) // 256 }, block = { 256 } } end,
}
-- the judge's build on that device: its compile, for the device's arch
local on_h100 = setmetatable({ arch = "sm_90" }, { __index = curecipe })

local function record(r, device, prop, outcome, medians, code)
  local c = candidate.make({ recipe = r, ids = {} }, prop, outcome)
  local mod = assert(cuda_backend.compile(c, on_h100))
  local shapes = {}
  for key, m in pairs(medians) do shapes[key] = { median = m, ci_lo = 0.99 * m, ci_hi = 1.01 * m } end
  st:record(st:recipe_context(r, device), c, { outcome = outcome, name = c.name, shapes = shapes,
                                               seconds = { build = 0.1 }, log = "", code = code or cuda_backend.code_digest(mod, c) })
  return c, mod
end

local cstart, cstart_mod = record(curecipe, h100, curecipe.start, "start", { ["n=4096"] = 1e-5, ["n=1048576"] = 2e-4 })
local cstride, cstride_mod = record(curecipe, h100, { file = "../candidates/cuda/good_stride.cu" }, "accepted",
                                    { ["n=4096"] = 2e-5, ["n=1048576"] = 1e-4 })

-- The bytes of one cubin array in dispatch.c.
local function embedded(text, i)
  local body = text:match("static const unsigned char cubin_" .. i .. "%[%d+%] = {\n(.-)\n};")
  local out = {}
  for h in (body or ""):gmatch("0x(%x%x)") do out[#out + 1] = string.char(tonumber(h, 16)) end
  return table.concat(out)
end

t.test("export_cuda_embeds_the_cubins_kwb_measured", function()
  local d = dir .. "/cuda"
  local out = export.export(curecipe, d, { store = st, device = h100 })
  t.eq(out.arch, "sm_90", "the device kind's arch")
  t.eq(out.shapes[1].kernel, cstart.short)
  t.eq(out.shapes[2].kernel, cstride.short)
  local l = out.shapes[2].launch
  t.eq(table.concat(l.grid, " ") .. " / " .. table.concat(l.block, " ") .. " / " .. l.smem, "4096 1 1 / 256 1 1 / 0",
       "the launch rule at n=1048576")
  local text = read_file(d .. "/dispatch.c")
  for i, k in ipairs { { cstart, cstart_mod }, { cstride, cstride_mod } } do
    local c, mod = k[1], k[2]
    local cubin = mod:cubin()
    t.eq(out.kernels[c.short].cubin_sha256, core.sha256(cubin), "the digest of the judge's cubin")
    t.eq(out.kernels[c.short].code, cuda_backend.code_digest(mod, c))
    t.eq(read_file(string.format("%s/kernels/%s.cubin", d, c.short)) == cubin, true, "kernels/ID.cubin")
    t.eq(core.sha256(embedded(text, i - 1)), core.sha256(cubin), "the array in dispatch.c")
  end
end)

t.test("export_cuda_builds_its_loader_and_check_program_against_cuda_h", function()
  local d = dir .. "/cuda"
  local out, code = sh(string.format("cd '%s' && cc -std=c11 -Wall -Wextra -Wshadow -Werror -I/usr/local/cuda/include "
                                     .. "-c -o /dev/null dispatch.c && cc -std=c11 -Wall -Wextra -Wshadow -Werror "
                                     .. "-I/usr/local/cuda/include -c -o /dev/null dispatch_check.c", d))
  t.eq(code, 0, out)
  out, code = make(d, "dispatch_check CUDA_HOME=/usr/local/cuda")
  t.eq(code, 0, out)
  local syms = sh(string.format("nm -g --defined-only '%s/libcuda_export.a'", d))
  t.eq(syms:gsub("%x+ T ", "T "), "\ndispatch.o:\nT cuda_export\n", "the dispatcher is the one global symbol")
end)

t.test("export_cuda_refuses_a_cubin_that_is_not_the_code_measured", function()
  local other = h100:gsub("cuda12", "cuda13")
  record(curecipe, other, curecipe.start, "start", { ["n=4096"] = 1e-5, ["n=1048576"] = 2e-4 })
  local _, mod = record(curecipe, other, { file = "../candidates/cuda/good_stride.cu" }, "accepted",
                        { ["n=4096"] = 2e-5, ["n=1048576"] = 1e-4 }, cuda_backend.code_digest(cstart_mod, cstart))
  t.raises(function() export.export(curecipe, dir .. "/cuda_other", { store = st, device = other }) end,
           string.format("kernel %s: the cubin built now for sm_90 is not the code kwb measured (code digest %s, "
                         .. "measured %s: another NVRTC or arch?)", cstride.short,
                         cuda_backend.code_digest(mod, cstride):sub(1, 16),
                         cuda_backend.code_digest(cstart_mod, cstart):sub(1, 16)))
  t.eq(kind(dir .. "/cuda_other"):match("No such file") ~= nil, true, "nothing made")
end)

t.test("export_cuda_names_the_shape_of_a_launch_plan_it_cannot_write", function()
  local steps = setmetatable({ launch = function(shape)
    return { steps = { { "vecadd", grid = { shape.n // 256 }, block = { 256 }, args = { "n", "a", "b", "c" } } } }
  end }, { __index = curecipe })
  t.raises(function() export.export(steps, dir .. "/cuda_steps", { store = st, device = h100 }) end,
           "recipe cuda_export: the launch plan at n=4096 has steps (several kernels); kwb export writes a loader for "
           .. "one-kernel plans only")
  local bad = setmetatable({ launch = function() return { grid = { 0 }, block = { 256 } } end }, { __index = curecipe })
  t.raises(function() export.export(bad, dir .. "/cuda_bad", { store = st, device = h100 }) end,
           "recipe cuda_export: the launch plan at n=4096: grid must be 1 to 3 positive integers, got [0]")
end)

t.done()
