-- tests/lua/test_edits.lua: replies that give their kernel as edits of the
-- parent their prompt showed (kwb.strategies.edits through
-- kwb.strategies.reply): SEARCH/REPLACE blocks and unified diffs applied
-- exactly, in order, or refused as no-code naming the edit; and a replayed
-- run on the host whose replies are edits, each a candidate of the whole
-- edited source.
local t = require "t"
local cjson = require "cjson"
local reply = require "kwb.strategies.reply"

local host = { backend = "host" }
local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- the parent: the start kernel of the run below, as its prompt shows it
local naive = read("kernels/host/matmul_naive.c")
local parent = { source = naive, short = "0badc0de" }

local function sr(search, replace)
  return "<<<<<<< SEARCH\n" .. search .. "=======\n" .. replace .. ">>>>>>> REPLACE\n"
end

local ijk_loops = "    for (int i = 0; i < n; i++)\n        for (int j = 0; j < n; j++) {\n            float acc = 0;\n"
  .. "            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];\n"
  .. "            c[i * n + j] = acc;\n        }\n"
local ikj_loops = "    for (int i = 0; i < n; i++) {\n        for (int j = 0; j < n; j++) c[i * n + j] = 0;\n"
  .. "        for (int k = 0; k < n; k++)\n"
  .. "            for (int j = 0; j < n; j++) c[i * n + j] += a[i * n + k] * b[k * n + j];\n    }\n"
local old_comment = "/* matmul_naive.c: the textbook triple loop, i-j-k order, float accumulation. */\n"
local new_comment = "/* i-k-j order: the inner loop walks b and c contiguously. */\n"
local ikj = new_comment .. "void matmul(int n, const float *a, const float *b, float *c) {\n" .. ikj_loops .. "}\n"
assert(naive == old_comment .. "void matmul(int n, const float *a, const float *b, float *c) {\n" .. ijk_loops .. "}\n",
       "kernels/host/matmul_naive.c is the parent these edits are written against")

-- two SEARCH/REPLACE blocks, the loops first, fenced as the frameworks write them
local two_blocks = "Swap the inner loops so that b and c are walked contiguously.\n\n```c\n" .. sr(ijk_loops, ikj_loops)
  .. "```\n\nAnd say so in the comment:\n\n" .. sr(old_comment, new_comment)

t.test("edits_search_replace_blocks_apply_in_order_to_the_parent", function()
  local prop = reply.proposal(two_blocks, host, parent)
  t.eq(prop.no_code, nil)
  t.eq(prop.source, ikj, "the parent with both edits, whole")
  t.eq(prop.edits, 2)
  t.eq(prop.note, "the parent 0badc0de with 2 SEARCH/REPLACE edits applied")
  t.eq(prop.rationale, "Swap the inner loops so that b and c are walked contiguously.\n\n\nAnd say so in the comment:",
       "the edits are no part of the rationale")
end)

t.test("edits_a_unified_diff_applies_its_hunks_by_their_text_not_their_line_numbers", function()
  local diff = "Contiguous inner loop:\n\n```diff\n--- a/matmul.c\n+++ b/matmul.c\n@@ -40,2 +40,2 @@\n"
    .. "-" .. old_comment .. "+" .. new_comment .. " void matmul(int n, const float *a, const float *b, float *c) {\n"
    .. "@@ -3,6 +3,5 @@\n"
  for l in ijk_loops:gmatch("[^\n]*\n") do diff = diff .. "-" .. l end
  for l in ikj_loops:gmatch("[^\n]*\n") do diff = diff .. "+" .. l end
  diff = diff .. " }\n```\n"
  local prop = reply.proposal(diff, host, parent)
  t.eq(prop.no_code, nil)
  t.eq(prop.source, ikj)
  t.eq(prop.note, "the parent 0badc0de with 2 unified diff edits applied")
end)

t.test("edits_a_first_block_that_matches_nothing_is_no_code_naming_it", function()
  local wrong = sr("    for (int i = 0; i < n; i++)\n        for (int k = 0; k < n; k++)\n", "x\n") .. sr(old_comment, "")
  t.eq(reply.proposal(wrong, host, parent).no_code,
       'edit 1 of 2 (its search begins "for (int i = 0; i < n; i++)") matches nothing in the parent; its line 1 is '
       .. "the parent's line 3, but its line 2 differs from the parent's line 4")
  t.eq(reply.proposal(sr("    int unknown;\n", "x\n"), host, parent).no_code,
       'edit 1 of 1 (its search begins "int unknown;") matches nothing in the parent')
end)

t.test("edits_a_later_block_is_found_in_the_text_the_ones_before_it_left", function()
  -- the second searches for the loops the first replaced: they are gone
  local twice = sr(ijk_loops, ikj_loops) .. sr(ijk_loops, ikj_loops)
  t.eq(reply.proposal(twice, host, parent).no_code,
       'edit 2 of 2 (its search begins "for (int i = 0; i < n; i++)") matches nothing in the parent')
  -- the first made the comment two lines: the second's lines are counted in that text
  local shifted = sr(old_comment, new_comment .. "/* (n x n, row-major) */\n")
    .. sr("    for (int i = 0; i < n; i++)\n        for (int k = 0; k < n; k++)\n", "x\n")
  t.eq(reply.proposal(shifted, host, parent).no_code,
       'edit 2 of 2 (its search begins "for (int i = 0; i < n; i++)") matches nothing in the parent; its line 1 is '
       .. "the parent's line 4, but its line 2 differs from the parent's line 5 (lines counted after edit 1)")
end)

t.test("edits_a_block_that_matches_twice_is_no_code_naming_where", function()
  t.eq(reply.proposal(sr("        }\n", "        } /* j */\n"), host, parent).no_code, nil, "once: applies")
  t.eq(reply.proposal(sr("}\n", "}\n\n"), host, parent).no_code, nil, "a whole line: '        }' is not '}'")
  local loops = "    for (int i = 0; i < n; i++)\n"
  local p2 = { source = naive .. "void other(int n) {\n" .. loops .. "        ;\n}\n", short = "0badc0de" }
  t.eq(reply.proposal(sr(loops, "    for (int i = n - 1; i >= 0; i--)\n"), host, p2).no_code,
       'edit 1 of 1 (its search begins "for (int i = 0; i < n; i++)") matches the parent 2 times (at lines 3, 11): '
       .. "give more lines, so that it matches once")
end)

t.test("edits_cut_off_empty_or_without_a_parent_are_no_code", function()
  t.eq(reply.proposal("<<<<<<< SEARCH\n" .. old_comment .. "=======\n" .. new_comment, host, parent).no_code,
       "edit 1 has no >>>>>>> REPLACE line (the reply was cut off?)")
  t.eq(reply.proposal(sr(old_comment, new_comment) .. "<<<<<<< SEARCH\n" .. old_comment, host, parent).no_code,
       "edit 2 has no ======= line after its SEARCH (the reply was cut off?)")
  t.eq(reply.proposal(sr("", "int x;\n"), host, parent).no_code,
       "edit 1 of 1 (its search begins (blank lines only)) searches for nothing: give the parent's lines it replaces")
  t.eq(reply.proposal(two_blocks, host, nil).no_code,
       "the reply gives 2 edits (SEARCH/REPLACE), but its prompt showed no parent to apply them to")
end)

t.test("edits_trailing_spaces_and_crlf_of_a_search_do_not_stop_it", function()
  local crlf = sr((old_comment:gsub("\n", "  \n")), new_comment):gsub("\n", "\r\n")
  local prop = reply.proposal(crlf, host, parent)
  t.eq(prop.no_code, nil)
  t.eq(prop.source:sub(1, #new_comment), new_comment)
  local indented = sr("  " .. old_comment, new_comment)
  t.eq(reply.proposal(indented, host, parent).no_code,
       'edit 1 of 1 (its search begins "/* matmul_naive.c: the textbook triple loop, i-j-k order, float '
       .. 'accumulation. */") matches nothing in the parent', "leading spaces are the line's")
end)

t.test("edits_a_whole_file_still_reads_and_edits_win_over_another_block", function()
  t.eq(reply.proposal("Whole:\n\n```c\n" .. ikj .. "```\n", host, parent).source, ikj, "a whole file, as before")
  local both = reply.proposal(two_blocks .. "\nThe result:\n\n```c\n" .. ikj .. "```\n", host, parent)
  t.eq(both.source, ikj)
  t.eq(both.note, "the parent 0badc0de with 2 SEARCH/REPLACE edits applied; the reply's other ```c block, not an "
       .. "edit, left out")
end)

t.test("edits_with_a_space_block_make_a_template_for_llm_tune", function()
  local tmpl = sr("            float acc = 0;\n", "            float acc = 0; /* BK */\n")
    .. "```lua\nreturn { BK = { 8, 16 } }\n```\n"
  local prop = reply.proposal(tmpl, host, parent)
  t.eq(prop.no_code, nil)
  t.eq(prop.space.dims[1].name, "BK")
  t.truthy(prop.source:find("float acc = 0; /* BK */\n", 1, true), prop.source)
end)

-- ---- a replayed run whose replies are edits ----------------------------------

local function transcript(replies)
  local path = dir .. "/edits_replay.json"
  local f = assert(io.open(path, "w"))
  f:write(cjson.encode { replies = replies })
  f:close()
  return path
end

-- (the third reply's diff, of the first reply's kernel: its hunk's line numbers are wrong on purpose)
local restrict_diff = "One row pointer, restrict:\n\n```diff\n--- a/llm.c\n+++ b/llm.c\n@@ -30,6 +30,7 @@\n"
  .. "     for (int i = 0; i < n; i++) {\n"
  .. "-        for (int j = 0; j < n; j++) c[i * n + j] = 0;\n"
  .. "+        float *restrict ci = c + i * n;\n"
  .. "+        for (int j = 0; j < n; j++) ci[j] = 0;\n"
  .. "         for (int k = 0; k < n; k++)\n"
  .. "-            for (int j = 0; j < n; j++) c[i * n + j] += a[i * n + k] * b[k * n + j];\n"
  .. "+            for (int j = 0; j < n; j++) ci[j] += a[i * n + k] * b[k * n + j];\n"
  .. "     }\n```\n"
local ikj_restrict = ikj:gsub("        for %(int j = 0; j < n; j%+%+%) c%[i %* n %+ j%] = 0;\n",
                              "        float *restrict ci = c + i * n;\n        for (int j = 0; j < n; j++) ci[j] = 0;\n")
                        :gsub("c%[i %* n %+ j%] %+=", "ci[j] +=")
assert(ikj_restrict ~= ikj)

local replies = {
  { text = two_blocks },
  -- sent while the first was evaluated: its parent is still the start kernel
  { text = "Interchange i and k:\n\n" .. sr("    for (int i = 0; i < n; i++)\n        for (int k = 0; k < n; k++)\n", "x\n") },
  { text = restrict_diff },
}

local matmul = require "kwb.problems.matmul"
local r = kwb.recipe { name = "edited", problem = matmul {}, shapes = { n = { 48 } },
                       start = { file = "../../kernels/host/matmul_naive.c" }, flags = { "-O2" },
                       -- (no population: each prompt shows the best, the parent its edits are of)
                       strategy = { "llm", population = false },
                       model = { provider = "replay", file = transcript(replies) },
                       -- every verified kernel is the new parent: the third prompt's is the first reply's
                       accept = function() return true end,
                       budget = { candidates = 3, minutes = 1, timeout = 5 },
                       timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.05 } }
local store = require("kwb.loop.store").open(dir .. "/edits.db")
local sm, run = r:run { mode = "quiet", store = store, certify = 0 }

t.test("edits_run_each_edit_reply_is_a_candidate_of_the_whole_edited_source", function()
  t.eq(#run.results, 3, "three candidates")
  local c1, c2, c3 = run.results[1], run.results[2], run.results[3]
  local start = run.session.start
  t.eq(c1.outcome, "accepted", "the two blocks: " .. tostring(c1.reason))
  t.eq(c1.parent, start.id)
  t.eq(c1.note, "the parent " .. start.short .. " with 2 SEARCH/REPLACE edits applied")
  local cache = run.session.store.cache
  t.eq(cache:get(c1.id).source, ikj, "the cache keeps the applied source, whole")
  t.eq(c1.id, r:session():candidate({ source = ikj }).id, "its id is the whole text's")
  t.eq(c2.outcome, "no-code")
  t.eq(c2.reason, 'edit 1 of 1 (its search begins "for (int i = 0; i < n; i++)") matches nothing in the parent; '
                  .. "its line 1 is the parent's line 3, but its line 2 differs from the parent's line 4")
  t.eq(c2.parent, start.id)
  t.eq(cache:get(c2.id).source, replies[2].text, "a no-code candidate keeps the reply")
  t.eq(c3.outcome, "accepted", "the diff of the first reply's kernel: " .. tostring(c3.reason))
  t.eq(c3.parent, c1.id, "its prompt showed the first reply's kernel")
  t.eq(cache:get(c3.id).source, ikj_restrict)
  t.eq(c3.note, "the parent " .. c1.short .. " with 1 unified diff edit applied")
  t.eq(sm.funnel["no-code"], 1)
end)

t.done()
