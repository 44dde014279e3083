-- kwb/base/ids.lua: how kwb shows an id (a candidate's, a run's): its first
-- 8 hex digits, everywhere. Wherever an id is asked for, any prefix of it
-- that names one candidate or run resolves (kwb.cache's resolve).
local M = { digits = 8 }

-- short(id) -> its first 8 hex digits (nil for nil)
function M.short(id)
  return id and id:sub(1, M.digits)
end

return M
