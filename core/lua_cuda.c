/* lua_cuda.c: the CUDA backend's Lua bindings: compile, modules, kernels,
 * device buffers, launch plans, timing, comparison, doctor measurements.
 * lua/kwb/cuda.lua wraps them into kwb.cuda. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "cuda_int.h"
#include "kwb.h"
#include "lua_bind.h"

#define MODULE_MT "kwb.cuda.module"
#define FN_MT "kwb.cuda.fn"
#define DBUF_MT "kwb.cuda.buffer"
#define PLAN_MT "kwb.cuda.plan"
#define TMAP_MT "kwb.cuda.tensor_map"

typedef struct { kwb_cuda_module *m; } lmodule;
typedef struct { kwb_cuda_fn *f; } lfn;
typedef struct { kwb_cuda_buffer *b; } ldbuf;
typedef struct { kwb_cuda_plan *p; } lplan;

/* The failure of a device call: its own code where its status has one (no
 * driver or device, out of memory), else `code` (a launch or run failure). */
static int fail_run(lua_State *L, const char *code) {
    return kwb_lua_fail(L, kwb_lua_code(kwb_last_status(), code), kwb_last_error());
}

/* ---- versions and devices ---------------------------------------------- */

static int l_nvrtc_version(lua_State *L) {
    int a, b;
    if (kwb_cuda_nvrtc_version(&a, &b)) return kwb_lua_fail(L, kwb_lua_code(kwb_last_status(), "no-nvrtc"), kwb_last_error());
    lua_pushfstring(L, "%d.%d", a, b);
    return 1;
}

static int l_device_count(lua_State *L) {
    int n = 0;
    int rc = kwb_cuda_device_count(&n);
    if (rc) return fail_run(L, "no-driver");
    lua_pushinteger(L, n);
    return 1;
}

static int l_device_info(lua_State *L) {
    kwb_cuda_device_info d;
    int rc = kwb_cuda_device_info_get((int)luaL_optinteger(L, 1, 0), &d);
    if (rc) return fail_run(L, "no-driver");
    lua_createtable(L, 0, 16);
    lua_pushstring(L, d.name); lua_setfield(L, -2, "name");
    lua_pushstring(L, d.pci_bus_id); lua_setfield(L, -2, "pci_bus_id");
    lua_pushfstring(L, "%d.%d", d.cc_major, d.cc_minor); lua_setfield(L, -2, "cc");
    lua_pushfstring(L, "sm_%d%d", d.cc_major, d.cc_minor); lua_setfield(L, -2, "arch");
    lua_pushinteger(L, d.sms); lua_setfield(L, -2, "sms");
    lua_pushinteger(L, d.l2_bytes); lua_setfield(L, -2, "l2_bytes");
    lua_pushinteger(L, (lua_Integer)d.memory_bytes); lua_setfield(L, -2, "memory_bytes");
    lua_pushinteger(L, d.clock_khz); lua_setfield(L, -2, "clock_khz");
    lua_pushinteger(L, d.mem_clock_khz); lua_setfield(L, -2, "mem_clock_khz");
    lua_pushinteger(L, d.bus_width); lua_setfield(L, -2, "bus_width");
    lua_pushinteger(L, d.smem_optin); lua_setfield(L, -2, "smem_optin");
    lua_pushinteger(L, d.max_threads); lua_setfield(L, -2, "max_threads");
    lua_pushboolean(L, d.unified_addressing); lua_setfield(L, -2, "unified_addressing");
    lua_pushboolean(L, d.pageable_access); lua_setfield(L, -2, "pageable_access");
    lua_pushfstring(L, "%d.%d", d.driver_version / 1000, (d.driver_version % 1000) / 10);
    lua_setfield(L, -2, "cuda_driver_version");
    return 1;
}

/* mem_info() -> free, total: device memory in bytes (the primary context's
 * device), or nil, message, info. */
static int l_mem_info(lua_State *L) {
    uint64_t f = 0, t = 0;
    if (kwb_cuda_mem_info(&f, &t)) return fail_run(L, "no-driver");
    lua_pushinteger(L, (lua_Integer)f);
    lua_pushinteger(L, (lua_Integer)t);
    return 2;
}

/* ---- compile ----------------------------------------------------------- */

/* A NULL-terminated array from the string list in field k of the table at
 * idx; kept alive as a userdata on the stack. */
static const char **field_strv(lua_State *L, int idx, const char *k) {
    lua_getfield(L, idx, k);
    if (lua_isnil(L, -1)) { lua_pop(L, 1); lua_pushnil(L); return NULL; }
    if (!lua_istable(L, -1)) luaL_error(L, "compile option '%s' must be a list of strings", k);
    lua_Integer n = luaL_len(L, -1);
    const char **v = lua_newuserdatauv(L, sizeof *v * (size_t)(n + 1), 1);
    lua_pushvalue(L, -2);
    lua_setiuservalue(L, -2, 1);   /* the strings stay referenced by their table */
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, -2, i);
        if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "%s[%d] must be a string", k, (int)i);
        v[i - 1] = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    v[n] = NULL;
    lua_remove(L, -2);
    return v;
}

static const char *field_str(lua_State *L, int idx, const char *k) {
    lua_getfield(L, idx, k);
    const char *s = lua_isnil(L, -1) ? NULL : lua_tostring(L, -1);
    if (!s && !lua_isnil(L, -1)) luaL_error(L, "compile option '%s' must be a string", k);
    lua_pop(L, 1);   /* the spec table keeps it */
    return s;
}

/* Read a compile spec; pushes 4 anchors (the string arrays). */
static void check_build(lua_State *L, int idx, kwb_cuda_build *b) {
    luaL_checktype(L, idx, LUA_TTABLE);
    luaL_checkstack(L, 8, "too many compile specs");   /* 4 anchors + temporaries per spec */
    memset(b, 0, sizeof *b);
    b->source = field_str(L, idx, "source");
    if (!b->source) luaL_error(L, "compile spec needs a source");
    b->name = field_str(L, idx, "name");
    b->arch = field_str(L, idx, "arch");
    b->build_dir = field_str(L, idx, "build_dir");
    lua_getfield(L, idx, "lineinfo");
    b->lineinfo = lua_toboolean(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, idx, "nvcc");
    b->nvcc = lua_toboolean(L, -1);
    lua_pop(L, 1);
    b->defines = field_strv(L, idx, "defines");
    b->flags = field_strv(L, idx, "flags");
    b->include_dirs = field_strv(L, idx, "include_dirs");
}

static lmodule *new_module_ud(lua_State *L) {
    lmodule *u = lua_newuserdatauv(L, sizeof *u, 0);   /* closed until compiled */
    u->m = NULL;
    luaL_setmetatable(L, MODULE_MT);
    return u;
}

static int push_compile_failure(lua_State *L, char *log) {
    kwb_lua_fail(L, kwb_lua_code(kwb_last_status(), "build-failed"), kwb_last_error());
    lua_pushstring(L, log ? log : "");
    lua_setfield(L, -2, "log");
    free(log);
    return 3;
}

/* core.cuda_compile(spec): spec.nvcc picks nvcc */
static int l_compile(lua_State *L) {
    kwb_cuda_build b;
    lua_settop(L, 1);
    check_build(L, 1, &b);
    int nvcc = b.nvcc;
    lmodule *u = new_module_ud(L);
    char *log = NULL;
    int rc = nvcc ? kwb_cuda_nvcc(&b, &u->m, &log) : kwb_cuda_compile(&b, &u->m, &log);
    if (rc == 0) return 1;
    return push_compile_failure(L, log);
}

/* core.cuda_compile_many({spec...}, threads) -> { module | {false, msg, info} ... } */
static int l_compile_many(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer n = luaL_len(L, 1);
    lua_Integer threads = luaL_optinteger(L, 2, 8);
    if (n < 1) { lua_newtable(L); return 1; }
    if (n > 4096) return luaL_error(L, "at most 4096 builds at once (got %d)", (int)n);
    kwb_cuda_build *builds = lua_newuserdatauv(L, sizeof *builds * (size_t)n, 0);
    int base = lua_gettop(L);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 1, i);
        check_build(L, lua_gettop(L), &builds[i - 1]);   /* anchors stay on the stack */
    }
    (void)base;
    luaL_checkstack(L, 12, "too many compile specs");
    kwb_cuda_module **mods = lua_newuserdatauv(L, sizeof *mods * (size_t)n, 0);
    int *rcs = lua_newuserdatauv(L, sizeof *rcs * (size_t)n, 0);
    char **msgs = lua_newuserdatauv(L, sizeof *msgs * (size_t)n, 0);
    char **logs = lua_newuserdatauv(L, sizeof *logs * (size_t)n, 0);
    if (kwb_cuda_compile_many(builds, (uint32_t)n, (uint32_t)(threads < 1 ? 1 : threads), mods, rcs, msgs, logs))
        return kwb_lua_fail(L, kwb_lua_code(kwb_last_status(), "no-nvrtc"), kwb_last_error());
    lua_createtable(L, (int)n, 0);
    for (lua_Integer i = 0; i < n; i++) {
        if (rcs[i] == 0) {
            lmodule *u = new_module_ud(L);
            u->m = mods[i];
            free(logs[i]);
        } else {
            lua_createtable(L, 0, 3);
            lua_pushstring(L, msgs[i] ? msgs[i] : "compile failed");
            lua_setfield(L, -2, "error");
            lua_pushstring(L, kwb_lua_code(rcs[i], "build-failed"));
            lua_setfield(L, -2, "code");
            lua_pushstring(L, logs[i] ? logs[i] : "");
            lua_setfield(L, -2, "log");
            free(logs[i]);
        }
        free(msgs[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* core.cuda_prebuild({spec...}, threads) -> true: the builds start in the background */
static int l_prebuild(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer n = luaL_len(L, 1);
    lua_Integer threads = luaL_optinteger(L, 2, 4);
    if (n > 4096) return luaL_error(L, "at most 4096 builds at once (got %d)", (int)n);
    if (n < 1) { lua_pushboolean(L, 1); return 1; }
    if (!kwb_nvrtc()) return kwb_lua_fail(L, kwb_lua_code(kwb_last_status(), "no-nvrtc"), kwb_last_error());
    kwb_cuda_build *builds = lua_newuserdatauv(L, sizeof *builds * (size_t)n, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 1, i);
        check_build(L, lua_gettop(L), &builds[i - 1]);   /* anchors stay on the stack until copied */
    }
    if (kwb_cuda_prebuild(builds, (uint32_t)n, (uint32_t)(threads < 1 ? 1 : threads)))
        return kwb_lua_fail(L, kwb_lua_code(kwb_last_status(), "build-failed"), kwb_last_error());
    lua_pushboolean(L, 1);
    return 1;
}

/* core.cuda_prebuilds_running() -> the background build jobs not yet finished */
static int l_prebuilds_running(lua_State *L) {
    lua_pushinteger(L, kwb_cuda_prebuilds_running());
    return 1;
}

static kwb_cuda_module *check_module(lua_State *L, int idx) {
    lmodule *u = luaL_checkudata(L, idx, MODULE_MT);
    if (!u->m) luaL_error(L, "CUDA module is closed");
    return u->m;
}

static void push_resources(lua_State *L, kwb_cuda_module *m) {
    lua_createtable(L, 0, (int)kwb_cuda_module_nkernels(m));
    for (uint32_t i = 0; i < kwb_cuda_module_nkernels(m); i++) {
        const kwb_cuda_kernel_info *k = kwb_cuda_module_kernel(m, i);
        lua_createtable(L, 0, 7);
        lua_pushinteger(L, k->registers); lua_setfield(L, -2, "registers");
        lua_pushinteger(L, k->spill_stores); lua_setfield(L, -2, "spill_stores");
        lua_pushinteger(L, k->spill_loads); lua_setfield(L, -2, "spill_loads");
        lua_pushinteger(L, k->stack); lua_setfield(L, -2, "stack");
        lua_pushinteger(L, k->static_smem); lua_setfield(L, -2, "static_smem");
        lua_pushinteger(L, k->max_threads); lua_setfield(L, -2, "max_threads");
        lua_setfield(L, -2, k->name);
    }
}

/* Every type here has a function __index: its properties first (a module's
 * hash, a buffer's n), then the methods its metatable keeps under "methods".
 * method() is that second step: pushes the method k of type mt, or nil. */
static int method(lua_State *L, const char *mt, const char *k) {
    luaL_getmetatable(L, mt);
    if (lua_getfield(L, -1, "methods") != LUA_TTABLE) lua_pushnil(L);
    else lua_getfield(L, -1, k);
    return 1;
}

static int l_module_index(lua_State *L) {
    kwb_cuda_module *m = check_module(L, 1);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "hash") == 0) lua_pushstring(L, kwb_cuda_module_hash(m));
    else if (strcmp(k, "arch") == 0) lua_pushstring(L, kwb_cuda_module_arch(m));
    else if (strcmp(k, "log") == 0) lua_pushstring(L, kwb_cuda_module_log(m));
    else if (strcmp(k, "ptx") == 0) lua_pushstring(L, kwb_cuda_module_ptx(m));
    else if (strcmp(k, "path") == 0) lua_pushstring(L, kwb_cuda_module_path(m));
    else if (strcmp(k, "cached") == 0) lua_pushboolean(L, kwb_cuda_module_cached(m));
    else if (strcmp(k, "kind") == 0) lua_pushstring(L, m->kind == KWB_CUDA_NVCC ? "nvcc" : "nvrtc");
    else if (strcmp(k, "cubin") == 0) {
        size_t len;
        const void *img = kwb_cuda_module_image(m, &len);
        if (img) lua_pushlstring(L, img, len);
        else lua_pushnil(L);
    } else if (strcmp(k, "resources") == 0) push_resources(L, m);
    else lua_pushnil(L);
    return 1;
}

static int l_module_gc(lua_State *L) {
    lmodule *u = luaL_checkudata(L, 1, MODULE_MT);
    kwb_cuda_module_free(u->m);
    u->m = NULL;
    return 0;
}

static int l_module_tostring(lua_State *L) {
    lmodule *u = luaL_checkudata(L, 1, MODULE_MT);
    if (!u->m) lua_pushliteral(L, "kwb.cuda.module (closed)");
    else lua_pushfstring(L, "kwb.cuda.module %s %s", kwb_cuda_module_arch(u->m), kwb_cuda_module_hash(u->m));
    return 1;
}

/* core.cuda_fn(module, name) */
static int l_fn(lua_State *L) {
    kwb_cuda_module *m = check_module(L, 1);
    const char *name = luaL_checkstring(L, 2);
    lfn *u = lua_newuserdatauv(L, sizeof *u, 1);
    u->f = NULL;
    luaL_setmetatable(L, FN_MT);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);   /* the module outlives its kernels */
    u->f = kwb_cuda_fn_get(m, name);
    if (!u->f) return fail_run(L, "load-failed");   /* no-symbol for a missing kernel */
    return 1;
}

static kwb_cuda_fn *check_fn(lua_State *L, int idx) {
    lfn *u = luaL_checkudata(L, idx, FN_MT);
    if (!u->f) luaL_error(L, "CUDA kernel is closed");
    return u->f;
}

static int l_fn_index(lua_State *L) {
    kwb_cuda_fn *f = check_fn(L, 1);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "nparams") == 0) {
        int32_t n = kwb_cuda_fn_nparams(f);
        if (n < 0) lua_pushnil(L);
        else lua_pushinteger(L, n);
    } else if (strcmp(k, "launcher") == 0) lua_pushboolean(L, kwb_cuda_fn_is_launcher(f));
    else if (strcmp(k, "params") == 0) {
        int32_t n = kwb_cuda_fn_nparams(f);
        if (n < 0) { lua_pushnil(L); return 1; }
        lua_createtable(L, n, 0);
        for (int32_t i = 0; i < n; i++) {
            uint32_t off, sz;
            kwb_cuda_fn_param(f, (uint32_t)i, &off, &sz);
            lua_createtable(L, 0, 2);
            lua_pushinteger(L, off); lua_setfield(L, -2, "offset");
            lua_pushinteger(L, sz); lua_setfield(L, -2, "size");
            lua_rawseti(L, -2, i + 1);
        }
    } else if (strcmp(k, "attributes") == 0) {
        if (kwb_cuda_fn_is_launcher(f)) { lua_pushnil(L); return 1; }
        static const struct { const char *name; int attr; } attrs[] = {
            {"max_threads", CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
            {"static_smem", CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES},
            {"const_bytes", CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES},
            {"local_bytes", CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES},
            {"registers", CU_FUNC_ATTRIBUTE_NUM_REGS},
            {"max_dynamic_smem", CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES},
        };
        lua_createtable(L, 0, 6);
        for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
            int32_t v = 0;
            if (kwb_cuda_fn_attr(f, attrs[i].attr, &v) == 0) {
                lua_pushinteger(L, v);
                lua_setfield(L, -2, attrs[i].name);
            }
        }
    } else lua_pushnil(L);
    return 1;
}

static int l_fn_gc(lua_State *L) {
    lfn *u = luaL_checkudata(L, 1, FN_MT);
    kwb_cuda_fn_free(u->f);
    u->f = NULL;
    return 0;
}

static int l_fn_tostring(lua_State *L) {
    lfn *u = luaL_checkudata(L, 1, FN_MT);
    if (!u->f) lua_pushliteral(L, "kwb.cuda.fn (closed)");
    else lua_pushfstring(L, "kwb.cuda.fn (%s)", kwb_cuda_fn_is_launcher(u->f) ? "host launcher" : "kernel");
    return 1;
}

/* ---- device buffers ---------------------------------------------------- */

static kwb_cuda_buffer *check_dbuf(lua_State *L, int idx) {
    ldbuf *u = luaL_checkudata(L, idx, DBUF_MT);
    if (!u->b) luaL_error(L, "device buffer is freed");
    return u->b;
}

static int l_dbuf_new(lua_State *L) {
    const char *name = luaL_checkstring(L, 1);
    lua_Integer n = luaL_checkinteger(L, 2);
    int t = kwb_cuda_dtype_from_name(name);
    if (t < 0)
        return luaL_error(L, "unknown dtype '%s' (known: f32, f64, f16, bf16, i8, i32, i64, u8, u32, u64, e4m3, e2m1)", name);
    if (n < 0) return luaL_error(L, "buffer length must be >= 0 (got %d)", (int)n);
    ldbuf *u = lua_newuserdatauv(L, sizeof *u, 0);   /* closed until allocated */
    u->b = NULL;
    luaL_setmetatable(L, DBUF_MT);
    u->b = kwb_cuda_buffer_new(t, (uint64_t)n);
    if (!u->b) return fail_run(L, "alloc-failed");
    return 1;
}

static int l_dbuf_index(lua_State *L) {
    kwb_cuda_buffer *b = check_dbuf(L, 1);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "dtype") == 0) lua_pushstring(L, kwb_cuda_dtype_name(kwb_cuda_buffer_dtype(b)));
    else if (strcmp(k, "n") == 0) lua_pushinteger(L, (lua_Integer)kwb_cuda_buffer_len(b));
    else if (strcmp(k, "bytes") == 0) lua_pushinteger(L, (lua_Integer)kwb_cuda_buffer_bytes(b));
    else if (strcmp(k, "device") == 0) lua_pushliteral(L, "cuda");
    else if (strcmp(k, "ptr") == 0) lua_pushinteger(L, (lua_Integer)kwb_cuda_buffer_ptr(b));
    else return method(L, DBUF_MT, k);
    return 1;
}

static int l_dbuf_len(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)kwb_cuda_buffer_len(check_dbuf(L, 1)));
    return 1;
}

static int l_dbuf_tostring(lua_State *L) {
    ldbuf *u = luaL_checkudata(L, 1, DBUF_MT);
    if (!u->b) lua_pushliteral(L, "kwb.cuda.buffer (freed)");
    else lua_pushfstring(L, "kwb.buffer<%s>[%I] cuda", kwb_cuda_dtype_name(kwb_cuda_buffer_dtype(u->b)),
                         (lua_Integer)kwb_cuda_buffer_len(u->b));
    return 1;
}

static int l_dbuf_free(lua_State *L) {
    ldbuf *u = luaL_checkudata(L, 1, DBUF_MT);
    kwb_cuda_buffer_free(u->b);
    u->b = NULL;
    return 0;
}

/* Methods return the buffer, or nil, msg, info on a device failure. */
#define DONE(rc) do { if (rc) return fail_run(L, "run-failed"); lua_settop(L, 1); return 1; } while (0)

static int l_dbuf_fill_uniform(lua_State *L) {
    kwb_cuda_buffer *b = check_dbuf(L, 1);
    uint64_t seed = (uint64_t)luaL_checkinteger(L, 2);
    double lo = luaL_optnumber(L, 3, -1), hi = luaL_optnumber(L, 4, 1);
    if (!(lo <= hi)) return luaL_error(L, "uniform fill needs lo <= hi (got %f, %f)", lo, hi);
    DONE(kwb_cuda_buffer_fill_uniform(b, seed, lo, hi));
}

/* fill_normal and fill_normal_stream: the same arguments, another stream */
static int normal_fill(lua_State *L, int (*fill_fn)(kwb_cuda_buffer *, uint64_t, double, double)) {
    kwb_cuda_buffer *b = check_dbuf(L, 1);
    uint64_t seed = (uint64_t)luaL_checkinteger(L, 2);
    double mean = luaL_optnumber(L, 3, 0), sd = luaL_optnumber(L, 4, 1);
    if (!(sd >= 0)) return luaL_error(L, "normal fill needs stdev >= 0 (got %f)", sd);
    DONE(fill_fn(b, seed, mean, sd));
}
static int l_dbuf_fill_normal(lua_State *L) { return normal_fill(L, kwb_cuda_buffer_fill_normal); }
static int l_dbuf_fill_normal_stream(lua_State *L) { return normal_fill(L, kwb_cuda_buffer_fill_normal_stream); }

static int l_dbuf_fill(lua_State *L) {
    kwb_cuda_buffer *b = check_dbuf(L, 1);
    DONE(kwb_cuda_buffer_fill_value(b, luaL_checknumber(L, 2)));
}

static int l_dbuf_poison(lua_State *L) { DONE(kwb_cuda_buffer_poison(check_dbuf(L, 1))); }
static int l_dbuf_zero(lua_State *L) { DONE(kwb_cuda_buffer_zero(check_dbuf(L, 1))); }

/* buf:upload(host buffer | string of the exact size) */
static int l_dbuf_upload(lua_State *L) {
    kwb_cuda_buffer *b = check_dbuf(L, 1);
    const void *src;
    size_t len;
    if (lua_type(L, 2) == LUA_TSTRING) src = lua_tolstring(L, 2, &len);
    else {
        kwb_buffer *h = kwb_lua_checkbuffer(L, 2);
        src = kwb_buffer_data(h);
        len = kwb_buffer_bytes(h);
    }
    if (len != kwb_cuda_buffer_bytes(b))
        return luaL_error(L, "upload of %d bytes into a device buffer of %d bytes", (int)len, (int)kwb_cuda_buffer_bytes(b));
    DONE(kwb_cuda_buffer_upload(b, src, len));
}

/* buf:download(host buffer) */
static int l_dbuf_download(lua_State *L) {
    kwb_cuda_buffer *b = check_dbuf(L, 1);
    kwb_buffer *h = kwb_lua_checkbuffer(L, 2);
    if (kwb_buffer_bytes(h) != kwb_cuda_buffer_bytes(b))
        return luaL_error(L, "download of a device buffer of %d bytes into a host buffer of %d bytes",
                          (int)kwb_cuda_buffer_bytes(b), (int)kwb_buffer_bytes(h));
    int rc = kwb_cuda_buffer_download(b, kwb_buffer_data(h), kwb_buffer_bytes(h));
    if (rc) return fail_run(L, "run-failed");
    lua_settop(L, 2);
    return 1;
}

/* buf:raw() -> the bytes as a string */
static int l_dbuf_raw(lua_State *L) {
    kwb_cuda_buffer *b = check_dbuf(L, 1);
    size_t n = kwb_cuda_buffer_bytes(b);
    luaL_Buffer lb;
    char *p = luaL_buffinitsize(L, &lb, n ? n : 1);
    int rc = kwb_cuda_buffer_download(b, p, n);
    if (rc) return fail_run(L, "run-failed");
    luaL_pushresultsize(&lb, n);
    return 1;
}

static int l_dbuf_copy(lua_State *L) {
    kwb_cuda_buffer *dst = check_dbuf(L, 1), *src = check_dbuf(L, 2);
    if (kwb_cuda_buffer_dtype(dst) != kwb_cuda_buffer_dtype(src) || kwb_cuda_buffer_len(dst) != kwb_cuda_buffer_len(src))
        return luaL_error(L, "copy needs equal buffers (%s[%d] from %s[%d])",
                          kwb_cuda_dtype_name(kwb_cuda_buffer_dtype(dst)), (int)kwb_cuda_buffer_len(dst),
                          kwb_cuda_dtype_name(kwb_cuda_buffer_dtype(src)), (int)kwb_cuda_buffer_len(src));
    DONE(kwb_cuda_buffer_copy(dst, src));
}

/* ---- page-locked host copies ------------------------------------------ */

#define PINNED_MT "kwb.cuda.pinned"
typedef struct { kwb_cuda_pinned *h; } lpinned;

static int l_pinned_gc(lua_State *L) {
    lpinned *u = luaL_checkudata(L, 1, PINNED_MT);
    kwb_cuda_pinned_free(u->h);
    u->h = NULL;
    return 0;
}

static kwb_cuda_pinned *check_pinned(lua_State *L, int idx) {
    lpinned *u = luaL_checkudata(L, idx, PINNED_MT);
    if (!u->h) luaL_error(L, "host copy is freed");
    return u->h;
}

/* buf:save([copy]) -> copy: the buffer's bytes in page-locked host memory
 * (into `copy`, of the same size, when given) */
static int l_dbuf_save(lua_State *L) {
    kwb_cuda_buffer *b = check_dbuf(L, 1);
    if (lua_isnoneornil(L, 2)) {
        lpinned *u = lua_newuserdatauv(L, sizeof *u, 0);
        u->h = NULL;
        luaL_setmetatable(L, PINNED_MT);
        u->h = kwb_cuda_pinned_new(kwb_cuda_buffer_bytes(b));
        if (!u->h) return fail_run(L, "alloc-failed");
    } else {
        check_pinned(L, 2);
        lua_settop(L, 2);
    }
    if (kwb_cuda_buffer_save(b, check_pinned(L, -1))) return fail_run(L, "run-failed");
    return 1;
}

/* buf:load(copy): the bytes of a host copy (buf:save) back into the buffer */
static int l_dbuf_load(lua_State *L) {
    DONE(kwb_cuda_buffer_load(check_dbuf(L, 1), check_pinned(L, 2)));
}

/* buf:digest(key) -> an integer (kwb_cuda_buffer_digest) */
/* dbuf:digest(key [, false]) -> the keyed digest; with false, the same
 * device work queued and nothing read back (-> dbuf). */
static int l_dbuf_digest(lua_State *L) {
    uint64_t s = 0;
    if (lua_isboolean(L, 3) && !lua_toboolean(L, 3)) {
        if (kwb_cuda_buffer_digest_queue(check_dbuf(L, 1), (uint64_t)luaL_checkinteger(L, 2))) return fail_run(L, "run-failed");
        lua_settop(L, 1);
        return 1;
    }
    if (kwb_cuda_buffer_digest(check_dbuf(L, 1), (uint64_t)luaL_checkinteger(L, 2), &s)) return fail_run(L, "run-failed");
    lua_pushinteger(L, (lua_Integer)s);
    return 1;
}

/* buf:poisoned() -> the count of elements still poison, the first (1-based) or nil */
static int l_dbuf_poisoned(lua_State *L) {
    uint64_t n = 0;
    int64_t first = -1;
    if (kwb_cuda_buffer_poisoned(check_dbuf(L, 1), &n, &first)) return fail_run(L, "run-failed");
    lua_pushinteger(L, (lua_Integer)n);
    if (first < 0) lua_pushnil(L);
    else lua_pushinteger(L, (lua_Integer)first + 1);
    return 2;
}

/* buf:redzone() -> nil when its guard bands are intact, else the first and
 * last byte offsets written outside it (negative: before it); the bands are
 * filled again. Raises on a device failure. */
static int l_dbuf_redzone(lua_State *L) {
    int hit = 0;
    int64_t first = 0, last = 0;
    if (kwb_cuda_buffer_redzone(check_dbuf(L, 1), &hit, &first, &last))
        return luaL_error(L, "checking a device buffer's guard bands: %s", kwb_last_error());
    if (!hit) return 0;
    lua_pushinteger(L, (lua_Integer)first);
    lua_pushinteger(L, (lua_Integer)last);
    return 2;
}

/* kwb.core.cuda_redzones({buf...} [, {out...}]) -> { [i] = { first, last } }
 * for each buffer whose guard bands changed (kwb_cuda_buffers_check), and
 * with outputs given, { [j] = { count, first } } for each output with
 * elements still poison (first 1-based, as dbuf:poisoned); raises on a
 * device failure. */
static kwb_cuda_buffer **dbuf_list(lua_State *L, int idx, lua_Integer *n) {
    *n = lua_isnoneornil(L, idx) ? 0 : (luaL_checktype(L, idx, LUA_TTABLE), luaL_len(L, idx));
    if (*n < 0 || *n > 4096) luaL_error(L, "cuda_redzones takes 0 to 4096 buffers a list (got %d)", (int)*n);
    kwb_cuda_buffer **bufs = lua_newuserdatauv(L, sizeof *bufs * (size_t)(*n ? *n : 1), 0);
    for (lua_Integer i = 1; i <= *n; i++) {
        lua_geti(L, idx, i);
        bufs[i - 1] = check_dbuf(L, -1);
        lua_pop(L, 1);
    }
    return bufs;
}

static int l_redzones(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 2);   /* (the lists' userdata go above the arguments) */
    lua_Integer n, m;
    kwb_cuda_buffer **bufs = dbuf_list(L, 1, &n), **outs = dbuf_list(L, 2, &m);
    int *hit = lua_newuserdatauv(L, sizeof *hit * (size_t)(n ? n : 1), 0);
    int64_t *first = lua_newuserdatauv(L, sizeof *first * (size_t)(n ? n : 1), 0);
    int64_t *last = lua_newuserdatauv(L, sizeof *last * (size_t)(n ? n : 1), 0);
    uint64_t *count = lua_newuserdatauv(L, sizeof *count * (size_t)(m ? m : 1), 0);
    int64_t *pfirst = lua_newuserdatauv(L, sizeof *pfirst * (size_t)(m ? m : 1), 0);
    if (kwb_cuda_buffers_check(bufs, (uint32_t)n, outs, (uint32_t)m, hit, first, last, count, pfirst))
        return luaL_error(L, "checking device buffers' guard bands: %s", kwb_last_error());
    lua_newtable(L);
    for (lua_Integer i = 1; i <= n; i++) {
        if (!hit[i - 1]) continue;
        lua_createtable(L, 2, 0);
        lua_pushinteger(L, (lua_Integer)first[i - 1]); lua_rawseti(L, -2, 1);
        lua_pushinteger(L, (lua_Integer)last[i - 1]); lua_rawseti(L, -2, 2);
        lua_rawseti(L, -2, i);
    }
    if (lua_isnil(L, 2)) return 1;
    lua_newtable(L);
    for (lua_Integer j = 1; j <= m; j++) {
        if (!count[j - 1]) continue;
        lua_createtable(L, 2, 0);
        lua_pushinteger(L, (lua_Integer)count[j - 1]); lua_rawseti(L, -2, 1);
        lua_pushinteger(L, (lua_Integer)pfirst[j - 1] + 1); lua_rawseti(L, -2, 2);   /* 1-based, as dbuf:poisoned */
        lua_rawseti(L, -2, j);
    }
    return 2;
}

/* kwb.core.cuda_guard_layout(bytes) -> before, after, allocation bytes */
static int l_guard_layout(lua_State *L) {
    lua_Integer bytes = luaL_checkinteger(L, 1);
    if (bytes < 0) return luaL_error(L, "a buffer has 0 or more bytes (got %d)", (int)bytes);
    uint64_t before, after;
    size_t alloc;
    kwb_cuda_guard_layout((size_t)bytes, &before, &after, &alloc);
    lua_pushinteger(L, (lua_Integer)before);
    lua_pushinteger(L, (lua_Integer)after);
    lua_pushinteger(L, (lua_Integer)alloc);
    return 3;
}

static int l_dbuf_checksum(lua_State *L) {
    uint64_t s = 0;
    int rc = kwb_cuda_buffer_checksum(check_dbuf(L, 1), &s);
    if (rc) return fail_run(L, "run-failed");
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)s);
    lua_pushstring(L, hex);
    return 1;
}

static int l_checksum_host(lua_State *L) {
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)kwb_cuda_checksum_host(s, len));
    lua_pushstring(L, hex);
    return 1;
}

static int l_compare(lua_State *L) {
    kwb_cuda_buffer *out = check_dbuf(L, 1), *ref = check_dbuf(L, 2);
    double atol = luaL_optnumber(L, 3, 0), rtol = luaL_optnumber(L, 4, 0);
    if (kwb_cuda_buffer_len(out) != kwb_cuda_buffer_len(ref))
        return luaL_error(L, "compare needs equal lengths (out has %d, ref has %d)",
                          (int)kwb_cuda_buffer_len(out), (int)kwb_cuda_buffer_len(ref));
    kwb_diff d;
    int rc = kwb_cuda_compare(out, ref, atol, rtol, &d);
    if (rc) return fail_run(L, "run-failed");
    lua_createtable(L, 0, 10);
    lua_pushnumber(L, d.max_abs); lua_setfield(L, -2, "max_abs");
    lua_pushnumber(L, d.max_rel); lua_setfield(L, -2, "max_rel");
    lua_pushnumber(L, d.rel_l2); lua_setfield(L, -2, "rel_l2");
    lua_pushinteger(L, (lua_Integer)d.n); lua_setfield(L, -2, "n");
    lua_pushinteger(L, (lua_Integer)d.nan); lua_setfield(L, -2, "nan");
    lua_pushinteger(L, (lua_Integer)d.inf); lua_setfield(L, -2, "inf");
    lua_pushinteger(L, (lua_Integer)d.poison); lua_setfield(L, -2, "poison");
    lua_pushinteger(L, (lua_Integer)d.ref_nonfinite); lua_setfield(L, -2, "ref_nonfinite");
    lua_pushnumber(L, d.ref_mean); lua_setfield(L, -2, "ref_mean");
    lua_pushinteger(L, (lua_Integer)d.bad); lua_setfield(L, -2, "bad");
    if (d.first_bad >= 0) { lua_pushinteger(L, d.first_bad + 1); lua_setfield(L, -2, "first_bad"); }
    return 1;
}

/* ---- plans ------------------------------------------------------------- */

/* ---- tensor maps ------------------------------------------------------- */

/* 128 opaque bytes at a 64-byte boundary inside the userdata; its user
 * value keeps the buffer it points into alive. */
typedef struct { unsigned char raw[128 + 63]; } ltmap;

static unsigned char *tmap_bytes(ltmap *u) { return (unsigned char *)(((uintptr_t)u->raw + 63) & ~(uintptr_t)63); }

static void int_list(lua_State *L, int t, const char *k, uint32_t n, uint64_t *out) {
    if (lua_getfield(L, t, k) != LUA_TTABLE) luaL_error(L, "tensor map field '%s' must be a list of %d integers", k, (int)n);
    for (uint32_t i = 0; i < n; i++) {
        lua_rawgeti(L, -1, (lua_Integer)i + 1);
        if (!lua_isinteger(L, -1)) luaL_error(L, "tensor map field '%s' must be a list of %d integers", k, (int)n);
        out[i] = (uint64_t)lua_tointeger(L, -1);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

/* kwb.core.cuda_tensor_map(buf, args) -> tensor map: args as kwb.base.tmap.args
 * gives them (dtype, rank, offset, dims, strides, box, element_strides,
 * interleave, swizzle, l2, oob: the driver's values, checked there). */
static int l_tmap_new(lua_State *L) {
    kwb_cuda_buffer *b = check_dbuf(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_getfield(L, 2, "rank");
    if (!lua_isinteger(L, -1)) return luaL_error(L, "tensor map field 'rank' must be an integer");
    lua_Integer rank = lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (rank < 1 || rank > 5) return luaL_error(L, "a tensor map has rank 1 to 5 (got %d)", (int)rank);
    uint64_t dims[5] = {0}, strides[5] = {0}, box64[5] = {0}, es64[5] = {0}, v[6] = {0};
    uint32_t box[5], es[5];
    int_list(L, 2, "dims", (uint32_t)rank, dims);
    int_list(L, 2, "strides", (uint32_t)rank - 1, strides);
    int_list(L, 2, "box", (uint32_t)rank, box64);
    int_list(L, 2, "element_strides", (uint32_t)rank, es64);
    static const char *const scalars[] = {"dtype", "offset", "interleave", "swizzle", "l2", "oob"};
    for (int i = 0; i < 6; i++) {
        lua_getfield(L, 2, scalars[i]);
        if (!lua_isinteger(L, -1)) return luaL_error(L, "tensor map field '%s' must be an integer", scalars[i]);
        v[i] = (uint64_t)lua_tointeger(L, -1);
        lua_pop(L, 1);
    }
    for (int i = 0; i < rank; i++) box[i] = (uint32_t)box64[i], es[i] = (uint32_t)es64[i];
    ltmap *u = lua_newuserdatauv(L, sizeof *u, 1);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, TMAP_MT);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    if (kwb_cuda_tensor_map_encode(tmap_bytes(u), (int)v[0], (uint32_t)rank, kwb_cuda_buffer_ptr(b) + v[1], dims,
                                   strides, box, es, (int)v[2], (int)v[3], (int)v[4], (int)v[5]))
        return fail_run(L, "run-failed");
    return 1;
}

static int l_tmap_tostring(lua_State *L) {
    luaL_checkudata(L, 1, TMAP_MT);
    lua_pushliteral(L, "kwb.cuda.tensor_map");
    return 1;
}

static int l_plan_new(lua_State *L) {
    lplan *u = lua_newuserdatauv(L, sizeof *u, 1);
    u->p = NULL;
    luaL_setmetatable(L, PLAN_MT);
    lua_newtable(L);               /* keeps the kernels and buffers of its steps alive */
    lua_setiuservalue(L, -2, 1);
    u->p = kwb_cuda_plan_new();
    if (!u->p) return kwb_lua_fail(L, "out-of-memory", kwb_last_error());
    return 1;
}

static kwb_cuda_plan *check_plan(lua_State *L, int idx) {
    lplan *u = luaL_checkudata(L, idx, PLAN_MT);
    if (!u->p) luaL_error(L, "plan is closed");
    return u->p;
}

static void dims(lua_State *L, int idx, const char *what, uint32_t d[3], uint32_t def) {
    d[0] = d[1] = d[2] = def;
    if (lua_isnoneornil(L, idx)) return;
    if (lua_isinteger(L, idx)) {
        lua_Integer v = lua_tointeger(L, idx);
        if (v < 1 || v > 0x7fffffff) luaL_error(L, "%s must be >= 1 (got %d)", what, (int)v);
        d[0] = (uint32_t)v;
        d[1] = d[2] = 1;
        return;
    }
    luaL_checktype(L, idx, LUA_TTABLE);
    for (int i = 0; i < 3; i++) {
        lua_rawgeti(L, idx, i + 1);
        if (lua_isnil(L, -1)) d[i] = 1;
        else {
            lua_Integer v = lua_tointeger(L, -1);
            if (!lua_isinteger(L, -1) || v < 1 || v > 0x7fffffff)
                luaL_error(L, "%s[%d] must be an integer >= 1", what, i + 1);
            d[i] = (uint32_t)v;
        }
        lua_pop(L, 1);
    }
}

/* The types of a kernel argument; type_names and type_sizes follow this order. */
typedef enum { ARG_I32, ARG_U32, ARG_I64, ARG_U64, ARG_F32, ARG_F64, ARG_PTR, ARG_TMAP } arg_type;
static const char *const type_names[] = {"i32", "u32", "i64", "u64", "f32", "f64", "ptr", "tmap", NULL};
static const uint32_t type_sizes[] = {4, 4, 8, 8, 4, 8, 8, 128};

/* Pack one argument of type t at off into buf. */
static void pack(lua_State *L, int idx, arg_type t, char *buf, uint32_t off, int argno) {
    switch (t) {
    case ARG_I32: case ARG_U32: {
        if (!lua_isinteger(L, idx)) luaL_error(L, "argument %d must be an integer", argno);
        int32_t v = (int32_t)lua_tointeger(L, idx);
        memcpy(buf + off, &v, 4);
        break;
    }
    case ARG_I64: case ARG_U64: {
        if (!lua_isinteger(L, idx)) luaL_error(L, "argument %d must be an integer", argno);
        int64_t v = (int64_t)lua_tointeger(L, idx);
        memcpy(buf + off, &v, 8);
        break;
    }
    case ARG_F32: {
        float v = (float)luaL_checknumber(L, idx);
        memcpy(buf + off, &v, 4);
        break;
    }
    case ARG_F64: {
        double v = luaL_checknumber(L, idx);
        memcpy(buf + off, &v, 8);
        break;
    }
    case ARG_TMAP: {
        ltmap *u = luaL_testudata(L, idx, TMAP_MT);
        if (!u) luaL_error(L, "argument %d must be a tensor map (got %s)", argno, luaL_typename(L, idx));
        memcpy(buf + off, tmap_bytes(u), 128);
        break;
    }
    case ARG_PTR: {
        uint64_t v = 0;
        if (!lua_isnil(L, idx)) {
            ldbuf *u = luaL_testudata(L, idx, DBUF_MT);
            if (!u) luaL_error(L, "argument %d must be a device buffer (got %s)", argno, luaL_typename(L, idx));
            if (!u->b) luaL_error(L, "argument %d is a freed device buffer", argno);
            v = kwb_cuda_buffer_ptr(u->b);
        }
        memcpy(buf + off, &v, 8);
        break;
    }
    }
}

/* The type of argument idx when none is declared: buffers are pointers,
 * integers i32 (i64 where the kernel's parameter has 8 bytes), floats f32
 * (f64 likewise). */
static arg_type infer_type(lua_State *L, int idx, uint32_t size, int argno) {
    if (lua_isnil(L, idx) || luaL_testudata(L, idx, DBUF_MT)) return ARG_PTR;
    if (luaL_testudata(L, idx, TMAP_MT)) return ARG_TMAP;
    if (lua_isinteger(L, idx)) return size == 8 ? ARG_I64 : ARG_I32;
    if (lua_type(L, idx) == LUA_TNUMBER) return size == 8 ? ARG_F64 : ARG_F32;
    return (arg_type)luaL_error(L, "argument %d: cannot pass a %s to a kernel", argno, luaL_typename(L, idx));
}

/* plan:add(fn, grid, block, smem, cluster, {args}, {types} | nil) */
static int l_plan_add(lua_State *L) {
    kwb_cuda_plan *p = check_plan(L, 1);
    kwb_cuda_fn *f = check_fn(L, 2);
    kwb_cuda_launch l;
    memset(&l, 0, sizeof l);
    l.fn = f;
    int launcher = kwb_cuda_fn_is_launcher(f);
    dims(L, 3, "grid", l.grid, 1);
    dims(L, 4, "block", l.block, 1);
    lua_Integer smem = luaL_optinteger(L, 5, 0);
    if (smem < 0 || smem > 0x7fffffff) return luaL_error(L, "shared memory must be >= 0 (got %d)", (int)smem);
    l.smem = (uint32_t)smem;
    if (!lua_isnoneornil(L, 6)) dims(L, 6, "cluster", l.cluster, 1);
    luaL_checktype(L, 7, LUA_TTABLE);
    int has_types = lua_istable(L, 8);
    lua_Integer nargs = luaL_len(L, 7);
    lua_Integer n = lua_getfield(L, 7, "n") == LUA_TNUMBER ? lua_tointeger(L, -1) : nargs;
    lua_pop(L, 1);
    nargs = n;
    if (nargs > 128) return luaL_error(L, "more than 128 kernel arguments");
    int32_t np = kwb_cuda_fn_nparams(f);
    if (!launcher && np >= 0 && np != nargs)
        return luaL_error(L, "kernel takes %d arguments, got %d", (int)np, (int)nargs);
    if (has_types && luaL_len(L, 8) != nargs)
        return luaL_error(L, "%d argument types for %d arguments", (int)luaL_len(L, 8), (int)nargs);
    char buf[4096];
    uint32_t offsets[128], end = 0;
    memset(buf, 0, sizeof buf);
    for (lua_Integer i = 0; i < nargs; i++) {
        lua_rawgeti(L, 7, i + 1);
        int vi = lua_gettop(L);
        uint32_t off = 0, size = 0;
        if (!launcher && np >= 0) kwb_cuda_fn_param(f, (uint32_t)i, &off, &size);
        arg_type t;
        if (has_types) {
            lua_rawgeti(L, 8, i + 1);
            t = (arg_type)luaL_checkoption(L, -1, NULL, type_names);
            lua_pop(L, 1);
            if (size && size != type_sizes[t])
                return luaL_error(L, "argument %d is declared %s (%d bytes) but the kernel's parameter has %d bytes",
                                  (int)i + 1, type_names[t], (int)type_sizes[t], (int)size);
        } else t = infer_type(L, vi, size, (int)i + 1);
        if (launcher || np < 0) {   /* natural alignment (a tensor map's: 64) */
            uint32_t s = t == ARG_TMAP ? 64 : type_sizes[t];
            off = (end + s - 1) / s * s;
        } else if (size != type_sizes[t])
            return luaL_error(L, "argument %d: the kernel's parameter has %d bytes, a %s has %d (declare its type)",
                              (int)i + 1, (int)size, type_names[t], (int)type_sizes[t]);
        if (off + type_sizes[t] > sizeof buf) return luaL_error(L, "kernel arguments exceed %d bytes", (int)sizeof buf);
        pack(L, vi, t, buf, off, (int)i + 1);
        offsets[i] = off;
        if (off + type_sizes[t] > end) end = off + type_sizes[t];
        /* keep buffers (and tensor maps, which keep theirs) alive as long as the plan */
        if ((t == ARG_PTR || t == ARG_TMAP) && !lua_isnil(L, vi)) {
            lua_getiuservalue(L, 1, 1);
            lua_pushvalue(L, vi);
            lua_pushboolean(L, 1);
            lua_rawset(L, -3);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    if (!launcher && np >= 0 && np > 0) {
        uint32_t off, size;
        kwb_cuda_fn_param(f, (uint32_t)np - 1, &off, &size);
        end = off + size;
    }
    l.params = buf;
    l.params_len = end;
    l.offsets = offsets;
    l.nargs = (uint32_t)nargs;
    lua_getiuservalue(L, 1, 1);
    lua_pushvalue(L, 2);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    if (kwb_cuda_plan_add(p, &l)) return luaL_error(L, "%s", kwb_last_error());
    lua_settop(L, 1);
    return 1;
}

/* plan:add_gemm { m =, n =, k =, a =, lda =, b =, ldb =, c =, ldc =, trans_a =, trans_b =,
 * alpha =, beta =, a_offset =, b_offset =, c_offset = } -> plan, or nil, message, info where
 * cuBLAS cannot be loaded or started. A wrong field raises; so does a gemm
 * kwb_cuda_gemm_check refuses. */
static const char *const gemm_fields[] = {"m", "n", "k", "a", "lda", "b", "ldb", "c", "ldc", "trans_a", "trans_b",
                                          "alpha", "beta", "a_offset", "b_offset", "c_offset", NULL};

/* A gemm field: an integer from lo to hi (sizes and leading dimensions are
 * cuBLAS's int; offsets are elements into a buffer, checked against its
 * length by kwb_cuda_plan_add_gemm, and may pass 2^31 in a buffer of many
 * experts' weights). */
static lua_Integer gemm_int(lua_State *L, const char *k, int required, lua_Integer def, lua_Integer lo,
                            lua_Integer hi) {
    int t = lua_getfield(L, 2, k);
    lua_Integer v = def;
    if (t == LUA_TNIL && required) luaL_error(L, "gemm field '%s' is required", k);
    if (t != LUA_TNIL) {
        if (!lua_isinteger(L, -1)) luaL_error(L, "gemm field '%s' must be an integer (got %s)", k, luaL_typename(L, -1));
        v = lua_tointeger(L, -1);
        if (v < lo) luaL_error(L, "gemm field '%s' must be an integer >= %I (got %I)", k, lo, v);
        if (v > hi) luaL_error(L, "gemm field '%s' must be at most %I, cuBLAS's int (got %I)", k, hi, v);
    }
    lua_pop(L, 1);
    return v;
}

static kwb_cuda_buffer *gemm_buf(lua_State *L, const char *k) {
    lua_getfield(L, 2, k);
    ldbuf *u = luaL_testudata(L, -1, DBUF_MT);
    if (!u) luaL_error(L, "gemm field '%s' must be a device buffer (got %s)", k, luaL_typename(L, -1));
    if (!u->b) luaL_error(L, "gemm field '%s' is a freed device buffer", k);
    lua_getiuservalue(L, 1, 1);   /* keep the buffer alive as long as the plan */
    lua_pushvalue(L, -2);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 2);
    return u->b;
}

static int gemm_flag(lua_State *L, const char *k) {
    int t = lua_getfield(L, 2, k);
    if (t != LUA_TNIL && t != LUA_TBOOLEAN) luaL_error(L, "gemm field '%s' must be true or false", k);
    int v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

static float gemm_num(lua_State *L, const char *k, float def) {
    int t = lua_getfield(L, 2, k);
    if (t != LUA_TNIL && t != LUA_TNUMBER) luaL_error(L, "gemm field '%s' must be a number", k);
    float v = t == LUA_TNIL ? def : (float)lua_tonumber(L, -1);
    lua_pop(L, 1);
    return v;
}

static int l_plan_add_gemm(lua_State *L) {
    kwb_cuda_plan *p = check_plan(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 2)) {   /* [plan, spec, key, value] */
        int known = 0;
        if (lua_type(L, -2) == LUA_TSTRING)
            for (int i = 0; gemm_fields[i]; i++) known = known || strcmp(lua_tostring(L, -2), gemm_fields[i]) == 0;
        if (!known)
            return luaL_error(L, "unknown gemm field '%s' (known: m, n, k, a, lda, b, ldb, c, ldc, trans_a, trans_b, "
                                 "alpha, beta, a_offset, b_offset, c_offset)", luaL_tolstring(L, -2, NULL));
        lua_pop(L, 1);
    }
    kwb_cuda_gemm g;
    memset(&g, 0, sizeof g);
    g.m = (int32_t)gemm_int(L, "m", 1, 0, 1, INT32_MAX);
    g.n = (int32_t)gemm_int(L, "n", 1, 0, 1, INT32_MAX);
    g.k = (int32_t)gemm_int(L, "k", 1, 0, 1, INT32_MAX);
    g.lda = (int32_t)gemm_int(L, "lda", 1, 0, 1, INT32_MAX);
    g.ldb = (int32_t)gemm_int(L, "ldb", 1, 0, 1, INT32_MAX);
    g.ldc = (int32_t)gemm_int(L, "ldc", 1, 0, 1, INT32_MAX);
    g.a_offset = (uint64_t)gemm_int(L, "a_offset", 0, 0, 0, LUA_MAXINTEGER);
    g.b_offset = (uint64_t)gemm_int(L, "b_offset", 0, 0, 0, LUA_MAXINTEGER);
    g.c_offset = (uint64_t)gemm_int(L, "c_offset", 0, 0, 0, LUA_MAXINTEGER);
    g.trans_a = gemm_flag(L, "trans_a");
    g.trans_b = gemm_flag(L, "trans_b");
    g.alpha = gemm_num(L, "alpha", 1.0f);
    g.beta = gemm_num(L, "beta", 0.0f);
    g.a = gemm_buf(L, "a");
    g.b = gemm_buf(L, "b");
    g.c = gemm_buf(L, "c");
    int rc = kwb_cuda_plan_add_gemm(p, &g);
    if (rc == KWB_EINVAL) return luaL_error(L, "%s", kwb_last_error());
    if (rc) return fail_run(L, "no-cublas");
    lua_settop(L, 1);
    return 1;
}

static int l_plan_index(lua_State *L) {
    luaL_checkudata(L, 1, PLAN_MT);
    return method(L, PLAN_MT, luaL_checkstring(L, 2));
}

static int l_plan_run(lua_State *L) {
    int rc = kwb_cuda_plan_run(check_plan(L, 1));
    if (rc) return fail_run(L, "launch-failed");
    lua_pushboolean(L, 1);
    return 1;
}

/* plan:poison_before({buffer...}): poisoned before every timed run */
static int l_plan_poison_before(lua_State *L) {
    kwb_cuda_plan *p = check_plan(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer n = luaL_len(L, 2);
    if (n > 64) return luaL_error(L, "at most 64 buffers to poison (got %d)", (int)n);
    kwb_cuda_buffer *bufs[64];
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 2, i);
        bufs[i - 1] = check_dbuf(L, -1);
        lua_getiuservalue(L, 1, 1);   /* keep the buffer alive as long as the plan */
        lua_pushvalue(L, -2);
        lua_pushboolean(L, 1);
        lua_rawset(L, -3);
        lua_pop(L, 2);
    }
    if (kwb_cuda_plan_poison_before(p, bufs, (uint32_t)n)) return luaL_error(L, "%s", kwb_last_error());
    lua_settop(L, 1);
    return 1;
}

/* plan:time(opts, cold, graph) -> stats with clocks */
static int l_plan_time(lua_State *L) {
    kwb_cuda_plan *p = check_plan(L, 1);
    kwb_time_opts o;
    kwb_lua_check_time_opts(L, 2, &o);
    int cold = lua_isnoneornil(L, 3) ? 1 : lua_toboolean(L, 3);
    int graph = lua_isnoneornil(L, 4) ? 1 : lua_toboolean(L, 4);
    kwb_stats st;
    kwb_cuda_clocks clk;
    int rc = kwb_cuda_plan_time(p, &o, cold, graph, &st, &clk);
    if (rc) return fail_run(L, "launch-failed");
    kwb_lua_push_stats(L, &st);
    lua_pushboolean(L, cold); lua_setfield(L, -2, "cold");
    lua_pushboolean(L, graph); lua_setfield(L, -2, "graph");
    if (clk.valid) {
        lua_createtable(L, 0, 7);
        lua_pushinteger(L, clk.sm_mhz_before); lua_setfield(L, -2, "sm_mhz_before");
        lua_pushinteger(L, clk.sm_mhz_after); lua_setfield(L, -2, "sm_mhz_after");
        lua_pushinteger(L, clk.sm_mhz_max); lua_setfield(L, -2, "sm_mhz_max");
        lua_pushinteger(L, clk.temp_before); lua_setfield(L, -2, "temp_before");
        lua_pushinteger(L, clk.temp_after); lua_setfield(L, -2, "temp_after");
        lua_pushinteger(L, (lua_Integer)clk.reasons_after); lua_setfield(L, -2, "reasons");
        lua_pushboolean(L, clk.throttled); lua_setfield(L, -2, "throttled");
        lua_setfield(L, -2, "clocks");
    }
    return 1;
}

/* plan:replay([cold]) -> seconds: one timed run as a graph (kwb_cuda_plan_replay) */
static int l_plan_replay(lua_State *L) {
    kwb_cuda_plan *p = check_plan(L, 1);
    int cold = lua_isnoneornil(L, 2) ? 1 : lua_toboolean(L, 2);
    double s = 0;
    if (kwb_cuda_plan_replay(p, cold, &s)) return fail_run(L, "launch-failed");
    lua_pushnumber(L, s);
    return 1;
}

static int l_plan_gc(lua_State *L) {
    lplan *u = luaL_checkudata(L, 1, PLAN_MT);
    kwb_cuda_plan_free(u->p);
    u->p = NULL;
    return 0;
}

static int l_plan_tostring(lua_State *L) {
    lplan *u = luaL_checkudata(L, 1, PLAN_MT);
    lua_pushstring(L, u->p ? "kwb.cuda.plan" : "kwb.cuda.plan (closed)");
    return 1;
}

/* ---- doctor ------------------------------------------------------------ */

static int l_clocks(lua_State *L) {
    int32_t mhz, temp;
    uint64_t reasons;
    int rc = kwb_cuda_clocks_read(&mhz, &temp, &reasons);
    if (rc) return fail_run(L, "no-nvml");
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, mhz); lua_setfield(L, -2, "sm_mhz");
    lua_pushinteger(L, temp); lua_setfield(L, -2, "temp");
    lua_pushinteger(L, (lua_Integer)reasons); lua_setfield(L, -2, "reasons");
    return 1;
}

static int l_measure_copy(lua_State *L) {
    lua_Integer bytes = luaL_checkinteger(L, 1), reps = luaL_optinteger(L, 2, 10);
    if (bytes < 4 || reps < 1) return luaL_error(L, "copy needs bytes >= 4 and reps >= 1");
    double s = 0;
    int rc = kwb_cuda_measure_copy((uint64_t)bytes, (uint32_t)reps, &s);
    if (rc) return fail_run(L, "run-failed");
    lua_pushnumber(L, s);
    return 1;
}

static int l_measure_fma(lua_State *L) {
    double r = 0;
    int rc = kwb_cuda_measure_fma(&r);
    if (rc) return fail_run(L, "run-failed");
    lua_pushnumber(L, r);
    return 1;
}

static int l_measure_bf16(lua_State *L) {
    lua_Integer n = luaL_optinteger(L, 1, 8192);
    if (n < 256 || n > 65536) return luaL_error(L, "matrix size must be in 256..65536 (got %d)", (int)n);
    double r = 0;
    const char *via = "";
    int rc = kwb_cuda_measure_bf16((uint32_t)n, lua_toboolean(L, 2), &r, &via);
    if (rc) return fail_run(L, "run-failed");
    lua_pushnumber(L, r);
    lua_pushstring(L, via);
    return 2;
}

static int l_set_build_dir(lua_State *L) {
    kwb_cuda_set_build_dir(luaL_checkstring(L, 1));
    return 0;
}

static int l_home(lua_State *L) {
    lua_pushstring(L, kwb_cuda_home());
    char buf[600];
    lua_pushstring(L, kwb_cuda_nvcc_path(buf, sizeof buf));
    return 2;
}

static int l_arch_valid(lua_State *L) {
    lua_pushboolean(L, kwb_cuda_arch_valid(luaL_checkstring(L, 1)));
    return 1;
}

void kwb_lua_open_cuda(lua_State *L) {
    static const luaL_Reg module_meta[] = {
        {"__index", l_module_index}, {"__gc", l_module_gc}, {"__close", l_module_gc},
        {"__tostring", l_module_tostring}, {NULL, NULL},
    };
    static const luaL_Reg fn_meta[] = {
        {"__index", l_fn_index}, {"__gc", l_fn_gc}, {"__tostring", l_fn_tostring}, {NULL, NULL},
    };
    static const luaL_Reg dbuf_meta[] = {
        {"__index", l_dbuf_index}, {"__len", l_dbuf_len}, {"__tostring", l_dbuf_tostring},
        {"__gc", l_dbuf_free}, {"__close", l_dbuf_free}, {NULL, NULL},
    };
    static const luaL_Reg dbuf_methods[] = {
        {"fill_uniform", l_dbuf_fill_uniform}, {"fill_normal", l_dbuf_fill_normal}, {"fill", l_dbuf_fill},
        {"poison", l_dbuf_poison}, {"zero", l_dbuf_zero}, {"upload", l_dbuf_upload},
        {"download", l_dbuf_download}, {"raw", l_dbuf_raw}, {"copy", l_dbuf_copy},
        {"checksum", l_dbuf_checksum}, {"digest", l_dbuf_digest}, {"poisoned", l_dbuf_poisoned},
        {"redzone", l_dbuf_redzone}, {"save", l_dbuf_save}, {"load", l_dbuf_load}, {"fill_normal_stream", l_dbuf_fill_normal_stream}, {"set_raw", l_dbuf_upload}, {"free", l_dbuf_free}, {NULL, NULL},
    };
    static const luaL_Reg plan_meta[] = {
        {"__index", l_plan_index}, {"__gc", l_plan_gc}, {"__close", l_plan_gc}, {"__tostring", l_plan_tostring}, {NULL, NULL},
    };
    static const luaL_Reg plan_methods[] = {
        {"add", l_plan_add}, {"add_gemm", l_plan_add_gemm}, {"run", l_plan_run}, {"time", l_plan_time}, {"replay", l_plan_replay},
        {"poison_before", l_plan_poison_before}, {NULL, NULL},
    };
    static const luaL_Reg fns[] = {
        {"cuda_nvrtc_version", l_nvrtc_version}, {"cuda_device_count", l_device_count},
        {"cuda_device_info", l_device_info}, {"cuda_mem_info", l_mem_info}, {"cuda_compile", l_compile},
        {"cuda_compile_many", l_compile_many}, {"cuda_prebuild", l_prebuild},
        {"cuda_prebuilds_running", l_prebuilds_running}, {"cuda_fn", l_fn}, {"cuda_buffer", l_dbuf_new},
        {"cuda_compare", l_compare}, {"cuda_redzones", l_redzones}, {"cuda_guard_layout", l_guard_layout}, {"cuda_checksum_host", l_checksum_host}, {"cuda_plan", l_plan_new},
        {"cuda_clocks", l_clocks}, {"cuda_measure_copy", l_measure_copy},
        {"cuda_measure_fma", l_measure_fma}, {"cuda_measure_bf16", l_measure_bf16},
        {"cuda_set_build_dir", l_set_build_dir}, {"cuda_home", l_home},
        {"cuda_arch_valid", l_arch_valid}, {"cuda_tensor_map", l_tmap_new}, {NULL, NULL},
    };
    if (luaL_newmetatable(L, MODULE_MT)) luaL_setfuncs(L, module_meta, 0);
    lua_pop(L, 1);
    if (luaL_newmetatable(L, FN_MT)) luaL_setfuncs(L, fn_meta, 0);
    lua_pop(L, 1);
    if (luaL_newmetatable(L, DBUF_MT)) {
        luaL_setfuncs(L, dbuf_meta, 0);
        luaL_newlib(L, dbuf_methods);
        lua_setfield(L, -2, "methods");
    }
    lua_pop(L, 1);
    if (luaL_newmetatable(L, PINNED_MT)) {
        static const luaL_Reg pinned_meta[] = {{"__gc", l_pinned_gc}, {"__close", l_pinned_gc}, {NULL, NULL}};
        luaL_setfuncs(L, pinned_meta, 0);
    }
    lua_pop(L, 1);
    if (luaL_newmetatable(L, TMAP_MT)) {
        static const luaL_Reg tmap_meta[] = {{"__tostring", l_tmap_tostring}, {NULL, NULL}};
        luaL_setfuncs(L, tmap_meta, 0);
    }
    lua_pop(L, 1);
    if (luaL_newmetatable(L, PLAN_MT)) {
        luaL_setfuncs(L, plan_meta, 0);
        luaL_newlib(L, plan_methods);
        lua_setfield(L, -2, "methods");
    }
    lua_pop(L, 1);
    luaL_setfuncs(L, fns, 0);
    lua_pushstring(L, kwb_cuda_builtin_source);
    lua_setfield(L, -2, "cuda_builtin_source");
    lua_pushstring(L, kwb_cuda_wmma_source);
    lua_setfield(L, -2, "cuda_wmma_source");
}
