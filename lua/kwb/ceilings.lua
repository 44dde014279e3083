-- kwb/ceilings.lua: what the host can do at most, measured, for the physical
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

return M
