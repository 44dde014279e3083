-- kwb/base/http.lua: HTTP requests with retries, several in flight at once (over
-- kwb.core's libcurl multi handle).
--
--   local c = http.client { retries = 4 }
--   local t = c:post { url = "https://...", headers = { "Content-Type: application/json" }, body = "{...}" }
--   c:poll(0)                 -- moves every request on; returns the ones that finished
--   local r = c:wait(t)       -- { status =, body =, headers =, seconds =, attempts =, error =, code =,
--                             --   unseen = tries the server may have served whose reply never came }
--
-- A request that fails with 429, a 5xx status or a connection error (refused,
-- timed out, cut short) is tried again, up to `retries` more times, after the
-- server's Retry-After when it gives one, else after an exponential backoff
-- with jitter: base_delay seconds before the first retry, twice that before
-- the second and so on, at most max_delay, each times a factor drawn from
-- [0.5, 1.5). Other statuses and TLS failures are final at once.
local core = require "kwb.core"

local M = {}

M.defaults = { retries = 4, base_delay = 0.5, max_delay = 30, connect_timeout = 10, timeout = 120 }

local Client = {}
Client.__index = Client

-- client { retries =, base_delay =, max_delay =, connect_timeout =, timeout =, random = } -> client
function M.client(opts)
  opts = opts or {}
  local c = setmetatable({ waiting = {}, flying = {}, random = opts.random or math.random }, Client)
  for k, v in pairs(M.defaults) do c[k] = opts[k] or v end
  c.multi = assert(core.http_multi())
  return c
end

-- Is a finished attempt worth another try?
function M.retryable(r)
  if r.code then return r.code == "timeout" or r.code == "connect" or r.code == "transfer" end
  return r.status == 429 or r.status >= 500
end

-- Seconds a Retry-After value asks for (delta-seconds or an HTTP date), or nil.
function M.retry_after(value, now)
  if not value then return nil end
  local n = tonumber(value)
  if n then return n >= 0 and n or nil end
  local months = { Jan = 1, Feb = 2, Mar = 3, Apr = 4, May = 5, Jun = 6, Jul = 7, Aug = 8, Sep = 9, Oct = 10,
                   Nov = 11, Dec = 12 }
  local d, mon, y, h, mi, s = value:match("^%a+, (%d+) (%a+) (%d+) (%d+):(%d+):(%d+) GMT$")
  if not d or not months[mon] then return nil end
  local t = { year = tonumber(y), month = months[mon], day = tonumber(d), hour = tonumber(h), min = tonumber(mi),
              sec = tonumber(s) }
  -- os.time reads a table as local time: correct by this zone's offset
  local here = os.time()
  local offset = os.time(os.date("!*t", here)) - here
  return math.max(0, os.time(t) - offset - (now or here))
end

-- The wait before try number `try` (2, 3, ...) after the attempt r.
function Client:delay(r, try)
  local asked = M.retry_after(r.headers and r.headers["retry-after"])
  if asked then return math.min(asked, self.max_delay * 2) end
  return math.min(self.max_delay, self.base_delay * 2 ^ (try - 2)) * (0.5 + self.random())
end

local function start(c, t)
  t.attempts = t.attempts + 1
  local id = c.multi:add { url = t.req.url, method = t.req.method, headers = t.req.headers, body = t.req.body,
                           connect_timeout = t.req.connect_timeout or c.connect_timeout,
                           timeout = t.req.timeout or c.timeout }
  c.flying[id] = t
end

-- post { url =, headers =, body =, method =, timeout =, connect_timeout = } -> ticket
function Client:post(req)
  local t = { req = req, attempts = 0, retries = 0, unseen = 0, started = core.now() }
  start(self, t)
  return t
end

-- Did the attempt r go out and end without its reply (timed out or cut
-- short)? The server may have served it, and billed it.
function M.unseen(r)
  return r.sent == true and (r.code == "timeout" or r.code == "transfer")
end

-- One finished attempt: final, or queued for another try.
local function finished(c, t, r, done)
  if M.unseen(r) then t.unseen = t.unseen + 1 end
  if M.retryable(r) and t.retries < c.retries then
    t.retries = t.retries + 1
    t.last = r
    t.due = core.now() + c:delay(r, t.attempts + 1)
    c.waiting[#c.waiting + 1] = t
    return
  end
  r.attempts, r.retries, r.seconds, r.unseen = t.attempts, t.retries, core.now() - t.started, t.unseen
  t.result = r
  done[#done + 1] = t
end

-- poll(seconds) -> the tickets that finished within `seconds` (maybe none).
function Client:poll(seconds)
  local done, ends_at = {}, core.now() + (seconds or 0)
  repeat
    local now = core.now()
    local soonest = ends_at
    for i = #self.waiting, 1, -1 do   -- retries whose time has come
      local t = self.waiting[i]
      if t.due <= now then table.remove(self.waiting, i); start(self, t)
      elseif t.due < soonest then soonest = t.due end
    end
    if self.multi:pending() == 0 and #self.waiting == 0 then break end
    for _, r in ipairs(self.multi:wait(math.max(0, soonest - core.now()))) do
      local t = self.flying[r.id]
      self.flying[r.id] = nil
      finished(self, t, r, done)
    end
  until #done > 0 or core.now() >= ends_at
  return done
end

-- wait(ticket) -> its final result; other requests move on meanwhile (their
-- tickets hold their results when they finish).
function Client:wait(t)
  while not t.result do self:poll(1) end
  return t.result
end

function Client:pending()
  return self.multi:pending() + #self.waiting
end

function Client:close() self.multi:close() end

return M
