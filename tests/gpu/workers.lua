-- tests/gpu/workers.lua: candidates in GPU workers (run by tests/gpu/run): an
-- illegal-address kernel (crashed, with the CUDA error), an endless kernel
-- (timeout: its worker killed) and then a good kernel (verified and timed in
-- a fresh worker), all in one recipe run, all three in the cache.
local t = require "t"
local store = require "kwb.loop.store"

local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local r = kwb.load "tests/recipes/gpu_workers.lua"
local db = store.open(dir .. "/gpu_workers.db")
local t0 = kwb.now()
local summary, run = r:run { mode = "plain", store = db }
local took = kwb.now() - t0
local by = {}
for _, res in ipairs(run.results) do by[res.name] = res end

t.test("gpu_workers_one_worker_per_gpu", function()
  t.eq(run.workers, (require("kwb.cuda").device_count()))
  t.eq(summary.candidates, 3)
end)

t.test("gpu_workers_illegal_address_is_crashed_with_the_cuda_error", function()
  local res = t.truthy(by["illegal_address.cu"])
  t.eq(res.outcome, "crashed")
  t.truthy(res.reason:find("CUDA_ERROR_ILLEGAL_ADDRESS", 1, true), res.reason)
end)

t.test("gpu_workers_endless_kernel_is_timeout", function()
  local res = t.truthy(by["spin.cu"])
  t.eq(res.outcome, "timeout")
  t.truthy(res.reason:find("(the limit is 2 s; 5 s of wall time allowed); its worker was killed", 1, true), res.reason)
end)

t.test("gpu_workers_good_kernel_after_them_is_verified_and_timed", function()
  local res = t.truthy(by["good.cu"])
  t.truthy(res.outcome == "slower" or res.outcome == "accepted", res.outcome .. ": " .. tostring(res.reason))
  t.truthy(res.shapes["n=65536"].median > 0)
end)

t.test("gpu_workers_cache_holds_every_record", function()
  local s = r:session()
  for _, res in ipairs(run.results) do
    local stored = s.store:known(s.ctx, res.id)
    t.truthy(stored, res.name)
    t.eq(stored.outcome, res.outcome, res.name)
  end
end)

print(string.format("gpu workers: 3 candidates in %.1f s: %s, %s, %s", took, by["illegal_address.cu"].outcome,
                    by["spin.cu"].outcome, by["good.cu"].outcome))
t.done()
