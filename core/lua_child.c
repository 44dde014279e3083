/* lua_child.c: core.child: a long-lived helper process the judge owns (the
 * reference process of a PyTorch problem, kwb.problems.torch). It speaks in
 * lines on its stdin and stdout, and shares one region of memory with kwb: a
 * memfd that is its fd 3, through which buffers go both ways without a copy
 * through a pipe. Its stderr goes to a memfd of its own, read back when a
 * message must say why it died. It runs in a process group of its own, so
 * closing it kills whatever it started too. It shares no address space with
 * kwb and none with a candidate (candidates run in sandboxes of their own).
 *
 *   local ch = core.child({ "python3", "-c", src }, { shm = bytes })
 *   ch:send(line) ch:recv(seconds) -> line | nil, "timeout" | "exited", msg
 *   ch:put(offset, buffer) ch:get(offset, buffer) ch:grow(bytes) ch:size()
 *   ch:stderr() -> its last 4 KiB of stderr; ch:pid(); ch:close()
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "kwb.h"
#include "lua_bind.h"

#define CHILD_MT "kwb.child"

extern char **environ;

typedef struct {
    pid_t pid;            /* 0 once reaped */
    pid_t owner;          /* the process that started it: only it kills it (a forked copy only closes its ends) */
    int status;           /* its wait status once reaped */
    int in, out;          /* its stdin (we write), its stdout (we read) */
    int err;              /* the memfd its stderr goes to */
    int shm;              /* the shared memfd (its fd 3) */
    unsigned char *map;   /* our mapping of it */
    size_t bytes;
    char *line;           /* what was read past the last line returned */
    size_t len, cap;
} child;

static child *check(lua_State *L) {
    child *c = luaL_checkudata(L, 1, CHILD_MT);
    if (c->in < 0) luaL_error(L, "the child process is closed");
    if (c->owner != getpid()) luaL_error(L, "the child process belongs to the process that started it (%d)", (int)c->owner);
    return c;
}

static int map_shm(child *c, size_t bytes) {
    if (ftruncate(c->shm, (off_t)bytes) != 0) return -1;
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, c->shm, 0);
    if (m == MAP_FAILED) return -1;
    if (c->map) munmap(c->map, c->bytes);
    c->map = m;
    c->bytes = bytes;
    return 0;
}

/* Reap it if it has ended (no wait): 1 when it has. */
static int reaped(child *c, int block) {
    if (c->pid == 0) return 1;
    int st;
    pid_t r;
    while ((r = waitpid(c->pid, &st, block ? 0 : WNOHANG)) < 0 && errno == EINTR) {}
    if (r == c->pid) { c->status = st; c->pid = 0; return 1; }
    if (r < 0 && errno == ECHILD) { c->status = -1; c->pid = 0; return 1; }   /* (collected elsewhere) */
    return 0;
}

static void shut(child *c) {
    if (c->pid > 0 && c->owner == getpid()) {
        kwb_worker_keep(c->pid, 0);
        kill(-c->pid, SIGKILL);
        kill(c->pid, SIGKILL);
        reaped(c, 1);
    }
    if (c->in >= 0) close(c->in);
    if (c->out >= 0) close(c->out);
    if (c->err >= 0) close(c->err);
    if (c->shm >= 0) close(c->shm);
    if (c->map) munmap(c->map, c->bytes);
    free(c->line);
    c->in = c->out = c->err = c->shm = -1;
    c->map = NULL;
    c->line = NULL;
}

static const char *how_ended(child *c, char *buf, size_t n) {
    if (c->pid != 0) snprintf(buf, n, "closed its output");
    else if (c->status == -1) snprintf(buf, n, "ended");
    else if (WIFSIGNALED(c->status)) snprintf(buf, n, "killed by signal %d", WTERMSIG(c->status));
    else snprintf(buf, n, "exited with status %d", WEXITSTATUS(c->status));
    return buf;
}

/* core.child(argv, { shm = bytes }) -> child | nil, msg, info */
static int l_child(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    size_t bytes = 1 << 20;
    if (lua_istable(L, 2)) {
        lua_getfield(L, 2, "shm");
        if (!lua_isnil(L, -1)) bytes = (size_t)luaL_checkinteger(L, -1);
        lua_pop(L, 1);
    }
    int n = (int)luaL_len(L, 1);
    if (n < 1) return luaL_error(L, "core.child: argv is empty");
    const char **argv = lua_newuserdatauv(L, sizeof *argv * (size_t)(n + 1), 0);
    for (int i = 0; i < n; i++) {
        lua_geti(L, 1, i + 1);
        argv[i] = luaL_checkstring(L, -1);
        lua_pop(L, 1);   /* (the string stays in the table) */
    }
    argv[n] = NULL;
    child *c = lua_newuserdatauv(L, sizeof *c, 0);
    memset(c, 0, sizeof *c);
    c->in = c->out = c->err = c->shm = -1;
    luaL_setmetatable(L, CHILD_MT);
    int pi[2] = {-1, -1}, po[2] = {-1, -1};
    c->shm = memfd_create("kwb-child-shm", MFD_CLOEXEC);
    c->err = memfd_create("kwb-child-stderr", MFD_CLOEXEC);
    if (c->shm < 0 || c->err < 0 || map_shm(c, bytes ? bytes : 4096) != 0 || pipe2(pi, O_CLOEXEC) != 0 ||
        pipe2(po, O_CLOEXEC) != 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "cannot set up a child process: %s", strerror(errno));
        for (int i = 0; i < 2; i++) { if (pi[i] >= 0) close(pi[i]); if (po[i] >= 0) close(po[i]); }
        shut(c);
        return kwb_lua_fail(L, "io", msg);
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pi[0], 0);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, c->err, 2);
    posix_spawn_file_actions_adddup2(&fa, c->shm, 3);   /* (dup2 clears close-on-exec) */
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&at, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, &at, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(pi[0]);
    close(po[1]);
    c->in = pi[1];
    c->out = po[0];
    if (rc != 0) {
        char msg[300];
        snprintf(msg, sizeof msg, "cannot run %s: %s", argv[0], strerror(rc));
        shut(c);
        return kwb_lua_fail(L, "no-program", msg);
    }
    c->pid = pid;
    c->owner = getpid();
    kwb_worker_keep(pid, 1);   /* (a worker's reaper, between requests, spares it) */
    return 1;
}

/* write(2) with SIGPIPE held back: a write to one that died is EPIPE,
 * answered as "exited", and the signal it raised is taken back here. */
static ssize_t write_quiet(int fd, const char *s, size_t len) {
    sigset_t pipe_only, old;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    ssize_t w = write(fd, s, len);
    int e = errno;
    if (w < 0 && e == EPIPE) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_only, NULL, &zero) < 0 && errno == EINTR) {}
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return w;
}

static int l_send(lua_State *L) {
    child *c = check(L);
    size_t len;
    const char *s = luaL_checklstring(L, 2, &len);
    while (len > 0) {
        ssize_t w = write_quiet(c->in, s, len);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            char buf[80];
            reaped(c, 0);
            lua_pushnil(L);
            lua_pushliteral(L, "exited");
            lua_pushstring(L, how_ended(c, buf, sizeof buf));
            return 3;
        }
        s += w;
        len -= (size_t)w;
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* recv(seconds) -> the next line | nil, "timeout" | "exited", how */
static int l_recv(lua_State *L) {
    child *c = check(L);
    double limit = luaL_optnumber(L, 2, 60);
    double deadline = kwb_now() + limit;
    for (;;) {
        char *nl = c->len ? memchr(c->line, '\n', c->len) : NULL;
        if (nl) {
            size_t k = (size_t)(nl - c->line);
            lua_pushlstring(L, c->line, k);
            memmove(c->line, nl + 1, c->len - k - 1);
            c->len -= k + 1;
            return 1;
        }
        double rest = deadline - kwb_now();
        if (rest <= 0) {
            lua_pushnil(L);
            lua_pushliteral(L, "timeout");
            lua_pushfstring(L, "no answer in %f s", limit);
            return 3;
        }
        struct pollfd p = {.fd = c->out, .events = POLLIN};
        int r = poll(&p, 1, (int)(rest * 1000) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) continue;
        if (c->len + 65536 > c->cap) {
            size_t cap = c->cap ? c->cap * 2 : 65536;
            while (cap < c->len + 65536) cap *= 2;
            char *nb = realloc(c->line, cap);
            if (!nb) return luaL_error(L, "out of memory reading a child process");
            c->line = nb;
            c->cap = cap;
        }
        ssize_t got = read(c->out, c->line + c->len, 65536);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            char buf[80];
            reaped(c, 1);   /* (its stdout closed: it is ending) */
            lua_pushnil(L);
            lua_pushliteral(L, "exited");
            lua_pushstring(L, how_ended(c, buf, sizeof buf));
            return 3;
        }
        c->len += (size_t)got;
    }
}

static size_t check_span(lua_State *L, child *c, kwb_buffer *b) {
    lua_Integer off = luaL_checkinteger(L, 2);
    size_t n = kwb_buffer_bytes(b);
    if (off < 0 || (size_t)off > c->bytes || n > c->bytes - (size_t)off)
        luaL_error(L, "%d bytes at offset %d do not fit the shared region of %d bytes", (int)n, (int)off, (int)c->bytes);
    return (size_t)off;
}

/* put(offset, buffer): the buffer's bytes into the shared region */
static int l_put(lua_State *L) {
    child *c = check(L);
    kwb_buffer *b = kwb_lua_checkbuffer(L, 3);
    size_t off = check_span(L, c, b);
    memcpy(c->map + off, kwb_buffer_data(b), kwb_buffer_bytes(b));
    return 0;
}

/* get(offset, buffer): the shared region's bytes into the buffer */
static int l_get(lua_State *L) {
    child *c = check(L);
    kwb_buffer *b = kwb_lua_checkbuffer(L, 3);
    size_t off = check_span(L, c, b);
    memcpy(kwb_buffer_data(b), c->map + off, kwb_buffer_bytes(b));
    return 0;
}

/* grow(bytes): the shared region at least that large (the child maps it again) */
static int l_grow(lua_State *L) {
    child *c = check(L);
    lua_Integer n = luaL_checkinteger(L, 2);
    if (n > 0 && (size_t)n > c->bytes && map_shm(c, (size_t)n) != 0)
        return kwb_lua_fail(L, "out-of-memory", "cannot grow the shared region");
    lua_pushinteger(L, (lua_Integer)c->bytes);
    return 1;
}

static int l_size(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)check(L)->bytes);
    return 1;
}

static int l_pid(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)check(L)->pid);
    return 1;
}

/* stderr() -> the last 4 KiB it wrote to its stderr */
static int l_stderr(lua_State *L) {
    child *c = check(L);
    off_t end = lseek(c->err, 0, SEEK_END);
    off_t from = end > 4096 ? end - 4096 : 0;
    char buf[4096];
    ssize_t n = end > 0 ? pread(c->err, buf, (size_t)(end - from), from) : 0;
    lua_pushlstring(L, buf, n > 0 ? (size_t)n : 0);
    return 1;
}

static int l_close(lua_State *L) {
    child *c = luaL_checkudata(L, 1, CHILD_MT);
    shut(c);
    return 0;
}

/* core.python_source(name) -> the text of one of kwb's own Python programs
 * (embedded at build time from python/) */
extern const char kwb_torch_ref_source[], kwb_start_source[];

static int l_python_source(lua_State *L) {
    static const struct { const char *name; const char *text; } sources[] = {
        {"kwb_torch_ref", kwb_torch_ref_source}, {"kwb_start", kwb_start_source},
    };
    const char *name = luaL_checkstring(L, 1);
    for (size_t i = 0; i < sizeof sources / sizeof *sources; i++)
        if (strcmp(sources[i].name, name) == 0) { lua_pushstring(L, sources[i].text); return 1; }
    return luaL_error(L, "core.python_source: no program named '%s'", name);
}

void kwb_lua_open_child(lua_State *L) {
    static const luaL_Reg meta[] = {{"__gc", l_close}, {"__close", l_close}, {NULL, NULL}};
    static const luaL_Reg methods[] = {
        {"send", l_send}, {"recv", l_recv}, {"put", l_put}, {"get", l_get}, {"grow", l_grow},
        {"size", l_size}, {"pid", l_pid}, {"stderr", l_stderr}, {"close", l_close}, {NULL, NULL},
    };
    if (luaL_newmetatable(L, CHILD_MT)) {
        luaL_setfuncs(L, meta, 0);
        luaL_newlib(L, methods);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, l_child);
    lua_setfield(L, -2, "child");
    lua_pushcfunction(L, l_python_source);
    lua_setfield(L, -2, "python_source");
}
