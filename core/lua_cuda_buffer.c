/* lua_cuda_buffer.c: device buffers (fills, poison, copies, page-locked
 * host copies, checksums and digests, poison counts, guard bands) and the
 * comparison of two of them on the device. */
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "lua_cuda.h"

/* ---- device buffers ---------------------------------------------------- */

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

void kwb_lua_cuda_open_buffer(lua_State *L) {
    static const luaL_Reg dbuf_meta[] = {
        {"__index", l_dbuf_index}, {"__len", l_dbuf_len}, {"__tostring", l_dbuf_tostring},
        {"__gc", l_dbuf_free}, {"__close", l_dbuf_free}, {NULL, NULL},
    };
    static const luaL_Reg dbuf_methods[] = {
        {"fill_uniform", l_dbuf_fill_uniform}, {"fill_normal", l_dbuf_fill_normal}, {"fill", l_dbuf_fill},
        {"poison", l_dbuf_poison}, {"zero", l_dbuf_zero}, {"upload", l_dbuf_upload},
        {"download", l_dbuf_download}, {"raw", l_dbuf_raw}, {"copy", l_dbuf_copy},
        {"checksum", l_dbuf_checksum}, {"digest", l_dbuf_digest}, {"poisoned", l_dbuf_poisoned},
        {"redzone", l_dbuf_redzone}, {"save", l_dbuf_save}, {"load", l_dbuf_load},
        {"fill_normal_stream", l_dbuf_fill_normal_stream}, {"set_raw", l_dbuf_upload}, {"free", l_dbuf_free},
        {NULL, NULL},
    };
    static const luaL_Reg fns[] = {
        {"cuda_buffer", l_dbuf_new}, {"cuda_compare", l_compare}, {"cuda_redzones", l_redzones},
        {"cuda_guard_layout", l_guard_layout}, {"cuda_checksum_host", l_checksum_host}, {NULL, NULL},
    };
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
    luaL_setfuncs(L, fns, 0);
}
