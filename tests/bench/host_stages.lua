-- tests/bench/host_stages.lua: where a host research run's time goes.
--   ./kwb --cache DIR/kwb.db tests/bench/host_stages.lua DIR/run.db
-- Runs recipes/host_matmul.lua's fields (anneal, 30 candidates, seed 1) in
-- this process, one stage after another (no workers), and prints the total
-- and the seconds of builds, verification and timing summed over every
-- measurement, and of drawing fresh inputs for timed runs (kwb.measure.inputs.fresh).
local core = require "kwb.core"
local inputs = require "kwb.measure.inputs"
local measure = require "kwb.measure"

local db = assert(arg and arg[1], "usage: kwb tests/bench/host_stages.lua RUN.db")
local shipped = kwb.load "recipes/host_matmul.lua"
local acc = { build = 0, verify = 0, time = 0, fresh = 0, n = 0 }
local Harness = getmetatable(measure.harness(shipped)).__index
local measure_one = Harness.measure
Harness.measure = function(self, cand, res, opts)
  local r = measure_one(self, cand, res, opts)
  for _, k in ipairs { "build", "verify", "time" } do acc[k] = acc[k] + (res.seconds[k] or 0) end
  acc.n = acc.n + 1
  return r
end
local fresh = inputs.fresh
inputs.fresh = function(...)
  local t0 = core.now()
  fresh(...)
  acc.fresh = acc.fresh + core.now() - t0
end
-- the same fields in a recipe no file returns, so it is measured here
local spec = { name = "host_stages", problem = require("kwb.problems.matmul") {}, strategy = "anneal",
               flags = { "-O3", "-march=native" }, forbid = { "default" }, race = 0.10 }
spec.shapes = { n = { 64, 128, 200 } }
spec.start = "../../kernels/host/matmul_naive.c"
spec.template = "../../kernels/host/matmul_tiled.c"
spec.space = { BM = { 4, 8, 16, 32, 64 }, BN = { 32, 64, 128, 256 }, BK = { 8, 16, 32, 64, 128 }, UNROLL = { 1, 2, 4, 8 },
               restrict = function(p) return p.UNROLL <= p.BK end }
spec.budget = { candidates = 30, minutes = 3, timeout = 5 }
spec.timing = { warmup = 0.005, min_samples = 5, cap = 0.1, target = 0.01 }
spec.seed = 1
local r = kwb.recipe(spec)
local t0 = core.now()
r:run { mode = "quiet", store = require("kwb.loop.store").open(db) }
print(string.format("total %.2f s for %d measurements: build %.2f, verify %.2f, time %.2f (fresh inputs %.2f)",
                    core.now() - t0, acc.n, acc.build, acc.verify, acc.time, acc.fresh))
