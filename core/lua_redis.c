/* lua_redis.c: one Redis connection through hiredis (kwb.runners.queue speaks
 * Redis Streams over it):
 *
 *   local r = core.redis_connect { host = "127.0.0.1", port = 6379, timeout = 5,
 *                                  tls = false, ca = nil }
 *   local v, msg, info = r:call("XADD", key, "*", "field", "value")
 *   r:close()
 *
 * A reply comes back as a string (bulk and status replies), an integer, a
 * table (arrays, nested) or false (a nil reply). A Redis error reply is
 * nil, its text, { code = "redis-error" }; a broken or timed-out connection
 * is nil, message, { code = "redis-io" }, after which the connection is
 * closed (kwb.runners.queue reconnects). Arguments are strings or numbers, binary
 * safe. The timeout bounds connecting and each reply; a blocking command
 * (XREAD BLOCK ms) gets its own ms on top.
 *
 * hiredis 0.14 (Debian 12) speaks no TLS: for tls = true kwb makes the TLS
 * connection itself with OpenSSL (the peer's certificate verified against
 * `ca`, else the system's roots, and its name against `host`) and hands
 * hiredis one end of a socket pair, a thread relaying between the two. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <lauxlib.h>
#include <lua.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "lua_bind.h"

#define REDIS_MT "kwb.redis"
#define MAX_ARGS 256

typedef struct {
    SSL_CTX *ctx;
    SSL *ssl;
    int sock;          /* the TCP connection to the server */
    int plain;         /* the relay's end of the socket pair */
    pthread_t thread;
    int running;
} tls_relay;

typedef struct {
    redisContext *c;   /* NULL once closed */
    double timeout;
    tls_relay *tls;
    char where[300];   /* host:port, for messages */
} lredis;

/* ---- TLS ----------------------------------------------------------------- */

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

/* The whole of p through TLS on the non-blocking socket, waiting for it as
 * OpenSSL asks (a write may need a read: TLS 1.3 key updates). */
static int ssl_write_all(tls_relay *t, const char *p, int n) {
    while (n > 0) {
        int w = SSL_write(t->ssl, p, n);
        if (w > 0) { p += w, n -= w; continue; }
        int e = SSL_get_error(t->ssl, w);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) return -1;
        struct pollfd f = { t->sock, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, 0 };
        if (poll(&f, 1, -1) < 0 && errno != EINTR) return -1;
    }
    return 0;
}

/* Bytes both ways until either side ends; then hiredis's end sees EOF. The
 * TLS socket is non-blocking: a read that finds only a session ticket or a
 * part of a record says so and the relay waits again, never blocking while
 * hiredis's request is unread. */
static void *relay_main(void *arg) {
    tls_relay *t = arg;
    sigset_t set;   /* (its writes' SIGPIPE stays pending here, and goes with the thread) */
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    char buf[16384];
    struct pollfd fds[2] = { { t->plain, POLLIN, 0 }, { t->sock, POLLIN, 0 } };
    for (;;) {
        int buffered = SSL_pending(t->ssl) > 0;
        fds[0].revents = fds[1].revents = 0;
        if (!buffered && poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (buffered || (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            int n = SSL_read(t->ssl, buf, sizeof buf);
            if (n <= 0) {
                int e = SSL_get_error(t->ssl, n);
                if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) continue;
                break;
            }
            if (write_all(t->plain, buf, (size_t)n)) break;
        }
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(t->plain, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            if (ssl_write_all(t, buf, (int)n)) break;
        }
    }
    shutdown(t->plain, SHUT_RDWR);
    return NULL;
}

static void tls_free(tls_relay *t) {
    if (!t) return;
    if (t->running) {
        shutdown(t->sock, SHUT_RDWR);   /* wakes the relay wherever it waits */
        shutdown(t->plain, SHUT_RDWR);
        pthread_join(t->thread, NULL);
    }
    if (t->ssl) SSL_free(t->ssl);
    if (t->ctx) SSL_CTX_free(t->ctx);
    if (t->sock >= 0) close(t->sock);
    if (t->plain >= 0) close(t->plain);
    free(t);
}

static void set_timeouts(int fd, double seconds) {
    struct timeval tv = { (time_t)seconds, (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6) };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* A TCP connection to host:port within `timeout` seconds: its fd, or -1
 * with the reason in err. */
static int tcp_connect(const char *host, int port, double timeout, char *err, size_t errlen) {
    struct addrinfo hints = { 0 }, *res = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    hints.ai_family = AF_UNSPEC, hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc) { snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(rc)); return -1; }
    int fd = -1;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        set_timeouts(fd, timeout);   /* (a blocking connect honours SO_SNDTIMEO) */
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
        snprintf(err, errlen, "cannot connect: %s", strerror(errno));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

static const char *ssl_error(char *buf, size_t len) {
    unsigned long e = ERR_get_error();
    if (!e) return "the TLS handshake failed: no TLS answer from the server";
    ERR_error_string_n(e, buf, len);
    return buf;
}

/* The TLS connection and its relay: hiredis's fd, or -1 with err set. */
static int tls_open(lredis *r, const char *host, int port, const char *ca, char *err, size_t errlen) {
    tls_relay *t = calloc(1, sizeof *t);
    if (!t) { snprintf(err, errlen, "out of memory"); return -1; }
    t->sock = t->plain = -1;
    r->tls = t;
    char ebuf[256];
    t->sock = tcp_connect(host, port, r->timeout, err, errlen);
    if (t->sock < 0) return -1;
    t->ctx = SSL_CTX_new(TLS_client_method());
    if (!t->ctx) { snprintf(err, errlen, "TLS: %s", ssl_error(ebuf, sizeof ebuf)); return -1; }
    SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
    if (ca ? SSL_CTX_load_verify_locations(t->ctx, ca, NULL) != 1 : SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
        snprintf(err, errlen, "TLS: cannot load the certificate authorities %s: %s", ca ? ca : "of the system",
                 ssl_error(ebuf, sizeof ebuf));
        return -1;
    }
    t->ssl = SSL_new(t->ctx);
    if (!t->ssl) { snprintf(err, errlen, "TLS: %s", ssl_error(ebuf, sizeof ebuf)); return -1; }
    SSL_set_tlsext_host_name(t->ssl, host);
    if (SSL_set1_host(t->ssl, host) != 1) { snprintf(err, errlen, "TLS: cannot check the name %s", host); return -1; }
    SSL_set_fd(t->ssl, t->sock);
    if (SSL_connect(t->ssl) != 1) {
        long v = SSL_get_verify_result(t->ssl);
        if (v != X509_V_OK) snprintf(err, errlen, "TLS: the server's certificate is not trusted: %s",
                                     X509_verify_cert_error_string(v));
        else snprintf(err, errlen, "TLS: %s", ssl_error(ebuf, sizeof ebuf));
        return -1;
    }
    set_timeouts(t->sock, 0);   /* the relay waits as long as hiredis does */
    fcntl(t->sock, F_SETFL, fcntl(t->sock, F_GETFL) | O_NONBLOCK);
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp)) {
        snprintf(err, errlen, "socketpair: %s", strerror(errno));
        return -1;
    }
    t->plain = sp[1];
    if (pthread_create(&t->thread, NULL, relay_main, t)) {
        close(sp[0]);
        snprintf(err, errlen, "cannot start the TLS relay");
        return -1;
    }
    t->running = 1;
    return sp[0];
}

/* ---- the connection ------------------------------------------------------ */

/* A write to a connection the server closed raises SIGPIPE in the writing
 * thread: blocked around hiredis's calls and taken back if it came, so it
 * neither kills kwb nor is ignored process-wide (an ignored signal would
 * stay ignored in the workers kwb execs). */
typedef struct { sigset_t old; int was_pending; } pipe_guard;

static void pipe_block(pipe_guard *g) {
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &g->old);
}

static void pipe_restore(pipe_guard *g) {
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigpending(&pending);
    if (!g->was_pending && sigismember(&pending, SIGPIPE)) {
        struct timespec zero = { 0, 0 };
        while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR) {}
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

static void redis_close(lredis *r) {
    if (r->c) redisFree(r->c);   /* (closes hiredis's end of a TLS pair too) */
    r->c = NULL;
    tls_free(r->tls);
    r->tls = NULL;
}

static int set_reply_timeout(lredis *r, double seconds) {
    struct timeval tv = { (time_t)seconds, (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6) };
    return redisSetTimeout(r->c, tv);
}

static double opt_number(lua_State *L, int t, const char *k, double def) {
    lua_getfield(L, t, k);
    double v = luaL_optnumber(L, -1, def);
    lua_pop(L, 1);
    return v;
}

/* core.redis_connect { host =, port =, timeout = 5, tls = false, ca = } -> conn | nil, msg, info */
static int l_connect(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_getfield(L, 1, "host");
    const char *host = luaL_checkstring(L, -1);
    lua_getfield(L, 1, "ca");
    const char *ca = luaL_optstring(L, -1, NULL);
    lua_getfield(L, 1, "tls");
    int tls = lua_toboolean(L, -1);
    lua_Integer port = (lua_Integer)opt_number(L, 1, "port", 6379);
    double timeout = opt_number(L, 1, "timeout", 5);
    if (port < 1 || port > 65535) return luaL_error(L, "redis: port %d is out of range", (int)port);
    if (!(timeout > 0)) return luaL_error(L, "redis: 'timeout' must be a positive number of seconds");

    lredis *r = lua_newuserdatauv(L, sizeof *r, 0);   /* closed until connected */
    memset(r, 0, sizeof *r);
    luaL_setmetatable(L, REDIS_MT);
    r->timeout = timeout;
    snprintf(r->where, sizeof r->where, "%s:%d", host, (int)port);
    char err[512] = "";
    if (tls) {
        pipe_guard g;
        pipe_block(&g);
        int fd = tls_open(r, host, (int)port, ca, err, sizeof err);
        pipe_restore(&g);
        if (fd < 0) {
            redis_close(r);
            lua_pushfstring(L, "cannot reach %s over TLS: %s", r->where, err);
            return kwb_lua_fail(L, "redis-io", lua_tostring(L, -1));
        }
        r->c = redisConnectFd(fd);
        if (!r->c) close(fd);
    } else {
        struct timeval tv = { (time_t)timeout, (suseconds_t)((timeout - (double)(time_t)timeout) * 1e6) };
        r->c = redisConnectWithTimeout(host, (int)port, tv);
    }
    if (!r->c || r->c->err) {
        lua_pushfstring(L, "cannot reach %s: %s", r->where, r->c ? r->c->errstr : "out of memory");
        redis_close(r);
        return kwb_lua_fail(L, "redis-io", lua_tostring(L, -1));
    }
    set_reply_timeout(r, timeout);
    return 1;
}

static void push_reply(lua_State *L, const redisReply *rep, int depth) {
    luaL_checkstack(L, 3, "redis: a reply nested too deep");
    switch (rep->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR: lua_pushlstring(L, rep->str, rep->len); break;
    case REDIS_REPLY_INTEGER: lua_pushinteger(L, (lua_Integer)rep->integer); break;
    case REDIS_REPLY_ARRAY:
        if (depth > 32) luaL_error(L, "redis: a reply nested too deep");
        lua_createtable(L, (int)rep->elements, 0);
        for (size_t i = 0; i < rep->elements; i++) {
            push_reply(L, rep->element[i], depth + 1);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        break;
    default: lua_pushboolean(L, 0); break;   /* nil */
    }
}

/* conn:call(word, args... [, { block = seconds }]) -> reply | nil, msg, info */
static int l_call(lua_State *L) {
    lredis *r = luaL_checkudata(L, 1, REDIS_MT);
    int top = lua_gettop(L);
    double block = 0;
    if (top >= 2 && lua_istable(L, top)) {   /* a blocking command's own wait */
        block = opt_number(L, top, "block", 0);
        top--;
    }
    int argc = top - 1;
    if (argc < 1) return luaL_error(L, "redis: call needs a command");
    if (argc > MAX_ARGS) return luaL_error(L, "redis: at most %d arguments", MAX_ARGS);
    const char *argv[MAX_ARGS];
    size_t lens[MAX_ARGS];
    for (int i = 0; i < argc; i++) {
        if (lua_type(L, i + 2) != LUA_TSTRING && lua_type(L, i + 2) != LUA_TNUMBER)
            return luaL_error(L, "redis: argument %d is a %s, not a string or number", i + 1, luaL_typename(L, i + 2));
        argv[i] = lua_tolstring(L, i + 2, &lens[i]);
    }
    if (!r->c) return kwb_lua_fail(L, "redis-io", "the connection is closed");
    if (block > 0) set_reply_timeout(r, r->timeout + block);
    pipe_guard g;
    pipe_block(&g);
    redisReply *rep = redisCommandArgv(r->c, argc, argv, lens);
    int saved = errno;
    pipe_restore(&g);
    errno = saved;
    if (!rep) {
        const char *why = r->c->err == REDIS_ERR_EOF ? "the server closed the connection" : r->c->errstr;
        if (r->c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) why = "no reply in time";
        lua_pushfstring(L, "%s: %s (during %s)", r->where, why, argv[0]);
        redis_close(r);   /* a connection that missed a reply is out of step: never reused */
        return kwb_lua_fail(L, "redis-io", lua_tostring(L, -1));
    }
    if (block > 0) set_reply_timeout(r, r->timeout);
    if (rep->type == REDIS_REPLY_ERROR) {
        lua_pushlstring(L, rep->str, rep->len);
        freeReplyObject(rep);
        return kwb_lua_fail(L, "redis-error", lua_tostring(L, -1));
    }
    push_reply(L, rep, 0);   /* (a raise in there: the reply object is lost, the state is not) */
    freeReplyObject(rep);
    return 1;
}

static int l_close(lua_State *L) {
    redis_close(luaL_checkudata(L, 1, REDIS_MT));
    return 0;
}

static int l_isopen(lua_State *L) {
    lredis *r = luaL_checkudata(L, 1, REDIS_MT);
    lua_pushboolean(L, r->c != NULL);
    return 1;
}

static int l_tostring(lua_State *L) {
    lredis *r = luaL_checkudata(L, 1, REDIS_MT);
    lua_pushfstring(L, "kwb.redis %s (%s%s)", r->where, r->c ? "open" : "closed", r->tls ? ", TLS" : "");
    return 1;
}

void kwb_lua_open_redis(lua_State *L) {
    static const luaL_Reg meta[] = {
        {"__gc", l_close}, {"__close", l_close}, {"__tostring", l_tostring}, {NULL, NULL},
    };
    static const luaL_Reg methods[] = {
        {"call", l_call}, {"close", l_close}, {"isopen", l_isopen}, {NULL, NULL},
    };
    if (luaL_newmetatable(L, REDIS_MT)) {
        luaL_setfuncs(L, meta, 0);
        luaL_newlib(L, methods);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, l_connect);
    lua_setfield(L, -2, "redis_connect");
}
