-- tests/bench/queue_bench.lua: candidates per second of a run whose
-- candidates go through a Redis queue (kwb.runners.queue) to 1, 2 and 4 host workers
-- (`kwb worker --queue`, separate processes), against the same run with its
-- own local worker: recipes/host_matmul.lua, grid strategy, seed 1, a fixed
-- budget, each run from a fresh cache. A redis-server of its own is started
-- on 127.0.0.1 and stopped at the end.
--
--   ./kwb tests/bench/queue_bench.lua [BUDGET] [REPEATS]
--
-- Workers on one machine share its device lock (two timings never run at
-- once on one device), so more workers there overlap builds and
-- verification with the one timing, not timings with each other.
local core = require "kwb.core"
local run_json = dofile("tests/lua/run_json.lua")   -- (the run's summary from its JSON events)
local queue = require "kwb.runners.queue"

local budget = math.tointeger(tonumber((...) or "24")) or 24
local repeats = math.tointeger(tonumber((select(2, ...)) or "2")) or 2
local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir))
local port = 23000 + core.pid() % 5000
local url = string.format("redis://:bench@127.0.0.1:%d/bench", port)
assert(os.execute(string.format("redis-server --port %d --bind 127.0.0.1 --requirepass bench --save '' "
                                .. "--appendonly no --daemonize yes --dir %s --logfile %s/redis.log", port, dir, dir)))
core.sleep(0.5)
local q = assert(queue.parse(url))

local function live()
  local link = queue.connect(q)
  local n = #queue.workers(link, q)
  link:close()
  return n
end

local function run(what, extra)
  local cache = string.format("%s/%s-%.0f.db", dir, what:gsub("%W+", "-"), core.now() * 1000)
  local cmd = string.format("./kwb --cache %s recipes/host_matmul.lua --json --budget %d --seed 1 --strategy grid %s 2>&1",
                            cache, budget, extra)
  local summary, wall = run_json.summary(cmd)
  local rate = summary.candidates / summary.seconds
  print(string.format("%-16s %2d candidates  %6.2f s in the loop  %6.2f s wall  %5.2f candidates/s", what,
                      summary.candidates, summary.seconds, wall, rate))
  return rate
end

local rows = {}
local ok, err = pcall(function()
  for _ = 1, repeats do
    rows["local, 1 worker"] = rows["local, 1 worker"] or {}
    table.insert(rows["local, 1 worker"], run("local, 1 worker", "--workers 1"))
  end
  local started = 0
  for _, n in ipairs { 1, 2, 4 } do
    for _ = started + 1, n do
      assert(os.execute(string.format("./kwb worker --queue '%s' --backend host >> %s/workers.log 2>&1 &", url, dir)))
    end
    started = n
    local t0 = core.now()
    while live() < n do
      if core.now() - t0 > 30 then error(string.format("only %d of %d workers on the queue", live(), n)) end
      core.sleep(0.1)
    end
    local what = string.format("queue, %d worker%s", n, n == 1 and "" or "s")
    rows[what] = {}
    for _ = 1, repeats do table.insert(rows[what], run(what, "--queue '" .. url .. "'")) end
  end
end)
os.execute(string.format("pkill -f -- '--queue %s'", url))
local r = core.redis_connect { host = "127.0.0.1", port = port }
if r then r:call("AUTH", "bench"); r:call("SHUTDOWN", "NOSAVE"); r:close() end
os.execute("rm -rf " .. dir)
if not ok then error(err, 0) end
print(string.format("median candidates/s, budget %d, %d runs each:", budget, repeats))
for _, what in ipairs { "local, 1 worker", "queue, 1 worker", "queue, 2 workers", "queue, 4 workers" } do
  local xs = rows[what]
  table.sort(xs)
  print(string.format("  %-16s %5.2f", what, (xs[(#xs + 1) // 2] + xs[#xs // 2 + 1]) / 2))
end
