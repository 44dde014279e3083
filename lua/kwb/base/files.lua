-- kwb/base/files.lua: files as kwb names them (scripts see it as kwb.files):
-- paths relative to where kwb was started, whole files read, programs found
-- on $PATH.
local core = require "kwb.core"

local M = {}

-- read_file(path) -> its contents | nil, message
-- resolve(path) -> path, absolute when relative: against the directory kwb
-- was started in (a worker, which runs in its scratch directory, gets it as
-- KWB_ORIGIN). Files of the tree (kernels/...) are named relative to it.
-- which(prog) -> the first executable file named prog in a directory of
-- $PATH (prog itself when it names a path), or nil.
function M.which(prog)
  if prog:find("/", 1, true) then return core.executable(prog) and prog or nil end
  for dir in (os.getenv("PATH") or ""):gmatch("[^:]+") do
    local path = dir .. "/" .. prog
    if core.executable(path) then return path end
  end
  return nil
end

function M.resolve(path)
  if path:sub(1, 1) == "/" then return path end
  local origin = os.getenv("KWB_ORIGIN") or core.cwd()
  if not origin then return path end
  return origin .. "/" .. path:gsub("^%./", "")
end

function M.read_file(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local s = f:read("a")
  f:close()
  return s
end

-- absolute(path) -> resolve(path), raising where it cannot be absolute (no
-- working directory): what a worker, in a directory of its own, is sent
function M.absolute(path)
  local abs = M.resolve(path)
  if abs:sub(1, 1) ~= "/" then error("cannot make " .. path .. " absolute: no working directory", 0) end
  return abs
end

return M
