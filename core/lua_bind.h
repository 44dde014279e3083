/* lua_bind.h: what the C modules' Lua bindings (core/lua_*.c) share: the
 * expected-failure convention, status words, buffers, stats and timing
 * options, and the functions that fill kwb.core */
#ifndef KWB_LUA_BIND_H
#define KWB_LUA_BIND_H
#include <lua.h>

#include "kwb.h"

/* Push nil, msg, { code = code } and return 3 (the expected-failure
 * convention); the info table is on top for the caller to add fields to. */
int kwb_lua_fail(lua_State *L, const char *code, const char *msg);
/* The code word of a kwb_status ("no-driver", "out-of-memory", ...), or
 * fallback for a status that has none of its own. */
const char *kwb_lua_code(int status, const char *fallback);
/* The host buffer at idx (a kwb.buffer userdata), or raise. */
kwb_buffer *kwb_lua_checkbuffer(lua_State *L, int idx);
/* Push timing statistics as a table (median, min, p10, p90, spread, n, ...). */
void kwb_lua_push_stats(lua_State *L, const kwb_stats *st);
/* Read timing options from the table at idx (nil: defaults). */
void kwb_lua_check_time_opts(lua_State *L, int idx, kwb_time_opts *o);

/* The binding tables of each C module, filled into kwb.core. */
void kwb_lua_open_buffer(lua_State *L);
void kwb_lua_open_host(lua_State *L);
void kwb_lua_open_worker(lua_State *L);
void kwb_lua_open_os(lua_State *L);
void kwb_lua_open_cache(lua_State *L);
void kwb_lua_open_cuda(lua_State *L);
void kwb_lua_open_http(lua_State *L);
void kwb_lua_open_redis(lua_State *L);
void kwb_lua_open_child(lua_State *L);

#endif
