-- kwb/sanitize.lua: compute-sanitizer on a CUDA candidate about to become the
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
M.job_module = "kwb.measure_task"
-- How long one tool's run may take (seconds of wall time).
M.limit = 300
-- The exit status a tool's run ends with when it found something.
M.found = 86
-- The status of a run killed by SIGKILL (128 + 9, core.exec's).
M.killed = 137

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
-- with the problem's varied variables (kwb.unannounced) halved until they do
-- not, then each one more, so the kernel meets a ragged edge there too (M = N
-- = K = 4096 becomes 513). A recipe verifies every candidate at a scaled
-- shape as at its unannounced ones (kwb.recipe), so a kernel that does
-- nothing there is wrong rather than clean.
function M.race_shape(recipe)
  local best, p = M.shape(recipe), recipe.problem
  if not too_big(p, best.shape) then return best end
  local vary, s = require("kwb.unannounced").vary(p), {}
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
  local ok, mod = pcall(require("kwb.backend").load("cuda").compile, cand, recipe)
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
  return require("kwb.host").which("compute-sanitizer")
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
-- where all else is read-only to it). kwb.profile runs the same job.
function M.job(recipe, args, sh)
  sh = sh or M.shape(recipe)
  jobs = jobs + 1
  local job = string.format("%s/kwb-sanitize-%d-%d.json", os.getenv("TMPDIR") or "/tmp", math.floor(core.now() * 1e6), jobs)
  local f = assert(io.open(job, "w"))
  f:write(require("kwb.worker").json.encode { recipe = args.recipe, cand = args.cand, shape = sh.key, vars = sh.shape,
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

-- check(recipe, args) -> { seconds = { [tool] = s }, stages = { [tool] =
-- "load=s build=s bench=s inputs=s call=s", the job's own split } } when
-- every tool is clean, or with tool =, report =, shape =, log = the tool's
-- output (its first 16 KB): the first finding in the tools' order (they run
-- at once). A tool's run that ends past
-- M.limit or fails (the candidate's fault as likely as not) is a finding
-- too: a candidate the tools could not finish checking is not made the best.
-- One killed from outside twice is no finding: { outside = why } instead.
-- The candidate's PTX (opts.ptx, else ptx_of's) may leave racecheck out
-- (tools_for; `skipped` says so).
-- args = { recipe = its absolute file, cand = { source, name, defines,
-- params }, seed = "decimal" }. Raises when the tool cannot be started.
function M.check(recipe, args, opts)
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
  local ptx = opts and opts.ptx or M.ptx_of(recipe, args.cand)
  local tools, skipped = M.tools_for(ptx, M.dynamic_smem(recipe, args.cand, sh)
                                          or M.dynamic_smem(recipe, args.cand, race_sh))
  local function at(tool) return tool == "racecheck" and race_sh or sh end
  local seconds, stages = {}, {}
  local finding = { seconds = seconds, stages = stages, skipped = next(skipped) and skipped or nil }
  -- the tools run at once (each a process of its own, most of its time its
  -- own start), and the first finding in the tools' order is the report
  local argvs = {}
  for i, tool in ipairs(tools) do
    argvs[i] = M.argv(tool_path, tool, M.kernels(recipe, args.cand, at(tool)), tool == "racecheck" and race_job or job)
  end
  local rs, msg = core.exec_all(argvs, { timeout = M.limit, cap = 1 << 20 })
  -- a tool's run killed from outside (SIGKILL with no timeout: kwb's own
  -- kills are timeouts, and the candidate's code is device code) is not the
  -- candidate's doing: that tool once more, and a second such end is said
  -- as `outside`, never a finding (INTEGRITY.md property 9)
  local again = {}
  for i in ipairs(tools) do
    if rs and rs[i].status == M.killed and not rs[i].timed_out then again[#again + 1] = i end
  end
  if #again > 0 then
    local argv2 = {}
    for j, i in ipairs(again) do argv2[j] = argvs[i] end
    local rs2
    rs2, msg = core.exec_all(argv2, { timeout = M.limit, cap = 1 << 20 })
    for j, i in ipairs(again) do rs[i] = rs2 and rs2[j] or nil end
    if not rs2 then rs = nil end
  end
  os.remove(race_job)
  if not rs then
    os.remove(job)
    error(string.format("compute-sanitizer at %s did not start: %s", sh.key, tostring(msg)), 0)
  end
  for i, tool in ipairs(tools) do
    local r = rs[i]
    seconds[tool], stages[tool] = r.seconds, M.stages(r.err)
  end
  -- (a run killed from outside twice is no finding; another tool's finding stands beside it)
  local outside
  for i, tool in ipairs(tools) do
    local r = rs[i]
    local report
    if r.status == M.killed and not r.timed_out then
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
      finding = { tool = tool, shape = at(tool).key, report = report, log = text:sub(1, 16384), seconds = seconds, stages = stages,
                  skipped = finding.skipped }
      break
    end
  end
  os.remove(job)
  if not finding.tool then finding.outside = outside end
  return finding
end

return M
