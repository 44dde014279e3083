/* lua_os.c: Lua bindings of the operating-system services (core/os.c):
 * kwb.core.flock, environ, cwd, uid, mkdirs, isatty, executable, machine, exec */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>
#include <unistd.h>

#include "kwb.h"
#include "lua_bind.h"
#include "os.h"
#include "proc.h"

/* core.flock(path [, { wait = false }]) -> lock (held until lock:unlock(),
 * close or gc) | nil, msg, info: the device lock from the main process (the
 * workers take it on fd 5); with wait = false a lock held elsewhere fails at
 * once (info.code "no-lock"). */
#define LOCK_MT "kwb.flock"
typedef struct { int fd; } lflock;

static int l_flock(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    int wait = 1;
    if (lua_istable(L, 2)) {
        lua_getfield(L, 2, "wait");
        wait = lua_isnil(L, -1) || lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    lflock *u = lua_newuserdatauv(L, sizeof *u, 0);   /* closed until locked */
    u->fd = -1;
    luaL_setmetatable(L, LOCK_MT);
    int fd = kwb_os_flock_try(path, wait);
    if (fd < 0) return kwb_lua_fail(L, wait ? "device-lock" : "no-lock", kwb_last_error());
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

/* core.cache_place(path, named) -> true | nil, msg (kwb_os_cache_place) */
static int l_cache_place(lua_State *L) {
    if (kwb_os_cache_place(luaL_checkstring(L, 1), lua_toboolean(L, 2)))
        return kwb_lua_fail(L, "bad-cache", kwb_last_error());
    lua_pushboolean(L, 1);
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

/* core.exec({ argv... }, { input = path, timeout = s, cap = bytes }) ->
 * { status =, out =, err =, timed_out = } | nil, msg, info: a program run
 * with its stdout and stderr apart, killed with its process group on timeout. */
static int l_exec(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 2);   /* (the options, or nil: the argv below goes above them) */
    int n = (int)luaL_len(L, 1);
    if (n < 1) return luaL_argerror(L, 1, "an argv list with the program first");
    const char **argv = lua_newuserdatauv(L, sizeof *argv * (size_t)(n + 1), 0);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, 1, i + 1);
        argv[i] = luaL_checkstring(L, -1);   /* stays referenced by the argv table */
        lua_pop(L, 1);
    }
    argv[n] = NULL;
    kwb_proc_io io = {0};
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        lua_getfield(L, 2, "input");
        io.input = luaL_optstring(L, -1, NULL);
        lua_getfield(L, 2, "timeout");
        io.timeout = luaL_optnumber(L, -1, 0);
        lua_getfield(L, 2, "cap");
        io.cap = (size_t)luaL_optinteger(L, -1, 0);
    }
    int rc = kwb_proc_exec(argv, &io);
    if (rc < 0) return kwb_lua_fail(L, "exec-failed", kwb_last_error());
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, rc);
    lua_setfield(L, -2, "status");
    lua_pushstring(L, io.out ? io.out : "");
    lua_setfield(L, -2, "out");
    lua_pushstring(L, io.err ? io.err : "");
    lua_setfield(L, -2, "err");
    lua_pushboolean(L, io.timed_out);
    lua_setfield(L, -2, "timed_out");
    free(io.out);
    free(io.err);
    return 1;
}

/* core.self_exe() -> the path of this program (readlink /proc/self/exe) */
static int l_self_exe(lua_State *L) {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n < 0) return kwb_lua_fail(L, "no-exe", "cannot read /proc/self/exe");
    lua_pushlstring(L, buf, (size_t)n);
    return 1;
}

/* core.sleep(seconds): wait that long (signals do not cut it short) */
static int l_sleep(lua_State *L) {
    double s = luaL_checknumber(L, 1);
    if (!(s >= 0)) return luaL_argerror(L, 1, "a number of seconds >= 0");
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
    return 0;
}

/* core.pid() -> this process's id; core.hostname() -> the machine's name */
static int l_pid(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)getpid());
    return 1;
}

static int l_hostname(lua_State *L) {
    char buf[256];
    if (gethostname(buf, sizeof buf) < 0) return kwb_lua_fail(L, "no-hostname", "gethostname failed");
    buf[sizeof buf - 1] = 0;
    lua_pushstring(L, buf);
    return 1;
}

void kwb_lua_open_os(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"flock", l_flock}, {"environ", l_environ}, {"cwd", l_cwd}, {"uid", l_uid}, {"mkdirs", l_mkdirs},
        {"cache_place", l_cache_place},
        {"isatty", l_isatty}, {"executable", l_executable}, {"machine", l_machine}, {"exec", l_exec},
        {"self_exe", l_self_exe}, {"sleep", l_sleep}, {"pid", l_pid}, {"hostname", l_hostname},
        {NULL, NULL},
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
