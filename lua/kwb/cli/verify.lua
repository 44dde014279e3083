-- kwb/cli/verify.lua: `kwb verify-pick RUN [--recipe FILE] [--seconds S]
-- [--json] [--queue URL ...]`: a run's final round (kwb.loop.certify) timed
-- again on this machine, or by a fleet's worker of the certificate's device
-- kind, each ratio of its certificate against the same ratio now.
local certify = require "kwb.loop.certify"
local ids = require "kwb.base.ids"

local M = {}

-- again(cache, cert, file, seconds, fleet) -> the new round's certificate, the
-- session's device | raises with one sentence: the certificate's kernels
-- built from the cache and timed in turns here (or by a fleet's worker:
-- fleet = { queue =, queue_password_file =, fleet_key_file =, device = },
-- kwb.loop.session's), in the certificate's order.
local function again(cache, cert, file, seconds, fleet)
  local recipe = require("kwb.load").load(file)
  if recipe.problem:key() ~= cert.problem then
    error(string.format("recipe %s is of problem %s, the certificate's of %s", file, recipe.problem:key(),
                        tostring(cert.problem)), 0)
  end
  local s = recipe:session(fleet)
  if s.ctx.device ~= cert.device then
    error(string.format("the certificate was measured on %s; this machine is %s: verify it on one of that kind",
                        tostring(cert.device), s.ctx.device), 0)
  end
  local want = {}
  for _, e in ipairs(cert.entries) do
    if e.role == "candidate" then
      if not cache:get(e.id) then error(string.format("kernel %s of the certificate is not in the cache", e.short), 0) end
      want[#want + 1] = e.id
    end
  end
  local list = certify.entries(s, want)
  local have = {}
  for _, e in ipairs(list) do have[e.id] = true end
  for _, e in ipairs(cert.entries) do
    if not have[e.id] then
      error(string.format("the %s %s of the certificate is not this recipe's %s (its file changed since?)", e.role,
                          e.short, e.role == "candidate" and "build" or e.role), 0)
    end
  end
  local ok, got = pcall(certify.time, s, list, { seconds = seconds, target = cert.target, precise = 1 })
  s:close_workers()
  if not ok then error(got, 0) end
  if got.error then error("the round failed: " .. got.error, 0) end
  return certify.certificate(recipe, list, got, { target = cert.target, best = cert.best, run = cert.run,
                                                  device = s.ctx.device, seconds = seconds })
end

function M.main(...)
  local help = require "kwb.help"
  local usage = "usage: " .. help.command("verify-pick").usage
  local cli = require "kwb.cli"
  local spec = { recipe = "value", json = "flag", help = "flag",
                 seconds = { "value", conv = function(v) local n = tonumber(v); return n and n > 0 and n < math.huge and n or nil end,
                             what = "a number of seconds > 0" } }
  for k, v in pairs(cli.fleet_spec) do spec[k] = v end
  local pos, opts = require("kwb.base.args").parse({ ... }, spec)
  if pos and (opts.help or pos[1] == "-h") then
    io.write(help.command_help("verify-pick"))
    return 0
  end
  if not pos or #pos ~= 1 then
    io.stderr:write("kwb verify-pick: ", pos and "it takes one RUN" or opts, "\n", usage, "\n")
    return 2
  end
  local ok, res = pcall(function()
    local cache = require("kwb.loop.store").open_existing().cache   -- (a run's certificate is in a cache)
    local run, msg = cache:find_run(pos[1])
    if not run then error(msg, 0) end
    local cert = cache:certificate(run.id)
    if not cert then
      error(string.format("run %s has no certificate (no final round: nothing but the start kernel was timed, or "
                          .. "--certify 0)", ids.short(run.id)), 0)
    end
    local file = opts.recipe
    if not file and cert.imported then
      error(string.format("run %s came in bundle %s, whose run names a recipe file of another machine's: name it with "
                          .. "--recipe FILE", ids.short(run.id), cert.imported), 0)
    end
    local ok_fleet, ferr = cli.check_fleet(opts, "round")
    if not ok_fleet then error(ferr, 0) end
    -- (on a fleet: a worker of the certificate's kind times it, unless --device names another)
    local fleet = opts.queue and { queue = opts.queue, queue_password_file = opts.queue_password_file,
                                   fleet_key_file = opts.fleet_key_file, device = opts.device or cert.device }
    local now = again(cache, cert, file or run.recipe, opts.seconds or cert.limit or cert.seconds, fleet)
    return { cert = cert, now = now }
  end)
  if not ok then
    io.stderr:write("kwb verify-pick: ", tostring(res), "\n")
    return 1
  end
  local cmp, all = certify.compare(res.cert, res.now)
  if opts.json then
    local out = {}
    for i, c in ipairs(cmp) do
      out[i] = { kind = c.ratio.kind, id = c.ratio.id, over = c.ratio.over, shape = c.ratio.shape,
                 certified = { median = c.ratio.median, lo = c.ratio.lo, hi = c.ratio.hi },
                 now = c.now and { median = c.now.median, lo = c.now.lo, hi = c.now.hi } or nil, agree = c.agree,
                 verdict = c.verdict }
    end
    print(require("kwb.base.text").json { run = res.cert.run, agree = all, ratios = out, certificate = res.cert,
                                          again = res.now })
    return all and 0 or 1
  end
  local n, unsure = 0, 0
  print(string.format("run %s: its final round again on %s, %d rounds, %.1f s", ids.short(res.cert.run), res.now.device,
                      res.now.rounds, res.now.seconds))
  local word = { agrees = "agrees", disagrees = "DISAGREES", inconclusive = "too wide" }
  for _, c in ipairs(cmp) do
    if c.agree then n = n + 1 end
    if c.verdict == "inconclusive" then unsure = unsure + 1 end
    print(string.format("%-9s %s: certified %s, now %s", word[c.verdict], certify.ratio_name(res.cert, c.ratio),
                        certify.interval(c.ratio), c.now and certify.interval(c.now) or "not measured"))
  end
  local why = n + unsure == #cmp and ": the round here was too noisy to tell (a longer one: --seconds)"
              or ": the pick does not hold here"
  print(string.format("%d of %d ratios agree%s%s", n, #cmp,
                      unsure > 0 and string.format(", %d too wide to tell", unsure) or "", all and "" or why))
  return all and 0 or 1
end

return M
