-- kwb/cli/import.lua: `kwb import kernelbench FILE.py [-o RECIPE.lua]`: a
-- recipe from a PyTorch module in KernelBench's format (class Model,
-- get_inputs, get_init_inputs), or a plain function of the file (--fn).
-- The reference process (kwb.problems.torch) tries the module: its inputs'
-- and outputs' dtypes and shapes, which dimensions may vary (a dimension
-- tied to a weight stays fixed), the weights. The recipe it writes carries
-- that spec (no process probes it again at load), the candidate's
-- signature, the shapes to time (the file's example and one of half its
-- size in every variable; unannounced shapes are verified as for every
-- recipe), tolerances by the outputs' dtypes and a start kernel: a plain one
-- kwb writes (python/kwb_start.py) or the one --start names, verified
-- against the module before anything is written.
local core = require "kwb.core"
local files = require "kwb.base.files"
local pretty = require "kwb.pretty"
local torch = require "kwb.problems.torch"

local M = {}

local usage = "usage: " .. require("kwb.help").command("import").usage

local function cident(s) return (s:gsub("[^%w_]", "_"):gsub("^(%d)", "_%1")) end

-- The path of `to` relative to the folder `from` (both absolute).
local function relative(to, from)
  local a, b = {}, {}
  for p in to:gmatch("[^/]+") do a[#a + 1] = p end
  for p in from:gmatch("[^/]+") do b[#b + 1] = p end
  local i = 1
  while i <= #a and i <= #b and a[i] == b[i] do i = i + 1 end
  local parts = {}
  for _ = i, #b do parts[#parts + 1] = ".." end
  for j = i, #a do parts[#parts + 1] = a[j] end
  return table.concat(parts, "/")
end

local absolute = files.absolute

-- A path as the user would write it: from here where it lies below here.
local function shown(p)
  local here = core.cwd() .. "/"
  return p:sub(1, #here) == here and p:sub(#here + 1) or p
end

-- A folder there? (one opens, and fails to read)
local function is_dir(p)
  local f = io.open(p, "rb")
  if not f then return false end
  local got = f:read(0)
  f:close()
  return got == nil
end

-- The shapes to time: the file's example, and half of it in every variable.
local function shapes_of(spec)
  local full, half = {}, {}
  for _, v in ipairs(spec.vars) do full[v.name], half[v.name] = v.value, math.max(1, v.value // 2) end
  if #spec.vars == 0 then return { {} } end
  return { half, full }
end

local function shape_literal(spec, s)
  local parts = {}
  for _, v in ipairs(spec.vars) do parts[#parts + 1] = string.format("%s = %d", v.name, s[v.name]) end
  return "{ " .. table.concat(parts, ", ") .. " }"
end

-- The plain start kernel kwb writes (python/kwb_start.py), or nil and why.
local function write_start(py, file, spec, lang, entry)
  local ok, src = pcall(core.python_source, "kwb_start")
  if not ok then return nil, "this kwb has no start kernel writer" end
  local tmp = os.tmpname()
  local f = assert(io.open(tmp, "w"))
  f:write(torch.spec_json(spec))
  f:close()
  local r = core.exec({ py, "-c", src, file, tmp, lang, entry }, { timeout = 300 })
  os.remove(tmp)
  if r and r.status == 0 then return r.out end
  local why = r and ((r.err:match("([^\n]+)\n?$")) or ("exit " .. r.status)) or "it did not run"
  return nil, (why:gsub("^kwb_start: ", ""):gsub("; write a start kernel by hand$", ""))
end

local function recipe_text(o)
  local sp = o.spec
  local shapes = {}
  for i, s in ipairs(shapes_of(sp)) do shapes[i] = shape_literal(sp, s) end
  local desc = {}
  for _, group in ipairs { { "input", sp.inputs }, { "weight", sp.weights }, { "output", sp.outputs } } do
    for _, e in ipairs(group[2]) do
      local dims = {}
      for i, d in ipairs(e.dims) do dims[i] = tostring(d) end
      desc[#desc + 1] = string.format("--   %-7s %s %s[%s]", group[1], e.name, e.dtype, table.concat(dims, ", "))
    end
  end
  local spec_text = pretty.format(sp, { width = 100, items = 1 << 30, depth = 64, string = 1 << 30 })
  spec_text = spec_text:gsub("\n", "\n    ")
  return table.concat({
    string.format("-- %s: written by `kwb import kernelbench %s` from the PyTorch module in that file,", o.recipe_name_shown, o.file_shown),
    "-- judged by its reference process (kwb.problems.torch). Candidates export",
    "--   " .. torch.prototype(sp, o.entry),
    table.concat(desc, "\n"),
    string.format("-- (the spec below is what the process found by trying the module: its example shapes, which"),
    "-- dimensions may vary; a dimension tied to a weight stays fixed)",
    "--   kwb " .. o.recipe_name_shown,
    "return kwb.recipe {",
    string.format("  name     = %q,", o.name),
    string.format("  backend  = %q,", o.backend),
    "  problem  = require(\"kwb.problems.torch\") {",
    string.format("    file = %q, entry = %q,", o.rel_file, o.entry) .. (o.fn and string.format(" fn = %q,", o.fn) or ""),
    string.format("    tolerance = { atol = %.3g, rtol = %.3g },   -- %s: rtol %g, atol that part of the example output's "
                  .. "scale (its RMS, or its median magnitude where smaller)", o.tol.atol, o.tol.rtol, sp.outputs[1].dtype,
                  o.tol.rtol),
    "    spec = " .. spec_text .. ",",
    "  },",
    "  shapes   = { " .. table.concat(shapes, ", ") .. " },",
    string.format("  start    = %q,", o.rel_start),
    string.format("  context  = { %q },", o.rel_file),
    "  -- the model: the one KWB_MODEL and its friends name (README: \"Pointing a recipe at a model\"); with",
    "  -- none, a run measures the start kernel (and its baselines) and proposes nothing",
    "  model    = kwb.model.from_env(),",
    "  strategy = kwb.model.from_env() and \"llm\" or require(\"kwb.strategies.list\")({}, \"start only\"),",
    "  budget   = { candidates = 20, minutes = 20, timeout = 10 },",
    "}",
  }, "\n") .. "\n"
end

function M.main(...)
  local argv = { ... }
  for i, a in ipairs(argv) do if a == "-o" then argv[i] = "--output" end end   -- (-o: the one short option)
  local pos, opts = require("kwb.base.args").parse(argv, { o = "value", output = "value", backend = "value",
                                                         start = "value", name = "value", fn = "value",
                                                         python = "value", force = "flag", help = "flag" })
  if pos and (opts.help or pos[1] == "-h") then
    io.write(require("kwb.help").command_help("import"))
    return 0
  end
  if not pos or #pos ~= 2 or pos[1] ~= "kernelbench" then
    io.stderr:write("kwb import: ", pos and "it takes the word kernelbench and FILE.py" or opts, "\n", usage, "\n")
    return 2
  end
  local ok, res = pcall(M.import, pos[2], opts)
  if not ok then
    io.stderr:write("kwb import: ", tostring(res), "\n")
    return 1
  end
  print(res)
  return 0
end

-- import(file, opts) -> the line saying what was written; raises with a sentence.
function M.import(file, opts)
  if not files.read_file(file) then error("cannot read " .. file, 0) end
  if not file:match("%.py$") then error(file .. ": a KernelBench problem is a Python file (.py)", 0) end
  local name = cident(opts.name or (file:match("([^/]+)%.py$")))
  local out = opts.o or opts.output or (is_dir("recipes") and ("recipes/" .. name .. ".lua"))
              or (name .. ".lua")
  if not out:match("%.lua$") then error("-o " .. out .. ": a recipe is a .lua file", 0) end
  local backend = opts.backend or "host"
  if backend ~= "host" and backend ~= "cuda" then error("--backend " .. backend .. ": host or cuda", 0) end
  local ext = backend == "cuda" and ".cu" or ".c"
  local out_abs, file_abs = absolute(out), absolute(file)
  local out_dir = out_abs:match("^(.*)/[^/]*$")
  local start_abs = opts.start and absolute(opts.start) or (out_dir .. "/" .. name .. "_start" .. ext)
  if not opts.force then
    for _, p in ipairs { out_abs, not opts.start and start_abs or nil } do
      if files.read_file(p) then error(p .. " is there already (--force writes over it)", 0) end
    end
  end
  local py, about = torch.python(opts.python)
  local spec = torch.probe { file = file_abs, fn = opts.fn, python = py, what = name .. " (" .. file .. ")",
                             device = backend == "cuda" and "cuda" or "cpu" }
  local entry = name
  -- the start kernel: the one named, or a plain one kwb writes
  if not opts.start then
    local src, why = write_start(py, file_abs, spec, backend == "cuda" and "cuda" or "c", entry)
    if not src then
      error(string.format("no start kernel: %s; write one with the signature\n  %s\nand give it with --start FILE",
                          why, torch.prototype(spec, entry)), 0)
    end
    local f = assert(io.open(start_abs, "w"))
    f:write(src)
    f:close()
  elseif not files.read_file(start_abs) then
    error("--start " .. opts.start .. ": cannot read it", 0)
  end
  local o = { spec = spec, name = name, entry = entry, fn = opts.fn, backend = backend, file_shown = file,
              recipe_name_shown = out, rel_file = relative(file_abs, out_dir), rel_start = relative(start_abs, out_dir) }
  o.tol = torch.tolerance(spec)
  local text = recipe_text(o)
  -- verified before it is written: the recipe loaded from a file beside
  -- where it goes (its paths resolve as they will), the start kernel
  -- measured against the module at every shape
  local tmp = out_dir .. "/." .. name .. ".import.lua"
  local f, err = io.open(tmp, "w")
  if not f then error("cannot write " .. tmp .. ": " .. tostring(err), 0) end
  f:write(text)
  f:close()
  local ok, verdict = pcall(function()
    local recipe = require("kwb.load").load(tmp)
    local measure = require "kwb.measure"
    local h = measure.harness(recipe)
    local cand = require("kwb.loop.candidate").make({ recipe = recipe, ids = {} }, recipe.start, "start")
    local res = measure.blank(cand, 1)
    h:measure(cand, res, { start = true })
    recipe.problem.torch.close()
    return res
  end)
  if not ok or verdict.outcome then
    os.remove(tmp)
    if not opts.start then os.remove(start_abs) end
    if not ok then error(tostring(verdict), 0) end
    error(string.format("the start kernel%s is %s: %s; nothing written",
                        opts.start and (" " .. opts.start) or " kwb wrote", verdict.outcome, tostring(verdict.reason)), 0)
  end
  local moved, why = os.rename(tmp, out_abs)
  if not moved then os.remove(tmp); error("cannot write " .. out .. ": " .. tostring(why), 0) end
  local vars = {}
  for _, v in ipairs(spec.vars) do vars[#vars + 1] = v.name end
  return string.format("wrote %s: problem %s from %s (%s), varying %s; start kernel %s verified at %d shapes (%s)\n"
                       .. "candidates export  %s", out, name, file, about,
                       #vars > 0 and table.concat(vars, ", ") or "nothing (every dimension fixed)",
                       shown(start_abs), #shapes_of(spec), backend, torch.prototype(spec, entry))
end

return M
