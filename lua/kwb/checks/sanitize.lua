-- kwb/checks/sanitize.lua: compute-sanitizer on a CUDA candidate about to become the
-- best (the recipe's sanitize = "best") or on every verified one (sanitize =
-- "all"; the default is false). memcheck, racecheck and initcheck each run
-- this program once, all three at once: memcheck and initcheck at the timed
-- shape with the smallest buffers (M.shape), racecheck there too unless its
-- work is too much for it (M.race_shape), each with fresh inputs: the
-- candidate built as the loop builds it and called once (memcheck and
-- racecheck look at its own kernels alone). A finding makes the candidate
-- "unsafe", with the tool's first report: a shared-memory race that happens
-- to pass the value checks, a read past a buffer that lands in mapped memory,
-- a read of memory no one wrote.
local core = require "kwb.core"

local M = {}

M.tools = { "memcheck", "racecheck", "initcheck" }
-- The module whose sanitize_job(path) each tool's run calls, in a process
-- of its own (a worker's module: this process never loads it).
M.job_module = "kwb.worker.task"
-- How long one tool's run may take (seconds of wall time).
M.limit = 300
-- The exit status a tool's run ends with when it found something.
M.found = 86
-- The status of a run killed by SIGKILL (128 + 9, core.exec's).
M.killed = 137
-- The status a tool's job ends with when it could not run for a reason not
-- of the candidate's making (kwb.worker.task.sanitize_job: the recipe or
-- the build not loading, buffers not allocated, the device lost), with a
-- line "kwb-sanitize-harness <why>" on stderr: never a finding.
M.harness = 87

-- not_the_candidates(message) -> does a failed call's message say the
-- harness lacked something (memory, a device) rather than the candidate's
-- code failing? The tools' own allocations share the card with the job's.
local harness_errors = { "CUDA_ERROR_OUT_OF_MEMORY", "cannot allocate", "CUDA_ERROR_NO_DEVICE",
                         "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA_ERROR_NOT_INITIALIZED", "CUDA_ERROR_DEINITIALIZED",
                         "CUDA_ERROR_SYSTEM_NOT_READY", "CUDA_ERROR_DEVICE_NOT_LICENSED" }
function M.not_the_candidates(msg)
  msg = tostring(msg)
  for _, e in ipairs(harness_errors) do
    if msg:find(e, 1, true) then return true end
  end
  return false
end

-- harness_failure(r) -> why a tool's run could not run (nil: it ran): the
-- job's own word (M.harness), or the tool saying it ran out of memory or
-- failed inside itself, where it reported no finding.
function M.harness_failure(r)
  if r.timed_out or r.status == 0 or r.status == M.found or r.status == M.killed then return nil end
  local why = r.err:match("kwb%-sanitize%-harness ([^\n]*)")
  if r.status == M.harness and why then return why end
  for l in (r.out .. "\n" .. r.err):gmatch("[^\n]+") do
    local body = l:match("^=========%s*(.*)$")
    if body and (body:find("Internal Sanitizer Error", 1, true) or body:lower():find("out of memory", 1, true)) then
      return body
    end
  end
  return nil
end

-- bench_bytes(recipe, sh) -> the device bytes one tool's job allocates at
-- shape sh: every buffer of the problem and the reference's copies of the
-- outputs (kwb.measure.inputs.bench).
local dtype_bytes = { f64 = 8, i64 = 8, u64 = 8, f32 = 4, i32 = 4, u32 = 4, f16 = 2, bf16 = 2, i8 = 1, u8 = 1 }
function M.bench_bytes(recipe, sh)
  local n = 0
  for _, a in ipairs(recipe.problem.buffers) do
    local bytes = a.size(sh.shape) * dtype_bytes[a.dtype]
    n = n + bytes * (a.role == "in" and 1 or a.role == "inout" and 3 or 2)
  end
  return n
end

-- What a tool's run takes on the device beyond its job's buffers, as a
-- multiple of them (initcheck keeps a shadow of every byte's state; the
-- tools' own reservations).
M.overhead = 1.0

-- at_once(need, free, n) -> how many of n tools may run at once with free
-- bytes on the device (nil: unknown, all of them), each needing its job's
-- bench (need bytes) and M.overhead of it again; at least one.
function M.at_once(need, free, n)
  if not free then return n end
  return math.max(1, math.min(n, free // math.max(1, math.ceil(need * (1 + M.overhead)))))
end

-- The timed shape whose buffers hold the fewest elements: where memcheck and
-- initcheck run.
function M.shape(recipe)
  local best, least
  for _, sh in ipairs(recipe.shapes) do
    local n = 0
    for _, a in ipairs(recipe.problem.buffers) do n = n + a.size(sh.shape) end
    if not least or n < least then best, least = sh, n end
  end
  return best
end

-- The most work racecheck's run is given: past either, its shape is scaled
-- down. racecheck watches every shared-memory access, and a tool's run past
-- M.limit makes the candidate unsafe: a tiled SGEMM at 4096^3 has 500 times
-- the work of one at 513^3 (a kt_matmul run sanitizing at 4096^3 had not
-- ended after 280 s: docs/perf.md).
M.max_flops = 1 << 30
M.max_bytes = 64 << 20

local function too_big(p, s)
  local f, b = p:flops_of(s), p:bytes_of(s)
  return (f ~= nil and f > M.max_flops) or (b ~= nil and b > M.max_bytes)
end

-- race_shape(recipe) -> { shape =, key = }: where racecheck runs: M.shape's,
-- or where its flops or bytes pass M.max_flops or M.max_bytes, that shape
-- with the problem's varied variables (kwb.measure.unannounced) halved until they do
-- not, then each one more, so the kernel meets a ragged edge there too (M = N
-- = K = 4096 becomes 513). A recipe verifies every candidate at a scaled
-- shape as at its unannounced ones (kwb.recipe), so a kernel that does
-- nothing there is wrong rather than clean.
function M.race_shape(recipe)
  local best, p = M.shape(recipe), recipe.problem
  if not too_big(p, best.shape) then return best end
  local vary, s = require("kwb.measure.unannounced").vary(p), {}
  for k, v in pairs(best.shape) do s[k] = v end
  while too_big(p, s) do
    local changed = false
    for _, v in ipairs(vary) do
      local half = (s[v] + 1) // 2
      if half < s[v] and half >= math.max(1, p.var_min[v]) then s[v], changed = half, true end
    end
    if not changed then break end
  end
  local scaled = false
  for _, v in ipairs(vary) do
    if s[v] ~= best.shape[v] then s[v], scaled = s[v] + 1, true end
  end
  if not scaled or not p:check_shape(s) then return best end
  return { shape = s, key = p:shape_key(s) }
end

-- verify_race_shape(recipe): racecheck's shape, where race_shape scales it
-- down from a timed one, added to the recipe's verify_shapes (also where the
-- recipe gave none): verified like an unannounced shape, so a kernel that
-- does nothing there is wrong, not clean under the tool.
function M.verify_race_shape(r)
  local rs, seen = M.race_shape(r), false
  for _, sh in ipairs(r.shapes) do seen = seen or sh.key == rs.key end
  for _, sh in ipairs(r.verify_shapes) do seen = seen or sh.key == rs.key end
  if not seen then r.verify_shapes[#r.verify_shapes + 1] = rs end
end

-- The kernels of the candidate's launch plan at a shape: the steps' names,
-- or the problem's entry point.
function M.kernels(recipe, cand, sh)
  local launch = recipe.launch or recipe.problem.launch
  local l = launch and launch(sh.shape, cand.params or {})
  local names = {}
  if type(l) == "table" and type(l.steps) == "table" then
    for _, st in ipairs(l.steps) do names[#names + 1] = st[1] end
  else
    names[1] = recipe.problem:prototype():match("([%w_]+)%s*%(")
  end
  return names
end

-- dynamic_smem(recipe, cand, sh) -> does the candidate's launch plan at sh
-- ask for dynamic shared memory (any step's smem above 0)?
function M.dynamic_smem(recipe, cand, sh)
  local launch = recipe.launch or recipe.problem.launch
  local l = launch and launch(sh.shape, cand.params or {})
  if type(l) ~= "table" then return false end
  for _, st in ipairs(type(l.steps) == "table" and l.steps or { l }) do
    if type(st.smem) == "number" and st.smem > 0 then return true end
  end
  return false
end

-- ptx_of(recipe, cand) -> the PTX of the candidate's module as the loop
-- builds it (found in the build directory: it was measured), or nil where
-- there is none to read (a build that fails here).
function M.ptx_of(recipe, cand)
  local ok, mod = pcall(require("kwb.measure.backends").load("cuda").compile, cand, recipe)
  if not ok or type(mod) ~= "table" or type(mod.ptx) ~= "function" then return nil end
  local ptx = mod:ptx()
  return type(ptx) == "string" and ptx ~= "" and ptx or nil
end

-- tools_for(ptx, dynamic_smem) -> the tools to run, and the ones left out
-- with why: racecheck looks for hazards in shared memory alone, and a module
-- whose PTX names no shared state space anywhere (no .shared variable, load,
-- store, atomic, copy, address conversion or query) and whose launches ask
-- for no dynamic shared memory has no shared memory to race on. Without the
-- PTX, every tool.
function M.tools_for(ptx, dynamic_smem)
  if type(ptx) ~= "string" or ptx == "" or dynamic_smem or ptx:find(".shared", 1, true) then return M.tools, {} end
  local list = {}
  for _, tool in ipairs(M.tools) do
    if tool ~= "racecheck" then list[#list + 1] = tool end
  end
  return list, { racecheck = "no shared memory: none in the PTX, none asked for at launch" }
end

-- path() -> compute-sanitizer's path, or nil.
function M.path()
  local home = core.cuda_home()
  if home and core.executable(home .. "/bin/compute-sanitizer") then return home .. "/bin/compute-sanitizer" end
  return require("kwb.base.files").which("compute-sanitizer")
end

-- The tool's first report: its lines from the first error line on, up to
-- the next blank report line (at most 6).
function M.first_report(text)
  local lines, on = {}, false
  for l in text:gmatch("[^\n]+") do
    local body = l:match("^=========%s?(.*)$")
    if body then
      if not on and body ~= "" and not body:match("^COMPUTE%-SANITIZER") and not body:match("^ERROR SUMMARY") then
        on = true
      end
      if on then
        if body:match("^%s*$") or body:match("^ERROR SUMMARY") or #lines == 6 then break end
        lines[#lines + 1] = body:gsub("^%s+", "")
      end
    end
  end
  return table.concat(lines, " | ")
end

local jobs = 0

-- job(recipe, args [, sh]) -> the job file's path, the shape (sh, else
-- M.shape's): what each tool's run reads (in TMPDIR: a worker's own scratch,
-- where all else is read-only to it). kwb.checks.profile runs the same job.
function M.job(recipe, args, sh)
  sh = sh or M.shape(recipe)
  jobs = jobs + 1
  local job = string.format("%s/kwb-sanitize-%d-%d.json", os.getenv("TMPDIR") or "/tmp", math.floor(core.now() * 1e6), jobs)
  local f = assert(io.open(job, "w"))
  f:write(require("kwb.base.channel").json.encode { recipe = args.recipe, cand = args.cand, shape = sh.key, vars = sh.shape,
                                              seed = args.seed })
  f:close()
  return job, sh
end

-- argv(tool_path, tool, kernels, job) -> the command line of one tool's run
-- (tool_path nil: the job alone, without a tool).
function M.argv(tool_path, tool, kernels, job)
  local argv = {}
  if tool_path then
    -- (kwb's own API calls are not the candidate's: only its kernels are reported)
    argv = { tool_path, "--tool", tool, "--error-exitcode", tostring(M.found), "--print-limit", "1",
             "--report-api-errors", "no" }
    -- memcheck and racecheck look at the candidate's kernels alone; initcheck
    -- at every kernel, or the inputs kwb's own kernels fill would look unwritten
    for _, k in ipairs(tool ~= "initcheck" and kernels or {}) do
      argv[#argv + 1] = "--kernel-name"
      argv[#argv + 1] = "kns=" .. k
    end
    -- (racecheck reports in its default mode, "analysis": one report per race
    -- with its count of hazards; "hazard" mode sends every hazard to the host,
    -- and a race in every block of a 10^6-element launch ran past 45 s where
    -- "analysis" took 6.5: docs/gpu-runs/2026-12-04-racecheck-probe.log)
  end
  argv[#argv + 1] = assert(core.self_exe())
  argv[#argv + 1] = "-e"
  argv[#argv + 1] = string.format("require(%q).sanitize_job(%q)", M.job_module, job)
  return argv
end

-- stages(err) -> the job's own split of its time ("load=s build=s ..."), from its stderr.
function M.stages(err) return err and err:match("kwb%-sanitize%-stages ([^\n]*)") end

-- check(recipe, args [, opts]) -> { seconds = { [tool] = s }, stages = {
-- [tool] = "load=s build=s bench=s inputs=s call=s", the job's own split } }
-- when every tool is clean, or with tool =, report =, shape =, log = the
-- tool's output (its first 16 KB): the first finding in the tools' order. A
-- tool's run past M.limit is a finding (a candidate the tools could not
-- finish checking is not made the best), and so is the candidate's call
-- failing under the tool. What is not the candidate's doing never is
-- (INTEGRITY.md property 9): a run killed from outside (SIGKILL with no
-- timeout) runs once more, and a second such end is { outside = why }; a
-- run that could not run (M.harness_failure: no memory for the job's buffers
-- or the tool's, the device lost) runs again alone, after the others, and,
-- where opts.release frees this process's own device memory, once more
-- after it; a last such end is { harness = why }.
-- The tools run at once where the device's free memory (opts.free, bytes)
-- holds a job's buffers and the tool's overhead for each (M.at_once), else
-- as many at a time as it holds. The candidate's PTX (opts.ptx, else
-- ptx_of's) may leave racecheck out (tools_for; `skipped` says so).
-- args = { recipe = its absolute file, cand = { source, name, defines,
-- params }, seed = "decimal" }. Raises when the tool cannot be started.
function M.check(recipe, args, opts)
  opts = opts or {}
  if not args.recipe then
    error(string.format("recipe %s: the sanitizers run the recipe from its file, and this one has none (give it a "
                        .. "file, or set sanitize = false)", recipe.name), 0)
  end
  local tool_path = M.path()
  if not tool_path then
    error("compute-sanitizer is not installed (looked in CUDA_HOME/bin and on PATH); a recipe runs without it "
          .. "with sanitize = false", 0)
  end
  local job, sh = M.job(recipe, args)
  local race_sh = M.race_shape(recipe)
  local race_job = race_sh.key ~= sh.key and M.job(recipe, args, race_sh) or job
  local ptx = opts.ptx or M.ptx_of(recipe, args.cand)
  local tools, skipped = M.tools_for(ptx, M.dynamic_smem(recipe, args.cand, sh)
                                          or M.dynamic_smem(recipe, args.cand, race_sh))
  local function at(tool) return tool == "racecheck" and race_sh or sh end
  local argvs = {}
  for i, tool in ipairs(tools) do
    argvs[i] = M.argv(tool_path, tool, M.kernels(recipe, args.cand, at(tool)), tool == "racecheck" and race_job or job)
  end
  -- runs(list) -> each listed tool's run, as many at once as the memory holds
  local need = math.max(M.bench_bytes(recipe, sh), M.bench_bytes(recipe, race_sh))
  local function runs(list, width)
    local rs = {}
    for first = 1, #list, width do
      local batch = {}
      for j = first, math.min(#list, first + width - 1) do batch[#batch + 1] = argvs[list[j]] end
      local got, msg = core.exec_all(batch, { timeout = M.limit, cap = 1 << 20 })
      if not got then
        os.remove(job); os.remove(race_job)
        error(string.format("compute-sanitizer at %s did not start: %s", sh.key, tostring(msg)), 0)
      end
      for j, r in ipairs(got) do rs[list[first + j - 1]] = r end
    end
    return rs
  end
  local all = {}
  for i in ipairs(tools) do all[i] = i end
  local width = M.at_once(need, opts.free, #tools)
  local rs = runs(all, width)
  -- killed from outside: once more; could not run: again alone (and after
  -- this process's own device memory is freed, where it can be)
  local function again(pick, width)
    local list = {}
    for i in ipairs(tools) do if pick(rs[i]) then list[#list + 1] = i end end
    if #list == 0 then return false end
    local rs2 = runs(list, width)
    for _, i in ipairs(list) do rs[i] = rs2[i] end
    return true
  end
  local function killed(r) return r.status == M.killed and not r.timed_out end
  local function no_run(r) return M.harness_failure(r) ~= nil end
  again(killed, width)
  if again(no_run, 1) and opts.release then
    for i in ipairs(tools) do
      if no_run(rs[i]) then opts.release(); again(no_run, 1); break end
    end
  end
  os.remove(job)
  os.remove(race_job)
  local seconds, stages = {}, {}
  for i, tool in ipairs(tools) do seconds[tool], stages[tool] = rs[i].seconds, M.stages(rs[i].err) end
  local finding = { seconds = seconds, stages = stages, skipped = next(skipped) and skipped or nil }
  -- (a run that could not run or was killed from outside is no finding; another tool's finding stands beside it)
  local outside, harness
  for i, tool in ipairs(tools) do
    local r = rs[i]
    local report
    local why = M.harness_failure(r)
    if why then
      harness = harness or string.format("compute-sanitizer's %s run at %s could not run (%s): not the candidate's "
                                         .. "doing, so not its outcome", tool, at(tool).key, why:sub(1, 300))
    elseif killed(r) then
      outside = outside or string.format("compute-sanitizer's %s run at %s was killed from outside (SIGKILL) twice: "
                                         .. "not the candidate's doing, so not its outcome", tool, at(tool).key)
    elseif r.timed_out then
      report = string.format("ran past %d s (a candidate the tool cannot finish checking is not made the best)", M.limit)
    elseif r.status == M.found then report = M.first_report(r.out .. "\n" .. r.err)
    elseif r.status ~= 0 then
      report = string.format("the run failed (exit %d): %s", r.status,
                             ((r.err ~= "" and r.err or r.out):gsub("%s+$", ""):sub(-600)))
    end
    if report then
      local text = r.out .. "\n" .. r.err
      return { tool = tool, shape = at(tool).key, report = report, log = text:sub(1, 16384), seconds = seconds,
               stages = stages, skipped = finding.skipped }
    end
  end
  finding.outside, finding.harness = outside, harness
  return finding
end

return M
