-- kwb/base/site.lua: where a recipe's fields are written, and the errors
-- that name them: the file's lines, the line of a field, schema errors
-- ("file:line: recipe field ..."), and the instruction bound the recipe's
-- own functions run under. kwb.recipe's checker and recipe objects use it.
local nearest = require "kwb.base.nearest"

local M = {}

-- The recipe files being loaded, innermost last (kwb.recipe.with_file pushes
-- and pops them): what a problem module resolves its relative paths from
-- (kwb.problems.torch's file).
M.loading = {}

-- Schema errors are raised as objects that print as their one sentence, so
-- the top level shows "recipes/x.lua:12: recipe field ..." without a
-- traceback into kwb's own files.
local SchemaError = { __tostring = function(e) return e.message end }
M.SchemaError = SchemaError

function M.raise(site, line, msg)
  error(setmetatable({ code = "bad-recipe", message = string.format("%s:%d: %s", site.file, line, msg),
                       file = site.file, line = line }, SchemaError), 0)
end

-- How a value is named in an error: "\"x\"", "a table", "number 3", "nothing".
function M.describe(v)
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "table" then return "a table" end
  return tostring(v) == "nil" and "nothing" or type(v) .. " " .. tostring(v)
end

function M.is_array(t)
  if type(t) ~= "table" then return false end
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n == #t
end

function M.read_lines(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local lines = {}
  for l in f:lines() do lines[#lines + 1] = l end
  f:close()
  return lines
end

-- The line of `field =` in the file at or after line `from` (nested fields:
-- each part after the previous), else `from`.
function M.field_line(site, field)
  if not site.lines or not field then return site.line end
  local line = site.line or 1
  for part in field:gmatch("[^%.%[%]]+") do
    if not part:match("^%d+$") then
      for i = line, #site.lines do
        local l = site.lines[i]:gsub("%-%-.*$", "")
        if l:match("^[%s{,]*" .. part .. "%s*=") or l:match("[{,]%s*" .. part .. "%s*=") then line = i; break end
      end
    end
  end
  return line
end

-- A recipe's accept, score and space.restrict run under an instruction
-- bound: at most M.call_steps Lua VM instructions a call (about a third of a
-- second), counted by a hook on the coroutine the call runs in, so one that
-- loops forever is an error naming the recipe's file and the field, not a
-- hang. Once the bound is passed every further instruction raises, so a pcall
-- inside the function cannot catch its way past it.
M.call_steps = 100000000

local Overrun = {}   -- the hook's error, told apart from the function's own

local function overrun()
  debug.sethook(coroutine.running(), function() error(Overrun, 0) end, "", 1)
  error(Overrun, 0)
end

-- bounded(site, field, fn, ...) -> fn(...) under the bound, or raises a
-- schema error at the field's line: the overrun, or fn's own error.
function M.bounded(site, field, fn, ...)
  local co = coroutine.create(fn)
  debug.sethook(co, overrun, "", M.call_steps)
  local res = table.pack(coroutine.resume(co, ...))
  local why
  if res[1] and coroutine.status(co) == "dead" then return table.unpack(res, 2, res.n)
  elseif res[1] then why = "yielded (it may not wait or yield)"
  elseif res[2] == Overrun then
    why = string.format("still running after %d Lua instructions (a loop that never ends?)", M.call_steps)
  else why = "failed: " .. tostring(res[2]) end
  M.raise(site, M.field_line(site, field), string.format("recipe field '%s': %s", field, why))
end

-- of(r) -> where recipe object r was written: its file's lines, read once.
function M.of(r)
  if not r._site then
    r._site = { file = r.file or "recipe", line = r.line or 1 }
    r._site.lines = r.file and M.read_lines(r.file)
  end
  return r._site
end

-- A checker: { site = , dir = } with these methods raises schema errors
-- naming the field and its line (kwb.recipe's Checker adds the field checks;
-- a reply's space block is checked with this one).
local Checker = {}
Checker.__index = Checker
M.Checker = Checker

-- fail(field, expected, got [, hint]); got == false: `expected` is the whole complaint.
function Checker:fail(field, expected, got, hint)
  local msg
  if got == false then msg = string.format("recipe field '%s': %s", field, expected)
  else msg = string.format("recipe field '%s': expected %s, got %s", field, expected, M.describe(got)) end
  if hint then msg = msg .. " " .. hint end
  M.raise(self.site, M.field_line(self.site, field), msg)
end

function Checker:unknown(field, names, prefix)
  local near = type(field) == "string" and nearest(field, names) or nil
  local msg = string.format("unknown recipe field '%s%s'", prefix or "", tostring(field))
  if near then msg = msg .. string.format(" (did you mean '%s%s'?)", prefix or "", near)
  else msg = msg .. " (known: " .. table.concat(names, ", ") .. ")" end
  M.raise(self.site, M.field_line(self.site, (prefix or "") .. tostring(field)), msg)
end

return M
