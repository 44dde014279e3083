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
