-- kwb/loop/tools.lua: the device tools a session runs on a candidate beyond
-- its measurement: compute-sanitizer (sanitize: a finding makes it unsafe)
-- and ncu (profile), each in a worker when the session has a pool, with the
-- device to itself. The session's methods of the same names call these.
local core = require "kwb.core"
local ids = require "kwb.base.ids"
local files = require "kwb.base.files"
local candidate = require "kwb.loop.candidate"
local measure = require "kwb.measure"

local M = {}

-- sanitize(cand, res): compute-sanitizer on the candidate (kwb.checks.sanitize), in
-- a worker when the session has a pool; a finding makes it "unsafe".
function M.sanitize(self, cand, res)
  local t0 = core.now()
  local file = self.recipe.returned_by
  local args = { recipe = file and files.absolute(file), cand = candidate.for_worker(cand), seed = tostring(res.seed) }
  local finding
  local pool = self:workers()
  if pool then
    if not pool.remote and not require("kwb.checks.sanitize").path() then   -- (a fleet's worker says so itself)
      error("compute-sanitizer is not installed (looked in CUDA_HOME/bin and on PATH); a recipe runs without it "
            .. "with sanitize = false", 0)
    end
    local function ask()
      return pool:wait(pool:submit("kwb.worker.task.sanitize", { args },
                                   { limit = measure.build_limit, what = "compute-sanitizer's start" }))
    end
    -- the candidate's code runs in the tools' own processes, never in this
    -- worker: the worker lost (killed from outside, the device lost) is not
    -- its doing, so once more; a second loss, or the task's own error, stops
    -- the run and is never the candidate's outcome (INTEGRITY.md property 9)
    local answer = ask()
    if not answer.ok and answer.code == "crashed" then answer = ask() end
    if not answer.ok then
      error(string.format("compute-sanitizer on candidate %s did not finish in its worker (%s): not the candidate's "
                          .. "doing, so the run stops without an outcome for it", res.short or res.id,
                          tostring(answer.reason)), 0)
    end
    finding = answer.value
  else
    finding = require("kwb.checks.sanitize").check(self.recipe, args)
  end
  -- (a tool's run killed from outside twice, or one that could not run: the run stops without an outcome for it)
  local not_its = finding.outside or finding.harness
  if not_its then error(not_its .. "; candidate " .. tostring(res.short or res.id), 0) end
  res.seconds.sanitize = core.now() - t0
  self.sanitize_s = (self.sanitize_s or 0) + res.seconds.sanitize   -- (a run's summary: stages.sanitize)
  for tool, x in pairs(finding.seconds or {}) do res.seconds["sanitize_" .. tool] = x end
  res.sanitize_stages = finding.stages   -- (each tool's run split by the job: load, build, bench, inputs, call)
  res.sanitize_skipped = finding.skipped   -- (a tool left out, and why: kwb.checks.sanitize.tools_for)
  res.sanitized = not finding.tool or nil
  if finding.tool then
    res.outcome = "unsafe"
    res.reason = string.format("compute-sanitizer %s at %s: %s", finding.tool, finding.shape, finding.report)
    res.sanitizer_log = finding.log   -- (the tool's output, for the caller: the reason keeps its first report)
  end
end

-- profile(id [, shape [, csv]]) -> the profile (kwb.checks.profile.summarise),
-- stored in the cache: ncu on a cached candidate of this recipe's problem at
-- a timed shape (default: the one where its median is longest), in a worker
-- when the session has a pool; ncu's output written to the file csv. Raises
-- naming what is wrong.
function M.profile(self, prefix, key, csv)
  local recipe, cache = self.recipe, self.store.cache
  if recipe.backend ~= "cuda" then error("recipe " .. recipe.name .. ": a profile is ncu's, for the cuda backend", 0) end
  if csv then   -- (where ncu's output goes, before ncu runs: a regular file in a directory that exists)
    local fine, why = core.output_file(csv)
    if not fine then error(why, 0) end
  end
  local got, msg = cache:get(prefix)
  if not got then error(msg, 0) end
  if got.problem ~= recipe.problem:key() then
    error(string.format("candidate %s is of problem %s, not this recipe's %s", ids.short(got.id), got.problem,
                        recipe.problem:key()), 0)
  end
  local medians = {}
  for _, r in ipairs(cache:results(got.id) or {}) do   -- (times measured here: kwb.loop.store's known)
    if r.device == self.ctx.device and require("kwb.cache").as_measured(r.verify, self.ctx.trust_imported) then
      medians[r.shape] = r.timing.median
    end
  end
  if key then   -- (the variables in any order)
    local shape_set = require("kwb.problem").shape_set
    local want, known = shape_set(key), false
    for _, sh in ipairs(recipe.shapes) do
      if shape_set(sh.key) == want then key, known = sh.key, true end
    end
    if not known then
      local keys = {}
      for i, sh in ipairs(recipe.shapes) do keys[i] = sh.key end
      error(string.format("recipe %s has no timed shape %s (its shapes: %s)", recipe.name, key, table.concat(keys, ", ")), 0)
    end
  else
    for _, sh in ipairs(recipe.shapes) do
      if medians[sh.key] and (not key or medians[sh.key] > medians[key]) then key = sh.key end
    end
    key = key or recipe.shapes[#recipe.shapes].key
  end
  local cand = self:candidate({ source = got.source, defines = got.params, params = got.params, name = "profiled " .. ids.short(got.id) })
  if cand.id ~= got.id then
    error(string.format("candidate %s was built with other flags than this recipe's (here it is %s)", ids.short(got.id),
                        ids.short(cand.id)), 0)
  end
  local file = recipe.returned_by
  if not file then error("recipe " .. recipe.name .. ": a profile runs the recipe from its file, and this one has none", 0) end
  local args = { recipe = files.absolute(file), cand = candidate.for_worker(cand), seed = "1", shape = key }
  local answer
  local pool = self:workers()
  if pool then
    local a = pool:wait(pool:submit("kwb.worker.task.profile", { args },
                                    { limit = measure.build_limit, what = "ncu's start" }))
    if not a.ok then error("ncu did not finish in the worker: " .. tostring(a.reason), 0) end
    answer = a.value
  else
    answer = require("kwb.checks.profile").task(self.harness, args)
  end
  if csv then   -- ncu's own output, as it came
    local f, ferr = io.open(csv, "w")
    if not f then error("cannot write " .. csv .. ": " .. tostring(ferr), 0) end
    f:write(answer.log or "")
    f:close()
  end
  if not answer.parsed then
    error(tostring(answer.reason) .. (answer.log and ("\n" .. answer.log:sub(-2000)) or ""), 0)
  end
  for _, k in ipairs(answer.parsed.kernels) do   -- spills as the build reports them
    local r = (answer.resources or {})[k.name]
    if r then k.spills = (r.spill_stores or 0) + (r.spill_loads or 0) end
  end
  local p = require("kwb.checks.profile").summarise(answer.parsed, medians[key])
  p.shape, p.device, p.candidate = key, self.ctx.device, got.id
  cache:add_profile { candidate = got.id, device = self.ctx.device, shape = key, class = p.class, data = p }
  return p
end

return M
