-- tests/lua/test_torch.lua: problems from PyTorch modules (kwb.problems.torch)
-- on the host backend: what the reference process finds in KernelBench-format
-- files (tests/torch/), a run judged by it (honest, faster and wrong
-- candidates; weights handed over as fixed inputs), and its faults, each an
-- error of the problem that stops the run and records nothing for the
-- candidate.
local t = require "t"
local core = require "kwb.core"
local torch = require "kwb.problems.torch"
local store = require "kwb.loop.store"

local dir = t.readable_dir("torch")   -- (its recipes are read by the workers)
assert(core.mkdirs(dir))

local function probe(name) return torch.probe { file = "tests/torch/" .. name .. ".py", what = name } end

t.test("probe_finds_the_variables_and_ties_K_across_the_matmul", function()
  local spec = probe "matmul"
  t.eq(torch.prototype(spec, "matmul"), "void matmul(int M, int K, int N, const float *A, const float *B, float *out)")
  t.eq(table.concat(spec.outputs[1].dims, ","), "M,N")
  t.eq(spec.vars[2].value, 32, "K's example value")
end)

t.test("probe_keeps_a_dimension_tied_to_a_weight_fixed", function()
  local spec = probe "linear_relu"
  t.eq(torch.prototype(spec, "k"),
       "void k(int batch_size, const float *x, const float *fc_weight, const float *fc_bias, float *out)")
  t.eq(table.concat(spec.inputs[1].dims, ","), "batch_size,24", "in_features stays 24")
  t.eq(table.concat(spec.weights[1].dims, ","), "8,24")
  t.eq(spec.weights[1].param, "fc.weight")
  t.eq(table.concat(spec.outputs[1].dims, ","), "batch_size,8")
end)

t.test("probe_reads_reductions_softmax_and_elementwise_modules", function()
  t.eq(torch.prototype(probe "row_sum", "k"), "void k(int batch_size, int dim1, int dim2, const float *x, float *out)")
  local rs = probe "row_sum"
  t.eq(table.concat(rs.outputs[1].dims, ","), "batch_size,1,dim2", "keepdim's 1 stays")
  t.eq(table.concat(rs.inputs[1].init, ","), "uniform,0,1", "torch.rand's inputs are drawn on [0, 1)")
  t.eq(torch.prototype(probe "softmax", "k"), "void k(int batch_size, int dim, const float *x, float *out)")
  local ew = probe "elementwise"
  t.eq(torch.prototype(ew, "k"), "void k(int batch_size, int dim, const float *x, const float *y, float *out)")
  t.eq(table.concat(ew.inputs[1].init, ","), "normal,0,1")
end)

t.test("probe_reads_a_plain_function_and_its_example_inputs", function()
  local spec = torch.probe { file = "tests/torch/plain_fn.py", fn = "scaled_tanh", what = "plain" }
  t.eq(torch.prototype(spec, "k"), "void k(int rows, int cols, const float *x, const float *y, float *out)")
  local p = torch { file = core.cwd() .. "/tests/torch/plain_fn.py", fn = "scaled_tanh", spec = spec }
  local bufs = { x = core.buffer("f32", 2), y = core.buffer("f32", 2), out = core.buffer("f32", 2) }
  bufs.x[1], bufs.x[2], bufs.y[1], bufs.y[2] = 0.25, -1, 0.25, 0
  p.reference.lua(bufs, { rows = 1, cols = 2 })
  t.near(bufs.out[1], 2 * math.tanh(0.5), 1e-6, "2 tanh(0.5)")
  t.near(bufs.out[2], 2 * math.tanh(-1), 1e-6, "2 tanh(-1)")
  p.torch.close()
end)

local st = store.open(dir .. "/kwb.db")

t.test("run_judged_by_the_reference_process_accepts_the_honest_and_rejects_the_wrong", function()
  local recipe = kwb.load "tests/recipes/torch/matmul.lua"
  t.eq(recipe.problem:key(), "torch_matmul{module=" .. core.sha256(io.open("tests/torch/matmul.py"):read("a")):sub(1, 12) .. "}")
  local sm, run = recipe:run { mode = "quiet", store = st }
  t.eq(run.session.start.outcome, "start")
  -- the module itself timed beside the pick (on the host: eager only)
  t.eq(table.concat(sm.pytorch.modes, ","), "eager")
  for _, key in ipairs { "M=48,K=32,N=40", "M=96,K=64,N=80" } do
    local e = sm.pytorch.shapes[key]
    t.truthy(e.eager > 0, key .. ": eager timed")
    t.eq(e.pick, sm.best_median[key], key .. ": the pick's median")
    t.eq(e.vs_eager, e.eager / e.pick, key .. ": the pick against eager")
  end
  local by = {}
  for _, r in ipairs(run.results) do by[r.name] = r end
  t.truthy(by["matmul_blocked.c"].outcome == "accepted" or by["matmul_blocked.c"].outcome == "slower",
           "the blocked kernel verified: " .. tostring(by["matmul_blocked.c"].outcome))
  t.eq(by["matmul_wrong.c"].outcome, "wrong")
  t.truthy(st.cache.db:exec("SELECT count(*) AS n FROM result")[1].n >= 3, "the results recorded")
  t.truthy(tostring(by["matmul_wrong.c"].reason):find("out", 1, true), by["matmul_wrong.c"].reason)
end)

t.test("weights_are_drawn_from_the_seed_never_left_constant_and_the_candidate_reads_them", function()
  local recipe = kwb.load "tests/recipes/torch/layernorm.lua"
  local p = recipe.problem
  local args = {}
  for _, a in ipairs(p.buffers) do args[a.name] = a end
  local function draw(seed)
    local bufs = { ln_weight = core.buffer("f32", 32), ln_bias = core.buffer("f32", 32) }
    args.ln_weight.init(bufs.ln_weight, seed, { rows = 10 }, bufs)
    return bufs.ln_weight:totable(), bufs.ln_bias:totable()
  end
  local w, b = draw(11)
  local w2, b2 = draw(11)
  local w3 = draw(12)
  local lo, hi = math.huge, -math.huge
  for i = 1, 32 do lo, hi = math.min(lo, w[i]), math.max(hi, w[i]) end
  t.truthy(lo >= 0.9 and hi <= 1.1 and hi > lo, string.format("the weight of ones drawn around 1: %g..%g", lo, hi))
  t.truthy(b[1] ~= b[2] and math.abs(b[1]) <= 0.1, "the bias of zeros drawn around 0: " .. b[1])
  t.eq(w2[7], w[7], "the same seed, the same weights")
  t.eq(b2[7], b[7])
  t.truthy(w3[7] ~= w[7], "another seed, other weights")
  local _, run = recipe:run { mode = "quiet", store = st }
  t.eq(run.session.start.outcome, "start", "the start kernel reads the weights handed over: " .. tostring(run.session.start.reason))
  p.torch.close()
end)

local function run_check(py, check)
  local r = core.exec({ py, check }, { timeout = 300 })
  return r.out .. r.err, r.status
end

t.test("torch_export_registers_an_op_that_replaces_forward_and_matches_eager", function()
  local recipe = kwb.load "tests/recipes/torch/layernorm.lua"
  local out = require("kwb.insight.export").export(recipe, dir .. "/ln", { store = st, torch = true })
  t.eq(out.torch.op, "torch.ops.kwb_torch_layernorm.torch_layernorm")
  local py = torch.python()
  local text, status = run_check(py, out.torch.check)
  t.eq(status, 0, text)
  local lines = {}
  for l in text:gmatch("[^\n]+") do lines[#lines + 1] = l:match("^(%S+ %S+ %S+)") end
  t.eq(table.concat(lines, " | "), "rows=10 out ok | rows=33 out ok")
  -- the op timed by the reference process in the module's place (what the GPU check of its timer uses)
  local samples = recipe.problem.torch.time({ rows = 33 }, "eager", "cpu", { package = out.torch.package, target = 0.01 })
  t.truthy(#samples >= 10 and samples[1] > 0, "the op's samples: " .. #samples)
  -- the kernel made wrong (its weight read as 1), the library built again: the check fails, naming the shape
  local k = next(out.kernels)
  local file = dir .. "/ln/" .. out.kernels[k].file
  local src = io.open(file):read("a")
  local f = io.open(file, "w")
  f:write((src:gsub("%* w%[i%]", "* 1.0f")))
  f:close()
  os.execute(string.format("rm -f '%s'/ln/kernels/*.o '%s'/ln/dispatch.o '%s'/ln/*.a", dir, dir, dir))
  require("kwb.insight.export.torch").build(dir .. "/ln", out, false)
  text, status = run_check(py, out.torch.check)
  t.eq(status, 1, text)
  t.truthy(text:find("rows=10 out WRONG max_abs ", 1, true), text)
  recipe.problem.torch.close()
end)

t.test("torch_export_of_a_module_without_weights_checks_too", function()
  -- (no weights: the spec's empty list goes to Python as a list, not as {})
  local recipe = kwb.load "tests/recipes/torch/matmul.lua"
  local out = require("kwb.insight.export").export(recipe, dir .. "/mm", { store = st, torch = true })
  local text, status = run_check(torch.python(), out.torch.check)
  t.eq(status, 0, text)
  t.truthy(text:find("M=96,K=64,N=80 out ok max_abs ", 1, true), text)
  recipe.problem.torch.close()
end)

t.test("torch_export_of_a_problem_that_is_no_modules_is_refused_before_anything_is_written", function()
  local recipe = kwb.load "tests/recipes/dispatch.lua"
  t.raises(function() require("kwb.insight.export").export(recipe, dir .. "/notorch", { store = st, torch = true }) end,
           "--torch: the problem of recipe dispatch is not a PyTorch module's (kwb.problems.torch)")
  t.eq(io.open(dir .. "/notorch"), nil, "no folder made")
end)

-- A module that faults only where the reference computes (in float64: the
-- probe runs it in float32), in a folder of its own with its recipe.
local function faulty(name, body, opts)
  local d = dir .. "/" .. name
  assert(core.mkdirs(d))
  local f = assert(io.open(d .. "/model.py", "w"))
  f:write(([[
import os, time, torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        if x.dtype == torch.float64:
BODY
        return x * 2

n = 16

def get_inputs():
    return [torch.randn(n)]

def get_init_inputs():
    return []
]]):gsub("BODY", body))
  f:close()
  f = assert(io.open(d .. "/start.c", "w"))
  f:write("void twice(int n, const float *x, float *out) { for (int i = 0; i < n; i++) out[i] = 2 * x[i]; }\n")
  f:close()
  f = assert(io.open(d .. "/recipe.lua", "w"))
  f:write(string.format([[
return kwb.recipe {
  name = "fault_%s",
  problem = require("kwb.problems.torch") { file = "model.py", entry = "twice"%s },
  shapes = { n = { 16 } },
  start = "start.c",
  strategy = { name = "none", propose = function() return nil end },
  budget = { candidates = 1, minutes = 1, timeout = 5 },
  seed = 1,
}
]], name, opts or ""))
  f:close()
  return d .. "/recipe.lua"
end

local function fails_as_the_problems(name, body, want, opts)
  local recipe = kwb.load(faulty(name, body, opts))
  local fst = store.open(dir .. "/" .. name .. "/kwb.db")
  local ok, err = pcall(recipe.run, recipe, { mode = "quiet", store = fst })
  t.eq(ok, false, "the run stops")
  t.truthy(tostring(err):find(want, 1, true), "the error: " .. tostring(err))
  t.truthy(tostring(err):find("problem torch_model (" .. dir .. "/" .. name .. "/model.py)", 1, true),
           "names the problem and its file: " .. tostring(err))
  local n = fst.cache.db:exec("SELECT count(*) AS n FROM result")[1].n
  t.eq(n, 0, "no outcome recorded for the start kernel")
  return tostring(err)
end

t.test("a_reference_process_that_dies_is_the_problems_error", function()
  fails_as_the_problems("dies", "            os._exit(7)", "the reference process died (exited with status 7) "
                        .. "while computing the reference at n=16")
end)

t.test("a_reference_process_that_hangs_is_killed_and_is_the_problems_error", function()
  fails_as_the_problems("hangs", "            time.sleep(100)", "the reference process gave no answer in 2 s "
                        .. "(computing the reference at n=16); it was killed", ", timeout = 2")
end)

t.test("a_reference_answering_the_wrong_dtype_or_shape_is_the_problems_error", function()
  fails_as_the_problems("dtype", "            return (x * 2).to(torch.int32)",
                        "forward returned out as i32 where the problem says f32")
  fails_as_the_problems("shape", "            return x[1:] * 2",
                        "forward returned out of shape [15] where the problem says [16]")
end)

-- (a NaN expected would fail every kernel: kwb compares finite outputs only,
-- and the judge had no sentence for it)
t.test("a_reference_with_nan_outputs_is_the_problems_error", function()
  local err = fails_as_the_problems("nan", "            return torch.log(x)", "the reference process failed while "
                                    .. "computing the reference at n=16: forward returned ")
  t.truthy(err:find(" NaN or Inf elements in out %(the first out%[%d+%]%): kwb compares finite outputs "
                    .. "only; give get_inputs%(%) inputs the module is defined on"), err)
end)

t.test("a_named_python_that_cannot_import_torch_is_said_so", function()
  t.raises(function() torch.python("/nonexistent/python3") end,
           "the Python named (/nonexistent/python3, by python =) cannot import torch: ")
  local f = assert(io.open(dir .. "/notorch", "w"))
  f:write("#!/bin/sh\necho 'ModuleNotFoundError: No module named torch' >&2\nexit 1\n")
  f:close()
  os.execute("chmod +x '" .. dir .. "/notorch'")
  t.raises(function() torch.python(dir .. "/notorch") end,
           "cannot import torch: ModuleNotFoundError: No module named torch")
end)

t.done()
