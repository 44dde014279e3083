-- kwb/runners/queue_pool.lua: the loop's side of a fleet (kwb.runners.queue): a pool for
-- kwb.loop.session whose workers are the fleet's, with kwb.runners.workers' submit, wait,
-- call, close, plus ceilings. It checks every result before it counts (the
-- worker's signature, the task it answers, the entry in that worker's
-- hands, once), sends a task a worker declined to another and fails it when
-- every live worker has declined it, and takes back entries whose worker
-- vanished, kwb.runners.queue.max_losses times at most; kwb.runners.queue's header says why.
local core = require "kwb.core"
local queue = require "kwb.runners.queue"
local secrets = require "kwb.base.secrets"
local channel = require "kwb.base.channel"

local M = {}

local Pool = {}
Pool.__index = Pool
M.Pool = Pool

-- new { url =, backend =, device = KIND (a part of it), password_file =,
-- fleet_key = | fleet_key_file = } -> a pool for kwb.loop.session: submit, wait,
-- call, close, ceilings, like kwb.runners.workers'. Its kind is the one device kind
-- of the recipe's backend the fleet has (or the one `device` names); n, its
-- workers now.
function M.new(opts)
  local q, perr = queue.parse(opts.url, { password_file = opts.password_file })
  if not q then error(perr, 0) end
  local fleet_key = opts.fleet_key
  if not fleet_key then
    local why
    fleet_key, why = queue.fleet_key(opts.fleet_key_file)
    if not fleet_key then error(string.format("queue %s: %s", q.url, why), 0) end
  end
  secrets.add(fleet_key)
  local link = queue.connect(q)
  local backend = opts.backend or "host"
  local kinds, found = {}, {}
  for _, w in ipairs(queue.workers(link, q)) do
    if w.backend == backend and (not opts.device or w.kind:find(opts.device, 1, true)) then
      if not found[w.kind] then found[w.kind] = 0; kinds[#kinds + 1] = w.kind end
      found[w.kind] = found[w.kind] + 1
    end
  end
  if #kinds == 0 then
    link:close()
    error(string.format("no worker on the queue %s serves the %s backend%s (start `kwb worker --queue URL` on each "
                        .. "host)", q.url, backend, opts.device and (" on a device like '" .. opts.device .. "'") or ""), 0)
  end
  if #kinds > 1 then
    link:close()
    error(string.format("the queue %s has %s workers of %d device kinds (%s): name one with --device", q.url, backend,
                        #kinds, table.concat(kinds, "; ")), 0)
  end
  local kind = kinds[1]
  local run = core.sha256(string.format("%s %d %.6f", core.hostname() or "?", core.pid(), core.now())):sub(1, 16)
  local p = setmetatable({ q = q, link = link, backend = backend, kind = kind, n = found[kind], remote = true,
                           fleet_key = fleet_key, keys = {},
                           tasks_key = queue.tasks_key(q, backend, kind), results_key = queue.key(q, "results", run),
                           consumer = "loop-" .. run, last = "0-0", next_tid = 0, by_tid = {}, open = {},
                           seen_reconnects = 0, ignored = {}, ignored_n = 0,
                           next_reclaim = core.now() + q.visibility / 2 }, Pool)
  queue.ensure_group(link, p.tasks_key)
  -- the run's stream exists while the run does (a worker's idle entry whose
  -- stream is gone belonged to a run that ended: Pool:reclaim drops it)
  link:call("XADD", p.results_key, "*", "run", run)
  link:call("EXPIRE", p.results_key, queue.results_ttl)
  return p
end

-- The task's entry on its stream (again).
function Pool:send(task)
  task.entry, task.resend_at = self.link:call("XADD", self.tasks_key, "*", "task", task.body, "reply", self.results_key), nil
end

-- submit(fn, args [, { limit =, what = }]) -> task. A task's recipe file
-- travels as its identity (kwb.runners.queue.identity); the worker loads its own copy.
function Pool:submit(fn, args, opts)
  opts = opts or {}
  if not queue.tasks[fn] then error("a queue's workers run evaluations only, not " .. tostring(fn), 2) end
  local a = {}
  for k, v in pairs(args[1] or {}) do a[k] = v end
  if type(a.recipe) == "string" then a.recipe = queue.identity(a.recipe) end
  self.next_tid = self.next_tid + 1
  local tid = self.results_key:match("[^:]+$") .. "-" .. self.next_tid
  local body, why = channel.frame { tid = tid, fn = fn, args = { a }, limit = opts.limit or 600,
                                   what = opts.what or "its task" }
  local task = { id = self.next_tid, tid = tid, fn = fn, started = core.now(), declined = {}, lost = 0,
                 label = queue.describe { fn = fn, args = { a } }, body = body }
  if not body then   -- (a worker's own frame of it would be as large: never sent, as kwb.runners.workers does)
    task.result = { ok = false, code = "too-large", reason = why, seconds = 0 }
    return task
  end
  task.sha256 = core.sha256(task.body)
  self.by_tid[tid], self.open[tid] = task, task
  self:send(task)
  return task
end

-- who(id) -> a worker's id as a message may show it (it came from the queue).
local function who(id)
  return queue.name_of(id) and id or "an unnamed worker"
end

M.ignored_said = 20   -- ignored results said on stderr (the rest counted)

-- A result that does not count, and why: said (the first M.ignored_said)
-- and kept (pool.ignored, the latest 100).
function Pool:ignore(task, f, why)
  local line = string.format("a result for %s from %s ignored: %s", task and task.label or "no task of this run",
                             who(f.worker), why)
  self.ignored_n = self.ignored_n + 1
  if self.ignored_n <= M.ignored_said then io.stderr:write(string.format("kwb: queue %s: %s\n", self.q.url, line)) end
  self.ignored[#self.ignored + 1] = line
  if #self.ignored > 100 then table.remove(self.ignored, 1) end
end

-- holder(entry) -> the consumer an entry of the tasks' stream is pending
-- with, or nil (acknowledged, or never delivered).
function Pool:holder(entry)
  local r = self.link:call("XPENDING", self.tasks_key, queue.group, entry, entry, 1)
  return type(r) == "table" and type(r[1]) == "table" and r[1][1] == entry and r[1][2] or nil
end

-- why_not(task, f) -> nil when a result's fields count for task, else why not.
function Pool:why_not(task, f)
  if not task then return "it names no task of this run" end
  if task.result then return "the task has its result already (a result counts once)" end
  local name = queue.name_of(f.worker)
  if not name then return "it names no worker" end
  if f.task_sha256 ~= task.sha256 then return "it answers another task than the one this run sent" end
  self.keys[name] = self.keys[name] or queue.worker_key(self.fleet_key, name)
  f.reply = self.results_key
  if type(f.mac) ~= "string" or f.mac ~= queue.sign(self.keys[name], f) then
    return string.format("it is not signed with worker %s's key", name)
  end
  local holder = type(f.entry) == "string" and f.entry:match("^%d+%-%d+$") and self:holder(f.entry)
  if holder ~= f.worker then
    return string.format("the task's entry %s is %s", tostring(f.entry):sub(1, 40),
                         holder and ("in the hands of " .. who(holder) .. ", not of the worker that answered")
                         or "pending with no worker")
  end
end

-- done_with(entry): an entry answered, acknowledged and dropped.
function Pool:done_with(entry)
  self.link:call("XACK", self.tasks_key, queue.group, entry)
  self.link:call("XDEL", self.tasks_key, entry)
end

-- A worker declined a task (refused it, or failed it: kwb's own code failed
-- there): it goes to another worker; once every live worker of the kind has
-- declined it, it fails, with each one's reason.
function Pool:declined(task, wid, res)
  local again = task.declined[wid] ~= nil
  task.declined[wid] = string.format("worker %s %s it: %s", wid, res.code == "refused" and "refused" or "failed",
                                     tostring(res.reason))
  local live, all = 0, true
  for _, w in ipairs(queue.workers(self.link, self.q)) do
    if w.backend == self.backend and w.kind == self.kind then
      live = live + 1
      if not task.declined[w.id] then all = false end
    end
  end
  if all then
    local why = {}
    for _, r in pairs(task.declined) do why[#why + 1] = r end
    table.sort(why)
    self:finish(task, { ok = false, code = "error",
                        reason = string.format("no worker on the queue %s will take %s (%d live worker%s of %s %s, "
                                               .. "each declined it): %s", self.q.url, task.label, live,
                                               live == 1 and "" or "s", self.backend, self.kind,
                                               table.concat(why, "; ")) })
    return
  end
  if not again then
    io.stderr:write(string.format("kwb: queue %s: %s; sent to another worker\n", self.q.url, task.declined[wid]))
  end
  task.entry = nil
  task.resend_at = core.now() + (again and queue.redeliver_wait or 0)
end

function Pool:finish(task, res)
  task.result = res
  task.result.seconds = core.now() - task.started
  self.open[task.tid] = nil
end

-- One result entry of the run's stream: counted, declined or ignored.
function Pool:take(f)
  local task = self.by_tid[f.tid]
  if f.tid == nil and f.run then return end   -- (the stream's first entry)
  local why = self:why_not(task, f)
  if why then return self:ignore(task, f, why) end
  self:done_with(f.entry)
  local ok, res = pcall(channel.decode, f.result or "")
  res = ok and type(res) == "table" and secrets.scrub_all(res)
        or { ok = false, code = "error", reason = "a worker's result that is not JSON" }
  if res.ok == false and (res.code == "refused" or res.code == "error") then
    return self:declined(task, f.worker, res)
  end
  res.worker = f.worker
  self:finish(task, res)
end

-- Read what results came (waiting up to `seconds`), and hand each to its task.
function Pool:poll(seconds)
  local ms = math.max(1, math.floor(seconds * 1000))
  local r = self.link:call("XREAD", "COUNT", 100, "BLOCK", ms, "STREAMS", self.results_key, self.last,
                           { block = seconds })
  if self.link.reconnects ~= self.seen_reconnects then   -- the server may have lost what it held
    self.seen_reconnects = self.link.reconnects
    self:recover()
  end
  while type(r) == "table" do
    local n = 0
    for _, stream in ipairs(r) do
      for _, e in ipairs(stream[2]) do
        self.last, n = e[1], n + 1
        self:take(queue.fields(e[2]))
      end
    end
    if n < 100 then break end   -- (more waiting: read on before anything is taken back)
    r = self.link:call("XREAD", "COUNT", 100, "STREAMS", self.results_key, self.last)
  end
  local now = core.now()
  for _, task in pairs(self.open) do
    if not task.entry and task.resend_at and now >= task.resend_at then self:send(task) end
  end
end

-- After a reconnection: the group again, and every task still open whose
-- entry the server no longer holds, sent again.
function Pool:recover()
  queue.ensure_group(self.link, self.tasks_key)
  for _, task in pairs(self.open) do
    local have = task.entry and self.link:call("XRANGE", self.tasks_key, task.entry, task.entry)
    if type(have) ~= "table" or #have == 0 then
      self:send(task)
    end
  end
end

-- Entries idle past the visibility timeout (their worker stopped renewing
-- them: it is gone): this run's sent again as new entries, for another
-- worker, up to queue.max_losses times a task; those of runs that ended (their
-- stream gone) dropped; other runs' left to them.
function Pool:reclaim()
  local ms = math.floor(self.q.visibility * 1000)
  local idle, msg, code = self.link:call("XPENDING", self.tasks_key, queue.group, "IDLE", ms, "-", "+", 100)
  if idle == nil then
    if code == "NOGROUP" then queue.ensure_group(self.link, self.tasks_key); return end
    error("taking back the queue's tasks: " .. tostring(msg), 0)
  end
  for _, p in ipairs(idle) do
    local id = p[1]
    local e = self.link:call("XRANGE", self.tasks_key, id, id)
    local f = type(e) == "table" and e[1] and queue.fields(e[1][2])
    if not f or (f.reply ~= self.results_key and self.link:call("EXISTS", f.reply or "") == 0) then
      self:done_with(id)   -- (dropped by its run, or its run ended)
    elseif f.reply == self.results_key then
      local claimed = self.link:call("XCLAIM", self.tasks_key, queue.group, self.consumer, ms, id, "JUSTID")
      if type(claimed) == "table" and #claimed == 1 then   -- (else its worker renewed it just now)
        self:done_with(id)
        local ok, t = pcall(channel.decode, f.task or "")
        local task = ok and type(t) == "table" and self.open[t.tid]
        if task then
          task.lost = task.lost + 1
          if task.lost >= queue.max_losses then
            self:finish(task, { ok = false, code = "error",
                                reason = string.format("%s was taken by %d workers in turn and each stopped answering "
                                                       .. "(no heartbeat for %g s): it is not sent again", task.label,
                                                       task.lost, self.q.visibility) })
          else
            self:send(task)
          end
          io.stderr:write(string.format("kwb: queue %s: %s, unanswered %g s after its worker's last heartbeat, %s\n",
                                        self.q.url, task.label, self.q.visibility,
                                        task.result and "failed" or "sent again"))
        end
      end
    end
  end
end

M.idle_every = 0.05

-- wait(task) -> its result ({ ok, value } or { ok = false, code, reason }),
-- as kwb.runners.workers' pool gives it; pool.idle (when set) runs between polls.
function Pool:wait(task)
  while not task.result do
    local resending = false   -- (a task declined twice by one worker waits queue.redeliver_wait to go again)
    for _, t in pairs(self.open) do resending = resending or t.resend_at ~= nil end
    self:poll(self.idle and M.idle_every or resending and queue.redeliver_wait / 2 or 1)
    if self.idle then self.idle() end
    if core.now() >= self.next_reclaim then
      self.next_reclaim = core.now() + self.q.visibility / 2
      self:reclaim()
    end
  end
  return task.result
end

function Pool:call(fn, args, opts) return self:wait(self:submit(fn, args, opts)) end

-- ceilings(file, given) -> the device's ceilings, measured by a worker.
function Pool:ceilings(file)
  local r = self:call("kwb.worker.task.ceilings", { { recipe = file } },
                      { limit = 600, what = "measuring the device's ceilings" })
  if not r.ok then error("a worker could not measure its device's ceilings: " .. tostring(r.reason), 0) end
  return r.value
end

-- (no local device to lock: the workers' hosts hold their own)
function Pool:device_lock() return nil end

function Pool:close()
  if self.closed then return end
  self.closed = true
  for _, task in pairs(self.open) do   -- (tasks nobody waits for any more)
    if task.entry then
      self.link:try("XACK", self.tasks_key, queue.group, task.entry)
      self.link:try("XDEL", self.tasks_key, task.entry)
    end
  end
  self.link:try("DEL", self.results_key)
  self.link:close()
end

function Pool:__tostring()
  return string.format("kwb.runners.queue_pool (%s, %s, %d workers)", self.q.url, self.kind, self.n)
end

return M
