-- kwb/cache/lessons.lua: the lessons ledger's rows. A lesson is one sentence
-- a model's summary of a run's evidence taught (kwb.strategies.lessons), kept
-- per problem (its key) and device kind, with its technique tags and the
-- candidates that show it; its id is the SHA-256 of those, so the same lesson
-- is kept once, and a bundle's lesson is checked against its id. Methods of
-- kwb.cache's Cache.
local base = require "kwb.cache.base"
local core = require "kwb.core"

local Cache = base.Cache
local canon, decode = base.canon, base.decode
local check_string, check_table = base.check_string, base.check_table

local M = {}

-- id(problem, device, text, tags, ids) -> the lesson's id
function M.id(problem, device, text, tags, ids)
  return core.sha256("kwb-lesson-1\n" .. canon { problem = problem, device = device, text = text, tags = tags,
                                                  ids = ids })
end

-- The checks a lesson's fields meet, here and in a bundle (kwb.cache.sense):
-- why(text, tags, ids) -> nil, or what is wrong, in words.
M.tag_pattern = "^[a-z0-9][a-z0-9%-]*$"
M.tag_bytes, M.most_tags, M.text_bytes = 32, 4, 400

function M.why(text, tags, ids)
  if type(text) ~= "string" or not text:match("%S") then return "its text is empty" end
  if #text > M.text_bytes then return string.format("its text is %d bytes, over %d", #text, M.text_bytes) end
  if text:find("[%c]") then return "its text holds a control character" end
  if type(tags) ~= "table" or #tags < 1 or #tags > M.most_tags then
    return string.format("its tags are not a list of 1 to %d words", M.most_tags)
  end
  for _, tag in ipairs(tags) do
    if type(tag) ~= "string" or #tag > M.tag_bytes or not tag:match(M.tag_pattern) then
      return string.format("its tag %s is not a lowercase word (letters, digits and '-', at most %d bytes)",
                           type(tag) == "string" and ("'" .. tag .. "'") or tostring(tag), M.tag_bytes)
    end
  end
  if type(ids) ~= "table" or #ids < 1 then return "it names no candidate" end
  for _, id in ipairs(ids) do
    if type(id) ~= "string" or #id ~= 64 or not id:match("^%x+$") then
      return string.format("its candidate %s is not a candidate id (64 hex digits)", tostring(id))
    end
  end
  return nil
end

-- put_lessons { problem =, device =, run =, transcript =, created =, lessons =
-- { { text =, tags = { ... }, ids = { candidate id or prefix, ... } }, ... } }
-- -> the lessons' ids, in order. Each candidate must be in the cache; a
-- lesson already kept (the same problem, device, text, tags and ids) stays
-- as it was. All or nothing.
function Cache:put_lessons(s)
  check_table(s, "lessons")
  local problem = check_string(s.problem, "lessons.problem")
  local device = check_string(s.device, "lessons.device")
  local list = check_table(s.lessons, "lessons.lessons")
  if s.run ~= nil then check_string(s.run, "lessons.run") end
  if s.transcript ~= nil then check_string(s.transcript, "lessons.transcript") end
  local created = s.created or os.time()
  return self:transaction(function()
    local out = {}
    for i, l in ipairs(list) do
      local ids = {}
      for j, p in ipairs(check_table(l.ids, "lessons[" .. i .. "].ids")) do
        local id, msg = self:resolve(p)
        if not id then error(string.format("lessons[%d].ids[%d]: %s", i, j, msg), 0) end
        ids[j] = id
      end
      local why = M.why(l.text, l.tags, ids)
      if why then error(string.format("lessons[%d]: %s", i, why), 0) end
      local id = M.id(problem, device, l.text, l.tags, ids)
      self.db:exec("INSERT OR IGNORE INTO lesson(id, problem, device, pos, text, tags, ids, run, transcript, created) "
                   .. "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)", id, problem, device, i, l.text,
                   canon(l.tags, true), canon(ids, true), s.run, s.transcript, created)
      out[i] = id
    end
    return out
  end)
end

-- lessons([{ problem =, device = }]) -> the lessons kept (of that problem,
-- on that device kind, where given), oldest first, their tags and ids decoded:
-- { id, problem, device, pos, text, tags, ids, run, transcript, origin, created }
function Cache:lessons(f)
  f = check_table(f, "filters")
  local rows = self.db:exec("SELECT * FROM lesson WHERE (?1 IS NULL OR problem = ?1) AND (?2 IS NULL OR device = ?2) "
                            .. "ORDER BY created, run, pos, id", f.problem, f.device)
  for _, r in ipairs(rows) do
    r.tags, r.ids = decode(r.tags, {}), decode(r.ids, {})
  end
  return rows
end

return M
