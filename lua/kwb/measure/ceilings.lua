-- kwb/measure/ceilings.lua: what the host can do at most, measured, for the physical
-- floor (docs/architecture.md, Conventions): a shape's time can be no less
-- than its bytes over the larger of the given and 1.2x the measured
-- bandwidth, nor its flops over the larger of the given and 1.2x the
-- measured peak.
--
-- The probe measures one core (candidates run on the calling thread; other
-- threads are forbidden): copy bandwidth over several working-set sizes (the
-- best of them, so cache-resident shapes are bounded too) and the float FMA
-- rate of ten independent vector accumulators, built with -O3 -march=native.
--
--   local c = ceilings.host()       -- { bandwidth = bytes/s, flops = flop/s, ... }
--   ceilings.floor(c, bytes, flops) -- seconds
local host = require "kwb.host"

local M = {}

local probe = [[
typedef float v8 __attribute__((vector_size(32)));
typedef float v16 __attribute__((vector_size(64)));

/* dst = src over n floats; the loop vectorises at -O3. */
void probe_copy(long n, float *restrict dst, const float *restrict src) {
    for (long i = 0; i < n; i++) dst[i] = src[i];
}

/* 10 independent chains of fused multiply-adds, 8 or 16 lanes wide (the
 * wider one only pays where the vector registers are that wide). */
#define CHAINS 10
#define PROBE(name, V, L)                                                    \
    void name(long iters, float *out) {                                     \
        V acc[CHAINS], m, add;                                              \
        for (int l = 0; l < L; l++) { m[l] = 0.999f; add[l] = 1e-3f * (float)l; } \
        for (int c = 0; c < CHAINS; c++)                                    \
            for (int l = 0; l < L; l++) acc[c][l] = (float)c;               \
        for (long i = 0; i < iters; i++)                                    \
            for (int c = 0; c < CHAINS; c++) acc[c] = acc[c] * m + add;     \
        float t = 0;                                                        \
        for (int c = 0; c < CHAINS; c++)                                    \
            for (int l = 0; l < L; l++) t += acc[c][l];                     \
        out[0] = t;                                                         \
    }
PROBE(probe_fma8, v8, 8)
PROBE(probe_fma16, v16, 16)
]]

M.probe_source = probe

local cached

-- host([opts]) -> { bandwidth, flops, measured_bandwidth, measured_flops }
-- measured once per process. opts.timing overrides the probe's timing options.
function M.host(opts)
  if cached then return cached end
  opts = opts or {}
  local mod = assert(host.compile { source = probe, name = "probe.c", flags = { "-O3", "-march=native", "-ffp-contract=fast" } })
  local copy = assert(mod:fn "void probe_copy(i64 n, ptr dst, ptr src)")
  local timing = opts.timing or { warmup = 0.01, min_samples = 5, cap = 0.05, target = 0.02 }
  local bw = 0
  for _, n in ipairs { 2048, 32768, 1 << 22 } do   -- 8 KiB, 128 KiB, 16 MiB per buffer
    local src = host.buffer("f32", n):fill(1)
    local dst = host.buffer("f32", n)
    local st = host.time(copy, { n, src, dst }, timing)
    bw = math.max(bw, 2 * 4 * n / st.min)
  end
  local out = host.buffer("f32", 1)
  local iters, flops = 20000, 0
  for _, lanes in ipairs { 8, 16 } do
    local fma = assert(mod:fn(string.format("void probe_fma%d(i64 iters, ptr out)", lanes)))
    local st = host.time(fma, { iters, out }, timing)
    flops = math.max(flops, iters * 10 * lanes * 2 / st.min)
  end
  cached = { measured_bandwidth = bw, measured_flops = flops, bandwidth = 1.2 * bw, flops = 1.2 * flops,
             source = "host probe" }
  return cached
end

-- Combine measured ceilings with given ones (datasheet or recipe): the larger wins.
function M.combine(measured, given)
  given = given or {}
  return {
    bandwidth = math.max(measured and measured.bandwidth or 0, given.bandwidth or 0),
    flops = math.max(measured and measured.flops or 0, given.flops or 0),
    measured_bandwidth = measured and measured.measured_bandwidth,
    measured_flops = measured and measured.measured_flops,
  }
end

-- floor(ceilings, bytes, flops) -> the least time a shape can take, seconds.
function M.floor(c, bytes, flops)
  local t = 0
  if bytes and c.bandwidth and c.bandwidth > 0 then t = math.max(t, bytes / c.bandwidth) end
  if flops and c.flops and c.flops > 0 then t = math.max(t, flops / c.flops) end
  return t
end

-- work(recipe) -> { { bytes =, flops = }, ... }: each timed shape's, as its
-- floor counts it.
function M.work(recipe)
  local list = {}
  for i, sh in ipairs(recipe.shapes) do
    list[i] = { bytes = recipe.problem:bytes_of(sh.shape), flops = recipe.problem:flops_of(sh.shape) }
  end
  return list
end

-- flops_can_bind(bandwidth, flop_rate, work) -> could a flop rate at least
-- flop_rate raise any shape's floor above its bytes over bandwidth? No where
-- every shape's flops at flop_rate take no longer than its bytes at
-- bandwidth: a faster rate then changes no floor. (work nil: unknown, yes.)
function M.flops_can_bind(bandwidth, flop_rate, work)
  if not work then return true end
  for _, w in ipairs(work) do
    if w.flops and w.flops > 0 and (not w.bytes or w.flops / flop_rate > w.bytes / bandwidth) then return true end
  end
  return false
end

-- Ceilings no device of a family reaches, with room to spare: what an
-- imported result (measured elsewhere, its device's ceilings unknown here)
-- is checked against. A host: 2 TB/s and 100 TFLOP/s (a CPU socket's memory
-- and vector units stay well under both); a CUDA device: 10 TB/s and 10
-- PFLOP/s (the H200: 4.8 TB/s and 989 TFLOP/s of dense bf16, hwdocs/hopper.md).
M.beyond = {
  host = { bandwidth = 2e12, flops = 1e14 },
  cuda = { bandwidth = 1e13, flops = 1e16 },
}

-- absolute_floor(problem_key, shape_key, device) -> seconds, why | nil: the
-- least time a shape of a kwb problem can take on any device of the kind's
-- family (M.beyond), for problems kwb ships (kwb.problems.NAME with the
-- key's options); nil when the problem, its options or the family are not
-- known here.
function M.absolute_floor(problem_key, shape_key, device)
  local family = type(device) == "string" and device:match("^(%a+)")
  local limit = family and M.beyond[family]
  local name, opts = tostring(problem_key):match("^([%w_]+)(.*)$")
  if not limit or not name then return nil end
  local ok, ctor = pcall(require, "kwb.problems." .. name)
  if not ok or type(ctor) ~= "function" then return nil end
  local options = {}
  for k, v in (opts:match("^{(.*)}$") or ""):gmatch("([%w_]+)=([^,]*)") do options[k] = tonumber(v) or v end
  local shape = {}
  for k, v in tostring(shape_key):gmatch("([%w_]+)=(%-?%d+)") do shape[k] = math.tointeger(tonumber(v)) end
  local made, p = pcall(ctor, options)
  if not made or p:key() ~= problem_key or not p:check_shape(shape) then return nil end
  local bytes, flops = p:bytes_of(shape), p:flops_of(shape)
  local floor = M.floor(limit, bytes, flops)
  if floor <= 0 then return nil end
  return floor, string.format("%s moves %.4g bytes and does %.4g flops there; no %s device moves more than %g B/s or "
                              .. "computes more than %g FLOP/s", p.name, bytes or 0, flops or 0, family,
                              limit.bandwidth, limit.flops)
end

return M
