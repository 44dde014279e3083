-- tools/man.lua: the sections of docs/kwb.1 that lua/kwb/help/init.lua describes
-- (options, commands, run options, recipe fields, the Lua API, the
-- environment), written between the page's two marker lines; the rest of
-- the page is written by hand.
--   ./kwb tools/man.lua docs/kwb.1           rewrite the generated part (make man)
--   ./kwb tools/man.lua --check docs/kwb.1   exit 1 when it is not what help.lua makes
local help = require "kwb.help"
local api = require "kwb.help.api"

local BEGIN = '.\\" kwb.help: begin (tools/man.lua writes what lies between these two lines; make man)'
local END = '.\\" kwb.help: end'

-- Text as troff: backslashes and hyphens escaped, no line taken for a request.
local function esc(s)
  s = s:gsub("\\", "\\e"):gsub("%-", "\\-")
  return (s:gsub("^([%.'])", "\\&%1"))
end

local out = {}
local function put(l) out[#out + 1] = l end
local function item(head, text)   -- .TP, the head bold
  put(".TP")
  put("\\fB" .. esc(head) .. "\\fR")
  put(esc(text))
end

put(".SH OPTIONS")
for _, o in ipairs(help.options) do item(o[1], o[2]) end

put(".SH COMMANDS")
for _, c in ipairs(help.commands) do
  item(c.usage, c.text)
  if c.subcommands or c.options then
    put(".RS")
    for _, s in ipairs(c.subcommands or c.options) do item(s[1], s[2]) end
    put(".RE")
  end
end
put(".PP")
put("Every command takes \\fB\\-\\-help\\fR.")

put(".SH RUN OPTIONS")
put("Given after a recipe's file, as \\fB\\-\\-opt value\\fR or \\fB\\-\\-opt=value\\fR:")
for _, o in ipairs(help.run_options) do item(o[1], o[2]) end

put(".SH RECIPE FIELDS")
put("A recipe file returns \\fBkwb.recipe { ... }\\fR with these fields; a wrong or unknown one is an error naming")
put("the file, the line and the field. Paths are relative to the recipe's file.")
for _, f in ipairs(help.recipe_fields) do item(f[1], f[2]) end

put(".SH LUA API")
put("What a script, a recipe or the REPL can call (\\fBhelp(x)\\fR at the REPL prints the same).")
put("Receivers: buf (host buffer), dbuf (device buffer), mod (host module), cmod (CUDA module), fn (host")
put("kernel), sb (sandbox), plan (launch plan), cache, recipe, problem. \"| nil, message, info\" is the")
put("expected-failure form: info.code names the failure.")
local group
for _, e in ipairs(api) do
  local g = e[1]:match("^(.*)[%.:][^%.:]+$") or e[1]
  if g == "kwb.recipe" then g = "kwb" end
  if g ~= group then
    group = g
    put(".SS " .. esc(g))
  end
  item(e[2], e[3])
end

put(".SH ENVIRONMENT")
for _, v in ipairs(help.env) do item(v[1], v[2]) end

local generated = table.concat(out, "\n")

local check = arg[1] == "--check"
local path = check and arg[2] or arg[1]
if not path then
  io.stderr:write("usage: kwb tools/man.lua [--check] docs/kwb.1\n")
  os.exit(2)
end
local f = assert(io.open(path))
local page = f:read("a")
f:close()
local a, b = page:find(BEGIN, 1, true)
local c = page:find(END, 1, true)
if not a or not c then
  io.stderr:write(path, ": no marker lines (", BEGIN, " and ", END, ")\n")
  os.exit(1)
end
local made = page:sub(1, b) .. "\n" .. generated .. "\n" .. page:sub(c)
if check then
  if made ~= page then
    io.stderr:write(path, " is not what lua/kwb/help/init.lua makes of it: run make man\n")
    os.exit(1)
  end
  print(path .. ": up to date")
  return
end
if made ~= page then
  f = assert(io.open(path, "w"))
  f:write(made)
  f:close()
end
print(string.format("%s: %d generated lines", path, #out))
