/* cache_bundle.c: bundle files, a chosen part of a cache in one file for a
 * teammate. Writing checks every blob first; reading checks the whole file
 * (magic, format version, every entry's SHA-256, the whole file's SHA-256,
 * every blob's content) before anything can be imported.
 *
 * Layout (integers little-endian):
 *   "KWBUNDLE"  u32 format version  u32 reserved (0)
 *   entries, each:
 *     u8 type ('M' manifest, 'R' record, 'B' blob, 'E' end)  u8[3] zero
 *     u32 name length  u64 payload length  name  payload
 *     SHA-256 (32 bytes) of the 16 header bytes, the name and the payload
 *   'M' first (name "manifest", JSON); 'R' name = table, payload = JSON row;
 *   'B' name = blob id, payload = base id (64 hex or 64 zero bytes), u32
 *   depth, u32 zero, u64 raw size, zstd frame (bases come before their
 *   deltas; one copy of each frame, the sound one where the cache holds a
 *   corrupt copy and its mirror; import gives the bases their mirrors again);
 *   'E' last, payload = u64 number of entries before it and the
 *   SHA-256 of every byte before it. Nothing follows 'E'. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "cache.h"
#include "error.h"
#include "kwb.h"
#include "os.h"
#include "util.h"

#define MAGIC "KWBUNDLE"
enum { FORMAT_VERSION = 1, HDR = 16, HASH = 32, BLOB_HDR = 80, MAX_NAME = 4096 };

typedef struct {
    char id[65], base[65];
    uint32_t depth;
    uint64_t raw;
    const unsigned char *frame;
    size_t flen;
} bundle_blob;

struct kwb_cache_bundle {
    unsigned char *file;
    size_t len;
    char *manifest;
    uint32_t nrec, nblob;
    char **tables, **records;
    bundle_blob *blobs;
};

static void put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> 8 * i); }
static void put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> 8 * i); }
static uint32_t get32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint64_t get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static int is_hex_id(const char *s, size_t n) {
    if (n != 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

/* ---- an id -> index table (open addressing) ------------------------------ */

typedef struct { uint32_t *slot; size_t cap; } idset;   /* slot holds index + 1 */

static uint64_t id_hash(const char *id) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 16 && id[i]; i++) h = (h ^ (unsigned char)id[i]) * 1099511628211ull;
    return h;
}

static int idset_init(idset *s, size_t n) {
    s->cap = 16;
    while (s->cap < 2 * n + 16) s->cap *= 2;
    s->slot = calloc(s->cap, sizeof *s->slot);
    return s->slot ? 0 : kwb_fail(KWB_ENOMEM, "out of memory");
}

/* The index of id among names, or -1; with add, insert index i if absent. */
static long idset_find(idset *s, const char *id, char (*names)[65], size_t stride, long add) {
    for (size_t h = id_hash(id) & (s->cap - 1);; h = (h + 1) & (s->cap - 1)) {
        uint32_t v = s->slot[h];
        if (!v) {
            if (add >= 0) s->slot[h] = (uint32_t)add + 1;
            return -1;
        }
        const char *name = (const char *)names + (size_t)(v - 1) * stride;
        if (strcmp(name, id) == 0) return (long)v - 1;
    }
}

/* ---- writing -------------------------------------------------------------- */

typedef struct {
    FILE *f;
    EVP_MD_CTX *file_hash;
    uint64_t entries;
    int err;
} writer;

static void emit(writer *w, const void *p, size_t n) {
    if (w->err || n == 0) return;
    if (fwrite(p, 1, n, w->f) != n) w->err = errno ? errno : EIO;
    EVP_DigestUpdate(w->file_hash, p, n);
}

static void entry(writer *w, char type, const char *name, size_t nlen, const void *head, size_t hlen,
                  const void *body, size_t blen) {
    unsigned char h[HDR] = {(unsigned char)type};
    put32(h + 4, (uint32_t)nlen);
    put64(h + 8, (uint64_t)(hlen + blen));
    EVP_MD_CTX *e = EVP_MD_CTX_new();
    unsigned char md[HASH];
    unsigned int mdlen = 0;
    if (!e || !EVP_DigestInit_ex(e, EVP_sha256(), NULL)) { w->err = ENOMEM; EVP_MD_CTX_free(e); return; }
    EVP_DigestUpdate(e, h, HDR);
    EVP_DigestUpdate(e, name, nlen);
    if (hlen) EVP_DigestUpdate(e, head, hlen);
    if (blen) EVP_DigestUpdate(e, body, blen);
    EVP_DigestFinal_ex(e, md, &mdlen);
    EVP_MD_CTX_free(e);
    emit(w, h, HDR);
    emit(w, name, nlen);
    emit(w, head, hlen);
    emit(w, body, blen);
    emit(w, md, HASH);
    w->entries++;
}

typedef struct { char id[65]; uint32_t depth; } export_blob;

static int by_depth(const void *a, const void *b) {
    const export_blob *x = a, *y = b;
    if (x->depth != y->depth) return x->depth < y->depth ? -1 : 1;
    return strcmp(x->id, y->id);
}

/* The named blobs and every base their chains need, each checked by reading it back. */
static int collect_blobs(kwb_cache *c, uint32_t nblob, const char *const *blobs, export_blob **out,
                         size_t *nout) {
    size_t cap = (size_t)nblob * 2 + 16, n = 0;
    export_blob *v = malloc(cap * sizeof *v);
    idset seen;
    if (!v || idset_init(&seen, cap * 4)) { free(v); return kwb_fail(KWB_ENOMEM, "out of memory"); }
    int rc = 0;
    for (uint32_t i = 0; i < nblob && !rc; i++) {
        char cur[65];
        snprintf(cur, sizeof cur, "%s", blobs[i]);
        while (cur[0]) {
            if (idset_find(&seen, cur, &v[0].id, sizeof *v, -1) >= 0) break;
            kwb_blob_info bi;
            char *data = NULL;
            size_t len;
            if ((rc = kwb_cache_blob_get(c, cur, &data, &len))) break;
            free(data);
            if ((rc = kwb_cache_blob_info(c, cur, &bi))) break;
            if (n == cap) {
                /* grow: rebuild the table, whose slots index into v */
                export_blob *nv = realloc(v, 2 * cap * sizeof *v);
                if (!nv) { rc = kwb_fail(KWB_ENOMEM, "out of memory"); break; }
                v = nv;
                cap *= 2;
                free(seen.slot);
                if ((rc = idset_init(&seen, cap * 4))) break;
                for (size_t j = 0; j < n; j++) idset_find(&seen, v[j].id, &v[0].id, sizeof *v, (long)j);
            }
            snprintf(v[n].id, sizeof v[n].id, "%s", cur);
            v[n].depth = bi.depth;
            idset_find(&seen, cur, &v[0].id, sizeof *v, (long)n);
            n++;
            snprintf(cur, sizeof cur, "%s", bi.base);
        }
    }
    free(seen.slot);
    if (rc) { free(v); return rc; }
    qsort(v, n, sizeof *v, by_depth);
    *out = v;
    *nout = n;
    return 0;
}

int kwb_cache_export(kwb_cache *c, const char *path, const char *manifest, uint32_t nrec,
                     const char *const *tables, const char *const *records, uint32_t nblob,
                     const char *const *blobs) {
    /* a path that is not a regular file (a device, a FIFO) is refused before
     * anything is written: the rename below would put the file in its place */
    int rc = kwb_os_output_file(path, "the bundle");
    if (rc) return rc;
    export_blob *bl = NULL;
    size_t nb = 0;
    rc = collect_blobs(c, nblob, blobs, &bl, &nb);
    if (rc) return rc;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    writer w = {0};
    w.f = fopen(tmp, "wb");
    w.file_hash = EVP_MD_CTX_new();
    if (!w.f || !w.file_hash || !EVP_DigestInit_ex(w.file_hash, EVP_sha256(), NULL)) {
        rc = kwb_fail(KWB_EIO, "cannot write the bundle %s: %s", tmp, strerror(errno));
        goto out;
    }
    unsigned char head[16];
    memcpy(head, MAGIC, 8);
    put32(head + 8, FORMAT_VERSION);
    put32(head + 12, 0);
    emit(&w, head, sizeof head);
    entry(&w, 'M', "manifest", 8, NULL, 0, manifest, strlen(manifest));
    for (uint32_t i = 0; i < nrec; i++)
        entry(&w, 'R', tables[i], strlen(tables[i]), NULL, 0, records[i], strlen(records[i]));
    for (size_t i = 0; i < nb && !w.err; i++) {
        /* one copy of each blob: its first copy, or its mirror if that one is corrupt */
        kwb_blob_info bi;
        void *frame = NULL;
        size_t flen = 0;
        if ((rc = kwb_cache_blob_frame(c, bl[i].id, &bi, &frame, &flen))) goto out;
        unsigned char bh[BLOB_HDR] = {0};
        if (bi.base[0]) memcpy(bh, bi.base, 64);
        put32(bh + 64, bi.depth);
        put64(bh + 72, bi.raw_size);
        entry(&w, 'B', bl[i].id, 64, bh, BLOB_HDR, frame, flen);
        free(frame);
    }
    unsigned char end[8 + HASH];
    unsigned int mdlen = 0;
    put64(end, w.entries);
    EVP_MD_CTX *copy = EVP_MD_CTX_new();
    if (!copy || !EVP_MD_CTX_copy_ex(copy, w.file_hash) || !EVP_DigestFinal_ex(copy, end + 8, &mdlen))
        w.err = ENOMEM;
    EVP_MD_CTX_free(copy);
    entry(&w, 'E', "", 0, NULL, 0, end, sizeof end);
    if (!w.err && (fflush(w.f) != 0 || fsync(fileno(w.f)) != 0)) w.err = errno;
    if (w.err) {
        rc = kwb_fail(KWB_EIO, "cannot write the bundle %s: %s", tmp, strerror(w.err));
        goto out;
    }
    fclose(w.f);
    w.f = NULL;
    if (rename(tmp, path) != 0) rc = kwb_fail(KWB_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
out:
    if (w.f) fclose(w.f);
    if (rc) unlink(tmp);
    EVP_MD_CTX_free(w.file_hash);
    free(bl);
    return rc;
}

/* ---- reading -------------------------------------------------------------- */

void kwb_cache_bundle_close(kwb_cache_bundle *b) {
    if (!b) return;
    for (uint32_t i = 0; i < b->nrec; i++) {
        free(b->tables[i]);
        free(b->records[i]);
    }
    free(b->tables);
    free(b->records);
    free(b->blobs);
    free(b->manifest);
    free(b->file);
    free(b);
}

static char *dup_n(const unsigned char *p, size_t n) {
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = 0;
    }
    return s;
}

/* Decode every blob (bases first) and check its content hash and chain. */
/* What a bundle may make kwb decode: each blob, and all of them together. */
#define BLOB_MAX_RAW ((uint64_t)256 << 20)
#define BUNDLE_MAX_RAW ((uint64_t)4 << 30)
#define BUNDLE_MAX_FILE ((uint64_t)2 << 30)

static int verify_blobs(const char *path, kwb_cache_bundle *b) {
    if (b->nblob == 0) return 0;
    idset ix;
    char **content = calloc(b->nblob, sizeof *content);
    unsigned char *is_base = calloc(b->nblob, 1);   /* decoded content kept only for later deltas */
    ZSTD_DCtx *d = ZSTD_createDCtx();
    int rc = idset_init(&ix, b->nblob);
    if (!rc && (!content || !d || !is_base)) rc = kwb_fail(KWB_ENOMEM, "out of memory");
    uint64_t total = 0;
    for (uint32_t i = 0; i < b->nblob && !rc; i++) {
        bundle_blob *x = &b->blobs[i];
        if (x->raw > BLOB_MAX_RAW) {
            rc = kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s: blob %s would decode to %llu bytes, over the %llu MiB "
                          "a blob may hold", path, x->id, (unsigned long long)x->raw,
                          (unsigned long long)(BLOB_MAX_RAW >> 20));
            break;
        }
        total += x->raw;
        if (total > BUNDLE_MAX_RAW) {
            rc = kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s: its blobs would decode to more than %llu GiB", path,
                          (unsigned long long)(BUNDLE_MAX_RAW >> 30));
            break;
        }
    }
    for (uint32_t i = 0; i < b->nblob && !rc; i++) {   /* which blobs are some later blob's base */
        if (!b->blobs[i].base[0]) continue;
        for (uint32_t j = 0; j < i; j++)
            if (memcmp(b->blobs[j].id, b->blobs[i].base, 64) == 0) { is_base[j] = 1; break; }
    }
    for (uint32_t i = 0; i < b->nblob && !rc; i++) {
        bundle_blob *x = &b->blobs[i];
        if (idset_find(&ix, x->id, &b->blobs[0].id, sizeof *x, (long)i) >= 0) {
            rc = kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s is corrupt: blob %s appears twice", path, x->id);
            break;
        }
        const void *prefix = NULL;
        size_t plen = 0;
        if (x->base[0]) {
            long j = idset_find(&ix, x->base, &b->blobs[0].id, sizeof *x, -1);
            if (j < 0 || (uint32_t)j >= i) {
                rc = kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s is corrupt: blob %s needs base blob %s, "
                              "which does not come before it", path, x->id, x->base);
                break;
            }
            if (x->depth != b->blobs[j].depth + 1) {
                rc = kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s is corrupt: blob %s has depth %u on a base "
                              "of depth %u", path, x->id, x->depth, b->blobs[j].depth);
                break;
            }
            prefix = content[j];
            plen = b->blobs[j].raw;
        } else if (x->depth != 0) {
            rc = kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s is corrupt: full blob %s has depth %u", path,
                          x->id, x->depth);
            break;
        }
        if (x->depth > (uint32_t)kwb_cache_max_depth()) {
            rc = kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s: blob %s has a chain deeper than %d", path,
                          x->id, kwb_cache_max_depth());
            break;
        }
        if ((rc = kwb_blob_decode(d, x->id, x->frame, x->flen, prefix, plen, x->raw, &content[i]))) {
            char why[1024];
            snprintf(why, sizeof why, "%s", kwb_last_error());
            rc = kwb_fail(rc, "bundle %s is corrupt: %s", path, why);
        }
        if (!is_base[i]) { free(content[i]); content[i] = NULL; }   /* checked, and no delta needs it */
    }
    if (content)
        for (uint32_t i = 0; i < b->nblob; i++) free(content[i]);
    free(content);
    free(is_base);
    free(ix.slot);
    ZSTD_freeDCtx(d);
    return rc;
}

static const char *describe(int type, const unsigned char *name, size_t nlen, char *buf, size_t cap) {
    if (type == 'M') snprintf(buf, cap, "the manifest");
    else if (type == 'R') snprintf(buf, cap, "a %.*s record", (int)(nlen > 32 ? 32 : nlen), name);
    else if (type == 'B') snprintf(buf, cap, "blob %.*s", (int)(nlen > 64 ? 64 : nlen), name);
    else if (type == 'E') snprintf(buf, cap, "the end marker");
    else snprintf(buf, cap, "an entry of unknown type %d", type);
    return buf;
}

static int parse(const char *path, kwb_cache_bundle *b) {
    const unsigned char *p = b->file;
    size_t len = b->len;
    if (len < 16) {
        if (len == 0 || memcmp(p, MAGIC, len < 8 ? len : 8) != 0)
            return kwb_fail(KWB_CACHE_ECORRUPT, "%s is not a kwb bundle (no KWBUNDLE magic)", path);
        return kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s is truncated: %zu bytes, shorter than its header",
                        path, len);
    }
    if (memcmp(p, MAGIC, 8) != 0)
        return kwb_fail(KWB_CACHE_ECORRUPT, "%s is not a kwb bundle (no KWBUNDLE magic)", path);
    uint32_t version = get32(p + 8);
    if (version != FORMAT_VERSION)
        return kwb_fail(KWB_CACHE_EVERSION, "bundle %s has format version %u; this kwb reads version %d",
                        path, version, FORMAT_VERSION);
    /* count entries first, checking framing and hashes */
    size_t pos = 16;
    uint32_t nrec = 0, nblob = 0, n = 0;
    int ended = 0;
    while (pos < len) {
        char what[128];
        if (len - pos < HDR)
            return kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s is truncated: entry %u is cut short at byte %zu",
                            path, n + 1, pos);
        int type = p[pos];
        uint32_t nlen = get32(p + pos + 4);
        uint64_t plen = get64(p + pos + 8);
        if (nlen > MAX_NAME || (type != 'M' && type != 'R' && type != 'B' && type != 'E'))
            return kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s is corrupt: entry %u at byte %zu has a bad "
                            "header", path, n + 1, pos);
        if (plen > len || (uint64_t)HDR + nlen + plen + HASH > len - pos) {
            if (len - pos - HDR < nlen)
                return kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s is truncated: entry %u runs past the end "
                                "of the file", path, n + 1);
            return kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s is truncated: entry %u (%s) runs past the end "
                            "of the file", path, n + 1, describe(type, p + pos + HDR, nlen, what, sizeof what));
        }
        size_t body = HDR + nlen + (size_t)plen;
        unsigned char md[HASH];
        unsigned int mdlen = 0;
        if (!EVP_Digest(p + pos, body, md, &mdlen, EVP_sha256(), NULL))
            return kwb_fail(KWB_EIO, "SHA-256 failed in libcrypto");
        if (memcmp(md, p + pos + body, HASH) != 0)
            return kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s is corrupt: entry %u (%s) fails its SHA-256 "
                            "check", path, n + 1, describe(type, p + pos + HDR, nlen, what, sizeof what));
        if (type == 'E') {
            if (plen != 8 + HASH || get64(p + pos + HDR + nlen) != n)
                return kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s is corrupt: the end marker does not match "
                                "the %u entries before it", path, n);
            if (!EVP_Digest(p, pos, md, &mdlen, EVP_sha256(), NULL))
                return kwb_fail(KWB_EIO, "SHA-256 failed in libcrypto");
            if (memcmp(md, p + pos + HDR + nlen + 8, HASH) != 0)
                return kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s is corrupt: the file's SHA-256 does not "
                                "match its end marker", path);
            if (pos + body + HASH != len)
                return kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s is corrupt: %zu bytes follow the end marker",
                                path, len - (pos + body + HASH));
            ended = 1;
            break;
        }
        if ((n == 0) != (type == 'M'))
            return kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s is corrupt: the manifest must be its first "
                            "entry, and only that", path);
        if (type == 'B' && (!is_hex_id((const char *)p + pos + HDR, nlen) || plen < BLOB_HDR))
            return kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s is corrupt: entry %u is a malformed blob",
                            path, n + 1);
        nrec += type == 'R';
        nblob += type == 'B';
        n++;
        pos += body + HASH;
    }
    if (!ended)
        return kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s is truncated: no end marker after %u entries",
                        path, n);
    /* every hash checked: take the entries apart */
    b->tables = calloc(nrec + 1, sizeof *b->tables);
    b->records = calloc(nrec + 1, sizeof *b->records);
    b->blobs = calloc(nblob + 1, sizeof *b->blobs);
    if (!b->tables || !b->records || !b->blobs) return kwb_fail(KWB_ENOMEM, "out of memory");
    for (pos = 16; p[pos] != 'E';) {
        int type = p[pos];
        uint32_t nlen = get32(p + pos + 4);
        size_t plen = (size_t)get64(p + pos + 8);
        const unsigned char *name = p + pos + HDR, *pay = name + nlen;
        if (type == 'M') {
            if (!(b->manifest = dup_n(pay, plen))) return kwb_fail(KWB_ENOMEM, "out of memory");
        } else if (type == 'R') {
            b->tables[b->nrec] = dup_n(name, nlen);
            b->records[b->nrec] = dup_n(pay, plen);
            if (!b->tables[b->nrec] || !b->records[b->nrec]) {
                free(b->tables[b->nrec]);
                free(b->records[b->nrec]);
                return kwb_fail(KWB_ENOMEM, "out of memory");
            }
            b->nrec++;
        } else {
            bundle_blob *x = &b->blobs[b->nblob++];
            memcpy(x->id, name, 64);
            int has_base = 0;
            for (int i = 0; i < 64; i++) has_base |= pay[i] != 0;
            if (has_base && !is_hex_id((const char *)pay, 64))
                return kwb_fail(KWB_CACHE_ECORRUPT, "bundle %s is corrupt: blob %s names a malformed base",
                                path, x->id);
            if (has_base) memcpy(x->base, pay, 64);
            x->depth = get32(pay + 64);
            x->raw = get64(pay + 72);
            x->frame = pay + BLOB_HDR;
            x->flen = plen - BLOB_HDR;
        }
        pos += HDR + nlen + plen + HASH;
    }
    return verify_blobs(path, b);
}

int kwb_cache_bundle_open(const char *path, kwb_cache_bundle **out) {
    *out = NULL;
    struct stat st;   /* a regular file of sane size: no device, FIFO or endless stream */
    if (stat(path, &st) != 0) return kwb_fail(KWB_EIO, "cannot read the bundle %s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return kwb_fail(KWB_EIO, "the bundle %s is not a regular file", path);
    if ((uint64_t)st.st_size > BUNDLE_MAX_FILE)
        return kwb_fail(KWB_EIO, "the bundle %s is %llu bytes, over the %llu GiB a bundle may be", path,
                        (unsigned long long)st.st_size, (unsigned long long)(BUNDLE_MAX_FILE >> 30));
    kwb_cache_bundle *b = calloc(1, sizeof *b);
    if (!b) return kwb_fail(KWB_ENOMEM, "out of memory");
    b->file = (unsigned char *)kwb_read_file(path, &b->len);
    if (!b->file) {
        int e = errno;
        free(b);
        return kwb_fail(KWB_EIO, "cannot read the bundle %s: %s", path, strerror(e));
    }
    int rc = parse(path, b);
    if (rc) {
        kwb_cache_bundle_close(b);
        return rc;
    }
    *out = b;
    return 0;
}

const char *kwb_cache_bundle_manifest(const kwb_cache_bundle *b) { return b->manifest; }
uint32_t kwb_cache_bundle_nrecords(const kwb_cache_bundle *b) { return b->nrec; }
uint32_t kwb_cache_bundle_nblobs(const kwb_cache_bundle *b) { return b->nblob; }

const char *kwb_cache_bundle_blob(const kwb_cache_bundle *b, uint32_t i) {
    return i < b->nblob ? b->blobs[i].id : NULL;
}

int kwb_cache_bundle_record(const kwb_cache_bundle *b, uint32_t i, const char **table, const char **json) {
    if (i >= b->nrec) return kwb_fail(KWB_EINVAL, "bundle record %u out of range (%u records)", i, b->nrec);
    *table = b->tables[i];
    *json = b->records[i];
    return 0;
}

int kwb_cache_import_blobs(kwb_cache *c, const kwb_cache_bundle *b, uint32_t *added) {
    if (added) *added = 0;
    for (uint32_t i = 0; i < b->nblob; i++) {   /* bases first, so each base is in the cache */
        const bundle_blob *x = &b->blobs[i];
        int created = 0;
        int rc = kwb_cache_blob_put_frame(c, x->id, x->base, x->raw, x->frame, x->flen, &created);
        if (rc) {
            char why[1024];
            snprintf(why, sizeof why, "%s", kwb_last_error());
            return kwb_fail(rc, "cannot import blob %s: %s", x->id, why);
        }
        if (added) *added += (uint32_t)created;
    }
    return 0;
}
