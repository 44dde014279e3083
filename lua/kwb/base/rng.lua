-- kwb/base/rng.lua: the loop's random numbers. Seeds are pure functions of their
-- parts, so a run's inputs follow from its seed and each candidate's id; a
-- private generator gives strategies their draws without touching
-- math.random, so a seed reproduces a run's proposals.
local core = require "kwb.core"

local M = {}

-- seed_of(...) -> 48 bits of the SHA-256 of the parts.
function M.seed_of(...)
  local parts = table.pack(...)
  for i = 1, parts.n do parts[i] = tostring(parts[i]) end
  return tonumber(core.sha256(table.concat(parts, ":", 1, parts.n)):sub(1, 12), 16)
end

-- secret() -> 63 bits drawn once per process from /dev/urandom: a key no
-- seed reproduces (the judge's digests, whose keys a candidate must not know).
local secret
function M.secret()
  if not secret then
    local f = assert(io.open("/dev/urandom", "rb"))
    secret = string.unpack("<i8", f:read(8)) & 0x7FFFFFFFFFFFFFFF
    f:close()
  end
  return secret
end

-- new(seed) -> rand: rand() a float in [0, 1), rand(n) an integer in 1..n,
-- rand(m, n) one in m..n (xorshift64*).
function M.new(seed)
  local x = seed ~= 0 and seed or 0x9E3779B97F4A7C15
  return function(m, n)
    x = x ~ (x >> 12); x = x ~ (x << 25); x = x ~ (x >> 27)
    local r = (x * 0x2545F4914F6CDD1D) >> 11   -- 53 bits
    local f = r / 9007199254740992.0
    if not m then return f end
    if not n then m, n = 1, m end
    return m + math.floor(f * (n - m + 1))
  end
end

return M
