-- tests/lua/test_queue.lua: a fleet of workers through Redis Streams
-- (kwb.runners.queue, `kwb worker --queue`, `kwb fleet`), against a real redis-server
-- the test starts on 127.0.0.1: host-backend workers as separate processes,
-- one killed in the middle of a candidate and the server stopped and started
-- again during a run, which still records every candidate exactly once; a
-- wrong password, a server without one, TLS, and the tasks a worker refuses.
-- The password never in a URL or an argument (a file or the environment),
-- and nowhere in what a run keeps; results signed by each worker's own key,
-- forged and replayed ones ignored; tasks that workers refuse or that lose
-- their workers go to others, and fail when none will take them.
local core = require "kwb.core"
local queue = require "kwb.runners.queue"
local store = require "kwb.loop.store"
local channel = require "kwb.base.channel"
local t = require "t"

local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$") .. "/queue"
assert(core.mkdirs(tmp))
local name = "t" .. core.pid()

local function sh(cmd) return os.execute(cmd) == true end

local function read(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- until(fn, seconds): fn's first true value, or nil once the time is up
local function wait_for(fn, seconds)
  local t0 = core.now()
  while core.now() - t0 < seconds do
    local v = fn()
    if v then return v end
    core.sleep(0.05)
  end
end

-- a port nobody listens on
local function free_port(from)
  for i = 0, 200 do
    local p = from + (core.pid() * 7 + i * 131) % 9000
    local r = core.redis_connect { host = "127.0.0.1", port = p, timeout = 0.5 }
    if not r then return p end
    r:close()
  end
  error("no free port")
end

local servers = {}
-- server(port, password [, tls]) starts redis-server; stop(port) shuts it down
local function server(port, password, tls)
  local args = string.format("--port %d --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --dir %s "
                             .. "--pidfile %s/redis-%d.pid --logfile %s/redis-%d.log", port, tmp, tmp, port, tmp, port)
  if password then args = args .. " --requirepass " .. password end
  if tls then
    args = string.format("--port 0 --tls-port %d --tls-cert-file %s/cert.pem --tls-key-file %s/key.pem "
                         .. "--tls-ca-cert-file %s/cert.pem --tls-auth-clients no --bind 127.0.0.1 --save '' "
                         .. "--daemonize yes --dir %s --pidfile %s/redis-%d.pid --logfile %s/redis-%d.log "
                         .. "--requirepass %s", port, tmp, tmp, tmp, tmp, tmp, port, tmp, port, password)
  end
  assert(sh("redis-server " .. args), "redis-server did not start (is Debian's redis-server installed?)")
  servers[port] = { password = password, tls = tls }
  assert(wait_for(function()
    local r = core.redis_connect { host = "127.0.0.1", port = port, tls = tls, ca = tls and tmp .. "/cert.pem", timeout = 1 }
    if r then r:close() end
    return r ~= nil
  end, 10), "redis-server on port " .. port .. " does not answer")
end

local function stop(port)
  local s = servers[port]
  local r = core.redis_connect { host = "127.0.0.1", port = port, tls = s.tls, ca = s.tls and tmp .. "/cert.pem" }
  if not r then return end
  if s.password then r:call("AUTH", s.password) end
  r:call("SHUTDOWN", "NOSAVE")
  r:close()
  wait_for(function() return core.redis_connect { host = "127.0.0.1", port = port, timeout = 0.2 } == nil end, 5)
  servers[port] = nil
end

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

-- The queue's password, in a file and never an argument; the fleet's key
-- (the runs'), and the workers' keys derived from it by `kwb fleet --worker-key`.
local pw = "pw-" .. name .. "-s3cr3t"
local pwfile = write(tmp .. "/queue.pw", pw .. "\n")
local fleet_key = core.sha256("the fleet key of " .. name)
local keyfile = write(tmp .. "/fleet.key", fleet_key .. "\n")
local function credential(wname)
  local r = core.exec({ "./kwb", "fleet", "--worker-key", wname, "--fleet-key-file", keyfile })
  assert(r.status == 0, r.err)
  return write(string.format("%s/%s.cred", tmp, wname), r.out)
end

local port = free_port(21000)
local url = string.format("redis://127.0.0.1:%d/%s", port, name)
local q = assert(queue.parse(url, { password_file = pwfile }))
server(port, pw)

-- start_workers(n, log [, { url =, recipes = DIR }]): host workers as processes, each with a key of its own
local function start_workers(n, log, o)
  o = o or {}
  for i = 1, n do
    assert(sh(string.format("./kwb worker --queue '%s' --queue-password-file %s --worker-key-file %s --backend host "
                            .. "%s>> %s/%s-%d.log 2>&1 &", o.url or url, pwfile, credential(log .. i),
                            o.recipes and ("--recipes " .. o.recipes .. " ") or "", tmp, log, i)))
  end
end

local function fleet()
  local link = queue.connect(q)
  local f = queue.fleet(link, q)
  link:close()
  return f
end

t.test("queue_url_needs_a_password_and_names_the_setting_it_refuses", function()
  local _, msg = queue.parse("redis://127.0.0.1:6379/q", { password_file = tmp .. "/none.pw" })
  t.eq(msg, "--queue-password-file " .. tmp .. "/none.pw: cannot read " .. tmp .. "/none.pw: No such file or directory")
  _, msg = queue.parse("redis://127.0.0.1:6379/q?visibility=0", { password_file = pwfile })
  t.eq(msg, "queue redis://127.0.0.1:6379/q?visibility=0: visibility is a positive number of seconds, got '0'")
  _, msg = queue.parse("redis://127.0.0.1/bad name", { password_file = pwfile })
  t.truthy(msg and msg:find("NAME is letters", 1, true), msg)
  local p = assert(queue.parse("rediss://kwb@[::1]:7000/fleet.a?ca=/etc/ca.pem&visibility=2.5", { password_file = pwfile }))
  t.eq(p.tls, true); t.eq(p.user, "kwb"); t.eq(p.password, pw); t.eq(p.host, "::1"); t.eq(p.port, 7000)
  t.eq(p.name, "fleet.a"); t.eq(p.ca, "/etc/ca.pem"); t.eq(p.visibility, 2.5)
  t.eq(p.url, "rediss://kwb@[::1]:7000/fleet.a?ca=/etc/ca.pem&visibility=2.5")
end)

t.test("queue_a_password_in_the_url_is_refused_saying_how_to_give_it", function()
  local how = ": a password in the URL would show in the process list; give it in $KWB_QUEUE_PASSWORD or a file "
              .. "(--queue-password-file FILE), and the URL as redis://[USER@]HOST:PORT/NAME"
  t.eq(select(2, queue.parse("redis://:secret@127.0.0.1:6379/q", { password_file = pwfile })),
       "queue redis://:***@127.0.0.1:6379/q" .. how)
  t.eq(select(2, queue.parse("rediss://kwb:p%40ss@[::1]:7000/q")), "queue rediss://kwb:***@[::1]:7000/q" .. how)
  local r = core.exec({ "./kwb", "worker", "--queue", "redis://:secret@127.0.0.1:6379/q" })
  t.eq(r.status, 2)
  t.eq(r.err, "kwb worker: queue redis://:***@127.0.0.1:6379/q" .. how .. "\ntry 'kwb worker --help'\n")
  r = core.exec({ "./kwb", "recipes/host_matmul.lua", "--queue", "redis://u:secret@127.0.0.1:6379/q" })
  t.eq(r.status, 2)
  t.eq(r.err, "kwb: queue redis://u:***@127.0.0.1:6379/q" .. how .. "\ntry 'kwb recipes/host_matmul.lua --help'\n")
  r = core.exec({ "./kwb", "fleet", "redis://:secret@127.0.0.1:6379/q" })
  t.eq(r.status, 2)
  t.eq(r.err, "kwb fleet: queue redis://:***@127.0.0.1:6379/q" .. how .. "\ntry 'kwb fleet --help'\n")
end)

t.test("queue_hmac_and_worker_keys", function()
  -- RFC 4231's test case 2
  t.eq(core.hmac_sha256("Jefe", "what do ya want for nothing?"),
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
  local r = core.exec({ "./kwb", "fleet", "--worker-key", "gpu-3", "--fleet-key-file", keyfile })
  t.eq(r.status, 0)
  t.eq(r.out, "gpu-3:" .. core.hmac_sha256(fleet_key, "kwb fleet worker\ngpu-3") .. "\n")
  t.eq(r.out, "gpu-3:" .. queue.worker_key(fleet_key, "gpu-3") .. "\n")
  r = core.exec({ "./kwb", "fleet", "--worker-key", "gpu-3", "--fleet-key-file", write(tmp .. "/short.key", "abc\n") })
  t.eq(r.status, 2)
  t.eq(r.err, "kwb fleet: the fleet key in " .. tmp .. "/short.key has 3 characters; it needs at least 32 (openssl "
       .. "rand -hex 32)\ntry 'kwb fleet --help'\n")
  r = core.exec({ "./kwb", "worker", "--queue", url, "--queue-password-file", pwfile,
                  "--worker-key-file", write(tmp .. "/bad.cred", "gpu-3 " .. string.rep("a", 64) .. "\n") })
  t.eq(r.status, 2)
  t.eq(r.err, "kwb worker: the worker key in " .. tmp .. "/bad.cred is not NAME:KEY (a name of letters, digits, '_', "
       .. "'.' or '-', and 64 hex digits, as `kwb fleet --worker-key NAME` prints it)\ntry 'kwb worker --help'\n")
end)

t.test("queue_a_session_measuring_here_is_not_moved_to_a_queue", function()
  local r = kwb.load "recipes/host_matmul.lua"
  r:session { store = store.open(tmp .. "/here.db") }
  t.raises(function() r:run { queue = url, mode = "quiet" } end,
           "this recipe's session measures on this machine; load the recipe again (kwb.load) to run it on a queue")
end)

t.test("queue_a_wrong_password_is_refused_with_a_clear_error", function()
  local wrong = write(tmp .. "/wrong.pw", "wrong\n")
  local r = core.exec({ "./kwb", "fleet", url, "--queue-password-file", wrong })
  t.eq(r.status, 1)
  t.eq(r.err, string.format("kwb fleet: queue redis://127.0.0.1:%d/%s: the queue at 127.0.0.1:%d refused the "
                            .. "password (WRONGPASS invalid username-password pair or user is disabled.)\n",
                            port, name, port))
  r = core.exec({ "./kwb", "worker", "--queue", url, "--queue-password-file", wrong, "--worker-key-file",
                  credential("w0") })
  t.eq(r.status, 1)
  t.truthy(r.err:find("refused the password", 1, true), r.err)
end)

t.test("queue_a_server_without_a_password_is_refused", function()
  local open = free_port(31000)
  server(open, nil)
  local ok, err = pcall(queue.connect, assert(queue.parse(string.format("redis://127.0.0.1:%d/q", open),
                                                         { password_file = pwfile })))
  stop(open)
  t.eq(ok, false)
  t.truthy(tostring(err):find("has no password set: kwb uses only a queue that asks for one", 1, true), err)
end)

t.test("queue_speaks_tls_and_checks_the_servers_certificate", function()
  t.truthy(sh(string.format("openssl req -x509 -newkey rsa:2048 -nodes -keyout %s/key.pem -out %s/cert.pem -days 2 "
                            .. "-subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost 2>/dev/null",
                            tmp, tmp)), "openssl made a certificate")
  local tport = free_port(41000)
  server(tport, "tls-pw", true)
  local ok, err = pcall(function()
    local tlspw = write(tmp .. "/tls.pw", "tls-pw\n")
    local good = assert(queue.parse(string.format("rediss://127.0.0.1:%d/q?ca=%s/cert.pem", tport, tmp),
                                    { password_file = tlspw }))
    local link = queue.connect(good)
    t.eq(link:call("PING"), "PONG")
    t.eq(#link:call("ECHO", string.rep("x", 200000)), 200000, "a large reply through the relay")
    link:close()
    -- the system's roots do not know this certificate
    local untrusted = assert(queue.parse(string.format("rediss://127.0.0.1:%d/q", tport), { password_file = tlspw }))
    t.raises(function() queue.connect(untrusted) end, "the server's certificate is not trusted")
  end)
  stop(tport)
  assert(ok, err)
end)

start_workers(3, "worker")

t.test("queue_workers_announce_their_device_and_a_heartbeat", function()
  local f = wait_for(function() local f = fleet(); return #f.workers == 3 and f end, 30)
  t.truthy(f, "three workers on the queue")
  for _, w in ipairs(f.workers) do
    t.eq(w.backend, "host")
    t.eq(w.kind, require("kwb.host").kind())
    t.truthy(w.age and w.age <= 2, "a heartbeat in the last two seconds")
  end
  t.eq(#f.kinds, 1)
  t.eq(f.kinds[1].workers, 3)
end)

-- a task sent by hand: what a worker answers to it
local function by_hand(fields)
  local link = queue.connect(q)
  local kind = require("kwb.host").kind()
  local reply = queue.key(q, "results", "byhand-" .. fields.tid)
  link:call("XADD", queue.tasks_key(q, "host", kind), "*", "task", channel.encode(fields), "reply", reply)
  local got = wait_for(function()
    local r = link:call("XREAD", "COUNT", 1, "BLOCK", 200, "STREAMS", reply, "0-0", { block = 0.2 })
    return type(r) == "table" and queue.fields(r[1][2][1][2])
  end, 20)
  -- signed with the key of the worker its id names, over what it answers
  got.reply = reply
  t.eq(got.mac, queue.sign(queue.worker_key(fleet_key, queue.name_of(got.worker)), got), "the worker's signature")
  t.eq(got.task_sha256, core.sha256(channel.encode(fields)))
  -- (the worker left its entry pending for the loop to check: acknowledged here)
  link:call("XACK", queue.tasks_key(q, "host", kind), queue.group, got.entry)
  link:close()
  return got and channel.decode(got.result)
end

t.test("queue_worker_runs_evaluations_only", function()
  local r = by_hand { tid = "x1", fn = "os.execute", args = { { recipe = {} } } }
  t.eq(r.ok, false)
  t.eq(r.code, "refused")
  t.eq(r.reason, "a queue's worker runs evaluations only, not os.execute")
end)

t.test("queue_worker_loads_only_its_own_copy_of_a_recipe", function()
  local r = by_hand { tid = "x2", fn = "kwb.worker.task.ceilings",
                      args = { { recipe = { path = "recipes/host_matmul.lua", sha256 = string.rep("0", 64) } } } }
  t.eq(r.ok, false)
  t.truthy(r.reason:find("this worker's copy of recipes/host_matmul.lua (", 1, true)
           and r.reason:find(") differs from the run's (SHA-256 ", 1, true), r.reason)
  r = by_hand { tid = "x3", fn = "kwb.worker.task.ceilings",
                args = { { recipe = { path = "recipes/nowhere.lua", sha256 = string.rep("0", 64) } } } }
  t.truthy(r.reason:find("the recipe recipes/nowhere.lua is not on this worker", 1, true), r.reason)
end)

-- A recipe is Lua the worker runs: a task names only a file under the
-- worker's --recipes directory, whatever SHA-256 it gives (one a password
-- holder computes for any file the host has, or /dev/zero's endless read).
t.test("queue_worker_takes_recipes_only_from_its_recipes_directory", function()
  local passwd = assert(io.open("/etc/passwd", "rb"))
  local sha = core.sha256(passwd:read("a"))
  passwd:close()
  for i, path in ipairs { "/etc/passwd", "../../../../../../etc/passwd", "recipes/../../../../../etc/passwd",
                          "/dev/zero" } do
    local r = by_hand { tid = "x-path-" .. i, fn = "kwb.worker.task.ceilings",
                        args = { { recipe = { path = path, sha256 = sha } } } }
    t.eq(r.ok, false)
    t.eq(r.code, "refused")
    t.eq(r.reason, string.format("the task's recipe path %q is not a path under this worker's recipes directory "
                                 .. "(relative, with no '..': run the loop from the directory the workers' "
                                 .. "--recipes names)", path))
  end
  local r = by_hand { tid = "x-path-ok", fn = "kwb.worker.task.device", args = { { backend = "host" } } }
  t.eq(r.ok, true, "the worker still serves")
  t.raises(function() queue.identity("/etc/passwd") end, "the recipe /etc/passwd is not under the directory kwb runs "
           .. "from (" .. core.cwd() .. "): a fleet's workers find recipes by a path relative to their --recipes "
           .. "directory, so run the loop from there")
end)

-- ---- a fleet the test plays itself: workers that answer when and how it says

local kind = require("kwb.host").kind()
local fake_url = string.format("redis://127.0.0.1:%d/%s-fake", port, name)
local fq = assert(queue.parse(fake_url, { password_file = pwfile }))
local fake_tasks = queue.tasks_key(fq, "host", kind)

-- fake_worker(link, wname, n) -> a worker announced on the fake queue, with
-- the key `kwb fleet --worker-key wname` gives: take() -> entry, fields;
-- answer(entry, fields, result [, { as =, key =, sha = }]) -> the fields
-- posted, signed as kwb.worker.queue signs; leave()
local function fake_worker(link, wname, n)
  local w = { id = string.format("%s/fake-%d-aaaaaa", wname, n), key = queue.worker_key(fleet_key, wname) }
  local wkey = queue.key(fq, "worker", w.id)
  link:call("HSET", wkey, "host", "fake", "pid", 1, "backend", "host", "kind", kind, "busy", "", "started", n, "done", 0)
  link:call("EXPIRE", wkey, 120)
  link:call("SADD", queue.key(fq, "workers"), w.id)
  queue.ensure_group(link, fake_tasks)
  function w.take()
    local r = link:call("XREADGROUP", "GROUP", queue.group, w.id, "COUNT", 1, "STREAMS", fake_tasks, ">")
    if type(r) ~= "table" or #r[1][2] == 0 then return nil end
    return r[1][2][1][1], queue.fields(r[1][2][1][2])
  end
  function w.answer(entry, f, result, o)
    o = o or {}
    local a = { reply = f.reply, tid = channel.decode(f.task).tid, entry = entry, worker = o.as or w.id,
                task_sha256 = o.sha or core.sha256(f.task), result = channel.encode(result) }
    a.mac = queue.sign(o.key or w.key, a)
    link:call("XADD", f.reply, "*", "tid", a.tid, "entry", a.entry, "worker", a.worker, "task_sha256", a.task_sha256,
              "result", a.result, "mac", a.mac)
    return a
  end
  function w.leave()
    link:call("DEL", wkey)
    link:call("SREM", queue.key(fq, "workers"), w.id)
  end
  return w
end

local function repost(link, a)
  link:call("XADD", a.reply, "*", "tid", a.tid, "entry", a.entry, "worker", a.worker, "task_sha256", a.task_sha256,
            "result", a.result, "mac", a.mac)
end

local function fake_pool(u)
  return require("kwb.runners.queue_pool").new { url = u or fake_url, backend = "host", password_file = pwfile, fleet_key = fleet_key }
end

local function ceilings(p) return p:submit("kwb.worker.task.ceilings", { { recipe = "recipes/host_matmul.lua" } }) end

t.test("queue_a_forged_result_before_the_workers_is_ignored_and_the_workers_counted_once", function()
  local link = queue.connect(fq)
  local w1, w2 = fake_worker(link, "w1", 1), fake_worker(link, "w2", 1)
  local p = fake_pool()
  local task = ceilings(p)
  local entry, f = w1.take()
  t.eq(entry, task.entry, "w1 holds the task's entry")
  local forged = { ok = true, value = { outcome = "accepted", forged = true } }
  -- before w1 answers: one holding the queue's password and no key ...
  link:call("XADD", f.reply, "*", "tid", task.tid, "entry", entry, "worker", "forger/x-1-aaaaaa", "task_sha256",
            core.sha256(f.task), "result", channel.encode(forged), "mac", string.rep("0", 64))
  -- ... one posing as w1 with another worker's key, w2 with its own key but not the entry,
  -- and w1 answering a task other than the one sent
  w1.answer(entry, f, forged, { key = w2.key })
  w2.answer(entry, f, forged)
  w1.answer(entry, f, forged, { sha = core.sha256("another task") })
  local honest = w1.answer(entry, f, { ok = true, value = { peak = 1 } })
  local res = p:wait(task)
  t.eq(res.ok, true)
  t.eq(res.value.peak, 1, "w1's own answer")
  t.eq(res.worker, w1.id)
  local said = "a result for the ceilings task from "
  t.eq(table.concat(p.ignored, "\n"), table.concat({
    said .. "forger/x-1-aaaaaa ignored: it is not signed with worker forger's key",
    said .. "w1/fake-1-aaaaaa ignored: it is not signed with worker w1's key",
    said .. "w2/fake-1-aaaaaa ignored: the task's entry " .. entry .. " is in the hands of w1/fake-1-aaaaaa, not of the "
      .. "worker that answered",
    said .. "w1/fake-1-aaaaaa ignored: it answers another task than the one this run sent" }, "\n"))
  t.eq(p:holder(entry), nil, "the loop acknowledged the entry it counted")
  -- replayed: the same signed answer again counts for nothing
  repost(link, honest)
  p:poll(0.2)
  t.eq(p.ignored[5], said .. "w1/fake-1-aaaaaa ignored: the task has its result already (a result counts once)")
  t.eq(res.value.peak, 1)
  p:close(); w1.leave(); w2.leave(); link:close()
end)

t.test("queue_a_refused_task_goes_to_another_worker_and_an_old_refusal_replayed_is_ignored", function()
  local link = queue.connect(fq)
  local w1, w2 = fake_worker(link, "w1", 2), fake_worker(link, "w2", 2)
  local p = fake_pool()
  local task = ceilings(p)
  local e1, f1 = w1.take()
  local refusal = w1.answer(e1, f1, { ok = false, code = "refused", reason = "this worker's copy differs" })
  p:poll(0.2)
  t.eq(task.result, nil, "a refusal is not the task's result")
  t.truthy(task.entry and task.entry ~= e1, "sent again, as a new entry")
  t.eq(p:holder(e1), nil, "the refused entry acknowledged")
  local e2, f2 = w2.take()
  t.eq(e2, task.entry, "w2 has the task now")
  repost(link, refusal)
  w2.answer(e2, f2, { ok = true, value = { peak = 2 } })
  local res = p:wait(task)
  t.eq(res.ok, true)
  t.eq(res.value.peak, 2)
  t.eq(res.worker, w2.id)
  t.eq(table.concat(p.ignored, "\n"), "a result for the ceilings task from w1/fake-2-aaaaaa ignored: the task's entry "
       .. e1 .. " is pending with no worker")
  p:close(); w1.leave(); w2.leave(); link:close()
end)

t.test("queue_a_task_every_worker_declines_fails_naming_each_reason", function()
  local link = queue.connect(fq)
  local w1, w2 = fake_worker(link, "w1", 3), fake_worker(link, "w2", 3)
  local p = fake_pool()
  local task = ceilings(p)
  local e1, f1 = w1.take()
  w1.answer(e1, f1, { ok = false, code = "refused", reason = "the recipe recipes/host_matmul.lua is not on this worker" })
  p:poll(0.2)
  local e2, f2 = w2.take()
  w2.answer(e2, f2, { ok = false, code = "error", reason = "cannot load the recipe" })
  local res = p:wait(task)
  t.eq(res.ok, false)
  t.eq(res.code, "error")
  t.eq(res.reason, string.format("no worker on the queue %s will take the ceilings task (2 live workers of host %s, "
                                 .. "each declined it): worker w1/fake-3-aaaaaa refused it: the recipe "
                                 .. "recipes/host_matmul.lua is not on this worker; worker w2/fake-3-aaaaaa failed it: "
                                 .. "cannot load the recipe", fake_url, kind))
  t.eq(link:call("XLEN", fake_tasks), 0, "not sent again")
  t.eq(w1.take(), nil)
  p:close(); w1.leave(); w2.leave(); link:close()
end)

t.test("queue_a_task_that_loses_every_worker_fails_after_three", function()
  local link = queue.connect(fq)
  local w1 = fake_worker(link, "w1", 4)
  local p = fake_pool(fake_url .. "?visibility=0.3")
  local task = ceilings(p)
  local taken = {}
  p.idle = function()   -- each entry taken by a worker that then dies (never answers, no heartbeat)
    local w = fake_worker(link, "dead", #taken + 1)
    local entry = w.take()
    if entry then taken[#taken + 1] = entry end
    w.leave()
  end
  local t0 = core.now()
  local res = p:wait(task)
  t.eq(res.ok, false)
  t.eq(res.reason, "the ceilings task was taken by 3 workers in turn and each stopped answering (no heartbeat for "
       .. "0.3 s): it is not sent again")
  t.eq(#taken, 3, "taken three times")
  t.truthy(core.now() - t0 < 10, "failed in seconds, not hanging")
  t.eq(link:call("XLEN", fake_tasks), 0, "its entry dropped")
  t.eq(link:call("XPENDING", fake_tasks, queue.group)[1], 0, "nothing pending")
  p:close(); w1.leave(); link:close()
end)

t.test("queue_a_secret_in_a_workers_answer_is_scrubbed_before_the_loop_keeps_it", function()
  local link = queue.connect(fq)
  local w1 = fake_worker(link, "w1", 5)
  local p = fake_pool()
  local task = ceilings(p)
  local e, f = w1.take()
  w1.answer(e, f, { ok = true, value = { outcome = "crashed", reason = "read " .. pw .. " from /proc",
                                         log = { pw, fleet_key } } })
  local res = p:wait(task)
  t.eq(res.value.reason, "read [secret] from /proc")
  t.eq(res.value.log[1], "[secret]")
  t.eq(res.value.log[2], "[secret]")
  p:close(); w1.leave(); link:close()
end)

t.test("queue_a_task_too_large_for_a_frame_is_never_sent_and_no_worker_dies_of_one", function()
  local big = string.rep("\1", 12 << 20)   -- 72 MiB as JSON (\u0001)
  local frame_text = "^its task is (%d+) bytes as sent %(JSON%), over the 67108864 a worker's frame holds$"
  -- the loop's side: answered at once, nothing added to the stream
  local p = require("kwb.runners.queue_pool").new { url = url, backend = "host", password_file = pwfile, fleet_key = fleet_key }
  local before = p.link:call("XLEN", p.tasks_key)
  local r = p:call("kwb.worker.task.measure", { { recipe = "recipes/host_matmul.lua", cand = { source = big } } })
  t.eq(r.ok, false)
  t.eq(r.code, "too-large")
  t.truthy(tonumber(r.reason:match(frame_text) or "0") > 72 * 2 ^ 20, r.reason)
  t.eq(p.link:call("XLEN", p.tasks_key), before, "never sent")
  p:close()
  -- a worker's side, given one by hand: it answers, and serves on
  local sha = core.sha256(read("recipes/host_matmul.lua"))
  r = by_hand { tid = "x4", fn = "kwb.worker.task.measure",
                args = { { recipe = { path = "recipes/host_matmul.lua", sha256 = sha }, cand = { source = big } } } }
  t.eq(r.ok, false)
  t.eq(r.code, "too-large")
  t.truthy(tonumber(r.reason:match(frame_text) or "0") > 72 * 2 ^ 20, r.reason)
  r = by_hand { tid = "x5", fn = "kwb.worker.task.device", args = { { backend = "host" } } }
  t.eq(r.ok, true, "a worker still serves")
  t.eq(#fleet().workers, 3, "every worker still on the queue")
end)

-- The run: 40 candidates on the fleet. A worker is killed while a candidate
-- is in its hands, then the server is stopped for three seconds and started
-- again, empty.
local cache = tmp .. "/loop.db"
local out = tmp .. "/loop"
local budget = 40
assert(sh(string.format("(./kwb --cache %s recipes/host_matmul.lua --queue '%s?visibility=2' --queue-password-file %s "
                        .. "--fleet-key-file %s --json --budget %d --seed 1 --strategy grid > %s.jsonl 2> %s.err; "
                        .. "echo $? > %s.rc) &", cache, url, pwfile, keyfile, budget, out, out, out)))

local killed
t.test("queue_a_worker_killed_mid_candidate_leaves_its_task_to_another", function()
  local tasks = queue.tasks_key(q, "host", require("kwb.host").kind())
  killed = wait_for(function()
    local link = queue.connect(q)
    for _, w in ipairs(queue.workers(link, q)) do
      local pending = link:call("XPENDING", tasks, queue.group, "-", "+", 10, w.id)
      if w.busy ~= "" and type(pending) == "table" and #pending == 1 and pending[1][1] == w.busy then
        sh("kill -9 " .. w.pid)
        core.sleep(0.2)
        local still = link:call("XPENDING", tasks, queue.group, "-", "+", 10, w.id)
        link:close()
        -- (finished just before the kill: another one, then)
        if type(still) == "table" and #still == 1 then return { id = w.id, entry = w.busy } end
        return nil
      end
    end
    link:close()
  end, 60)
  t.truthy(killed, "a worker killed with a task in hand")
  t.truthy(wait_for(function() return (read(out .. ".err") or ""):find("sent again", 1, true) end, 20),
           "the loop took the task back after the visibility timeout")
end)

t.test("queue_the_server_stopped_and_started_again_mid_run", function()
  t.truthy(not read(out .. ".rc"), "the run is still going")
  stop(port)
  core.sleep(3)
  server(port, pw)
  local rc = wait_for(function() return read(out .. ".rc") end, 180)
  t.eq(rc, "0\n", "the run finished")
  local err = read(out .. ".err")
  t.truthy(err:find("; trying again\n", 1, true) and err:find("back after %d"), "the loop said it lost the queue, "
           .. "and that it came back: " .. err)
end)

t.test("queue_every_candidate_recorded_exactly_once", function()
  local ids, n, summary = {}, 0, nil
  for l in io.lines(out .. ".jsonl") do
    local e = require("cjson").decode(l)
    if e.event == "candidate" then
      t.eq(ids[e.id], nil, "candidate " .. e.id .. " once in the run's events")
      ids[e.id], n = true, n + 1
    elseif e.event == "summary" then summary = e end
  end
  t.eq(n, budget)
  t.eq(summary.candidates, budget)
  -- in the cache: one measurement of each, a row for each of its three shapes
  local st = store.open(cache)
  for id in pairs(ids) do
    local shapes = {}
    for _, row in ipairs(st.cache:results(id)) do
      t.eq(shapes[row.shape], nil, "one result of " .. id:sub(1, 8) .. " at " .. row.shape)
      shapes[row.shape] = true
    end
    t.eq(#st.cache:results(id), 3, id:sub(1, 8) .. "'s results: its three shapes")
  end
  st.cache:close()
end)

t.test("queue_fleet_shows_the_workers_left_and_the_throughput", function()
  local f = wait_for(function() local f = fleet(); return #f.workers == 2 and f.done_minute > 0 and f end, 20)
  t.truthy(f, "the two live workers (announced again after the restart) and tasks done since")
  for _, w in ipairs(f.workers) do t.truthy(w.id ~= killed.id, "the killed worker is gone from the fleet") end
  local r = core.exec({ "./kwb", "fleet", url, "--queue-password-file", pwfile })
  t.eq(r.status, 0)
  t.truthy(r.out:find("^queue redis://127%.0%.0%.1:%d+/" .. name .. ": 2 workers, %d+ tasks? finished in the last minute\n"),
           r.out)
  t.truthy(r.out:find("host " .. require("kwb.host").kind() .. ": 2 workers, 0 waiting, 0 in flight", 1, true), r.out)
end)

t.test("queue_a_fleets_session_measures_on_the_fleet_after_its_run", function()
  local r = kwb.load "recipes/host_matmul.lua"
  local s = r:session { store = store.open(tmp .. "/again.db"), queue = url, queue_password_file = pwfile,
                        fleet_key_file = keyfile }
  r:run { queue = url, candidates = 1, mode = "quiet", seed = 3 }
  t.eq(s.pool, nil, "the run closed its pool")
  local before = fleet().done_minute
  local res = r:try { BK = 8, BM = 4, BN = 64, UNROLL = 1 }
  t.truthy(res.outcome == "accepted" or res.outcome == "slower", res.outcome)
  t.truthy(s:fleet(), "measured through the queue again")
  t.eq(fleet().done_minute, before + 1, "one more task done by the fleet")
  s:close_workers()
end)

-- kwb verify-pick --queue: the fleet run's final round timed again by a worker of the fleet, not here.
t.test("queue_verify_pick_times_the_round_on_the_fleet", function()
  local run_id
  for l in io.lines(out .. ".jsonl") do
    local e = require("cjson").decode(l)
    if e.event == "summary" and e.certificate then run_id = e.certificate.run end
  end
  t.truthy(run_id, "the fleet run kept a certificate")
  local before = fleet().done_minute
  local r = core.exec({ "./kwb", "--cache", cache, "verify-pick", run_id:sub(1, 8), "--queue", url, "--queue-password-file",
                        pwfile, "--fleet-key-file", keyfile, "--seconds", "0.5" }, { timeout = 120 })
  t.truthy(r.status == 0 or r.status == 1, (r.out or "") .. (r.err or ""))
  t.truthy(r.out:find("^run " .. run_id:sub(1, 8) .. ": its final round again on host:", 1), r.out .. r.err)
  t.truthy(r.out:find("\n%d+ of %d+ ratios agree[^\n]*\n$"), r.out)
  t.eq(fleet().done_minute, before + 1, "one task done by the fleet: the round")
  local bad = core.exec({ "./kwb", "--cache", cache, "verify-pick", run_id:sub(1, 8), "--device", "host:x" })
  t.eq(bad.status, 1)
  t.eq(bad.err, "kwb verify-pick: '--device' is for a round on a queue: it needs --queue\n")
end)

t.test("queue_a_forged_result_posted_before_the_workers_on_a_run_is_ignored_the_honest_one_recorded", function()
  local o, db = tmp .. "/forged", tmp .. "/forged.db"
  assert(sh(string.format("(./kwb --cache %s recipes/host_matmul.lua --queue '%s' --queue-password-file %s "
                          .. "--fleet-key-file %s --json --budget 5 --seed 4 --strategy grid > %s.jsonl 2> %s.err; "
                          .. "echo $? > %s.rc) &", db, url, pwfile, keyfile, o, o, o)))
  -- one who holds the queue's password answers every task the moment it is sent
  local link = queue.connect(q)
  local tasks, last, forged = queue.tasks_key(q, "host", kind), "0-0", 0
  local honest_id = queue.workers(link, q)[1].id
  local lie = channel.encode { ok = true, value = { outcome = "crashed", reason = "FORGED", shapes = {} } }
  wait_for(function()
    local r = link:call("XRANGE", tasks, "(" .. last, "+")
    for _, e in ipairs(type(r) == "table" and r or {}) do
      last = e[1]
      local f = queue.fields(e[2])
      local ok, task = pcall(channel.decode, f.task or "")
      if ok and f.reply and f.reply:find(":results:", 1, true) and not f.reply:find("byhand", 1, true) then
        for _, as in ipairs { "forger/x-1-aaaaaa", honest_id } do
          link:call("XADD", f.reply, "*", "tid", task.tid, "entry", e[1], "worker", as, "task_sha256",
                    core.sha256(f.task), "result", lie, "mac", string.rep("0", 64))
          forged = forged + 1
        end
      end
    end
    return read(o .. ".rc")
  end, 120)
  link:close()
  t.eq(read(o .. ".rc"), "0\n", "the run finished: " .. tostring(read(o .. ".err")))
  t.truthy(forged >= 10, "a forged answer to every task: " .. forged)
  local n = 0
  for l in io.lines(o .. ".jsonl") do
    local e = require("cjson").decode(l)
    if e.event == "candidate" then
      n = n + 1
      t.truthy(e.outcome ~= "crashed" and e.reason ~= "FORGED", "an honest outcome: " .. l)
    end
  end
  t.eq(n, 5)
  t.eq(read(db):find("FORGED", 1, true), nil, "no forged text in the cache")
  local err = read(o .. ".err")
  t.truthy(err:find(": a result for the measure task of candidate %x+ from forger/x%-1%-aaaaaa ignored: it is not "
                    .. "signed with worker forger's key\n"), err)
  t.truthy(err:find(": a result for the measure task of candidate %x+ from " .. honest_id:gsub("%p", "%%%0")
                    .. " ignored: it is not signed with worker worker%d's key\n"), err)
end)

-- ---- refusals end to end: workers with a stale copy of the recipe

local stale = tmp .. "/stale"
assert(core.mkdirs(stale .. "/recipes"))
write(stale .. "/recipes/host_matmul.lua", read("recipes/host_matmul.lua") .. "-- an older copy\n")

-- loop(u, cache, outfile, budget [, env]) -> exit status: a run on the queue u
local function loop(u, db, o, n, env)
  assert(sh(string.format("%s./kwb --cache %s recipes/host_matmul.lua --queue '%s' %s --json --budget %d --seed 2 "
                          .. "--strategy grid > %s.jsonl 2> %s.err; echo $? > %s.rc", env or "", db, u,
                          env and "" or string.format("--queue-password-file %s --fleet-key-file %s", pwfile, keyfile),
                          n, o, o, o)))
  return read(o .. ".rc")
end

local function live(u, n)
  local qq = assert(queue.parse(u, { password_file = pwfile }))
  return wait_for(function()
    local link = queue.connect(qq)
    local k = #queue.workers(link, qq)
    link:close()
    return k == n
  end, 30)
end

t.test("queue_a_refusing_worker_beside_an_honest_one_the_run_completes_on_the_honest_one", function()
  local u = string.format("redis://127.0.0.1:%d/%s-mixed", port, name)
  start_workers(1, "stale", { url = u, recipes = stale })   -- (first: it is first in line for the first task)
  t.truthy(live(u, 1), "the stale worker is up")
  start_workers(1, "honest", { url = u })
  t.truthy(live(u, 2), "both are up")
  local o = tmp .. "/mixed"
  t.eq(loop(u, tmp .. "/mixed.db", o, 4), "0\n", "the run finished: " .. tostring(read(o .. ".err")))
  local n = 0
  for l in io.lines(o .. ".jsonl") do
    if require("cjson").decode(l).event == "candidate" then n = n + 1 end
  end
  t.eq(n, 4, "every candidate evaluated")
  local err = read(o .. ".err")
  t.truthy(err:find("refused it: this worker's copy of recipes/host_matmul.lua (" .. stale
                    .. "/recipes/host_matmul.lua) differs from the run's (SHA-256 ", 1, true)
           and err:find("; sent to another worker\n", 1, true), err)
end)

t.test("queue_only_refusing_workers_the_run_ends_saying_so_and_loses_nothing", function()
  local u = string.format("redis://127.0.0.1:%d/%s-stale", port, name)
  start_workers(2, "refuser", { url = u, recipes = stale })
  t.truthy(live(u, 2), "two stale workers are up")
  local db = tmp .. "/stale.db"
  assert(sh(string.format("cp %s %s", cache, db)))
  local rows = function()
    local st = store.open(db)
    local n = #st.cache.db:exec("SELECT 1 FROM result")
    st.cache:close()
    return n
  end
  local had = rows()
  t.truthy(had >= 3 * budget, "the earlier run's results")
  local o = tmp .. "/stale"
  t.eq(loop(u, db, o, 4), "1\n", "the run ended")
  local err = read(o .. ".err")
  local said = err:match("([^\n]*)\n$")
  local w = "refuser%d/[%w_.%-]+"
  local why = " refused it: this worker's copy of recipes/host_matmul%.lua %(" .. stale:gsub("%p", "%%%0")
              .. "/recipes/host_matmul%.lua%) differs from the run's %(SHA%-256 %x+ here, %x+ in the run%)"
  -- (the run's first task is its start kernel's measurement: the ceilings are the earlier run's)
  t.truthy(said:find("^kwb: host_matmul: evaluating (%x+): no worker on the queue " .. u:gsub("%p", "%%%0")
                     .. " will take the measure task of candidate %1 %(2 live workers of host "
                     .. kind:gsub("%p", "%%%0") .. ", each declined it%): worker " .. w .. why .. "; worker " .. w
                     .. why .. "$"), said)
  t.eq(rows(), had, "nothing recorded lost")
end)

-- ---- the password and the keys: nowhere in what a run keeps or prints

t.test("queue_password_and_key_from_the_environment_work_and_appear_nowhere", function()
  local o, db = tmp .. "/env", tmp .. "/env.db"
  t.eq(loop(url, db, o, 3, string.format("KWB_QUEUE_PASSWORD=\"$(cat %s)\" KWB_FLEET_KEY=\"$(cat %s)\" ", pwfile,
                                          keyfile)), "0\n", "the run finished: " .. tostring(read(o .. ".err")))
  local r = core.exec({ "./kwb", "--cache", db, "cache", "export", tmp .. "/env.kwbundle" })
  t.eq(r.status, 0, r.err)
  local files = { db, o .. ".jsonl", o .. ".err", tmp .. "/env.kwbundle", cache, out .. ".jsonl", out .. ".err" }
  for _, file in ipairs(files) do
    local bytes = assert(read(file), file)
    t.eq(bytes:find(pw, 1, true), nil, "the password in " .. file)
    t.eq(bytes:find(fleet_key, 1, true), nil, "the fleet key in " .. file)
    t.eq(bytes:find(queue.worker_key(fleet_key, "worker1"), 1, true), nil, "a worker's key in " .. file)
  end
end)

t.test("queue_a_secret_in_a_stored_text_is_scrubbed_from_the_cache_and_its_bundle", function()
  local db = tmp .. "/planted.db"
  local st = store.open(db)
  local id = st.cache:put_candidate { problem = "p", source = "int f(void) { return 1; }", params = {}, flags = {},
                                      origin = { strategy = "list" } }
  st.cache:add_build { candidate = id, arch = "x", toolchain = "cc", ok = false, log = "cc: " .. pw }
  st.cache:add_result { candidate = id, device = "d", shape = "n=1", outcome = "crashed", timing = {},
                        verify = { reason = "read " .. pw .. " and " .. fleet_key } }
  t.eq(st.cache:results(id)[1].verify.reason, "read [secret] and [secret]")
  t.eq(st.cache:build(id, "x", "cc").log, "cc: [secret]")
  st.cache:close()
  local r = core.exec({ "./kwb", "--cache", db, "cache", "export", tmp .. "/planted.kwbundle" })
  t.eq(r.status, 0, r.err)
  for _, file in ipairs { db, tmp .. "/planted.kwbundle" } do
    t.eq(read(file):find(pw, 1, true), nil, "the password in " .. file)
  end
end)

sh(string.format("pkill -f -- '--queue %s' ; true", url))
stop(port)
t.done()
