-- kwb/worker/queue.lua: `kwb worker --queue URL`, a worker of a fleet
-- (kwb.runners.queue). One runs on each GPU host, one per GPU (or on any host for the
-- host backend). It announces its device kind, takes the tasks of that kind
-- from the queue one at a time, evaluates each in its usual worker process
-- (kwb.runners.workers: an unprivileged uid, the sandbox, the deadlines; a fresh
-- process after a crash) and answers on the run's result stream.
--
-- It runs evaluations only (kwb.runners.queue.tasks), and of recipes it has itself:
-- a task names its recipe by path and SHA-256, and the worker loads its own
-- copy (under --recipes DIR, default the working directory) when the hashes
-- agree; nothing from the queue is run as kwb's own code. Its environment
-- keeps the queue's password and its key from the evaluation processes
-- (kwb.runners.workers passes no variable that names a password or a key), and
-- neither is ever an argument: both come from the environment or a file.
--
-- Its id is NAME/HOST-PID-NONCE, NAME its key's (kwb.runners.queue.credential). It
-- signs each answer with its key (kwb.runners.queue.sign) and leaves the task's entry
-- pending: the loop checks that the entry is in this worker's hands, then
-- acknowledges it. A task it refuses or fails goes back to the loop with code
-- `refused` or `error`, for another worker.
local core = require "kwb.core"
local queue = require "kwb.runners.queue"
local secrets = require "kwb.base.secrets"
local workers = require "kwb.runners.workers"
local channel = require "kwb.base.channel"
local worker = require "kwb.worker"

local M = {}

local function usage(msg)
  io.stderr:write("kwb worker: ", msg, "\ntry 'kwb worker --help'\n")
  return 2
end

-- resolve(identity, dir) -> the local file of a task's recipe | nil, why.
-- A recipe is Lua that the worker runs, so a task may name only a file under
-- the worker's --recipes DIR: a relative path with no `..` (never an absolute
-- one, a device or another file the host happens to have), read up to
-- M.max_recipe bytes before its hash is compared.
M.max_recipe = 4 << 20

function M.resolve(id, dir)
  if type(id) ~= "table" or type(id.path) ~= "string" or type(id.sha256) ~= "string" then
    return nil, "the task names no recipe (a path and its SHA-256)"
  end
  local path = id.path
  if not queue.under_dir(path) then
    return nil, string.format("the task's recipe path %q is not a path under this worker's recipes directory "
                              .. "(relative, with no '..': run the loop from the directory the workers' --recipes "
                              .. "names)", path:sub(1, 200))
  end
  local file = dir .. "/" .. path
  local f = io.open(file, "rb")
  local text = f and f:read(M.max_recipe + 1)
  if f then f:close() end
  if not text then return nil, string.format("the recipe %s is not on this worker (looked for %s)", path, file) end
  if #text > M.max_recipe then
    return nil, string.format("the recipe %s is over %d bytes on this worker", path, M.max_recipe)
  end
  local have = core.sha256(text)
  if have ~= id.sha256 then
    return nil, string.format("this worker's copy of %s (%s) differs from the run's (SHA-256 %s here, %s in the run)",
                              path, file, have:sub(1, 12), id.sha256:sub(1, 12))
  end
  return file
end

-- check(task, dir) -> the arguments to run with (the recipe made a local
-- file) | nil, why: what a worker refuses to run.
function M.check(task, dir)
  if type(task) ~= "table" or type(task.tid) ~= "string" then return nil, "a task needs a tid" end
  if not queue.tasks[task.fn] then
    return nil, string.format("a queue's worker runs evaluations only, not %s", tostring(task.fn))
  end
  if type(task.args) ~= "table" or type(task.args[1]) ~= "table" then return nil, "a task's args are { { ... } }" end
  local a = task.args[1]
  if task.fn ~= "kwb.worker.task.device" then
    local file, why = M.resolve(a.recipe, dir)
    if not file then return nil, why end
    a.recipe = file
  end
  return { a }
end

-- main(words...) -> exit status: `kwb worker --queue URL [--queue-password-file F]
-- [--worker-key-file F] [--backend B] [--gpu N] [--recipes DIR] [--tasks N]`;
-- `kwb worker` alone is a local pool's worker (kwb.worker), which the pool starts.
function M.main(...)
  local first = ...
  if first == nil or first == "--help" or first == "-h" then return worker.main(...) end   -- a local pool's worker
  local known = { "--queue", "--queue-password-file", "--worker-key-file", "--backend", "--gpu", "--recipes", "--tasks" }
  local pos, opts = require("kwb.base.args").parse({ ... }, {
    queue = { "value", as = "url" }, ["queue-password-file"] = { "value", as = "password_file" },
    ["worker-key-file"] = { "value", as = "key_file" }, backend = "value", recipes = "value",
    gpu = { "value", conv = function(v) return math.tointeger(tonumber(v)) or -1 end },
    tasks = { "value", conv = function(v) return math.tointeger(tonumber(v)) or 0 end },
  }, { known = known })
  if pos and #pos > 0 then pos, opts = nil, string.format("unknown option '%s' (known: %s)", pos[1], table.concat(known, ", ")) end
  if not pos then return usage(opts) end
  opts.recipes = opts.recipes or core.cwd()
  if not opts.url then return usage("a fleet's worker needs --queue URL") end
  local q, perr = queue.parse(opts.url, { password_file = opts.password_file })
  if not q then return usage(perr) end
  local cred, kerr = queue.credential(opts.key_file)
  if not cred then return usage(kerr) end
  opts.credential = cred
  if opts.backend == nil then
    local n = require("kwb.cuda").device_count()
    opts.backend = n and n > 0 and "cuda" or "host"
  end
  if opts.backend ~= "host" and opts.backend ~= "cuda" then return usage("--backend is host or cuda") end
  if opts.gpu and (opts.gpu < 0 or opts.backend ~= "cuda") then
    return usage("--gpu N is a GPU's index (0, 1, ...), for --backend cuda")
  end
  if opts.tasks and opts.tasks < 1 then return usage("--tasks needs a positive integer") end
  local ok, err = pcall(M.serve, q, opts)
  if not ok then
    io.stderr:write("kwb worker: ", tostring(err), "\n")
    return 1
  end
  return 0
end

-- serve(q, opts): announce, then take tasks until opts.tasks are done (or for ever).
function M.serve(q, opts)
  local kind, wkey, tasks
  local host = (core.hostname() or "host"):gsub("[^%w_.%-]", "-")
  local id = string.format("%s/%s-%d-%s", opts.credential.name, host, core.pid(),
                           core.sha256(string.format("%.9f", core.now())):sub(1, 6))
  local function announce(l)
    l:call("HSET", wkey, "host", core.hostname() or "?", "pid", core.pid(), "backend", opts.backend, "kind", kind,
           "busy", "")
    l:call("HSETNX", wkey, "started", string.format("%.6f", queue.now(l)))
    l:call("HSETNX", wkey, "done", 0)
    l:call("EXPIRE", wkey, queue.worker_ttl)
    l:call("SADD", queue.key(q, "workers"), id)
    queue.ensure_group(l, tasks)
  end
  -- the queue first (a wrong URL or password is known at once), then the
  -- evaluation process, which says what device it has
  local link = queue.connect(q, { on_reconnect = function(l) if kind then announce(l) end end })
  local pool = workers.pool { backend = opts.backend, n = 1, first_device = opts.gpu }
  local answer = pool:call("kwb.worker.task.device", { { backend = opts.backend } },
                           { limit = 120, what = "reading the device" })
  if not answer.ok then error("cannot read the device: " .. tostring(answer.reason), 0) end
  kind = answer.value
  wkey, tasks = queue.key(q, "worker", id), queue.tasks_key(q, opts.backend, kind)
  announce(link)
  io.stderr:write(string.format("kwb worker %s: %s on %s, queue %s\n", id, opts.backend, kind, q.url))
  local entry, next_beat = nil, 0
  -- a heartbeat: the announcement renewed, and the entry in hand kept fresh
  -- (its idle time reset), so the loop never takes back a task still at work
  local function beat()
    if core.now() < next_beat then return end
    next_beat = core.now() + queue.heartbeat
    -- (its age, for kwb fleet: the TTL it has left; gone, it is announced again)
    if link:try("EXPIRE", wkey, queue.worker_ttl) == 0 then announce(link) end
    link:try("HSET", wkey, "busy", entry or "")
    if entry then link:try("XCLAIM", tasks, queue.group, id, 0, entry, "JUSTID") end
  end
  pool.idle = beat
  local done = 0
  while not opts.tasks or done < opts.tasks do
    beat()
    local r, msg, code = link:call("XREADGROUP", "GROUP", queue.group, id, "COUNT", 1, "BLOCK", 1000,
                                   "STREAMS", tasks, ">", { block = 1 })
    if r == nil and code == "NOGROUP" then queue.ensure_group(link, tasks)   -- (the server lost it: restarted)
    elseif r == nil then error("reading the queue: " .. tostring(msg), 0)
    elseif type(r) == "table" then
      local e = r[1][2][1]
      entry = e[1]
      local f = queue.fields(e[2])
      local okd, task = pcall(channel.decode, f.task or "")
      local result
      local okc, args, why = pcall(M.check, okd and task or nil, opts.recipes)
      if not okc then args, why = nil, "the task cannot be read: " .. tostring(args) end
      if not args then
        result = { ok = false, code = "refused", reason = why }
      else
        next_beat = 0
        beat()
        result = pool:wait(pool:submit(task.fn, args, { limit = tonumber(task.limit) or 600,
                                                         what = tostring(task.what or "its task") }))
      end
      -- the answer, signed; the entry stays pending in this worker's hands
      -- until the loop has checked that and acknowledges it
      if f.reply and f.reply ~= "" then
        local a = { reply = f.reply, tid = okd and type(task) == "table" and tostring(task.tid) or "", entry = entry,
                    worker = id, task_sha256 = core.sha256(f.task or ""),
                    result = secrets.scrub(channel.encode(secrets.scrub_all(result))) }
        link:call("XADD", f.reply, "*", "tid", a.tid, "entry", entry, "worker", id, "task_sha256", a.task_sha256,
                  "result", a.result, "mac", queue.sign(opts.credential.key, a))
        link:call("EXPIRE", f.reply, queue.results_ttl)
      else
        link:call("XACK", tasks, queue.group, entry)   -- (no one to answer: nothing to keep it for)
      end
      local now = queue.now(link)
      link:call("HINCRBY", wkey, "done", 1)
      link:call("ZADD", queue.key(q, "done"), string.format("%.6f", now), id .. " " .. entry)
      link:call("ZREMRANGEBYSCORE", queue.key(q, "done"), "-inf", string.format("%.6f", now - 600))
      entry, next_beat = nil, 0   -- (idle again, said at the next heartbeat, now)
      done = done + 1
    end
  end
  link:call("SREM", queue.key(q, "workers"), id)
  link:call("DEL", wkey)
  link:close()
  pool:close()
end

return M
