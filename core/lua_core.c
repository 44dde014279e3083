/* lua_core.c: the kwb.core module: the C primitives as plain Lua functions.
 * Bundled Lua modules (lua/kwb/) wrap them into the public kwb API. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "bundle.h"
#include "commit.h"
#include "kwb.h"
#include "lua_bind.h"
#include "luastate.h"

int kwb_lua_fail(lua_State *L, const char *code, const char *msg) {
    lua_pushnil(L);
    lua_pushstring(L, msg);
    lua_createtable(L, 0, 2);
    lua_pushstring(L, code);
    lua_setfield(L, -2, "code");
    return 3;
}

const char *kwb_lua_code(int status, const char *fallback) {
    switch (status) {
    case KWB_ENOMEM: return "out-of-memory";
    case KWB_ECOMPILE: return "compile-error";
    case KWB_ENOSYM: return "no-symbol";
    case KWB_ENODRIVER: return "no-driver";
    case KWB_ENODEVICE: return "no-device";
    case KWB_ENONVRTC: return "no-nvrtc";
    case KWB_ENONVCC: return "no-nvcc";
    case KWB_ENOARCH: return "no-arch";
    default: return fallback;
    }
}

static void setnum(lua_State *L, const char *k, double v) {
    lua_pushnumber(L, v);
    lua_setfield(L, -2, k);
}

static void setint(lua_State *L, const char *k, lua_Integer v) {
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

void kwb_lua_push_stats(lua_State *L, const kwb_stats *st) {
    lua_createtable(L, 0, 14);
    setnum(L, "median", st->median);
    setnum(L, "min", st->min);
    setnum(L, "max", st->max);
    setnum(L, "mean", st->mean);
    setnum(L, "p10", st->p10);
    setnum(L, "p90", st->p90);
    setnum(L, "spread", st->spread);
    setnum(L, "ci_lo", st->ci_lo);
    setnum(L, "ci_hi", st->ci_hi);
    setint(L, "n", st->n);
    setint(L, "batch", st->batch);
    setint(L, "warmup", st->warmup);
    lua_pushboolean(L, st->capped);
    lua_setfield(L, -2, "capped");
}

static double optfield(lua_State *L, int idx, const char *k, double def) {
    lua_getfield(L, idx, k);
    double v = def;
    if (!lua_isnil(L, -1)) {
        if (!lua_isnumber(L, -1)) luaL_error(L, "timing option '%s' must be a number", k);
        v = lua_tonumber(L, -1);
        if (!(v >= 0)) luaL_error(L, "timing option '%s' must be >= 0 (got %f)", k, v);
    }
    lua_pop(L, 1);
    return v;
}

void kwb_lua_check_time_opts(lua_State *L, int idx, kwb_time_opts *o) {
    kwb_time_opts_default(o);
    if (lua_isnoneornil(L, idx)) return;
    luaL_checktype(L, idx, LUA_TTABLE);
    static const char *known[] = {"warmup", "warmup_min", "min_samples", "max_samples", "cap",
                                  "target", "min_sample", NULL};
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        int ok = 0;
        if (lua_type(L, -1) == LUA_TSTRING)
            for (int i = 0; known[i]; i++) ok |= strcmp(known[i], lua_tostring(L, -1)) == 0;
        if (!ok) luaL_error(L, "unknown timing option '%s' (known: warmup, warmup_min, min_samples, "
                               "max_samples, cap, target, min_sample)", luaL_tolstring(L, -1, NULL));
    }
    o->warmup_s = optfield(L, idx, "warmup", o->warmup_s);
    o->warmup_min = (uint32_t)optfield(L, idx, "warmup_min", o->warmup_min);
    o->min_samples = (uint32_t)optfield(L, idx, "min_samples", o->min_samples);
    o->max_samples = (uint32_t)optfield(L, idx, "max_samples", o->max_samples);
    o->cap_s = optfield(L, idx, "cap", o->cap_s);
    o->target_ci = optfield(L, idx, "target", o->target_ci);
    o->min_sample_s = optfield(L, idx, "min_sample", o->min_sample_s);
    if (o->max_samples < 1) luaL_error(L, "timing option 'max_samples' must be >= 1");
    if (o->min_samples > o->max_samples) luaL_error(L, "timing option 'min_samples' exceeds 'max_samples'");
}

static int l_sha256(lua_State *L) {
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    char hex[65];
    if (kwb_sha256_hex(s, len, hex) != 0) return luaL_error(L, "%s", kwb_last_error());
    lua_pushstring(L, hex);
    return 1;
}

/* core.hmac_sha256(key, data) -> 64 hex digits (kwb.runners.queue signs a fleet's results) */
static int l_hmac_sha256(lua_State *L) {
    size_t klen, len;
    const char *k = luaL_checklstring(L, 1, &klen);
    const char *s = luaL_checklstring(L, 2, &len);
    char hex[65];
    if (kwb_hmac_sha256_hex(k, klen, s, len, hex) != 0) return luaL_error(L, "%s", kwb_last_error());
    lua_pushstring(L, hex);
    return 1;
}

/* core.code_digest(image) -> 64 hex digits: a built module's code (kwb_code_digest) |
 * nil, message, { code = "not-a-module" } */
static int l_code_digest(lua_State *L) {
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    char hex[65];
    if (kwb_code_digest(s, len, hex) != 0) return kwb_lua_fail(L, "not-a-module", kwb_last_error());
    lua_pushstring(L, hex);
    return 1;
}

static int l_now(lua_State *L) {
    lua_pushnumber(L, kwb_now());
    return 1;
}

/* core.tempfile([suffix]) -> path of a new empty file in $TMPDIR (else /tmp),
 * made with mkstemps; os.tmpname ignores TMPDIR. */
static int l_tempfile(lua_State *L) {
    const char *suffix = luaL_optstring(L, 1, "");
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    if (strchr(suffix, '/')) return luaL_argerror(L, 1, "a suffix has no '/'");
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/kwb-XXXXXX%s", dir, suffix) >= sizeof path)
        return kwb_lua_fail(L, "no-tempfile", "the temporary directory's path is too long");
    int fd = mkstemps(path, (int)strlen(suffix));
    if (fd < 0) {
        lua_pushfstring(L, "cannot make a temporary file in %s: %s", dir, strerror(errno));
        return kwb_lua_fail(L, "no-tempfile", lua_tostring(L, -1));
    }
    close(fd);
    lua_pushstring(L, path);
    return 1;
}

static int l_bundled(lua_State *L) {
    lua_newtable(L);
    for (int i = 0; kwb_bundle[i].module; i++) {
        lua_pushstring(L, kwb_bundle[i].module);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int l_stats(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    double rel = luaL_optnumber(L, 2, 0.005);
    lua_settop(L, 1);
    lua_Integer n = luaL_len(L, 1);
    if (n < 1 || n > UINT32_MAX) return luaL_argerror(L, 1, "needs at least one sample");
    double *s = lua_newuserdatauv(L, sizeof *s * (size_t)n, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 1, i);
        if (!lua_isnumber(L, -1)) return luaL_error(L, "sample %d is not a number", (int)i);
        s[i - 1] = lua_tonumber(L, -1);
        lua_pop(L, 1);
    }
    kwb_stats st = {.batch = 1};
    kwb_stats_compute(s, (uint32_t)n, &st);
    kwb_lua_push_stats(L, &st);
    lua_pushboolean(L, kwb_stats_converged(s, (uint32_t)n, rel));
    lua_setfield(L, -2, "converged");
    return 1;
}

/* heap() -> bytes the Lua heap holds, its cap (nil: none) */
static int l_heap(lua_State *L) {
    size_t used, cap;
    if (kwb_lua_heap(L, &used, &cap) != 0) return luaL_error(L, "this Lua state has no counted heap");
    lua_pushinteger(L, (lua_Integer)used);
    if (cap) lua_pushinteger(L, (lua_Integer)cap);
    else lua_pushnil(L);
    return 2;
}

/* heap_resume(bytes, co, ...) -> as coroutine.resume(co, ...), with no
 * allocation taking the Lua heap past `bytes` (or an outer cap, if tighter)
 * while co runs: one that would fails as Lua's "not enough memory" error in
 * co. The cap is set and lifted here, in C, so that nothing of the caller's
 * allocates under it. */
static int l_heap_resume(lua_State *L) {
    lua_Integer cap = luaL_checkinteger(L, 1);
    lua_State *co = lua_tothread(L, 2);
    luaL_argcheck(L, cap > 0, 1, "a cap is a number of bytes > 0");
    luaL_argexpected(L, co != NULL, 2, "coroutine");
    size_t used, outer;
    if (kwb_lua_heap(L, &used, &outer) != 0) return luaL_error(L, "this Lua state has no counted heap");
    if (lua_status(co) == LUA_OK && lua_gettop(co) == 0) return luaL_error(L, "cannot resume a dead coroutine");
    int narg = lua_gettop(L) - 2;
    if (!lua_checkstack(co, narg) || !lua_checkstack(L, LUA_MINSTACK))
        return luaL_error(L, "too many arguments to resume");
    lua_xmove(L, co, narg);
    kwb_lua_heap_cap(L, outer && outer < (size_t)cap ? outer : (size_t)cap);
    int nres, status = lua_resume(co, L, narg, &nres);
    kwb_lua_heap_cap(L, outer);
    if (status != LUA_OK && status != LUA_YIELD) {
        lua_pushboolean(L, 0);
        lua_xmove(co, L, 1);   /* the error */
        return 2;
    }
    if (!lua_checkstack(L, nres + 1)) {
        lua_pop(co, nres);
        return luaL_error(L, "too many results to resume");
    }
    lua_pushboolean(L, 1);
    lua_xmove(co, L, nres);
    return nres + 1;
}

int luaopen_kwb_core(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"sha256", l_sha256}, {"hmac_sha256", l_hmac_sha256}, {"code_digest", l_code_digest}, {"now", l_now}, {"bundled", l_bundled},
        {"tempfile", l_tempfile}, {"stats", l_stats}, {"heap", l_heap}, {"heap_resume", l_heap_resume}, {NULL, NULL},
    };
    luaL_newlib(L, fns);
    lua_pushstring(L, kwb_version());
    lua_setfield(L, -2, "version");
    lua_pushstring(L, KWB_COMMIT);   /* build/commit.h: the commit kwb was built from */
    lua_setfield(L, -2, "commit");
    lua_getfield(L, LUA_REGISTRYINDEX, "kwb.cache_path");
    lua_setfield(L, -2, "cache_path");
    kwb_lua_open_buffer(L);
    kwb_lua_open_host(L);
    kwb_lua_open_cache(L);
    kwb_lua_open_worker(L);
    kwb_lua_open_os(L);
    kwb_lua_open_cuda(L);
    kwb_lua_open_http(L);
    kwb_lua_open_redis(L);
    kwb_lua_open_child(L);
    return 1;
}
