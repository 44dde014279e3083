-- kwb/runners/workers.lua: a pool of worker processes (`kwb worker`) that run
-- candidate code away from the main process.
--
--   local pool = kwb.runners.workers.pool { n = 2 }               -- host: n workers
--   local pool = kwb.runners.workers.pool { backend = "cuda", devices = 2 } -- one per GPU
--   local t = pool:submit("kwb.worker.task.measure", { ... }, { limit = 60 })
--   local r = pool:wait(t)   -- { ok = true, value = ... } or
--                            -- { ok = false, code = "crashed" | "timeout" | "error", reason =, signal = }
--   pool:close()
--
-- Each worker gets an environment built from an allow-list (no API keys or
-- tokens), a fresh scratch directory as its home, cwd and TMPDIR, resource
-- limits, and its output captured and capped; under root it runs as an
-- unprivileged uid of its own, claimed machine-wide so no two runs share one
-- (RLIMIT_NPROC counts a uid's processes, so a fork bomb in one worker would
-- otherwise starve the others) in private mount
-- and network namespaces (kwb.core's worker_start does that part). A worker
-- that dies is restarted at its next task; one that overruns its limit is
-- killed. Tasks are dispatched to idle workers as they free up; wait()
-- returns a given task's result, so callers record results in their own
-- (submission) order.
local core = require "kwb.core"
local channel = require "kwb.base.channel"

local M = {}

-- KWB_TRACE set (not empty): each task's steps, as its worker names them
-- when it sets their limits, and its end, with the seconds since the task
-- began, written to M.trace_out (stderr): where a candidate's time goes.
M.trace = (os.getenv("KWB_TRACE") or "") ~= ""
M.trace_out = io.stderr

local function trace(task, fmt, ...)
  if M.trace then
    M.trace_out:write(string.format("kwb trace: task %d (%s) %8.3f s: ", task.id, task.fn, core.now() - task.started),
                      string.format(fmt, ...), "\n")
    M.trace_out:flush()
  end
end

-- ---- the environment ----------------------------------------------------

-- Passed through when present (an allow-list): nothing else reaches a worker.
M.allow = { "PATH", "LANG", "LANGUAGE", "TZ", "CC", "CUDA_CACHE_PATH", "CUDA_HOME", "CUDA_PATH",
            "LD_LIBRARY_PATH", "ASAN_OPTIONS", "UBSAN_OPTIONS" }
M.allow_prefix = { "LC_", "KWB_" }
-- Even an allowed name is dropped when it looks like a secret.
M.deny_words = { "KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION" }
-- Set by the pool, whatever the parent has.
local own = { HOME = true, TMPDIR = true, KWB_CACHE = true, KWB_HISTORY = true, CUDA_VISIBLE_DEVICES = true,
              KWB_ORIGIN = true }

local function allowed(name)
  if own[name] then return false end
  local up = name:upper()
  for _, w in ipairs(M.deny_words) do
    if up:find(w, 1, true) then return false end
  end
  for _, a in ipairs(M.allow) do
    if name == a then return true end
  end
  for _, p in ipairs(M.allow_prefix) do
    if name:sub(1, #p) == p then return true end
  end
  return false
end
M.allowed = allowed

-- Paths of KWB_LUA_PATH made absolute: the worker runs in its scratch directory.
local function absolute_path_list(v, cwd)
  local out = {}
  for entry in v:gmatch("[^;]+") do
    out[#out + 1] = entry:sub(1, 1) == "/" and entry or (cwd .. "/" .. entry)
  end
  return table.concat(out, ";")
end

-- The environment of a worker: the allowed part of this process's, then the
-- pool's own settings (extra: more NAME=VALUE settings). deny: names of
-- secrets (a model's key_env): neither they nor any variable that holds one
-- of their values reaches a worker, whatever its name.
function M.environment(extra, deny)
  local env, cwd = {}, core.cwd()
  local denied, secret = {}, {}
  for _, name in ipairs(deny or {}) do
    denied[name] = true
    local v = os.getenv(name)
    if v and #v >= 8 then secret[v] = true end
  end
  for _, kv in ipairs(core.environ()) do
    local name, value = kv:match("^([^=]+)=(.*)$")
    if name and allowed(name) and not denied[name] and not secret[value] then
      if name == "KWB_LUA_PATH" and cwd then value = absolute_path_list(value, cwd) end
      env[#env + 1] = name .. "=" .. value
    end
  end
  table.sort(env)
  -- (TMP as well: a worker started with a second uid loses TMPDIR to the C
  -- library's secure mode and takes it back from TMP, kwb_sandbox_take_uid)
  for _, kv in ipairs { "HOME=%SCRATCH%", "TMPDIR=%SCRATCH%/tmp", "TMP=%SCRATCH%/tmp", "KWB_CACHE=%SCRATCH%/kwb.db" } do
    env[#env + 1] = kv
  end
  -- where kwb was started: paths relative to it (kernels/...) resolve there (kwb.files.resolve)
  local origin = os.getenv("KWB_ORIGIN") or cwd
  if origin then env[#env + 1] = "KWB_ORIGIN=" .. origin end
  for _, kv in ipairs(extra or {}) do env[#env + 1] = kv end
  return env
end

-- ---- the pool -----------------------------------------------------------

-- Where scratch directories go: /var/tmp, out of the way of /tmp's cleaners;
-- /tmp where there is no /var/tmp.
function M.scratch_in()
  local f = io.open("/var/tmp/.", "r")
  if f then f:close(); return "/var/tmp" end
  return "/tmp"
end

-- A worker's scratch directory goes with its handle (core/worker.c), and the
-- pool closes a worker's handle as soon as it finds the worker dead, killed
-- or retired, not when it is collected (never, in a kwb that ends with
-- os.exit). A kwb killed with its workers leaves theirs, so each new pool
-- first sweeps the stale ones from scratch_in: no live handle's lock on them,
-- no process working in them, untouched for sweep_age seconds
-- (core.worker_sweep).
M.sweep_age = 10

local Pool = {}
Pool.__index = Pool
M.Pool = Pool

local GiB = 1 << 30

-- The cache directory (device locks live there).
local function cache_dir()
  local path = core.cache_path or "cache/kwb.db"
  return path:match("^(.*)/[^/]*$") or "."
end

local function mkdirs(dir)
  local ok, msg = core.mkdirs(dir)
  if not ok then error("cannot create " .. dir .. ": " .. tostring(msg), 0) end
end

-- A worker is killed `slack` times its step's limit plus `grace` seconds into
-- the step (wall time: a loaded machine stretches a call; the loop's own check
-- of each call's time is the exact one).
-- pool { n =, backend = "host" | "cuda", devices =, grace =, slack =, limits = { cpu =,
-- fsize =, nproc =, as =, output_cap = }, scratch_in =, isolate =, uid =, gid =,
-- recycle_cpu =, deny = { secret variable names }, first_device = } -> pool (first_device:
-- the GPU of the first worker, default 0). Under root worker i runs as uid `uid + i - 1`
-- (default M.uid_base), with gid `gid` (default 65534, nogroup).
M.uid_base = 65000   -- Debian policy leaves 65000-65533 unassigned ("reserved")
M.uid_last = 65533
function M.pool(opts)
  opts = opts or {}
  for k in pairs(opts) do
    if not ({ n = 1, backend = 1, devices = 1, grace = 1, slack = 1, limits = 1, scratch_in = 1, isolate = 1,
              uid = 1, gid = 1, recycle_cpu = 1, deny = 1, first_device = 1 })[k] then
      error(string.format("unknown pool option '%s' (known: n, backend, devices, grace, slack, limits, scratch_in, "
                          .. "isolate, uid, gid, recycle_cpu, deny, first_device)", k), 2)
    end
  end
  local backend = opts.backend or "host"
  if backend ~= "host" and backend ~= "cuda" then error("a pool's backend is 'host' or 'cuda', got " .. tostring(backend), 2) end
  local n = opts.n or (backend == "cuda" and opts.devices) or 1
  if opts.devices ~= nil and (math.type(opts.devices) ~= "integer" or opts.devices < 1) then
    error("a pool's devices must be a positive integer, got " .. tostring(opts.devices), 2)
  end
  if math.type(n) ~= "integer" or n < 1 then error("a pool needs n >= 1 workers, got " .. tostring(n), 2) end
  local uid = opts.uid or M.uid_base
  if math.type(uid) ~= "integer" or uid < 0 then error("a pool's uid must be an integer >= 0, got " .. tostring(uid), 2) end
  if opts.uid == nil and core.uid() == 0 and uid + n - 1 > M.uid_last then   -- (others keep their own uid)
    error(string.format("a pool of %d workers needs uids %d..%d, past the last unassigned one (%d)",
                        n, uid, uid + n - 1, M.uid_last), 2)
  end
  local limits = { cpu = 3600, fsize = GiB, nproc = 256, output_cap = 64 << 10,
                   as = backend == "host" and 4 * GiB or nil }   -- CUDA reserves huge virtual ranges
  for k, v in pairs(opts.limits or {}) do
    if not ({ cpu = 1, fsize = 1, nproc = 1, as = 1, output_cap = 1 })[k] then
      error(string.format("unknown worker limit '%s' (known: cpu, fsize, nproc, as, output_cap)", k), 2)
    end
    if backend ~= "host" and k == "as" then error("an address-space limit is for host workers only", 2) end
    limits[k] = v
  end
  local lockdir = cache_dir() .. "/locks"
  mkdirs(lockdir)
  local pool = setmetatable({ backend = backend, n = n, limits = limits, grace = opts.grace or 1.0,
                              slack = opts.slack or 2,
                              scratch_in = opts.scratch_in or M.scratch_in(),
                              isolate = opts.isolate ~= false, gid = opts.gid,
                              recycle_cpu = opts.recycle_cpu or limits.cpu / 2,
                              slots = {}, queue = {}, next_id = 0, started = 0, claimed = {},
                              claim_uids = opts.uid == nil and core.uid() == 0 }, Pool)
  core.worker_sweep(pool.scratch_in, M.sweep_age)   -- (one it cannot read: the first worker's start says so)
  local devices = opts.devices or n
  for i = 1, n do
    local extra, lock = {}, lockdir .. "/host.lock"
    if backend == "cuda" then   -- workers beyond one per GPU share them, in turn
      local dev = (opts.first_device or 0) + (i - 1) % devices
      extra[1] = "CUDA_VISIBLE_DEVICES=" .. dev
      lock = lockdir .. "/cuda" .. dev .. ".lock"
    end
    pool.slots[i] = { index = i, env = M.environment(extra, opts.deny), lock = lock, uid = uid + i - 1 }
  end
  return pool
end

-- Under root, worker uids are claimed machine-wide (a lock file each, held
-- while the pool lives), so the workers of two runs never share a uid: a
-- leftover process of one run's candidate cannot signal the other's.
M.uid_locks = "/tmp/kwb-worker-uids"

-- A host worker's sandboxes (core/sandbox.c) get a second uid from the same
-- range, claimed the same way from its top down: no process of a candidate
-- shares a uid with its judge, or with another worker's candidates.
local function claim(pool, first, last, step, what)
  mkdirs(M.uid_locks)
  for u = first, last, step do
    if not pool.claimed[u] then
      local lock = core.flock(string.format("%s/%d.lock", M.uid_locks, u), { wait = false })
      if lock then
        pool.claimed[u] = true
        return u, lock
      end
    end
  end
  error(string.format("no %s uid is free: every one of %d..%d is held by another kwb's workers",
                      what, M.uid_base, M.uid_last), 0)
end

local function claim_uid(pool, slot)
  if not pool.claim_uids then return end
  if not slot.uid_lock then slot.uid, slot.uid_lock = claim(pool, M.uid_base, M.uid_last, 1, "worker") end
  if pool.backend == "host" and not slot.sandbox_lock then
    slot.sandbox_uid, slot.sandbox_lock = claim(pool, M.uid_last, M.uid_base, -1, "sandbox")
  end
end

-- Close a slot's worker (killed if alive): its scratch directory goes now.
local function retire(slot)
  if slot.worker then slot.worker:close(); slot.worker = nil end
end

function Pool:start_worker(slot)
  retire(slot)   -- (the one it replaces)
  claim_uid(self, slot)
  local w, msg = core.worker_start {
    argv = { "kwb", "worker" }, env = slot.env, scratch_in = self.scratch_in, lock = slot.lock,
    cpu = self.limits.cpu, fsize = self.limits.fsize, nproc = self.limits.nproc, as = self.limits.as,
    output_cap = self.limits.output_cap, isolate = self.isolate, uid = slot.uid, gid = self.gid,
    sandbox_uid = slot.sandbox_uid,
  }
  if not w then error("cannot start a worker: " .. msg, 0) end
  slot.worker = w
  self.started = self.started + 1
  return w
end

-- submit(fn, args [, { limit = seconds, what = }]) -> task. The task runs
-- on the first idle worker; `limit` (seconds) bounds it until the worker itself says
-- how long its next step may take.
--
-- A task too large for a worker's frame (kwb.base.channel.frame) is never sent: its
-- result is { ok = false, code = "too-large", reason = } at once, and no
-- worker is touched.
function Pool:submit(fn, args, opts)
  opts = opts or {}
  self.next_id = self.next_id + 1
  local task = { id = self.next_id, fn = fn, args = args or {}, limit = opts.limit or 600,
                 what = opts.what or "its task", started = core.now() }
  local why
  task.frame, why = channel.frame { id = task.id, fn = task.fn, args = task.args, nargs = #task.args }
  if not task.frame then
    task.result = { ok = false, code = "too-large", reason = why, output = "", output_bytes = 0, seconds = 0 }
    trace(task, "too-large: %s", why)
    return task
  end
  self.queue[#self.queue + 1] = task
  self:dispatch()
  return task
end

function Pool:dispatch()
  for _, slot in ipairs(self.slots) do
    if #self.queue == 0 then return end
    if not slot.task then
      local task = table.remove(self.queue, 1)
      local w = slot.worker
      slot.fresh, slot.heard = false, false
      if not w or not w:status().alive then w, slot.fresh = self:start_worker(slot), true
      else w:output() end   -- whatever an earlier task left unread is not this one's
      local frame = task.frame
      task.frame = nil
      local ok, msg = w:send(frame)
      if not ok and not slot.fresh then   -- it died while idle: not this task's doing
        w:kill()
        w, slot.fresh = self:start_worker(slot), true
        ok, msg = w:send(frame)
      end
      if not ok and slot.fresh then   -- gone before its first task: it never got going (as in step)
        core.worker_wait({ w }, 5)
        local out = w:output()
        error(string.format("a worker could not start (exit status %s): %s", tostring(w:status().exit_code),
                            out ~= "" and out or "no output"), 0)
      end
      slot.task, task.slot = task, slot
      task.started = core.now()
      slot.since, slot.due, slot.limit = core.now(), core.now() + task.limit * self.slack + self.grace, task.limit
      slot.what = task.what
      if not ok then self:finish(slot, { ok = false, code = "crashed", reason = "the worker was gone before the task: " .. msg }) end
    end
  end
end

-- The result of a task, and the slot made idle (a worker no longer alive
-- closed, its scratch with it).
function Pool:finish(slot, result)
  local task = slot.task
  local w = slot.worker
  local out, total = w:output()
  result.output, result.output_bytes = out, total
  result = require("kwb.base.secrets").scrub_all(result)   -- (no secret this process knows leaves a worker's answer)
  if not w:status().alive then retire(slot) end
  result.seconds = core.now() - task.started
  trace(task, "%s", result.ok and "answered" or (result.code .. ": " .. tostring(result.reason)))
  task.result = result
  slot.task, task.slot = nil, nil
  self:dispatch()
end

local function describe_death(st)
  if st.signal then
    return string.format("its worker died of %s (%s)", st.signal, st.description or "?")
  end
  return string.format("its worker exited with status %s", tostring(st.exit_code))
end

-- Handle one event, waiting at most `timeout` seconds for it.
function Pool:step(timeout)
  local live, slots = {}, {}
  local now = core.now()
  local soonest
  for _, slot in ipairs(self.slots) do
    if slot.task then
      slots[#slots + 1] = slot
      live[#slots] = slot.worker
      if slot.due and (not soonest or slot.due < soonest) then soonest = slot.due end
    end
  end
  if #live == 0 then return end
  local wait = timeout
  if soonest then
    local left = math.max(0, soonest - now)
    if not wait or left < wait then wait = left end
  end
  local i, kind, text = core.worker_wait(live, wait or -1)
  if i then
    local slot = slots[i]
    if kind == "message" then
      slot.heard = true
      local ok, msg = pcall(channel.decode, text)
      if not ok or type(msg) ~= "table" or msg.id ~= slot.task.id then
        slot.worker:kill()
        self:finish(slot, { ok = false, code = "crashed", reason = "its worker broke the protocol: " .. tostring(ok and text:sub(1, 80) or msg) })
      elseif msg.event == "limit" then
        slot.since = core.now()
        slot.due = msg.seconds >= 0 and slot.since + msg.seconds * self.slack + self.grace or nil
        slot.what, slot.limit = msg.what or slot.what, msg.seconds >= 0 and msg.seconds or nil
        trace(slot.task, "%s (limit %s)", tostring(msg.what), msg.seconds >= 0 and string.format("%g s", msg.seconds) or "none")
      else
        -- a retiring worker, or one near its CPU limit, is restarted at its next task
        local spent = msg.retire or (msg.cpu or 0) > self.recycle_cpu
        local w = slot.worker
        if spent then w:kill() end
        if msg.ok then self:finish(slot, { ok = true, value = msg.result, retired = spent or nil })
        else self:finish(slot, { ok = false, code = "error", reason = msg.error, retired = spent or nil }) end
      end
    else   -- the worker is gone
      local st = slot.worker:status()
      if slot.fresh and not slot.heard and not st.signal then
        -- it never got going: kwb's failure (exec, privileges, Lua), not the task's
        local out = slot.worker:output()
        error(string.format("a worker could not start (exit status %s): %s", tostring(st.exit_code),
                            out ~= "" and out or "no output"), 0)
      end
      self:finish(slot, { ok = false, code = "crashed", signal = st.signal, exit_code = st.exit_code,
                          during = slot.what, reason = describe_death(st) .. " during " .. slot.what })
    end
  end
  -- overrun limits
  now = core.now()
  for _, slot in ipairs(self.slots) do
    if slot.task and slot.due and now >= slot.due then
      slot.worker:kill()
      self:finish(slot, { ok = false, code = "timeout", during = slot.what, limit = slot.limit,
                          reason = string.format("no answer %.3g s into %s (the limit is %g s; %g s of wall time "
                                                 .. "allowed); its worker was killed", now - slot.since, slot.what,
                                                 slot.limit, slot.limit * self.slack + self.grace) })
    end
  end
end

-- While a pool waits, pool.idle (when set) is called between events and at
-- least every idle_every seconds: a run's model requests move on meanwhile.
M.idle_every = 0.05

-- wait(task) -> its result, handling every worker's events meanwhile.
function Pool:wait(task)
  while not task.result do
    if not task.slot then self:dispatch() end
    if self.idle then
      self:step(M.idle_every)
      self.idle()
    else
      self:step()
    end
  end
  return task.result
end

-- call(fn, args [, opts]) -> result: submit and wait.
function Pool:call(fn, args, opts)
  return self:wait(self:submit(fn, args, opts))
end

-- device_lock([i]) -> the lock of worker i's device (1), taken by this
-- process: measure here (the ceilings probe) without a worker timing meanwhile.
function Pool:device_lock(i)
  return assert(core.flock(self.slots[i or 1].lock))
end

function Pool:close()
  for _, slot in ipairs(self.slots) do
    retire(slot)
    if slot.uid_lock then
      self.claimed[slot.uid] = nil
      slot.uid_lock:unlock()
      slot.uid_lock = nil
    end
    if slot.sandbox_lock then
      self.claimed[slot.sandbox_uid] = nil
      slot.sandbox_lock:unlock()
      slot.sandbox_uid, slot.sandbox_lock = nil, nil
    end
  end
end

function Pool:__tostring()
  return string.format("kwb.runners.workers.pool (%s, %d workers)", self.backend, self.n)
end

return M
