/* luastate.h: creating the Lua state and running code in it */
#ifndef KWB_LUASTATE_H
#define KWB_LUASTATE_H
#include <lua.h>

/* A state with the standard libraries, lpeg, cjson, kwb.core and the bundled
 * kwb modules loadable (KWB_LUA_PATH searched first). NULL if out of memory. */
lua_State *kwb_lua_new(void);
/* lua_close, and the state's allocator freed. */
void kwb_lua_close(lua_State *L);
/* The bytes the state's heap holds and its cap (0: none); -1 for a state
 * kwb_lua_new did not make. */
int kwb_lua_heap(lua_State *L, size_t *used, size_t *cap);
/* Cap the heap: an allocation that would take it past `cap` bytes fails
 * (Lua's "not enough memory" error); 0 lifts the cap. -1 as above. */
int kwb_lua_heap_cap(lua_State *L, size_t cap);
/* Record the cache path and load the `kwb` global. */
int kwb_lua_setup(lua_State *L, const char *cache_path);
/* lua_pcall with a traceback handler and Ctrl-C stopping the running code. */
int kwb_lua_docall(lua_State *L, int narg, int nres);
/* Print the error on top of the stack to stderr and pop it. */
void kwb_lua_report(lua_State *L, const char *progname);

/* The kwb.core module: every C primitive (core/lua_*.c) as a plain function. */
int luaopen_kwb_core(lua_State *L);

#endif
