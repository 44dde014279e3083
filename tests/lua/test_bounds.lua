-- tests/lua/test_bounds.lua: every input bounded before it is sent. A
-- candidate over the recipe's budget.source_bytes (a replayed model's reply,
-- a space point, a file) is `compile-error` with its size and the limit,
-- recorded with a stand-in source, never built nor sent; a task whose JSON
-- would pass a worker's 64 MiB frame is never sent either (its own
-- compile-error), and no worker dies of it; the run goes on and the next
-- honest candidate is accepted. Invalid UTF-8 in a reply leaves every line
-- of --json valid UTF-8 JSON.
local t = require "t"
local cjson = require "cjson"
local core = require "kwb.core"
local ktext = require "kwb.base.text"
local channel = require "kwb.base.channel"
local workers = require "kwb.runners.workers"

local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$") .. "/bounds"
assert(core.mkdirs(tmp))

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

local function write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

local function fence(code, lang) return "```" .. (lang or "c") .. "\n" .. code .. "```\n" end

-- transcript(name, replies) -> its path: a replay file (kwb.model.providers.replay);
-- each reply a text, or { raw = its JSON string's contents as written }, so
-- a large text is written once, as it is, and bytes cjson would not make
-- (invalid UTF-8) reach the file.
local function transcript(name, replies)
  local path = tmp .. "/" .. name .. ".json"
  local f = assert(io.open(path, "wb"))
  f:write('{"replies":[')
  for i, r in ipairs(replies) do
    if i > 1 then f:write(",") end
    if type(r) == "string" then f:write(cjson.encode { text = r })
    else
      f:write('{"text":"')
      for _, part in ipairs(r.raw) do f:write(part) end
      f:write('"}')
    end
  end
  f:write("]}")
  f:close()
  return path
end

local n_runs = 0
-- run(path, env, words) -> events, exit status, the cache's path, stdout's
-- lines: the recipe run by the CLI with --json (env: VAR=value settings).
local function run(path, env, words)
  n_runs = n_runs + 1
  local cache = string.format("%s/run%d.db", tmp, n_runs)
  for _, s in ipairs { "", "-wal", "-shm" } do os.remove(cache .. s) end
  local p = assert(io.popen(string.format("%s KWB_CACHE=%s ./kwb %s --json %s 2>%s.err; echo \"[exit $?]\"", env or "",
                                          cache, path, words or "", cache)))
  local out = p:read("a")
  p:close()
  local lines, events = {}, {}
  for line in out:gmatch("[^\n]+") do
    if line:match("^%[exit %d+%]$") then break end
    lines[#lines + 1] = line
    local ok, e = pcall(cjson.decode, line)
    if ok and type(e) == "table" then events[#events + 1] = e end
  end
  return events, tonumber(out:match("%[exit (%d+)%]")), cache, lines
end

local function candidates(events)
  local out = {}
  for _, e in ipairs(events) do
    if e.event == "candidate" then out[#out + 1] = e end
  end
  return out
end

local function last(events) return events[#events] or {} end

-- Each line valid UTF-8 (Lua's strict decoding) and JSON.
local function strict(lines)
  t.truthy(#lines > 0, "some output")
  for i, l in ipairs(lines) do
    t.truthy(utf8.len(l), "line " .. i .. " is valid UTF-8")
    t.truthy(pcall(cjson.decode, l), "line " .. i .. " is JSON")
  end
end

local function stored_source(cache, id)
  local c = require("kwb.cache").open(cache)
  local got = assert(c:get(id))
  c:close()
  return got.source
end

local recipe = "tests/recipes/bounds.lua"

-- The recipe with the model replaying file, and env's settings.
local function replay(file, env, words)
  return run(recipe, env, "--model replay:" .. file .. " " .. (words or ""))
end

local limit_text = "over the recipe's limit of 4194304 bytes (budget.source_bytes)"

-- ---- a model's reply ------------------------------------------------------

t.test("bounds_a_100_mb_source_in_a_reply_is_a_compile_error_and_the_next_is_accepted", function()
  local n = 100 * 1000 * 1000
  local source = "/* " .. string.rep("x", n - 7) .. " */\n"
  local sha = core.sha256(source)
  local file = transcript("t100", { { raw = { "A large one.\\n\\n```c\\n", source:sub(1, -2), "\\n```\\n" } },
                                    "Contiguous.\n\n" .. fence(ikj) })
  source = nil
  collectgarbage()
  local events, rc, cache, lines = replay(file)
  local c = candidates(events)
  t.eq(rc, 0, "the run ends well")
  t.eq(#c, 2)
  t.eq(c[1].outcome, "compile-error")
  t.eq(c[1].reason, "its source is 100000000 bytes, " .. limit_text)
  t.eq(c[2].outcome, "accepted", "the next, honest reply")
  t.eq(last(events).event, "summary")
  t.eq(last(events).funnel["compile-error"], 1)
  strict(lines)
  -- recorded with a stand-in naming it: the cache never holds the 100 MB
  t.eq(stored_source(cache, c[1].id), "/* kwb: not kept: its source is 100000000 bytes, " .. limit_text
                                      .. "; SHA-256 of its source " .. sha .. " */\n")
end)

t.test("bounds_a_40_mb_reply_of_slashes_is_a_compile_error_and_the_next_is_accepted", function()
  -- JSON writes each '/' as two bytes: 80 MB had it been sent
  local reply = "```c\n" .. string.rep("/", 40 * 1000 * 1000 - 10) .. "\n```\n"
  local file = transcript("t40", { { raw = { reply:gsub("\n", "\\n") } }, "Contiguous.\n\n" .. fence(ikj) })
  reply = nil
  collectgarbage()
  local events, rc, _, lines = replay(file)
  local c = candidates(events)
  t.eq(rc, 0, "the run ends well")
  t.eq(#c, 2)
  t.eq(c[1].outcome, "compile-error")
  t.eq(c[1].reason, "its source is 39999991 bytes, " .. limit_text)
  t.eq(c[2].outcome, "accepted", "the next, honest reply")
  strict(lines)
end)

t.test("bounds_a_task_past_a_workers_frame_is_never_sent_and_no_worker_dies", function()
  -- under a 16 MiB limit, 12 MB of \1: each byte six in JSON (\u0001), 72 MB as sent
  local file = transcript("t12", { { raw = { "```c\\n", string.rep("\\u0001", 12 * 1000 * 1000), "\\n```\\n" } },
                                   "Contiguous.\n\n" .. fence(ikj) })
  collectgarbage()
  local events, rc, _, lines = replay(file, "KWB_TEST_SOURCE_BYTES=16777216")
  local c = candidates(events)
  t.eq(rc, 0, "the run ends well")
  t.eq(#c, 2)
  t.eq(c[1].outcome, "compile-error")
  local n = tonumber((c[1].reason or ""):match("^its task is (%d+) bytes as sent %(JSON%), over the 67108864 a "
                                               .. "worker's frame holds$"))
  t.truthy(n and n > 72 * 1000 * 1000 and n < 72 * 1000 * 1000 + 20000, c[1].reason)
  t.eq(c[2].outcome, "accepted", "the next, honest reply, in a worker still there")
  strict(lines)
end)

-- ---- a recipe's lower limit: a space point, a file -------------------------

t.test("bounds_a_lower_limit_bounds_space_points_and_files_by_the_byte", function()
  local template = assert(require("kwb.base.files").read_file("tests/recipes/bounds_template.c"))
  local limit = #template + #"BK=16"   -- BK=16 just fits; BK=128 is one byte over
  assert(#ikj <= limit and #require("kwb.base.files").read_file("kernels/host/matmul_naive.c") <= limit)
  local big = tmp .. "/big.c"
  write(big, ikj .. "/*" .. string.rep(" ", 4096 - #ikj - 5) .. "*/\n")
  local small = tmp .. "/ikj.c"
  write(small, ikj)
  local events, rc, cache, lines = run(recipe, string.format("KWB_TEST_STRATEGY=list KWB_TEST_BUDGET=4 "
    .. "KWB_TEST_SOURCE_BYTES=%d KWB_TEST_LIST=BK=128,file=%s,file=%s,BK=16", limit, big, small))
  local c = candidates(events)
  t.eq(rc, 0, "the run ends well")
  t.eq(#c, 4)
  local over = string.format("over the recipe's limit of %d bytes (budget.source_bytes)", limit)
  t.eq(c[1].outcome, "compile-error", "BK=128")
  t.eq(c[1].reason, string.format("its source and defines are %d bytes (source %d, defines 6), %s", limit + 1,
                                  #template, over))
  t.eq(c[1].params, nil, "its defines are not kept")
  t.eq(c[2].outcome, "compile-error", "the large file")
  t.eq(c[2].reason, "its source is 4096 bytes, " .. over)
  t.eq(stored_source(cache, c[2].id), "/* kwb: not kept: its source is 4096 bytes, " .. over .. "; the file "
                                      .. big .. " */\n")
  t.eq(c[3].outcome, "accepted", "the honest file")
  t.truthy(c[4].outcome == "accepted" or c[4].outcome == "slower", "BK=16, at the limit, built and timed: "
           .. tostring(c[4].outcome))
  t.eq(c[4].params.BK, 16)
  strict(lines)
end)

t.test("bounds_budget_source_bytes_takes_an_integer_from_1_to_16_mib", function()
  local path = tmp .. "/bad.lua"
  local function load(v)
    write(path, 'return kwb.recipe {\n  name = "bad",\n  problem = "matmul",\n  shapes = { n = { 8 } },\n'
                .. '  start = "' .. core.cwd() .. '/kernels/host/matmul_naive.c",\n'
                .. '  budget = { candidates = 3,\n             source_bytes = ' .. v .. ' },\n}\n')
    local ok, r = pcall(kwb.load, path)
    return ok and r or tostring(r)
  end
  local field = path .. ":7: recipe field 'budget.source_bytes': "
  t.eq(load("0"), field .. "expected a positive integer, got number 0")
  t.eq(load('"4MB"'), field .. 'expected a positive integer, got "4MB"')
  t.eq(load("1.5"), field .. "expected a positive integer, got number 1.5")
  t.eq(load("16777217"), field .. "expected at most 16777216 (bytes), got number 16777217")
  t.eq(load("16777216").budget.source_bytes, 16777216)
  t.eq(load("nil").budget.source_bytes, 4194304, "4 MiB unless set")
end)

t.test("bounds_a_replys_lua_block_over_the_limit_is_no_code_before_it_runs", function()
  local reply = require "kwb.strategies.reply"
  local block = "return { BK = { 16, 32 } }" .. string.rep(" ", 200) .. "\n"
  local text = fence("void matmul(void) {}\n") .. fence(block, "lua")
  local p = reply.proposal(text, { backend = "host", budget = { source_bytes = 100 } })
  t.eq(p.no_code, "the reply declares a space, but its lua block is 227 bytes, over the recipe's limit of 100 bytes "
                  .. "(budget.source_bytes)")
  t.eq(p.source, nil)
  p = reply.proposal(text, { backend = "host", budget = { source_bytes = 227 } })
  t.eq(p.no_code, nil, "at the limit")
  t.eq(p.space.dims[1].name, "BK")
end)

-- ---- invalid UTF-8 in a reply ------------------------------------------------

t.test("bounds_invalid_utf8_and_nul_in_a_reply_leave_json_output_valid", function()
  local space = fence("return { TAG = { \"a\\0b\\255c\" } }\n", "lua")
  local file = transcript("utf8", {
    -- stray bytes, a cut character, an overlong '/', a NUL in the prose
    { raw = { "Loops reordered \xff\xfe, \xe2\x82 cut\\u0000 and \xc0\xaf overlong. More.\\n\\n",
              cjson.encode(fence(ikj)):sub(2, -2) } },
    -- a space whose value holds a NUL and a stray byte: a point's params
    "Blocked.\n\n" .. fence(ikj .. "/* v2 */\n") .. space,
  })
  local events, rc, _, lines = replay(file, "KWB_TEST_STRATEGY=tune KWB_TEST_BUDGET=2")
  t.eq(rc, 0)
  strict(lines)
  local c = candidates(events)
  t.eq(#c, 2)
  t.eq(c[1].outcome, "accepted")
  local sm = last(events)
  t.eq(sm.event, "summary")
  -- each invalid byte one U+FFFD; the prose's NUL dropped as every control character is
  t.eq(sm.proposals[1].what, "Loops reordered \u{FFFD}\u{FFFD}, \u{FFFD}\u{FFFD} cut and \u{FFFD}\u{FFFD} overlong")
  -- a value's valid text comes back as it was, its NUL included
  t.eq(c[2].params.TAG, "a\0b\u{FFFD}c")
end)

-- ---- the pieces ----------------------------------------------------------------

t.test("bounds_text_valid_replaces_each_invalid_byte_and_keeps_valid_text", function()
  t.eq(ktext.valid("plain \0 é ✓ 😀"), "plain \0 é ✓ 😀", "valid text, NUL included, unchanged")
  t.eq(ktext.valid("a\xffb"), "a\u{FFFD}b")
  t.eq(ktext.valid("\xe2\x82"), "\u{FFFD}\u{FFFD}", "a character cut short")
  t.eq(ktext.valid("\xc0\xaf"), "\u{FFFD}\u{FFFD}", "an overlong '/'")
  t.eq(ktext.valid("\xed\xa0\x80"), "\u{FFFD}\u{FFFD}\u{FFFD}", "a surrogate")
  t.eq(ktext.valid("\xf4\x90\x80\x80"), "\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}", "past U+10FFFF")
  t.eq(ktext.cut("ab✓", 3), "ab", "a cut at a whole character")
  t.eq(ktext.cut("ab✓", 5), "ab✓")
  local j = ktext.json { reason = "x\xff", [ "k\xfe" ] = { "\0" } }
  t.truthy(utf8.len(j), j)
  local back = cjson.decode(j)
  t.eq(back.reason, "x\u{FFFD}")
  t.eq(back["k\u{FFFD}"][1], "\0")
end)

t.test("bounds_a_pool_never_sends_a_frame_past_its_limit_and_starts_no_worker_for_it", function()
  local pool = workers.pool { n = 1 }
  local args = { { backend = "host", pad = string.rep("\1", 12 << 20) } }
  local want = #channel.encode { id = 1, fn = "kwb.worker.task.device", args = args, nargs = 1 }
  t.truthy(want > channel.max_frame, "72 MiB as JSON")
  local r = pool:call("kwb.worker.task.device", args)
  t.eq(r.ok, false)
  t.eq(r.code, "too-large")
  t.eq(r.reason, string.format("its task is %d bytes as sent (JSON), over the 67108864 a worker's frame holds", want))
  t.eq(pool.started, 0, "no worker started for it")
  local ok = pool:call("kwb.worker.task.device", { { backend = "host" } })
  t.eq(ok.ok, true, ok.reason)
  t.eq(ok.value, require("kwb.host").kind())
  pool:close()
end)

t.done()
