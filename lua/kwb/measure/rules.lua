-- kwb/measure/rules.lua: forbidden actions. Every rule is matched by LPeg over three
-- views of a candidate, so a macro cannot hide a word:
--   source        the source with comments and string literals blanked out
--   preprocessed  the preprocessor's output from the build's own command
--                 (`-E` added), lines of the candidate's own file only,
--                 mapped back to their source lines
--   symbols       the built module's undefined symbols (what it calls) and
--                 writable data symbols (state kept across calls)
-- and asm patterns are matched inside string literals (inline assembly text);
-- a CUDA module's PTX is a view of its own (check_ptx).
--
-- The rules are messages for the model, not the boundary: a system call
-- spelled as bytes (`.byte 0x0f, 0x05`) or state in assembler-defined .bss
-- has no name here and passes them; the sandbox's seccomp filter and the
-- verification stop those (docs/architecture.md; tests/lua/test_text_rules.lua).
--
--   local rs = rules.set { "default", "-sleep", { name = "no-goto", words = { "goto" } } }
--   local hit = rs:check_source(src)      -- nil, or { rule =, line =, word =, message = }
local host = require "kwb.host"
local lpeg = require "lpeg"
local nearest = require "kwb.base.nearest"
local P, R, S, C, Cp, Cs, Ct = lpeg.P, lpeg.R, lpeg.S, lpeg.C, lpeg.Cp, lpeg.Cs, lpeg.Ct

local ptx_read = require "kwb.measure.ptx"
local M = {}

-- ---- the rule catalogue -------------------------------------------------
-- words: identifiers forbidden in the source, the preprocessed one and as undefined symbols.
-- symbols: forbidden only as undefined symbols (names too common to forbid as
--        identifiers: a variable may be called `time`, a call to time() may not).
-- asm:   plain substrings forbidden inside string literals (inline assembly).
-- data:  the module may define no writable data (globals, static locals).
-- backend: the one backend it is about (none: both); other backends' prompts leave it out.
M.catalogue = {
  ["other-streams"] = {
    why = "work on another stream, event or thread escapes the harness's timing",
    words = { "cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority",
              "cudaEventCreate", "cudaEventCreateWithFlags", "cudaEventRecord", "cudaLaunchHostFunc",
              "cuStreamCreate", "cuStreamCreateWithPriority", "cuEventCreate", "cuEventRecord",
              "pthread_create", "thrd_create", "posix_spawn", "posix_spawnp", "vfork",
              "__builtin_GOMP_parallel", "GOMP_parallel", "omp_set_num_threads" },
    symbols = { "fork", "clone", "clone3", "system", "popen" },
  },
  sync = {
    why = "host or device-wide synchronisation belongs to the harness",
    words = { "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
              "cudaStreamWaitEvent", "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
              "this_grid", "grid_group", "pthread_barrier_wait", "pthread_join", "thrd_join",
              "pthread_cond_wait", "pthread_mutex_lock" },
  },
  timer = {
    why = "a candidate that reads a clock can tell when it is being timed",
    words = { "clock_gettime", "gettimeofday", "timespec_get", "clock64", "__globaltimer",
              "__rdtsc", "__rdtscp", "__builtin_ia32_rdtsc", "__builtin_ia32_rdtscp",
              "__builtin_readcyclecounter", "__builtin_readsteadycounter", "rdtsc", "clock_getres",
              "getrusage", "cudaEventElapsedTime", "cuEventElapsedTime" },
    symbols = { "clock", "time", "times", "ftime", "__clock_gettime", "__vdso_clock_gettime" },
    asm = { "rdtsc", "rdpmc", "%globaltimer", "%clock" },
  },
  printf = {
    why = "output from a candidate (device printf) slows it and talks to the harness's streams",
    words = { "printf", "fprintf", "dprintf", "vprintf", "vfprintf", "puts", "fputs", "putchar",
              "fputc", "putc", "fwrite", "perror", "__builtin_printf", "__builtin_puts",
              "vprintf_device" },
    symbols = { "write", "__printf_chk", "__fprintf_chk", "__vfprintf_chk" },
  },
  sleep = {
    why = "sleeping or yielding inside a candidate",
    words = { "usleep", "nanosleep", "clock_nanosleep", "__nanosleep", "sched_yield",
              "thrd_sleep", "thrd_yield", "pthread_yield" },
    symbols = { "sleep", "pause", "select", "poll", "epoll_wait" },
    asm = { "nanosleep" },
  },
  ["l2-persistence"] = {
    why = "L2 persistence controls outlive the candidate and change other results", backend = "cuda",
    words = { "cudaCtxResetPersistingL2Cache", "cudaLimitPersistingL2CacheSize", "accessPolicyWindow",
              "cudaAccessPropertyPersisting", "cudaStreamAttributeAccessPolicyWindow",
              "cudaStreamSetAttribute", "cuCtxResetPersistingL2Cache", "CU_LIMIT_PERSISTING_L2_CACHE_SIZE",
              "cuStreamSetAttribute", "cudaDeviceSetLimit", "cuCtxSetLimit" },
  },
  ["global-state"] = {
    why = "state kept across calls (mutable globals, static locals) can replay old results",
    words = { "__thread", "_Thread_local", "thread_local" },
    data = true,
  },
  exit = {
    why = "a candidate may not end the process or trap",
    words = { "exit", "_exit", "_Exit", "quick_exit", "abort", "__builtin_trap", "__trap",
              "__brkpt", "raise", "kill", "longjmp", "siglongjmp", "signal", "sigaction", "atexit" },
    asm = { "trap;", "exit;", "brkpt;", "ud2", "int3", "int $3" },
  },
  escape = {
    why = "looking code up at run time or calling the kernel directly hides it from these rules",
    words = { "dlopen", "dlsym", "dlvsym", "syscall", "mprotect", "mmap", "execve", "execv",
              "execvp", "ptrace", "__builtin_frame_address", "__builtin_return_address" },
    asm = { "syscall", "sysenter", "int $0x80" },
  },
  ["inline-asm"] = {
    why = "inline assembly can do anything the other rules forbid",
    words = { "asm", "__asm__", "__asm" },
  },
  -- allow-lists of the PTX (kwb/measure/ptx.lua): the special registers a kernel
  -- may read, and no instruction that stops, pauses or counts
  ["ptx-allow-list"] = {
    why = "a CUDA candidate may read its place in the grid, the grid's shape, lanes, warps, clusters and shared "
          .. "memory sizes and no other special register (no clock, timer, counter or environment register), "
          .. "may not trap, pause or count events, and may not use the device heap (malloc/free: its blocks outlive "
          .. "the call)",
    ptx_allow = true, backend = "cuda",
  },
  -- not a list of what is forbidden but of what is allowed: a host module may
  -- call these and nothing else (the deny rules above come first, for their
  -- messages); a recipe's `allow` adds names
  ["allow-list"] = {
    why = "a host candidate may call libm, the mem* and str* functions and malloc/free, and what the recipe's "
          .. "'allow' adds, nothing else",
    allow = true, backend = "host",
  },
}

M.default = { "other-streams", "sync", "timer", "printf", "sleep", "l2-persistence",
              "global-state", "exit", "escape", "allow-list", "ptx-allow-list" }

-- What a host module may leave undefined: the toolchain's own references, the
-- memory and string functions, the allocator, and libm (with its f and l
-- forms; libmvec's vector forms are _ZGV...).
local allowed = {}
for _, n in ipairs { "_ITM_deregisterTMCloneTable", "_ITM_registerTMCloneTable", "__cxa_finalize", "__gmon_start__",
                     "__stack_chk_fail", "__stack_chk_guard", "memcpy", "memmove", "memset", "memcmp", "memchr",
                     "strlen", "strcmp", "strncmp", "strchr", "__memcpy_chk", "__memmove_chk", "__memset_chk",
                     "malloc", "calloc", "realloc", "free", "aligned_alloc", "posix_memalign", "abs", "labs", "llabs" } do
  allowed[n] = true
end
for _, f in ipairs { "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh",
                     "atanh", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "logb", "pow", "sqrt", "cbrt",
                     "hypot", "fabs", "floor", "ceil", "round", "trunc", "rint", "nearbyint", "lround", "llround",
                     "lrint", "llrint", "fmod", "remainder", "remquo", "fma", "fmin", "fmax", "fdim", "copysign",
                     "frexp", "ldexp", "modf", "scalbn", "scalbln", "ilogb", "erf", "erfc", "tgamma", "lgamma",
                     "nextafter", "nexttoward", "sincos", "nan" } do
  allowed[f], allowed[f .. "f"], allowed[f .. "l"] = true, true, true
end
M.allowed_symbols = allowed

local function is_allowed(sym, extra)
  local name = sym:match("^([^@]+)") or sym
  return allowed[name] or extra[name] or name:match("^_ZGV") ~= nil
end

-- ---- lexing with LPeg ---------------------------------------------------

local nl = P "\n"
local idstart = R("az", "AZ") + P "_"
local idchar = idstart + R "09"
local ident = idstart * idchar ^ 0
local line_comment = P "//" * (P "\\\n" + (1 - nl)) ^ 0
local block_comment = P "/*" * (1 - P "*/") ^ 0 * P "*/" ^ -1
local comment = line_comment + block_comment
local escaped = P "\\" * P(1)
local dq_string = P '"' * (escaped + P "\\\n" + (1 - S '"\n')) ^ 0 * P '"' ^ -1
local sq_string = P "'" * (escaped + (1 - S "'\n")) ^ 0 * P "'" ^ -1
local literal = dq_string + sq_string

local function blank(s) return (s:gsub("[^\n]", " ")) end

-- Number literals: digits, letters, dots and exponent signs (1e-5, 0x1p+3).
local number = (R "09" + P "." * R "09") * (S "eEpP" * S "+-" + idchar + P ".") ^ 0

local stripper = Cs((comment / blank + literal / blank + ident + number + P(1)) ^ 0)
local literals = Ct((comment + Cp() * C(literal) + ident + number + P(1)) ^ 0)

-- strip(src) -> src with comments and string/char literals blanked (newlines kept).
function M.strip(src) return stripper:match(src) end

-- Line number of byte position pos in text.
local function line_of(text, pos)
  local n = 1
  for _ in text:sub(1, pos - 1):gmatch("\n") do n = n + 1 end
  return n
end
M.line_of = line_of

-- string literals of src as { { line =, text = }, ... }
function M.literals(src)
  local caps, out = literals:match(src), {}
  for i = 1, #caps, 2 do out[#out + 1] = { line = line_of(src, caps[i]), text = caps[i + 1] } end
  return out
end

-- identifiers(text) -> { { pos, word }, ... } (numbers skipped)
local idscan = Ct((Ct(Cp() * C(ident)) + number + P(1)) ^ 0)
function M.identifiers(text) return idscan:match(text) end

-- ---- rule sets ----------------------------------------------------------

local function words_pattern(words)
  local sorted = {}
  for _, w in ipairs(words) do sorted[#sorted + 1] = w end
  table.sort(sorted, function(a, b) return #a > #b end)
  local p = P(false)
  for _, w in ipairs(sorted) do p = p + P(w) end
  return p * -idchar
end

local function compile_rule(name, spec)
  local r = { name = name, why = spec.why or ("forbidden by rule '" .. name .. "'"), data = spec.data, allow = spec.allow,
              ptx_allow = spec.ptx_allow, backend = spec.backend,
              words = spec.words or {}, symbols = spec.symbols or {}, asm = spec.asm or {} }
  -- Scan: at every token start try the rule's words; skip whole identifiers
  -- and numbers otherwise, so a word never matches inside a longer name.
  local hit = Cp() * C(spec.pattern or words_pattern(r.words))
  r.scan = Ct((Ct(hit) + ident + number + P(1)) ^ 0)
  r.symbol_set = {}
  for _, w in ipairs(r.words) do r.symbol_set[w] = true end
  for _, w in ipairs(r.symbols) do r.symbol_set[w] = true end
  return r
end

local RuleSet = {}
RuleSet.__index = RuleSet

local function names_list()
  local names = {}
  for n in pairs(M.catalogue) do names[#names + 1] = n end
  table.sort(names)
  return names
end

-- "did you mean 'sleep'?" for a near miss, else the known names.
local function known_hint(word)
  local near = nearest(word, names_list())
  if near then return "did you mean '" .. near .. "'?" end
  return "known: default, " .. table.concat(names_list(), ", ")
end

-- A rule table's fields, each of the kind compile_rule reads: nil, or what is wrong.
local table_fields = { name = "string", why = "string", words = "list", symbols = "list", asm = "list",
                       pattern = "pattern", data = "boolean" }
local function check_table(item)
  for k, v in pairs(item) do
    local kind = table_fields[k]
    if not kind then
      return string.format("unknown field '%s' (known: name, why, words, symbols, asm, pattern, data)", tostring(k))
    end
    if kind == "list" then
      if type(v) ~= "table" or #v == 0 then return k .. " must be a non-empty list of strings" end
      for j, w in ipairs(v) do
        if type(w) ~= "string" or w == "" then return string.format("%s[%d] must be a non-empty string", k, j) end
      end
    elseif kind == "pattern" and lpeg.type(v) ~= "pattern" then return "pattern must be an LPeg pattern"
    elseif kind ~= "list" and kind ~= "pattern" and type(v) ~= kind then return k .. " must be a " .. kind end
  end
end

-- set(spec): spec is a list of rule names, "default", "-name" (drop a rule),
-- and rule tables { name =, words =, symbols =, asm =, pattern = (LPeg), why = }.
-- Raises on an unknown name.
function M.set(spec)
  spec = spec or { "default" }
  if type(spec) ~= "table" then error("forbid must be a list of rule names", 2) end
  local chosen, order = {}, {}
  local function add(name, def)
    if not chosen[name] then order[#order + 1] = name end
    chosen[name] = def
  end
  for i, item in ipairs(spec) do
    if item == "default" then
      for _, n in ipairs(M.default) do add(n, M.catalogue[n]) end
    elseif type(item) == "string" and item:sub(1, 1) == "-" then
      local n = item:sub(2)
      if not M.catalogue[n] and not chosen[n] then
        error(string.format("forbid[%d]: no rule named '%s' to drop (%s)", i, n, known_hint(n)), 2)
      end
      chosen[n] = false
    elseif type(item) == "string" then
      if not M.catalogue[item] then
        error(string.format("forbid[%d]: no rule named '%s' (%s)", i, item, known_hint(item)), 2)
      end
      add(item, M.catalogue[item])
    elseif type(item) == "table" then
      if type(item.name) ~= "string" then error(string.format("forbid[%d]: a rule table needs a name", i), 2) end
      if not (item.words or item.symbols or item.asm or item.pattern) then
        error(string.format("forbid[%d]: rule '%s' needs words, symbols, asm or pattern", i, item.name), 2)
      end
      local why = check_table(item)
      if why then error(string.format("forbid[%d]: rule '%s': %s", i, item.name, why), 2) end
      add(item.name, item)
    else
      error(string.format("forbid[%d]: expected a rule name or a rule table, got %s", i, type(item)), 2)
    end
  end
  local rs = setmetatable({ rules = {}, extra_allowed = {} }, RuleSet)
  for _, n in ipairs(order) do
    if chosen[n] then rs.rules[#rs.rules + 1] = compile_rule(n, chosen[n]) end
  end
  return rs
end

function RuleSet:names()
  local out = {}
  for i, r in ipairs(self.rules) do out[i] = r.name end
  return out
end

local function rejection(r, word, line, view)
  local where = line and ("line " .. line) or "the module"
  return { rule = r.name, word = word, line = line, view = view,
           message = string.format("rule '%s': %s at %s (%s; found in the %s)", r.name, word, where, r.why, view) }
end

-- Text views: lines = nil (line numbers from the text itself) or a map from
-- the text's own line numbers to source line numbers.
local function scan_text(self, text, view, linemap)
  for _, r in ipairs(self.rules) do
    local hits = r.scan:match(text)
    if hits[1] then
      local pos, word = hits[1][1], hits[1][2]
      local line = line_of(text, pos)
      return rejection(r, word, linemap and linemap[line] or line, view)
    end
  end
  return nil
end

local function scan_asm(self, src, view, linemap)
  local lits
  for _, r in ipairs(self.rules) do
    if r.asm[1] then
      lits = lits or M.literals(src)
      for _, lit in ipairs(lits) do
        for _, pat in ipairs(r.asm) do
          if lit.text:find(pat, 1, true) then
            return rejection(r, pat, linemap and linemap[lit.line] or lit.line, view)
          end
        end
      end
    end
  end
  return nil
end

-- check_source(src): the first forbidden word in the stripped source, or in
-- a string literal's assembly text; nil when clean.
function RuleSet:check_source(src)
  return scan_text(self, M.strip(src), "source") or scan_asm(self, src, "source")
end

-- check_preprocessed(pp): pp from M.preprocess ({ text =, lines = map }).
function RuleSet:check_preprocessed(pp)
  return scan_text(self, M.strip(pp.text), "preprocessed source", pp.lines)
      or scan_asm(self, pp.text, "preprocessed source", pp.lines)
end

-- The first source line where word appears as an identifier, or nil.
local function find_line(word, pp)
  for _, id in ipairs(M.identifiers(M.strip(pp.text))) do
    if id[2] == word then return pp.lines[line_of(pp.text, id[1])] end
  end
  return nil
end

-- check_symbols(syms, pp): syms from M.symbols (undefined, data); pp gives
-- lines. Data symbols count when the candidate's own code names them (the
-- toolchain's own objects never appear in its source).
-- allow(names): more symbols a host module may call (a recipe's `allow`).
function RuleSet:allow(names)
  for _, n in ipairs(names) do self.extra_allowed[n] = true end
end

function RuleSet:check_symbols(syms, pp)
  for _, r in ipairs(self.rules) do
    for _, s in ipairs(syms.undefined) do
      if r.symbol_set[s] then return rejection(r, s, find_line(s, pp), "module's undefined symbols") end
    end
    if r.data then   -- the first one in the source
      local first, first_line
      for _, s in ipairs(syms.data) do
        local base = s:match("^([%a_][%w_]*)")
        local line = base and find_line(base, pp)
        if line and (not first_line or line < first_line) then first, first_line = base, line end
      end
      if first then return rejection(r, first, first_line, "module's writable data") end
    end
  end
  for _, r in ipairs(self.rules) do   -- what no deny rule named, the allow-list may still refuse
    if r.allow then   -- the one the source names first
      local first, first_line
      for _, s in ipairs(syms.undefined) do
        if not is_allowed(s, self.extra_allowed) then
          local name = s:match("^([^@]+)") or s
          local line = find_line(name, pp)
          if not first or (line and (not first_line or line < first_line)) then first, first_line = name, line end
        end
      end
      if first then return rejection(r, first, first_line, "module's undefined symbols") end
    end
  end
  return nil
end

-- check_ptx(ptx, source, name): the PTX of a CUDA module: words as
-- identifiers (vprintf, ...), asm patterns over the whole text (%globaltimer,
-- trap;), .global variables it writes (device state kept across launches),
-- and the allow-lists of special registers and instructions (kwb.measure.ptx). Lines
-- come from the .loc directives of the candidate's file, else from where the
-- source names the word.
function RuleSet:check_ptx(ptx, source, name)
  local files, locs, cur = {}, {}, nil
  for id, fname in ptx:gmatch('%.file%s+(%d+)%s+"([^"]*)"') do files[id] = fname end   -- NVRTC puts them last
  for n, l in ptx_read.lines(ptx) do
    local fid, line = l:match("^%s*%.loc%s+(%d+)%s+(%d+)")
    if fid then cur = (files[fid] == name or files[fid] and name and files[fid]:sub(-#name) == name) and tonumber(line) or nil end
    locs[n] = cur
  end
  local src_pp = source and { text = source, lines = setmetatable({}, { __index = function(_, k) return k end }) }
  local function line_for(pos, word)
    local l = locs[line_of(ptx, pos)]
    return l or (src_pp and find_line(word:gsub("^%%", ""), src_pp)) or nil
  end
  for _, r in ipairs(self.rules) do
    local hits = r.scan:match(ptx)
    if hits[1] then   -- prefer a use with a source line (a call) to a declaration
      for _, h in ipairs(hits) do
        local l = locs[line_of(ptx, h[1])]
        if l then return rejection(r, h[2], l, "PTX") end
      end
      return rejection(r, hits[1][2], line_for(hits[1][1], hits[1][2]), "PTX")
    end
    for _, pat in ipairs(r.asm) do
      local pos = ptx:find(pat, 1, true)
      if pos then return rejection(r, pat, line_for(pos, pat), "PTX") end
    end
    if r.data then   -- a .global variable the module writes (one it only reads is not state)
      local var, at = ptx_read.written_global(ptx)
      if var then
        return rejection(r, var, locs[at] or (src_pp and find_line(var, src_pp)) or nil,
                         "PTX (a .global variable it writes, PTX line " .. at .. ")")
      end
    end
    if r.ptx_allow then
      local what, at = ptx_read.special_register(ptx)
      if not what then what, at = ptx_read.refused_instruction(ptx) end
      if what then return rejection(r, what, locs[at], "PTX, line " .. at) end
    end
  end
  return nil
end

-- ---- the toolchain views ------------------------------------------------

-- preprocess(src, { name =, cc =, flags =, defines = }) -> { text = lines of
-- the candidate's own file, lines = { [i] = source line } } or nil, message,
-- { code = "compile-error", log = }. The preprocessor runs with exactly the
-- command the build runs (kwb.host.preprocess), so what the rules read is
-- what the compiler compiles (-fPIC, -O2 and the recipe's flags included).
function M.preprocess(src, opts)
  opts = opts or {}
  local name = opts.name or "candidate.c"
  local out, msg, info = host.preprocess { source = src, name = name, cc = opts.cc,
                                                          flags = opts.flags, defines = opts.defines }
  if not out then return nil, msg, info end
  local keep, lines, cur, mine = {}, {}, 1, false
  for l in out:gmatch("([^\n]*)\n?") do
    local n, file = l:match('^#%s*(%d+)%s+"(.-)"')
    if n then
      cur, mine = tonumber(n), file == name
    else
      if mine then
        keep[#keep + 1] = l
        lines[#keep] = cur
      end
      cur = cur + 1
    end
  end
  return { text = table.concat(keep, "\n"), lines = lines }
end

-- Writable objects the toolchain itself puts into every shared object.
local toolchain_data = { ["completed.0"] = true, completed = true, __dso_handle = true, __TMC_END__ = true,
  _DYNAMIC = true, _GLOBAL_OFFSET_TABLE_ = true, __bss_start = true, _edata = true, _end = true,
  __do_global_dtors_aux_fini_array_entry = true, __frame_dummy_init_array_entry = true }

-- symbols(path) -> { undefined = { names }, data = { names } } or nil,
-- message: the built object's symbols (kwb.host.symbols), less the writable
-- objects the toolchain itself puts into every shared object.
function M.symbols(path)
  local syms, msg = host.symbols(path)
  if not syms then return nil, msg end
  local data = {}
  for _, name in ipairs(syms.data) do
    if not toolchain_data[name] then data[#data + 1] = name end
  end
  return { undefined = syms.undefined, data = data }
end

-- forbid(res, hit): a result's outcome from a rule's hit.
function M.forbid(res, hit)
  res.outcome, res.reason, res.rule, res.line = "forbidden", hit.message, hit.rule, hit.line
end

return M
