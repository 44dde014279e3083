/* lua_cuda.h: what the files of the CUDA backend's Lua bindings (lua_cuda.c,
 * lua_cuda_compile.c, lua_cuda_buffer.c, lua_cuda_tmap.c, lua_cuda_plan.c,
 * lua_cuda_gemm.c) share: their userdata types and metatable names, the
 * checks that take them from the stack, the failure of a device call, and
 * each file's part of kwb.core. */
#ifndef KWB_LUA_CUDA_H
#define KWB_LUA_CUDA_H
#include <stdint.h>

#include <lauxlib.h>
#include <lua.h>

#include "cuda_int.h"
#include "kwb.h"
#include "lua_bind.h"

#define MODULE_MT "kwb.cuda.module"
#define FN_MT "kwb.cuda.fn"
#define DBUF_MT "kwb.cuda.buffer"
#define PLAN_MT "kwb.cuda.plan"
#define TMAP_MT "kwb.cuda.tensor_map"

/* A kernel, a device buffer, a plan: NULL once closed (or before made). */
typedef struct { kwb_cuda_fn *f; } lfn;
typedef struct { kwb_cuda_buffer *b; } ldbuf;
typedef struct { kwb_cuda_plan *p; } lplan;

/* A tensor map: 128 opaque bytes at a 64-byte boundary inside the userdata;
 * its user value keeps the buffer it points into alive. */
typedef struct { unsigned char raw[128 + 63]; } ltmap;

static inline unsigned char *tmap_bytes(ltmap *u) { return (unsigned char *)(((uintptr_t)u->raw + 63) & ~(uintptr_t)63); }

/* The failure of a device call: its own code where its status has one (no
 * driver or device, out of memory), else `code` (a launch or run failure). */
static inline int fail_run(lua_State *L, const char *code) {
    return kwb_lua_fail(L, kwb_lua_code(kwb_last_status(), code), kwb_last_error());
}

/* Every type here has a function __index: its properties first (a module's
 * hash, a buffer's n), then the methods its metatable keeps under "methods".
 * method() is that second step: pushes the method k of type mt, or nil. */
static inline int method(lua_State *L, const char *mt, const char *k) {
    luaL_getmetatable(L, mt);
    if (lua_getfield(L, -1, "methods") != LUA_TTABLE) lua_pushnil(L);
    else lua_getfield(L, -1, k);
    return 1;
}

static inline kwb_cuda_fn *check_fn(lua_State *L, int idx) {
    lfn *u = luaL_checkudata(L, idx, FN_MT);
    if (!u->f) luaL_error(L, "CUDA kernel is closed");
    return u->f;
}

static inline kwb_cuda_buffer *check_dbuf(lua_State *L, int idx) {
    ldbuf *u = luaL_checkudata(L, idx, DBUF_MT);
    if (!u->b) luaL_error(L, "device buffer is freed");
    return u->b;
}

static inline kwb_cuda_plan *check_plan(lua_State *L, int idx) {
    lplan *u = luaL_checkudata(L, idx, PLAN_MT);
    if (!u->p) luaL_error(L, "plan is closed");
    return u->p;
}

/* Each file's metatables and kwb.core functions, set into the table on top
 * of the stack (kwb_lua_open_cuda calls them). */
void kwb_lua_cuda_open_compile(lua_State *L);
void kwb_lua_cuda_open_buffer(lua_State *L);
void kwb_lua_cuda_open_tmap(lua_State *L);
void kwb_lua_cuda_open_plan(lua_State *L);
/* plan:add_gemm (lua_cuda_gemm.c), one of a plan's methods. */
int kwb_lua_cuda_plan_add_gemm(lua_State *L);

#endif
