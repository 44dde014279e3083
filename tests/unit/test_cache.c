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

static void test_blob_corrupt_frame_is_named(void) {
    kwb_cache *c = NULL;
    CHECK_INT(kwb_cache_open(tmp("corrupt.db"), &c), 0);
    char *t0 = text(0), *t1 = text(1);
    char id0[65], id1[65];
    CHECK_INT(kwb_cache_blob_put(c, t0, strlen(t0), NULL, id0, NULL), 0);
    CHECK_INT(kwb_cache_blob_put(c, t1, strlen(t1), id0, id1, NULL), 0);
    kwb_cache_close(c);
    sqlite3 *db;
    CHECK_INT(sqlite3_open(tmp("corrupt.db"), &db), SQLITE_OK);
    char sql[256];
    snprintf(sql, sizeof sql, "UPDATE blob SET frame = substr(frame, 1, 10) || x'00' || substr(frame, 12) "
             "WHERE id = '%s'", id0);
    CHECK_INT(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    CHECK_INT(kwb_cache_open(tmp("corrupt.db"), &c), 0);
    char *got = NULL;
    size_t len;
    CHECK_INT(kwb_cache_blob_get(c, id0, &got, &len), KWB_CACHE_ECORRUPT);
    CHECK(strstr(kwb_last_error(), id0) != NULL);
    CHECK(got == NULL);
    CHECK_INT(kwb_cache_blob_get(c, id1, &got, &len), KWB_CACHE_ECORRUPT);
    char want[200];
    snprintf(want, sizeof want, "cannot rebuild blob %s: its base blob %s is corrupt", id1, id0);
    CHECK(strncmp(kwb_last_error(), want, strlen(want)) == 0);
    /* a new delta on the corrupt base falls back to a full frame */
    char *t2 = text(2), id2[65];
    CHECK_INT(kwb_cache_blob_put(c, t2, strlen(t2), id0, id2, NULL), 0);
    kwb_blob_info bi;
    CHECK_INT(kwb_cache_blob_info(c, id2, &bi), 0);
    CHECK_INT(bi.depth, 0);
    CHECK_INT(kwb_cache_blob_get(c, id2, &got, &len), 0);
    kwb_free(got);
    kwb_cache_close(c);
    free(t0);
    free(t1);
    free(t2);
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
    CHECK(strstr(kwb_last_error(), "has schema version 7, newer than this kwb understands (1)") != NULL);
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
    RUN(test_blob_corrupt_frame_is_named);
    RUN(test_open_refuses_newer_schema);
    RUN(test_bundle_round_trip);
    RUN(test_bundle_every_truncation_and_flip_is_refused);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    return UNIT_EXIT();
}
