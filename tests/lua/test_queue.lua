-- tests/lua/test_queue.lua: a fleet of workers through Redis Streams
-- (kwb.queue, `kwb worker --queue`, `kwb fleet`), against a real redis-server
-- the test starts on 127.0.0.1: host-backend workers as separate processes,
-- one killed in the middle of a candidate and the server stopped and started
-- again during a run, which still records every candidate exactly once; a
-- wrong password, a server without one, TLS, and the tasks a worker refuses.
local core = require "kwb.core"
local queue = require "kwb.queue"
local store = require "kwb.store"
local worker = require "kwb.worker"
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

local port = free_port(21000)
local url = string.format("redis://:pw-%s@127.0.0.1:%d/%s", name, port, name)
local q = assert(queue.parse(url))
server(port, "pw-" .. name)

local function start_workers(n, log)
  for i = 1, n do
    assert(sh(string.format("./kwb worker --queue '%s' --backend host >> %s/%s-%d.log 2>&1 &", url, tmp, log, i)))
  end
end

local function fleet()
  local link = queue.connect(q)
  local f = queue.fleet(link, q)
  link:close()
  return f
end

t.test("queue_url_needs_a_password_and_names_the_setting_it_refuses", function()
  local _, msg = queue.parse("redis://127.0.0.1:6379/q")
  t.truthy(msg and msg:find("no password", 1, true), msg)
  _, msg = queue.parse("redis://:secret@127.0.0.1:6379/q?visibility=0")
  t.eq(msg, "queue redis://:***@127.0.0.1:6379/q?visibility=0: visibility is a positive number of seconds, got '0'")
  _, msg = queue.parse("redis://:secret@127.0.0.1/bad name")
  t.truthy(msg and msg:find("NAME is letters", 1, true) and not msg:find("secret"), msg)
  local p = assert(queue.parse("rediss://kwb:p%40ss@[::1]:7000/fleet.a?ca=/etc/ca.pem&visibility=2.5"))
  t.eq(p.tls, true); t.eq(p.user, "kwb"); t.eq(p.password, "p@ss"); t.eq(p.host, "::1"); t.eq(p.port, 7000)
  t.eq(p.name, "fleet.a"); t.eq(p.ca, "/etc/ca.pem"); t.eq(p.visibility, 2.5)
end)

t.test("queue_a_session_measuring_here_is_not_moved_to_a_queue", function()
  local r = kwb.load "recipes/host_matmul.lua"
  r:session { store = store.open(tmp .. "/here.db") }
  t.raises(function() r:run { queue = url, mode = "quiet" } end,
           "this recipe's session measures on this machine; load the recipe again (kwb.load) to run it on a queue")
end)

t.test("queue_a_wrong_password_is_refused_with_a_clear_error", function()
  local r = core.exec({ "./kwb", "fleet", string.format("redis://:wrong@127.0.0.1:%d/%s", port, name) })
  t.eq(r.status, 1)
  t.eq(r.err, string.format("kwb fleet: queue redis://:***@127.0.0.1:%d/%s: the queue at 127.0.0.1:%d refused the "
                            .. "password (WRONGPASS invalid username-password pair or user is disabled.)\n",
                            port, name, port))
  r = core.exec({ "./kwb", "worker", "--queue", string.format("redis://:wrong@127.0.0.1:%d/%s", port, name) })
  t.eq(r.status, 1)
  t.truthy(r.err:find("refused the password", 1, true), r.err)
end)

t.test("queue_a_server_without_a_password_is_refused", function()
  local open = free_port(31000)
  server(open, nil)
  local ok, err = pcall(queue.connect, assert(queue.parse(string.format("redis://:any@127.0.0.1:%d/q", open))))
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
    local good = assert(queue.parse(string.format("rediss://:tls-pw@127.0.0.1:%d/q?ca=%s/cert.pem", tport, tmp)))
    local link = queue.connect(good)
    t.eq(link:call("PING"), "PONG")
    t.eq(#link:call("ECHO", string.rep("x", 200000)), 200000, "a large reply through the relay")
    link:close()
    -- the system's roots do not know this certificate
    local untrusted = assert(queue.parse(string.format("rediss://:tls-pw@127.0.0.1:%d/q", tport)))
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
    t.eq(w.kind, require("kwb.cache").host_kind())
    t.truthy(w.age and w.age <= 2, "a heartbeat in the last two seconds")
  end
  t.eq(#f.kinds, 1)
  t.eq(f.kinds[1].workers, 3)
end)

-- a task sent by hand: what a worker answers to it
local function by_hand(fields)
  local link = queue.connect(q)
  local kind = require("kwb.cache").host_kind()
  local reply = queue.key(q, "results", "byhand-" .. fields.tid)
  link:call("XADD", queue.tasks_key(q, "host", kind), "*", "task", worker.encode(fields), "reply", reply)
  local got = wait_for(function()
    local r = link:call("XREAD", "COUNT", 1, "BLOCK", 200, "STREAMS", reply, "0-0", { block = 0.2 })
    return type(r) == "table" and queue.fields(r[1][2][1][2])
  end, 20)
  link:close()
  return got and worker.decode(got.result)
end

t.test("queue_worker_runs_evaluations_only", function()
  local r = by_hand { tid = "x1", fn = "os.execute", args = { { recipe = {} } } }
  t.eq(r.ok, false)
  t.truthy(r.reason:find("refused the task: a queue's worker runs evaluations only, not os.execute", 1, true), r.reason)
end)

t.test("queue_worker_loads_only_its_own_copy_of_a_recipe", function()
  local r = by_hand { tid = "x2", fn = "kwb.measure_task.ceilings",
                      args = { { recipe = { path = "recipes/host_matmul.lua", sha256 = string.rep("0", 64) } } } }
  t.eq(r.ok, false)
  t.truthy(r.reason:find("this worker's copy of recipes/host_matmul.lua (", 1, true)
           and r.reason:find(") differs from the run's (SHA-256 ", 1, true), r.reason)
  r = by_hand { tid = "x3", fn = "kwb.measure_task.ceilings",
                args = { { recipe = { path = "recipes/nowhere.lua", sha256 = string.rep("0", 64) } } } }
  t.truthy(r.reason:find("the recipe recipes/nowhere.lua is not on this worker", 1, true), r.reason)
end)

t.test("queue_a_task_too_large_for_a_frame_is_never_sent_and_no_worker_dies_of_one", function()
  local big = string.rep("\1", 12 << 20)   -- 72 MiB as JSON (\u0001)
  local frame_text = "^its task is (%d+) bytes as sent %(JSON%), over the 67108864 a worker's frame holds$"
  -- the loop's side: answered at once, nothing added to the stream
  local p = queue.pool { url = url, backend = "host" }
  local before = p.link:call("XLEN", p.tasks_key)
  local r = p:call("kwb.measure_task.measure", { { recipe = "recipes/host_matmul.lua", cand = { source = big } } })
  t.eq(r.ok, false)
  t.eq(r.code, "too-large")
  t.truthy(tonumber(r.reason:match(frame_text) or "0") > 72 * 2 ^ 20, r.reason)
  t.eq(p.link:call("XLEN", p.tasks_key), before, "never sent")
  p:close()
  -- a worker's side, given one by hand: it answers, and serves on
  local sha = core.sha256(read("recipes/host_matmul.lua"))
  r = by_hand { tid = "x4", fn = "kwb.measure_task.measure",
                args = { { recipe = { path = "recipes/host_matmul.lua", sha256 = sha }, cand = { source = big } } } }
  t.eq(r.ok, false)
  t.eq(r.code, "too-large")
  t.truthy(tonumber(r.reason:match(frame_text) or "0") > 72 * 2 ^ 20, r.reason)
  r = by_hand { tid = "x5", fn = "kwb.measure_task.device", args = { { backend = "host" } } }
  t.eq(r.ok, true, "a worker still serves")
  t.eq(#fleet().workers, 3, "every worker still on the queue")
end)

-- The run: 40 candidates on the fleet. A worker is killed while a candidate
-- is in its hands, then the server is stopped for three seconds and started
-- again, empty.
local cache = tmp .. "/loop.db"
local out = tmp .. "/loop"
local budget = 40
assert(sh(string.format("(./kwb --cache %s recipes/host_matmul.lua --queue '%s?visibility=2' --json --budget %d "
                        .. "--seed 1 --strategy grid > %s.jsonl 2> %s.err; echo $? > %s.rc) &",
                        cache, url, budget, out, out, out)))

local killed
t.test("queue_a_worker_killed_mid_candidate_leaves_its_task_to_another", function()
  local tasks = queue.tasks_key(q, "host", require("kwb.cache").host_kind())
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
  server(port, "pw-" .. name)
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
  local r = core.exec({ "./kwb", "fleet", url })
  t.eq(r.status, 0)
  t.truthy(r.out:find("^queue redis://:%*%*%*@127%.0%.0%.1:%d+/" .. name .. ": 2 workers, %d+ tasks? finished in the last minute\n"),
           r.out)
  t.truthy(r.out:find("host " .. require("kwb.cache").host_kind() .. ": 2 workers, 0 waiting, 0 in flight", 1, true), r.out)
end)

t.test("queue_a_fleets_session_measures_on_the_fleet_after_its_run", function()
  local r = kwb.load "recipes/host_matmul.lua"
  local s = r:session { store = store.open(tmp .. "/again.db"), queue = url }
  r:run { queue = url, candidates = 1, mode = "quiet", seed = 3 }
  t.eq(s.pool, nil, "the run closed its pool")
  local before = fleet().done_minute
  local res = r:try { BK = 8, BM = 4, BN = 64, UNROLL = 1 }
  t.truthy(res.outcome == "accepted" or res.outcome == "slower", res.outcome)
  t.truthy(s:fleet(), "measured through the queue again")
  t.eq(fleet().done_minute, before + 1, "one more task done by the fleet")
  s:close_workers()
end)

sh(string.format("pkill -f -- '--queue %s' ; true", url))
stop(port)
t.done()
