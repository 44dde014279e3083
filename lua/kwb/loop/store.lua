-- kwb/loop/store.lua: what the loop remembers between runs, kept in the candidate
-- cache (kwb.cache): every evaluated candidate, its build log, one result row
-- per device kind and shape whatever the outcome, and the run records.
--
--   local s = store.open()                          -- kwb.core.cache_path
--   local ctx = s:context { problem = "matmul", device = ..., shapes = { "n=64", ... }, flags = {...} }
--   s:known(ctx, id)            -- the stored result of candidate id, or nil
--   s:record(ctx, cand, result) -- always, whatever the outcome
--   s:results(ctx)              -- every stored result of ctx, oldest first
--   s:codes(ctx)                -- candidate id -> its build's code digest (duplicates)
--   s:begin_run(info) -> run; s:end_run(run, summary)
--   s:transcript(t, run) -> id  -- a model's request and reply (kwb.model)
--
-- A result is known under a context when the cache holds a row for each of
-- the context's shapes on its device kind; a candidate's id (kwb.cache's)
-- already covers the problem, the source, the parameters and the flags.
-- A result a bundle brought is known only where the context trusts imports
-- (a recipe's trust_imported; kwb.cache.as_measured): elsewhere it is no
-- measurement of this machine's, so no reader races against it, judges
-- relative to it, names it a best or ships it, and a run that proposes it
-- measures it here (its rows then replaced by this machine's).
local ids = require "kwb.base.ids"
local cache = require "kwb.cache"
local host = require "kwb.host"

local M = {}

local Store = {}
Store.__index = Store

-- open([path]) -> store; raises when the cache cannot be opened.
function M.open(path)
  local c, msg = cache.open(path)
  if not c then error("cannot open the cache: " .. msg, 2) end
  return setmetatable({ cache = c, path = c.path }, Store)
end

-- open_existing() -> the store of kwb's cache (kwb --cache, else the
-- default path); raises "no cache at PATH ..." where there is none: a command
-- that reads what runs recorded makes no cache.
function M.open_existing()
  local path = require("kwb.core").cache_path or "cache/kwb.db"
  local f = io.open(path, "rb")
  if not f then error(string.format("no cache at %s (a run makes one; kwb --cache PATH names another)", path), 0) end
  f:close()
  return M.open()
end

function Store:context(c)
  return { problem = c.problem, device = c.device or host.kind(), shapes = c.shapes, flags = c.flags or {},
           toolchain = c.toolchain or "cc", verified_on = c.verified_on or {}, trust_imported = c.trust_imported == true,
           tolerance = c.tolerance }
end

-- tolerance_text(tol) -> a problem's tolerance ({ atol, rtol, rel_l2 },
-- kwb.problem) as the text a verdict records: "atol=0.001 rtol=0.0001"
function M.tolerance_text(tol)
  if not tol then return nil end
  if tol.rel_l2 then return string.format("rel_l2=%.17g", tol.rel_l2) end
  return string.format("atol=%.17g rtol=%.17g", tol.atol or 0, tol.rtol or 0)
end

-- recipe_context(recipe, device) -> the context the loop keys a recipe's
-- results by on a device kind (kwb.loop.session; kwb export and report read by it).
function Store:recipe_context(recipe, device)
  local keys = {}
  for i, sh in ipairs(recipe.shapes) do keys[i] = sh.key end
  return self:context { problem = recipe.problem:key(), shapes = keys, flags = recipe.flags, device = device,
                        toolchain = recipe.cc or os.getenv("CC") or "cc", trust_imported = recipe.trust_imported,
                        verified_on = require("kwb.measure.unannounced").keys(recipe.verify_shapes or {}),
                        tolerance = M.tolerance_text(recipe.problem.tolerance) }
end

-- Was a stored result verified on every unannounced shape ctx asks for?
local function covers(v, ctx)
  if #ctx.verified_on == 0 then return true end
  local had = {}
  for _, k in ipairs(type(v.verified_on) == "table" and v.verified_on or {}) do had[k] = true end
  for _, k in ipairs(ctx.verified_on) do
    if not had[k] then return false end
  end
  return true
end

-- known(ctx, id) -> the result as the loop made it, or nil; and whether a
-- result a bundle brought was left out (the context does not trust imports).
function Store:known(ctx, id)
  local rows = self.cache:results(id)
  if not rows then return nil end
  local mine = {}
  for _, r in ipairs(rows) do
    if r.device == ctx.device then mine[r.shape] = r end
  end
  for _, key in ipairs(ctx.shapes) do
    if not mine[key] then return nil end
  end
  for _, key in ipairs(ctx.shapes) do   -- (any shape's row from a bundle: the result is no measurement here)
    if not cache.as_measured(mine[key].verify, ctx.trust_imported) then return nil, true end
  end
  local first = mine[ctx.shapes[1]]
  local v = first.verify
  -- a verified result from before these unannounced shapes is evaluated again
  -- (a failure stands: more shapes would not make it right)
  -- and one judged under another tolerance (a recipe may set a problem's; its
  -- key is the problem's name either way) likewise; one that records none
  -- (before the verdict kept it) stands
  local verified = v.outcome == "accepted" or v.outcome == "slower" or v.outcome == "start"
  if verified and not covers(v, ctx) then return nil end
  if verified and v.tolerance and ctx.tolerance and v.tolerance ~= ctx.tolerance then return nil end
  local res = { id = id, short = ids.short(id), outcome = v.outcome or first.outcome, reason = v.reason,
                rule = v.rule, line = v.line, seed = v.seed, score = v.score, origin = v.origin,
                name = v.name, params = v.params, parent = v.parent, seq = v.seq, run = first.run,
                model = v.model, cost = v.cost, transcript = v.transcript, created = first.created,
                sanitize_due = v.sanitize_due, sanitized = v.sanitized, imported = cache.imported_from(v),
                duplicate_of = v.duplicate_of, seconds = {}, shapes = {} }
  for _, key in ipairs(ctx.shapes) do
    local t = mine[key].timing
    if t.median then res.shapes[key] = t end
    -- (rows of another context's evaluation: the worst verdict among them, and the mark only where all have it)
    local w = type(mine[key].verify) == "table" and mine[key].verify or {}
    if mine[key].outcome == "unsafe" and (res.outcome == "accepted" or res.outcome == "slower") then
      res.outcome, res.reason = "unsafe", w.reason
    end
    if w.sanitized ~= true then res.sanitized = nil end
  end
  return res
end

-- sanitizing(recipe) -> what the recipe has compute-sanitizer do (kwb.checks.sanitize):
-- "best", "all" or false. A recipe made in code (the REPL's) has no file for
-- the tools' runs to load, so it is sanitized only where it asks.
function M.sanitizing(recipe)
  if recipe.sanitize_default and not recipe.returned_by then return false end
  return recipe.sanitize or false
end

-- A result's verdict as stored with each shape's row. sanitize_due: an
-- accepted result whose compute-sanitizer run was put off (kwb.loop.sanitizer),
-- never taken as a best by a later run until it has had it; sanitized: the
-- tools ran on it here and found nothing (what a sanitizing
-- recipe asks of a best or a shape's winner: kwb.base.outcomes.may_be_best;
-- never taken from a bundle).
local function verdict(ctx, res)
  return { outcome = res.outcome, reason = res.reason, rule = res.rule, line = res.line,
           seed = res.seed, score = res.score, origin = res.origin, name = res.name,
           params = res.params, parent = res.parent, seq = res.seq, model = res.model, cost = res.cost,
           transcript = res.transcript, verified_on = #ctx.verified_on > 0 and ctx.verified_on or nil,
           again = res.again, sanitize_due = res.sanitize_due, sanitized = res.sanitized,
           duplicate_of = res.duplicate_of, tolerance = ctx.tolerance }
end

-- record(ctx, cand, result): the candidate, its build log and a result row
-- for every shape of the context, in one transaction. The candidate's id is
-- the one kwb.loop.candidate computed; the cache keeps it.
function Store:record(ctx, cand, res, run)
  self.cache:transaction(function()
    local id = self.cache:put_candidate {
      id = cand.id, problem = ctx.problem, source = cand.source, params = cand.defines, flags = ctx.flags,
      parent = cand.parent and self.cache:resolve(cand.parent) and cand.parent or nil,
      origin = { strategy = cand.origin, model = cand.model }, rationale = cand.rationale, outcome = res.outcome,
      run = run and run.id, transcript = cand.transcript,
    }
    self.cache:set_outcome(id, res.outcome)
    if res.log or res.seconds.build then
      self.cache:add_build { candidate = id, arch = ctx.device, toolchain = ctx.toolchain,
                             ok = res.outcome ~= "compile-error", log = res.log or "", code = res.code }
    end
    local verify = verdict(ctx, res)
    for _, key in ipairs(ctx.shapes) do
      self.cache:add_result { candidate = id, device = ctx.device, shape = key, outcome = res.outcome,
                              verify = verify, timing = res.shapes[key] or {}, run = run and run.id }
    end
  end)
end

-- The verdict's parts a revision replaces; the rest (where it was verified,
-- the bundle it came in, ...) is kept as stored.
local revised = { "outcome", "reason", "score", "sanitize_due", "sanitized" }

-- revise(ctx, cand, res, run [, was]) -> whether it was revised: a recorded
-- result judged again (kwb.loop.sanitizer's settle, sanitize_winners): its
-- outcome, reason, score and sanitizer marks replaced, its measurements and
-- the rest of its verdict kept; only where the stored result is still the
-- one run recorded (its run and seq), not one recorded since (another
-- process's evaluation of it), and, given `was` (the stored result as the
-- caller read it), where its outcome and marks are still those.
function Store:revise(ctx, cand, res, run, was)
  local done = false
  self.cache:transaction(function()
    local known = self:known(ctx, cand.id)
    if not known or known.seq ~= res.seq or not run or known.run ~= run.id then return end
    if was and (known.outcome ~= was.outcome or known.sanitized ~= was.sanitized
                or known.sanitize_due ~= was.sanitize_due) then return end
    self.cache:set_outcome(cand.id, res.outcome)
    local mine = {}
    for _, key in ipairs(ctx.shapes) do mine[key] = true end
    for _, row in ipairs(self.cache:results(cand.id)) do
      local verify = type(row.verify) == "table" and row.verify or {}
      -- (only this evaluation's rows: another recipe's at a shape both time keeps its own verdict)
      if row.device == ctx.device and mine[row.shape] and row.run == run.id and verify.seq == res.seq then
        for _, k in ipairs(revised) do verify[k] = res[k] end
        self.cache:revise_result { candidate = cand.id, device = ctx.device, shape = row.shape, outcome = res.outcome,
                                   verify = verify }
      end
    end
    done = true
  end)
  return done
end

-- results(ctx) -> every result known under ctx, oldest first; and how many
-- results bundles brought were left out (not trusted: known's).
function Store:results(ctx)
  local out, away = {}, 0
  local flags = table.concat(ctx.flags, "\0")
  for _, c in ipairs(self.cache:list(ctx.problem)) do
    if table.concat(c.flags, "\0") == flags then
      local r, imported = self:known(ctx, c.id)
      if r then out[#out + 1] = r end
      if imported then away = away + 1 end
    end
  end
  table.sort(out, function(a, b) return (a.seq or 0) < (b.seq or 0) end)
  return out, away
end

-- codes(ctx) -> { [candidate id] = its build's code digest } for the builds
-- made here on ctx's device kind and toolchain (kwb.cache's codes; a
-- bundle's carry none)
function Store:codes(ctx)
  return self.cache:codes(ctx.device, ctx.toolchain)
end

-- begin_run { recipe = path or name, source = text, settings = {} } -> run
function Store:begin_run(info)
  local id = self.cache:begin_run { recipe = info.recipe, source = info.source, settings = info.settings }
  return { id = id, short = ids.short(id) }
end

-- end_run(run, summary): the funnel and the model's usage go into the run record.
function Store:end_run(run, summary)
  local m = summary.model
  self.cache:end_run(run.id, summary.funnel, nil, m and { requests = m.requests, retries = m.retries,
                                                          failures = m.failures, input = m.input, output = m.output,
                                                          cost = m.cost, model = m.name,
                                                          estimated = m.estimated or nil, unseen = m.unseen })
end

function Store:runs() return self.cache:runs() end

-- certificate(run, cert): the run's final round (kwb.loop.certify) kept with its record
function Store:certificate(run, cert)
  self.cache:put_certificate(run.id, cert)
end

-- note_baseline(run, baseline, recipe): the run's baseline (kwb.measure.baseline),
-- with the recipe and problem it was measured for, into the run's record
-- (settings.baseline), where kwb report finds it; again once it is timed
-- (the candidate it took turns beside, and whether the start kernel did
-- too; `due` until then).
function Store:note_baseline(run, bl, recipe)
  local keep = { recipe = recipe.name, problem = recipe.problem:key(), name = bl.name, id = bl.id,
                 description = bl.description, error = bl.error, shapes = bl.shapes, check = bl.check,
                 seconds = bl.seconds, beside = bl.beside, with_start = bl.with_start, due = bl.due }
  self.cache:amend_run(run.id, { baseline = keep })
end

-- baseline(recipe, device) -> the baseline of the latest run of this recipe
-- (its name and problem) on this device kind that measured one, with its
-- run's id and start time, or nil; a run a bundle brought only where the
-- recipe trusts imports (kwb.cache.as_measured).
function Store:baseline(recipe, device)
  local found
  for _, r in ipairs(self.cache:runs()) do
    local b = r.settings.baseline
    -- (one checked but never timed, its run cut short, measured nothing)
    if b and not b.due and cache.as_measured(r.settings, recipe.trust_imported) and r.settings.device == device
       and b.recipe == recipe.name and b.problem == recipe.problem:key() then
      found = b
      found.run, found.started = r.id, r.started
    end
  end
  return found
end

-- latest_certificate(recipe, device, start_id) -> the certificate of the
-- latest run of this recipe on this device kind that has one (kwb report
-- reads it), with its run's id as `run`, or nil: one of the recipe's
-- problem, its shapes in its order and its start kernel (start_id); a run
-- a bundle brought only where the recipe trusts imports (kwb.cache.as_measured).
function Store:latest_certificate(recipe, device, start_id)
  local keys = {}
  for i, sh in ipairs(recipe.shapes) do keys[i] = sh.key end
  local want, found = table.concat(keys, " "), nil
  for _, r in ipairs(self.cache:runs()) do
    local c = r.settings.device == device and cache.as_measured(r.settings, recipe.trust_imported)
              and self.cache:certificate(r.id)
    if c and c.problem == recipe.problem:key() and table.concat(c.shapes or {}, " ") == want
       and require("kwb.loop.certify").role(c, "start") == start_id then
      found = c
      found.run = r.id
    end
  end
  return found
end

-- transcript(t [, run]) -> id: one model request and its reply (kwb.model).
function Store:transcript(t, run)
  t.run = run and run.id
  return self.cache:put_transcript(t)
end

return M
