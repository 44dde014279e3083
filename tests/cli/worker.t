$ ./kwb worker 3<&- 2>&1
kwb worker: the worker's channel broke: Bad file descriptor (kwb worker is started by a pool, with its channel on fd 3)
[exit 1]
$ ./kwb worker extra 2>&1
kwb worker: unknown option 'extra' (known: --queue, --queue-password-file, --worker-key-file, --backend, --gpu, --recipes, --tasks)
try 'kwb worker --help'
[exit 2]
$ ./kwb tests/recipes/isolation.lua --workers 0 2>&1
kwb: '--workers' needs a positive integer, got '0'
try 'kwb tests/recipes/isolation.lua --help'
[exit 2]
