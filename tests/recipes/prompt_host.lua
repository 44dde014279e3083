-- tests/recipes/prompt_host.lua: the host matmul with a model proposing
-- (strategy llm), for tests/lua/test_prompt.lua: the model is the scripted
-- server at $KWB_TEST_MODEL_URL (build/httpd). Its ceilings are given above
-- any this machine measures, so that every process's floors, and so its
-- prompts, are the same.
local matmul = require "kwb.problems.matmul"

return kwb.recipe {
  name     = "prompt_host",
  problem  = matmul {},
  shapes   = { n = { 32, 48 } },
  start    = "../../kernels/host/matmul_naive.c",
  model    = { provider = "openai", model = "test-model", base_url = os.getenv("KWB_TEST_MODEL_URL") or "http://127.0.0.1:1/v1",
               key_env = "KWB_TEST_MODEL_KEY" },
  strategy = "llm",
  ideas    = { "Reorder the loops so the inner one is contiguous." },
  ceilings = { bandwidth = 1e14, flops = 1e16 },
  flags    = { "-O2" },
  budget   = { candidates = tonumber(os.getenv("KWB_TEST_BUDGET") or "1"), minutes = 1, timeout = 5 },
  timing   = { warmup = 0.002, min_samples = 3, cap = 0.02, target = 0.05 },
  seed     = 3,
}
