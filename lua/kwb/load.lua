-- kwb/load.lua: kwb.load "recipes/x.lua" -> the recipe that file returns,
-- for the REPL: r:try { ... }, r.accept = ..., r:run { candidates = 50 }.
local recipe = require "kwb.recipe"

local M = {}

function M.load(path)
  if type(path) ~= "string" then error("kwb.load expects a recipe file path", 2) end
  local chunk, err = loadfile(path)
  if not chunk then error(err, 2) end
  local r = recipe.with_file(path, chunk)
  if not recipe.is_recipe(r) then
    error(string.format("%s returns %s, not a recipe (end it with: return kwb.recipe { ... })", path, type(r)), 2)
  end
  return r
end

return setmetatable(M, { __call = function(_, path) return M.load(path) end })
