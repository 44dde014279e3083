-- kwb/cache/maint.lua: the candidate cache's upkeep: sizes and compression
-- (stats), dropping unreferenced blobs (gc), checking and repairing blob
-- copies (check), SQLite's own integrity check. Methods of kwb.cache's Cache.
local base = require "kwb.cache.base"
local core = require "kwb.core"

local Cache = base.Cache
local canon, fail, decode = base.canon, base.fail, base.decode
local check_string, check_table, check_outcome = base.check_string, base.check_table, base.check_outcome

function Cache:stats()
  local function one(sql) return self.db:exec(sql)[1] end
  local b = one("SELECT count(*) AS n, coalesce(sum(raw_size), 0) AS raw, coalesce(sum(stored_size), 0) AS stored, "
                .. "coalesce(sum(depth = 0), 0) AS full, coalesce(max(depth), 0) AS depth FROM blob")
  local m = one("SELECT count(*) AS n, coalesce(sum(length(frame)), 0) AS bytes FROM mirror")
  local stored = b.stored + m.bytes   -- both copies of a mirrored frame count
  local s = {
    candidates = one("SELECT count(*) AS n FROM candidate").n,
    problems = one("SELECT count(DISTINCT problem) AS n FROM candidate").n,
    builds = one("SELECT count(*) AS n FROM build").n,
    results = one("SELECT count(*) AS n FROM result").n,
    runs = one("SELECT count(*) AS n FROM run").n,
    blobs = b.n, full_blobs = b.full, delta_blobs = b.n - b.full, max_depth = b.depth,
    mirrored_blobs = m.n, mirror_bytes = m.bytes,
    raw_bytes = b.raw, stored_bytes = stored,
    ratio = stored > 0 and b.raw / stored or nil,
    schema = core.cache_schema_version,
  }
  local size = 0
  for _, suffix in ipairs { "", "-wal" } do
    local f = io.open(self.path .. suffix, "rb")
    if f then
      size = size + f:seek("end")
      f:close()
    end
  end
  s.file_bytes = size
  return s
end

-- gc() removes blobs no record needs (directly or as a delta base) and the
-- mirrors of blobs that are no longer anyone's base, then compacts the file.
-- Records are never removed. -> {blobs = n, bytes = n} (bytes: both copies)
function Cache:gc(opts)
  opts = check_table(opts, "options")
  local removed = self:transaction(function()
    local live = "WITH RECURSIVE live(id) AS ("
      .. "SELECT source FROM candidate UNION SELECT log FROM build WHERE log IS NOT NULL "
      .. "UNION SELECT binary FROM build WHERE binary IS NOT NULL "
      .. "UNION SELECT request FROM transcript UNION SELECT reply FROM transcript WHERE reply IS NOT NULL "
      .. "UNION SELECT blob.base FROM blob JOIN live ON blob.id = live.id WHERE blob.base IS NOT NULL) "
    local r = self.db:exec(live .. "SELECT count(*) AS n, coalesce(sum(stored_size), 0) AS bytes FROM blob "
                           .. "WHERE id NOT IN (SELECT id FROM live)")[1]
    self.db:exec(live .. "DELETE FROM blob WHERE id NOT IN (SELECT id FROM live)")
    local stale = "FROM mirror WHERE id NOT IN (SELECT base FROM blob WHERE base IS NOT NULL)"
    local m = self.db:exec("SELECT coalesce(sum(length(frame)), 0) AS bytes " .. stale)[1]
    self.db:exec("DELETE " .. stale)
    return { blobs = r.n, bytes = r.bytes + m.bytes }
  end)
  if opts.vacuum ~= false then self.db:script("VACUUM") end
  self.db:exec("PRAGMA wal_checkpoint(TRUNCATE)")
  return removed
end

local sense = require "kwb.cache.sense"

-- Every stored row that makes no sense (kwb.cache.sense: the checks import
-- applies to a bundle's rows) -> rows checked, {{table, what, message}...}.
local function unsound_rows(db)
  local out, n = {}, 0
  local queries = {
    candidate = "SELECT * FROM candidate ORDER BY created, id",
    build = "SELECT * FROM build ORDER BY created, id",
    result = "SELECT r.*, c.problem AS problem FROM result r LEFT JOIN candidate c ON c.id = r.candidate "
             .. "ORDER BY r.created, r.candidate, r.device, r.shape",
    run = "SELECT * FROM run ORDER BY started, id",
    lesson = "SELECT * FROM lesson ORDER BY created, id",
  }
  for _, tbl in ipairs { "candidate", "build", "result", "run", "lesson" } do
    for _, row in ipairs(db:exec(queries[tbl])) do
      n = n + 1
      local why = sense.why(tbl, row) or tbl == "result" and sense.floor_why(row, row.problem)
      if why then out[#out + 1] = { table = tbl, what = sense.what(tbl, row), message = why, row = row } end
    end
  end
  return n, out
end

local function finite_time(x) return type(x) == "number" and x == x and x >= 0 and x < math.huge end

-- What --repair does with a row that makes no sense -> "removed" or "cleared":
-- a result is removed (its candidate is then evaluated again where a run
-- meets it; its measurements stay as history), and so is a build (made again
-- when needed) and a lesson (advice, not a record); a candidate or a run, a
-- record, is kept with the fields that make no sense cleared (an outcome kwb
-- does not give, a field that is not a string, a time that is not one; a
-- run's settings that are not an object become {}, an end before its start
-- or a funnel that is not one is dropped).
local function repair_row(db, e)
  local row = e.row
  if e.table == "result" then
    db:exec("DELETE FROM result WHERE candidate = ?1 AND device = ?2 AND shape = ?3", row.candidate, row.device, row.shape)
    return "removed"
  elseif e.table == "build" or e.table == "lesson" then
    db:exec("DELETE FROM " .. e.table .. " WHERE id = ?1", row.id)
    return "removed"
  elseif e.table == "candidate" then
    if row.outcome ~= nil and not require("kwb.base.outcomes").known(row.outcome) then
      db:exec("UPDATE candidate SET outcome = NULL WHERE id = ?1", row.id)
    end
    for _, k in ipairs { "parent", "strategy", "model", "rationale", "run" } do
      if row[k] ~= nil and type(row[k]) ~= "string" then db:exec("UPDATE candidate SET " .. k .. " = NULL WHERE id = ?1", row.id) end
    end
    if not finite_time(row.created) then db:exec("UPDATE candidate SET created = 0 WHERE id = ?1", row.id) end
    return "cleared"
  end
  local settings = base.decode(row.settings)
  if type(settings) ~= "table" then settings = {} end
  if settings.imported ~= nil and type(settings.imported) ~= "string" then settings.imported = nil end
  local started = finite_time(row.started) and row.started or 0
  local ended = finite_time(row.ended) and row.ended >= started and row.ended or nil
  local funnel = row.funnel
  if funnel ~= nil and sense.why("run", { settings = "{}", started = 0, funnel = funnel }) then funnel = nil end
  db:exec("UPDATE run SET settings = ?2, started = ?3, ended = ?4, funnel = ?5 WHERE id = ?1", row.id,
          base.canon(settings), started, ended, funnel)
  return "cleared"
end

-- check{repair = false} decodes every stored copy of every blob's frame, and
-- checks every candidate, build, result, run and lesson row for sense.
-- -> {blobs = n checked, frames = n copies checked, ok = true if nothing was found,
--     rows = n rows checked, unsound = {{table, what, message}...},   -- rows that make no sense
--     corrupt = {{blob, frame = "ok"|"corrupt", mirror = "ok"|"corrupt"|"none",
--                 recoverable, repaired, message}...},   -- a copy that fails
--     unreadable = {{blob, message}...},   -- blobs whose base is lost (so they are too)
--     unmirrored = {id...}}                -- bases without a mirror (repair adds one)
-- A corrupt copy with a sound other copy is recoverable: reads use the sound
-- one, and repair = true rewrites the corrupt one from it. With repair = true
-- a row that makes no sense is put right (repair_row: e.repaired says how)
-- and the rows are checked again: `unsound` then lists what is left.
function Cache:check(opts)
  opts = check_table(opts, "options")
  local r = { blobs = 0, frames = 0, corrupt = {}, unreadable = {}, unmirrored = {} }
  local rows = self.db:exec("SELECT id, EXISTS(SELECT 1 FROM mirror WHERE mirror.id = blob.id) AS mirrored, "
                            .. "EXISTS(SELECT 1 FROM blob AS d WHERE d.base = blob.id) AS is_base "
                            .. "FROM blob ORDER BY depth, id")
  local function pass()
    for _, row in ipairs(rows) do
      r.blobs = r.blobs + 1
      local h, msg = self.db:check_blob(row.id)
      if not h then
        r.unreadable[#r.unreadable + 1] = { blob = row.id, message = msg }
      else
        r.frames = r.frames + (h.mirror == "none" and 1 or 2)
        if h.frame ~= "ok" or h.mirror == "corrupt" then
          local e = { blob = row.id, frame = h.frame, mirror = h.mirror, message = h.message,
                      recoverable = h.frame == "ok" or h.mirror == "ok", repaired = false }
          if opts.repair and e.recoverable then e.repaired = assert(self.db:repair_blob(row.id)) end
          r.corrupt[#r.corrupt + 1] = e
        end
        if row.is_base == 1 and row.mirrored == 0 then
          if opts.repair and h.frame == "ok" then self.db:mirror_base(row.id)
          else r.unmirrored[#r.unmirrored + 1] = row.id end
        end
      end
    end
  end
  if opts.repair then self:transaction(pass) else pass() end
  r.rows, r.unsound = unsound_rows(self.db)
  if opts.repair and #r.unsound > 0 then
    r.repaired = r.unsound
    self:transaction(function()
      for _, e in ipairs(r.repaired) do e.repaired = repair_row(self.db, e) end
    end)
    r.rows, r.unsound = unsound_rows(self.db)
  end
  for _, list in ipairs { r.unsound, r.repaired or {} } do
    for _, e in ipairs(list) do e.row = nil end
  end
  r.ok = #r.corrupt == 0 and #r.unreadable == 0 and #r.unmirrored == 0 and #r.unsound == 0
  return r
end

-- integrity() -> "ok" or SQLite's list of problems
function Cache:integrity()
  local rows = self.db:exec("PRAGMA integrity_check")
  local out = {}
  for i, r in ipairs(rows) do out[i] = r.integrity_check end
  return table.concat(out, "\n")
end

