-- tests/recipes/duplicates.lua: the host matmul with three candidates, in
-- order: the ikj loop order; the same kernel with a comment, renamed locals
-- and a blank line (the same built code: duplicate of the first); and with
-- one constant changed (other code: measured, and wrong). Measured in a
-- worker, as a recipe file is (tests/lua/test_duplicates.lua).
local matmul = require "kwb.problems.matmul"

local ikj = "void matmul(int n, const float *a, const float *b, float *c) {\n"
  .. "    for (int i = 0; i < n; i++) {\n        for (int j = 0; j < n; j++) c[i * n + j] = 0;\n"
  .. "        for (int k = 0; k < n; k++) for (int j = 0; j < n; j++) c[i * n + j] += a[i * n + k] * b[k * n + j];\n"
  .. "    }\n}\n"
local renamed = "/* the ikj order: b's rows are read in order */\n"
  .. "void matmul(int n, const float *a, const float *b, float *c) {\n"
  .. "    for (int row = 0; row < n; row++) {\n\n        for (int col = 0; col < n; col++) c[row * n + col] = 0;\n"
  .. "        for (int x = 0; x < n; x++) for (int col = 0; col < n; col++) c[row * n + col] += a[row * n + x] * b[x * n + col];\n"
  .. "    }   // each row of c once\n}\n"
local one_constant = ikj:gsub("c%[i %* n %+ j%] = 0;", "c[i * n + j] = 1;")

return kwb.recipe {
  name     = "duplicates_matmul",
  problem  = matmul {},
  shapes   = { n = { 16, 24 } },
  start    = "../../kernels/host/matmul_naive.c",
  strategy = require("kwb.strategies.list")({ { source = ikj, name = "ikj.c" }, { source = renamed, name = "renamed.c" },
                                               { source = one_constant, name = "one_constant.c" } }, "duplicates"),
  flags    = { "-O1" },
  budget   = { candidates = 2, minutes = 1, timeout = 5 },
  timing   = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.05 },
  seed     = 7,
}
