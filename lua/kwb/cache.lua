-- kwb/cache.lua: the candidate cache. Every candidate kwb evaluates is kept,
-- whatever its outcome: runs resume, teammates share, nothing is evaluated twice.
--
--   local cache = assert(kwb.cache.open())              -- kwb.core.cache_path
--   local id = cache:put_candidate { problem = "matmul", source = src,
--                                    params = { BM = 32 }, parent = pid,
--                                    origin = { strategy = "random" } }
--   cache:add_result { candidate = id, device = kwb.cache.host_kind(), shape = "1024",
--                      outcome = "accepted", timing = stats }
--   cache:best("matmul", { shape = "1024" })
--
-- Storage (SQLite, zstd blobs, bundle files) is C (core/cache.c,
-- core/cache_bundle.c); which rows exist and what they mean is decided here.
local core = require "kwb.core"
local cjson = require "cjson"

local M = {}

M.outcomes = { "forbidden", "compile-error", "wrong", "impossible", "crashed", "timeout",
               "slower", "accepted" }
local is_outcome = {}
for _, o in ipairs(M.outcomes) do is_outcome[o] = true end
-- Outcomes whose timings are real measurements of a correct kernel.
local timed = { accepted = true, slower = true }

-- ---- canonical JSON ---------------------------------------------------------

-- Sorted keys, integers without a fraction, floats to 17 digits: one text per
-- value, so hashes of it are stable. Tables with keys 1..n are arrays; an
-- empty table is an object unless as_array.
local function canon(v, as_array)
  local t = type(v)
  if t == "string" then return cjson.encode(v)
  elseif t == "boolean" then return tostring(v)
  elseif t == "nil" then return "null"
  elseif t == "number" then
    if math.type(v) == "integer" then return string.format("%d", v) end
    if v ~= v or v == math.huge or v == -math.huge then
      error("cannot store the number " .. tostring(v) .. " as JSON", 0)
    end
    if v == math.floor(v) and math.abs(v) < 2^53 then return string.format("%d", v) end
    return string.format("%.17g", v)
  elseif t == "table" then
    local n = #v
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    if (n > 0 and #keys == n) or (#keys == 0 and as_array) then
      local out = {}
      for i = 1, n do out[i] = canon(v[i]) end
      return "[" .. table.concat(out, ",") .. "]"
    end
    for _, k in ipairs(keys) do
      if type(k) ~= "string" then
        error("cannot store a table with a " .. type(k) .. " key as JSON", 0)
      end
    end
    table.sort(keys)
    local out = {}
    for i, k in ipairs(keys) do out[i] = cjson.encode(k) .. ":" .. canon(v[k]) end
    return "{" .. table.concat(out, ",") .. "}"
  end
  error("cannot store a " .. t .. " as JSON", 0)
end
M.json = canon

-- The expected-failure convention: nil, message, {code = code}.
local function fail(code, msg)
  return nil, msg, { code = code }
end

function M.outcome_known(o) return is_outcome[o] == true end

-- JSON numbers come back from cjson as floats; whole ones become integers
-- again (the canonical text does not tell 2 from 2.0), and JSON null becomes nil.
local function normalize(v)
  if type(v) == "number" then return math.tointeger(v) or v end
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do
    if x ~= cjson.null then out[k] = normalize(x) end
  end
  return out
end

local function decode(s, default)
  if s == nil then return default end
  local ok, v = pcall(cjson.decode, s)
  if not ok then return default end
  return normalize(v)
end

-- ---- identity ---------------------------------------------------------------

-- The id of a candidate: SHA-256 over everything that determines it (the
-- source through its hash, which is also the id of its blob).
local function candidate_id_of_blob(problem, source_blob, params, flags)
  return core.sha256("kwb-candidate-1\n" .. canon { problem = problem, source = source_blob,
                                                     params = params or {} }
                     .. "\n" .. canon(flags or {}, true))
end

function M.candidate_id(problem, source, params, flags)
  return candidate_id_of_blob(problem, core.sha256(source), params, flags)
end

function M.build_id(candidate, arch, toolchain)
  return core.sha256("kwb-build-1\n" .. canon { candidate = candidate, arch = arch, toolchain = toolchain })
end

-- The kind of the host backend's device: CPU model and core count, so results
-- from one machine type stay valid on another of the same type.
function M.host_kind(cpuinfo)
  if not cpuinfo then
    local f = io.open("/proc/cpuinfo")
    cpuinfo = f and f:read("a") or ""
    if f then f:close() end
  end
  local model = cpuinfo:match("model name%s*:%s*([^\n]+)") or cpuinfo:match("Model%s*:%s*([^\n]+)")
  local n = 0
  for _ in cpuinfo:gmatch("processor%s*:") do n = n + 1 end
  if not model then
    local p = io.popen("uname -m 2>/dev/null")
    model = p and p:read("l") or "unknown"
    if p then p:close() end
  end
  model = model:gsub("%s+", " "):gsub("%s$", "")
  return string.format("host:%s:%d", model, n)
end

-- ---- the cache object -------------------------------------------------------

local Cache = {}
Cache.__index = Cache

local function check_string(v, what)
  if type(v) ~= "string" or v == "" then
    error(string.format("%s must be a non-empty string (got %s)", what, tostring(v)), 3)
  end
  return v
end

local function check_table(v, what)
  if v == nil then return {} end
  if type(v) ~= "table" then error(string.format("%s must be a table (got %s)", what, type(v)), 3) end
  return v
end

local function check_outcome(o)
  if not is_outcome[o] then
    error(string.format("unknown outcome '%s' (known: %s)", tostring(o), table.concat(M.outcomes, ", ")), 3)
  end
  return o
end

-- open([path]) -> cache | nil, msg, info. The default path is kwb.core.cache_path.
function M.open(path)
  path = path or core.cache_path
  local db, msg, info = core.cache_open(path)
  if not db then return nil, msg, info end
  return setmetatable({ db = db, path = path }, Cache)
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
--               rationale, outcome, run, created} -> id, new
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
  local id = M.candidate_id(problem, source, params, flags)
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
    self.db:exec("INSERT INTO candidate(id, problem, parent, strategy, model, rationale, created, "
                 .. "source, params, flags, outcome, run) "
                 .. "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                 id, problem, parent, origin.strategy or c.strategy, origin.model or c.model,
                 c.rationale, c.created or os.time(), blob, canon(params), canon(flags, true),
                 c.outcome, c.run)
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

-- list([problem]) -> candidates (without their sources), oldest first
function Cache:list(problem)
  local rows
  if problem then
    rows = self.db:exec("SELECT * FROM candidate WHERE problem = ?1 ORDER BY created, id", problem)
  else
    rows = self.db:exec("SELECT * FROM candidate ORDER BY created, id")
  end
  for _, r in ipairs(rows) do row_to_candidate(r) end
  return rows
end

-- lineage(id) -> {id, parent, grandparent, ...} as far as the cache knows them
function Cache:lineage(prefix)
  local id, msg, info = self:resolve(prefix)
  if not id then return nil, msg, info end
  local out, seen = {}, {}
  while id and not seen[id] do
    seen[id] = true
    out[#out + 1] = id
    local r = self.db:exec("SELECT parent FROM candidate WHERE id = ?1", id)[1]
    id = r and r.parent
  end
  return out
end

function Cache:children(id)
  local out = {}
  for i, r in ipairs(self.db:exec("SELECT id FROM candidate WHERE parent = ?1 ORDER BY created, id", id)) do
    out[i] = r.id
  end
  return out
end

-- ---- builds -----------------------------------------------------------------

-- add_build{candidate, arch, toolchain, ok, log, binary, resources} -> build id
function Cache:add_build(b)
  check_table(b, "build")
  local arch = check_string(b.arch, "build.arch")
  local toolchain = check_string(b.toolchain, "build.toolchain")
  if b.log ~= nil and type(b.log) ~= "string" then error("build.log must be a string", 2) end
  if b.binary ~= nil and type(b.binary) ~= "string" then error("build.binary must be a string", 2) end
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
                 .. "created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                 id, cand, arch, toolchain, b.ok == nil and true or not not b.ok, log, bin,
                 canon(resources), b.created or os.time())
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
                                                       cand:sub(1, 12), arch, toolchain))
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

function Cache:builds(prefix)
  local cand, msg, info = self:resolve(prefix)
  if not cand then return nil, msg, info end
  local rows = self.db:exec("SELECT id, arch, toolchain, ok, resources, created FROM build "
                            .. "WHERE candidate = ?1 ORDER BY arch, toolchain", cand)
  for _, r in ipairs(rows) do
    r.ok = r.ok ~= 0
    r.resources = decode(r.resources, {})
  end
  return rows
end

-- ---- results ----------------------------------------------------------------

-- add_result{candidate, device, shape, outcome, verify, timing, clocks, run, created}
-- One result per candidate, device kind and shape; a new measurement replaces the old.
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
  return true
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

-- best(problem, {shape =, device =}) -> the fastest correct candidate of each
-- device kind and shape: {{device, shape, candidate, median, outcome}, ...}
function Cache:best(problem, opts)
  check_string(problem, "problem")
  opts = check_table(opts, "options")
  local rows = self.db:exec(
    "SELECT r.device, r.shape, r.candidate, r.median, r.outcome FROM result r "
    .. "JOIN candidate c ON c.id = r.candidate "
    .. "WHERE c.problem = ?1 AND r.outcome IN ('accepted', 'slower') AND r.median IS NOT NULL "
    .. "AND (?2 IS NULL OR r.shape = ?2) AND (?3 IS NULL OR r.device = ?3) "
    .. "ORDER BY r.device, r.shape, r.median, r.candidate", problem, opts.shape, opts.device)
  local out, last = {}, nil
  for _, r in ipairs(rows) do
    local key = r.device .. "\0" .. r.shape
    if key ~= last then out[#out + 1] = r end
    last = key
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
function Cache:end_run(id, funnel, ended)
  check_string(id, "run id")
  self.db:exec("UPDATE run SET ended = ?2, funnel = ?3 WHERE id = ?1", id, ended or os.time(),
               canon(check_table(funnel, "funnel")))
  if self.db:changes() == 0 then error("no run " .. id .. " in the cache", 2) end
  return true
end

function Cache:runs()
  local rows = self.db:exec("SELECT * FROM run ORDER BY started, id")
  for _, r in ipairs(rows) do
    r.settings = decode(r.settings, {})
    r.funnel = decode(r.funnel, nil)
  end
  return rows
end

-- ---- maintenance ------------------------------------------------------------

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

-- check{repair = false} decodes every stored copy of every blob's frame.
-- -> {blobs = n checked, frames = n copies checked, ok = true if nothing was found,
--     corrupt = {{blob, frame = "ok"|"corrupt", mirror = "ok"|"corrupt"|"none",
--                 recoverable, repaired, message}...},   -- a copy that fails
--     unreadable = {{blob, message}...},   -- blobs whose base is lost (so they are too)
--     unmirrored = {id...}}                -- bases without a mirror (repair adds one)
-- A corrupt copy with a sound other copy is recoverable: reads use the sound
-- one, and repair = true rewrites the corrupt one from it.
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
  r.ok = #r.corrupt == 0 and #r.unreadable == 0 and #r.unmirrored == 0
  return r
end

-- integrity() -> "ok" or SQLite's list of problems
function Cache:integrity()
  local rows = self.db:exec("PRAGMA integrity_check")
  local out = {}
  for i, r in ipairs(rows) do out[i] = r.integrity_check end
  return table.concat(out, "\n")
end

-- ---- bundles ----------------------------------------------------------------

local bundle_columns = {
  candidate = { "id", "problem", "parent", "strategy", "model", "rationale", "created", "source",
                "params", "flags", "outcome", "run" },
  build = { "id", "candidate", "arch", "toolchain", "ok", "log", "binary", "resources", "created" },
  result = { "candidate", "device", "shape", "outcome", "median", "verify", "timing", "clocks", "run",
             "created" },
  run = { "id", "recipe", "recipe_hash", "settings", "started", "ended", "funnel" },
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
}
local blob_refs = { candidate = { "source" }, build = { "log", "binary" } }

-- export(file, {problem =, ids = {prefix...}, outcome =, since =, binaries = true})
-- writes the matching candidates, their ancestors, builds, results and runs.
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
  for _, id in ipairs(selected) do
    while id and not seen[id] do
      seen[id] = true
      ids[#ids + 1] = id
      local r = self.db:exec("SELECT parent FROM candidate WHERE id = ?1", id)[1]
      id = r and r.parent
    end
  end
  table.sort(ids)
  local records, blobs, runs = {}, {}, {}
  local counts = { candidates = 0, builds = 0, results = 0, runs = 0 }
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
  local run_ids = {}
  for id in pairs(runs) do run_ids[#run_ids + 1] = id end
  table.sort(run_ids)
  for _, id in ipairs(run_ids) do
    local r = self.db:exec("SELECT * FROM run WHERE id = ?1", id)[1]
    if r then
      add("run", r)
      counts.runs = counts.runs + 1
    end
  end
  local filters = {}
  for _, k in ipairs { "problem", "outcome", "since" } do filters[k] = f[k] end
  if f.ids then filters.ids = f.ids end
  if f.binaries == false then filters.binaries = false end
  local manifest = canon { format = 1, kwb = core.version, schema = core.cache_schema_version,
                           created = f.created or os.time(), filters = filters, counts = counts }
  local ok, msg, info = self.db:export(file, manifest, records, blobs)
  if not ok then return nil, msg, info end
  return counts
end

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
      cands[row.id] = true
    elseif rec.table == "build" then
      want = M.build_id(row.candidate, row.arch, row.toolchain)
    end
    if want and want ~= row.id then
      b:close()
      return bad_bundle(file, "record %d (%s) has id %s, but its content hashes to %s", i, rec.table,
                        tostring(row.id), want)
    end
    rows[i] = { table = rec.table, row = row }
  end
  for i, r in ipairs(rows) do
    local cand = (r.table == "build" or r.table == "result") and r.row.candidate
    if cand and not cands[cand] and #self.db:exec("SELECT 1 FROM candidate WHERE id = ?1", cand) == 0 then
      b:close()
      return bad_bundle(file, "record %d (%s) belongs to candidate %s, which is in neither the bundle "
                        .. "nor the cache", i, r.table, cand)
    end
  end
  local counts = { candidates = 0, builds = 0, results = 0, runs = 0 }
  local plural = { candidate = "candidates", build = "builds", result = "results", run = "runs" }
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

return M
