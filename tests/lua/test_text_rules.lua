-- tests/lua/test_text_rules.lua: the text rules are messages, not the
-- boundary. Two candidates that no rule reads (a system call spelled as
-- bytes, call counts kept in assembler-defined .bss) pass every rule of the
-- default set, and are stopped where the boundary is: the sandbox's filter
-- refuses the call, the verification of a later run finds the work skipped.
local t = require "t"

local r = kwb.load "tests/recipes/text_rules.lua"
local _, run = r:run { mode = "quiet", store = require("kwb.loop.store").open(os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
                                                                           .. "/text_rules.db") }
local by = {}
for _, res in ipairs(run.results) do by[res.name] = res end

t.test("text_rules_a_syscall_spelled_as_bytes_is_refused_by_the_sandbox_not_a_rule", function()
  local res = t.truthy(by["hostile_byte_syscall.c"], "evaluated")
  t.eq(res.outcome, "forbidden")
  t.eq(res.rule, nil, "no rule caught it")
  t.eq(res.reason, "during the first run at n=32 the candidate made a system call kill (number 62), which the "
       .. "sandbox does not allow")
end)

t.test("text_rules_state_in_assembler_bss_is_caught_by_the_verification_not_a_rule", function()
  local res = t.truthy(by["hostile_asm_state.c"], "evaluated")
  t.eq(res.outcome, "wrong")
  t.eq(res.rule, nil, "no rule caught it")
  t.eq(res.reason, "output c at n=96 (the first run): 9216 elements never written, first c[1]")
end)

t.done()
