-- tests/lua/fake_cuda.lua: a stand-in for kwb.cuda that runs C on the host,
-- for tests of the loop's CUDA adapter (kwb.measure.backends.cuda) without a GPU.
-- Modules compile with cc, their "PTX" is the preprocessed source (which, like
-- PTX, shows what macros made), kernels are C functions, and plans run their
-- steps in order. It records what ran:
--   fake.launches   { kernel =, grid =, block = } per step run (first dimensions)
--   fake.runs       kernel name -> number of runs
--   fake.poisoned   every buffer handed to poison_before
--   fake.looks      checks after a timed run in one look (redzones with outputs)
--   fake.full       timed runs checked in full (redzones without outputs next)
--   fake.unchecked  timed runs followed by another with no check between
--   fake.replays    per timed run (replay): { plan =, sums = { checksum of
--                   each buffer argument }, poison = { elements still poison } }
-- With fake.cubins set, a module has a cubin: its shared object's bytes (an
-- ELF image the adapter's code digest reads, as it reads a real cubin).
-- Without it, modules have none, and no candidate is known by its code.
-- A step with more than 1024 threads a block fails as a launch would.
--
--   local fake = require "fake_cuda" ()      -- installs itself as kwb.cuda
local host = require "kwb.host"
local core = require "kwb.core"

return function()
  local fake = {
    launches = {}, runs = {}, poisoned = {}, replays = {},
    device_count = function() return 1 end,
    -- (pageable memory out of the device's reach: the backend holds expected values in kwb.host buffers)
    device = function() return { name = "fake-gpu", unified_addressing = true, pageable_access = false } end,
    device_kind = function() return "fake-gpu sm_00" end,
    buffer = host.buffer,
    compare = host.compare,
    ceilings = function() return { copy_bytes_per_s = 1e12, fma_flops_per_s = 1e13, bf16_flops_per_s = 2e13 } end,
  }

  function fake.compile(spec)
    local m, msg, info = host.compile { source = spec.source, name = spec.name, defines = spec.defines }
    if not m then return nil, msg, info end
    local pp = require("kwb.measure.rules").preprocess(spec.source, { defines = host.define_list(spec.defines) })
    return { ptx = function() return pp.text end,
             cubin = fake.cubins and function()
               local f = assert(io.open(m.path, "rb"))
               local image = f:read("a")
               f:close()
               return image
             end or nil,
             kernel = function(_, name, sig)
               local fn, err = m:fn((sig:gsub("void%s+[%w_]+%s*%(", "void " .. name .. "(")))
               if not fn then return nil, err end
               return { fn = fn, name = name }
             end }
  end

  local function first(v) return type(v) == "table" and v[1] or v end

  local Plan = {}
  Plan.__index = Plan

  function fake.plan(steps)
    local p = setmetatable({ steps = {} }, Plan)
    for _, s in ipairs(steps or {}) do p:add(s) end
    return p
  end

  function Plan:add(s)
    self.steps[#self.steps + 1] = s
    return self
  end

  function Plan:run()
    for _, s in ipairs(self.steps) do
      local name, block = s[1].name, first(s.block)
      fake.launches[#fake.launches + 1] = { kernel = name, grid = first(s.grid), block = block }
      fake.runs[name] = (fake.runs[name] or 0) + 1
      if block > 1024 then return nil, "too many threads per block (" .. block .. ")" end
      s[1].fn(table.unpack(s.args))
    end
    return true
  end

  function Plan:poison_before(outs)
    self.outs = outs
    for _, b in ipairs(outs) do fake.poisoned[#fake.poisoned + 1] = b end
    return self
  end

  -- Three runs, the outputs poisoned before each, as the real timing does.
  function Plan:time()
    local ts = {}
    for i = 1, 3 do
      for _, b in ipairs(self.outs or {}) do b:poison() end
      local t0 = core.now()
      local ok, err = self:run()
      if not ok then return nil, err end
      ts[i] = math.max(core.now() - t0, 1e-9)
    end
    table.sort(ts)
    return { median = ts[2], min = ts[1], p10 = ts[1], p90 = ts[3], spread = 0, n = 3 }
  end

  function fake.time(plan, opts) return plan:time(opts) end

  -- One timed run: the poison_before buffers poisoned, what its buffer
  -- arguments hold recorded, then run and timed.
  function Plan:replay()
    for _, b in ipairs(self.outs or {}) do b:poison() end
    local seen = { plan = self, sums = {}, poison = {} }
    for _, s in ipairs(self.steps) do
      for i, a in ipairs(s.args) do
        if type(a) == "userdata" then
          seen.sums[#seen.sums + 1] = a:checksum()
          seen.poison[#seen.poison + 1] = (a:poisoned())
        else seen.sums[#seen.sums + 1], seen.poison[#seen.poison + 1] = i, 0 end
      end
    end
    fake.replays[#fake.replays + 1] = seen
    if fake.pending then fake.unchecked = fake.unchecked + 1 end
    fake.pending = true
    local t0 = core.now()
    local ok, err = self:run()
    if not ok then return nil, err end
    return math.max(core.now() - t0, 1e-9)
  end

  -- Host buffers lie between redzones: the guard bands of this stand-in,
  -- and with outputs given, their elements still poison (as kwb.cuda's one
  -- launch gives both). fake.looks counts the calls with outputs.
  fake.looks, fake.full, fake.unchecked = 0, 0, 0
  function fake.redzones(bufs, outs)
    if fake.pending then   -- the check after a timed run
      fake.pending = false
      if not outs then fake.full = fake.full + 1 end
    end
    local hits = {}
    for i, b in ipairs(bufs) do
      local first, last = b:redzone()
      if first then hits[i] = { first, last } end
    end
    if not outs then return hits end
    fake.looks = fake.looks + 1
    local unwritten = {}
    for j, b in ipairs(outs) do
      local n, first = b:poisoned()
      if n > 0 then unwritten[j] = { n, first } end
    end
    return hits, unwritten
  end

  -- device buffers' host copies (buf:save, buf:load), for host buffers
  local methods = getmetatable(host.buffer("u8", 1)).methods
  function methods.save(b, into)
    local c = into or host.buffer(b.dtype, b.n)
    c:copy(b)
    return c
  end
  function methods.load(b, c) b:copy(c); return b end
  -- device <-> host byte copies (dbuf:download, dbuf:upload)
  function methods.download(b, into) into:set_raw(b:raw()); return into end
  function methods.upload(b, from) b:set_raw(type(from) == "string" and from or from:raw()); return b end

  package.loaded["kwb.cuda"] = fake
  return fake
end
