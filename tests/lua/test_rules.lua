-- tests/lua/test_rules.lua: forbidden-action rules over the stripped source,
-- the preprocessed source, asm text and the module's symbols.
local t = require "t"
local rules = require "kwb.measure.rules"

local default = rules.set { "default" }

t.test("rules_strip_blanks_comments_and_strings_and_keeps_lines", function()
  local src = 'int x; // printf\n/* clock_gettime\n */ char *s = "usleep";\nchar c = \'"\';\n'
  local out = rules.strip(src)
  t.eq(#out, #src, "same length")
  t.eq(out, "int x;" .. (" "):rep(10) .. "\n" .. (" "):rep(16) .. "\n    char *s =         ;\nchar c =    ;\n")
end)

t.test("rules_line_comment_continued_by_backslash_is_a_comment", function()
  t.eq(default:check_source("// harmless \\\nclock_gettime(0, 0);\nint y;\n"), nil)
end)

t.test("rules_words_match_whole_identifiers_only", function()
  t.eq(default:check_source("int my_printf_count; float usleep_ratio = 1e-5f;\n"), nil)
  local hit = default:check_source("int a;\nint b = 0x1f + printf(\"x\");\n")
  t.eq(hit.rule, "printf")
  t.eq(hit.line, 2)
  t.eq(hit.message, "rule 'printf': printf at line 2 (output from a candidate (device printf) slows it and talks to the harness's streams; found in the source)")
end)

t.test("rules_words_in_comments_and_strings_pass", function()
  t.eq(default:check_source('/* cudaDeviceSynchronize */ const char *s = "clock_gettime";\n'), nil)
end)

t.test("rules_asm_text_is_checked_inside_string_literals", function()
  local hit = default:check_source('void f(void) {\n  __asm__ volatile("rdtsc" ::: "eax", "edx");\n}\n')
  t.eq(hit.rule, "timer"); t.eq(hit.word, "rdtsc"); t.eq(hit.line, 2)
  local trap = default:check_source('__global__ void k() { asm("trap;"); }\n')
  t.eq(trap.rule, "exit")
end)

t.test("rules_gpu_words_are_in_the_default_set", function()
  t.eq(default:check_source("cudaStream_t s; cudaStreamCreate(&s);\n").rule, "other-streams")
  t.eq(default:check_source("x = clock64();\n").rule, "timer")
  t.eq(default:check_source("cudaDeviceSynchronize();\n").rule, "sync")
  t.eq(default:check_source("cudaCtxResetPersistingL2Cache();\n").rule, "l2-persistence")
  t.eq(default:check_source("__nanosleep(100);\n").rule, "sleep")
  t.eq(default:check_source("__trap();\n").rule, "exit")
end)

t.test("rules_recipes_drop_and_add_rules_by_name", function()
  local rs = rules.set { "default", "-printf", "inline-asm", { name = "no-goto", words = { "goto" } } }
  t.eq(rs:check_source('printf("hi");\n'), nil)
  t.eq(rs:check_source("asm(\"nop\");\n").rule, "inline-asm")
  local hit = rs:check_source("int f(void) {\n  goto out;\nout:\n  return 0;\n}\n")
  t.eq(hit.rule, "no-goto"); t.eq(hit.line, 2)
  t.raises(function() rules.set { "default", "prinf" } end, "no rule named 'prinf' (did you mean 'printf'?)")
  t.raises(function() rules.set { "-nothing-like-it" } end, "no rule named 'nothing-like-it' to drop (known: default, ")
end)

t.test("rules_preprocessed_source_maps_macro_expansions_to_source_lines", function()
  local src = "#include <stdio.h>\n#define SAY(x) pu##ts(x)\n\nvoid f(void) {\n  SAY(\"hi\");\n}\n"
  t.eq(default:check_source(src), nil, "the plain source hides it")
  local pp = assert(rules.preprocess(src, {}))
  local hit = default:check_preprocessed(pp)
  t.eq(hit.rule, "printf"); t.eq(hit.word, "puts"); t.eq(hit.line, 5)
  t.truthy(hit.message:find("found in the preprocessed source", 1, true), hit.message)
end)

t.test("rules_preprocessor_errors_are_compile_errors", function()
  local pp, msg, info = rules.preprocess("#include <no_such_header_kwb.h>\n", {})
  t.eq(pp, nil)
  t.eq(info.code, "compile-error")
  t.truthy(msg:find("the preprocessor failed", 1, true), msg)
  t.truthy(info.log:find("no_such_header_kwb.h", 1, true), info.log)
end)

t.test("rules_defines_reach_the_preprocessor", function()
  local src = "#if USE_CLOCK\n#include <time.h>\nlong f(void) { return (long)clock(); }\n#else\nlong f(void) { return 0; }\n#endif\n"
  local pp0 = assert(rules.preprocess(src, { defines = { "USE_CLOCK=0" } }))
  t.eq(default:check_preprocessed(pp0), nil)
  local m = assert(kwb.host.compile { source = src, defines = { USE_CLOCK = 1 } })
  local pp1 = assert(rules.preprocess(src, { defines = { "USE_CLOCK=1" } }))
  local hit = default:check_symbols(assert(rules.symbols(m.path)), pp1)
  t.eq(hit.rule, "timer"); t.eq(hit.word, "clock"); t.eq(hit.line, 3)
end)

t.test("rules_writable_data_of_the_candidate_is_global_state", function()
  local src = "static const float table[2] = {1, 2};\nfloat f(int i) {\n  static int hits;\n  hits++;\n  return table[i & 1];\n}\n"
  local m = assert(kwb.host.compile { source = src })
  local pp = assert(rules.preprocess(src, {}))
  local hit = default:check_symbols(assert(rules.symbols(m.path)), pp)
  t.eq(hit.rule, "global-state"); t.eq(hit.word, "hits"); t.eq(hit.line, 3)
  local clean = "static const float table[2] = {1, 2};\nfloat f(int i) { return table[i & 1]; }\n"
  local m2 = assert(kwb.host.compile { source = clean })
  t.eq(default:check_symbols(assert(rules.symbols(m2.path)), assert(rules.preprocess(clean, {}))), nil,
       "read-only tables are not state")
end)

t.done()
