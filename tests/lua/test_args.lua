-- tests/lua/test_args.lua: kwb.base.args, the one option parser every
-- command and a recipe's run options go through.
local t = require "t"
local args = require "kwb.base.args"

local spec = {
  json = "flag", id = "list", device = "value",
  budget = { "value", as = "candidates", conv = args.positive_integer, what = "a positive integer" },
  quiet = { "flag", as = "mode", set = "quiet" },
  help = "flag",
}

t.test("args_positionals_and_options_in_any_order", function()
  local pos, o = args.parse({ "a", "--json", "--id", "x", "b", "--id=y", "--budget=5", "--quiet", "--", "--json" }, spec)
  t.eq(table.concat(pos, " "), "a b --json", "positionals, and what follows --")
  t.eq(o.json, true)
  t.eq(table.concat(o.id, " "), "x y")
  t.eq(o.candidates, 5, "--budget's value converted, under its field")
  t.eq(o.mode, "quiet")
end)

t.test("args_errors_name_the_option", function()
  t.eq(select(2, args.parse({ "--frob" }, spec)),
       "unknown option '--frob' (known: --budget, --device, --help, --id, --json, --quiet)")
  t.eq(select(2, args.parse({ "--frob=1" }, spec, { noun = "run option", known = { "--json" } })),
       "unknown run option '--frob' (known: --json)")
  t.eq(select(2, args.parse({ "--device" }, spec)), "'--device' needs a value")
  t.eq(select(2, args.parse({ "--budget" }, spec)), "'--budget' needs a positive integer, got nothing")
  t.eq(select(2, args.parse({ "--budget", "0" }, spec)), "'--budget' needs a positive integer, got '0'")
  t.eq(select(2, args.parse({ "--budget=" }, spec)), "'--budget' needs a positive integer, got an empty one")
  t.eq(select(2, args.parse({ "--json=1" }, spec)), "'--json' takes no value")
end)

t.test("args_aliases_and_a_first_pass_that_leaves_the_rest", function()
  local pos, o = args.parse({ "-h" }, spec, { aliases = { h = "help" } })
  t.eq(#pos, 0)
  t.eq(o.help, true)
  t.eq(args.parse({ "-h" }, spec)[1], "-h", "without the alias -h is a positional")
  pos, o = args.parse({ "ls", "--cache", "/tmp/x.db", "--json", "--budget=5", "--", "--cache", "y" },
                      { cache = "value" }, { pass = true })
  t.eq(o.cache, "/tmp/x.db")
  t.eq(table.concat(pos, " "), "ls --json --budget=5 -- --cache y", "the rest as it was, in order")
end)

t.done()
