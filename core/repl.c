/* repl.c: the interactive kwb prompt (libedit).
 *
 * As lua.c does it: a line is first tried as `return <line>` so bare
 * expressions print; input continues while the chunk is incomplete (the parse
 * error ends in <eof>); each chunk runs under the traceback handler with
 * Ctrl-C stopping it. Printing and Tab completion are Lua (kwb.cli.repl). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <editline/readline.h>
#include <lauxlib.h>
#include <lua.h>

#include "luastate.h"
#include "repl.h"

static lua_State *repl_L;   /* readline's completion callback has no context argument */

/* Ctrl-C at the prompt drops the line being typed. The handler sets a flag
 * and writes to a pipe; the prompt's reader polls the terminal and the pipe,
 * so it wakes whatever the libraries did to the signal disposition. */
static volatile sig_atomic_t prompt_interrupted;
static int wake_pipe[2] = {-1, -1};

static void on_prompt_sigint(int sig) {
    (void)sig;
    prompt_interrupted = 1;
    if (wake_pipe[1] >= 0) {
        ssize_t r = write(wake_pipe[1], "", 1);
        (void)r;
    }
}

static int prompt_getc(FILE *f) {
    for (;;) {
        if (prompt_interrupted) return '\n';   /* ends the line; prompt() discards it */
        struct pollfd p[2] = {{fileno(f), POLLIN, 0}, {wake_pipe[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            return EOF;
        }
        if (p[1].revents & POLLIN) {
            char drain[16];
            ssize_t r = read(wake_pipe[0], drain, sizeof drain);
            (void)r;
            continue;
        }
        unsigned char c;
        ssize_t n = read(fileno(f), &c, 1);
        if (n == 1) return c;
        if (n < 0 && errno == EINTR) continue;
        return EOF;
    }
}

/* readline with Ctrl-C handled: returns NULL at end of input, and NULL with
 * prompt_interrupted set when Ctrl-C cut the line. */
static char *prompt(const char *p) {
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_prompt_sigint;   /* no SA_RESTART: read() must see EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    prompt_interrupted = 0;
    char *line = readline(p);
    sigaction(SIGINT, &old, NULL);
    if (prompt_interrupted) {
        free(line);
        line = NULL;
        fputs("^C\n", stdout);
    }
    return line;
}

static int incomplete(lua_State *L, int status) {
    if (status != LUA_ERRSYNTAX) return 0;
    size_t len;
    const char *msg = lua_tolstring(L, -1, &len);
    static const char eof[] = "<eof>";
    return len >= sizeof eof - 1 && strcmp(msg + len - (sizeof eof - 1), eof) == 0;
}

/* Call kwb.cli.repl.<fn> with the values on top of the stack (narg of them). */
static int call_repl(lua_State *L, const char *fn, int narg, int nres) {
    lua_getglobal(L, "require");
    lua_pushliteral(L, "kwb.cli.repl");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, fn);
    lua_remove(L, -2);
    lua_insert(L, -(narg + 1));
    return kwb_lua_docall(L, narg, nres);
}

/* Completion: kwb.cli.repl.complete(word) returns the candidates in a table,
 * kept on the stack above whatever the reader holds until the last one is
 * handed out. */
static char *complete_gen(const char *text, int state) {
    static int base, idx, n;
    lua_State *L = repl_L;
    if (state == 0) {
        base = lua_gettop(L);
        lua_pushstring(L, text);
        if (call_repl(L, "complete", 1, 1) != LUA_OK || !lua_istable(L, -1)) {
            lua_settop(L, base);
            return NULL;
        }
        idx = 0;
        n = (int)luaL_len(L, -1);
    }
    if (idx >= n) {
        lua_settop(L, base);
        return NULL;
    }
    lua_rawgeti(L, base + 1, ++idx);
    char *s = strdup(lua_tostring(L, -1));
    lua_pop(L, 1);
    return s;
}

static char **complete(const char *text, int start, int end) {
    (void)start;
    (void)end;
    rl_attempted_completion_over = 1;   /* never fall back to file names */
    rl_completion_append_character = '\0';
    return rl_completion_matches(text, complete_gen);
}

/* Read one chunk: lines are joined while the chunk is incomplete. Leaves the
 * compiled function on the stack; returns 1, 0 at end of input, or -1 when
 * there is nothing to run (a syntax error, reported, or Ctrl-C). */
static int read_chunk(lua_State *L, char **histline) {
    char *line = prompt("> ");
    if (!line) return prompt_interrupted ? -1 : 0;
    const char *retline = lua_pushfstring(L, "return %s;", line);
    int status = luaL_loadbuffer(L, retline, strlen(retline), "=stdin");
    lua_remove(L, -2);                                   // [fn|err]
    if (status == LUA_OK) {
        *histline = line;
        return 1;
    }
    lua_pop(L, 1);
    lua_pushstring(L, line);                             // [chunk]
    free(line);
    for (;;) {
        size_t len;
        const char *chunk = lua_tolstring(L, -1, &len);
        status = luaL_loadbuffer(L, chunk, len, "=stdin"); // [chunk, fn|err]
        int more = incomplete(L, status);
        if (more && !(line = prompt(">> ")) && prompt_interrupted) {
            lua_pop(L, 2);                               /* Ctrl-C drops the whole chunk */
            return -1;
        }
        if (!more || !line) {
            *histline = strdup(chunk);
            lua_remove(L, -2);                           // [fn|err]
            if (status == LUA_OK) return 1;
            kwb_lua_report(L, "kwb");
            return more ? 0 : -1;                        /* end of input inside a chunk ends the REPL */
        }
        lua_pop(L, 1);                                   // [chunk]
        lua_pushfstring(L, "%s\n%s", chunk, line);      // [chunk, chunk+line]
        lua_remove(L, -2);
        free(line);
    }
}

static void history_path(char *out, size_t size) {
    const char *env = getenv("KWB_HISTORY");
    const char *home = getenv("HOME");
    if (env && *env) snprintf(out, size, "%s", env);
    else snprintf(out, size, "%s/.kwb_history", home && *home ? home : ".");
}

int kwb_repl(lua_State *L, const char *cache) {
    repl_L = L;
    char hist[4096];
    history_path(hist, sizeof hist);
    /* set before the first libedit call: using_history() initialises it */
    rl_readline_name = "kwb";
    rl_catch_signals = 0;
    rl_getc_function = prompt_getc;
    if (pipe(wake_pipe) == 0) {
        fcntl(wake_pipe[0], F_SETFL, O_NONBLOCK);
        fcntl(wake_pipe[1], F_SETFL, O_NONBLOCK);
    }
    using_history();
    read_history(hist);
    rl_attempted_completion_function = complete;
    rl_completer_word_break_characters = " \t\n\"'`@$><=;|&{}()[]+-*/%^~#,";
    lua_pushstring(L, cache);
    if (call_repl(L, "banner", 1, 1) == LUA_OK) {
        puts(lua_tostring(L, -1));
        lua_pop(L, 1);
    } else kwb_lua_report(L, "kwb");
    for (;;) {
        lua_settop(L, 0);
        char *histline = NULL;
        int r = read_chunk(L, &histline);
        if (histline && *histline) {
            add_history(histline);
            write_history(hist);
        }
        free(histline);
        if (r == 0) break;
        if (r < 0) continue;
        if (kwb_lua_docall(L, 0, LUA_MULTRET) != LUA_OK) {
            kwb_lua_report(L, "kwb");
            continue;
        }
        int n = lua_gettop(L);
        if (n > 0 && call_repl(L, "show", n, 0) != LUA_OK) kwb_lua_report(L, "kwb");
    }
    lua_settop(L, 0);
    putchar('\n');
    return 0;
}
