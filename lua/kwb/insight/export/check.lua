-- kwb/insight/export/check.lua: dispatch_check.c, the program `make check`
-- runs (kwb.insight.export): it links the dispatcher with every kernel and
-- the problem's C reference, and at each measured shape fills the inputs
-- from a fixed seed, runs both on them and compares every output with the
-- problem's tolerance, as kwb's verification does (kwb.measure.verify):
-- elementwise |out - ref| <= atol + rtol |ref|, or the relative L2 error of
-- the whole output where the problem sets rel_l2; NaN, Inf and elements
-- never written (the outputs start as NaN patterns) fail either way; an
-- input the kernel changed fails too. One line per shape; exit 1 where any
-- differs, 2 where it could not run.
--
-- The inputs are drawn as kwb draws them (uniform, normal, value; the
-- dtype's rounding and clamping) from a fixed seed, not from kwb's secret
-- streams: this program shows that the exported kernels link and compute
-- the problem, it does not judge them.
local c = require "kwb.insight.export.c"

local M = {}

local dtypes = { "f32", "f64", "f16", "bf16", "i8", "i32", "i64", "u8", "u32", "u64" }
local dtype_enum = {}
for i, d in ipairs(dtypes) do dtype_enum[d] = string.upper(d) end

-- why_not(problem) -> nil where a check program can be written, else the
-- sentence saying why not.
function M.why_not(problem)
  local r = problem.reference
  if r.lua then
    return string.format("the reference of problem %s is a Lua function, which a C program cannot call", problem.name)
  end
  if not r.source and not r.file then
    return string.format("problem %s has no C reference (only reference.cuda)", problem.name)
  end
  for _, a in ipairs(problem.buffers) do
    if a.role ~= "out" and type(a.init) ~= "table" then
      return string.format("input '%s' of problem %s is filled by a Lua function (its init), which a C program "
                           .. "cannot draw", a.name, problem.name)
    end
  end
  return nil
end

-- The shared part: dtypes, the generator, the comparison.
local common = [[
enum dtype { F32, F64, F16, BF16, I8, I32, I64, U8, U32, U64 };
static const size_t dtype_size[] = {4, 8, 2, 2, 1, 4, 8, 1, 4, 8};
enum role { IN, OUT, INOUT };
enum init { NONE, NORMAL, UNIFORM, VALUE };

static uint16_t f16_of(float f) {   /* round to nearest even */
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
    if (e == 0xff) return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0));
    int ee = (int)e - 127 + 15;
    if (ee >= 31) return (uint16_t)(sign | 0x7c00u);
    if (ee <= 0) {
        if (ee < -10) return (uint16_t)sign;
        m |= 0x800000u;
        int shift = 14 - ee;
        uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)ee << 10) | (m >> 13), rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)(sign | h);
}
static float float_of_f16(uint16_t h) {
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 0x400u), (int)e - 25);
    return (h & 0x8000u) ? -v : v;
}
static uint16_t bf16_of(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}
static float float_of_bf16(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static double clamp(double v, double lo, double hi) { return v != v ? 0 : v < lo ? lo : v > hi ? hi : v; }

static void set(enum dtype t, void *p, size_t i, double v) {
    switch (t) {
    case F32: ((float *)p)[i] = (float)v; break;
    case F64: ((double *)p)[i] = v; break;
    case F16: ((uint16_t *)p)[i] = f16_of((float)v); break;
    case BF16: ((uint16_t *)p)[i] = bf16_of((float)v); break;
    case I8: ((int8_t *)p)[i] = (int8_t)clamp(v, INT8_MIN, INT8_MAX); break;
    case I32: ((int32_t *)p)[i] = (int32_t)clamp(v, INT32_MIN, INT32_MAX); break;
    case I64: ((int64_t *)p)[i] = (int64_t)clamp(v, -9223372036854775808.0, 9223372036854774784.0); break;
    case U8: ((uint8_t *)p)[i] = (uint8_t)clamp(v, 0, UINT8_MAX); break;
    case U32: ((uint32_t *)p)[i] = (uint32_t)clamp(v, 0, UINT32_MAX); break;
    case U64: ((uint64_t *)p)[i] = (uint64_t)clamp(v, 0, 18446744073709549568.0); break;
    }
}

static double get(enum dtype t, const void *p, size_t i) {
    switch (t) {
    case F32: return ((const float *)p)[i];
    case F64: return ((const double *)p)[i];
    case F16: return float_of_f16(((const uint16_t *)p)[i]);
    case BF16: return float_of_bf16(((const uint16_t *)p)[i]);
    case I8: return ((const int8_t *)p)[i];
    case I32: return ((const int32_t *)p)[i];
    case I64: return (double)((const int64_t *)p)[i];
    case U8: return ((const uint8_t *)p)[i];
    case U32: return ((const uint32_t *)p)[i];
    case U64: return (double)((const uint64_t *)p)[i];
    }
    return 0;
}

static int is_float(enum dtype t) { return t == F32 || t == F64 || t == F16 || t == BF16; }

/* splitmix64 of (seed, i): a counter-based stream, the same on every machine */
static uint64_t bits(uint64_t seed, uint64_t i) {
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + i + 1;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double u01(uint64_t seed, uint64_t i) { return (double)(bits(seed, i) >> 11) * 0x1p-53; }
static double normal(uint64_t seed, uint64_t i) {   /* Box-Muller */
    double u = u01(seed, 2 * i), v = u01(seed, 2 * i + 1);
    return sqrt(-2 * log(1 - u)) * cos(6.283185307179586 * v);
}

static void fill(enum dtype t, void *p, size_t n, enum init how, double x, double y, uint64_t seed) {
    double ilo = ceil(x), span = floor(y) - ceil(x) + 1;
    for (size_t i = 0; i < n; i++) {
        switch (how) {
        case NORMAL: set(t, p, i, x + y * normal(seed, i)); break;
        case UNIFORM: set(t, p, i, is_float(t) ? x + (y - x) * u01(seed, i) : ilo + floor(u01(seed, i) * span)); break;
        case VALUE: set(t, p, i, x); break;
        case NONE: break;
        }
    }
}

/* outputs start as all ones bits: NaN in every float type, so an element
 * never written fails */
static void poison(void *p, size_t bytes) { memset(p, 0xff, bytes); }

struct diff { size_t bad, first; double max_abs, max_rel, sum_d2, sum_r2, got, want; int ref_bad; };

static struct diff compare(enum dtype t, const void *out, const void *ref, size_t n, double atol, double rtol) {
    struct diff d = {0};
    for (size_t i = 0; i < n; i++) {
        double o = get(t, out, i), r = get(t, ref, i);
        int bad = 0;
        if (!isfinite(r)) { d.ref_bad = 1; bad = 1; }
        else if (!isfinite(o)) bad = 1;
        else {
            double e = fabs(o - r);
            if (e > d.max_abs) d.max_abs = e;
            if (r != 0 && e / fabs(r) > d.max_rel) d.max_rel = e / fabs(r);
            d.sum_d2 += e * e;
            d.sum_r2 += r * r;
            if (!(e <= atol + rtol * fabs(r))) bad = 1;
        }
        if (bad && d.bad++ == 0) { d.first = i; d.got = o; d.want = r; }
    }
    return d;
}
]]

-- The C value of one scalar at a shape.
local function scalar_text(a, v)
  if a.dtype == "f32" or a.dtype == "f64" then return string.format("%.17g", v) end
  local n = math.tointeger(v)
  if a.dtype == "u64" or a.dtype == "u32" then return string.format("%dull", n) end
  return string.format("%dll", n)
end

-- The tables: the problem's arguments, and each measured shape's variables,
-- scalar values and buffer sizes.
local function tables(ex)
  local p = ex.problem
  local L = {}
  L[#L + 1] = string.format("enum { NVARS = %d, NARGS = %d, NSHAPES = %d };", #ex.vars, #p.args, #ex.choices)
  L[#L + 1] = "static const struct arg { const char *name; int buffer; enum dtype dtype; enum role role; enum init init; double x, y; } args[NARGS] = {"
  for _, a in ipairs(p.args) do
    if a.kind == "scalar" then
      L[#L + 1] = string.format("    {\"%s\", 0, F32, IN, NONE, 0, 0},", a.name)
    else
      local init, x, y = "NONE", 0, 0
      if a.role ~= "out" then
        local how = a.init
        init = ({ normal = "NORMAL", uniform = "UNIFORM", value = "VALUE" })[how[1]]
        x, y = how[2] or 0, how[3] or 0
        if how[1] == "normal" and how[3] == nil then y = 1 end
      end
      L[#L + 1] = string.format("    {\"%s\", 1, %s, %s, %s, %.17g, %.17g},", a.name, dtype_enum[a.dtype],
                                a.role == "in" and "IN" or a.role == "out" and "OUT" or "INOUT", init, x, y)
    end
  end
  L[#L + 1] = "};"
  L[#L + 1] = "union value { long long i; unsigned long long u; double f; };"
  L[#L + 1] = "static const struct shape { const char *key; long long v[NVARS]; union value s[NARGS]; size_t n[NARGS]; } shapes[NSHAPES] = {"
  for _, ch in ipairs(ex.choices) do
    local vs, ss, ns = {}, {}, {}
    for j, v in ipairs(ex.vars) do vs[j] = string.format("%dll", ch.shape[v]) end
    for j, a in ipairs(p.args) do
      if a.kind == "scalar" then
        local v = a.value(ch.shape)
        local field = (a.dtype == "f32" or a.dtype == "f64") and ".f" or (a.dtype:sub(1, 1) == "u" and ".u" or ".i")
        ss[j] = string.format("{%s = %s}", field, scalar_text(a, v))
        ns[j] = "0"
      else
        ss[j] = "{.i = 0}"
        ns[j] = string.format("%d", math.tointeger(a.size(ch.shape)))
      end
    end
    L[#L + 1] = string.format("    {\"%s\", {%s}, {%s}, {%s}},", ch.key, table.concat(vs, ", "), table.concat(ss, ", "),
                              table.concat(ns, ", "))
  end
  L[#L + 1] = "};"
  return table.concat(L, "\n")
end

-- The arguments of a call from the tables: "(int)s[0].i, (const float *)p[1], ...".
local function call_args(p)
  local out = {}
  for j, a in ipairs(p.args) do
    local t = c.arg_type(a)
    if a.kind == "scalar" then
      local field = (a.dtype == "f32" or a.dtype == "f64") and "f" or (a.dtype:sub(1, 1) == "u" and "u" or "i")
      out[j] = string.format("(%s)s[%d].%s", t, j - 1, field)
    else
      out[j] = string.format("(%s)p[%d]", t, j - 1)
    end
  end
  return table.concat(out, ", ")
end

local function var_args(ex)
  local out = {}
  for j = 1, #ex.vars do out[j] = string.format("v[%d]", j - 1) end
  return table.concat(out, ", ")
end

-- The checking loop, the same on both backends; run_kernel differs.
local body = [[
/* One shape: inputs drawn, the kernel and the reference run on copies of
 * them, every output compared; a line; 1 where anything differs. */
static int check_shape(int k) {
    const struct shape *sh = &shapes[k];
    void *mine[NARGS] = {0}, *ref[NARGS] = {0}, *drawn[NARGS] = {0};
    int failed = 0;
    char what[1024] = "";
    size_t len = 0;
    for (int j = 0; j < NARGS; j++) {
        if (!args[j].buffer) continue;
        size_t bytes = sh->n[j] * dtype_size[args[j].dtype];
        mine[j] = malloc(bytes); ref[j] = malloc(bytes); drawn[j] = malloc(bytes);
        if (!mine[j] || !ref[j] || !drawn[j]) { fprintf(stderr, "%s: out of memory\n", sh->key); exit(2); }
        if (args[j].role == OUT) poison(drawn[j], bytes);
        else fill(args[j].dtype, drawn[j], sh->n[j], args[j].init, args[j].x, args[j].y, 1000003ull * (uint64_t)k + (uint64_t)j);
        memcpy(mine[j], drawn[j], bytes);
        memcpy(ref[j], drawn[j], bytes);
    }
    if (run_kernel(sh->v, sh->s, mine, sh->n)) { failed = 2; snprintf(what, sizeof what, " (see above)"); }
    run_reference(sh->s, ref);
    for (int j = 0; j < NARGS && !failed; j++) {
        if (!args[j].buffer) continue;
        if (args[j].role == IN) {
            if (memcmp(mine[j], drawn[j], sh->n[j] * dtype_size[args[j].dtype]) != 0) {
                failed = 1;
                len += (size_t)snprintf(what + len, sizeof what - len, " %s: input changed by the kernel", args[j].name);
            }
            continue;
        }
        struct diff d = compare(args[j].dtype, mine[j], ref[j], sh->n[j], REL_L2 > 0 ? INFINITY : ATOL, REL_L2 > 0 ? 0 : RTOL);
        double rel_l2 = d.sum_r2 > 0 ? sqrt(d.sum_d2 / d.sum_r2) : sqrt(d.sum_d2);
        if (len >= sizeof what - 200) break;
        if (d.ref_bad) {
            failed = 1;
            len += (size_t)snprintf(what + len, sizeof what - len, " %s: the reference gave %g at %zu", args[j].name, d.want, d.first);
        } else if (d.bad) {
            failed = 1;
            len += (size_t)snprintf(what + len, sizeof what - len, " %s: %zu of %zu elements off (first at %zu: %.9g, expected %.9g) max_abs %.3g",
                                    args[j].name, d.bad, sh->n[j], d.first, d.got, d.want, d.max_abs);
        } else if (REL_L2 > 0 && !(rel_l2 <= REL_L2)) {
            failed = 1;
            len += (size_t)snprintf(what + len, sizeof what - len, " %s: rel_l2 %.3g over the limit %.3g max_abs %.3g",
                                    args[j].name, rel_l2, REL_L2, d.max_abs);
        } else if (REL_L2 > 0) {
            len += (size_t)snprintf(what + len, sizeof what - len, " %s rel_l2 %.3g max_abs %.3g", args[j].name, rel_l2, d.max_abs);
        } else {
            len += (size_t)snprintf(what + len, sizeof what - len, " %s max_abs %.3g max_rel %.3g", args[j].name, d.max_abs, d.max_rel);
        }
    }
    printf("%s kernel %s %s%s\n", sh->key, PICK(sh->v), failed == 0 ? "ok" : failed == 1 ? "WRONG" : "FAILED", what);
    for (int j = 0; j < NARGS; j++) { free(mine[j]); free(ref[j]); free(drawn[j]); }
    return failed;
}

int main(void) {
    int worst = 0;
    if (start()) return 2;
    for (int k = 0; k < NSHAPES; k++) {
        int r = check_shape(k);
        if (r > worst) worst = r;
    }
    fflush(stdout);
    return worst;
}
]]

-- run_kernel on the host: the dispatcher on the host copies.
local function host_run(ex)
  return table.concat({
    "static int start(void) { return 0; }",
    "",
    "static int run_kernel(const long long *v, const union value *s, void *const *p, const size_t *n) {",
    "    (void)n;",
    string.format("    %s(%s, %s);", ex.name, var_args(ex), call_args(ex.problem)),
    "    return 0;",
    "}",
  }, "\n")
end

-- run_kernel on the GPU: device buffers, the dispatcher on a stream of its
-- own, the results copied back.
local function cuda_run(ex)
  return table.concat({
    "static CUstream stream;",
    "",
    "static int cuda_failed(const char *what, CUresult rc) {",
    "    const char *name = NULL;",
    "    cuGetErrorName(rc, &name);",
    "    fprintf(stderr, \"%s: %s\\n\", what, name ? name : \"unknown CUDA error\");",
    "    return 1;",
    "}",
    "",
    "static int start(void) {",
    "    CUdevice dev;",
    "    CUcontext ctx;",
    "    CUresult rc = cuInit(0);",
    "    if (rc == CUDA_SUCCESS) rc = cuDeviceGet(&dev, 0);",
    "    if (rc == CUDA_SUCCESS) rc = cuDevicePrimaryCtxRetain(&ctx, dev);",
    "    if (rc == CUDA_SUCCESS) rc = cuCtxSetCurrent(ctx);",
    "    if (rc == CUDA_SUCCESS) rc = cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);",
    "    return rc == CUDA_SUCCESS ? 0 : cuda_failed(\"no CUDA device to check on\", rc);",
    "}",
    "",
    "static int run_kernel(const long long *v, const union value *s, void *const *host, const size_t *n) {",
    "    CUdeviceptr dev[NARGS] = {0};",
    "    void *p[NARGS] = {0};",
    "    CUresult rc = CUDA_SUCCESS;",
    "    for (int j = 0; j < NARGS && rc == CUDA_SUCCESS; j++) {",
    "        if (!args[j].buffer) continue;",
    "        size_t bytes = n[j] * dtype_size[args[j].dtype];",
    "        rc = cuMemAlloc(&dev[j], bytes);",
    "        if (rc == CUDA_SUCCESS) rc = cuMemcpyHtoD(dev[j], host[j], bytes);",
    "        p[j] = (void *)(uintptr_t)dev[j];",
    "    }",
    string.format("    if (rc == CUDA_SUCCESS) rc = %s(%s, %s, stream);", ex.name, var_args(ex), call_args(ex.problem)),
    "    if (rc == CUDA_SUCCESS) rc = cuStreamSynchronize(stream);",
    "    for (int j = 0; j < NARGS && rc == CUDA_SUCCESS; j++)",
    "        if (args[j].buffer) rc = cuMemcpyDtoH(host[j], dev[j], n[j] * dtype_size[args[j].dtype]);",
    "    for (int j = 0; j < NARGS; j++) if (dev[j]) cuMemFree(dev[j]);",
    "    return rc == CUDA_SUCCESS ? 0 : cuda_failed(\"the dispatcher on the GPU\", rc);",
    "}",
  }, "\n")
end

-- program(ex) -> dispatch_check.c's text.
function M.program(ex)
  local p, cuda = ex.problem, ex.backend == "cuda"
  local tol = p.tolerance
  local how = tol.rel_l2 and string.format("rel_l2 %g", tol.rel_l2) or string.format("atol %g, rtol %g", tol.atol, tol.rtol)
  local L = {
    string.format("/* dispatch_check.c: made by kwb export from recipe %s (problem %s) on %s.", ex.recipe.name,
                  p:key(), ex.device),
    string.format(" * Links the dispatcher %s with every kernel (lib%s.a) and the problem's C reference", ex.name, ex.ident),
    string.format(" * (reference.c, its entry point renamed %s). At each measured shape it fills the", ex.reference_symbol),
    string.format(" * inputs from a fixed seed, runs %s%s and the reference on copies of them and", ex.name,
                  cuda and " (on the GPU)" or ""),
    string.format(" * compares every output with the problem's tolerance (%s; NaN, Inf and", how),
    " * elements never written fail, as does an input the kernel changed). One line per shape:",
    " *   KEY kernel NAME ok|WRONG|FAILED ...",
    " * Exit status 0 where every shape agrees, 1 where one differs, 2 where one could not run. */",
    "#include <math.h>",
    "#include <stdint.h>",
    "#include <stdio.h>",
    "#include <stdlib.h>",
    "#include <string.h>",
    "#include \"dispatch.h\"",
    "",
    c.declare(p, ex.reference_symbol),
    "",
    string.format("#define ATOL ((double)%.17g)", tol.rel_l2 and 0 or tol.atol),
    string.format("#define RTOL ((double)%.17g)", tol.rel_l2 and 0 or tol.rtol),
    string.format("#define REL_L2 ((double)%.17g)", tol.rel_l2 or 0),
    string.format("#define PICK(v) kwb_dispatch_%s(%s)", ex.ident, var_args(ex)),
    "",
    common,
    tables(ex),
    "",
    cuda and cuda_run(ex) or host_run(ex),
    "",
    "static void run_reference(const union value *s, void *const *p) {",
    string.format("    %s(%s);", ex.reference_symbol, call_args(p)),
    "}",
    "",
    body,
  }
  return table.concat(L, "\n")
end

return M
