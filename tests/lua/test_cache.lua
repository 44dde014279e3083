-- tests/lua/test_cache.lua: kwb.cache through its Lua API.
local t = require "t"
local cache_mod = require "kwb.cache"
local core = require "kwb.core"

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir))
local n_paths = 0
local function fresh()
  n_paths = n_paths + 1
  local path = string.format("%s/c%d.db", dir, n_paths)
  return assert(cache_mod.open(path)), path
end

local src = assert(io.open("kernels/cuda/matmul_tiled.cu")):read("a")
local function edited(s, k)   -- a small edit: one tunable's default
  return (s:gsub("#define BK 16", "#define BK " .. (16 + k), 1))
end

local function sh(cmd)
  local p = io.popen(cmd)
  local out = p:read("a")
  p:close()
  return out
end

local function file_size(path)
  local f = io.open(path, "rb")
  if not f then return 0 end
  local n = f:seek("end")
  f:close()
  return n
end

t.test("cache_candidate_round_trip", function()
  local c = fresh()
  local id, new = c:put_candidate { problem = "sgemm", source = src, params = { BM = 64, name = "x" },
                                    flags = { "-O3" }, origin = { strategy = "seed", model = "m1" },
                                    rationale = "start", created = 1000 }
  t.eq(new, true, "new")
  t.eq(#id, 64, "id length")
  t.eq(id, cache_mod.candidate_id("sgemm", src, { name = "x", BM = 64 }, { "-O3" }), "id is the content hash")
  local again, new2 = c:put_candidate { problem = "sgemm", source = src, params = { BM = 64, name = "x" },
                                        flags = { "-O3" } }
  t.eq(again, id, "same content, same id")
  t.eq(new2, false, "second put is not new")
  local g = assert(c:get(id))
  t.eq(g.source, src, "source")
  t.eq(g.problem, "sgemm", "problem")
  t.eq(g.params.BM, 64, "params.BM")
  t.eq(math.type(g.params.BM), "integer", "params.BM type")
  t.eq(g.flags[1], "-O3", "flags")
  t.eq(g.strategy, "seed", "strategy")
  t.eq(g.model, "m1", "model")
  t.eq(g.rationale, "start", "rationale")
  t.eq(g.created, 1000.0, "created")
  local other = c:put_candidate { problem = "sgemm", source = src, params = { BM = 128 } }
  t.truthy(other ~= id, "params change the id")
  t.truthy(c:put_candidate { problem = "other", source = src, params = { BM = 64, name = "x" },
                             flags = { "-O3" } } ~= id, "the problem changes the id")
  c:close()
end)

t.test("cache_lineage_and_deltas", function()
  local c = fresh()
  local ids = { (c:put_candidate { problem = "p", source = src }) }
  for k = 1, 5 do
    ids[#ids + 1] = c:put_candidate { problem = "p", source = edited(src, k), parent = ids[#ids]:sub(1, 10) }
  end
  local lin = c:lineage(ids[6])
  t.eq(#lin, 6, "lineage length")
  t.eq(lin[1], ids[6], "lineage starts at the candidate")
  t.eq(lin[6], ids[1], "lineage ends at the root")
  local g = assert(c:get(ids[4]))
  t.eq(g.parent, ids[3], "parent resolved to the full id")
  t.eq(g.source, edited(src, 3), "delta source")
  local info = c.db:blob_info(g.source_blob)
  t.eq(info.depth, 3, "chain depth follows the lineage")
  t.truthy(info.stored_size < 100, "a one-line edit stores under 100 bytes (got " .. info.stored_size .. ")")
  local ok, err = pcall(c.put_candidate, c, { problem = "p", source = "x", parent = "ffffffff" })
  t.eq(ok, false, "unknown parent raises")
  t.truthy(err:find("candidate.parent: no candidate ffffffff", 1, true), err)
  c:close()
end)

t.test("cache_compression_ratio_over_chain_of_edits", function()
  local c = fresh()
  local parent, s = nil, src
  for k = 1, 200 do
    -- each step changes two lines: a tunable and a comment
    s = s:gsub("#define PAD %d+", "#define PAD " .. k, 1)
    s = s:gsub("// Epilogue[^\n]*", "// Epilogue " .. k .. ": scale and write back", 1)
    parent = c:put_candidate { problem = "p", source = s, parent = parent }
  end
  local st = c:stats()
  t.eq(st.candidates, 200, "candidates")
  t.eq(st.blobs, 200, "blobs")
  t.eq(st.max_depth, core.cache_max_depth, "chains reach the bound and no further")
  t.eq(st.full_blobs, math.ceil(200 / (core.cache_max_depth + 1)), "one full frame per bounded chain")
  -- every blob is the base of the next except the last of each chain
  t.eq(st.mirrored_blobs, 200 - math.ceil(200 / (core.cache_max_depth + 1)), "bases are mirrored")
  t.truthy(st.ratio > 20, string.format("ratio %.1f (mirrors included) exceeds 20", st.ratio))
  c:close()
end)

-- A chain of candidates a <- b <- d and an unrelated one, on a closed cache.
local function corrupt_fixture()
  local c, path = fresh()
  local ids = { c:put_candidate { problem = "p", source = src } }
  ids[2] = c:put_candidate { problem = "p", source = edited(src, 1), parent = ids[1] }
  ids[3] = c:put_candidate { problem = "p", source = edited(src, 2), parent = ids[2] }
  ids[4] = c:put_candidate { problem = "q", source = "int unrelated;\n" }
  local blobs = {}
  for k, id in ipairs(ids) do blobs[k] = c:exec("SELECT source FROM candidate WHERE id = ?1", id)[1].source end
  c:close()
  return path, ids, blobs
end
local sources = { src, edited(src, 1), edited(src, 2), "int unrelated;\n" }

-- flip one byte in the middle of a stored copy ("blob" or "mirror") of a frame
local function corrupt(path, tbl, blob)
  local c = assert(cache_mod.open(path))
  local frame = c:exec("SELECT frame FROM " .. tbl .. " WHERE id = ?1", blob)[1].frame
  local k = #frame // 2
  frame = frame:sub(1, k - 1) .. string.char(frame:byte(k) ~ 0xff) .. frame:sub(k + 1)
  c:exec("UPDATE " .. tbl .. " SET frame = CAST(?2 AS BLOB) WHERE id = ?1", blob, frame)
  t.eq(c.db:changes(), 1, "corrupted " .. tbl .. " copy of " .. blob)
  c:close()
end

t.test("cache_corrupt_leaf_loses_only_itself", function()
  local path, ids, blobs = corrupt_fixture()
  corrupt(path, "blob", blobs[3])
  local c = assert(cache_mod.open(path))   -- no recently decoded blobs
  local ok, msg, info = c:get(ids[3])
  t.eq(ok, nil, "the corrupt leaf is lost")
  t.eq(info.code, "corrupt-blob", "code")
  t.eq(info.blob, blobs[3], "info names the blob")
  t.truthy(msg:find("blob " .. blobs[3] .. " is corrupt: ", 1, true), msg)
  for k = 1, 4 do
    if k ~= 3 then t.eq(assert(c:get(ids[k])).source, sources[k], "candidate " .. k .. " still reads") end
  end
  local r = c:check()
  t.eq(r.ok, false, "check finds it")
  t.eq(r.blobs, 4, "four blobs checked")
  t.eq(r.frames, 6, "four frames and two mirrors")
  t.eq(#r.corrupt, 1, "one corrupt copy")
  t.eq(r.corrupt[1].blob, blobs[3], "the leaf")
  t.eq(r.corrupt[1].frame, "corrupt", "its frame")
  t.eq(r.corrupt[1].mirror, "none", "a leaf has no mirror")
  t.eq(r.corrupt[1].recoverable, false, "so it is lost")
  t.eq(#r.unreadable, 0, "nothing depends on it")
  t.eq(c:check({ repair = true }).corrupt[1].repaired, false, "repair cannot bring it back")
  t.eq(c:integrity(), "ok", "the database itself is sound")
  c:close()
end)

t.test("cache_corrupt_base_reads_through_its_mirror", function()
  local path, ids, blobs = corrupt_fixture()
  corrupt(path, "blob", blobs[2])   -- the middle of the chain
  local c = assert(cache_mod.open(path))
  for k = 1, 4 do t.eq(assert(c:get(ids[k])).source, sources[k], "candidate " .. k .. " reads") end
  local r = c:check()
  t.eq(#r.corrupt, 1, "one corrupt copy")
  t.eq(r.corrupt[1].blob, blobs[2], "the base")
  t.eq(r.corrupt[1].frame, "corrupt", "its frame")
  t.eq(r.corrupt[1].mirror, "ok", "its mirror is sound")
  t.eq(r.corrupt[1].recoverable, true, "recoverable")
  t.truthy(r.corrupt[1].message:find("blob " .. blobs[2] .. " is corrupt: ", 1, true), r.corrupt[1].message)
  -- an export carries the sound copy, once
  local file = dir .. "/mirror.kwb"
  assert(c:export(file, { problem = "p" }))
  local d = fresh()
  t.eq(assert(d:import(file)).blobs, 3, "three blobs")
  for k = 1, 3 do t.eq(assert(d:get(ids[k])).source, sources[k], "imported candidate " .. k) end
  local st = d:stats()
  t.eq(st.mirrored_blobs, 2, "import mirrors the two bases")
  t.eq(d:check().ok, true, "the imported copy is sound")
  d:close()
  r = c:check { repair = true }
  t.eq(r.corrupt[1].repaired, true, "repaired from the mirror")
  t.eq(c:check().ok, true, "sound after repair")
  c:close()
  -- a corrupt mirror under a sound frame is found and repaired too
  corrupt(path, "mirror", blobs[1])
  c = assert(cache_mod.open(path))
  r = c:check { repair = true }
  t.eq(r.corrupt[1].blob, blobs[1], "the root's mirror")
  t.eq(r.corrupt[1].frame .. "/" .. r.corrupt[1].mirror, "ok/corrupt", "states")
  t.eq(r.corrupt[1].repaired, true, "repaired from the frame")
  t.eq(c:check().ok, true, "sound")
  c:close()
end)

-- The double fault: both copies of a base's frame corrupt. The base is lost,
-- and so is every blob stored against it, with an error naming the base.
t.test("cache_both_copies_corrupt_lose_base_and_descendants", function()
  local path, ids, blobs = corrupt_fixture()
  corrupt(path, "blob", blobs[2])
  corrupt(path, "mirror", blobs[2])
  local c = assert(cache_mod.open(path))
  local ok, msg, info = c:get(ids[2])
  t.eq(ok, nil, "the base is lost")
  t.eq(info.code, "corrupt-blob", "code")
  t.truthy(msg:find("blob " .. blobs[2] .. " is corrupt: .*%(and so is its mirror copy: "), msg)
  ok, msg, info = c:get(ids[3])
  t.eq(ok, nil, "its descendant is lost")
  t.eq(info.code, "corrupt-blob", "code")
  t.truthy(msg:find("cannot rebuild blob " .. blobs[3] .. ": its base blob " .. blobs[2] .. " is corrupt", 1, true),
           msg)
  t.eq(assert(c:get(ids[1])).source, src, "the root still reads")
  t.eq(assert(c:get(ids[4])).source, "int unrelated;\n", "other blobs still read")
  local r = c:check { repair = true }
  t.eq(#r.corrupt, 1, "one blob with corrupt copies")
  t.eq(r.corrupt[1].frame .. "/" .. r.corrupt[1].mirror, "corrupt/corrupt", "both copies")
  t.eq(r.corrupt[1].recoverable, false, "not recoverable")
  t.eq(#r.unreadable, 1, "one blob unreadable through it")
  t.eq(r.unreadable[1].blob, blobs[3], "the descendant")
  t.truthy(r.unreadable[1].message:find("its base blob " .. blobs[2] .. " is corrupt", 1, true), r.unreadable[1].message)
  -- new work on the lost base still stores (whole)
  local e = c:put_candidate { problem = "p", source = edited(src, 7), parent = ids[2] }
  t.eq(c.db:blob_info(assert(c:get(e)).source_blob).depth, 0, "stored whole")
  c:close()
end)

t.test("cache_resolve_prefixes", function()
  local c = fresh()
  -- find two sources whose ids share their first 4 hex digits
  local seen, x, y = {}, nil, nil
  for k = 1, 100000 do
    local s = "int v = " .. k .. ";\n"
    local p = cache_mod.candidate_id("p", s, {}, {}):sub(1, 4)
    if seen[p] then x, y = seen[p], s break end
    seen[p] = s
  end
  local ix = c:put_candidate { problem = "p", source = x }
  local iy = c:put_candidate { problem = "p", source = y }
  t.eq(c:resolve(ix), ix, "full id")
  t.eq(c:resolve(ix:upper()), ix, "case does not matter")
  local ok, msg, info = c:resolve(ix:sub(1, 4))
  t.eq(ok, nil, "shared prefix")
  t.eq(info.code, "ambiguous", "code")
  t.eq(#info.matches, 2, "both match")
  t.truthy(msg:find(ix:sub(1, 16), 1, true) and msg:find(iy:sub(1, 16), 1, true), msg)
  local n = 5
  while ix:sub(1, n) == iy:sub(1, n) do n = n + 1 end
  t.eq(c:resolve(ix:sub(1, n)), ix, "first unique prefix")
  ok, msg, info = c:resolve("abc")
  t.eq(info.code, "bad-id", "too short")
  t.eq(msg, "'abc' is not a candidate id (4 to 64 hex digits)", "message")
  t.eq(select(3, c:resolve("xyz12")).code, "bad-id", "not hex")
  local unused = "0000"
  while seen[unused] or ix:sub(1, 4) == unused do unused = string.format("%04x", math.random(0, 65535)) end
  ok, msg, info = c:resolve(unused)
  t.eq(info.code, "not-found", "no match")
  c:close()
end)

-- cache:list gives each candidate the score of its latest result (kwb cache ls's column)
t.test("cache_list_carries_the_latest_score", function()
  local c = fresh()
  local a = c:put_candidate { problem = "mm", source = src }
  local b = c:put_candidate { problem = "mm", source = edited(src, 1), parent = a }
  local dev = "host:Test CPU:2"
  c:add_result { candidate = a, device = dev, shape = "256", outcome = "accepted", timing = { median = 3e-3 },
                 verify = { score = 1.25 } }
  local got = {}
  for _, r in ipairs(c:list "mm") do got[r.id] = r.score or "none" end
  t.eq(got[a], 1.25)
  t.eq(got[b], "none", "no result, no score")
  c:close()
end)

t.test("cache_results_builds_best_runs", function()
  local c = fresh()
  local a = c:put_candidate { problem = "mm", source = src }
  local b = c:put_candidate { problem = "mm", source = edited(src, 1), parent = a }
  local d = c:put_candidate { problem = "mm", source = edited(src, 2), parent = b }
  local dev = "host:Test CPU:2"
  c:add_result { candidate = a, device = dev, shape = "256", outcome = "accepted", timing = { median = 3e-3, n = 9 },
                 verify = { max_rel = 1e-6 }, clocks = { before = 1, after = 1 } }
  c:add_result { candidate = b, device = dev, shape = "256", outcome = "accepted", timing = { median = 2e-3 } }
  c:add_result { candidate = d, device = dev, shape = "256", outcome = "wrong", timing = { median = 1e-3 } }
  c:add_result { candidate = a, device = dev, shape = "1024", outcome = "slower", timing = { median = 0.5 } }
  c:add_result { candidate = d, device = dev, shape = "1024", outcome = "accepted", timing = { median = 0.4 } }
  c:add_result { candidate = d, device = "gpu:X", shape = "1024", outcome = "accepted", timing = { median = 0.01 } }
  local best = c:best("mm", { device = dev })
  t.eq(#best, 2, "one per shape")
  t.eq(best[1].shape, "1024", "sorted by shape")
  t.eq(best[1].candidate, d, "fastest correct at 1024")
  t.eq(best[2].candidate, b, "the wrong one is not best at 256")
  t.eq(#c:best("mm", { shape = "1024" }), 2, "one per device")
  t.eq(c:best("mm", { shape = "256" })[1].median, 2e-3, "median")
  local rs = c:results(a)
  t.eq(#rs, 2, "results of a")
  t.eq(rs[2].verify.max_rel, 1e-6, "verify figures")
  t.eq(rs[2].clocks.after, 1, "clocks")
  t.eq(rs[2].timing.n, 9, "timing stats")
  c:add_result { candidate = a, device = dev, shape = "256", outcome = "slower", timing = { median = 4e-3 } }
  t.eq(#c:results(a), 2, "a new measurement replaces the old one")
  t.raises(function() c:add_result { candidate = a, device = dev, shape = "1", outcome = "great" } end,
           "unknown outcome 'great'")
  local bid = c:add_build { candidate = b, arch = "x86-64", toolchain = "gcc 12.2", ok = true,
                            log = "warning: none\n", binary = "\127ELF\0\1\2", resources = { regs = 32 } }
  t.eq(bid, cache_mod.build_id(b, "x86-64", "gcc 12.2"), "build id")
  local bl = assert(c:build(b:sub(1, 8), "x86-64", "gcc 12.2"))
  t.eq(bl.binary, "\127ELF\0\1\2", "binary round trip")
  t.eq(bl.log, "warning: none\n", "log")
  t.eq(bl.resources.regs, 32, "resources")
  t.eq(select(3, c:build(b, "sm_90", "nvrtc 12")).code, "not-found", "other arch")
  local run = c:begin_run { recipe = "recipes/host_demo.lua", settings = { budget = 5 }, started = 50 }
  c:end_run(run, { accepted = 2, wrong = 1 }, 60)
  local runs = c:runs()
  t.eq(#runs, 1, "runs")
  t.eq(runs[1].recipe_hash, core.sha256(assert(io.open("recipes/host_demo.lua")):read("a")), "recipe hash")
  t.eq(runs[1].funnel.wrong, 1, "funnel")
  t.eq(runs[1].settings.budget, 5, "settings")
  t.eq(runs[1].ended, 60.0, "end")
  c:close()
end)

t.test("cache_export_import_round_trip_is_idempotent", function()
  local c = fresh()
  local ids = { (c:put_candidate { problem = "mm", source = src, created = 1 }) }
  for k = 1, 20 do
    ids[#ids + 1] = c:put_candidate { problem = "mm", source = edited(src, k), parent = ids[#ids], created = 1 + k }
  end
  c:put_candidate { problem = "other", source = "x", created = 5 }
  c:add_result { candidate = ids[21], device = "d", shape = "s", outcome = "accepted", timing = { median = 1 } }
  c:add_build { candidate = ids[21], arch = "a", toolchain = "t", log = "log", binary = "bin" }
  local file = dir .. "/mm.kwb"
  local n = assert(c:export(file, { problem = "mm" }))
  t.eq(n.candidates, 21, "exported candidates")
  t.eq(n.results, 1, "exported results")
  t.eq(n.builds, 1, "exported builds")
  local d = fresh()
  local got = assert(d:import(file))
  t.eq(got.candidates, 21, "imported candidates")
  t.eq(got.blobs, 23, "imported blobs: 21 sources, a log, a binary")
  t.eq(d:stats().candidates, 21, "the other problem stayed home")
  for k, id in ipairs(ids) do
    t.eq(assert(d:get(id)).source, k == 1 and src or edited(src, k - 1), "source " .. k)
  end
  t.eq(d:build(ids[21], "a", "t").binary, "bin", "binary")
  t.eq(d:best("mm")[1].candidate, ids[21], "best")
  local again = assert(d:import(file))
  t.eq(again.candidates + again.results + again.builds + again.blobs, 0, "second import adds nothing")
  t.eq(d:stats().candidates, 21, "still 21")
  -- one candidate brings its ancestors along
  local e = fresh()
  assert(c:export(dir .. "/one.kwb", { ids = { ids[3]:sub(1, 8) } }))
  t.eq(assert(e:import(dir .. "/one.kwb")).candidates, 3, "a candidate and its two ancestors")
  t.eq(#e:lineage(ids[3]), 3, "lineage intact")
  c:close(); d:close(); e:close()
end)

-- A cache with a bundle's worth of content, and a bundle of it.
local function bundle_fixture()
  local c = fresh()
  local parent
  for k = 1, 5 do parent = c:put_candidate { problem = "mm", source = edited(src, k), parent = parent } end
  local file = string.format("%s/fixture%d.kwb", dir, n_paths)
  assert(c:export(file, {}))
  c:close()
  local f = assert(io.open(file, "rb"))
  local bytes = f:read("a")
  f:close()
  return file, bytes
end

local function write(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end

t.test("cache_import_rejects_corrupt_bundle", function()
  local file, bytes = bundle_fixture()
  local d = fresh()
  local bad = dir .. "/bad.kwb"
  -- flip one byte at a time, at a spread of places: every one is refused
  for _, at in ipairs { 20, 40, 200, #bytes // 2, #bytes - 100, #bytes - 10 } do
    write(bad, bytes:sub(1, at - 1) .. string.char(bytes:byte(at) ~ 0x01) .. bytes:sub(at + 1))
    local ok, msg, info = d:import(bad)
    t.eq(ok, nil, "flip at " .. at)
    t.eq(info.code, "corrupt-bundle", "code at " .. at)
    t.truthy(msg:find("bundle " .. bad .. " is corrupt", 1, true), msg)
  end
  t.eq(d:stats().candidates, 0, "nothing imported")
  t.eq(d:stats().blobs, 0, "no blobs imported")
  write(bad, "PK\3\4 this is a zip file")
  local _, msg = d:import(bad)
  t.eq(msg, bad .. " is not a kwb bundle (no KWBUNDLE magic)", "not a bundle")
  assert(d:import(file))
  t.eq(d:stats().candidates, 5, "the good file imports")
  d:close()
end)

t.test("cache_import_rejects_truncated_bundle", function()
  local _, bytes = bundle_fixture()
  local d = fresh()
  local bad = dir .. "/cut.kwb"
  local step = math.max(1, #bytes // 97)
  for len = 0, #bytes - 1, step do
    write(bad, bytes:sub(1, len))
    local ok, msg, info = d:import(bad)
    t.eq(ok, nil, "cut at " .. len)
    t.eq(info.code, "corrupt-bundle", "code at " .. len .. ": " .. msg)
  end
  write(bad, bytes:sub(1, #bytes - 1))
  local _, msg = d:import(bad)
  t.truthy(msg:find("is truncated", 1, true), msg)
  write(bad, bytes .. "extra")
  _, msg = d:import(bad)
  t.eq(msg, "bundle " .. bad .. " is corrupt: 5 bytes follow the end marker", "trailing bytes")
  t.eq(d:stats().candidates, 0, "nothing imported")
  d:close()
end)

t.test("cache_import_rejects_newer_bundle_format", function()
  local _, bytes = bundle_fixture()
  local d = fresh()
  local bad = dir .. "/v2.kwb"
  write(bad, bytes:sub(1, 8) .. string.pack("<I4", 2) .. bytes:sub(13))
  local ok, msg, info = d:import(bad)
  t.eq(ok, nil, "refused")
  t.eq(info.code, "bundle-version", "code")
  t.eq(msg, "bundle " .. bad .. " has format version 2; this kwb reads version 1", "message")
  d:close()
end)

t.test("cache_open_refuses_newer_schema", function()
  local c, path = fresh()
  c:put_candidate { problem = "p", source = "x" }
  c:exec("PRAGMA user_version = 99")
  c:close()
  local ok, msg, info = cache_mod.open(path)
  t.eq(ok, nil, "refused")
  t.eq(info.code, "schema-too-new", "code")
  t.eq(msg, string.format("cache %s has schema version 99, newer than this kwb understands (%d); "
                          .. "use a newer kwb or another cache (--cache PATH)", path, core.cache_schema_version),
       "message")
  write(dir .. "/text.db", "just some text, not a database at all..........................................")
  ok, msg, info = cache_mod.open(dir .. "/text.db")
  t.eq(info.code, "not-a-cache", "text file")
  t.eq(msg, "cache " .. dir .. "/text.db: not a kwb cache (not an SQLite database)", "message")
end)

t.test("cache_gc_removes_only_unreferenced_blobs", function()
  local c = fresh()
  local a = c:put_candidate { problem = "p", source = src }
  local b = c:put_candidate { problem = "p", source = edited(src, 1), parent = a }
  local orphan = c:put_blob("nobody refers to this")
  -- b's source is a delta on a's; a's source must survive even if a's row went
  c:exec("DELETE FROM candidate WHERE id = ?1", a)
  local r = c:gc()
  t.eq(r.blobs, 1, "one blob removed")
  t.eq(c.db:blob_info(orphan), nil, "the orphan is gone")
  t.eq(assert(c:get(b)).source, edited(src, 1), "a delta's base is kept")
  t.eq(c:stats().mirrored_blobs, 1, "and so is its mirror")
  t.eq(c:gc().blobs, 0, "nothing left to remove")
  c:close()
end)

t.test("cache_gc_drops_mirrors_of_blobs_no_longer_a_base", function()
  local c = fresh()
  local a = c:put_candidate { problem = "p", source = src }
  local b = c:put_candidate { problem = "p", source = edited(src, 1), parent = a }
  local a_blob = c:exec("SELECT source FROM candidate WHERE id = ?1", a)[1].source
  local b_size = c:exec("SELECT stored_size FROM blob WHERE id = (SELECT source FROM candidate WHERE id = ?1)", b)[1]
  local a_mirror = #c:exec("SELECT frame FROM mirror WHERE id = ?1", a_blob)[1].frame
  t.eq(c.db:blob_info(a_blob).mirrored, true, "a's source is b's base, so mirrored")
  c:exec("DELETE FROM candidate WHERE id = ?1", b)
  local r = c:gc()
  t.eq(r.blobs, 1, "b's source removed")
  t.eq(r.bytes, b_size.stored_size + a_mirror, "its frame and a's mirror")
  t.eq(c.db:blob_info(a_blob).mirrored, false, "a's source is a leaf again")
  t.eq(c:stats().mirrored_blobs, 0, "no mirrors left")
  t.eq(assert(c:get(a)).source, src, "a still reads")
  t.eq(c:check().ok, true, "consistent")
  c:close()
end)

t.test("cache_concurrent_writers_lose_nothing", function()
  local path = dir .. "/shared.db"   -- created by the writers themselves, at once
  local cmd = {}
  for w = 1, 4 do
    cmd[#cmd + 1] = string.format("./kwb tests/lua/cache_writer.lua %s w%d 200 >%s/w%d.out 2>&1 &", path, w, dir, w)
  end
  assert(os.execute(table.concat(cmd, " ") .. " wait"))
  for w = 1, 4 do
    t.eq(sh(string.format("tail -n 1 %s/w%d.out", dir, w)), "200\n", "writer " .. w .. " finished")
  end
  local c = assert(cache_mod.open(path))
  t.eq(c:stats().candidates, 800, "all 800 present")
  for w = 1, 4 do
    local rows = c:list("w" .. w)
    t.eq(#rows, 200, "writer " .. w)
    t.eq(assert(c:get(rows[200].id)).source, string.format("// w%d\nvoid f(float *x) {\n  x[0] = 200;\n}\n", w),
         "last source of writer " .. w)
    t.eq(#c:lineage(rows[200].id), 200, "lineage of writer " .. w)
  end
  t.eq(c:integrity(), "ok", "integrity")
  c:close()
end)

t.test("cache_survives_kill_9_mid_write", function()
  for round = 1, 2 do
    local path = string.format("%s/killed%d.db", dir, round)
    local log = path .. ".log"
    local pid = sh(string.format("./kwb tests/lua/cache_writer.lua %s k 100000 >%s 2>&1 & echo $!", path, log))
                :match("%d+")
    -- let it commit a while, then kill it wherever it is
    local committed = 0
    for _ = 1, 400 do
      committed = tonumber(sh("tail -n 1 " .. log):match("%d+") or "0")
      if committed >= 150 * round then break end
      os.execute("sleep 0.02")
    end
    os.execute("kill -9 " .. pid)
    while os.execute("kill -0 " .. pid .. " 2>/dev/null") do os.execute("sleep 0.02") end
    committed = tonumber(sh("tail -n 1 " .. log):match("%d+") or "0")
    t.truthy(committed >= 150 * round, "the writer committed before the kill")
    local c = assert(cache_mod.open(path))
    t.eq(c:integrity(), "ok", "integrity after kill")
    local rows = c:list("k")
    t.truthy(#rows >= committed, string.format("%d rows, %d reported committed", #rows, committed))
    for i, r in ipairs(rows) do
      local g = assert(c:get(r.id))
      t.eq(g.source, string.format("// k\nvoid f(float *x) {\n  x[0] = %d;\n}\n", i), "row " .. i)
    end
    -- and it takes writes again
    assert(c:put_candidate { problem = "k", source = "after" })
    c:close()
  end
end)

t.test("cache_import_rejects_results_that_make_no_sense", function()
  local c = fresh()
  local id = c:put_candidate { problem = "mm", source = src, created = 7 }
  local cand = c:exec("SELECT * FROM candidate WHERE id = ?1", id)[1]
  local file = dir .. "/senseless.kwb"
  local function try(outcome, median, timing)
    local row = { candidate = id, device = "d", shape = "s", outcome = outcome, median = median,
                  verify = "{}", timing = cache_mod.json(timing), clocks = "{}", created = 1 }
    assert(c.db:export(file, cache_mod.json { format = 1 }, { { table = "candidate", json = cache_mod.json(cand) },
                                                             { table = "result", json = cache_mod.json(row) } },
                       { cand.source }))
    local d = fresh()
    local ok, msg = d:import(file)
    local n = d:stats().results
    d:close()
    return ok and "imported" or msg:match("^bundle [^ ]+ is corrupt: record 2 %(result of %x+ at s%): (.*)$") or msg, n
  end
  t.eq(try("accepted", -1, { median = -1 }), "its median time -1 is not a finite positive number of seconds")
  t.eq(try("accepted", 0, { median = 0 }), "its median time 0 is not a finite positive number of seconds")
  t.eq(try("slower", 1e300, { median = 1e300, min = -2 }), "its min time -2 is not a finite positive number of seconds")
  t.eq(try("accepted", nil, {}), "a accepted result needs a median time")
  t.eq(try("accepted", 2e-3, { median = 1e-3 }), "its median column disagrees with its timing")
  -- (a failure keeps the times of the shapes timed before the one it failed at: a
  -- timeout at the second shape has the first's; they are checked the same)
  t.eq(try("crashed", 1e-3, { median = 1e-3 }), "imported", "a failure's times, where it has some")
  t.eq(try("timeout", 1e-3, {}), "its median column disagrees with its timing")
  t.eq(try("crashed", 1e-3, { median = 1e-3, min = 2e-3 }), "its min time 0.002 is over its median time 0.001")
  t.eq(try("great", nil, {}), "its outcome 'great' is not one kwb gives")
  local got, n = try("slower", 1e-3, { median = 1e-3, n = 5 })
  t.eq(got, "imported", "a sane row")
  t.eq(n, 1)
  local d = fresh()
  assert(d:import(file))
  local v = require("cjson").decode(d:exec("SELECT verify FROM result")[1].verify)
  t.eq(v.imported, "senseless.kwb", "an imported result says where it came from")
  d:close(); c:close()
end)

-- A structure-valid bundle (every hash right) whose rows make no sense is
-- refused whole, naming the bundle, the record and the field; the cache
-- keeps what it had. Each mutant changes one field of one sane record; its
-- JSON is text, so NaN and Infinity can be written as a forger would.
t.test("cache_import_refuses_each_senseless_row_naming_record_and_field", function()
  local c = fresh()
  local id = c:put_candidate { problem = "mm", source = src, created = 7 }
  local cand = c:exec("SELECT * FROM candidate WHERE id = ?1", id)[1]
  local build = { id = cache_mod.build_id(id, "x86-64", "cc"), candidate = id, arch = "x86-64", toolchain = "cc", ok = 1,
                  resources = "{}", created = 8 }
  local run = { id = string.rep("ab", 32), recipe = "r.lua", recipe_hash = string.rep("0", 64), settings = "{}",
                started = 1000, ended = 1100, funnel = cache_mod.json { accepted = 1, slower = 0 } }
  local timing = { median = 1e-3, min = 0.9e-3, p10 = 0.95e-3, p90 = 1.05e-3, ci_lo = 0.98e-3, ci_hi = 1.02e-3, n = 20,
                   spread = 0.01, partial = false }
  local verify = { outcome = "accepted", score = 2.5, seq = 3, seed = 12345, origin = "grid" }
  local file = dir .. "/mutant.kwb"
  local mark = "@MUTANT@"
  local function copy(x) local y = {}; for k, v in pairs(x) do y[k] = v end; return y end
  -- try(where, key, text): the bundle with field key of where (a table, or a
  -- result's timing or verify) written as the JSON text `text`, imported into
  -- a cache that holds one candidate -> "imported" or the code and message
  local function try(where, key, text)
    local rows = { candidate = copy(cand), build = copy(build), run = copy(run) }
    local parts = { timing = copy(timing), verify = copy(verify) }
    rows.result = { candidate = id, device = "d", shape = "s", outcome = "accepted", median = timing.median,
                    created = 9, run = run.id, clocks = "{}" }
    local target = parts[where] or rows[where]
    target[key] = mark
    if where == "timing" and key == "median" then rows.result.median = mark end
    rows.result.timing, rows.result.verify = cache_mod.json(parts.timing), cache_mod.json(parts.verify)
    local records = {}
    for _, name in ipairs { "candidate", "build", "result", "run" } do
      local json = cache_mod.json(rows[name]):gsub('\\?"' .. mark .. '\\?"', function(q)
        return q:sub(1, 1) == "\\" and text:gsub('"', '\\"') or text
      end)
      records[#records + 1] = { table = name, json = json }
    end
    assert(c.db:export(file, cache_mod.json { format = 1 }, records, { cand.source }))
    local d = fresh()
    d:put_candidate { problem = "other", source = "kept" }
    local ok, msg, info = d:import(file)
    local st = d:stats()
    d:close()
    t.eq(st.candidates .. " " .. st.results .. " " .. st.runs, ok and "2 1 1" or "1 0 0", "the cache as it was")
    return ok and "imported" or (info.code .. ": " .. msg)
  end
  local pre = "corrupt-bundle: bundle " .. file .. " is corrupt: "
  local res = "record 3 (result of " .. id .. " at s): "
  t.eq(try("result", "shape", '"s"'), "imported", "the sane bundle imports")
  t.eq(try("result", "outcome", '"pwned"'), pre .. res .. "its outcome 'pwned' is not one kwb gives")
  t.eq(try("verify", "outcome", '"pwned"'), pre .. res .. "its verdict's outcome 'pwned' is not its outcome 'accepted'")
  t.eq(try("candidate", "outcome", '"pwned"'), pre .. "record 1 (candidate " .. id .. "): its outcome 'pwned' is not one kwb gives")
  t.eq(try("timing", "median", "NaN"), pre .. res .. "its median time NaN is not a finite positive number of seconds")
  t.eq(try("timing", "median", "-1e308"), pre .. res .. "its median time -1e+308 is not a finite positive number of seconds")
  t.eq(try("timing", "min", "Infinity"), pre .. res .. "its min time inf is not a finite positive number of seconds")
  t.eq(try("timing", "p10", "-0.001"), pre .. res .. "its p10 time -0.001 is not a finite positive number of seconds")
  t.eq(try("timing", "min", "0.003"), pre .. res .. "its min time 0.003 is over its p10 time 0.00095")
  t.eq(try("timing", "p90", "0.0009"), pre .. res .. "its median time 0.001 is over its p90 time 0.0009")
  t.eq(try("timing", "ci_hi", "0.00099"), pre .. res .. "its median time 0.001 is over its ci_hi time 0.00099")
  t.eq(try("timing", "n", "0"), pre .. res .. "its timing's n 0 is not a whole number of at least 1")
  t.eq(try("timing", "partial", '"yes"'), pre .. res .. "its timing's partial 'yes' is not true or false")
  t.eq(try("verify", "score", "NaN"), pre .. res .. "its verdict's score NaN is not a finite number")
  t.eq(try("verify", "seq", "9007199254740994"),
       pre .. res .. "its verdict's seq 9007199254740994 is not a whole number from 1 to 2^53")
  t.eq(try("result", "created", "-5"), pre .. res .. "its created time -5 is not a finite time in Unix seconds")
  t.eq(try("build", "ok", "7"), pre .. "record 2 (build " .. build.id .. "): its ok 7 is not 0 or 1")
  t.eq(try("run", "ended", "-1e308"), pre .. "record 4 (run " .. run.id .. "): its end -1e+308 is not a finite time in Unix seconds")
  t.eq(try("run", "ended", "990"), pre .. "record 4 (run " .. run.id .. "): its end 990 is before its start 1000")
  t.eq(try("run", "started", "NaN"), pre .. "record 4 (run " .. run.id .. "): its start NaN is not a finite time in Unix seconds")
  t.eq(try("run", "funnel", '"{\\"pwned\\":1}"'),
       pre .. "record 4 (run " .. run.id .. "): its funnel counts 'pwned', not an outcome of the funnel")
  c:close()
end)

-- kwb cache check applies import's checks to what is stored: rows planted in
-- the database directly are each reported, naming the row and the field.
t.test("cache_check_reports_each_unsound_row_planted_in_the_database", function()
  local c = fresh()
  local a = c:put_candidate { problem = "mm", source = "a", created = 10 }
  local b = c:put_candidate { problem = "mm", source = "b", created = 11 }
  c:add_result { candidate = a, device = "d", shape = "ok", outcome = "accepted", timing = { median = 1e-3, n = 5 },
                 verify = { outcome = "accepted", seq = 1 }, created = 20 }
  local run = c:begin_run { recipe = "r.lua", source = "-- r", started = 1000 }
  c:end_run(run, { accepted = 1 }, 1100)
  t.eq(c:check().ok, true, "a sane cache")
  c:exec("UPDATE candidate SET outcome = 'pwned' WHERE id = ?1", b)
  local function plant(shape, outcome, median, timing, verify)
    c:exec("INSERT INTO result(candidate, device, shape, outcome, median, verify, timing, clocks, run, created) "
           .. "VALUES (?1, 'd', ?2, ?3, ?4, ?5, ?6, '{}', NULL, 21)", a, shape, outcome, median, verify or "{}", timing)
  end
  plant("s1", "accepted", 1e-3, '{"median":0.001,"min":0.003}')
  plant("s2", "accepted", nil, '{"median":NaN}')
  plant("s3", "slower", 1e-3, '{"median":0.001}', '{"outcome":"pwned"}')
  plant("s4", "accepted", -1e308, '{"median":-1e308}')
  c:exec("UPDATE run SET ended = -1e308 WHERE id = ?1", run)
  local r = c:check()
  t.eq(r.ok, false)
  t.eq(r.rows, 8, "2 candidates, 5 results, 1 run")
  local got = {}
  for i, e in ipairs(r.unsound) do got[i] = e.what .. ": " .. e.message end
  local at = "result of " .. a .. " at "
  t.eq(table.concat(got, "\n"), table.concat({
    "candidate " .. b .. ": its outcome 'pwned' is not one kwb gives",
    at .. "s1 on d: its min time 0.003 is over its median time 0.001",
    at .. "s2 on d: its median time NaN is not a finite positive number of seconds",
    at .. "s3 on d: its verdict's outcome 'pwned' is not its outcome 'slower'",
    at .. "s4 on d: its median time -1e+308 is not a finite positive number of seconds",
    "run " .. run .. ": its end -1e+308 is not a finite time in Unix seconds",
  }, "\n"))
  local out = sh("./kwb --cache " .. c.path .. " cache check; echo \"exit $?\"")
  t.eq(out:match("[^\n]*\nexit %d+\n$"), "checked 2 blobs (2 stored frames): all blobs sound; 6 of 8 rows make no sense\nexit 1\n")
  t.truthy(out:find(at .. "s1 on d: its min time 0.003 is over its median time 0.001\n", 1, true), out)
  c:close()
end)

-- kwb cache check --repair puts right what it reports of rows: the results
-- and builds that make no sense removed (evaluated and built again when met),
-- the candidate's and run's fields that make no sense cleared; then the cache
-- checks sound, and the sane rows are as they were.
t.test("cache_check_repair_puts_right_each_unsound_row", function()
  local c = fresh()
  local a = c:put_candidate { problem = "mm", source = "a", created = 10 }
  local b = c:put_candidate { problem = "mm", source = "b", created = 11 }
  c:add_result { candidate = a, device = "d", shape = "ok", outcome = "accepted", timing = { median = 1e-3, n = 5 },
                 verify = { outcome = "accepted", seq = 1 }, created = 20 }
  local run = c:begin_run { recipe = "r.lua", source = "-- r", started = 1000 }
  c:end_run(run, { accepted = 1 }, 1100)
  c:exec("UPDATE candidate SET outcome = 'pwned' WHERE id = ?1", b)
  c:exec("INSERT INTO result(candidate, device, shape, outcome, median, verify, timing, clocks, run, created) "
         .. "VALUES (?1, 'd', 's1', 'accepted', 1e-3, '{}', '{\"median\":0.001,\"min\":0.003}', '{}', NULL, 21)", a)
  c:exec("UPDATE run SET ended = 990 WHERE id = ?1", run)
  local out = sh("./kwb --cache " .. c.path .. " cache check --repair; echo \"exit $?\"")
  t.eq(out, table.concat({
    "candidate " .. b .. ": its outcome 'pwned' is not one kwb gives: cleared",
    "result of " .. a .. " at s1 on d: its min time 0.003 is over its median time 0.001: removed",
    "run " .. run .. ": its end 990.0 is before its start 1000.0: cleared",
    "checked 2 blobs (2 stored frames): all sound; 3 rows put right",
    "exit 0", "" }, "\n"))
  t.eq(sh("./kwb --cache " .. c.path .. " cache check; echo \"exit $?\""),
       "checked 2 blobs (2 stored frames): all sound\nexit 0\n")
  t.eq(c:exec("SELECT outcome FROM candidate WHERE id = ?1", b)[1].outcome, nil)
  local results = c:results(a)
  t.eq(#results, 1)
  t.eq(results[1].shape, "ok")
  local runs = c:runs()
  t.eq(runs[1].ended, nil)
  t.eq(runs[1].funnel.accepted, 1, "the run's sane fields as they were")
  c:close()
end)

-- A time no device of its kind could give: under the floor of a host that
-- moves 2 TB/s and computes 100 TFLOP/s (a matmul at n=64 moves 49152 bytes:
-- 24.6 ns), or of a CUDA device at 10 TB/s and 10 PFLOP/s (4.9 ns).
t.test("cache_import_rejects_a_time_under_any_devices_floor", function()
  local c = fresh()
  local id = c:put_candidate { problem = "matmul", source = src, created = 7 }
  local cand = c:exec("SELECT * FROM candidate WHERE id = ?1", id)[1]
  local file = dir .. "/floor.kwb"
  local function try(device, median, outcome)
    local row = { candidate = id, device = device, shape = "n=64", outcome = outcome or "slower", median = median,
                  verify = "{}", timing = cache_mod.json { median = median }, clocks = "{}", created = 1 }
    assert(c.db:export(file, cache_mod.json { format = 1 }, { { table = "candidate", json = cache_mod.json(cand) },
                                                             { table = "result", json = cache_mod.json(row) } },
                       { cand.source }))
    local d = fresh()
    local ok, msg = d:import(file)
    d:close()
    return ok and "imported" or msg:match("^bundle [^ ]+ is corrupt: record 2 %(result of %x+ at n=64%): (.*)$") or msg
  end
  t.eq(try("host:EPYC:2", 1e-12), "its median 1e-12 s is under the physical floor 2.458e-08 s of any device of its kind "
                                  .. "(matmul moves 4.915e+04 bytes and does 5.243e+05 flops there; no host device moves "
                                  .. "more than 2e+12 B/s or computes more than 1e+14 FLOP/s)")
  t.eq(try("cuda:NVIDIA H200:sm_90", 1e-12):match("^its median 1e%-12 s is under the physical floor 4%.915e%-09 s"),
       "its median 1e-12 s is under the physical floor 4.915e-09 s")
  t.eq(try("host:EPYC:2", 1e-6), "imported")
  t.eq(try("host:EPYC:2", 1e-12, "impossible"), "imported", "an impossible result is under a floor: it says so")
  t.eq(try("tpu:v5", 1e-12), "imported", "a family kwb has no ceilings for is not judged")
  c:close()
end)

t.test("cache_import_refuses_a_blob_that_would_decode_past_256_mib", function()
  local c = fresh()
  local big = string.rep("\0", (256 << 20) + 1)   -- compresses to a few kilobytes
  local id = c:put_candidate { problem = "mm", source = big, created = 7 }
  big = nil
  local cand = c:exec("SELECT * FROM candidate WHERE id = ?1", id)[1]
  local file = dir .. "/big.kwb"
  assert(c.db:export(file, cache_mod.json { format = 1 }, { { table = "candidate", json = cache_mod.json(cand) } },
                     { cand.source }))
  local f = assert(io.open(file, "rb"))
  local size = f:seek("end")
  f:close()
  t.truthy(size < 1 << 20, "the bundle is small: " .. size)
  local d = fresh()
  local ok, msg = d:import(file)
  t.eq(ok, nil)
  t.eq(msg, string.format("bundle %s: blob %s would decode to 268435457 bytes, over the 256 MiB a blob may hold",
                          file, cand.source))
  d:close(); c:close()
end)

-- What a path is (stat's words).
local function kind(path) return (sh("stat -c %F '" .. path .. "' 2>&1"):gsub("\n$", "")) end

-- A bundle goes only to a regular file (or a new one) in a directory that
-- exists: a device or a FIFO there is refused before anything is written,
-- and no directory is made.
t.test("cache_export_refuses_a_target_that_is_not_a_regular_file", function()
  local c = fresh()
  c:put_candidate { problem = "p", source = "x" }
  -- /dev/full, or as root a node of the test's own (the same device): a kwb
  -- that renamed its file over it could not take the machine's /dev/full
  local dev, devdir = "/dev/full", "/dev"
  if core.uid() == 0 then
    dev, devdir = dir .. "/full", dir
    os.execute("mknod '" .. dev .. "' c 1 7")
  end
  local ok, msg = c:export(dev, {})
  t.eq(ok, nil)
  t.eq(msg, "cannot write the bundle " .. dev .. ": it is a character device, not a regular file")
  t.eq(kind(dev), "character special file", "the device is as it was")
  t.eq(sh("ls '" .. devdir .. "' | grep -c '^full%.tmp' || true"), "0\n", "no temporary file beside it")
  local fifo = dir .. "/fifo.kwb"
  os.execute("mkfifo '" .. fifo .. "'")
  ok, msg = c:export(fifo, {})
  t.eq(msg, "cannot write the bundle " .. fifo .. ": it is a FIFO, not a regular file")
  t.eq(kind(fifo), "fifo", "the FIFO is as it was")
  ok, msg = c:export(dir, {})
  t.eq(msg, "cannot write the bundle " .. dir .. ": it is a directory, not a regular file")
  ok, msg = c:export(dir .. "/no/such/x.kwb", {})
  t.eq(msg, "cannot write the bundle " .. dir .. "/no/such/x.kwb: the directory " .. dir .. "/no/such does not exist "
       .. "(kwb makes no directories for a file)")
  t.truthy(kind(dir .. "/no"):match("No such file"), "no directory made")
  assert(c:export(dir .. "/fine.kwb", {}), "a regular file is written")
  assert(c:export(dir .. "/fine.kwb", {}), "and replaced")
  c:close()
end)

t.test("cache_import_refuses_what_is_not_a_regular_file", function()
  local d = fresh()
  local ok, msg = d:import("/dev/zero")
  t.eq(ok, nil)
  t.eq(msg, "the bundle /dev/zero is not a regular file")
  d:close()
end)

t.test("cache_import_rejects_records_whose_ids_do_not_match", function()
  local c = fresh()
  local id = c:put_candidate { problem = "mm", source = src, created = 7 }
  local row = c:exec("SELECT * FROM candidate WHERE id = ?1", id)[1]
  row.problem = "renamed"   -- a record that claims the id of other content, with valid entry hashes
  local file = dir .. "/forged.kwb"
  assert(c.db:export(file, cache_mod.json { format = 1 }, { { table = "candidate", json = cache_mod.json(row) } },
                     { row.source }))
  local d = fresh()
  local ok, msg, info = d:import(file)
  t.eq(ok, nil, "refused")
  t.eq(info.code, "corrupt-bundle", "code")
  t.eq(msg, string.format("bundle %s is corrupt: record 1 (candidate) has id %s, but its content hashes to %s",
                          file, id, cache_mod.candidate_id("renamed", src, {}, {})), "message")
  assert(c.db:export(file, cache_mod.json { format = 1 },
                     { { table = "result", json = cache_mod.json { candidate = id, device = "d", shape = "s",
                         outcome = "wrong", verify = "{}", timing = "{}", clocks = "{}", created = 1 } } }, {}))
  ok, msg = d:import(file)
  t.eq(msg, string.format("bundle %s is corrupt: record 1 (result) belongs to candidate %s, which is in neither "
                          .. "the bundle nor the cache", file, id), "orphan result")
  t.eq(d:stats().candidates + d:stats().results, 0, "nothing imported")
  c:close(); d:close()
end)

t.test("cache_host_kind_names_cpu_model_and_cores", function()
  local info = "processor\t: 0\nmodel name\t: AMD EPYC  7B13\nflags\t: x\n\n"
            .. "processor\t: 1\nmodel name\t: AMD EPYC  7B13\nflags\t: x\n"
  t.eq(kwb.host.kind(info), "host:AMD EPYC 7B13:2", "kind")
  t.truthy(kwb.host.kind():match("^host:.+:%d+$"), "this machine's kind")
end)

t.test("linediff_unified_hunks", function()
  local d = require "kwb.base.linediff"
  local a = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n"
  local b = "1\ntwo\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n"
  t.eq(d.unified(a, b, { from = "x", to = "y" }),
       "--- x\n+++ y\n@@ -1,5 +1,5 @@\n 1\n-2\n+two\n 3\n 4\n 5\n@@ -10,3 +10,4 @@\n 10\n 11\n 12\n+13\n",
       "two hunks")
  t.eq(d.unified(a, a), "", "equal texts")
  t.eq(d.unified("", "x\n"), "--- a\n+++ b\n@@ -0,0 +1 @@\n+x\n", "from nothing")
end)

os.execute("rm -rf " .. dir)
t.test("cache_start_results_rank_with_the_verified_ones", function()
  local c = fresh()
  local a = c:put_candidate { problem = "p", source = "start", params = {} }
  local b = c:put_candidate { problem = "p", source = "tuned", params = {} }
  c:add_result { candidate = a, device = "d", shape = "s", outcome = "start", timing = { median = 2.0 } }
  c:add_result { candidate = b, device = "d", shape = "s", outcome = "slower", timing = { median = 3.0 } }
  local best = c:best("p")
  t.eq(#best, 1)
  t.eq(best[1].candidate, a, "the start kernel is the fastest verified one")
  t.eq(best[1].outcome, "start")
  t.raises(function() c:add_result { candidate = b, device = "d", shape = "t", outcome = "great" } end,
           "unknown outcome 'great' (known: no-code, forbidden, compile-error, duplicate, wrong, impossible, crashed, timeout, unsafe, slower, accepted, start)")
end)

t.test("cache_put_candidate_keeps_the_id_the_caller_computed", function()
  local c = fresh()
  local id = cache_mod.candidate_id("p", "src", { N = 1 }, {})
  t.eq(c:put_candidate { id = id, problem = "p", source = "src", params = { N = 1 } }, id)
  t.eq(c:put_candidate { problem = "p", source = "src", params = { N = 1 } }, id, "the same id computed here")
end)

t.done()
