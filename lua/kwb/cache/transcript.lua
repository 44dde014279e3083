-- kwb/cache/transcript.lua: what the model was asked and what it answered,
-- one row per request (kwb.model makes them): the provider and model, the
-- hash of the request as sent, the request and reply bodies as blobs (the
-- API key never: it travels in headers only), tokens, seconds, cost,
-- attempts and the error of a failed one. A candidate a reply produced
-- names its transcript. Methods of kwb.cache's Cache.
local base = require "kwb.cache.base"
local core = require "kwb.core"

local Cache = base.Cache
local check_string = base.check_string

-- put_transcript { run =, provider =, model =, purpose =, prompt_hash =,
-- request =, reply =, tokens_in =, tokens_out =, seconds =, cost =,
-- attempts =, error = } -> id
function Cache:put_transcript(t)
  check_string(t.provider, "transcript.provider")
  check_string(t.model, "transcript.model")
  if type(t.request) ~= "string" then error("transcript.request must be a string", 2) end
  local now = os.time()
  return self:transaction(function()
    local seq = self.db:exec("SELECT coalesce(max(seq), 0) + 1 AS n FROM transcript")[1].n
    local id = core.sha256(table.concat({ t.run or "", tostring(now), tostring(core.now()), t.prompt_hash or "",
                                          tostring(seq) }, "\0"))
    local req = self.db:put_blob(t.request)
    local rep = t.reply and self.db:put_blob(t.reply) or nil
    self.db:exec("INSERT INTO transcript(id, seq, run, created, provider, model, purpose, prompt_hash, request, "
                 .. "reply, tokens_in, tokens_out, seconds, cost, attempts, error) "
                 .. "VALUES (?1, ?16, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
                 id, t.run, now, t.provider, t.model, t.purpose, t.prompt_hash or core.sha256(t.request), req, rep,
                 t.tokens_in, t.tokens_out, t.seconds or 0, t.cost, t.attempts or 1, t.error, seq)
    return id
  end)
end

-- transcript(id) -> the row with .request and .reply read back | nil, msg
function Cache:transcript(id)
  local r = self.db:exec("SELECT * FROM transcript WHERE id = ?1", id)[1]
  if not r then return nil, "no transcript " .. tostring(id) end
  for _, k in ipairs { "request", "reply" } do
    if r[k] then
      local text, err = self.db:get_blob(r[k])
      if not text then return nil, string.format("transcript %s: %s", id, err) end
      r[k] = text
    end
  end
  return r
end

-- transcripts([run]) -> the rows (without bodies), oldest first
function Cache:transcripts(run)
  if run then return self.db:exec("SELECT * FROM transcript WHERE run = ?1 ORDER BY seq", run) end
  return self.db:exec("SELECT * FROM transcript ORDER BY seq")
end
