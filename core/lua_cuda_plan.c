/* lua_cuda_plan.c: launch plans: a kernel's arguments packed at the
 * offsets the kernel reports, the steps run in order, timed (graphs, cold
 * L2, clocks) or replayed once; the gemm steps are lua_cuda_gemm.c's. */
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "lua_cuda.h"

static int l_plan_new(lua_State *L) {
    lplan *u = lua_newuserdatauv(L, sizeof *u, 1);
    u->p = NULL;
    luaL_setmetatable(L, PLAN_MT);
    lua_newtable(L);               /* keeps the kernels and buffers of its steps alive */
    lua_setiuservalue(L, -2, 1);
    u->p = kwb_cuda_plan_new();
    if (!u->p) return kwb_lua_fail(L, "out-of-memory", kwb_last_error());
    return 1;
}

static void dims(lua_State *L, int idx, const char *what, uint32_t d[3], uint32_t def) {
    d[0] = d[1] = d[2] = def;
    if (lua_isnoneornil(L, idx)) return;
    if (lua_isinteger(L, idx)) {
        lua_Integer v = lua_tointeger(L, idx);
        if (v < 1 || v > 0x7fffffff) luaL_error(L, "%s must be >= 1 (got %d)", what, (int)v);
        d[0] = (uint32_t)v;
        d[1] = d[2] = 1;
        return;
    }
    luaL_checktype(L, idx, LUA_TTABLE);
    for (int i = 0; i < 3; i++) {
        lua_rawgeti(L, idx, i + 1);
        if (lua_isnil(L, -1)) d[i] = 1;
        else {
            lua_Integer v = lua_tointeger(L, -1);
            if (!lua_isinteger(L, -1) || v < 1 || v > 0x7fffffff)
                luaL_error(L, "%s[%d] must be an integer >= 1", what, i + 1);
            d[i] = (uint32_t)v;
        }
        lua_pop(L, 1);
    }
}

/* The types of a kernel argument; type_names and type_sizes follow this order. */
typedef enum { ARG_I32, ARG_U32, ARG_I64, ARG_U64, ARG_F32, ARG_F64, ARG_PTR, ARG_TMAP } arg_type;
static const char *const type_names[] = {"i32", "u32", "i64", "u64", "f32", "f64", "ptr", "tmap", NULL};
static const uint32_t type_sizes[] = {4, 4, 8, 8, 4, 8, 8, 128};

/* Pack one argument of type t at off into buf. */
static void pack(lua_State *L, int idx, arg_type t, char *buf, uint32_t off, int argno) {
    switch (t) {
    case ARG_I32: case ARG_U32: {
        if (!lua_isinteger(L, idx)) luaL_error(L, "argument %d must be an integer", argno);
        int32_t v = (int32_t)lua_tointeger(L, idx);
        memcpy(buf + off, &v, 4);
        break;
    }
    case ARG_I64: case ARG_U64: {
        if (!lua_isinteger(L, idx)) luaL_error(L, "argument %d must be an integer", argno);
        int64_t v = (int64_t)lua_tointeger(L, idx);
        memcpy(buf + off, &v, 8);
        break;
    }
    case ARG_F32: {
        float v = (float)luaL_checknumber(L, idx);
        memcpy(buf + off, &v, 4);
        break;
    }
    case ARG_F64: {
        double v = luaL_checknumber(L, idx);
        memcpy(buf + off, &v, 8);
        break;
    }
    case ARG_TMAP: {
        ltmap *u = luaL_testudata(L, idx, TMAP_MT);
        if (!u) luaL_error(L, "argument %d must be a tensor map (got %s)", argno, luaL_typename(L, idx));
        memcpy(buf + off, tmap_bytes(u), 128);
        break;
    }
    case ARG_PTR: {
        uint64_t v = 0;
        if (!lua_isnil(L, idx)) {
            ldbuf *u = luaL_testudata(L, idx, DBUF_MT);
            if (!u) luaL_error(L, "argument %d must be a device buffer (got %s)", argno, luaL_typename(L, idx));
            if (!u->b) luaL_error(L, "argument %d is a freed device buffer", argno);
            v = kwb_cuda_buffer_ptr(u->b);
        }
        memcpy(buf + off, &v, 8);
        break;
    }
    }
}

/* The type of argument idx when none is declared: buffers are pointers,
 * integers i32 (i64 where the kernel's parameter has 8 bytes), floats f32
 * (f64 likewise). */
static arg_type infer_type(lua_State *L, int idx, uint32_t size, int argno) {
    if (lua_isnil(L, idx) || luaL_testudata(L, idx, DBUF_MT)) return ARG_PTR;
    if (luaL_testudata(L, idx, TMAP_MT)) return ARG_TMAP;
    if (lua_isinteger(L, idx)) return size == 8 ? ARG_I64 : ARG_I32;
    if (lua_type(L, idx) == LUA_TNUMBER) return size == 8 ? ARG_F64 : ARG_F32;
    return (arg_type)luaL_error(L, "argument %d: cannot pass a %s to a kernel", argno, luaL_typename(L, idx));
}

/* plan:add(fn, grid, block, smem, cluster, {args}, {types} | nil) */
static int l_plan_add(lua_State *L) {
    kwb_cuda_plan *p = check_plan(L, 1);
    kwb_cuda_fn *f = check_fn(L, 2);
    kwb_cuda_launch l;
    memset(&l, 0, sizeof l);
    l.fn = f;
    int launcher = kwb_cuda_fn_is_launcher(f);
    dims(L, 3, "grid", l.grid, 1);
    dims(L, 4, "block", l.block, 1);
    lua_Integer smem = luaL_optinteger(L, 5, 0);
    if (smem < 0 || smem > 0x7fffffff) return luaL_error(L, "shared memory must be >= 0 (got %d)", (int)smem);
    l.smem = (uint32_t)smem;
    if (!lua_isnoneornil(L, 6)) dims(L, 6, "cluster", l.cluster, 1);
    luaL_checktype(L, 7, LUA_TTABLE);
    int has_types = lua_istable(L, 8);
    lua_Integer nargs = luaL_len(L, 7);
    lua_Integer n = lua_getfield(L, 7, "n") == LUA_TNUMBER ? lua_tointeger(L, -1) : nargs;
    lua_pop(L, 1);
    nargs = n;
    if (nargs > 128) return luaL_error(L, "more than 128 kernel arguments");
    int32_t np = kwb_cuda_fn_nparams(f);
    if (!launcher && np >= 0 && np != nargs)
        return luaL_error(L, "kernel takes %d arguments, got %d", (int)np, (int)nargs);
    if (has_types && luaL_len(L, 8) != nargs)
        return luaL_error(L, "%d argument types for %d arguments", (int)luaL_len(L, 8), (int)nargs);
    char buf[4096];
    uint32_t offsets[128], end = 0;
    memset(buf, 0, sizeof buf);
    for (lua_Integer i = 0; i < nargs; i++) {
        lua_rawgeti(L, 7, i + 1);
        int vi = lua_gettop(L);
        uint32_t off = 0, size = 0;
        if (!launcher && np >= 0) kwb_cuda_fn_param(f, (uint32_t)i, &off, &size);
        arg_type t;
        if (has_types) {
            lua_rawgeti(L, 8, i + 1);
            t = (arg_type)luaL_checkoption(L, -1, NULL, type_names);
            lua_pop(L, 1);
            if (size && size != type_sizes[t])
                return luaL_error(L, "argument %d is declared %s (%d bytes) but the kernel's parameter has %d bytes",
                                  (int)i + 1, type_names[t], (int)type_sizes[t], (int)size);
        } else t = infer_type(L, vi, size, (int)i + 1);
        if (launcher || np < 0) {   /* natural alignment (a tensor map's: 64) */
            uint32_t s = t == ARG_TMAP ? 64 : type_sizes[t];
            off = (end + s - 1) / s * s;
        } else if (size != type_sizes[t])
            return luaL_error(L, "argument %d: the kernel's parameter has %d bytes, a %s has %d (declare its type)",
                              (int)i + 1, (int)size, type_names[t], (int)type_sizes[t]);
        if (off + type_sizes[t] > sizeof buf) return luaL_error(L, "kernel arguments exceed %d bytes", (int)sizeof buf);
        pack(L, vi, t, buf, off, (int)i + 1);
        offsets[i] = off;
        if (off + type_sizes[t] > end) end = off + type_sizes[t];
        /* keep buffers (and tensor maps, which keep theirs) alive as long as the plan */
        if ((t == ARG_PTR || t == ARG_TMAP) && !lua_isnil(L, vi)) {
            lua_getiuservalue(L, 1, 1);
            lua_pushvalue(L, vi);
            lua_pushboolean(L, 1);
            lua_rawset(L, -3);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    if (!launcher && np >= 0 && np > 0) {
        uint32_t off, size;
        kwb_cuda_fn_param(f, (uint32_t)np - 1, &off, &size);
        end = off + size;
    }
    l.params = buf;
    l.params_len = end;
    l.offsets = offsets;
    l.nargs = (uint32_t)nargs;
    lua_getiuservalue(L, 1, 1);
    lua_pushvalue(L, 2);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    if (kwb_cuda_plan_add(p, &l)) return luaL_error(L, "%s", kwb_last_error());
    lua_settop(L, 1);
    return 1;
}

static int l_plan_index(lua_State *L) {
    luaL_checkudata(L, 1, PLAN_MT);
    return method(L, PLAN_MT, luaL_checkstring(L, 2));
}

static int l_plan_run(lua_State *L) {
    int rc = kwb_cuda_plan_run(check_plan(L, 1));
    if (rc) return fail_run(L, "launch-failed");
    lua_pushboolean(L, 1);
    return 1;
}

/* plan:poison_before({buffer...}): poisoned before every timed run */
static int l_plan_poison_before(lua_State *L) {
    kwb_cuda_plan *p = check_plan(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer n = luaL_len(L, 2);
    if (n > 64) return luaL_error(L, "at most 64 buffers to poison (got %d)", (int)n);
    kwb_cuda_buffer *bufs[64];
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 2, i);
        bufs[i - 1] = check_dbuf(L, -1);
        lua_getiuservalue(L, 1, 1);   /* keep the buffer alive as long as the plan */
        lua_pushvalue(L, -2);
        lua_pushboolean(L, 1);
        lua_rawset(L, -3);
        lua_pop(L, 2);
    }
    if (kwb_cuda_plan_poison_before(p, bufs, (uint32_t)n)) return luaL_error(L, "%s", kwb_last_error());
    lua_settop(L, 1);
    return 1;
}

/* plan:time(opts, cold, graph) -> stats with clocks */
static int l_plan_time(lua_State *L) {
    kwb_cuda_plan *p = check_plan(L, 1);
    kwb_time_opts o;
    kwb_lua_check_time_opts(L, 2, &o);
    int cold = lua_isnoneornil(L, 3) ? 1 : lua_toboolean(L, 3);
    int graph = lua_isnoneornil(L, 4) ? 1 : lua_toboolean(L, 4);
    kwb_stats st;
    kwb_cuda_clocks clk;
    int rc = kwb_cuda_plan_time(p, &o, cold, graph, &st, &clk);
    if (rc) return fail_run(L, "launch-failed");
    kwb_lua_push_stats(L, &st);
    lua_pushboolean(L, cold); lua_setfield(L, -2, "cold");
    lua_pushboolean(L, graph); lua_setfield(L, -2, "graph");
    if (clk.valid) {
        lua_createtable(L, 0, 7);
        lua_pushinteger(L, clk.sm_mhz_before); lua_setfield(L, -2, "sm_mhz_before");
        lua_pushinteger(L, clk.sm_mhz_after); lua_setfield(L, -2, "sm_mhz_after");
        lua_pushinteger(L, clk.sm_mhz_max); lua_setfield(L, -2, "sm_mhz_max");
        lua_pushinteger(L, clk.temp_before); lua_setfield(L, -2, "temp_before");
        lua_pushinteger(L, clk.temp_after); lua_setfield(L, -2, "temp_after");
        lua_pushinteger(L, (lua_Integer)clk.reasons_after); lua_setfield(L, -2, "reasons");
        lua_pushboolean(L, clk.throttled); lua_setfield(L, -2, "throttled");
        lua_setfield(L, -2, "clocks");
    }
    return 1;
}

/* plan:replay([cold]) -> seconds: one timed run as a graph (kwb_cuda_plan_replay) */
static int l_plan_replay(lua_State *L) {
    kwb_cuda_plan *p = check_plan(L, 1);
    int cold = lua_isnoneornil(L, 2) ? 1 : lua_toboolean(L, 2);
    double s = 0;
    if (kwb_cuda_plan_replay(p, cold, &s)) return fail_run(L, "launch-failed");
    lua_pushnumber(L, s);
    return 1;
}

static int l_plan_gc(lua_State *L) {
    lplan *u = luaL_checkudata(L, 1, PLAN_MT);
    kwb_cuda_plan_free(u->p);
    u->p = NULL;
    return 0;
}

static int l_plan_tostring(lua_State *L) {
    lplan *u = luaL_checkudata(L, 1, PLAN_MT);
    lua_pushstring(L, u->p ? "kwb.cuda.plan" : "kwb.cuda.plan (closed)");
    return 1;
}

void kwb_lua_cuda_open_plan(lua_State *L) {
    static const luaL_Reg plan_meta[] = {
        {"__index", l_plan_index}, {"__gc", l_plan_gc}, {"__close", l_plan_gc}, {"__tostring", l_plan_tostring},
        {NULL, NULL},
    };
    static const luaL_Reg plan_methods[] = {
        {"add", l_plan_add}, {"add_gemm", kwb_lua_cuda_plan_add_gemm}, {"run", l_plan_run}, {"time", l_plan_time},
        {"replay", l_plan_replay}, {"poison_before", l_plan_poison_before}, {NULL, NULL},
    };
    static const luaL_Reg fns[] = {{"cuda_plan", l_plan_new}, {NULL, NULL}};
    if (luaL_newmetatable(L, PLAN_MT)) {
        luaL_setfuncs(L, plan_meta, 0);
        luaL_newlib(L, plan_methods);
        lua_setfield(L, -2, "methods");
    }
    lua_pop(L, 1);
    luaL_setfuncs(L, fns, 0);
}
