/* cache.h: the candidate cache's private side, shared by cache.c,
 * cache_bundle.c and lua_cache.c */
#ifndef KWB_CACHE_H
#define KWB_CACHE_H
#include <sqlite3.h>
#include <zstd.h>

#include "kwb.h"

sqlite3 *kwb_cache_db(kwb_cache *c);
/* A prepared statement for sql from the handle's statement cache, reset and
 * unbound; NULL (with kwb_last_error set) if it does not prepare. sql must
 * hold exactly one statement. */
sqlite3_stmt *kwb_cache_stmt(kwb_cache *c, const char *sql);
/* Record an SQLite error as "cache PATH: what: sqlite message" and return
 * KWB_CACHE_EDB. */
int kwb_cache_dberr(kwb_cache *c, const char *what);
/* Decompress one frame, with prefix (may be NULL) as the delta base; checks
 * the size against raw_size and the content against id. */
int kwb_blob_decode(ZSTD_DCtx *d, const char *id, const void *frame, size_t flen,
                    const void *prefix, size_t plen, uint64_t raw_size, char **out);
/* Blob id's row and a stored copy of its frame that decodes to its content
 * (the first copy, else the mirror) in a fresh buffer; KWB_CACHE_ECORRUPT
 * naming id if neither does. */
int kwb_cache_blob_frame(kwb_cache *c, const char *id, kwb_blob_info *bi, void **frame, size_t *flen);
/* Give blob id a mirror (a copy of its checked frame) if it has none, because
 * a blob is about to be stored against it; KWB_CACHE_ECORRUPT if its frame
 * does not check. Call inside a write transaction. */
int kwb_cache_mirror_base(kwb_cache *c, const char *id);
/* Store blob id from a checked frame (a bundle's): a delta against base (or
 * whole if base is NULL or ""), at the depth the cache's copy of base gives
 * it, giving base its mirror; stored whole instead if that depth would pass
 * the bound. *created is 1 if the blob was new. */
int kwb_cache_blob_put_frame(kwb_cache *c, const char *id, const char *base, uint64_t raw,
                             const void *frame, size_t flen, int *created);

#endif
