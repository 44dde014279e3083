-- tests/recipes/planted.lua: the host matmul with planted candidates, one of
-- each kind, proposed in order by an inline strategy; the test pins the
-- funnel exactly.
local matmul = require "kwb.problems.matmul"

local planted = {
  { file = "../candidates/planted_forbidden.c" },   -- forbidden: clock_gettime
  { file = "../candidates/planted_macro.c" },       -- forbidden: clock_gettime behind a macro
  { file = "../candidates/planted_syntax.c" },      -- compile-error
  { file = "../candidates/planted_wrong.c" },       -- wrong
  { file = "../candidates/planted_tenfold.c" },     -- slower: ten times the work
  { BM = 32, BN = 64, BK = 32, UNROLL = 4 },        -- accepted: the tiled template
}

return kwb.recipe {
  name     = "planted_matmul",
  problem  = matmul {},
  shapes   = { n = { 48, 96 } },
  start    = "../../kernels/host/matmul_naive.c",
  template = "../../kernels/host/matmul_tiled.c",
  strategy = require("kwb.strategies.list")(planted, "planted"),
  flags    = { "-O3" },
  budget   = { candidates = 20, minutes = 2, timeout = 2 },
  timing   = { warmup = 0.002, min_samples = 3, cap = 0.02, target = 0.05 },
  seed     = 7,
}
