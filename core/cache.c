/* cache.c: the candidate cache's storage: one SQLite database in WAL mode,
 * schema migrations on open, a statement cache, and content-addressed blobs
 * stored as zstd frames, each either whole or a delta against a base blob
 * (the base's content is the frame's zstd prefix), with a bounded chain.
 * A blob that is the base of another keeps a second copy of its frame (its
 * mirror), so one corrupt frame loses at most one blob: itself, if nothing
 * is stored against it.
 *
 * Records (candidates, builds, results, runs) are written by the Lua side
 * (lua/kwb/cache/init.lua) through the statement cache; this file owns what needs
 * speed or care: opening, migrating, compressing, hashing and checking. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd.h>

#include "cache.h"
#include "error.h"
#include "kwb.h"
#include "util.h"

/* A blob whose base is this deep is stored whole: reading any blob decodes at
 * most MAX_DEPTH + 1 frames. The last NLRU blobs decoded or stored (at most
 * LRU_BYTES of them together) are kept per handle, so reads along a chain
 * decode only the frames above the nearest one decoded before. */
enum { MAX_DEPTH = 63, NSTMT = 48, NLRU = 64, LEVEL = 19, BUSY_MS = 60000 };
#define LRU_BYTES ((size_t)64 << 20)

/* kwb's application id in the SQLite header: "kwb1". */
#define APPLICATION_ID 0x6b776231

typedef struct { char *sql; sqlite3_stmt *st; } cached_stmt;
typedef struct { char id[65]; char *data; size_t len; } lru_entry;

struct kwb_cache {
    sqlite3 *db;
    char *path;
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
    cached_stmt stmts[NSTMT];
    int nstmt, evict;
    lru_entry lru[NLRU];   /* recently stored or decoded blobs: parents are read back often */
    int lru_next;
    size_t lru_bytes;      /* their sizes together, at most LRU_BYTES */
};

/* Schema migrations: migrations[v] takes the schema from version v to v + 1.
 * Never edit a released one; append a new one. */
static const char *const migrations[] = {
    /* 0 -> 1 */
    "CREATE TABLE blob("
    "  id TEXT PRIMARY KEY,"           /* SHA-256 of the content */
    "  base TEXT,"                     /* delta base (zstd prefix), NULL for a full frame */
    "  depth INTEGER NOT NULL,"        /* 0 full, else base's depth + 1 */
    "  raw_size INTEGER NOT NULL,"
    "  stored_size INTEGER NOT NULL,"
    "  frame BLOB NOT NULL) WITHOUT ROWID;"
    "CREATE INDEX blob_base ON blob(base);"
    /* A second copy of the frame of every blob that is some blob's base, in
     * its own table (so in other pages of the file than the first copy). */
    "CREATE TABLE mirror("
    "  id TEXT PRIMARY KEY,"           /* the blob's id */
    "  frame BLOB NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE candidate("
    "  id TEXT PRIMARY KEY,"           /* SHA-256 of problem, source, params, flags */
    "  problem TEXT NOT NULL,"
    "  parent TEXT,"
    "  strategy TEXT, model TEXT, rationale TEXT,"
    "  created REAL NOT NULL,"         /* Unix seconds */
    "  source TEXT NOT NULL,"          /* blob id */
    "  params TEXT NOT NULL,"          /* JSON object: parameters and defines */
    "  flags TEXT NOT NULL,"           /* JSON array */
    "  outcome TEXT,"                  /* the loop's verdict, NULL until there is one */
    "  run TEXT) WITHOUT ROWID;"
    "CREATE INDEX candidate_problem ON candidate(problem, created);"
    "CREATE INDEX candidate_parent ON candidate(parent);"
    "CREATE TABLE build("
    "  id TEXT PRIMARY KEY,"           /* SHA-256 of candidate, arch, toolchain */
    "  candidate TEXT NOT NULL, arch TEXT NOT NULL, toolchain TEXT NOT NULL,"
    "  ok INTEGER NOT NULL,"
    "  log TEXT, binary TEXT,"         /* blob ids */
    "  resources TEXT NOT NULL,"       /* JSON: registers, shared memory, spills... */
    "  created REAL NOT NULL) WITHOUT ROWID;"
    "CREATE INDEX build_candidate ON build(candidate);"
    "CREATE TABLE result("
    "  candidate TEXT NOT NULL, device TEXT NOT NULL, shape TEXT NOT NULL,"
    "  outcome TEXT NOT NULL,"
    "  median REAL,"                   /* seconds, copied from timing for ordering */
    "  verify TEXT NOT NULL, timing TEXT NOT NULL, clocks TEXT NOT NULL,"   /* JSON */
    "  run TEXT, created REAL NOT NULL,"
    "  PRIMARY KEY(candidate, device, shape)) WITHOUT ROWID;"
    "CREATE INDEX result_shape ON result(shape, device, median);"
    "CREATE TABLE run("
    "  id TEXT PRIMARY KEY,"
    "  recipe TEXT NOT NULL, recipe_hash TEXT NOT NULL,"
    "  settings TEXT NOT NULL,"        /* JSON */
    "  started REAL NOT NULL, ended REAL,"
    "  funnel TEXT);",                 /* JSON: outcome -> count */
    /* 1 -> 2: what the model was asked and answered, and which candidate came of it */
    "CREATE TABLE transcript("
    "  id TEXT PRIMARY KEY,"           /* SHA-256 of run, time, prompt hash and a counter */
    "  seq INTEGER NOT NULL,"          /* 1, 2, ... in the order they were made */
    "  run TEXT, created REAL NOT NULL,"
    "  provider TEXT NOT NULL, model TEXT NOT NULL, purpose TEXT,"
    "  prompt_hash TEXT NOT NULL,"     /* SHA-256 of the request as sent */
    "  request TEXT NOT NULL,"         /* blob id: the request body (no key: that goes in headers only) */
    "  reply TEXT,"                    /* blob id: the reply body, NULL when none came */
    "  tokens_in INTEGER, tokens_out INTEGER, seconds REAL NOT NULL, cost REAL,"
    "  attempts INTEGER NOT NULL, error TEXT) WITHOUT ROWID;"
    "CREATE INDEX transcript_run ON transcript(run, seq);"
    "ALTER TABLE candidate ADD COLUMN transcript TEXT;"
    "ALTER TABLE run ADD COLUMN usage TEXT;"   /* JSON: the model's requests, retries, tokens, cost */
    /* every measurement ever made, oldest first: a result row holds the latest */
    "CREATE TABLE measurement("
    "  candidate TEXT NOT NULL, device TEXT NOT NULL, shape TEXT NOT NULL,"
    "  outcome TEXT NOT NULL, median REAL, timing TEXT NOT NULL,"   /* JSON */
    "  run TEXT, created REAL NOT NULL);"
    "CREATE INDEX measurement_candidate ON measurement(candidate, device, shape);",
    /* 2 -> 3: a candidate's latest profile per device kind and shape (kwb.checks.profile) */
    "CREATE TABLE profile("
    "  candidate TEXT NOT NULL, device TEXT NOT NULL, shape TEXT NOT NULL,"
    "  class TEXT NOT NULL,"           /* the plan's bottleneck: memory, compute, latency, launch overhead */
    "  data TEXT NOT NULL,"            /* JSON: kernels, count, busy, gaps, why */
    "  created REAL NOT NULL,"
    "  PRIMARY KEY(candidate, device, shape)) WITHOUT ROWID;",
    /* 3 -> 4: a build's code digest (core/code.c; NULL for older builds and
     * for a bundle's): the loop knows a candidate that repeats measured code by it */
    "ALTER TABLE build ADD COLUMN code TEXT;"
    "CREATE INDEX build_code ON build(arch, code);",
    /* 4 -> 5: a run's certificate, the record of its final round (kwb.loop.certify) */
    "CREATE TABLE certificate("
    "  run TEXT PRIMARY KEY,"          /* the run's id */
    "  pick TEXT NOT NULL,"            /* the candidate id the round named the pick */
    "  body TEXT NOT NULL,"            /* JSON: kernels, shapes, ratios with their intervals, device, kwb */
    "  created REAL NOT NULL) WITHOUT ROWID;",
    /* 5 -> 6: the lessons ledger: what a model's summaries of a run's evidence
     * taught, per problem and device kind (kwb.strategies.lessons) */
    "CREATE TABLE lesson("
    "  id TEXT PRIMARY KEY,"           /* SHA-256 of problem, device, text, tags, ids */
    "  problem TEXT NOT NULL,"         /* the problem's key */
    "  device TEXT NOT NULL,"          /* the device kind */
    "  pos INTEGER NOT NULL,"          /* 1, 2, ... its place in its summary */
    "  text TEXT NOT NULL,"
    "  tags TEXT NOT NULL,"            /* JSON array: technique words */
    "  ids TEXT NOT NULL,"             /* JSON array: the candidates that show it */
    "  run TEXT, transcript TEXT,"     /* the run and the summary's transcript that made it */
    "  origin TEXT,"                   /* the bundle it came in; NULL: made here */
    "  created REAL NOT NULL) WITHOUT ROWID;"
    "CREATE INDEX lesson_device ON lesson(device, problem, created);",
};
enum { SCHEMA_VERSION = sizeof migrations / sizeof migrations[0] };

int kwb_cache_schema_version(void) { return SCHEMA_VERSION; }
int kwb_cache_max_depth(void) { return MAX_DEPTH; }
sqlite3 *kwb_cache_db(kwb_cache *c) { return c->db; }
const char *kwb_cache_path(const kwb_cache *c) { return c->path; }

int kwb_cache_dberr(kwb_cache *c, const char *what) {
    return kwb_fail(KWB_CACHE_EDB, "cache %s: %s: %s", c->path, what, sqlite3_errmsg(c->db));
}

sqlite3_stmt *kwb_cache_stmt(kwb_cache *c, const char *sql) {
    for (int i = 0; i < c->nstmt; i++)
        if (strcmp(c->stmts[i].sql, sql) == 0) return c->stmts[i].st;
    sqlite3_stmt *st = NULL;
    const char *tail = NULL;
    if (sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, &tail) != SQLITE_OK) {
        kwb_cache_dberr(c, sql);
        return NULL;
    }
    if (!st || (tail && tail[strspn(tail, " \t\r\n;")])) {
        sqlite3_finalize(st);
        kwb_fail(KWB_EINVAL, "cache %s: expected exactly one SQL statement in: %s", c->path, sql);
        return NULL;
    }
    char *copy = strdup(sql);
    if (!copy) {
        sqlite3_finalize(st);
        kwb_fail(KWB_ENOMEM, "out of memory");
        return NULL;
    }
    int i = c->nstmt < NSTMT ? c->nstmt++ : (c->evict++ % NSTMT);
    if (c->stmts[i].st) {
        sqlite3_finalize(c->stmts[i].st);
        free(c->stmts[i].sql);
    }
    c->stmts[i].sql = copy;
    c->stmts[i].st = st;
    return st;
}

static void done(sqlite3_stmt *st) {
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

static int exec(kwb_cache *c, const char *sql, const char *what) {
    if (sqlite3_exec(c->db, sql, NULL, NULL, NULL) != SQLITE_OK) return kwb_cache_dberr(c, what);
    return 0;
}

static int pragma_int(kwb_cache *c, const char *sql, int *v) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) != SQLITE_OK) return kwb_cache_dberr(c, sql);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW) return kwb_cache_dberr(c, sql);
    return 0;
}

/* Bring the schema to SCHEMA_VERSION inside one write transaction, so that
 * processes opening a new cache at once migrate it exactly once. */
static int migrate(kwb_cache *c) {
    int v = 0, app = 0;
    if (pragma_int(c, "PRAGMA application_id", &app)) return KWB_CACHE_EDB;
    if (pragma_int(c, "PRAGMA user_version", &v)) return KWB_CACHE_EDB;
    if (app != 0 && app != APPLICATION_ID)
        return kwb_fail(KWB_CACHE_ECORRUPT, "cache %s: not a kwb cache (SQLite application id %#x)",
                        c->path, (unsigned)app);
    if (v > SCHEMA_VERSION) goto too_new;
    if (v == SCHEMA_VERSION && app == APPLICATION_ID) return 0;
    if (exec(c, "BEGIN IMMEDIATE", "starting the schema migration")) return KWB_CACHE_EDB;
    if (pragma_int(c, "PRAGMA user_version", &v)) goto fail;   /* another process may have done it */
    if (v > SCHEMA_VERSION) {
        exec(c, "ROLLBACK", "rollback");
        goto too_new;
    }
    for (; v < SCHEMA_VERSION; v++) {
        char what[64];
        snprintf(what, sizeof what, "migrating the schema from version %d", v);
        if (exec(c, migrations[v], what)) goto fail;
    }
    char sql[96];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d; PRAGMA application_id = %d",
             SCHEMA_VERSION, APPLICATION_ID);
    if (exec(c, sql, "setting the schema version")) goto fail;
    if (exec(c, "COMMIT", "committing the schema migration")) goto fail;
    return 0;
fail:;
    int rc = KWB_CACHE_EDB;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", kwb_last_error());
    sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    return kwb_fail(rc, "%s", msg);
too_new:
    return kwb_fail(KWB_CACHE_EVERSION,
                    "cache %s has schema version %d, newer than this kwb understands (%d); "
                    "use a newer kwb or another cache (--cache PATH)", c->path, v, SCHEMA_VERSION);
}

/* journal_mode=WAL needs a moment of exclusive access the first time; retry
 * while other processes hold the file. */
static int set_wal(kwb_cache *c) {
    for (int tries = 0;; tries++) {
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(c->db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
        if (rc == SQLITE_OK) rc = sqlite3_step(st);
        int wal = rc == SQLITE_ROW && sqlite3_stricmp((const char *)sqlite3_column_text(st, 0), "wal") == 0;
        sqlite3_finalize(st);
        if (wal) return 0;
        if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED && rc != SQLITE_ROW) || tries >= 600) {
            if (rc == SQLITE_ROW)
                return kwb_fail(KWB_CACHE_EDB, "cache %s: cannot switch to WAL mode", c->path);
            return kwb_cache_dberr(c, "switching to WAL mode");
        }
        usleep(10000);
    }
}

int kwb_cache_open(const char *path, kwb_cache **out) {
    *out = NULL;
    if (!path || !*path) return kwb_fail(KWB_EINVAL, "cache path is empty");
    const char *slash = strrchr(path, '/');
    if (slash && slash != path) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
        if (kwb_mkdirs(dir) != 0)
            return kwb_fail(KWB_EIO, "cannot create the cache directory %s: %s", dir, strerror(errno));
    }
    kwb_cache *c = calloc(1, sizeof *c);
    if (!c || !(c->path = strdup(path))) {
        free(c);
        return kwb_fail(KWB_ENOMEM, "out of memory");
    }
    int rc = sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        rc = kwb_fail(KWB_EIO, "cannot open the cache %s: %s", path,
                      c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
        goto fail;
    }
    sqlite3_busy_timeout(c->db, BUSY_MS);
    sqlite3_extended_result_codes(c->db, 0);
    if ((rc = set_wal(c))) {
        if (sqlite3_errcode(c->db) == SQLITE_NOTADB)
            rc = kwb_fail(KWB_CACHE_ECORRUPT, "cache %s: not a kwb cache (not an SQLite database)", path);
        goto fail;
    }
    /* In WAL mode NORMAL loses nothing committed when a process dies; only a
     * power cut can roll back the last transactions. */
    if ((rc = exec(c, "PRAGMA synchronous = NORMAL", "setting synchronous"))) goto fail;
    if ((rc = migrate(c))) goto fail;
    c->cctx = ZSTD_createCCtx();
    c->dctx = ZSTD_createDCtx();
    if (!c->cctx || !c->dctx) {
        rc = kwb_fail(KWB_ENOMEM, "out of memory for zstd contexts");
        goto fail;
    }
    *out = c;
    return 0;
fail:;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", kwb_last_error());
    kwb_cache_close(c);
    return kwb_fail(rc, "%s", msg);
}

void kwb_cache_close(kwb_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->nstmt; i++) {
        sqlite3_finalize(c->stmts[i].st);
        free(c->stmts[i].sql);
    }
    for (int i = 0; i < NLRU; i++) free(c->lru[i].data);
    sqlite3_close(c->db);
    ZSTD_freeCCtx(c->cctx);
    ZSTD_freeDCtx(c->dctx);
    free(c->path);
    free(c);
}

/* ---- recently used blobs ------------------------------------------------ */

static const lru_entry *lru_find(kwb_cache *c, const char *id) {
    for (int i = 0; i < NLRU; i++)
        if (c->lru[i].data && strcmp(c->lru[i].id, id) == 0) return &c->lru[i];
    return NULL;
}

static void lru_add(kwb_cache *c, const char *id, const char *data, size_t len) {
    if (len > LRU_BYTES / 4 || lru_find(c, id)) return;
    char *copy = malloc(len + 1);
    if (!copy) return;   /* only a cache */
    memcpy(copy, data, len);
    copy[len] = 0;
    /* oldest first: the slot this one takes, then as many more as the budget needs */
    for (int k = 0; k == 0 || c->lru_bytes + len > LRU_BYTES; k++) {
        lru_entry *old = &c->lru[(c->lru_next + k) % NLRU];
        if (old->data) c->lru_bytes -= old->len;
        free(old->data);
        old->data = NULL;
    }
    lru_entry *e = &c->lru[c->lru_next++ % NLRU];
    snprintf(e->id, sizeof e->id, "%s", id);
    e->data = copy;
    e->len = len;
    c->lru_bytes += len;
}

/* ---- blobs -------------------------------------------------------------- */

int kwb_blob_decode(ZSTD_DCtx *d, const char *id, const void *frame, size_t flen,
                    const void *prefix, size_t plen, uint64_t raw_size, char **out) {
    *out = NULL;
    unsigned long long n = ZSTD_getFrameContentSize(frame, flen);
    if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN)
        return kwb_fail(KWB_CACHE_ECORRUPT, "blob %s is corrupt: not a zstd frame", id);
    if (n != raw_size)
        return kwb_fail(KWB_CACHE_ECORRUPT, "blob %s is corrupt: its frame holds %llu bytes, "
                        "the index says %llu", id, n, (unsigned long long)raw_size);
    char *buf = malloc(n + 1);
    if (!buf) return kwb_fail(KWB_ENOMEM, "out of memory decoding blob %s", id);
    size_t got = ZSTD_DCtx_reset(d, ZSTD_reset_session_and_parameters);
    if (!ZSTD_isError(got) && prefix) got = ZSTD_DCtx_refPrefix(d, prefix, plen);
    if (!ZSTD_isError(got)) got = ZSTD_decompressDCtx(d, buf, n, frame, flen);
    if (ZSTD_isError(got) || got != n) {
        free(buf);
        return kwb_fail(KWB_CACHE_ECORRUPT, "blob %s is corrupt: %s", id,
                        ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short frame");
    }
    buf[n] = 0;
    char hex[65];
    if (kwb_sha256_hex(buf, n, hex)) {
        free(buf);
        return KWB_EIO;
    }
    if (strcmp(hex, id) != 0) {
        free(buf);
        return kwb_fail(KWB_CACHE_ECORRUPT, "blob %s is corrupt: its content hashes to %s", id, hex);
    }
    *out = buf;
    return 0;
}

int kwb_cache_blob_info(kwb_cache *c, const char *id, kwb_blob_info *info) {
    sqlite3_stmt *st = kwb_cache_stmt(c, "SELECT base, depth, raw_size, stored_size, "
                                         "EXISTS(SELECT 1 FROM mirror WHERE mirror.id = blob.id) "
                                         "FROM blob WHERE id = ?1");
    if (!st) return KWB_CACHE_EDB;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *base = (const char *)sqlite3_column_text(st, 0);
        snprintf(info->base, sizeof info->base, "%s", base ? base : "");
        info->depth = (uint32_t)sqlite3_column_int(st, 1);
        info->raw_size = (uint64_t)sqlite3_column_int64(st, 2);
        info->stored_size = (uint64_t)sqlite3_column_int64(st, 3);
        info->mirrored = (uint32_t)sqlite3_column_int(st, 4);
    }
    rc = rc == SQLITE_ROW ? 0
       : rc == SQLITE_DONE ? kwb_fail(KWB_CACHE_ENOTFOUND, "no blob %s in the cache %s", id, c->path)
       : kwb_cache_dberr(c, "reading a blob");
    done(st);
    return rc;
}

/* Copy column col of the row st is on into a fresh buffer. */
static int column_copy(sqlite3_stmt *st, int col, void **out, size_t *len) {
    *len = (size_t)sqlite3_column_bytes(st, col);
    if (!(*out = malloc(*len ? *len : 1))) return kwb_fail(KWB_ENOMEM, "out of memory");
    if (*len) memcpy(*out, sqlite3_column_blob(st, col), *len);
    return 0;
}

/* The mirror copy of blob id's frame in a fresh buffer; *frame stays NULL if
 * the blob has none. */
static int mirror_get(kwb_cache *c, const char *id, void **frame, size_t *flen) {
    *frame = NULL;
    *flen = 0;
    sqlite3_stmt *st = kwb_cache_stmt(c, "SELECT frame FROM mirror WHERE id = ?1");
    if (!st) return KWB_CACHE_EDB;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int s = sqlite3_step(st), rc = 0;
    if (s == SQLITE_ROW) rc = column_copy(st, 0, frame, flen);
    else if (s != SQLITE_DONE) rc = kwb_cache_dberr(c, "reading a blob's mirror");
    done(st);
    return rc;
}

/* Decode blob id from its frame; if that frame is corrupt, from its mirror.
 * Fails (naming id) only if no copy decodes to the content. */
static int decode_either(kwb_cache *c, const char *id, const void *frame, size_t flen, const void *prefix,
                         size_t plen, uint64_t raw, char **out) {
    int rc = kwb_blob_decode(c->dctx, id, frame, flen, prefix, plen, raw, out);
    if (rc != KWB_CACHE_ECORRUPT) return rc;
    char why[1024];
    snprintf(why, sizeof why, "%s", kwb_last_error());
    void *m = NULL;
    size_t mlen = 0;
    int mrc = mirror_get(c, id, &m, &mlen);
    if (mrc) return mrc;
    if (!m) return kwb_fail(rc, "%s", why);
    mrc = kwb_blob_decode(c->dctx, id, m, mlen, prefix, plen, raw, out);
    free(m);
    if (mrc == 0) return 0;
    const char *mwhy = kwb_last_error(), *p = strstr(mwhy, " is corrupt: ");
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", p ? p + 13 : mwhy);
    return kwb_fail(rc, "%s (and so is its mirror copy: %s)", why, tmp);
}

typedef struct { char id[65]; void *frame; size_t flen; uint64_t raw; } frame_ref;

static void free_links(frame_ref *l, int n) {
    for (int i = 0; i < n; i++) free(l[i].frame);
}

/* Decode blob id into a fresh buffer, walking its chain of bases down to a
 * full frame (or one recently decoded) and checking every frame's hash; a
 * corrupt frame is replaced by its mirror copy. */
static int blob_load(kwb_cache *c, const char *id, char **data, size_t *len) {
    const lru_entry *hit = lru_find(c, id);
    if (hit) {
        if (!(*data = malloc(hit->len + 1))) return kwb_fail(KWB_ENOMEM, "out of memory");
        memcpy(*data, hit->data, hit->len + 1);
        *len = hit->len;
        return 0;
    }
    frame_ref chain[MAX_DEPTH + 2];
    int n = 0, rc = 0;
    char cur[65];
    snprintf(cur, sizeof cur, "%s", id);
    const lru_entry *start = NULL;   /* decoded content below the chain, if found */
    sqlite3_stmt *st = kwb_cache_stmt(c, "SELECT base, raw_size, frame FROM blob WHERE id = ?1");
    if (!st) return KWB_CACHE_EDB;
    for (;;) {
        if (n == MAX_DEPTH + 2) {
            rc = kwb_fail(KWB_CACHE_ECORRUPT, "blob %s is corrupt: its chain of bases is longer "
                          "than %d", id, MAX_DEPTH + 1);
            goto out;
        }
        sqlite3_bind_text(st, 1, cur, -1, SQLITE_STATIC);
        int s = sqlite3_step(st);
        if (s != SQLITE_ROW) {
            rc = s != SQLITE_DONE ? kwb_cache_dberr(c, "reading a blob")
               : n == 0 ? kwb_fail(KWB_CACHE_ENOTFOUND, "no blob %s in the cache %s", id, c->path)
               : kwb_fail(KWB_CACHE_ENOTFOUND, "cannot rebuild blob %s: its base blob %s is missing",
                          id, cur);
            done(st);
            goto out;
        }
        frame_ref *l = &chain[n];
        snprintf(l->id, sizeof l->id, "%s", cur);
        l->raw = (uint64_t)sqlite3_column_int64(st, 1);
        if ((rc = column_copy(st, 2, &l->frame, &l->flen))) {
            done(st);
            goto out;
        }
        n++;
        const char *base = (const char *)sqlite3_column_text(st, 0);
        if (!base) { done(st); break; }
        snprintf(cur, sizeof cur, "%s", base);
        done(st);
        if ((start = lru_find(c, cur))) break;
    }
    char *prefix = NULL;
    size_t plen = 0;
    if (start) {
        if (!(prefix = malloc(start->len + 1))) { rc = kwb_fail(KWB_ENOMEM, "out of memory"); goto out; }
        memcpy(prefix, start->data, start->len);
        plen = start->len;
    }
    for (int i = n - 1; i >= 0; i--) {
        char *buf = NULL;
        rc = decode_either(c, chain[i].id, chain[i].frame, chain[i].flen, prefix, plen, chain[i].raw, &buf);
        free(prefix);
        if (rc) {
            if (i > 0) {
                char why[1024];
                snprintf(why, sizeof why, "%s", kwb_last_error());
                rc = kwb_fail(rc, "cannot rebuild blob %s: its base %s", id, why);
            }
            goto out;
        }
        prefix = buf;
        plen = chain[i].raw;
        if (i > 0) lru_add(c, chain[i].id, buf, plen);
    }
    lru_add(c, id, prefix, plen);
    *data = prefix;
    *len = plen;
out:
    free_links(chain, n);
    return rc;
}

int kwb_cache_blob_get(kwb_cache *c, const char *id, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    return blob_load(c, id, data, len);
}

/* Both stored copies of one blob's frame, each decoded against the base's
 * content: frame and mirror get KWB_COPY_OK, _CORRUPT or (mirror) _NONE, and
 * why what the first corrupt copy's check said. The copies stay in r. */
typedef struct {
    kwb_blob_info bi;
    void *frame, *mirror;
    size_t flen, mlen;
    int32_t fstate, mstate;
    char why[1024];
} copies;

static void copies_free(copies *r) {
    free(r->frame);
    free(r->mirror);
}

static int copies_check(kwb_cache *c, const char *id, copies *r) {
    memset(r, 0, sizeof *r);
    int rc = kwb_cache_blob_info(c, id, &r->bi);
    if (rc) return rc;
    sqlite3_stmt *st = kwb_cache_stmt(c, "SELECT frame FROM blob WHERE id = ?1");
    if (!st) return KWB_CACHE_EDB;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int s = sqlite3_step(st);
    rc = s == SQLITE_ROW ? column_copy(st, 0, &r->frame, &r->flen)
       : s == SQLITE_DONE ? kwb_fail(KWB_CACHE_ENOTFOUND, "no blob %s in the cache %s", id, c->path)
       : kwb_cache_dberr(c, "reading a blob");
    done(st);
    if (rc || (rc = mirror_get(c, id, &r->mirror, &r->mlen))) return rc;
    char *prefix = NULL;
    size_t plen = 0;
    if (r->bi.base[0] && (rc = blob_load(c, r->bi.base, &prefix, &plen))) {
        if (rc == KWB_CACHE_ECORRUPT || rc == KWB_CACHE_ENOTFOUND) {
            char why[1024];
            snprintf(why, sizeof why, "%s", kwb_last_error());
            rc = kwb_fail(rc, "cannot rebuild blob %s: its base %s", id, why);
        }
        return rc;
    }
    char *out = NULL;
    rc = kwb_blob_decode(c->dctx, id, r->frame, r->flen, prefix, plen, r->bi.raw_size, &out);
    free(out);
    r->fstate = rc == 0 ? KWB_COPY_OK : KWB_COPY_CORRUPT;
    if (rc) snprintf(r->why, sizeof r->why, "%s", kwb_last_error());
    if (rc && rc != KWB_CACHE_ECORRUPT) goto out;
    rc = 0;
    r->mstate = KWB_COPY_NONE;
    if (r->mirror) {
        rc = kwb_blob_decode(c->dctx, id, r->mirror, r->mlen, prefix, plen, r->bi.raw_size, &out);
        free(out);
        r->mstate = rc == 0 ? KWB_COPY_OK : KWB_COPY_CORRUPT;
        if (rc && !r->why[0]) snprintf(r->why, sizeof r->why, "%s", kwb_last_error());
        if (rc == KWB_CACHE_ECORRUPT) rc = 0;
    }
out:
    free(prefix);
    return rc;
}

int kwb_cache_blob_check(kwb_cache *c, const char *id, kwb_blob_health *h) {
    h->frame = h->mirror = KWB_COPY_NONE;
    copies r;
    int rc = copies_check(c, id, &r);
    if (rc == 0) {
        h->frame = r.fstate;
        h->mirror = r.mstate;
        if (r.fstate != KWB_COPY_OK || r.mstate == KWB_COPY_CORRUPT) kwb_fail(KWB_CACHE_ECORRUPT, "%s", r.why);
    }
    copies_free(&r);
    return rc;
}

int kwb_cache_blob_frame(kwb_cache *c, const char *id, kwb_blob_info *bi, void **frame, size_t *flen) {
    *frame = NULL;
    *flen = 0;
    copies r;
    int rc = copies_check(c, id, &r);
    if (rc == 0) {
        *bi = r.bi;
        if (r.fstate == KWB_COPY_OK) {
            *frame = r.frame, *flen = r.flen;
            r.frame = NULL;
        } else if (r.mstate == KWB_COPY_OK) {
            *frame = r.mirror, *flen = r.mlen;
            r.mirror = NULL;
        } else {
            rc = kwb_fail(KWB_CACHE_ECORRUPT, "%s%s", r.why,
                          r.mstate == KWB_COPY_CORRUPT ? " (and so is its mirror copy)" : "");
        }
    }
    copies_free(&r);
    return rc;
}

int kwb_cache_blob_repair(kwb_cache *c, const char *id, int *fixed) {
    *fixed = 0;
    copies r;
    int rc = copies_check(c, id, &r);
    if (rc) goto out;
    sqlite3_stmt *st = NULL;
    if (r.fstate == KWB_COPY_CORRUPT && r.mstate == KWB_COPY_OK) {
        if (!(st = kwb_cache_stmt(c, "UPDATE blob SET frame = ?2, stored_size = ?3 WHERE id = ?1"))) goto db;
        sqlite3_bind_blob(st, 2, r.mirror, (int)r.mlen, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, (sqlite3_int64)r.mlen);
    } else if (r.fstate == KWB_COPY_OK && r.mstate == KWB_COPY_CORRUPT) {
        if (!(st = kwb_cache_stmt(c, "UPDATE mirror SET frame = ?2 WHERE id = ?1"))) goto db;
        sqlite3_bind_blob(st, 2, r.frame, (int)r.flen, SQLITE_STATIC);
    } else if (r.fstate == KWB_COPY_CORRUPT) {
        rc = kwb_fail(KWB_CACHE_ECORRUPT, "%s%s", r.why,
                      r.mstate == KWB_COPY_CORRUPT ? " (and so is its mirror copy)" : "");
        goto out;
    } else {
        goto out;
    }
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    rc = sqlite3_step(st) == SQLITE_DONE ? 0 : kwb_cache_dberr(c, "repairing a blob");
    done(st);
    *fixed = rc == 0;
    goto out;
db:
    rc = KWB_CACHE_EDB;
out:
    copies_free(&r);
    return rc;
}

int kwb_cache_mirror_base(kwb_cache *c, const char *id) {
    sqlite3_stmt *st = kwb_cache_stmt(c, "SELECT 1 FROM mirror WHERE id = ?1");
    if (!st) return KWB_CACHE_EDB;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int s = sqlite3_step(st);
    done(st);
    if (s == SQLITE_ROW) return 0;
    if (s != SQLITE_DONE) return kwb_cache_dberr(c, "reading a blob's mirror");
    kwb_blob_info bi;
    void *frame = NULL;
    size_t flen = 0;
    int rc = kwb_cache_blob_frame(c, id, &bi, &frame, &flen);
    if (rc) return rc;
    if (!(st = kwb_cache_stmt(c, "INSERT OR IGNORE INTO mirror(id, frame) VALUES (?1, ?2)"))) {
        free(frame);
        return KWB_CACHE_EDB;
    }
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_blob(st, 2, frame, (int)flen, SQLITE_STATIC);
    rc = sqlite3_step(st) == SQLITE_DONE ? 0 : kwb_cache_dberr(c, "storing a blob's mirror");
    done(st);
    free(frame);
    return rc;
}

/* Store a new blob (and its base's mirror) in one transaction: the caller's,
 * or one of its own. */
static int blob_insert(kwb_cache *c, const char *hex, const char *base, uint32_t depth, size_t len,
                       const void *frame, size_t n, int *created) {
    int own = sqlite3_get_autocommit(c->db);
    if (own && exec(c, "BEGIN IMMEDIATE", "starting to store a blob")) return KWB_CACHE_EDB;
    int rc = base ? kwb_cache_mirror_base(c, base) : 0;
    sqlite3_stmt *st = rc ? NULL : kwb_cache_stmt(c, "INSERT OR IGNORE INTO blob(id, base, depth, raw_size, "
                                                     "stored_size, frame) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    if (!rc && !st) rc = KWB_CACHE_EDB;
    if (st) {
        sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
        if (base) sqlite3_bind_text(st, 2, base, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 3, (int)depth);
        sqlite3_bind_int64(st, 4, (sqlite3_int64)len);
        sqlite3_bind_int64(st, 5, (sqlite3_int64)n);
        sqlite3_bind_blob(st, 6, frame, (int)n, SQLITE_STATIC);
        rc = sqlite3_step(st) == SQLITE_DONE ? 0 : kwb_cache_dberr(c, "storing a blob");
        if (rc == 0 && created) *created = sqlite3_changes(c->db) > 0;
        done(st);
    }
    if (own) {
        if (rc == 0 && exec(c, "COMMIT", "committing a blob")) rc = KWB_CACHE_EDB;
        if (rc) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", kwb_last_error());
            sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
            kwb_fail(rc, "%s", msg);
        }
    }
    return rc;
}

static int compress(kwb_cache *c, const char *hex, const void *data, size_t len, const void *prefix,
                    size_t plen, void **frame, size_t *flen) {
    size_t cap = ZSTD_compressBound(len);
    if (!(*frame = malloc(cap ? cap : 1))) return kwb_fail(KWB_ENOMEM, "out of memory");
    size_t n = ZSTD_CCtx_reset(c->cctx, ZSTD_reset_session_and_parameters);
    if (!ZSTD_isError(n)) n = ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_compressionLevel, LEVEL);
    if (!ZSTD_isError(n)) n = ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_checksumFlag, 1);
    if (!ZSTD_isError(n) && prefix) n = ZSTD_CCtx_refPrefix(c->cctx, prefix, plen);
    if (!ZSTD_isError(n)) n = ZSTD_compress2(c->cctx, *frame, cap, data, len);
    if (ZSTD_isError(n)) {
        free(*frame);
        *frame = NULL;
        return kwb_fail(KWB_EIO, "zstd could not compress blob %s: %s", hex, ZSTD_getErrorName(n));
    }
    *flen = n;
    return 0;
}

int kwb_cache_blob_put(kwb_cache *c, const void *data, size_t len, const char *base,
                       char *id, int *created) {
    if (created) *created = 0;
    char hex[65];
    if (kwb_sha256_hex(data, len, hex)) return KWB_EIO;
    snprintf(id, 65, "%s", hex);
    kwb_blob_info bi;
    int rc = kwb_cache_blob_info(c, hex, &bi);
    if (rc == 0) return 0;
    if (rc != KWB_CACHE_ENOTFOUND) return rc;

    /* Delta against the base when its chain leaves room and it reads back
     * clean; otherwise (or with no base) a full frame. */
    char *prefix = NULL;
    size_t plen = 0;
    uint32_t depth = 0;
    if (base && *base && strcmp(base, hex) != 0 && kwb_cache_blob_info(c, base, &bi) == 0 &&
        bi.depth < MAX_DEPTH && blob_load(c, base, &prefix, &plen) == 0)
        depth = bi.depth + 1;
    else
        base = NULL;
    void *frame = NULL;
    size_t n = 0;
    rc = compress(c, hex, data, len, prefix, plen, &frame, &n);
    free(prefix);
    if (rc) return rc;
    rc = blob_insert(c, hex, base, depth, len, frame, n, created);
    if (rc == KWB_CACHE_ECORRUPT && base) {
        /* the base's stored frame is corrupt (its content came from memory):
         * nothing can be stored against it, so store this one whole */
        free(frame);
        if ((rc = compress(c, hex, data, len, NULL, 0, &frame, &n))) return rc;
        rc = blob_insert(c, hex, NULL, 0, len, frame, n, created);
    }
    free(frame);
    if (rc) return rc;
    lru_add(c, hex, data, len);
    return 0;
}

int kwb_cache_blob_put_frame(kwb_cache *c, const char *id, const char *base, uint64_t raw,
                             const void *frame, size_t flen, int *created) {
    *created = 0;
    kwb_blob_info bi;
    int rc = kwb_cache_blob_info(c, id, &bi);
    if (rc != KWB_CACHE_ENOTFOUND) return rc;   /* 0: there already */
    if (!base || !*base) return blob_insert(c, id, NULL, 0, (size_t)raw, frame, flen, created);
    /* the depth is the local base's + 1: the cache may hold the base in
     * another encoding than the bundle did */
    if ((rc = kwb_cache_blob_info(c, base, &bi))) return rc;
    if (bi.depth < MAX_DEPTH) return blob_insert(c, id, base, bi.depth + 1, (size_t)raw, frame, flen, created);
    /* too deep here: store the content whole */
    char *prefix = NULL, *data = NULL;
    size_t plen = 0;
    if ((rc = blob_load(c, base, &prefix, &plen))) return rc;
    rc = kwb_blob_decode(c->dctx, id, frame, flen, prefix, plen, raw, &data);
    free(prefix);
    if (rc) return rc;
    void *whole = NULL;
    size_t n = 0;
    if ((rc = compress(c, id, data, (size_t)raw, NULL, 0, &whole, &n)) == 0)
        rc = blob_insert(c, id, NULL, 0, (size_t)raw, whole, n, created);
    free(whole);
    free(data);
    return rc;
}
