-- kwb/loop/selftest.lua: the judge certifies itself before a run spends
-- anything. The planted candidates of kwb.measure.plants (a kernel that
-- writes nothing, zeros, a constant, a copy of an input, NaN; one that
-- mutates an input; one right on its first call that returns early after)
-- are measured through the same path as every candidate (the session's
-- workers, the recipe's rules, build, verification and timing), never
-- recorded as candidates. Each must be rejected (`wrong`, or `forbidden` by
-- the recipe's rules); one that passes stops the run, naming the problem and
-- the plant, and so does one that cannot be judged (it does not build, it
-- crashes): a self-test that proved nothing certifies nothing.
--
--   local v = selftest.run(session)   -- raises when a plant passes
--   v.line      "judge: 7 of 7 planted candidates rejected"
--   v.plants    { { name =, outcome =, reason = } ... }; v.skipped: { { name =, why = } ... }
--
-- The verdict is kept with the run's record (settings.judge) under a key of
-- everything it depends on: the plants' candidate ids (the problem, the
-- start kernel's source and defines, the flags), the tolerance, the rules,
-- the shapes, the device kind and this build of kwb. A later run with the
-- same key takes it from there (v.from names that run) instead of paying
-- for it again.
local build = require "kwb.base.build"
local cache = require "kwb.cache"
local core = require "kwb.core"
local host = require "kwb.host"
local ids = require "kwb.base.ids"
local plants = require "kwb.measure.plants"

local M = {}

-- The outcomes that are a rejection by the judge.
local rejected = { wrong = true, forbidden = true }

local function tolerance_text(t)
  if t.rel_l2 then return string.format("tolerance rel_l2 = %g", t.rel_l2) end
  return string.format("tolerance atol = %g, rtol = %g", t.atol, t.rtol)
end

-- The key of a verdict: what it depends on, hashed (nil: not kept).
local function key_of(s, cands)
  local b = build.id()
  if not b then return nil end
  local r = s.recipe
  local ids = {}
  for i, c in ipairs(cands) do ids[i] = c.id end
  local ok, text = pcall(cache.json, { plants = ids, tolerance = r.problem.tolerance, forbid = r.forbid, allow = r.allow,
                                       backend = r.backend, device = s.ctx.device, shapes = s.ctx.shapes,
                                       verified_on = s.ctx.verified_on, build = b })
  return ok and core.sha256("kwb-judge-selftest-1\n" .. text) or nil
end

-- An earlier run's verdict under this key, measured here (not imported).
local function kept(s, key)
  local found
  for _, run in ipairs(s.store:runs()) do
    local j = run.settings.judge
    if type(j) == "table" and j.key == key and cache.as_measured(run.settings, false) then
      found = j
      found.from = ids.short(run.id)
    end
  end
  return found
end

-- line(v) -> "judge: 7 of 7 planted candidates rejected" (and where it was found)
function M.line(v)
  return string.format("judge: %d of %d planted candidates rejected%s", v.rejected, v.planted,
                       v.from and string.format(" (self-test of run %s, this build)", v.from) or "")
end

-- run(session [, run_record]) -> verdict: the plants measured and judged, or
-- the verdict kept under the same key. Raises naming the plant that passed.
function M.run(s, record)
  local r = s.recipe
  local start = s:candidate(r.start, "start")
  local list, skipped = plants.derive(r, start)
  -- (kwb's own code, outside the recipe's budget.source_bytes, which bounds what proposals may send)
  local cands = {}
  for i, p in ipairs(list) do
    local id = cache.candidate_id(r.problem:key(), p.source, p.defines, r.flags)
    cands[i] = { source = p.source, defines = p.defines, define_list = host.define_list(p.defines),
                 params = next(p.defines) and p.defines or nil, id = id, short = ids.short(id), origin = "plant",
                 name = "plant_" .. p.name:gsub("%W+", "_") .. (r.backend == "cuda" and ".cu" or ".c"),
                 plant = p.own_plan and "own" or "wraps" }
  end
  local key = key_of(s, cands)
  local v = key and kept(s, key)
  if v then return v end
  local t0 = core.now()
  local pending = {}
  for i, c in ipairs(cands) do pending[i] = s:submit(c, { plant = true }) end
  v = { planted = #list, rejected = 0, plants = {}, skipped = skipped, key = key }
  -- (every one collected before any verdict: none left in flight)
  local results, failed = {}, nil
  for i in ipairs(list) do
    local ok, res = pcall(s.collect, s, pending[i])
    results[i], failed = ok and res or nil, failed or not ok and res or nil
  end
  if failed then
    -- a failure of kwb's own, not a plant's (the shapes' buffers cannot be
    -- allocated): the recipe's error, which the start kernel's evaluation
    -- meets and names as it always has; else it is said as it came
    s:ensure_start()
    error(failed, 0)
  end
  -- (a problem whose tolerance a constant output passes, found on the way: kwb.measure.verify.degenerate)
  local degenerate
  for _, res in ipairs(results) do degenerate = degenerate or res.degenerate end
  for i, p in ipairs(list) do
    local res = results[i]
    v.plants[i] = { name = p.name, id = cands[i].short, outcome = res.outcome or "passed", reason = res.reason }
    if not res.outcome then
      error(string.format("judge self-test: plant '%s' was accepted by problem %s (%s)%s", p.name, r.problem:key(),
                          tolerance_text(r.problem.tolerance), degenerate and (": " .. degenerate) or ""), 0)
    end
    if not rejected[res.outcome] then
      error(string.format("judge self-test: plant '%s' could not be judged on problem %s: %s: %s", p.name,
                          r.problem:key(), res.outcome, tostring(res.reason)), 0)
    end
    v.rejected = v.rejected + 1
  end
  if degenerate then error(degenerate, 0) end
  v.seconds = core.now() - t0
  if record and key then s.store.cache:amend_run(record.id, { judge = v }) end
  return v
end

return M
