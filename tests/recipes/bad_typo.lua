-- tests/recipes/bad_typo.lua: a recipe with a misspelt field, for the CLI
-- transcript: the error names the file, the line and the nearest field.
return kwb.recipe {
  name     = "typo",
  problem  = "matmul",
  shapes   = { n = { 16 } },
  start    = "../../kernels/host/matmul_naive.c",
  stratgy  = "grid",
}
