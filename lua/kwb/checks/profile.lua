-- kwb/checks/profile.lua: Nsight Compute (ncu) on one CUDA candidate at one shape,
-- and what it says: per kernel of the plan its duration, the DRAM, L2, memory
-- and SM throughput as % of peak, the tensor pipes' utilisation, achieved
-- occupancy, registers, the top stall reasons; the plan's kernel count and
-- the time between its kernels; and a bottleneck class per kernel and for the
-- plan (memory, compute, latency, launch overhead).
--
-- ncu runs the job the sanitizers run (kwb.worker.task.sanitize_job: the
-- candidate built as the loop builds it and called once on fresh inputs), with
-- `--clock-control none` (the clocks kwb's own timing runs at) and its
-- default cache control (caches flushed before each kernel: cold, as kwb
-- times), on the candidate's kernels alone.
local core = require "kwb.core"
local sanitize = require "kwb.checks.sanitize"

local M = {}

-- The sections whose metrics the raw page gives (Nsight Compute's section
-- names; `ncu --list-sections` lists them).
M.sections = { "SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats", "ComputeWorkloadAnalysis" }
-- How long ncu's run may take (seconds of wall time).
M.limit = 600
-- A unit at or above this % of its peak is the kernel's limiter; a kernel
-- whose units are all below it is latency-bound (the Speed Of Light reading
-- of Nsight Compute's profiling guide: hwdocs/profiling.md).
M.busy = 60
-- A plan whose kernels are busy for less than this share of its time is
-- bound by launch overhead: the GPU waits between kernels more than it works.
M.launch_share = 0.5

-- The ncu command, where set (the tests stand one in); else path() looks.
M.command = nil

-- path() -> ncu's path (M.command, $KWB_NCU, else CUDA_HOME/bin/ncu, else on
-- PATH), or nil.
function M.path()
  if M.command then return M.command end
  local given = os.getenv("KWB_NCU")
  if given and given ~= "" then return given end
  local home = core.cuda_home()
  if home and core.executable(home .. "/bin/ncu") then return home .. "/bin/ncu" end
  return require("kwb.base.files").which("ncu")
end

local function regex_quote(s) return (s:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?|{}\\]", "\\%0")) end

-- argv(ncu, kernels, job) -> ncu's command line on the job, its kernels only.
function M.argv(ncu, kernels, job)
  local argv = { ncu, "--clock-control", "none", "--csv", "--page", "raw", "--print-units", "base" }
  for _, s in ipairs(M.sections) do
    argv[#argv + 1] = "--section"
    argv[#argv + 1] = s
  end
  local names = {}
  for i, k in ipairs(kernels) do names[i] = regex_quote(k) end
  argv[#argv + 1] = "--kernel-name"
  argv[#argv + 1] = "regex:^(" .. table.concat(names, "|") .. ")$"
  argv[#argv + 1] = assert(core.self_exe())
  argv[#argv + 1] = "-e"
  argv[#argv + 1] = string.format("require(%q).sanitize_job(%q)", sanitize.job_module, job)
  return argv
end

-- One CSV line's fields ("a","b,c","d""e" -> a | b,c | d"e), or nil when the
-- line is not a row of quoted fields.
local function csv_fields(line)
  local fields, i, n = {}, 1, #line
  while i <= n do
    if line:sub(i, i) ~= '"' then return nil end
    local j, parts = i + 1, {}
    while true do
      local q = line:find('"', j, true)
      if not q then return nil end
      parts[#parts + 1] = line:sub(j, q - 1)
      if line:sub(q + 1, q + 1) == '"' then parts[#parts + 1] = '"'; j = q + 2
      else i = q + 1; break end
    end
    fields[#fields + 1] = table.concat(parts)
    if i <= n then
      if line:sub(i, i) ~= "," then return nil end
      i = i + 1
    end
  end
  return fields
end

-- A number of the raw page ("1,234.5", "n/a" -> nil).
local function number(s)
  if not s then return nil end
  return tonumber((s:gsub(",", "")))
end

-- Seconds in a duration of `unit`.
local time_units = { ns = 1e-9, nsecond = 1e-9, us = 1e-6, usecond = 1e-6, ms = 1e-3, msecond = 1e-3, s = 1, second = 1 }

-- The first of the names the row has a number for.
local function pick(row, ...)
  for _, name in ipairs { ... } do
    local v = row[name]
    if v ~= nil then return v, name end
  end
end

-- parse(text) -> { kernels = { { name, seconds, dram, l2, l1, memory, sm, tensor,
-- occupancy, occupancy_max, registers, block, grid, stalls = { { reason,
-- warps } ... } } ... } } | nil, message: ncu's raw page (--csv --page raw),
-- one row per kernel launch profiled, in launch order. Percentages are of
-- peak; stalls are the average warps stalled per issued instruction, the
-- three largest.
function M.parse(text)
  local header, units, rows = nil, nil, {}
  for line in text:gmatch("[^\r\n]+") do
    local f = line:sub(1, 1) == '"' and csv_fields(line)
    if f then
      if not header then
        if f[1] == "ID" then header = f end
      elseif f[1] == "" and not units and #rows == 0 then units = f
      elseif number(f[1]) then rows[#rows + 1] = f end
    end
  end
  if not header then return nil, "no raw page in ncu's output (no CSV header starting \"ID\")" end
  if #rows == 0 then return nil, "ncu profiled no kernel (none of the candidate's kernels ran under it)" end
  local kernels = {}
  for _, f in ipairs(rows) do
    local row, raw = {}, {}
    for i, name in ipairs(header) do
      raw[name] = f[i]
      local v = number(f[i])
      if v then row[name] = v end
    end
    local dur, dur_name = pick(row, "gpu__time_duration.sum")
    local scale = 1e-9
    if dur_name and units then
      for i, name in ipairs(header) do
        if name == dur_name then scale = time_units[units[i]] or scale end
      end
    end
    local tensor   -- the busiest tensor pipe (hmma, gmma, dmma, ...), averaged over the SMs
    for name, v in pairs(row) do
      if name:match("^sm__pipe_tensor.-%.avg%.pct_of_peak_sustained_active$")
         or name:match("^sm__inst_executed_pipe_tensor.-%.avg%.pct_of_peak_sustained_active$") then
        tensor = math.max(tensor or 0, v)
      end
    end
    local stalls = {}
    for name, v in pairs(row) do
      local reason = name:match("^smsp__average_warps_issue_stalled_(.+)_per_issue_active%.ratio$")
      if reason and reason ~= "selected" and v > 0 then stalls[#stalls + 1] = { reason, v } end
    end
    table.sort(stalls, function(a, b) return a[2] > b[2] or (a[2] == b[2] and a[1] < b[1]) end)
    for i = #stalls, 4, -1 do stalls[i] = nil end
    kernels[#kernels + 1] = {
      name = raw["Kernel Name"] or "?",
      seconds = dur and dur * scale,
      dram = pick(row, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                  "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
      l2 = pick(row, "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
      l1 = pick(row, "l1tex__throughput.avg.pct_of_peak_sustained_active"),
      memory = pick(row, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
      sm = pick(row, "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
      tensor = tensor,
      occupancy = pick(row, "sm__warps_active.avg.pct_of_peak_sustained_active"),
      occupancy_max = pick(row, "sm__maximum_warps_per_active_cycle_pct"),
      registers = pick(row, "launch__registers_per_thread"),
      block = pick(row, "launch__block_size"),
      grid = pick(row, "launch__grid_size"),
      stalls = stalls,
    }
  end
  return { kernels = kernels }
end

-- classify(k) -> "memory" | "compute" | "latency", and why: the busier of the
-- memory side (DRAM, L2, L1/shared memory, the memory units) and the compute
-- side (the SM's pipes, the tensor pipes) when it reaches M.busy % of its peak, else
-- latency (neither is near its peak: the warps wait, on what the stalls say).
function M.classify(k)
  local mem = math.max(k.dram or 0, k.l2 or 0, k.l1 or 0, k.memory or 0)
  local comp = math.max(k.sm or 0, k.tensor or 0)
  if math.max(mem, comp) >= M.busy then
    if mem >= comp then
      -- the busiest memory unit named where it is known
      local unit = (k.dram or 0) >= mem and "DRAM" or (k.l2 or 0) >= mem and "L2"
                   or (k.l1 or 0) >= mem and "L1/shared memory" or "memory"
      return "memory", string.format("%s at %.0f%% of peak (SM %.0f%%)", unit, mem, comp)
    end
    local unit = (k.tensor or 0) >= comp and (k.sm or 0) < comp and "the tensor pipes" or "the SM"
    return "compute", string.format("%s at %.0f%% of peak (memory %.0f%%)", unit, comp, mem)
  end
  local why = string.format("memory %.0f%% and compute %.0f%% of peak", mem, comp)
  if k.stalls and k.stalls[1] then why = why .. ", stalled most on " .. k.stalls[1][1] end
  return "latency", why
end

-- summarise(parsed, plan_seconds) -> the profile: kernels with their class,
-- count, busy (the kernels' seconds), plan_seconds (kwb's own median of the
-- plan at the shape, graph replay, cold), gaps (plan - busy, never below 0),
-- class and why for the plan: launch overhead when its kernels are busy for
-- less than M.launch_share of its time, else the class holding the most of
-- the kernels' time.
function M.summarise(parsed, plan_seconds)
  local busy, by_class, timed = 0, {}, true
  for _, k in ipairs(parsed.kernels) do
    timed = timed and k.seconds ~= nil
    k.class, k.why = M.classify(k)
    busy = busy + (k.seconds or 0)
    by_class[k.class] = (by_class[k.class] or 0) + (k.seconds or 0)
  end
  local p = { kernels = parsed.kernels, count = #parsed.kernels, busy = busy, plan_seconds = plan_seconds }
  if plan_seconds then p.gaps = math.max(plan_seconds - busy, 0) end
  -- (only where every kernel's time is known: a kernel without one is not idle)
  if timed and plan_seconds and plan_seconds > 0 and busy < M.launch_share * plan_seconds then
    p.class = "launch overhead"
    p.why = string.format("its %d kernel%s busy %.0f%% of the plan's %s", #parsed.kernels,
                          #parsed.kernels == 1 and " is" or "s are", 100 * busy / plan_seconds,
                          require("kwb.figures").time(plan_seconds))
    return p
  end
  local most
  for _, c in ipairs { "memory", "compute", "latency" } do
    if by_class[c] and (not most or by_class[c] > by_class[most]) then most = c end
  end
  p.class = most
  if #parsed.kernels == 1 then p.why = parsed.kernels[1].why
  else p.why = string.format("%.0f%% of the kernels' time in %s-bound kernels", 100 * by_class[most] / math.max(busy, 1e-30), most) end
  return p
end

-- run(recipe, args, shape_key) -> the parsed raw page | nil, message, and
-- ncu's output (its first 16 KB). args as kwb.checks.sanitize.check takes them.
function M.run(recipe, args, sh)
  if not args.recipe then
    error(string.format("recipe %s: a profile runs the recipe from its file, and this one has none", recipe.name), 0)
  end
  local ncu = M.path()
  if not ncu then error("ncu (Nsight Compute) is not installed (looked in CUDA_HOME/bin and on PATH)", 0) end
  local job = sanitize.job(recipe, args, sh)
  local r, msg = core.exec(M.argv(ncu, sanitize.kernels(recipe, args.cand, sh), job), { timeout = M.limit, cap = 8 << 20 })
  os.remove(job)
  if not r then error(string.format("ncu at %s did not start: %s", sh.key, tostring(msg)), 0) end
  local text = r.out .. "\n" .. r.err
  if r.timed_out then return nil, string.format("ncu ran past %d s at %s", M.limit, sh.key), text:sub(1, 16384) end
  if r.status ~= 0 then
    return nil, string.format("ncu failed at %s (exit %d): %s", sh.key, r.status,
                              ((r.err ~= "" and r.err or r.out):gsub("%s+$", ""):sub(-600))), text:sub(1, 16384)
  end
  local parsed, perr = M.parse(r.out)
  if not parsed then return nil, perr .. " at " .. sh.key, text:sub(1, 16384) end
  return parsed, nil, r.out
end

-- pct(v) -> "82%" | "-"; stalls(k) -> "long_scoreboard 24.6, ..." (the
-- table's and the model's prompt's words)
function M.pct(v) return v and string.format("%.0f%%", v) or "-" end
function M.stalls(k)
  local st = {}
  for i, s in ipairs(k.stalls or {}) do st[i] = string.format("%s %.1f", s[1], s[2]) end
  return table.concat(st, ", ")
end

-- text(p) -> lines: the profile as a table and a verdict.
function M.text(p, key)
  local figures = require "kwb.figures"
  local pct = M.pct
  local rows = {}
  for _, k in ipairs(p.kernels) do
    rows[#rows + 1] = { k.name, figures.time(k.seconds), pct(k.dram), pct(k.l2), pct(k.sm), pct(k.tensor), pct(k.occupancy),
                        k.registers and string.format("%d", k.registers) or "-", k.spills and tostring(k.spills) or "-",
                        k.class, M.stalls(k) }
  end
  local lines = figures.table({ { "kernel", align = "left" }, "time", "DRAM", "L2", "SM", "tensor", "occupancy",
                               "registers", "spill bytes", { "bound", align = "left" }, { "top stalls (warps per issue)", align = "left" } }, rows)
  table.insert(lines, 1, string.format("profile at %s (ncu, clocks as they run, caches flushed before each kernel):", key))
  lines[#lines + 1] = string.format("%d kernel%s, busy %s of the plan's %s (gaps %s): %s-bound, %s", p.count,
                                    p.count == 1 and "" or "s", figures.time(p.busy), figures.time(p.plan_seconds),
                                    figures.time(p.gaps), p.class, p.why)
  return lines
end

-- task(h, args) -> { parsed =, resources =, log = } | { reason =, log = }:
-- ncu on the candidate at args.shape through harness h (kwb.measure), and
-- the registers and spills of its kernels as the build reports them.
function M.task(h, args)
  local sh
  for _, s in ipairs(h.recipe.shapes) do if s.key == args.shape then sh = s end end
  if not sh then error("the recipe has no shape " .. tostring(args.shape), 0) end
  local parsed, why, out = M.run(h.recipe, args, sh)
  if not parsed then return { reason = why, log = out } end
  local fn = h:build(args.cand, { seconds = {} })
  return { parsed = parsed, resources = fn and fn.module and fn.module.resources, log = out }
end

return M
