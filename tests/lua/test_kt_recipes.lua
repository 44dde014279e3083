-- tests/lua/test_kt_recipes.lua: recipes/kt_matmul.lua and recipes/kt_vecadd.lua,
-- Kernel Tuner's matmul and vector_add example spaces, without a GPU: the
-- settings each space admits, their launch plans, and (where NVRTC is present)
-- that exactly the matmul settings over the static shared-memory limit fail to
-- build while the others build and pass the recipe's rules.
local t = require "t"
local cuda = require "kwb.cuda"
local space = require "kwb.strategies.space"

local mm = kwb.load("recipes/kt_matmul.lua")
local va = kwb.load("recipes/kt_vecadd.lua")

-- Every point of a recipe's space its restriction admits, in the grid strategy's order.
local function points(r)
  local list = {}
  for i = 1, space.size(r.space) do
    local p = space.params(r.space, space.nth(r.space, i))
    if not r.space.restrict or r.space.restrict(p) then list[#list + 1] = p end
  end
  return list
end

t.test("kt_matmul_space_has_kernel_tuners_40_settings", function()
  local list = points(mm)
  t.eq(#list, 40)
  local by_bsx = {}
  for _, p in ipairs(list) do
    t.eq(p.BSX, p.BSY * p.TSY, "BSX == BSY * TSY")
    t.truthy(p.BSX * p.BSY <= 1024, "at most 1024 threads")
    by_bsx[p.BSX] = (by_bsx[p.BSX] or 0) + 1
  end
  t.eq(by_bsx[16], 16)
  t.eq(by_bsx[32], 16)
  t.eq(by_bsx[64], 8, "BSY = 32 with TSY = 2 would be 2048 threads")
  t.eq(mm.budget.candidates, 40)
  t.eq(mm.strategy.name, "grid")
end)

t.test("kt_matmul_plans_cover_c_with_bsx_by_bsy_blocks", function()
  local s = mm.shapes[1].shape
  t.eq(mm.shapes[1].key, "M=4096,N=4096,K=4096")
  local plan = mm.launch(s, { BSX = 32, BSY = 8, TSX = 4, TSY = 4 })
  t.eq(table.concat(plan.grid, " ") .. " / " .. table.concat(plan.block, " "), "32 128 / 32 8")
  plan = mm.launch({ M = 4097, N = 100, K = 3 }, { BSX = 64, BSY = 16, TSX = 1, TSY = 4 })
  t.eq(table.concat(plan.grid, " ") .. " / " .. table.concat(plan.block, " "), "2 65 / 64 16")
end)

-- Each recipe starts from a point of its space (the same candidate as the
-- grid's, by id), so the grid meets it evaluated: the space's settings are
-- judged once each, none beside them.
t.test("kt_recipes_start_at_a_point_of_their_space", function()
  local real = package.loaded["kwb.cuda"]
  require("fake_cuda")()   -- (a session needs a device: the stand-in's, for this test alone)
  local _ <close> = setmetatable({}, { __close = function() package.loaded["kwb.cuda"] = real end })
  for _, r in ipairs { mm, va } do
    local s = r:session()
    local start = s:candidate(r.start)
    local same
    for _, p in ipairs(points(r)) do
      if s:candidate(p).id == start.id then same = require("kwb.loop").params_text(p) end
    end
    t.eq(same, r == mm and "BSX=32 BSY=8 TSX=4 TSY=4" or "BLOCK=128 ITEMS=1 VEC=1", r.name .. "'s start")
  end
end)

t.test("kt_vecadd_space_has_kernel_tuners_15_block_sizes", function()
  local list = points(va)
  t.eq(#list, 15)
  t.eq(list[1].BLOCK, 128)
  t.eq(list[15].BLOCK, 1024)
  t.eq(va.shapes[1].key, "n=10000000")
  local plan = va.launch(va.shapes[1].shape, { BLOCK = 192, VEC = 1, ITEMS = 1 })
  t.eq(plan.grid[1], 52084)
  t.eq(plan.block[1], 192)
end)

if cuda.nvrtc_version() then
  t.test("kt_matmul_builds_but_for_the_four_over_48_kb_of_static_shared_memory", function()
    local src = assert(kwb.files.read_file("kernels/cuda/kt_matmul.cu"))
    local list, specs = points(mm), {}
    for i, p in ipairs(list) do specs[i] = { source = src, name = "kt_matmul.cu", defines = p, arch = "sm_90" } end
    local failed = {}
    for i, m in ipairs(cuda.compile_all(specs)) do
      local p = list[i]
      local smem = 4 * p.BSX * p.BSX * (1 + p.TSX)
      if m.resources then
        t.truthy(smem <= 48 * 1024, require("kwb.loop").params_text(p) .. " built with " .. smem .. " bytes")
        local hit = mm.rules:check_ptx(m:ptx(), src, "kt_matmul.cu")
        t.eq(hit and hit.rule, nil, "passes the recipe's rules")
        t.eq(m.resources.kt_matmul.spill_stores, 0)
      else
        failed[#failed + 1] = require("kwb.loop").params_text(p)
        t.truthy(smem > 48 * 1024, failed[#failed] .. ": " .. tostring(m.error))
      end
    end
    t.eq(table.concat(failed, "; "), "BSX=64 BSY=8 TSX=4 TSY=8; BSX=64 BSY=8 TSX=8 TSY=8; "
         .. "BSX=64 BSY=16 TSX=4 TSY=4; BSX=64 BSY=16 TSX=8 TSY=4")
  end)

  -- compute-sanitizer's racecheck for the tiled SGEMM (shared memory), not
  -- for vector_add (none), read from the PTX as the loop builds it
  t.test("kt_racecheck_for_the_matmul_not_for_vecadd", function()
    local sanitize = require "kwb.checks.sanitize"
    local function tools(r, file, defines)
      local cand = { source = assert(kwb.files.read_file(file)), name = file:match("[^/]+$"), defines = defines }
      local ptx = sanitize.ptx_of({ flags = r.flags, arch = "sm_90" }, cand)
      t.truthy(ptx and ptx:find(".visible .entry", 1, true), file .. ": its PTX")
      return table.concat((sanitize.tools_for(ptx, false)), " ")
    end
    t.eq(tools(va, "kernels/cuda/vecadd.cu", { BLOCK = 256, VEC = 1, ITEMS = 1 }), "memcheck initcheck")
    t.eq(tools(mm, "kernels/cuda/kt_matmul.cu", { BSX = 32, BSY = 8, TSX = 4, TSY = 4 }), "memcheck racecheck initcheck")
  end)
end

t.done()
