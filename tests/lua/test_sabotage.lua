-- tests/lua/test_sabotage.lua: a candidate's effects end with its
-- evaluation. Saboteurs that compute correctly but flip redzone bytes of
-- every other buffer they can reach while timed at their last shape are
-- `wrong` themselves, and the honest candidates after them are judged as in
-- a clean run: the sandbox holds only the buffers of the calls at hand, and
-- everything a harness keeps across candidates is looked at before each
-- candidate's first call and after its last (kwb.measure.verify.sweep).
local t = require "t"
local host = require "kwb.host"
local measure = require "kwb.measure"
local store = require "kwb.loop.store"

local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local function fresh_store(name)
  local path = tmp .. "/" .. name .. ".db"
  for _, suffix in ipairs { "", "-wal", "-shm" } do os.remove(path .. suffix) end
  return store.open(path)
end

-- (the sandbox's mappings follow one another, so which of the other calls'
-- buffers a saboteur meets first varies with the batch: any of the three)
local sabotaged = "^the candidate wrote outside (%a+ %a) at n=16 %(timed run %d+%): byte offsets %-1 to %-1 of a "
                  .. "buffer of 1024 bytes$"
local names = { ["input a"] = true, ["input b"] = true, ["output c"] = true }

-- The run goes through a worker, whose harness (each shape's bench and its
-- batch copies) outlives each candidate's task: the tasks after a saboteur's
-- meet that harness clean.
local r = kwb.load "tests/recipes/sabotage.lua"
local _, run = r:run { mode = "quiet", store = fresh_store("sabotage") }

t.test("sabotage_run_has_two_saboteurs_each_followed_by_two_honest_candidates", function()
  t.eq(#run.results, 6)
  t.eq(run.results[1].name, "sabotage_remember.c")
  t.eq(run.results[4].name, "sabotage_probe.c")
end)

for _, i in ipairs { 1, 4 } do
  t.test("sabotage_" .. (i == 1 and "remembering" or "probing") .. "_saboteur_is_wrong_naming_the_buffer", function()
    local res = run.results[i]
    t.eq(res.outcome, "wrong", res.reason)
    local name = res.reason:match(sabotaged)
    t.truthy(name and names[name], res.reason)
  end)
end

for _, i in ipairs { 2, 3, 5, 6 } do
  t.test("sabotage_honest_candidate_" .. i .. "_after_a_saboteur_is_verified", function()
    local res = run.results[i]
    t.truthy(res.outcome == "accepted" or res.outcome == "slower", tostring(res.outcome) .. ": " .. tostring(res.reason))
  end)
end

-- A worker's kept state damaged between two tasks (here by a write from
-- outside any candidate's calls): the next task's look before its first
-- call finds it and puts it right, and its candidate is judged as if
-- nothing had happened.
local poke = assert(assert(host.compile {
  source = "void poke(unsigned char *p, int at) { p[at] ^= 0xFF; }\n", name = "poke.c" }):fn "void poke(void *p, int at)")
local naive = { source = io.open("kernels/host/matmul_naive.c"):read("a"), name = "naive.c" }

t.test("sabotage_kept_state_damaged_between_tasks_is_put_right_before_the_next", function()
  local h = measure.harness(r)
  local res = h:measure(naive, { seconds = {}, shapes = {}, seed = 1 })
  t.eq(res.outcome, nil, res.reason)
  local b48 = h.benches["n=48"]
  poke(b48.bufs.a, -1)
  poke(h.benches["n=16"].copies[2].bufs.c, 1024)
  res = h:measure(naive, { seconds = {}, shapes = {}, seed = 2 })
  t.eq(res.outcome, nil, res.reason)
  t.eq(h.repaired, "an earlier task wrote outside output c at n=16 (found before the next candidate's first call): "
                   .. "byte offsets 1024 to 1024 of a buffer of 1024 bytes", "the first in the order of the shapes' keys")
  t.eq(b48.bufs.a:redzone(), nil, "restored")
  t.eq(h.benches["n=16"].copies[2].bufs.c:redzone(), nil, "every finding restored, not only the first")
end)

t.done()
