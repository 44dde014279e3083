-- kwb/cli/demo.lua: `kwb demo`, the main demo behind `make run`: the flagship GPU
-- recipe where a CUDA device is present and that recipe exists, else the
-- research loop on the host: a model proposes matmul kernels and kwb checks,
-- times and keeps them (the replies replayed from a hand-written transcript
-- when no model is configured, and the demo says so).
local cli = require "kwb.cli"

local M = {}

M.gpu_recipe = "recipes/nvfp4_moe.lua"
M.cpu_recipe = "recipes/host_matmul_llm.lua"
-- the transcript each replays when no model is configured (its `model` field)
M.transcripts = { [M.gpu_recipe] = "recipes/transcripts/nvfp4_moe.json",
                  [M.cpu_recipe] = "recipes/transcripts/host_matmul_llm.json" }

-- model_line(recipe, ...) -> where the demo's model replies come from: the
-- run's --model, KWB_MODEL, or the recipe's transcript, written by hand.
function M.model_line(recipe, ...)
  local model = require "kwb.model"
  local opts = cli.parse_run_options(...)   -- (a bad one is the run's usage error, later)
  if opts and opts.model then
    return string.format("kwb demo: the model is %s (--model)", model.name(opts.model))
  elseif model.from_env() then
    return string.format("kwb demo: the model is %s (KWB_MODEL)", model.name(model.from_env()))
  end
  return string.format("kwb demo: no model is configured (KWB_MODEL is not set), so the model's replies are replayed "
                       .. "from %s, written by hand; README: \"Pointing a recipe at a model\"", M.transcripts[recipe])
end

local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() end
  return f ~= nil
end

-- nil when the GPU recipe can run, else the reason it cannot.
function M.gpu_unavailable()
  if not package.preload["kwb.cuda"] then return "this build has no CUDA backend yet" end
  local cuda = require "kwb.cuda"
  local n, err = cuda.device_count()
  if not n then return err end
  if n == 0 then return "no CUDA device is visible" end
  if not exists(M.gpu_recipe) then return "a CUDA device is present, but " .. M.gpu_recipe .. " does not exist yet" end
  return nil
end

function M.main(...)
  if ... == "--help" or ... == "-h" then
    io.write(require("kwb.help").command_help("demo"))
    return 0
  end
  local reason = M.gpu_unavailable()
  local recipe = reason and M.cpu_recipe or M.gpu_recipe
  if not exists(recipe) then
    io.stderr:write("kwb demo: ", recipe, " not found: run it from the top of the kwb source tree\n")
    return 1
  end
  if reason then
    print(string.format("kwb demo: the research loop on the host, %s, because %s", recipe, reason))
  else
    print(string.format("kwb demo: the GPU recipe %s", recipe))
  end
  print(M.model_line(recipe, ...))
  return cli.run_file(recipe, ...)
end

return M
