-- kwb/recipe/init.lua: the recipe schema. `kwb.recipe { ... }` checks every field
-- and returns a recipe object; a mistake is an error naming the file:line,
-- the field and what was expected, and an unknown field is an error too (with
-- the nearest known name), so a typo never passes silently.
--
-- Paths in a recipe (start, template, context, strategy files, reference
-- files) are relative to the recipe's file.
local nearest = require "kwb.base.nearest"
local problem = require "kwb.problem"
local rules = require "kwb.measure.rules"
local strategy = require "kwb.strategies"

local M = {}

local Recipe = {}
Recipe.__index = Recipe
M.Recipe = Recipe

-- The files being loaded as recipes (kwb FILE.lua, kwb.load): a recipe built
-- by `return kwb.recipe {...}` is a tail call, so its frame is gone; the
-- loader says which file it runs.
M.loading = require("kwb.base.site").loading

local pop_loading = { __close = function() table.remove(M.loading) end }

-- search_beside(path): the folder of a recipe file on the module search path
-- (first, once), so that a recipe may `require` a module beside it (a team's
-- shared problem file) wherever it is loaded: by the command line, by
-- kwb.load at the REPL or in a script, and in every worker that loads it.
function M.search_beside(path)
  if not path or path == "stdin" then return end
  local dir = path:match("^(.*)/[^/]*$") or "."
  local entry = dir .. "/?.lua;" .. dir .. "/?/init.lua;"
  if not (";" .. package.path):find(";" .. entry, 1, true) then package.path = entry .. package.path end
end

function M.with_file(path, chunk, ...)
  M.search_beside(path)
  M.loading[#M.loading + 1] = path
  local _ <close> = setmetatable({}, pop_loading)   -- popped on errors too
  local res = table.pack(chunk(...))
  -- the file a worker loads to get this recipe back (kwb.runners.workers)
  if M.is_recipe(res[1]) and res[1].file == path then res[1].returned_by = path end
  return table.unpack(res, 1, res.n)
end

local rsite = require "kwb.base.site"
local read_lines, field_line, raise, bounded = rsite.read_lines, rsite.field_line, rsite.raise, rsite.bounded

-- ---- the schema ---------------------------------------------------------

local fields = {}   -- (their one description: kwb/help/init.lua)
for i, f in ipairs(require("kwb.help").recipe_fields) do fields[i] = f[1] end
M.fields = fields

local describe = rsite.describe

-- The recipe's checker: kwb.base.site's (fail, unknown) and the field
-- checks below.
local Checker = setmetatable({}, { __index = rsite.Checker })
Checker.__index = Checker
M.Checker = Checker

M.SchemaError = rsite.SchemaError   -- (kwb/base/site.lua)

function Checker:path(field, p)
  if type(p) ~= "string" or p == "" then self:fail(field, "a file path", p) end
  local full = p:sub(1, 1) == "/" and p or (self.dir .. "/" .. p)
  local f = io.open(full, "r")
  if not f then self:fail(field, string.format("no file %s (paths are relative to the recipe's file)", full), false) end
  local got, err = f:read(0)   -- (a directory opens, and fails to read)
  f:close()
  if got == nil and err then self:fail(field, string.format("a file to read, but %s: %s", full, err), false) end
  return full
end

local is_array = rsite.is_array

function Checker:string_list(field, v, allow_empty)
  if not is_array(v) or (#v == 0 and not allow_empty) then self:fail(field, "a list of strings", v) end
  for i, s in ipairs(v) do
    if type(s) ~= "string" then self:fail(field .. "[" .. i .. "]", "a string", s) end
  end
  return v
end

function Checker:subtable(field, v, spec)
  if type(v) ~= "table" then self:fail(field, "a table with " .. table.concat(spec.names, ", "), v) end
  for k in pairs(v) do
    if not spec.check[k] then self:unknown(k, spec.names, field .. ".") end
  end
  for _, k in ipairs(spec.names) do
    if v[k] ~= nil then spec.check[k](self, field .. "." .. k, v[k]) end
  end
  for _, k in ipairs(spec.required or {}) do
    if v[k] == nil then self:fail(field .. "." .. k, "a value (required)", nil) end
  end
end

local function positive_integer(c, f, v)
  if math.type(v) ~= "integer" or v < 1 then c:fail(f, "a positive integer", v) end
end
-- (inf is no number a recipe means: it is neither a limit nor storable)
local function positive_number(c, f, v)
  if type(v) ~= "number" or not (v > 0 and v < math.huge) then c:fail(f, "a positive number", v) end
end
local function nonneg_number(c, f, v)
  if type(v) ~= "number" or not (v >= 0 and v < math.huge) then c:fail(f, "a number >= 0", v) end
end
local function at_most(limit, why, check)
  return function(c, f, v)
    check(c, f, v)
    if v > limit then c:fail(f, string.format("at most %g (%s)", limit, why), v) end
  end
end
local function a_string(c, f, v)
  if type(v) ~= "string" or v == "" then c:fail(f, "a non-empty string", v) end
end

-- budget.source_bytes (kwb.loop.candidate): at most 16 MiB, as a worker's task is one frame of at most 64 MiB of JSON
local function source_bytes(c, f, v) positive_integer(c, f, v); if v > 16 << 20 then c:fail(f, "at most 16777216 (bytes)", v) end end
-- A call's timeout is at most the CPU time a worker may spend (kwb.runners.workers'
-- limits.cpu), which would end a longer call first.
M.max_timeout, M.max_minutes = 3600, 525600
local budget_spec = { names = { "candidates", "minutes", "timeout", "cost", "source_bytes" },
                      check = { candidates = positive_integer,
                                minutes = at_most(M.max_minutes, "a year", positive_number),
                                timeout = at_most(M.max_timeout, "seconds a call: a worker's CPU limit", positive_number),
                                cost = positive_number, source_bytes = source_bytes } }
-- model = { ... } is checked in kwb/recipe/model.lua
local model_check = require("kwb.recipe.model")({ positive_integer = positive_integer, positive_number = positive_number,
                                                  nonneg_number = nonneg_number, a_string = a_string, is_array = is_array })
local timing_spec = { names = { "warmup", "warmup_min", "min_samples", "max_samples", "cap", "target", "min_sample",
                                "verify_runs" },
                      check = { warmup = nonneg_number, warmup_min = positive_integer, min_samples = positive_integer,
                                max_samples = positive_integer, cap = positive_number, target = positive_number,
                                min_sample = nonneg_number, verify_runs = positive_integer } }
local ceilings_spec = { names = { "bandwidth", "flops" },
                        check = { bandwidth = positive_number, flops = positive_number } }

function Checker:shapes(p, v, field)
  field = field or "shapes"
  local out = {}
  if type(v) ~= "table" or next(v) == nil then
    self:fail(field, "a table of shape variables to value lists ({ n = { 64, 128 } }) or a list of shapes", v)
  end
  if is_array(v) then
    for i, s in ipairs(v) do
      if type(s) ~= "table" then self:fail(field .. "[" .. i .. "]", "a shape table like { n = 64 }", s) end
      local ok, err = p:check_shape(s)
      if not ok then self:fail(field .. "[" .. i .. "]", err, false) end
      out[#out + 1] = s
    end
  else
    local lists = {}
    for k, list in pairs(v) do
      local known = false
      for _, var in ipairs(p.vars) do known = known or var == k end
      if not known then self:unknown(k, p.vars, field .. ".") end
      if not is_array(list) or #list == 0 then self:fail(field .. "." .. k, "a non-empty list of integers", list) end
      local min = p.var_min and p.var_min[k] or 1
      for i, x in ipairs(list) do
        if math.type(x) ~= "integer" or x < min then
          self:fail(field .. "." .. k .. "[" .. i .. "]", min == 0 and "a non-negative integer" or "a positive integer", x)
        end
      end
      lists[k] = list
    end
    for _, var in ipairs(p.vars) do
      if not lists[var] then self:fail(field .. "." .. var, "a list of values (every shape variable of " .. p.name .. " needs one)", nil) end
    end
    -- the cartesian product, first variable slowest
    local function product(i, cur)
      if i > #p.vars then
        local s = {}
        for k, x in pairs(cur) do s[k] = x end
        local ok, err = p:check_shape(s)
        if not ok then self:fail(field, err, false) end
        out[#out + 1] = s
        return
      end
      for _, x in ipairs(lists[p.vars[i]]) do
        cur[p.vars[i]] = x
        product(i + 1, cur)
      end
    end
    product(1, {})
  end
  local seen = {}
  for i, s in ipairs(out) do
    local key = p:shape_key(s)
    if seen[key] then self:fail(field, "distinct shapes (" .. key .. " is listed twice)", false) end
    seen[key] = true
    out[i] = { shape = s, key = key }
  end
  return out
end

function Checker:candidate_spec(field, v)
  if type(v) == "string" then return { file = self:path(field, v), resolved = true } end
  if type(v) ~= "table" then self:fail(field, "a file path or a table { file = | source =, defines = }", v) end
  for k in pairs(v) do
    if not ({ file = 1, source = 1, defines = 1, name = 1 })[k] then self:unknown(k, { "file", "source", "defines", "name" }, field .. ".") end
  end
  local c = { defines = v.defines, name = v.name, source = v.source, resolved = true }
  if v.file and v.source ~= nil then self:fail(field, "'file' or 'source', not both", false) end
  if v.file then c.file = self:path(field .. ".file", v.file)
  elseif v.source ~= nil and type(v.source) ~= "string" then self:fail(field .. ".source", "the kernel's source text", v.source)
  elseif v.source == nil then self:fail(field, "'file' or 'source'", v) end
  if v.name ~= nil then a_string(self, field .. ".name", v.name) end
  if v.defines ~= nil and type(v.defines) ~= "table" then self:fail(field .. ".defines", "a table of NAME = value", v.defines) end
  return c
end

-- space = { ... } is checked by kwb.strategies.space (a reply's space block too)
Checker.space = require("kwb.strategies.space").check

function Checker:strategy(v, field)
  field = field or "strategy"
  if type(v) == "string" then
    for _, n in ipairs(strategy.builtin) do
      if v == n then return { name = n, module = strategy.module(n) } end
    end
    if v:match("%.lua$") then return { name = v:match("([^/]+)%.lua$"), file = self:path("strategy", v) } end
    local near = nearest(v, strategy.builtin)
    self:fail("strategy", "one of " .. table.concat(strategy.builtin, ", ") .. ", a .lua file or a table { propose = }",
      v, near and ("(did you mean '" .. near .. "'?)"))
  elseif type(v) == "table" and v[1] ~= nil and v.propose == nil then
    if #v == 1 then   -- { "llm+tune", sweep = 8 }: a builtin with options
      local s = self:strategy(v[1], field .. "[1]")
      local allowed = s.module and strategy.options[s.name]
      s.options = {}
      for k, x in pairs(v) do
        if k ~= 1 then
          if not allowed then self:fail(field, string.format("no options for strategy '%s'", s.name), false) end
          if not allowed[k] then self:unknown(k, strategy.option_names(s.name), field .. ".") end
          if allowed[k] == "integer" then positive_integer(self, field .. "." .. k, x)
          elseif allowed[k] == "population" then
            local sub, what, got = require("kwb.strategies.population").check(x)
            if sub then self:fail(field .. "." .. k .. sub, what, got) end
          elseif not strategy.known(x) then self:fail(field .. "." .. k, strategy.unknown_message(x), false) end
          s.options[k] = x
        end
      end
      return s
    end
    local members = {}   -- { "llm", "anneal" }: in turn
    for i, m in ipairs(v) do members[i] = self:strategy(m, field .. "[" .. i .. "]") end
    return { name = "mix", members = members }
  elseif type(v) == "table" then
    if type(v.propose) ~= "function" then self:fail("strategy.propose", "a function(self, run)", v.propose) end
    if v.observe ~= nil and type(v.observe) ~= "function" then self:fail("strategy.observe", "a function(self, run, result)", v.observe) end
    return { name = v.name or "inline", table = v }
  end
  self:fail("strategy", "a strategy name, a .lua file or a table { propose = }", v)
end

-- ---- building the object ----------------------------------------------

-- The call site of kwb.recipe: the file and line of the caller, or, for a
-- tail call (return kwb.recipe {...}), the file being loaded and the line of
-- its `recipe {` call.
local function call_site(level)
  local info = debug.getinfo(level + 1, "Slt")
  local tail = debug.getinfo(level, "t").istailcall
  local file, line
  if info and not tail and info.source:sub(1, 1) == "@" and info.currentline > 0 then
    file, line = info.source:sub(2), info.currentline
  elseif M.loading[#M.loading] then
    file = M.loading[#M.loading]
  end
  local site = { file = file or "recipe", line = line }
  site.lines = file and read_lines(file)
  if site.lines and not site.line then
    for i, l in ipairs(site.lines) do
      if l:match("recipe%s*[{(]") then site.line = i; break end
    end
  end
  site.line = site.line or 1
  return site
end

function M.new(spec, level)
  local site = call_site((level or 1) + 1)
  local c = setmetatable({ site = site, dir = site.file:match("^(.*)/[^/]*$") or "." }, Checker)
  if type(spec) ~= "table" then c:fail("recipe", "a table of fields", spec) end
  local names = {}
  for _, f in ipairs(fields) do names[f] = true end
  for k in pairs(spec) do
    if not names[k] then c:unknown(k, fields) end
  end
  local r = setmetatable({ file = site.file ~= "recipe" and site.file or nil, dir = c.dir, line = site.line }, Recipe)
  if type(spec.name) ~= "string" or not spec.name:match("^[%w_%.%-]+$") then
    c:fail("name", "a name of letters, digits, '_', '.' or '-'", spec.name)
  end
  r.name = spec.name
  if spec.description ~= nil then a_string(c, "description", spec.description) end
  r.description = spec.description

  local p = spec.problem
  if type(p) == "string" then
    local got, err = problem.get(p)
    if not got then c:fail("problem", err, false) end
    p = got
  elseif not problem.is_problem(p) then
    c:fail("problem", "a problem (kwb.problem.define or a kwb.problems module) or its name", p)
  end
  r.problem = p
  r.shapes = c:shapes(p, spec.shapes)
  -- verified, never timed, never announced (kwb.measure.unannounced): given, none (false), or derived
  if spec.verify_shapes == false then r.verify_shapes = {}
  elseif spec.verify_shapes ~= nil then r.verify_shapes = c:shapes(p, spec.verify_shapes, "verify_shapes")
  else r.verify_shapes = require("kwb.measure.unannounced").derive(p, r.shapes) end
  r.backend = spec.backend or "host"
  if r.backend ~= "host" and r.backend ~= "cuda" then c:fail("backend", "'host' or 'cuda'", spec.backend) end

  if spec.start == nil then c:fail("start", "the start kernel (a file path), the baseline every score is relative to", nil) end
  r.start = c:candidate_spec("start", spec.start)
  r.baseline = spec.baseline ~= nil and require("kwb.measure.baseline").check(c, spec.baseline, p) or nil   -- (kwb.measure.baseline)
  if spec.template ~= nil then r.template = c:path("template", spec.template) end
  if spec.space ~= nil then
    if not r.template then c:fail("space", "needs a 'template' (the source its parameters are filled into)", false) end
    r.space = c:space(spec.space)
  end
  if spec.strategy ~= nil then r.strategy = c:strategy(spec.strategy)
  elseif r.space then r.strategy = { name = "random", module = "kwb.strategies.random" } end

  if spec.model ~= nil then model_check(c, "model", spec.model) end
  r.model = spec.model
  local needs = r.strategy and strategy.needs_model(r.strategy)
  if needs and not r.model then c:fail("model", string.format("a model (the %s strategy asks one for its proposals)", needs), nil) end
  if spec.prompt ~= nil and type(spec.prompt) ~= "function" then
    c:fail("prompt", "a function(parts, info) -> the user message, or { system =, user = }", spec.prompt)
  end
  r.prompt = spec.prompt
  r.context = {}
  if spec.context ~= nil then
    c:string_list("context", spec.context, true)
    for i, f in ipairs(spec.context) do r.context[i] = c:path("context[" .. i .. "]", f) end
  end
  r.ideas = spec.ideas and c:string_list("ideas", spec.ideas, true) or {}
  r.tags = spec.tags and c:string_list("tags", spec.tags, true) or {}
  local lessons = require "kwb.cache.lessons"
  for i, tag in ipairs(r.tags) do   -- (the words a lesson's tags are: kwb.cache.lessons)
    if #tag > lessons.tag_bytes or not tag:match(lessons.tag_pattern) then
      c:fail("tags[" .. i .. "]", string.format("a lowercase technique word (letters, digits and '-', at most %d bytes)",
                                                lessons.tag_bytes), tag)
    end
  end
  if spec.forbid ~= nil and not is_array(spec.forbid) then
    c:fail("forbid", "a list of rule names and rule tables", spec.forbid)
  end
  local ok, rs = pcall(rules.set, spec.forbid or { "default" })
  if not ok then
    local where, why = tostring(rs):match("^(forbid%[%d+%]): (.*)$")
    c:fail(where or "forbid", why or tostring(rs), false)
  end
  r.forbid, r.rules = spec.forbid or { "default" }, rs
  if spec.allow ~= nil then rs:allow(c:string_list("allow", spec.allow, true)) end   -- more symbols a host kernel may call
  if spec.accept ~= nil and type(spec.accept) ~= "function" then c:fail("accept", "a function(candidate, best) -> boolean", spec.accept) end
  if spec.score ~= nil and type(spec.score) ~= "function" then c:fail("score", "a function(candidate) -> number", spec.score) end
  r.accept, r.score = spec.accept, spec.score
  r.budget = { candidates = 100, minutes = 10, timeout = 10, source_bytes = 4 << 20 }
  if spec.budget ~= nil then c:subtable("budget", spec.budget, budget_spec) end
  for k, v in pairs(spec.budget or {}) do r.budget[k] = v end
  if spec.seed ~= nil and math.type(spec.seed) ~= "integer" then c:fail("seed", "an integer", spec.seed) end
  r.seed = spec.seed
  r.flags = spec.flags and c:string_list("flags", spec.flags, true) or (r.backend == "host" and { "-O2" } or {})
  if spec.launch ~= nil and type(spec.launch) ~= "function" then c:fail("launch", "a function(shape, params) -> { grid =, block =, smem = }", spec.launch) end
  if spec.launch ~= nil and r.backend ~= "cuda" then c:fail("launch", "backend = 'cuda' (a launch plan places CUDA kernels)", false) end
  r.launch = spec.launch
  if spec.arch ~= nil then
    if r.backend ~= "cuda" then c:fail("arch", "backend = 'cuda' (arch names a CUDA architecture)", false) end
    if type(spec.arch) ~= "string" or not spec.arch:match("^sm_%d+a?$") then c:fail("arch", "a CUDA arch like \"sm_90\"", spec.arch) end
  end
  r.arch = spec.arch
  if spec.sanitize ~= nil and spec.sanitize ~= false and spec.sanitize ~= "best" and spec.sanitize ~= "all" then c:fail("sanitize", "\"best\" (the default), \"all\" or false", spec.sanitize) end
  if spec.dispatch ~= nil and spec.dispatch ~= "nearest" and spec.dispatch ~= "larger" then c:fail("dispatch", "\"nearest\" (the default) or \"larger\": the measured shape kwb export picks for one between", spec.dispatch) end
  r.sanitize, r.sanitize_default = r.backend == "cuda" and (spec.sanitize == nil and "best" or spec.sanitize), spec.sanitize == nil
  r.dispatch = spec.dispatch or "nearest"   -- (kwb.checks.sanitize: CUDA only, "best" unless set; kwb.insight.export)
  if r.sanitize then require("kwb.checks.sanitize").verify_race_shape(r) end   -- (racecheck's shape verified too)
  if spec.cc ~= nil then
    a_string(c, "cc", spec.cc)
    if not require("kwb.base.files").which(spec.cc) then c:fail("cc", "a C compiler on PATH (or its path)", spec.cc) end
  end
  r.cc = spec.cc
  r.timing = { warmup = 0.02, min_samples = 5, cap = 0.25, target = 0.01 }
  if spec.timing ~= nil then
    c:subtable("timing", spec.timing, timing_spec)
    for k, v in pairs(spec.timing) do r.timing[k] = v end
    if r.timing.max_samples and r.timing.max_samples < r.timing.min_samples then
      c:fail("timing.max_samples", string.format("at least timing.min_samples (%d%s)", r.timing.min_samples,
                                                  spec.timing.min_samples and "" or ", the default"), r.timing.max_samples)
    end
  end
  if spec.trust_imported ~= nil and type(spec.trust_imported) ~= "boolean" then c:fail("trust_imported", "true or false", spec.trust_imported) end; r.trust_imported = spec.trust_imported == true   -- (kwb.loop.store's known)
  if spec.race ~= nil and spec.race ~= false then nonneg_number(c, "race", spec.race) end
  r.race = spec.race == nil and 0.10 or spec.race
  if spec.ceilings ~= nil then c:subtable("ceilings", spec.ceilings, ceilings_spec) end
  r.ceilings = spec.ceilings
  return r
end

-- ---- the recipe object --------------------------------------------------

-- A session (the loop's state for this recipe) is created on first use and
-- kept, so try and run share the start kernel's measurement and the cache.
function Recipe:session(opts)
  if not self._session then
    self._session = require("kwb.loop.session").new(self, opts)
  end
  return self._session
end

-- r:run { candidates =, minutes =, strategy =, json =, seed = } -> summary
function Recipe:run(opts)
  return require("kwb.loop.run").run(self, opts or {})
end

-- r:try { BM = 64, ... } or r:try { source = "..." }: evaluate one candidate
-- now (even if the cache knows it), print its per-shape table, return the result.
function Recipe:try(cand)
  return require("kwb.loop.run").try(self, cand)
end

-- r:profile(id [, shape]): ncu on a cached candidate, its table printed.
function Recipe:profile(id, key) return require("kwb.loop.run").profile(self, id, key) end

function Recipe:__tostring()
  return string.format("kwb.recipe %s (%s, %d shapes%s)", self.name, self.problem:key(), #self.shapes,
                       self.file and (", " .. self.file) or "")
end

-- r:call(field, ...) -> the recipe's function `field` (accept, score) called
-- under the instruction bound (kwb/base/site.lua).
function Recipe:call(field, ...)
  return bounded(rsite.of(self), field, self[field], ...)
end

-- r:fail(field, why): raise "file:line: recipe field 'field': why", the line
-- of the field, for a mistake found while the recipe runs (what its accept
-- or score returned).
function Recipe:fail(field, why)
  local at = rsite.of(self)
  raise(at, field_line(at, field), string.format("recipe field '%s': %s", field, why))
end

function M.is_recipe(v) return getmetatable(v) == Recipe end

return setmetatable(M, {
  __call = function(_, spec)
    local r = M.new(spec, 2)   -- not a tail call: new() looks at this frame's caller
    return r
  end,
})
