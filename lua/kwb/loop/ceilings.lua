-- kwb/loop/ceilings.lua: the device's ceilings (kwb.measure.ceilings: the
-- bandwidth and flop rate the physical floor is reckoned from) for a
-- session, measured once per device kind rather than in every run. A run
-- that measures them keeps them with its record (settings.ceilings) under a
-- key of everything they depend on: the device kind, the backend, the
-- recipe's own `ceilings`, the timed shapes' bytes and flops (on a GPU they
-- decide whether the tensor rate is measured) and this build of kwb. A later
-- run with the same key takes them from there (`from` names that run)
-- instead of measuring again; a run brought by a bundle is never taken (its
-- device was another machine), nor values that are not positive numbers. A
-- new build of kwb measures them again, and so does a changed recipe or
-- device kind; `kwb doctor` (CUDA) stores its own, which the backend reads
-- before it measures. A kernel under the floor of kept ceilings is not
-- called impossible on their word: the run measures them again and judges
-- it by those (Session:complete), as ceilings measured low on a loaded
-- machine would otherwise make every kernel impossible from then on.
--
--   local c, from = ceilings.kept(session)   -- nil where none is kept
--   ceilings.keep(session, c, seconds)      -- with the session's run record
local build = require "kwb.base.build"
local cache = require "kwb.cache"
local core = require "kwb.core"
local ids = require "kwb.base.ids"
local work = require("kwb.measure.ceilings").work

local M = {}

-- The key of a session's ceilings (nil: not kept).
local function key_of(s)
  local b = build.id()
  if not b then return nil end
  local r = s.recipe
  local ok, text = pcall(cache.json, { backend = r.backend, device = s.ctx.device, given = r.ceilings or {},
                                       work = work(r), build = b })
  return ok and core.sha256("kwb-ceilings-1\n" .. text) or nil
end

local function positive(x) return type(x) == "number" and x > 0 and x < math.huge end

-- Are kept values ceilings the judge can use?
local function sound(v)
  if type(v) ~= "table" or not positive(v.bandwidth) or not positive(v.flops) then return false end
  for _, k in ipairs { "measured_bandwidth", "measured_flops" } do
    if v[k] ~= nil and not positive(v[k]) then return false end
  end
  return true
end

-- kept(session) -> ceilings, the short id of the run that measured them |
-- nil: the latest run's kept under this session's key, measured here.
function M.kept(s)
  local key = key_of(s)
  if not key then return nil end
  local found, from
  for _, run in ipairs(s.store:runs()) do
    local c = run.settings.ceilings
    if type(c) == "table" and c.key == key and cache.as_measured(run.settings, false) and sound(c.values) then
      found, from = c.values, ids.short(run.id)
    end
  end
  return found, from
end

-- keep(session, ceilings, seconds): the ceilings just measured kept with the
-- session's run record (none outside a run: nothing is kept).
function M.keep(s, c, seconds)
  local key = s.run_record and key_of(s)
  if not key or not sound(c) then return end
  local values = { bandwidth = c.bandwidth, flops = c.flops, measured_bandwidth = c.measured_bandwidth,
                   measured_flops = c.measured_flops }
  s.store.cache:amend_run(s.run_record.id, { ceilings = { key = key, values = values, seconds = seconds } })
end

return M
