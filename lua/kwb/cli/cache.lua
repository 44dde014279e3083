-- kwb/cli/cache.lua: `kwb cache ...`, what the cache knows, from the shell.
local ids = require "kwb.base.ids"
local cache_mod = require "kwb.cache"
local linediff = require "kwb.base.linediff"
local figures = require "kwb.figures"

local M = {}

M.usage = require("kwb.help").command_help("cache")

local function usage_error(msg)
  io.stderr:write("kwb cache: ", msg, "\ntry 'kwb cache --help'\n")
  return 2
end

local function run_error(msg)
  io.stderr:write("kwb cache: ", msg, "\n")
  return 1
end

local function short(id) return ids.short(id) or "-" end

local function when(t)
  return t and os.date("!%Y-%m-%d %H:%M:%S", math.floor(t)) or "-"
end

local function origin(c)
  if c.strategy and c.model then return c.strategy .. "/" .. c.model end
  return c.strategy or c.model or "-"
end

local function fmt_time(s)
  return s and figures.time(s) or "-"
end

local parse = require("kwb.base.args").parse

local commands = {}

-- --json: a command's answer as one JSON object (ls, transcripts and best: one a line), valid UTF-8 (kwb.base.text)
local json = require "cjson"
local function emit(obj) print(require("kwb.base.text").json(obj)) end

function commands.ls(c, pos)
  if #pos > 1 then return usage_error("ls takes at most one PROBLEM") end
  local rows = {}
  for _, r in ipairs(c:list(pos[1])) do
    if M.json then
      emit { id = r.id, problem = r.problem, parent = r.parent, strategy = r.strategy, model = r.model,
             outcome = r.outcome, score = r.score, created = r.created }
    end
    rows[#rows + 1] = { short(r.id), r.problem, short(r.parent), origin(r), r.outcome or "-",
                        r.score and string.format("%.2fx", r.score) or "-", when(r.created) }
  end
  if M.json then return 0 end
  if #rows == 0 then
    print(pos[1] and ("no candidates for " .. pos[1]) or "no candidates")
    return 0
  end
  figures.print_table({ { "id", align = "left" }, { "problem", align = "left" }, { "parent", align = "left" },
                       { "origin", align = "left" }, { "outcome", align = "left" }, "score",
                       { "created", align = "left" } }, rows)
  return 0
end

-- print_certificate(cert): a run's final round (kwb.loop.certify) as text:
-- its kernels and each ratio with its 95% interval (certify.lines).
function M.print_certificate(cert)
  for _, l in ipairs(require("kwb.loop.certify").lines(cert)) do print(l) end
end

-- A run: its record, and the certificate of its final round where it has one.
local function show_run(c, run)
  local cert = c:certificate(run.id)
  if M.json then
    emit { run = run.id, recipe = run.recipe, started = run.started, ended = run.ended, settings = run.settings,
           funnel = run.funnel, usage = run.usage, certificate = cert }
    return 0
  end
  print("run          " .. run.id)
  print("recipe       " .. run.recipe)
  print("started      " .. when(run.started) .. " UTC")
  print("ended        " .. (run.ended and (when(run.ended) .. " UTC") or "-"))
  local st = run.settings
  print(string.format("settings     strategy %s · seed %s · device %s", tostring(st.strategy or "-"),
                      tostring(st.seed or "-"), tostring(st.device or "-")))
  if run.funnel then
    local parts = {}
    for _, o in ipairs(require("kwb.base.outcomes").display) do
      if (run.funnel[o] or 0) > 0 then parts[#parts + 1] = o .. " " .. run.funnel[o] end
    end
    print("funnel       " .. (#parts > 0 and table.concat(parts, " · ") or "no candidates"))
  end
  if not cert then print("certificate  none (no final round: nothing but the start kernel, or --certify 0)"); return 0 end
  M.print_certificate(cert)
  return 0
end

function commands.show(c, pos)
  if #pos ~= 1 then return usage_error("show takes one ID") end
  local cand, msg = c:get(pos[1])
  local run = c:find_run(pos[1])
  if cand and run then
    return run_error(string.format("%s is the prefix of both a candidate and a run: give more digits", pos[1]))
  end
  if run then return show_run(c, run) end
  if not cand then return run_error(msg) end
  local lineage = c:lineage(cand.id)
  if M.json then
    local tr = cand.transcript and c:transcript(cand.transcript)
    local _, user = tr and require("kwb.model").prompt_of(tr)
    emit { id = cand.id, problem = cand.problem, parent = cand.parent, strategy = cand.strategy, model = cand.model,
           created = cand.created, outcome = cand.outcome, rationale = cand.rationale, params = cand.params,
           flags = cand.flags, lineage = lineage, builds = c:builds(cand.id), results = c:results(cand.id),
           measurements = c:measurements(cand.id), source = cand.source,
           transcript = tr and { id = tr.id, model = tr.model, tokens_in = tr.tokens_in, tokens_out = tr.tokens_out,
                                 cost = tr.cost, seconds = tr.seconds, prompt = user } or nil }
    return 0
  end
  local line = {}
  for i, id in ipairs(lineage) do line[i] = short(id) end
  print("candidate  " .. cand.id)
  print("problem    " .. cand.problem)
  print("parent     " .. (cand.parent or "-"))
  print("origin     " .. origin(cand))
  print("created    " .. when(cand.created) .. " UTC")
  print("outcome    " .. (cand.outcome or "-"))
  for _, r in ipairs(c:results(cand.id)) do   -- (a duplicate: whose code it is, as its record says)
    local v = type(r.verify) == "table" and r.verify or {}
    if v.duplicate_of then print("duplicate  of " .. short(v.duplicate_of) .. ": " .. tostring(v.reason)); break end
  end
  if cand.rationale then print("rationale  " .. cand.rationale) end
  print("params     " .. cache_mod.json(cand.params))
  if #cand.flags > 0 then print("flags      " .. table.concat(cand.flags, " ")) end
  print("lineage    " .. table.concat(line, " <- "))
  local builds = c:builds(cand.id)
  if #builds > 0 then
    print("builds")
    local rows = {}
    for _, b in ipairs(builds) do
      rows[#rows + 1] = { b.arch, b.toolchain, b.ok and "ok" or "failed", cache_mod.json(b.resources) }
    end
    for _, l in ipairs(figures.table({ { "arch", align = "left" }, { "toolchain", align = "left" },
                                      { "status", align = "left" }, { "resources", align = "left" } }, rows)) do
      print("  " .. l)
    end
  end
  local results = c:results(cand.id)
  if #results > 0 then
    print("results")
    local rows = {}
    for _, r in ipairs(results) do
      rows[#rows + 1] = { r.device, r.shape, r.outcome, fmt_time(r.timing.median),
                          r.timing.n and tostring(r.timing.n) or "-" }
    end
    for _, l in ipairs(figures.table({ { "device", align = "left" }, { "shape", align = "left" },
                                      { "outcome", align = "left" }, "median", "n" }, rows)) do
      print("  " .. l)
    end
  end
  local ms = c:measurements(cand.id)
  if #ms > #results then   -- measured more than once: every time, oldest first
    print("measurements")
    local rows = {}
    for _, m in ipairs(ms) do
      rows[#rows + 1] = { when(m.created), m.device, m.shape, m.outcome, fmt_time(m.median), short(m.run) }
    end
    for _, l in ipairs(figures.table({ { "when", align = "left" }, { "device", align = "left" },
                                      { "shape", align = "left" }, { "outcome", align = "left" }, "median",
                                      { "run", align = "left" } }, rows)) do
      print("  " .. l)
    end
  end
  print("source")
  for _, l in ipairs(linediff.lines(cand.source)) do print("  " .. l) end
  if cand.transcript then   -- the request that produced it
    local tr, err = c:transcript(cand.transcript)
    if not tr then return run_error(err) end
    print(string.format("transcript %s: %s, %s tokens in, %s out, %s, %.1f s", short(tr.id), tr.model,
                        tostring(tr.tokens_in or "-"), tostring(tr.tokens_out or "-"),
                        tr.cost and string.format("cost %.4f", tr.cost) or "no cost", tr.seconds))
    local _, user = require("kwb.model").prompt_of(tr)
    print("prompt")
    for _, l in ipairs(linediff.lines(user or "")) do print("  " .. l) end
  end
  return 0
end

function commands.transcripts(c, pos)
  if #pos > 1 then return usage_error("transcripts takes at most one RUN") end
  local run
  if pos[1] then
    local n = 0
    for _, r in ipairs(c:runs()) do
      if r.id:sub(1, #pos[1]) == pos[1] then run, n = r.id, n + 1 end
    end
    if n == 0 then return run_error("no run " .. pos[1] .. " in the cache") end
    if n > 1 then return run_error(string.format("run prefix %s is ambiguous (%d runs)", pos[1], n)) end
  end
  local rows = {}
  for _, t in ipairs(c:transcripts(run)) do
    if M.json then emit { seq = t.seq, id = t.id, run = t.run, model = t.model, purpose = t.purpose, tokens_in = t.tokens_in,
                          tokens_out = t.tokens_out, cost = t.cost, attempts = t.attempts, seconds = t.seconds,
                          error = t.error } end
    rows[#rows + 1] = { tostring(t.seq), short(t.id), short(t.run), t.model, t.purpose or "-",
                        tostring(t.tokens_in or "-"), tostring(t.tokens_out or "-"),
                        t.cost and string.format("%.4f", t.cost) or "-", tostring(t.attempts), string.format("%.1f s", t.seconds),
                        t.error or "ok" }
  end
  if M.json then return 0 end
  if #rows == 0 then print("no transcripts" .. (run and (" in run " .. short(run)) or "")); return 0 end
  figures.print_table({ "seq", { "id", align = "left" }, { "run", align = "left" }, { "model", align = "left" },
                       { "purpose", align = "left" }, "in", "out", "cost", "tries", "time", { "result", align = "left" } }, rows)
  return 0
end

local shape_set = require("kwb.problem").shape_set

function commands.best(c, words)
  local pos, opts = parse(words, { shape = "value", device = "value" })
  if not pos then return usage_error(opts) end
  if #pos ~= 1 then return usage_error("best takes one PROBLEM") end
  local best = c:best(pos[1], { device = opts.device })
  if opts.shape then   -- the variables in any order
    local want, kept = shape_set(opts.shape), {}
    for _, r in ipairs(best) do if shape_set(r.shape) == want then kept[#kept + 1] = r end end
    best = kept
  end
  if M.json then
    for _, r in ipairs(best) do emit(r) end
    return 0
  end
  if #best == 0 then
    print("no timed correct candidates for " .. pos[1] .. (opts.shape and (" at shape " .. opts.shape) or ""))
    return 0
  end
  local rows = {}
  for _, r in ipairs(best) do
    rows[#rows + 1] = { r.device, r.shape, short(r.candidate), fmt_time(r.median), r.outcome,
                        r.imported and ("bundle " .. r.imported) or "here" }
  end
  figures.print_table({ { "device", align = "left" }, { "shape", align = "left" }, { "candidate", align = "left" },
                       "median", { "outcome", align = "left" }, { "measured", align = "left" } }, rows)
  return 0
end

-- The parameters two candidates differ in, as a table (one the other lacks
-- shows as -), or one line saying they are the same; nothing when neither
-- has any.
local function param_keys(a, b)
  local keys, seen = {}, {}
  for _, p in ipairs { a.params or {}, b.params or {} } do
    for k in pairs(p) do
      if not seen[k] then seen[k] = true; keys[#keys + 1] = k end
    end
  end
  table.sort(keys)
  return keys
end

local function param_diff(a, b)
  local keys = param_keys(a, b)
  if #keys == 0 then return end
  local function show(v) return v == nil and "-" or (type(v) == "table" and require("cjson").encode(v) or tostring(v)) end
  local rows, same = {}, {}
  for _, k in ipairs(keys) do
    local x, y = show((a.params or {})[k]), show((b.params or {})[k])
    if x ~= y then rows[#rows + 1] = { k, x, y } else same[#same + 1] = k .. "=" .. x end
  end
  if #rows == 0 then
    print("parameters the same: " .. table.concat(same, " "))
    return
  end
  figures.print_table({ { "parameter", align = "left" }, { short(a.id), align = "left" }, { short(b.id), align = "left" } },
                     rows)
  if #same > 0 then print("the same: " .. table.concat(same, " ")) end
end

function commands.diff(c, pos)
  if #pos ~= 2 then return usage_error("diff takes two IDs") end
  local a, msg = c:get(pos[1])
  if not a then return run_error(msg) end
  local b, msg2 = c:get(pos[2])
  if not b then return run_error(msg2) end
  if M.json then
    local params = {}   -- name -> { a's value, b's } where they differ
    for _, k in ipairs(param_keys(a, b)) do
      local x, y = (a.params or {})[k], (b.params or {})[k]
      if json.encode { x } ~= json.encode { y } then params[k] = { x, y } end
    end
    emit { a = a.id, b = b.id, params = params,
           diff = a.source ~= b.source and linediff.unified(a.source, b.source, { from = short(a.id), to = short(b.id) }) or nil }
    return 0
  end
  param_diff(a, b)
  if a.source == b.source then print("source the same")
  else io.write(linediff.unified(a.source, b.source, { from = short(a.id), to = short(b.id) })) end
  return 0
end

local function count(n, word)
  return string.format("%d %s%s", n, word, n == 1 and "" or "s")
end

local function counts_line(n)
  return table.concat({ count(n.candidates, "candidate"), count(n.builds, "build"), count(n.results, "result"),
                        count(n.runs, "run") }, ", ")
end

function commands.export(c, words)
  local pos, opts = parse(words, { problem = "value", id = "list", outcome = "value", since = "value",
                                   ["no-binaries"] = "flag" })
  if not pos then return usage_error(opts) end
  if #pos ~= 1 then return usage_error("export takes one FILE") end
  local since
  if opts.since then
    local y, m, d = opts.since:match("^(%d%d%d%d)%-(%d%d)%-(%d%d)$")
    if not y then return usage_error("--since wants a date YYYY-MM-DD, not '" .. opts.since .. "'") end
    since = os.time { year = tonumber(y), month = tonumber(m), day = tonumber(d), hour = 0 }
    since = since + (os.time() - os.time(os.date("!*t")))   -- the date is UTC
  end
  if opts.outcome and not cache_mod.outcome_known(opts.outcome) then
    return usage_error("unknown outcome '" .. opts.outcome .. "' (known: " .. table.concat(cache_mod.outcomes, ", ") .. ")")
  end
  local n, msg = c:export(pos[1], { problem = opts.problem, ids = opts.id, outcome = opts.outcome, since = since,
                                    binaries = not opts["no-binaries"] })
  if not n then return run_error(msg) end
  if M.json then n.file = pos[1]; emit(n); return 0 end
  print(string.format("wrote %s: %s", pos[1], counts_line(n)))
  return 0
end

function commands.import(c, pos)
  if #pos ~= 1 then return usage_error("import takes one FILE") end
  local n, msg = c:import(pos[1])
  if not n then return run_error(msg) end
  if M.json then n.file = pos[1]; emit(n); return 0 end
  print(string.format("imported %s: %s new (%s)", pos[1], counts_line(n), count(n.blobs, "blob")))
  return 0
end

function commands.stats(c, pos)
  if #pos > 0 then return usage_error("stats takes no arguments") end
  local s = c:stats()
  if M.json then s.path = c.path; emit(s); return 0 end
  print(string.format("cache       %s (schema %d)", c.path, s.schema))
  print(string.format("file        %d bytes with its write-ahead log", s.file_bytes))
  print(string.format("candidates  %d in %d problems", s.candidates, s.problems))
  print(string.format("builds      %d", s.builds))
  print(string.format("results     %d", s.results))
  print(string.format("runs        %d", s.runs))
  print(string.format("blobs       %d (%d full, %d deltas, longest chain %d)", s.blobs, s.full_blobs, s.delta_blobs,
                      s.max_depth))
  print(string.format("mirrored    %d (bases keep a second copy: %d bytes)", s.mirrored_blobs, s.mirror_bytes))
  print(string.format("content     %d bytes raw, %d bytes stored with the mirrors", s.raw_bytes, s.stored_bytes))
  print(string.format("ratio       %s", s.ratio and string.format("%.1fx", s.ratio) or "-"))
  return 0
end

function commands.check(c, words)
  local pos, opts = parse(words, { repair = "flag" })
  if not pos then return usage_error(opts) end
  if #pos > 0 then return usage_error("check takes no arguments but --repair") end
  local r = c:check { repair = opts.repair }
  local lost = #r.unreadable
  for _, e in ipairs(r.corrupt) do if not e.recoverable then lost = lost + 1 end end
  if M.json then r.lost = lost; emit(r); return (lost > 0 or #r.unsound > 0) and 1 or 0 end
  lost = 0
  for _, e in ipairs(r.corrupt) do
    local what = e.frame == "ok" and "its mirror copy is corrupt"
      or e.mirror == "corrupt" and "both copies of its frame are corrupt"
      or e.mirror == "none" and "its frame is corrupt and it has no mirror"
      or "its frame is corrupt, its mirror is sound"
    local fate = not e.recoverable and "lost" or e.repaired and "repaired" or "recoverable (--repair)"
    if not e.recoverable then lost = lost + 1 end
    print(string.format("blob %s: %s: %s", e.blob, what, fate))
  end
  for _, e in ipairs(r.unreadable) do
    lost = lost + 1
    print(string.format("blob %s: lost: %s", e.blob, e.message))
  end
  for _, id in ipairs(r.unmirrored) do
    print(string.format("blob %s: is a base without a mirror (--repair adds one)", id))
  end
  for _, e in ipairs(r.repaired or {}) do print(string.format("%s: %s: %s", e.what, e.message, e.repaired)) end
  for _, e in ipairs(r.unsound) do print(string.format("%s: %s", e.what, e.message)) end
  local blobs_ok = #r.corrupt == 0 and #r.unreadable == 0 and #r.unmirrored == 0
  print(string.format("checked %s (%s): %s%s%s", count(r.blobs, "blob"), count(r.frames, "stored frame"),
                      r.ok and "all sound" or blobs_ok and "all blobs sound" or lost > 0 and count(lost, "blob") .. " lost"
                      or opts.repair and "repaired" or "no blob lost",
                      r.repaired and string.format("; %s put right", count(#r.repaired, "row")) or "",
                      #r.unsound > 0 and string.format("; %d of %s make no sense", #r.unsound, count(r.rows, "row")) or ""))
  return (lost > 0 or #r.unsound > 0) and 1 or 0
end

function commands.gc(c, pos)
  if #pos > 0 then return usage_error("gc takes no arguments") end
  local r = c:gc()
  if M.json then emit(r); return 0 end
  print(string.format("removed %s no record needs (%d bytes stored)", count(r.blobs, "blob"), r.bytes))
  return 0
end

function M.main(...)
  -- the command is the first word that is not an option (kwb cache --json ls works)
  local all, cmd = { ... }, nil
  for i, w in ipairs(all) do
    if w == "--help" or w == "-h" or w:sub(1, 2) ~= "--" and all[i - 1] ~= "--cache" then
      cmd = table.remove(all, i)
      break
    end
  end
  if cmd == nil then
    io.stderr:write(M.usage)
    return 2
  end
  if cmd == "--help" or cmd == "-h" or cmd == "help" then
    io.write(M.usage)
    return 0
  end
  local fn = commands[cmd]
  if not fn then return usage_error("unknown command '" .. cmd .. "'") end
  for _, w in ipairs(all) do   -- `kwb cache CMD --help`: that command's usage and what it does
    if w == "--" then break end
    if w == "--help" or w == "-h" then
      for _, sub in ipairs(require("kwb.help").command("cache").subcommands) do
        if sub[1]:match("^%S+") == cmd then
          local help = require "kwb.help"
          local what = help.wrap((sub[2]:gsub("^%l", string.upper)) .. ".", 80, "")
          io.write(string.format("usage: kwb cache %s [--json]\n\n%s\n", sub[1], table.concat(what, "\n")))
          return 0
        end
      end
      io.write(M.usage)
      return 0
    end
  end
  -- (kwb.cli took --cache PATH from anywhere in the words); --json for every command
  local core = require "kwb.core"
  local words, o = parse(all, { json = "flag" }, { pass = true })
  if not words then return usage_error(o) end
  M.json = o.json or false
  if cmd ~= "import" then   -- only an import may make a cache
    local f = io.open(core.cache_path or "cache/kwb.db", "rb")
    if not f then
      return run_error(string.format("no cache at %s (a run makes one; kwb --cache PATH names another)",
                                     core.cache_path or "cache/kwb.db"))
    end
    f:close()
  end
  if cmd ~= "best" and cmd ~= "export" and cmd ~= "check" then
    for _, w in ipairs(words) do
      if w:sub(1, 2) == "--" then return usage_error(cmd .. ": unknown option '" .. w .. "'") end
    end
  end
  local c, msg = cache_mod.open()
  if not c then return run_error(msg) end
  local ok, status = pcall(fn, c, words)
  c:close()
  if not ok then error(status, 0) end
  return status
end

return M
