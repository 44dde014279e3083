-- kwb/cache/certificate.lua: a run's certificate, the record of its final
-- round (kwb.loop.certify: its kernels, shapes, ratios with their 95%
-- intervals, device and kwb's commit), one per run, kept beside the run's
-- record; and finding a run by a prefix of its id (kwb cache show RUN, kwb
-- verify-pick RUN). Methods of kwb.cache's Cache.
local base = require "kwb.cache.base"

local Cache = base.Cache
local canon, fail, decode = base.canon, base.fail, base.decode
local check_string, check_table = base.check_string, base.check_table

-- find_run(prefix) -> the run whose id starts with prefix (at least 4 hex
-- digits) | nil, message, info
function Cache:find_run(prefix)
  check_string(prefix, "run id")
  if not prefix:match("^%x+$") or #prefix < 4 then
    return fail("bad-id", string.format("'%s' is not a run id (4 to 64 hex digits)", prefix))
  end
  local rows = self.db:exec("SELECT id FROM run WHERE substr(id, 1, ?2) = ?1 ORDER BY id LIMIT 2", prefix:lower(),
                            #prefix)
  if #rows == 0 then return fail("no-run", "no run " .. prefix .. " in the cache") end
  if #rows > 1 then return fail("ambiguous", string.format("run prefix %s is ambiguous", prefix)) end
  for _, r in ipairs(self:runs()) do if r.id == rows[1].id then return r end end
end

-- put_certificate(run_id, cert): a run's certificate (kwb.loop.certify), kept
-- with its record; a run has one, the latest.
function Cache:put_certificate(run, cert)
  check_string(run, "run id")
  check_table(cert, "certificate")
  local pick = check_string(cert.pick, "certificate.pick")
  self.db:exec("INSERT OR REPLACE INTO certificate(run, pick, body, created) VALUES (?1, ?2, ?3, ?4)", run, pick,
               canon(cert), cert.created or os.time())
  return true
end

-- certificate(run_id) -> the run's certificate, or nil
function Cache:certificate(run)
  check_string(run, "run id")
  local row = self.db:exec("SELECT body FROM certificate WHERE run = ?1", run)[1]
  return row and decode(row.body, nil) or nil
end
