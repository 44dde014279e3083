-- kwb/cli/new.lua: `kwb new problem NAME [DIR]`: a problem of your own to
-- start from, in a folder of its own, that runs as written: the problem
-- module (every field of kwb.problem.define in use, each said what it is
-- for), a recipe that requires it from beside itself, a plain start kernel
-- and a template with one parameter. It computes y = a * x + b over n f32
-- elements; edit the arguments, the reference and the tolerance into yours.
local core = require "kwb.core"

local M = {}

local usage = "usage: " .. require("kwb.help").command("new").usage

local problem_text = [[
-- NAME_problem.lua: the problem NAME: what a kernel computes, whatever the
-- backend (kwb.problem.define; README: "Writing a problem"). The recipe
-- beside it takes it with `require "NAME_problem"`.
--
-- Candidates export  void NAME(int n, float a, const float *x, const float *b, float *y).
local problem = require "kwb.problem"

-- The trusted reference, in C: the entry point's arguments, in the same
-- order. It runs in the judge's process, never beside a candidate.
local reference = [=[
void NAME_ref(int n, float a, const float *x, const float *b, float *y) {
    for (int i = 0; i < n; i++) y[i] = a * x[i] + b[i];
}
]=]

return problem.define {
  name = "NAME",
  description = "y = a * x + b over n f32 elements",
  vars = { "n" },            -- the shape variables: a shape is { n = ... }
  fn = "NAME",               -- the entry point every candidate exports
  args = {                   -- the entry point's arguments, in order
    { "n", "i32", value = "n" },                      -- a scalar: an expression of the shape
    { "a", "f32", value = "1.5" },                    -- a scalar constant
    { "x", "f32", shape = "n", role = "in", init = { "normal", 0, 1 } },     -- an input, drawn afresh for every check
    { "b", "f32", shape = "n", role = "in", init = { "uniform", -1, 1 } },
    { "y", "f32", shape = "n", role = "out" },        -- an output: poisoned before every call, guarded on both sides
  },
  reference = { source = reference, fn = "NAME_ref" },   -- or { file = "NAME_ref.c" }, or a Lua function(bufs, shape)
  tolerance = { atol = 1e-6, rtol = 1e-6 },   -- |y - ref| <= atol + rtol * |ref| everywhere (or { rel_l2 = })
  bytes = "12 * n",          -- what a shape moves (the floor a time is checked against)
  flops = "2 * n",
  -- on the cuda backend: the grid and block of a launch, from the shape and the candidate's parameters
  launch = function(shape, params)
    local block = params.BLOCK or 256
    return { grid = { (shape.n + block - 1) // block }, block = { block } }
  end,
}
]]

local recipe_text = [[
-- NAME.lua: a recipe for the problem beside it (NAME_problem.lua): its
-- plain start kernel, and a template whose U a grid search tries.
--   kwb NAME.lua
return kwb.recipe {
  name     = "NAME",
  problem  = require "NAME_problem",
  shapes   = { n = { 1000, 1 << 20 } },   -- timed; shapes derived from them are verified, never timed
  start    = "NAME_start.c",              -- what every speed-up is against
  template = "NAME_unrolled.c",
  space    = { U = { 2, 4, 8 } },
  strategy = "grid",
  flags    = { "-O2" },
  budget   = { candidates = 3, minutes = 2, timeout = 5 },
}
]]

local start_text = [[
/* NAME_start.c: y = a * x + b, one element a step */
void NAME(int n, float a, const float *x, const float *b, float *y) {
    for (int i = 0; i < n; i++) y[i] = a * x[i] + b[i];
}
]]

local template_text = [[
/* NAME_unrolled.c: y = a * x + b, U elements a step (U: the recipe's space) */
#ifndef U
#define U 1
#endif
void NAME(int n, float a, const float *restrict x, const float *restrict b, float *restrict y) {
    int i = 0;
    for (; i + U <= n; i += U)
        for (int u = 0; u < U; u++) y[i + u] = a * x[i + u] + b[i + u];
    for (; i < n; i++) y[i] = a * x[i] + b[i];
}
]]

-- problem(name, dir) -> the files written (the folder is made; none is written over)
function M.problem(name, dir)
  if not name:match("^[%a_][%w_]*$") then error("a problem's name is a C identifier, not '" .. name .. "'", 0) end
  local files = { { name .. "_problem.lua", problem_text }, { name .. ".lua", recipe_text },
                  { name .. "_start.c", start_text }, { name .. "_unrolled.c", template_text } }
  for _, f in ipairs(files) do
    local h = io.open(dir .. "/" .. f[1], "rb")
    if h then h:close(); error(dir .. "/" .. f[1] .. " is there already", 0) end
  end
  local ok, why = core.mkdirs(dir)
  if not ok then error("cannot make " .. dir .. ": " .. tostring(why), 0) end
  local written = {}
  for _, f in ipairs(files) do
    local h, err = io.open(dir .. "/" .. f[1], "w")
    if not h then error("cannot write " .. dir .. "/" .. f[1] .. ": " .. tostring(err), 0) end
    h:write((f[2]:gsub("NAME", name)))
    h:close()
    written[#written + 1] = f[1]
  end
  return written
end

function M.main(...)
  local pos, opts = require("kwb.base.args").parse({ ... }, { help = "flag" })
  if pos and (opts.help or pos[1] == "-h") then
    io.write(require("kwb.help").command_help("new"))
    return 0
  end
  if not pos or pos[1] ~= "problem" or #pos < 2 or #pos > 3 then
    io.stderr:write("kwb new: ", pos and "it takes the word problem, a NAME and a folder" or opts, "\n", usage, "\n")
    return 2
  end
  local name, dir = pos[2], pos[3] or pos[2]
  local ok, res = pcall(M.problem, name, dir)
  if not ok then
    io.stderr:write("kwb new: ", tostring(res), "\n")
    return 1
  end
  print(string.format("wrote %s/: %s (the problem: edit its arguments, reference and tolerance), %s (the recipe), "
                      .. "%s (the start kernel), %s (a template)\nrun it: kwb %s/%s.lua", dir, res[1], res[2], res[3],
                      res[4], dir, name))
  return 0
end

return M
