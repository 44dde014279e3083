-- tests/lua/sanitize_play.lua: what the tests of compute-sanitizer's marks
-- share (test_sanitize_winners, test_sanitize_marks): a CUDA recipe over
-- n = 1000 and 2000 on the stand-in for kwb.cuda, and play(), which
-- completes named results with planted medians through Session:complete,
-- the tools stood in for.
local core = require "kwb.core"
require "fake_cuda" ()
local vecadd = require "fake_vecadd"

local M = {}

M.dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
M.vecadd = vecadd
M.body = vecadd.vec .. "  for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n}\n"
function M.launch(shape, p) return { grid = { (shape.n + p.BLOCK - 1) // p.BLOCK }, block = { p.BLOCK } } end

-- make_recipe([extra]) -> the recipe "winners" (sanitize = "best"), its
-- fields replaced by extra's; sanitize = "omit" leaves it to its default.
function M.make_recipe(extra)
  local spec = { name = "winners", backend = "cuda", problem = vecadd.problem, shapes = { n = { 1000, 2000 } },
                 verify_shapes = false, start = { source = M.body, defines = { BLOCK = 32 } }, sanitize = "best",
                 launch = M.launch }
  for k, v in pairs(extra or {}) do spec[k] = v end
  if spec.sanitize == "omit" then spec.sanitize = nil end
  return kwb.recipe(spec)
end

-- fresh_store(path) -> a store over an empty cache at path.
function M.fresh_store(path)
  for _, f in ipairs { path, path .. "-wal", path .. "-shm" } do os.remove(f) end
  return require("kwb.loop.store").open(path)
end

function M.session_of(rec, store) return require("kwb.loop.session").new(rec, { store = store }) end

-- play(s, list [, opts]) -> results by name: each { name, { ms per shape, in
-- the recipe's order } } completed in order through Session:complete
-- (judged, recorded, in the session's run record, begun here if it has
-- none); "start" first. The stand-in for the tools lists the names it
-- sanitized in s.sanitized and marks them clean, but for opts.unsafe's
-- names; opts.defer: put off as a grid's run, from the start on.
local names = {}
function M.play(s, list, opts)
  opts = opts or {}
  s.run_record = s.run_record or s.store:begin_run { recipe = "winners", source = "-- a test's", settings = {} }
  local by = {}
  s.sanitized = s.sanitized or {}
  s.sanitize = function(_, cand, res)
    local name = names[cand.id]
    s.sanitized[#s.sanitized + 1] = name
    res.seconds.sanitize, res.sanitized = 0.25, true
    if opts.unsafe and opts.unsafe[name] then res.outcome, res.reason, res.sanitized = "unsafe", "planted", nil end
  end
  for _, item in ipairs(list) do
    local name, ms = item[1], item[2]
    local cand = name == "start" and s:candidate(s.recipe.start, "start")
                 or s:candidate({ source = M.body:gsub("b%[i%];", "b[i] + 0 * " .. #name .. name:byte(-1) .. ";"),
                                  params = { BLOCK = 32 }, name = name .. ".cu" }, "grid")
    names[cand.id] = name
    local shapes = {}
    for j, sh in ipairs(s.recipe.shapes) do
      local m = ms[j] * 1e-3
      shapes[sh.key] = { median = m, ci_lo = m * 0.999, ci_hi = m * 1.001, n = 20, partial = false }
    end
    s.seq = s.seq + 1
    local res = { id = cand.id, short = cand.short, origin = "grid", seq = s.seq, seed = 1, seconds = {},
                  shapes = shapes, name = cand.name }
    by[name] = s:complete { cand = cand, res = res, opts = { start = name == "start" }, t0 = core.now() }
    by[name].cand = cand
    if name == "start" then s.start, s.best = by.start, by.start; if opts.defer then s:put_off() end end
  end
  return by
end

-- clean(s): the session's stand-in for the tools finds nothing.
function M.clean(s) s.sanitize = function(_, _, res) res.seconds.sanitize, res.sanitized = 0.25, true end end

-- The usual results: the start, A (the best), S (slower, n = 2000's
-- fastest), S2 (slower, next there).
M.START, M.A, M.S, M.S2 = { "start", { 1.0, 2.0 } }, { "A", { 0.5, 1.5 } }, { "S", { 0.8, 1.4 } },
                          { "S2", { 0.9, 1.45 } }

return M
