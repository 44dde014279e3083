-- tests/lua/test_recipe.lua: the recipe schema: what passes, and the exact
-- message of each mistake (file:line of the field, the field, what was expected).
local t = require "t"

local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$") .. "/recipes"
os.execute("mkdir -p '" .. dir .. "'")
local kernel = dir .. "/k.c"
do
  local f = assert(io.open(kernel, "w"))
  f:write("void matmul(int n, const float *a, const float *b, float *c) { (void)n; (void)a; (void)b; (void)c; }\n")
  f:close()
end

local n = 0
-- Write the recipe text to a file, load it, return the error message with the
-- directory replaced by DIR (or the recipe when it loads).
local function load_text(text)
  n = n + 1
  local path = string.format("%s/r%d.lua", dir, n)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  local ok, r = pcall(kwb.load, path)
  if ok then return r end
  return (tostring(r):gsub(dir:gsub("%p", "%%%0"), "DIR"))
end

local head = 'return kwb.recipe {\n  name = "x",\n  problem = "matmul",\n'

local cases = {
  { "recipe_unknown_field_suggests_the_nearest_name",
    head .. '  shaeps = { n = { 8 } },\n  start = "k.c",\n}\n',
    "DIR/r1.lua:4: unknown recipe field 'shaeps' (did you mean 'shapes'?)" },
  { "recipe_unknown_nested_field_suggests_the_nearest_name",
    head .. '  shapes = { n = { 8 } },\n  start = "k.c",\n  budget = {\n    candidats = 5,\n  },\n}\n',
    "DIR/r2.lua:7: unknown recipe field 'budget.candidats' (did you mean 'budget.candidates'?)" },
  { "recipe_budget_needs_a_positive_integer",
    head .. '  shapes = { n = { 8 } },\n  start = "k.c",\n  budget = { candidates = -3 },\n}\n',
    "DIR/r3.lua:6: recipe field 'budget.candidates': expected a positive integer, got number -3" },
  { "recipe_start_must_exist_relative_to_the_recipe",
    head .. '  shapes = { n = { 8 } },\n  start = "missing.c",\n}\n',
    "DIR/r4.lua:5: recipe field 'start': no file DIR/missing.c (paths are relative to the recipe's file)" },
  { "recipe_unknown_strategy_suggests_the_nearest",
    head .. '  shapes = { n = { 8 } },\n  start = "k.c",\n  strategy = "anneel",\n}\n',
    "DIR/r5.lua:6: recipe field 'strategy': expected one of grid, random, anneal, genetic, llm, llm+tune, agent, a .lua file or a table { propose = }, got \"anneel\" (did you mean 'anneal'?)" },
  { "recipe_shapes_name_the_problems_variables",
    head .. '  shapes = { m = { 8 } },\n  start = "k.c",\n}\n',
    "DIR/r6.lua:4: unknown recipe field 'shapes.m' (did you mean 'shapes.n'?)" },
  { "recipe_model_needs_provider_and_model",
    head .. '  shapes = { n = { 8 } },\n  start = "k.c",\n  model = { provider = "openai" },\n}\n',
    "DIR/r7.lua:6: recipe field 'model.model': expected a model name (required), got nothing" },
  { "recipe_forbid_names_rules_it_knows",
    head .. '  shapes = { n = { 8 } },\n  start = "k.c",\n  forbid = { "default", "-sleeep" },\n}\n',
    "DIR/r8.lua:6: recipe field 'forbid[2]': no rule named 'sleeep' to drop (did you mean 'sleep'?)" },
  { "recipe_accept_must_be_a_function",
    head .. '  shapes = { n = { 8 } },\n  start = "k.c",\n  accept = 3,\n}\n',
    "DIR/r9.lua:6: recipe field 'accept': expected a function(candidate, best) -> boolean, got number 3" },
  { "recipe_space_needs_a_template",
    head .. '  shapes = { n = { 8 } },\n  start = "k.c",\n  space = { BM = { 8, 16 } },\n}\n',
    "DIR/r10.lua:6: recipe field 'space': needs a 'template' (the source its parameters are filled into)" },
  { "recipe_shape_values_are_positive_integers",
    head .. '  shapes = { n = { 8, 0 } },\n  start = "k.c",\n}\n',
    "DIR/r11.lua:4: recipe field 'shapes.n[2]': expected a positive integer, got number 0" },
  { "recipe_unknown_problem_is_named",
    'return kwb.recipe {\n  name = "x",\n  problem = "matmull",\n  shapes = { n = { 8 } },\n  start = "k.c",\n}\n',
    "DIR/r12.lua:3: recipe field 'problem': no problem named 'matmull' (no module kwb.problems.matmull)" },
  { "recipe_name_is_required",
    'return kwb.recipe {\n  problem = "matmul",\n  shapes = { n = { 8 } },\n  start = "k.c",\n}\n',
    "DIR/r13.lua:1: recipe field 'name': expected a name of letters, digits, '_', '.' or '-', got nothing" },
  { "recipe_called_without_return_names_its_own_line",
    '-- a comment\nlocal r = kwb.recipe {\n  name = "x",\n  problem = "matmul",\n  shapes = { n = { 8 } },\n  start = "k.c",\n  timing = { cap = "fast" },\n}\nreturn r\n',
    "DIR/r14.lua:7: recipe field 'timing.cap': expected a positive number, got \"fast\"" },
  { "recipe_space_start_names_only_the_spaces_parameters",
    head .. '  shapes = { n = { 8 } },\n  start = "k.c",\n  template = "k.c",\n'
      .. '  space = { BM = { 8, 16 },\n    start = { BM = 8, BN = 4 } },\n}\n',
    "DIR/r15.lua:8: unknown recipe field 'space.start.BN' (did you mean 'space.start.BM'?)" },
  { "recipe_space_start_takes_values_the_space_lists",
    head .. '  shapes = { n = { 8 } },\n  start = "k.c",\n  template = "k.c",\n'
      .. '  space = { BM = { 8, 16 },\n    start = { BM = 32 } },\n}\n',
    "DIR/r16.lua:8: recipe field 'space.start.BM': expected one of the values space.BM lists, got number 32" },
  { "recipe_space_start_is_a_point_restrict_allows",
    head .. '  shapes = { n = { 8 } },\n  start = "k.c",\n  template = "k.c",\n'
      .. '  space = { BM = { 8, 16 }, restrict = function(p) return p.BM < 16 end,\n    start = { BM = 16 } },\n}\n',
    "DIR/r17.lua:8: recipe field 'space.start': is a point space.restrict excludes" },
  { "recipe_openai_reasoning_model_takes_no_temperature",
    head .. '  shapes = { n = { 8 } },\n  start = "k.c",\n'
      .. '  model = { provider = "openai", model = "gpt-5", temperature = 0.2 },\n}\n',
    "DIR/r18.lua:6: recipe field 'model.temperature': no temperature: gpt-5 is a reasoning model, which takes only "
      .. "the default (1)" },
}

for _, c in ipairs(cases) do
  t.test(c[1], function() t.eq(load_text(c[2]), c[3]) end)
end

t.test("recipe_sanitize_is_best_all_or_false_and_only_for_cuda", function()
  local base = head .. '  shapes = { n = { 8 } },\n  start = "k.c",\n'
  local msg = load_text(base .. '  sanitize = "sometimes",\n}\n')
  t.truthy(type(msg) == "string" and msg:find("recipe field 'sanitize': expected \"best\" (the default), \"all\" or false, "
                                             .. "got \"sometimes\"", 1, true), tostring(msg))
  t.eq(load_text(base .. '}\n').sanitize, false, "a host recipe: compute-sanitizer is CUDA's")
  t.eq(load_text(base .. '  sanitize = "all",\n}\n').sanitize, false, "a host recipe: nothing to sanitize")
  local cuda = 'return kwb.recipe {\n  name = "y",\n  problem = "vecadd",\n  backend = "cuda",\n  shapes = { n = { 8 } },\n'
               .. '  start = "k.c",\n  launch = function() return { grid = 1, block = 8 } end,\n'
  t.eq(load_text(cuda .. '  sanitize = "best",\n}\n').sanitize, "best")
  t.eq(load_text(cuda .. '}\n').sanitize, "best", "on the candidates about to become the best unless set")
  t.eq(load_text(cuda .. '  sanitize = false,\n}\n').sanitize, false)
end)

t.test("recipe_valid_fields_make_a_recipe_object", function()
  local r = load_text(head .. '  shapes = { n = { 8, 16 } },\n  start = "k.c",\n  template = "k.c",\n'
    .. '  space = { BM = { 8, 16 }, restrict = function(p) return p.BM < 16 end },\n'
    .. '  model = { provider = "openai", model = "gpt-5", key_env = "OPENAI_API_KEY" },\n'
    .. '  ideas = { "tile it" }, forbid = { "default", "-sleep", "inline-asm" },\n'
    .. '  budget = { candidates = 7, timeout = 3 }, seed = 42,\n}\n')
  t.eq(type(r), "table", tostring(r))
  t.eq(r.name, "x")
  t.eq(#r.shapes, 2)
  t.eq(r.shapes[2].key, "n=16")
  t.eq(r.budget.candidates, 7)
  t.eq(r.budget.minutes, 10, "defaults fill what the recipe leaves out")
  t.eq(r.strategy.name, "random", "a space defaults to random search")
  t.eq(r.space.dims[1].name, "BM")
  t.eq(table.concat(r.rules:names(), ","), "other-streams,sync,timer,printf,l2-persistence,global-state,exit,escape,allow-list,ptx-allow-list,inline-asm")
  t.eq(r.start.file, dir .. "/k.c")
  t.eq(tostring(r), "kwb.recipe x (matmul, 2 shapes, " .. dir .. "/r" .. n .. ".lua)")
end)

t.test("recipe_list_of_shapes_and_the_product_of_lists", function()
  local p = kwb.problem.define { name = "mm", vars = { "M", "N" }, args = { { "x", "f32", shape = "M*N", role = "out" } },
                                 reference = function() end }
  local r = kwb.recipe { name = "p", problem = p, shapes = { M = { 1, 2 }, N = { 3, 4, 5 } },
                         start = { source = "void mm(float *x) { (void)x; }" } }
  t.eq(#r.shapes, 6)
  t.eq(r.shapes[1].key, "M=1,N=3")
  t.eq(r.shapes[6].key, "M=2,N=5")
  local r2 = kwb.recipe { name = "p", problem = p, shapes = { { M = 7, N = 1 }, { M = 1, N = 7 } },
                          start = { source = "void mm(float *x) { (void)x; }" } }
  t.eq(#r2.shapes, 2)
  t.eq(r2.shapes[2].key, "M=1,N=7")
  t.eq(p:prototype(), "void mm(float *x)")
end)

t.done()
