-- kwb/help/init.lua: the one description of kwb's options, commands, run
-- options, environment, recipe fields and Lua functions (kwb/help/api.lua).
-- Everything that describes them reads it: `kwb --help`, each command's
-- --help, `kwb FILE.lua --help`, the man page's generated sections
-- (tools/man.lua), the shell completions, the recipe checker's field names
-- and help(x) at the REPL (kwb/cli/show.lua).
local M = {}

local strategies = table.concat(require("kwb.strategies").builtin, ", ") .. ", or a .lua file"

-- kwb's own options, before a file or command.
M.options = {
  { "-e CODE", "run CODE (repeatable; no REPL afterwards unless a file follows)" },
  { "--cache PATH", "the candidate cache (default ~/.cache/kwb/kwb.db, or $KWB_CACHE); build products and device "
    .. "locks live beside it. An empty PATH, a directory, or a PATH whose directory does not exist is an error: kwb "
    .. "makes the cache file, not its directory. It may also follow a command or a recipe's file" },
  { "-", "run standard input as the script" },
  { "--version", "print the version" },
  { "--help, -h", "print this help" },
}

-- The commands: words in the first position (a file of the same name is
-- still reachable as ./NAME). usage: the first line of `kwb NAME --help`;
-- text: what it does; options, or subcommands (cache): { words, text }.
M.commands = {
  { name = "demo", module = "kwb.cli.demo", usage = "kwb demo [run options]",
    summary = "run the main demo: the GPU recipe where a CUDA device is present, else the host demo",
    text = "The main demo (make run): recipes/nvfp4_moe.lua where a CUDA device is present, else the research loop "
      .. "on the host, recipes/host_matmul_llm.lua, its model's replies replayed from a transcript when no model is "
      .. "configured (KWB_MODEL, or --model), and saying so. The run options are a recipe's." },
  { name = "cache", module = "kwb.cli.cache", usage = "kwb cache COMMAND [args]",
    summary = "the candidate cache: ls, show, best, diff, export, import, check, stats, gc",
    text = "What the candidate cache knows. Every command takes --json: its answer as one JSON object (ls, "
      .. "transcripts and best: one a line). IDs may be shortened to any unique prefix of at least 4 hex digits. The "
      .. "cache is kwb's --cache PATH (before or after the command), else $KWB_CACHE, else ~/.cache/kwb/kwb.db; one "
      .. "that does not exist is an error (only import makes one).",
    subcommands = {
      { "ls [PROBLEM]", "candidates, oldest first" },
      { "show ID", "a candidate: origin, lineage, builds, results, source, and the model's prompt and rationale when "
        .. "a reply proposed it; or a run (ID a run's): its recipe, settings, funnel and the certificate of its final "
        .. "round (kernels, ratios with their 95% intervals, device, kwb's commit)" },
      { "transcripts [RUN]", "the model requests of every run, or of one: tokens, cost, tries, time" },
      { "best PROBLEM [--shape S] [--device D]", "the fastest correct candidate of each device kind and shape (the "
        .. "shape's variables in any order: --shape cols=100,rows=64) measured here, and before it one a bundle "
        .. "brought where that is faster on paper (measured: bundle NAME)" },
      { "diff ID1 ID2", "the parameters two candidates differ in, and their sources' line diff" },
      { "export FILE [--problem P] [--id ID]... [--outcome O] [--since YYYY-MM-DD] [--no-binaries]",
        "write matching candidates (with their ancestors, builds, results and runs) to a bundle file for a teammate" },
      { "import FILE", "add a bundle's records: all of them, or none if the file is bad or a row makes no sense" },
      { "stats", "counts, sizes and the compression ratio" },
      { "check [--repair]", "decode every stored copy of every blob and check every row for sense; --repair "
        .. "rewrites a corrupt copy from its sound one, removes a result, build or lesson that makes no sense and "
        .. "clears a candidate's or run's fields that make none (exit 1 if a blob is lost or a row makes no sense)" },
      { "gc", "drop blobs no record needs, then compact the file" },
    } },
  { name = "new", module = "kwb.cli.new",
    usage = "kwb new problem NAME [DIR]",
    summary = "write a problem of your own to start from, with a recipe that runs it, into DIR (default NAME)",
    text = "Writes DIR/NAME_problem.lua (kwb.problem.define with every field in use, each said what it is for: "
      .. "y = a * x + b over n f32 elements), DIR/NAME.lua (a recipe that requires it from beside itself), "
      .. "NAME_start.c (its plain start kernel) and NAME_unrolled.c (a template with one parameter). It runs as "
      .. "written (kwb DIR/NAME.lua); edit the arguments, the reference and the tolerance into your problem's. "
      .. "Files already there are kept: nothing is written then.",
    options = {} },
  { name = "import", module = "kwb.cli.import",
    usage = "kwb import kernelbench FILE.py [-o RECIPE.lua] [--backend host|cuda] [--start FILE] [--name NAME] "
      .. "[--fn NAME] [--python PY] [--force]",
    summary = "write a recipe from a PyTorch module in KernelBench's format, with a start kernel verified against it",
    text = "Tries the module in FILE.py (class Model(nn.Module), get_inputs(), get_init_inputs(); or a plain "
      .. "function with --fn) in a reference process of kwb's own (Python with PyTorch: $KWB_PYTHON, else the first "
      .. "of python3 and /usr/bin/python3 that imports torch): its inputs' and outputs' dtypes and shapes, which "
      .. "dimensions may vary (a dimension tied to a weight stays fixed), its weights (drawn from the run's seed, "
      .. "never left constant). Writes a recipe with that spec, the candidate's C/CUDA signature, the shapes to time "
      .. "(the file's example and half of it), tolerances by the outputs' dtypes and a start kernel: a plain one kwb "
      .. "writes, or --start's. The start kernel is verified against the module at every shape before anything is "
      .. "written; files already there are kept unless --force.",
    options = {
      { "-o RECIPE.lua", "where the recipe goes (default: recipes/NAME.lua where recipes/ is a folder here, else NAME.lua)" },
      { "--backend host|cuda", "the backend the recipe runs on (default host)" },
      { "--start FILE", "the start kernel to verify and name, instead of the plain one kwb writes (NAME_start.c or .cu)" },
      { "--name NAME", "the recipe's, problem's and entry point's name (default: the file's stem)" },
      { "--fn NAME", "a plain function of the file as the reference, instead of class Model" },
      { "--python PY", "the interpreter that runs the reference process" },
      { "--force", "write over a recipe or start kernel already there" },
    } },
  { name = "export", module = "kwb.cli.export",
    usage = "kwb export RECIPE.lua DIR [--device KIND] [--fallback NAME] [--torch] [--json]",
    summary = "write a per-shape dispatch of a recipe's best kernels that links: kernels, a C dispatcher, a check program",
    text = "A per-shape dispatch from what the cache knows of the recipe on one device kind: at each timed shape the "
      .. "verified candidate with the lowest median, where it beats the fallback beyond the noise, else the "
      .. "fallback. Writes kernels/ (each chosen source as measured, its parameters as #defines; on the host its entry "
      .. "point renamed RECIPE_ID by a macro, and the Makefile keeps only that name global, so the kernels link "
      .. "into one program; for CUDA each cubin too, built again with NVRTC and refused unless its code is the build "
      .. "kwb measured), dispatch.h (kwb_dispatch_RECIPE(vars) -> a kernel's name, and the dispatcher's prototype), "
      .. "dispatch.c (RECIPE(vars..., args...): the problem's arguments in its order, the kernel chosen by shape "
      .. "and called; for CUDA the cubins embedded, loaded once through the driver API and launched on the caller's "
      .. "stream with the launch geometry of the measured shape, only at measured shapes), dispatch.json (shapes to "
      .. "kernels, with the times measured), a Makefile (`make -C DIR` builds libRECIPE.a, `make -C DIR check` the "
      .. "check program and runs it), README.txt, dispatch_test.c, and where the problem's reference is C, "
      .. "reference.c and dispatch_check.c: each measured shape's inputs from a fixed seed, the dispatcher and the "
      .. "reference run on them, every output compared with the problem's tolerance, a line per shape, exit 1 where "
      .. "one differs (a Lua reference: no check program, and the output says so). Shapes between the measured ones "
      .. "take the recipe's dispatch rule (nearest or larger). DIR is made if missing (its parent must exist); a "
      .. "result a bundle brought counts only once measured here (or with the recipe's trust_imported).",
    options = {
      { "--device KIND", "the device kind whose results count (default: this machine's for the recipe's backend)" },
      { "--fallback NAME", "a library kernel to fall back to instead of the start kernel: the caller's C function of "
        .. "that name with the problem's prototype (for CUDA, then a CUstream, returning CUresult)" },
      { "--torch", "for a PyTorch module's problem (kwb.problems.torch, kwb import): also DIR/torch/, a Python "
        .. "package registering the op torch.ops.kwb_RECIPE.RECIPE (the dispatcher in a library built now, so none "
        .. "is compiled where it is imported; CUDA: launched on the current stream), patch(model) replacing the "
        .. "module's forward, and check.py comparing it with eager (in float64) on fresh inputs at every measured shape" },
      { "--json", "dispatch.json's object and the directory, as one JSON object" },
    } },
  { name = "report", module = "kwb.cli.report", usage = "kwb report RECIPE.lua [DIR] [--device KIND] [--json]",
    summary = "write report.md and report.html of a recipe's runs: convergence, outcomes, speedups, floor, lineage",
    text = "report.md and one self-contained report.html (inline SVG, nothing fetched) in DIR (default .; made if "
      .. "missing, its parent must exist): the best score over candidates and over time, the outcome funnel, per-shape speedup over the "
      .. "start kernel and share of the physical floor, the best's lineage. Where the latest run has a certificate (its final "
      .. "round), the pick, its speed-ups, each shape's winner and faster elsewhere are that round's, each with its 95% "
      .. "interval, and the report says so.",
    options = {
      { "--device KIND", "the device kind whose results count (default: this machine's for the recipe's backend)" },
      { "--json", "the files written, the candidates and the best (and `certified`: the round's run, rounds and "
        .. "interval), as one JSON object" },
    } },
  { name = "lessons", module = "kwb.cli.lessons", usage = "kwb lessons RECIPE.lua [--device KIND] [--json]",
    summary = "the lessons ledger: what earlier runs' summaries taught, as the recipe's prompt shows them",
    text = "The lessons a run whose strategy asks a model kept (every model.lessons_every evaluated candidates, 8 by "
      .. "default, the model summarises the evidence into lessons, each with technique tags and the candidates "
      .. "that show it), on one device kind, the most relevant to the recipe first: its problem's own, newest first, "
      .. "then other problems' that share a tag with the recipe's tags or its problem's lessons. Each line is as the "
      .. "prompt shows it, then the run that made it or the bundle it came in; a lesson over the prompt's byte "
      .. "budget (model.lessons_bytes, 3000 by default) is marked so.",
    options = {
      { "--device KIND", "the device kind whose lessons count (default: this machine's for the recipe's backend)" },
      { "--json", "the problem, the device, the budget and the lessons (each with its tags, candidates, run, "
        .. "origin and in_prompt) as one JSON object" },
    } },
  { name = "profile", module = "kwb.cli.profile", usage = "kwb profile ID [--shape S] [--recipe FILE] [--csv FILE] [--json]",
    summary = "ncu on a cached CUDA candidate: per kernel time, throughputs, occupancy, stalls, and the bottleneck",
    text = "Nsight Compute on one cached candidate at one timed shape (default: where its median is longest), in a "
      .. "worker, clocks as they run and caches flushed before each kernel: per kernel of the plan its duration, "
      .. "DRAM, L2 and SM throughput and tensor-pipe use as % of peak, achieved occupancy, registers, spills and the "
      .. "top stall reasons; the plan's kernel count and the time between its kernels; and a bottleneck class per "
      .. "kernel and for the plan (memory, compute, latency, launch overhead), kept in the cache. The recipe is the "
      .. "one whose run made the candidate, unless --recipe names one (r:profile(id [, shape]) at the REPL).",
    options = {
      { "--shape S", "the timed shape to profile (its variables in any order)" },
      { "--recipe FILE", "the recipe to build and run the candidate with" },
      { "--csv FILE", "also write ncu's own output (its raw page as CSV) to FILE" },
      { "--json", "the profile as one JSON object" },
    } },
  { name = "prompt", module = "kwb.cli.prompt",
    usage = "kwb prompt RECIPE.lua [--parent ID] [--strategy S] [--device KIND] [--json]",
    summary = "print the prompt a run of a recipe would send its model next, with its size; nothing is sent",
    text = "The first prompt the next run of the recipe would send (system and user messages), made by the loop's "
      .. "own functions from what the cache holds of the recipe on a device kind: the start kernel, the best (the "
      .. "parent, its #defines holding the values it was built with), the last attempts and the near misses, the "
      .. "best's profile, the rules of the recipe's backend, the context and the ideas; and how to answer (edits "
      .. "of the parent where it is longer than model.diff_bytes). First a line with its size: the bytes of the "
      .. "two messages' texts (an API request's JSON body is larger) and an estimate of their tokens, bytes / 4, "
      .. "as kwb estimates where a provider reports none. Nothing is sent and nothing is measured but what a run "
      .. "measures before its first prompt (the device's ceilings, for the floors, on this machine's device kind "
      .. "only); a best still due a compute-sanitizer run is not taken (a run sanitizes it first). Notes say what "
      .. "it lacks that a run's prompt would have (the start kernel's times before it is measured, the floors of "
      .. "another device kind). Where the strategy draws its parents from a population (llm and llm+tune unless "
      .. "population = false), the parent and inspirations are the run's first draw, with the recipe's seed.",
    options = {
      { "--parent ID", "the verified result to show as the parent instead of the best (or the population's draw)" },
      { "--strategy S", "llm, llm+tune or agent: the prompt of that strategy (default: the recipe's, where it asks "
        .. "a model)" },
      { "--device KIND", "the device kind whose results count (default: this machine's for the recipe's backend)" },
      { "--json", "the prompt (system, user), its size, the token estimate, the mode, the parent and the notes, as "
        .. "one JSON object" },
    } },
  { name = "verify-pick", module = "kwb.cli.verify",
    usage = "kwb verify-pick RUN [--recipe FILE] [--seconds S] [--json] [--queue URL [--queue-password-file F] "
      .. "[--fleet-key-file F] [--device KIND]]",
    summary = "repeat a run's final round on this machine and say, ratio by ratio, whether it agrees with the certificate",
    text = "The certificate a run kept of its final round (kwb cache show RUN) timed again here: the same kernels, "
      .. "built from the cache, in turns at every shape until every comparison is decided or the bound is reached. "
      .. "Each ratio (each kernel's speed-up over the start kernel at each shape and its score, each kernel against "
      .. "the pick, the pick against the baseline) agrees where its new 95% interval overlaps the certificate's and "
      .. "is at most twice as wide (or twice the round's target), is too wide to tell where it overlaps but is "
      .. "wider, and disagrees where they are apart; exit 1 unless every ratio agrees, or if this machine is not of "
      .. "the certificate's device kind. The recipe is the "
      .. "run's, unless --recipe names one (a run a bundle brought needs it). Measured on this machine's workers, "
      .. "or with --queue by a fleet's worker of the certificate's device kind (--device names another kind, which "
      .. "the device check then refuses).",
    options = {
      { "--recipe FILE", "the recipe to build and time the kernels with" },
      { "--seconds S", "the round's bound (default: the certificate's)" },
      { "--json", "the certificate, the new round's and each ratio's agreement, as one JSON object" },
      { "--queue URL", "time the round on a fleet (kwb fleet): a worker of the certificate's device kind" },
      { "--queue-password-file F", "with --queue: the queue's password, the first line of F" },
      { "--fleet-key-file F", "with --queue: the fleet's key, the first line of F (default $KWB_FLEET_KEY)" },
      { "--device KIND", "with --queue: the device kind to ask for (default: the certificate's)" },
    } },
  { name = "doctor", module = "kwb.cli.doctor", usage = "kwb doctor [--no-measure] [--own-gemm] [--json]",
    summary = "report the GPU, driver, CUDA, NVRTC and tools, and measure the device's ceilings",
    text = "The GPU, driver, CUDA, NVRTC and tools this kwb finds, and the device's ceilings (copy bandwidth, FMA "
      .. "and bf16 rates) measured and stored for its kind.",
    options = {
      { "--no-measure", "report only, measure nothing" },
      { "--own-gemm", "measure the bf16 rate with kwb's own kernel, not cuBLAS" },
      { "--json", "the findings as one JSON object" },
    } },
  { name = "worker", module = "kwb.worker.queue",
    usage = "kwb worker --queue URL [--queue-password-file F] [--worker-key-file F] [--backend host|cuda] [--gpu N] "
      .. "[--recipes DIR] [--tasks N]",
    summary = "a fleet's worker: evaluate the candidates a queue holds for this host's device",
    text = "With --queue, a worker of a fleet: it announces its device kind on the queue (Redis Streams), takes the "
      .. "candidates that runs with --queue send for that kind, one at a time, evaluates each in its usual worker "
      .. "process and sandbox, and answers on the run's result stream, signed with its own key; one per GPU. It runs "
      .. "evaluations only, of recipes it has itself: a task names its recipe by path and SHA-256, found under "
      .. "--recipes; a task it refuses goes back to the run for another worker. The URL is "
      .. "redis://[USER@]HOST:PORT/NAME (rediss:// for TLS, ?ca=FILE to trust a CA); the password comes from "
      .. "$KWB_QUEUE_PASSWORD or --queue-password-file, never the URL (arguments show in the process list). Its key, "
      .. "NAME:KEY as `kwb fleet --worker-key NAME` prints it where the fleet's key is, comes from $KWB_WORKER_KEY or "
      .. "--worker-key-file. Without --queue it is the process a local pool starts, reading fd 3.",
    options = {
      { "--queue URL", "the fleet's queue" },
      { "--queue-password-file F", "the queue's password: the first line of F (default $KWB_QUEUE_PASSWORD)" },
      { "--worker-key-file F", "this worker's NAME:KEY: the first line of F (default $KWB_WORKER_KEY)" },
      { "--backend B", "host or cuda (default: cuda where the driver sees a GPU)" },
      { "--gpu N", "the GPU this worker measures on (default 0)" },
      { "--recipes DIR", "where the recipes named by tasks are (default: the working directory)" },
      { "--tasks N", "stop after N tasks (default: serve until stopped)" },
    } },
  { name = "fleet", module = "kwb.cli.fleet",
    usage = "kwb fleet URL [--json] [--queue-password-file F] | kwb fleet --worker-key NAME [--fleet-key-file F]",
    summary = "a queue's fleet: its workers, their devices, the tasks waiting and in flight, the throughput",
    text = "What a queue (kwb worker --queue) holds: each live worker (host, backend, device kind, busy or idle, "
      .. "tasks done, seconds since its last heartbeat), per device kind the tasks waiting and in flight, and the "
      .. "tasks finished in the last minute. With --worker-key NAME: the key of the worker called NAME, derived from "
      .. "the fleet's key ($KWB_FLEET_KEY or --fleet-key-file; make it with `openssl rand -hex 32` and give it to the "
      .. "runs alone), printed as NAME:KEY for that worker's $KWB_WORKER_KEY or --worker-key-file.",
    options = {
      { "--json", "the fleet as one JSON object" },
      { "--queue-password-file F", "the queue's password: the first line of F (default $KWB_QUEUE_PASSWORD)" },
      { "--worker-key NAME", "print the key of the worker called NAME" },
      { "--fleet-key-file F", "with --worker-key: the fleet's key, the first line of F (default $KWB_FLEET_KEY)" },
    } },
}

-- The words after a recipe's file (`kwb recipes/x.lua --budget=50`); the
-- parser is kwb.cli.parse_run_options.
M.run_options = {
  { "--json", "one JSON object per line on stdout, the last the summary, or {\"event\":\"error\"} when the run fails" },
  { "--plain", "plain progress lines even on a terminal" },
  { "--quiet", "only the summary" },
  { "--budget N", "evaluate at most N candidates" },
  { "--minutes M", "stop after M minutes" },
  { "--strategy S", strategies },
  { "--model P:NAME", "the model for this run in place of the recipe's: openai:NAME, anthropic:NAME, replay:FILE or "
    .. "command:'PROGRAM ARGS', with the provider's URL and key variable (of the recipe's model only context_bytes, "
    .. "profile, diff_bytes, lessons_every and lessons_bytes stay)" },
  { "--seed N", "the run's seed (inputs and proposals)" },
  { "--workers N", "evaluate in N worker processes (default: 1 on the host, one per GPU)" },
  { "--ahead N", "build up to N candidates ahead while one is measured, for a strategy whose proposals never depend on results (grid; default 4, 0: none; cuda)" },
  { "--queue URL", "evaluate on a fleet's workers through Redis Streams (redis://[USER@]HOST:PORT/NAME, "
    .. "rediss:// for TLS; see kwb worker and kwb fleet); the password from $KWB_QUEUE_PASSWORD or "
    .. "--queue-password-file, the fleet's key from $KWB_FLEET_KEY or --fleet-key-file" },
  { "--queue-password-file F", "with --queue: the queue's password, the first line of F" },
  { "--fleet-key-file F", "with --queue: the fleet's key (its workers' keys derive from it), the first line of F" },
  { "--device KIND", "with --queue: the device kind to measure on, where the fleet has several (a part of its name)" },
  { "--certify S", "bound the final round to S seconds (default 3 on the host, 20 on CUDA; 0: no final round): the "
    .. "start kernel, the run's best and each shape's winner timed in turns until every comparison is decided, "
    .. "which names the pick and the winners with each ratio's 95% interval" },
  { "--retime ID", "evaluate the cached candidate ID again (earlier measurements are kept)" },
  { "--cache PATH", "the candidate cache (as kwb --cache PATH)" },
  { "--help, -h", "print these" },
}

M.env = {
  { "KWB_CACHE", "the candidate cache's path (--cache wins)" },
  { "XDG_CACHE_HOME", "where the default cache goes: $XDG_CACHE_HOME/kwb/kwb.db (else ~/.cache/kwb/kwb.db)" },
  { "KWB_LUA_PATH", "directories searched before the bundled kwb modules (KWB_LUA_PATH=lua loads them from the "
    .. "source tree)" },
  { "KWB_MODEL", "the model name kwb.model.from_env() returns, nil when unset: a recipe that calls it takes that model "
    .. "(recipes/host_matmul_llm.lua does, so kwb demo on the host, which says which model it uses; it replays its "
    .. "transcript without one); other recipes, and runs given --model, do not read it" },
  { "KWB_PROVIDER", "with KWB_MODEL: the provider kwb.model.from_env() names (default openai)" },
  { "KWB_BASE_URL", "with KWB_MODEL: the server's base URL kwb.model.from_env() names (default: the provider's)" },
  { "KWB_KEY_ENV", "with KWB_MODEL: the variable holding the key (default OPENAI_API_KEY or ANTHROPIC_API_KEY; none "
    .. "with KWB_BASE_URL)" },
  { "KWB_HISTORY", "the REPL's history file (default ~/.kwb_history)" },
  { "CUDA_HOME", "the CUDA toolkit: NVRTC, nvcc, headers, compute-sanitizer (default /usr/local/cuda)" },
  { "KWB_NVRTC", "the NVRTC library to load, exactly (default: found under CUDA_HOME)" },
  { "KWB_NCU", "the Nsight Compute command kwb profile runs, exactly (default: CUDA_HOME/bin/ncu, else ncu on PATH)" },
  { "KWB_QUEUE_PASSWORD", "a queue's password (kwb worker, kwb fleet, --queue), where no --queue-password-file "
    .. "names one; never in the URL" },
  { "KWB_FLEET_KEY", "a fleet's key, held by the runs alone (--queue, kwb fleet --worker-key), where no "
    .. "--fleet-key-file names one" },
  { "KWB_WORKER_KEY", "a fleet worker's NAME:KEY (kwb worker --queue), where no --worker-key-file names one" },
  { "KWB_CUDA_DRIVER", "the CUDA driver library to load (default libcuda.so.1 on the loader path)" },
  { "KWB_TRACE", "when set, every step a worker's task names (the build, each shape's runs and timing, a pool "
    .. "set's reference) and its end, with the seconds since the task began, on stderr" },
}

M.exit_status = "0 success, 1 a Lua or run error (the message, with file:line, on stderr), 2 a usage error"

-- The fields of kwb.recipe { ... }, in the order the checker lists them
-- (kwb.recipe takes its field names from here).
M.recipe_fields = {
  { "name", "the recipe's name: letters, digits, '_', '.' or '-' (required)" },
  { "description", "a sentence on what the recipe is for" },
  { "problem", "the problem: kwb.problem.define { ... }, a kwb.problems module, or a problem's name (required)" },
  { "shapes", "the timed shapes: { n = { 64, 128 } } (the product of the lists) or a list of shapes (required)" },
  { "start", "the start kernel every score is relative to: a file path or { file = | source =, defines =, name = } "
    .. "(required)" },
  { "baseline", "what a user would otherwise run, timed in the same run with the same timer (in turns beside its first "
    .. "timed candidate) and shown beside the "
    .. "speed-ups (\"vs baseline\": its median over the kernel's); never a candidate: a name of the problem's "
    .. "baselines (\"cublas\") or { file = | source =, defines =, fn = } (fn: its entry point)" },
  { "template", "a source file whose parameters the strategies fill in as #defines" },
  { "space", "the template's parameters: { NAME = { values... }, restrict = function(params) -> boolean, start = "
    .. "{ a point } }" },
  { "strategy", "what proposes candidates: " .. strategies .. ", a table { propose =, observe = }, { \"llm+tune\", "
    .. "sweep = 8 } (a builtin with options; llm and llm+tune take population = { islands = 2, exchange = 4, "
    .. "best = 0.5, inspirations = 2, margin = 0.05 }, the parents drawn from verified kernels by behaviour, or "
    .. "false for the best as every parent) or a list of them taken in turn (default random with a space)" },
  { "model", "the model the llm, llm+tune and agent strategies ask: { provider =, model =, base_url =, key_env =, "
    .. "temperature =, max_tokens =, price =, fallback =, profile = true (CUDA: each new best profiled with ncu, "
    .. "its bottleneck in the prompt), diff_bytes = 8192 (a parent longer than this is to be changed by edits, "
    .. "SEARCH/REPLACE blocks or a unified diff, not written again whole), lessons_every = 8 (evaluated candidates "
    .. "between the lessons ledger's summaries; 0: none), lessons_bytes = 3000 (the lessons a prompt holds), ... }, "
    .. "or a list of them { { ... }, { ... }, profile =, ... }: a seeded bandit chooses one per request on accepted "
    .. "proposals per cost" },
  { "context", "files the model reads (hwdocs/, modeldocs/), relative to the recipe's file" },
  { "ideas", "sentences for the model's prompt: the ideas a human brings" },
  { "tags", "technique words of the recipe's problem (lowercase: \"loop-order\", \"tiling\"): the lessons other "
    .. "problems learnt on this device kind that share one go into its prompt (besides those sharing a tag with its "
    .. "own problem's lessons)" },
  { "forbid", "the rules candidates must keep: \"default\", rule names, \"-name\" to drop one, or { name =, words = } "
    .. "(default { \"default\" })" },
  { "accept", "function(candidate, best) -> boolean: the accept rule (default: faster beyond the noise)" },
  { "score", "function(candidate) -> number: the score (default: the geometric mean speedup over the start kernel)" },
  { "budget", "{ candidates = 100, minutes = 10, timeout = 10 (s a call), cost = (model money), source_bytes = 4194304 "
    .. "(a candidate's source and defines at most; up to 16 MiB) }" },
  { "seed", "the run's seed (an integer; default the time)" },
  { "flags", "compiler flags (default { \"-O2\" } on the host)" },
  { "cc", "the host C compiler (default $CC, else cc)" },
  { "timing", "{ warmup = 0.02, warmup_min, min_samples = 5, max_samples, cap = 0.25, target = 0.01, min_sample, "
    .. "verify_runs }: how each shape is timed" },
  { "dispatch", "\"nearest\" (default) or \"larger\": the measured shape kwb export picks for one between" },
  { "race", "how much slower than the best a first look may be before its timing stops (default 0.10; false: "
    .. "no racing)" },
  { "trust_imported", "true: results a bundle brought (kwb cache import) count as measured here: raced against, "
    .. "judged against, a best, exported (default false: each is measured here first where a run proposes it)" },
  { "ceilings", "{ bandwidth =, flops = }: limits (bytes/s, FLOP/s) the floor takes where they are above the "
    .. "measured ones" },
  { "backend", "\"host\" (default) or \"cuda\"" },
  { "launch", "function(shape, params) -> { grid =, block =, smem = } or { steps = { ... }, scratch = { ... } } "
    .. "(CUDA)" },
  { "arch", "the CUDA architecture to build for, like \"sm_90\" (default: the device's)" },
  { "prompt", "function(parts, info) -> the model's user message, or { system =, user = }" },
  { "verify_shapes", "shapes verified but never timed (default: derived unannounced ones; false: none)" },
  { "allow", "more symbols a host kernel may call" },
  { "sanitize", "\"best\" (CUDA's default: compute-sanitizer on each new best; with grid or list, on the run's "
                .. "best at its end), \"all\" or false" },
}

-- ---- rendering ------------------------------------------------------------

-- wrap(text, width, indent) -> lines of at most width columns
function M.wrap(text, width, indent)
  local lines, cur = {}, nil
  for word in text:gmatch("%S+") do
    if cur and #cur + 1 + #word > width then lines[#lines + 1] = cur; cur = nil end
    cur = cur and (cur .. " " .. word) or (indent .. word)
  end
  lines[#lines + 1] = cur or indent
  return lines
end

-- A list of { words, text } as `  words   text`, wrapped at 80 columns.
local function list(out, items, col)
  for _, it in ipairs(items) do
    local body = M.wrap(it[2], 80, string.rep(" ", col))
    local head = "  " .. it[1]
    if #head + 1 < col then body[1] = head .. body[1]:sub(#head + 1)
    else table.insert(body, 1, head) end
    for _, l in ipairs(body) do out[#out + 1] = l end
  end
end

function M.command(name)
  for _, c in ipairs(M.commands) do if c.name == name then return c end end
end

-- The text of `kwb NAME --help`.
function M.command_help(name)
  local c = assert(M.command(name), name)
  local out = { "usage: " .. c.usage, "" }
  for _, l in ipairs(M.wrap(c.text, 80, "")) do out[#out + 1] = l end
  if c.subcommands then out[#out + 1] = ""; list(out, c.subcommands, 30) end
  if c.options then out[#out + 1] = ""; list(out, c.options, 20) end
  return table.concat(out, "\n") .. "\n"
end

-- The text of `kwb FILE.lua --help`.
function M.run_help(recipe)
  local out = { string.format("usage: kwb %s [run options]", recipe.file or recipe.name), "",
                string.format("Runs the research loop on recipe %s (%s, %d shapes). Run options "
                              .. "(--opt=value works too):",
                              recipe.name, recipe.problem:key(), #recipe.shapes) }
  list(out, M.run_options, 18)
  return table.concat(out, "\n") .. "\n"
end

-- The text of `kwb --help`.
function M.main_help()
  local out = { "usage: kwb [options] [FILE.lua | - | COMMAND] [args...]", "",
                "Runs FILE.lua with the kwb API loaded; the words after it reach the script",
                "as `arg` and `...`. With no file kwb starts the REPL on a terminal, or runs",
                "stdin as a script otherwise.", "",
                "options:" }
  list(out, M.options, 18)
  out[#out + 1] = ""
  out[#out + 1] = "commands (each takes --help):"
  local cs = {}
  for i, c in ipairs(M.commands) do cs[i] = { c.name, c.summary } end
  list(out, cs, 18)
  out[#out + 1] = ""
  out[#out + 1] = "A FILE.lua that returns a recipe (kwb.recipe { ... }) runs the research loop;"
  out[#out + 1] = "the words after it are run options:"
  list(out, M.run_options, 18)
  out[#out + 1] = ""
  out[#out + 1] = "environment:"
  list(out, M.env, 20)
  out[#out + 1] = ""
  for _, l in ipairs(M.wrap("exit status: " .. M.exit_status, 80, "")) do out[#out + 1] = l end
  out[#out + 1] = ""
  out[#out + 1] = "At the REPL, help() says what help(x) knows: kwb's functions, recipe fields, commands."
  return table.concat(out, "\n") .. "\n"
end

-- words(where) -> what a shell completes there: "" (the first word: commands
-- and kwb's options), a command's name (its subcommands or options), "run"
-- (after a recipe's file).
function M.words(where)
  local out = {}
  local function flags(items)
    for _, it in ipairs(items) do
      for w in it[1]:gmatch("[^,%s]+") do if w:match("^%-") then out[#out + 1] = w end end
    end
  end
  if where == "" then
    for _, c in ipairs(M.commands) do out[#out + 1] = c.name end
    flags(M.options)
  elseif where == "run" then
    flags(M.run_options)
  else
    local c = M.command(where)
    if c and c.subcommands then for _, s in ipairs(c.subcommands) do out[#out + 1] = s[1]:match("^%S+") end end
    if c and c.options then flags(c.options) end
    if c then out[#out + 1] = "--help" end
  end
  return out
end

return M
