-- kwb/base/args.lua: kwb's one option parser, for every command's words and a
-- recipe's run options: positionals and --options in any order, `--name
-- value` or `--name=value`, "--" ending the options. (Only kwb's own options
-- before a file or command, -e, --cache, -v, are read in C, core/main.c:
-- they decide how the Lua state is made.)
--
--   local pos, opts = args.parse({ ... }, { device = "value", id = "list", json = "flag" })
--
-- spec maps an option's name to its kind, "value", "list" (repeatable) or
-- "flag", or to a table { kind, as = the field it sets (default: the name,
-- "-" as "_"), conv = function(text) -> value or nil, what = what conv takes
-- ("a positive integer"), set = a flag's value (default true) }.
-- how (optional): { aliases = { h = "help" } (single-dash words), pass = true
-- (an option not in spec is a positional: a first pass that takes some
-- options out and leaves the rest), noun = "run option" (an unknown one's
-- message), known = { "--a", ... } (the list that message gives; default
-- spec's names, sorted) }.
-- Returns pos, opts, or nil and a message naming the option.
local M = {}

local function unknown(word, spec, how)
  local known = how.known
  if not known then
    known = {}
    for k in pairs(spec) do known[#known + 1] = "--" .. k end
    table.sort(known)
  end
  return string.format("unknown %s '%s'%s", how.noun or "option", word,
                       #known > 0 and " (known: " .. table.concat(known, ", ") .. ")" or "")
end

-- take(o, name, val, words, i) -> the option's value, the index of the last
-- word it used | nil, message
local function take(o, name, val, words, i)
  if not val then
    i = i + 1
    val = words[i]
    if not val then
      return nil, string.format("'--%s' needs %s", name, o.what and o.what .. ", got nothing" or "a value")
    end
  end
  if not o.conv then return val, i end
  local x = o.conv(val)
  if x == nil or x == false then
    return nil, string.format("'--%s' needs %s, got %s", name, o.what or "a value",
                              val == "" and "an empty one" or "'" .. val .. "'")
  end
  return x, i
end

function M.parse(words, spec, how)
  how = how or {}
  local pos, opts, i, rest = {}, {}, 1, false
  while i <= #words do
    local w = words[i]
    local name, val
    if not rest and w:sub(1, 2) == "--" and #w > 2 then
      name, val = w:match("^%-%-([^=]+)=(.*)$")
      name = name or w:sub(3)
    elseif not rest and how.aliases and w:match("^%-%w$") and how.aliases[w:sub(2)] then
      name = how.aliases[w:sub(2)]
    end
    local o = name and spec[name]
    if type(o) == "string" then o = { o } end
    if not rest and w == "--" then
      rest = true
      if how.pass then pos[#pos + 1] = w end
    elseif not o then
      if name and not how.pass then return nil, unknown(w:match("^[^=]*"), spec, how) end
      pos[#pos + 1] = w
    else
      local field = o.as or name:gsub("%-", "_")
      if o[1] == "flag" then
        if val then return nil, "'--" .. name .. "' takes no value" end
        if o.set ~= nil then opts[field] = o.set else opts[field] = true end
      else
        local x, at = take(o, name, val, words, i)
        if x == nil then return nil, at end
        i = at
        if o[1] == "list" then
          opts[field] = opts[field] or {}
          table.insert(opts[field], x)
        else
          opts[field] = x
        end
      end
    end
    i = i + 1
  end
  return pos, opts
end

-- Conversions for spec's conv.
function M.positive_integer(v) local n = math.tointeger(tonumber(v)); return n and n > 0 and n or nil end
function M.nonempty(v) return v ~= "" and v or nil end

return M
