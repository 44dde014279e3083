-- kwb/cache/bundle.lua: bundles, the files candidates travel in between
-- caches: export a chosen subset with its ancestors, builds, results, runs
-- and the lessons they show; import checks every record and hash first, then
-- adds everything in one transaction or nothing. Methods of kwb.cache's Cache.
local base = require "kwb.cache.base"
local core = require "kwb.core"

local Cache = base.Cache
local canon, fail, decode = base.canon, base.fail, base.decode
local check_string, check_table, check_outcome = base.check_string, base.check_table, base.check_outcome
local candidate_id_of_blob, build_id = base.candidate_id_of_blob, base.build_id
local lesson_id = require("kwb.cache.lessons").id

-- The columns a bundle carries. A build's code digest is not among them: a
-- candidate built here is never taken as a duplicate of another machine's
-- word on its code (kwb.loop.session's duplicates match builds made here).
local bundle_columns = {
  candidate = { "id", "problem", "parent", "strategy", "model", "rationale", "created", "source",
                "params", "flags", "outcome", "run" },
  build = { "id", "candidate", "arch", "toolchain", "ok", "log", "binary", "resources", "created" },
  result = { "candidate", "device", "shape", "outcome", "median", "verify", "timing", "clocks", "run",
             "created" },
  run = { "id", "recipe", "recipe_hash", "settings", "started", "ended", "funnel" },
  certificate = { "run", "pick", "body", "created" },   -- (a run's final round: kwb.loop.certify)
  -- (the lessons ledger: kwb.cache.lessons; its summary's transcript stays here, as a candidate's does)
  lesson = { "id", "problem", "device", "pos", "text", "tags", "ids", "run", "origin", "created" },
}
local required = {
  candidate = { id = "string", problem = "string", created = "number", source = "string",
                params = "string", flags = "string" },
  build = { id = "string", candidate = "string", arch = "string", toolchain = "string", ok = "number",
            resources = "string", created = "number" },
  result = { candidate = "string", device = "string", shape = "string", outcome = "string",
             verify = "string", timing = "string", clocks = "string", created = "number" },
  run = { id = "string", recipe = "string", recipe_hash = "string", settings = "string",
          started = "number" },
  certificate = { run = "string", pick = "string", body = "string", created = "number" },
  lesson = { id = "string", problem = "string", device = "string", pos = "number", text = "string", tags = "string",
             ids = "string", created = "number" },
}
local blob_refs = { candidate = { "source" }, build = { "log", "binary" } }

-- export(file, {problem =, ids = {prefix...}, outcome =, since =, binaries = true})
-- writes the matching candidates, their ancestors, builds, results and runs
-- (with each run's certificate), and every lesson all of whose candidates
-- are among them (so it reads the same on the other side).
-- -> counts | nil, msg, info
function Cache:export(file, f)
  check_string(file, "bundle file")
  f = check_table(f, "filters")
  local where, args = {}, {}
  if f.problem then args[#args + 1] = f.problem; where[#where + 1] = "problem = ?" .. #args end
  if f.since then args[#args + 1] = f.since; where[#where + 1] = "created >= ?" .. #args end
  if f.outcome then
    check_outcome(f.outcome)
    args[#args + 1] = f.outcome
    where[#where + 1] = string.format("(outcome = ?%d OR id IN (SELECT candidate FROM result WHERE outcome = ?%d))",
                                      #args, #args)
  end
  local selected = {}
  if f.ids then
    for _, p in ipairs(f.ids) do
      local id, msg, info = self:resolve(p)
      if not id then return nil, msg, info end
      selected[#selected + 1] = id
    end
  end
  if not f.ids or #where > 0 then
    local sql = "SELECT id FROM candidate" .. (#where > 0 and " WHERE " .. table.concat(where, " AND ") or "")
    local rows = self.db:exec(sql .. " ORDER BY created, id", table.unpack(args))
    local keep = {}
    if f.ids then for _, id in ipairs(selected) do keep[id] = true end end
    local out = {}
    for _, r in ipairs(rows) do
      if not f.ids or keep[r.id] then out[#out + 1] = r.id end
    end
    selected = out
  end
  -- the ancestors come along, so lineage reads the same on the other side
  local ids, seen = {}, {}
  for _, id in ipairs(selected) do base.ancestry(self.db, id, seen, ids) end
  table.sort(ids)
  local records, blobs, runs = {}, {}, {}
  local counts = { candidates = 0, builds = 0, results = 0, runs = 0, certificates = 0, lessons = 0 }
  local function add(tbl, row)
    local rec = {}
    for _, col in ipairs(bundle_columns[tbl]) do rec[col] = row[col] end
    records[#records + 1] = { table = tbl, json = canon(rec) }
    if row.run then runs[row.run] = true end
  end
  for _, id in ipairs(ids) do
    local c = self.db:exec("SELECT * FROM candidate WHERE id = ?1", id)[1]
    add("candidate", c)
    blobs[#blobs + 1] = c.source
    counts.candidates = counts.candidates + 1
    for _, b in ipairs(self.db:exec("SELECT * FROM build WHERE candidate = ?1 ORDER BY id", id)) do
      if f.binaries == false then b.binary = nil end
      add("build", b)
      if b.log then blobs[#blobs + 1] = b.log end
      if b.binary then blobs[#blobs + 1] = b.binary end
      counts.builds = counts.builds + 1
    end
    for _, r in ipairs(self.db:exec("SELECT * FROM result WHERE candidate = ?1 ORDER BY device, shape", id)) do
      add("result", r)
      counts.results = counts.results + 1
    end
  end
  local exported = {}
  for _, id in ipairs(ids) do exported[id] = true end
  for _, l in ipairs(self.db:exec("SELECT * FROM lesson ORDER BY created, run, pos, id")) do
    local all = true
    for _, id in ipairs(decode(l.ids, {})) do all = all and exported[id] or false end
    if all then
      add("lesson", l)
      counts.lessons = counts.lessons + 1
    end
  end
  local run_ids = {}
  for id in pairs(runs) do run_ids[#run_ids + 1] = id end
  table.sort(run_ids)
  for _, id in ipairs(run_ids) do
    local r = self.db:exec("SELECT * FROM run WHERE id = ?1", id)[1]
    if r then
      add("run", r)
      counts.runs = counts.runs + 1
      local cert = self.db:exec("SELECT * FROM certificate WHERE run = ?1", id)[1]
      if cert then
        add("certificate", cert)
        counts.certificates = counts.certificates + 1
      end
    end
  end
  local filters = {}
  for _, k in ipairs { "problem", "outcome", "since" } do filters[k] = f[k] end
  if f.ids then filters.ids = f.ids end
  if f.binaries == false then filters.binaries = false end
  -- (a bundle without certificates is as it was before there were any)
  if counts.certificates == 0 then counts.certificates = nil end
  if counts.lessons == 0 then counts.lessons = nil end
  local manifest = canon { format = 1, kwb = core.version, schema = core.cache_schema_version,
                           created = f.created or os.time(), filters = filters, counts = counts }
  local ok, msg, info = self.db:export(file, manifest, records, blobs)
  if not ok then return nil, msg, info end
  return counts
end

local sense = require "kwb.cache.sense"

local function bad_bundle(file, fmt, ...)
  return fail("corrupt-bundle", string.format("bundle %s is corrupt: " .. fmt, file, ...))
end

-- import(file) -> counts of new rows | nil, msg, info. The whole bundle is
-- checked first; then everything goes in one transaction, or nothing does.
-- Rows already present are kept as they are, so importing twice changes nothing.
function Cache:import(file)
  check_string(file, "bundle file")
  local b, msg, info = core.cache_bundle_open(file)
  if not b then return nil, msg, info end
  local manifest = decode(b:manifest())
  if type(manifest) ~= "table" or manifest.format ~= 1 then
    b:close()
    return bad_bundle(file, "its manifest is not a kwb bundle manifest of format 1")
  end
  local have = {}
  for _, id in ipairs(b:blobs()) do have[id] = true end
  local rows, cands = {}, {}
  for i, rec in ipairs(b:records()) do
    local cols = bundle_columns[rec.table]
    local row = decode(rec.json)
    if not cols then b:close(); return bad_bundle(file, "record %d has the unknown table '%s'", i, rec.table) end
    if type(row) ~= "table" then b:close(); return bad_bundle(file, "record %d is not a JSON object", i) end
    for k, t in pairs(required[rec.table]) do
      if type(row[k]) ~= t then
        b:close()
        return bad_bundle(file, "record %d (%s) has no %s field '%s'", i, rec.table, t, k)
      end
    end
    for _, k in ipairs(blob_refs[rec.table] or {}) do
      local id = row[k]
      if id and not have[id] and not self.db:blob_info(id) then
        b:close()
        return bad_bundle(file, "record %d (%s) needs blob %s, which is in neither the bundle nor the cache",
                          i, rec.table, id)
      end
    end
    -- content-addressed rows must hash to their ids
    local want
    if rec.table == "candidate" then
      local params, flags = decode(row.params), decode(row.flags)
      if type(params) ~= "table" or type(flags) ~= "table" then
        b:close()
        return bad_bundle(file, "record %d (candidate) has malformed params or flags", i)
      end
      want = candidate_id_of_blob(row.problem, row.source, params, flags)
      cands[row.id] = row.problem
    elseif rec.table == "build" then
      want = build_id(row.candidate, row.arch, row.toolchain)
    elseif rec.table == "lesson" then
      want = lesson_id(row.problem, row.device, row.text, decode(row.tags), decode(row.ids))
    end
    if want and want ~= row.id then
      b:close()
      return bad_bundle(file, "record %d (%s) has id %s, but its content hashes to %s", i, rec.table,
                        tostring(row.id), want)
    end
    -- every row makes sense (kwb.cache.sense, as kwb cache check has it), or nothing is imported
    local why = sense.why(rec.table, row)
    if why then
      b:close()
      return bad_bundle(file, "record %d (%s): %s", i, rec.table == "result"
                        and string.format("result of %s at %s", tostring(row.candidate), tostring(row.shape))
                        or string.format("%s %s", rec.table, tostring(row.id)), why)
    end
    -- where an imported result or run came from: the bundle's file (kwb.loop.store
    -- takes neither as measured here; kwb cache best shows it); another
    -- machine's word that compute-sanitizer found nothing in a result is not taken
    local bundle = file:match("[^/]+$") or file
    if rec.table == "result" then
      local v = decode(row.verify)
      v.imported = v.imported or bundle
      v.sanitized = nil
      row.verify = canon(v)
    elseif rec.table == "run" then
      local settings = decode(row.settings)
      settings.imported = settings.imported or bundle
      row.settings = canon(settings)
    elseif rec.table == "certificate" then   -- (another machine's round: kwb verify-pick repeats it here)
      local body = decode(row.body)
      body.imported = body.imported or bundle
      row.body = canon(body)
    elseif rec.table == "lesson" then   -- (another cache's: kwb lessons names the bundle)
      row.origin = row.origin or bundle
    end
    rows[i] = { table = rec.table, row = row }
  end
  for i, r in ipairs(rows) do
    if r.table == "lesson" then   -- (its candidates of its problem, in the bundle or the cache)
      for _, id in ipairs(decode(r.row.ids)) do
        local problem = cands[id] or (self.db:exec("SELECT problem FROM candidate WHERE id = ?1", id)[1] or {}).problem
        if problem ~= r.row.problem then
          b:close()
          return bad_bundle(file, "record %d (lesson %s) names candidate %s, %s", i, r.row.id, id, problem
                            and string.format("a candidate of problem %s, not %s", problem, r.row.problem)
                            or "which is in neither the bundle nor the cache")
        end
      end
    end
    local cand = (r.table == "build" or r.table == "result") and r.row.candidate
    local problem = cand and (cands[cand] or (self.db:exec("SELECT problem FROM candidate WHERE id = ?1", cand)[1] or {}).problem)
    if cand and not problem then
      b:close()
      return bad_bundle(file, "record %d (%s) belongs to candidate %s, which is in neither the bundle "
                        .. "nor the cache", i, r.table, cand)
    end
    local why = r.table == "result" and sense.floor_why(r.row, problem)
    if why then
      b:close()
      return bad_bundle(file, "record %d (result of %s at %s): %s", i, cand, r.row.shape, why)
    end
  end
  local counts = { candidates = 0, builds = 0, results = 0, runs = 0, certificates = 0, lessons = 0 }
  local plural = { candidate = "candidates", build = "builds", result = "results", run = "runs",
                   certificate = "certificates", lesson = "lessons" }
  local ok, err = pcall(self.transaction, self, function()
    counts.blobs = self.db:import_blobs(b)
    for _, r in ipairs(rows) do
      local cols, marks, vals = bundle_columns[r.table], {}, {}
      for i, col in ipairs(cols) do
        marks[i] = "?" .. i
        vals[i] = r.row[col]
      end
      self.db:exec(string.format("INSERT OR IGNORE INTO %s(%s) VALUES (%s)", r.table,
                                 table.concat(cols, ", "), table.concat(marks, ", ")),
                   table.unpack(vals, 1, #cols))
      counts[plural[r.table]] = counts[plural[r.table]] + self.db:changes()
    end
  end)
  b:close()
  if not ok then error(err, 0) end
  return counts
end

