/* luastate.h: creating the Lua state and running code in it */
#ifndef KWB_LUASTATE_H
#define KWB_LUASTATE_H
#include <lua.h>

/* A state with the standard libraries, lpeg, cjson, kwb.core and the bundled
 * kwb modules loadable (KWB_LUA_PATH searched first). NULL if out of memory. */
lua_State *kwb_lua_new(void);
/* Record the cache path and load the `kwb` global. */
int kwb_lua_setup(lua_State *L, const char *cache_path);
/* lua_pcall with a traceback handler and Ctrl-C stopping the running code. */
int kwb_lua_docall(lua_State *L, int narg, int nres);
/* Print the error on top of the stack to stderr and pop it. */
void kwb_lua_report(lua_State *L, const char *progname);

int luaopen_kwb_core(lua_State *L);

/* The binding tables of each C module, filled into kwb.core. */
void kwb_lua_open_buffer(lua_State *L);
void kwb_lua_open_host(lua_State *L);
void kwb_lua_open_worker(lua_State *L);
void kwb_lua_open_cache(lua_State *L);
void kwb_lua_open_cuda(lua_State *L);
/* Push a stats or diff result as a Lua table. */
struct kwb_stats;
void kwb_lua_push_stats(lua_State *L, const struct kwb_stats *st);
/* Read timing options from the table at idx (nil: defaults). */
struct kwb_time_opts;
void kwb_lua_check_time_opts(lua_State *L, int idx, struct kwb_time_opts *o);
/* Return nil, message, {code = code} (the expected-failure convention);
 * the info table is left for the caller to extend when extra is 1. */
int kwb_lua_fail(lua_State *L, const char *code, const char *msg);

#endif
