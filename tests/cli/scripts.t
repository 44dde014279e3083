# Scripts: arguments as lua.c gives them, stdin, errors with tracebacks,
# neighbour modules, KWB_LUA_PATH overrides, exit statuses.
$ ./kwb tests/cli/fixtures/args.lua one "two words" 3
arg[0]	tests/cli/fixtures/args.lua
arg[1]	one
arg[2]	two words
arg[3]	3
...	3	one	two words	3
$ ./kwb --cache /tmp/elsewhere.db -e 'print(kwb.cache_path)'
/tmp/elsewhere.db
$ KWB_CACHE=/tmp/env.db ./kwb -e 'print(kwb.cache_path)'
/tmp/env.db
$ echo 'print("from stdin", ...)' | ./kwb - a b
from stdin	a	b
$ echo 'print(1 + 2)' | ./kwb
3
$ ./kwb tests/cli/fixtures/fails.lua 2>&1 | head -5
kwb: tests/cli/fixtures/fails.lua:2: bad value 42
stack traceback:
	[C]: in function 'error'
	tests/cli/fixtures/fails.lua:2: in upvalue 'inner'
	tests/cli/fixtures/fails.lua:5: in local 'outer'
$ ./kwb tests/cli/fixtures/fails.lua 2>/dev/null
[exit 1]
$ ./kwb tests/cli/fixtures/syntax.lua
kwb: tests/cli/fixtures/syntax.lua:1: unexpected symbol near '='
[exit 1]
$ ./kwb tests/cli/fixtures/missing.lua
kwb: cannot open tests/cli/fixtures/missing.lua: No such file or directory
[exit 1]
$ ./kwb -e 'os.exit(3)'
[exit 3]
$ ./kwb -e 'error({})'
kwb: (error object is a table value)
stack traceback:
	[C]: in function 'error'
	(command line):1: in main chunk
	[C]: in ?
[exit 1]
$ ./kwb tests/cli/fixtures/needs_neighbour.lua
hello from the neighbour module
$ KWB_LUA_PATH=tests/cli/fixtures/override ./kwb -e 'print(kwb.figures.time(1))'
overridden from disk
$ ./kwb -e 'print(kwb.figures.time(0.000412))'
412.0 us
# the GPU machine's cost scripts (tests/gpu/integrity_cost) on kept events: candidates paired by id, the sanitizer's seconds aside
$ ./kwb tests/gpu/cost_compare.lua tests/gpu/fixtures/cost-before.jsonl tests/gpu/fixtures/cost-after.jsonl
cost-after: 3 candidates in both; a candidate 5.333 s before, 5.033 s now (sums), ratio 0.944; median ratio 1.100 (0.850 to 1.100); with the pool references spread over these candidates 5.200 s, ratio 0.975; outcomes differ: cccccccc timeout->slower
$ ./kwb tests/gpu/cost_summary.lua ./kwb recipes/x.lua 0 10 35.25 tests/gpu/fixtures/cost-after.jsonl
./kwb          recipes/x.lua          exit 0   4 candidates    24.00 s in the loop    25.25 s wall  median  3.300 s a candidate (sanitizer, pool references aside)  sanitizer   6.00 s  (accepted 1, slower 2, wrong 1)
  stages, summed: build 1.50 s, verify 2.30 s (of which the unannounced shapes 0.75 s), time 11.70 s (of which the calls 8.00 s, the references of pool sets 0.50 s, the checks around them 2.00 s)
$ ./kwb tests/gpu/cost_compare.lua tests/gpu/fixtures/cost-before.jsonl /tmp/kwb-no-such-events.jsonl
cost_compare: /tmp/kwb-no-such-events.jsonl: no such file
# a script takes as many arguments as the shell passes (each one a slot of Lua's C stack on the way in)
$ ./kwb tests/cli/fixtures/argc.lua $(seq 1 1000)
1000	1000
