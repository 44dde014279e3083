-- kwb/problems/matmul.lua: C = A * B for square n x n row-major f32 matrices.
--
--   local matmul = require "kwb.problems.matmul"
--   problem = matmul {}                  -- or matmul { tolerance = { atol =, rtol = } }
--
-- Candidates export  void matmul(int n, const float *a, const float *b, float *c).
-- The reference accumulates in double; the default tolerance admits float
-- accumulation in any order at the sizes a recipe times, and rejects dropping
-- the inputs to half or bfloat16 precision.
local problem = require "kwb.problem"

local reference = [[
#include <stdlib.h>
/* Each c[i][j] is the sum over k in order, in double: the i-k-j loop keeps a
 * row of double sums, so the compiler can vectorise over j without changing
 * any sum's order (the same bits as the i-j-k triple loop). */
void matmul_ref(int n, const float *a, const float *b, float *c) {
    double *acc = malloc(sizeof *acc * (size_t)(n > 0 ? n : 1));
    if (!acc) abort();
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) acc[j] = 0;
        for (int k = 0; k < n; k++) {
            double x = a[i * n + k];
            for (int j = 0; j < n; j++) acc[j] += x * b[k * n + j];
        }
        for (int j = 0; j < n; j++) c[i * n + j] = (float)acc[j];
    }
    free(acc);
}
]]

-- The baseline "rows": the reference's loop as a plain C kernel (no abort:
-- an allocation that fails leaves c unwritten, which kwb finds).
local rows = reference:gsub("void matmul_ref%(", "void matmul_rows("):gsub("if %(!acc%) abort%(%);", "if (!acc) return;")

return function(opts)
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "tolerance" then error("matmul: unknown option '" .. tostring(k) .. "' (known: tolerance)", 2) end
  end
  return problem.define {
    name = "matmul",
    description = "C = A * B, n x n row-major f32",
    vars = { "n" },
    fn = "matmul",
    args = {
      { "n", "i32", value = "n" },
      { "a", "f32", shape = "n*n", role = "in", init = { "normal", 0, 1 } },
      { "b", "f32", shape = "n*n", role = "in", init = { "normal", 0, 1 } },
      { "c", "f32", shape = "n*n", role = "out" },
    },
    reference = { source = reference, fn = "matmul_ref", flags = { "-O3" } },
    -- a recipe's `baseline = "rows"`: the same row-accumulator loop as plain C, built with the recipe's flags
    baselines = { rows = { source = rows, fn = "matmul_rows",
                           description = "i-k-j loop over a row of double sums, as the reference" } },
    tolerance = opts.tolerance or { atol = 1e-3, rtol = 1e-4 },
    bytes = "3 * n * n * 4",
    flops = "2 * n * n * n",
    -- GPU plan: one 16 x 16 thread block per 16 x 16 tile of C.
    launch = function(shape) return { grid = { (shape.n + 15) // 16, (shape.n + 15) // 16 }, block = { 16, 16 } } end,
  }
end
