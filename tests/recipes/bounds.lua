-- tests/recipes/bounds.lua: the host matmul for tests/lua/test_bounds.lua,
-- set by the environment: the strategy $KWB_TEST_STRATEGY (llm, the default;
-- tune: llm+tune; list: the proposals $KWB_TEST_LIST, "BK=16,file=PATH,..."),
-- the budget $KWB_TEST_BUDGET candidates and budget.source_bytes
-- $KWB_TEST_SOURCE_BYTES (the default where unset). The model is the one
-- --model names (replay:FILE); the transcript here only stands in for it.
local matmul = require "kwb.problems.matmul"
local list = require "kwb.strategies.list"

local proposals = {}
for k, v in (os.getenv("KWB_TEST_LIST") or ""):gmatch("(%w+)=([^,]+)") do
  proposals[#proposals + 1] = k == "file" and { file = v } or { [k] = math.tointeger(tonumber(v)) }
end
local strategies = { llm = "llm", tune = { "llm+tune", sweep = 2 }, list = list(proposals) }

return kwb.recipe {
  name     = "bounds",
  problem  = matmul {},
  shapes   = { n = { 64, 96 } },
  start    = "../../kernels/host/matmul_naive.c",
  template = "bounds_template.c",
  space    = { BK = { 16, 128 } },
  model    = { provider = "replay", file = "../../recipes/transcripts/host_matmul_llm.json" },
  strategy = strategies[os.getenv("KWB_TEST_STRATEGY") or "llm"],
  flags    = { "-O3", "-march=native" },
  budget   = { candidates = tonumber(os.getenv("KWB_TEST_BUDGET") or "2"), minutes = 2, timeout = 5,
               source_bytes = tonumber(os.getenv("KWB_TEST_SOURCE_BYTES") or "") },
  timing   = { warmup = 0.002, min_samples = 3, cap = 0.02, target = 0.05 },
  seed     = 5,
}
