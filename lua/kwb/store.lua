-- kwb/store.lua: what the loop remembers between runs: every evaluated
-- candidate's result under its evaluation context, and the run records.
-- One JSON object per line in <cache dir>/loop.jsonl.
--
--   local s = store.open()                 -- next to kwb.core.cache_path
--   s:known(ctx, id)                       -- the stored result, or nil
--   s:record(ctx, cand, result)            -- always, whatever the outcome
--   s:results(ctx)                         -- every stored result of ctx, in order
--   s:begin_run(info) -> run; s:end_run(run, summary)
local cjson = require "cjson"
local core = require "kwb.core"

local M = {}

local Store = {}
Store.__index = Store

local function dir_of(path) return path:match("^(.*)/[^/]*$") or "." end

function M.default_path()
  return dir_of(core.cache_path or "cache/kwb.db") .. "/loop.jsonl"
end

-- JSON has one number type: numbers with an integral value come back as
-- integers, so a parameter 32 is 32 again (not 32.0) and hashes the same.
local function integers(v)
  if type(v) == "number" then return math.tointeger(v) or v end
  if type(v) == "table" then
    for k, x in pairs(v) do v[k] = integers(x) end
  end
  return v
end

-- open([path]) -> store. Reads what is there; a damaged line is skipped and
-- counted (store.damaged), never fatal.
function M.open(path)
  path = path or M.default_path()
  local s = setmetatable({ path = path, by_ctx = {}, runs = {}, damaged = 0 }, Store)
  local f = io.open(path, "r")
  if f then
    for line in f:lines() do
      local ok, rec = pcall(cjson.decode, line)
      if ok then rec = integers(rec) end
      if ok and type(rec) == "table" and rec.kind == "result" and rec.ctx and rec.id then
        s:_index(rec)
      elseif ok and type(rec) == "table" and rec.kind == "run" then
        s.runs[#s.runs + 1] = rec
      else
        s.damaged = s.damaged + 1
      end
    end
    f:close()
  end
  return s
end

function Store:_index(rec)
  local c = self.by_ctx[rec.ctx]
  if not c then c = { list = {}, by_id = {} }; self.by_ctx[rec.ctx] = c end
  if not c.by_id[rec.id] then c.list[#c.list + 1] = rec end
  c.by_id[rec.id] = rec
end

function Store:_append(rec)
  os.execute("mkdir -p " .. "'" .. dir_of(self.path):gsub("'", "'\\''") .. "'")
  local f = assert(io.open(self.path, "a"))
  f:write(cjson.encode(rec), "\n")
  f:close()
end

function Store:known(ctx, id)
  local c = self.by_ctx[ctx]
  return c and c.by_id[id] and c.by_id[id].result or nil
end

function Store:results(ctx)
  local out = {}
  local c = self.by_ctx[ctx]
  for i, rec in ipairs(c and c.list or {}) do out[i] = rec.result end
  return out
end

-- record(ctx, cand, result): cand's source and defines travel with the result.
function Store:record(ctx, cand, result)
  local rec = { kind = "result", ctx = ctx, id = result.id, result = result,
                candidate = { source = cand.source, name = cand.name, defines = cand.defines,
                              params = cand.params, origin = cand.origin, parent = cand.parent,
                              rationale = cand.rationale } }
  self:_append(rec)
  self:_index(rec)
end

-- The stored candidate (source, defines, ...) of id under ctx, or nil.
function Store:candidate(ctx, id)
  local c = self.by_ctx[ctx]
  return c and c.by_id[id] and c.by_id[id].candidate or nil
end

function Store:begin_run(info)
  local run = { kind = "run", id = string.format("%d-%d", os.time(), #self.runs + 1), info = info,
                started = os.time() }
  self.runs[#self.runs + 1] = run
  return run
end

function Store:end_run(run, summary)
  run.summary = summary
  run.ended = os.time()
  self:_append(run)
end

return M
