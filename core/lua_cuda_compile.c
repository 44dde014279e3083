/* lua_cuda_compile.c: compile specs read from Lua, NVRTC and nvcc builds
 * (one, many on threads, or started in the background), the modules they
 * make and the kernels (or host launchers) found in them. */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "lua_cuda.h"

typedef struct { kwb_cuda_module *m; } lmodule;

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

/* ---- modules and their kernels --------------------------------------- */

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

void kwb_lua_cuda_open_compile(lua_State *L) {
    static const luaL_Reg module_meta[] = {
        {"__index", l_module_index}, {"__gc", l_module_gc}, {"__close", l_module_gc},
        {"__tostring", l_module_tostring}, {NULL, NULL},
    };
    static const luaL_Reg fn_meta[] = {
        {"__index", l_fn_index}, {"__gc", l_fn_gc}, {"__tostring", l_fn_tostring}, {NULL, NULL},
    };
    static const luaL_Reg fns[] = {
        {"cuda_compile", l_compile}, {"cuda_compile_many", l_compile_many}, {"cuda_prebuild", l_prebuild},
        {"cuda_prebuilds_running", l_prebuilds_running}, {"cuda_fn", l_fn}, {NULL, NULL},
    };
    if (luaL_newmetatable(L, MODULE_MT)) luaL_setfuncs(L, module_meta, 0);
    lua_pop(L, 1);
    if (luaL_newmetatable(L, FN_MT)) luaL_setfuncs(L, fn_meta, 0);
    lua_pop(L, 1);
    luaL_setfuncs(L, fns, 0);
}
