-- tests/lua/test_lessons.lua: the lessons ledger (kwb.strategies.lessons,
-- kwb.cache.lessons, kwb lessons). A summary's reply read strictly; lessons
-- kept per problem and device kind with their tags and candidates, an older
-- cache migrated; the prompt's choice of them; a replayed transcript's
-- summaries apart from its proposals. Against the scripted server
-- (build/httpd, tests/recipes/llm_host.lua): the summarising request after N
-- candidates (its body), the lessons stored, a later run's prompt holding
-- them, `kwb lessons`, a bundle carrying them, a malformed summary keeping
-- nothing. And the figure: a host recipe run twice with a scripted model
-- that acts on its prompt's lessons (tests/recipes/lessons_host.lua).
local t = require "t"
local cjson = require "cjson"
local core = require "kwb.core"
local httpd = require "httpd"
local cache_mod = require "kwb.cache"
local lessons = require "kwb.strategies.lessons"
local ktext = require "kwb.base.text"

local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local canary = "sk-canary-lessons-3e91"

local function fresh(name)
  local path = tmp .. "/" .. name .. ".db"
  for _, s in ipairs { "", "-wal", "-shm" } do os.remove(path .. s) end
  return path
end

-- sh(cmd) -> its output (stdout and stderr), its exit status
local function sh(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  local _, _, status = p:close()
  return out, status
end

local function lines_of(text)
  local out = {}
  for l in text:gmatch("[^\n]+") do out[#out + 1] = l end
  return out
end

-- ---- reading a summary ---------------------------------------------------------

local A = "a1b2c3d4" .. string.rep("0", 56)
local B = "b1c2d3e4" .. string.rep("1", 56)
local evidence = { { id = A }, { id = B } }

t.test("lessons_parse_reads_one_block_of_tagged_lines_naming_the_evidence", function()
  local got = assert(lessons.parse("Two lessons.\n\n```lessons\n- [loop-order, vectorize] Walk b by rows (ids: a1b2c3d4, "
                                   .. A .. ")\n  - [compile]  Check the syntax  (ids: B1C2D3E4)\n```\nThat is all.\n",
                                   evidence))
  t.eq(#got, 2, "lessons")
  t.eq(got[1].text, "Walk b by rows")
  t.eq(table.concat(got[1].tags, " "), "loop-order vectorize")
  t.eq(table.concat(got[1].ids, " "), A, "a prefix and the whole id name one candidate")
  t.eq(got[2].text, "Check the syntax")
  t.eq(table.concat(got[2].tags, " "), "compile")
  t.eq(table.concat(got[2].ids, " "), B)
  t.eq(#assert(lessons.parse("```lessons\n- none\n```", evidence)), 0, "nothing new")
end)

t.test("lessons_parse_refuses_a_malformed_summary_and_says_why", function()
  local function why(text) return select(2, lessons.parse(text, evidence)) end
  local block = function(body) return "```lessons\n" .. body .. "\n```\n" end
  t.eq(why("Loop order matters."), "the reply has no ```lessons block")
  t.eq(why(block("- none") .. block("- none")), "the reply has 2 ```lessons blocks, not one")
  t.eq(why("```lessons\n- [tiling] Block for L1 (ids: a1b2c3d4)\n"),
       "its ```lessons block is not closed (the reply was cut off?)")
  t.eq(why(block("")), "its ```lessons block is empty (`- none` says the evidence teaches nothing new)")
  t.eq(why(block("- loop order matters (ids: a1b2c3d4)")),
       "line 1 of its ```lessons block: it is not `- [tags] lesson (ids: ...)`: - loop order matters (ids: a1b2c3d4)")
  t.eq(why(block("- [tiling] Block for L1 (ids: a1b2c3d4)\n- [Loop Order] Rows first (ids: a1b2c3d4)")),
       "line 2 of its ```lessons block: its tag 'Loop Order' is not a lowercase word (letters, digits and '-', at "
       .. "most 32 bytes): - [Loop Order] Rows first (ids: a1b2c3d4)")
  t.eq(why(block("- [tiling] Block for L1 (ids: c0ffee00)")),
       "line 1 of its ```lessons block: it names c0ffee00, not a candidate of the evidence: - [tiling] Block for L1 "
       .. "(ids: c0ffee00)")
  t.eq(why(block("- [tiling] Block for L1 (ids: a1b2)")),
       "line 1 of its ```lessons block: it names a1b2, not a candidate of the evidence: - [tiling] Block for L1 (ids: a1b2)")
  t.eq(why(block("- [tiling] Block for L1 (ids: )")),
       "line 1 of its ```lessons block: it names no candidate: - [tiling] Block for L1 (ids: )")
  t.eq(why(block("- [a, b, c, d, e] Five tags (ids: a1b2c3d4)")),
       "line 1 of its ```lessons block: its tags are not a list of 1 to 4 words: - [a, b, c, d, e] Five tags (ids: a1b2c3d4)")
  t.eq(why(block(string.rep("- [tiling] Block (ids: a1b2c3d4)\n", 7))), "its ```lessons block has 7 lines, more than 6")
end)

-- ---- the cache -------------------------------------------------------------------

-- A cache with candidates of two problems.
local function cands(path)
  local c = assert(cache_mod.open(path))
  local ids = {}
  for i, p in ipairs { "matmul", "matmul", "sgemm", "sgemm" } do
    ids[i] = c:put_candidate { problem = p, source = "void k" .. i .. "(void) {}\n" }
  end
  return c, ids
end

t.test("lessons_cache_keeps_them_per_problem_and_device_with_tags_and_ids", function()
  local c, ids = cands(fresh("keep"))
  t.raises(function() c:put_lessons { problem = "matmul", device = "d", lessons = { { text = "x", tags = { "t" },
                                                                                      ids = { "c0ffee00" } } } } end,
           "lessons[1].ids[1]: no candidate c0ffee00 in the cache")
  t.raises(function() c:put_lessons { problem = "matmul", device = "d", lessons = { { text = "x", tags = {},
                                                                                      ids = { ids[1] } } } } end,
           "lessons[1]: its tags are not a list of 1 to 4 words")
  local got = c:put_lessons { problem = "matmul", device = "d", run = "r1", created = 100,
                              lessons = { { text = "Rows first", tags = { "loop-order" }, ids = { ids[1]:sub(1, 8), ids[2] } },
                                          { text = "Block for L1", tags = { "tiling", "cache" }, ids = { ids[2] } } } }
  t.eq(#got, 2, "two ids")
  c:put_lessons { problem = "matmul", device = "d", created = 101,   -- the same lesson again: kept once
                  lessons = { { text = "Rows first", tags = { "loop-order" }, ids = { ids[1], ids[2] } } } }
  c:put_lessons { problem = "matmul", device = "other", created = 102,
                  lessons = { { text = "Elsewhere", tags = { "tiling" }, ids = { ids[1] } } } }
  local rows = c:lessons { problem = "matmul", device = "d" }
  t.eq(#rows, 2, "this problem on this device")
  t.eq(rows[1].id, got[1])
  t.eq(rows[1].text, "Rows first")
  t.eq(rows[1].pos, 1)
  t.eq(rows[1].run, "r1")
  t.eq(rows[1].created, 100, "the first time it was kept")
  t.eq(table.concat(rows[1].ids, " "), ids[1] .. " " .. ids[2], "whole ids")
  t.eq(table.concat(rows[2].tags, " "), "tiling cache")
  t.eq(#c:lessons { device = "other" }, 1)
  t.eq(#c:lessons(), 3)
  t.eq(c:check().ok, true, "every lesson makes sense")
  c:exec("UPDATE lesson SET tags = '[]' WHERE id = ?1", got[2])
  local r = c:check()
  t.eq(#r.unsound, 1)
  t.eq(r.unsound[1].what .. ": " .. r.unsound[1].message, "lesson " .. got[2] .. ": its tags are not a list of 1 to 4 words")
  r = c:check { repair = true }
  t.eq(r.repaired[1].repaired, "removed")
  t.eq(#c:lessons { problem = "matmul", device = "d" }, 1, "the lesson that made no sense removed")
  c:close()
end)

t.test("lessons_an_older_cache_opens_migrated_and_keeps_its_rows", function()
  local path = fresh("v5")
  local c = assert(cache_mod.open(path))
  local id = c:put_candidate { problem = "matmul", source = "void k(void) {}\n" }
  c:exec("DROP TABLE lesson")   -- a cache of schema 5: no lessons ledger
  c:exec("PRAGMA user_version = 5")
  c:close()
  local again = assert(cache_mod.open(path))
  t.eq(again:exec("PRAGMA user_version")[1].user_version, core.cache_schema_version, "migrated")
  t.eq(core.cache_schema_version, 6)
  t.eq(#again:list(), 1, "its candidate kept")
  t.eq(#again:lessons(), 0, "none yet")
  again:put_lessons { problem = "matmul", device = "d", lessons = { { text = "Rows first", tags = { "x" }, ids = { id } } } }
  t.eq(again:lessons()[1].text, "Rows first", "lessons kept")
  again:close()
end)

-- ---- which lessons a prompt shows ---------------------------------------------

t.test("lessons_relevant_puts_the_problems_own_first_then_shared_tags_within_the_bytes", function()
  local c, ids = cands(fresh("relevant"))
  local function put(problem, device, created, text, tags, id)
    c:put_lessons { problem = problem, device = device, created = created,
                    lessons = { { text = text, tags = tags, ids = { id } } } }
  end
  put("matmul", "d", 10, "Rows first", { "loop-order" }, ids[1])
  put("matmul", "d", 20, "Block for L1", { "tiling" }, ids[2])
  put("sgemm", "d", 30, "Vector loads pay", { "vectorize" }, ids[3])
  put("sgemm", "d", 5, "Tiles of 64 with vector loads", { "tiling", "vectorize" }, ids[4])
  put("sgemm", "d", 40, "Unroll by four", { "unroll" }, ids[3])
  put("sgemm", "other", 50, "Block for L2", { "tiling" }, ids[4])
  local recipe = { problem = { key = function() return "matmul" end }, tags = { "vectorize" } }
  local want = {
    "- [tiling] Block for L1 (ids: " .. ids[2]:sub(1, 8) .. ")",
    "- [loop-order] Rows first (ids: " .. ids[1]:sub(1, 8) .. ")",
    "- [tiling, vectorize] Tiles of 64 with vector loads (ids: " .. ids[4]:sub(1, 8) .. "; problem sgemm)",
    "- [vectorize] Vector loads pay (ids: " .. ids[3]:sub(1, 8) .. "; problem sgemm)",
  }
  local all = lessons.relevant(c, recipe, "d", math.huge)
  t.eq(lessons.part(all, "matmul"), "Lessons from earlier evaluations on this device (the most relevant first; the ids "
       .. "are the candidates that showed each):\n" .. table.concat(want, "\n"),
       "own newest first, then two shared tags, then one; none of another device or sharing none")
  -- a budget without room for the longest of the others: it is left out, the next still fits
  local bytes = #want[1] + #want[2] + #want[4] + 3
  local some = lessons.relevant(c, recipe, "d", bytes)
  t.eq(#some, 3)
  t.eq(some[3].text, "Vector loads pay")
  t.eq(lessons.part({}, "matmul"), nil, "no lessons, no part")
  c:close()
end)

-- ---- a replayed transcript's summaries -------------------------------------------

t.test("lessons_replay_answers_a_summary_only_with_a_reply_marked_lessons", function()
  local file = tmp .. "/lessons_replay.json"
  local f = assert(io.open(file, "w"))
  f:write(cjson.encode { replies = { { text = "p1" }, { text = "s1", purpose = "lessons" }, { text = "p2" } } })
  f:close()
  local convo = { system = "s", messages = { { role = "user", content = "u" } } }
  local model = require "kwb.model"
  local a = model.new { provider = "replay", file = file }
  local r = a:wait(a:ask(convo, "lessons"))
  t.eq(r.error, "the transcript " .. file .. " has no summary's reply here (its replies[1] answers a proposal)",
       "nothing replayed")
  t.eq(r.code, "exhausted")
  t.eq(a:wait(a:ask(convo, "source")).text, "p1", "the proposal's reply stayed for it")
  t.eq(a:wait(a:ask(convo, "source")).text, "p2", "a proposal passes over a summary's reply")
  t.eq(a.usage.requests, 2, "a summary that got no reply asked no one")
  local b = model.new { provider = "replay", file = file }
  t.eq(b:wait(b:ask(convo, "source")).text, "p1")
  t.eq(b:wait(b:ask(convo, "lessons")).text, "s1")
  t.eq(b:wait(b:ask(convo, "source")).text, "p2")
  t.eq(b:wait(b:ask(convo, "lessons")).error, "the transcript " .. file .. " has no reply left (3 replayed)")
  f = assert(io.open(file, "w"))
  f:write(cjson.encode { replies = { { text = "p1", purpose = "summary" } } })
  f:close()
  t.raises(function() require("kwb.model.providers.replay").load(file) end,
           "replay transcript " .. file .. ": replies[1].purpose is \"summary\"; the one purpose a reply may name is "
           .. "\"lessons\" (a summary's)")
end)

-- ---- against the scripted server -----------------------------------------------

local ikj = [[
void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++) {
        float *restrict ci = c + i * n;
        for (int j = 0; j < n; j++) ci[j] = 0.0f;
        for (int k = 0; k < n; k++) {
            const float aik = a[i * n + k];
            const float *restrict bk = b + k * n;
            for (int j = 0; j < n; j++) ci[j] += aik * bk[j];
        }
    }
}
]]
local broken = "void matmul(int n, const float *a, const float *b, float *c) { return n +; }\n"
local cached = [[
static float last[96 * 96];
static int last_n;
void matmul(int n, const float *a, const float *b, float *c) {
    if (last_n == n) { for (int i = 0; i < n * n; i++) c[i] = last[i]; return; }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
    for (int i = 0; i < n * n; i++) last[i] = c[i];
    last_n = n;
}
]]
local flags = { "-O3", "-march=native" }
local function id_of(src) return cache_mod.candidate_id("matmul", ktext.code(src), {}, flags) end
local ikj_id, broken_id, cached_id = id_of(ikj), id_of(broken), id_of(cached)
local function short(id) return id:sub(1, 8) end

local function block(code, lang) return "```" .. (lang or "c") .. "\n" .. code .. "```\n" end
local J, O = httpd.entry, httpd.openai

-- run(srv, cache, budget, every) -> events, output: tests/recipes/llm_host.lua
-- with the llm strategy against the server, lessons every `every` candidates.
local function run(srv, cache, budget, every)
  local out = sh(string.format("KWB_TEST_MODEL_URL=%s/v1 KWB_TEST_MODEL_KEY=%s KWB_TEST_STRATEGY=llm KWB_TEST_BUDGET=%d "
                               .. "KWB_TEST_LESSONS_EVERY=%d KWB_CACHE=%s ./kwb tests/recipes/llm_host.lua --json "
                               .. "--certify 0", srv.url, canary, budget, every, cache))
  local events = {}
  for line in out:gmatch("[^\n]+") do
    local ok, e = pcall(cjson.decode, line)
    if ok and type(e) == "table" then events[#events + 1] = e end
  end
  return events, out
end

local function by_event(events, name)
  local out = {}
  for _, e in ipairs(events) do if e.event == name then out[#out + 1] = e end end
  return out
end

local function user_of(req)
  for _, m in ipairs(req.body.messages or {}) do if m.role == "user" then return m.content end end
end
local function system_of(req)
  for _, m in ipairs(req.body.messages or {}) do if m.role == "system" then return m.content end end
end

local lesson1 = "- [loop-order, vectorize] Walking b by rows (the i-k-j order) made every shape faster (ids: %s)"
local lesson2 = "- [compile] A kernel that does not compile spends a candidate: check its syntax first (ids: %s)"
local summary = "What the evidence says:\n\n```lessons\n" .. string.format(lesson1, short(ikj_id)) .. "\n"
                .. string.format(lesson2, short(broken_id)) .. "\n```\n"

-- Run A: two candidates, then the summary.
local cache_a = fresh("run_a")
local srv = httpd.start(table.concat {
  J(200, O("The inner loop should be contiguous:\n\n" .. block(ikj), { 1000, 200 })),
  J(200, O("Try this:\n\n" .. block(broken), { 1100, 50 })),
  J(200, O(summary, { 900, 80 })),
})
local events_a, out_a = run(srv, cache_a, 2, 2)
local reqs_a = srv:requests()
srv:stop()
local start_a = by_event(events_a, "start")[1] or {}
local device = start_a.device
local cands_a = by_event(events_a, "candidate")

t.test("lessons_the_summary_is_asked_after_n_candidates_with_their_evidence", function()
  t.eq(#cands_a, 2, "candidates; output:\n" .. out_a:sub(1, 3000))
  t.eq(cands_a[1].id, ikj_id, "the i-k-j kernel's id, as the summary names it")
  t.eq(cands_a[1].outcome, "accepted")
  t.eq(cands_a[2].id, broken_id)
  t.eq(cands_a[2].outcome, "compile-error")
  t.eq(#reqs_a, 3, "two proposals, then the summary")
  t.eq(system_of(reqs_a[3]), lessons.system, "the ledger's system text")
  local user = user_of(reqs_a[3]):gsub("%d+%.%d%dx", "N.NNx")
  local want = table.concat({
    "Problem matmul: C = A * B, n x n row-major f32. Kernels in C on " .. device .. ".",
    "The best so far: " .. short(ikj_id) .. " at N.NNx the start kernel's speed (geometric mean over shapes).",
    "",
    "Evidence: the candidates evaluated since the last summary, oldest first (outcome, score and per-shape speed-up "
      .. "over the start kernel, what it tried; why it failed; its profile where one was made):",
    "- " .. short(ikj_id) .. " accepted N.NNx (n=64 N.NNx, n=96 N.NNx): The inner loop should be contiguous:",
    "- " .. short(broken_id) .. " compile-error: Try this:; " .. cands_a[2].reason,
    "",
    "Answer with one ```lessons block of at most 6 lines, each of the form",
    "- [tag, tag] the lesson in one sentence (ids: 1a2b3c4d, 5e6f7a8b)",
    "where the tags are one to four technique words in lowercase (letters, digits and '-': loop-order, tiling, "
      .. "vectorize, unroll, memory-bound, ...) and the ids are those of the candidates above that show the lesson. "
      .. "Where the evidence teaches nothing new, the block is the one line `- none`.",
  }, "\n")
  t.eq(user, want, "the summary's request")
  local ev = by_event(events_a, "lessons")
  t.eq(#ev, 1, "one lessons event")
  t.eq(ev[1].kept, 2)
  t.eq(ev[1].evidence, 2)
  t.eq(ev[1].error, nil)
end)

t.test("lessons_are_stored_with_their_candidates_tags_run_and_transcript", function()
  local c = assert(cache_mod.open(cache_a))
  local rows = c:lessons { problem = "matmul", device = device }
  t.eq(#rows, 2)
  t.eq(rows[1].text, "Walking b by rows (the i-k-j order) made every shape faster")
  t.eq(table.concat(rows[1].tags, " "), "loop-order vectorize")
  t.eq(table.concat(rows[1].ids, " "), ikj_id)
  t.eq(rows[2].text, "A kernel that does not compile spends a candidate: check its syntax first")
  t.eq(table.concat(rows[2].tags, " "), "compile")
  t.eq(table.concat(rows[2].ids, " "), broken_id)
  t.eq(rows[1].run:sub(1, #start_a.run), start_a.run, "the run that made it")
  t.eq(c:transcript(rows[1].transcript).purpose, "lessons", "the summary's transcript")
  c:close()
end)

local run_a8 = start_a.run and start_a.run:sub(1, 8) or "?"

t.test("lessons_kwb_lessons_prints_them_as_the_prompt_shows_them", function()
  local out, status = sh("KWB_CACHE=" .. cache_a .. " ./kwb lessons tests/recipes/llm_host.lua")
  t.eq(status, 0, out)
  t.eq(out, table.concat({
    "lessons for matmul on " .. device .. ": 2 of its own, 0 of other problems sharing a tag; the prompt holds 2 "
      .. "(model.lessons_bytes 3000)",
    string.format(lesson1, short(ikj_id)) .. "  (run " .. run_a8 .. ")",
    string.format(lesson2, short(broken_id)) .. "  (run " .. run_a8 .. ")",
  }, "\n") .. "\n")
  local js = cjson.decode((sh("KWB_CACHE=" .. cache_a .. " ./kwb lessons tests/recipes/llm_host.lua --json")))
  t.eq(js.problem, "matmul")
  t.eq(#js.lessons, 2)
  t.eq(js.lessons[1].ids[1], ikj_id)
  t.eq(js.lessons[1].in_prompt, true)
  local none = sh("KWB_CACHE=" .. fresh("none") .. " ./kwb -e 'assert(kwb.cache.open())' && KWB_CACHE=" .. tmp
                  .. "/none.db ./kwb lessons tests/recipes/llm_host.lua")
  t.eq(none, "no lessons for matmul on " .. device .. " yet (a run whose strategy asks a model keeps them: "
       .. "model.lessons_every)\n")
end)

t.test("lessons_a_later_runs_prompt_holds_them", function()
  local srv_b = httpd.start(J(200, O("Remember the output:\n\n" .. block(cached), { 1000, 100 })))
  local events_b, out_b = run(srv_b, cache_a, 1, 0)
  local reqs_b = srv_b:requests()
  srv_b:stop()
  t.eq(#by_event(events_b, "candidate"), 1, out_b:sub(1, 2000))
  t.eq(#reqs_b, 1, "one proposal, no summary")
  local part = "Lessons from earlier evaluations on this device (the most relevant first; the ids are the candidates "
               .. "that showed each):\n" .. string.format(lesson1, short(ikj_id)) .. "\n"
               .. string.format(lesson2, short(broken_id))
  local user = user_of(reqs_b[1])
  t.truthy(user:find("\n\n" .. part .. "\n\nIdeas from the engineers, to try:", 1, true),
           "the lessons part before the ideas:\n" .. user)
end)

t.test("lessons_a_bundle_carries_them_and_marks_where_they_came_from", function()
  local file = tmp .. "/lessons.kwb"
  os.remove(file)
  local out, status = sh("./kwb --cache " .. cache_a .. " cache export " .. file .. " --problem matmul --json")
  t.eq(status, 0, out)
  t.eq(cjson.decode(out).lessons, 2, "both lessons, their candidates being in it")
  local d = fresh("imported")
  out, status = sh("./kwb --cache " .. d .. " cache import " .. file .. " --json")
  t.eq(status, 0, out)
  t.eq(cjson.decode(out).lessons, 2)
  out = sh("KWB_CACHE=" .. d .. " ./kwb lessons tests/recipes/llm_host.lua")
  t.eq(lines_of(out)[2], string.format(lesson1, short(ikj_id)) .. "  (bundle lessons.kwb)")
  local again = cjson.decode((sh("./kwb --cache " .. d .. " cache import " .. file .. " --json")))
  t.eq(again.lessons, 0, "imported twice: nothing new")
  -- one candidate's bundle carries the lesson it shows alone
  local one = tmp .. "/one.kwb"
  os.remove(one)
  t.eq(cjson.decode((sh("./kwb --cache " .. cache_a .. " cache export " .. one .. " --id " .. short(ikj_id)
                        .. " --json"))).lessons, 1)
  -- a lesson changed on the way is refused, and the bundle with it
  local b = assert(core.cache_bundle_open(file))
  local records, blobs, manifest = {}, b:blobs(), b:manifest()
  local changed
  for i, rec in ipairs(b:records()) do
    local row = cjson.decode(rec.json)
    if rec.table == "lesson" and not changed then
      row.text, changed = "Never unroll", row.id
    end
    records[i] = { table = rec.table, json = cache_mod.json(row) }
  end
  b:close()
  local forged = tmp .. "/forged_lesson.kwb"
  os.remove(forged)
  local c = assert(cache_mod.open(cache_a))
  assert(c.db:export(forged, manifest, records, blobs))
  c:close()
  local e = assert(cache_mod.open(fresh("forged")))
  local ok, msg = e:import(forged)
  t.eq(ok, nil)
  local head = "bundle " .. forged .. " is corrupt: record "
  t.eq(msg:sub(1, #head), head, msg)
  t.truthy(msg:sub(#head + 1):find("^%d+ %(lesson%) has id " .. changed .. ", but its content hashes to %x+$"), msg)
  t.eq(#e:lessons(), 0, "nothing imported")
  e:close()
end)

t.test("lessons_a_malformed_summary_keeps_nothing_says_why_and_loses_no_evidence", function()
  local cache_c = fresh("run_c")
  local bad = "```lessons\n- loop order matters (ids: " .. short(ikj_id) .. ")\n```\n"
  local good = "```lessons\n" .. string.format(lesson1, short(ikj_id)) .. "\n```\n"
  local srv_c = httpd.start(table.concat {
    J(200, O("The inner loop should be contiguous:\n\n" .. block(ikj), { 1000, 200 })),
    J(200, O("Try this:\n\n" .. block(broken), { 1100, 50 })),
    J(200, O("Remember the output:\n\n" .. block(cached), { 1000, 100 })),
    J(200, O(bad, { 900, 20 })),
    J(200, O("Again:\n\n" .. block(broken:gsub("return n %+;", "return n -;")), { 1000, 50 })),
    J(200, O(good, { 900, 40 })),
  })
  local events_c, out_c = run(srv_c, cache_c, 4, 2)
  local reqs_c = srv_c:requests()
  srv_c:stop()
  t.eq(#by_event(events_c, "candidate"), 4, "every candidate evaluated; output:\n" .. out_c:sub(1, 3000))
  t.eq(#by_event(events_c, "summary"), 1, "the run ended as runs do")
  local ev = by_event(events_c, "lessons")
  t.eq(#ev, 2, "two summaries")
  t.eq(ev[1].kept, 0)
  t.eq(ev[1].error, "line 1 of its ```lessons block: it is not `- [tags] lesson (ids: ...)`: - loop order matters "
       .. "(ids: " .. short(ikj_id) .. ")")
  t.eq(ev[2].kept, 1)
  t.eq(ev[2].evidence, 4, "the evidence of the summary that kept nothing comes again")
  t.eq(#reqs_c, 6)
  t.eq(system_of(reqs_c[4]), lessons.system, "the fourth request is the first summary")
  t.eq(system_of(reqs_c[6]), lessons.system, "the sixth the second")
  local evidence_lines = 0
  for _ in user_of(reqs_c[6]):gmatch("\n%- %x%x%x%x%x%x%x%x [%a-]+") do evidence_lines = evidence_lines + 1 end
  t.eq(evidence_lines, 4, "four candidates in the second summary's evidence")
  local c = assert(cache_mod.open(cache_c))
  local rows = c:lessons()
  t.eq(#rows, 1, "only the well-formed summary's lesson")
  t.eq(rows[1].text, "Walking b by rows (the i-k-j order) made every shape faster")
  c:close()
  local plain = sh(string.format("KWB_TEST_MODEL_URL=http://127.0.0.1:1/v1 KWB_TEST_MODEL_KEY=%s KWB_TEST_STRATEGY=llm "
                                 .. "KWB_CACHE=%s ./kwb -e 'local p = require(\"kwb.loop.progress\").new(\"plain\"); "
                                 .. "p:lessons({ recipe = { name = \"r\" } }, { evidence = 2, error = \"why\" })'",
                                 canary, fresh("plain")))
  t.eq(plain, "lessons: none kept from the last 2 candidates: why\n", "the plain line")
end)

-- A replayed run (tests/recipes/llm_host.lua, --model replay:FILE): its
-- summaries' replies come from the transcript, in the order the run asks.
local function replayed(cache, file, every)
  local out = sh(string.format("KWB_TEST_STRATEGY=llm KWB_TEST_BUDGET=2 KWB_TEST_LESSONS_EVERY=%d KWB_CACHE=%s ./kwb "
                               .. "tests/recipes/llm_host.lua --json --certify 0 --model replay:%s", every, cache, file))
  local events = {}
  for line in out:gmatch("[^\n]+") do
    local ok, e = pcall(cjson.decode, line)
    if ok and type(e) == "table" then events[#events + 1] = e end
  end
  return events, out
end

t.test("lessons_a_replayed_run_takes_its_summaries_from_the_transcript", function()
  local file = tmp .. "/lessons_run.json"
  local f = assert(io.open(file, "w"))
  -- (the run asks the second proposal before the first summary: the replies in that order)
  f:write(cjson.encode { replies = {
    { text = "The inner loop should be contiguous:\n\n" .. block(ikj) },
    { text = "Try this:\n\n" .. block(broken) },
    { text = "```lessons\n" .. string.format(lesson1, short(ikj_id)) .. "\n```\n", purpose = "lessons" },
  } })
  f:close()
  local ids = {}
  for i = 1, 2 do
    local events, out = replayed(fresh("replayed" .. i), file, 1)
    local c = by_event(events, "candidate")
    t.eq(#c, 2, out:sub(1, 2000))
    t.eq(c[1].id, ikj_id)
    t.eq(c[2].id, broken_id)
    local ev = by_event(events, "lessons")
    t.eq(#ev, 2, "a summary after each candidate")
    t.eq(ev[1].kept, 1)
    t.eq(ev[1].evidence, 1)
    t.eq(ev[2].kept, 0)
    t.eq(ev[2].error, "the transcript " .. file .. " has no reply left (3 replayed); no more summaries in this run")
    ids[i] = ev[1].ids[1]
  end
  t.eq(ids[2], ids[1], "the same lesson on every replay")
  -- lessons off: the same proposals, the summary's reply passed over
  local events = replayed(fresh("replayed_off"), file, 0)
  local c = by_event(events, "candidate")
  t.eq(#c, 2)
  t.eq(c[1].id, ikj_id)
  t.eq(c[2].id, broken_id)
  t.eq(#by_event(events, "lessons"), 0)
end)

-- ---- the figure: a host recipe run twice with a scripted model ---------------------

-- figure(cache, n, state) -> events: tests/recipes/lessons_host.lua at n
local function figure_run(cache, n, state)
  os.remove(state)
  local out = sh(string.format("KWB_CACHE=%s KWB_TEST_N=%d KWB_TEST_LESSONS_STATE=%s ./kwb tests/recipes/lessons_host.lua "
                               .. "--json --certify 0", cache, n, state))
  local events = {}
  for line in out:gmatch("[^\n]+") do
    local ok, e = pcall(cjson.decode, line)
    if ok and type(e) == "table" then events[#events + 1] = e end
  end
  return events, out
end

-- reached(events, id) -> the number of candidates the run evaluated until it
-- accepted id (its best then), or nil
local function reached(events, id)
  local n = 0
  for _, e in ipairs(events) do
    if e.event == "candidate" then
      n = n + 1
      if e.id == id and e.outcome == "accepted" then return n end
    end
  end
  return nil
end

t.test("lessons_figure_a_second_run_reaches_the_first_runs_best_sooner", function()
  local cache = fresh("figure")
  local ev1, out1 = figure_run(cache, 128, tmp .. "/figure1.state")
  local sm1 = by_event(ev1, "summary")[1]
  t.truthy(sm1, out1:sub(1, 3000))
  local best = sm1.best.id
  -- (j-i-k, j-k-i, k-j-i, then i-k-j: the first three within a few tens of
  -- percent of the start kernel, slower or, on a loaded machine, accepted;
  -- i-k-j several times faster, the best whatever the others' outcomes)
  t.eq(#by_event(ev1, "candidate"), 4, "four candidates")
  local first = reached(ev1, best)
  t.eq(first, 4, "the first run's best is its fourth candidate")
  t.eq(by_event(ev1, "lessons")[1].kept, 1, "its summary kept one lesson")
  -- the same recipe at another shape: nothing it proposes is known there, but the lesson is
  local ev2 = figure_run(cache, 160, tmp .. "/figure2.state")
  local second = reached(ev2, best)
  t.eq(second, 1, "the second run proposes the lesson's order first")
  t.eq(by_event(ev2, "summary")[1].best.id, best, "and it is that run's best too")
  -- the control: the second run on a cache without the lesson
  local ev3 = figure_run(fresh("figure_control"), 160, tmp .. "/figure3.state")
  local control = reached(ev3, best)
  t.eq(control, 4, "without the lesson, the fourth again")
  print(string.format("figure: the first run reached its best (%s) at candidate %d of 4; the second run, at another "
                      .. "shape with the lesson in its prompt, at candidate %d; the same run without lessons at "
                      .. "candidate %d", best:sub(1, 8), first, second, control))
end)

t.done()
