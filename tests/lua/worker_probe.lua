-- tests/lua/worker_probe.lua: small functions test_workers.lua runs inside
-- workers (found there through KWB_LUA_PATH).
local files = require "kwb.base.files"
local core = require "kwb.core"

local M = {}

-- Hold the device lock for `seconds`; return when it was held (this
-- machine's monotonic clock, shared by every process).
function M.hold_lock(seconds)
  core.worker_lock(true)
  local t0 = core.now()
  while core.now() - t0 < seconds do end
  local t1 = core.now()
  core.worker_lock(false)
  return { t0, t1 }
end

function M.sleep_then(seconds, value)
  local t0 = core.now()
  while core.now() - t0 < seconds do end
  return value
end

-- Name two steps, as a measurement does when it sets their limits.
function M.steps(a, b)
  local channel = require "kwb.base.channel"
  channel.limit(5, a)
  channel.limit(nil, b)
  return "stepped"
end

-- A sandbox started here (core/sandbox.c): its uids and this worker's, as
-- /proc says (real, effective, saved), whether it ran a call, and whether
-- one past its limit was killed (a sandbox of another uid is signalled by
-- borrowing it).
function M.sandbox_identity()
  local host = require "kwb.host"
  local function uids(pid)
    local f = io.open("/proc/" .. pid .. "/status")
    local st = f and f:read("a") or ""
    if f then f:close() end
    return st:match("\nUid:\t([^\n]*)")
  end
  local mod = assert(host.compile { file = files.resolve("tests/sandbox/add.c"), no_load = true })
  local a, c = core.buffer("f32", 4), core.buffer("f32", 4)
  local sb = assert(mod:sandbox "void add(int n, const float *a, float *c)")
  local ran = sb:call(1, 4, a, c) ~= nil
  local out = { sandbox = uids(sb:pid()), judge = uids("self"), ran = ran }
  sb:close()
  local spin = assert(host.compile { file = files.resolve("tests/sandbox/spin.c"), no_load = true })
  sb = assert(spin:sandbox "void add(int n, const float *a, float *c)")
  local pid = sb:pid()
  local _, why = sb:call(0.2, 4, a, c)
  out.spin, out.spin_gone = why, io.open("/proc/" .. pid .. "/status") == nil
  return out
end

function M.identity()
  local f = io.open("/proc/self/status")
  local status = f and f:read("a") or ""
  if f then f:close() end
  return { uid = core.uid(), cwd = core.cwd(), home = os.getenv("HOME"), tmpdir = os.getenv("TMPDIR"),
           key = os.getenv("OPENAI_API_KEY"), token = os.getenv("KWB_API_TOKEN"), keep = os.getenv("KWB_KEEP_ME"),
           groups = status:match("Groups:[ \t]*([^\n]*)"),
           resolved = require("kwb.base.files").resolve("kernels/nvfp4_moe/ref.cu") }
end

-- n bytes of \1: six bytes each as JSON (\u0001).
function M.controls(n) return string.rep("\1", n) end

-- Start children that sleep `seconds` until the process limit stops the
-- shell (a line each); hold them that long, then return how many started.
function M.fork_all(seconds)
  local t0 = core.now()
  local f = io.popen(string.format("i=0; while [ $i -lt 2000 ]; do sleep %g & echo; i=$((i+1)); done 2>/dev/null",
                                   seconds))
  local n = 0
  for _ in f:lines() do n = n + 1 end
  f:close()
  while core.now() - t0 < seconds do end
  return n
end

-- Whether this worker can start a process now.
function M.spawn()
  return os.execute("true") == true
end

function M.die(sig)
  os.execute("kill -" .. sig .. " " .. io.open("/proc/self/stat"):read("l"):match("^(%d+)"))
  return "still here"
end

function M.retire(value)
  require("kwb.base.channel").retire()
  return value
end

return M
