/* lua_cache.c: the candidate cache's Lua bindings: a database handle (SQL
 * through the statement cache, blobs, export) and verified bundles.
 * lua/kwb/cache/init.lua builds the public kwb.cache API on these. */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "cache.h"
#include "kwb.h"
#include "lua_bind.h"

#define CACHE_MT "kwb.cache.db"
#define BUNDLE_MT "kwb.cache.bundle"

typedef struct { kwb_cache *c; } lcache;
typedef struct { kwb_cache_bundle *b; } lbundle;

static const char *status_code(int rc, const char *corrupt, const char *version) {
    switch (rc) {
    case KWB_CACHE_ECORRUPT: return corrupt;
    case KWB_CACHE_EVERSION: return version;
    case KWB_CACHE_ENOTFOUND: return "not-found";
    case KWB_CACHE_EDB: return "db-error";
    case KWB_ENOMEM: return "out-of-memory";
    default: return "io-error";
    }
}

/* core.cache_open(path) -> handle | nil, msg, info */
static int l_open(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    lcache *u = lua_newuserdatauv(L, sizeof *u, 0);   /* closed until opened */
    u->c = NULL;
    luaL_setmetatable(L, CACHE_MT);
    int rc = kwb_cache_open(path, &u->c);
    if (rc) return kwb_lua_fail(L, status_code(rc, "not-a-cache", "schema-too-new"), kwb_last_error());
    return 1;
}

static kwb_cache *check_cache(lua_State *L, int idx) {
    lcache *u = luaL_checkudata(L, idx, CACHE_MT);
    if (!u->c) luaL_error(L, "the cache is closed");
    return u->c;
}

static void bind_args(lua_State *L, kwb_cache *c, sqlite3_stmt *st, int first) {
    int n = lua_gettop(L) - first + 1;
    if (n != sqlite3_bind_parameter_count(st)) {
        sqlite3_reset(st);
        luaL_error(L, "SQL statement takes %d parameters, got %d: %s", sqlite3_bind_parameter_count(st),
                   n, sqlite3_sql(st));
    }
    for (int i = 1; i <= n; i++) {
        int idx = first + i - 1, rc;
        switch (lua_type(L, idx)) {
        case LUA_TNIL: rc = sqlite3_bind_null(st, i); break;
        case LUA_TBOOLEAN: rc = sqlite3_bind_int(st, i, lua_toboolean(L, idx)); break;
        case LUA_TNUMBER:
            rc = lua_isinteger(L, idx) ? sqlite3_bind_int64(st, i, lua_tointeger(L, idx))
                                       : sqlite3_bind_double(st, i, lua_tonumber(L, idx));
            break;
        case LUA_TSTRING: {
            size_t len;
            const char *s = lua_tolstring(L, idx, &len);
            rc = sqlite3_bind_text(st, i, s, (int)len, SQLITE_TRANSIENT);
            break;
        }
        default:
            sqlite3_reset(st);
            sqlite3_clear_bindings(st);
            luaL_error(L, "SQL parameter %d: cannot bind a %s", i, luaL_typename(L, idx));
            return;
        }
        if (rc != SQLITE_OK) {
            sqlite3_reset(st);
            sqlite3_clear_bindings(st);
            kwb_cache_dberr(c, "binding a parameter");
            luaL_error(L, "%s", kwb_last_error());
        }
    }
}

/* db:exec(sql, params...) -> array of rows (tables keyed by column name).
 * SQL errors raise. */
static int l_exec(lua_State *L) {
    kwb_cache *c = check_cache(L, 1);
    const char *sql = luaL_checkstring(L, 2);
    sqlite3_stmt *st = kwb_cache_stmt(c, sql);
    if (!st) return luaL_error(L, "%s", kwb_last_error());
    bind_args(L, c, st, 3);
    lua_newtable(L);
    int ncol = sqlite3_column_count(st), nrow = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        lua_createtable(L, 0, ncol);
        for (int i = 0; i < ncol; i++) {
            switch (sqlite3_column_type(st, i)) {
            case SQLITE_NULL: continue;
            case SQLITE_INTEGER: lua_pushinteger(L, sqlite3_column_int64(st, i)); break;
            case SQLITE_FLOAT: lua_pushnumber(L, sqlite3_column_double(st, i)); break;
            case SQLITE_BLOB:
                lua_pushlstring(L, sqlite3_column_blob(st, i), (size_t)sqlite3_column_bytes(st, i));
                break;
            default:
                lua_pushlstring(L, (const char *)sqlite3_column_text(st, i),
                                (size_t)sqlite3_column_bytes(st, i));
            }
            lua_setfield(L, -2, sqlite3_column_name(st, i));
        }
        lua_rawseti(L, -2, ++nrow);
    }
    if (rc != SQLITE_DONE) kwb_cache_dberr(c, sql);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc != SQLITE_DONE) return luaL_error(L, "%s", kwb_last_error());
    return 1;
}

/* db:script(sql): several statements, no parameters, no rows. */
static int l_script(lua_State *L) {
    kwb_cache *c = check_cache(L, 1);
    const char *sql = luaL_checkstring(L, 2);
    if (sqlite3_exec(kwb_cache_db(c), sql, NULL, NULL, NULL) != SQLITE_OK) {
        kwb_cache_dberr(c, sql);
        return luaL_error(L, "%s", kwb_last_error());
    }
    return 0;
}

static int l_changes(lua_State *L) {
    lua_pushinteger(L, sqlite3_changes(kwb_cache_db(check_cache(L, 1))));
    return 1;
}

static int l_in_transaction(lua_State *L) {
    lua_pushboolean(L, !sqlite3_get_autocommit(kwb_cache_db(check_cache(L, 1))));
    return 1;
}

/* db:put_blob(data [, base]) -> id, created */
static int l_put_blob(lua_State *L) {
    kwb_cache *c = check_cache(L, 1);
    size_t len;
    const char *data = luaL_checklstring(L, 2, &len);
    const char *base = luaL_optstring(L, 3, NULL);
    char id[65];
    int created = 0;
    if (kwb_cache_blob_put(c, data, len, base, id, &created)) return luaL_error(L, "%s", kwb_last_error());
    lua_pushstring(L, id);
    lua_pushboolean(L, created);
    return 2;
}

/* A blob operation's failure: a database error raises (it is not the
 * blob's); otherwise nil, msg, {code = "corrupt-blob" | "not-found", blob = id}. */
static int blob_failure(lua_State *L, int rc, const char *id) {
    if (rc == KWB_CACHE_EDB) return luaL_error(L, "%s", kwb_last_error());
    kwb_lua_fail(L, status_code(rc, "corrupt-blob", "corrupt-blob"), kwb_last_error());
    lua_pushstring(L, id);
    lua_setfield(L, -2, "blob");
    return 3;
}

/* db:get_blob(id) -> data | nil, msg, {code = "corrupt-blob" | "not-found", blob = id} */
static int l_get_blob(lua_State *L) {
    kwb_cache *c = check_cache(L, 1);
    const char *id = luaL_checkstring(L, 2);
    char *data = NULL;
    size_t len = 0;
    int rc = kwb_cache_blob_get(c, id, &data, &len);
    if (rc) return blob_failure(L, rc, id);
    lua_pushlstring(L, data, len);
    free(data);
    return 1;
}

/* db:blob_info(id) -> {base, depth, raw_size, stored_size, mirrored} | nil, msg, info */
static int l_blob_info(lua_State *L) {
    kwb_cache *c = check_cache(L, 1);
    kwb_blob_info bi;
    int rc = kwb_cache_blob_info(c, luaL_checkstring(L, 2), &bi);
    if (rc == KWB_CACHE_EDB) return luaL_error(L, "%s", kwb_last_error());
    if (rc) return kwb_lua_fail(L, "not-found", kwb_last_error());
    lua_createtable(L, 0, 4);
    if (bi.base[0]) {
        lua_pushstring(L, bi.base);
        lua_setfield(L, -2, "base");
    }
    lua_pushinteger(L, bi.depth);
    lua_setfield(L, -2, "depth");
    lua_pushinteger(L, (lua_Integer)bi.raw_size);
    lua_setfield(L, -2, "raw_size");
    lua_pushinteger(L, (lua_Integer)bi.stored_size);
    lua_setfield(L, -2, "stored_size");
    lua_pushboolean(L, (int)bi.mirrored);
    lua_setfield(L, -2, "mirrored");
    return 1;
}

static const char *copy_word(int32_t state) {
    return state == KWB_COPY_OK ? "ok" : state == KWB_COPY_CORRUPT ? "corrupt" : "none";
}

/* db:check_blob(id) -> {frame = "ok"|"corrupt", mirror = "ok"|"corrupt"|"none", message = ...}
 *                    | nil, msg, {code = "corrupt-blob" | "not-found", blob = id} when its base is lost */
static int l_check_blob(lua_State *L) {
    kwb_cache *c = check_cache(L, 1);
    const char *id = luaL_checkstring(L, 2);
    kwb_blob_health h;
    int rc = kwb_cache_blob_check(c, id, &h);
    if (rc) return blob_failure(L, rc, id);
    lua_createtable(L, 0, 3);
    lua_pushstring(L, copy_word(h.frame));
    lua_setfield(L, -2, "frame");
    lua_pushstring(L, copy_word(h.mirror));
    lua_setfield(L, -2, "mirror");
    if (h.frame != KWB_COPY_OK || h.mirror == KWB_COPY_CORRUPT) {
        lua_pushstring(L, kwb_last_error());
        lua_setfield(L, -2, "message");
    }
    return 1;
}

/* db:mirror_base(id): give a blob that is some blob's base its mirror, if it has none
 * (inside a write transaction) -> true | nil, msg, {code = "corrupt-blob", blob = id} */
static int l_mirror_base(lua_State *L) {
    kwb_cache *c = check_cache(L, 1);
    const char *id = luaL_checkstring(L, 2);
    int rc = kwb_cache_mirror_base(c, id);
    if (rc) return blob_failure(L, rc, id);
    lua_pushboolean(L, 1);
    return 1;
}

/* db:repair_blob(id) -> true if a corrupt copy was rewritten from the sound one, false if
 * none needed it | nil, msg, {code = "corrupt-blob", blob = id} if no copy is sound */
static int l_repair_blob(lua_State *L) {
    kwb_cache *c = check_cache(L, 1);
    const char *id = luaL_checkstring(L, 2);
    int fixed = 0;
    int rc = kwb_cache_blob_repair(c, id, &fixed);
    if (rc) return blob_failure(L, rc, id);
    lua_pushboolean(L, fixed);
    return 1;
}

/* Fill a string array from the array table at idx; strings stay owned by the table. */
static const char **strv(lua_State *L, int idx, const char *field, const char *what, uint32_t *n) {
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_Integer len = luaL_len(L, idx);
    const char **v = lua_newuserdatauv(L, sizeof *v * (size_t)(len + 1), 0);
    for (lua_Integer i = 1; i <= len; i++) {
        lua_rawgeti(L, idx, i);
        if (field) {
            if (!lua_istable(L, -1)) luaL_error(L, "%s[%d] must be a table", what, (int)i);
            lua_getfield(L, -1, field);
            lua_remove(L, -2);
        }
        if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "%s[%d] must be a string", what, (int)i);
        v[i - 1] = lua_tostring(L, -1);
        lua_pop(L, 1);   /* still referenced by the table */
    }
    *n = (uint32_t)len;
    return v;
}

/* db:export(path, manifest_json, {{table=, json=}...}, {blob ids}) -> true | nil, msg, info */
static int l_export(lua_State *L) {
    kwb_cache *c = check_cache(L, 1);
    const char *path = luaL_checkstring(L, 2);
    const char *manifest = luaL_checkstring(L, 3);
    uint32_t nrec, nrec2, nblob;
    const char **tables = strv(L, 4, "table", "records", &nrec);
    const char **records = strv(L, 4, "json", "records", &nrec2);
    const char **blobs = strv(L, 5, NULL, "blobs", &nblob);
    int rc = kwb_cache_export(c, path, manifest, nrec, tables, records, nblob, blobs);
    if (rc) return kwb_lua_fail(L, status_code(rc, "corrupt-blob", "corrupt-blob"), kwb_last_error());
    lua_pushboolean(L, 1);
    return 1;
}

static kwb_cache_bundle *check_bundle(lua_State *L, int idx) {
    lbundle *u = luaL_checkudata(L, idx, BUNDLE_MT);
    if (!u->b) luaL_error(L, "the bundle is closed");
    return u->b;
}

/* db:import_blobs(bundle) -> number added */
static int l_import_blobs(lua_State *L) {
    kwb_cache *c = check_cache(L, 1);
    kwb_cache_bundle *b = check_bundle(L, 2);
    uint32_t added = 0;
    if (kwb_cache_import_blobs(c, b, &added)) return luaL_error(L, "%s", kwb_last_error());
    lua_pushinteger(L, added);
    return 1;
}

static int l_cache_path(lua_State *L) {
    lua_pushstring(L, kwb_cache_path(check_cache(L, 1)));
    return 1;
}

static int l_cache_close(lua_State *L) {
    lcache *u = luaL_checkudata(L, 1, CACHE_MT);
    kwb_cache_close(u->c);
    u->c = NULL;
    return 0;
}

static int l_cache_tostring(lua_State *L) {
    lcache *u = luaL_checkudata(L, 1, CACHE_MT);
    if (!u->c) lua_pushliteral(L, "kwb.cache.db (closed)");
    else lua_pushfstring(L, "kwb.cache.db %s", kwb_cache_path(u->c));
    return 1;
}

/* core.cache_bundle_open(path) -> bundle | nil, msg, {code = "corrupt-bundle" | "bundle-version" | ...} */
static int l_bundle_open(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    lbundle *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->b = NULL;
    luaL_setmetatable(L, BUNDLE_MT);
    int rc = kwb_cache_bundle_open(path, &u->b);
    if (rc) return kwb_lua_fail(L, status_code(rc, "corrupt-bundle", "bundle-version"), kwb_last_error());
    return 1;
}

static int l_bundle_manifest(lua_State *L) {
    lua_pushstring(L, kwb_cache_bundle_manifest(check_bundle(L, 1)));
    return 1;
}

/* bundle:records() -> {{table=, json=}, ...} */
static int l_bundle_records(lua_State *L) {
    kwb_cache_bundle *b = check_bundle(L, 1);
    uint32_t n = kwb_cache_bundle_nrecords(b);
    lua_createtable(L, (int)n, 0);
    for (uint32_t i = 0; i < n; i++) {
        const char *table, *json;
        kwb_cache_bundle_record(b, i, &table, &json);
        lua_createtable(L, 0, 2);
        lua_pushstring(L, table);
        lua_setfield(L, -2, "table");
        lua_pushstring(L, json);
        lua_setfield(L, -2, "json");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* bundle:blobs() -> {id, ...} */
static int l_bundle_blobs(lua_State *L) {
    kwb_cache_bundle *b = check_bundle(L, 1);
    uint32_t n = kwb_cache_bundle_nblobs(b);
    lua_createtable(L, (int)n, 0);
    for (uint32_t i = 0; i < n; i++) {
        lua_pushstring(L, kwb_cache_bundle_blob(b, i));
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int l_bundle_close(lua_State *L) {
    lbundle *u = luaL_checkudata(L, 1, BUNDLE_MT);
    kwb_cache_bundle_close(u->b);
    u->b = NULL;
    return 0;
}

static int l_bundle_tostring(lua_State *L) {
    lbundle *u = luaL_checkudata(L, 1, BUNDLE_MT);
    if (!u->b) lua_pushliteral(L, "kwb.cache.bundle (closed)");
    else lua_pushfstring(L, "kwb.cache.bundle (%d records, %d blobs)", (int)kwb_cache_bundle_nrecords(u->b),
                         (int)kwb_cache_bundle_nblobs(u->b));
    return 1;
}

void kwb_lua_open_cache(lua_State *L) {
    static const luaL_Reg cache_methods[] = {
        {"exec", l_exec}, {"script", l_script}, {"changes", l_changes},
        {"in_transaction", l_in_transaction}, {"put_blob", l_put_blob}, {"get_blob", l_get_blob},
        {"blob_info", l_blob_info}, {"check_blob", l_check_blob}, {"repair_blob", l_repair_blob},
        {"mirror_base", l_mirror_base},
        {"export", l_export}, {"import_blobs", l_import_blobs},
        {"path", l_cache_path}, {"close", l_cache_close}, {NULL, NULL},
    };
    static const luaL_Reg cache_meta[] = {
        {"__gc", l_cache_close}, {"__close", l_cache_close}, {"__tostring", l_cache_tostring}, {NULL, NULL},
    };
    static const luaL_Reg bundle_methods[] = {
        {"manifest", l_bundle_manifest}, {"records", l_bundle_records}, {"blobs", l_bundle_blobs},
        {"close", l_bundle_close}, {NULL, NULL},
    };
    static const luaL_Reg bundle_meta[] = {
        {"__gc", l_bundle_close}, {"__close", l_bundle_close}, {"__tostring", l_bundle_tostring},
        {NULL, NULL},
    };
    if (luaL_newmetatable(L, CACHE_MT)) {
        luaL_setfuncs(L, cache_meta, 0);
        luaL_newlib(L, cache_methods);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
    if (luaL_newmetatable(L, BUNDLE_MT)) {
        luaL_setfuncs(L, bundle_meta, 0);
        luaL_newlib(L, bundle_methods);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
    static const luaL_Reg fns[] = {
        {"cache_open", l_open}, {"cache_bundle_open", l_bundle_open}, {NULL, NULL},
    };
    luaL_setfuncs(L, fns, 0);
    lua_pushinteger(L, kwb_cache_schema_version());
    lua_setfield(L, -2, "cache_schema_version");
    lua_pushinteger(L, kwb_cache_max_depth());
    lua_setfield(L, -2, "cache_max_depth");
}
