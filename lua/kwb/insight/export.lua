-- kwb/insight/export.lua: `kwb export RECIPE DIR`: a per-shape dispatch from what the
-- cache knows of a recipe on one device kind. For each timed shape it picks
-- the verified candidate with the lowest median there, where that beats the
-- fallback beyond the noise (the slow end of its 95% interval under the fast
-- end of the fallback's); elsewhere the fallback stays: the start kernel, or
-- a library kernel named with --fallback. It writes
--   kernels/ID.c (or .cu)  each chosen source, its parameters as #defines
--   dispatch.json          shapes to kernels, with the times measured
--   dispatch.h             kwb_dispatch_NAME(vars...) -> the kernel for a shape
--   dispatch_test.c        a program printing the kernel for each shape given
-- Shapes between the measured ones take the recipe's `dispatch` rule:
-- "nearest" (the least sum of |log| distances over the variables, the
-- default) or "larger" (the smallest measured shape at least as large in
-- every variable, else the largest).
local cjson = require "cjson"
local core = require "kwb.core"
local outcomes = require "kwb.base.outcomes"
local store = require "kwb.loop.store"

local M = {}


-- (a path that is there must be a regular file: never a device or a FIFO; core.output_file)
local function write(path, text)
  local ok, why = core.output_file(path)
  if not ok then error(why, 0) end
  local f, err = io.open(path, "w")
  if not f then error("cannot write " .. path .. ": " .. tostring(err), 0) end
  f:write(text)
  f:close()
end

-- The source as a file of its own: its parameters as #defines first.
local function standalone(source, params)
  local keys = {}
  for k in pairs(params or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  local lines = {}
  for _, k in ipairs(keys) do lines[#lines + 1] = string.format("#define %s %s", k, tostring(params[k])) end
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

local function cident(s) return (s:gsub("[^%w_]", "_")) end

-- The header's selection function over the problem's variables.
local function header(recipe, vars, choices, names, rule, device)
  local fn = "kwb_dispatch_" .. cident(recipe.name)
  local L = {
    string.format("/* dispatch.h: made by kwb export from recipe %s (problem %s) on %s.", recipe.name,
                  recipe.problem:key(), device),
    string.format(" * %s(%s) -> the kernel to run for that shape; between the measured", fn,
                  table.concat(vars, ", ")),
    string.format(" * shapes the %s one (dispatch.json has the times). */", rule == "larger" and "next larger" or "nearest"),
    "#ifndef KWB_DISPATCH_" .. cident(recipe.name):upper() .. "_H",
    "#define KWB_DISPATCH_" .. cident(recipe.name):upper() .. "_H",
    "#include <math.h>",
    "",
  }
  local params = {}
  for _, v in ipairs(vars) do params[#params + 1] = "long long " .. cident(v) end
  L[#L + 1] = string.format("static inline const char *%s(%s) {", fn, table.concat(params, ", "))
  L[#L + 1] = string.format("    static const struct { long long v[%d]; const char *kernel; } shapes[%d] = {", #vars, #choices)
  for i, ch in ipairs(choices) do
    local vs = {}
    for j, v in ipairs(vars) do vs[j] = string.format("%d", math.tointeger(ch.shape[v]) or 0) end
    L[#L + 1] = string.format("        {{%s}, \"%s\"},", table.concat(vs, ", "), names[i])
  end
  L[#L + 1] = "    };"
  local args = {}
  for _, v in ipairs(vars) do args[#args + 1] = cident(v) end
  L[#L + 1] = string.format("    const long long x[%d] = {%s};", #vars, table.concat(args, ", "))
  L[#L + 1] = "    int best = 0;"
  if rule == "larger" then
    L[#L + 1] = "    double least = -1, most = -1;"
    L[#L + 1] = string.format("    for (int i = 0; i < %d; i++) {", #choices)
    L[#L + 1] = "        double size = 1;"
    L[#L + 1] = "        int fits = 1;"
    L[#L + 1] = string.format("        for (int j = 0; j < %d; j++) { size *= (double)shapes[i].v[j] + 1; if (shapes[i].v[j] < x[j]) fits = 0; }", #vars)
    L[#L + 1] = "        if (fits && (least < 0 || size < least)) { least = size; best = i; }"
    L[#L + 1] = "        if (least < 0 && size > most) { most = size; best = i; }"
    L[#L + 1] = "    }"
  else
    L[#L + 1] = "    double least = -1;"
    L[#L + 1] = string.format("    for (int i = 0; i < %d; i++) {", #choices)
    L[#L + 1] = "        double d = 0;"
    L[#L + 1] = string.format("        for (int j = 0; j < %d; j++) d += fabs(log((double)shapes[i].v[j] + 1) - log((double)x[j] + 1));", #vars)
    L[#L + 1] = "        if (least < 0 || d < least) { least = d; best = i; }"
    L[#L + 1] = "    }"
  end
  L[#L + 1] = "    return shapes[best].kernel;"
  L[#L + 1] = "}"
  L[#L + 1] = "#endif"
  return table.concat(L, "\n") .. "\n"
end

local function test_program(recipe, vars)
  local fn = "kwb_dispatch_" .. cident(recipe.name)
  local reads = {}
  for j = 1, #vars do reads[j] = string.format("atoll(argv[i + %d])", j - 1) end
  return table.concat({
    "/* dispatch_test.c: prints the kernel dispatch.h picks for each shape given as",
    string.format(" * %d numbers (%s) on the command line. */", #vars, table.concat(vars, ", ")),
    "#include <stdio.h>",
    "#include <stdlib.h>",
    "#include \"dispatch.h\"",
    "",
    "int main(int argc, char **argv) {",
    string.format("    for (int i = 1; i + %d <= argc; i += %d) printf(\"%%s\\n\", %s(%s));", #vars, #vars, fn,
                  table.concat(reads, ", ")),
    "    return 0;",
    "}",
  }, "\n") .. "\n"
end

-- export(recipe, dir, { device =, fallback =, store = }) -> the dispatch
-- table, and how many results bundles brought were left out (never
-- measured here, and the recipe does not trust imports: kwb.loop.store's known).
function M.export(recipe, dir, opts)
  opts = opts or {}
  local st = opts.store or store.open()
  local device = opts.device or require("kwb.measure.backends").load(recipe.backend).device()
  local results, away = st:results(st:recipe_context(recipe, device))
  local choices = M.plan(recipe, results)
  local rule = recipe.dispatch or "nearest"
  local ext = recipe.backend == "cuda" and ".cu" or ".c"
  -- DIR is made where its parent exists (no parents are made), and kernels/
  -- in it; every file's place is checked before the first is written
  for _, d in ipairs { dir, dir .. "/kernels" } do
    local ok, why = core.output_dir(d)
    if not ok then error(why, 0) end
  end
  for _, name in ipairs { "dispatch.json", "dispatch.h", "dispatch_test.c" } do
    local ok, why = core.output_file(dir .. "/" .. name)
    if not ok then error(why, 0) end
  end
  local vars, names, kernels, table_rows = {}, {}, {}, {}
  for _, v in ipairs(recipe.problem.vars) do vars[#vars + 1] = type(v) == "table" and v[1] or v end
  local fallback = opts.fallback
  for i, ch in ipairs(choices) do
    local r = ch.kernel or (not fallback and ch.start) or nil
    local name = r and r.short or fallback
    if r and not kernels[name] then
      local cand = assert(st.cache:get(r.id))
      write(string.format("%s/kernels/%s%s", dir, name, ext), standalone(cand.source, cand.params))
      kernels[name] = { id = r.id, file = "kernels/" .. name .. ext, params = cand.params, start = r.outcome == "start" }
    end
    names[i] = name
    table_rows[i] = { key = ch.key, shape = ch.shape, kernel = name, median = ch.median, start_median = ch.base,
                      speedup = ch.base / ch.median, fallback = ch.kernel == nil }
  end
  local out = { recipe = recipe.name, problem = recipe.problem:key(), device = device, rule = rule, vars = vars,
                fallback = fallback or "start", shapes = table_rows, kernels = kernels }
  write(dir .. "/dispatch.json", cjson.encode(out) .. "\n")
  write(dir .. "/dispatch.h", header(recipe, vars, choices, names, rule, device))
  write(dir .. "/dispatch_test.c", test_program(recipe, vars))
  return out, away
end

return M
