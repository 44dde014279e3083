-- kwb.loop.codes: a session's duplicates, candidates that build to code
-- measured before (run.md, "Duplicates"): which digests of built code the
-- session's context has measured, and the result each was first measured in.
-- The session s keeps the map (s.codes); these functions read and extend it.

local M = {}

-- ids(s) -> { [code digest] = the id of the first result known under the
-- session's context with a build of that code }, read from the cache once
-- and kept up to date as results are recorded (note). A duplicate's
-- own build is never its code's original; nor is a best still due its
-- put-off sanitizer run elsewhere.
function M.ids(s)
  if s.codes then return s.codes end
  local of = s.store:codes(s.ctx)
  s.codes = {}
  for _, r in ipairs(s.store:results(s.ctx)) do
    local code = of[r.id]
    if code and not s.codes[code] and r.outcome ~= "duplicate" and not s:due_elsewhere(r) then
      s.codes[code] = r.id
    end
  end
  return s.codes
end

-- measured(s, id) -> the digests of ids(s), sorted: what a measurement's
-- request names as measured (kwb.measure.request's codes), less candidate
-- id's own (a candidate measured again is no duplicate of itself)
function M.measured(s, id)
  local list = {}
  for code, of in pairs(M.ids(s)) do
    if of ~= id then list[#list + 1] = code end
  end
  table.sort(list)
  return list
end

-- note(s, res): a recorded result's code, the first of its digest, for the
-- candidates that follow
function M.note(s, res)
  if res.code and res.outcome ~= "duplicate" and s.codes and not s.codes[res.code] then
    s.codes[res.code] = res.id
  end
end

-- original(s, res) -> the result a duplicate's code was measured in, or nil
-- where it is no longer known (gone from the cache since the request was made).
function M.original(s, res)
  local id = s.codes and s.codes[res.code]
  local of = id and s.store:known(s.ctx, id)
  if of and not s:due_elsewhere(of) then return of end
end

return M
