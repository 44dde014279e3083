/* test_cache.c: the cache's C side: blobs (full, delta, corrupt), schema
 * versions, and bundle files, including every truncation and many single-byte
 * corruptions (run under ASan+UBSan too, so the parser is bounds-checked). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "kwb.h"
#include "unit.h"
#include "util.h"

static char dir[64];

static const char *tmp(const char *name) {
    static char buf[8][128];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 128, "%s/%s", dir, name);
    return p;
}

/* A ~3 KB text and a variant that differs in one line. */
static char *text(int variant) {
    kwb_strbuf b = {0};
    for (int i = 0; i < 60; i++)
        kwb_strbuf_addf(&b, "    acc[%d] = fmaf(a_frag[%d], b_frag[%d], acc[%d]); // line %d\n", i % 8, i % 7,
                        i % 5, i % 8, i == 30 ? variant : i);
    return b.s;
}

static void test_blob_round_trip_full_and_delta(void) {
    kwb_cache *c = NULL;
    CHECK_INT(kwb_cache_open(tmp("a/b/blobs.db"), &c), 0);   /* creates the directories */
    char *t0 = text(0), *t1 = text(1);
    char id0[65], id1[65], again[65];
    int created = -1;
    CHECK_INT(kwb_cache_blob_put(c, t0, strlen(t0), NULL, id0, &created), 0);
    CHECK_INT(created, 1);
    CHECK_INT(kwb_cache_blob_put(c, t1, strlen(t1), id0, id1, &created), 0);
    CHECK_INT(created, 1);
    CHECK_INT(kwb_cache_blob_put(c, t1, strlen(t1), id0, again, &created), 0);
    CHECK_INT(created, 0);
    CHECK_STR(again, id1);
    char hex[65];
    kwb_sha256_hex(t1, strlen(t1), hex);
    CHECK_STR(id1, hex);
    kwb_blob_info bi;
    CHECK_INT(kwb_cache_blob_info(c, id1, &bi), 0);
    CHECK_STR(bi.base, id0);
    CHECK_INT(bi.depth, 1);
    CHECK_INT(bi.raw_size, strlen(t1));
    CHECK(bi.stored_size < 60);   /* one changed line */
    CHECK_INT(bi.mirrored, 0);
    CHECK_INT(kwb_cache_blob_info(c, id0, &bi), 0);
    CHECK_INT(bi.mirrored, 1);    /* id1 is stored against it */
    kwb_cache_close(c);
    CHECK_INT(kwb_cache_open(tmp("a/b/blobs.db"), &c), 0);
    char *got = NULL;
    size_t len = 0;
    CHECK_INT(kwb_cache_blob_get(c, id1, &got, &len), 0);
    CHECK_INT(len, strlen(t1));
    CHECK(memcmp(got, t1, len) == 0);
    kwb_free(got);
    CHECK_INT(kwb_cache_blob_get(c, "00ff", &got, &len), KWB_CACHE_ENOTFOUND);
    kwb_cache_close(c);
    free(t0);
    free(t1);
}

static void test_blob_chain_is_bounded(void) {
    kwb_cache *c = NULL;
    CHECK_INT(kwb_cache_open(tmp("chain.db"), &c), 0);
    char prev[65] = "", id[65];
    int max = kwb_cache_max_depth();
    for (int v = 0; v < 2 * (max + 1) + 1; v++) {
        char *t = text(v);
        CHECK_INT(kwb_cache_blob_put(c, t, strlen(t), prev, id, NULL), 0);
        free(t);
        kwb_blob_info bi;
        CHECK_INT(kwb_cache_blob_info(c, id, &bi), 0);
        CHECK_INT(bi.depth, v % (max + 1));
        memcpy(prev, id, sizeof prev);
    }
    kwb_cache_close(c);
}

/* Flip one byte in the middle of a stored copy of blob id's frame (table
 * "blob" for the first copy, "mirror" for the second), as bit rot would. */
static void corrupt_copy(const char *path, const char *table, const char *id) {
    sqlite3 *db;
    CHECK_INT(sqlite3_open(path, &db), SQLITE_OK);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT frame FROM %s WHERE id = ?1", table);
    sqlite3_stmt *st;
    CHECK_INT(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    CHECK_INT(sqlite3_step(st), SQLITE_ROW);
    int n = sqlite3_column_bytes(st, 0);
    unsigned char *frame = malloc((size_t)n);
    memcpy(frame, sqlite3_column_blob(st, 0), (size_t)n);
    sqlite3_finalize(st);
    frame[n / 2] ^= 0xff;
    snprintf(sql, sizeof sql, "UPDATE %s SET frame = ?2 WHERE id = ?1", table);
    CHECK_INT(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_blob(st, 2, frame, n, SQLITE_STATIC);
    CHECK_INT(sqlite3_step(st), SQLITE_DONE);
    CHECK_INT(sqlite3_changes(db), 1);
    sqlite3_finalize(st);
    sqlite3_close(db);
    free(frame);
}

/* A chain t0 <- t1 <- t2 <- t3 and an unrelated blob; the handle is closed. */
static void make_chain(const char *path, char ids[5][65]) {
    kwb_cache *c = NULL;
    CHECK_INT(kwb_cache_open(path, &c), 0);
    char prev[65] = "";
    for (int v = 0; v < 4; v++) {
        char *t = text(v);
        CHECK_INT(kwb_cache_blob_put(c, t, strlen(t), prev, ids[v], NULL), 0);
        free(t);
        memcpy(prev, ids[v], sizeof prev);
    }
    CHECK_INT(kwb_cache_blob_put(c, "int unrelated;\n", 15, NULL, ids[4], NULL), 0);
    kwb_cache_close(c);
}

/* Every blob of the chain but skip reads back right on a fresh handle. */
static int others_read(const char *path, char ids[5][65], int skip) {
    kwb_cache *c = NULL;
    if (kwb_cache_open(path, &c)) return 0;
    int good = 0;
    for (int v = 0; v < 5; v++) {
        if (v == skip) continue;
        char *got = NULL, *want = v < 4 ? text(v) : strdup("int unrelated;\n");
        size_t len;
        good += kwb_cache_blob_get(c, ids[v], &got, &len) == 0 && strcmp(got, want) == 0;
        kwb_free(got);
        free(want);
    }
    kwb_cache_close(c);
    return good;
}

static void test_blob_bases_and_only_bases_are_mirrored(void) {
    char ids[5][65];
    make_chain(tmp("mirrors.db"), ids);
    kwb_cache *c = NULL;
    CHECK_INT(kwb_cache_open(tmp("mirrors.db"), &c), 0);
    int want[5] = {1, 1, 1, 0, 0};   /* t3 and the unrelated blob are leaves */
    for (int v = 0; v < 5; v++) {
        kwb_blob_info bi;
        CHECK_INT(kwb_cache_blob_info(c, ids[v], &bi), 0);
        CHECK_INT(bi.mirrored, want[v]);
        kwb_blob_health h;
        CHECK_INT(kwb_cache_blob_check(c, ids[v], &h), 0);
        CHECK_INT(h.frame, KWB_COPY_OK);
        CHECK_INT(h.mirror, want[v] ? KWB_COPY_OK : KWB_COPY_NONE);
    }
    kwb_cache_close(c);
}

static void test_blob_corrupt_leaf_loses_only_itself(void) {
    char ids[5][65];
    const char *path = tmp("leaf.db");
    make_chain(path, ids);
    corrupt_copy(path, "blob", ids[3]);
    kwb_cache *c = NULL;
    CHECK_INT(kwb_cache_open(path, &c), 0);
    char *got = NULL;
    size_t len;
    CHECK_INT(kwb_cache_blob_get(c, ids[3], &got, &len), KWB_CACHE_ECORRUPT);
    CHECK(got == NULL);
    char want[200];
    snprintf(want, sizeof want, "blob %s is corrupt: ", ids[3]);
    CHECK(strncmp(kwb_last_error(), want, strlen(want)) == 0);
    kwb_blob_health h;
    CHECK_INT(kwb_cache_blob_check(c, ids[3], &h), 0);
    CHECK_INT(h.frame, KWB_COPY_CORRUPT);
    CHECK_INT(h.mirror, KWB_COPY_NONE);
    int fixed = -1;
    CHECK_INT(kwb_cache_blob_repair(c, ids[3], &fixed), KWB_CACHE_ECORRUPT);
    CHECK_INT(fixed, 0);
    kwb_cache_close(c);
    CHECK_INT(others_read(path, ids, 3), 4);   /* every other blob */
}

static void test_blob_corrupt_base_reads_through_its_mirror(void) {
    char ids[5][65];
    const char *path = tmp("base.db");
    make_chain(path, ids);
    corrupt_copy(path, "blob", ids[1]);   /* the middle of the chain */
    CHECK_INT(others_read(path, ids, -1), 5);   /* itself and its descendants too */
    kwb_cache *c = NULL;
    CHECK_INT(kwb_cache_open(path, &c), 0);
    kwb_blob_health h;
    CHECK_INT(kwb_cache_blob_check(c, ids[1], &h), 0);
    CHECK_INT(h.frame, KWB_COPY_CORRUPT);
    CHECK_INT(h.mirror, KWB_COPY_OK);
    char want[200];
    snprintf(want, sizeof want, "blob %s is corrupt: ", ids[1]);
    CHECK(strncmp(kwb_last_error(), want, strlen(want)) == 0);
    /* a new delta on it is still a delta: the mirror is sound */
    char *t9 = text(9), id9[65];
    CHECK_INT(kwb_cache_blob_put(c, t9, strlen(t9), ids[1], id9, NULL), 0);
    kwb_blob_info bi;
    CHECK_INT(kwb_cache_blob_info(c, id9, &bi), 0);
    CHECK_INT(bi.depth, 2);
    free(t9);
    int fixed = 0;
    CHECK_INT(kwb_cache_blob_repair(c, ids[1], &fixed), 0);
    CHECK_INT(fixed, 1);
    CHECK_INT(kwb_cache_blob_check(c, ids[1], &h), 0);
    CHECK_INT(h.frame, KWB_COPY_OK);
    CHECK_INT(h.mirror, KWB_COPY_OK);
    CHECK_INT(kwb_cache_blob_repair(c, ids[1], &fixed), 0);
    CHECK_INT(fixed, 0);
    kwb_cache_close(c);
    /* and the other way round: a corrupt mirror under a sound frame */
    corrupt_copy(path, "mirror", ids[2]);
    CHECK_INT(others_read(path, ids, -1), 5);
    CHECK_INT(kwb_cache_open(path, &c), 0);
    CHECK_INT(kwb_cache_blob_check(c, ids[2], &h), 0);
    CHECK_INT(h.frame, KWB_COPY_OK);
    CHECK_INT(h.mirror, KWB_COPY_CORRUPT);
    CHECK_INT(kwb_cache_blob_repair(c, ids[2], &fixed), 0);
    CHECK_INT(fixed, 1);
    CHECK_INT(kwb_cache_blob_check(c, ids[2], &h), 0);
    CHECK_INT(h.mirror, KWB_COPY_OK);
    kwb_cache_close(c);
}

/* The double fault: both copies of a base's frame corrupt. The base is lost,
 * and so is every blob stored against it (their errors name the base); the
 * blobs below it and elsewhere are not. */
static void test_blob_both_copies_corrupt_lose_base_and_descendants(void) {
    char ids[5][65];
    const char *path = tmp("both.db");
    make_chain(path, ids);
    corrupt_copy(path, "blob", ids[1]);
    corrupt_copy(path, "mirror", ids[1]);
    kwb_cache *c = NULL;
    CHECK_INT(kwb_cache_open(path, &c), 0);
    char *got = NULL;
    size_t len;
    CHECK_INT(kwb_cache_blob_get(c, ids[1], &got, &len), KWB_CACHE_ECORRUPT);
    CHECK(got == NULL);
    char want[300];
    snprintf(want, sizeof want, "blob %s is corrupt: ", ids[1]);
    CHECK(strncmp(kwb_last_error(), want, strlen(want)) == 0);
    CHECK(strstr(kwb_last_error(), "(and so is its mirror copy: ") != NULL);
    for (int v = 2; v < 4; v++) {
        CHECK_INT(kwb_cache_blob_get(c, ids[v], &got, &len), KWB_CACHE_ECORRUPT);
        snprintf(want, sizeof want, "cannot rebuild blob %s: its base blob %s is corrupt: ", ids[v], ids[1]);
        CHECK(strncmp(kwb_last_error(), want, strlen(want)) == 0);
        kwb_blob_health h;
        CHECK_INT(kwb_cache_blob_check(c, ids[v], &h), KWB_CACHE_ECORRUPT);
    }
    kwb_blob_health h;
    CHECK_INT(kwb_cache_blob_check(c, ids[1], &h), 0);
    CHECK_INT(h.frame, KWB_COPY_CORRUPT);
    CHECK_INT(h.mirror, KWB_COPY_CORRUPT);
    int fixed = -1;
    CHECK_INT(kwb_cache_blob_repair(c, ids[1], &fixed), KWB_CACHE_ECORRUPT);
    /* a new blob with the lost base as its base is stored whole */
    char *t9 = text(9), id9[65];
    CHECK_INT(kwb_cache_blob_put(c, t9, strlen(t9), ids[1], id9, NULL), 0);
    kwb_blob_info bi;
    CHECK_INT(kwb_cache_blob_info(c, id9, &bi), 0);
    CHECK_INT(bi.depth, 0);
    CHECK_STR(bi.base, "");
    CHECK_INT(kwb_cache_blob_get(c, id9, &got, &len), 0);
    CHECK_STR(got, t9);
    kwb_free(got);
    free(t9);
    kwb_cache_close(c);
    CHECK_INT(kwb_cache_open(path, &c), 0);
    char *t0 = text(0);
    CHECK_INT(kwb_cache_blob_get(c, ids[0], &got, &len), 0);   /* below it: sound */
    CHECK_STR(got, t0);
    kwb_free(got);
    free(t0);
    CHECK_INT(kwb_cache_blob_get(c, ids[4], &got, &len), 0);   /* elsewhere: sound */
    kwb_free(got);
    kwb_cache_close(c);
}

/* A base whose frame is corrupt and that has no mirror yet (say, one stored
 * before anything was stored against it, then damaged): a new blob is stored
 * whole rather than against it, even when its content is in memory. */
static void test_blob_base_with_corrupt_frame_is_not_used(void) {
    const char *path = tmp("nomirror.db");
    kwb_cache *c = NULL;
    CHECK_INT(kwb_cache_open(path, &c), 0);
    char *t0 = text(0), *t1 = text(1), id0[65], id1[65];
    CHECK_INT(kwb_cache_blob_put(c, t0, strlen(t0), NULL, id0, NULL), 0);   /* t0 is in the handle's memory */
    corrupt_copy(path, "blob", id0);
    CHECK_INT(kwb_cache_blob_put(c, t1, strlen(t1), id0, id1, NULL), 0);
    kwb_blob_info bi;
    CHECK_INT(kwb_cache_blob_info(c, id1, &bi), 0);
    CHECK_INT(bi.depth, 0);
    CHECK_INT(kwb_cache_blob_info(c, id0, &bi), 0);
    CHECK_INT(bi.mirrored, 0);   /* a corrupt frame is never copied */
    kwb_cache_close(c);
    free(t0);
    free(t1);
}

/* 24 blobs of 3.8 MB, each a delta on the one before: more than the handle
 * keeps decoded (64 MB), so storing and reading them evicts by size. */
static char *big_text(int k) {
    char line[64];
    int n = snprintf(line, sizeof line, "line %d of blob %d\n", k, k);
    char *s = malloc((size_t)n * 200000 + 1);
    for (int i = 0; i < 200000; i++) memcpy(s + (size_t)i * n, line, (size_t)n);
    s[(size_t)n * 200000] = 0;
    return s;
}

static void test_blob_large_chain_round_trip(void) {
    kwb_cache *c = NULL;
    CHECK_INT(kwb_cache_open(tmp("big.db"), &c), 0);
    char ids[24][65], prev[65] = "";
    for (int k = 0; k < 24; k++) {
        char *t = big_text(k);
        CHECK_INT(kwb_cache_blob_put(c, t, strlen(t), prev, ids[k], NULL), 0);
        free(t);
        memcpy(prev, ids[k], sizeof prev);
    }
    int good = 0;
    for (int k = 23; k >= 0; k--) {   /* newest first, then back down the chain */
        char *t = big_text(k), *got = NULL;
        size_t len;
        good += kwb_cache_blob_get(c, ids[k], &got, &len) == 0 && len == strlen(t) && memcmp(got, t, len) == 0;
        kwb_free(got);
        free(t);
    }
    CHECK_INT(good, 24);
    kwb_cache_close(c);
}

static void test_open_refuses_newer_schema(void) {
    kwb_cache *c = NULL;
    CHECK_INT(kwb_cache_open(tmp("v.db"), &c), 0);
    kwb_cache_close(c);
    sqlite3 *db;
    CHECK_INT(sqlite3_open(tmp("v.db"), &db), SQLITE_OK);
    CHECK_INT(sqlite3_exec(db, "PRAGMA user_version = 7", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    CHECK_INT(kwb_cache_open(tmp("v.db"), &c), KWB_CACHE_EVERSION);
    CHECK(c == NULL);
    CHECK(strstr(kwb_last_error(), "has schema version 7, newer than this kwb understands (6)") != NULL);
    /* an SQLite file of another program */
    CHECK_INT(sqlite3_open(tmp("other.db"), &db), SQLITE_OK);
    CHECK_INT(sqlite3_exec(db, "PRAGMA application_id = 42; CREATE TABLE t(x)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    CHECK_INT(kwb_cache_open(tmp("other.db"), &c), KWB_CACHE_ECORRUPT);
    CHECK(strstr(kwb_last_error(), "not a kwb cache (SQLite application id 0x2a)") != NULL);
}

/* A small bundle: 3 records, a chain of 4 blobs. */
static int make_bundle(const char *path, char ids[4][65]) {
    kwb_cache *c = NULL;
    if (kwb_cache_open(tmp("src.db"), &c)) return -1;
    char prev[65] = "";
    for (int v = 0; v < 4; v++) {
        char *t = text(v);
        kwb_cache_blob_put(c, t, strlen(t), prev, ids[v], NULL);
        free(t);
        memcpy(prev, ids[v], 65);
    }
    const char *tables[] = {"candidate", "result", "run"};
    const char *recs[] = {"{\"id\":\"x\"}", "{\"shape\":\"1\"}", "{}"};
    const char *blobs[] = {ids[3]};   /* the bases come along */
    int rc = kwb_cache_export(c, path, "{\"format\":1}", 3, tables, recs, 1, blobs);
    kwb_cache_close(c);
    return rc;
}

static void test_bundle_round_trip(void) {
    char ids[4][65];
    CHECK_INT(make_bundle(tmp("b.kwb"), ids), 0);
    kwb_cache_bundle *b = NULL;
    CHECK_INT(kwb_cache_bundle_open(tmp("b.kwb"), &b), 0);
    CHECK_STR(kwb_cache_bundle_manifest(b), "{\"format\":1}");
    CHECK_INT(kwb_cache_bundle_nrecords(b), 3);
    CHECK_INT(kwb_cache_bundle_nblobs(b), 4);
    const char *table, *json;
    CHECK_INT(kwb_cache_bundle_record(b, 1, &table, &json), 0);
    CHECK_STR(table, "result");
    CHECK_STR(json, "{\"shape\":\"1\"}");
    CHECK_STR(kwb_cache_bundle_blob(b, 0), ids[0]);   /* bases first */
    kwb_cache *c = NULL;
    CHECK_INT(kwb_cache_open(tmp("dst.db"), &c), 0);
    uint32_t added = 0;
    CHECK_INT(kwb_cache_import_blobs(c, b, &added), 0);
    CHECK_INT(added, 4);
    CHECK_INT(kwb_cache_import_blobs(c, b, &added), 0);
    CHECK_INT(added, 0);
    char *got = NULL, *want = text(3);
    size_t len;
    CHECK_INT(kwb_cache_blob_get(c, ids[3], &got, &len), 0);
    CHECK_STR(got, want);
    kwb_free(got);
    free(want);
    kwb_cache_close(c);
    kwb_cache_bundle_close(b);
}

/* A bundle's blob Z, a delta on X, imported into caches that hold X at other
 * depths than the bundle's (0): Z's depth follows the local X, and where that
 * would pass the bound Z is stored whole. */
static void test_import_depth_follows_the_local_base(void) {
    int max = kwb_cache_max_depth();
    kwb_cache *c = NULL;
    char x[65], z[65], id[65], prev[65];
    CHECK_INT(kwb_cache_open(tmp("zsrc.db"), &c), 0);
    char *tx = text(max), *tz = text(max + 1);
    CHECK_INT(kwb_cache_blob_put(c, tx, strlen(tx), NULL, x, NULL), 0);
    CHECK_INT(kwb_cache_blob_put(c, tz, strlen(tz), x, z, NULL), 0);
    const char *blobs[] = {z};
    CHECK_INT(kwb_cache_export(c, tmp("z.kwb"), "{}", 0, NULL, NULL, 1, blobs), 0);
    kwb_cache_close(c);
    kwb_cache_bundle *b = NULL;
    CHECK_INT(kwb_cache_bundle_open(tmp("z.kwb"), &b), 0);
    CHECK_INT(kwb_cache_bundle_nblobs(b), 2);
    int starts[2] = {0, max - 5}, want[2] = {0, 6};   /* X at depth max, then at depth 5 */
    for (int i = 0; i < 2; i++) {
        const char *path = tmp(i ? "zdst5.db" : "zdstmax.db");
        CHECK_INT(kwb_cache_open(path, &c), 0);
        prev[0] = 0;
        for (int v = starts[i]; v <= max; v++) {
            char *t = text(v);
            CHECK_INT(kwb_cache_blob_put(c, t, strlen(t), prev, id, NULL), 0);
            free(t);
            memcpy(prev, id, sizeof prev);
        }
        CHECK_STR(id, x);
        uint32_t added = 0;
        CHECK_INT(kwb_cache_import_blobs(c, b, &added), 0);
        CHECK_INT(added, 1);   /* Z; the cache had X */
        kwb_blob_info bi;
        CHECK_INT(kwb_cache_blob_info(c, z, &bi), 0);
        CHECK_INT(bi.depth, want[i]);
        CHECK_STR(bi.base, i ? x : "");
        CHECK_INT(kwb_cache_blob_info(c, x, &bi), 0);
        CHECK_INT(bi.mirrored, i);   /* a base only when Z is stored against it */
        kwb_cache_close(c);
        CHECK_INT(kwb_cache_open(path, &c), 0);
        char *got = NULL;
        size_t len;
        CHECK_INT(kwb_cache_blob_get(c, z, &got, &len), 0);
        CHECK_STR(got, tz);
        kwb_free(got);
        kwb_cache_close(c);
    }
    kwb_cache_bundle_close(b);
    free(tx);
    free(tz);
}

static void test_bundle_every_truncation_and_flip_is_refused(void) {
    char ids[4][65];
    CHECK_INT(make_bundle(tmp("t.kwb"), ids), 0);
    size_t len;
    char *bytes = kwb_read_file(tmp("t.kwb"), &len);
    CHECK(bytes != NULL);
    int refused = 0, tried = 0;
    for (size_t cut = 0; cut < len; cut++) {
        FILE *f = fopen(tmp("cut.kwb"), "wb");
        fwrite(bytes, 1, cut, f);
        fclose(f);
        kwb_cache_bundle *b = NULL;
        tried++;
        refused += kwb_cache_bundle_open(tmp("cut.kwb"), &b) == KWB_CACHE_ECORRUPT && b == NULL;
        kwb_cache_bundle_close(b);
    }
    CHECK_INT(refused, tried);
    refused = tried = 0;
    for (size_t at = 0; at < len; at += 3) {
        bytes[at] ^= 0x10;
        FILE *f = fopen(tmp("flip.kwb"), "wb");
        fwrite(bytes, 1, len, f);
        fclose(f);
        bytes[at] ^= 0x10;
        kwb_cache_bundle *b = NULL;
        int rc = kwb_cache_bundle_open(tmp("flip.kwb"), &b);
        tried++;
        refused += (rc == KWB_CACHE_ECORRUPT || (rc == KWB_CACHE_EVERSION && at >= 8 && at < 12)) && b == NULL;
        kwb_cache_bundle_close(b);
    }
    CHECK_INT(refused, tried);
    free(bytes);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/kwb-unit-cache.XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(test_blob_round_trip_full_and_delta);
    RUN(test_blob_chain_is_bounded);
    RUN(test_blob_bases_and_only_bases_are_mirrored);
    RUN(test_blob_corrupt_leaf_loses_only_itself);
    RUN(test_blob_corrupt_base_reads_through_its_mirror);
    RUN(test_blob_both_copies_corrupt_lose_base_and_descendants);
    RUN(test_blob_base_with_corrupt_frame_is_not_used);
    RUN(test_blob_large_chain_round_trip);
    RUN(test_open_refuses_newer_schema);
    RUN(test_bundle_round_trip);
    RUN(test_import_depth_follows_the_local_base);
    RUN(test_bundle_every_truncation_and_flip_is_refused);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    return UNIT_EXIT();
}
