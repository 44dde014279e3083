-- tests/cli/cache_setup.lua PATH: a small cache with fixed contents and times
-- for the `kwb cache` transcripts (cache.t). Ids are content hashes, so they
-- are the same on every run.
local path = assert(arg[1], "usage: cache_setup.lua PATH")
local c = assert(kwb.cache.open(path))
local t0 = 1796205600   -- 2026-12-02 10:00:00 UTC
local base = [[
void axpy(int n, float a, const float *x, float *y) {
    for (int i = 0; i < n; i++)
        y[i] = a * x[i] + y[i];
}
]]
local unrolled = [[
void axpy(int n, float a, const float *x, float *y) {
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        y[i] = a * x[i] + y[i];
        y[i + 1] = a * x[i + 1] + y[i + 1];
        y[i + 2] = a * x[i + 2] + y[i + 2];
        y[i + 3] = a * x[i + 3] + y[i + 3];
    }
    for (; i < n; i++)
        y[i] = a * x[i] + y[i];
}
]]
local restrict = base:gsub("float %*y", "float *restrict y")
local seed = c:put_candidate { problem = "axpy", source = base, origin = { strategy = "seed" }, created = t0,
                               outcome = "accepted" }
local un = c:put_candidate { problem = "axpy", source = unrolled, parent = seed, params = { UNROLL = 4 },
                             origin = { strategy = "rewrite", model = "m1" }, rationale = "unroll by four",
                             created = t0 + 60, outcome = "accepted" }
local rs = c:put_candidate { problem = "axpy", source = restrict, parent = seed,
                             origin = { strategy = "rewrite", model = "m1" }, rationale = "no aliasing",
                             created = t0 + 120, outcome = "wrong" }
c:put_candidate { problem = "dot", source = "float dot(int n, const float *x) { return 0; }\n",
                  origin = { strategy = "seed" }, created = t0 + 180 }
local dev = "host:Test CPU:2"
for _, r in ipairs {
  { seed, "1000", "accepted", 2.0e-6 }, { seed, "1000000", "accepted", 1.5e-3 },
  { un, "1000", "accepted", 1.2e-6 }, { un, "1000000", "slower", 1.6e-3 },
  { rs, "1000", "wrong", 0.9e-6 },
} do
  c:add_result { candidate = r[1], device = dev, shape = r[2], outcome = r[3], timing = { median = r[4], n = 30 },
                 created = t0 + 200 }
end
c:add_build { candidate = un, arch = "x86-64", toolchain = "gcc 12.2.0", log = "", resources = { bytes = 512 },
              created = t0 + 70 }
c:close()
