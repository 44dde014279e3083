/* lua_os.c: Lua bindings of the operating-system services (core/os.c):
 * kwb.core.flock, environ, cwd, uid, mkdirs, output_file, output_dir, isatty, executable, machine, exec */
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

/* core.output_file(path [, what]) -> true | nil, msg, { code = "bad-output" }
 * (kwb_os_output_file; what defaults to "the file") */
static int l_output_file(lua_State *L) {
    if (kwb_os_output_file(luaL_checkstring(L, 1), luaL_optstring(L, 2, "the file")))
        return kwb_lua_fail(L, "bad-output", kwb_last_error());
    lua_pushboolean(L, 1);
    return 1;
}

/* core.output_dir(path [, what]) -> true | nil, msg, { code = "bad-output" }
 * (kwb_os_output_dir; what defaults to "into the directory") */
static int l_output_dir(lua_State *L) {
    if (kwb_os_output_dir(luaL_checkstring(L, 1), luaL_optstring(L, 2, "into the directory")))
        return kwb_lua_fail(L, "bad-output", kwb_last_error());
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

/* An argv list at stack index idx as a NULL-ended array (a userdata pushed
 * on the stack: the strings stay referenced by the list). */
static const char **argv_of(lua_State *L, int idx, const char *what) {
    if (lua_type(L, idx) != LUA_TTABLE) luaL_error(L, "%s: an argv list with the program first", what);
    int n = (int)luaL_len(L, idx);
    if (n < 1) luaL_error(L, "%s: an argv list with the program first", what);
    const char **argv = lua_newuserdatauv(L, sizeof *argv * (size_t)(n + 1), 0);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, idx, i + 1);
        argv[i] = lua_tostring(L, -1);
        if (!argv[i]) luaL_error(L, "%s: argument %d is not a string", what, i + 1);
        lua_pop(L, 1);
    }
    argv[n] = NULL;
    return argv;
}

/* The options { input = path, timeout = s, cap = bytes } at index idx. */
static kwb_proc_io io_of(lua_State *L, int idx) {
    kwb_proc_io io = {0};
    if (!lua_isnoneornil(L, idx)) {
        luaL_checktype(L, idx, LUA_TTABLE);
        lua_getfield(L, idx, "input");
        io.input = luaL_optstring(L, -1, NULL);
        lua_getfield(L, idx, "timeout");
        io.timeout = luaL_optnumber(L, -1, 0);
        lua_getfield(L, idx, "cap");
        io.cap = (size_t)luaL_optinteger(L, -1, 0);
        lua_pop(L, 3);   /* (input stays referenced by the options table) */
    }
    return io;
}

static void push_result(lua_State *L, int rc, kwb_proc_io *io) {
    lua_createtable(L, 0, 5);
    lua_pushinteger(L, rc);
    lua_setfield(L, -2, "status");
    lua_pushstring(L, io->out ? io->out : "");
    lua_setfield(L, -2, "out");
    lua_pushstring(L, io->err ? io->err : "");
    lua_setfield(L, -2, "err");
    lua_pushboolean(L, io->timed_out);
    lua_setfield(L, -2, "timed_out");
    lua_pushnumber(L, io->seconds);
    lua_setfield(L, -2, "seconds");
    free(io->out);
    free(io->err);
    io->out = io->err = NULL;
}

/* core.exec({ argv... }, { input = path, timeout = s, cap = bytes }) ->
 * { status =, out =, err =, timed_out =, seconds = } | nil, msg, info: a
 * program run with its stdout and stderr apart, killed with its process
 * group on timeout. */
static int l_exec(lua_State *L) {
    lua_settop(L, 2);
    kwb_proc_io io = io_of(L, 2);
    const char **argv = argv_of(L, 1, "core.exec");
    int rc = kwb_proc_exec(argv, &io);
    if (rc < 0) return kwb_lua_fail(L, "exec-failed", kwb_last_error());
    push_result(L, rc, &io);
    return 1;
}

/* core.exec_all({ { argv... }, ... }, opts) -> { result, ... } | nil, msg,
 * info: the programs run at once (opts and each result as core.exec's, the
 * timeout each program's own), all waited for. Fails when one could not be
 * started (the others ran). */
static int l_exec_all(lua_State *L) {
    lua_settop(L, 2);
    luaL_checktype(L, 1, LUA_TTABLE);
    int n = (int)luaL_len(L, 1);
    if (n < 1) return luaL_argerror(L, 1, "a list of argv lists");
    kwb_proc_io base = io_of(L, 2);
    const char ***argvs = lua_newuserdatauv(L, sizeof *argvs * (size_t)n, 0);
    kwb_proc_io *ios = lua_newuserdatauv(L, sizeof *ios * (size_t)n, 0);
    int *rcs = lua_newuserdatauv(L, sizeof *rcs * (size_t)n, 0);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, 1, i + 1);
        argvs[i] = argv_of(L, lua_gettop(L), "core.exec_all");
        lua_replace(L, -2);   /* (the argv array stays on the stack until the end) */
        ios[i] = base;
    }
    int rc = kwb_proc_exec_all(n, (const char *const *const *)argvs, ios, rcs);
    if (rc < 0) {
        for (int i = 0; i < n; i++) { free(ios[i].out); free(ios[i].err); }
        return kwb_lua_fail(L, "exec-failed", kwb_last_error());
    }
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        push_result(L, rcs[i], &ios[i]);
        lua_rawseti(L, -2, i + 1);
    }
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
        {"output_file", l_output_file}, {"output_dir", l_output_dir},
        {"cache_place", l_cache_place},
        {"isatty", l_isatty}, {"executable", l_executable}, {"machine", l_machine}, {"exec", l_exec}, {"exec_all", l_exec_all},
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
