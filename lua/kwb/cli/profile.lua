-- kwb/cli/profile.lua: `kwb profile ID [--shape S] [--recipe FILE] [--csv FILE]
-- [--json]`: a cached CUDA candidate's profile (kwb.checks.profile) through its
-- recipe's session.
local ids = require "kwb.base.ids"
local profile = require "kwb.checks.profile"

local M = {}

-- recipe_of(cache, id) -> the file of the recipe whose run made the
-- candidate | nil, message. A run a bundle brought names a file of another
-- machine's: never loaded on its word.
function M.recipe_of(cache, id)
  local got, msg = cache:get(id)
  if not got then return nil, msg end
  if got.run then
    for _, r in ipairs(cache:runs()) do
      local bundle = r.id == got.run and require("kwb.cache").imported_from(r.settings)
      if bundle then
        return nil, string.format("candidate %s came in bundle %s, whose run names a recipe file of another "
                                  .. "machine's: name it with --recipe FILE", ids.short(got.id), bundle)
      end
      if r.id == got.run then return r.recipe end
    end
  end
  return nil, string.format("the cache does not say which recipe made candidate %s: name it with --recipe FILE",
                            ids.short(got.id))
end

function M.main(...)
  local help = require "kwb.help"
  local usage = "usage: " .. help.command("profile").usage
  local pos, opts = require("kwb.base.args").parse({ ... }, { shape = "value", recipe = "value", csv = "value", json = "flag",
                                                         help = "flag" })
  if pos and (opts.help or pos[1] == "-h") then
    io.write(help.command_help("profile"))
    return 0
  end
  if not pos or #pos ~= 1 then
    io.stderr:write("kwb profile: ", pos and "it takes one candidate ID" or opts, "\n", usage, "\n")
    return 2
  end
  local ok, res = pcall(function()
    local st = require("kwb.loop.store").open_existing()   -- (a profile is of a candidate the cache has)
    local file = opts.recipe
    if not file then
      local why
      file, why = M.recipe_of(st.cache, pos[1])
      if not file then error(why, 0) end
    end
    local recipe = require("kwb.load").load(file)
    return recipe:session():profile(pos[1], opts.shape, opts.csv)
  end)
  if not ok then
    io.stderr:write("kwb profile: ", tostring(res), "\n")
    return 1
  end
  if opts.json then
    print(require("cjson").encode(res))
    return 0
  end
  for _, l in ipairs(profile.text(res, res.shape)) do print(l) end
  return 0
end


return M
