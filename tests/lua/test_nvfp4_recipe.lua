-- tests/lua/test_nvfp4_recipe.lua: recipes/nvfp4_moe.lua without a GPU: its
-- schema and shapes, the launch plans of the baseline and of the template at
-- every shape, the problem's arguments and bytes, and (where NVRTC is
-- present) that the template compiles under the settings its space allows and
-- passes the recipe's rules on its PTX.
local t = require "t"
local cuda = require "kwb.cuda"
local moe = require "kwb.problems.nvfp4_moe"

cuda.device = function() return { sms = 132 } end   -- the launch plans size grids by the SM count
local r = kwb.load("recipes/nvfp4_moe.lua")

t.test("nvfp4_recipe_has_every_shape_of_the_issue", function()
  t.eq(#r.shapes, 14)
  t.eq(r.shapes[1].key, "T=1,H=7168,I=2048,E=256,K=8,skew=0")
  t.eq(r.shapes[14].key, "T=4096,H=7168,I=2048,E=256,K=8,skew=1")
  t.eq(r.problem.draw, "run")
  t.eq(r.problem.tolerance.rel_l2, 5e-3)
  t.eq(r.budget.minutes, 5)
end)

t.test("nvfp4_recipe_plans_name_only_known_arguments", function()
  local names = {}
  for _, a in ipairs(r.problem.args) do names[a.name] = true end
  local p = { NT = 2, UP_RW = 2, UP_KW = 8, DN_RW = 4, DN_KW = 4, PF = 2, L_NT = 8, L_UP_RW = 4, L_DN_RW = 4, L_KW = 2,
              SWITCH = 8 }
  local pw = setmetatable({ WL = 1 }, { __index = p })
  local pg = setmetatable({ LW = 1, WG_SWITCH = 16, L_WG = 1 }, { __index = p })
  local pr = setmetatable({ LW = 2, WG_SWITCH = 16, RG_N = 32 }, { __index = p })
  for _, sh in ipairs(r.shapes) do
    for _, plan in ipairs { r.launch(sh.shape, p), r.launch(sh.shape, pw), r.launch(sh.shape, pg), r.launch(sh.shape, pr),
                            r.launch(sh.shape, { BASELINE = 1 }), moe.ref_launch(sh.shape) } do
      for _, st in ipairs(plan.steps) do
        for _, a in ipairs(st.args) do
          t.truthy(type(a) == "table" or names[a] or plan.scratch[a], st[1] .. " argument " .. tostring(a) .. " at " .. sh.key)
        end
      end
    end
  end
end)

local p0 = { NT = 2, UP_RW = 1, UP_KW = 4, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 2, L_DN_RW = 1, L_KW = 2,
             SWITCH = 16 }

t.test("nvfp4_recipe_template_plan_at_t4096_takes_the_large_batch_kernels", function()
  local plan = r.launch(r.shapes[13].shape, p0)
  t.eq(#plan.steps, 4)
  t.eq(plan.steps[1][1], "w4_align")
  t.eq(plan.steps[1].args[4][2], 32, "tiles of 8 * L_NT tokens")
  t.eq(plan.steps[2][1], "w4_up_l")
  t.eq(plan.steps[2].block, 128)
  t.eq(plan.steps[2].grid, 132 * 16, "up: blocks to fill 2048 threads on every SM")
  t.eq(plan.steps[3][1], "w4_down_l")
  t.eq(plan.steps[3].block, 64)
  t.eq(plan.scratch.tiles[2], 4 * (4096 * 8 // 32 + 256 + 1), "tiles: every token tile plus one partial per expert")
  t.eq(plan.scratch.y[2], 4096 * 8 * 7168)
  t.eq(plan.steps[4].grid, 132 * 8)
end)

t.test("nvfp4_recipe_template_plan_switches_at_switch_tokens_per_expert", function()
  -- 256 tokens x 8 slots over 256 experts: 8 a expert, under SWITCH = 16
  local plan = r.launch(r.shapes[9].shape, p0)
  t.eq(plan.steps[2][1], "w4_up")
  t.eq(plan.steps[1].args[4][2], 16, "tiles of 8 * NT tokens")
  t.eq(plan.steps[2].grid, math.min((256 * 8 // 16 + 257) * (2048 // 16), 132 * 16))
  -- 1024 tokens: 32 a expert
  t.eq(r.launch(r.shapes[11].shape, p0).steps[2][1], "w4_up_l")
end)

t.test("nvfp4_recipe_lw_takes_the_wgmma_kernels_from_wg_switch_tokens_an_expert", function()
  local p = setmetatable({ LW = 1, WG_SWITCH = 32, L_WG = 2, WL = 1, SWITCH = 4 }, { __index = p0 })
  local plan = r.launch(r.shapes[13].shape, p)   -- T = 4096, 128 tokens an expert
  t.eq(plan.steps[1].args[4][2], 128, "tiles of 64 * L_WG tokens")
  t.eq(plan.steps[2][1], "w4_up_wg")
  t.eq(plan.steps[2].block, 256)
  t.eq(plan.steps[2].smem, 3 * (16384 + 16384) + 1024, "three stages: 128 token rows and 128 weight rows of 128 bytes")
  t.eq(plan.steps[2].grid, 132, "one block an SM")
  t.eq(plan.steps[2].args[10] .. " " .. plan.steps[2].args[11], "w13q w13sf", "the linear weights, whatever WL says")
  t.eq(plan.steps[3][1], "w4_down_wg")
  t.eq(plan.steps[3].args[10] .. " " .. plan.steps[3].args[11], "w2q w2sf")
  t.eq(plan.scratch.tiles[2], 4 * (4096 * 8 // 128 + 256 + 1))
  p.L_WG = 1
  plan = r.launch(r.shapes[11].shape, p)   -- T = 1024: 32 an expert, from WG_SWITCH on
  t.eq(plan.steps[1].args[4][2], 64)
  t.eq(plan.steps[3][1], "w4_down_wg")
  t.eq(plan.steps[3].block, 128)
  t.eq(plan.steps[3].smem, 3 * (8192 + 16384) + 1024)
  t.eq(plan.steps[3].grid, 264, "two blocks an SM")
  -- T = 256 (8 an expert): between SWITCH and WG_SWITCH, the mma.sync large-batch kernels
  plan = r.launch(r.shapes[9].shape, p)
  t.eq(plan.steps[2][1] .. " " .. plan.steps[2].args[10], "w4_up_l w13pq")
  t.eq(plan.steps[1].args[4][2], 32, "tiles of 8 * L_NT tokens")
  -- T = 16 (half a token an expert): the small-batch kernels
  t.eq(r.launch(r.shapes[5].shape, p).steps[2][1], "w4_up")
  t.eq(r.arch, "sm_90a")
end)

t.test("nvfp4_recipe_lw2_plan_takes_the_register_a_kernels_from_wg_switch", function()
  local p = setmetatable({ LW = 2, WG_SWITCH = 16, RG_N = 32, RG_WG = 1, RG_S = 4, SWITCH = 4 }, { __index = p0 })
  -- T = 1024 (32 an expert): tiles of RG_N tokens, the rg codes with the linear scales
  local plan = r.launch(r.shapes[11].shape, p)
  t.eq(plan.steps[1].args[4][2], 32)
  t.eq(plan.steps[2][1] .. " " .. table.concat({ plan.steps[2].args[10], plan.steps[2].args[11], plan.steps[2].args[12] }, " "),
       "w4_up_rg w13rq w13sf w13s2")
  t.eq(plan.steps[3][1] .. " " .. table.concat({ plan.steps[3].args[10], plan.steps[3].args[11], plan.steps[3].args[12] }, " "),
       "w4_down_rg w2rq w2sf w2s2")
  t.eq(plan.steps[2].block, 128)
  t.eq(plan.steps[2].smem, 4 * 256 * 32 + 4 * 32 + 1024, "RG_SMEM: four stages, the token table, alignment")
  t.eq(plan.steps[2].grid, 132 * 3, "three blocks of 32-token tiles an SM")
  t.eq(plan.scratch.tiles[2], 4 * (1024 * 8 // 32 + 256 + 1))
  -- T = 4096, two warpgroups a block of 128-token tiles: one block an SM, 64 i (128 H rows) an item
  p.RG_N, p.RG_WG, p.RG_S = 128, 2, 3
  plan = r.launch(r.shapes[13].shape, p)
  t.eq(plan.steps[1].args[4][2], 128)
  t.eq(plan.steps[2].block, 256)
  t.eq(plan.steps[2].smem, 3 * 256 * 128 + 4 * 128 + 1024)
  t.eq(plan.steps[2].grid, 132)
  t.eq(plan.steps[3].grid, 132)
  -- one warpgroup of 128-token tiles in four stages: shared memory lets an SM hold one block
  p.RG_WG, p.RG_S = 1, 4
  t.eq(r.launch(r.shapes[13].shape, p).steps[2].grid, 132)
  -- RG_OCC: three blocks of 64-token tiles an SM, as launch bounds ask
  p.RG_N, p.RG_OCC = 64, 3
  t.eq(r.launch(r.shapes[13].shape, p).steps[2].grid, 132 * 3)
  -- RG_M = 2: 128 rows a warpgroup, 256 a block of two: 64 i (up) and 256 H rows (down) an item
  p.RG_WG, p.RG_OCC, p.RG_M, p.RG_PF = 2, 1, 2, 1
  plan = r.launch(r.shapes[13].shape, p)
  t.eq(plan.steps[2].grid, 132)
  t.eq(plan.steps[2].block, 256)
  local tiles = 4096 * 8 // 64 + 256 + 1
  t.eq(plan.steps[2].grid, math.min(132, tiles * (2048 // 128)))
  t.eq(plan.scratch.tiles[2], 4 * tiles)
  -- T = 256 (8 an expert) is below WG_SWITCH: the mma.sync large-batch kernels
  t.eq(r.launch(r.shapes[9].shape, p).steps[2][1], "w4_up_l")
  -- H or I not a multiple of 256 (whole pairs of chunks): mma.sync there
  local odd = { T = 4096, H = 7168 - 128, I = 2048, E = 256, K = 8, skew = 0 }
  t.eq(r.launch(odd, p).steps[2][1], "w4_up_l")
  t.eq(r.launch(odd, p).steps[1].args[4][2], 8 * p0.L_NT)
end)

t.test("nvfp4_recipe_lw3_plan_takes_the_warp_specialised_kernels", function()
  local p = setmetatable({ LW = 3, WG_SWITCH = 16, SP_N = 128, SWITCH = 4 }, { __index = p0 })
  -- T = 4096 (128 an expert): tiles of SP_N tokens, three warpgroups, one block an SM, the rg codes
  local plan = r.launch(r.shapes[13].shape, p)
  t.eq(plan.steps[1].args[4][2], 128)
  t.eq(plan.steps[2][1] .. " " .. table.concat({ plan.steps[2].args[10], plan.steps[2].args[11], plan.steps[2].args[12] }, " "),
       "w4_up_sp w13rq w13sf w13s2")
  t.eq(plan.steps[3][1] .. " " .. plan.steps[3].args[10], "w4_down_sp w2rq")
  t.eq(plan.steps[2].block, 384)
  -- SP_SMEM at SP_M = 2: four stages of 128 tokens x 256 bytes and 256 rows' codes (64 bytes) and scales (8)
  t.eq(plan.steps[2].smem, 4 * (128 * 256 + 256 * 72) + 16 * 4 + 4 * 128 + 1024)
  t.eq(plan.steps[2].grid, 132)
  t.eq(#plan.steps[2].args, 13, "no tensor map without SP_TMA")
  -- SP_M = 1 with the codes by TMA: blocks of 64 h columns and 128 w2 rows, boxes of as many rows
  p.SP_M, p.SP_TMA, p.SP_N = 1, 1, 64
  plan = r.launch(r.shapes[13].shape, p)
  t.eq(plan.steps[2].smem, 6 * (64 * 256 + 128 * 72) + 16 * 6 + 4 * 64 + 1024, "six stages at 64 tokens")
  local tiles = 4096 * 8 // 64 + 256 + 1
  t.eq(plan.steps[2].grid, math.min(132, tiles * (2048 // 64)))
  t.eq(plan.steps[2].args[14].tensor_map .. " " .. table.concat(plan.steps[2].args[14].box, " ") .. " "
       .. table.concat(plan.steps[2].args[14].dims, " "), "w13rq 64 64 3584 1048576")
  t.eq(plan.steps[3].args[14].tensor_map .. " " .. table.concat(plan.steps[3].args[14].box, " ") .. " "
       .. table.concat(plan.steps[3].args[14].dims, " "), "w2rq 64 128 1024 1835008")
  p.SP_M = 2
  t.eq(table.concat(r.launch(r.shapes[13].shape, p).steps[3].args[14].box, " "), "64 256")
  -- T = 256 (8 an expert) is below WG_SWITCH; H not a multiple of 256: the mma.sync kernels
  t.eq(r.launch(r.shapes[9].shape, p).steps[2][1], "w4_up_l")
  t.eq(r.launch({ T = 4096, H = 7168 - 128, I = 2048, E = 256, K = 8, skew = 0 }, p).steps[2][1], "w4_up_l")
  -- the space: LW = 3 at the start's other settings; registers that add up to 3 x 168 only; the
  -- LW = 3 settings at their defaults where the kernels are others
  local q = {}
  for k, v in pairs(r.space.start) do q[k] = v end
  q.LW, q.RG_N, q.RG_WG, q.RG_S, q.RG_PF, q.RG_ORD, q.RG_OCC, q.RG_M = 3, 64, 1, 4, 2, 0, 2, 1
  q.SP_N, q.SP_M, q.SP_TMA, q.SP_PREG, q.SP_CREG = 64, 2, 1, 40, 232
  t.eq(r.space.restrict(q), true)
  q.SP_CREG = 216
  t.eq(r.space.restrict(q), false, "40 + 2 x 216 is not 504")
  q.SP_PREG, q.SP_M = 72, 1
  t.eq(r.space.restrict(q), true)
  q.LW = 2
  t.eq(r.space.restrict(q), false, "SP_M = 1 with LW = 2")
end)

t.test("nvfp4_recipe_space_gives_the_unused_wgmma_settings_one_value", function()
  -- (around the mma.sync settings of the H200 table, docs/perf.md 2026-12-03)
  local st = { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 2, L_UP_RW = 4, L_DN_RW = 2, L_KW = 1,
               SWITCH = 8, L2PF = 128, MINB = 1, L_MINB = 4, WS = 0, WS_S = 2, WL = 1, LW = 0, WG_SWITCH = 32, L_WG = 2,
               RG_N = 64, RG_WG = 1, RG_S = 4, RG_PF = 2, RG_ORD = 0, RG_OCC = 2, RG_M = 1 }
  local function with(over) return setmetatable(over, { __index = st }) end
  t.eq(r.space.restrict(with { LW = 0, L_WG = 1 }), false, "L_WG without the wgmma kernels")
  t.eq(r.space.restrict(with { LW = 0, WG_SWITCH = 64 }), false)
  t.eq(r.space.restrict(with { LW = 1, WG_SWITCH = 16, L_WG = 1 }), true)
  t.eq(r.space.restrict(with { LW = 1, WG_SWITCH = 64, L_WG = 2 }), true)
  t.eq(r.space.restrict(with { LW = 1, WG_SWITCH = 16, SWITCH = 16 }), false, "wgmma from above SWITCH")
  t.eq(r.space.restrict(with { LW = 2, WG_SWITCH = 16, RG_N = 32, RG_WG = 2, RG_S = 3, RG_PF = 1, RG_OCC = 1 }), true)
  t.eq(r.space.restrict(with { LW = 2, WG_SWITCH = 16, SWITCH = 16 }), false, "register-A wgmma from above SWITCH")
  t.eq(r.space.restrict(with { LW = 2, WG_SWITCH = 16, L_WG = 1 }), false, "L_WG is the LW = 1 kernels'")
  t.eq(r.space.restrict(with { LW = 1, WG_SWITCH = 16, RG_N = 128 }), false, "RG_N is the LW = 2 kernels'")
  t.eq(r.space.restrict(with { LW = 0, RG_PF = 1 }), false)
  t.eq(r.space.restrict(with { LW = 0, RG_ORD = 1 }), false)
  t.eq(r.space.restrict(with { LW = 0, RG_OCC = 3 }), false)
  t.eq(r.space.restrict(with { LW = 0, RG_M = 2 }), false)
  t.eq(r.space.restrict(with { LW = 2, WG_SWITCH = 16, RG_M = 2, RG_PF = 1, RG_WG = 2, RG_OCC = 1 }), true)
  t.eq(r.space.restrict(with { LW = 2, WG_SWITCH = 16, RG_M = 2, RG_PF = 2 }), false, "two row groups load one chunk ahead")
  t.eq(r.space.restrict(with { LW = 2, WG_SWITCH = 16, RG_M = 2, RG_PF = 1, RG_OCC = 3 }), false)
  t.eq(r.space.restrict(with { LW = 2, WG_SWITCH = 16, RG_OCC = 3 }), true)
  t.eq(r.space.restrict(with { LW = 2, WG_SWITCH = 16, RG_OCC = 2, RG_WG = 2 }), false, "two blocks of two warpgroups spill")
  t.eq(r.space.restrict(with { LW = 2, WG_SWITCH = 16, RG_ORD = 1 }), true)
end)

t.test("nvfp4_recipe_wl_picks_the_weight_layout_the_kernels_read", function()
  local p = { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 2, L_UP_RW = 4, L_DN_RW = 2, L_KW = 1,
              SWITCH = 8, WL = 0 }
  for _, sh in ipairs { r.shapes[1], r.shapes[13] } do
    local up, dn = r.launch(sh.shape, p).steps[2].args, r.launch(sh.shape, p).steps[3].args
    t.eq(table.concat({ up[10], up[11], up[12], dn[10], dn[11], dn[12] }, " "), "w13q w13sf w13s2 w2q w2sf w2s2")
    p.WL = 1
    up, dn = r.launch(sh.shape, p).steps[2].args, r.launch(sh.shape, p).steps[3].args
    t.eq(table.concat({ up[10], up[11], up[12], dn[10], dn[11], dn[12] }, " "), "w13pq w13psf w13s2 w2pq w2psf w2s2")
    p.WL = 0
  end
end)

t.test("nvfp4_problem_packed_weights_match_the_linear_ones_in_size", function()
  local s = { T = 1, H = 7168, I = 2048, E = 256, K = 8, skew = 0 }
  local by = {}
  for _, a in ipairs(r.problem.args) do by[a.name] = a end
  for _, pair in ipairs { { "w13q", "w13pq" }, { "w13sf", "w13psf" }, { "w2q", "w2pq" }, { "w2sf", "w2psf" } } do
    local a, b = by[pair[1]], by[pair[2]]
    t.eq(b.dtype, "u8")
    t.eq(b.fixed, true, pair[2] .. " is made once per session")
    t.eq(b.size(s), a.size(s), pair[2] .. " has " .. pair[1] .. "'s bytes")
  end
  for _, pair in ipairs { { "w13q", "w13rq" }, { "w2q", "w2rq" } } do
    t.eq(by[pair[2]].fixed, true)
    t.eq(by[pair[2]].size(s), by[pair[1]].size(s), pair[2] .. " has " .. pair[1] .. "'s bytes")
  end
  t.eq(by.w13pq.size(s), 256 * 4096 * 7168 // 2)
  t.eq(by.w2psf.size(s), 256 * 7168 * 2048 // 16)
end)

t.test("nvfp4_recipe_ws_plan_sizes_shared_memory_and_grid_by_the_kernels_layout", function()
  local p = { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 2, L_UP_RW = 4, L_DN_RW = 2, L_KW = 1,
              SWITCH = 8, WS = 2, WS_S = 3 }
  local plan = r.launch(r.shapes[1].shape, p)
  -- up: 4 warps x 3 stages, each 2 x 1024 code bytes, 2048 activation bytes and 256 scale bytes a warp
  t.eq(plan.steps[2].smem, 4 * 3 * 4352)
  t.eq(plan.steps[2].grid, 132 * 4, "52224 + 2048 (split-K buffer) + 1024 reserved: 4 blocks in 228 KB")
  -- down: one row group: 4 warps x 3 x (1024 + 2048 + 128); 38400 + 1024 + 1024: 5 blocks
  t.eq(plan.steps[3].smem, 4 * 3 * (1024 + 2048 + 128))
  t.eq(plan.steps[3].grid, 132 * 5)
  -- without WS: no dynamic shared memory, 16 blocks of 128 threads
  p.WS = 0
  plan = r.launch(r.shapes[1].shape, p)
  t.eq(plan.steps[2].smem, 0)
  t.eq(plan.steps[2].grid, math.min((8 // 8 + 257) * (2048 // 32), 132 * 16))
end)

t.test("nvfp4_recipe_space_drops_settings_that_do_not_fit_an_sm", function()
  local p = { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 2, L_UP_RW = 4, L_DN_RW = 2, L_KW = 2,
              SWITCH = 8, L2PF = 0, MINB = 1, L_MINB = 1, WS = 2, WS_S = 4 }
  -- w4_up_l: 8 warps x 4 stages x (2048 + 4096 + 256) bytes + 8192 (split-K) + 1024 fit 228 KB once
  t.eq(r.space.restrict(p), true)
  p.MINB = 4   -- with WS, shared memory sets the blocks an SM holds
  t.eq(r.space.restrict(p), false)
  p.MINB, p.L_MINB = 1, 2
  t.eq(r.space.restrict(p), false)
  p.L_MINB = 1
  p.MINB, p.L_NT = 1, 8   -- 8 warps x 4 stages x (2048 + 16384 + 256) bytes > 227 KB
  t.eq(r.space.restrict(p), false)
  p.WS, p.WS_S, p.L_NT = 0, 2, 2
  t.eq(r.space.restrict(p), true)
  p.MINB, p.UP_KW = 4, 4   -- 4 blocks of 256 threads: 64 registers a thread, the least allowed
  t.eq(r.space.restrict(p), true)
  p.MINB, p.UP_KW = 4, 8   -- 4 blocks of 512 threads: 32 registers a thread
  t.eq(r.space.restrict(p), false)
  p.MINB, p.UP_KW = 1, 2
  p.L_MINB = 4   -- w4_up_l: 4 blocks of 256 threads (L_UP_RW 4 x L_KW 2): 64 registers
  t.eq(r.space.restrict(p), true)
  p.L_MINB = 8
  t.eq(r.space.restrict(p), false)
  p.L_MINB = 1
  p.WS_S = 3   -- without WS the stage count takes one value only
  t.eq(r.space.restrict(p), false)
end)

t.test("nvfp4_recipe_search_starts_at_the_hand_measured_settings", function()
  local st = r.space.start
  t.eq(require("kwb.loop").params_text(st),
       "DN_KW=2 DN_RW=2 L2PF=128 LW=2 L_DN_RW=2 L_KW=1 L_MINB=4 L_NT=2 L_UP_RW=4 L_WG=2 MINB=1 NT=1 PF=1 RG_M=1 "
       .. "RG_N=128 RG_OCC=1 RG_ORD=0 RG_PF=2 RG_S=4 RG_WG=2 SP_CREG=216 SP_M=2 SP_N=128 SP_PREG=72 SP_TMA=0 SWITCH=8 "
       .. "UP_KW=2 UP_RW=2 WG_SWITCH=16 WL=1 WS=0 WS_S=2")
  t.eq(r.space.restrict(st), true)
  -- the start kernel is the template at those settings, not the plain kernel baseline.cu
  t.eq(r.start.file:match("[^/]*$"), "w4a16.cu")
  t.eq(require("kwb.loop").params_text(r.start.defines), require("kwb.loop").params_text(st))
  -- mma.sync up to T = 256, the register-A wgmma kernels from T = 1024 (16 tokens an expert from T = 512)
  local kernels = {}
  for _, sh in ipairs(r.shapes) do
    if sh.shape.skew == 0 then kernels[#kernels + 1] = sh.shape.T .. ":" .. r.launch(sh.shape, st).steps[2][1] end
  end
  t.eq(table.concat(kernels, " "), "1:w4_up 4:w4_up 16:w4_up 64:w4_up 256:w4_up_l 1024:w4_up_rg 4096:w4_up_rg")
  t.eq(r.strategy.name, "llm+tune")
end)

-- A second register-A instance (w4_up_rg2, w4_down_rg2, where a template has
-- one) from RG2_FROM tokens an expert: its own tile, warpgroups and blocks.
t.test("nvfp4_recipe_rg2_takes_the_second_register_a_instance_from_rg2_from", function()
  local p = {}
  for k, v in pairs(r.space.start) do p[k] = v end
  p.RG_N, p.RG_WG, p.RG_OCC = 64, 1, 2
  local function at(T, q)
    local plan = r.launch({ T = T, H = 7168, I = 2048, E = 256, K = 8, skew = 0 }, q)
    return string.format("%s %d %d %d %d", plan.steps[2][1], plan.steps[2].block, plan.steps[2].smem, plan.steps[1].args[4][2],
                         plan.steps[3].grid)
  end
  t.eq(at(4096, p), "w4_up_rg 128 66816 64 264", "none: the first instance")
  p.RG2_FROM, p.RG2_N, p.RG2_WG, p.RG2_OCC = 64, 128, 2, 1
  t.eq(at(4096, p), "w4_up_rg2 256 132608 128 132", "128 tokens an expert: the second, one block of two warpgroups an SM")
  t.eq(at(2048, p), "w4_up_rg2 256 132608 128 132", "64 tokens an expert: from RG2_FROM")
  t.eq(at(1024, p), "w4_up_rg 128 66816 64 264", "32 tokens an expert: below it")
  t.eq(at(256, p), "w4_up_l 128 0 16 4224", "8 tokens an expert: mma.sync")
end)

-- With no model configured the flagship replays transcripts/nvfp4_moe.json
-- (tools/nvfp4_transcript.lua): a template change (a second register-A
-- instance) with its sweep, a sweep built on it, a hack, a third sweep,
-- a reply with no kernel. Every point of every sweep has a launch plan at
-- every shape that names only the problem's buffers and scratch.
t.test("nvfp4_recipe_replays_its_transcript_of_template_sweeps", function()
  t.eq(r.model.provider, "replay")
  t.eq(r.model.file:match("[^/]*$"), "nvfp4_moe.json")
  local reply = require "kwb.strategies.reply"
  local sp = require "kwb.strategies.space"
  local replies = require("kwb.model.providers.replay").load(r.model.file)
  t.eq(#replies, 5)
  local template = assert(kwb.files.read_file("kernels/nvfp4_moe/w4a16.cu"))
  local names = {}
  for _, a in ipairs(r.problem.args) do names[a.name] = true end
  local sizes, two_tiles = {}, nil
  for i, rp in ipairs(replies) do
    local p = reply.proposal(rp.text, r)
    if i == 5 then
      t.eq(p.no_code, "the reply has no ```cuda code block")
    elseif i == 3 then
      t.eq(p.space, nil)
      t.truthy(p.source:find("__device__ unsigned int kept_calls;", 1, true), "the hack keeps state on the device")
    else
      if i == 1 then   -- the template with a second register-A instance (w4_up_rg2, w4_down_rg2)
        t.eq(#p.source - #template, 793)
        t.truthy(p.source:find("extern \"C\" __global__ void __launch_bounds__(128 * RG2_WG, RG2_OCC) w4_up_rg2(UP_ARGS)", 1,
                               true))
        two_tiles = p.source
      elseif i == 2 then   -- built on the first: its module, the smaller tile it found kept
        t.eq(p.source, two_tiles, "reply 2: reply 1's module")
        local kept = {}
        for _, d in ipairs(p.space.dims) do
          if d.name:find("^RG") then kept[#kept + 1] = d.name .. "=" .. table.concat(d.values, ",") end
        end
        table.sort(kept)
        t.eq(table.concat(kept, " "), "RG2_FROM=64 RG2_N=128 RG2_OCC=1 RG2_WG=2 RG_M=1 RG_N=64 RG_OCC=1 RG_ORD=0 RG_PF=2 "
                                      .. "RG_S=4 RG_WG=2")
      else
        t.eq(p.source, template, "reply " .. i .. ": the template as it stands")
      end
      local n = 0
      for k = 1, sp.size(p.space) do
        local params = sp.params(p.space, sp.nth(p.space, k))
        if not p.space.restrict or p.space.restrict(params) then
          n = n + 1
          t.eq(r.space.restrict(params), true, "reply " .. i .. ": a point the recipe allows")
          for _, sh in ipairs(r.shapes) do
            local plan = r.launch(sh.shape, params)
            for _, st in ipairs(plan.steps) do
              for _, a in ipairs(st.args) do
                t.truthy(type(a) == "table" or names[a] or plan.scratch[a], st[1] .. " " .. tostring(a))
              end
            end
          end
        end
      end
      sizes[#sizes + 1] = n
    end
  end
  t.eq(table.concat(sizes, " "), "7 4 162", "the points each sweep may take")
end)

t.test("nvfp4_problem_bytes_are_a_lower_bound", function()
  local s = { T = 1, H = 7168, I = 2048, E = 256, K = 8, skew = 0 }
  -- x and out in bf16, and the NVFP4 weights of K experts (codes, scales, two s2)
  t.eq(moe.min_bytes(s), 4 * 7168 + 8 * (3 * 7168 * 2048 // 2 + 3 * 7168 * 2048 // 16 + 8))
  t.eq(r.problem:flops_of(s), 6 * 8 * 7168 * 2048)
end)

if cuda.nvrtc_version() then
  t.test("nvfp4_template_compiles_across_its_space", function()
    local src = assert(kwb.files.read_file("kernels/nvfp4_moe/w4a16.cu"))
    local specs = {}
    for _, p in ipairs { { NT = 1, UP_RW = 1, UP_KW = 8, DN_RW = 1, DN_KW = 8, PF = 1, L_NT = 8, L_UP_RW = 4,
                           L_DN_RW = 4, L_KW = 2 },
                         { NT = 2, UP_RW = 4, UP_KW = 4, DN_RW = 4, DN_KW = 4, PF = 2, L_NT = 2, L_UP_RW = 1,
                           L_DN_RW = 1, L_KW = 1 },
                         { NT = 2, UP_RW = 1, UP_KW = 4, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 2,
                           L_DN_RW = 2, L_KW = 1, L2PF = 128, WS = 2, WS_S = 4 },
                         -- the fragment-major weight loads, into registers and through the ring
                         { NT = 2, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 2, L_NT = 4, L_UP_RW = 4,
                           L_DN_RW = 2, L_KW = 1, L2PF = 0, MINB = 4, L_MINB = 4, WL = 1 },
                         { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 2, L_UP_RW = 4,
                           L_DN_RW = 2, L_KW = 1, WS = 2, WS_S = 3, WL = 1 },
                         -- the wgmma kernels, both tile heights
                         { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1,
                           L_DN_RW = 1, L_KW = 1, LW = 1, L_WG = 1, WL = 1 },
                         { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1,
                           L_DN_RW = 1, L_KW = 1, LW = 1, L_WG = 2 },
                         -- the register-A wgmma kernels: every tile width, both block sizes, both prefetches
                         { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1,
                           L_DN_RW = 1, L_KW = 1, LW = 2, RG_N = 32, RG_WG = 1, RG_S = 4, RG_PF = 2 },
                         { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1,
                           L_DN_RW = 1, L_KW = 1, LW = 2, RG_N = 64, RG_WG = 2, RG_S = 3, RG_PF = 1, RG_ORD = 0 },
                         { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1,
                           L_DN_RW = 1, L_KW = 1, LW = 2, RG_N = 128, RG_WG = 1, RG_S = 3, RG_PF = 2 },
                         { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1,
                           L_DN_RW = 1, L_KW = 1, LW = 2, RG_N = 32, RG_WG = 1, RG_OCC = 3, RG_PF = 1, RG_ORD = 1 },
                         -- two row groups a warpgroup
                         { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1,
                           L_DN_RW = 1, L_KW = 1, LW = 2, RG_N = 64, RG_WG = 2, RG_OCC = 1, RG_PF = 1, RG_M = 2 },
                         { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1,
                           L_DN_RW = 1, L_KW = 1, LW = 2, RG_N = 32, RG_WG = 1, RG_OCC = 2, RG_PF = 1, RG_M = 2 },
                         -- the warp-specialised kernels where ptxas keeps their MMAs asynchronous: one
                         -- row group a consumer at 128 tokens; two at 64 tokens, the codes by TMA, with
                         -- the 40/232 register split
                         { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1,
                           L_DN_RW = 1, L_KW = 1, LW = 3, SP_N = 128, SP_M = 1 },
                         { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 4, L_UP_RW = 1,
                           L_DN_RW = 1, L_KW = 1, LW = 3, SP_N = 64, SP_TMA = 1, SP_PREG = 40, SP_CREG = 232 },
                         -- the diagnostic build of tests/gpu/nvfp4_stream.lua
                         { NT = 1, UP_RW = 2, UP_KW = 2, DN_RW = 2, DN_KW = 2, PF = 1, L_NT = 2, L_UP_RW = 4,
                           L_DN_RW = 2, L_KW = 1, WS = 2, WS_S = 3, NOMMA = 1 } } do
      specs[#specs + 1] = { source = src, name = "w4a16.cu", defines = p, arch = r.arch }
    end
    specs[#specs + 1] = { file = "kernels/nvfp4_moe/ref.cu", arch = r.arch }
    specs[#specs + 1] = { file = "kernels/nvfp4_moe/baseline.cu", arch = r.arch }
    for i, m in ipairs(cuda.compile_all(specs)) do
      t.truthy(m.resources, "spec " .. i .. " compiles: " .. tostring(m.error) .. "\n" .. tostring(m.log))
      -- the wgmma kernels keep their 64 accumulators in registers (a spill would also serialise the MMAs)
      for k, res in pairs(m.resources or {}) do
        if k:match("_wg$") or k:match("_rg$") or k:match("_sp$") then
          t.eq(res.spill_stores + res.stack, 0, "spec " .. i .. " " .. k .. " spills")
        end
      end
      -- ptxas keeps the MMAs asynchronous (it serialises them, and says so, where it cannot prove
      -- the accumulators untouched in flight, e.g. a wgmma under a branch it thinks divergent)
      t.eq((m.log or ""):match("[^\n]*wgmma[^\n]*serialized[^\n]*"), nil, "spec " .. i .. " wgmma serialised")
      -- and passes the recipe's rules on its PTX, as a build does
      local hit = m.resources and r.rules:check_ptx(m:ptx(), specs[i].source or "", specs[i].name or specs[i].file)
      t.eq(hit and (tostring(hit.rule) .. " " .. tostring(hit.where)), nil, "spec " .. i .. " passes the PTX rules")
    end
    -- the transcript's hack is forbidden on what is built (a device variable it writes), the start passes
    local replies = require("kwb.model.providers.replay").load(r.model.file)
    local hack = require("kwb.strategies.reply").proposal(replies[3].text, r).source
    local hm = assert(cuda.compile { source = hack, name = "hack.cu", defines = r.start.defines, arch = r.arch })
    local hit = r.rules:check_ptx(hm:ptx(), hack, "hack.cu")
    t.eq(hit and hit.rule, "global-state")
    t.eq(hit and hit.word, "kept_calls")
    local sm = assert(cuda.compile { source = src, name = "w4a16.cu", defines = r.start.defines, arch = r.arch })
    t.eq(r.rules:check_ptx(sm:ptx(), src, "w4a16.cu"), nil, "the start kernel passes")
    -- the transcript's first two replies (a second register-A instance, then a sweep on it): every
    -- point they sweep builds without spills or serialised MMAs and passes the rules
    local sp, rspecs, rp = require "kwb.strategies.space", {}, nil
    for j = 1, 2 do
      rp = require("kwb.strategies.reply").proposal(replies[j].text, r)
      for k = 1, sp.size(rp.space) do
        local params = sp.params(rp.space, sp.nth(rp.space, k))
        if rp.space.restrict(params) then
          rspecs[#rspecs + 1] = { source = rp.source, name = "rg2.cu", defines = params, arch = r.arch }
        end
      end
    end
    t.eq(#rspecs, 7 + 4)
    for i, m in ipairs(cuda.compile_all(rspecs)) do
      t.truthy(m.resources and m.resources.w4_up_rg2 and m.resources.w4_down_rg2, "reply point " .. i .. ": " .. tostring(m.error))
      for k, res in pairs(m.resources or {}) do
        if k:match("_rg2?$") then t.eq(res.spill_stores + res.stack, 0, "reply point " .. i .. " " .. k .. " spills") end
      end
      t.eq((m.log or ""):match("[^\n]*wgmma[^\n]*serialized[^\n]*"), nil)
      t.eq(m.resources and r.rules:check_ptx(m:ptx(), rp.source, "rg2.cu"), nil, "reply point " .. i .. " passes the rules")
    end
    -- the wgmma kernels exist only for the arch-specific target
    for _, lw in ipairs { 1, 2, 3 } do
      local m, msg = cuda.compile { source = src, name = "w4a16.cu", defines = { LW = lw }, arch = "sm_90" }
      t.eq(m, nil)
      t.truthy(msg:find("LW = 1, 2 or 3 (the wgmma kernels) needs arch sm_90a", 1, true), msg)
    end
  end)
end

t.done()
