-- tests/lua/test_workers.lua: candidates run in confined worker processes.
-- Runs as root in CI: every mechanism (uid drop, namespaces, limits) must
-- work here; a missing one fails its test.
local core = require "kwb.core"

-- Secrets in this process's environment, and the probe module on the
-- workers' path: run again with them set.
if os.getenv("OPENAI_API_KEY") ~= "sk-test" then
  local here = core.cwd()
  local lua_path = here .. "/tests/lua" .. (os.getenv("KWB_LUA_PATH") and (";" .. os.getenv("KWB_LUA_PATH")) or "")
  local ok, how, code = os.execute(string.format(
    "OPENAI_API_KEY=sk-test KWB_API_TOKEN=kwb-secret AWS_SECRET_ACCESS_KEY=aws-test KWB_KEEP_ME=kept "
    .. "KWB_ESCAPE_TARGET='%s/build/kwb-escape' KWB_LUA_PATH='%s' ./kwb tests/lua/test_workers.lua",
    here, lua_path))
  os.exit(ok and 0 or (how == "exit" and code or 1))
end

local t = require "t"
local store = require "kwb.loop.store"
local workers = require "kwb.runners.workers"

local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local function fresh_store(name)
  local path = tmp .. "/" .. name .. ".db"
  for _, suffix in ipairs { "", "-wal", "-shm" } do os.remove(path .. suffix) end
  return store.open(path)
end

local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() end
  return f ~= nil
end

-- ---- the pool itself ------------------------------------------------------

t.test("test_workers_environment_is_an_allow_list", function()
  t.eq(workers.allowed("PATH"), true)
  t.eq(workers.allowed("LC_ALL"), true)
  t.eq(workers.allowed("KWB_LUA_PATH"), true)
  t.eq(workers.allowed("KWB_API_TOKEN"), false, "a KWB_ name that looks like a secret")
  t.eq(workers.allowed("OPENAI_API_KEY"), false)
  t.eq(workers.allowed("AWS_SECRET_ACCESS_KEY"), false)
  t.eq(workers.allowed("SSH_AUTH_SOCK"), false)
  t.eq(workers.allowed("HOME"), false, "set by the pool")
  t.eq(workers.allowed("GITHUB_TOKEN"), false)
end)

t.test("test_cuda_pool_gives_each_worker_a_gpu_and_its_lock", function()
  local p = workers.pool { backend = "cuda", devices = 2, n = 4 }
  local seen = {}
  for i, slot in ipairs(p.slots) do
    local dev
    for _, kv in ipairs(slot.env) do dev = dev or kv:match("^CUDA_VISIBLE_DEVICES=(%d+)$") end
    seen[i] = dev .. " " .. slot.lock:match("[^/]+$")
  end
  t.eq(table.concat(seen, ", "), "0 cuda0.lock, 1 cuda1.lock, 0 cuda0.lock, 1 cuda1.lock")
  t.eq(p.limits.as, nil, "no address-space limit for CUDA workers")
  t.raises(function() workers.pool { backend = "cuda", limits = { as = 1 << 30 } } end,
           "an address-space limit is for host workers only")
  t.eq(workers.pool { n = 1 }.limits.as, 4 << 30)
end)

local pool = workers.pool { n = 2 }

t.test("test_worker_runs_unprivileged_in_its_scratch_without_secrets", function()
  t.eq(core.uid(), 0, "these tests run as root")
  local r = pool:call("worker_probe.identity", {})
  t.truthy(r.ok, r.reason)
  local id = r.value
  t.eq(id.uid, 65000, "the first worker's own uid")
  t.eq(id.groups, "", "supplementary groups dropped")
  t.eq(id.key, nil)
  t.eq(id.token, nil)
  t.eq(id.keep, "kept")
  t.eq(id.home, id.cwd)
  t.eq(id.tmpdir, id.cwd .. "/tmp")
  t.truthy(id.cwd:match("/kwb%-worker%-%w+$"), id.cwd)
  t.eq(id.resolved, core.cwd() .. "/kernels/nvfp4_moe/ref.cu", "tree paths resolve where kwb started, not in the scratch")
end)

t.test("test_each_worker_of_a_pool_has_its_own_uid", function()
  local a = pool:submit("worker_probe.identity", {})
  local b = pool:submit("worker_probe.identity", {})
  local ua, ub = pool:wait(a).value.uid, pool:wait(b).value.uid
  t.eq(math.min(ua, ub) .. " " .. math.max(ua, ub), "65000 65001")
  -- another pool while this one lives (another run, in this process or any other) gets other uids
  local other = workers.pool { n = 1 }
  t.eq(other:call("worker_probe.identity", {}).value.uid, 65002, "uids are claimed machine-wide")
  other:close()
  local again = workers.pool { n = 1 }
  t.eq(again:call("worker_probe.identity", {}).value.uid, 65002, "a closed pool gave its uid back")
  again:close()
  t.raises(function() workers.pool { n = 535 } end,
           "a pool of 535 workers needs uids 65000..65534, past the last unassigned one (65533)")
  t.raises(function() workers.pool { uid = -1 } end, "a pool's uid must be an integer >= 0, got -1")
end)

-- A host worker's sandboxes run as a uid of their own, claimed like the
-- workers' from the top of the range: the worker carries it as its saved
-- set-user-ID (kill(2) lets a process signal one whose real or saved uid is
-- its real or effective one, so the sandbox could signal its worker but for
-- its filter; the worker borrows the uid to kill it), and it can neither
-- trace nor read the worker (ptrace needs all three uids alike).
t.test("test_worker_sandbox_runs_as_its_own_uid", function()
  local r = pool:call("worker_probe.sandbox_identity", {})
  t.truthy(r.ok, r.reason)
  local id = r.value
  local real, eff, saved = id.judge:match("^(%d+)\t(%d+)\t(%d+)")
  local sb = id.sandbox:match("^(%d+)")
  t.eq(real, eff, "the worker's own uid, real and effective")
  t.eq(id.sandbox, string.rep(sb .. "\t", 3) .. sb, "the sandbox's, all four")
  t.eq(saved, sb, "kept as the worker's saved uid")
  t.truthy(sb ~= real, id.judge .. " / " .. id.sandbox)
  t.truthy(tonumber(sb) >= workers.uid_base and tonumber(sb) <= workers.uid_last, sb)
  t.eq(id.ran, true)
  t.eq(id.spin, "past its limit of 0.2 s")
  t.eq(id.spin_gone, true, "killed")
end)

t.test("test_worker_refuses_to_run_as_root_and_the_pool_says_so", function()
  local p = workers.pool { n = 1, uid = 0, gid = 0 }
  local ok, err = pcall(p.call, p, "worker_probe.identity", {})
  p:close()
  t.eq(ok, false)
  t.eq(err, "a worker could not start (exit status 125): kwb worker: refusing to run as root\n")
end)

t.test("test_worker_death_is_crashed_with_its_signal_and_the_worker_restarts", function()
  local before = pool:call("worker_probe.identity", {}).value.cwd
  local started = pool.started
  local r = pool:call("worker_probe.die", { "SEGV" })
  t.eq(r.ok, false)
  t.eq(r.code, "crashed")
  t.eq(r.signal, "SIGSEGV")
  t.truthy(r.reason:find("its worker died of SIGSEGV", 1, true), r.reason)
  local again = pool:call("worker_probe.sleep_then", { 0, "fine" })
  t.eq(again.ok, true)
  t.eq(again.value, "fine")
  t.eq(pool.started, started + 1, "a fresh worker was started")
  local after = pool:call("worker_probe.identity", {}).value.cwd
  t.truthy(after ~= before, "in a fresh scratch directory")
end)

t.test("test_worker_overrunning_its_deadline_is_killed_as_timeout", function()
  local t0 = core.now()
  local r = pool:call("worker_probe.sleep_then", { 30, "late" }, { limit = 0.3, what = "the probe" })
  t.eq(r.code, "timeout")
  t.truthy(core.now() - t0 < 3, "killed near its deadline")
  t.truthy(r.reason:find("into the probe (the limit is 0.3 s; 1.6 s of wall time allowed); its worker was killed", 1, true), r.reason)
end)

t.test("test_kwb_trace_writes_each_step_a_worker_names_and_the_end", function()
  local lines = {}
  local was_trace, was_out = workers.trace, workers.trace_out
  workers.trace, workers.trace_out = true, { write = function(self, ...) lines[#lines + 1] = table.concat { ... } end,
                                             flush = function() end }
  local ok, r = pcall(pool.call, pool, "worker_probe.steps", { "the build", "waiting for the device" })
  local late = ok and pool:call("worker_probe.sleep_then", { 30, "late" }, { limit = 0.2, what = "the probe" })
  workers.trace, workers.trace_out = was_trace, was_out
  t.eq(ok and r.value, "stepped", tostring(r))
  t.eq(#lines, 4, table.concat(lines))
  t.truthy(lines[1]:match("^kwb trace: task %d+ %(worker_probe%.steps%) +%d+%.%d%d%d s: the build %(limit 5 s%)\n$"), lines[1])
  t.truthy(lines[2]:match("s: waiting for the device %(limit none%)\n$"), lines[2])
  t.truthy(lines[3]:match("%(worker_probe%.steps%) +%d+%.%d%d%d s: answered\n$"), lines[3])
  t.eq(late.code, "timeout")
  t.truthy(lines[4]:find("(worker_probe.sleep_then)", 1, true) and lines[4]:find("s: timeout: no answer", 1, true), lines[4])
end)

t.test("test_a_worker_that_died_idle_is_replaced_before_its_next_task", function()
  local p = workers.pool { n = 1 }
  local first = p:call("worker_probe.identity", {}).value.cwd
  os.execute("kill -9 " .. p.slots[1].worker.pid .. "; sleep 0.2")
  local r = p:call("worker_probe.identity", {})
  p:close()
  t.eq(r.ok, true, r.reason)
  t.truthy(r.value.cwd ~= first, "a fresh worker")
  t.eq(p.started, 2)
end)

t.test("test_a_retiring_worker_answers_then_is_replaced", function()
  pool:call("worker_probe.sleep_then", { 0, "warm" })   -- the first worker is up
  local started = pool.started
  local r = pool:call("worker_probe.retire", { "last" })
  t.eq(r.ok, true)
  t.eq(r.value, "last")
  t.eq(r.retired, true)
  local again = pool:call("worker_probe.sleep_then", { 0, "next" })
  t.eq(again.value, "next")
  t.eq(pool.started, started + 1)
end)

t.test("test_results_come_back_per_task_whatever_the_finish_order", function()
  local slow = pool:submit("worker_probe.sleep_then", { 0.3, "slow" })
  local fast = pool:submit("worker_probe.sleep_then", { 0, "fast" })
  t.eq(pool:wait(slow).value, "slow")
  t.eq(pool:wait(fast).value, "fast")
  t.truthy(fast.result.seconds < slow.result.seconds)
end)

t.test("test_two_workers_never_hold_the_device_lock_at_once", function()
  local a = pool:submit("worker_probe.hold_lock", { 0.2 })
  local b = pool:submit("worker_probe.hold_lock", { 0.2 })
  local ra, rb = pool:wait(a).value, pool:wait(b).value
  t.truthy(ra[2] <= rb[1] or rb[2] <= ra[1],
           string.format("held [%.3f, %.3f] and [%.3f, %.3f]", ra[1], ra[2], rb[1], rb[2]))
end)

t.test("test_the_main_process_holding_the_device_lock_keeps_workers_from_timing", function()
  local lock = pool:device_lock()
  local t0 = core.now()
  local task = pool:submit("worker_probe.hold_lock", { 0 })
  pool:call("worker_probe.sleep_then", { 0.3, "meanwhile" })
  local released = core.now()
  lock:unlock()
  local held = pool:wait(task).value
  t.truthy(held[1] >= released, string.format("the worker locked %.3f s after the start, released at %.3f",
                                               held[1] - t0, released - t0))
end)

t.test("test_a_fork_bomb_in_one_worker_leaves_the_other_able_to_start_processes", function()
  local bomb = pool:submit("worker_probe.fork_all", { 1.5 })
  pool:call("worker_probe.sleep_then", { 0.7, "while it forks" })   -- the other worker
  local r = pool:call("worker_probe.spawn", {})
  local made = pool:wait(bomb).value
  t.truthy(made >= 200 and made < 300, tostring(made) .. " children: the limit is 256 a worker")
  t.eq(r.value, true, "a process started beside the bomb")
end)

t.test("test_a_result_past_a_frame_is_an_error_and_its_worker_serves_on", function()
  local p = workers.pool { n = 1 }
  local pid = p:call("worker_probe.identity", {}).value and p.slots[1].worker.pid
  local r = p:call("worker_probe.controls", { 12 << 20 })   -- 72 MiB as JSON
  t.eq(r.ok, false)
  t.eq(r.code, "error")
  local n = tonumber(r.reason:match("^the result is (%d+) bytes as JSON, over the 67108864 a worker's frame holds$"))
  t.truthy(n and n > 72 * 2 ^ 20, r.reason)
  local again = p:call("worker_probe.identity", {})
  t.eq(again.ok, true)
  t.eq(p.slots[1].worker.pid, pid, "the same worker")
  p:close()
end)

t.test("test_closing_the_pool_removes_the_scratch_directories", function()
  local p = workers.pool { n = 1 }
  local cwd = p:call("worker_probe.identity", {}).value.cwd
  t.eq(exists(cwd .. "/."), true)
  p:close()
  t.eq(exists(cwd .. "/."), false)
end)

-- A worker killed from outside: its scratch goes as soon as the pool notices
-- the death (at the next task), not when the handle is collected (a kwb that
-- ends with os.exit never collects it).
t.test("test_a_killed_workers_scratch_is_removed_when_its_death_is_noticed", function()
  local p = workers.pool { n = 1 }
  local cwd = p:call("worker_probe.identity", {}).value.cwd
  local pid = p.slots[1].worker.pid
  os.execute("kill -9 " .. pid)
  core.sleep(0.1)
  local again = p:call("worker_probe.identity", {})
  t.eq(again.ok, true, again.reason)
  t.truthy(again.value.cwd ~= cwd, "a fresh worker in a fresh scratch")
  t.eq(exists(cwd .. "/."), false, "the killed worker's scratch " .. cwd)
  p:close()
end)

-- A kwb killed with its workers leaves their scratch directories; the next
-- pool sweeps them: those no live handle locks and no process works in.
-- A live pool's scratch and a directory some process works in (a worker of a
-- kwb that locks no scratch) stay, however old.
local function aged(dir) os.execute("touch -d '2 minutes ago' '" .. dir .. "'") end

t.test("test_a_killed_kwbs_scratch_is_swept_at_the_next_pool_start", function()
  local child = io.popen("./kwb -e 'local p = require(\"kwb.runners.workers\").pool { n = 1 } "
                         .. "print(require(\"kwb.core\").pid(), p:call(\"worker_probe.identity\", {}).value.cwd) "
                         .. "io.stdout:flush() require(\"kwb.core\").sleep(60)'", "r")
  local kpid, left = child:read("l"):match("^(%d+)%s+(%S+)$")
  os.execute("kill -9 " .. kpid)
  child:close()
  core.sleep(0.2)
  t.eq(exists(left .. "/."), true, "the killed kwb left its worker's scratch " .. left)

  local live = workers.pool { n = 1 }
  local kept = live:call("worker_probe.identity", {}).value.cwd
  local busy = assert(io.popen("mktemp -d " .. workers.scratch_in() .. "/kwb-worker-XXXXXX")):read("l")
  local worker = io.popen("cd '" .. busy .. "' && exec sleep 60 & echo $!"):read("l")
  core.sleep(0.1)
  for _, d in ipairs { left, kept, busy } do aged(d) end

  local sweeper = workers.pool { n = 1 }
  t.eq(exists(left .. "/."), false, "swept: " .. left)
  t.eq(exists(kept .. "/."), true, "a live pool's scratch stays")
  t.eq(exists(busy .. "/."), true, "a directory a process works in stays")
  os.execute("kill -9 " .. worker)
  core.sleep(0.1)
  t.eq(core.worker_sweep(workers.scratch_in(), 60), 1, "then it goes too")
  t.eq(exists(busy .. "/."), false)
  sweeper:close()
  live:close()
  t.eq(exists(kept .. "/."), false)
end)

pool:close()

-- ---- hostile candidates through the loop ----------------------------------

local r = kwb.load "tests/recipes/isolation.lua"
local db = fresh_store("isolation")
local t0 = core.now()
local summary, run = r:run { mode = "quiet", store = db, workers = 2 }
local took = core.now() - t0
local by = {}
for _, res in ipairs(run.results) do by[res.name] = res end

t.test("test_isolation_run_finishes_and_records_every_candidate", function()
  t.eq(#run.results, 7)
  t.eq(summary.candidates, 7)
  local names = {}
  for i, res in ipairs(run.results) do names[i] = res.name end
  t.eq(table.concat(names, " "), "iso_segv.c iso_fpe.c iso_spin.c iso_alloc.c iso_output.c iso_fork.c iso_snoop.c",
       "recorded in proposal order")
  local s = r:session()
  for _, res in ipairs(run.results) do
    local stored = s.store:known(s.ctx, res.id)
    t.truthy(stored, res.name .. " is in the cache")
    t.eq(stored.outcome, res.outcome, res.name)
  end
  t.truthy(took < 30, string.format("took %.1f s", took))
end)

t.test("test_segfault_is_crashed_with_sigsegv", function()
  local res = by["iso_segv.c"]
  t.eq(res.outcome, "crashed")
  t.eq(res.signal, "SIGSEGV")
  t.truthy(res.reason:find("its sandbox died of SIGSEGV (Segmentation fault) during the first run at n=32", 1, true), res.reason)
end)

t.test("test_division_by_zero_is_crashed_with_sigfpe", function()
  local res = by["iso_fpe.c"]
  t.eq(res.outcome, "crashed")
  t.eq(res.signal, "SIGFPE")
end)

t.test("test_endless_loop_is_timeout", function()
  local res = by["iso_spin.c"]
  t.eq(res.outcome, "timeout")
  t.eq(res.reason, "one call ran past the timeout during the first run at n=32 (the timeout is 2 s of CPU time); its "
                   .. "sandbox was killed")
end)

t.test("test_100_gb_allocation_is_crashed_by_the_memory_limit", function()
  local res = by["iso_alloc.c"]
  t.eq(res.outcome, "crashed")
  t.eq(res.signal, "SIGSEGV")
end)

t.test("test_1_gib_of_output_is_capped_and_the_candidate_judged_on_its_results", function()
  local res = by["iso_output.c"]
  t.truthy(res.outcome == "slower" or res.outcome == "accepted", res.outcome .. ": " .. tostring(res.reason))
  t.eq(res.output_bytes, 1 << 30)
  t.eq(#res.output, 64 << 10)
  t.eq(res.output:match("^x+$") ~= nil, true)
end)

-- The candidate's process may start no process: its first fork is the end of it.
t.test("test_fork_bomb_is_stopped_at_its_first_fork", function()
  local res = by["iso_fork.c"]
  t.eq(res.outcome, "forbidden")
  t.eq(res.reason, "during the first run at n=32 the candidate made a system call clone (number 56), which the "
                   .. "sandbox does not allow")
end)

-- Asking for its uid is already a system call the sandbox refuses; the
-- worker's own confinement (read-only tree, no network) stays behind it.
t.test("test_snooping_candidate_is_stopped_at_its_first_look", function()
  local res = by["iso_snoop.c"]
  t.eq(res.outcome, "forbidden")
  t.truthy(res.reason:find("the candidate made a system call getuid (number 102), which the sandbox does not allow", 1,
                           true), res.reason)
  t.eq(res.output, nil, "it printed nothing")
  t.eq(exists(os.getenv("KWB_ESCAPE_TARGET")), false)
end)

t.test("test_loop_survives_to_measure_after_the_hostile_candidates", function()
  t.eq(summary.funnel.crashed, 3)
  t.eq(summary.funnel.timeout, 1)
  t.eq(summary.funnel.forbidden, 2)
  t.eq(summary.funnel.slower + summary.funnel.accepted, 1)
end)

t.test("test_a_worker_killed_from_outside_is_not_the_candidates_outcome", function()
  local r = kwb.load "tests/recipes/killed.lua"
  local s = r:session { store = fresh_store("killed") }
  s:ensure_start()
  local killed, t0 = false, core.now()
  s.pool.idle = function()   -- someone else's SIGKILL, 0.1 s into the evaluation
    local slot = s.pool.slots[1]
    if not killed and slot.task and core.now() - t0 > 0.1 then os.execute("kill -9 " .. slot.worker.pid); killed = true end
  end
  -- (the naive loop inside one pass of shape_reps.c's: other code than the start kernel's, which would be a duplicate)
  local res = s:evaluate(s:candidate({ file = "../candidates/shape_reps.c", defines = { SMALL_REPS = 1, LARGE_REPS = 1 } },
                                     "test"))
  s:close_workers()
  t.truthy(killed, "the worker was killed")
  t.truthy(res.outcome == "slower" or res.outcome == "accepted", tostring(res.outcome) .. ": " .. tostring(res.reason))
  t.truthy(res.again and res.again:find("SIGKILL", 1, true), "the first death is kept: " .. tostring(res.again))
end)

t.test("test_pool_wait_moves_model_requests_on_through_its_idle_hook", function()
  local httpd, http = require "httpd", require "kwb.base.http"
  local srv = httpd.start("=== 200 delay=0.3\nContent-Type: application/json\n\n{\"ok\": 1}\n")
  local pool = workers.pool { n = 1 }
  local client = http.client()
  local ticket = client:post { url = srv.url .. "/v1/x", body = "{}" }
  pool.idle = function() client:poll(0) end
  local t0 = core.now()
  local r = pool:wait(pool:submit("worker_probe.sleep_then", { 1.0, "done" }))
  t.eq(r.value, "done")
  t.truthy(ticket.result, "the request finished while the worker ran")
  t.eq(ticket.result.status, 200)
  t.truthy(core.now() - t0 < 2.5, "no waiting beyond the worker's second")
  pool:close()
  srv:stop()
end)

t.done()
