-- recipes/host_matmul_llm.lua: the research loop on the host matmul with a
-- model proposing the kernels: `llm+tune` takes each reply's kernel as a
-- candidate, and sweeps a reply's template over the space it declares.
--
-- The model is the one KWB_PROVIDER / KWB_MODEL / KWB_BASE_URL / KWB_KEY_ENV
-- name (README: "Pointing a recipe at a model"); with none set, the replies
-- are replayed from transcripts/host_matmul_llm.json, written by hand so the
-- loop can be shown and tested without a model.
--   kwb recipes/host_matmul_llm.lua [--json] [--budget N]
local matmul = require "kwb.problems.matmul"

return kwb.recipe {
  name     = "host_matmul_llm",
  problem  = matmul {},
  shapes   = { n = { 64, 128, 200 } },     -- 200: tiles that do not divide n
  start    = "../kernels/host/matmul_naive.c",
  baseline = { file = "../kernels/host/matmul_ref.c", fn = "matmul_ref" },   -- timed beside the pick, never a candidate
  model    = kwb.model.from_env() or { provider = "replay", file = "transcripts/host_matmul_llm.json" },
  strategy = { "llm+tune", sweep = 6 },
  ideas    = { "Loop order first: the inner loop should walk memory contiguously.",
               "Then block for the caches, with the block sizes as parameters." },
  flags    = { "-O3", "-march=native" },
  forbid   = { "default" },
  budget   = { candidates = 12, minutes = 3, timeout = 5 },
  timing   = { warmup = 0.005, min_samples = 5, cap = 0.1, target = 0.01 },
  race     = 0.10,
}
