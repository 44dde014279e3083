-- tests/lua/test_nvfp4.lua: kwb.problems.nvfp4.ref, the checked wrappers of the NVFP4 CPU reference.
local t = require "t"
local host = kwb.host

local ref = assert(require("kwb.problems.nvfp4.ref").load())

t.test("nvfp4_load_reports_a_missing_file", function()
  local r, msg, info = require("kwb.problems.nvfp4.ref").load("kernels/nvfp4_moe/no_such_file.c")
  t.eq(r, nil)
  t.eq(info.code, "no-file")
  t.truthy(msg:find("no_such_file.c", 1, true), "message names the file: " .. msg)
end)

t.test("nvfp4_problem_builds_every_input_with_its_shape", function()
  local p = ref.problem { T = 3, H = 32, I = 16, E = 4, k = 2, seed = 9, routing = "skewed" }
  t.eq(p.x.dtype .. "[" .. p.x.n .. "]", "bf16[96]")
  t.eq(p.ids.n, 6)
  t.eq(p.tw.n, 6)
  t.eq(p.w13.q.n, 4 * 32 * 32 // 2)
  t.eq(p.w13.sf.n, 4 * 32 * 32 // 16)
  t.eq(p.w13.s2.n, 4)
  t.eq(p.w2.rows .. "x" .. p.w2.cols, "32x16")
  local again = ref.problem { T = 3, H = 32, I = 16, E = 4, k = 2, seed = 9, routing = "skewed" }
  local o1 = ref.layer(p)
  local o2 = ref.layer(again)
  t.eq(o1:checksum(), o2:checksum(), "same seed, same layer output")
  local other = ref.layer(ref.problem { T = 3, H = 32, I = 16, E = 4, k = 2, seed = 10 })
  t.truthy(o1:checksum() ~= other:checksum(), "another seed, another output")
end)

t.test("nvfp4_layer_matches_the_c_function_called_directly", function()
  local p = ref.problem { T = 2, H = 48, I = 32, E = 3, k = 2, seed = 4 }
  local out, out64 = ref.layer(p)
  local raw, raw64 = host.buffer("bf16", 2 * 48), host.buffer("f64", 2 * 48)
  t.eq(ref.c.layer(2, 48, 32, 3, 2, p.x, p.ids, p.tw, p.w13.q, p.w13.sf, p.w13.s2,
                   p.w2.q, p.w2.sf, p.w2.s2, raw, raw64), 0)
  t.eq(out:checksum(), raw:checksum())
  t.eq(out64:checksum(), raw64:checksum())
end)

t.test("nvfp4_wrappers_reject_wrong_buffers_by_name", function()
  local p = ref.problem { T = 2, H = 32, I = 16, E = 2, k = 1, seed = 1 }
  t.raises(function() ref.layer(p, host.buffer("bf16", 63)) end,
           "nvfp4.layer: 'out' must be a bf16 buffer of 64 elements (got bf16[63])")
  p.ids = host.buffer("f32", 2)
  t.raises(function() ref.layer(p) end, "nvfp4.layer: 'ids' must be a i32 buffer of 2 elements (got f32[2])")
  t.raises(function() ref.quantize(host.buffer("bf16", 32), 1, 1, 24) end,
           "nvfp4.quantize: 'cols' must be a multiple of 16 (got 24)")
  t.raises(function() ref.quantize(host.buffer("f32", 32), 1, 1, 32) end,
           "nvfp4.quantize: 'w' must be a bf16 buffer of 32 elements (got f32[32])")
  t.raises(function() ref.routing(1, 4, 2, 3, "uniform") end, "k (3) must not exceed E (2)")
  t.raises(function() ref.routing(1, 4, 8, 3, "zipf") end, "kind must be 'uniform' or 'skewed' (got zipf)")
  local w = host.buffer("bf16", 16):fill(1)
  w[3] = 0 / 0
  t.raises(function() ref.quantize(w, 1, 1, 16) end, "nvfp4.quantize: a weight is NaN or infinite")
end)

t.test("nvfp4_layer_reports_an_expert_id_out_of_range", function()
  local p = ref.problem { T = 2, H = 32, I = 16, E = 2, k = 1, seed = 1 }
  p.ids[2] = 5
  t.raises(function() ref.layer(p) end, "nvfp4.layer: an expert id is outside 0..E-1")
end)

t.test("nvfp4_quantize_round_trip_and_swizzled_scales", function()
  local w = ref.weights(3, 2 * 130 * 64)
  local q = ref.quantize(w, 2, 130, 64)
  local d = host.compare(ref.dequantize(q), host.buffer("f64", w.n):set(w:totable()))
  t.truthy(d.rel_l2 > 0.08 and d.rel_l2 < 0.11, "rel L2 " .. d.rel_l2)
  local swz = ref.swizzled_scales(q)
  t.eq(swz.n, 2 * 256 * 4, "two tensors of 130 rows padded to 256, 4 scale columns")
  t.eq(swz[1], q.sf[1], "element (0, 0) stays first")
  t.eq(swz[16 + 1], q.sf[4 + 1], "row 1 sits 16 bytes on")
  t.eq(swz[256 * 4 + 1], q.sf[130 * 4 + 1], "the second tensor starts after the first's padded tiles")
end)

t.test("nvfp4_expert_bytes_at_deepseek_v3_dimensions", function()
  -- 3 x 2048 x 7168 weights: 22,020,096 bytes of codes, 2,752,512 of scales, two s2
  t.eq(require("kwb.problems.nvfp4.ref").expert_bytes(7168, 2048), 24772616)
end)

-- The expected number of distinct experts under uniform routing is
-- E * (1 - (1 - k/E)^T): 8 at T=1, about 102 at T=16, 222 at 64 for E=256, k=8.
t.test("nvfp4_uniform_routing_touches_the_expected_number_of_experts", function()
  for _, T in ipairs { 1, 16, 64 } do
    local sum, runs = 0, 20
    for seed = 1, runs do
      sum = sum + require("kwb.problems.nvfp4.ref").distinct_experts((ref.routing(seed, T, 256, 8, "uniform")))
    end
    local want = 256 * (1 - (1 - 8 / 256) ^ T)
    t.near(sum / runs, want, T == 1 and 0 or 0.03 * want, "mean distinct experts at T=" .. T)
  end
end)

t.done()
