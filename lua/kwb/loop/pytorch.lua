-- kwb/loop/pytorch.lua: the baselines of a PyTorch module's problem
-- (kwb.problems.torch), measured at a run's end beside its pick: the module
-- itself as a user runs it, eager, as a CUDA graph of eager and through
-- torch.compile (where each works: a mode that fails is said, with why),
-- timed by the module's reference process with kwb's method (on the GPU a
-- graph replay or a call between events, the L2 flushed before each; on the
-- host one thread's CPU time of a call) and summed up by kwb's own statistics
-- (core.stats). The summary shows the pick against each.
local core = require "kwb.core"

local M = {}

M.modes = { cuda = { "eager", "graph", "compile" }, host = { "eager" } }

-- run(run) -> { modes =, shapes = { [key] = { [mode] = stats } }, skipped = { [mode] = why }, seconds = }
-- or nil where the problem is not a module's.
function M.run(run)
  local recipe = run.recipe
  local t = recipe.problem.torch
  if not t or not t.time then return nil end
  local t0 = core.now()
  local backend = recipe.backend == "cuda" and "cuda" or "host"
  local out = { modes = M.modes[backend], shapes = {}, skipped = {} }
  local target = recipe.timing and recipe.timing.target or 0.2
  for _, sh in ipairs(recipe.shapes) do
    out.shapes[sh.key] = {}
    for _, mode in ipairs(out.modes) do
      if not out.skipped[mode] then
        local samples, why = t.time(sh.shape, mode, backend == "cuda" and "cuda" or "cpu",
                                    { target = math.max(target, 0.05), seed = run.seed })
        if samples then out.shapes[sh.key][mode] = core.stats(samples, target)
        else out.skipped[mode] = why end
      end
    end
  end
  t.close()
  out.seconds = core.now() - t0
  return out
end

-- part(pt, best_median) -> the summary's `pytorch`: each shape's medians and
-- the pick's ratio to each (their time over the pick's)
function M.part(pt, best_median)
  if not pt then return nil end
  local shapes = {}
  for key, by in pairs(pt.shapes) do
    local e = { pick = best_median[key] }
    for mode, st in pairs(by) do
      e[mode] = st.median
      e["vs_" .. mode] = e.pick and st.median / e.pick or nil
    end
    shapes[key] = e
  end
  return { modes = pt.modes, shapes = shapes, skipped = next(pt.skipped) and pt.skipped or nil, seconds = pt.seconds }
end

return M
