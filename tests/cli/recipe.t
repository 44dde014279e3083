# Recipes on the command line: run options, schema errors, plain scripts.
$ rm -rf build/test-recipe-cli && mkdir -p build/test-recipe-cli
$ ./kwb recipes/host_matmul.lua --frobnicate
kwb: unknown run option '--frobnicate' (known: --json, --plain, --quiet, --budget, --minutes, --strategy, --model, --seed, --workers, --ahead, --queue, --queue-password-file, --fleet-key-file, --device, --certify, --retime, --cache, --help, -h)
try 'kwb recipes/host_matmul.lua --help'
[exit 2]
$ ./kwb recipes/host_matmul.lua --budget x
kwb: '--budget' needs a positive integer, got 'x'
try 'kwb recipes/host_matmul.lua --help'
[exit 2]
$ ./kwb recipes/host_matmul.lua --budget=x
kwb: '--budget' needs a positive integer, got 'x'
try 'kwb recipes/host_matmul.lua --help'
[exit 2]
$ ./kwb recipes/host_matmul.lua --model gpt-5
kwb: '--model' needs PROVIDER:NAME (providers: openai, anthropic, command, replay), got 'gpt-5'
try 'kwb recipes/host_matmul.lua --help'
[exit 2]
$ ./kwb recipes/host_matmul.lua --model=opneai:gpt-5
kwb: '--model opneai:gpt-5': unknown provider 'opneai' (known: openai, anthropic, command, replay)
try 'kwb recipes/host_matmul.lua --help'
[exit 2]
$ ./kwb recipes/host_matmul.lua --model replay:no/such.json
kwb: '--model replay:no/such.json': replay transcript: cannot read no/such.json: No such file or directory
try 'kwb recipes/host_matmul.lua --help'
[exit 2]
$ ./kwb recipes/host_matmul.lua --help | head -3
usage: kwb recipes/host_matmul.lua [run options]

Runs the research loop on recipe host_matmul (matmul, 3 shapes). Run options (--opt=value works too):
$ rm -rf build/test-recipe-cli/eq.db && ./kwb --cache build/test-recipe-cli/eq.db tests/recipes/planted.lua --quiet --budget=2 --seed=7 | grep -o 'funnel: [0-9]* candidates'
funnel: 2 candidates
$ ./kwb --cache build/test-recipe-cli/bad.db tests/cli/fixtures/bad_start.lua --json 2>/dev/null | tail -1 | grep -o -e '"event":"error"' -e '"message":"the start kernel planted_wrong.c fails: wrong: output c at n=16' | sort
"event":"error"
"message":"the start kernel planted_wrong.c fails: wrong: output c at n=16
# --cache after the recipe's file too; the run's first line (and --json's start event) says which cache
$ ./kwb tests/recipes/planted.lua --budget 1 --plain --cache=build/test-recipe-cli/after.db --seed 7 | head -1 | grep -o 'cache .*'
cache build/test-recipe-cli/after.db
$ ./kwb tests/recipes/planted.lua --budget 1 --json --cache build/test-recipe-cli/after.db --seed 7 | head -1 | ./kwb tests/cli/json_fields.lua event cache
start	build/test-recipe-cli/after.db
# --json's candidate events carry the unannounced shapes' share of the verification (a verified candidate only)
$ ./kwb tests/recipes/planted.lua --budget 6 --json --cache build/test-recipe-cli/stages.db --seed 7 | grep '"event":"candidate"' | ./kwb tests/cli/json_fields.lua n outcome stages.unannounced | awk '{ print $1, ($2 == "slower" || $2 == "accepted" ? "verified" : $2), ($3 == "-" ? "-" : ($3 > 0 ? "seconds" : $3)) }'
1 forbidden -
2 forbidden -
3 compile-error -
4 wrong -
5 verified seconds
6 verified seconds
$ ./kwb tests/recipes/planted.lua --budget 1 --cache build/test-recipe-cli/typo/after.db
kwb: --cache build/test-recipe-cli/typo/after.db: the directory build/test-recipe-cli/typo does not exist (kwb makes the cache file, not its directory)
try 'kwb tests/recipes/planted.lua --help'
[exit 2]
$ ./kwb recipes/host_matmul.lua --strategy
kwb: '--strategy' needs a strategy name, got nothing
try 'kwb recipes/host_matmul.lua --help'
[exit 2]
$ ./kwb tests/recipes/bad_typo.lua --json
kwb: tests/recipes/bad_typo.lua:8: unknown recipe field 'stratgy' (did you mean 'strategy'?)
[exit 1]
$ ./kwb tests/recipes/script.lua --json --budget 5
script	3	--json	--budget	5
$ ./kwb recipes/host_matmul.lua --strategy simplex --quiet
kwb: unknown strategy 'simplex' (known: grid, random, anneal, genetic, llm, llm+tune, agent, or a .lua file)
try 'kwb recipes/host_matmul.lua --help'
[exit 2]
# a fleet through a queue (tests/lua/test_queue.lua runs one): the URL, its password and the fleet's key
# checked before anything runs; a password in the URL refused
$ ./kwb recipes/host_matmul.lua --queue redis://127.0.0.1/q
kwb: queue redis://127.0.0.1/q: no password (give it in $KWB_QUEUE_PASSWORD or a file, --queue-password-file FILE): a queue anyone can reach could hand the workers code
try 'kwb recipes/host_matmul.lua --help'
[exit 2]
$ ./kwb recipes/host_matmul.lua --queue redis://:pw@127.0.0.1/q
kwb: queue redis://:***@127.0.0.1/q: a password in the URL would show in the process list; give it in $KWB_QUEUE_PASSWORD or a file (--queue-password-file FILE), and the URL as redis://[USER@]HOST:PORT/NAME
try 'kwb recipes/host_matmul.lua --help'
[exit 2]
$ ./kwb recipes/host_matmul.lua --queue redis://127.0.0.1/q --queue-password-file tests/fixtures/queue.pw
kwb: queue redis://127.0.0.1/q: no fleet key: a fleet's results count only when a worker signs them with a key derived from it; give it in $KWB_FLEET_KEY or a file (--fleet-key-file FILE); make one with `openssl rand -hex 32`, and each worker's with `kwb fleet --worker-key NAME`
try 'kwb recipes/host_matmul.lua --help'
[exit 2]
$ ./kwb recipes/host_matmul.lua --queue redis://127.0.0.1/q --workers 2
kwb: '--workers' is for workers on this machine; a queue's are its fleet
try 'kwb recipes/host_matmul.lua --help'
[exit 2]
$ ./kwb recipes/host_matmul.lua --device H200
kwb: '--device' picks among a queue's device kinds: it needs --queue
try 'kwb recipes/host_matmul.lua --help'
[exit 2]
