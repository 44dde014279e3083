/* lua_host.c: the host backend's Lua bindings: modules and callable kernels */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "kwb.h"
#include "lua_bind.h"

#define MODULE_MT "kwb.host.module"
#define FN_MT "kwb.host.fn"
#define SANDBOX_MT "kwb.host.sandbox"

typedef struct { kwb_host_module *m; } lmodule;
typedef struct { kwb_host_fn *f; } lfn;

static const char *const ctype_names[] = {"void", "i32", "u32", "i64", "u64", "f32", "f64", "ptr", NULL};

/* Fill a NULL-terminated string array from the array table at idx (nil: empty).
 * The strings stay owned by the table, which the caller keeps on the stack. */
static const char **check_strv(lua_State *L, int idx, const char *what) {
    if (lua_isnoneornil(L, idx)) return NULL;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_Integer n = luaL_len(L, idx);
    const char **v = lua_newuserdatauv(L, sizeof *v * (size_t)(n + 1), 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, idx, i);
        if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "%s[%d] must be a string", what, (int)i);
        v[i - 1] = lua_tostring(L, -1);
        lua_pop(L, 1);   /* still referenced by the table */
    }
    v[n] = NULL;
    return v;
}

/* The build the arguments (source, name, cc, flags, defines, build_dir) name;
 * its strings stay owned by the arguments on the stack. */
static void check_build(lua_State *L, kwb_host_build *b) {
    b->source = luaL_checkstring(L, 1);
    b->name = luaL_optstring(L, 2, "kernel.c");
    b->cc = luaL_optstring(L, 3, NULL);
    b->flags = check_strv(L, 4, "flags");
    b->defines = check_strv(L, 5, "defines");
    b->build_dir = luaL_checkstring(L, 6);
    b->no_load = lua_toboolean(L, 7);
}

/* nil, msg, { code = "compile-error", log = } or { code = "build-failed" }; frees log. */
static int build_failure(lua_State *L, int rc, char *log) {
    if (rc == KWB_ECOMPILE) {
        kwb_lua_fail(L, "compile-error", kwb_last_error());
        lua_pushstring(L, log ? log : "");
        lua_setfield(L, -2, "log");
        free(log);
        return 3;
    }
    free(log);
    return kwb_lua_fail(L, "build-failed", kwb_last_error());
}

static int l_compile(lua_State *L) {
    kwb_host_build b;
    check_build(L, &b);
    lmodule *u = lua_newuserdatauv(L, sizeof *u, 0);   /* closed until compiled */
    u->m = NULL;
    luaL_setmetatable(L, MODULE_MT);
    char *log = NULL;
    int rc = kwb_host_compile(&b, &u->m, &log);
    if (rc == 0) return 1;
    return build_failure(L, rc, log);
}

/* core.host_preprocess(source, name, cc, flags, defines, build_dir) -> the
 * preprocessed text | nil, message, { code = "compile-error", log = } */
static int l_preprocess(lua_State *L) {
    kwb_host_build b;
    check_build(L, &b);
    char *text = NULL, *log = NULL;
    int rc = kwb_host_preprocess(&b, &text, &log);
    if (rc == 0) {
        lua_pushstring(L, text);
        free(text);
        return 1;
    }
    return build_failure(L, rc, log);
}

/* Append name to the array at the top of the stack. */
static void push_name(lua_State *L, const char *name, size_t len) {
    lua_pushlstring(L, name, len);
    lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
}

/* core.host_symbols(path) -> { undefined = { names }, data = { names } } |
 * nil, message, info. Undefined: nm types U, w, v; data: writable objects
 * (D d B b G g S s V); names without their @version. */
static int l_symbols(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    char *text = NULL;
    if (kwb_host_symbols(path, &text)) return kwb_lua_fail(L, "no-symbols", kwb_last_error());
    lua_createtable(L, 0, 2);
    lua_newtable(L);   /* [syms, undefined] */
    lua_newtable(L);   /* [syms, undefined, data] */
    for (char *line = text; line && *line;) {
        char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        size_t name_len = strcspn(line, " \t\n");
        if (name_len < n && line[name_len] == ' ' && name_len + 1 < n) {
            char type = line[name_len + 1];
            size_t base = strcspn(line, "@ \t\n");
            if (base > name_len) base = name_len;
            if (strchr("Uwv", type)) {
                lua_pushvalue(L, -2);
                push_name(L, line, base);
                lua_pop(L, 1);
            } else if (strchr("DdBbGgSsV", type)) {
                push_name(L, line, base);
            }
        }
        line = end ? end + 1 : NULL;
    }
    free(text);
    lua_setfield(L, -3, "data");
    lua_setfield(L, -2, "undefined");
    return 1;
}

static kwb_host_module *check_module(lua_State *L, int idx) {
    lmodule *u = luaL_checkudata(L, idx, MODULE_MT);
    if (!u->m) luaL_error(L, "host module is closed");
    return u->m;
}

static int l_module_index(lua_State *L) {
    kwb_host_module *m = check_module(L, 1);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "hash") == 0) lua_pushstring(L, kwb_host_module_hash(m));
    else if (strcmp(k, "path") == 0) lua_pushstring(L, kwb_host_module_path(m));
    else if (strcmp(k, "log") == 0) lua_pushstring(L, kwb_host_module_log(m));
    else if (strcmp(k, "cached") == 0) lua_pushboolean(L, kwb_host_module_cached(m));
    else lua_pushnil(L);
    return 1;
}

static int l_module_gc(lua_State *L) {
    lmodule *u = luaL_checkudata(L, 1, MODULE_MT);
    kwb_host_module_free(u->m);
    u->m = NULL;
    return 0;
}

static int l_module_tostring(lua_State *L) {
    lmodule *u = luaL_checkudata(L, 1, MODULE_MT);
    if (!u->m) lua_pushliteral(L, "kwb.host.module (closed)");
    else lua_pushfstring(L, "kwb.host.module %s", kwb_host_module_path(u->m));
    return 1;
}

/* core.host_fn(module, name, ret, {args}) */
static int l_fn(lua_State *L) {
    kwb_host_module *m = check_module(L, 1);
    const char *name = luaL_checkstring(L, 2);
    kwb_ctype ret = (kwb_ctype)luaL_checkoption(L, 3, NULL, ctype_names);
    luaL_checktype(L, 4, LUA_TTABLE);
    lua_Integer n = luaL_len(L, 4);
    if (n > 64) return luaL_error(L, "%s: more than 64 arguments", name);
    kwb_ctype args[64];
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 4, i);
        args[i - 1] = (kwb_ctype)luaL_checkoption(L, -1, NULL, ctype_names);
        lua_pop(L, 1);
    }
    lfn *u = lua_newuserdatauv(L, sizeof *u, 1);
    u->f = NULL;
    luaL_setmetatable(L, FN_MT);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);   /* the module lives as long as its functions */
    u->f = kwb_host_fn_new(m, name, ret, args, (uint32_t)n);
    if (!u->f) return kwb_lua_fail(L, "no-symbol", kwb_last_error());
    return 1;
}

static kwb_host_fn *check_fn(lua_State *L, int idx) {
    lfn *u = luaL_checkudata(L, idx, FN_MT);
    if (!u->f) luaL_error(L, "host function is closed");
    return u->f;
}

/* Convert n Lua values from index first on into the argument types. A
 * pointer is nil (NULL), a light userdata or a buffer: with bufs, each
 * pointer argument's buffer goes there (NULL otherwise) and its value is
 * left NULL, for a sandbox to place; without, a buffer passes its data. */
static void convert_args(lua_State *L, const kwb_ctype *types, uint32_t n, int first, kwb_value *v,
                         kwb_buffer **bufs) {
    for (uint32_t i = 0; i < n; i++) {
        int idx = first + (int)i;
        if (bufs) bufs[i] = NULL;
        switch (types[i]) {
        case KWB_C_I32: v[i].i32 = (int32_t)luaL_checkinteger(L, idx); break;
        case KWB_C_U32: v[i].u32 = (uint32_t)luaL_checkinteger(L, idx); break;
        case KWB_C_I64: v[i].i64 = (int64_t)luaL_checkinteger(L, idx); break;
        case KWB_C_U64: v[i].u64 = (uint64_t)luaL_checkinteger(L, idx); break;
        case KWB_C_F32: v[i].f32 = (float)luaL_checknumber(L, idx); break;
        case KWB_C_F64: v[i].f64 = luaL_checknumber(L, idx); break;
        case KWB_C_PTR:
            v[i].ptr = NULL;
            if (lua_isnil(L, idx)) break;
            if (bufs) bufs[i] = kwb_lua_checkbuffer(L, idx);
            else if (lua_islightuserdata(L, idx)) v[i].ptr = lua_touserdata(L, idx);
            else v[i].ptr = kwb_buffer_data(kwb_lua_checkbuffer(L, idx));
            break;
        case KWB_C_VOID: break;
        }
    }
}

/* The function's arguments from index first on (their count checked). */
static void check_args(lua_State *L, kwb_host_fn *f, int first, kwb_value *v) {
    uint32_t n = kwb_host_fn_nargs(f);
    int given = lua_gettop(L) - first + 1;
    if (given != (int)n) luaL_error(L, "kernel takes %d arguments, got %d", (int)n, given);
    kwb_ctype types[64];
    for (uint32_t i = 0; i < n; i++) types[i] = kwb_host_fn_arg(f, i);
    convert_args(L, types, n, first, v, NULL);
}

static int l_fn_call(lua_State *L) {
    kwb_host_fn *f = check_fn(L, 1);
    kwb_value args[64], ret;
    check_args(L, f, 2, args);
    kwb_host_fn_call(f, args, &ret);
    switch (kwb_host_fn_ret(f)) {
    case KWB_C_VOID: return 0;
    case KWB_C_I32: lua_pushinteger(L, ret.i32); break;
    case KWB_C_U32: lua_pushinteger(L, ret.u32); break;
    case KWB_C_I64: lua_pushinteger(L, ret.i64); break;
    case KWB_C_U64: lua_pushinteger(L, (lua_Integer)ret.u64); break;
    case KWB_C_F32: lua_pushnumber(L, ret.f32); break;
    case KWB_C_F64: lua_pushnumber(L, ret.f64); break;
    case KWB_C_PTR: lua_pushlightuserdata(L, ret.ptr); break;
    }
    return 1;
}

/* fn:time(opts, args...) -> stats */
static int l_fn_time(lua_State *L) {
    kwb_host_fn *f = check_fn(L, 1);
    kwb_time_opts o;
    kwb_lua_check_time_opts(L, 2, &o);
    kwb_value args[64];
    check_args(L, f, 3, args);
    kwb_stats st;
    if (kwb_host_fn_time(f, args, &o, &st)) return kwb_lua_fail(L, "timing-failed", kwb_last_error());
    kwb_lua_push_stats(L, &st);
    return 1;
}

static int l_fn_gc(lua_State *L) {
    lfn *u = luaL_checkudata(L, 1, FN_MT);
    kwb_host_fn_free(u->f);
    u->f = NULL;
    return 0;
}

static int l_fn_tostring(lua_State *L) {
    lfn *u = luaL_checkudata(L, 1, FN_MT);
    lua_pushfstring(L, "kwb.host.fn (%d arguments)", u->f ? (int)kwb_host_fn_nargs(u->f) : -1);
    return 1;
}

/* ---- sandboxes ---------------------------------------------------------- */

typedef struct { kwb_sandbox *s; uint32_t nargs; kwb_ctype args[64]; } lsandbox;

static const char *const sandbox_codes[] = {"ok", "crashed", "forbidden", "timeout"};

/* core.host_sandbox(path, symbol, ret, {args} [, { timeout =, output = }])
 * -> a sandbox running that function of the shared object at path | nil,
 * message, { code = "no-symbol" | "forbidden" | "timeout" | "crashed" (its
 * module's doing, while it loaded) | "sandbox-failed" }. timeout: the CPU
 * seconds its module's initialisers may take (default 60); output: true to
 * give it this process's stdout and stderr (a worker's, which its pool
 * captures), else /dev/null. */
static int l_sandbox(lua_State *L) {
    const char *path = luaL_checkstring(L, 1), *name = luaL_checkstring(L, 2);
    kwb_ctype ret = (kwb_ctype)luaL_checkoption(L, 3, NULL, ctype_names);
    luaL_checktype(L, 4, LUA_TTABLE);
    kwb_sandbox_opts o = {.limit_s = 60, .keep_output = 0};
    if (!lua_isnoneornil(L, 5)) {
        luaL_checktype(L, 5, LUA_TTABLE);
        if (lua_getfield(L, 5, "timeout") != LUA_TNIL) o.limit_s = luaL_checknumber(L, -1);
        lua_getfield(L, 5, "output");
        o.keep_output = lua_toboolean(L, -1);
        lua_pop(L, 2);
        if (!(o.limit_s > 0)) return luaL_error(L, "a sandbox's timeout is a positive number of seconds");
    }
    lua_Integer n = luaL_len(L, 4);
    if (n > 64) return luaL_error(L, "%s: more than 64 arguments", name);
    lsandbox *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->s = NULL;
    u->nargs = (uint32_t)n;
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 4, i);
        u->args[i - 1] = (kwb_ctype)luaL_checkoption(L, -1, NULL, ctype_names);
        lua_pop(L, 1);
    }
    luaL_setmetatable(L, SANDBOX_MT);
    kwb_sandbox_result r;
    int rc = kwb_sandbox_start(path, name, ret, u->args, u->nargs, &o, &u->s, &r);
    if (rc == KWB_ERUN) return kwb_lua_fail(L, sandbox_codes[r.outcome], kwb_last_error());
    if (rc) return kwb_lua_fail(L, rc == KWB_ENOSYM ? "no-symbol" : "sandbox-failed", kwb_last_error());
    return 1;
}

static int push_sandbox_result(lua_State *L, const kwb_sandbox_result *r) {
    if (r->outcome != KWB_SANDBOX_OK) {
        kwb_lua_fail(L, sandbox_codes[r->outcome], r->detail);
        lua_pushnumber(L, r->wall_s);
        lua_setfield(L, -2, "wall");
        return 3;
    }
    lua_createtable(L, 0, 3);
    lua_pushnumber(L, r->cpu_s);
    lua_setfield(L, -2, "cpu");
    lua_pushnumber(L, r->wall_s);
    lua_setfield(L, -2, "wall");
    lua_pushnumber(L, r->between_s);
    lua_setfield(L, -2, "between");
    return 1;
}

/* sb:call(limit, args...) -> { cpu =, wall =, between = } | nil, why,
 * { code = "crashed" | "forbidden" | "timeout" }: buffers as pointers (nil
 * for NULL), numbers as scalars; the limit in CPU seconds. */
static int l_sandbox_call(lua_State *L) {
    lsandbox *u = luaL_checkudata(L, 1, SANDBOX_MT);
    if (!u->s) return luaL_error(L, "the sandbox is closed");
    double limit = luaL_checknumber(L, 2);
    int given = lua_gettop(L) - 2;
    if (given != (int)u->nargs) return luaL_error(L, "kernel takes %d arguments, got %d", (int)u->nargs, given);
    kwb_value v[64];
    kwb_buffer *bufs[64];
    convert_args(L, u->args, u->nargs, 3, v, bufs);
    kwb_sandbox_result r;
    if (kwb_sandbox_call(u->s, v, bufs, limit, &r)) return luaL_error(L, "%s", kwb_last_error());
    return push_sandbox_result(L, &r);
}

/* sb:calls(limit, { { args... }, ... }) -> as sb:call, cpu the total: up to
 * 64 calls queued at once and run back to back (each list holds the
 * kernel's arguments, n = their count when a pointer is nil). */
static int l_sandbox_calls(lua_State *L) {
    lsandbox *u = luaL_checkudata(L, 1, SANDBOX_MT);
    if (!u->s) return luaL_error(L, "the sandbox is closed");
    double limit = luaL_checknumber(L, 2);
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_Integer count = luaL_len(L, 3);
    if (count < 1 || count > 64) return luaL_error(L, "a sandbox takes 1 to 64 calls at once, not %d", (int)count);
    kwb_value *v = lua_newuserdatauv(L, sizeof *v * (size_t)count * (u->nargs + 1), 0);
    kwb_buffer **bufs = lua_newuserdatauv(L, sizeof *bufs * (size_t)count * (u->nargs + 1), 0);
    for (lua_Integer j = 1; j <= count; j++) {
        int top = lua_gettop(L);
        lua_rawgeti(L, 3, j);
        luaL_checktype(L, -1, LUA_TTABLE);
        for (uint32_t i = 1; i <= u->nargs; i++) lua_rawgeti(L, top + 1, i);
        convert_args(L, u->args, u->nargs, top + 2, v + (j - 1) * u->nargs, bufs + (j - 1) * u->nargs);
        lua_settop(L, top);
    }
    kwb_sandbox_result r;
    if (kwb_sandbox_calls(u->s, (uint32_t)count, v, bufs, limit, &r)) return luaL_error(L, "%s", kwb_last_error());
    return push_sandbox_result(L, &r);
}

static int l_sandbox_pid(lua_State *L) {
    lsandbox *u = luaL_checkudata(L, 1, SANDBOX_MT);
    lua_pushinteger(L, u->s ? kwb_sandbox_pid(u->s) : 0);
    return 1;
}

static int l_sandbox_gc(lua_State *L) {
    lsandbox *u = luaL_checkudata(L, 1, SANDBOX_MT);
    kwb_sandbox_free(u->s);
    u->s = NULL;
    return 0;
}

void kwb_lua_open_host(lua_State *L) {
    static const luaL_Reg module_meta[] = {
        {"__index", l_module_index}, {"__gc", l_module_gc}, {"__close", l_module_gc},
        {"__tostring", l_module_tostring}, {NULL, NULL},
    };
    static const luaL_Reg fn_meta[] = {
        {"__call", l_fn_call}, {"__gc", l_fn_gc}, {"__tostring", l_fn_tostring}, {NULL, NULL},
    };
    static const luaL_Reg fn_methods[] = {{"time", l_fn_time}, {NULL, NULL}};
    if (luaL_newmetatable(L, MODULE_MT)) luaL_setfuncs(L, module_meta, 0);
    lua_pop(L, 1);
    if (luaL_newmetatable(L, FN_MT)) {
        luaL_setfuncs(L, fn_meta, 0);
        luaL_newlib(L, fn_methods);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, l_compile);
    lua_setfield(L, -2, "host_compile");
    lua_pushcfunction(L, l_fn);
    lua_setfield(L, -2, "host_fn");
    lua_pushcfunction(L, l_preprocess);
    lua_setfield(L, -2, "host_preprocess");
    lua_pushcfunction(L, l_symbols);
    lua_setfield(L, -2, "host_symbols");
    static const luaL_Reg sandbox_meta[] = {
        {"__gc", l_sandbox_gc}, {"__close", l_sandbox_gc}, {NULL, NULL},
    };
    static const luaL_Reg sandbox_methods[] = {
        {"call", l_sandbox_call}, {"calls", l_sandbox_calls}, {"pid", l_sandbox_pid}, {"close", l_sandbox_gc}, {NULL, NULL},
    };
    if (luaL_newmetatable(L, SANDBOX_MT)) {
        luaL_setfuncs(L, sandbox_meta, 0);
        luaL_newlib(L, sandbox_methods);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, l_sandbox);
    lua_setfield(L, -2, "host_sandbox");
}
