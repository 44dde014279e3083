/* lua_os.c: Lua bindings of the operating-system services (core/os.c):
 * kwb.core.flock, environ, cwd, uid, mkdirs, isatty, executable, machine */
#include <lauxlib.h>
#include <lua.h>
#include <unistd.h>

#include "kwb.h"
#include "lua_bind.h"
#include "os.h"

/* core.flock(path) -> lock (held until lock:unlock(), close or gc) | nil, msg, info:
 * the device lock from the main process (the workers take it on fd 5). */
#define LOCK_MT "kwb.flock"
typedef struct { int fd; } lflock;

static int l_flock(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    lflock *u = lua_newuserdatauv(L, sizeof *u, 0);   /* closed until locked */
    u->fd = -1;
    luaL_setmetatable(L, LOCK_MT);
    int fd = kwb_os_flock(path);
    if (fd < 0) return kwb_lua_fail(L, "device-lock", kwb_last_error());
    u->fd = fd;
    return 1;
}

static int l_unlock(lua_State *L) {
    lflock *u = luaL_checkudata(L, 1, LOCK_MT);
    if (u->fd >= 0) close(u->fd);   /* closing the only descriptor releases the lock */
    u->fd = -1;
    return 0;
}

static int l_lock_tostring(lua_State *L) {
    lflock *u = luaL_checkudata(L, 1, LOCK_MT);
    lua_pushstring(L, u->fd >= 0 ? "kwb.flock (held)" : "kwb.flock (released)");
    return 1;
}

/* core.environ() -> { "NAME=VALUE", ... } of this process */
static int l_environ(lua_State *L) {
    char **env = kwb_os_environ();
    lua_newtable(L);
    for (int i = 0; env && env[i]; i++) {
        lua_pushstring(L, env[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int l_cwd(lua_State *L) {
    char buf[4096];
    if (kwb_os_cwd(buf, sizeof buf)) return kwb_lua_fail(L, "no-cwd", kwb_last_error());
    lua_pushstring(L, buf);
    return 1;
}

static int l_uid(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)kwb_os_uid());
    return 1;
}

/* core.mkdirs(path) -> true | nil, msg, { code = "no-dir" } */
static int l_mkdirs(lua_State *L) {
    if (kwb_os_mkdirs(luaL_checkstring(L, 1))) return kwb_lua_fail(L, "no-dir", kwb_last_error());
    lua_pushboolean(L, 1);
    return 1;
}

static int l_isatty(lua_State *L) {
    lua_pushboolean(L, kwb_os_isatty((int)luaL_checkinteger(L, 1)));
    return 1;
}

static int l_executable(lua_State *L) {
    lua_pushboolean(L, kwb_os_executable(luaL_checkstring(L, 1)));
    return 1;
}

static int l_machine(lua_State *L) {
    char buf[256];
    if (kwb_os_machine(buf, sizeof buf)) return kwb_lua_fail(L, "no-uname", kwb_last_error());
    lua_pushstring(L, buf);
    return 1;
}

void kwb_lua_open_os(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"flock", l_flock}, {"environ", l_environ}, {"cwd", l_cwd}, {"uid", l_uid}, {"mkdirs", l_mkdirs},
        {"isatty", l_isatty}, {"executable", l_executable}, {"machine", l_machine}, {NULL, NULL},
    };
    static const luaL_Reg lock_meta[] = {
        {"__gc", l_unlock}, {"__close", l_unlock}, {"__tostring", l_lock_tostring}, {NULL, NULL},
    };
    static const luaL_Reg lock_methods[] = {{"unlock", l_unlock}, {NULL, NULL}};
    if (luaL_newmetatable(L, LOCK_MT)) {
        luaL_setfuncs(L, lock_meta, 0);
        luaL_newlib(L, lock_methods);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
    luaL_setfuncs(L, fns, 0);
}
