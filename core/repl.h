/* repl.h: the interactive prompt */
#ifndef KWB_REPL_H
#define KWB_REPL_H
#include <lua.h>

/* Run the prompt until end of input; returns the exit status. */
int kwb_repl(lua_State *L, const char *cache);

#endif
