-- tests/lua/test_export.lua: kwb export from a host run (tests/recipes/dispatch.lua):
-- a kernel that beats the start kernel only at the large shape gets that
-- shape, the start kernel keeps the small one; the header compiles and its
-- test program picks the right kernel for measured shapes and those between,
-- by either rule; the kernels' files compile on their own.
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
  t.eq(bad:match("^[^\n]*"), "kwb export: unknown option '--devise' (known: --device, --fallback, --help, --json)")
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

t.done()
