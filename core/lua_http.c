/* lua_http.c: HTTP requests over libcurl's multi interface, several in
 * flight at once (kwb.base.http adds retries and backoff on top):
 *
 *   local m = core.http_multi()
 *   local id = m:add { url = "https://...", headers = { "Content-Type: application/json" },
 *                      body = "{...}", connect_timeout = 10, timeout = 120 }
 *   for _, r in ipairs(m:wait(seconds)) do   -- the transfers that finished meanwhile
 *     -- r.id, r.status (0: no response), r.headers (lowercase names), r.body, r.seconds,
 *     -- r.error and r.code ("timeout" | "connect" | "transfer" | "tls" | "http-failed") on failure,
 *     -- r.sent: whether the request went out (a server may have served one that failed after)
 *   end
 *   m:pending(); m:close()
 *
 * TLS peers are verified (libcurl's default, left alone); proxies come from
 * the environment (http_proxy, https_proxy, no_proxy) as libcurl reads them;
 * only http and https are spoken and redirects are not followed. */
#include <curl/curl.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>

#include "kwb.h"
#include "lua_bind.h"

#define HTTP_MT "kwb.http_multi"
#define MAX_REPLY (64u << 20)   /* a reply larger than this is a failure, not an allocation */

typedef struct { char *p; size_t len, cap; int over; } text;

typedef struct xfer {
    CURL *easy;
    struct curl_slist *headers;
    lua_Integer id;
    double t0;
    text body, head;   /* the reply's body and its header lines */
    char err[CURL_ERROR_SIZE];
    struct xfer *next;
} xfer;

typedef struct {
    CURLM *multi;   /* NULL once closed */
    xfer *list;     /* transfers in flight */
    lua_Integer next_id;
    int pending;
} lhttp;

static int append(text *t, const char *p, size_t n) {
    if (t->over || t->len + n > MAX_REPLY) { t->over = 1; return 0; }
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (t->len + n + 1 > cap) cap *= 2;
        char *np = realloc(t->p, cap);
        if (!np) { t->over = 1; return 0; }
        t->p = np, t->cap = cap;
    }
    memcpy(t->p + t->len, p, n);
    t->len += n;
    t->p[t->len] = 0;
    return 1;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
    return append(ud, p, size * n) ? size * n : 0;   /* 0 stops the transfer */
}

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
    text *t = ud;
    if (n * size >= 5 && memcmp(p, "HTTP/", 5) == 0) t->len = 0;   /* a new status line: 100 Continue came first */
    return append(t, p, size * n) ? size * n : 0;
}

static void xfer_free(xfer *x) {
    if (x->easy) curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->headers);
    free(x->body.p);
    free(x->head.p);
    free(x);
}

static lhttp *check_open(lua_State *L) {
    lhttp *h = luaL_checkudata(L, 1, HTTP_MT);
    if (!h->multi) luaL_error(L, "http: the multi handle is closed");
    return h;
}

static int l_http_multi(lua_State *L) {
    static int ready;   /* curl_global_init once per process, before any handle */
    lhttp *h = lua_newuserdatauv(L, sizeof *h, 0);   /* closed until the handle exists */
    memset(h, 0, sizeof *h);
    luaL_setmetatable(L, HTTP_MT);
    if (!ready) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return kwb_lua_fail(L, "http-failed", "curl_global_init failed");
        ready = 1;
    }
    h->multi = curl_multi_init();
    if (!h->multi) return kwb_lua_fail(L, "http-failed", "curl_multi_init failed");
    h->next_id = 1;
    return 1;
}

static double opt_seconds(lua_State *L, int t, const char *k, double def) {
    lua_getfield(L, t, k);
    double v = luaL_optnumber(L, -1, def);
    lua_pop(L, 1);
    if (!(v > 0)) luaL_error(L, "http: '%s' must be a positive number of seconds", k);
    return v;
}

/* m:add { url =, method = "POST", headers = { "Name: value", ... }, body =,
 * connect_timeout = 10, timeout = 120 } -> id */
static int l_add(lua_State *L) {
    lhttp *h = check_open(L);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_getfield(L, 2, "url");
    const char *url = luaL_checkstring(L, -1);
    lua_getfield(L, 2, "method");
    const char *method = luaL_optstring(L, -1, "POST");
    lua_getfield(L, 2, "body");
    size_t blen = 0;
    const char *body = luaL_optlstring(L, -1, NULL, &blen);
    double connect = opt_seconds(L, 2, "connect_timeout", 10), total = opt_seconds(L, 2, "timeout", 120);
    lua_getfield(L, 2, "headers");   /* checked before anything is allocated: a raise leaks nothing */
    int hidx = lua_gettop(L);
    lua_Integer nh = 0;
    if (!lua_isnil(L, hidx)) {
        luaL_checktype(L, hidx, LUA_TTABLE);
        for (; lua_rawgeti(L, hidx, nh + 1) != LUA_TNIL; nh++) {
            if (lua_type(L, -1) != LUA_TSTRING) return luaL_error(L, "http: headers[%d] is not a string", (int)nh + 1);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }

    xfer *x = calloc(1, sizeof *x);
    if (!x) return luaL_error(L, "http: out of memory");
    x->easy = curl_easy_init();
    if (!x->easy) { xfer_free(x); return luaL_error(L, "http: curl_easy_init failed"); }
    for (lua_Integer i = 1; i <= nh; i++) {
        lua_rawgeti(L, hidx, i);
        struct curl_slist *s = curl_slist_append(x->headers, lua_tostring(L, -1));
        lua_pop(L, 1);
        if (!s) { xfer_free(x); return luaL_error(L, "http: out of memory"); }
        x->headers = s;
    }
    /* no "Expect: 100-continue" round trip for large bodies */
    struct curl_slist *s = curl_slist_append(x->headers, "Expect:");
    if (!s) { xfer_free(x); return luaL_error(L, "http: out of memory"); }
    x->headers = s;

    CURL *e = x->easy;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)(connect * 1000));
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(total * 1000));
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &x->body);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &x->head);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->err);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    if (body) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
        curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, body);
    }
    if (strcmp(method, "POST") != 0) curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    if (!body && strcmp(method, "GET") == 0) curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    if (curl_multi_add_handle(h->multi, e) != CURLM_OK) { xfer_free(x); return luaL_error(L, "http: cannot add the request"); }
    x->id = h->next_id++;
    x->t0 = kwb_now();
    x->next = h->list;
    h->list = x;
    h->pending++;
    lua_pushinteger(L, x->id);
    return 1;
}

static const char *failure_code(CURLcode rc) {
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT: return "timeout";
    case CURLE_COULDNT_CONNECT: case CURLE_COULDNT_RESOLVE_HOST: case CURLE_COULDNT_RESOLVE_PROXY:
        return "connect";
    case CURLE_PARTIAL_FILE: case CURLE_RECV_ERROR: case CURLE_SEND_ERROR: case CURLE_GOT_NOTHING:
        return "transfer";
    case CURLE_PEER_FAILED_VERIFICATION: case CURLE_SSL_CONNECT_ERROR: case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
        return "tls";
    default: return "http-failed";
    }
}

/* The header lines as { ["retry-after"] = "2", ... }: lowercase names, the
 * last of a repeated header wins. */
static void push_headers(lua_State *L, const text *t) {
    lua_newtable(L);
    const char *p = t->p, *end = t->p ? t->p + t->len : NULL;
    while (p && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end, *colon = memchr(p, ':', (size_t)(le - p));
        if (colon) {
            luaL_Buffer b;
            luaL_buffinit(L, &b);
            for (const char *c = p; c < colon; c++) luaL_addchar(&b, (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c));
            luaL_pushresult(&b);
            const char *v = colon + 1, *ve = le;
            while (v < ve && (*v == ' ' || *v == '\t')) v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ')) ve--;
            lua_pushlstring(L, v, (size_t)(ve - v));
            lua_settable(L, -3);
        }
        p = le + 1;
    }
}

/* One finished transfer as a result table; the transfer is freed. */
static void push_done(lua_State *L, lhttp *h, CURLMsg *msg) {
    xfer *x = NULL;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
    for (xfer **pp = &h->list; *pp; pp = &(*pp)->next)
        if (*pp == x) { *pp = x->next; break; }
    curl_multi_remove_handle(h->multi, x->easy);
    h->pending--;
    long status = 0, request_size = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(x->easy, CURLINFO_REQUEST_SIZE, &request_size);
    lua_createtable(L, 0, 8);
    lua_pushboolean(L, request_size > 0);
    lua_setfield(L, -2, "sent");
    lua_pushinteger(L, x->id);
    lua_setfield(L, -2, "id");
    lua_pushinteger(L, status);
    lua_setfield(L, -2, "status");
    lua_pushnumber(L, kwb_now() - x->t0);
    lua_setfield(L, -2, "seconds");
    push_headers(L, &x->head);
    lua_setfield(L, -2, "headers");
    lua_pushlstring(L, x->body.p ? x->body.p : "", x->body.len);
    lua_setfield(L, -2, "body");
    CURLcode rc = msg->data.result;
    if (rc != CURLE_OK || x->body.over) {
        const char *why = x->body.over ? "the reply is larger than 64 MiB" : x->err[0] ? x->err : curl_easy_strerror(rc);
        lua_pushstring(L, why);
        lua_setfield(L, -2, "error");
        lua_pushstring(L, x->body.over ? "http-failed" : failure_code(rc));
        lua_setfield(L, -2, "code");
    }
    xfer_free(x);
}

/* m:wait(seconds) -> { result, ... }: runs the transfers until at least one
 * finishes or the time is up (an empty list then; with none in flight it
 * sleeps that long). */
static int l_wait(lua_State *L) {
    lhttp *h = check_open(L);
    double limit = luaL_optnumber(L, 2, 0), deadline = kwb_now() + limit;
    lua_newtable(L);
    int n = 0;
    for (;;) {
        int running = 0;
        if (curl_multi_perform(h->multi, &running) != CURLM_OK) return luaL_error(L, "http: curl_multi_perform failed");
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(h->multi, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            push_done(L, h, msg);
            lua_rawseti(L, -2, ++n);
        }
        double rest = deadline - kwb_now();
        if (n > 0 || rest <= 0) break;   /* with nothing in flight it just waits */
        int ms = rest > 0.1 ? 100 : (int)(rest * 1000) + 1;
        if (curl_multi_poll(h->multi, NULL, 0, ms, NULL) != CURLM_OK) return luaL_error(L, "http: curl_multi_poll failed");
    }
    return 1;
}

static int l_pending(lua_State *L) {
    lhttp *h = luaL_checkudata(L, 1, HTTP_MT);
    lua_pushinteger(L, h->multi ? h->pending : 0);
    return 1;
}

static int l_close(lua_State *L) {
    lhttp *h = luaL_checkudata(L, 1, HTTP_MT);
    if (!h->multi) return 0;
    while (h->list) {
        xfer *x = h->list;
        h->list = x->next;
        curl_multi_remove_handle(h->multi, x->easy);
        xfer_free(x);
    }
    curl_multi_cleanup(h->multi);
    h->multi = NULL;
    h->pending = 0;
    return 0;
}

static int l_tostring(lua_State *L) {
    lhttp *h = luaL_checkudata(L, 1, HTTP_MT);
    if (h->multi) lua_pushfstring(L, "kwb.http_multi (%d in flight)", h->pending);
    else lua_pushstring(L, "kwb.http_multi (closed)");
    return 1;
}

void kwb_lua_open_http(lua_State *L) {
    static const luaL_Reg meta[] = {
        {"__gc", l_close}, {"__close", l_close}, {"__tostring", l_tostring}, {NULL, NULL},
    };
    static const luaL_Reg methods[] = {
        {"add", l_add}, {"wait", l_wait}, {"pending", l_pending}, {"close", l_close}, {NULL, NULL},
    };
    if (luaL_newmetatable(L, HTTP_MT)) {
        luaL_setfuncs(L, meta, 0);
        luaL_newlib(L, methods);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, l_http_multi);
    lua_setfield(L, -2, "http_multi");
}
