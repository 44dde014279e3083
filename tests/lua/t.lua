-- tests/lua/t.lua: a small harness for Lua tests run as `kwb tests/lua/test_x.lua`.
--   local t = require "t"
--   t.test("buffer_fill_is_deterministic", function() t.eq(a, b) end)
--   t.done()
-- Each test prints "ok name" or "FAIL name: message"; done() exits 1 if any failed.
local M = { failed = 0 }

local function show(v)
  return type(v) == "string" and string.format("%q", v) or tostring(v)
end

function M.eq(got, want, what)
  if got ~= want then
    error(string.format("%s: got %s, want %s", what or "value", show(got), show(want)), 2)
  end
end

function M.near(got, want, tol, what)
  if type(got) ~= "number" or math.abs(got - want) > tol then
    error(string.format("%s: got %s, want %s (tol %g)", what or "value", show(got), show(want), tol), 2)
  end
end

function M.truthy(v, what)
  if not v then error((what or "value") .. " is " .. show(v), 2) end
  return v
end

-- Expect fn to raise an error whose message contains `pattern` (plain text).
function M.raises(fn, pattern)
  local ok, err = pcall(fn)
  if ok then error("expected an error containing '" .. pattern .. "'", 2) end
  if not tostring(err):find(pattern, 1, true) then
    error(string.format("error %s does not contain '%s'", show(tostring(err)), pattern), 2)
  end
end

function M.test(name, fn)
  local ok, err = xpcall(fn, debug.traceback)
  if ok then print("ok " .. name)
  else
    M.failed = M.failed + 1
    print("FAIL " .. name .. ": " .. tostring(err))
  end
end

-- readable_dir(name) -> a fresh directory that kwb's workers (other uids)
-- can read, for recipes a test writes and runs (the runner's own directory
-- is private); removed by done().
local made = {}
function M.readable_dir(name)
  local p = io.popen("mktemp -d /tmp/kwb-" .. name .. ".XXXXXX")
  local dir = p:read("l")
  p:close()
  assert(dir and os.execute("chmod 755 '" .. dir .. "'"), "cannot make a readable directory")
  made[#made + 1] = dir
  return dir
end

function M.done()
  for _, d in ipairs(made) do os.execute("rm -rf '" .. d .. "'") end
  if M.failed > 0 then os.exit(1) end
end

return M
