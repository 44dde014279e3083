-- kwb/runners/queue.lua: evaluation workers on other hosts, through Redis Streams.
-- The loop stays where it is; `kwb worker --queue URL` on each GPU host (one
-- per GPU; kwb.worker.queue) takes its tasks from a stream and answers on the
-- run's own result stream.
--
--   redis://[USER@]HOST[:PORT]/NAME[?visibility=S&ca=FILE]
--   rediss://...   the same over TLS (the server's certificate checked
--                  against ca=FILE, else the system's roots)
--
-- The password comes from $KWB_QUEUE_PASSWORD or a file (--queue-password-file),
-- never from the URL: a URL is an argument, and arguments show in the process
-- list (/proc/PID/cmdline) to anyone on the host. A queue without one is
-- refused (anyone who can reach an open Redis could hand the workers code).
-- Keys, for a queue NAME:
--
--   kwb:NAME:tasks:KK      a stream per device kind (KK: a hash of the backend
--                          and the kind), consumer group "workers"; an entry is
--                          { task = JSON { tid, fn, args, limit, what },
--                            reply = the run's result stream }
--   kwb:NAME:results:RUN   a run's results: { tid, entry, worker, result = JSON,
--                          mac } (and one first entry with no tid: the run is on)
--   kwb:NAME:worker:WID    a worker's announcement and heartbeat (a hash that
--                          expires unless renewed)
--   kwb:NAME:workers       the set of worker ids
--   kwb:NAME:done          recent completions (a sorted set by time): throughput
--
-- Who may answer. Every worker holds a key of its own: HMAC-SHA-256 of its
-- name under the fleet's key, which only the loop holds ($KWB_FLEET_KEY or
-- --fleet-key-file; `kwb fleet --worker-key NAME` derives a worker's). A
-- worker's id starts with its name; it signs each result with its key, over
-- the run's stream, the task's id, the task's entry, its own id, the SHA-256
-- of the task as it read it and the result. The loop counts a result only
-- when the signature is that of the worker the id names, the task is the one
-- it sent, the entry is still pending in the hands of that worker (a worker
-- leaves its entry pending; the loop acknowledges it) and the task has no
-- result yet. The queue's password alone (what every worker, and anyone who
-- read it, holds) thus answers for nothing.
--
-- Delivery is at least once. A worker keeps its entry fresh while it works
-- (XCLAIM to itself at each heartbeat); an entry of this run idle past the
-- visibility timeout belonged to a worker that is gone, and the loop takes
-- it back, sends it again as a new entry and drops the old, M.max_losses
-- times at most: a task lost that often (it kills every worker that takes
-- it) fails. A worker that refuses a task (a recipe it does not have, or a
-- different copy) or fails it (kwb's own code failed there) leaves it to
-- another; once every live worker of the kind has, the task fails, naming
-- each one's reason. After the connection was lost, every task still
-- unanswered whose entry the server no longer has is sent again.
local core = require "kwb.core"
local secrets = require "kwb.base.secrets"

local M = {}

M.group = "workers"
M.visibility = 15        -- seconds an entry may sit unrefreshed before it is taken back
M.heartbeat = 1          -- seconds between a worker's heartbeats
M.worker_ttl = 10        -- a worker's announcement lives this long without a heartbeat
M.patience = 600         -- seconds a call waits for a lost server to come back
M.results_ttl = 86400    -- a run's result stream outlives an abandoned run this long
M.max_losses = 3         -- a task whose workers vanished this many times fails
M.redeliver_wait = 0.5   -- seconds before a task is sent again after a worker declined it a second time
M.key_min = 32           -- the fleet key's least length (characters)

-- The task functions a worker runs for a queue: evaluations, nothing else.
M.tasks = { ["kwb.worker.task.measure"] = true, ["kwb.worker.task.sanitize"] = true,
            ["kwb.worker.task.build"] = true, ["kwb.worker.task.ceilings"] = true,
            ["kwb.worker.task.device"] = true, ["kwb.worker.task.profile"] = true,
            ["kwb.worker.task.baseline"] = true,   -- (a recipe's baseline: kwb.measure.baseline)
            ["kwb.worker.task.rounds"] = true }    -- (kernels timed in turns: kwb.measure.rounds)

local function unescape(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- parse(url [, { password_file = FILE, syntax = true }]) -> { tls, user,
-- password, host, port, name, visibility, ca, url } | nil, message. The
-- password is read from password_file, else $KWB_QUEUE_PASSWORD, and
-- registered with kwb.base.secrets (syntax: the URL checked, no password read);
-- one in the URL is refused. No message holds a password.
function M.parse(url, opts)
  opts = opts or {}
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
    if auth:find(":", 1, true) then
      return nil, string.format("queue %s: a password in the URL would show in the process list; give it in "
                                .. "$KWB_QUEUE_PASSWORD or a file (--queue-password-file FILE), and the URL as "
                                .. "redis://[USER@]HOST:PORT/NAME", M.display(url))
    end
    q.user = auth ~= "" and unescape(auth) or nil
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
  q.url = M.display(url)
  if opts.syntax then return q end
  if opts.password_file then
    local pw, why = secrets.read_file(opts.password_file, "--queue-password-file " .. opts.password_file)
    if not pw then return nil, why end
    q.password = pw
  else
    q.password = os.getenv("KWB_QUEUE_PASSWORD")
  end
  if not q.password or q.password == "" then
    return nil, string.format("queue %s: no password (give it in $KWB_QUEUE_PASSWORD or a file, "
                              .. "--queue-password-file FILE): a queue anyone can reach could hand the workers code",
                              M.display(url))
  end
  secrets.add(q.password)
  return q
end

-- display(url) -> the URL with any password in it masked.
function M.display(url)
  return (tostring(url):gsub("^(rediss?://[^@/]*:)[^@/]*@", "%1***@"))
end

-- ---- credentials: who may answer ------------------------------------------

local function valid_name(n) return type(n) == "string" and #n <= 64 and n:match("^[%w_.%-]+$") ~= nil end

-- fleet_key([file]) -> the fleet's key (from file, else $KWB_FLEET_KEY) | nil, message.
function M.fleet_key(file)
  local key, why
  if file then
    key, why = secrets.read_file(file, "--fleet-key-file " .. file)
    if not key then return nil, why end
  else
    key = os.getenv("KWB_FLEET_KEY")
    if not key or key == "" then
      return nil, "no fleet key: a fleet's results count only when a worker signs them with a key derived from it; "
                  .. "give it in $KWB_FLEET_KEY or a file (--fleet-key-file FILE); make one with `openssl rand -hex "
                  .. "32`, and each worker's with `kwb fleet --worker-key NAME`"
    end
  end
  if #key < M.key_min then
    return nil, string.format("the fleet key%s has %d characters; it needs at least %d (openssl rand -hex 32)",
                              file and (" in " .. file) or " in $KWB_FLEET_KEY", #key, M.key_min)
  end
  secrets.add(key)
  return key
end

-- worker_key(fleet_key, name) -> the key of the worker called name.
function M.worker_key(fleet_key, name)
  if not valid_name(name) then error("a worker's name is letters, digits, '_', '.' or '-' (64 at most)", 2) end
  return core.hmac_sha256(fleet_key, "kwb fleet worker\n" .. name)
end

-- credential([file]) -> { name =, key = }: a worker's own, NAME:KEY as
-- `kwb fleet --worker-key NAME` prints it, from file, else $KWB_WORKER_KEY |
-- nil, message.
function M.credential(file)
  local text, why
  if file then
    text, why = secrets.read_file(file, "--worker-key-file " .. file)
    if not text then return nil, why end
  else
    text = os.getenv("KWB_WORKER_KEY")
    if not text or text == "" then
      return nil, "no worker key: a fleet's worker signs its results with its own key; give NAME:KEY (from `kwb fleet "
                  .. "--worker-key NAME` where the fleet's key is) in $KWB_WORKER_KEY or a file (--worker-key-file FILE)"
    end
  end
  local name, key = text:match("^([^:]+):(%x+)$")
  if not valid_name(name) or #key ~= 64 then
    return nil, string.format("the worker key%s is not NAME:KEY (a name of letters, digits, '_', '.' or '-', and 64 "
                              .. "hex digits, as `kwb fleet --worker-key NAME` prints it)",
                              file and (" in " .. file) or " in $KWB_WORKER_KEY")
  end
  secrets.add(key)
  secrets.add(text)
  return { name = name, key = key }
end

-- name_of(id) -> the credential name a worker's id starts with (NAME/...) | nil.
function M.name_of(id)
  local name = type(id) == "string" and #id <= 200 and id:match("^([%w_.%-]+)/[%w_.%-]+$")
  return name and valid_name(name) and name or nil
end

-- sign(key, f) -> the signature of a result's fields: its stream, tid, entry,
-- worker, the task's SHA-256 and the result itself.
function M.sign(key, f)
  return core.hmac_sha256(key, table.concat({ "kwb result 1", f.reply, f.tid, f.entry, f.worker, f.task_sha256,
                                              f.result }, "\n"))
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

-- ---- for the loop's side (kwb.runners.queue_pool) -----------------------------------

-- under_dir(path) -> whether a recipe's path names a file under the
-- directory it is taken from: relative, with no `..` and no NUL. A worker
-- takes no other (queue_worker.resolve); the loop sends no other (identity).
function M.under_dir(path)
  return path ~= "" and path:sub(1, 1) ~= "/" and not ("/" .. path .. "/"):find("/../", 1, true)
         and not path:find("%z")
end

-- identity(file) -> { path, sha256 }: the recipe a worker must have, by its
-- path (relative to where kwb was started when it lies there) and content.
function M.identity(file)
  local text = assert(require("kwb.base.files").read_file(file))
  local origin = os.getenv("KWB_ORIGIN") or core.cwd() or ""
  local path = file
  if origin ~= "" and file:sub(1, #origin + 1) == origin .. "/" then path = file:sub(#origin + 2) end
  if not M.under_dir(path) then
    error(string.format("the recipe %s is not under the directory kwb runs from (%s): a fleet's workers find "
                        .. "recipes by a path relative to their --recipes directory, so run the loop from there",
                        file, origin), 0)
  end
  return { path = path, sha256 = core.sha256(text) }
end

-- describe(task) -> "the measurement of candidate 8646051c" and the like.
function M.describe(task)
  if type(task) ~= "table" then return "a task" end
  local what = tostring(task.fn):match("([%w_]+)$") or "task"
  local a = type(task.args) == "table" and type(task.args[1]) == "table" and task.args[1] or {}
  local short = type(a.cand) == "table" and a.cand.short
  return string.format("the %s task%s", what, short and (" of candidate " .. tostring(short)) or "")
end

return M
