-- tests/lua/test_torch_hostile.lua: candidates that try to fool a problem
-- from a PyTorch module (kwb.problems.torch) on the host backend, each run
-- through the judge: the weights kwb hands over changed by one candidate
-- for the next ones to meet, kwb's inputs narrower than the module's own
-- example, a tolerance loosened by one output for another, and by a few
-- large elements for the rest.
local t = require "t"
local core = require "kwb.core"
local measure = require "kwb.measure"
local store = require "kwb.loop.store"

local dir = t.readable_dir("torch-hostile")   -- (its recipes are read by the workers)
assert(core.mkdirs(dir))
local here = core.cwd()

local function by_name(run)
  local by = {}
  for _, r in ipairs(run.results) do by[r.name] = r end
  return by
end

local function verified(res)
  return res.outcome == "accepted" or res.outcome == "slower"
end

-- ---- the weights ------------------------------------------------------------

-- A candidate changes a weight it is handed (its buffers are writable) and
-- spins past the timeout: the look after its last call finds the change
-- and refills it. The bias is the module's second weight, filled by the
-- first one's init (one module, one seed): refilled alone it was never
-- filled, so the candidates after met a bias of zeros, their references
-- computed with it. A candidate that changes the first weight is caught by
-- the call's check and every weight is filled again from the reference
-- process, which had by then turned its module to float64 (the reference's
-- precision): its float64 weights were written where float32 ones belong.
t.test("weights_changed_by_a_candidate_are_the_modules_own_again_for_the_next", function()
  local recipe = kwb.load "tests/recipes/torch/hostile_weights.lua"
  local _, run = recipe:run { mode = "quiet", workers = 1, store = store.open(dir .. "/weights.db") }
  local by = by_name(run)
  t.eq(by["spoil_bias_spin.c"].outcome, "timeout", by["spoil_bias_spin.c"].reason)
  t.truthy(verified(by["honest_a.c"]), "the honest kernel after the bias was zeroed: "
           .. tostring(by["honest_a.c"].outcome) .. ": " .. tostring(by["honest_a.c"].reason))
  t.eq(by["spoil_weight.c"].outcome, "wrong")
  t.eq(by["spoil_weight.c"].reason, "input ln_weight changed by the candidate at rows=10 (the first run)")
  t.truthy(verified(by["honest_b.c"]), "the honest kernel after the weight was changed: "
           .. tostring(by["honest_b.c"].outcome) .. ": " .. tostring(by["honest_b.c"].reason))
  recipe.problem.torch.close()
end)

-- The same in a harness whose first task is the one that zeroes the bias
-- (a worker's first candidate): no expected outputs were kept from before
-- it, so a kernel that never reads the bias was verified.
t.test("a_kernel_ignoring_the_bias_is_wrong_after_a_candidate_zeroed_it", function()
  local recipe = kwb.load "tests/recipes/torch/hostile_weights.lua"
  local h = measure.harness(recipe)
  local function cand(file)
    return { source = assert(io.open("tests/recipes/torch/hostile/" .. file)):read("a"), name = file }
  end
  local res = h:measure(cand "spoil_bias_spin.c", { seconds = {}, shapes = {}, seed = 1 })
  t.eq(res.outcome, "timeout", res.reason)
  res = h:measure(cand "lazy_no_bias.c", { seconds = {}, shapes = {}, seed = 2 })
  t.eq(res.outcome, "wrong")
  t.truthy(res.reason:find("^output out at rows=10 %(the first run%): %d+ elements off"), res.reason)
  recipe.problem.torch.close()
end)

-- ---- the inputs --------------------------------------------------------------

-- The module's example inputs are randn * 10; kwb drew standard normal ones
-- (the example's kind, not its scale), on which a Taylor series of sin is
-- right: the kernel was verified, and far off on the module's own inputs.
t.test("inputs_are_drawn_at_the_examples_scale_so_a_kernel_right_only_near_0_is_wrong", function()
  local spec = require("kwb.problems.torch").probe { file = "tests/torch/hostile/wide_sin.py", what = "wide_sin" }
  t.eq(table.concat(spec.inputs[1].init, ","), "normal,0,10", "randn * 10")
  local recipe = kwb.load "tests/recipes/torch/hostile_inputs.lua"
  local _, run = recipe:run { mode = "quiet", workers = 1, store = store.open(dir .. "/inputs.db") }
  t.eq(run.session.start.outcome, "start", "sinf: " .. tostring(run.session.start.reason))
  local res = by_name(run)["sin_taylor.c"]
  t.eq(res.outcome, "wrong")
  t.truthy(res.reason:find("^output out at batch_size=4,dim=32 %(the first run%): %d+ elements off"), res.reason)
  recipe.problem.torch.close()
end)

-- ---- the tolerance -------------------------------------------------------------

-- The absolute tolerance is a part of the example output's scale. Taken as
-- its RMS, exp(3x)'s tail made it hundreds of times most elements, and a
-- kernel that leaves every element under exp(-0.3) as 0 was verified; the
-- scale is now the median magnitude where that is smaller.
t.test("a_kernel_leaving_the_small_elements_of_a_wide_output_uncomputed_is_wrong", function()
  local recipe = kwb.load "tests/recipes/torch/hostile_tolerance.lua"
  local spec = recipe.problem.torch.spec
  t.truthy(spec.outputs[1].scale < 2, "exp(3x)'s scale is about its median (1), not its RMS: " .. spec.outputs[1].scale)
  t.eq(recipe.problem.tolerance.atol, 1e-3 * spec.outputs[1].scale)
  local _, run = recipe:run { mode = "quiet", workers = 1, store = store.open(dir .. "/tolerance.db") }
  t.eq(run.session.start.outcome, "start", "expf: " .. tostring(run.session.start.reason))
  local res = by_name(run)["exp_skip.c"]
  t.eq(res.outcome, "wrong")
  t.truthy(res.reason:find("^output out at batch_size=4,dim=32 %(the first run%): %d+ elements off"), res.reason)
  recipe.problem.torch.close()
end)

-- One tolerance serves every output. Scaled by the first (log_softmax, RMS
-- about 5), it let the second (softmax, elements about 0.01) be a few
-- percent off; it is now scaled by the smallest of the outputs' scales.
t.test("a_second_output_is_held_to_its_own_scale_not_the_first_ones", function()
  local recipe = kwb.load "tests/recipes/torch/hostile_outputs.lua"
  local outs = recipe.problem.torch.spec.outputs
  t.truthy(outs[2].scale < outs[1].scale / 100, string.format("softmax's scale %g, log_softmax's %g", outs[2].scale,
                                                              outs[1].scale))
  t.eq(recipe.problem.tolerance.atol, 1e-3 * outs[2].scale)
  local _, run = recipe:run { mode = "quiet", workers = 1, store = store.open(dir .. "/outputs.db") }
  t.eq(run.session.start.outcome, "start", "the exact kernel: " .. tostring(run.session.start.reason))
  local res = by_name(run)["two_coarse.c"]
  t.eq(res.outcome, "wrong")
  t.truthy(res.reason:find("^output out1 at batch_size=3,dim=50 %(the first run%): %d+ elements off"), res.reason)
  recipe.problem.torch.close()
end)

t.done()
