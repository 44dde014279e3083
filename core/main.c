/* main.c: the kwb command line.
 *
 *   kwb [--cache PATH] [-e CODE]... [FILE.lua | - | SUBCOMMAND] [args...]
 *
 * Everything after the file (or subcommand) goes to it as `arg` and `...`, as
 * lua.c does. The work itself runs inside lua_pcall (pmain). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "kwb.h"
#include "luastate.h"
#include "repl.h"
#include "os.h"

enum { EXIT_RUN = 1, EXIT_USAGE = 2 };

static const char *progname = "kwb";

static void usage_error(const char *fmt, const char *what) {
    fprintf(stderr, "%s: ", progname);
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\ntry '%s --help'\n", progname);
}

typedef struct {
    int argc;
    char **argv;
    const char *cache;
    int first_script;   /* index of the file / subcommand / "-", or argc if none */
    int has_e;
    int status;         /* exit status decided inside pmain */
} cli;

/* kwb's own options come first; returns 0 or EXIT_USAGE. -e chunks run later,
 * in order, so only their presence is noted here. */
static int parse_options(cli *c) {
    int i = 1;
    for (; i < c->argc; i++) {
        const char *a = c->argv[i];
        if (strcmp(a, "--") == 0) { i++; break; }
        if (a[0] != '-' || strcmp(a, "-") == 0) break;
        if (strcmp(a, "-e") == 0) {
            if (++i >= c->argc) { usage_error("'%s' needs an argument", "-e"); return EXIT_USAGE; }
            c->has_e = 1;
        } else if (strcmp(a, "--cache") == 0) {
            if (++i >= c->argc) { usage_error("'%s' needs a path", "--cache"); return EXIT_USAGE; }
            c->cache = c->argv[i];
            if (!*c->cache) { usage_error("'%s' needs a path, got an empty one", "--cache"); return EXIT_USAGE; }
        } else if (strncmp(a, "--cache=", 8) == 0) {
            c->cache = a + 8;
            if (!*c->cache) { usage_error("'%s' needs a path, got an empty one", "--cache"); return EXIT_USAGE; }
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 ||
                   strcmp(a, "--version") == 0 || strcmp(a, "-v") == 0) {
            /* handled in pmain */
        } else {
            usage_error("unknown option '%s'", a);
            return EXIT_USAGE;
        }
    }
    c->first_script = i;
    return 0;
}

static int has_flag(cli *c, const char *a, const char *b) {
    for (int i = 1; i < c->first_script; i++) {
        if (strcmp(c->argv[i], "-e") == 0 || strcmp(c->argv[i], "--cache") == 0) { i++; continue; }
        if (strcmp(c->argv[i], a) == 0 || strcmp(c->argv[i], b) == 0) return 1;
    }
    return 0;
}

/* Build the global `arg` as lua.c does: arg[0] is the script, options before
 * it have negative indices, its arguments positive ones. */
static void create_arg_table(lua_State *L, cli *c, int script) {
    int narg = c->argc - (script + 1);
    lua_createtable(L, narg, script + 1);
    for (int i = 0; i < c->argc; i++) {
        lua_pushstring(L, c->argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

/* Call kwb.cli.<fn>(name, args...) from the bundled CLI module. */
static int call_cli(lua_State *L, const char *fn, int script, cli *c) {
    lua_getglobal(L, "require");
    lua_pushliteral(L, "kwb.cli");
    if (kwb_lua_docall(L, 1, 1) != LUA_OK) return 0;
    lua_getfield(L, -1, fn);
    lua_remove(L, -2);
    int n = 0;
    luaL_checkstack(L, c->argc - script + 1, "too many arguments");   /* (the C stack holds 20 without asking) */
    for (int i = script; i < c->argc; i++, n++) lua_pushstring(L, c->argv[i]);
    return kwb_lua_docall(L, n, 1) == LUA_OK ? 1 : 0;
}

static int run_chunks(lua_State *L, cli *c) {
    for (int i = 1; i < c->first_script; i++) {
        if (strcmp(c->argv[i], "--cache") == 0) { i++; continue; }
        if (strcmp(c->argv[i], "-e") != 0) continue;
        const char *code = c->argv[++i];
        if (luaL_loadbuffer(L, code, strlen(code), "=(command line)") != LUA_OK ||
            kwb_lua_docall(L, 0, 0) != LUA_OK) {
            kwb_lua_report(L, progname);
            return 0;
        }
    }
    return 1;
}

/* The default cache: $XDG_CACHE_HOME/kwb/kwb.db, else ~/.cache/kwb/kwb.db
 * (one per user, wherever kwb runs from); NULL when neither is set. */
static const char *default_cache(char *buf, size_t n) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/') snprintf(buf, n, "%s/kwb/kwb.db", xdg);   /* (the spec ignores a relative one) */
    else if (home && *home) snprintf(buf, n, "%s/.cache/kwb/kwb.db", home);
    else return NULL;
    return buf;
}

/* The cache's directory: made for the default (from NULL), required for a
 * path the user named (from "--cache" or "KWB_CACHE"). 1, or 0 having said why. */
static int cache_place(const char *path, const char *from) {
    if (kwb_os_cache_place(path, from != NULL) == 0) return 1;
    if (from) fprintf(stderr, "%s: %s%s%s: %s\n", progname, from, strcmp(from, "KWB_CACHE") == 0 ? "=" : " ", path,
                      kwb_last_error());
    else fprintf(stderr, "%s: the default cache %s: %s\n", progname, path, kwb_last_error());
    return 0;
}

static int pmain(lua_State *L) {
    cli *c = lua_touserdata(L, 1);
    c->status = EXIT_RUN;
    if (has_flag(c, "--version", "-v")) {
        printf("kwb %s (%s)\n", kwb_version(), LUA_RELEASE);
        c->status = 0;
        return 0;
    }
    char def[4096];
    const char *cache = c->cache, *from = "--cache";
    if (!cache && (cache = getenv("KWB_CACHE")) && *cache) from = "KWB_CACHE";
    else if (!c->cache) cache = from = NULL;
    if (!cache && !(cache = default_cache(def, sizeof def))) {
        fprintf(stderr, "%s: no place for the cache: neither HOME nor XDG_CACHE_HOME is set "
                        "(name one with --cache PATH or KWB_CACHE)\n", progname);
        return 0;
    }
    if (kwb_lua_setup(L, cache) != LUA_OK) { kwb_lua_report(L, progname); return 0; }
    if (has_flag(c, "--help", "-h")) {
        if (!call_cli(L, "help", c->argc, c)) { kwb_lua_report(L, progname); return 0; }
        fputs(lua_tostring(L, -1), stdout);
        c->status = 0;
        return 0;
    }
    if (!cache_place(cache, from)) { c->status = from ? EXIT_USAGE : EXIT_RUN; return 0; }
    if (!run_chunks(L, c)) return 0;

    int script = c->first_script;
    if (script >= c->argc) {
        if (c->has_e) { c->status = 0; return 0; }
        if (isatty(0)) {
            create_arg_table(L, c, 0);
            c->status = kwb_repl(L, cache);
            return 0;
        }
        /* no arguments, stdin not a terminal: run stdin as a script */
        create_arg_table(L, c, 0);
        if (!call_cli(L, "run_file", c->argc, c)) { kwb_lua_report(L, progname); return 0; }
        c->status = (int)lua_tointeger(L, -1);
        return 0;
    }
    create_arg_table(L, c, script);
    /* kwb.cli.main decides: a subcommand, "-" (stdin) or a file; it returns the exit status */
    if (!call_cli(L, "main", script, c)) { kwb_lua_report(L, progname); return 0; }
    c->status = (int)lua_tointeger(L, -1);
    return 0;
}

int main(int argc, char **argv) {
    /* a sandbox (core/sandbox.c): no Lua, nothing of the judge's */
    if (argc > 1 && strcmp(argv[1], "--sandbox-child") == 0) return kwb_sandbox_main(argc, argv);
    /* a host worker of root's pool: its sandboxes' uid kept aside (core/sandbox.c) */
    if (argc == 2 && strcmp(argv[1], "worker") == 0 && kwb_sandbox_take_uid() < 0) {
        fprintf(stderr, "kwb worker: cannot keep its sandboxes' uid: %s\n", strerror(errno));
        return EXIT_RUN;
    }
    /* past the file size limit a write or a memfd's size fails (EFBIG)
     * instead of killing kwb: a host buffer that large is private memory */
    signal(SIGXFSZ, SIG_IGN);
    cli c = {.argc = argc, .argv = argv};
    int rc = parse_options(&c);
    if (rc) return rc;
    lua_State *L = kwb_lua_new();
    if (!L) {
        fprintf(stderr, "%s: cannot create the Lua state: not enough memory\n", progname);
        return EXIT_RUN;
    }
    lua_pushcfunction(L, pmain);
    lua_pushlightuserdata(L, &c);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
        kwb_lua_report(L, progname);
        c.status = EXIT_RUN;
    }
    kwb_lua_close(L);
    return c.status;
}
