-- tests/lua/test_install.lua: make install into a temporary prefix: a C
-- program built against the installed header and library through pkg-config
-- gives the Lua API's figures for the same inputs; the man page renders; the
-- installed bash completion completes a command; make uninstall removes all.
local t = require "t"
local core = require "kwb.core"

local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$") .. "/install"
os.execute("rm -rf '" .. dir .. "'")
assert(core.mkdirs(dir))
local prefix = (dir:sub(1, 1) == "/" and dir or core.cwd() .. "/" .. dir) .. "/prefix"
local files = { "bin/kwb", "lib/libkwb.so", "include/kwb.h", "lib/pkgconfig/kwb.pc", "share/man/man1/kwb.1",
                "share/bash-completion/completions/kwb", "share/zsh/site-functions/_kwb",
                "share/lua/5.1/kwb/ffi.lua", "share/lua/5.1/kwb/kwb_cdef.h" }

local function sh(cmd, shell)
  local r = assert(core.exec({ shell or "sh", "-c", cmd }, { timeout = 300 }))
  return r.out .. r.err, r.status
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

t.test("install_puts_every_file_under_the_prefix", function()
  local out, st = sh("make -s install PREFIX='" .. prefix .. "'")
  t.eq(st, 0, out)
  for _, f in ipairs(files) do t.truthy(exists(prefix .. "/" .. f), f) end
end)

t.test("install_a_c_program_builds_against_it_through_pkg_config", function()
  local src = dir .. "/use.c"
  local f = assert(io.open(src, "w"))
  f:write([[
#include <stdio.h>
#include <kwb.h>
int main(void) {
    kwb_buffer *b = kwb_buffer_new(KWB_F32, 1000);
    char sum[65];
    if (!b || kwb_buffer_fill_uniform(b, 42, -1, 1) || kwb_buffer_checksum(b, sum)) return 1;
    printf("%s %.9g %s\n", sum, kwb_buffer_get(b, 7), kwb_version());
    kwb_buffer_free(b);
    return 0;
}
]])
  f:close()
  local out, st = sh(string.format("PKG_CONFIG_PATH='%s/lib/pkgconfig' && export PKG_CONFIG_PATH && "
                                   .. "cc -o '%s/use' '%s' $(pkg-config --cflags --libs kwb) && '%s/use'", prefix, dir, src,
                                   dir))
  t.eq(st, 0, out)
  local b = kwb.host.buffer("f32", 1000)
  b:fill_uniform(42, -1, 1)
  t.eq(out, string.format("%s %.9g %s\n", b:checksum(), b[8], core.version), "the same figures as the Lua API")
end)

t.test("install_the_man_page_renders", function()
  local out, st = sh("MANWIDTH=80 man -l '" .. prefix .. "/share/man/man1/kwb.1'")
  t.eq(st, 0, out)
  t.truthy(out:find("kwb - a scriptable workbench for GPU and CPU kernel optimisation", 1, true), out:sub(1, 300))
  t.truthy(out:find("RUN OPTIONS", 1, true))
end)

t.test("install_the_bash_completion_completes_a_command", function()
  local out, st = sh(string.format(". '%s/share/bash-completion/completions/kwb'; COMP_WORDS=('%s/bin/kwb' rep); "
                                   .. "COMP_CWORD=1; _kwb; echo \"${COMPREPLY[*]}\"", prefix, prefix), "bash")
  t.eq(st, 0, out)
  t.eq(out, "report\n")
  local function complete(words, cword)
    local o, s2 = sh(string.format(". '%s/share/bash-completion/completions/kwb'; COMP_WORDS=('%s/bin/kwb' %s); "
                                   .. "COMP_CWORD=%d; _kwb; echo \"${COMPREPLY[*]}\"", prefix, prefix, words, cword), "bash")
    t.eq(s2, 0, o)
    return o
  end
  t.eq(complete("cache tr", 2), "transcripts\n", "a cache command, from kwb.help")
  t.eq(complete("recipes/host_matmul.lua --bu", 2), "--budget\n", "a run option")
  t.eq(complete("export x.lua out --fa", 4), "--fallback\n", "a command's option")
end)

t.test("uninstall_removes_every_file", function()
  local out, st = sh("make -s uninstall PREFIX='" .. prefix .. "'")
  t.eq(st, 0, out)
  for _, f in ipairs(files) do t.eq(exists(prefix .. "/" .. f), false, f) end
end)

t.done()
