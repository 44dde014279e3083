/* lua_cuda_tmap.c: TMA tensor maps (kwb.core.cuda_tensor_map): the
 * arguments kwb.base.tmap.args checked, encoded by the driver into a userdata a
 * plan packs as a kernel argument (lua_cuda_plan.c). */
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "lua_cuda.h"

static void int_list(lua_State *L, int t, const char *k, uint32_t n, uint64_t *out) {
    if (lua_getfield(L, t, k) != LUA_TTABLE) luaL_error(L, "tensor map field '%s' must be a list of %d integers", k, (int)n);
    for (uint32_t i = 0; i < n; i++) {
        lua_rawgeti(L, -1, (lua_Integer)i + 1);
        if (!lua_isinteger(L, -1)) luaL_error(L, "tensor map field '%s' must be a list of %d integers", k, (int)n);
        out[i] = (uint64_t)lua_tointeger(L, -1);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

/* kwb.core.cuda_tensor_map(buf, args) -> tensor map: args as kwb.base.tmap.args
 * gives them (dtype, rank, offset, dims, strides, box, element_strides,
 * interleave, swizzle, l2, oob: the driver's values, checked there). */
static int l_tmap_new(lua_State *L) {
    kwb_cuda_buffer *b = check_dbuf(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_getfield(L, 2, "rank");
    if (!lua_isinteger(L, -1)) return luaL_error(L, "tensor map field 'rank' must be an integer");
    lua_Integer rank = lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (rank < 1 || rank > 5) return luaL_error(L, "a tensor map has rank 1 to 5 (got %d)", (int)rank);
    uint64_t dims[5] = {0}, strides[5] = {0}, box64[5] = {0}, es64[5] = {0}, v[6] = {0};
    uint32_t box[5], es[5];
    int_list(L, 2, "dims", (uint32_t)rank, dims);
    int_list(L, 2, "strides", (uint32_t)rank - 1, strides);
    int_list(L, 2, "box", (uint32_t)rank, box64);
    int_list(L, 2, "element_strides", (uint32_t)rank, es64);
    static const char *const scalars[] = {"dtype", "offset", "interleave", "swizzle", "l2", "oob"};
    for (int i = 0; i < 6; i++) {
        lua_getfield(L, 2, scalars[i]);
        if (!lua_isinteger(L, -1)) return luaL_error(L, "tensor map field '%s' must be an integer", scalars[i]);
        v[i] = (uint64_t)lua_tointeger(L, -1);
        lua_pop(L, 1);
    }
    for (int i = 0; i < rank; i++) box[i] = (uint32_t)box64[i], es[i] = (uint32_t)es64[i];
    ltmap *u = lua_newuserdatauv(L, sizeof *u, 1);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, TMAP_MT);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    if (kwb_cuda_tensor_map_encode(tmap_bytes(u), (int)v[0], (uint32_t)rank, kwb_cuda_buffer_ptr(b) + v[1], dims,
                                   strides, box, es, (int)v[2], (int)v[3], (int)v[4], (int)v[5]))
        return fail_run(L, "run-failed");
    return 1;
}

static int l_tmap_tostring(lua_State *L) {
    luaL_checkudata(L, 1, TMAP_MT);
    lua_pushliteral(L, "kwb.cuda.tensor_map");
    return 1;
}

void kwb_lua_cuda_open_tmap(lua_State *L) {
    static const luaL_Reg fns[] = {{"cuda_tensor_map", l_tmap_new}, {NULL, NULL}};
    if (luaL_newmetatable(L, TMAP_MT)) {
        static const luaL_Reg tmap_meta[] = {{"__tostring", l_tmap_tostring}, {NULL, NULL}};
        luaL_setfuncs(L, tmap_meta, 0);
    }
    lua_pop(L, 1);
    luaL_setfuncs(L, fns, 0);
}
