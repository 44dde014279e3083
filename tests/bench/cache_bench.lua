-- tests/bench/cache_bench.lua: the candidate cache's compression, insert rate
-- and lookup rate over candidates made as chains of small edits of a real
-- kernel (kernels/cuda/matmul_tiled.cu), as an optimisation run makes them.
--
--   ./kwb tests/bench/cache_bench.lua [N=1000] [SEED=1]      (make bench-cache)
--
-- Each candidate takes a parent (mostly the newest candidate, sometimes an
-- older one, so the lineage branches) and changes 1 to 3 places of a few lines
-- each: a tunable's default, a #pragma unroll, a comment, a renamed variable,
-- an inserted or deleted statement.
local N = tonumber(arg and arg[1]) or 1000
local seed = tonumber(arg and arg[2]) or 1
math.randomseed(seed)

local f = assert(io.open("kernels/cuda/matmul_tiled.cu", "rb"))
local base = f:read("a")
f:close()

local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)
local path = dir .. "/bench.db"

local function lines_of(s)
  local t = {}
  for l in (s .. "\n"):gmatch("(.-)\n") do t[#t + 1] = l end
  t[#t] = nil
  return t
end

local names = { "a_frag", "b_frag", "acc", "thread_row", "thread_col", "block_row", "block_col" }
local comments = { "// keep the loads coalesced", "// stage the next slice while computing",
                   "// try a wider micro-tile here", "// bank conflicts measured: none",
                   "// the compiler keeps acc in registers", "// hoisted out of the k loop" }
local statements = { "__syncwarp();", "const int lane = tid & 31;", "const int warp = tid >> 5;",
                     "if (k0 + BK > K) __syncthreads();", "float scale = alpha;" }

local function edit(src)
  local t = lines_of(src)
  local kind = math.random(6)
  local i = math.random(#t)
  if kind == 1 then              -- retune a default
    for _ = 1, #t do
      local name = t[i]:match("^#define (%u+) %d+$")
      if name then
        t[i] = string.format("#define %s %d", name, 2 ^ math.random(2, 8))
        break
      end
      i = i % #t + 1
    end
  elseif kind == 2 then          -- add or drop an unroll
    if t[i]:match("#pragma unroll") then table.remove(t, i)
    else table.insert(t, i, "#pragma unroll " .. 2 ^ math.random(1, 3)) end
  elseif kind == 3 then          -- a comment
    table.insert(t, i, "    " .. comments[math.random(#comments)])
  elseif kind == 4 then          -- rename a variable in a few lines
    local from = names[math.random(#names)]
    local to = from .. "_" .. math.random(9)
    local n = 0
    for j = i, #t do
      local l, k = t[j]:gsub(from .. "([^%w_])", to .. "%1")
      if k > 0 then t[j], n = l, n + 1 end
      if n == 3 then break end
    end
  elseif kind == 5 then          -- insert a statement
    table.insert(t, i, "        " .. statements[math.random(#statements)])
  else                           -- delete or duplicate a line
    if math.random(2) == 1 and #t > 60 then table.remove(t, i)
    else table.insert(t, i, t[i]) end
  end
  return table.concat(t, "\n") .. "\n"
end

local cache = assert(kwb.cache.open(path))
local ids, sources = {}, {}
local raw = 0
local t0 = kwb.now()
local parent, parent_src = nil, base
for k = 1, N do
  if k > 1 then
    local p = math.random(10) <= 8 and #ids or math.random(#ids)
    parent, parent_src = ids[p], sources[p]
  end
  local src = parent_src
  for _ = 1, math.random(3) do src = edit(src) end
  local id = cache:put_candidate {
    problem = "sgemm", source = src, parent = parent,
    params = { BM = 2 ^ math.random(5, 8), BN = 2 ^ math.random(5, 8), BK = 2 ^ math.random(3, 5) },
    origin = { strategy = "bench", model = "none" }, rationale = "edit " .. k,
  }
  ids[#ids + 1], sources[#sources + 1] = id, src
  raw = raw + #src
end
local t_insert = kwb.now() - t0
cache:close()

cache = assert(kwb.cache.open(path))   -- cold: no recently decoded blobs
local order = {}
for k = 1, N do order[k] = math.random(N) end
t0 = kwb.now()
for _, k in ipairs(order) do
  local c = assert(cache:get(ids[k]))
  if c.source ~= sources[k] then error("candidate " .. ids[k] .. " read back wrong") end
end
local t_lookup = kwb.now() - t0
local t_check = kwb.now()
local check = cache:check()
t_check = kwb.now() - t_check
if not check.ok then error("check found problems in a fresh cache") end
local s = cache:stats()
local sizes = {}
for _, r in ipairs(cache:exec("SELECT depth > 0 AS delta, avg(stored_size) AS avg FROM blob GROUP BY depth > 0")) do
  sizes[r.delta] = r.avg
end
cache:close()
local db = assert(io.open(path, "rb"))   -- the WAL is checkpointed into it on close
s.file_bytes = db:seek("end")
db:close()
os.execute("rm -rf " .. dir)

print(string.format("candidates         %d stored of %d made (%d distinct sources, mean %.0f bytes)",
                    s.candidates, N, s.blobs, raw / N))
print(string.format("blobs              %d full, %d deltas, longest chain %d", s.full_blobs, s.delta_blobs,
                    s.max_depth))
print(string.format("mean stored size   %.0f bytes a delta, %.0f bytes a full frame", sizes[1] or 0, sizes[0] or 0))
print(string.format("mirrored           %d blobs (those others are stored against), %d bytes",
                    s.mirrored_blobs, s.mirror_bytes))
print(string.format("content            %d bytes raw, %d bytes stored (mirrors included)", s.raw_bytes,
                    s.stored_bytes))
print(string.format("compression ratio  %.1fx (raw / stored blob bytes, mirrors included)", s.ratio))
print(string.format("database file      %d bytes (%.1fx smaller than the raw sources, with every record and index)",
                    s.file_bytes, s.raw_bytes / s.file_bytes))
print(string.format("insert rate        %.0f candidates/s (one transaction each)", N / t_insert))
print(string.format("lookup rate        %.0f candidates/s (random ids, source decoded and hash-checked)",
                    N / t_lookup))
print(string.format("check              %.2f s for %d blobs (%d stored frames decoded and hash-checked)",
                    t_check, check.blobs, check.frames))
