#!/usr/bin/env bash
# bench/pair_throughput.sh BEFORE_TREE [PAIRS]: candidates a second on
# host_matmul (grid, 30 candidates, seed 1, a fresh cache each run) for the kwb
# built in BEFORE_TREE and the one in this tree, in pairs, the order turned
# each pair (odd: before first). Prints each pair's figures and ratio.
#   git worktree add /tmp/before d1359d8 && make -C /tmp/before kwb
#   bench/pair_throughput.sh /tmp/before 6
set -u
before=${1:?usage: bench/pair_throughput.sh BEFORE_TREE [PAIRS]}
after=$(pwd)
rate() {   # the summary's per_second of one run in tree $1
  local d
  d=$(mktemp -d)
  (cd "$1" && ./kwb --cache "$d/kwb.db" recipes/host_matmul.lua --json --strategy grid --budget 30 --seed 1 2>/dev/null) |
    ./kwb -e 'for l in io.lines() do local ok, e = pcall(require("cjson").decode, l)
                if ok and type(e) == "table" and e.event == "summary" then print(string.format("%.3f", e.per_second)) end end'
  rm -rf "$d"
}
for i in $(seq 1 "${2:-6}"); do
  if [ $((i % 2)) -eq 1 ]; then b=$(rate "$before"); a=$(rate "$after"); else a=$(rate "$after"); b=$(rate "$before"); fi
  echo "pair $i before $b after $a ratio $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", a / b }') load $(cut -d' ' -f1 /proc/loadavg)"
done
