-- kwb/cache/init.lua: the candidate cache. Every candidate kwb evaluates is kept,
-- whatever its outcome: runs resume, teammates share, nothing is evaluated twice.
--
--   local cache = assert(kwb.cache.open())              -- kwb.core.cache_path
--   local id = cache:put_candidate { problem = "matmul", source = src,
--                                    params = { BM = 32 }, parent = pid,
--                                    origin = { strategy = "random" } }
--   cache:add_result { candidate = id, device = kwb.host.kind(), shape = "1024",
--                      outcome = "accepted", timing = stats }
--   cache:best("matmul", { shape = "1024" })
--
-- Storage (SQLite, zstd blobs, bundle files) is C (core/cache.c,
-- core/cache_bundle.c); which rows exist and what they mean is decided here.
-- The files: kwb/cache/base.lua (the class, canonical JSON, ids),
-- kwb/cache/maint.lua (stats, gc, check), kwb/cache/bundle.lua (export,
-- import), kwb/cache/lessons.lua (the lessons ledger); `require "kwb.cache"`
-- gives them all.
local ids = require "kwb.base.ids"
local base = require "kwb.cache.base"
local core = require "kwb.core"
local outcomes = require "kwb.base.outcomes"
local secrets = require "kwb.base.secrets"

local Cache = base.Cache
local canon, fail, decode = base.canon, base.fail, base.decode
local check_string, check_table, check_outcome = base.check_string, base.check_table, base.check_outcome

local M = {}

-- What a stored result may end in (kwb.base.outcomes: the funnel and "start").
M.outcomes = outcomes.all
M.json = canon
M.outcome_known = base.outcome_known
M.candidate_id = base.candidate_id
M.build_id = base.build_id
M.imported_from, M.as_measured = base.imported_from, base.as_measured

local function scrub_args(...)
  if not secrets.any() then return ... end
  local a = table.pack(...)
  for i = 1, a.n do a[i] = secrets.scrub(a[i]) end
  return table.unpack(a, 1, a.n)
end

-- The connection as kwb.cache uses it: every text written through exec or
-- put_blob first scrubbed of the secrets this process knows (kwb.base.secrets: a
-- queue's password, a fleet's key, a model's API key), whatever field it
-- came in (a reason, a log, a transcript), so that none reaches the cache
-- or a bundle made from it.
local function scrubbing(db)
  return setmetatable({}, {
    __index = function(p, k)
      local f = db[k]
      local w
      if k == "exec" or k == "put_blob" then w = function(_, ...) return f(db, scrub_args(...)) end
      else w = function(_, ...) return f(db, ...) end end
      rawset(p, k, w)
      return w
    end,
    __tostring = function() return tostring(db) end,
  })
end

-- open([path]) -> cache | nil, msg, info. The default path is kwb.core.cache_path.
function M.open(path)
  path = path or core.cache_path
  local db, msg, info = core.cache_open(path)
  if not db then return nil, msg, info end
  return setmetatable({ db = scrubbing(db), path = path }, Cache)
end

function Cache:close()
  self.db:close()
end
Cache.__close = Cache.close

function Cache:__tostring()
  return "kwb.cache " .. self.path
end

-- Run fn inside one write transaction (joining an open one): all or nothing.
function Cache:transaction(fn, ...)
  if self.db:in_transaction() then return fn(...) end
  self.db:script("BEGIN IMMEDIATE")
  local res = table.pack(pcall(fn, ...))
  if not res[1] then
    self.db:script("ROLLBACK")
    error(res[2], 0)
  end
  self.db:script("COMMIT")
  return table.unpack(res, 2, res.n)
end

function Cache:exec(sql, ...)
  return self.db:exec(sql, ...)
end

-- Blobs: content-addressed, zstd, optionally a delta against a similar blob.
function Cache:put_blob(data, base) return self.db:put_blob(data, base) end
function Cache:get_blob(id) return self.db:get_blob(id) end

-- resolve(prefix) -> full candidate id | nil, msg, {code = "bad-id" | "not-found" | "ambiguous"}
function Cache:resolve(prefix)
  if type(prefix) ~= "string" or not prefix:match("^%x+$") or #prefix < 4 or #prefix > 64 then
    return fail("bad-id", string.format(
      "'%s' is not a candidate id (4 to 64 hex digits)", tostring(prefix)))
  end
  prefix = prefix:lower()
  local rows = self.db:exec("SELECT id FROM candidate WHERE id >= ?1 AND id < ?2 ORDER BY id LIMIT 11",
                            prefix, prefix .. "g")
  if #rows == 1 then return rows[1].id end
  if #rows == 0 then
    return fail("not-found", string.format("no candidate %s in the cache %s", prefix, self.path))
  end
  local ids = {}
  for i, r in ipairs(rows) do ids[i] = r.id end
  local shown = {}
  for i = 1, math.min(#ids, 10) do shown[i] = ids[i]:sub(1, 16) end
  local _, msg, info = fail("ambiguous", string.format(
    "candidate prefix %s is ambiguous: %s%s", prefix, table.concat(shown, ", "),
    #ids > 10 and ", ..." or ""))
  info.matches = ids
  return nil, msg, info
end

local function row_to_candidate(r)
  r.params = decode(r.params, {})
  r.flags = decode(r.flags, {})
  r.source_blob = r.source
  r.source = nil
  return r
end

-- put_candidate{problem, source, params, flags, parent, origin = {strategy, model},
--               rationale, outcome, run, created, id, transcript} -> id, new. `id`, when
-- given, is the one kwb.cache.candidate_id computed for the same fields (the
-- loop computes it once per candidate); otherwise it is computed here.
function Cache:put_candidate(c)
  check_table(c, "candidate")
  local problem = check_string(c.problem, "candidate.problem")
  local source = c.source
  if type(source) ~= "string" then error("candidate.source must be a string", 2) end
  local params = check_table(c.params, "candidate.params")
  local flags = check_table(c.flags, "candidate.flags")
  for i, f in ipairs(flags) do
    if type(f) ~= "string" then error(string.format("candidate.flags[%d] must be a string", i), 2) end
  end
  local origin = check_table(c.origin, "candidate.origin")
  if c.outcome ~= nil then check_outcome(c.outcome) end
  local id = c.id or M.candidate_id(problem, source, params, flags)
  return self:transaction(function()
    if #self.db:exec("SELECT 1 FROM candidate WHERE id = ?1", id) > 0 then return id, false end
    local parent, base = c.parent, nil
    if parent then
      local full, msg = self:resolve(parent)
      if not full then error("candidate.parent: " .. msg, 0) end
      parent = full
      base = self.db:exec("SELECT source FROM candidate WHERE id = ?1", parent)[1].source
    end
    local blob = self.db:put_blob(source, base)
    if c.transcript ~= nil then check_string(c.transcript, "candidate.transcript") end
    self.db:exec("INSERT INTO candidate(id, problem, parent, strategy, model, rationale, created, "
                 .. "source, params, flags, outcome, run, transcript) "
                 .. "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                 id, problem, parent, origin.strategy or c.strategy, origin.model or c.model,
                 c.rationale, c.created or os.time(), blob, canon(params), canon(flags, true),
                 c.outcome, c.run, c.transcript)
    return id, true
  end)
end

-- get(id or prefix) -> candidate table with .source | nil, msg, info
function Cache:get(prefix)
  local id, msg, info = self:resolve(prefix)
  if not id then return nil, msg, info end
  local r = row_to_candidate(self.db:exec("SELECT * FROM candidate WHERE id = ?1", id)[1])
  local src, err, einfo = self.db:get_blob(r.source_blob)
  if not src then
    einfo.candidate = id
    return nil, string.format("candidate %s: %s", id, err), einfo
  end
  r.source = src
  return r
end

function Cache:set_outcome(prefix, outcome)
  check_outcome(outcome)
  local id, msg, info = self:resolve(prefix)
  if not id then return nil, msg, info end
  self.db:exec("UPDATE candidate SET outcome = ?2 WHERE id = ?1", id, outcome)
  return true
end

-- list([problem]) -> candidates (without their sources), oldest first, each
-- with the score of its latest result (score: nil where none was judged)
function Cache:list(problem)
  local rows
  local score = "(SELECT r.verify FROM result r WHERE r.candidate = candidate.id ORDER BY r.created DESC, r.shape "
                .. "LIMIT 1) AS latest_verify"
  if problem then
    rows = self.db:exec("SELECT *, " .. score .. " FROM candidate WHERE problem = ?1 ORDER BY created, id", problem)
  else
    rows = self.db:exec("SELECT *, " .. score .. " FROM candidate ORDER BY created, id")
  end
  for _, r in ipairs(rows) do
    local v = r.latest_verify and decode(r.latest_verify, {})
    r.latest_verify = nil
    r.score = type(v) == "table" and type(v.score) == "number" and v.score or nil
    row_to_candidate(r)
  end
  return rows
end

-- lineage(id) -> {id, parent, grandparent, ...} as far as the cache knows them
function Cache:lineage(prefix)
  local id, msg, info = self:resolve(prefix)
  if not id then return nil, msg, info end
  return base.ancestry(self.db, id, {}, {})
end

-- ---- builds -----------------------------------------------------------------

-- add_build{candidate, arch, toolchain, ok, log, binary, resources, code} -> build id
-- code: the built code's digest (kwb.measure.backends' build: 64 hex digits)
function Cache:add_build(b)
  check_table(b, "build")
  local arch = check_string(b.arch, "build.arch")
  local toolchain = check_string(b.toolchain, "build.toolchain")
  if b.log ~= nil and type(b.log) ~= "string" then error("build.log must be a string", 2) end
  if b.binary ~= nil and type(b.binary) ~= "string" then error("build.binary must be a string", 2) end
  if b.code ~= nil and not (type(b.code) == "string" and #b.code == 64 and b.code:match("^%x+$")) then
    error("build.code must be 64 hex digits, got " .. tostring(b.code), 2)
  end
  local resources = check_table(b.resources, "build.resources")
  local cand, msg = self:resolve(b.candidate)
  if not cand then error("build.candidate: " .. msg, 2) end
  local id = M.build_id(cand, arch, toolchain)
  return self:transaction(function()
    -- the parent's build on the same arch and toolchain is a good delta base
    local base = self.db:exec("SELECT b.log, b.binary FROM candidate c JOIN build b ON b.candidate = c.parent "
                              .. "WHERE c.id = ?1 AND b.arch = ?2 AND b.toolchain = ?3", cand, arch, toolchain)[1]
                 or {}
    local log = b.log and self.db:put_blob(b.log, base.log)
    local bin = b.binary and self.db:put_blob(b.binary, base.binary)
    self.db:exec("INSERT OR REPLACE INTO build(id, candidate, arch, toolchain, ok, log, binary, resources, "
                 .. "created, code) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                 id, cand, arch, toolchain, b.ok == nil and true or not not b.ok, log, bin,
                 canon(resources), b.created or os.time(), b.code)
    return id
  end)
end

-- build(candidate, arch, toolchain) -> {ok, log, binary, resources, ...} | nil, msg, info
function Cache:build(prefix, arch, toolchain)
  local cand, msg, info = self:resolve(prefix)
  if not cand then return nil, msg, info end
  local r = self.db:exec("SELECT * FROM build WHERE id = ?1", M.build_id(cand, arch, toolchain))[1]
  if not r then
    return fail("not-found", string.format("no build of %s for %s with %s",
                                                       ids.short(cand), arch, toolchain))
  end
  r.ok = r.ok ~= 0
  r.resources = decode(r.resources, {})
  for _, k in ipairs { "log", "binary" } do
    if r[k] then
      local data, err, einfo = self.db:get_blob(r[k])
      if not data then return nil, err, einfo end
      r[k .. "_blob"], r[k] = r[k], data
    end
  end
  return r
end

-- codes(arch, toolchain) -> { [candidate id] = code digest } of every build
-- on arch with toolchain that has one (the loop's duplicates: kwb.loop.store)
function Cache:codes(arch, toolchain)
  local out = {}
  for _, r in ipairs(self.db:exec("SELECT candidate, code FROM build WHERE arch = ?1 AND toolchain = ?2 "
                                  .. "AND code IS NOT NULL", check_string(arch, "arch"),
                                  check_string(toolchain, "toolchain"))) do
    out[r.candidate] = r.code
  end
  return out
end

function Cache:builds(prefix)
  local cand, msg, info = self:resolve(prefix)
  if not cand then return nil, msg, info end
  local rows = self.db:exec("SELECT id, arch, toolchain, ok, resources, created, code FROM build "
                            .. "WHERE candidate = ?1 ORDER BY arch, toolchain", cand)
  for _, r in ipairs(rows) do
    r.ok = r.ok ~= 0
    r.resources = decode(r.resources, {})
  end
  return rows
end

-- ---- results ----------------------------------------------------------------

-- add_result{candidate, device, shape, outcome, verify, timing, clocks, run, created}
-- One result per candidate, device kind and shape holds the latest
-- measurement; every measurement is also kept, with its time (measurements()).
function Cache:add_result(r)
  check_table(r, "result")
  local device = check_string(r.device, "result.device")
  local shape = check_string(r.shape, "result.shape")
  check_outcome(r.outcome)
  local timing = check_table(r.timing, "result.timing")
  local cand, msg = self:resolve(r.candidate)
  if not cand then error("result.candidate: " .. msg, 2) end
  local median = timing.median
  if median ~= nil and type(median) ~= "number" then error("result.timing.median must be a number", 2) end
  self.db:exec("INSERT OR REPLACE INTO result(candidate, device, shape, outcome, median, verify, timing, "
               .. "clocks, run, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
               cand, device, shape, r.outcome, median, canon(check_table(r.verify, "result.verify")),
               canon(timing), canon(check_table(r.clocks, "result.clocks")), r.run, r.created or os.time())
  self.db:exec("INSERT INTO measurement(candidate, device, shape, outcome, median, timing, run, created) "
               .. "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)", cand, device, shape, r.outcome, median, canon(timing),
               r.run, r.created or os.time())
  return true
end

-- revise_result { candidate =, device =, shape =, outcome =, verify = }: a
-- stored result's verdict changed (judged again: kwb.loop.sanitizer's settle), its
-- timing and the measurement history as they were.
function Cache:revise_result(r)
  check_table(r, "result")
  check_outcome(r.outcome)
  local cand, msg = self:resolve(r.candidate)
  if not cand then error("result.candidate: " .. msg, 2) end
  self.db:exec("UPDATE result SET outcome = ?4, verify = ?5 WHERE candidate = ?1 AND device = ?2 AND shape = ?3",
               cand, check_string(r.device, "result.device"), check_string(r.shape, "result.shape"), r.outcome,
               canon(check_table(r.verify, "result.verify")))
  return true
end

-- measurements(id) -> every measurement of the candidate, oldest first
function Cache:measurements(prefix)
  local cand, msg, info = self:resolve(prefix)
  if not cand then return nil, msg, info end
  local rows = self.db:exec("SELECT * FROM measurement WHERE candidate = ?1 ORDER BY created, rowid", cand)
  for _, r in ipairs(rows) do r.timing = decode(r.timing, {}) end
  return rows
end

-- add_profile{candidate, device, shape, class, data, created}: the latest
-- profile (kwb.checks.profile) of a candidate on a device kind at a shape.
function Cache:add_profile(p)
  check_table(p, "profile")
  local device = check_string(p.device, "profile.device")
  local shape = check_string(p.shape, "profile.shape")
  local class = check_string(p.class, "profile.class")
  local cand, msg = self:resolve(p.candidate)
  if not cand then error("profile.candidate: " .. msg, 2) end
  self.db:exec("INSERT OR REPLACE INTO profile(candidate, device, shape, class, data, created) "
               .. "VALUES (?1, ?2, ?3, ?4, ?5, ?6)", cand, device, shape, class,
               canon(check_table(p.data, "profile.data")), p.created or os.time())
  return true
end

-- profiles(id) -> the candidate's profiles, by device then shape
-- ({ candidate, device, shape, class, data, created })
function Cache:profiles(prefix)
  local cand, msg, info = self:resolve(prefix)
  if not cand then return nil, msg, info end
  local rows = self.db:exec("SELECT * FROM profile WHERE candidate = ?1 ORDER BY device, shape", cand)
  for _, r in ipairs(rows) do r.data = decode(r.data, {}) end
  return rows
end

local function row_to_result(r)
  r.verify = decode(r.verify, {})
  r.timing = decode(r.timing, {})
  r.clocks = decode(r.clocks, {})
  return r
end

-- results(id) -> results of the candidate, by device then shape
function Cache:results(prefix)
  local cand, msg, info = self:resolve(prefix)
  if not cand then return nil, msg, info end
  local rows = self.db:exec("SELECT * FROM result WHERE candidate = ?1 ORDER BY device, shape", cand)
  for _, r in ipairs(rows) do row_to_result(r) end
  return rows
end

-- best(problem, {shape =, device =, sanitized =}) -> the fastest correct
-- candidate (a verified, timed one: accepted, slower or the start kernel)
-- of each device kind and shape measured here, and before it, where a
-- result a bundle brought (kwb.cache.imported_from) is faster on paper,
-- the fastest of those on a row of its own: {{device, shape, candidate,
-- median, outcome, sanitized, imported}, ...} (imported: the bundle; nil,
-- measured here). sanitized: whether it was sanitized here (the tools found nothing).
-- With sanitized = true, an accepted or slower result counts only where it
-- did (what a sanitizing recipe asks of a winner), and a start kernel only
-- where it was measured here.
function Cache:best(problem, opts)
  check_string(problem, "problem")
  opts = check_table(opts, "options")
  local rows = self.db:exec(
    "SELECT r.device, r.shape, r.candidate, r.median, r.outcome, r.verify FROM result r "
    .. "JOIN candidate c ON c.id = r.candidate "
    .. "WHERE c.problem = ?1 AND r.outcome IN ('accepted', 'slower', 'start') AND r.median IS NOT NULL "
    .. "AND (?2 IS NULL OR r.shape = ?2) AND (?3 IS NULL OR r.device = ?3) "
    .. "ORDER BY r.device, r.shape, r.median, r.candidate", problem, opts.shape, opts.device)
  local keys, here, away = {}, {}, {}   -- (each key's fastest measured here, and its fastest import)
  for _, r in ipairs(rows) do
    local key = r.device .. "\0" .. r.shape
    if not here[key] then   -- (an import slower than the best measured here is not listed)
      local v = decode(r.verify, {})
      v = type(v) == "table" and v or {}
      -- (not a best whose put-off compute-sanitizer run never came: kwb.loop.sanitizer's
      -- settle; with opts.sanitized, an accepted or slower one only where it was sanitized here)
      local bundle = base.imported_from(v)
      if outcomes.may_be_best({ outcome = r.outcome, sanitized = v.sanitized, sanitize_due = v.sanitize_due,
                                imported = bundle }, opts.sanitized)
         and not (bundle and away[key]) then
        if not away[key] then keys[#keys + 1] = key end
        r.verify, r.imported, r.sanitized = nil, bundle, v.sanitized or nil
        if bundle then away[key] = r else here[key] = r end
      end
    end
  end
  local out = {}
  for _, key in ipairs(keys) do
    if away[key] then out[#out + 1] = away[key] end
    if here[key] then out[#out + 1] = here[key] end
  end
  return out
end

-- ---- runs -------------------------------------------------------------------

-- begin_run{recipe = path, source = text (default: the file), settings = {}} -> run id
function Cache:begin_run(r)
  check_table(r, "run")
  local recipe = check_string(r.recipe, "run.recipe")
  local text = r.source
  if not text then
    local f, err = io.open(recipe, "rb")
    if not f then error("run.recipe: " .. err, 2) end
    text = f:read("a")
    f:close()
  end
  local started = r.started or os.time()
  local hash = core.sha256(text)
  local id = core.sha256(string.format("kwb-run-1\n%s\n%s\n%.6f\n%s\n%.17g", recipe, hash, started,
                                       tostring({}), math.random()))
  self.db:exec("INSERT INTO run(id, recipe, recipe_hash, settings, started) VALUES (?1, ?2, ?3, ?4, ?5)",
               id, recipe, hash, canon(check_table(r.settings, "run.settings")), started)
  return id
end

-- end_run(id, funnel) records the end time and the funnel (outcome -> count).
-- end_run(id, funnel [, ended [, usage]]): usage, the model's { requests =,
-- retries =, failures =, input =, output =, cost = } of a run that had one.
function Cache:end_run(id, funnel, ended, usage)
  check_string(id, "run id")
  self.db:exec("UPDATE run SET ended = ?2, funnel = ?3, usage = ?4 WHERE id = ?1", id, ended or os.time(),
               canon(check_table(funnel, "funnel")), usage and canon(check_table(usage, "usage")) or nil)
  if self.db:changes() == 0 then error("no run " .. id .. " in the cache", 2) end
  return true
end

-- amend_run(id, fields): fields merged into the run's settings (a run's
-- baseline, measured after its record began: kwb.loop.store's note_baseline).
function Cache:amend_run(id, fields)
  check_string(id, "run id")
  local rows = self.db:exec("SELECT settings FROM run WHERE id = ?1", id)
  if #rows == 0 then error("no run " .. id .. " in the cache", 2) end
  local settings = decode(rows[1].settings, {})
  for k, v in pairs(check_table(fields, "fields")) do settings[k] = v end
  self.db:exec("UPDATE run SET settings = ?2 WHERE id = ?1", id, canon(settings))
  return true
end

function Cache:runs()
  -- (started is in whole seconds: runs begun in the same second in the order they began)
  local rows = self.db:exec("SELECT * FROM run ORDER BY started, rowid")
  for _, r in ipairs(rows) do
    r.settings = decode(r.settings, {})
    r.funnel = decode(r.funnel, nil)
    r.usage = decode(r.usage, nil)
  end
  return rows
end

require "kwb.cache.maint"
require "kwb.cache.transcript"
require "kwb.cache.certificate"
require "kwb.cache.lessons"
require "kwb.cache.bundle"

return M
