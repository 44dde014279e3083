-- tests/lua/test_pinned_run.lua: the loop's results pinned, so a change to
-- its structure that changes what it evaluates or records shows here.
-- `kwb recipes/host_matmul.lua --json --strategy grid --budget 30 --seed 1`
-- from an empty cache: the same candidates in the same order, each with the
-- same input seed and sequence number, every one verified (accepted or
-- slower: which of the two is a timing, not a fixed value); the planted
-- recipe's candidates with their exact outcomes.
-- The replayed model's run likewise.
local t = require "t"
local cjson = require "cjson"
local store = require "kwb.loop.store"

local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")

-- id prefix, sequence number, input seed (the start kernel first)
local grid = {
  { "b5246a8a4d67488d", 1, 16910776326332 },
  { "4e02d7ace526491b", 2, 72669284029489 },
  { "8646051cb564e3fa", 3, 274771186351473 },
  { "c3b4103c4868c464", 4, 219363015561985 },
  { "1d05953ca722e742", 5, 127289377484109 },
  { "cacd27567db93cb3", 6, 97913175833301 },
  { "748cadd79c6c6763", 7, 21663983089153 },
  { "a93cfad554c5f5ab", 8, 139059798707902 },
  { "eb1c159fee547146", 9, 224448072404846 },
  { "f49807313bd1f8d3", 10, 96644728591010 },
  { "860234e0525a98bc", 11, 19059547344272 },
  { "9308c3dc449d98ba", 12, 61785839215669 },
  { "0d37edbc96bd9bf9", 13, 44284027665694 },
  { "d37167ce245aaa4a", 14, 24140582827197 },
  { "1dd38589107c3368", 15, 169926254876515 },
  { "2402e57fbb4b0ccd", 16, 247903618529048 },
  { "b31883f45420df13", 17, 92025536909337 },
  { "7bd0daa7555d5552", 18, 145959146689071 },
  { "a2e38fa892784424", 19, 76241278159872 },
  { "85c189e918c5032d", 20, 187616421648009 },
  { "4fb0ee92e149eb21", 21, 103209554867661 },
  { "fab7e6c98669b441", 22, 195874658148539 },
  { "38ba238e60f0ba82", 23, 244199565665788 },
  { "eba142be22bed3eb", 24, 208356403685073 },
  { "fb1f0f2d855bd38c", 25, 184285963075469 },
  { "016b77cc557528d4", 26, 11484524005236 },
  { "b90e16b41606a453", 27, 156244489112391 },
  { "a82e3eb39a435870", 28, 72966089357841 },
  { "fc02334dbe1ae2ba", 29, 175207374868235 },
  { "aaaaf37756ce40eb", 30, 223589077432292 },
  { "10e46764c5805ce0", 31, 124312604848083 },
}

local path = tmp .. "/pinned.db"
local p = assert(io.popen("./kwb --cache " .. path
                          .. " recipes/host_matmul.lua --json --strategy grid --budget 30 --seed 1 2>&1"))
local events = {}
for line in p:lines() do events[#events + 1] = line end
p:close()

t.test("pinned_grid_run_proposes_the_same_candidates_in_order", function()
  local cands = {}
  for _, l in ipairs(events) do
    local e = cjson.decode(l)
    if e.event == "candidate" then cands[#cands + 1] = e end
    if e.event == "start-kernel" then t.eq(e.id:sub(1, 16), grid[1][1], "the start kernel") end
  end
  t.eq(#cands, 30, "candidates")
  for i, c in ipairs(cands) do
    t.eq(c.id:sub(1, 16), grid[i + 1][1], "candidate " .. i)
    t.truthy(c.outcome == "accepted" or c.outcome == "slower", "candidate " .. i .. " is " .. c.outcome)
  end
  local sm = cjson.decode(events[#events])
  t.eq(sm.event, "summary")
  t.eq(sm.funnel.accepted + sm.funnel.slower, 30, "every candidate verified")
end)

t.test("pinned_grid_run_records_the_same_sequence_and_seeds", function()
  local st = store.open(path)
  local r = kwb.load "recipes/host_matmul.lua"
  local got = st:results(r:session { store = st }.ctx)
  t.eq(#got, #grid, "results recorded")
  for i, res in ipairs(got) do
    t.eq(res.id:sub(1, 16), grid[i][1], "result " .. i)
    t.eq(res.seq, grid[i][2], "seq of result " .. i)
    t.eq(res.seed, grid[i][3], "seed of result " .. i)
  end
  t.eq(got[1].outcome, "start")
end)

-- the planted recipe: id prefix, outcome, sequence number, input seed
local planted = {
  { "11a0944795190f51", "forbidden", 2, 3886435234734 },
  { "804f90ecc29d08de", "forbidden", 3, 227685637833442 },
  { "9534b92ca9d3aa21", "compile-error", 4, 245800070258654 },
  { "a362ba95b9d20c8d", "wrong", 5, 208048403002488 },
  { "b3bed2c5bf38baa7", "slower", 6, 69487243722584 },
  { "ed8ba62057d6e51a", "accepted", 7, 267274786986691 },
}

t.test("pinned_planted_run_gives_the_same_ids_outcomes_and_seeds", function()
  local ppath = tmp .. "/pinned_planted.db"
  local r = kwb.load "tests/recipes/planted.lua"
  local _, run = r:run { mode = "quiet", store = store.open(ppath) }
  t.eq(#run.results, #planted, "results")
  for i, res in ipairs(run.results) do
    local want = planted[i]
    t.eq(res.id:sub(1, 16), want[1], "planted " .. i)
    t.eq(res.outcome, want[2], "outcome of planted " .. i)
    t.eq(res.seq, want[3], "seq of planted " .. i)
    t.eq(res.seed, want[4], "seed of planted " .. i)
  end
end)

-- recipes/host_matmul_llm.lua with its replayed model, seed 1: id prefix,
-- outcome ("verified": accepted or slower, which of the two is a timing),
-- sequence number, input seed
local llm = {
  { "38f55a2ef425d639", "verified", 2, 153297948686793 },
  { "e296437ea6c0d77f", "forbidden", 3, 208094384655503 },
  { "d5ea37defd5eaab5", "no-code", 4, 235031926545858 },
  { "f7cda48b533fec4c", "wrong", 5, 170977329482293 },
  { "42e388a89b3a757d", "verified", 6, 67712958676587 },
  { "e4db71f3ce8a6e10", "verified", 7, 3511090361602 },
  { "a8cb7556f5d333d9", "verified", 8, 147654766066325 },
  { "096fb48b89ff7d67", "verified", 9, 78670486571332 },
  { "1e0a636b9e73f2a3", "verified", 10, 173503709206957 },
  { "34e2f5a33fe9b14b", "verified", 11, 153340893559798 },
}

t.test("pinned_replayed_llm_run_gives_the_same_ids_outcomes_and_seeds", function()
  local r = kwb.load "recipes/host_matmul_llm.lua"
  local _, run = r:run { mode = "quiet", store = store.open(tmp .. "/pinned_llm.db"), seed = 1 }
  t.eq(#run.results, #llm, "results")
  for i, res in ipairs(run.results) do
    local want = llm[i]
    local outcome = (res.outcome == "accepted" or res.outcome == "slower") and "verified" or res.outcome
    t.eq(res.id:sub(1, 16), want[1], "reply candidate " .. i)
    t.eq(outcome, want[2], "outcome of reply candidate " .. i)
    t.eq(res.seq, want[3], "seq of reply candidate " .. i)
    t.eq(res.seed, want[4], "seed of reply candidate " .. i)
  end
end)

t.done()
