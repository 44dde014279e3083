# The command line: versions, chunks, exit statuses, usage errors.
$ ./kwb --version
kwb 0.1.0 (Lua 5.4.4)
$ ./kwb -e 'print(1 + 1)' -e 'print(kwb.version)'
2
0.1.0
$ ./kwb --frobnicate
kwb: unknown option '--frobnicate'
try 'kwb --help'
[exit 2]
$ ./kwb --cache
kwb: '--cache' needs a path
try 'kwb --help'
[exit 2]
$ ./kwb --cache "" -e 'print(1)'
kwb: '--cache' needs a path, got an empty one
try 'kwb --help'
[exit 2]
$ ./kwb --cache= -e 'print(1)'
kwb: '--cache' needs a path, got an empty one
try 'kwb --help'
[exit 2]
# a cache path the user names must have its directory: a typo is an error, not a new empty cache
$ ./kwb --cache /tmp/kwb-no-such-dir/typo/kwb.db -e 'print(1)'; ls -d /tmp/kwb-no-such-dir 2>&1 | sed 's/^ls: //'
kwb: --cache /tmp/kwb-no-such-dir/typo/kwb.db: the directory /tmp/kwb-no-such-dir/typo does not exist (kwb makes the cache file, not its directory)
cannot access '/tmp/kwb-no-such-dir': No such file or directory
$ KWB_CACHE=/tmp/kwb-no-such-dir/kwb.db ./kwb -e 'print(1)'
kwb: KWB_CACHE=/tmp/kwb-no-such-dir/kwb.db: the directory /tmp/kwb-no-such-dir does not exist (kwb makes the cache file, not its directory)
[exit 2]
$ ./kwb --cache build -e 'print(1)'
kwb: --cache build: it is a directory: name the cache file, e.g. build/kwb.db
[exit 2]
# the default is one per user, wherever kwb runs from (made on first use)
$ rm -rf build/home && mkdir -p build/home/elsewhere && cd build/home/elsewhere && env -u KWB_CACHE -u XDG_CACHE_HOME HOME=$(dirname "$PWD") ../../../kwb -e 'print((kwb.cache_path:gsub("^.*/build/home", "~")))' && ls -d ../.cache/kwb
~/.cache/kwb/kwb.db
../.cache/kwb
$ env -u KWB_CACHE XDG_CACHE_HOME=/tmp/kwb-xdg ./kwb -e 'print(kwb.cache_path)'; rm -rf /tmp/kwb-xdg
/tmp/kwb-xdg/kwb/kwb.db
$ env -u KWB_CACHE -u XDG_CACHE_HOME -u HOME ./kwb -e 'print(1)'
kwb: no place for the cache: neither HOME nor XDG_CACHE_HOME is set (name one with --cache PATH or KWB_CACHE)
[exit 1]
$ ./kwb --help | head -1
usage: kwb [options] [FILE.lua | - | COMMAND] [args...]
# every subcommand answers --help with its usage
$ ./kwb -e 'for _, c in ipairs(require("kwb.cli").commands) do print(c.name) end' | while read c; do ./kwb $c --help | head -1 | grep -q "^usage: kwb $c" || echo "no usage from $c --help"; done
# every subcommand in kwb.cli's table is listed by --help
$ ./kwb -e 'for _, c in ipairs(require("kwb.cli").commands) do print(c.name) end' | while read c; do ./kwb --help | grep -q "^  $c " || echo "missing $c"; done
# Lua, LPeg and lua-cjson are linked statically; nothing from CUDA is linked
$ ldd ./kwb | grep -ciE 'lua|cuda|nvrtc'
0
[exit 1]
$ ./kwb -e 'print(require("lpeg").version(), type(require("cjson").encode))'
1.0.2	function
# core/kwb.h is FFI-clean: between the includes and the guard's end, no directive
$ sed -n '/^#include <stdint.h>/,/^#endif/p' core/kwb.h | grep -c '^#'
2
# Temporary files go to $TMPDIR (workers point it into their scratch directory)
$ d=$(mktemp -d) && TMPDIR=$d ./kwb -e 'local p = require("kwb.core").tempfile(".c"); print(p:sub(1, #os.getenv("TMPDIR") + 5), p:sub(-2))' | sed "s|$d|TMPDIR|"; rm -rf "$d"
TMPDIR/kwb-	.c
$ TMPDIR=/nonexistent ./kwb -e 'local _, msg, info = require("kwb.core").tempfile(); print(msg, info.code)'
cannot make a temporary file in /nonexistent: No such file or directory	no-tempfile
# the man page's options, commands, run options, recipe fields, API and environment are what lua/kwb/help/init.lua says (make man)
$ ./kwb tools/man.lua --check docs/kwb.1
docs/kwb.1: up to date
