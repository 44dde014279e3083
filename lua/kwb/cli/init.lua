-- kwb/cli/init.lua: what the command line runs: subcommands, script files, stdin.
local M = {}

local ids = require "kwb.base.ids"
local strategy = require "kwb.strategies"
local args = require "kwb.base.args"
local help = require "kwb.help"

-- Subcommands (words in the first position) and the run options (the words
-- after a recipe's file): their one description is kwb/help/init.lua.
M.commands = help.commands
M.run_options = help.run_options

local function usage(msg, cmd)
  local who = cmd and ("kwb " .. cmd) or "kwb"
  io.stderr:write(who, ": ", msg, "\ntry '", who, " --help'\n")
  return 2
end

-- set_cache(path): the cache from here on (kwb.cache_path, build products
-- and locks beside it), for --cache after a subcommand or a recipe's file.
function M.set_cache(path)
  local core = require "kwb.core"
  core.cache_path = path
  rawset(kwb, "cache_path", path)
  if package.loaded["kwb.cuda"] then core.cuda_set_build_dir(package.loaded["kwb.cuda"].build_dir()) end
end

-- take_cache(words) -> the words without --cache PATH (or --cache=PATH),
-- that cache set | nil, message. Its directory must exist (core.cache_place).
function M.take_cache(words)
  local rest, o = args.parse(words, { cache = { "value", conv = args.nonempty, what = "a path" } }, { pass = true })
  if not rest then return nil, o end
  if o.cache then
    local ok, msg = require("kwb.core").cache_place(o.cache, true)
    if not ok then return nil, "--cache " .. o.cache .. ": " .. msg end
    M.set_cache(o.cache)
  end
  return rest
end

-- What --model's NAME is, per provider.
local model_names = { openai = "a model name", anthropic = "a model name", replay = "a transcript file",
                      command = "a program and its arguments" }

-- parse_model("PROVIDER:NAME") -> a recipe's model table | nil, message:
-- openai:NAME and anthropic:NAME { provider, model }, replay:FILE { provider,
-- file } (FILE relative to the working directory, read now), command:'PROGRAM
-- ARGS' { provider, command } (the program on PATH).
function M.parse_model(v)
  local model = require "kwb.model"
  local known = table.concat(model.providers, ", ")
  local p, name = v:match("^([^:]*):(.*)$")
  if not p then return nil, string.format("'--model' needs PROVIDER:NAME (providers: %s), got '%s'", known, v) end
  if not model.provider(p) then
    return nil, string.format("'--model %s': unknown provider '%s' (known: %s)", v, p, known)
  end
  if not name:match("%S") then return nil, string.format("'--model %s': %s:, then %s", v, p, model_names[p]) end
  if p == "replay" then
    local ok, err = pcall(require("kwb.model.providers.replay").load, name)
    if not ok then return nil, string.format("'--model %s': %s", v, tostring(err)) end
    return { provider = p, file = name }
  elseif p == "command" then
    local argv = {}
    for w in name:gmatch("%S+") do argv[#argv + 1] = w end
    if not require("kwb.base.files").which(argv[1]) then
      return nil, string.format("'--model %s': %s is not a program on PATH", v, argv[1])
    end
    return { provider = p, command = argv }
  end
  return { provider = p, model = name }
end

-- with_model(recipe_model, model) -> the model a run with --model asks: the
-- option's, with the provider's defaults (URL, key variable), keeping only the
-- recipe's settings of the prompt (context_bytes, profile, diff_bytes) and of
-- the lessons ledger (lessons_every, lessons_bytes).
function M.with_model(old, model)
  local out = {}
  for k, v in pairs(model) do out[k] = v end
  if old then
    out.context_bytes, out.profile, out.diff_bytes = old.context_bytes, old.profile, old.diff_bytes
    out.lessons_every, out.lessons_bytes = old.lessons_every, old.lessons_bytes
  end
  return out
end

-- A recipe's run options (kwb.base.args's spec; their text: kwb.help's run_options).
local positive = { conv = args.positive_integer, what = "a positive integer" }
-- value(t [, more]) -> a "value" option's spec: t's conv and what, more's as
local function value(t, more)
  local o = { "value" }
  for k, v in pairs(t) do o[k] = v end
  for k, v in pairs(more or {}) do o[k] = v end
  return o
end
local run_spec = {
  help = "flag",
  json = { "flag", as = "mode", set = "json" },
  plain = { "flag", as = "mode", set = "plain" },
  quiet = { "flag", as = "mode", set = "quiet" },
  budget = value(positive, { as = "candidates" }),
  minutes = value { conv = function(v) local n = tonumber(v); return n and n > 0 and n or nil end, what = "a positive number" },
  workers = value(positive),
  ahead = value { conv = function(v) local n = math.tointeger(tonumber(v)); return n and n >= 0 and n or nil end,
                  what = "an integer >= 0" },
  seed = value { conv = function(v) return math.tointeger(tonumber(v)) end, what = "an integer" },
  certify = value { conv = function(v) local n = tonumber(v); return n and n >= 0 and n < math.huge and n or nil end,
                    what = "a number of seconds >= 0" },
  retime = value { conv = function(v) return v:match("^%x+$") and v end, what = "a candidate id" },
  model = value { what = "PROVIDER:NAME" },
  strategy = value { what = "a strategy name" },
}

-- The options of work on a fleet, a run's and kwb verify-pick's: the queue's
-- URL, the file of its password, the fleet's key's and the device kind.
M.fleet_spec = {
  queue = value { what = "a redis:// URL" },
  ["queue-password-file"] = value { conv = args.nonempty, what = "a file" },
  ["fleet-key-file"] = value { conv = args.nonempty, what = "a file" },
  device = value { conv = args.nonempty, what = "a device kind" },
}
for k, v in pairs(M.fleet_spec) do run_spec[k] = v end

-- check_fleet(opts, what) -> opts | nil, message: the fleet options only
-- with --queue ("'--X' is for a WHAT on a queue: it needs --queue"), and the
-- queue's URL, its password and the fleet's key read before anything runs.
function M.check_fleet(opts, what)
  for _, w in ipairs { "queue_password_file", "fleet_key_file", "device" } do
    if opts[w] and not opts.queue then
      return nil, string.format("'--%s' is for a %s on a queue: it needs --queue", (w:gsub("_", "-")), what)
    end
  end
  if opts.queue then
    local queue = require "kwb.runners.queue"
    local q, perr = queue.parse(opts.queue, { password_file = opts.queue_password_file })
    if not q then return nil, perr end
    local key, kerr = queue.fleet_key(opts.fleet_key_file)
    if not key then return nil, string.format("queue %s: %s", q.url, kerr) end
  end
  return opts
end

-- parse_run_options(words...) -> opts for kwb.loop.run.run | nil, message.
function M.parse_run_options(...)
  local how = { noun = "run option", known = help.words("run"), aliases = { h = "help" } }
  local pos, opts = args.parse(table.pack(...), run_spec, how)
  if not pos then return nil, opts end
  if #pos > 0 then
    return nil, string.format("unknown run option '%s' (known: %s)", pos[1], table.concat(how.known, ", "))
  end
  local err
  if opts.model then opts.model, err = M.parse_model(opts.model) end
  if err then return nil, err end
  if opts.strategy and not strategy.known(opts.strategy) then return nil, strategy.unknown_message(opts.strategy) end
  if opts.queue and opts.workers then return nil, "'--workers' is for workers on this machine; a queue's are its fleet" end
  if opts.device and not opts.queue then return nil, "'--device' picks among a queue's device kinds: it needs --queue" end
  return M.check_fleet(opts, "run")
end

-- retime(recipe, id) -> exit status: a cached candidate of the recipe's
-- problem measured again, its table printed; the cache keeps every
-- measurement (kwb cache show lists them).
function M.retime(recipe, id)
  local ok, err = pcall(function()
    local s = recipe:session()
    local got, msg = s.store.cache:get(id)
    if not got then error(msg, 0) end
    if got.problem ~= recipe.problem:key() then
      error(string.format("candidate %s is of problem %s, not this recipe's %s", id, got.problem, recipe.problem:key()), 0)
    end
    local res = recipe:try { source = got.source, defines = got.params, params = got.params, name = "retimed " .. id }
    if res.id ~= got.id then
      error(string.format("candidate %s was built with other flags than this recipe's, so it measured %s instead",
                          ids.short(got.id), res.short), 0)
    end
  end)
  if not ok then
    io.stderr:write("kwb: ", recipe.name, ": ", tostring(err), "\n")
    return 1
  end
  return 0
end

-- run_recipe(recipe, words...) -> exit status: the loop on a recipe a file returned.
function M.run_recipe(recipe, ...)
  local words, cerr = M.take_cache { ... }
  -- (a usage error points at the recipe's own --help: its run options)
  local function run_usage(msg)
    io.stderr:write("kwb: ", msg, "\ntry 'kwb ", recipe.file or "FILE.lua", " --help'\n")
    return 2
  end
  if not words then return run_usage(cerr) end
  local opts, err = M.parse_run_options(table.unpack(words))
  if not opts then return run_usage(err) end
  if opts.help then
    io.write(M.run_help(recipe))
    return 0
  end
  if opts.model then recipe.model = M.with_model(recipe.model, opts.model) end
  if opts.retime then return M.retime(recipe, opts.retime) end
  local ok, e = pcall(require("kwb.loop.run").run, recipe, opts)
  if not ok then
    io.stderr:write("kwb: ", recipe.name, ": ", tostring(e), "\n")
    if opts.mode == "json" then   -- the stream ends with the error, so a reader of stdout alone learns why
      io.write(require("kwb.base.secrets").scrub(require("kwb.base.text").json { event = "error", recipe = recipe.name,
                                                                       message = tostring(e) }), "\n")
    end
    return 1
  end
  -- a run its model could not serve failed, whatever it measured before
  if e.stopped_by == "model" then return 1 end
  return 0
end

-- `kwb FILE.lua --help` and `kwb --help` (kwb/help/init.lua)
M.run_help = help.run_help
M.help = help.main_help

-- Run a script file (nil or "-": stdin) with args as `...`. Returns the exit
-- status; an error inside the script propagates with its traceback.
function M.run_file(path, ...)
  if path == "-" then path = nil end
  local chunk, err = loadfile(path)
  if not chunk then
    io.stderr:write("kwb: ", err, "\n")
    return 1
  end
  -- (its folder goes on the module search path: kwb.recipe.search_beside, by with_file)
  -- A file that returns a recipe is run by the loop with the words after it
  -- as run options; a file that returns nothing is an ordinary script.
  local recipe = require "kwb.recipe"
  local res = table.pack(recipe.with_file(path or "stdin", chunk, ...))
  if recipe.is_recipe(res[1]) then return M.run_recipe(res[1], ...) end
  -- a recipe's table returned without kwb.recipe (or kwb.recipe uncalled) is a mistake, not a script
  local v = res[1]
  if v == recipe or (type(v) == "table" and getmetatable(v) == nil and v.problem ~= nil and v.start ~= nil) then
    io.stderr:write(string.format("kwb: %s returns %s, not a recipe: write `return kwb.recipe { ... }`\n",
                                  path or "stdin", v == recipe and "kwb.recipe itself" or "a table with recipe fields"))
    return 1
  end
  return 0
end

function M.main(word, ...)
  for _, c in ipairs(M.commands) do
    if c.name == word then   -- (kwb's --cache after the subcommand too)
      local words, err = M.take_cache { ... }
      if not words then return usage(err, word) end
      return require(c.module).main(table.unpack(words)) or 0
    end
  end
  return M.run_file(word, ...)
end

return M
