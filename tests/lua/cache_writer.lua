-- tests/lua/cache_writer.lua PATH TAG COUNT: insert COUNT candidates of
-- problem TAG into the cache at PATH, each in its own transaction, printing
-- the number committed after each commit. Used by test_cache.lua to share a
-- cache between processes and to kill a writer mid-write.
local path, tag, count = arg[1], arg[2], tonumber(arg[3])
local cache = assert(kwb.cache.open(path))
local parent
for i = 1, count do
  local id = cache:put_candidate {
    problem = tag, source = string.format("// %s\nvoid f(float *x) {\n  x[0] = %d;\n}\n", tag, i),
    params = { i = i }, parent = parent, origin = { strategy = "writer" }, created = i,
  }
  parent = id
  io.write(i, "\n")
  io.stdout:flush()
end
cache:close()
