-- tests/lua/test_bad_recipes.lua: malformed recipes, one mistake each, over
-- every field of the recipe format and the problem a recipe defines. Each is
-- run as `kwb FILE.lua --budget 1 --quiet` (from its directory) and must exit
-- 1 with exactly one line on stderr that names the file, the line of the
-- field, the field and what is wrong with it: no silent exit 0, no hang, no
-- traceback into kwb's own files.
local t = require "t"
local core = require "kwb.core"

local top = core.cwd()
local tmp = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
-- in the tree, not in the 0700 test directory: host workers (their own uid) read the recipe
local dir = top .. "/build/test-bad-recipes"
os.execute(string.format("rm -rf '%s' && mkdir -p '%s/kwb/problems'", dir, dir))
os.execute(string.format("cp '%s/kernels/host/matmul_naive.c' '%s/k.c' && cp '%s/kernels/host/matmul_tiled.c' '%s/t.c'",
                         top, dir, top, dir))
do
  local f = assert(io.open(dir .. "/kwb/problems/broken.lua", "w"))
  f:write('error("broken on purpose", 0)\n')
  f:close()
end

local function read(path)
  local f = io.open(path, "r")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end

-- Lines 2-5 of every recipe, unless the case sets that field itself.
local base = { { "name", '"bad"' }, { "problem", '"matmul"' }, { "shapes", "{ n = { 16 } }" }, { "start", '"k.c"' } }

local function recipe_text(body, drop)
  local lines = { "return kwb.recipe {" }
  for _, f in ipairs(base) do
    if f[1] ~= drop and not body:match("^%s*" .. f[1] .. "%s*=") and not body:match("\n%s*" .. f[1] .. "%s*=") then
      lines[#lines + 1] = string.format("  %s = %s,", f[1], f[2])
    end
  end
  if body ~= "" then lines[#lines + 1] = body end
  lines[#lines + 1] = "}"
  return table.concat(lines, "\n") .. "\n"
end

-- run(name, text) -> exit status, stderr
local function run(name, text)
  local f = assert(io.open(dir .. "/" .. name .. ".lua", "w"))
  f:write(text)
  f:close()
  local db = string.format("%s/bad-%s.db", tmp, name)
  local _, _, rc = os.execute(string.format("cd '%s' && KWB_CACHE='%s' timeout 60 '%s/kwb' %s.lua --budget 1 --quiet "
                                            .. ">'%s/%s.out' 2>'%s/%s.err'", dir, db, top, name, dir, name, dir, name))
  return rc, read(dir .. "/" .. name .. ".err")
end

-- One candidate the run judges: the tiled template at one point (for the
-- cases whose mistake shows only once accept or score runs).
local one = '  template = "t.c",\n  strategy = require("kwb.strategies.list")({ { BM = 32, BN = 64, BK = 32, UNROLL = 4 } }),\n'
local define = '  problem = kwb.problem.define { name = "p", vars = { "n" }, reference = function() end,\n    args = { %s } },'

-- { name, body (fields after the base ones), the one line of stderr [, drop = a base field left out] }
local cases = {
  -- name, description
  { "name_number", "  name = 3,", "name_number.lua:5: recipe field 'name': expected a name of letters, digits, '_', '.' or '-', got number 3" },
  { "name_space", '  name = "has space",', "name_space.lua:5: recipe field 'name': expected a name of letters, digits, '_', '.' or '-', got \"has space\"" },
  { "name_missing", "", "name_missing.lua:1: recipe field 'name': expected a name of letters, digits, '_', '.' or '-', got nothing", drop = "name" },
  { "description_number", "  description = 5,", "description_number.lua:6: recipe field 'description': expected a non-empty string, got number 5" },
  { "description_empty", '  description = "",', "description_empty.lua:6: recipe field 'description': expected a non-empty string, got \"\"" },
  -- problem
  { "problem_unknown", '  problem = "nosuch",', "problem_unknown.lua:5: recipe field 'problem': no problem named 'nosuch' (no module kwb.problems.nosuch)" },
  { "problem_module_fails", '  problem = "broken",', "problem_module_fails.lua:5: recipe field 'problem': problem 'broken' fails to load: broken on purpose" },
  { "problem_number", "  problem = 3,", "problem_number.lua:5: recipe field 'problem': expected a problem (kwb.problem.define or a kwb.problems module) or its name, got number 3" },
  { "problem_plain_table", "  problem = {},", "problem_plain_table.lua:5: recipe field 'problem': expected a problem (kwb.problem.define or a kwb.problems module) or its name, got a table" },
  { "problem_bad_dtype", define:format('{ "a", "f33", shape = "n" }'), "problem_bad_dtype.lua:5: problem p argument 'a': dtype must be one of f32, f64, f16, bf16, i8, i32, i64, u8, u32, u64, got f33" },
  { "problem_bad_role", define:format('{ "a", "f32", shape = "n", role = "io" }'), "problem_bad_role.lua:5: problem p argument 'a': role must be 'in', 'out' or 'inout', got io" },
  { "problem_bad_expression", define:format('{ "a", "f32", shape = "n*" }'), "problem_bad_expression.lua:5: problem p argument 'a' shape: cannot read the expression 'n*': p argument 'a' shape:1: unexpected symbol near <eof>" },
  { "problem_no_reference", '  problem = kwb.problem.define { name = "p", vars = { "n" }, args = { { "a", "f32", shape = "n" } } },', "problem_no_reference.lua:5: problem p: 'reference' must be a Lua function or { source = | file =, fn =, cuda = }" },
  { "problem_negative_tolerance", '  problem = kwb.problem.define { name = "p", vars = { "n" }, reference = function() end,\n    args = { { "a", "f32", shape = "n" } }, tolerance = { atol = -1 } },', "problem_negative_tolerance.lua:5: problem p: tolerance.atol: expected atol, rtol or rel_l2 as a number >= 0" },
  { "problem_scalar_without_value", define:format('{ "n", "i32" }'), "problem_scalar_without_value.lua:5: problem p argument 'n': a scalar needs 'value' (an expression of the shape) or 'shape' to be a buffer" },
  -- sizes the shapes give the problem's arguments, checked before anything is allocated
  { "size_unknown_variable", define:format('{ "a", "f32", shape = "m*n" }'), "size_unknown_variable.lua:3: recipe field 'shapes': at n=16: argument 'a': unknown shape variable 'm' in p argument 'a' shape 'm*n'" },
  { "size_negative", define:format('{ "a", "f32", shape = "n-100" }'), "size_negative.lua:3: recipe field 'shapes': at n=16: argument 'a' has size -84 (n-100), not a whole number of elements >= 1" },
  { "size_fraction", define:format('{ "a", "f32", shape = "n/3" }'), "size_fraction.lua:3: recipe field 'shapes': at n=16: argument 'a' has size 5.3333333333333 (n/3), not a whole number of elements >= 1" },
  { "size_not_a_number", define:format('{ "a", "f32", shape = function() return "x" end }'), "size_not_a_number.lua:3: recipe field 'shapes': at n=16: argument 'a' has size \"x\", not a whole number of elements >= 1" },
  { "size_past_2_53", define:format('{ "a", "f32", shape = "n^40" }'), "size_past_2_53.lua:3: recipe field 'shapes': at n=16: argument 'a' would have 1.462e+48 elements (n^40), more than a buffer can hold (2^53)" },
  { "size_wraps_around", "  shapes = { n = { 1 << 32 } },\n" .. define:format('{ "a", "f32", shape = "n*n" }'), "size_wraps_around.lua:4: recipe field 'shapes': at n=4294967296: argument 'a' would have 1.845e+19 elements (n*n), more than a buffer can hold (2^53)" },
  { "size_wraps_inside", "  shapes = { n = { 1 << 22 } },\n" .. define:format('{ "a", "f32", shape = "n*n*n // (n*n)" }'), "size_wraps_inside.lua:4: recipe field 'shapes': at n=4194304: argument 'a' has size (n*n*n // (n*n)) 4194304, past 64-bit integers (computed, wrapped around: 0)" },
  { "scalar_past_i32", "  shapes = { n = { 1 << 32 } },", "scalar_past_i32.lua:5: recipe field 'shapes': at n=4294967296: argument 'n' (i32) is 4294967296 (n), not an integer in i32's range -2147483648..2147483647" },
  { "shape_maxinteger", "  shapes = { n = { math.maxinteger } },", "shape_maxinteger.lua:5: recipe field 'shapes': at n=9223372036854775807: argument 'n' (i32) is 9223372036854775807 (n), not an integer in i32's range -2147483648..2147483647" },
  -- shapes
  { "shapes_missing", "", "shapes_missing.lua:1: recipe field 'shapes': expected a table of shape variables to value lists ({ n = { 64, 128 } }) or a list of shapes, got nothing", drop = "shapes" },
  { "shapes_empty", "  shapes = {},", "shapes_empty.lua:5: recipe field 'shapes': expected a table of shape variables to value lists ({ n = { 64, 128 } }) or a list of shapes, got a table" },
  { "shapes_empty_list", "  shapes = { n = {} },", "shapes_empty_list.lua:5: recipe field 'shapes.n': expected a non-empty list of integers, got a table" },
  { "shapes_zero", "  shapes = { n = { 0 } },", "shapes_zero.lua:5: recipe field 'shapes.n[1]': expected a positive integer, got number 0" },
  { "shapes_negative", "  shapes = { n = { 16, -4 } },", "shapes_negative.lua:5: recipe field 'shapes.n[2]': expected a positive integer, got number -4" },
  { "shapes_nan", "  shapes = { n = { 0/0 } },", "shapes_nan.lua:5: recipe field 'shapes.n[1]': expected a positive integer, got number -nan" },
  { "shapes_fraction", "  shapes = { n = { 1.5 } },", "shapes_fraction.lua:5: recipe field 'shapes.n[1]': expected a positive integer, got number 1.5" },
  { "shapes_huge_float", "  shapes = { n = { 1e300 } },", "shapes_huge_float.lua:5: recipe field 'shapes.n[1]': expected a positive integer, got number 1e+300" },
  { "shapes_string_value", '  shapes = { n = { "16" } },', "shapes_string_value.lua:5: recipe field 'shapes.n[1]': expected a positive integer, got \"16\"" },
  { "shapes_string_list", '  shapes = { n = "16" },', "shapes_string_list.lua:5: recipe field 'shapes.n': expected a non-empty list of integers, got \"16\"" },
  { "shapes_unknown_variable", "  shapes = { m = { 8 } },", "shapes_unknown_variable.lua:5: unknown recipe field 'shapes.m' (did you mean 'shapes.n'?)" },
  { "shapes_listed_twice", "  shapes = { { n = 16 }, { n = 16 } },", "shapes_listed_twice.lua:5: recipe field 'shapes': distinct shapes (n=16 is listed twice)" },
  { "shapes_list_unknown_variable", "  shapes = { { m = 16 } },", "shapes_list_unknown_variable.lua:5: recipe field 'shapes[1]': 'm' is not a shape variable of matmul (it has: n)" },
  { "shapes_list_of_strings", '  shapes = { "16" },', "shapes_list_of_strings.lua:5: recipe field 'shapes[1]': expected a shape table like { n = 64 }, got \"16\"" },
  { "verify_shapes_zero", "  verify_shapes = { n = { 0 } },", "verify_shapes_zero.lua:6: recipe field 'verify_shapes.n[1]': expected a positive integer, got number 0" },
  { "verify_shapes_true", "  verify_shapes = true,", "verify_shapes_true.lua:6: recipe field 'verify_shapes': expected a table of shape variables to value lists ({ n = { 64, 128 } }) or a list of shapes, got boolean true" },
  { "verify_shapes_huge", "  verify_shapes = { n = { math.maxinteger } },", "verify_shapes_huge.lua:6: recipe field 'verify_shapes': at n=9223372036854775807: argument 'n' (i32) is 9223372036854775807 (n), not an integer in i32's range -2147483648..2147483647" },
  -- start, baseline, template
  { "start_missing", "", "start_missing.lua:1: recipe field 'start': expected the start kernel (a file path), the baseline every score is relative to, got nothing", drop = "start" },
  { "start_no_file", '  start = "missing.c",', "start_no_file.lua:5: recipe field 'start': no file ./missing.c (paths are relative to the recipe's file)" },
  { "start_directory", '  start = ".",', "start_directory.lua:5: recipe field 'start': a file to read, but ./.: Is a directory" },
  { "start_empty", '  start = "",', "start_empty.lua:5: recipe field 'start': expected a file path, got \"\"" },
  { "start_number", "  start = 5,", "start_number.lua:5: recipe field 'start': expected a file path or a table { file = | source =, defines = }, got number 5" },
  { "start_empty_table", "  start = {},", "start_empty_table.lua:5: recipe field 'start': expected 'file' or 'source', got a table" },
  { "start_source_number", "  start = { source = 5 },", "start_source_number.lua:5: recipe field 'start.source': expected the kernel's source text, got number 5" },
  { "start_file_and_source", '  start = { file = "k.c", source = "int x;" },', "start_file_and_source.lua:5: recipe field 'start': 'file' or 'source', not both" },
  { "start_unknown_field", '  start = { file = "k.c", bogus = 1 },', "start_unknown_field.lua:5: unknown recipe field 'start.bogus' (known: file, source, defines, name)" },
  { "start_defines_string", '  start = { file = "k.c", defines = "X" },', "start_defines_string.lua:5: recipe field 'start.defines': expected a table of NAME = value, got \"X\"" },
  { "baseline_unknown", '  baseline = "nosuch",', "baseline_unknown.lua:6: recipe field 'baseline': no baseline \"nosuch\" in problem matmul (known: rows)" },
  { "baseline_number", "  baseline = 5,", "baseline_number.lua:6: recipe field 'baseline': expected a name of the problem's baselines or { file = | source =, defines =, fn = }, got number 5" },
  { "baseline_no_file", '  baseline = { file = "missing.c" },', "baseline_no_file.lua:6: recipe field 'baseline.file': no file ./missing.c (paths are relative to the recipe's file)" },
  { "template_no_file", '  template = "missing.c",', "template_no_file.lua:6: recipe field 'template': no file ./missing.c (paths are relative to the recipe's file)" },
  { "template_number", "  template = 5,", "template_number.lua:6: recipe field 'template': expected a file path, got number 5" },
  -- space
  { "space_without_template", "  space = { BM = { 8 } },", "space_without_template.lua:6: recipe field 'space': needs a 'template' (the source its parameters are filled into)" },
  { "space_number", '  template = "t.c",\n  space = 5,', "space_number.lua:7: recipe field 'space': expected a table of parameter names to value lists, got number 5" },
  { "space_empty", '  template = "t.c",\n  space = {},', "space_empty.lua:7: recipe field 'space': expected at least one parameter, got a table" },
  { "space_empty_list", '  template = "t.c",\n  space = { BM = {} },', "space_empty_list.lua:7: recipe field 'space.BM': expected a non-empty list of values, got a table" },
  { "space_table_value", '  template = "t.c",\n  space = { BM = { {} } },', "space_table_value.lua:7: recipe field 'space.BM[1]': expected a finite number, a string or a boolean, got a table" },
  { "space_nan_value", '  template = "t.c",\n  space = { BM = { 0/0 } },', "space_nan_value.lua:7: recipe field 'space.BM[1]': expected a finite number, a string or a boolean, got number -nan" },
  { "space_inf_value", '  template = "t.c",\n  space = { BM = { math.huge } },', "space_inf_value.lua:7: recipe field 'space.BM[1]': expected a finite number, a string or a boolean, got number inf" },
  { "space_bad_name", '  template = "t.c",\n  space = { ["1x"] = { 1 } },', "space_bad_name.lua:7: recipe field 'space': expected parameter names that are C identifiers, got \"1x\"" },
  { "space_restrict_number", '  template = "t.c",\n  space = { BM = { 8 }, restrict = 5 },', "space_restrict_number.lua:7: recipe field 'space.restrict': expected a function(params) -> boolean, got number 5" },
  { "space_restrict_loops", '  template = "t.c",\n  space = { BM = { 8 }, restrict = function() while true do end end },', "space_restrict_loops.lua:7: recipe field 'space.restrict': still running after 100000000 Lua instructions (a loop that never ends?)" },
  { "space_restrict_fails", '  template = "t.c",\n  space = { BM = { 8 }, restrict = function(p) return p.x.y end },', "space_restrict_fails.lua:7: recipe field 'space.restrict': failed: space_restrict_fails.lua:7: attempt to index a nil value (field 'x')" },
  { "space_restrict_string", '  template = "t.c",\n  space = { BM = { 8 }, restrict = function() return "yes" end },', "space_restrict_string.lua:7: recipe field 'space.restrict': returned \"yes\" for a point, not true or false" },
  { "space_restrict_excludes_all", '  template = "t.c",\n  space = { BM = { 8 }, restrict = function() return false end },', "space_restrict_excludes_all.lua:7: recipe field 'space.restrict': excludes every point of the space (1 looked at)" },
  { "space_start_number", '  template = "t.c",\n  space = { BM = { 8 }, start = 5 },', "space_start_number.lua:7: recipe field 'space.start': expected a point of the space: { NAME = value, ... }, got number 5" },
  -- strategy
  { "strategy_unknown", '  strategy = "anneel",', "strategy_unknown.lua:6: recipe field 'strategy': expected one of grid, random, anneal, genetic, llm, llm+tune, agent, a .lua file or a table { propose = }, got \"anneel\" (did you mean 'anneal'?)" },
  { "strategy_number", "  strategy = 5,", "strategy_number.lua:6: recipe field 'strategy': expected a strategy name, a .lua file or a table { propose = }, got number 5" },
  { "strategy_no_file", '  strategy = "missing.lua",', "strategy_no_file.lua:6: recipe field 'strategy': no file ./missing.lua (paths are relative to the recipe's file)" },
  { "strategy_propose_number", "  strategy = { propose = 5 },", "strategy_propose_number.lua:6: recipe field 'strategy.propose': expected a function(self, run), got number 5" },
  { "strategy_empty_table", "  strategy = {},", "strategy_empty_table.lua:6: recipe field 'strategy.propose': expected a function(self, run), got nothing" },
  { "strategy_sweep_zero", '  strategy = { "llm+tune", sweep = 0 },\n  model = { provider = "openai", model = "x" },', "strategy_sweep_zero.lua:6: recipe field 'strategy.sweep': expected a positive integer, got number 0" },
  { "strategy_options_for_none", '  strategy = { "random", sweep = 8 },', "strategy_options_for_none.lua:6: recipe field 'strategy': no options for strategy 'random'" },
  { "strategy_llm_without_model", '  strategy = "llm",', "strategy_llm_without_model.lua:1: recipe field 'model': expected a model (the llm strategy asks one for its proposals), got nothing" },
  -- model
  { "model_number", "  model = 5,", "model_number.lua:6: recipe field 'model': expected a table with provider, model, key_env, base_url, temperature, max_tokens, fallback, price, command, timeout, file, context_bytes, profile, diff_bytes, lessons_every, lessons_bytes, got number 5" },
  { "model_empty", "  model = {},", "model_empty.lua:6: recipe field 'model.provider': expected a value (required), got nothing" },
  { "model_unknown_field", '  model = { provider = "openai", model = "x", bogus = 1 },', "model_unknown_field.lua:6: unknown recipe field 'model.bogus' (known: provider, model, key_env, base_url, temperature, max_tokens, fallback, price, command, timeout, file, context_bytes, profile, diff_bytes, lessons_every, lessons_bytes)" },
  { "model_unknown_provider", '  model = { provider = "opnai", model = "x" },', "model_unknown_provider.lua:6: recipe field 'model.provider': expected one of openai, anthropic, command, replay, got \"opnai\" (did you mean 'openai'?)" },
  { "model_model_number", '  model = { provider = "openai", model = 5 },', "model_model_number.lua:6: recipe field 'model.model': expected a non-empty string, got number 5" },
  { "model_negative_temperature", '  model = { provider = "openai", model = "x", temperature = -1 },', "model_negative_temperature.lua:6: recipe field 'model.temperature': expected a number >= 0, got number -1" },
  { "model_zero_max_tokens", '  model = { provider = "openai", model = "x", max_tokens = 0 },', "model_zero_max_tokens.lua:6: recipe field 'model.max_tokens': expected a positive integer, got number 0" },
  { "model_ftp_base_url", '  model = { provider = "openai", model = "x", base_url = "ftp://x" },', "model_ftp_base_url.lua:6: recipe field 'model.base_url': expected an http:// or https:// URL, got \"ftp://x\"" },
  { "model_negative_price", '  model = { provider = "openai", model = "x", price = { input = -1 } },', "model_negative_price.lua:6: recipe field 'model.price.input': expected a number >= 0, got number -1" },
  { "model_nan_timeout", '  model = { provider = "openai", model = "x", timeout = 0/0 },', "model_nan_timeout.lua:6: recipe field 'model.timeout': expected a positive number, got number -nan" },
  { "model_empty_command", '  model = { provider = "command", command = {} },', "model_empty_command.lua:6: recipe field 'model.command': expected a list: the program, then its arguments, got a table" },
  { "model_replay_no_file", '  model = { provider = "replay", file = "missing.json" },', "model_replay_no_file.lua:6: recipe field 'model.file': no file ./missing.json (paths are relative to the recipe's file)" },
  { "model_negative_lessons_every", '  model = { provider = "openai", model = "x", lessons_every = -1 },', "model_negative_lessons_every.lua:6: recipe field 'model.lessons_every': expected a whole number of candidates (0: no summaries), got number -1" },
  { "model_zero_lessons_bytes", '  model = { provider = "openai", model = "x", lessons_bytes = 0 },', "model_zero_lessons_bytes.lua:6: recipe field 'model.lessons_bytes': expected a positive integer, got number 0" },
  { "model_bad_fallback", '  model = { provider = "openai", model = "x", fallback = { provider = "nosuch" } },', "model_bad_fallback.lua:6: recipe field 'model.fallback.provider': expected one of openai, anthropic, command, replay, got \"nosuch\"" },
  -- context, ideas, tags, forbid, allow
  { "context_no_file", '  context = { "missing.md" },', "context_no_file.lua:6: recipe field 'context[1]': no file ./missing.md (paths are relative to the recipe's file)" },
  { "context_string", '  context = "x.md",', "context_string.lua:6: recipe field 'context': expected a list of strings, got \"x.md\"" },
  { "ideas_number", "  ideas = { 5 },", "ideas_number.lua:6: recipe field 'ideas[1]': expected a string, got number 5" },
  { "tags_not_a_word", '  tags = { "loop-order", "Loop Order" },', "tags_not_a_word.lua:6: recipe field 'tags[2]': expected a lowercase technique word (letters, digits and '-', at most 32 bytes), got \"Loop Order\"" },
  { "forbid_unknown_rule", '  forbid = { "default", "nosuch" },', "forbid_unknown_rule.lua:6: recipe field 'forbid[2]': no rule named 'nosuch' (known: default, allow-list, escape, exit, global-state, inline-asm, l2-persistence, other-streams, printf, ptx-allow-list, sleep, sync, timer)" },
  { "forbid_rule_table", '  forbid = { "default", { name = "no-goto", words = "goto" } },', "forbid_rule_table.lua:6: recipe field 'forbid[2]': rule 'no-goto': words must be a non-empty list of strings" },
  { "forbid_rule_table_unknown_field", '  forbid = { "default", { name = "no-goto", word = { "goto" } } },', "forbid_rule_table_unknown_field.lua:6: recipe field 'forbid[2]': rule 'no-goto' needs words, symbols, asm or pattern" },
  { "forbid_rule_table_typo", '  forbid = { "default", { name = "no-goto", words = { "goto" }, symbol = { "x" } } },', "forbid_rule_table_typo.lua:6: recipe field 'forbid[2]': rule 'no-goto': unknown field 'symbol' (known: name, why, words, symbols, asm, pattern, data)" },
  { "forbid_string", '  forbid = "default",', "forbid_string.lua:6: recipe field 'forbid': expected a list of rule names and rule tables, got \"default\"" },
  { "allow_number", "  allow = { 5 },", "allow_number.lua:6: recipe field 'allow[1]': expected a string, got number 5" },
  -- accept, score
  { "accept_number", "  accept = 3,", "accept_number.lua:6: recipe field 'accept': expected a function(candidate, best) -> boolean, got number 3" },
  { "accept_loops_forever", one .. "  accept = function() while true do end end,", "bad: accept_loops_forever.lua:8: recipe field 'accept': still running after 100000000 Lua instructions (a loop that never ends?)" },
  { "accept_catches_its_own_overrun", one .. "  accept = function() while true do pcall(function() while true do end end) end end,", "bad: accept_catches_its_own_overrun.lua:8: recipe field 'accept': still running after 100000000 Lua instructions (a loop that never ends?)" },
  { "accept_returns_a_number", one .. "  accept = function() return 1 end,", "bad: accept_returns_a_number.lua:8: recipe field 'accept': accept(candidate, best) returned 1 for 36bb25d8, not true or false" },
  { "accept_yields", one .. "  accept = function() coroutine.yield(true) end,", "bad: accept_yields.lua:8: recipe field 'accept': yielded (it may not wait or yield)" },
  { "accept_fails", one .. "  accept = function(c) return c.x.y end,", "bad: accept_fails.lua:8: recipe field 'accept': failed: accept_fails.lua:8: attempt to index a nil value (field 'x')" },
  { "score_string", '  score = "x",', "score_string.lua:6: recipe field 'score': expected a function(candidate) -> number, got \"x\"" },
  { "score_loops_forever", one .. "  score = function() while true do end end,", "bad: score_loops_forever.lua:8: recipe field 'score': still running after 100000000 Lua instructions (a loop that never ends?)" },
  { "score_nan", one .. "  score = function() return 0/0 end,", "bad: score_nan.lua:8: recipe field 'score': the score of ae39a4a6 is -nan, not a finite number" },
  -- budget, seed
  { "budget_number", "  budget = 5,", "budget_number.lua:6: recipe field 'budget': expected a table with candidates, minutes, timeout, cost, source_bytes, got number 5" },
  { "budget_unknown_field", "  budget = { candidats = 5 },", "budget_unknown_field.lua:6: unknown recipe field 'budget.candidats' (did you mean 'budget.candidates'?)" },
  { "budget_zero_candidates", "  budget = { candidates = 0 },", "budget_zero_candidates.lua:6: recipe field 'budget.candidates': expected a positive integer, got number 0" },
  { "budget_fraction_candidates", "  budget = { candidates = 1.5 },", "budget_fraction_candidates.lua:6: recipe field 'budget.candidates': expected a positive integer, got number 1.5" },
  { "budget_negative_minutes", "  budget = { minutes = -1 },", "budget_negative_minutes.lua:6: recipe field 'budget.minutes': expected a positive number, got number -1" },
  { "budget_nan_minutes", "  budget = { minutes = 0/0 },", "budget_nan_minutes.lua:6: recipe field 'budget.minutes': expected a positive number, got number -nan" },
  { "budget_inf_minutes", "  budget = { minutes = math.huge },", "budget_inf_minutes.lua:6: recipe field 'budget.minutes': expected a positive number, got number inf" },
  { "budget_huge_minutes", "  budget = { minutes = 1e308 },", "budget_huge_minutes.lua:6: recipe field 'budget.minutes': expected at most 525600 (a year), got number 1e+308" },
  { "budget_zero_timeout", "  budget = { timeout = 0 },", "budget_zero_timeout.lua:6: recipe field 'budget.timeout': expected a positive number, got number 0" },
  { "budget_huge_timeout", "  budget = { timeout = 1e308 },", "budget_huge_timeout.lua:6: recipe field 'budget.timeout': expected at most 3600 (seconds a call: a worker's CPU limit), got number 1e+308" },
  { "budget_negative_cost", "  budget = { cost = -1 },", "budget_negative_cost.lua:6: recipe field 'budget.cost': expected a positive number, got number -1" },
  { "budget_source_bytes_string", '  budget = { source_bytes = "4MB" },', "budget_source_bytes_string.lua:6: recipe field 'budget.source_bytes': expected a positive integer, got \"4MB\"" },
  { "budget_source_bytes_huge", "  budget = { source_bytes = 1 << 30 },", "budget_source_bytes_huge.lua:6: recipe field 'budget.source_bytes': expected at most 16777216 (bytes), got number 1073741824" },
  { "seed_fraction", "  seed = 1.5,", "seed_fraction.lua:6: recipe field 'seed': expected an integer, got number 1.5" },
  { "seed_string", '  seed = "x",', "seed_string.lua:6: recipe field 'seed': expected an integer, got \"x\"" },
  -- flags, cc
  { "flags_string", '  flags = "-O3",', "flags_string.lua:6: recipe field 'flags': expected a list of strings, got \"-O3\"" },
  { "flags_number", "  flags = { 3 },", "flags_number.lua:6: recipe field 'flags[1]': expected a string, got number 3" },
  { "cc_number", "  cc = 5,", "cc_number.lua:6: recipe field 'cc': expected a non-empty string, got number 5" },
  { "cc_not_on_path", '  cc = "nosuch-cc",', "cc_not_on_path.lua:6: recipe field 'cc': expected a C compiler on PATH (or its path), got \"nosuch-cc\"" },
  -- timing, race, ceilings, dispatch
  { "timing_unknown_field", "  timing = { bogus = 1 },", "timing_unknown_field.lua:6: unknown recipe field 'timing.bogus' (known: warmup, warmup_min, min_samples, max_samples, cap, target, min_sample, verify_runs)" },
  { "timing_zero_cap", "  timing = { cap = 0 },", "timing_zero_cap.lua:6: recipe field 'timing.cap': expected a positive number, got number 0" },
  { "timing_inf_cap", "  timing = { cap = math.huge },", "timing_inf_cap.lua:6: recipe field 'timing.cap': expected a positive number, got number inf" },
  { "timing_zero_min_samples", "  timing = { min_samples = 0 },", "timing_zero_min_samples.lua:6: recipe field 'timing.min_samples': expected a positive integer, got number 0" },
  { "timing_negative_warmup", "  timing = { warmup = -1 },", "timing_negative_warmup.lua:6: recipe field 'timing.warmup': expected a number >= 0, got number -1" },
  { "timing_inf_warmup", "  timing = { warmup = math.huge },", "timing_inf_warmup.lua:6: recipe field 'timing.warmup': expected a number >= 0, got number inf" },
  { "timing_max_below_min", "  timing = { min_samples = 5, max_samples = 2 },", "timing_max_below_min.lua:6: recipe field 'timing.max_samples': expected at least timing.min_samples (5), got number 2" },
  { "timing_max_below_default_min", "  timing = { max_samples = 2 },", "timing_max_below_default_min.lua:6: recipe field 'timing.max_samples': expected at least timing.min_samples (5, the default), got number 2" },
  { "race_negative", "  race = -1,", "race_negative.lua:6: recipe field 'race': expected a number >= 0, got number -1" },
  { "race_inf", "  race = math.huge,", "race_inf.lua:6: recipe field 'race': expected a number >= 0, got number inf" },
  { "race_string", '  race = "x",', "race_string.lua:6: recipe field 'race': expected a number >= 0, got \"x\"" },
  { "trust_imported_string", '  trust_imported = "yes",', "trust_imported_string.lua:6: recipe field 'trust_imported': expected true or false, got \"yes\"" },
  { "ceilings_zero", "  ceilings = { bandwidth = 0 },", "ceilings_zero.lua:6: recipe field 'ceilings.bandwidth': expected a positive number, got number 0" },
  { "ceilings_inf", "  ceilings = { flops = math.huge },", "ceilings_inf.lua:6: recipe field 'ceilings.flops': expected a positive number, got number inf" },
  { "ceilings_unknown_field", "  ceilings = { bogus = 1 },", "ceilings_unknown_field.lua:6: unknown recipe field 'ceilings.bogus' (known: bandwidth, flops)" },
  { "dispatch_unknown", '  dispatch = "bogus",', "dispatch_unknown.lua:6: recipe field 'dispatch': expected \"nearest\" (the default) or \"larger\": the measured shape kwb export picks for one between, got \"bogus\"" },
  -- backend, launch, arch, prompt, sanitize
  { "backend_unknown", '  backend = "gpu",', "backend_unknown.lua:6: recipe field 'backend': expected 'host' or 'cuda', got \"gpu\"" },
  { "launch_number", "  launch = 5,", "launch_number.lua:6: recipe field 'launch': expected a function(shape, params) -> { grid =, block =, smem = }, got number 5" },
  { "launch_on_the_host", "  launch = function() return {} end,", "launch_on_the_host.lua:6: recipe field 'launch': backend = 'cuda' (a launch plan places CUDA kernels)" },
  { "arch_on_the_host", '  arch = "sm_90",', "arch_on_the_host.lua:6: recipe field 'arch': backend = 'cuda' (arch names a CUDA architecture)" },
  { "prompt_string", '  prompt = "text",', "prompt_string.lua:6: recipe field 'prompt': expected a function(parts, info) -> the user message, or { system =, user = }, got \"text\"" },
  { "sanitize_unknown", '  sanitize = "yes",', "sanitize_unknown.lua:6: recipe field 'sanitize': expected \"best\" (the default), \"all\" or false, got \"yes\"" },
  -- fields that do not exist
  { "unknown_field", "  stratgy = \"grid\",", "unknown_field.lua:6: unknown recipe field 'stratgy' (did you mean 'strategy'?)" },
  { "positional_field", "  5,", "positional_field.lua:1: unknown recipe field '1' (known: name, description, problem, shapes, start, baseline, template, space, strategy, model, context, ideas, tags, forbid, accept, score, budget, seed, flags, cc, timing, dispatch, race, trust_imported, ceilings, backend, launch, arch, prompt, verify_shapes, allow, sanitize)" },
}

t.test("bad_recipes_cover_every_field_of_the_format", function()
  local fields = {}
  for _, f in ipairs(require("kwb.recipe").fields) do fields[f] = false end
  for _, c in ipairs(cases) do
    for f in pairs(fields) do
      if c[2]:match("^%s*" .. f .. "%s*=") or c[2]:match("\n%s*" .. f .. "%s*=") or c.drop == f then fields[f] = true end
    end
  end
  local missing = {}
  for f, seen in pairs(fields) do if not seen then missing[#missing + 1] = f end end
  table.sort(missing)
  t.eq(table.concat(missing, ", "), "", "fields no malformed recipe here sets")
  t.truthy(#cases >= 40, #cases .. " cases")
end)

for _, c in ipairs(cases) do
  t.test("bad_recipe_" .. c[1], function()
    local rc, err = run(c[1], recipe_text(c[2], c.drop))
    t.eq(err, "kwb: " .. c[3] .. "\n", "stderr")
    t.eq(rc, 1, "exit status")
  end)
end

-- A file that builds a recipe's table but returns it without kwb.recipe (or
-- returns kwb.recipe uncalled) is a mistake, not an ordinary script.
t.test("bad_recipe_a_table_returned_without_kwb_recipe", function()
  local rc, err = run("plain_table", 'return { name = "bad", problem = "matmul", shapes = { n = { 16 } }, start = "k.c" }\n')
  t.eq(err, "kwb: plain_table.lua returns a table with recipe fields, not a recipe: write `return kwb.recipe { ... }`\n")
  t.eq(rc, 1)
  rc, err = run("uncalled", "return kwb.recipe\n")
  t.eq(err, "kwb: uncalled.lua returns kwb.recipe itself, not a recipe: write `return kwb.recipe { ... }`\n")
  t.eq(rc, 1)
end)

-- A shape whose buffers pass what a host worker may allocate: the start
-- kernel's evaluation ends the run with the allocation's own words, no
-- traceback.
t.test("bad_recipe_a_shape_past_the_workers_memory", function()
  local rc, err = run("shape_past_memory", recipe_text("  shapes = { n = { 100000 } },"))
  t.eq(err, "kwb: bad: evaluating ae39a4a6: matmul: cannot allocate argument a (10000000000 x f32) at n=100000: out of "
       .. "memory allocating 40000000000 bytes\n")
  t.eq(rc, 1)
end)

t.done()
