-- tests/bench/sandbox_bench.lua: what a host candidate's sandbox costs.
--   ./kwb tests/bench/sandbox_bench.lua [calls]
-- Prints the start of a sandbox (fork, exec, load, filters), and per call of
-- an empty kernel the sandbox's CPU time (what every timed run includes) and
-- the judge's wall time (the request, the answer, the wait for its sleep),
-- beside the same empty kernel called in this process.
local core = require "kwb.core"
local host = require "kwb.host"

local calls = tonumber(arg and arg[1]) or 2000
local src = "void empty(int n, float *x) { (void)n; (void)x; }"
local mod = assert(host.compile { source = src, name = "empty.c", no_load = true })
local here = assert(host.compile { source = src, name = "empty.c" }):fn "void empty(int n, float *x)"
local x = core.buffer("f32", 1024)

local starts = {}
for i = 1, 20 do
  local t0 = core.now()
  local sb = assert(mod:sandbox "void empty(int n, float *x)")
  starts[i] = core.now() - t0
  sb:close()
end

local sb = assert(mod:sandbox "void empty(int n, float *x)")
assert(sb:call(1, 0, x))   -- maps x
local cpu, wall = {}, {}
local t0 = core.now()
for i = 1, calls do
  local r = assert(sb:call(1, 0, x))
  cpu[i], wall[i] = r.cpu, r.wall
end
local loop = (core.now() - t0) / calls
sb:close()

local t1 = core.now()
for _ = 1, calls do here(0, x) end
local inproc = (core.now() - t1) / calls

local function us(v) return string.format("%.2f us", v * 1e6) end
local s, c, w = core.stats(starts, 0.01), core.stats(cpu, 0.01), core.stats(wall, 0.01)
print(string.format("sandbox start (20)        median %s, min %s", string.format("%.2f ms", s.median * 1e3),
                    string.format("%.2f ms", s.min * 1e3)))
print(string.format("empty call, sandbox CPU   median %s, p10 %s, p90 %s (%d calls)", us(c.median), us(c.p10),
                    us(c.p90), calls))
print(string.format("empty call, judge's wall  median %s, p10 %s, p90 %s", us(w.median), us(w.p10), us(w.p90)))
print(string.format("empty call, loop          %s a call, all included", us(loop)))
print(string.format("empty call, in process    %s a call (libffi)", us(inproc)))
