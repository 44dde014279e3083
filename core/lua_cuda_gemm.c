/* lua_cuda_gemm.c: a plan's cuBLAS gemm step (plan:add_gemm): its fields
 * read and checked, the buffers kept alive by the plan. */
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "lua_cuda.h"

/* plan:add_gemm { m =, n =, k =, a =, lda =, b =, ldb =, c =, ldc =, trans_a =, trans_b =,
 * alpha =, beta =, a_offset =, b_offset =, c_offset = } -> plan, or nil, message, info where
 * cuBLAS cannot be loaded or started. A wrong field raises; so does a gemm
 * kwb_cuda_gemm_check refuses. */
static const char *const gemm_fields[] = {"m", "n", "k", "a", "lda", "b", "ldb", "c", "ldc", "trans_a", "trans_b",
                                          "alpha", "beta", "a_offset", "b_offset", "c_offset", NULL};

/* A gemm field: an integer from lo to hi (sizes and leading dimensions are
 * cuBLAS's int; offsets are elements into a buffer, checked against its
 * length by kwb_cuda_plan_add_gemm, and may pass 2^31 in a buffer of many
 * experts' weights). */
static lua_Integer gemm_int(lua_State *L, const char *k, int required, lua_Integer def, lua_Integer lo,
                            lua_Integer hi) {
    int t = lua_getfield(L, 2, k);
    lua_Integer v = def;
    if (t == LUA_TNIL && required) luaL_error(L, "gemm field '%s' is required", k);
    if (t != LUA_TNIL) {
        if (!lua_isinteger(L, -1)) luaL_error(L, "gemm field '%s' must be an integer (got %s)", k, luaL_typename(L, -1));
        v = lua_tointeger(L, -1);
        if (v < lo) luaL_error(L, "gemm field '%s' must be an integer >= %I (got %I)", k, lo, v);
        if (v > hi) luaL_error(L, "gemm field '%s' must be at most %I, cuBLAS's int (got %I)", k, hi, v);
    }
    lua_pop(L, 1);
    return v;
}

static kwb_cuda_buffer *gemm_buf(lua_State *L, const char *k) {
    lua_getfield(L, 2, k);
    ldbuf *u = luaL_testudata(L, -1, DBUF_MT);
    if (!u) luaL_error(L, "gemm field '%s' must be a device buffer (got %s)", k, luaL_typename(L, -1));
    if (!u->b) luaL_error(L, "gemm field '%s' is a freed device buffer", k);
    lua_getiuservalue(L, 1, 1);   /* keep the buffer alive as long as the plan */
    lua_pushvalue(L, -2);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 2);
    return u->b;
}

static int gemm_flag(lua_State *L, const char *k) {
    int t = lua_getfield(L, 2, k);
    if (t != LUA_TNIL && t != LUA_TBOOLEAN) luaL_error(L, "gemm field '%s' must be true or false", k);
    int v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

static float gemm_num(lua_State *L, const char *k, float def) {
    int t = lua_getfield(L, 2, k);
    if (t != LUA_TNIL && t != LUA_TNUMBER) luaL_error(L, "gemm field '%s' must be a number", k);
    float v = t == LUA_TNIL ? def : (float)lua_tonumber(L, -1);
    lua_pop(L, 1);
    return v;
}

int kwb_lua_cuda_plan_add_gemm(lua_State *L) {
    kwb_cuda_plan *p = check_plan(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 2)) {   /* [plan, spec, key, value] */
        int known = 0;
        if (lua_type(L, -2) == LUA_TSTRING)
            for (int i = 0; gemm_fields[i]; i++) known = known || strcmp(lua_tostring(L, -2), gemm_fields[i]) == 0;
        if (!known)
            return luaL_error(L, "unknown gemm field '%s' (known: m, n, k, a, lda, b, ldb, c, ldc, trans_a, trans_b, "
                                 "alpha, beta, a_offset, b_offset, c_offset)", luaL_tolstring(L, -2, NULL));
        lua_pop(L, 1);
    }
    kwb_cuda_gemm g;
    memset(&g, 0, sizeof g);
    g.m = (int32_t)gemm_int(L, "m", 1, 0, 1, INT32_MAX);
    g.n = (int32_t)gemm_int(L, "n", 1, 0, 1, INT32_MAX);
    g.k = (int32_t)gemm_int(L, "k", 1, 0, 1, INT32_MAX);
    g.lda = (int32_t)gemm_int(L, "lda", 1, 0, 1, INT32_MAX);
    g.ldb = (int32_t)gemm_int(L, "ldb", 1, 0, 1, INT32_MAX);
    g.ldc = (int32_t)gemm_int(L, "ldc", 1, 0, 1, INT32_MAX);
    g.a_offset = (uint64_t)gemm_int(L, "a_offset", 0, 0, 0, LUA_MAXINTEGER);
    g.b_offset = (uint64_t)gemm_int(L, "b_offset", 0, 0, 0, LUA_MAXINTEGER);
    g.c_offset = (uint64_t)gemm_int(L, "c_offset", 0, 0, 0, LUA_MAXINTEGER);
    g.trans_a = gemm_flag(L, "trans_a");
    g.trans_b = gemm_flag(L, "trans_b");
    g.alpha = gemm_num(L, "alpha", 1.0f);
    g.beta = gemm_num(L, "beta", 0.0f);
    g.a = gemm_buf(L, "a");
    g.b = gemm_buf(L, "b");
    g.c = gemm_buf(L, "c");
    int rc = kwb_cuda_plan_add_gemm(p, &g);
    if (rc == KWB_EINVAL) return luaL_error(L, "%s", kwb_last_error());
    if (rc) return fail_run(L, "no-cublas");
    lua_settop(L, 1);
    return 1;
}

