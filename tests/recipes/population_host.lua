-- tests/recipes/population_host.lua: the host matmul with a scripted model
-- (tests/lua/population_model.lua, run by the `command` provider), for
-- tests/lua/test_population.lua. The model keeps its prompts in
-- $KWB_TEST_POP_DIR. With KWB_TEST_MODELS=2, two models: "idle" (never a
-- kernel) and "kernels", each priced, a bandit choosing between them (one
-- program: the second is called command:PATH#2); else "kernels" alone. The population: islands $KWB_TEST_ISLANDS (1 unless set),
-- the parent the island's best with probability $KWB_TEST_BEST (0.5 unless set);
-- none with KWB_TEST_POPULATION=off (the best as every parent).
local matmul = require "kwb.problems.matmul"

local function arm(name)
  return { provider = "command", timeout = 30, price = { input = 1, output = 1 },
           command = { kwb.files.resolve("kwb"), kwb.files.resolve("tests/lua/population_model.lua"), name } }
end
local two = os.getenv("KWB_TEST_MODELS") == "2"

return kwb.recipe {
  name     = "population_host",
  problem  = matmul {},
  shapes   = { n = { 48, 64 } },
  start    = "../../kernels/host/matmul_naive.c",
  model    = two and { arm("idle"), arm("kernels") } or arm("kernels"),
  strategy = { "llm", population = os.getenv("KWB_TEST_POPULATION") ~= "off"
                                   and { islands = tonumber(os.getenv("KWB_TEST_ISLANDS") or "1"),
                                         best = tonumber(os.getenv("KWB_TEST_BEST") or "0.5") } },
  flags    = { "-O3", "-march=native" },
  budget   = { candidates = tonumber(os.getenv("KWB_TEST_BUDGET") or "6"), minutes = 2, timeout = 5 },
  timing   = { warmup = 0.002, min_samples = 3, cap = 0.02, target = 0.05 },
  seed     = 5,
}
