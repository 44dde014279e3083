-- bench/nvfp4_moe.lua: kwb's NVFP4 MoE layer against the baseline, the
-- PyTorch bf16 layer and the NVFP4 byte floor, at every shape of
-- recipes/nvfp4_moe.lua, on the GPU this runs on.
--
--   kwb bench/nvfp4_moe.lua [--params NT=1,UP_KW=4,...] [--torch torch.jsonl] [--seed N]
--                           [--T 1,64,...] [--no-baseline]
--
-- The kernel: the template with --params (settings not given take the
-- template's defaults), else the best accepted candidate of the recipe in the
-- kwb cache, else the recipe's starting point (space.start). Every shape goes
-- through the loop's own session: the same inputs (weights generated on the
-- GPU, routing from the reference generators), the
-- same check against ref.cu (relative L2 <= 5e-3) and the same timing (CUDA
-- graph replay, L2 flushed before every run), with more samples than the
-- loop takes. The byte floor is the NVFP4 bytes of the experts the routing
-- actually reaches (codes, scales, s2) over the copy bandwidth `kwb doctor`
-- measured. --torch reads the JSON lines of bench/nvfp4_torch.py --json. The
-- baseline is timed up to T = 256 (from T = 1024 on it takes ~0.5 s a call);
-- --no-baseline skips it, --T keeps only the shapes with those token counts.
local loop = require "kwb.loop"
local nvfp4 = require "kwb.problems.nvfp4.ref"
local cuda = kwb.cuda

local opts = { seed = 1 }
local i = 1
while arg[i] do
  local w = arg[i]
  if w == "--no-baseline" then
    opts.no_baseline = true
    i = i + 1
  elseif w == "--params" or w == "--torch" or w == "--seed" or w == "--T" then
    if not arg[i + 1] then io.stderr:write("bench/nvfp4_moe.lua: " .. w .. " needs a value\n"); os.exit(2) end
    opts[w:sub(3)] = arg[i + 1]
    i = i + 2
  else
    io.stderr:write("bench/nvfp4_moe.lua: unknown argument " .. w .. " (known: --params, --torch, --seed, --T, --no-baseline)\n")
    os.exit(2)
  end
end

local only
if opts.T then
  only = {}
  for v in opts.T:gmatch("[^,]+") do
    local n = math.tointeger(tonumber(v))
    if not n then io.stderr:write("bench/nvfp4_moe.lua: --T takes token counts, not '" .. v .. "'\n"); os.exit(2) end
    only[n] = true
  end
end

local recipe = kwb.load("recipes/nvfp4_moe.lua")
local s = loop.session(recipe)
local h = s.harness   -- builds, buffers, inputs and checks (kwb.measure)
s.run_seed = math.tointeger(tonumber(opts.seed)) or error("--seed must be an integer")
h.run_seed = s.run_seed

-- The kernel's parameters.
local params, from
if opts.params then
  params, from = {}, "--params"
  for k, v in opts.params:gmatch("([%w_]+)=([^,]+)") do params[k] = math.tointeger(tonumber(v)) or v end
else
  local best
  for _, r in ipairs(s.store:results(s.ctx)) do
    if r.outcome == "accepted" and r.params and r.params.NT and (not best or (r.score or 0) > (best.score or 0)) then best = r end
  end
  if best then params, from = best.params, "the cache's best (" .. best.id:sub(1, 12) .. ")"
  else
    params, from = {}, "the recipe's starting point (space.start)"
    for k, v in pairs(recipe.space.start) do params[k] = v end
  end
end
for k, v in pairs { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 2, L_UP_RW = 4, L_DN_RW = 2,
                    L_KW = 1, SWITCH = 8, L2PF = 128 } do
  if params[k] == nil then params[k] = v end
end

-- The PyTorch figures, by "T/routing".
local torch = {}
if opts.torch then
  local f = assert(io.open(opts.torch))
  for line in f:lines() do
    local ok, r = pcall(require("cjson").decode, line)
    if ok and type(r) == "table" and r.T and r.median_ms then torch[math.tointeger(r.T) .. "/" .. r.routing] = r end
  end
  f:close()
end

local dev = assert(cuda.device(0))
local bw, bw_from = cuda.copy_bandwidth()
print(string.format("# %s; copy bandwidth %.2f TB/s (%s); seed %d", cuda.device_kind(dev), bw / 1e12, bw_from,
                    s.run_seed))
print("# kernel: w4a16.cu " .. loop.params_text(params) .. " from " .. from)

local timing = { warmup = 0.05, min_samples = 10, cap = 1, target = 0.005 }
local kernels = { { name = "kwb", cand = s:candidate(params, "bench") } }
if not opts.no_baseline then kernels[2] = { name = "baseline", cand = s:candidate(recipe.start, "start") } end
for _, k in ipairs(kernels) do
  local res = { seconds = {} }
  k.fn = h:build(k.cand, res)
  if not k.fn then error(k.name .. " does not build: " .. tostring(res.reason)) end
end

local rows, failed = {}, 0
for _, sh in ipairs(recipe.shapes) do
  if only and not only[sh.shape.T] then goto skip end
  local b = h:bench(sh)
  local row = { T = sh.shape.T, routing = sh.shape.skew == 1 and "skewed" or "uniform" }
  for _, k in ipairs(kernels) do
    -- the baseline takes half a second a call from T = 1024 on: timed up to T = 256 only
    if k.name == "baseline" and sh.shape.T > 256 then goto next end
    local out, why = h:round(k.fn, b, s.run_seed, 1, 60)
    if out then
      print(string.format("FAIL %s at %s: %s: %s", k.name, sh.key, out, why))
      failed = failed + 1
    else
      local outs = { b.bufs.out }
      local st = assert(s.backend.time(k.fn, b, timing, outs))
      local bad, bwhy = h:check(b, "after the timed runs", true)
      if bad then
        print(string.format("FAIL %s at %s (timed runs): %s", k.name, sh.key, bwhy))
        failed = failed + 1
      end
      row[k.name] = st.median
      row[k.name .. "_n"] = st.n
      if k.name == "kwb" then row.rel_l2, row.max_abs = b.errors.out.rel_l2, b.errors.out.max_abs end
    end
    ::next::
  end
  row.experts = nvfp4.distinct_experts(cuda.to_host(b.bufs.ids))
  row.floor = row.experts * nvfp4.expert_bytes(sh.shape.H, sh.shape.I) / bw
  local tr = torch[row.T .. "/" .. row.routing]
  row.torch = tr and tr.median_ms / 1e3
  rows[#rows + 1] = row
  ::skip::
end

local function ms(x) return x and string.format("%.4f", x * 1e3) or "-" end
local function ratio(a, b) return (a and b) and string.format("%.2fx", a / b) or "-" end
local function pct(a, b) return (a and b) and string.format("%.0f%%", 100 * a / b) or "-" end
print()
print(string.format("%6s %-8s %7s %10s %10s %10s %10s %9s %9s %8s %9s", "T", "routing", "experts", "kwb ms",
                    "baseline", "torch ms", "floor ms", "vs torch", "vs base", "% floor", "rel L2"))
for _, r in ipairs(rows) do
  print(string.format("%6d %-8s %7d %10s %10s %10s %10s %9s %9s %8s %9s", r.T, r.routing, r.experts, ms(r.kwb),
                      ms(r.baseline), ms(r.torch), ms(r.floor), ratio(r.torch, r.kwb), ratio(r.baseline, r.kwb),
                      pct(r.floor, r.kwb), r.rel_l2 and string.format("%.2e", r.rel_l2) or "-"))
end
print()
for _, r in ipairs(rows) do
  print("figure " .. require("cjson").encode(r))
end
print(failed == 0 and "ok nvfp4_bench_every_shape_verified" or ("FAIL nvfp4_bench: " .. failed .. " failures"))
os.exit(failed == 0 and 0 or 1)
