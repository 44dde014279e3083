-- tests/gpu/sanitize_probe.lua: how long each compute-sanitizer tool takes on
-- one candidate of recipes/gpu_vecadd.lua (BLOCK 32, VEC 4), run from this
-- process rather than from a worker; its figures on stdout.
--   ./kwb tests/gpu/sanitize_probe.lua
local t = require "t"
local sanitize = require "kwb.sanitize"
local host = require "kwb.host"

local file = require("kwb.core").cwd() .. "/recipes/gpu_vecadd.lua"
local recipe = kwb.load(file)
local defines = { BLOCK = 32, VEC = 4, ITEMS = 1 }
local cand = { source = assert(host.read_file("kernels/cuda/vecadd.cu")), name = "vecadd.cu", defines = defines,
               params = defines }
local finding = sanitize.check(recipe, { recipe = file, cand = cand, seed = "1" })
for _, tool in ipairs(sanitize.tools) do
  print(string.format("figure sanitize_%s_vecadd = %.2f s", tool, finding.seconds[tool] or -1))
end
t.test("gpu_sanitize_a_right_vector_add_is_clean", function()
  t.eq(finding.tool, nil, tostring(finding.report))
end)
t.done()
