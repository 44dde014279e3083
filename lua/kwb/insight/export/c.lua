-- kwb/insight/export/c.lua: the C text of `kwb export` (kwb.insight.export):
-- names, the selection in dispatch.h, the host kernels' files, the host
-- dispatcher, the Makefile and README.txt.
--
-- How the kernels link (the host backend): every candidate exports the
-- problem's entry point (vecadd), so each kernel file renames it with a
-- macro before its source (`#define vecadd R_3f2a9c1b`: the source stays as
-- kwb measured it) and is built as a translation unit of its own whose other
-- global symbols are then made local (objcopy --keep-global-symbol, as if
-- they were static): two kernels that both define a helper of one name link
-- together, and the Makefile checks with nm that each kernel object defines
-- exactly one global symbol, its entry point's new name.
local core = require "kwb.core"
local problem_mod = require "kwb.problem"
local host = require "kwb.host"

local M = {}

-- write(path, text): a file of the export (a path that is there must be a
-- regular file: never a device or a FIFO; core.output_file)
function M.write(path, text)
  local ok, why = core.output_file(path)
  if not ok then error(why, 0) end
  local f, err = io.open(path, "w")
  if not f then error("cannot write " .. path .. ": " .. tostring(err), 0) end
  f:write(text)
  f:close()
end

-- cident(s) -> s with every character no C identifier has as "_".
function M.cident(s) return (s:gsub("[^%w_]", "_")) end

local keywords = {}
for w in ([[auto break case char const continue default do double else enum extern float for goto if inline int
  long register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
  _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert _Thread_local]]):gmatch("%S+") do
  keywords[w] = true
end

-- dispatcher(recipe) -> the dispatcher's C name: the recipe's name as an
-- identifier, after "kwb_" where it would begin with a digit or be a keyword.
function M.dispatcher(recipe)
  local n = M.cident(recipe.name)
  if n:match("^%d") or keywords[n] then n = "kwb_" .. n end
  return n
end

function M.is_identifier(s) return type(s) == "string" and s:match("^[%a_][%w_]*$") ~= nil and not keywords[s] end

local buffer_ctype = { f32 = "float", f64 = "double", f16 = "uint16_t", bf16 = "uint16_t", i8 = "int8_t",
                       i32 = "int32_t", i64 = "int64_t", u8 = "uint8_t", u32 = "uint32_t", u64 = "uint64_t" }
M.buffer_ctype = buffer_ctype

-- The C type of an argument ("int", "const float *") and its declaration.
function M.arg_type(a)
  if a.kind == "scalar" then return problem_mod.scalar_ctype[a.dtype] end
  return (a.role == "in" and "const " or "") .. buffer_ctype[a.dtype] .. " *"
end
local function decl(a, name)
  local t = M.arg_type(a)
  return t .. (t:sub(-1) == "*" and "" or " ") .. name
end

-- params(ex [, extra]) -> the dispatcher's parameter list: "long long
-- shape_n" for each shape variable, then the problem's arguments in its order
-- (then extra, the CUDA stream).
function M.params(ex, extra)
  local parts = {}
  for i, v in ipairs(ex.vars) do parts[#parts + 1] = "long long " .. ex.shape_names[i] end
  for _, a in ipairs(ex.problem.args) do parts[#parts + 1] = decl(a, a.name) end
  if extra then parts[#parts + 1] = extra end
  return table.concat(parts, ", ")
end

-- The problem's arguments as a call passes them on: "n, a, b, c".
function M.arg_names(problem)
  local names = {}
  for i, a in ipairs(problem.args) do names[i] = a.name end
  return table.concat(names, ", ")
end

-- shape_names(problem) -> "shape_" .. each variable, unless an argument has
-- that name (then more underscores): the dispatcher's parameters are distinct.
function M.shape_names(problem)
  local taken = {}
  for _, a in ipairs(problem.args) do taken[a.name] = true end
  local out = {}
  for i, v in ipairs(problem.vars) do
    local n = "shape_" .. v
    while taken[n] do n = "_" .. n end
    out[i] = n
  end
  return out
end

-- The selection functions in dispatch.h: kwb_pick_R(vars) -> the index of the
-- measured shape whose kernel runs, kwb_dispatch_R(vars) -> that kernel's name.
local function selection(ex)
  local id, vars, rule = ex.ident, ex.vars, ex.rule
  local params, args = {}, {}
  for i, v in ipairs(vars) do params[i], args[i] = "long long " .. M.cident(v), M.cident(v) end
  local L = {}
  L[#L + 1] = string.format("static inline int kwb_pick_%s(%s) {", id, table.concat(params, ", "))
  L[#L + 1] = string.format("    static const long long shapes[%d][%d] = {", #ex.choices, #vars)
  for _, ch in ipairs(ex.choices) do
    local vs = {}
    for j, v in ipairs(vars) do vs[j] = string.format("%d", math.tointeger(ch.shape[v]) or 0) end
    L[#L + 1] = string.format("        {%s},   /* %s */", table.concat(vs, ", "), ch.key)
  end
  L[#L + 1] = "    };"
  L[#L + 1] = string.format("    const long long x[%d] = {%s};", #vars, table.concat(args, ", "))
  L[#L + 1] = "    int best = 0;"
  if rule == "larger" then
    L[#L + 1] = "    double least = -1, most = -1;"
    L[#L + 1] = string.format("    for (int i = 0; i < %d; i++) {", #ex.choices)
    L[#L + 1] = "        double size = 1;"
    L[#L + 1] = "        int fits = 1;"
    L[#L + 1] = string.format("        for (int j = 0; j < %d; j++) { size *= (double)shapes[i][j] + 1; if (shapes[i][j] < x[j]) fits = 0; }", #vars)
    L[#L + 1] = "        if (fits && (least < 0 || size < least)) { least = size; best = i; }"
    L[#L + 1] = "        if (least < 0 && size > most) { most = size; best = i; }"
    L[#L + 1] = "    }"
  else
    L[#L + 1] = "    double least = -1;"
    L[#L + 1] = string.format("    for (int i = 0; i < %d; i++) {", #ex.choices)
    L[#L + 1] = "        double d = 0;"
    L[#L + 1] = string.format("        for (int j = 0; j < %d; j++) d += fabs(log((double)shapes[i][j] + 1) - log((double)x[j] + 1));", #vars)
    L[#L + 1] = "        if (least < 0 || d < least) { least = d; best = i; }"
    L[#L + 1] = "    }"
  end
  L[#L + 1] = "    return best;"
  L[#L + 1] = "}"
  L[#L + 1] = ""
  local names = {}
  for i, ch in ipairs(ex.choices) do names[i] = string.format("\"%s\"", ch.name) end
  L[#L + 1] = string.format("static inline const char *kwb_dispatch_%s(%s) {", id, table.concat(params, ", "))
  L[#L + 1] = string.format("    static const char *const kernels[%d] = {%s};", #names, table.concat(names, ", "))
  L[#L + 1] = string.format("    return kernels[kwb_pick_%s(%s)];", id, table.concat(args, ", "))
  L[#L + 1] = "}"
  return table.concat(L, "\n")
end

-- dispatch.h: the selection and the dispatcher's prototype.
function M.header(ex)
  local guard = "KWB_DISPATCH_" .. ex.ident:upper() .. "_H"
  local cuda = ex.backend == "cuda"
  local between = ex.rule == "larger" and "next larger" or "nearest"
  local L = {
    string.format("/* dispatch.h: made by kwb export from recipe %s (problem %s) on %s.", ex.recipe.name,
                  ex.problem:key(), ex.device),
    " *",
    string.format(" * %s(%s)", ex.name, M.params(ex, cuda and "CUstream stream" or nil)),
  }
  if cuda then
    L[#L + 1] = " *   launches, on the caller's stream, the kernel kwb measured fastest at that shape (buffers are"
    L[#L + 1] = " *   device pointers) and returns the launch's CUresult. Only the measured shapes below have their"
    L[#L + 1] = " *   launch geometry here (the recipe's launch rule is Lua, evaluated by kwb at those shapes): at"
    L[#L + 1] = " *   any other shape it launches nothing and returns CUDA_ERROR_INVALID_VALUE."
  else
    L[#L + 1] = string.format(" *   runs the kernel kwb measured fastest at that shape; between the measured shapes the %s", between)
    L[#L + 1] = " *   one's (dispatch.json has the times)."
  end
  L[#L + 1] = string.format(" * kwb_dispatch_%s(%s) -> the name of the kernel for that shape (the %s measured one).",
                            ex.ident, table.concat(ex.vars, ", "), between)
  L[#L + 1] = " * Build with `make` (README.txt): lib" .. ex.ident .. ".a holds the dispatcher and the kernels. */"
  L[#L + 1] = "#ifndef " .. guard
  L[#L + 1] = "#define " .. guard
  L[#L + 1] = "#include <math.h>"
  L[#L + 1] = "#include <stdint.h>"
  if cuda then L[#L + 1] = "#include <cuda.h>" end
  L[#L + 1] = ""
  L[#L + 1] = selection(ex)
  L[#L + 1] = ""
  L[#L + 1] = string.format("%s %s(%s);", cuda and "CUresult" or "void", ex.name, M.params(ex, cuda and "CUstream stream" or nil))
  L[#L + 1] = "#endif"
  return table.concat(L, "\n") .. "\n"
end

-- dispatch_test.c: prints the kernel dispatch.h picks for each shape given.
function M.test_program(ex)
  local reads = {}
  for j = 1, #ex.vars do reads[j] = string.format("atoll(argv[i + %d])", j - 1) end
  return table.concat({
    "/* dispatch_test.c: prints the kernel dispatch.h picks for each shape given as",
    string.format(" * %d numbers (%s) on the command line. */", #ex.vars, table.concat(ex.vars, ", ")),
    "#include <stdio.h>",
    "#include <stdlib.h>",
    "#include \"dispatch.h\"",
    "",
    "int main(int argc, char **argv) {",
    string.format("    for (int i = 1; i + %d <= argc; i += %d) printf(\"%%s\\n\", kwb_dispatch_%s(%s));", #ex.vars,
                  #ex.vars, ex.ident, table.concat(reads, ", ")),
    "    return 0;",
    "}",
  }, "\n") .. "\n"
end

-- defines(params) -> the parameters as the build passed them (-DK=V, -DK for
-- true, none for false: kwb.host.define_list), as #define lines.
function M.defines(params)
  local lines = {}
  for _, d in ipairs(host.define_list(params)) do
    local k, v = d:match("^([^=]+)=(.*)$")
    lines[#lines + 1] = k and string.format("#define %s %s", k, v) or string.format("#define %s 1", d)
  end
  return lines
end

-- A host kernel's file: its parameters, its entry point renamed, its source.
function M.host_kernel(ex, k)
  local L = {
    string.format("/* kernels/%s.c: made by kwb export from recipe %s (problem %s): candidate", k.name, ex.recipe.name,
                  ex.problem:key()),
    " * " .. k.id .. ".",
    " * The source below is the one kwb measured, unchanged. Before it: its parameters as the build defined",
    string.format(" * them, and its entry point %s renamed %s by a macro. Build it as a translation", ex.problem.fn,
                  k.symbol),
    string.format(" * unit of its own and keep only %s global (the Makefile: cc -c, then objcopy", k.symbol),
    string.format(" * --keep-global-symbol=%s): whatever else it defines is then local to it, as if", k.symbol),
    " * static, so kernels that define functions of one name link into one program. */",
  }
  for _, l in ipairs(M.defines(k.params)) do L[#L + 1] = l end
  L[#L + 1] = string.format("#define %s %s", ex.problem.fn, k.symbol)
  L[#L + 1] = k.source
  return table.concat(L, "\n")
end

-- reference.c: the problem's C reference, its entry point renamed likewise.
function M.reference(ex)
  local r = ex.problem.reference
  return table.concat({
    string.format("/* reference.c: the C reference of problem %s, made by kwb export from recipe %s: its",
                  ex.problem:key(), ex.recipe.name),
    string.format(" * source unchanged, its entry point %s renamed %s (a macro), built as the kernels are", r.fn,
                  ex.reference_symbol),
    " * (only that symbol global). dispatch_check.c compares the dispatcher with it. */",
    string.format("#define %s %s", r.fn, ex.reference_symbol),
    ex.reference_source,
  }, "\n")
end

-- The kernels' declarations as dispatch.c and dispatch_check.c see them.
function M.declare(problem, symbol) return problem:prototype(symbol) .. ";" end
local declare = M.declare

-- dispatch.c (host): the dispatcher, a call through a table of the kernels
-- indexed by the measured shape the selection picks.
function M.host_dispatch(ex)
  local L = {
    string.format("/* dispatch.c: made by kwb export from recipe %s (problem %s) on %s.", ex.recipe.name,
                  ex.problem:key(), ex.device),
    string.format(" * %s(shape..., args...) calls the kernel chosen for the shape (kwb_pick_%s in", ex.name, ex.ident),
    " * dispatch.h) with the problem's arguments. */",
    "#include \"dispatch.h\"",
    "",
  }
  local seen = {}
  for _, k in ipairs(ex.kernels) do
    L[#L + 1] = declare(ex.problem, k.symbol) .. string.format("   /* kernels/%s.c */", k.name)
    seen[k.symbol] = true
  end
  if ex.fallback then
    L[#L + 1] = declare(ex.problem, ex.fallback) .. "   /* the fallback: the caller's own */"
  end
  L[#L + 1] = ""
  local fns = {}
  for i, ch in ipairs(ex.choices) do fns[i] = ch.symbol end
  L[#L + 1] = string.format("%s %s(%s) {", "void", ex.name, M.params(ex))
  L[#L + 1] = "    " .. ex.problem:prototype(string.format("(*const kernels[%d])", #fns)):gsub("^void ", "static void ")
    .. " = {"
  for i, f in ipairs(fns) do
    L[#L + 1] = string.format("        %s,   /* %s */", f, ex.choices[i].key)
  end
  L[#L + 1] = "    };"
  L[#L + 1] = string.format("    kernels[kwb_pick_%s(%s)](%s);", ex.ident, table.concat(ex.shape_names, ", "),
                            M.arg_names(ex.problem))
  L[#L + 1] = "}"
  return table.concat(L, "\n") .. "\n"
end

-- Make's text of a list of flags.
local function flags_text(list)
  local out = {}
  for i, f in ipairs(list or {}) do out[i] = f:match("^[%w_%-%+=%./,:]+$") and f or ("'" .. f:gsub("'", "'\\''") .. "'") end
  return table.concat(out, " ")
end

-- One object's rule: built on its own, only `symbol` kept global, and nm's
-- word that it is the one global symbol the object defines.
local function local_object(obj, src, cc, flags, symbol)
  return table.concat({
    string.format("%s: %s", obj, src),
    string.format("\t%s %s -c -o $@ %s", cc, flags, src),
    string.format("\t$(OBJCOPY) --keep-global-symbol=%s $@", symbol),
    string.format("\t@test \"$$($(NM) -g --defined-only $@ | awk '{print $$3}')\" = %s \\", symbol),
    string.format("\t  || { echo '%s: expected %s as its only global symbol'; $(NM) -g --defined-only $@; rm -f $@; exit 1; }",
                  obj, symbol),
  }, "\n")
end

-- The Makefile: lib<R>.a (the dispatcher and every kernel), dispatch_check
-- and `make check`, or a check target that says why there is none.
function M.makefile(ex)
  local cuda = ex.backend == "cuda"
  local lib = "lib" .. ex.ident .. ".a"
  local L = {
    string.format("# Makefile: made by kwb export from recipe %s (problem %s) on %s.", ex.recipe.name, ex.problem:key(),
                  ex.device),
    string.format("#   make          %s: the dispatcher %s and its kernels (link it: cc app.c -I. %s%s)", lib,
                  ex.name, lib, cuda and " -lcuda -lpthread" or " -lm"),
    "#   make check    builds dispatch_check and runs it (every measured shape against the reference)",
    cuda and "# The kernels' cubins, the code kwb measured, are embedded in dispatch.c."
      or "# The kernels are built as kwb measured them (its compiler and flags: KERNEL_CC, KERNEL_FLAGS).",
    "CC ?= cc",
    "CFLAGS ?= -O2",
    "OBJCOPY ?= objcopy",
    "NM ?= nm",
  }
  local objs = { "dispatch.o" }
  if cuda then
    L[#L + 1] = "CUDA_HOME ?= /usr/local/cuda"
    L[#L + 1] = "CUDA_CFLAGS = -I$(CUDA_HOME)/include"
    L[#L + 1] = "# libcuda.so.1 comes with the driver; the toolkit's stub is enough to link against"
    L[#L + 1] = "CUDA_LIBS = -L$(CUDA_HOME)/lib64/stubs -lcuda -lpthread"
  else
    L[#L + 1] = "KERNEL_CC = " .. ex.toolchain
    L[#L + 1] = "KERNEL_FLAGS = -std=c11 -O2 -fPIC " .. flags_text(ex.recipe.flags)
    for _, k in ipairs(ex.kernels) do objs[#objs + 1] = "kernels/" .. k.name .. ".o" end
  end
  if ex.fallback then
    L[#L + 1] = string.format("# the fallback %s is the caller's: name what defines it (objects, libraries)", ex.fallback)
    L[#L + 1] = "FALLBACK_OBJS ="
  end
  L[#L + 1] = ""
  L[#L + 1] = ".PHONY: all check clean"
  L[#L + 1] = "all: " .. lib
  L[#L + 1] = ""
  L[#L + 1] = string.format("%s: %s", lib, table.concat(objs, " "))
  L[#L + 1] = "\trm -f $@ && ar rcs $@ " .. table.concat(objs, " ")
  L[#L + 1] = ""
  L[#L + 1] = string.format("dispatch.o: dispatch.c dispatch.h\n\t$(CC) -std=c11 $(CFLAGS)%s -c -o $@ dispatch.c",
                            cuda and " $(CUDA_CFLAGS)" or "")
  if not cuda then
    for _, k in ipairs(ex.kernels) do
      L[#L + 1] = ""
      L[#L + 1] = local_object("kernels/" .. k.name .. ".o", "kernels/" .. k.name .. ".c", "$(KERNEL_CC)",
                               "$(KERNEL_FLAGS)", k.symbol)
    end
  end
  L[#L + 1] = ""
  if ex.check then
    local rflags = ex.problem.reference.flags or { "-O2" }
    L[#L + 1] = "REFERENCE_FLAGS = -std=c11 -O2 -fPIC " .. flags_text(rflags)
    L[#L + 1] = local_object("reference.o", "reference.c", "$(CC)", "$(REFERENCE_FLAGS)", ex.reference_symbol)
    L[#L + 1] = ""
    L[#L + 1] = string.format("dispatch_check: dispatch_check.c dispatch.h reference.o %s%s", lib,
                              ex.fallback and " $(FALLBACK_OBJS)" or "")
    L[#L + 1] = string.format("\t$(CC) -std=c11 $(CFLAGS)%s -o $@ dispatch_check.c reference.o %s%s %s-lm",
                              cuda and " $(CUDA_CFLAGS)" or "", lib, ex.fallback and " $(FALLBACK_OBJS)" or "",
                              cuda and "$(CUDA_LIBS) " or "")
    L[#L + 1] = ""
    L[#L + 1] = "check: dispatch_check\n\t./dispatch_check"
  else
    L[#L + 1] = "check:\n\t@echo 'no check program: " .. ex.no_check:gsub("'", "") .. "'; exit 1"
  end
  L[#L + 1] = ""
  L[#L + 1] = "clean:\n\trm -f " .. lib .. " dispatch.o reference.o dispatch_check kernels/*.o"
  return table.concat(L, "\n") .. "\n"
end

-- README.txt: what is in DIR and how to build, link and check it.
function M.readme(ex)
  local cuda = ex.backend == "cuda"
  local L = {
    string.format("kwb export of recipe %s (problem %s) on %s", ex.recipe.name, ex.problem:key(), ex.device),
    "",
    "  make -C DIR           builds lib" .. ex.ident .. ".a: the dispatcher and every kernel",
    "  make -C DIR check     builds dispatch_check and runs it",
    "",
    string.format("Call %s(%s)", ex.name, M.params(ex, cuda and "CUstream stream" or nil)),
    "(dispatch.h). It takes the shape's variables first, then the problem's arguments in its order.",
  }
  if cuda then
    L[#L + 1] = "It launches the chosen kernel on the stream given and returns the launch's CUresult. The kernels'"
    L[#L + 1] = "cubins (built by kwb with NVRTC for " .. ex.arch .. ", the code kwb measured: dispatch.json has their"
    L[#L + 1] = "digests) are embedded in dispatch.c; each is loaded once, at its first launch, into the context"
    L[#L + 1] = "current then (the primary context for a program using the runtime API), through the driver API"
    L[#L + 1] = "(link with -lcuda -lpthread). Only the measured shapes have their launch geometry (the recipe's"
    L[#L + 1] = "launch rule is Lua): at another shape it returns CUDA_ERROR_INVALID_VALUE."
  else
    L[#L + 1] = "Link lib" .. ex.ident .. ".a (and -lm). Each kernel in kernels/ is the source kwb measured, its entry"
    L[#L + 1] = "point renamed by a macro; the Makefile builds each as a translation unit of its own and keeps only"
    L[#L + 1] = "that name global (objcopy), so kernels that define functions of one name link together."
  end
  if ex.fallback then
    L[#L + 1] = string.format("At the shapes where no kernel beat the fallback it calls %s, which is yours:", ex.fallback)
    L[#L + 1] = "link what defines it (make check FALLBACK_OBJS=...)."
  end
  L[#L + 1] = ""
  if ex.check then
    L[#L + 1] = "dispatch_check fills each measured shape's inputs from a fixed seed, runs the dispatcher and the"
    L[#L + 1] = "problem's C reference (reference.c) on them, compares every output with the problem's tolerance"
    L[#L + 1] = "and prints a line per shape; it exits 1 where any output differs."
  else
    L[#L + 1] = "No check program: " .. ex.no_check
  end
  return table.concat(L, "\n") .. "\n"
end

return M
