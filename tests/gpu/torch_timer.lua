-- tests/gpu/torch_timer.lua RECIPE.lua EXPORT_DIR: the reference process's
-- timer (kwb_torch_ref.py's time: a CUDA graph's replay between events, the
-- L2 flushed before each) on a kernel kwb exported (the op of
-- `kwb export --torch`, in the module's place), against kwb's own median of
-- that kernel at each measured shape (dispatch.json): within 3% each, or
-- exit 1. Run by tests/gpu/torch_import.
local core = require "kwb.core"
local file, dir = ...
local recipe = kwb.load(file)
local f = assert(io.open(dir .. "/dispatch.json"))
local ex = require("cjson").decode(f:read("a"))
f:close()
local bad = 0
for _, sh in ipairs(ex.shapes) do
  local shape = {}
  for k, v in pairs(sh.shape) do shape[k] = math.tointeger(v) or v end
  local samples = assert(recipe.problem.torch.time(shape, "graph", "cuda",
                                                   { package = dir .. "/torch/" .. ex.dispatcher .. "_kwb", target = 0.5 }))
  local theirs = core.stats(samples, 0.5).median
  local gap = theirs / sh.median - 1
  print(string.format("timer %s kernel %s: kwb %.2f us, the reference process %.2f us (%d samples), %+.1f%% %s",
                      sh.key, sh.kernel, sh.median * 1e6, theirs * 1e6, #samples, 100 * gap,
                      math.abs(gap) <= 0.03 and "ok" or "OFF BY MORE THAN 3%"))
  if math.abs(gap) > 0.03 then bad = bad + 1 end
end
recipe.problem.torch.close()
os.exit(bad == 0 and 0 or 1)
