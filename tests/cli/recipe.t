# Recipes on the command line: run options, schema errors, plain scripts.
$ ./kwb recipes/host_matmul.lua --frobnicate
kwb: unknown run option '--frobnicate'
try 'kwb --help'
[exit 2]
$ ./kwb recipes/host_matmul.lua --budget x
kwb: '--budget' needs a positive integer, got 'x'
try 'kwb --help'
[exit 2]
$ ./kwb recipes/host_matmul.lua --strategy
kwb: '--strategy' needs a strategy name, got nothing
try 'kwb --help'
[exit 2]
$ ./kwb tests/recipes/bad_typo.lua --json
kwb: tests/recipes/bad_typo.lua:8: unknown recipe field 'stratgy' (did you mean 'strategy'?)
[exit 1]
$ ./kwb tests/recipes/script.lua --json --budget 5
script	3	--json	--budget	5
$ ./kwb recipes/host_matmul.lua --strategy simplex --quiet
kwb: unknown strategy 'simplex' (known: grid, random, anneal, genetic, llm, llm+tune, agent, or a .lua file)
try 'kwb --help'
[exit 2]
