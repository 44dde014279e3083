-- kwb/base/args.lua: the subcommands' words: positionals and --options in any
-- order, `--name value` or `--name=value`, "--" ending the options.
--   local pos, opts = args.parse({ ... }, { device = "value", id = "list", json = "flag" })
-- spec maps an option's name to "value", "list" (repeatable) or "flag".
-- Returns pos, opts, or nil and a message naming the option.
local M = {}

function M.parse(words, spec)
  local pos, opts, i, rest = {}, {}, 1, false
  while i <= #words do
    local w = words[i]
    if not rest and w == "--" then rest = true
    elseif not rest and w:sub(1, 2) == "--" and #w > 2 then
      local name, val = w:match("^%-%-([^=]+)=(.*)$")
      name = name or w:sub(3)
      local kind = spec[name]
      if not kind then
        local known = {}
        for k in pairs(spec) do known[#known + 1] = "--" .. k end
        table.sort(known)
        return nil, string.format("unknown option '--%s'%s", name,
                                  #known > 0 and " (known: " .. table.concat(known, ", ") .. ")" or "")
      end
      if kind == "flag" then
        if val then return nil, "'--" .. name .. "' takes no value" end
        opts[name] = true
      else
        if not val then
          i = i + 1
          val = words[i]
          if not val then return nil, "'--" .. name .. "' needs a value" end
        end
        if kind == "list" then
          opts[name] = opts[name] or {}
          table.insert(opts[name], val)
        else
          opts[name] = val
        end
      end
    else
      pos[#pos + 1] = w
    end
    i = i + 1
  end
  return pos, opts
end

return M
