/* lua_worker.c: Lua bindings of worker processes (kwb.core.worker_*), for the
 * pool in lua/kwb/runners/workers.lua and the worker loop in lua/kwb/worker/init.lua */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "kwb.h"
#include "lua_bind.h"

#define WORKER_MT "kwb.worker"

typedef struct { kwb_worker *w; } lworker;

static const char **strv_field(lua_State *L, int idx, const char *field) {
    lua_getfield(L, idx, field);   /* left on the stack: it owns the strings */
    if (lua_isnil(L, -1)) return NULL;
    if (!lua_istable(L, -1)) luaL_error(L, "worker option '%s' must be a list of strings", field);
    lua_Integer n = luaL_len(L, -1);
    const char **v = lua_newuserdatauv(L, sizeof *v * (size_t)(n + 1), 0);
    lua_insert(L, -2);   /* [array, table] */
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "worker option %s[%d] must be a string", field, (int)i);
        v[i - 1] = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    v[n] = NULL;
    return v;
}

static uint64_t num_field(lua_State *L, int idx, const char *field, uint64_t def) {
    lua_getfield(L, idx, field);
    uint64_t v = def;
    if (!lua_isnil(L, -1)) {
        if (!lua_isnumber(L, -1) || lua_tonumber(L, -1) < 0)
            luaL_error(L, "worker option '%s' must be a number >= 0", field);
        v = (uint64_t)lua_tonumber(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

static const char *str_field(lua_State *L, int idx, const char *field, const char *def) {
    lua_getfield(L, idx, field);
    const char *s = lua_isnil(L, -1) ? def : luaL_checkstring(L, -1);
    lua_pop(L, 1);   /* the options table keeps the string alive */
    return s;
}

/* core.worker_start { argv =, env =, exe =, scratch_in =, lock =, cpu =, fsize =,
 *                     nproc =, as =, output_cap =, uid =, gid =, isolate =, sandbox_uid = } */
static int l_start(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    kwb_worker_opts o;
    kwb_worker_opts_default(&o);
    static const char *known[] = {"argv", "env", "exe", "scratch_in", "lock", "cpu", "fsize", "nproc",
                                  "as", "output_cap", "uid", "gid", "isolate", "sandbox_uid", NULL};
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        lua_pop(L, 1);
        int ok = 0;
        if (lua_type(L, -1) == LUA_TSTRING)
            for (int i = 0; known[i]; i++) ok |= strcmp(known[i], lua_tostring(L, -1)) == 0;
        if (!ok) return luaL_error(L, "unknown worker option '%s'", luaL_tolstring(L, -1, NULL));
    }
    o.argv = strv_field(L, 1, "argv");
    o.env = strv_field(L, 1, "env");
    if (!o.argv || !o.argv[0]) return luaL_error(L, "worker option 'argv' needs at least the program name");
    o.exe = str_field(L, 1, "exe", NULL);
    o.scratch_parent = str_field(L, 1, "scratch_in", o.scratch_parent);
    o.lock_path = str_field(L, 1, "lock", NULL);
    o.cpu_s = num_field(L, 1, "cpu", o.cpu_s);
    o.fsize = num_field(L, 1, "fsize", o.fsize);
    o.nproc = num_field(L, 1, "nproc", o.nproc);
    o.as = num_field(L, 1, "as", o.as);
    o.output_cap = num_field(L, 1, "output_cap", o.output_cap);
    o.uid = (int32_t)num_field(L, 1, "uid", (uint64_t)o.uid);
    o.gid = (int32_t)num_field(L, 1, "gid", (uint64_t)o.gid);
    lua_getfield(L, 1, "sandbox_uid");
    if (!lua_isnil(L, -1)) o.sandbox_uid = (int32_t)luaL_checkinteger(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, 1, "isolate");
    if (!lua_isnil(L, -1)) o.isolate = lua_toboolean(L, -1);
    lua_pop(L, 1);
    lworker *u = lua_newuserdatauv(L, sizeof *u, 0);   /* closed until started */
    u->w = NULL;
    luaL_setmetatable(L, WORKER_MT);
    if (kwb_worker_start(&o, &u->w) != 0) return kwb_lua_fail(L, "worker-start", kwb_last_error());
    return 1;
}

static kwb_worker *check_worker(lua_State *L, int idx) {
    lworker *u = luaL_checkudata(L, idx, WORKER_MT);
    if (!u->w) luaL_error(L, "worker is closed");
    return u->w;
}

static void push_signal(lua_State *L, int sig) {
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev) lua_pushfstring(L, "SIG%s", abbrev);
    else lua_pushfstring(L, "signal %d", sig);
}

/* w:status() -> { pid, alive, exit_code, signal ("SIGSEGV"), signal_number,
 * description, killed, isolated, uid } */
static int l_status(lua_State *L) {
    kwb_worker *w = check_worker(L, 1);
    kwb_worker_state st;
    kwb_worker_status(w, &st);
    lua_createtable(L, 0, 9);
    lua_pushinteger(L, st.pid);
    lua_setfield(L, -2, "pid");
    lua_pushboolean(L, st.alive);
    lua_setfield(L, -2, "alive");
    if (st.exit_code >= 0) {
        lua_pushinteger(L, st.exit_code);
        lua_setfield(L, -2, "exit_code");
    }
    if (st.signal) {
        push_signal(L, st.signal);
        lua_setfield(L, -2, "signal");
        lua_pushinteger(L, st.signal);
        lua_setfield(L, -2, "signal_number");
        lua_pushstring(L, strsignal(st.signal));
        lua_setfield(L, -2, "description");
    }
    lua_pushboolean(L, st.killed);
    lua_setfield(L, -2, "killed");
    lua_pushboolean(L, st.isolated);
    lua_setfield(L, -2, "isolated");
    lua_pushinteger(L, st.uid);
    lua_setfield(L, -2, "uid");
    return 1;
}

static int l_send(lua_State *L) {
    kwb_worker *w = check_worker(L, 1);
    size_t len;
    const char *s = luaL_checklstring(L, 2, &len);
    if (kwb_worker_send(w, s, len) != 0) return kwb_lua_fail(L, "worker-gone", kwb_last_error());
    lua_pushboolean(L, 1);
    return 1;
}

static int l_kill(lua_State *L) {
    kwb_worker_kill(check_worker(L, 1));
    return 0;
}

/* w:output() -> captured text, bytes written in all */
static int l_output(lua_State *L) {
    kwb_worker *w = check_worker(L, 1);
    size_t len;
    uint64_t total;
    char *s = kwb_worker_take_output(w, &len, &total);
    if (!s) return luaL_error(L, "out of memory");
    lua_pushlstring(L, s, len);
    free(s);
    lua_pushinteger(L, (lua_Integer)total);
    return 2;
}

static int l_index(lua_State *L) {
    kwb_worker *w = check_worker(L, 1);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "scratch") == 0) { lua_pushstring(L, kwb_worker_scratch(w)); return 1; }
    if (strcmp(k, "pid") == 0) {
        kwb_worker_state st;
        kwb_worker_status(w, &st);
        lua_pushinteger(L, st.pid);
        return 1;
    }
    lua_getmetatable(L, 1);
    lua_getfield(L, -1, "methods");
    lua_getfield(L, -1, k);
    return 1;
}

static int l_gc(lua_State *L) {
    lworker *u = luaL_checkudata(L, 1, WORKER_MT);
    kwb_worker_free(u->w);
    u->w = NULL;
    return 0;
}

static int l_tostring(lua_State *L) {
    lworker *u = luaL_checkudata(L, 1, WORKER_MT);
    if (!u->w) { lua_pushliteral(L, "kwb.worker (closed)"); return 1; }
    kwb_worker_state st;
    kwb_worker_status(u->w, &st);
    lua_pushfstring(L, "kwb.worker %d (%s)", (int)st.pid, st.alive ? "alive" : "gone");
    return 1;
}

/* core.worker_wait({w...}, timeout) -> index, "message", text | index, "exit" | nil (timeout) */
static int l_wait(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    double timeout = luaL_optnumber(L, 2, -1);
    lua_Integer n = luaL_len(L, 1);
    if (n < 1 || n > 4096) return luaL_argerror(L, 1, "needs 1 to 4096 workers");
    kwb_worker **ws = lua_newuserdatauv(L, sizeof *ws * (size_t)n, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 1, i);
        ws[i - 1] = check_worker(L, -1);
        lua_pop(L, 1);
    }
    uint32_t which = 0;
    char *msg = NULL;
    size_t len = 0;
    int ev = kwb_worker_wait(ws, (uint32_t)n, timeout, &which, &msg, &len);
    if (ev < 0) return luaL_error(L, "%s", kwb_last_error());
    if (ev == KWB_WORKER_TIMEOUT) { lua_pushnil(L); return 1; }
    lua_pushinteger(L, (lua_Integer)which + 1);
    if (ev == KWB_WORKER_MESSAGE) {
        lua_pushliteral(L, "message");
        lua_pushlstring(L, msg, len);
        kwb_free(msg);
        return 3;
    }
    lua_pushliteral(L, "exit");
    return 2;
}

/* ---- inside a worker ------------------------------------------------------ */

static int l_recv(lua_State *L) {
    char *msg;
    size_t len;
    int r = kwb_worker_recv(&msg, &len);
    if (r < 0) return kwb_lua_fail(L, "worker-channel", kwb_last_error());
    if (r == 0) { lua_pushnil(L); return 1; }
    lua_pushlstring(L, msg, len);
    free(msg);
    return 1;
}

static int l_reply(lua_State *L) {
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    if (kwb_worker_reply(s, len) != 0) return kwb_lua_fail(L, "worker-channel", kwb_last_error());
    lua_pushboolean(L, 1);
    return 1;
}

static int l_lock(lua_State *L) {
    int r = kwb_worker_lock(lua_toboolean(L, 1));
    if (r < 0) return kwb_lua_fail(L, "device-lock", kwb_last_error());
    lua_pushboolean(L, r);
    return 1;
}

static int l_reap(lua_State *L) {
    lua_pushinteger(L, kwb_worker_reap());
    return 1;
}

/* core.worker_sweep(parent [, min_age_s = 10]) -> how many stale scratch directories were removed | nil, msg */
static int l_sweep(lua_State *L) {
    int n = kwb_worker_sweep(luaL_checkstring(L, 1), luaL_optnumber(L, 2, 10));
    if (n < 0) return kwb_lua_fail(L, "scratch-sweep", kwb_last_error());
    lua_pushinteger(L, n);
    return 1;
}

static int l_signal_name(lua_State *L) {
    push_signal(L, (int)luaL_checkinteger(L, 1));
    return 1;
}

void kwb_lua_open_worker(lua_State *L) {
    static const luaL_Reg meta[] = {
        {"__index", l_index}, {"__gc", l_gc}, {"__close", l_gc}, {"__tostring", l_tostring}, {NULL, NULL},
    };
    static const luaL_Reg methods[] = {
        {"status", l_status}, {"send", l_send}, {"kill", l_kill}, {"output", l_output}, {"close", l_gc},
        {NULL, NULL},
    };
    static const luaL_Reg fns[] = {
        {"worker_start", l_start}, {"worker_wait", l_wait}, {"worker_recv", l_recv},
        {"worker_reply", l_reply}, {"worker_lock", l_lock}, {"worker_reap", l_reap},
        {"worker_sweep", l_sweep}, {"signal_name", l_signal_name}, {NULL, NULL},
    };
    if (luaL_newmetatable(L, WORKER_MT)) {
        luaL_setfuncs(L, meta, 0);
        luaL_newlib(L, methods);
        lua_setfield(L, -2, "methods");
    }
    lua_pop(L, 1);
    luaL_setfuncs(L, fns, 0);
    lua_pushinteger(L, KWB_WORKER_MAX_FRAME);   /* kwb.worker sizes its frames against it */
    lua_setfield(L, -2, "worker_max_frame");
}
