/* lua_buffer.c: kwb.buffer userdata (typed host buffers) and compare() */
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "kwb.h"
#include "lua_bind.h"

#define BUFFER_MT "kwb.buffer"

typedef struct { kwb_buffer *b; } lbuffer;

kwb_buffer *kwb_lua_checkbuffer(lua_State *L, int idx) {
    lbuffer *u = luaL_checkudata(L, idx, BUFFER_MT);
    if (!u->b) luaL_error(L, "buffer is freed");
    return u->b;
}

static int l_buffer_new(lua_State *L) {
    const char *name = luaL_checkstring(L, 1);
    lua_Integer n = luaL_checkinteger(L, 2);
    int t = kwb_dtype_from_name(name);
    if (t < 0) return luaL_error(L, "unknown dtype '%s' (known: f32, f64, f16, bf16, i8, i32, i64, u8, u32, u64)", name);
    if (n < 0) return luaL_error(L, "buffer length must be >= 0 (got %d)", (int)n);
    lbuffer *u = lua_newuserdatauv(L, sizeof *u, 0);   /* closed until allocated */
    u->b = NULL;
    luaL_setmetatable(L, BUFFER_MT);
    u->b = kwb_buffer_new((kwb_dtype)t, (uint64_t)n);
    if (!u->b) return kwb_lua_fail(L, "out-of-memory", kwb_last_error());
    return 1;
}

static uint64_t check_index(lua_State *L, kwb_buffer *b, int idx) {
    lua_Integer i = luaL_checkinteger(L, idx);
    if (i < 1 || (uint64_t)i > kwb_buffer_len(b))
        luaL_error(L, "index %d out of range 1..%d", (int)i, (int)kwb_buffer_len(b));
    return (uint64_t)(i - 1);
}

static void push_elem(lua_State *L, kwb_buffer *b, uint64_t i) {
    double v = kwb_buffer_get(b, i);
    if (!kwb_dtype_is_float(kwb_buffer_dtype(b))) {
        kwb_dtype t = kwb_buffer_dtype(b);
        if (t == KWB_I64) lua_pushinteger(L, ((const int64_t *)kwb_buffer_data(b))[i]);
        else if (t == KWB_U64) lua_pushinteger(L, (lua_Integer)((const uint64_t *)kwb_buffer_data(b))[i]);
        else lua_pushinteger(L, (lua_Integer)v);
    } else lua_pushnumber(L, v);
}

static void set_elem(lua_State *L, kwb_buffer *b, uint64_t i, int idx) {
    kwb_dtype t = kwb_buffer_dtype(b);
    if (t == KWB_I64 || t == KWB_U64) {
        lua_Integer v = luaL_checkinteger(L, idx);
        memcpy((char *)kwb_buffer_data(b) + 8 * i, &v, 8);
    } else kwb_buffer_set(b, i, luaL_checknumber(L, idx));
}

static int l_index(lua_State *L) {
    kwb_buffer *b = kwb_lua_checkbuffer(L, 1);
    if (lua_type(L, 2) == LUA_TNUMBER) {
        push_elem(L, b, check_index(L, b, 2));
        return 1;
    }
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "dtype") == 0) lua_pushstring(L, kwb_dtype_name(kwb_buffer_dtype(b)));
    else if (strcmp(k, "n") == 0) lua_pushinteger(L, (lua_Integer)kwb_buffer_len(b));
    else if (strcmp(k, "bytes") == 0) lua_pushinteger(L, (lua_Integer)kwb_buffer_bytes(b));
    else if (strcmp(k, "device") == 0) lua_pushliteral(L, "host");
    else {
        luaL_getmetatable(L, BUFFER_MT);
        lua_getfield(L, -1, "methods");
        lua_getfield(L, -1, k);
    }
    return 1;
}

static int l_newindex(lua_State *L) {
    kwb_buffer *b = kwb_lua_checkbuffer(L, 1);
    if (lua_type(L, 2) != LUA_TNUMBER) return luaL_error(L, "buffers take only numeric indices");
    set_elem(L, b, check_index(L, b, 2), 3);
    return 0;
}

static int l_len(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)kwb_buffer_len(kwb_lua_checkbuffer(L, 1)));
    return 1;
}

static int l_tostring(lua_State *L) {
    lbuffer *u = luaL_checkudata(L, 1, BUFFER_MT);
    if (!u->b) lua_pushliteral(L, "kwb.buffer (freed)");
    else lua_pushfstring(L, "kwb.buffer<%s>[%I] host", kwb_dtype_name(kwb_buffer_dtype(u->b)),
                         (lua_Integer)kwb_buffer_len(u->b));
    return 1;
}

static int l_free(lua_State *L) {
    lbuffer *u = luaL_checkudata(L, 1, BUFFER_MT);
    kwb_buffer_free(u->b);
    u->b = NULL;
    return 0;
}

static uint64_t check_seed(lua_State *L, int idx) {
    return (uint64_t)luaL_checkinteger(L, idx);
}

static int l_fill_uniform(lua_State *L) {
    kwb_buffer *b = kwb_lua_checkbuffer(L, 1);
    if (kwb_buffer_fill_uniform(b, check_seed(L, 2), luaL_optnumber(L, 3, -1), luaL_optnumber(L, 4, 1)))
        return luaL_error(L, "%s", kwb_last_error());
    lua_settop(L, 1);
    return 1;
}

static int l_fill_normal_stream(lua_State *L) {
    kwb_buffer *b = kwb_lua_checkbuffer(L, 1);
    if (kwb_buffer_fill_normal_stream(b, check_seed(L, 2), luaL_optnumber(L, 3, 0), luaL_optnumber(L, 4, 1)))
        return luaL_error(L, "%s", kwb_last_error());
    lua_settop(L, 1);
    return 1;
}

static int l_fill_normal(lua_State *L) {
    kwb_buffer *b = kwb_lua_checkbuffer(L, 1);
    if (kwb_buffer_fill_normal(b, check_seed(L, 2), luaL_optnumber(L, 3, 0), luaL_optnumber(L, 4, 1)))
        return luaL_error(L, "%s", kwb_last_error());
    lua_settop(L, 1);
    return 1;
}

static int l_fill(lua_State *L) {
    kwb_buffer *b = kwb_lua_checkbuffer(L, 1);
    kwb_buffer_fill_value(b, luaL_checknumber(L, 2));
    lua_settop(L, 1);
    return 1;
}

static int l_poison(lua_State *L) {
    kwb_buffer_poison(kwb_lua_checkbuffer(L, 1));
    lua_settop(L, 1);
    return 1;
}

static int l_is_poison(lua_State *L) {
    kwb_buffer *b = kwb_lua_checkbuffer(L, 1);
    lua_pushboolean(L, kwb_buffer_is_poison(b, check_index(L, b, 2)));
    return 1;
}

/* buf:poisoned() -> the count of elements still poison, the first (1-based) or nil */
static int l_poisoned(lua_State *L) {
    int64_t first;
    lua_pushinteger(L, (lua_Integer)kwb_buffer_poisoned(kwb_lua_checkbuffer(L, 1), &first));
    if (first < 0) lua_pushnil(L);
    else lua_pushinteger(L, first + 1);
    return 2;
}

static int l_totable(lua_State *L) {
    kwb_buffer *b = kwb_lua_checkbuffer(L, 1);
    lua_Integer n = (lua_Integer)kwb_buffer_len(b);
    lua_Integer i = luaL_optinteger(L, 2, 1), j = luaL_optinteger(L, 3, n);
    if (i < 1 || j > n || (i > j + 1)) return luaL_error(L, "range %d..%d outside 1..%d", (int)i, (int)j, (int)n);
    lua_createtable(L, (int)(j - i + 1), 0);
    for (lua_Integer k = i; k <= j; k++) {
        push_elem(L, b, (uint64_t)(k - 1));
        lua_rawseti(L, -2, k - i + 1);
    }
    return 1;
}

static int l_set(lua_State *L) {
    kwb_buffer *b = kwb_lua_checkbuffer(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer off = luaL_optinteger(L, 3, 1), n = luaL_len(L, 2);
    if (off < 1 || off - 1 + n > (lua_Integer)kwb_buffer_len(b))
        return luaL_error(L, "%d values at %d do not fit in %d elements", (int)n, (int)off, (int)kwb_buffer_len(b));
    for (lua_Integer k = 1; k <= n; k++) {
        lua_rawgeti(L, 2, k);
        set_elem(L, b, (uint64_t)(off - 2 + k), -1);
        lua_pop(L, 1);
    }
    lua_settop(L, 1);
    return 1;
}

static int l_copy(lua_State *L) {
    kwb_buffer *dst = kwb_lua_checkbuffer(L, 1), *src = kwb_lua_checkbuffer(L, 2);
    if (kwb_buffer_copy(dst, src)) return luaL_error(L, "%s", kwb_last_error());
    lua_settop(L, 1);
    return 1;
}

static int l_clone(lua_State *L) {
    kwb_buffer *src = kwb_lua_checkbuffer(L, 1);
    lua_pushcfunction(L, l_buffer_new);
    lua_pushstring(L, kwb_dtype_name(kwb_buffer_dtype(src)));
    lua_pushinteger(L, (lua_Integer)kwb_buffer_len(src));
    lua_call(L, 2, 1);
    lbuffer *u = lua_touserdata(L, -1);
    if (!u) return luaL_error(L, "out of memory cloning a buffer");
    kwb_buffer_copy(u->b, src);
    return 1;
}

/* buf:redzone() -> nil when the bytes just outside it are intact, else the
 * first and last changed offset in bytes from its start (negative: before);
 * the redzones are restored. */
static int l_redzone(lua_State *L) {
    kwb_buffer *b = kwb_lua_checkbuffer(L, 1);
    int64_t first, last;
    if (!kwb_buffer_redzone(b, &first, &last)) {
        lua_pushnil(L);
        return 1;
    }
    lua_pushinteger(L, (lua_Integer)first);
    lua_pushinteger(L, (lua_Integer)last);
    return 2;
}

/* buf:digest(key) -> an integer: kwb_buffer_digest */
static int l_digest(lua_State *L) {
    kwb_buffer *b = kwb_lua_checkbuffer(L, 1);
    lua_pushinteger(L, (lua_Integer)kwb_buffer_digest(b, (uint64_t)luaL_checkinteger(L, 2)));
    return 1;
}

static int l_checksum(lua_State *L) {
    char hex[65];
    if (kwb_buffer_checksum(kwb_lua_checkbuffer(L, 1), hex)) return luaL_error(L, "%s", kwb_last_error());
    lua_pushstring(L, hex);
    return 1;
}

static int l_raw(lua_State *L) {
    kwb_buffer *b = kwb_lua_checkbuffer(L, 1);
    lua_pushlstring(L, kwb_buffer_data(b), kwb_buffer_bytes(b));
    return 1;
}

static int l_set_raw(lua_State *L) {
    kwb_buffer *b = kwb_lua_checkbuffer(L, 1);
    size_t len;
    const char *s = luaL_checklstring(L, 2, &len);
    if (len != kwb_buffer_bytes(b))
        return luaL_error(L, "%d bytes given for a buffer of %d bytes", (int)len, (int)kwb_buffer_bytes(b));
    memcpy(kwb_buffer_data(b), s, len);
    lua_settop(L, 1);
    return 1;
}

static int l_compare(lua_State *L) {
    kwb_buffer *out = kwb_lua_checkbuffer(L, 1), *ref = kwb_lua_checkbuffer(L, 2);
    double atol = luaL_optnumber(L, 3, 0), rtol = luaL_optnumber(L, 4, 0);
    kwb_diff d;
    if (kwb_compare(out, ref, atol, rtol, &d)) return luaL_error(L, "%s", kwb_last_error());
    lua_createtable(L, 0, 12);
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
    if (d.worst >= 0) { lua_pushinteger(L, d.worst + 1); lua_setfield(L, -2, "worst"); }
    return 1;
}

void kwb_lua_open_buffer(lua_State *L) {
    static const luaL_Reg meta[] = {
        {"__index", l_index}, {"__newindex", l_newindex}, {"__len", l_len},
        {"__tostring", l_tostring}, {"__gc", l_free}, {"__close", l_free}, {NULL, NULL},
    };
    static const luaL_Reg methods[] = {
        {"fill_uniform", l_fill_uniform}, {"fill_normal", l_fill_normal},
        {"fill_normal_stream", l_fill_normal_stream}, {"fill", l_fill},
        {"poison", l_poison}, {"is_poison", l_is_poison}, {"poisoned", l_poisoned}, {"totable", l_totable}, {"set", l_set},
        {"copy", l_copy}, {"clone", l_clone}, {"checksum", l_checksum}, {"digest", l_digest}, {"redzone", l_redzone}, {"raw", l_raw},
        {"set_raw", l_set_raw}, {"free", l_free}, {NULL, NULL},
    };
    if (luaL_newmetatable(L, BUFFER_MT)) {       // [core, mt]
        luaL_setfuncs(L, meta, 0);
        luaL_newlib(L, methods);                  // [core, mt, methods]
        lua_setfield(L, -2, "methods");
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, l_buffer_new);
    lua_setfield(L, -2, "buffer");
    lua_pushcfunction(L, l_compare);
    lua_setfield(L, -2, "compare");
}
