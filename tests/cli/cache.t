# kwb cache: the subcommands over a small cache with fixed contents (cache_setup.lua).
# Ids are content hashes, the same on every run.
$ rm -rf build/test-cache && ./kwb tests/cli/cache_setup.lua build/test-cache/cli.db
$ ./kwb --cache build/test-cache/cli.db cache ls
id        problem  parent    origin      outcome   score  created
dd8d64fa  axpy     -         seed        accepted      -  2026-12-02 10:00:00
b5013c31  axpy     dd8d64fa  rewrite/m1  accepted      -  2026-12-02 10:01:00
bf611c14  axpy     dd8d64fa  rewrite/m1  wrong         -  2026-12-02 10:02:00
30197230  dot      -         seed        -             -  2026-12-02 10:03:00
$ ./kwb --cache build/test-cache/cli.db cache ls axpy
id        problem  parent    origin      outcome   score  created
dd8d64fa  axpy     -         seed        accepted      -  2026-12-02 10:00:00
b5013c31  axpy     dd8d64fa  rewrite/m1  accepted      -  2026-12-02 10:01:00
bf611c14  axpy     dd8d64fa  rewrite/m1  wrong         -  2026-12-02 10:02:00
$ ./kwb --cache build/test-cache/cli.db cache ls nothing
no candidates for nothing
$ ./kwb cache ls axpy --cache build/test-cache/cli.db | tail -1
bf611c14  axpy     dd8d64fa  rewrite/m1  wrong         -  2026-12-02 10:02:00
$ ./kwb cache ls axpy --cache=build/test-cache/cli.db --json | wc -l
3
$ ./kwb cache ls --json --cache=build/test-cache/cli.db | head -1 | grep -o '"id":"dd8d64fa[0-9a-f]*"'
"id":"dd8d64fa15607a918568ccfd13208dc730947c6412d50752eb0a5d8d702f1c8e"
$ ./kwb cache ls --cache build/test-cache/typo/nothere.db
kwb cache: --cache build/test-cache/typo/nothere.db: the directory build/test-cache/typo does not exist (kwb makes the cache file, not its directory)
try 'kwb cache --help'
[exit 2]
$ ./kwb cache ls --cache build/test-cache/nothere.db
kwb cache: no cache at build/test-cache/nothere.db (a run makes one; kwb --cache PATH names another)
[exit 1]
$ test -e build/test-cache/typo && echo made || echo nothing made
nothing made
$ ./kwb cache ls --cache=
kwb cache: '--cache' needs a path, got an empty one
try 'kwb cache --help'
[exit 2]
$ ./kwb --cache build/test-cache/cli.db cache show b501
candidate  b5013c3146fc16fd082ff29750f983ff52c014f772b6c203d6b5cfbb44dc6e46
problem    axpy
parent     dd8d64fa15607a918568ccfd13208dc730947c6412d50752eb0a5d8d702f1c8e
origin     rewrite/m1
created    2026-12-02 10:01:00 UTC
outcome    accepted
rationale  unroll by four
params     {"UNROLL":4}
lineage    b5013c31 <- dd8d64fa
builds
  arch    toolchain   status  resources
  x86-64  gcc 12.2.0  ok      {"bytes":512}
results
  device           shape    outcome     median   n
  host:Test CPU:2  1000     accepted    1.2 us  30
  host:Test CPU:2  1000000  slower    1.600 ms  30
source
  void axpy(int n, float a, const float *x, float *y) {
      int i = 0;
      for (; i + 4 <= n; i += 4) {
          y[i] = a * x[i] + y[i];
          y[i + 1] = a * x[i + 1] + y[i + 1];
          y[i + 2] = a * x[i + 2] + y[i + 2];
          y[i + 3] = a * x[i + 3] + y[i + 3];
      }
      for (; i < n; i++)
          y[i] = a * x[i] + y[i];
  }
$ ./kwb --cache build/test-cache/cli.db cache show dd8d64fa15607a918568ccfd13208dc730947c6412d50752eb0a5d8d702f1c8e
candidate  dd8d64fa15607a918568ccfd13208dc730947c6412d50752eb0a5d8d702f1c8e
problem    axpy
parent     -
origin     seed
created    2026-12-02 10:00:00 UTC
outcome    accepted
params     {}
lineage    dd8d64fa
results
  device           shape    outcome     median   n
  host:Test CPU:2  1000     accepted    2.0 us  30
  host:Test CPU:2  1000000  accepted  1.500 ms  30
source
  void axpy(int n, float a, const float *x, float *y) {
      for (int i = 0; i < n; i++)
          y[i] = a * x[i] + y[i];
  }
$ ./kwb --cache build/test-cache/cli.db cache show 5e1c
kwb cache: no candidate 5e1c in the cache build/test-cache/cli.db
[exit 1]
$ ./kwb --cache build/test-cache/cli.db cache show b5
kwb cache: 'b5' is not a candidate id (4 to 64 hex digits)
[exit 1]
$ ./kwb --cache build/test-cache/cli.db cache show
kwb cache: show takes one ID
try 'kwb cache --help'
[exit 2]
$ ./kwb --cache build/test-cache/cli.db cache best axpy
device           shape    candidate    median  outcome   measured
host:Test CPU:2  1000     b5013c31     1.2 us  accepted  here
host:Test CPU:2  1000000  dd8d64fa   1.500 ms  accepted  here
$ ./kwb --cache build/test-cache/cli.db cache best axpy --shape 1000
device           shape  candidate  median  outcome   measured
host:Test CPU:2  1000   b5013c31   1.2 us  accepted  here
$ ./kwb --cache build/test-cache/cli.db cache best axpy --shape=1000000 --device 'host:Test CPU:2'
device           shape    candidate    median  outcome   measured
host:Test CPU:2  1000000  dd8d64fa   1.500 ms  accepted  here
$ ./kwb --cache build/test-cache/cli.db cache best dot
no timed correct candidates for dot
$ ./kwb --cache build/test-cache/cli.db cache best axpy --size 3
kwb cache: unknown option '--size' (known: --device, --shape)
try 'kwb cache --help'
[exit 2]
# --json on every command (tests/cli/json_fields.lua prints the named fields of each line)
$ ./kwb --cache build/test-cache/cli.db cache best axpy --json | ./kwb tests/cli/json_fields.lua shape candidate median outcome
1000	b5013c3146fc16fd082ff29750f983ff52c014f772b6c203d6b5cfbb44dc6e46	1.2e-06	accepted
1000000	dd8d64fa15607a918568ccfd13208dc730947c6412d50752eb0a5d8d702f1c8e	0.0015	accepted
$ ./kwb cache show --json dd8d --cache build/test-cache/cli.db | ./kwb tests/cli/json_fields.lua id problem outcome '#lineage' '#results' results.2.shape results.2.timing.median
dd8d64fa15607a918568ccfd13208dc730947c6412d50752eb0a5d8d702f1c8e	axpy	accepted	1	2	1000000	0.0015
$ ./kwb cache --json --cache build/test-cache/cli.db diff dd8d b501 | ./kwb tests/cli/json_fields.lua a b params.UNROLL
dd8d64fa15607a918568ccfd13208dc730947c6412d50752eb0a5d8d702f1c8e	b5013c3146fc16fd082ff29750f983ff52c014f772b6c203d6b5cfbb44dc6e46	[null,4]
$ ./kwb --cache build/test-cache/cli.db cache stats --json | ./kwb tests/cli/json_fields.lua candidates problems path
4	2	build/test-cache/cli.db
$ ./kwb --cache build/test-cache/cli.db cache check --json | ./kwb tests/cli/json_fields.lua ok lost blobs
true	0	5
$ ./kwb cache --json --cache build/test-cache/cli.db ls axpy | ./kwb tests/cli/json_fields.lua id outcome
dd8d64fa15607a918568ccfd13208dc730947c6412d50752eb0a5d8d702f1c8e	accepted
b5013c3146fc16fd082ff29750f983ff52c014f772b6c203d6b5cfbb44dc6e46	accepted
bf611c14e4bce45bed274d74116ea8a4156ad2491602866c3daeb6860d21229c	wrong
$ ./kwb --cache build/test-cache/cli.db cache diff dd8d b501
parameter  dd8d64fa  b5013c31
UNROLL     -         4
--- dd8d64fa
+++ b5013c31
@@ -1,4 +1,11 @@
 void axpy(int n, float a, const float *x, float *y) {
-    for (int i = 0; i < n; i++)
+    int i = 0;
+    for (; i + 4 <= n; i += 4) {
+        y[i] = a * x[i] + y[i];
+        y[i + 1] = a * x[i + 1] + y[i + 1];
+        y[i + 2] = a * x[i + 2] + y[i + 2];
+        y[i + 3] = a * x[i + 3] + y[i + 3];
+    }
+    for (; i < n; i++)
         y[i] = a * x[i] + y[i];
 }
$ ./kwb --cache build/test-cache/cli.db cache diff dd8d bf61
--- dd8d64fa
+++ bf611c14
@@ -1,4 +1,4 @@
-void axpy(int n, float a, const float *x, float *y) {
+void axpy(int n, float a, const float *x, float *restrict y) {
     for (int i = 0; i < n; i++)
         y[i] = a * x[i] + y[i];
 }
$ ./kwb --cache build/test-cache/cli.db cache diff b501 b501
parameters the same: UNROLL=4
source the same
$ ./kwb tests/cli/cache_params.lua build/test-cache/params.db
d021b2f6673d44b5caf9194867c02a17a52e6b700769c4cc1c9ca98ee9a91970
83918a6a3b12da1787ef4039792b8559d238fd5ad8d41f7caba80d0c51d7df24
$ ./kwb --cache build/test-cache/params.db cache diff d021 8391
parameter  d021b2f6  83918a6a
SPLIT      -         2
STEP       1         4
the same: BLOCK=64
source the same
$ ./kwb --cache build/test-cache/params.db cache best scale --shape cols=100,rows=64
device           shape             candidate  median  outcome   measured
host:Test CPU:2  rows=64,cols=100  d021b2f6   1.0 us  accepted  here
$ ./kwb --cache build/test-cache/cli.db cache stats | grep -v '^file'
cache       build/test-cache/cli.db (schema 6)
candidates  4 in 2 problems
builds      1
results     5
runs        0
blobs       5 (3 full, 2 deltas, longest chain 1)
mirrored    1 (bases keep a second copy: 101 bytes)
content     625 bytes raw, 396 bytes stored with the mirrors
ratio       1.6x
$ ./kwb --cache build/test-cache/cli.db cache export build/test-cache/axpy.kwb --problem axpy --outcome accepted
wrote build/test-cache/axpy.kwb: 2 candidates, 1 build, 4 results, 0 runs
# a device is refused, and left as it was: /dev/full, or as root a node of the test's own
# (the same device), so that a kwb that renamed its file over it could not take the machine's
$ dev=/dev/full; if [ "$(id -u)" = 0 ]; then dev=build/test-cache/full; rm -f $dev; mknod $dev c 1 7; fi; ./kwb --cache build/test-cache/cli.db cache export $dev >build/test-cache/out 2>&1; echo "exit $?"; sed "s|$dev|FULL|" build/test-cache/out; stat -c %F $dev
exit 1
kwb cache: cannot write the bundle FULL: it is a character device, not a regular file
character special file
$ ./kwb --cache build/test-cache/cli.db cache export build/test-cache/no/such.kwb; test -e build/test-cache/no || echo "no directory made"
kwb cache: cannot write the bundle build/test-cache/no/such.kwb: the directory build/test-cache/no does not exist (kwb makes no directories for a file)
no directory made
$ ./kwb --cache build/test-cache/cli.db cache export build/test-cache/x.kwb --since 2026-13
kwb cache: --since wants a date YYYY-MM-DD, not '2026-13'
try 'kwb cache --help'
[exit 2]
$ ./kwb --cache build/test-cache/cli.db cache export build/test-cache/x.kwb --outcome great
kwb cache: unknown outcome 'great' (known: no-code, forbidden, compile-error, duplicate, wrong, impossible, crashed, timeout, unsafe, slower, accepted, start)
try 'kwb cache --help'
[exit 2]
$ ./kwb --cache build/test-cache/two.db cache import build/test-cache/axpy.kwb
imported build/test-cache/axpy.kwb: 2 candidates, 1 build, 4 results, 0 runs new (3 blobs)
$ ./kwb --cache build/test-cache/two.db cache import build/test-cache/axpy.kwb
imported build/test-cache/axpy.kwb: 0 candidates, 0 builds, 0 results, 0 runs new (0 blobs)
$ ./kwb --cache build/test-cache/two.db cache ls
id        problem  parent    origin      outcome   score  created
dd8d64fa  axpy     -         seed        accepted      -  2026-12-02 10:00:00
b5013c31  axpy     dd8d64fa  rewrite/m1  accepted      -  2026-12-02 10:01:00
$ ./kwb --cache build/test-cache/two.db cache best axpy --shape 1000
device           shape  candidate  median  outcome   measured
host:Test CPU:2  1000   b5013c31   1.2 us  accepted  bundle axpy.kwb
$ head -c 700 build/test-cache/axpy.kwb >build/test-cache/cut.kwb && ./kwb --cache build/test-cache/three.db cache import build/test-cache/cut.kwb
kwb cache: bundle build/test-cache/cut.kwb is truncated: entry 3 runs past the end of the file
[exit 1]
$ ./kwb --cache build/test-cache/three.db cache stats | grep candidates
candidates  0 in 0 problems
$ cp build/test-cache/axpy.kwb build/test-cache/bad.kwb && printf 'X' | dd of=build/test-cache/bad.kwb bs=1 seek=400 conv=notrunc 2>/dev/null && ./kwb --cache build/test-cache/three.db cache import build/test-cache/bad.kwb
kwb cache: bundle build/test-cache/bad.kwb is corrupt: entry 2 (a candidate record) fails its SHA-256 check
[exit 1]
$ printf 'KWBUNDLE\002\000\000\000\000\000\000\000' >build/test-cache/v2.kwb && ./kwb --cache build/test-cache/three.db cache import build/test-cache/v2.kwb
kwb cache: bundle build/test-cache/v2.kwb has format version 2; this kwb reads version 1
[exit 1]
$ ./kwb --cache build/test-cache/three.db cache import build/test-cache/none.kwb
kwb cache: cannot read the bundle build/test-cache/none.kwb: No such file or directory
[exit 1]
$ ./kwb --cache build/test-cache/three.db cache stats | grep candidates
candidates  0 in 0 problems
$ ./kwb --cache build/test-cache/cli.db -e 'local c = kwb.cache.open(); c:put_blob("unused"); c:close()'
$ ./kwb --cache build/test-cache/cli.db cache gc
removed 1 blob no record needs (19 bytes stored)
$ cp build/test-cache/cli.db build/test-cache/chk.db && ./kwb --cache build/test-cache/chk.db cache check
checked 5 blobs (6 stored frames): all sound
$ ./kwb --cache build/test-cache/chk.db -e 'local c = kwb.cache.open(); local r = c:exec("SELECT id, frame FROM blob WHERE id IN (SELECT id FROM mirror)")[1]; local f = r.frame; local k = #f // 2; c:exec("UPDATE blob SET frame = CAST(?2 AS BLOB) WHERE id = ?1", r.id, f:sub(1, k - 1) .. string.char(f:byte(k) ~ 0xff) .. f:sub(k + 1)); c:close()'
$ ./kwb --cache build/test-cache/chk.db cache check
blob ed750abb5fe9a3fc8efdc24c3c18ebb8bd649020a1875217a79ebde887ba5c34: its frame is corrupt, its mirror is sound: recoverable (--repair)
checked 5 blobs (6 stored frames): no blob lost
$ ./kwb --cache build/test-cache/chk.db cache show b501 | tail -3
      for (; i < n; i++)
          y[i] = a * x[i] + y[i];
  }
$ ./kwb --cache build/test-cache/chk.db cache check --repair
blob ed750abb5fe9a3fc8efdc24c3c18ebb8bd649020a1875217a79ebde887ba5c34: its frame is corrupt, its mirror is sound: repaired
checked 5 blobs (6 stored frames): repaired
$ ./kwb --cache build/test-cache/chk.db cache check
checked 5 blobs (6 stored frames): all sound
$ ./kwb --cache build/test-cache/chk.db -e 'local c = kwb.cache.open(); local r = c:exec("SELECT id, frame FROM blob WHERE base IS NOT NULL AND id NOT IN (SELECT id FROM mirror)")[1]; local f = r.frame; local k = #f // 2; c:exec("UPDATE blob SET frame = CAST(?2 AS BLOB) WHERE id = ?1", r.id, f:sub(1, k - 1) .. string.char(f:byte(k) ~ 0xff) .. f:sub(k + 1)); c:close()'
$ ./kwb --cache build/test-cache/chk.db cache check
blob 906cad73ee1740af334e0734621986557fda3659167dc0edafe1d13f5c4ec92b: its frame is corrupt and it has no mirror: lost
checked 5 blobs (6 stored frames): 1 blob lost
[exit 1]
$ ./kwb --cache build/test-cache/chk.db cache check --fix
kwb cache: unknown option '--fix' (known: --repair)
try 'kwb cache --help'
[exit 2]
$ ./kwb --cache build/test-cache/cli.db cache frobnicate
kwb cache: unknown command 'frobnicate'
try 'kwb cache --help'
[exit 2]
$ ./kwb --cache build/test-cache/cli.db cache
usage: kwb cache COMMAND [args]

What the candidate cache knows. Every command takes --json: its answer as one
JSON object (ls, transcripts and best: one a line). IDs may be shortened to any
unique prefix of at least 4 hex digits. The cache is kwb's --cache PATH (before
or after the command), else $KWB_CACHE, else ~/.cache/kwb/kwb.db; one that does
not exist is an error (only import makes one).

  ls [PROBLEM]                candidates, oldest first
  show ID                     a candidate: origin, lineage, builds, results,
                              source, and the model's prompt and rationale when
                              a reply proposed it; or a run (ID a run's): its
                              recipe, settings, funnel and the certificate of
                              its final round (kernels, ratios with their 95%
                              intervals, device, kwb's commit)
  transcripts [RUN]           the model requests of every run, or of one:
                              tokens, cost, tries, time
  best PROBLEM [--shape S] [--device D]
                              the fastest correct candidate of each device kind
                              and shape (the shape's variables in any order:
                              --shape cols=100,rows=64) measured here, and
                              before it one a bundle brought where that is
                              faster on paper (measured: bundle NAME)
  diff ID1 ID2                the parameters two candidates differ in, and their
                              sources' line diff
  export FILE [--problem P] [--id ID]... [--outcome O] [--since YYYY-MM-DD] [--no-binaries]
                              write matching candidates (with their ancestors,
                              builds, results and runs) to a bundle file for a
                              teammate
  import FILE                 add a bundle's records: all of them, or none if
                              the file is bad or a row makes no sense
  stats                       counts, sizes and the compression ratio
  check [--repair]            decode every stored copy of every blob and check
                              every row for sense; --repair rewrites a corrupt
                              copy from its sound one, removes a result, build
                              or lesson that makes no sense and clears a
                              candidate's or run's fields that make none (exit 1
                              if a blob is lost or a row makes no sense)
  gc                          drop blobs no record needs, then compact the file
[exit 2]
# kwb profile needs a cache that has the candidate, and the recipe that made it
$ ./kwb profile
kwb profile: it takes one candidate ID
usage: kwb profile ID [--shape S] [--recipe FILE] [--csv FILE] [--json]
[exit 2]
$ ./kwb profile dd8d --frobnicate
kwb profile: unknown option '--frobnicate' (known: --csv, --help, --json, --recipe, --shape)
usage: kwb profile ID [--shape S] [--recipe FILE] [--csv FILE] [--json]
[exit 2]
$ ./kwb --cache build/test-cache/none.db profile dd8d; echo "exit $?, cache made: $(test -e build/test-cache/none.db && echo yes || echo no)"
kwb profile: no cache at build/test-cache/none.db (a run makes one; kwb --cache PATH names another)
exit 1, cache made: no
$ ./kwb --cache build/test-cache/cli.db profile ffff
kwb profile: no candidate ffff in the cache build/test-cache/cli.db
[exit 1]
$ ./kwb --cache build/test-cache/cli.db profile dd8d
kwb profile: the cache does not say which recipe made candidate dd8d64fa: name it with --recipe FILE
[exit 1]
$ ./kwb --cache build/test-cache/cli.db profile dd8d --recipe recipes/host_matmul.lua
kwb profile: recipe host_matmul: a profile is ncu's, for the cuda backend
[exit 1]
# every subcommand takes --help: its usage and what it does, exit 0, no cache needed
$ ./kwb --cache build/test-cache/none.db cache check --help
usage: kwb cache check [--repair] [--json]

Decode every stored copy of every blob and check every row for sense; --repair
rewrites a corrupt copy from its sound one, removes a result, build or lesson
that makes no sense and clears a candidate's or run's fields that make none
(exit 1 if a blob is lost or a row makes no sense).
$ ./kwb cache ls -h
usage: kwb cache ls [PROBLEM] [--json]

Candidates, oldest first.
