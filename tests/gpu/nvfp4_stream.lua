-- tests/gpu/nvfp4_stream.lua: a diagnostic, not a benchmark. How fast each
-- way of streaming the weights of w4a16.cu (WS = 0 and 2, and their settings)
-- moves them when the kernels do no arithmetic (NOMMA = 1): the same plans,
-- inputs and timing (CUDA graph replay, cold L2) as bench/nvfp4_moe.lua. The
-- outputs are wrong by construction and nothing here is verified; the figures
-- only bound what the arithmetic-free data movement reaches.
--   kwb tests/gpu/nvfp4_stream.lua T[,T...] PARAMS [PARAMS ...]
local loop = require "kwb.loop"
local nvfp4 = require "kwb.problems.nvfp4.ref"
local cuda = kwb.cuda

local Ts, sets = {}, {}
for v in (arg[1] or ""):gmatch("[^,]+") do Ts[math.tointeger(tonumber(v)) or error("T: " .. v)] = true end
for i = 2, #arg do sets[#sets + 1] = arg[i] end
if not next(Ts) or #sets == 0 then
  io.stderr:write("usage: kwb tests/gpu/nvfp4_stream.lua T[,T...] PARAMS [PARAMS ...]\n")
  os.exit(2)
end

local recipe = kwb.load("recipes/nvfp4_moe.lua")
local s = loop.session(recipe)
local h = s.harness   -- builds, buffers, inputs and checks (kwb.measure)
s.run_seed = 1
h.run_seed = s.run_seed
local bw = cuda.copy_bandwidth()
local timing = { warmup = 0.02, min_samples = 10, cap = 0.5, target = 0.01 }
print(string.format("# diagnostic, unverified (NOMMA=1); copy bandwidth %.2f TB/s", bw / 1e12))
for _, ps in ipairs(sets) do
  local params = { NOMMA = 1 }
  for k, v in ps:gmatch("([%w_]+)=([^,]+)") do params[k] = math.tointeger(tonumber(v)) or v end
  local res = { seconds = {} }
  local fn = h:build(s:candidate(params, "diagnostic"), res)
  if not fn then error("does not build: " .. tostring(res.reason)) end
  for _, sh in ipairs(recipe.shapes) do
    if Ts[sh.shape.T] and sh.shape.skew == 0 then
      local b = h:bench(sh)
      h:round(fn, b, s.run_seed, 1, 60)   -- fills the inputs; its verdict (wrong) is ignored
      local st = assert(s.backend.time(fn, b, timing, { b.bufs.out }))
      local floor = nvfp4.distinct_experts(cuda.to_host(b.bufs.ids)) * nvfp4.expert_bytes(sh.shape.H, sh.shape.I) / bw
      print(string.format("stream %-60s T=%-5d %.4f ms  %3.0f%% of the byte floor", ps, sh.shape.T, st.median * 1e3,
                          100 * floor / st.median))
    end
  end
end
