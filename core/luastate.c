/* luastate.c: the Lua state kwb scripts run in: standard libraries, the
 * bundled modules in package.preload, KWB_LUA_PATH overrides, package.path,
 * the `kwb` global, and protected calls with tracebacks and Ctrl-C. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "bundle.h"
#include "luastate.h"

extern int luaopen_lpeg(lua_State *L);
extern int luaopen_cjson(lua_State *L);

/* ---- bundled modules --------------------------------------------------- */

/* package.preload loader for a bundled module; upvalue 1 is its index. */
static int load_bundled(lua_State *L) {
    const kwb_bundled *b = &kwb_bundle[lua_tointeger(L, lua_upvalueindex(1))];
    if (luaL_loadbufferx(L, (const char *)b->data, b->len, b->chunkname, "t") != LUA_OK)
        return lua_error(L);
    lua_pushstring(L, b->module);          // [chunk, name]
    lua_pushstring(L, b->chunkname + 1);   // [chunk, name, path]
    lua_call(L, 2, 1);
    return 1;
}

/* A searcher placed before package.preload: modules found on KWB_LUA_PATH
 * win over the bundled copies, so the files under lua/kwb/ can be edited without a
 * rebuild. Entries without '?' are directories. */
static int search_override(lua_State *L) {
    const char *name = luaL_checkstring(L, 1);
    lua_getfield(L, LUA_REGISTRYINDEX, "kwb.override_path");
    if (lua_isnil(L, -1)) return 0;
    const char *path = lua_tostring(L, -1);
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchpath");      // [path, package, searchpath]
    lua_pushstring(L, name);
    lua_pushstring(L, path);
    lua_call(L, 2, 2);                      // [path, package, filename|nil, err]
    if (lua_isnil(L, -2)) {
        lua_pushfstring(L, "no file on KWB_LUA_PATH for '%s'", name);
        return 1;
    }
    const char *file = lua_tostring(L, -2);
    if (luaL_loadfile(L, file) != LUA_OK)
        return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name, file,
                          lua_tostring(L, -1));
    lua_pushstring(L, file);
    return 2;
}

/* Turn KWB_LUA_PATH ("dir;dir2/?.lua") into a package.searchpath template. */
static void set_override_path(lua_State *L, const char *env) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    const char *p = env;
    while (*p) {
        const char *e = strchr(p, ';');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n > 0) {
            if (luaL_bufflen(&b) > 0) luaL_addchar(&b, ';');
            if (memchr(p, '?', n)) luaL_addlstring(&b, p, n);
            else {
                luaL_addlstring(&b, p, n);
                luaL_addstring(&b, "/?.lua;");
                luaL_addlstring(&b, p, n);
                luaL_addstring(&b, "/?/init.lua");
            }
        }
        if (!e) break;
        p = e + 1;
    }
    luaL_pushresult(&b);
    lua_setfield(L, LUA_REGISTRYINDEX, "kwb.override_path");
}

static void install_modules(lua_State *L) {
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);   // [preload]
    for (int i = 0; kwb_bundle[i].module; i++) {
        lua_pushinteger(L, i);
        lua_pushcclosure(L, load_bundled, 1);
        lua_setfield(L, -2, kwb_bundle[i].module);
    }
    lua_pushcfunction(L, luaopen_kwb_core);
    lua_setfield(L, -2, "kwb.core");
    lua_pushcfunction(L, luaopen_lpeg);
    lua_setfield(L, -2, "lpeg");
    lua_pushcfunction(L, luaopen_cjson);
    lua_setfield(L, -2, "cjson");
    lua_pop(L, 1);

    const char *env = getenv("KWB_LUA_PATH");
    if (env && *env) {
        set_override_path(L, env);
        lua_getglobal(L, "table");
        lua_getfield(L, -1, "insert");          // [table, insert]
        lua_getglobal(L, "package");
        lua_getfield(L, -1, "searchers");       // [table, insert, package, searchers]
        lua_remove(L, -2);
        lua_pushinteger(L, 1);
        lua_pushcfunction(L, search_override);
        lua_call(L, 3, 0);
        lua_pop(L, 1);
    }
}

/* ---- the heap ------------------------------------------------------------ */

/* The state's allocator: luaL_newstate's, wrapped to count the bytes in use
 * so that a cap can hold model-written Lua (a reply's space block) to a
 * budget. The cap is checked before each allocation, so no single one (a
 * concatenation of many long strings is one) passes it: the allocation fails
 * and Lua raises its "not enough memory" error in the code that asked. */
typedef struct {
    lua_Alloc f;
    void *ud;
    size_t used;   /* bytes the state holds */
    size_t cap;    /* 0: none */
} heap;

static void *heap_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    heap *h = ud;
    size_t old = ptr ? osize : 0;   /* (without ptr, osize names the kind of object) */
    if (h->cap && nsize > old && (h->used > h->cap || nsize - old > h->cap - h->used)) return NULL;
    void *p = h->f(h->ud, ptr, osize, nsize);
    if (nsize == 0 || p) h->used = h->used - old + nsize;
    return p;
}

static heap *heap_of(lua_State *L) {
    void *ud;
    return lua_getallocf(L, &ud) == heap_alloc ? ud : NULL;
}

int kwb_lua_heap(lua_State *L, size_t *used, size_t *cap) {
    heap *h = heap_of(L);
    if (!h) return -1;
    *used = h->used;
    *cap = h->cap;
    return 0;
}

int kwb_lua_heap_cap(lua_State *L, size_t cap) {
    heap *h = heap_of(L);
    if (!h) return -1;
    h->cap = cap;
    return 0;
}

/* ---- state ------------------------------------------------------------- */

lua_State *kwb_lua_new(void) {
    heap *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    lua_State *L = luaL_newstate();
    if (!L) { free(h); return NULL; }
    h->f = lua_getallocf(L, &h->ud);
    h->used = (size_t)lua_gc(L, LUA_GCCOUNT, 0) * 1024 + (size_t)lua_gc(L, LUA_GCCOUNTB, 0);
    lua_setallocf(L, heap_alloc, h);
    luaL_openlibs(L);
    install_modules(L);
    return L;
}

void kwb_lua_close(lua_State *L) {
    heap *h = heap_of(L);
    lua_close(L);
    free(h);
}

int kwb_lua_setup(lua_State *L, const char *cache_path) {
    lua_pushstring(L, cache_path);
    lua_setfield(L, LUA_REGISTRYINDEX, "kwb.cache_path");
    lua_getglobal(L, "require");
    lua_pushstring(L, "kwb");
    int rc = kwb_lua_docall(L, 1, 1);
    if (rc != LUA_OK) return rc;
    lua_setglobal(L, "kwb");
    return LUA_OK;
}

/* ---- protected calls --------------------------------------------------- */

static lua_State *running;   /* the state a SIGINT should stop; signal handlers see only this */

static void stop_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted!");
}

/* As lua.c does: the handler only sets a hook; the hook raises the error at a
 * safe point inside the interpreter. */
static void on_sigint(int sig) {
    signal(sig, SIG_DFL);   /* a second Ctrl-C kills, should the hook never run */
    if (running) lua_sethook(running, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

static int msghandler(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

int kwb_lua_docall(lua_State *L, int narg, int nres) {
    int base = lua_gettop(L) - narg;
    lua_pushcfunction(L, msghandler);
    lua_insert(L, base);
    lua_State *prev = running;
    running = L;
    void (*old)(int) = signal(SIGINT, on_sigint);
    int status = lua_pcall(L, narg, nres, base);
    signal(SIGINT, old);
    running = prev;
    lua_remove(L, base);
    return status;
}

void kwb_lua_report(lua_State *L, const char *progname) {
    const char *msg = lua_tostring(L, -1);
    fprintf(stderr, "%s: %s\n", progname, msg ? msg : "(error object is not a string)");
    fflush(stderr);
    lua_pop(L, 1);
}
