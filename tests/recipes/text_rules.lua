-- tests/recipes/text_rules.lua: candidates that pass the text rules (a
-- system call spelled as bytes, state in assembler-defined .bss) and are
-- stopped where the boundary is: the sandbox's filter and the verification;
-- tests/lua/test_text_rules.lua pins each outcome.
local matmul = require "kwb.problems.matmul"

return kwb.recipe {
  name     = "text_rules_matmul",
  problem  = matmul {},
  shapes   = { n = { 32, 96 } },
  start    = "../../kernels/host/matmul_naive.c",
  strategy = require("kwb.strategies.list")({ { file = "../candidates/hostile_byte_syscall.c" },
                                              { file = "../candidates/hostile_asm_state.c" } }, "text-rules"),
  flags    = { "-O2" },
  budget   = { candidates = 10, minutes = 2, timeout = 1 },
  timing   = { warmup = 0.002, min_samples = 3, cap = 0.02, target = 0.05 },
  seed     = 11,
}
