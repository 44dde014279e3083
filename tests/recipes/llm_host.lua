-- tests/recipes/llm_host.lua: the host matmul with a model proposing, for
-- tests/lua/test_llm_run.lua: the model is the scripted server at
-- $KWB_TEST_MODEL_URL (build/httpd), speaking $KWB_TEST_MODEL_PROVIDER's API
-- (openai unless set), with $KWB_TEST_MODEL_TIMEOUT seconds a request where
-- set; the strategy $KWB_TEST_STRATEGY, the budget $KWB_TEST_BUDGET candidates
-- and $KWB_TEST_COST; the lessons ledger's summaries every $KWB_TEST_LESSONS_EVERY
-- candidates (none unless set: tests/lua/test_lessons.lua sets it).
local matmul = require "kwb.problems.matmul"

-- (llm and llm+tune without a population: every prompt shows the best, as the tests of the prompt
-- assert; tests/lua/test_population.lua drives the population)
local strategies = { tune = { "llm+tune", sweep = 3, population = false }, agent = { "agent", turns = 3 },
                     llm = { "llm", population = false } }

return kwb.recipe {
  name     = "llm_host",
  problem  = matmul {},
  shapes   = { n = { 64, 96 } },
  start    = "../../kernels/host/matmul_naive.c",
  model    = { provider = os.getenv("KWB_TEST_MODEL_PROVIDER") or "openai", model = "test-model",
               base_url = os.getenv("KWB_TEST_MODEL_URL") or "http://127.0.0.1:1/v1",
               timeout = tonumber(os.getenv("KWB_TEST_MODEL_TIMEOUT") or ""),
               key_env = "KWB_TEST_MODEL_KEY", price = { input = 1, output = 2 }, context_bytes = 200,
               lessons_every = tonumber(os.getenv("KWB_TEST_LESSONS_EVERY") or "0") },
  strategy = strategies[os.getenv("KWB_TEST_STRATEGY") or "tune"],
  context  = { "docs/gpu_notes.md", "docs/cpu_notes.md" },
  ideas    = { "Reorder the loops so the inner one is contiguous." },
  flags    = { "-O3", "-march=native" },
  budget   = { candidates = tonumber(os.getenv("KWB_TEST_BUDGET") or "8"), minutes = 2, timeout = 5,
               cost = tonumber(os.getenv("KWB_TEST_COST") or "100") },
  timing   = { warmup = 0.002, min_samples = 3, cap = 0.02, target = 0.05 },
  seed     = 5,
}
