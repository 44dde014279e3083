-- kwb/insight/export.lua: `kwb export RECIPE DIR`: a per-shape dispatch from what the
-- cache knows of a recipe on one device kind. For each timed shape it picks
-- the verified candidate with the lowest median there, where that beats the
-- fallback beyond the noise (the slow end of its 95% interval under the fast
-- end of the fallback's); elsewhere the fallback stays: the start kernel, or
-- a library kernel named with --fallback (the caller's function). It writes
--   kernels/ID.c           each chosen source, its parameters as #defines, its
--                          entry point renamed R_ID (kwb.insight.export.c)
--   kernels/ID.cu, .cubin  (CUDA) each source, and its cubin built as the judge
--                          built it, its code the measured build's (export/cuda.lua)
--   dispatch.json          shapes to kernels, with the times measured
--   dispatch.h             kwb_dispatch_R(vars...) -> the kernel's name for a shape,
--                          and the dispatcher R(vars..., args...)
--   dispatch.c             the dispatcher (CUDA: the cubins, a loader, the geometry)
--   reference.c, dispatch_check.c
--                          the problem's C reference and the program checking
--                          every measured shape against it (export/check.lua);
--                          none where the reference is not C (README.txt says why)
--   Makefile, README.txt   lib<R>.a, `make check`
--   dispatch_test.c        a program printing the kernel for each shape given
-- Shapes between the measured ones take the recipe's `dispatch` rule:
-- "nearest" (the least sum of |log| distances over the variables, the
-- default) or "larger" (the smallest measured shape at least as large in
-- every variable, else the largest).
local cjson = require "cjson"
local core = require "kwb.core"
local files = require "kwb.base.files"
local C = require "kwb.insight.export.c"
local check = require "kwb.insight.export.check"
local export_cuda = require "kwb.insight.export.cuda"
local outcomes = require "kwb.base.outcomes"
local store = require "kwb.loop.store"

local M = {}


local write = C.write

-- The source as a file of its own: its parameters as #defines first (as the
-- build defined them: kwb.insight.export.c's defines).
local function standalone(source, params)
  local lines = C.defines(params)
  lines[#lines + 1] = source
  return table.concat(lines, "\n")
end

-- start_id(recipe) -> the id of the recipe's own start kernel (another
-- recipe of the problem may have left a start of its own in the context).
function M.start_id(recipe)
  return require("kwb.loop.candidate").make({ recipe = recipe, ids = {} }, recipe.start, "start").id
end

-- plan(recipe, results, fallback) -> the choice at each timed shape:
-- { key, shape, kernel = result | nil (the fallback), median, base }.
function M.plan(recipe, results)
  local start
  local sanitizing, own = store.sanitizing(recipe), M.start_id(recipe)
  for _, r in ipairs(results) do if r.outcome == "start" and (not own or r.id == own) then start = r end end
  if not start then
    error(string.format("recipe %s: the cache holds no start kernel's result on this device (run the recipe first)",
                        recipe.name), 0)
  end
  local choices = {}
  for i, sh in ipairs(recipe.shapes) do
    local base = start.shapes[sh.key]
    local pick
    for _, r in ipairs(results) do
      local t = r.shapes[sh.key]
      -- (where the recipe sanitizes, one that may be named a best: not a best whose put-off run
      -- never came, nor one never sanitized; kwb.loop.sanitizer's settle and sanitize_winners)
      if (r.outcome == "accepted" or r.outcome == "slower") and outcomes.may_be_best(r, sanitizing) and t
         and t.median and not t.partial
         and (not pick or t.median < pick.shapes[sh.key].median) then
        pick = r
      end
    end
    local t = pick and pick.shapes[sh.key]
    local beats = t and base and (t.ci_hi or t.median) < (base.ci_lo or base.median)
    choices[i] = { key = sh.key, shape = sh.shape, kernel = beats and pick or nil, median = beats and t.median or base.median,
                   base = base.median, start = start }
  end
  return choices
end

-- A chosen result as a kernel of the export: its source and parameters from
-- the cache, its C symbol (host), its cubin (CUDA: built again and checked
-- against the digest of the build measured on this device kind).
local function kernel_of(ex, r, st, ctx)
  local cuda = ex.backend == "cuda"
  local cand = assert(st.cache:get(r.id))
  local k = { name = r.short, id = r.id, source = cand.source, params = cand.params, start = r.outcome == "start",
              symbol = not cuda and (ex.name .. "_" .. r.short) or nil, source_name = r.name or "candidate.c",
              file = "kernels/" .. r.short .. (cuda and ".cu" or ".c") }
  if cuda then
    local b = st.cache:build(r.id, ctx.device, ctx.toolchain)
    k.cubin, k.code = export_cuda.build(ex, k, b and b.code)
    k.cubin_sha256 = core.sha256(k.cubin)
  end
  return k
end

-- The problem's C reference's source (reference.file: relative to the recipe's file).
local function reference_source(recipe)
  local r = recipe.problem.reference
  if r.source then return r.source end
  local file = r.file
  if recipe.dir and file:sub(1, 1) ~= "/" then file = recipe.dir .. "/" .. file end
  local src, err = files.read_file(file)
  if not src then error("the reference of " .. recipe.problem.name .. ": cannot read " .. tostring(err), 0) end
  return src
end

-- The export's description, which the file writers read (kwb.insight.export.c,
-- .check, .cuda): names, the kernels in the order first chosen, each shape's
-- choice with its kernel's index, C symbol and (CUDA) launch geometry.
local function describe(recipe, choices, opts, st, device)
  local fallback = opts.fallback
  if fallback ~= nil and not C.is_identifier(fallback) then
    error(string.format("--fallback: '%s' is not a C identifier (the fallback is the caller's function of the "
                        .. "problem's prototype, which the dispatcher calls by that name)", tostring(fallback)), 0)
  end
  local ctx = st:recipe_context(recipe, device)
  local ex = { recipe = recipe, problem = recipe.problem, device = device, backend = recipe.backend,
               rule = recipe.dispatch or "nearest", ident = C.cident(recipe.name), name = C.dispatcher(recipe),
               fallback = fallback, toolchain = ctx.toolchain, kernels = {}, choices = {}, vars = {},
               shape_names = C.shape_names(recipe.problem) }
  for _, v in ipairs(recipe.problem.vars) do ex.vars[#ex.vars + 1] = type(v) == "table" and v[1] or v end
  ex.reference_symbol = ex.name .. "_reference"
  if recipe.backend == "cuda" then ex.arch = export_cuda.arch(recipe, device) end
  local by_name = {}
  for i, ch in ipairs(choices) do
    local r = ch.kernel or (not fallback and ch.start) or nil
    local row = { key = ch.key, shape = ch.shape, median = ch.median, base = ch.base, fallback = ch.kernel == nil,
                  name = fallback, symbol = fallback }
    if r then
      local k = by_name[r.short]
      if not k then
        k = kernel_of(ex, r, st, ctx)
        ex.kernels[#ex.kernels + 1] = k
        k.index, by_name[r.short] = #ex.kernels, k
      end
      row.name, row.symbol, row.index = k.name, k.symbol, k.index
      if ex.arch then row.geometry = export_cuda.geometry(ex, ch, k.params) end
    end
    ex.choices[i] = row
  end
  ex.no_check = check.why_not(recipe.problem)
  ex.check = ex.no_check == nil
  if ex.check then ex.reference_source = reference_source(recipe) end
  return ex
end

-- The files of an export, in the order their places are checked and written.
local function contents(ex)
  local cuda = ex.backend == "cuda"
  local out = {
    { "dispatch.h", C.header(ex) },
    { "dispatch_test.c", C.test_program(ex) },
    { "dispatch.c", cuda and export_cuda.dispatch(ex) or C.host_dispatch(ex) },
    { "Makefile", C.makefile(ex) },
    { "README.txt", C.readme(ex) },
  }
  if ex.check then
    out[#out + 1] = { "reference.c", C.reference(ex) }
    out[#out + 1] = { "dispatch_check.c", check.program(ex) }
  end
  for _, k in ipairs(ex.kernels) do
    if cuda then
      out[#out + 1] = { k.file, standalone(k.source, k.params) }
      out[#out + 1] = { "kernels/" .. k.name .. ".cubin", k.cubin }
    else
      out[#out + 1] = { k.file, C.host_kernel(ex, k) }
    end
  end
  return out
end

-- export(recipe, dir, { device =, fallback =, store =, torch = }) -> the dispatch
-- table, and how many results bundles brought were left out (never
-- measured here, and the recipe does not trust imports: kwb.loop.store's known).
function M.export(recipe, dir, opts)
  opts = opts or {}
  local st = opts.store or store.open()
  local device = opts.device or require("kwb.measure.backends").load(recipe.backend).device()
  local results, away = st:results(st:recipe_context(recipe, device))
  if opts.torch then require("kwb.insight.export.torch").check(recipe) end
  local ex = describe(recipe, M.plan(recipe, results), opts, st, device)
  local files_out = contents(ex)
  -- DIR is made where its parent exists (no parents are made), and kernels/
  -- in it; every file's place is checked before the first is written
  for _, d in ipairs { dir, dir .. "/kernels" } do
    local ok, why = core.output_dir(d)
    if not ok then error(why, 0) end
  end
  local names = { "dispatch.json" }
  for _, f in ipairs(files_out) do names[#names + 1] = f[1] end
  for _, name in ipairs(names) do
    local ok, why = core.output_file(dir .. "/" .. name)
    if not ok then error(why, 0) end
  end
  local kernels, table_rows = {}, {}
  for _, k in ipairs(ex.kernels) do
    kernels[k.name] = { id = k.id, file = k.file, params = k.params, start = k.start, symbol = k.symbol,
                        cubin = k.cubin and ("kernels/" .. k.name .. ".cubin") or nil, cubin_sha256 = k.cubin_sha256,
                        code = k.code }
  end
  for i, ch in ipairs(ex.choices) do
    table_rows[i] = { key = ch.key, shape = ch.shape, kernel = ch.name, median = ch.median, start_median = ch.base,
                      speedup = ch.base / ch.median, fallback = ch.fallback, launch = ch.geometry }
  end
  local out = { recipe = recipe.name, problem = recipe.problem:key(), device = device, rule = ex.rule, vars = ex.vars,
                fallback = opts.fallback or "start", shapes = table_rows, kernels = kernels, dispatcher = ex.name,
                arch = ex.arch, check = ex.check and "dispatch_check.c" or nil, no_check = ex.no_check }
  write(dir .. "/dispatch.json", cjson.encode(out) .. "\n")
  for _, f in ipairs(files_out) do write(dir .. "/" .. f[1], f[2]) end
  if opts.torch then out.torch = require("kwb.insight.export.torch").write(recipe, dir, out) end
  return out, away
end

return M
