-- tests/lua/test_help.lua: the one description (kwb/help/init.lua, kwb/help/api.lua)
-- covers what kwb has, and what reads it says the same: the recipe checker's
-- fields, the run-option parser, the commands' modules, help(x).
local t = require "t"
local help = require "kwb.help"
local api = require "kwb.help.api"
local show = require "kwb.cli.show"

local entries = {}
for _, e in ipairs(api) do
  t.eq(entries[e[1]], nil, "one entry for " .. e[1])
  entries[e[1]] = e
end

t.test("help_every_function_of_kwbs_modules_has_an_entry", function()
  for _, m in ipairs { "host", "cuda", "cache", "problem", "figures" } do
    local n = 0
    for k, v in pairs(kwb[m]) do
      if type(v) == "function" then
        n = n + 1
        t.truthy(entries["kwb." .. m .. "." .. k], "an entry for kwb." .. m .. "." .. k)
      end
    end
    t.truthy(n > 2, "kwb." .. m .. " has functions")
  end
  for k, v in pairs(kwb) do
    if type(v) == "function" then t.truthy(entries["kwb." .. k], "an entry for kwb." .. k) end
  end
end)

t.test("help_every_entry_of_kwb_names_what_is_there", function()
  for _, e in ipairs(api) do
    t.eq(type(e[2]), "string")
    t.truthy(e[2]:find(e[1], 1, true) == 1, e[1] .. "'s signature starts with its name: " .. e[2])
    t.truthy(#e[3] > 20, e[1] .. " is described")
    if e[1]:match("^kwb%.") then
      local v = _G
      for part in e[1]:gmatch("[^%.]+") do v = v[part] end
      t.truthy(v ~= nil, e[1] .. " exists")
    end
  end
end)

-- Methods, on objects made here (device objects need a GPU: tests/gpu/)
local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
local mod = assert(kwb.host.compile { source = "int twice(int x) { return 2 * x; }", name = "help_twice.c" })
local objects = {
  buf = kwb.host.buffer("f32", 4),
  mod = mod,
  fn = mod:fn("twice", "int twice(int)"),
  cache = assert(kwb.cache.open(dir .. "/help.db")),
  problem = require("kwb.problems.vecadd") {},
  recipe = kwb.recipe { name = "help_r", problem = require("kwb.problems.matmul") {}, shapes = { n = { 64 } },
                        start = "../../kernels/host/matmul_naive.c", verify_shapes = false },
}

t.test("help_every_method_entry_is_a_method_of_its_object", function()
  for _, e in ipairs(api) do
    local recv, m = e[1]:match("^(%a+):([%w_]+)$")
    if recv and objects[recv] then
      t.eq(type(objects[recv][m]), "function", e[1])
    end
  end
end)

t.test("help_every_method_of_a_cache_module_recipe_has_an_entry", function()
  local function methods(v)
    local out = {}
    local idx = rawget(getmetatable(v) or {}, "__index")
    for _, tab in ipairs { type(idx) == "table" and idx or {}, type(v) == "table" and v or {} } do
      for k, x in pairs(tab) do if type(x) == "function" and not k:match("^_") then out[#out + 1] = k end end
    end
    return out
  end
  for _, recv in ipairs { "cache", "mod", "recipe" } do
    for _, m in ipairs(methods(objects[recv])) do
      t.truthy(entries[recv .. ":" .. m], "an entry for " .. recv .. ":" .. m)
    end
  end
  -- a problem's functions: its methods, and the spec's bytes, flops and launch
  for _, m in ipairs(methods(objects.problem)) do
    t.truthy(entries["problem:" .. m] or m == "bytes" or m == "flops" or m == "launch", "an entry for problem:" .. m)
  end
end)

t.test("help_the_recipe_checker_takes_its_fields_from_help", function()
  local names = {}
  for i, f in ipairs(help.recipe_fields) do names[i] = f[1] end
  t.eq(table.concat(require("kwb.recipe").fields, " "), table.concat(names, " "))
  t.raises(function() kwb.recipe { name = "x", frobnicate = 1 } end,
           "unknown recipe field 'frobnicate' (known: " .. table.concat(names, ", ") .. ")")
end)

t.test("help_every_run_option_is_parsed_and_every_parsed_one_is_described", function()
  local cli = require "kwb.cli"
  local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
  local function file(path, text)
    local f = assert(io.open(path, "w"))
    f:write(text)
    f:close()
    return path
  end
  local pw = file(dir .. "/help-queue.pw", "a queue password\n")
  local key = file(dir .. "/help-fleet.key", string.rep("k", 32) .. "\n")
  local values = { ["--budget"] = "3", ["--minutes"] = "2", ["--strategy"] = "grid", ["--seed"] = "7",
                   ["--workers"] = "2", ["--ahead"] = "2", ["--retime"] = "abcd", ["--queue"] = "redis://127.0.0.1:6379/q",
                   ["--model"] = "openai:gpt-5", ["--queue-password-file"] = pw, ["--fleet-key-file"] = key,
                   ["--certify"] = "2" }
  local on_queue = { ["--queue"] = true, ["--device"] = true, ["--queue-password-file"] = true,
                     ["--fleet-key-file"] = true }
  for _, w in ipairs(help.words("run")) do
    if w ~= "--cache" then   -- (taken off the words before the parser: kwb.cli.take_cache)
      local opts, err = cli.parse_run_options(w, values[w])
      if on_queue[w] then   -- (a queue's options: with its URL, its password and its fleet's key)
        opts, err = cli.parse_run_options("--queue", values["--queue"], "--queue-password-file", pw,
                                          "--fleet-key-file", key, w, values[w] or "H200")
      end
      t.truthy(opts, w .. ": " .. tostring(err))
    end
  end
  t.eq(select(2, cli.parse_run_options("--frob")), "unknown run option '--frob' (known: --json, --plain, --quiet, "
       .. "--budget, --minutes, --strategy, --model, --seed, --workers, --ahead, --queue, --queue-password-file, "
       .. "--fleet-key-file, --device, --certify, --retime, --cache, --help, -h)")
end)

t.test("help_every_command_has_its_module_and_its_help", function()
  for _, c in ipairs(help.commands) do
    t.eq(type(require(c.module).main), "function", c.name)
    t.truthy(help.command_help(c.name):find("usage: kwb " .. c.name, 1, true) == 1, c.name)
  end
  local demo = require "kwb.cli.demo"
  local text = help.command("demo").text
  t.truthy(text:find(demo.gpu_recipe, 1, true) and text:find(demo.cpu_recipe, 1, true), "the demo's recipes: " .. text)
  t.eq(table.concat(help.words("cache"), " "),
       "ls show transcripts best diff export import stats check gc --help", "what the shell completes after cache")
  t.eq(table.concat(help.words("doctor"), " "), "--no-measure --own-gemm --json --help")
end)

t.test("help_x_finds_a_function_by_value_and_by_name", function()
  local e = entries["kwb.figures.time"]
  local want = e[2] .. "\n" .. table.concat(help.wrap(e[3], 80, "  "), "\n")
  t.eq(show.text(kwb.figures.time), want, "by the function itself")
  t.eq(show.text("kwb.figures.time"), want, "by its name")
  t.eq(show.signature(kwb.host.compile), "kwb.host.compile(spec) -> mod | nil, message, info")
  t.eq(show.signature(print), nil, "not one of kwb's")
  t.eq(select(2, show.text(print)), "no help for this function: it is not one of kwb's (help() lists what there is)")
  t.eq(select(2, show.text("frobnicate")), "no help for 'frobnicate' (help() lists what there is)")
  local all_time = show.text("time")
  for _, n in ipairs { "kwb.host.time", "fn:time", "kwb.cuda.time", "plan:time", "kwb.figures.time" } do
    t.truthy(all_time:find(entries[n][2], 1, true), "help 'time' lists " .. n)
  end
end)

t.test("help_x_lists_a_module_or_an_objects_methods", function()
  t.eq(show.text(kwb.problem):match("^[^\n]*"), "kwb.problem:")
  t.eq(show.text(objects.buf):match("^[^\n]*"), "buf methods:")
  t.eq(show.text(objects.cache):match("^[^\n]*"), "cache methods:")
  t.eq(show.text(objects.mod):match("^[^\n]*"), "mod methods:")
  local r = show.text(objects.recipe)
  t.truthy(r:find("^recipe fields %(kwb.recipe { ... }%):\n  name "), r)
  t.truthy(r:find("\nrecipe methods:\n  recipe:try", 1, true), r)
  t.eq(show.text("kwb export"), (help.command_help("export"):gsub("\n$", "")))
  t.truthy(show.text("run"):find("  --budget N     evaluate at most N candidates", 1, true))
end)

-- docs/architecture.md's lists are the code's: the funnel's outcomes in
-- their order, the subcommands, the cache's schema version.
local function read_doc(path)
  local f = assert(io.open(path, "rb"))
  local doc = f:read("a")
  f:close()
  return doc
end

t.test("architecture_md_names_the_outcomes_subcommands_and_schema_the_code_has", function()
  local doc = read_doc("docs/architecture.md")
  local funnel = doc:match("Every candidate ends in one outcome of the funnel %(base/outcomes%.lua%):%s*(.-), in the order")
  local words = {}
  for w in (funnel or ""):gmatch("`([%w-]+)`") do words[#words + 1] = w end
  t.eq(table.concat(words, " "), table.concat(require("kwb.base.outcomes").funnel, " "), "the funnel")
  local names = {}
  for _, c in ipairs(help.commands) do names[#names + 1] = c.name end
  for _, where in ipairs { { "docs/architecture.md", doc }, { "docs/reference/cli.md", read_doc("docs/reference/cli.md") } } do
    local subs = where[2]:match("`kwb%.cli%.main` then decides: a subcommand %((.-)%)")
    words = {}
    for w in (subs or ""):gmatch("`([%w-]+)`") do words[#words + 1] = w end
    t.eq(table.concat(words, " "), table.concat(names, " "), "the subcommands in " .. where[1])
  end
  local glossary = doc:match("%*%*subcommands%*%*: (.-)%(")
  words = {}
  for w in (glossary or ""):gmatch("`([%w-]+)`") do words[#words + 1] = w end
  t.eq(table.concat(words, " "), table.concat(names, " "), "the subcommands in the glossary")
  local version = require("kwb.core").cache_schema_version
  t.eq(tonumber(doc:match("%*%*schema version%*%*: the cache's schema is version (%d+)")), version, "the schema")
  t.eq(tonumber(read_doc("docs/reference/cache.md"):match("## Schema %(version (%d+);")), version,
       "the schema in docs/reference/cache.md")
  -- the layout names every folder of lua/kwb and every module in it (a
  -- folder's under its own line or the lines after it)
  local layout = doc:match("\n    lua/kwb/ (.-)\n    luajit/") or ""
  local missing = {}
  local p = assert(io.popen("cd lua/kwb && find . -name '*.lua' | LC_ALL=C sort"))
  for file in p:lines() do
    local folder, m = file:match("^%./(.-)/?([%w_]+)%.lua$")
    local top = folder:match("^[^/]+")
    local from = top and layout:find("\n      " .. top .. "/", 1, true) or 1
    if top and from == 1 then missing[#missing + 1] = top .. "/"
    elseif not layout:find("%f[%w_]" .. m .. "%f[^%w_]", from) then missing[#missing + 1] = file:sub(3) end
  end
  p:close()
  t.eq(table.concat(missing, " "), "", "modules the layout does not name")
end)

-- docs/architecture.md is a map: short, with the detail in docs/reference/.
t.test("architecture_md_is_a_map_of_at_most_520_lines", function()
  local n = select(2, read_doc("docs/architecture.md"):gsub("\n", "\n"))
  t.truthy(n <= 520, "docs/architecture.md has " .. n .. " lines (a map: at most 520; the detail goes to docs/reference/)")
end)

-- Every page architecture.md links under reference/ exists, every page of
-- docs/reference/ is linked from it, and every link between the pages
-- (docs/reference/X.md to Y.md or ../architecture.md) names a file there.
t.test("architecture_md_links_every_reference_page_and_only_pages_that_exist", function()
  local function exists(path)
    local f = io.open(path, "rb")
    if f then f:close() end
    return f ~= nil
  end
  local pages = {}
  local p = assert(io.popen("ls docs/reference"))
  for file in p:lines() do
    if file:match("%.md$") then pages[#pages + 1] = file end
  end
  p:close()
  t.truthy(#pages > 0, "docs/reference/ has pages")
  local doc = read_doc("docs/architecture.md")
  local linked, broken, unlinked = {}, {}, {}
  for target in doc:gmatch("%]%(reference/([^)#]+)[^)]*%)") do
    linked[target] = true
    if not exists("docs/reference/" .. target) then broken[#broken + 1] = "architecture.md -> reference/" .. target end
  end
  for _, page in ipairs(pages) do
    if not linked[page] then unlinked[#unlinked + 1] = page end
    for target in read_doc("docs/reference/" .. page):gmatch("%]%(([^)#:]+%.md)[^)]*%)") do
      if not exists("docs/reference/" .. target) then broken[#broken + 1] = page .. " -> " .. target end
    end
  end
  t.eq(table.concat(broken, ", "), "", "links to pages that do not exist")
  t.eq(table.concat(unlinked, ", "), "", "pages of docs/reference/ that architecture.md does not link")
end)

objects.cache:close()
t.done()
