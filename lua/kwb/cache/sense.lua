-- kwb/cache/sense.lua: does a row of the cache make sense? The one set of
-- checks that `import` applies to every record of a bundle (a row that fails
-- refuses the whole bundle) and `kwb cache check` to every stored row: known
-- outcomes, finite numbers, times in seconds that are positive and ordered
-- as kwb makes them (min <= p10 <= median <= p90 <= max, the median inside
-- its confidence interval), Unix times that are finite and not negative, a
-- run's end not before its start, a verdict that agrees with its row.
-- Fields kwb does not know are let be (a newer kwb may add some).
local base = require "kwb.cache.base"
local ceilings = require "kwb.measure.ceilings"
local outcomes = require "kwb.base.outcomes"

local decode = base.decode

local M = {}

-- A number as a message shows it (tostring says "-nan" or "nan" by platform).
local function show(x)
  if type(x) ~= "number" then return type(x) == "string" and string.format("'%s'", x) or tostring(x) end
  if x ~= x then return "NaN" end
  return tostring(x)
end

local function finite(x) return type(x) == "number" and x == x and x > -math.huge and x < math.huge end
local function positive(x) return finite(x) and x > 0 end
local function whole(x) return finite(x) and x == math.floor(x) end

-- Times in seconds a timing may hold: each finite and positive.
local seconds = { "median", "min", "max", "mean", "p10", "p90", "ci_lo", "ci_hi" }
-- The order kwb_stats gives them (each pair present: the first not above
-- the second; a part in 1e9 spares the rounding of an interpolated quantile).
local order = { { "min", "p10" }, { "p10", "median" }, { "median", "p90" }, { "p90", "max" }, { "min", "median" },
                { "median", "max" }, { "ci_lo", "median" }, { "median", "ci_hi" }, { "min", "ci_lo" },
                { "ci_hi", "max" }, { "min", "mean" }, { "mean", "max" } }
-- Other numbers of a timing, and what each must be.
local timing_numbers = { { "n", "count" }, { "batch", "count0" }, { "warmup", "count0" }, { "spread", "nonneg" },
                         { "floor", "nonneg" }, { "floor_frac", "nonneg" }, { "gbs", "nonneg" }, { "gflops", "nonneg" },
                         { "speedup", "positive" }, { "max_abs", "nonneg" }, { "rel_l2", "nonneg" } }
local timing_flags = { "capped", "partial", "noisy" }

-- What a kind of number must be, and its words: nil where x is one.
local function number_why(kind, x)
  if kind == "count" and not (whole(x) and x >= 1) then return "a whole number of at least 1" end
  if kind == "count0" and not (whole(x) and x >= 0) then return "a whole number of at least 0" end
  if kind == "nonneg" and not (finite(x) and x >= 0) then return "a finite number of at least 0" end
  if kind == "positive" and not positive(x) then return "a finite positive number" end
  if kind == "number" and not finite(x) then return "a finite number" end
  return nil
end

local function timing_why(t)
  for _, k in ipairs(seconds) do
    if t[k] ~= nil and not positive(t[k]) then
      return string.format("its %s time %s is not a finite positive number of seconds", k, show(t[k]))
    end
  end
  for _, f in ipairs(timing_numbers) do
    local k, kind = f[1], f[2]
    local why = t[k] ~= nil and number_why(kind, t[k])
    if why then return string.format("its timing's %s %s is not %s", k, show(t[k]), why) end
  end
  for _, k in ipairs(timing_flags) do
    if t[k] ~= nil and type(t[k]) ~= "boolean" then
      return string.format("its timing's %s %s is not true or false", k, show(t[k]))
    end
  end
  for _, p in ipairs(order) do
    local a, b = t[p[1]], t[p[2]]
    if a and b and a > b * (1 + 1e-9) then
      return string.format("its %s time %s is over its %s time %s", p[1], show(a), p[2], show(b))
    end
  end
  return nil
end

-- The verdict's fields (a result's verify) the loop reads, and what each must be.
local verdict_fields = { { "again", "string" }, { "cost", "nonneg" }, { "imported", "string" }, { "line", "integer" },
                         { "model", "string" }, { "name", "string" }, { "origin", "string" }, { "params", "table" },
                         { "parent", "string" }, { "reason", "string" }, { "rule", "string" },
                         { "sanitize_due", "boolean" }, { "sanitized", "boolean" }, { "score", "number" },
                         { "seq", "seq" }, { "transcript", "string" }, { "verified_on", "strings" } }

local function field_why(kind, x)
  if kind == "string" or kind == "table" or kind == "boolean" then
    return type(x) ~= kind and ("a " .. kind) or nil
  end
  if kind == "integer" then return not whole(x) and "a whole number" or nil end
  if kind == "seq" then return not (whole(x) and x >= 1 and x < 2 ^ 53) and "a whole number from 1 to 2^53" or nil end
  if kind == "strings" then
    if type(x) ~= "table" then return "a list of strings" end
    for i, s in pairs(x) do
      if math.type(i) ~= "integer" or type(s) ~= "string" then return "a list of strings" end
    end
    return nil
  end
  return number_why(kind, x)
end

local function verdict_why(row, v)
  if v.outcome ~= nil and v.outcome ~= row.outcome then
    return string.format("its verdict's outcome %s is not its outcome '%s'", show(v.outcome), row.outcome)
  end
  for _, f in ipairs(verdict_fields) do
    local k = f[1]
    local why = v[k] ~= nil and field_why(f[2], v[k])
    if why then return string.format("its verdict's %s %s is not %s", k, show(v[k]), why) end
  end
  if v.seed ~= nil and type(v.seed) ~= "string" and not whole(v.seed) then
    return string.format("its verdict's seed %s is not a whole number", show(v.seed))
  end
  return nil
end

-- A Unix time (created, started, ended): finite and not negative.
local function time_why(what, x)
  if not (finite(x) and x >= 0) then
    return string.format("its %s %s is not a finite time in Unix seconds", what, show(x))
  end
  return nil
end

local function object(s) return type(decode(s)) == "table" end

local checks = {}

function checks.result(row)
  if not outcomes.known(row.outcome) then return string.format("its outcome %s is not one kwb gives", show(row.outcome)) end
  if type(row.device) ~= "string" or row.device == "" or type(row.shape) ~= "string" or row.shape == "" then
    return "its device or shape is not a name"
  end
  local timing, verify = decode(row.timing), decode(row.verify)
  if type(timing) ~= "table" or type(verify) ~= "table" then return "its timing or verify is not a JSON object" end
  if not object(row.clocks) then return "its clocks is not a JSON object" end
  local why = timing_why(timing)
  if why then return why end
  -- (a failure may keep times too: unsafe and impossible are judged on them, and
  -- a candidate that fails at one shape keeps those of the shapes timed before)
  if outcomes.verified[row.outcome] and not positive(timing.median) then
    return "a " .. row.outcome .. " result needs a median time"
  end
  if row.median ~= timing.median then return "its median column disagrees with its timing" end
  return verdict_why(row, verify) or time_why("created time", row.created)
end

function checks.candidate(row)
  if row.outcome ~= nil and not outcomes.known(row.outcome) then
    return string.format("its outcome %s is not one kwb gives", show(row.outcome))
  end
  for _, k in ipairs { "parent", "strategy", "model", "rationale", "run" } do
    if row[k] ~= nil and type(row[k]) ~= "string" then return string.format("its %s %s is not a string", k, show(row[k])) end
  end
  return time_why("created time", row.created)
end

function checks.build(row)
  if row.ok ~= 0 and row.ok ~= 1 then return string.format("its ok %s is not 0 or 1", show(row.ok)) end
  if not object(row.resources) then return "its resources is not a JSON object" end
  if row.code ~= nil and not (type(row.code) == "string" and #row.code == 64 and row.code:match("^%x+$")) then
    return string.format("its code %s is not a digest (64 hex digits)", show(row.code))
  end
  return time_why("created time", row.created)
end

function checks.run(row)
  local settings = decode(row.settings)
  if type(settings) ~= "table" then return "its settings is not a JSON object" end
  if settings.imported ~= nil and type(settings.imported) ~= "string" then
    return string.format("its settings' imported %s is not a string", show(settings.imported))
  end
  local why = time_why("start", row.started) or row.ended ~= nil and time_why("end", row.ended)
  if why then return why end
  if row.ended ~= nil and row.ended < row.started then
    return string.format("its end %s is before its start %s", show(row.ended), show(row.started))
  end
  if row.funnel ~= nil then
    local f = decode(row.funnel)
    if type(f) ~= "table" then return "its funnel is not a JSON object" end
    local counted = outcomes.counts()
    local keys = {}
    for k in pairs(f) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    for _, k in ipairs(keys) do
      if counted[k] == nil then return string.format("its funnel counts '%s', not an outcome of the funnel", k) end
      if not (whole(f[k]) and f[k] >= 0) then
        return string.format("its funnel's count of %s %s is not a whole number of at least 0", k, show(f[k]))
      end
    end
  end
  return nil
end

-- A certificate (kwb.loop.certify): its body a JSON object naming its pick,
-- every ratio in it a positive median inside its interval.
function checks.certificate(row)
  local body = decode(row.body)
  if type(body) ~= "table" then return "its body is not a JSON object" end
  if body.pick ~= row.pick then return string.format("its pick %s is not its body's %s", show(row.pick), show(body.pick)) end
  if type(body.ratios) ~= "table" then return "its body has no ratios" end
  for i, r in ipairs(body.ratios) do
    if type(r) ~= "table" or not positive(r.median) or not positive(r.lo) or not positive(r.hi)
       or r.lo > r.median or r.median > r.hi then
      return string.format("its ratio %d is not a positive median inside its interval", i)
    end
  end
  return time_why("created time", row.created)
end

-- A lesson (kwb.cache.lessons): a sentence with its technique tags and the
-- candidates that show it, its place in its summary a whole number.
function checks.lesson(row)
  local why = require("kwb.cache.lessons").why(row.text, decode(row.tags), decode(row.ids))
  if why then return why end
  if not (whole(row.pos) and row.pos >= 1) then
    return string.format("its pos %s is not a whole number of at least 1", show(row.pos))
  end
  return time_why("created time", row.created)
end

-- why(table, row) -> nil where the row makes sense, else why not: one
-- sentence naming the field ("its min time 0.003 is over its median time
-- 0.001"). The row as stored (its JSON columns as text).
function M.why(tbl, row)
  return checks[tbl](row)
end

-- floor_why(row, problem) -> nil, or why a result's median is under the
-- physical floor of any device of its kind (kwb.measure.ceilings.absolute_floor).
-- An `impossible` result says so itself: its median is under a floor.
function M.floor_why(row, problem)
  if not row.median or not problem or row.outcome == "impossible" then return nil end
  local floor, why = ceilings.absolute_floor(problem, row.shape, row.device)
  if floor and row.median < floor then
    return string.format("its median %.4g s is under the physical floor %.4g s of any device of its kind (%s)",
                         row.median, floor, why)
  end
  return nil
end

-- what(table, row) -> the row in words: "result of ID at SHAPE on DEVICE",
-- "candidate ID", "build ID", "run ID", "lesson ID".
function M.what(tbl, row)
  if tbl == "result" then
    return string.format("result of %s at %s on %s", tostring(row.candidate), tostring(row.shape), tostring(row.device))
  end
  if tbl == "certificate" then return string.format("certificate of run %s", tostring(row.run)) end
  if tbl == "lesson" then return string.format("lesson %s", tostring(row.id)) end
  return string.format("%s %s", tbl, tostring(row.id))
end

return M
