-- kwb/strategies/population.lua: the verified kernels a model-driven run
-- draws its parents from, instead of always the best (the `population`
-- option of llm and llm+tune: kwb.strategies.llm).
--
-- A member is a verified result (accepted, slower, or the start kernel) of
-- the recipe's context: the session's history when the run begins, then
-- every verified result the run sees. Members are sorted into cells by
-- behaviour, and each cell keeps one elite, its fastest member (the highest
-- score; the earliest on a tie):
--
--   wins   the shapes (a bitmask in the recipe's shape order, bit 1 the first)
--          where the member's median is within `margin` of the fastest median
--          any member has there
--   class  its profile's bottleneck class (kwb profile) on this device kind, or
--          "unprofiled"
--   size   its source's size: 0 under 1 KiB, one more for each factor of 4
--
-- The members live on `islands` islands, each with its own cells. Request n
-- (counting from 1) samples from island (n - 1) % islands + 1: its parent is
-- the island's best with probability `best`, else the elite of a cell drawn
-- uniformly (cells in the order of their keys); its inspirations are up to
-- `inspirations` other elites: the island's best first where it is not the
-- parent, then cells drawn uniformly without replacement. After every
-- `exchange` requests each island's best is copied to the next island (the
-- last's to the first), all bests taken before any moves. A result joins the
-- island of the request that proposed it. The draws come from a generator
-- of the run's seed alone (kwb.base.rng), apart from the run's own draws, so
-- a seed gives the same parents and a search strategy's draws stay as they were.
--
--   local pop = population.new(opts, seed, shapes)   -- opts: islands, exchange, best, inspirations, margin
--   pop:add(res, island, { bytes =, class = })        -- a verified result; anything else is left out
--   local pick = pop:sample()   -- { request =, island =, parent = member, inspirations = { member, ... } }
--   pop:cells(island)           -- { { key =, wins =, class =, size =, elite = member }, ... } sorted by key
--   pop:describe(member)        -- "wins n=64, n=96 · unprofiled · under 1 KiB"
--   pop.exchanges               -- { { request =, moves = { { from =, to =, id = }, ... } }, ... }
--   population.for_run(run, opts)                   -- the run's (kwb.strategies.llm); seeded(...): kwb prompt's
--   pop:shown(pick, cache, recipe)                  -- the prompt's inspirations, with their part's text
local figures = require "kwb.figures"
local ids = require "kwb.base.ids"
local ktext = require "kwb.base.text"
local rng = require "kwb.base.rng"

local M = {}

M.defaults = { islands = 2, exchange = 4, best = 0.5, inspirations = 2, margin = 0.05 }

-- The option's fields and what each must be (kwb.recipe checks them).
M.fields = { islands = "a whole number of islands, 1 or more", exchange = "requests between exchanges, 1 or more",
             best = "the probability (0 to 1) that a parent is the island's best",
             inspirations = "inspirations a prompt shows, 0 to 4",
             margin = "the fraction (0 to 1) within the fastest at which a shape counts as won" }

-- check(v) -> nil | field, what, got: is v a population option (false, true
-- or a table of M.fields)? field: "" or ".name"; got false: `what` is the whole complaint.
function M.check(v)
  if v == false or v == true then return nil end
  if type(v) ~= "table" then return "", "false, true or a table of islands, exchange, best, inspirations, margin", v end
  for k, x in pairs(v) do
    local what = M.fields[k]
    if not what then
      return "." .. tostring(k), "no such field (a population has islands, exchange, best, inspirations, margin)", false
    end
    local whole = math.type(x) == "integer"
    local ok = (k == "islands" or k == "exchange") and whole and x >= 1
               or k == "inspirations" and whole and x >= 0 and x <= 4
               or (k == "best" or k == "margin") and type(x) == "number" and x >= 0 and x <= 1
    if not ok then return "." .. k, what, x end
  end
  return nil
end

-- size_bucket(bytes) -> 0 under 1 KiB, 1 under 4 KiB, 2 under 16 KiB, ...
function M.size_bucket(bytes)
  local b, limit = 0, 1024
  while bytes >= limit do b, limit = b + 1, limit * 4 end
  return b
end

local function size_text(b)
  local kib = 4 ^ b
  return string.format("under %d KiB", math.floor(kib))
end

local Pop = {}
Pop.__index = Pop

-- new(opts, seed, shapes) -> an empty population; shapes: the recipe's
-- shapes ({ key = }, in order); opts: M.defaults' fields (true: the defaults).
function M.new(opts, seed, shapes)
  local o = {}
  for k, v in pairs(M.defaults) do o[k] = v end
  for k, v in pairs(type(opts) == "table" and opts or {}) do o[k] = v end
  local p = setmetatable({ opts = o, shapes = shapes, rand = rng.new(rng.seed_of(seed, "population")),
                           islands = {}, requests = 0, order = 0, exchanges = {} }, Pop)
  for k = 1, o.islands do p.islands[k] = { members = {}, by_id = {} } end
  return p
end

local function verified(res)
  return (res.outcome == "accepted" or res.outcome == "slower" or res.outcome == "start") and res.shapes
         and next(res.shapes) ~= nil and (res.score or res.outcome == "start")
end
M.verified = verified

-- add(res, island, info) -> the member, or nil when res is no verified result
-- or is on that island already. info: { bytes = its source's size, class = its
-- profile's bottleneck class or nil }.
function Pop:add(res, island, info)
  if not verified(res) then return nil end
  local isl = self.islands[island or 1]
  if isl.by_id[res.id] then return nil end
  self.order = self.order + 1
  local m = { id = res.id, short = res.short or ids.short(res.id), res = res, score = res.score or 1,
              class = info and info.class or "unprofiled", size = M.size_bucket(info and info.bytes or 0),
              order = self.order }
  isl.members[#isl.members + 1] = m
  isl.by_id[m.id] = m
  return m
end

-- Is id a member of any island?
function Pop:member(id)
  for _, isl in ipairs(self.islands) do
    if isl.by_id[id] then return isl.by_id[id] end
  end
  return nil
end

-- The fastest median of any member at each shape.
function Pop:fastest()
  local out = {}
  for _, isl in ipairs(self.islands) do
    for _, m in ipairs(isl.members) do
      for _, sh in ipairs(self.shapes) do
        local r = m.res.shapes[sh.key]
        if r and r.median and (not out[sh.key] or r.median < out[sh.key]) then out[sh.key] = r.median end
      end
    end
  end
  return out
end

-- wins(member [, fastest]) -> the bitmask of the shapes it wins
function Pop:wins(m, fastest)
  fastest = fastest or self:fastest()
  local mask = 0
  for i, sh in ipairs(self.shapes) do
    local r, f = m.res.shapes[sh.key], fastest[sh.key]
    if r and r.median and f and r.median <= f * (1 + self.opts.margin) then mask = mask | (1 << (i - 1)) end
  end
  return mask
end

local function better(a, b) return a.score > b.score or a.score == b.score and a.order < b.order end

-- cells(island) -> the island's cells, each with its elite, sorted by key
function Pop:cells(k)
  local fastest, by_key, out = self:fastest(), {}, {}
  for _, m in ipairs(self.islands[k].members) do
    local wins = self:wins(m, fastest)
    local key = string.format("%d/%s/%d", wins, m.class, m.size)
    local c = by_key[key]
    if not c then
      c = { key = key, wins = wins, class = m.class, size = m.size }
      by_key[key], out[#out + 1] = c, c
    end
    if not c.elite or better(m, c.elite) then c.elite = m end
  end
  table.sort(out, function(a, b) return a.key < b.key end)
  return out
end

-- best(island) -> its best member, or nil while it has none
function Pop:best(k)
  local b
  for _, m in ipairs(self.islands[k].members) do
    if not b or better(m, b) then b = m end
  end
  return b
end

-- describe(member) -> its cell in words
function Pop:describe(m)
  local wins, names = self:wins(m), {}
  for i, sh in ipairs(self.shapes) do
    if wins & (1 << (i - 1)) ~= 0 then names[#names + 1] = sh.key end
  end
  return string.format("wins %s · %s · %s", #names > 0 and table.concat(names, ", ") or "no shape", m.class,
                       size_text(m.size))
end

-- Each island's best to the next island, all taken before any moves.
function Pop:exchange()
  local n, bests, moves = #self.islands, {}, {}
  if n < 2 then return end
  for k = 1, n do bests[k] = self:best(k) end
  for k = 1, n do
    local to = k % n + 1
    local b = bests[k]
    if b and not self.islands[to].by_id[b.id] then
      self.order = self.order + 1
      local copy = setmetatable({ order = self.order }, { __index = b })
      local isl = self.islands[to]
      isl.members[#isl.members + 1], isl.by_id[b.id] = copy, copy
      moves[#moves + 1] = { from = k, to = to, id = b.id }
    end
  end
  self.exchanges[#self.exchanges + 1] = { request = self.requests, moves = moves }
end

-- sample() -> { request =, island =, parent =, inspirations = } for the next
-- request; parent nil while the island has no member.
function Pop:sample()
  self.requests = self.requests + 1
  local n = self.requests
  local k = (n - 1) % #self.islands + 1
  local cells, best = self:cells(k), self:best(k)
  local parent
  if best then
    if self.rand() < self.opts.best then parent = best
    else parent = cells[self.rand(#cells)].elite end
  end
  local insp, pool = {}, {}
  if parent and best ~= parent and self.opts.inspirations > 0 then insp[1] = best end
  for _, c in ipairs(cells) do
    if c.elite ~= parent and c.elite ~= best then pool[#pool + 1] = c.elite end
  end
  while #insp < self.opts.inspirations and #pool > 0 do
    insp[#insp + 1] = table.remove(pool, self.rand(#pool))
  end
  if n % self.opts.exchange == 0 then self:exchange() end
  return { request = n, island = k, parent = parent, inspirations = insp }
end

-- ---- the prompt's part -------------------------------------------------------------

-- An inspiration's source is shown where it has at most this many bytes.
M.source_bytes = 4096

-- part(recipe, list) -> the prompt's `inspirations` text (kwb.strategies.prompt), or
-- nil: each elite's score, parameters and cell, its time, speed-up and share of the
-- floor at each shape, and its source where short
function M.part(recipe, list)
  if #list == 0 then return nil end
  local lines = { "Other kernels of the population, each the fastest of its kind (the shapes it wins, within a margin "
                  .. "of the fastest; its bottleneck; its size), for ideas:" }
  for _, x in ipairs(list) do
    local r, per = x.res, {}
    for _, sh in ipairs(recipe.shapes) do
      local f = r.shapes[sh.key]
      if f then
        per[#per + 1] = string.format("%s %s %.2fx%s", sh.key, figures.time(f.median), f.speedup or 1,
                                      f.floor_frac and string.format(" (%.0f%% of floor)", 100 * f.floor_frac) or "")
      end
    end
    lines[#lines + 1] = string.format("\n%s (%s%s; %s): %s", r.short, r.outcome == "start" and "the start kernel"
                                      or string.format("%.2fx", r.score or 1),
                                      r.params and next(r.params) and (", " .. ktext.params_text(r.params)) or "",
                                      x.cell, table.concat(per, " · "))
    if x.source and #x.source <= M.source_bytes then
      lines[#lines + 1] = string.format("```%s\n%s```", recipe.backend == "cuda" and "cuda" or "c", x.source)
    end
  end
  return table.concat(lines, "\n")
end

-- shown(pick, cache, recipe) -> the prompt's `inspirations` (kwb.strategies.prompt's
-- build option): { { res =, cell =, source = }, ..., text = part's }
function Pop:shown(pick, cache, recipe)
  local out = {}
  for i, m in ipairs(pick.inspirations) do
    local got = cache and cache:get(m.id)
    out[i] = { res = m.res, cell = self:describe(m), source = got and got.source }
  end
  out.text = M.part(recipe, out)
  return out
end

-- ---- a run's population -------------------------------------------------------

-- info_of(cache, device) -> fn(res) -> { bytes =, class = }: its source's size
-- from the cache, its profile's class on the device kind (the profile of the
-- shape where its plan takes longest, as the prompt shows it)
function M.info_of(cache, device)
  return function(res)
    local got = cache:get(res.id)
    local class, longest
    for _, row in ipairs(cache:profiles(res.id) or {}) do
      if row.device == device and (not longest or (row.data.plan_seconds or 0) > longest) then
        class, longest = row.data.class, row.data.plan_seconds or 0
      end
    end
    return { bytes = got and got.source and #got.source or 0, class = class }
  end
end

-- seeded(opts, seed, recipe, results, info) -> a population of the seed and the
-- recipe's shapes holding the verified results (the start kernel's among them;
-- none still due its put-off sanitizer run) on every island; info: info_of's
function M.seeded(opts, seed, recipe, results, info)
  local p = M.new(opts, seed, recipe.shapes)
  p.info = info
  local seen = {}
  for _, res in ipairs(results) do
    if res and not seen[res.id] and verified(res) and not res.sanitize_due then
      seen[res.id] = true
      local got = info(res)
      for k = 1, #p.islands do p:add(res, k, got) end
    end
  end
  return p
end

-- for_run(run, opts) -> the run's population: the start kernel and the
-- context's verified results so far, the run's seed
function M.for_run(run, opts)
  local s = run.session
  local results = { s.start }
  for _, res in ipairs(s:history()) do results[#results + 1] = res end
  results[#results + 1] = s.best
  return M.seeded(opts, run.seed, run.recipe, results, M.info_of(s.store.cache, s.ctx.device))
end

-- summary() -> { islands =, requests =, exchanges =, cells = { n, ... }, members = { n, ... } }: the
-- run summary's `population` (kwb.loop.summary), cells and members per island
function Pop:summary()
  local out = { islands = #self.islands, requests = self.requests, exchanges = #self.exchanges, cells = {}, members = {} }
  for k, isl in ipairs(self.islands) do out.cells[k], out.members[k] = #self:cells(k), #isl.members end
  return out
end

-- note(res, island): a result the run saw into the island its request drew from
function Pop:note(res, island)
  if not verified(res) or not self.info then return end
  self:add(res, island or 1, self.info(res))
end

return M
