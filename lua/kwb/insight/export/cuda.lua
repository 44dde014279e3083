-- kwb/insight/export/cuda.lua: the CUDA side of `kwb export`
-- (kwb.insight.export): each chosen kernel built again with NVRTC as the
-- judge built it (kwb.measure.backends.cuda's compile), its code checked
-- against the digest of the build kwb measured, its cubin embedded in
-- dispatch.c with a loader through the driver API (linked with -lcuda) and
-- the launch geometry of each measured shape.
local backend = require "kwb.measure.backends.cuda"

local M = {}

-- arch(recipe, device) -> the arch kwb built for: the recipe's, else the one
-- the device kind names (kwb.cuda.device_kind: "... sm_90 ...").
function M.arch(recipe, device)
  if recipe.arch then return recipe.arch end
  local a = device:match("sm_%d+%a?")
  if not a then
    error(string.format("recipe %s: no arch to build the kernels for (the recipe sets no 'arch' and the device kind "
                        .. "'%s' names none)", recipe.name, device), 0)
  end
  return a
end

-- build(ex, k, measured) -> the cubin and its code digest: k built as the
-- judge built it; measured: the digest the cache holds of that build, which
-- the new one must equal (the code shipped is the code measured).
function M.build(ex, k, measured)
  local mod, msg, info = require("kwb.cuda").compile { source = k.source, name = k.source_name, defines = k.params,
                                                       flags = ex.recipe.flags, arch = ex.arch }
  if not mod then
    error(string.format("kernel %s does not build here for %s: %s\n%s", k.name, ex.arch, tostring(msg),
                        info and info.log or ""), 0)
  end
  local cubin = mod:cubin()
  local code = backend.code_digest(mod, { params = k.params })
  if not code then error(string.format("kernel %s: NVRTC gave no cubin for %s", k.name, ex.arch), 0) end
  if not measured then
    error(string.format("kernel %s: the cache holds no digest of the build kwb measured on %s, so the cubin built "
                        .. "now cannot be shown to be that code (run the recipe again)", k.name, ex.device), 0)
  end
  if measured ~= code then
    error(string.format("kernel %s: the cubin built now for %s is not the code kwb measured (code digest %s, "
                        .. "measured %s: another NVRTC or arch?)", k.name, ex.arch, code:sub(1, 16),
                        measured:sub(1, 16)), 0)
  end
  return cubin, code
end

-- dims(v) -> { x, y, z }: a grid or block as the launch plan gives it (a
-- number or 1 to 3 of them), each a positive integer.
local function dims(v, what, where)
  if math.type(v) == "integer" then v = { v } end
  local ok = type(v) == "table" and #v >= 1 and #v <= 3
  for i = 1, ok and #v or 0 do
    ok = ok and math.type(v[i]) == "integer" and v[i] >= 1 and v[i] < (1 << 31)
  end
  if not ok then
    error(string.format("%s: %s must be 1 to 3 positive integers, got %s", where, what,
                        type(v) == "table" and require("cjson").encode(v) or tostring(v)), 0)
  end
  return { v[1], v[2] or 1, v[3] or 1 }
end

-- geometry(ex, ch, params) -> { grid, block, smem }: the recipe's launch
-- plan (or the problem's) at a measured shape with the kernel's parameters.
function M.geometry(ex, ch, params)
  local launch = ex.recipe.launch or ex.problem.launch
  local where = string.format("recipe %s: the launch plan at %s", ex.recipe.name, ch.key)
  if not launch then error(string.format("recipe %s: the cuda backend needs a launch plan (recipe or problem "
                                         .. "'launch')", ex.recipe.name), 0) end
  local ok, l = pcall(launch, ch.shape, params or {})
  if not ok then error(where .. ": " .. tostring(l), 0) end
  if type(l) ~= "table" then error(where .. " must return a table, got " .. type(l), 0) end
  if l.steps then
    error(where .. " has steps (several kernels); kwb export writes a loader for one-kernel plans only", 0)
  end
  local smem = l.smem or 0
  if math.type(smem) ~= "integer" or smem < 0 then error(where .. ": smem must be a whole number of bytes, got "
                                                         .. tostring(l.smem), 0) end
  return { grid = dims(l.grid, "grid", where), block = dims(l.block, "block", where), smem = smem }
end

-- The cubin as a C array's initialiser, 16 bytes a line.
local function bytes_text(s)
  local lines = {}
  for i = 1, #s, 16 do
    local b = {}
    for j = i, math.min(i + 15, #s) do b[#b + 1] = string.format("0x%02x", s:byte(j)) end
    lines[#lines + 1] = "    " .. table.concat(b, ",") .. ","
  end
  return table.concat(lines, "\n")
end

-- dispatch.c (CUDA): the cubins, the loader and the dispatcher.
function M.dispatch(ex)
  local c = require "kwb.insight.export.c"
  local p = ex.problem
  local L = {
    string.format("/* dispatch.c: made by kwb export from recipe %s (problem %s) on %s.", ex.recipe.name, p:key(),
                  ex.device),
    string.format(" * %s(shape..., args..., stream) launches the kernel chosen for a measured shape on the", ex.name),
    " * caller's stream with that shape's launch geometry (the recipe's launch rule evaluated by kwb at",
    " * each measured shape) and returns the launch's CUresult; at a shape kwb did not measure it launches",
    " * nothing and returns CUDA_ERROR_INVALID_VALUE. Each kernel's cubin (built with NVRTC for " .. ex.arch .. ",",
    " * the code kwb measured) is embedded below; its module is loaded at the kernel's first launch,",
    " * once, into the context current then, through the driver API (link with -lcuda -lpthread). */",
    "#include <pthread.h>",
    "#include <stddef.h>",
    "#include \"dispatch.h\"",
    "",
  }
  for i, k in ipairs(ex.kernels) do
    L[#L + 1] = string.format("/* kernels/%s.cu, candidate %s: its cubin (kernels/%s.cubin, SHA-256 %s) */",
                              k.name, k.id, k.name, k.cubin_sha256)
    L[#L + 1] = string.format("static const unsigned char cubin_%d[%d] = {", i - 1, #k.cubin)
    L[#L + 1] = bytes_text(k.cubin)
    L[#L + 1] = "};"
    L[#L + 1] = ""
  end
  if ex.fallback then
    local proto = p:prototype(ex.fallback):gsub("^void ", "CUresult "):gsub("%)$", ", CUstream stream)")
    L[#L + 1] = proto .. ";   /* the fallback: the caller's own */"
    L[#L + 1] = ""
  end
  L[#L + 1] = string.format("static struct kernel { const unsigned char *image; CUmodule module; CUfunction fn; "
                            .. "unsigned smem; } kernels[%d] = {", math.max(#ex.kernels, 1))
  for i = 1, #ex.kernels do L[#L + 1] = string.format("    {cubin_%d, NULL, NULL, 0},", i - 1) end
  if #ex.kernels == 0 then L[#L + 1] = "    {NULL, NULL, NULL, 0}," end
  L[#L + 1] = "};"
  L[#L + 1] = "static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;"
  L[#L + 1] = ""
  L[#L + 1] = "/* The kernel's function, its module loaded at the first call; dynamic shared memory over 48 KiB"
  L[#L + 1] = " * allowed once a launch asks for it. */"
  L[#L + 1] = "static CUresult function_of(struct kernel *k, unsigned smem, CUfunction *fn) {"
  L[#L + 1] = "    CUresult rc = CUDA_SUCCESS;"
  L[#L + 1] = "    pthread_mutex_lock(&lock);"
  L[#L + 1] = "    if (!k->fn) {"
  L[#L + 1] = "        CUmodule m = NULL;"
  L[#L + 1] = "        rc = cuModuleLoadData(&m, k->image);"
  L[#L + 1] = string.format("        if (rc == CUDA_SUCCESS) rc = cuModuleGetFunction(&k->fn, m, \"%s\");", p.fn)
  L[#L + 1] = "        if (rc == CUDA_SUCCESS) k->module = m;"
  L[#L + 1] = "        else if (m) { cuModuleUnload(m); k->fn = NULL; }"
  L[#L + 1] = "    }"
  L[#L + 1] = "    if (rc == CUDA_SUCCESS && smem > 48 * 1024 && k->smem < smem) {"
  L[#L + 1] = "        rc = cuFuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem);"
  L[#L + 1] = "        if (rc == CUDA_SUCCESS) k->smem = smem;"
  L[#L + 1] = "    }"
  L[#L + 1] = "    *fn = k->fn;"
  L[#L + 1] = "    pthread_mutex_unlock(&lock);"
  L[#L + 1] = "    return rc;"
  L[#L + 1] = "}"
  L[#L + 1] = ""
  L[#L + 1] = "/* the measured shapes: the kernel (-1: the fallback) and its launch geometry */"
  L[#L + 1] = string.format("static const struct { long long v[%d]; int kernel; unsigned grid[3], block[3], smem; } "
                            .. "shapes[%d] = {", #ex.vars, #ex.choices)
  for _, ch in ipairs(ex.choices) do
    local vs = {}
    for j, v in ipairs(ex.vars) do vs[j] = string.format("%dll", ch.shape[v]) end
    local g = ch.geometry or { grid = { 0, 0, 0 }, block = { 0, 0, 0 }, smem = 0 }
    L[#L + 1] = string.format("    {{%s}, %d, {%d, %d, %d}, {%d, %d, %d}, %d},   /* %s: %s */", table.concat(vs, ", "),
                              ch.index and ch.index - 1 or -1, g.grid[1], g.grid[2], g.grid[3], g.block[1], g.block[2],
                              g.block[3], g.smem, ch.key, ch.name)
  end
  L[#L + 1] = "};"
  L[#L + 1] = ""
  L[#L + 1] = string.format("CUresult %s(%s) {", ex.name, c.params(ex, "CUstream stream"))
  local same = {}
  for j, n in ipairs(ex.shape_names) do same[j] = string.format("shapes[i].v[%d] == %s", j - 1, n) end
  L[#L + 1] = "    int s = -1;"
  L[#L + 1] = string.format("    for (int i = 0; i < %d && s < 0; i++) if (%s) s = i;", #ex.choices,
                            table.concat(same, " && "))
  L[#L + 1] = "    if (s < 0) return CUDA_ERROR_INVALID_VALUE;"
  if ex.fallback then
    L[#L + 1] = string.format("    if (shapes[s].kernel < 0) return %s(%s, stream);", ex.fallback, c.arg_names(p))
  end
  L[#L + 1] = "    CUfunction fn;"
  L[#L + 1] = "    CUresult rc = function_of(&kernels[shapes[s].kernel], shapes[s].smem, &fn);"
  L[#L + 1] = "    if (rc != CUDA_SUCCESS) return rc;"
  local ptrs = {}
  for i, a in ipairs(p.args) do ptrs[i] = "&" .. a.name end
  L[#L + 1] = string.format("    void *params[%d] = {%s};", #ptrs, table.concat(ptrs, ", "))
  L[#L + 1] = "    return cuLaunchKernel(fn, shapes[s].grid[0], shapes[s].grid[1], shapes[s].grid[2], shapes[s].block[0],"
  L[#L + 1] = "                          shapes[s].block[1], shapes[s].block[2], shapes[s].smem, stream, params, NULL);"
  L[#L + 1] = "}"
  return table.concat(L, "\n") .. "\n"
end

return M
