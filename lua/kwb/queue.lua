-- kwb/queue.lua: evaluation workers on other hosts, through Redis Streams.
-- The loop stays where it is; `kwb worker --queue URL` on each GPU host (one
-- per GPU; kwb.queue_worker) takes its tasks from a stream and answers on the
-- run's own result stream.
--
--   redis://[[USER]:PASSWORD@]HOST[:PORT]/NAME[?visibility=S&ca=FILE]
--   rediss://...   the same over TLS (the server's certificate checked
--                  against ca=FILE, else the system's roots)
--
-- The password may come from $KWB_QUEUE_PASSWORD instead of the URL; a queue
-- without one is refused (anyone who can reach an open Redis could hand the
-- workers code). Keys, for a queue NAME:
--
--   kwb:NAME:tasks:KK      a stream per device kind (KK: a hash of the backend
--                          and the kind), consumer group "workers"; an entry is
--                          { task = JSON { tid, fn, args, deadline, what },
--                            reply = the run's result stream }
--   kwb:NAME:results:RUN   a run's results: { tid, worker, result = JSON }
--   kwb:NAME:worker:WID    a worker's announcement and heartbeat (a hash that
--                          expires unless renewed)
--   kwb:NAME:workers       the set of worker ids
--   kwb:NAME:done          recent completions (a sorted set by time): throughput
--
-- Delivery is at least once. A worker keeps its entry fresh while it works
-- (XCLAIM to itself at each heartbeat); an entry idle past the visibility
-- timeout belonged to a worker that is gone, and the loop takes it back
-- (XAUTOCLAIM), sends it again as a new entry and drops the old. After the
-- connection was lost, every task still unanswered whose entry the server no
-- longer has is sent again. A result that comes twice is counted once: the
-- loop takes the first for each task, and results are keyed by content in
-- the cache anyway.
local core = require "kwb.core"
local worker = require "kwb.worker"

local M = {}

M.group = "workers"
M.visibility = 15        -- seconds an entry may sit unrefreshed before it is taken back
M.heartbeat = 1          -- seconds between a worker's heartbeats
M.worker_ttl = 10        -- a worker's announcement lives this long without a heartbeat
M.patience = 600         -- seconds a call waits for a lost server to come back
M.results_ttl = 86400    -- a run's result stream outlives an abandoned run this long

-- The task functions a worker runs for a queue: evaluations, nothing else.
M.tasks = { ["kwb.measure_task.measure"] = true, ["kwb.measure_task.sanitize"] = true,
            ["kwb.measure_task.build"] = true, ["kwb.measure_task.ceilings"] = true,
            ["kwb.measure_task.device"] = true, ["kwb.measure_task.profile"] = true,
            ["kwb.measure_task.baseline"] = true }   -- (a recipe's baseline: kwb.baseline)

local function unescape(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- parse(url) -> { tls, user, password, host, port, name, visibility, ca, url } | nil, message.
-- The message never holds the password.
function M.parse(url)
  if type(url) ~= "string" then return nil, "a queue is a redis:// or rediss:// URL" end
  local scheme, rest = url:match("^(rediss?)://(.*)$")
  if not scheme then
    return nil, string.format("queue %s: not a redis://HOST[:PORT]/NAME or rediss:// URL", M.display(url))
  end
  local q = { tls = scheme == "rediss", port = 6379, visibility = M.visibility }
  local auth, hostpart, name, query = rest:match("^([^@/]*)@([^/]*)/([^?]*)%??(.*)$")
  if not auth then
    hostpart, name, query = rest:match("^([^/]*)/([^?]*)%??(.*)$")
  end
  if not hostpart then return nil, string.format("queue %s: no /NAME after the host", M.display(url)) end
  if auth then
    local user, pass = auth:match("^([^:]*):(.*)$")
    if not user then return nil, string.format("queue %s: credentials are [USER]:PASSWORD@", M.display(url)) end
    q.user = user ~= "" and unescape(user) or nil
    q.password = unescape(pass)
  end
  local host, port = hostpart:match("^%[(.+)%]:?(%d*)$")   -- [::1]:6379
  if not host then host, port = hostpart:match("^([^:]+):?(%d*)$") end
  if not host then return nil, string.format("queue %s: no host", M.display(url)) end
  q.host = host
  if port ~= "" then
    q.port = math.tointeger(tonumber(port))
    if not q.port or q.port < 1 or q.port > 65535 then
      return nil, string.format("queue %s: port %s is out of range", M.display(url), port)
    end
  end
  if not name:match("^[%w_.%-]+$") then
    return nil, string.format("queue %s: the queue's NAME is letters, digits, '_', '.' or '-', got '%s'",
                              M.display(url), name)
  end
  q.name = name
  for k, v in query:gmatch("([^&=]+)=([^&]*)") do
    if k == "visibility" then
      q.visibility = tonumber(v)
      if not q.visibility or q.visibility <= 0 then
        return nil, string.format("queue %s: visibility is a positive number of seconds, got '%s'", M.display(url), v)
      end
    elseif k == "ca" then q.ca = unescape(v)
    else return nil, string.format("queue %s: unknown setting '%s' (known: visibility, ca)", M.display(url), k) end
  end
  if q.ca and not q.tls then return nil, string.format("queue %s: ca= is for rediss:// (TLS)", M.display(url)) end
  if not q.password then q.password = os.getenv("KWB_QUEUE_PASSWORD") end
  if not q.password or q.password == "" then
    return nil, string.format("queue %s: no password (give redis://[USER]:PASSWORD@HOST:PORT/NAME or "
                              .. "$KWB_QUEUE_PASSWORD): a queue anyone can reach could hand the workers code",
                              M.display(url))
  end
  q.url = M.display(url)
  return q
end

-- display(url) -> the URL with its password masked.
function M.display(url)
  return (tostring(url):gsub("^(rediss?://[^@/]*:)[^@/]*@", "%1***@"))
end

-- ---- a connection that comes back -----------------------------------------

local Link = {}
Link.__index = Link

local function open(q)
  local r, msg, info = core.redis_connect { host = q.host, port = q.port, tls = q.tls, ca = q.ca, timeout = 5 }
  if not r then return nil, msg, info end
  local ok, amsg = nil, nil
  if q.user then ok, amsg = r:call("AUTH", q.user, q.password) else ok, amsg = r:call("AUTH", q.password) end
  if not ok then
    r:close()
    if amsg and (amsg:find("WRONGPASS") or amsg:find("invalid password") or amsg:find("invalid username")) then
      return nil, string.format("the queue at %s:%d refused the password%s (%s)", q.host, q.port,
                                q.user and (" of user " .. q.user) or "", amsg), { code = "auth" }
    end
    if amsg and amsg:find("without any password configured") then
      return nil, string.format("the Redis at %s:%d has no password set: kwb uses only a queue that asks for one "
                                .. "(requirepass or an ACL user)", q.host, q.port), { code = "auth" }
    end
    return nil, string.format("the queue at %s:%d: AUTH failed: %s", q.host, q.port, tostring(amsg)), { code = "auth" }
  end
  return r
end

-- connect(q [, { on_reconnect = fn(link) }]) -> link, or raises (an unreachable
-- server or a refused password: kwb cannot go on without its queue).
function M.connect(q, opts)
  local r, msg = open(q)
  if not r then error("queue " .. q.url .. ": " .. msg, 0) end
  local l = setmetatable({ q = q, r = r, reconnects = 0, on_reconnect = opts and opts.on_reconnect }, Link)
  return l
end

-- One try to open the connection again: true, or false and why (a refused
-- password raises: waiting will not mend it).
function Link:reopen()
  local r, msg, info = open(self.q)
  if not r then
    if info and info.code == "auth" then error(msg, 0) end
    return false, msg
  end
  self.r = r
  self.reconnects = self.reconnects + 1
  if self.on_reconnect then self.on_reconnect(self) end
  return true
end

-- call(...) -> reply | nil, message (a Redis error reply, as `code`: the
-- reply's first word, "NOGROUP", "BUSYGROUP"). A lost connection is opened
-- again, with backoff, for up to M.patience seconds, and the command sent
-- again (every command kwb sends may be repeated); past that it raises.
function Link:call(...)
  local t0, wait, last = core.now(), 0.1, nil
  while true do
    if self.r:isopen() then
      local v, msg, info = self.r:call(...)
      if v ~= nil then return v end
      if info.code == "redis-error" then return nil, msg, msg:match("^(%u+)") end
      last = msg
    end
    if core.now() - t0 > M.patience then
      error(string.format("lost the queue %s for %.0f s: %s", self.q.url, core.now() - t0, tostring(last)), 0)
    end
    if not self.lost then   -- said once, and again when it is back
      io.stderr:write(string.format("kwb: queue %s: %s; trying again\n", self.q.url, tostring(last)))
      self.lost = t0
    end
    core.sleep(wait)
    wait = math.min(wait * 2, 2)
    local ok, why = self:reopen()
    if ok then
      io.stderr:write(string.format("kwb: queue %s: back after %.1f s\n", self.q.url, core.now() - self.lost))
      self.lost = nil
    else
      last = why
    end
  end
end

-- try(...) -> reply | nil: one attempt (a lost connection is tried again
-- at most once a second); for heartbeats, which must never hold up a worker.
function Link:try(...)
  if not self.r:isopen() then
    if self.next_try and core.now() < self.next_try then return nil end
    self.next_try = core.now() + 1
    if not self:reopen() then return nil end
  end
  return (self.r:call(...))
end

function Link:close() self.r:close() end

-- ---- keys -----------------------------------------------------------------

function M.key(q, ...) return "kwb:" .. q.name .. ":" .. table.concat({ ... }, ":") end

-- The stream of a backend's device kind.
function M.tasks_key(q, backend, kind)
  return M.key(q, "tasks", core.sha256(backend .. "\n" .. kind):sub(1, 16))
end

-- fields(array) -> { name = value } of a Redis hash or stream entry.
function M.fields(a)
  local t = {}
  for i = 1, #a - 1, 2 do t[a[i]] = a[i + 1] end
  return t
end

-- ensure_group(link, key): the stream and its consumer group, from the
-- stream's first entry (a group made after a server restart sees what was
-- sent again before it).
function M.ensure_group(link, key)
  local ok, msg, code = link:call("XGROUP", "CREATE", key, M.group, "0", "MKSTREAM")
  if not ok and code ~= "BUSYGROUP" then error("the queue's group on " .. key .. ": " .. tostring(msg), 0) end
end

-- ---- the fleet --------------------------------------------------------------

-- workers(link, q) -> the live workers: { id, host, pid, backend, kind, busy,
-- done, started, age (seconds since its last heartbeat) } each, oldest first. Ids whose announcement expired
-- are dropped from the set.
function M.workers(link, q)
  local out = {}
  for _, id in ipairs(link:call("SMEMBERS", M.key(q, "workers")) or {}) do
    local h = link:call("HGETALL", M.key(q, "worker", id))
    if type(h) ~= "table" or #h == 0 then
      link:call("SREM", M.key(q, "workers"), id)
    else
      local w = M.fields(h)
      w.id = id
      w.pid, w.done = math.tointeger(tonumber(w.pid)), math.tointeger(tonumber(w.done)) or 0
      w.started = tonumber(w.started)
      local ttl = link:call("TTL", M.key(q, "worker", id))
      w.age = type(ttl) == "number" and ttl >= 0 and M.worker_ttl - ttl or nil
      out[#out + 1] = w
    end
  end
  table.sort(out, function(a, b) return (a.started or 0) < (b.started or 0) end)
  return out
end

-- The server's clock, in seconds: every time kept in the queue is the
-- server's, so hosts whose clocks differ agree on ages.
function M.now(link)
  local t = link:call("TIME")
  return tonumber(t[1]) + tonumber(t[2]) / 1e6
end

-- fleet(link, q) -> { workers = {...}, kinds = { { backend, kind, workers, waiting, in_flight } },
-- done_minute = tasks finished in the last minute, now = server time }
function M.fleet(link, q)
  local now = M.now(link)
  local ws = M.workers(link, q)
  local kinds, by = {}, {}
  for _, w in ipairs(ws) do
    local k = w.backend .. "\n" .. w.kind
    if not by[k] then
      by[k] = { backend = w.backend, kind = w.kind, workers = 0, waiting = 0, in_flight = 0 }
      kinds[#kinds + 1] = by[k]
      local info = link:call("XINFO", "GROUPS", M.tasks_key(q, w.backend, w.kind))
      for _, g in ipairs(type(info) == "table" and info or {}) do
        local f = M.fields(g)
        if f.name == M.group then
          by[k].in_flight = f.pending or 0
          by[k].waiting = type(f.lag) == "number" and f.lag or 0
        end
      end
    end
    by[k].workers = by[k].workers + 1
  end
  local done = link:call("ZCOUNT", M.key(q, "done"), string.format("%.6f", now - 60), "+inf") or 0
  return { workers = ws, kinds = kinds, done_minute = done, now = now }
end

-- ---- the loop's side: a pool whose workers are the fleet ------------------

local Pool = {}
Pool.__index = Pool
M.Pool = Pool

-- identity(file) -> { path, sha256 }: the recipe a worker must have, by its
-- path (relative to where kwb was started when it lies there) and content.
function M.identity(file)
  local text = assert(require("kwb.host").read_file(file))
  local origin = os.getenv("KWB_ORIGIN") or core.cwd() or ""
  local path = file
  if origin ~= "" and file:sub(1, #origin + 1) == origin .. "/" then path = file:sub(#origin + 2) end
  return { path = path, sha256 = core.sha256(text) }
end

-- pool { url =, backend =, device = KIND (a part of it) } ->
-- a pool for kwb.session: submit, wait, call, close, ceilings, like kwb.workers'.
-- Its kind is the one device kind of the recipe's backend the fleet has (or
-- the one `device` names); n, its workers now.
function M.pool(opts)
  local q = assert(M.parse(opts.url))
  local link = M.connect(q)
  local backend = opts.backend or "host"
  local kinds, found = {}, {}
  for _, w in ipairs(M.workers(link, q)) do
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
                           tasks_key = M.tasks_key(q, backend, kind), results_key = M.key(q, "results", run),
                           consumer = "loop-" .. run, last = "0-0", next_tid = 0, by_tid = {}, open = {},
                           seen_reconnects = 0,
                           next_reclaim = core.now() + q.visibility / 2 }, Pool)
  M.ensure_group(link, p.tasks_key)
  return p
end

-- The task's entry on its stream (again).
function Pool:send(task)
  task.entry = self.link:call("XADD", self.tasks_key, "*", "task", task.body, "reply", self.results_key)
end

-- submit(fn, args [, { deadline =, what = }]) -> task. A task's recipe file
-- travels as its identity (kwb.queue.identity); the worker loads its own copy.
function Pool:submit(fn, args, opts)
  opts = opts or {}
  if not M.tasks[fn] then error("a queue's workers run evaluations only, not " .. tostring(fn), 2) end
  local a = {}
  for k, v in pairs(args[1] or {}) do a[k] = v end
  if type(a.recipe) == "string" then a.recipe = M.identity(a.recipe) end
  self.next_tid = self.next_tid + 1
  local tid = self.results_key:match("[^:]+$") .. "-" .. self.next_tid
  local body, why = worker.frame { tid = tid, fn = fn, args = { a }, deadline = opts.deadline or 600,
                                   what = opts.what or "its task" }
  local task = { id = self.next_tid, tid = tid, fn = fn, started = core.now(), body = body }
  if not body then   -- (a worker's own frame of it would be as large: never sent, as kwb.workers does)
    task.result = { ok = false, code = "too-large", reason = why, seconds = 0 }
    return task
  end
  self.by_tid[tid], self.open[tid] = task, task
  self:send(task)
  return task
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
  if type(r) ~= "table" then return end
  for _, stream in ipairs(r) do
    for _, e in ipairs(stream[2]) do
      self.last = e[1]
      local f = M.fields(e[2])
      local task = self.by_tid[f.tid]
      if task and not task.result then
        local ok, res = pcall(worker.decode, f.result or "")
        task.result = ok and type(res) == "table" and res
                      or { ok = false, code = "error", reason = "a worker's result that is not JSON: " .. tostring(res) }
        task.result.worker = f.worker
        task.result.seconds = core.now() - task.started
        self.open[f.tid] = nil
        if task.entry then self.link:call("XDEL", self.tasks_key, task.entry) end
      end   -- (a second result for a task: counted once, by the first)
    end
  end
end

-- describe(task) -> "the measurement of candidate 8646051c" and the like.
function M.describe(task)
  if type(task) ~= "table" then return "a task" end
  local what = tostring(task.fn):match("([%w_]+)$") or "task"
  local a = type(task.args) == "table" and type(task.args[1]) == "table" and task.args[1] or {}
  local short = type(a.cand) == "table" and a.cand.short
  return string.format("the %s task%s", what, short and (" of candidate " .. tostring(short)) or "")
end

-- After a reconnection: the group again, and every task still open whose
-- entry the server no longer holds, sent again.
function Pool:recover()
  M.ensure_group(self.link, self.tasks_key)
  for _, task in pairs(self.open) do
    local have = task.entry and self.link:call("XRANGE", self.tasks_key, task.entry, task.entry)
    if type(have) ~= "table" or #have == 0 then
      self:send(task)
    end
  end
end

-- Entries idle past the visibility timeout (their worker stopped renewing
-- them: it is gone) sent again as new entries, for another worker.
function Pool:reclaim()
  local cursor = "0-0"
  repeat
    local r, msg, code = self.link:call("XAUTOCLAIM", self.tasks_key, M.group, self.consumer,
                                        math.floor(self.q.visibility * 1000), cursor, "COUNT", 50)
    if r == nil then
      if code == "NOGROUP" then M.ensure_group(self.link, self.tasks_key); return end
      error("taking back the queue's tasks: " .. tostring(msg), 0)
    end
    cursor = r[1]
    for _, e in ipairs(r[2] or {}) do
      local id, fields = e[1], e[2]
      if type(fields) == "table" then
        local f = M.fields(fields)
        local ok, t = pcall(worker.decode, f.task or "")
        local new = self.link:call("XADD", self.tasks_key, "*", "task", f.task or "", "reply", f.reply or "")
        local mine = ok and type(t) == "table" and self.by_tid[t.tid]
        if mine then mine.entry = new end
        io.stderr:write(string.format("kwb: queue %s: %s, unanswered %g s after its worker's last heartbeat, sent "
                                      .. "again\n", self.q.url, ok and M.describe(t) or "a task", self.q.visibility))
      end
      self.link:call("XACK", self.tasks_key, M.group, id)
      self.link:call("XDEL", self.tasks_key, id)
    end
  until cursor == "0-0"
end

M.idle_every = 0.05

-- wait(task) -> its result ({ ok, value } or { ok = false, code, reason }),
-- as kwb.workers' pool gives it; pool.idle (when set) runs between polls.
function Pool:wait(task)
  while not task.result do
    self:poll(self.idle and M.idle_every or 1)
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
  local r = self:call("kwb.measure_task.ceilings", { { recipe = file } },
                      { deadline = 600, what = "measuring the device's ceilings" })
  if not r.ok then error("a worker could not measure its device's ceilings: " .. tostring(r.reason), 0) end
  return r.value
end

-- (no local device to lock: the workers' hosts hold their own)
function Pool:device_lock() return nil end

function Pool:close()
  if self.closed then return end
  self.closed = true
  for _, task in pairs(self.open) do   -- (tasks nobody waits for any more)
    if task.entry then self.link:try("XDEL", self.tasks_key, task.entry) end
  end
  self.link:try("DEL", self.results_key)
  self.link:close()
end

function Pool:__tostring()
  return string.format("kwb.queue.pool (%s, %s, %d workers)", self.q.url, self.kind, self.n)
end

return M
