-- tests/recipes/lessons_host.lua: the host matmul with a scripted model that
-- acts on the prompt's lessons (tests/lua/lessons_model.lua, run by the
-- `command` provider), for tests/lua/test_lessons.lua: one timed shape,
-- n = $KWB_TEST_N (128 unless set), four candidates, a summary of the lessons
-- ledger after the fourth. The model keeps its proposals of a run in the file
-- $KWB_TEST_LESSONS_STATE.
local matmul = require "kwb.problems.matmul"

return kwb.recipe {
  name     = "lessons_host",
  problem  = matmul {},
  shapes   = { n = { tonumber(os.getenv("KWB_TEST_N") or "128") } },
  start    = "../../kernels/host/matmul_naive.c",
  model    = { provider = "command", command = { kwb.files.resolve("kwb"), kwb.files.resolve("tests/lua/lessons_model.lua") },
               timeout = 30,
               lessons_every = 4 },
  strategy = "llm",
  tags     = { "loop-order" },
  flags    = { "-O3", "-march=native" },
  budget   = { candidates = 4, minutes = 2, timeout = 5 },
  timing   = { warmup = 0.002, min_samples = 3, cap = 0.02, target = 0.05 },
  seed     = 5,
}
