-- tests/lua/test_cli_ids.lua: no command breaks a cache. Every command that
-- takes a candidate's id runs on the start kernel's id, the best's id and an
-- id the cache does not hold; each answers (exit 0, 1 or 2, never a Lua
-- traceback), and after all of them the recipe runs again from the same
-- cache, its start kernel still the start.
local t = require "t"
local core = require "kwb.core"

local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$") .. "/cli_ids"
core.mkdirs(dir)
local db = dir .. "/kwb.db"

local function kwb_(...)
  local argv = { "./kwb", "--cache", db, ... }
  local r = assert(core.exec(argv, { timeout = 300 }))
  return r.status, (r.out or "") .. (r.err or "")
end

local st, out = kwb_("recipes/host_matmul.lua", "--json", "--strategy", "grid", "--budget", "3", "--seed", "1")
assert(st == 0, out)
local start, best
for l in out:gmatch("[^\n]+") do
  local ok, e = pcall(require("cjson").decode, l)
  if ok and type(e) == "table" and e.event == "start-kernel" then start = e.id end
  if ok and type(e) == "table" and e.event == "summary" then best = e.best and e.best.id end
end
assert(start and best, "the run named its start and its best")

local commands = {
  { "cache", "show", "ID" }, { "cache", "diff", "ID", "ID" }, { "cache", "ls" }, { "cache", "best", "matmul" },
  { "cache", "export", dir .. "/b.kwb", "--id", "ID" }, { "cache", "check" }, { "profile", "ID" },
  { "recipes/host_matmul.lua", "--retime", "ID" }, { "report", "recipes/host_matmul.lua", dir },
  { "export", "recipes/host_matmul.lua", dir .. "/dispatch" },
}

t.test("cli_ids_every_command_answers_on_every_id", function()
  for _, id in ipairs { start, best, "ffffffffffff" } do
    for _, c in ipairs(commands) do
      local argv = {}
      for i, w in ipairs(c) do argv[i] = w == "ID" and id:sub(1, 12) or w end
      local status, text = kwb_(table.unpack(argv))
      local what = table.concat(argv, " ")
      t.truthy(status == 0 or status == 1 or status == 2, what .. ": exit " .. tostring(status))
      t.eq(text:find("stack traceback", 1, true), nil, what .. " raised: " .. text)
    end
  end
end)

t.test("cli_ids_the_cache_still_runs_the_recipe", function()
  local status, text = kwb_("recipes/host_matmul.lua", "--json", "--strategy", "grid", "--budget", "2", "--seed", "2")
  t.eq(status, 0, text)
  local s, shown = kwb_("cache", "show", start:sub(1, 12))
  t.eq(s, 0, shown)
  t.truthy(shown:find("\noutcome    start\n", 1, true), shown)
end)

t.done()
