-- tests/lua/test_import.lua: kwb import kernelbench (kwb.cli.import) on the
-- host: the recipe it writes from a KernelBench-format file (tests/torch/),
-- with the start kernel it is given verified before anything is written, and
-- a run of that recipe; what it refuses, and that it then writes nothing.
local t = require "t"
local core = require "kwb.core"
local import = require "kwb.cli.import"
local store = require "kwb.loop.store"

local dir = t.readable_dir("import")   -- (its recipes are read by the workers)
assert(core.mkdirs(dir .. "/gen"))
local here = core.cwd()

local function copy(from, to)
  local f = assert(io.open(from, "rb"))
  local s = f:read("a")
  f:close()
  f = assert(io.open(to, "wb"))
  f:write(s)
  f:close()
end

local function exists(p)
  local f = io.open(p, "rb")
  if f then f:close() end
  return f ~= nil
end

copy("tests/recipes/torch/matmul_start.c", dir .. "/mm_start.c")
copy("tests/recipes/torch/matmul_wrong.c", dir .. "/mm_wrong.c")

t.test("import_writes_a_recipe_whose_start_kernel_was_verified", function()
  local line = import.import(here .. "/tests/torch/matmul.py",
                             { o = dir .. "/mm.lua", start = dir .. "/mm_start.c" })
  t.eq(line:match("^[^\n]*"), "wrote " .. dir .. "/mm.lua: problem matmul from " .. here .. "/tests/torch/matmul.py ("
       .. require("kwb.problems.torch").python() .. " " .. select(2, require("kwb.problems.torch").python()):match("%S+$")
       .. "), varying M, K, N; start kernel " .. dir .. "/mm_start.c verified at 2 shapes (host)")
  t.eq(line:match("\n(.*)$"), "candidates export  void matmul(int M, int K, int N, const float *A, const float *B, float *out)")
  local recipe = kwb.load(dir .. "/mm.lua")
  t.eq(recipe.name, "matmul")
  t.eq(recipe.problem.fn, "matmul")
  t.eq(#recipe.shapes, 2)
  t.eq(recipe.shapes[1].key, "M=24,K=16,N=20", "half the example")
  t.eq(recipe.shapes[2].key, "M=48,K=32,N=40", "the file's example")
  t.eq(recipe.problem.tolerance.rtol, 1e-3, "f32's tolerance")
  t.eq(recipe.strategy_name or recipe.strategy.name, "start only", "no model named: nothing proposed")
  t.eq(exists(dir .. "/.matmul.import.lua"), false, "no file left beside it")
end)

t.test("the_imported_recipe_runs_to_its_verified_start_kernel", function()
  local recipe = kwb.load(dir .. "/mm.lua")
  local _, run = recipe:run { mode = "quiet", store = store.open(dir .. "/kwb.db") }
  t.eq(run.session.start.outcome, "start")
  t.eq(run.session.start.shapes["M=48,K=32,N=40"].partial, false, "timed at the example shape")
  recipe.problem.torch.close()
end)

t.test("import_keeps_a_recipe_already_there", function()
  t.raises(function() import.import("tests/torch/matmul.py", { o = dir .. "/mm.lua", start = dir .. "/mm_start.c" }) end,
           dir .. "/mm.lua is there already (--force writes over it)")
end)

t.test("import_refuses_a_wrong_start_kernel_and_writes_nothing", function()
  t.raises(function()
    import.import("tests/torch/matmul.py", { o = dir .. "/mw.lua", start = dir .. "/mm_wrong.c", name = "matmul" })
  end, "the start kernel " .. dir .. "/mm_wrong.c is wrong: output out at M=24,K=16,N=20 (the first run): ")
  t.eq(exists(dir .. "/mw.lua"), false, "no recipe")
  t.eq(exists(dir .. "/.matmul.import.lua"), false, "no file left beside it")
end)

t.test("import_writes_a_plain_start_kernel_verified_against_each_module", function()
  for _, m in ipairs { "elementwise", "row_sum", "softmax", "matmul", "layernorm", "mse_loss" } do
    local line = import.import("tests/torch/" .. m .. ".py", { o = dir .. "/gen/" .. m .. ".lua" })
    t.truthy(line:find("start kernel " .. dir .. "/gen/" .. m .. "_start.c verified at 2 shapes (host)", 1, true), line)
    t.eq(exists(dir .. "/gen/" .. m .. "_start.c"), true, m .. "'s start kernel")
  end
  local recipe = kwb.load(dir .. "/gen/layernorm.lua")
  t.eq(recipe.problem:prototype(),
       "void layernorm(int rows, const float *x, const float *ln_weight, const float *ln_bias, float *out)")
  recipe.problem.torch.close()
  -- a loss: one output element (the degenerate-problem check draws again before it calls it constant)
  local loss = kwb.load(dir .. "/gen/mse_loss.lua")
  t.eq(loss.problem:prototype(),
       "void mse_loss(int batch_size, int dim, const float *predictions, const float *targets, float *out)")
  t.eq(loss.problem.buffers[3].size(loss.shapes[1].shape), 1, "the output's one element")
  loss.problem.torch.close()
end)

t.test("import_says_which_op_has_no_plain_kernel_and_writes_nothing", function()
  -- (the batch varies; H and W, which the output follows as H - 2, stay fixed)
  t.raises(function() import.import("tests/torch/conv.py", { o = dir .. "/gen/conv.lua" }) end,
           "no start kernel: no plain kernel for torch.nn.Conv2d (node conv); write one with the signature\n"
           .. "  void conv(int x_0, const float *x, const float *conv_weight, const float *conv_bias, float *out)\n"
           .. "and give it with --start FILE")
  t.eq(exists(dir .. "/gen/conv.lua"), false, "no recipe")
  t.eq(exists(dir .. "/gen/conv_start.c"), false, "no start kernel")
end)

t.test("import_names_what_is_wrong_with_the_file", function()
  t.raises(function() import.import("tests/torch/nothing.py", {}) end, "cannot read tests/torch/nothing.py")
  t.raises(function() import.import("tests/recipes/torch/matmul_start.c", {}) end,
           "tests/recipes/torch/matmul_start.c: a KernelBench problem is a Python file (.py)")
  local f = assert(io.open(dir .. "/plain.py", "w"))
  f:write("import torch\ndef get_inputs():\n    return [torch.randn(4)]\n")
  f:close()
  t.raises(function() import.import(dir .. "/plain.py", { o = dir .. "/plain.lua", start = dir .. "/mm_start.c" }) end,
           "plain.py: defines no class Model(nn.Module) (or name a plain function: fn = NAME)")
  t.raises(function() import.import("tests/torch/matmul.py", { o = dir .. "/x.lua", backend = "tpu" }) end,
           "--backend tpu: host or cuda")
end)

t.done()
