-- tests/lua/test_unannounced.lua: the unannounced shapes derived from the
-- timed ones (kwb.measure.unannounced): each varied variable one off a small
-- base, a shape the problem refuses there one off the full size instead, one
-- odd shape past the largest timed size and one drawn from the timed range.
local t = require "t"
local problem = require "kwb.problem"
local unannounced = require "kwb.measure.unannounced"

local function keys_of(p, timed)
  local shapes = {}
  for i, s in ipairs(timed) do shapes[i] = { shape = s, key = p:shape_key(s) } end
  return table.concat(unannounced.keys(unannounced.derive(p, shapes)), " ")
end

-- A 4096^3 SGEMM: six one-off shapes around 256 (a few million flops each,
-- where one off 4096 costs as much as a timed run) and one at full size,
-- every variable odd and past 4096; the drawn one is the timed shape itself.
t.test("unannounced_a_4096_cube_is_verified_one_off_256_and_once_past_4096", function()
  local p = require("kwb.problems.sgemm") {}
  t.eq(keys_of(p, { { M = 4096, N = 4096, K = 4096 } }),
       "M=255,N=256,K=256 M=257,N=256,K=256 M=256,N=255,K=256 M=256,N=257,K=256 "
       .. "M=256,N=256,K=255 M=256,N=256,K=257 M=4097,N=4097,K=4097")
  t.eq(unannounced.small, 256)
end)

-- Below the small size the least timed value is the base: with n = 100 and
-- 4096 timed, one off 100 each way.
t.test("unannounced_a_timed_size_below_256_is_the_base", function()
  local p = require("kwb.problems.matmul") {}
  t.eq(keys_of(p, { { n = 100 }, { n = 4096 } }), "n=99 n=101 n=4097 n=499")
end)

-- A problem that needs K a multiple of `block` (one scale per block of K).
local function scaled_mm(block)
  return problem.define {
    name = "scaled_mm", vars = { "M", "N", "K" }, fn = "scaled_mm",
    args = {
      { "M", "i32", value = "M" }, { "N", "i32", value = "N" }, { "K", "i32", value = "K" },
      { "a", "f32", shape = "M * K", role = "in" }, { "b", "f32", shape = "K * N", role = "in" },
      { "s", "f32", shape = "K / " .. block, role = "in" }, { "c", "f32", shape = "M * N", role = "out" },
    },
    reference = { source = "void scaled_mm_ref(void) {}", fn = "scaled_mm_ref" },
    tolerance = { atol = 1e-3, rtol = 1e-3 },
  }
end

-- With K a multiple of 512 every shape with K = 256 is refused: M's and N's
-- one-offs fall back to full size, one off the first timed shape; K's are
-- refused at both sizes, as is the odd one. With K a multiple of 16, K = 256
-- is one: M's and N's stay small, K's are refused.
t.test("unannounced_a_small_shape_the_problem_refuses_falls_back_to_full_size", function()
  local cube = { { M = 4096, N = 4096, K = 4096 } }
  t.eq(keys_of(scaled_mm(512), cube), "M=4095,N=4096,K=4096 M=4097,N=4096,K=4096 M=4096,N=4095,K=4096 M=4096,N=4097,K=4096")
  t.eq(keys_of(scaled_mm(16), cube), "M=255,N=256,K=256 M=257,N=256,K=256 M=256,N=255,K=256 M=256,N=257,K=256")
end)
